//! The worker's setup: validates the job, opens the engine and preallocates everything the
//! loop uses, so that the loop itself allocates nothing.

use std::time::Instant;

use super::super::slots::Slots;
use super::{Clock, LoopState, Worker};
use crate::engine::{self, EngineSetup, IoEngine};
use crate::stats::WorkerStats;
use crate::workload::worker::{
    BsPicker, EngineFactory, ExitReason, OffsetGen, Pacer, ReportTx, Rng, WorkerError,
    WorkerOptions, WorkerPlan,
};

/// Timer slack of 1 µs for this thread (the default is 50 µs), so that a paced worker's
/// sleeps end when asked. Best effort: a failure only costs precision.
fn tight_timer_slack() {
    let _ = nix::sys::prctl::set_timerslack(1);
}

/// How much higher than the process's own nice value (normally 0) every I/O worker thread's
/// is, at most 19. The daemon's other threads (the HTTP server and its renders on the tokio
/// runtime, the schedulers, the health poller, checkpoint saves) keep the process's own.
///
/// Why (issue 37, figures in docs/benchmarks.md): a burn-in host runs its workers flat out, one
/// runnable thread per worker, and the kernel shares a CPU among all of them and a thread that
/// wakes for a scrape in proportion to their weights. At equal priority, 32 targets on 2 cores
/// made a render that computes for about 1 ms wait 29 ms (median) for a CPU. Nice +10 (weight
/// 110 against 1024) was enough at 8 targets (p99 2.3 ms) but not at 32: sixteen workers per
/// CPU still weigh 1760, and the scrape p99 was 5.8 ms (14 ms in another run), its threads
/// waiting 1.6 ms per scrape. At nice 19 (weight 15) sixteen workers weigh 240, a waking daemon
/// thread gets a CPU at once, and `scripts/bench-scrape` (`NVSOAK_BENCH_WORKER_PRIORITY`
/// compares) measured p99 2.0 ms at 8 targets and 4.0 ms at 32, with the daemon's threads
/// waiting 0.27 ms per scrape; `SCHED_IDLE` measured the same (3.8 and 4.2 ms). The workers
/// lose nothing measurable: they have the CPUs to themselves whenever the daemon's threads
/// (which use little CPU) do not run (unscraped IOPS at 32 targets: 931K at nice 10, 951K at
/// nice 19, in one run). A nice value, not `SCHED_IDLE`: the soak keeps a weight of its own
/// against other work on the host instead of running only when nothing else wants a CPU.
pub const WORKER_NICE: i32 = 19;

/// Raises this thread's nice value by [`WORKER_NICE`] (Linux applies `setpriority` with a
/// thread id to that thread alone; raising it needs no privilege). Best effort: a failure only
/// means the daemon's threads compete with the workers on equal terms, and is logged once.
fn lower_priority() {
    static WARNED: std::sync::Once = std::sync::Once::new();
    match bench_priority() {
        BenchPriority::Nice(n) => renice(n, &WARNED),
        BenchPriority::Default => renice(WORKER_NICE, &WARNED),
    }
}

/// The benchmark knob `NVSOAK_BENCH_WORKER_PRIORITY` (`nice:N` for N in 0..=19; read once;
/// anything else means [`WORKER_NICE`]), set in the environment of `scripts/bench-scrape` to
/// compare scrapes under each. (`SCHED_IDLE`, measured once in 37a00da, needs an `unsafe` call
/// outside the places ARCHITECTURE.md allows and measured no better than nice 19.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BenchPriority {
    Default,
    Nice(i32),
}

fn bench_priority() -> BenchPriority {
    static KNOB: std::sync::OnceLock<BenchPriority> = std::sync::OnceLock::new();
    *KNOB.get_or_init(|| {
        parse_bench_priority(
            std::env::var("NVSOAK_BENCH_WORKER_PRIORITY")
                .ok()
                .as_deref(),
        )
    })
}

fn parse_bench_priority(v: Option<&str>) -> BenchPriority {
    match v.map(str::trim) {
        Some(n) => n
            .strip_prefix("nice:")
            .and_then(|n| n.parse::<i32>().ok())
            .filter(|n| (0..=19).contains(n))
            .map_or(BenchPriority::Default, BenchPriority::Nice),
        None => BenchPriority::Default,
    }
}

fn renice(by: i32, warned: &std::sync::Once) {
    let tid = nix::unistd::gettid().as_raw();
    let Some(pid) = rustix::process::Pid::from_raw(tid) else {
        return;
    };
    let res = rustix::process::getpriority_process(Some(pid))
        .and_then(|own| rustix::process::setpriority_process(Some(pid), (own + by).min(19)));
    if let Err(e) = res {
        warned.call_once(|| {
            tracing::warn!(error = %e, nice = by,
                "cannot lower the I/O workers' priority; scrapes may wait behind them");
        });
    }
}

fn fill_pattern(buf: &mut [u8], rng: &mut Rng) {
    for chunk in buf.chunks_mut(8) {
        let v = rng.next_u64().to_le_bytes();
        chunk.copy_from_slice(&v[..chunk.len()]);
    }
}

/// Opens the worker's engine (through the factory when one is given).
fn open_engine(
    plan: &WorkerPlan,
    factory: Option<EngineFactory>,
    setup: EngineSetup,
) -> Result<Box<dyn IoEngine>, WorkerError> {
    match factory {
        Some(f) => f(setup),
        None => engine::open(plan.engine, setup),
    }
    .map_err(|source| WorkerError::Engine {
        job: plan.job.name.clone(),
        worker: plan.index,
        source,
    })
}

