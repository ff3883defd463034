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

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, Sender, SyncSender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use thiserror::Error;

use crate::engine::{self, Completion, EngineError, EngineSetup, IoEngine, IoReq};
use crate::stats::{WorkerReport, WorkerStats};
use crate::workload::spec::{Access, EngineChoice, JobSpec, Op, Skew};

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
// Pure pieces: random numbers, block sizes, offsets, stripes, pacing.

/// xoshiro256++ seeded through splitmix64: small, fast, good enough for workload generation.
#[derive(Clone)]
pub struct Rng([u64; 4]);

fn splitmix64(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Rng {
    pub fn new(seed: u64) -> Self {
        let mut s = seed;
        Rng([
            splitmix64(&mut s),
            splitmix64(&mut s),
            splitmix64(&mut s),
            splitmix64(&mut s),
        ])
    }
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.0;
        let r = s[0].wrapping_add(s[3]).rotate_left(23).wrapping_add(s[0]);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        r
    }
    /// Uniform in `0..n` (`n > 0`), by multiply-shift (Lemire), without division.
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }
    /// Uniform in `[0, 1)`.
    #[inline]
    pub fn f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

/// Weighted block-size selection from a [`crate::workload::spec::BlockSizeMix`].
#[derive(Clone, Debug)]
pub struct BsPicker {
    sizes: Vec<u32>,
    /// Cumulative weights.
    cum: Vec<u64>,
    total: u64,
}

impl BsPicker {
    pub fn new(entries: &[(u32, u32)]) -> Self {
        let mut cum = Vec::with_capacity(entries.len());
        let mut total = 0u64;
        let mut sizes = Vec::with_capacity(entries.len());
        for &(bs, w) in entries.iter().filter(|e| e.1 > 0) {
            total += w as u64;
            cum.push(total);
            sizes.push(bs);
        }
        if sizes.is_empty() {
            sizes.push(4096);
            cum.push(1);
            total = 1;
        }
        BsPicker { sizes, cum, total }
    }
    /// Index into the size table.
    #[inline]
    pub fn pick(&self, rng: &mut Rng) -> usize {
        if self.sizes.len() == 1 {
            return 0;
        }
        let r = rng.below(self.total);
        let mut i = 0;
        while r >= self.cum[i] {
            i += 1;
        }
        i
    }
    pub fn size(&self, i: usize) -> u32 {
        self.sizes[i]
    }
    pub fn sizes(&self) -> &[u32] {
        &self.sizes
    }
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// Offset alignment of a job: the smallest block size for random access, the gcd of the block
/// sizes for sequential access; at least 512 bytes either way.
pub fn job_align(job: &JobSpec) -> u64 {
    let sizes = job.bs.entries.iter().map(|e| e.0 as u64);
    let a = match job.access {
        Access::Sequential => sizes.fold(0, gcd),
        Access::Random { .. } => sizes.min().unwrap_or(4096),
    };
    a.max(512)
}

/// The aligned part of a region: `(start, len)` with both multiples of `align`.
pub fn aligned_region(region_start: u64, region_len: u64, align: u64) -> (u64, u64) {
    let start = region_start.div_ceil(align) * align;
    let end = (region_start + region_len) / align * align;
    (start, end.saturating_sub(start))
}

/// Stripe `index` of `workers` for sequential access: `(start, len)` in bytes, aligned to
/// `align`. The aligned region is split into `workers` stripes whose lengths differ by at
/// most one block; together they cover it exactly.
pub fn stripe_bounds(
    region_start: u64,
    region_len: u64,
    workers: u32,
    index: usize,
    align: u64,
) -> (u64, u64) {
    let (start, len) = aligned_region(region_start, region_len, align);
    let blocks = (len / align) as u128;
    let w = workers.max(1) as u128;
    let i = (index as u128).min(w - 1);
    let b0 = (blocks * i / w) as u64;
    let b1 = (blocks * (i + 1) / w) as u64;
    (start + b0 * align, (b1 - b0) * align)
}

/// Sum of `i^-theta` for `i` in `1..=n`: exact for the first 65536 terms, Euler–Maclaurin for
/// the tail, so setup stays O(1) even for billions of blocks.
pub fn zeta(n: u64, theta: f64) -> f64 {
    const EXACT: u64 = 1 << 16;
    let m = n.min(EXACT);
    let mut s = 0.0;
    for i in 1..=m {
        s += (i as f64).powf(-theta);
    }
    if n > m {
        let (a, b) = (m as f64, n as f64);
        let f = |x: f64| x.powf(-theta);
        let df = |x: f64| -theta * x.powf(-theta - 1.0);
        let integral = if (theta - 1.0).abs() < 1e-12 {
            (b / a).ln()
        } else {
            (b.powf(1.0 - theta) - a.powf(1.0 - theta)) / (1.0 - theta)
        };
        // sum_{i=m+1}^{n} f(i) = ∫_m^n f + (f(n) - f(m))/2 + (f'(n) - f'(m))/12 + ...
        s += integral + (f(b) - f(a)) / 2.0 + (df(b) - df(a)) / 12.0;
    }
    s
}

/// Zipf-distributed ranks in `0..n` by Gray et al., "Quickly generating billion-record
/// synthetic databases" (SIGMOD 1994), as in YCSB and fio: O(1) per draw after computing
/// `zeta(n)` once. Rank 0 is the hottest.
#[derive(Clone, Debug)]
pub struct Zipf {
    n: u64,
    zetan: f64,
    alpha: f64,
    eta: f64,
    half_pow: f64,
}

impl Zipf {
    pub fn new(n: u64, theta: f64) -> Self {
        let n = n.max(1);
        // The method's exponent 1/(1-theta) is undefined at exactly 1.
        let theta = if (theta - 1.0).abs() < 1e-6 {
            1.0 - 1e-6
        } else {
            theta
        };
        let zetan = zeta(n, theta);
        let zeta2 = 1.0 + 0.5f64.powf(theta);
        let eta = if n > 2 {
            (1.0 - (2.0 / n as f64).powf(1.0 - theta)) / (1.0 - zeta2 / zetan)
        } else {
            0.0
        };
        Zipf {
            n,
            zetan,
            alpha: 1.0 / (1.0 - theta),
            eta,
            half_pow: 0.5f64.powf(theta),
        }
    }
    #[inline]
    pub fn next(&self, rng: &mut Rng) -> u64 {
        let u = rng.f64();
        let uz = u * self.zetan;
        if uz < 1.0 || self.n == 1 {
            return 0;
        }
        if uz < 1.0 + self.half_pow || self.n == 2 {
            return 1;
        }
        let r = (self.n as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64;
        r.min(self.n - 1)
    }
}

/// Spread zipf ranks over the region (as fio does with its hash), the same way for every
/// worker of a job so they share one hot set.
#[inline]
fn scramble(rank: u64, n: u64) -> u64 {
    let mut x = rank;
    splitmix64(&mut x) % n
}

/// Where the next I/O goes, in units of `align` blocks (random) or bytes (sequential).
#[derive(Clone, Debug)]
enum Placement {
    Uniform,
    Zipf(Zipf),
    /// `band` blocks at the start receive `access` (as a u64 threshold) of the I/Os.
    HotBand {
        band: u64,
        threshold: u64,
    },
    Sequential {
        start: u64,
        len: u64,
        pos: u64,
    },
}

/// Per-I/O offset generator, precomputed for a job and a worker.
#[derive(Clone, Debug)]
pub struct OffsetGen {
    place: Placement,
    start: u64,
    align: u64,
    /// Blocks of `align` in the region.
    blocks: u64,
    /// For each block-size index: the last block index an I/O of that size may start at.
    max_block: Vec<u64>,
}

impl OffsetGen {
    /// `sizes` as in [`BsPicker::sizes`]. Errors with the offending block size when the region
    /// (or this worker's stripe) cannot hold it.
    pub fn new(
        job: &JobSpec,
        sizes: &[u32],
        region_start: u64,
        region_len: u64,
        index: usize,
    ) -> Result<Self, u32> {
        let align = job_align(job);
        let max_bs = sizes.iter().copied().max().unwrap_or(4096);
        let (start, len) = aligned_region(region_start, region_len, align);
        let blocks = len / align;
        let place = match &job.access {
            Access::Sequential => {
                let (s, l) = stripe_bounds(region_start, region_len, job.workers, index, align);
                if l < max_bs as u64 {
                    return Err(max_bs);
                }
                Placement::Sequential {
                    start: s,
                    len: l,
                    pos: 0,
                }
            }
            Access::Random { skew } => {
                if len < max_bs as u64 {
                    return Err(max_bs);
                }
                match skew {
                    Skew::Uniform => Placement::Uniform,
                    Skew::Zipf { theta } => Placement::Zipf(Zipf::new(blocks, *theta)),
                    Skew::HotBand { fraction, access } => {
                        let band = ((blocks as f64 * fraction.clamp(0.0, 1.0)).ceil() as u64)
                            .clamp(1, blocks);
                        let threshold = (access.clamp(0.0, 1.0) * u64::MAX as f64) as u64;
                        Placement::HotBand { band, threshold }
                    }
                }
            }
        };
        let max_block = sizes
            .iter()
            .map(|&bs| (len.saturating_sub(bs as u64)) / align)
            .collect();
        Ok(OffsetGen {
            place,
            start,
            align,
            blocks,
            max_block,
        })
    }

