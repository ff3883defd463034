//! The worker hot loop: one plain OS thread per worker, owning its engine, its random
//! generator and its [`WorkerStats`]. It keeps `iodepth` I/Os in flight, picks op, block size
//! and offset per I/O, paces to a rate when asked, and sends a [`WorkerReport`] every
//! `report_interval`.
//!
//! Architecture Invariant: between setup and the final drain the loop takes no lock, does not
//! allocate per I/O (only the interval report swaps histograms), and never touches tokio or the
//! Prometheus registry. Everything the loop needs is precomputed in setup.
//!
//! Offsets: random access uses blocks of the job's smallest block size (at least 512 bytes);
//! sequential access advances by each I/O's length, so its offsets are aligned to the greatest
//! common divisor of the block sizes. Every I/O satisfies
//! `region_start <= offset && offset + len <= region_start + region_len`.

use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, Sender, SyncSender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use thiserror::Error;

use crate::engine::{self, Caps, Completion, EngineError, EngineSetup, IoEngine, IoReq};
use crate::model::spec::{EngineChoice, JobSpec, Op};
use crate::stats::{WorkerReport, WorkerStats};

/// Everything one worker needs; built by the scheduler.
pub struct WorkerPlan {
    /// Worker index within the job (`0..job.workers`).
    pub index: usize,
    pub job: JobSpec,
    /// Opened by the scheduler (O_DIRECT when `target.direct`).
    pub fd: Arc<OwnedFd>,
    /// The job's whole region (all workers), in bytes.
    pub region_start: u64,
    pub region_len: u64,
    pub engine: EngineChoice,
    /// This worker's share of the job's rate, in IOPS.
    pub rate_iops: Option<f64>,
    /// Stop after this many bytes (preconditioning passes); `None`: until `stop`. Rounded up to
    /// the job's alignment. For a precondition pass use [`stripe_bounds`]`(..).1 * passes`.
    pub limit_bytes: Option<u64>,
    pub seed: u64,
    pub report_interval: Duration,
    pub stop: Arc<AtomicBool>,
}

#[derive(Debug)]
pub struct WorkerExit {
    pub engine: &'static str,
    pub reason: ExitReason,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ExitReason {
    /// `stop` was set, or the report receiver went away.
    Stopped,
    /// `limit_bytes` were transferred.
    LimitReached,
    /// The engine failed while running (after draining what it could).
    Fatal(String),
}

#[derive(Debug, Error)]
pub enum WorkerError {
    #[error("job {job}, worker {worker}: setting up the I/O engine failed: {source}")]
    Engine {
        job: String,
        worker: usize,
        #[source]
        source: EngineError,
    },
    #[error(
        "job {job}, worker {worker}: the region ({len} bytes at offset {start}) cannot hold a {bs}-byte block for this worker; enlarge the target or its region, or use fewer workers"
    )]
    RegionTooSmall {
        job: String,
        worker: usize,
        start: u64,
        len: u64,
        bs: u32,
    },
    #[error("job {job}: {reason}")]
    BadJob { job: String, reason: String },
}

/// Hook for data verification: stamps write buffers and checks read buffers. Runs on the hot
/// path, so implementations must not lock or allocate. The default methods do nothing.
///
/// With a hook installed the worker never has two overlapping I/Os of which one is a write in
/// flight at once (an I/O that would overlap waits until the earlier one completed), so a
/// hook can rely on completion order for any one block. Workers of the same job do not
/// coordinate with each other.
pub trait BlockHook: Send {
    /// Called with the exact bytes about to be written at `offset`.
    fn before_write(&mut self, _buf: &mut [u8], _offset: u64) {}
    /// Called with the bytes a successful read returned from `offset`.
    fn after_read(&mut self, _buf: &[u8], _offset: u64) {}
    /// Called when a write of `len` bytes at `offset` (stamped by `before_write`) completed:
    /// `ok` false if it failed.
    fn after_write(&mut self, _offset: u64, _len: usize, _ok: bool) {}
    /// Called when a read of `len` bytes at `offset` failed with `errno`.
    fn read_failed(&mut self, _offset: u64, _len: usize, _errno: i32) {}
}