impl Worker {
    /// Setup: validates the job, opens the engine and preallocates everything the loop uses.
    pub(super) fn new(
        plan: WorkerPlan,
        opts: WorkerOptions,
        tx: ReportTx,
    ) -> Result<Self, WorkerError> {
        let job = &plan.job;
        if job.iodepth == 0 || job.iodepth > 4096 {
            return Err(WorkerError::BadJob {
                job: job.name.clone(),
                reason: format!("iodepth {} is outside 1..=4096", job.iodepth),
            });
        }
        let picker = BsPicker::new(&job.bs.entries);
        let mut offsets = OffsetGen::new(
            job,
            picker.sizes(),
            plan.region_start,
            plan.region_len,
            plan.index,
        )
        .map_err(|bs| WorkerError::RegionTooSmall {
            job: job.name.clone(),
            worker: plan.index,
            start: plan.region_start,
            len: plan.region_len,
            bs,
        })?;
        offsets.start_at(opts.seq_start);
        if let Some(place) = opts.walk {
            let sizes = job.bs.entries.iter().map(|e| e.0 as u64);
            if sizes.clone().max() != Some(place.block)
                || sizes.clone().any(|s| s == 0 || place.block % s != 0)
            {
                return Err(WorkerError::BadJob {
                    job: job.name.clone(),
                    reason: "a verified walk's block must be the job's largest size, and every \
                             other size must divide it"
                        .into(),
                });
            }
            offsets.walk(place, &job.bs.entries);
        }
        let depth = job.iodepth as usize;
        // With every slot busy, wait for this many completions per enter rather than one (fio's
        // iodepth_batch_complete_min). Fewer, fuller batches cut the kernel work per I/O by
        // 5-10% at QD 32 (measured with scripts/bench-vs-fio). The price: the queue breathes
        // between `depth - reap_min` and `depth` (7/8 full on average, fuller above QD 32), and
        // the earliest completion of a batch is stamped up to `reap_min - 1` completions late.
        // A paced worker waits for one: the next I/O starts as soon as a slot frees up.
        let reap_min = if plan.rate_iops.is_some_and(|r| r > 0.0) {
            1
        } else {
            (depth / 4).clamp(1, 8)
        };
        let mixed = job.read_pct > 0 && job.read_pct < 100;
        let nbufs = if mixed { depth * 2 } else { depth };
        let max_bs = picker.sizes().iter().copied().max().unwrap_or(4096);
        let setup = EngineSetup {
            fd: plan.fd.clone(),
            iodepth: job.iodepth,
            buffers: nbufs as u32,
            max_bs,
            passthru: opts.passthru,
        };
        let mut engine = open_engine(&plan, opts.engine_factory, setup)?;
        let engine_name = engine.name();

        // Write buffers get seeded, non-trivial data once; reads use their own half when mixed.
        if job.read_pct < 100 {
            let mut prng = Rng::new(plan.seed ^ 0x5eed_da7a);
            for b in 0..depth {
                fill_pattern(engine.buffer(b as u16), &mut prng);
            }
        }
        let mut stats = WorkerStats::new();
        stats.engine = engine_name;
        let align = offsets.align();
        // Lowered only now, for the loop: the set-up (the ring, its registered buffers, the
        // pattern) runs at the daemon's priority, so that a worker starting while hundreds of
        // others already run gets a CPU at once instead of waiting among them (issue 35). The
        // io-wq threads the kernel makes for the ring later inherit the lowered value.
        lower_priority();
        let clock = Clock(Instant::now());
        let pacer = plan
            .rate_iops
            .filter(|r| *r > 0.0)
            .map(|r| Pacer::new(r, depth as u64, clock.ns()));
        if pacer.is_some() {
            tight_timer_slack();
        }
        let interval_ns = plan.report_interval.as_nanos().max(1_000_000) as u64;
        Ok(Worker {
            index: plan.index,
            caps: engine.caps(),
            engine,
            engine_name,
            hook: opts.hook,
            recycle: opts.recycle,
            live: opts.live,
            tx,
            stats,
            rng: Rng::new(plan.seed),
            picker,
            offsets,
            slots: Slots::new(depth),
            out: Vec::with_capacity(nbufs * 2 + 8),
            clock,
            depth,
            mixed,
            read_pct: job.read_pct as u64,
            reap_min,
            limit: plan.limit_bytes.map(|l| l.div_ceil(align) * align),
            interval_ns,
            st: LoopState::new(pacer, interval_ns),
            stop: plan.stop,
            _fd: plan.fd,
        })
    }
}

impl LoopState {
    pub(super) fn new(pacer: Option<Pacer>, interval_ns: u64) -> Self {
        LoopState {
            pending: None,
            submitted_bytes: 0,
            pacer,
            next_report: interval_ns,
            last_report: 0,
            spare: None,
            outstanding: 0,
            backoff: 0,
            backoff_until: 0,
            stopping: false,
            receiver_gone: false,
            reason: ExitReason::Stopped,
            fatal: None,
            drain_deadline: None,
            abandoned: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_priority_knob_takes_nice_values_and_nothing_else() {
        assert_eq!(parse_bench_priority(None), BenchPriority::Default);
        assert_eq!(
            parse_bench_priority(Some("nice:10")),
            BenchPriority::Nice(10)
        );
        assert_eq!(
            parse_bench_priority(Some(" nice:0 ")),
            BenchPriority::Nice(0)
        );
        for bad in ["nice:20", "nice:-5", "nice:", "10", "idle", ""] {
            assert_eq!(
                parse_bench_priority(Some(bad)),
                BenchPriority::Default,
                "{bad}"
            );
        }
    }
}