    /// Offset and (possibly trimmed, for a sequential stripe's end) length of the next I/O of
    /// block-size index `bsi` with size `bs`.
    #[inline]
    pub fn next(&mut self, rng: &mut Rng, bsi: usize, bs: u32) -> (u64, u32) {
        let last = self.max_block[bsi];
        let block = match &mut self.place {
            Placement::Uniform => rng.below(last + 1),
            Placement::Zipf(z) => scramble(z.next(rng), self.blocks) % (last + 1),
            Placement::HotBand { band, threshold } => {
                let b = *band;
                let k = if rng.next_u64() < *threshold || b >= self.blocks {
                    rng.below(b)
                } else {
                    b + rng.below(self.blocks - b)
                };
                k % (last + 1)
            }
            Placement::Sequential { start, len, pos } => {
                let off = *start + *pos;
                let l = (bs as u64).min(*len - *pos);
                *pos += l;
                if *pos >= *len {
                    *pos = 0;
                }
                return (off, l as u32);
            }
        };
        (self.start + block * self.align, bs)
    }

    pub fn align(&self) -> u64 {
        self.align
    }

    /// Sequential access: continue the walk `pos` bytes into the stripe (wrapping at its end,
    /// rounded down to the alignment). Random access ignores it.
    pub fn start_at(&mut self, pos: u64) {
        if let Placement::Sequential { len, pos: p, .. } = &mut self.place {
            *p = (pos % *len) / self.align * self.align;
        }
    }
}

/// Deadline pacing: I/O `k` is due at `t0 + k * interval`. Falling behind allows a catch-up
/// burst of at most `max_burst` I/Os; being ahead means waiting, never drifting.
///
/// `max_burst` is at least the I/Os of [`CATCH_UP_NS`]: a late wake-up (timer slack, a busy
/// CPU, a wait that returned late) is made up for instead of lost. With a burst of only the
/// queue depth, every oversleep of more than `depth` intervals dropped I/Os for good, which
/// capped paced psync at roughly `depth` I/Os per sleep (about 24k IOPS at depth 4).
#[derive(Clone, Debug)]
pub struct Pacer {
    interval_ns: f64,
    next_ns: f64,
    max_burst: u64,
}

/// How far behind schedule a paced worker may fall and still catch up.
pub const CATCH_UP_NS: u64 = 5_000_000;

impl Pacer {
    pub fn new(iops: f64, max_burst: u64, now_ns: u64) -> Self {
        let iops = iops.max(1e-3);
        let window = (iops * CATCH_UP_NS as f64 / 1e9).ceil() as u64;
        Pacer {
            interval_ns: 1e9 / iops,
            next_ns: now_ns as f64,
            max_burst: max_burst.max(window).max(1),
        }
    }
    /// How many I/Os may be issued at `now_ns`.
    #[inline]
    pub fn due(&mut self, now_ns: u64) -> u64 {
        let now = now_ns as f64;
        if now < self.next_ns {
            return 0;
        }
        let floor = now - (self.max_burst - 1) as f64 * self.interval_ns;
        if self.next_ns < floor {
            self.next_ns = floor;
        }
        (((now - self.next_ns) / self.interval_ns) as u64 + 1).min(self.max_burst)
    }
    #[inline]
    pub fn take(&mut self) {
        self.next_ns += self.interval_ns;
    }
    /// Nanoseconds until the next I/O is due.
    pub fn wait_ns(&self, now_ns: u64) -> u64 {
        (self.next_ns - now_ns as f64).max(0.0) as u64
    }
}

// ---------------------------------------------------------------------------------------------
// The loop.

/// Whether an I/O would overlap one in flight where either of them writes. Linear in the
/// queue depth; only run when a verification hook is installed.
fn overlaps_inflight(
    op: Op,
    offset: u64,
    len: u32,
    slot_op: &[Op],
    slot_off: &[u64],
    slot_len: &[u32],
) -> bool {
    let end = offset + len as u64;
    (0..slot_len.len()).any(|s| {
        slot_len[s] > 0
            && (op == Op::Write || slot_op[s] == Op::Write)
            && slot_off[s] < end
            && offset < slot_off[s] + slot_len[s] as u64
    })
}

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
    // SAFETY: PR_SET_TIMERSLACK takes a plain integer and affects only the calling thread.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0);
    }
}