/// Builds the engine inside the worker thread (io_uring rings must be created by their
/// submitter thread).
pub type EngineFactory =
    Box<dyn FnOnce(EngineSetup) -> Result<Box<dyn IoEngine>, EngineError> + Send>;

/// Reports a worker with `recycle` keeps queued at most before it coalesces intervals.
pub const MAX_OUTSTANDING: usize = 2;

/// Where a worker sends its reports. A bounded channel (`sync_channel`, sized for every
/// worker's [`MAX_OUTSTANDING`] reports plus its final one) never allocates per send, so with
/// recycling the steady state allocates nothing at any interval; an unbounded channel
/// allocates a block every few dozen reports.
#[derive(Clone)]
pub enum ReportTx {
    Unbounded(Sender<WorkerReport>),
    Bounded(SyncSender<WorkerReport>),
}

impl ReportTx {
    fn send(&self, r: WorkerReport) -> Result<(), ()> {
        match self {
            ReportTx::Unbounded(t) => t.send(r).map_err(drop),
            ReportTx::Bounded(t) => t.send(r).map_err(drop),
        }
    }
}

impl From<Sender<WorkerReport>> for ReportTx {
    fn from(t: Sender<WorkerReport>) -> Self {
        ReportTx::Unbounded(t)
    }
}

impl From<SyncSender<WorkerReport>> for ReportTx {
    fn from(t: SyncSender<WorkerReport>) -> Self {
        ReportTx::Bounded(t)
    }
}

/// Capacity of a bounded report channel for `workers` workers with recycling: each has at
/// most [`MAX_OUTSTANDING`] reports queued, plus its final one.
pub fn report_capacity(workers: usize) -> usize {
    workers.max(1) * (MAX_OUTSTANDING + 1)
}

/// Optional extras for [`spawn_with`].
#[derive(Default)]
pub struct WorkerOptions {
    /// Replaces `engine::open(plan.engine, ..)`, e.g. with a recording wrapper in tests.
    pub engine_factory: Option<EngineFactory>,
    pub hook: Option<Box<dyn BlockHook>>,
    /// Histogram pairs handed back by the consumer of reports, reused instead of allocating.
    pub recycle: Option<Receiver<(Histogram<u64>, Histogram<u64>)>>,
    /// The target's live totals, bumped once per reaped batch (for the accounting check).
    pub live: Option<crate::stats::live::LiveGuard>,
    /// Sequential access: bytes into this worker's stripe where its walk starts (a resumed
    /// precondition); see [`OffsetGen::start_at`]. 0: the stripe's start.
    pub seq_start: u64,
    /// The passthrough engines' generic device of `plan.fd`, shared by every worker on that
    /// descriptor and resolved once (`EngineSetup::passthru`); `None`: the engine resolves it.
    pub passthru: Option<engine::passthru::SharedNode>,
}

/// Spawn the worker thread. It sends a [`WorkerReport`] every `report_interval` and a final
/// one with `done = true` after draining.
pub fn spawn(
    plan: WorkerPlan,
    tx: impl Into<ReportTx>,
) -> std::io::Result<JoinHandle<Result<WorkerExit, WorkerError>>> {
    spawn_with(plan, WorkerOptions::default(), tx)
}

/// [`spawn`] with an engine built by `factory` (tests wrap the real engine to record I/Os).
pub fn spawn_with_engine(
    plan: WorkerPlan,
    factory: EngineFactory,
    tx: impl Into<ReportTx>,
) -> std::io::Result<JoinHandle<Result<WorkerExit, WorkerError>>> {
    spawn_with(
        plan,
        WorkerOptions {
            engine_factory: Some(factory),
            ..Default::default()
        },
        tx,
    )
}

