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