fn fill_pattern(buf: &mut [u8], rng: &mut Rng) {
    for chunk in buf.chunks_mut(8) {
        let v = rng.next_u64().to_le_bytes();
        chunk.copy_from_slice(&v[..chunk.len()]);
    }
}

fn run(
    plan: WorkerPlan,
    opts: WorkerOptions,
    tx: impl Into<ReportTx>,
) -> Result<WorkerExit, WorkerError> {
    let tx = tx.into();
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
        fd: plan.fd.as_raw_fd(),
        iodepth: job.iodepth,
        buffers: nbufs as u32,
        max_bs,
    };
    let mut engine = match opts.engine_factory {
        Some(f) => f(setup),
        None => engine::open(plan.engine, setup),
    }
    .map_err(|source| WorkerError::Engine {
        job: job.name.clone(),
        worker: plan.index,
        source,
    })?;
    let caps = engine.caps();
    let engine_name = engine.name();

    let mut rng = Rng::new(plan.seed);
    // Write buffers get seeded, non-trivial data once; reads use their own half when mixed.
    if job.read_pct < 100 {
        let mut prng = Rng::new(plan.seed ^ 0x5eed_da7a);
        for b in 0..depth {
            fill_pattern(engine.buffer(b as u16), &mut prng);
        }
    }
    let mut hook = opts.hook;
    let recycle = opts.recycle;
    let live = opts.live;

    let mut stats = WorkerStats::new();
    stats.engine = engine_name;
    let align = offsets.align();
    let limit = plan.limit_bytes.map(|l| l.div_ceil(align) * align);
    let read_pct = job.read_pct as u64;

    // Per-slot state, indexed by user_data.
    let mut free: Vec<u16> = (0..depth as u16).rev().collect();
    let mut slot_t = vec![0u64; depth];
    let mut slot_op = vec![Op::Read; depth];
    let mut slot_off = vec![0u64; depth];
    let mut slot_buf = vec![0u16; depth];
    // Submitted length per slot, 0 while the slot is free.
    let mut slot_len = vec![0u32; depth];
    // An I/O that would have overlapped one in flight (only checked with a hook).
    let mut pending: Option<(Op, u64, u32)> = None;
    let mut out: Vec<Completion> = Vec::with_capacity(nbufs * 2 + 8);
    let mut inflight = 0usize;
    let mut submitted_bytes = 0u64;

    let clock = Clock(Instant::now());
    let mut pacer = plan
        .rate_iops
        .filter(|r| *r > 0.0)
        .map(|r| Pacer::new(r, depth as u64, clock.ns()));
    if pacer.is_some() {
        tight_timer_slack();
    }
    let interval_ns = plan.report_interval.as_nanos().max(1_000_000) as u64;
    let mut next_report = interval_ns;
    let mut last_report = 0u64;
    let mut spare: Option<(Histogram<u64>, Histogram<u64>)> = None;
    // Reports sent whose histograms have not come back through `recycle` yet.
    let mut outstanding = 0usize;
    let mut backoff = 0u64;
    let mut backoff_until = 0u64;
    let mut stopping = false;
    let mut receiver_gone = false;
    let mut reason = ExitReason::Stopped;
    let mut fatal: Option<String> = None;
    let mut drain_deadline: Option<u64> = None;
    let mut abandoned = false;

    loop {
        let now = clock.ns();
        if now >= next_report && !receiver_gone {
            if spare.is_none()
                && let Some(r) = recycle.as_ref()
                && let Ok(pair) = r.try_recv()
            {
                spare = Some(pair);
                outstanding = outstanding.saturating_sub(1);
            }
            // With recycling, a worker whose earlier reports the consumer has not taken yet
            // coalesces: it keeps this interval in its histograms and counters and reports
            // the longer interval later, so at most MAX_OUTSTANDING reports are queued per
            // worker (memory stays bounded however short the interval) and the steady state
            // allocates no histograms.
            if recycle.is_none() || spare.is_some() || outstanding < MAX_OUTSTANDING {
                let rep = stats.take_report(
                    plan.index,
                    Duration::from_nanos(now - last_report),
                    clock.at(now),
                    spare.take(),
                    false,
                );
                if tx.send(rep).is_err() {
                    receiver_gone = true;
                    stopping = true;
                }
                outstanding += 1;
                last_report = now;
            }
            next_report = now + interval_ns;
        }
        if !stopping && plan.stop.load(Ordering::Relaxed) {
            stopping = true;
        }
        let limit_hit = limit.is_some_and(|l| submitted_bytes >= l);
        if limit_hit && !stopping {
            stopping = true;
            reason = ExitReason::LimitReached;
        }
        if stopping && inflight == 0 {
            break;
        }
        if stopping {
            let deadline = *drain_deadline.get_or_insert(now + DRAIN_LIMIT_NS);
            if now > deadline {
                fatal = Some(format!(
                    "{inflight} I/Os still in flight {} s after stopping (device hung?); abandoned them",
                    DRAIN_LIMIT_NS / 1_000_000_000
                ));
                abandoned = true;
                break;
            }
        }

        // Submit.
        let mut can = 0usize;
        if !stopping && now >= backoff_until {
            can = free.len();
            if caps.sync {
                can = can.min(1);
            }
            if let Some(p) = pacer.as_mut() {
                can = can.min(p.due(now) as usize);
            }
        }
        let base = free.len();
        let mut queued = 0usize;
        let mut blocked = false;
        while queued < can {
            let (op, offset, len) = match pending.take() {
                Some(p) => p,
                None => {
                    if limit.is_some_and(|l| submitted_bytes >= l) {
                        break;
                    }
                    let op = if read_pct >= 100 || (read_pct > 0 && rng.below(100) < read_pct) {
                        Op::Read
                    } else {
                        Op::Write
                    };
                    let bsi = picker.pick(&mut rng);
                    let (offset, mut len) = offsets.next(&mut rng, bsi, picker.size(bsi));
                    if let Some(l) = limit {
                        len = len.min((l - submitted_bytes).min(u32::MAX as u64) as u32);
                    }
                    (op, offset, len)
                }
            };
            if hook.is_some() && overlaps_inflight(op, offset, len, &slot_op, &slot_off, &slot_len)
            {
                pending = Some((op, offset, len));
                blocked = true;
                break;
            }
            let slot = free[base - 1 - queued];
            let buf = if mixed && op == Op::Read {
                slot + depth as u16
            } else {
                slot
            };
            if let Some(h) = hook.as_mut().filter(|_| op == Op::Write) {
                h.before_write(&mut engine.buffer(buf)[..len as usize], offset);
            }
            let s = slot as usize;
            slot_op[s] = op;
            slot_off[s] = offset;
            slot_buf[s] = buf;
            slot_len[s] = len;
            if caps.sync {
                slot_t[s] = clock.ns();
            }
            let req = IoReq {
                op,
                offset,
                len,
                buf,
                user_data: slot as u64,
            };
            if let Err(e) = engine.queue(req) {
                fatal = Some(format!("queueing I/O failed: {e}"));
                break;
            }
            submitted_bytes += len as u64;
            if let Some(p) = pacer.as_mut() {
                p.take();
            }
            queued += 1;
        }
        if queued > 0 {
            if !caps.sync {
                let t = clock.ns();
                for &slot in &free[base - queued..base] {
                    slot_t[slot as usize] = t;
                }
            }
            free.truncate(base - queued);
            inflight += queued;
            stats.submitted += queued as u64;
        }
        if fatal.is_some() {
            stopping = true;
        }

        // Reap (or wait).
        let limit_hit = limit.is_some_and(|l| submitted_bytes >= l);
        let res = if inflight > 0 && (free.is_empty() || stopping || limit_hit || blocked) {
            let min = if free.is_empty() { reap_min } else { 1 };
            engine.reap(min, &mut out)
        } else if !stopping && now < backoff_until {
            let r = engine.commit().and_then(|_| engine.reap(0, &mut out));
            if out.is_empty() {
                sleep_ns((backoff_until - clock.ns().min(backoff_until)).min(MAX_WAIT_NS));
            }
            r
        } else if let Some(p) = pacer.as_ref() {
            // Ahead of schedule (or, for a sync engine, one I/O per pass: more may be due).
            let w = p.wait_ns(clock.ns());
            if !caps.sync && inflight > 0 {
                // The ring's wait returns at the first completion or at the deadline (kernel
                // timeouts have no slack) and runs deferred completion work, so completions
                // are stamped when they happen and new I/Os start on schedule.
                engine.reap_timeout(Duration::from_nanos(w.clamp(1_000, MAX_WAIT_NS)), &mut out)
            } else if inflight > 0 || w == 0 {
                engine.commit().and_then(|_| engine.reap(0, &mut out))
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
        } else {
            engine.commit().and_then(|_| engine.reap(0, &mut out))
        };
        if let Err(e) = res {
            // The engine itself failed; what is still in flight cannot be reaped.
            fatal = Some(format!("{e}"));
            break;
        }
        if !out.is_empty() {
            let tc = clock.ns();
            let (mut ok, mut err) = (0u32, 0u32);
            // This batch's successful completions: (reads, read bytes, writes, written bytes).
            let mut batch = [0u64; 4];
            for c in out.drain(..) {
                let s = c.user_data as usize;
                let op = slot_op[s];
                let (off, len) = (slot_off[s], slot_len[s]);
                // Zero bytes for a non-empty I/O means the device ended under us (a removed or
                // shrunk disk reads back EOF): count it as ENXIO, never as a completed I/O.
                let result = if c.result == 0 && len > 0 {
                    -libc::ENXIO
                } else {
                    c.result
                };
                let c = Completion { result, ..c };
                if c.result >= 0 {
                    stats.record(op, c.result as u64, tc.saturating_sub(slot_t[s]));
                    let k = if op == Op::Read { 0 } else { 2 };
                    batch[k] += 1;
                    batch[k + 1] += c.result as u64;
                    ok += 1;
                } else {
                    stats.record_error(op, -c.result);
                    err += 1;
                }
                if let Some(h) = hook.as_mut() {
                    match (op, c.result >= 0) {
                        (Op::Read, true) => {
                            let b = engine.buffer(slot_buf[s]);
                            h.after_read(&b[..(c.result as usize).min(b.len())], off);
                        }
                        (Op::Read, false) => h.read_failed(off, len as usize, -c.result),
                        // A short write counts as failed: not every stamped unit landed.
                        (Op::Write, done) => {
                            h.after_write(off, len as usize, done && c.result as u32 == len)
                        }
                    }
                }
                slot_len[s] = 0;
                free.push(s as u16);
                inflight -= 1;
            }
            if let Some(l) = live.as_ref() {
                l.add(batch[0], batch[1], batch[2], batch[3]);
            }
            if err > 0 && ok == 0 {
                backoff = (backoff * 2).clamp(BACKOFF_MIN_NS, BACKOFF_MAX_NS);
                backoff_until = tc + backoff;
            } else if ok > 0 {
                backoff = 0;
            }
        }
    }

    if abandoned {
        // The kernel may still write into the buffers of the abandoned I/Os: leak the engine
        // (ring and buffers) instead of freeing memory under it.
        std::mem::forget(engine);
    }
    if let Some(f) = fatal {
        reason = ExitReason::Fatal(f);
    }
    if !receiver_gone {
        let now = clock.ns();
        if spare.is_none() {
            spare = recycle.as_ref().and_then(|r| r.try_recv().ok());
        }
        let rep = stats.take_report(
            plan.index,
            Duration::from_nanos(now - last_report),
            clock.at(now),
            spare.take(),
            true,
        );
        let _ = tx.send(rep);
    }
    Ok(WorkerExit {
        engine: engine_name,
        reason,
    })
}