pub fn spawn_with(
    plan: WorkerPlan,
    opts: WorkerOptions,
    tx: impl Into<ReportTx>,
) -> std::io::Result<JoinHandle<Result<WorkerExit, WorkerError>>> {
    let tx = tx.into();
    std::thread::Builder::new()
        .name(format!("nvsoak-w{}", plan.index))
        .spawn(move || run(plan, opts, tx))
}

// ---------------------------------------------------------------------------------------------
// The loop.

/// Longest single wait, so that `stop` is seen within a few milliseconds.
const MAX_WAIT_NS: u64 = 5_000_000;
/// How long a stopping worker waits for in-flight I/O before abandoning it. The daemon has to
/// exit within 5 s of SIGTERM.
const DRAIN_LIMIT_NS: u64 = 3_000_000_000;
const BACKOFF_MIN_NS: u64 = 1_000_000;
const BACKOFF_MAX_NS: u64 = 100_000_000;

struct Clock(Instant);
impl Clock {
    #[inline]
    fn ns(&self) -> u64 {
        self.0.elapsed().as_nanos() as u64
    }
    /// The instant `ns` nanoseconds after the clock started.
    #[inline]
    fn at(&self, ns: u64) -> Instant {
        self.0 + Duration::from_nanos(ns)
    }
}

fn sleep_ns(ns: u64) {
    if ns > 0 {
        std::thread::sleep(Duration::from_nanos(ns));
    }
}

/// A paced worker with nothing in flight sleeps only when its next I/O is due at least this
/// far ahead; closer deadlines are spun for. A sleep costs a syscall and a wake-up and overshoots by the
/// timer slack (50 µs by default, 1 µs for paced workers, see [`tight_timer_slack`]) plus the
/// wake-up latency, so sleeping per I/O capped psync near 20k IOPS whatever the target.
const SLEEP_MIN_NS: u64 = 200_000;
/// Spinning for a deadline further away than this yields the CPU between clock reads.
const YIELD_MIN_NS: u64 = 20_000;

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

/// The in-flight table: per-slot state, indexed by `user_data`. Every vector is allocated once
/// for the queue depth; the free list never holds more than `depth` slots, so nothing grows.
struct Slots {
    /// Free slots; a batch takes them from the end.
    free: Vec<u16>,
    /// Submission time (clock ns).
    t: Vec<u64>,
    op: Vec<Op>,
    off: Vec<u64>,
    buf: Vec<u16>,
    /// Submitted length per slot, 0 while the slot is free.
    len: Vec<u32>,
    inflight: usize,
}

impl Slots {
    fn new(depth: usize) -> Self {
        Slots {
            free: (0..depth as u16).rev().collect(),
            t: vec![0; depth],
            op: vec![Op::Read; depth],
            off: vec![0; depth],
            buf: vec![0; depth],
            len: vec![0; depth],
            inflight: 0,
        }
    }

    #[inline]
    fn free_count(&self) -> usize {
        self.free.len()
    }

    /// The free slot a batch's `k`-th I/O takes. Slots leave the free list only in
    /// [`Slots::take`], once the batch is queued.
    #[inline]
    fn nth_free(&self, k: usize) -> u16 {
        self.free[self.free.len() - 1 - k]
    }

    #[inline]
    fn fill(&mut self, slot: u16, op: Op, offset: u64, buf: u16, len: u32) {
        let s = slot as usize;
        self.op[s] = op;
        self.off[s] = offset;
        self.buf[s] = buf;
        self.len[s] = len;
    }

    #[inline]
    fn stamp(&mut self, slot: u16, t: u64) {
        self.t[slot as usize] = t;
    }

    /// Marks the `n` slots handed out by `nth_free(0..n)` in flight, stamping each with the
    /// submission time `t` when given (one clock read for a whole batch).
    #[inline]
    fn take(&mut self, n: usize, t: Option<u64>) {
        let base = self.free.len();
        if let Some(t) = t {
            for &slot in &self.free[base - n..base] {
                self.t[slot as usize] = t;
            }
        }
        self.free.truncate(base - n);
        self.inflight += n;
    }