// ---------------------------------------------------------------------------------------------
// Benchmark entry (scripts/bench-vs-fio through examples/bench_worker.rs).

/// What [`bench_worker`] measured.
#[doc(hidden)]
#[derive(Debug, Clone, serde::Serialize)]
pub struct BenchResult {
    pub engine: &'static str,
    pub ops: u64,
    pub secs: f64,
    pub iops: f64,
    /// User plus system CPU of the whole process over the run (all threads).
    pub cpu_secs: f64,
    pub iops_per_cpu_sec: f64,
    pub p50_us: f64,
    pub p99_us: f64,
}

fn rusage_cpu_secs() -> f64 {
    // SAFETY: getrusage only writes the struct we pass; zeroed is a valid rusage.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointer to a live rusage.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return 0.0;
    }
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// Run one worker on `path` the way the daemon does (full stats, a report every second, the
/// consumer merging interval histograms and computing quantiles) for `seconds`, and measure
/// IOPS and the process's CPU time. `rw`: `randread`, `randwrite`, `read` or `write`
/// (sequential). The file is opened with O_DIRECT.
#[doc(hidden)]
pub fn bench_worker(
    path: &std::path::Path,
    bs: u32,
    qd: u32,
    rw: &str,
    seconds: f64,
    engine: EngineChoice,
) -> Result<BenchResult, String> {
    use std::os::unix::fs::OpenOptionsExt;
    let (read_pct, access) = match rw {
        "randread" => (
            100,
            Access::Random {
                skew: Skew::Uniform,
            },
        ),
        "randwrite" => (
            0,
            Access::Random {
                skew: Skew::Uniform,
            },
        ),
        "read" => (100, Access::Sequential),
        "write" => (0, Access::Sequential),
        other => {
            return Err(format!(
                "rw: unknown pattern {other:?} (randread, randwrite, read, write)"
            ));
        }
    };
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)
        .map_err(|e| format!("{}: opening with O_DIRECT failed: {e}", path.display()))?;
    let len = f
        .metadata()
        .map_err(|e| format!("{}: {e}", path.display()))?
        .len();
    let job = JobSpec {
        name: format!("bench-{rw}"),
        description: "bench_worker".into(),
        read_pct,
        bs: crate::workload::spec::BlockSizeMix::single(bs),
        access,
        iodepth: qd,
        workers: 1,
        rate: None,
    };
    let stop = Arc::new(AtomicBool::new(false));
    let plan = WorkerPlan {
        index: 0,
        job,
        fd: Arc::new(OwnedFd::from(f)),
        region_start: 0,
        region_len: len,
        engine,
        rate_iops: None,
        limit_bytes: None,
        seed: 42,
        report_interval: Duration::from_secs(1),
        stop: stop.clone(),
    };
    let (tx, rx) = std::sync::mpsc::channel();
    let (back_tx, back_rx) = std::sync::mpsc::channel();
    let cpu0 = rusage_cpu_secs();
    let t0 = Instant::now();
    let h = spawn_with(
        plan,
        WorkerOptions {
            recycle: Some(back_rx),
            ..Default::default()
        },
        tx,
    )
    .map_err(|e| format!("spawning the worker failed: {e}"))?;
    let deadline = t0 + Duration::from_secs_f64(seconds);
    let mut seg_hist = crate::stats::new_hdr();
    let mut last_ops = 0;
    let mut engine_name = "none";
    let mut stop_sent = false;
    loop {
        let now = Instant::now();
        if !stop_sent && now >= deadline {
            stop.store(true, Ordering::SeqCst);
            stop_sent = true;
        }
        let wait = deadline
            .saturating_duration_since(now)
            .max(Duration::from_millis(1));
        match rx.recv_timeout(wait.min(Duration::from_millis(100))) {
            Ok(r) => {
                engine_name = r.engine;
                // What the scheduler does each interval: merge, then quantiles.
                let _ = seg_hist.add(&r.read_hist);
                let _ = seg_hist.add(&r.write_hist);
                for (q, _) in crate::stats::QUANTILES {
                    std::hint::black_box(r.read_hist.value_at_quantile(q));
                    std::hint::black_box(r.write_hist.value_at_quantile(q));
                }
                last_ops = r.read.ops + r.write.ops;
                let done = r.done;
                let _ = back_tx.send((r.read_hist, r.write_hist));
                if done {
                    break;
                }
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    let exit = h
        .join()
        .map_err(|_| "worker thread panicked".to_string())?
        .map_err(|e| e.to_string())?;
    if let ExitReason::Fatal(m) = exit.reason {
        return Err(m);
    }
    let cpu = rusage_cpu_secs() - cpu0;
    let iops = last_ops as f64 / secs;
    Ok(BenchResult {
        engine: engine_name,
        ops: last_ops,
        secs,
        iops,
        cpu_secs: cpu,
        iops_per_cpu_sec: if cpu > 0.0 {
            last_ops as f64 / cpu
        } else {
            0.0
        },
        p50_us: seg_hist.value_at_quantile(0.5) as f64 / 1e3,
        p99_us: seg_hist.value_at_quantile(0.99) as f64 / 1e3,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::spec::BlockSizeMix;

    fn job(access: Access, bs: &[(u32, u32)], workers: u32) -> JobSpec {
        JobSpec {
            name: "t".into(),
            description: String::new(),
            read_pct: 100,
            bs: BlockSizeMix {
                entries: bs.to_vec(),
            },
            access,
            iodepth: 4,
            workers,
            rate: None,
        }
    }

    #[test]
    fn zeta_tail_approximation_matches_exact_sum() {
        // n beyond the exact prefix: compare with a direct sum.
        let n = 300_000u64;
        for theta in [0.5, 0.99, 1.2] {
            let exact: f64 = (1..=n).map(|i| (i as f64).powf(-theta)).sum();
            let approx = zeta(n, theta);
            assert!(
                ((approx - exact) / exact).abs() < 1e-9,
                "theta {theta}: {approx} vs {exact}"
            );
        }
    }

    #[test]
    fn zipf_follows_the_power_law() {
        // With theta = 0.99 over 1000 ranks, P(rank 0) = 1/zeta(1000) ≈ 0.134 and
        // P(rank 1) = 2^-0.99 / zeta(1000) ≈ 0.067.
        let z = Zipf::new(1000, 0.99);
        let mut rng = Rng::new(7);
        let n = 200_000;
        let mut counts = vec![0u32; 1000];
        for _ in 0..n {
            let r = z.next(&mut rng);
            assert!(r < 1000);
            counts[r as usize] += 1;
        }
        let zn = zeta(1000, 0.99);
        let p0 = counts[0] as f64 / n as f64;
        let p1 = counts[1] as f64 / n as f64;
        assert!((p0 - 1.0 / zn).abs() < 0.01, "p0 {p0}");
        assert!((p1 - 0.5f64.powf(0.99) / zn).abs() < 0.01, "p1 {p1}");
        // Top 10% of ranks take far more than 10% of draws.
        let top: u32 = counts[..100].iter().sum();
        assert!(top as f64 / n as f64 > 0.6, "top10 {top}");
        // Monotone on average: the first half is hotter than the second.
        let first: u32 = counts[..500].iter().sum();
        assert!(first > 2 * counts[500..].iter().sum::<u32>());
    }

    #[test]
    fn zipf_small_n_and_theta_one() {
        let mut rng = Rng::new(1);
        for n in [1u64, 2, 3] {
            let z = Zipf::new(n, 1.0);
            for _ in 0..1000 {
                assert!(z.next(&mut rng) < n);
            }
        }
    }

    #[test]
    fn bs_mix_selection_honours_weights() {
        let p = BsPicker::new(&[(4096, 60), (8192, 30), (65536, 10)]);
        let mut rng = Rng::new(3);
        let mut c = [0u32; 3];
        let n = 100_000;
        for _ in 0..n {
            c[p.pick(&mut rng)] += 1;
        }
        for (i, w) in [0.6, 0.3, 0.1].iter().enumerate() {
            let got = c[i] as f64 / n as f64;
            assert!((got - w).abs() < 0.01, "entry {i}: {got}");
        }
        assert_eq!(p.size(2), 65536);
        // A single size never touches the generator.
        let one = BsPicker::new(&[(4096, 1)]);
        let before = rng.clone().next_u64();
        assert_eq!(one.pick(&mut rng), 0);
        assert_eq!(rng.next_u64(), before);
    }

    #[test]
    fn stripes_cover_the_region_exactly() {
        // 1 MiB + 3 blocks over 3 workers, region starting unaligned.
        let align = 4096;
        let (rs, rl) = (1000u64, (1 << 20) + 3 * 4096);
        let (s0, total) = aligned_region(rs, rl, align);
        assert_eq!(s0, 4096);
        let mut next = s0;
        let mut sum = 0;
        for i in 0..3 {
            let (s, l) = stripe_bounds(rs, rl, 3, i, align);
            assert_eq!(s, next, "stripe {i} starts where the previous ended");
            assert_eq!(s % align, 0);
            assert_eq!(l % align, 0);
            next = s + l;
            sum += l;
        }
        assert_eq!(sum, total);
        assert!(next <= rs + rl);
        // Lengths differ by at most one block.
        let lens: Vec<u64> = (0..3)
            .map(|i| stripe_bounds(rs, rl, 3, i, align).1)
            .collect();
        assert!(lens.iter().max().unwrap() - lens.iter().min().unwrap() <= align);
    }

    #[test]
    fn alignment_rules() {
        let r = Access::Random {
            skew: Skew::Uniform,
        };
        assert_eq!(
            job_align(&job(r.clone(), &[(8192, 1), (12288, 1)], 1)),
            8192
        );
        assert_eq!(
            job_align(&job(Access::Sequential, &[(8192, 1), (12288, 1)], 1)),
            4096
        );
        assert_eq!(job_align(&job(r, &[(512, 1)], 1)), 512);
    }

    #[test]
    fn sequential_walks_the_stripe_and_wraps_trimming_at_the_end() {
        // Stripe of 10 KiB (2.5 x 4 KiB): 4k, 4k, 2k, then back to the start.
        let j = job(Access::Sequential, &[(4096, 1), (2048, 1)], 1);
        let p = BsPicker::new(&j.bs.entries);
        let mut g = OffsetGen::new(&j, p.sizes(), 0, 10 * 1024, 0).unwrap();
        let mut rng = Rng::new(0);
        let got: Vec<(u64, u32)> = (0..4).map(|_| g.next(&mut rng, 0, 4096)).collect();
        assert_eq!(got, vec![(0, 4096), (4096, 4096), (8192, 2048), (0, 4096)]);
    }

    #[test]
    fn sequential_start_position_continues_the_walk() {
        // Two workers over 20 KiB at offset 8 KiB: stripe 1 is [18k, 28k).
        let j = job(Access::Sequential, &[(2048, 1)], 2);
        let p = BsPicker::new(&j.bs.entries);
        let fresh = OffsetGen::new(&j, p.sizes(), 8 << 10, 20 << 10, 1).unwrap();
        let mut rng = Rng::new(0);
        let mut g = fresh.clone();
        g.start_at(6 << 10);
        let got: Vec<u64> = (0..4).map(|_| g.next(&mut rng, 0, 2048).0).collect();
        assert_eq!(got, vec![24 << 10, 26 << 10, 18 << 10, 20 << 10]);
        // Past the stripe's end it wraps (a later pass); unaligned positions round down.
        let mut g = fresh.clone();
        g.start_at((10 << 10) * 3 + 4096 + 100);
        assert_eq!(g.next(&mut rng, 0, 2048).0, (18 << 10) + 4096);
        // Random access ignores it.
        let r = job(
            Access::Random {
                skew: Skew::Uniform,
            },
            &[(2048, 1)],
            1,
        );
        let mut g = OffsetGen::new(&r, p.sizes(), 0, 1 << 20, 0).unwrap();
        g.start_at(4096);
        assert!(g.next(&mut rng, 0, 2048).0 < 1 << 20);
    }

    #[test]
    fn random_offsets_stay_inside_for_every_size() {
        let j = job(
            Access::Random {
                skew: Skew::Zipf { theta: 1.1 },
            },
            &[(4096, 1), (65536, 1)],
            1,
        );
        let p = BsPicker::new(&j.bs.entries);
        let (rs, rl) = (8192u64, 1 << 20);
        let mut g = OffsetGen::new(&j, p.sizes(), rs, rl, 0).unwrap();
        let mut rng = Rng::new(9);
        for _ in 0..50_000 {
            let i = p.pick(&mut rng);
            let (off, len) = g.next(&mut rng, i, p.size(i));
            assert_eq!(off % 4096, 0);
            assert!(off >= rs && off + len as u64 <= rs + rl, "{off}+{len}");
        }
        assert_eq!(
            OffsetGen::new(&j, p.sizes(), 0, 32768, 0).err(),
            Some(65536)
        );
    }

    #[test]
    fn hot_band_fraction() {
        let j = job(
            Access::Random {
                skew: Skew::HotBand {
                    fraction: 0.1,
                    access: 0.9,
                },
            },
            &[(4096, 1)],
            1,
        );
        let p = BsPicker::new(&j.bs.entries);
        let mut g = OffsetGen::new(&j, p.sizes(), 0, 4096 * 1000, 0).unwrap();
        let mut rng = Rng::new(5);
        let n = 100_000;
        let hot = (0..n)
            .filter(|_| g.next(&mut rng, 0, 4096).0 < 4096 * 100)
            .count();
        let f = hot as f64 / n as f64;
        assert!((f - 0.9).abs() < 0.01, "{f}");
    }

    #[test]
    fn pacer_keeps_the_schedule_and_caps_bursts() {
        // 1000 IOPS: one every 1 ms.
        let mut p = Pacer::new(1000.0, 8, 0);
        assert_eq!(p.due(0), 1);
        p.take();
        assert_eq!(p.due(500_000), 0);
        assert_eq!(p.wait_ns(500_000), 500_000);
        // 3.5 ms later: 3 due (at 1, 2, 3 ms).
        assert_eq!(p.due(3_500_000), 3);
        // A long stall allows at most max_burst.
        assert_eq!(p.due(1_000_000_000), 8);
        for _ in 0..8 {
            p.take();
        }
        assert_eq!(p.due(1_000_000_000), 0);
    }

    #[test]
    fn pacer_catches_up_a_late_wake_up_beyond_the_queue_depth() {
        // 100k IOPS at depth 4: waking 1 ms late owes 100 I/Os, not 4 (the old cap, which lost
        // the rest of every oversleep and flattened paced psync near 24k IOPS).
        let mut p = Pacer::new(100_000.0, 4, 0);
        assert_eq!(p.due(999_999), 100);
        // Beyond the catch-up window the debt is capped.
        assert_eq!(p.due(1_000_000_000), 500);
    }

    #[test]
    fn rng_below_is_in_range_and_roughly_uniform() {
        let mut r = Rng::new(42);
        let mut c = [0u32; 10];
        for _ in 0..100_000 {
            c[r.below(10) as usize] += 1;
        }
        assert!(c.iter().all(|&x| (9_000..11_000).contains(&x)), "{c:?}");
        for _ in 0..1000 {
            let f = r.f64();
            assert!((0.0..1.0).contains(&f));
        }
    }
}

/// Counts allocations per thread, so a test can show the hot loop does not allocate per I/O.
#[cfg(test)]
mod alloc_count {
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::cell::Cell;

    thread_local! {
        pub static COUNT: Cell<u64> = const { Cell::new(0) };
    }

    fn bump() {
        let _ = COUNT.try_with(|c| c.set(c.get() + 1));
    }

    pub struct Counting;

    // SAFETY: forwards every call to the system allocator unchanged; counting touches only a
    // const-initialised thread-local Cell, which never allocates.
    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, l: Layout) -> *mut u8 {
            bump();
            // SAFETY: same contract as the caller's.
            unsafe { System.alloc(l) }
        }
        unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
            bump();
            // SAFETY: same contract as the caller's.
            unsafe { System.alloc_zeroed(l) }
        }
        unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
            bump();
            // SAFETY: same contract as the caller's.
            unsafe { System.realloc(p, l, new) }
        }
        unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
            // SAFETY: same contract as the caller's.
            unsafe { System.dealloc(p, l) }
        }
    }

    #[global_allocator]
    static ALLOC: Counting = Counting;
}