    /// Frees slot `s` on its completion.
    #[inline]
    fn release(&mut self, s: usize) {
        self.len[s] = 0;
        self.free.push(s as u16);
        self.inflight -= 1;
    }

    /// Whether an I/O would overlap one in flight where either of them writes. Linear in the
    /// queue depth; only run when a verification hook is installed.
    #[inline]
    fn overlaps_inflight(&self, op: Op, offset: u64, len: u32) -> bool {
        let end = offset + len as u64;
        (0..self.len.len()).any(|s| {
            self.len[s] > 0
                && (op == Op::Write || self.op[s] == Op::Write)
                && self.off[s] < end
                && offset < self.off[s] + self.len[s] as u64
        })
    }
}

/// What changes from one pass of the loop to the next, apart from the slots and the stats.
struct LoopState {
    /// An I/O that would have overlapped one in flight (only checked with a hook).
    pending: Option<(Op, u64, u32)>,
    submitted_bytes: u64,
    pacer: Option<Pacer>,
    next_report: u64,
    last_report: u64,
    spare: Option<(Histogram<u64>, Histogram<u64>)>,
    /// Reports sent whose histograms have not come back through `recycle` yet.
    outstanding: usize,
    backoff: u64,
    backoff_until: u64,
    stopping: bool,
    receiver_gone: bool,
    reason: ExitReason,
    fatal: Option<String>,
    drain_deadline: Option<u64>,
    abandoned: bool,
}

/// One worker's loop: what setup precomputed, the engine, and the loop's state.
struct Worker {
    index: usize,
    stop: Arc<AtomicBool>,
    engine: Box<dyn IoEngine>,
    /// The engine's file: it stays open while the engine runs (psync uses the raw fd) and is
    /// closed after the engine is dropped (fields drop in declaration order).
    _fd: Arc<OwnedFd>,
    caps: Caps,
    engine_name: &'static str,
    hook: Option<Box<dyn BlockHook>>,
    recycle: Option<Receiver<(Histogram<u64>, Histogram<u64>)>>,
    live: Option<crate::stats::live::LiveGuard>,
    tx: ReportTx,
    stats: WorkerStats,
    rng: Rng,
    picker: BsPicker,
    offsets: OffsetGen,
    slots: Slots,
    out: Vec<Completion>,
    clock: Clock,
    depth: usize,
    mixed: bool,
    read_pct: u64,
    /// Completions to wait for when every slot is busy.
    reap_min: usize,
    limit: Option<u64>,
    interval_ns: u64,
    st: LoopState,
}