#[cfg(test)]
mod hot_path {
    use super::*;
    use crate::workload::spec::BlockSizeMix;
    use std::io::Write;

    /// Allocations made by the worker loop (run on this thread) for `ios` I/Os.
    fn allocs_for(engine: EngineChoice, ios: u64) -> u64 {
        let mut f = tempfile::Builder::new()
            .prefix("nvsoak-alloc-")
            .tempfile_in("/dev/shm")
            .or_else(|_| tempfile::NamedTempFile::new())
            .expect("temp file");
        f.write_all(&vec![1u8; 1 << 20]).unwrap();
        let file = f.reopen().unwrap();
        let plan = WorkerPlan {
            index: 0,
            job: JobSpec {
                name: "alloc".into(),
                description: String::new(),
                read_pct: 70,
                bs: BlockSizeMix {
                    entries: vec![(4096, 3), (8192, 1)],
                },
                access: Access::Random {
                    skew: Skew::Zipf { theta: 0.9 },
                },
                iodepth: 16,
                workers: 1,
                rate: None,
            },
            fd: Arc::new(OwnedFd::from(file)),
            region_start: 0,
            region_len: 1 << 20,
            engine,
            rate_iops: None,
            limit_bytes: Some(ios * 4096),
            seed: 1,
            // No interval report during the run: only the final one.
            report_interval: Duration::from_secs(3600),
            stop: Arc::new(AtomicBool::new(false)),
        };
        let (tx, rx) = std::sync::mpsc::channel();
        let before = alloc_count::COUNT.with(|c| c.get());
        let exit = run(plan, WorkerOptions::default(), tx).expect("worker");
        let after = alloc_count::COUNT.with(|c| c.get());
        assert_eq!(exit.reason, ExitReason::LimitReached);
        let last = rx.try_iter().last().expect("final report");
        assert!(last.read.ops + last.write.ops > ios / 2);
        after - before
    }