fn run(
    plan: WorkerPlan,
    opts: WorkerOptions,
    tx: impl Into<ReportTx>,
) -> Result<WorkerExit, WorkerError> {
    let mut w = Worker::new(plan, opts, tx.into())?;
    loop {
        let now = w.clock.ns();
        if now >= w.st.next_report && !w.st.receiver_gone {
            w.report(now);
        }
        if !w.keep_going(now) {
            break;
        }
        let blocked = w.submit(now);
        if let Err(e) = w.wait_or_reap(now, blocked) {
            // The engine itself failed; what is still in flight cannot be reaped.
            w.st.fatal = Some(format!("{e}"));
            break;
        }
        if !w.out.is_empty() {
            w.complete();
        }
    }
    Ok(w.finish())
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
    fn new(plan: WorkerPlan, opts: WorkerOptions, tx: ReportTx) -> Result<Self, WorkerError> {
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

    #[inline]
    fn limit_hit(&self) -> bool {
        self.limit.is_some_and(|l| self.st.submitted_bytes >= l)
    }

    /// The periodic report.
    fn report(&mut self, now: u64) {
        let st = &mut self.st;
        if st.spare.is_none()
            && let Some(r) = self.recycle.as_ref()
            && let Ok(pair) = r.try_recv()
        {
            st.spare = Some(pair);
            st.outstanding = st.outstanding.saturating_sub(1);
        }
        // With recycling, a worker whose earlier reports the consumer has not taken yet
        // coalesces: it keeps this interval in its histograms and counters and reports
        // the longer interval later, so at most MAX_OUTSTANDING reports are queued per
        // worker (memory stays bounded however short the interval) and the steady state
        // allocates no histograms.
        if self.recycle.is_none() || st.spare.is_some() || st.outstanding < MAX_OUTSTANDING {
            let rep = self.stats.take_report(
                self.index,
                Duration::from_nanos(now - st.last_report),
                self.clock.at(now),
                st.spare.take(),
                false,
            );
            if self.tx.send(rep).is_err() {
                st.receiver_gone = true;
                st.stopping = true;
            }
            st.outstanding += 1;
            st.last_report = now;
        }
        st.next_report = now + self.interval_ns;
    }

    /// The stop, limit and drain checks. False when the loop ends: stopping with nothing in
    /// flight, or the drain took too long (then `fatal` says so and the I/Os are abandoned).
    fn keep_going(&mut self, now: u64) -> bool {
        let limit_hit = self.limit_hit();
        let st = &mut self.st;
        if !st.stopping && self.stop.load(Ordering::Relaxed) {
            st.stopping = true;
        }
        if limit_hit && !st.stopping {
            st.stopping = true;
            st.reason = ExitReason::LimitReached;
        }
        if st.stopping && self.slots.inflight == 0 {
            return false;
        }
        if st.stopping {
            let deadline = *st.drain_deadline.get_or_insert(now + DRAIN_LIMIT_NS);
            if now > deadline {
                st.fatal = Some(format!(
                    "{} I/Os still in flight {} s after stopping (device hung?); abandoned them",
                    self.slots.inflight,
                    DRAIN_LIMIT_NS / 1_000_000_000
                ));
                st.abandoned = true;
                return false;
            }
        }
        true
    }

    /// How many I/Os this pass may queue: free slots, one for a sync engine, what the pacer
    /// has due; none while stopping or backing off.
    #[inline]
    fn submit_budget(&mut self, now: u64) -> usize {
        if self.st.stopping || now < self.st.backoff_until {
            return 0;
        }
        let mut can = self.slots.free_count();
        if self.caps.sync {
            can = can.min(1);
        }
        if let Some(p) = self.st.pacer.as_mut() {
            can = can.min(p.due(now) as usize);
        }
        can
    }

    /// The next I/O: op, block size and offset, trimmed to what the byte limit leaves.
    #[inline]
    fn next_io(&mut self) -> (Op, u64, u32) {
        let read_pct = self.read_pct;
        let op = if read_pct >= 100 || (read_pct > 0 && self.rng.below(100) < read_pct) {
            Op::Read
        } else {
            Op::Write
        };
        let bsi = self.picker.pick(&mut self.rng);
        let (offset, mut len) = self.offsets.next(&mut self.rng, bsi, self.picker.size(bsi));
        if let Some(l) = self.limit {
            len = len.min((l - self.st.submitted_bytes).min(u32::MAX as u64) as u32);
        }
        (op, offset, len)
    }

    /// Submit: queues as many I/Os as [`Worker::submit_budget`] allows. Returns whether the next
    /// I/O is blocked behind an overlapping one in flight.
    fn submit(&mut self, now: u64) -> bool {
        let can = self.submit_budget(now);
        let mut queued = 0usize;
        let mut blocked = false;
        while queued < can {
            let (op, offset, len) = match self.st.pending.take() {
                Some(p) => p,
                None => {
                    if self.limit_hit() {
                        break;
                    }
                    self.next_io()
                }
            };
            if self.hook.is_some() && self.slots.overlaps_inflight(op, offset, len) {
                self.st.pending = Some((op, offset, len));
                blocked = true;
                break;
            }
            if !self.queue_one(queued, op, offset, len) {
                break;
            }
            queued += 1;
        }
        if queued > 0 {
            let t = (!self.caps.sync).then(|| self.clock.ns());
            self.slots.take(queued, t);
            self.stats.submitted += queued as u64;
        }
        if self.st.fatal.is_some() {
            self.st.stopping = true;
        }
        blocked
    }

    /// Fills the slot of the batch's `k`-th I/O and queues it. False, with `fatal` set, when
    /// the engine refused it.
    #[inline]
    fn queue_one(&mut self, k: usize, op: Op, offset: u64, len: u32) -> bool {
        let slot = self.slots.nth_free(k);
        let buf = if self.mixed && op == Op::Read {
            slot + self.depth as u16
        } else {
            slot
        };
        if let Some(h) = self.hook.as_mut().filter(|_| op == Op::Write) {
            h.before_write(&mut self.engine.buffer(buf)[..len as usize], offset);
        }
        self.slots.fill(slot, op, offset, buf, len);
        if self.caps.sync {
            self.slots.stamp(slot, self.clock.ns());
        }
        let req = IoReq {
            op,
            offset,
            len,
            buf,
            user_data: slot as u64,
        };
        if let Err(e) = self.engine.queue(req) {
            self.st.fatal = Some(format!("queueing I/O failed: {e}"));
            return false;
        }
        self.st.submitted_bytes += len as u64;
        if let Some(p) = self.st.pacer.as_mut() {
            p.take();
        }
        true
    }

    /// Wait-or-reap: collects completions into `out`, waiting for them with a full queue, while
    /// draining, at the byte limit or behind an overlap, and otherwise waiting out a backoff or
    /// the pacer's schedule.
    fn wait_or_reap(&mut self, now: u64, blocked: bool) -> Result<usize, EngineError> {
        let limit_hit = self.limit_hit();
        let (inflight, full) = (self.slots.inflight, self.slots.free_count() == 0);
        let (stopping, backoff_until) = (self.st.stopping, self.st.backoff_until);
        if inflight > 0 && (full || stopping || limit_hit || blocked) {
            let min = if full { self.reap_min } else { 1 };
            self.engine.reap(min, &mut self.out)
        } else if !stopping && now < backoff_until {
            let r = self
                .engine
                .commit()
                .and_then(|_| self.engine.reap(0, &mut self.out));
            if self.out.is_empty() {
                sleep_ns((backoff_until - self.clock.ns().min(backoff_until)).min(MAX_WAIT_NS));
            }
            r
        } else if let Some(p) = self.st.pacer.as_ref() {
            let w = p.wait_ns(self.clock.ns());
            self.wait_paced(w)
        } else {
            self.engine
                .commit()
                .and_then(|_| self.engine.reap(0, &mut self.out))
        }
    }

    /// A paced worker ahead of schedule (or, for a sync engine, one I/O per pass: more may be
    /// due), with its next I/O due in `w` ns.
    fn wait_paced(&mut self, w: u64) -> Result<usize, EngineError> {
        let inflight = self.slots.inflight;
        let (engine, out) = (&mut self.engine, &mut self.out);
        if !self.caps.sync && inflight > 0 {
            // The ring's wait returns at the first completion or at the deadline (kernel
            // timeouts have no slack) and runs deferred completion work, so completions
            // are stamped when they happen and new I/Os start on schedule.
            engine.reap_timeout(Duration::from_nanos(w.clamp(1_000, MAX_WAIT_NS)), out)
        } else if inflight > 0 || w == 0 {
            engine.commit().and_then(|_| engine.reap(0, out))
        } else if w >= SLEEP_MIN_NS {
            let r = engine.commit();
            sleep_ns(w.min(MAX_WAIT_NS));
            r.map(|_| 0)
        } else {
            // Nothing in flight and the deadline too close to sleep for: spin, yielding
            // while it is not imminent.
            if w >= YIELD_MIN_NS {
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
            engine.commit().map(|_| 0)
        }
    }

    /// Complete: the batch in `out`, through the stats and the hook; frees its slots, bumps
    /// the live counters once and backs off when the whole batch failed.
    fn complete(&mut self) {
        let tc = self.clock.ns();
        let (mut ok, mut err) = (0u32, 0u32);
        // This batch's successful completions: (reads, read bytes, writes, written bytes).
        let mut batch = [0u64; 4];
        for c in self.out.drain(..) {
            let s = c.user_data as usize;
            let op = self.slots.op[s];
            let (off, len) = (self.slots.off[s], self.slots.len[s]);
            // Zero bytes for a non-empty I/O means the device ended under us (a removed or
            // shrunk disk reads back EOF): count it as ENXIO, never as a completed I/O.
            let result = if c.result == 0 && len > 0 {
                -libc::ENXIO
            } else {
                c.result
            };
            if result >= 0 {
                self.stats
                    .record(op, result as u64, tc.saturating_sub(self.slots.t[s]));
                let k = if op == Op::Read { 0 } else { 2 };
                batch[k] += 1;
                batch[k + 1] += result as u64;
                ok += 1;
            } else {
                self.stats.record_error(op, -result);
                err += 1;
            }
            if let Some(h) = self.hook.as_mut() {
                let buf = self.slots.buf[s];
                hook_completion(h.as_mut(), &mut *self.engine, buf, op, off, len, result);
            }
            self.slots.release(s);
        }
        if let Some(l) = self.live.as_ref() {
            l.add(batch[0], batch[1], batch[2], batch[3]);
        }
        let st = &mut self.st;
        if err > 0 && ok == 0 {
            st.backoff = (st.backoff * 2).clamp(BACKOFF_MIN_NS, BACKOFF_MAX_NS);
            st.backoff_until = tc + st.backoff;
        } else if ok > 0 {
            st.backoff = 0;
        }
    }

    /// Tear-down: the exit reason and the final report.
    fn finish(mut self) -> WorkerExit {
        if self.st.abandoned {
            // The kernel may still write into the buffers of the abandoned I/Os: leak the engine
            // (ring and buffers) instead of freeing memory under it.
            std::mem::forget(self.engine);
        }
        let st = &mut self.st;
        if let Some(f) = st.fatal.take() {
            st.reason = ExitReason::Fatal(f);
        }
        if !st.receiver_gone {
            let now = self.clock.ns();
            if st.spare.is_none() {
                st.spare = self.recycle.as_ref().and_then(|r| r.try_recv().ok());
            }
            let rep = self.stats.take_report(
                self.index,
                Duration::from_nanos(now - st.last_report),
                self.clock.at(now),
                st.spare.take(),
                true,
            );
            let _ = self.tx.send(rep);
        }
        WorkerExit {
            engine: self.engine_name,
            reason: std::mem::replace(&mut st.reason, ExitReason::Stopped),
        }
    }
}

/// The hook's call for one completion with `result` (bytes, or a negative errno) of an I/O of
/// `len` bytes at `off` in buffer `buf`.
#[inline]
fn hook_completion(
    h: &mut dyn BlockHook,
    engine: &mut dyn IoEngine,
    buf: u16,
    op: Op,
    off: u64,
    len: u32,
    result: i32,
) {
    match (op, result >= 0) {
        (Op::Read, true) => {
            let b = engine.buffer(buf);
            h.after_read(&b[..(result as usize).min(b.len())], off);
        }
        (Op::Read, false) => h.read_failed(off, len as usize, -result),
        // A short write counts as failed: not every stamped unit landed.
        (Op::Write, done) => h.after_write(off, len as usize, done && result as u32 == len),
    }
}

impl LoopState {
    fn new(pacer: Option<Pacer>, interval_ns: u64) -> Self {
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

mod bench;
mod pieces;

pub use bench::{BenchError, BenchResult, bench_worker};
pub use pieces::*;

#[cfg(test)]
mod tests;

#[cfg(test)]
mod alloc_count;

#[cfg(test)]
mod hot_path;