    #[test]
    fn the_loop_does_not_allocate_per_io() {
        for engine in [
            EngineChoice::IoUring,
            EngineChoice::Psync,
            EngineChoice::Null,
        ] {
            let small = allocs_for(engine, 1_000);
            let large = allocs_for(engine, 50_000);
            assert_eq!(
                small,
                large,
                "{}: allocations grow with the number of I/Os",
                engine.as_str()
            );
        }
    }
    /// Allocations of the worker loop (run on this thread) at a 1 ms stats interval, with a
    /// consumer that hands every report's histograms back, until `reports` reports arrived.
    fn allocs_at_1ms(engine: EngineChoice, reports: usize) -> (u64, usize) {
        let stop = Arc::new(AtomicBool::new(false));
        let plan = WorkerPlan {
            index: 0,
            job: JobSpec {
                name: "alloc-1ms".into(),
                description: String::new(),
                read_pct: 70,
                bs: BlockSizeMix {
                    entries: vec![(4096, 1)],
                },
                access: Access::Random {
                    skew: Skew::Uniform,
                },
                iodepth: 8,
                workers: 1,
                rate: None,
            },
            fd: Arc::new(OwnedFd::from(
                std::fs::File::open("/dev/null").expect("opening /dev/null"),
            )),
            region_start: 0,
            region_len: 1 << 20,
            engine,
            rate_iops: None,
            limit_bytes: None,
            seed: 1,
            report_interval: Duration::from_millis(1),
            stop: stop.clone(),
        };
        let (tx, rx) =
            std::sync::mpsc::sync_channel::<crate::stats::WorkerReport>(report_capacity(1));
        let (back_tx, back_rx) = std::sync::mpsc::channel();
        let consumer = std::thread::spawn(move || {
            let mut n = 0usize;
            while let Ok(r) = rx.recv() {
                n += 1;
                if n == reports {
                    stop.store(true, Ordering::Relaxed);
                }
                let _ = back_tx.send((r.read_hist, r.write_hist));
            }
            n
        });
        let opts = WorkerOptions {
            recycle: Some(back_rx),
            ..WorkerOptions::default()
        };
        let before = alloc_count::COUNT.with(|c| c.get());
        let exit = run(plan, opts, tx).expect("worker");
        let after = alloc_count::COUNT.with(|c| c.get());
        assert_eq!(exit.reason, ExitReason::Stopped);
        let got = consumer.join().expect("consumer");
        assert!(got >= reports, "{got} reports");
        (after - before, got)
    }

    #[test]
    fn reports_at_a_1ms_interval_do_not_allocate_in_the_steady_state() {
        let (short, n_short) = allocs_at_1ms(EngineChoice::Null, 50);
        let (long, n_long) = allocs_at_1ms(EngineChoice::Null, 1000);
        eprintln!("1 ms interval: {short} allocations for {n_short} reports, {long} for {n_long}");
        // The only allocations after setup are histogram pairs while the pool fills (at most
        // MAX_OUTSTANDING + 1 pairs, however many reports): a timing-dependent few, never one
        // per report or per channel block (an unbounded channel costs ~30 here).
        let pool = 4 * (MAX_OUTSTANDING as u64 + 1);
        assert!(
            long <= short + pool,
            "{} more allocations for {} more reports at a 1 ms interval",
            long.saturating_sub(short),
            n_long - n_short
        );
    }
}
