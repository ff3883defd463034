//! The per-target scheduler: one plain OS thread per target that opens the target, runs its
//! phases in order (precondition, sweep, soak; looping when asked), spawns the job's worker
//! threads for each run segment, aggregates their interval reports, evaluates steady state and
//! publishes a [`TargetSnapshot`] that scrapes read.
//!
//! Architecture Invariant: the scheduler never touches the I/O hot path; it only sees worker
//! reports, once per stats interval.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{Seek, SeekFrom};
use std::os::fd::OwnedFd;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use hdrhistogram::Histogram;
use thiserror::Error;

use crate::health::{HostIo, HostIoSource};
use crate::state::{PreconditionProgress, StripeProgress};
use crate::stats::{OpCounters, QUANTILES, WorkerReport, new_hdr};
use crate::workload::pattern::{GenMap, VERIFY_UNIT, VerifyCounters, VerifyHook};
use crate::workload::results::{SteadyOutcome, SweepPoint, SweepResult, TargetResults};
use crate::workload::spec::{
    Access, BlockSizeMix, JobSpec, PhaseSpec, RateLimit, Skew, SteadyConfig, TargetSpec, VerifyMode,
};
use crate::workload::steady::{SteadyDetector, SteadyStatus};
use crate::workload::worker::{self, BlockHook, ExitReason, WorkerOptions, WorkerPlan};

#[derive(Debug, Error)]
pub enum TargetError {
    // The io::Error is part of the message, not a `source`, so `{:#}` chains don't print it twice.
    #[error("target {target}: {path}: {error}")]
    Open {
        target: String,
        path: PathBuf,
        error: std::io::Error,
    },
    #[error(
        "target {target}: preallocating {size} bytes for {path} failed: {error} (is the file system full?)"
    )]
    Prealloc {
        target: String,
        path: PathBuf,
        size: u64,
        error: std::io::Error,
    },
    #[error("target {target}: {reason}")]
    Refused { target: String, reason: String },
    #[error("target {target}: worker failed: {reason}")]
    Worker { target: String, reason: String },
    #[error("target {target}: region of {path} is empty (size {size} bytes)")]
    EmptyRegion {
        target: String,
        path: PathBuf,
        size: u64,
    },
}

/// Interval and cumulative figures of one job on one target.
#[derive(Debug, Clone, Default)]
pub struct JobStats {
    /// Cumulative since the daemon started (monotonic: segments add to it).
    pub read: OpCounters,
    pub write: OpCounters,
    pub read_iops: f64,
    pub write_iops: f64,
    pub read_bw: f64,
    pub write_bw: f64,
    /// Seconds, per `QUANTILES`, over the last interval. `None` when the interval had no ops.
    pub read_q: Option<[f64; 4]>,
    pub write_q: Option<[f64; 4]>,
    pub steady: Option<SteadyStatus>,
    pub sweep: Option<SweepResult>,
    /// True while a segment of this job runs. The interval figures (rates, quantiles) are only
    /// published while active: a finished job's are zero and its rate series go away.
    pub active: bool,
}

/// What a scrape sees of one target.
#[derive(Debug, Clone, Default)]
pub struct TargetSnapshot {
    pub name: String,
    pub path: String,
    pub is_block: bool,
    pub engine: Option<String>,
    pub phase_index: usize,
    pub phase: String,
    pub profile: String,
    pub running: bool,
    pub up: bool,
    /// Why the target stopped, when it did.
    pub stop_reason: Option<String>,
    pub jobs: BTreeMap<String, JobStats>,
    /// IOPS (reads + writes) of the last interval, all jobs.
    pub iops: f64,
    pub started_at: f64,
    /// The soak clock of this run: seconds run before `run_since`, and since when it runs
    /// (`None` while stopped: the plan finished, the target stopped, or its device is gone).
    pub run_secs_base: f64,
    pub run_since: Option<f64>,
    /// Totals carried over from the checkpoint of an earlier run of this plan.
    pub carried: crate::state::Totals,
    /// Completed passes over the phase list.
    pub loop_count: u64,
    /// Unix time the current phase started in this run, and seconds of it done in earlier runs.
    pub phase_started_unix: f64,
    pub phase_elapsed_base: f64,
    /// Unix time the soak (the target's first phase) started, across restarts.
    pub soak_started: Option<f64>,
    /// Steady-state rounds (IOPS) of the current soak job, newest last, bounded.
    pub steady_history: Vec<f64>,
    /// Data verification state when `verify` is not `off`.
    pub verify: Option<VerifyCtx>,
    /// The drive's SMART log at soak start (block targets with health polling), for per-soak
    /// deltas of drive counters; filled by the daemon from the first poll after the target
    /// started (`daemon::update_target_drive`), or restored from the checkpoint.
    pub smart_at_soak_start: Option<serde_json::Value>,
    /// Drive-side soak bookkeeping and figures, maintained by the daemon from health polls;
    /// `save_results` copies the figures into the soak summary.
    pub drive: crate::workload::results::DriveTracking,
    /// Completed I/O of this run, summed from the workers' live counters at the moment of
    /// reading (the `jobs` totals lag by up to one stats interval). For the accounting check.
    pub live: Arc<crate::stats::live::LiveIo>,
    /// The running precondition's per-worker progress (set for the current phase only).
    pub precondition: Option<Arc<PrecondLive>>,
    /// The running sweep so far (set for the current phase only, once its maximum is known).
    pub sweep_progress: Option<SweepResult>,
}

/// Live progress of a precondition phase: per worker stripe, the bytes of its sequential walk
/// (all passes, earlier runs included) whose writes completed, in walk order. Written by each
/// worker's [`ProgressHook`], read by checkpoints ([`TargetSnapshot::to_state`]).
#[derive(Debug)]
pub struct PrecondLive {
    pub passes: u32,
    pub block_size: u32,
    /// `(start, len)` of each worker's stripe.
    pub stripes: Vec<(u64, u64)>,
    pub done: Vec<AtomicU64>,
}

impl PrecondLive {
    /// The checkpoint record: only writes that completed, as a prefix of each walk.
    pub fn progress(&self) -> PreconditionProgress {
        PreconditionProgress {
            passes: self.passes,
            block_size: self.block_size,
            stripes: self
                .stripes
                .iter()
                .zip(&self.done)
                .map(|(&(start, len), d)| StripeProgress {
                    start,
                    len,
                    done_bytes: d.load(Ordering::Acquire),
                })
                .collect(),
        }
    }
}

/// Tracks how far one precondition worker's sequential walk has completed, in walk order, and
/// publishes it to [`PrecondLive::done`]. Writes complete out of order, so it keeps the
/// submitted writes in a ring, in walk order, each with its place in the walk: everything
/// before the oldest write still in flight has completed, so that is the position. Completed
/// writes are only kept until the ring fills, then squeezed out (at most `iodepth` are in
/// flight, the ring holds twice that), so later writes may get ahead of a slow one by any
/// amount. A failed write stops the tracking (the position stays at or before its start: it may
/// not have landed); so does anything unexpected. Wraps the verify hook when there is one. No
/// lock, no allocation after construction; amortised O(1) per write when they complete in order.
struct ProgressHook {
    inner: Option<Box<dyn BlockHook>>,
    live: Arc<PrecondLive>,
    index: usize,
    /// The walk's completed bytes when this hook started (an earlier run or segment).
    base: u64,
    /// Bytes of the walk submitted through this hook.
    submitted: u64,
    /// Bytes of the walk (since `base`) known complete: the oldest write in flight's start.
    pos: u64,
    /// Submitted writes, oldest at `head`: (offset, start in the walk since `base`, len,
    /// completed). The head is always in flight (completed ones are popped).
    ring: Box<[(u64, u64, u32, bool)]>,
    head: usize,
    count: usize,
    stalled: bool,
}

impl ProgressHook {
    fn new(
        inner: Option<Box<dyn BlockHook>>,
        live: Arc<PrecondLive>,
        index: usize,
        done: u64,
        iodepth: u32,
    ) -> Self {
        ProgressHook {
            inner,
            live,
            index,
            base: done,
            submitted: 0,
            pos: 0,
            ring: vec![(0, 0, 0, false); 2 * iodepth.max(1) as usize + 1].into_boxed_slice(),
            head: 0,
            count: 0,
            stalled: false,
        }
    }

    /// Drops the completed writes behind the head, keeping the others in order.
    fn squeeze(&mut self) {
        let cap = self.ring.len();
        let mut kept = 0;
        for k in 0..self.count {
            let e = self.ring[(self.head + k) % cap];
            if !e.3 {
                self.ring[(self.head + kept) % cap] = e;
                kept += 1;
            }
        }
        self.count = kept;
    }

    /// Pops the completed writes at the head and publishes the new position.
    fn advance(&mut self) {
        let cap = self.ring.len();
        while self.count > 0 && self.ring[self.head].3 {
            self.head = (self.head + 1) % cap;
            self.count -= 1;
        }
        let pos = if self.count > 0 {
            self.ring[self.head].1
        } else {
            self.submitted
        };
        if pos > self.pos {
            self.pos = pos;
            if let Some(d) = self.live.done.get(self.index) {
                d.store(self.base + pos, Ordering::Release);
            }
        }
    }
}

impl BlockHook for ProgressHook {
    fn before_write(&mut self, buf: &mut [u8], offset: u64) {
        if let Some(h) = self.inner.as_mut() {
            h.before_write(buf, offset);
        }
        if self.stalled {
            return;
        }
        if self.count == self.ring.len() {
            self.squeeze();
        }
        let Ok(len) = u32::try_from(buf.len()) else {
            self.stalled = true;
            return;
        };
        if self.count == self.ring.len() || len == 0 {
            // More in flight than the iodepth, or an empty write: stop tracking.
            self.stalled = true;
            return;
        }
        let cap = self.ring.len();
        self.ring[(self.head + self.count) % cap] = (offset, self.submitted, len, false);
        self.count += 1;
        self.submitted += len as u64;
    }
    fn after_read(&mut self, buf: &[u8], offset: u64) {
        if let Some(h) = self.inner.as_mut() {
            h.after_read(buf, offset);
        }
    }
    fn after_write(&mut self, offset: u64, len: usize, ok: bool) {
        // The inner hook (generation map) first: the position never runs ahead of the map.
        if let Some(h) = self.inner.as_mut() {
            h.after_write(offset, len, ok);
        }
        if self.stalled {
            return;
        }
        if !ok {
            // The position is already the oldest write in flight's start, at or before this
            // one's; it stays there.
            self.stalled = true;
            return;
        }
        let cap = self.ring.len();
        // The oldest write in flight at this offset (a short stripe may have two).
        let hit = (0..self.count)
            .map(|k| (self.head + k) % cap)
            .find(|&j| self.ring[j].0 == offset && !self.ring[j].3);
        let Some(j) = hit else {
            self.stalled = true;
            return;
        };
        self.ring[j].3 = true;
        if j == self.head {
            self.advance();
        }
    }
    fn read_failed(&mut self, offset: u64, len: usize, errno: i32) {
        if let Some(h) = self.inner.as_mut() {
            h.read_failed(offset, len, errno);
        }
    }
}

/// A target's data-verification state: the generation map its workers stamp and check
/// (shared, lock-free: each worker owns a disjoint stripe), and the mismatch counters.
#[derive(Debug, Clone)]
pub struct VerifyCtx {
    pub map: Arc<GenMap>,
    pub counters: Arc<VerifyCounters>,
}

/// One worker's rates (read IOPS, write IOPS, read and write bytes per second) over the
/// intervals its reports cover, measured by the worker's own clock: the operations a report
/// adds over the real length of the interval it covers. A report covering less than the
/// minimum span (a short final tail, or one right after another) is folded into the next, so
/// no rate divides a few operations by a tiny time.
#[derive(Debug, Clone, Default)]
struct RateWindow {
    /// Start of the span not yet turned into a rate, and the worker's counters then.
    base: Option<(Instant, [u64; 4])>,
    rates: [f64; 4],
}

impl RateWindow {
    fn update(&mut self, r: &WorkerReport, min_span: Duration) {
        let cum = [r.read.ops, r.write.ops, r.read.bytes, r.write.bytes];
        // A worker's counters start at zero with its first interval.
        let start = r.ended.checked_sub(r.interval).unwrap_or(r.ended);
        let (t0, c0) = *self.base.get_or_insert((start, [0; 4]));
        let span = r.ended.saturating_duration_since(t0);
        if span.is_zero() || span < min_span {
            return;
        }
        let secs = span.as_secs_f64();
        for (rate, (c, b)) in self.rates.iter_mut().zip(cum.iter().zip(c0)) {
            *rate = c.saturating_sub(b) as f64 / secs;
        }
        self.base = Some((r.ended, cum));
    }
}

/// Rounds of steady-state history kept for the checkpoint.
const STEADY_HISTORY_MAX: usize = 256;

impl TargetSnapshot {
    /// Seconds into the current phase, counting earlier runs.
    pub fn phase_elapsed_secs(&self) -> f64 {
        if self.running {
            self.phase_elapsed_base + (now_unix() - self.phase_started_unix).max(0.0)
        } else {
            self.phase_elapsed_base
        }
    }

    /// Soak totals: the checkpoint's plus this run's.
    pub fn soak_totals(&self) -> crate::state::Totals {
        let (r, w) = self.totals();
        let mut t = self.carried.clone();
        t.read_bytes += r.bytes;
        t.write_bytes += w.bytes;
        t.read_ops += r.ops;
        t.write_ops += w.ops;
        t.errors += r.errors.total() + w.errors.total();
        t.soak_elapsed_secs += self.run_secs_at(now_unix());
        t
    }

    /// Seconds the soak clock of this run shows at unix time `now`.
    pub fn run_secs_at(&self, now: f64) -> f64 {
        self.run_secs_base + self.run_since.map_or(0.0, |t| (now - t).max(0.0))
    }

    /// Stops the soak clock at `now` (the plan finished or stopped, or the device went away).
    pub fn pause_clock(&mut self, now: f64) {
        if let Some(t) = self.run_since.take() {
            self.run_secs_base += (now - t).max(0.0);
        }
    }

    /// Starts the soak clock again at `now` (the device is back).
    pub fn resume_clock(&mut self, now: f64) {
        self.run_since.get_or_insert(now);
    }

    /// Ends a job's segment: its interval figures are no longer current.
    fn deactivate_job(&mut self, job: &str) {
        if let Some(j) = self.jobs.get_mut(job) {
            j.active = false;
            j.read_iops = 0.0;
            j.write_iops = 0.0;
            j.read_bw = 0.0;
            j.write_bw = 0.0;
            j.read_q = None;
            j.write_q = None;
        }
        self.iops = self.jobs.values().map(|j| j.read_iops + j.write_iops).sum();
    }

    /// The checkpoint record of this target.
    pub fn to_state(&self) -> crate::state::TargetState {
        let mut st = crate::state::TargetState::new(&self.name, &self.path);
        st.phase_index = self.phase_index;
        st.phase_elapsed_secs = self.phase_elapsed_secs();
        st.loop_count = self.loop_count;
        st.soak_started = self.soak_started;
        st.totals = self.soak_totals();
        st.steady_history = self.steady_history.clone();
        st.smart_at_soak_start = self.smart_at_soak_start.clone();
        st.precondition = self.precondition.as_ref().map(|p| p.progress());
        st.sweep = self.sweep_progress.clone();
        st.host_at_soak_start = self.drive.host_at_soak_start;
        st.drive_throttle_episodes = self.drive.episodes();
        if let Some(v) = &self.verify {
            st.totals.verify_errors = v.counters.total();
            st.totals.verify_errors_by_kind = v
                .counters
                .by_label()
                .iter()
                .map(|(k, n)| (k.to_string(), *n))
                .collect();
            st.verify_seed = Some(v.map.seed());
        }
        st
    }

    pub fn totals(&self) -> (OpCounters, OpCounters) {
        let mut r = OpCounters::default();
        let mut w = OpCounters::default();
        for j in self.jobs.values() {
            r.merge(&j.read);
            w.merge(&j.write);
        }
        (r, w)
    }
}

pub type SharedSnapshot = Arc<RwLock<TargetSnapshot>>;

/// A running target.
pub struct TargetHandle {
    pub name: String,
    pub snapshot: SharedSnapshot,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl TargetHandle {
    pub fn request_stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
    }
    /// Stop and wait for the target's workers to drain.
    pub fn join(mut self) {
        self.request_stop();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
    pub fn is_finished(&self) -> bool {
        self.thread.as_ref().is_none_or(|t| t.is_finished())
    }
}

/// Options shared by every target.
#[derive(Debug, Clone)]
pub struct RunOptions {
    pub stats_interval: Duration,
    /// Where `results/<target>.json` is written.
    pub state_dir: PathBuf,
}

pub fn now_unix() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

fn read_snapshot(s: &SharedSnapshot) -> TargetSnapshot {
    match s.read() {
        Ok(g) => g.clone(),
        Err(p) => p.into_inner().clone(),
    }
}

fn with_snapshot(s: &SharedSnapshot, f: impl FnOnce(&mut TargetSnapshot)) {
    match s.write() {
        Ok(mut g) => f(&mut g),
        Err(p) => f(&mut p.into_inner()),
    }
}

/// Open (and for files create and preallocate) the target. Returns the fd, the usable size, and
/// whether it is a block device.
pub fn open_target(spec: &TargetSpec, writes: bool) -> Result<OpenedTarget, TargetError> {
    let open_err = |error| TargetError::Open {
        target: spec.name.clone(),
        path: spec.path.clone(),
        error,
    };
    let is_block = std::fs::metadata(&spec.path)
        .map(|m| m.file_type().is_block_device())
        .unwrap_or(false);
    let mut identity = None;
    if is_block && !writes {
        identity = crate::safety::identify(&spec.path).ok();
    }
    if is_block && writes {
        let id = crate::safety::check_writable(
            &spec.path,
            spec.allow_destroy.as_deref(),
            spec.force_overwrite_signatures,
        )
        .map_err(|e| TargetError::Refused {
            target: spec.name.clone(),
            reason: e.to_string(),
        })?;
        for sig in &id.signatures {
            tracing::warn!(target_name = %spec.name, path = %spec.path.display(), signature = %sig,
                "force_overwrite_signatures: about to destroy this signature");
        }
        identity = Some(id);
    }
    let mut oo = OpenOptions::new();
    oo.read(true);
    if writes || !is_block {
        oo.write(true);
    }
    if !is_block {
        oo.create(true);
        if let Some(dir) = spec.path.parent()
            && !dir.as_os_str().is_empty()
        {
            std::fs::create_dir_all(dir).map_err(open_err)?;
        }
    }
    if spec.direct {
        oo.custom_flags(libc::O_DIRECT);
    }
    let mut f: File = oo.open(&spec.path).map_err(|error| {
        // tmpfs before Linux 6.6 refuses O_DIRECT with EINVAL: say what to change.
        match spec
            .direct
            .then(|| super::odirect::explain_open_error(&spec.path, &error))
            .flatten()
        {
            Some(reason) => TargetError::Refused {
                target: spec.name.clone(),
                reason,
            },
            None => open_err(error),
        }
    })?;
    let size = if is_block {
        f.seek(SeekFrom::End(0)).map_err(open_err)?
    } else {
        let size = spec.size.unwrap_or(0);
        let cur = f.metadata().map_err(open_err)?.len();
        if cur < size || !fully_allocated(&f, size) {
            preallocate(&f, size).map_err(|error| TargetError::Prealloc {
                target: spec.name.clone(),
                path: spec.path.clone(),
                size,
                error,
            })?;
        }
        size
    };
    Ok(OpenedTarget {
        fd: OwnedFd::from(f),
        size,
        is_block,
        identity,
    })
}

/// An opened target.
pub struct OpenedTarget {
    pub fd: OwnedFd,
    pub size: u64,
    pub is_block: bool,
    /// Block devices: who they are, to recognise the same device when it comes back.
    pub identity: Option<crate::safety::DeviceIdentity>,
}

fn fully_allocated(f: &File, size: u64) -> bool {
    use std::os::unix::fs::MetadataExt;
    f.metadata()
        .map(|m| m.blocks() * 512 >= size)
        .unwrap_or(false)
}

fn preallocate(f: &File, size: u64) -> std::io::Result<()> {
    use std::os::fd::AsFd;
    if size == 0 {
        return Ok(());
    }
    let len = i64::try_from(size).map_err(|_| std::io::Error::from_raw_os_error(libc::EFBIG))?;
    nix::fcntl::posix_fallocate(f.as_fd(), 0, len).map_err(std::io::Error::from)
}

/// Whether any phase of the plan writes.
pub fn plan_writes(spec: &TargetSpec) -> bool {
    spec.phases.iter().any(|p| match p {
        PhaseSpec::Precondition { .. } => true,
        PhaseSpec::Sweep { job, .. } => job.read_pct < 100,
        PhaseSpec::Soak { jobs, .. } => jobs.iter().any(|j| j.read_pct < 100),
    })
}

/// Start a target: opens it on the calling thread (so refusals surface at start), then runs its
/// plan on a new thread.
pub fn start(
    spec: TargetSpec,
    opts: RunOptions,
    global_stop: Arc<AtomicBool>,
    resume: Option<crate::state::TargetState>,
    resume_genmap: Option<GenMap>,
) -> Result<TargetHandle, TargetError> {
    let OpenedTarget {
        fd,
        size,
        is_block,
        identity,
    } = open_target(&spec, plan_writes(&spec))?;
    let align: u64 = 1 << 20;
    let mut region_len = ((size as f64 * spec.region.0) as u64).min(size);
    if region_len >= align {
        region_len -= region_len % align;
    } else {
        region_len -= region_len % 4096;
    }
    if region_len == 0 {
        return Err(TargetError::EmptyRegion {
            target: spec.name.clone(),
            path: spec.path.clone(),
            size,
        });
    }
    let now = now_unix();
    let mut snap = TargetSnapshot {
        name: spec.name.clone(),
        path: spec.path.display().to_string(),
        is_block,
        up: true,
        running: true,
        started_at: now,
        run_since: Some(now),
        phase_started_unix: now,
        soak_started: Some(now),
        ..Default::default()
    };
    let mut resume_at = None;
    if let Some(r) = &resume {
        {
            snap.carried = r.totals.clone();
            snap.loop_count = r.loop_count;
            snap.soak_started = r.soak_started.or(Some(now));
            snap.steady_history = r.steady_history.clone();
            snap.smart_at_soak_start = r.smart_at_soak_start.clone();
            snap.drive.host_at_soak_start = r.host_at_soak_start;
            snap.drive.episodes_carried = r.drive_throttle_episodes;
            snap.phase_index = r.phase_index;
            snap.phase_elapsed_base = r.phase_elapsed_secs;
            resume_at = Some((r.phase_index, r.phase_elapsed_secs));
            tracing::info!(target_name = %spec.name, phase = r.phase_index,
                elapsed_secs = r.phase_elapsed_secs, written = r.totals.write_bytes,
                "resuming from the checkpoint");
        }
    }
    if spec.verify != VerifyMode::Off {
        check_verify_block_sizes(&spec)?;
        let counters = Arc::new(VerifyCounters::default());
        let seed = resume.as_ref().and_then(|r| r.verify_seed);
        let map = match (resume_genmap, seed) {
            (Some(m), Some(seed)) if m.seed() == seed && m.covers(0, region_len as usize) => {
                tracing::info!(target_name = %spec.name, written_units = m.written_units(),
                    "verification resumes with the checkpoint's generation map");
                m
            }
            _ => GenMap::new(0, region_len, crate::workload::pattern::new_seed()),
        };
        if let Some(r) = &resume {
            counters.restore(&r.totals.verify_errors_by_kind);
        }
        tracing::info!(target_name = %spec.name, mode = ?spec.verify,
            map_bytes = map.memory_bytes(), "data verification on");
        snap.verify = Some(VerifyCtx {
            map: Arc::new(map),
            counters,
        });
    }
    let live = snap.live.clone();
    let snapshot: SharedSnapshot = Arc::new(RwLock::new(snap));
    let stop = Arc::new(AtomicBool::new(false));
    let mut results = TargetResults {
        version: crate::workload::results::RESULTS_VERSION,
        host: hostname(),
        target: spec.name.clone(),
        path: spec.path.display().to_string(),
        ..Default::default()
    };
    let mut max_iops = BTreeMap::new();
    if resume.is_some()
        && let Some(prev) = load_results(&opts.state_dir, &spec.name)
    {
        // A resumed plan keeps what its earlier runs measured (sweeps, steady state), and the
        // maxima they found, as a run without the restart would have.
        for sw in prev.sweeps.iter().filter(|sw| !sw.points.is_empty()) {
            max_iops.insert(sw.profile.clone(), sw.max_iops);
        }
        results = TargetResults {
            version: results.version,
            host: results.host,
            path: results.path,
            ..prev
        };
    }
    let mut runner = Runner {
        spec: spec.clone(),
        fd: Arc::new(fd),
        region_len,
        opts,
        snapshot: snapshot.clone(),
        stop: stop.clone(),
        global_stop,
        results,
        max_iops,
        segment_counter: 0,
        resume_at,
        resume_precondition: resume.as_ref().and_then(|r| r.precondition.clone()),
        resume_sweep: resume.as_ref().and_then(|r| r.sweep.clone()),
        identity,
        in_verify_pass: false,
        last_results_save: Instant::now(),
        live,
    };
    let thread = std::thread::Builder::new()
        .name(format!("sched-{}", spec.name))
        .spawn(move || runner.run())
        .map_err(|error| TargetError::Open {
            target: spec.name.clone(),
            path: spec.path.clone(),
            error,
        })?;
    Ok(TargetHandle {
        name: spec.name,
        snapshot,
        stop,
        thread: Some(thread),
    })
}

/// Which verification a segment's workers do.
#[derive(Debug, Clone, Copy, PartialEq)]
enum HookMode {
    /// Stamp writes and check every read (`inline`, and the sweeps of `pass`).
    Full,
    /// Stamp writes only (the workload under `pass`).
    StampOnly,
}

/// Stamps writes through the generation map without checking reads.
struct StampOnly(VerifyHook);

impl BlockHook for StampOnly {
    fn before_write(&mut self, buf: &mut [u8], offset: u64) {
        self.0.before_write(buf, offset);
    }
    fn after_write(&mut self, offset: u64, len: usize, ok: bool) {
        self.0.after_write(offset, len, ok);
    }
}

/// With verification on, every block size must be whole 4 KiB verify units.
fn check_verify_block_sizes(spec: &TargetSpec) -> Result<(), TargetError> {
    let mut sizes: Vec<u32> = Vec::new();
    for p in &spec.phases {
        match p {
            PhaseSpec::Precondition { block_size, .. } => sizes.push(*block_size),
            PhaseSpec::Sweep { job, .. } => sizes.extend(job.bs.entries.iter().map(|e| e.0)),
            PhaseSpec::Soak { jobs, .. } => {
                for j in jobs {
                    sizes.extend(j.bs.entries.iter().map(|e| e.0));
                }
            }
        }
    }
    if let Some(bad) = sizes
        .iter()
        .find(|b| !(**b as usize).is_multiple_of(VERIFY_UNIT))
    {
        return Err(TargetError::Refused {
            target: spec.name.clone(),
            reason: format!(
                "verify needs block sizes that are multiples of 4k, and a job uses {bad} bytes; change the job's bs or set verify = \"off\""
            ),
        });
    }
    Ok(())
}

/// Fold a stopped target's latest drive figures and identity into its results file. The daemon
/// calls this after its final health poll at shutdown, once the target's thread (the file's
/// writer while it runs) has ended. Returns whether the file was rewritten.
pub fn refresh_results_drive(state_dir: &Path, snap: &TargetSnapshot) -> bool {
    let Some(fig) = &snap.drive.figures else {
        return false;
    };
    let Some(mut r) = load_results(state_dir, &snap.name) else {
        return false;
    };
    let Some(soak) = r.soak.as_mut() else {
        return false;
    };
    soak.set_drive(fig.clone());
    if let Some(id) = &snap.drive.identity {
        r.device = Some(id.clone());
    }
    let path = state_dir
        .join("results")
        .join(format!("{}.json", snap.name));
    match serde_json::to_vec_pretty(&r).map_err(std::io::Error::from) {
        Ok(data) => match write_atomic(&path, &data) {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "writing results failed");
                false
            }
        },
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "encoding results failed");
            false
        }
    }
}

/// The results file an earlier run of this plan wrote for `target`, if it is readable.
fn load_results(state_dir: &Path, target: &str) -> Option<TargetResults> {
    let path = state_dir.join("results").join(format!("{target}.json"));
    let data = match std::fs::read(&path) {
        Ok(d) => d,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e,
                "reading the earlier results failed; this run's results file starts empty");
            return None;
        }
    };
    match serde_json::from_slice::<TargetResults>(&data) {
        Ok(r) if r.target == target => Some(r),
        Ok(r) => {
            tracing::warn!(path = %path.display(), found = %r.target,
                "the results file names another target; this run's results file starts empty");
            None
        }
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e,
                "the earlier results file does not parse; this run's results file starts empty");
            None
        }
    }
}

pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

/// What one run segment measured.
#[derive(Debug, Clone, Default)]
struct SegmentOutcome {
    ops: u64,
    bytes: u64,
    errors: u64,
    secs: f64,
    lat_avg_us: f64,
    q_us: [f64; 4],
    /// Why it ended early, if it did.
    fatal: Option<String>,
    /// The device went away (ENODEV/ENXIO, or its node vanished) during the segment.
    device_gone: bool,
}

struct Segment<'a> {
    job: &'a JobSpec,
    rate_iops: Option<f64>,
    duration: Option<Duration>,
    /// Stop each worker after this many passes over its stripe (preconditioning, verify
    /// sweeps); `None`: run for `duration`.
    limit_passes: Option<u32>,
    /// Preconditioning: each worker starts where this says its stripe's walk got to, writes
    /// only the rest of its `limit_passes` passes, and records its progress here.
    progress: Option<Arc<PrecondLive>>,
}

struct Runner {
    spec: TargetSpec,
    fd: Arc<OwnedFd>,
    region_len: u64,
    opts: RunOptions,
    snapshot: SharedSnapshot,
    stop: Arc<AtomicBool>,
    global_stop: Arc<AtomicBool>,
    results: TargetResults,
    /// Max IOPS measured per job name (sweep uncontrolled runs and calibrations).
    max_iops: BTreeMap<String, f64>,
    segment_counter: u64,
    /// (phase index, seconds already done) from the checkpoint, consumed by the first pass.
    resume_at: Option<(usize, f64)>,
    /// The checkpoint's progress in that phase, when it is a precondition or a sweep.
    resume_precondition: Option<PreconditionProgress>,
    resume_sweep: Option<SweepResult>,
    identity: Option<crate::safety::DeviceIdentity>,
    /// Set while a `pass` verification sweep runs.
    in_verify_pass: bool,
    last_results_save: Instant,
    /// The snapshot's live counters, handed to each worker.
    live: Arc<crate::stats::live::LiveIo>,
}

/// How often a running soak refreshes its results file.
const RESULTS_SAVE_INTERVAL: Duration = Duration::from_secs(60);

/// How often a long soak under `verify = "pass"` pauses for a verification sweep.
pub const VERIFY_PASS_INTERVAL: Duration = Duration::from_secs(3600);

impl Runner {
    fn hook_mode(&self) -> Option<HookMode> {
        match self.spec.verify {
            VerifyMode::Off => None,
            VerifyMode::Inline => Some(HookMode::Full),
            VerifyMode::Pass if self.in_verify_pass => Some(HookMode::Full),
            VerifyMode::Pass => Some(HookMode::StampOnly),
        }
    }

    /// `verify = "pass"`: read the whole region sequentially, checking every block written.
    fn verify_pass(&mut self) -> Result<(), String> {
        if self.spec.verify != VerifyMode::Pass || self.stopping() {
            return Ok(());
        }
        let job = JobSpec {
            name: "verify-pass".into(),
            description: "verification sweep: sequential 128k reads over the region, every written block checked".into(),
            read_pct: 100,
            bs: BlockSizeMix::single(128 * 1024),
            access: Access::Sequential,
            iodepth: 16,
            workers: 1,
            rate: None,
        };
        let prev_profile = read_snapshot(&self.snapshot).profile;
        self.in_verify_pass = true;
        let r = self.run_segment(
            Segment {
                job: &job,
                rate_iops: None,
                duration: None,
                limit_passes: Some(1),
                progress: None,
            },
            &mut |_, _| {},
        );
        self.in_verify_pass = false;
        with_snapshot(&self.snapshot, |s| s.profile = prev_profile);
        let o = r?;
        tracing::info!(target_name = %self.spec.name, bytes = o.bytes,
            mismatches = read_snapshot(&self.snapshot).verify.map(|v| v.counters.total()).unwrap_or(0),
            "verification pass finished");
        match o.fatal {
            Some(f) => Err(f),
            None => Ok(()),
        }
    }

    fn stopping(&self) -> bool {
        self.stop.load(Ordering::SeqCst) || self.global_stop.load(Ordering::SeqCst)
    }

    fn run(&mut self) {
        let mut loop_count = read_snapshot(&self.snapshot).loop_count;
        if let Some((ri, _)) = self.resume_at
            && ri >= self.spec.phases.len()
        {
            self.resume_at = None;
            if !self.spec.loop_phases {
                tracing::info!(target_name = %self.spec.name,
                        "the checkpoint says this plan already finished; nothing to run (nvsoak state reset starts over)");
                self.finish();
                return;
            }
        }
        'plan: loop {
            for (i, phase) in self.spec.phases.clone().iter().enumerate() {
                if self.stopping() {
                    break 'plan;
                }
                let mut done_secs = 0.0;
                let mut cp_precondition = None;
                let mut cp_sweep = None;
                if let Some((ri, el)) = self.resume_at {
                    if i < ri {
                        continue;
                    }
                    // Every phase resumes where the checkpoint says it got to: a soak with the
                    // time it has left, a precondition at each worker's position, a sweep at
                    // its first point not completed.
                    if i == ri {
                        done_secs = el;
                        cp_precondition = self.resume_precondition.take();
                        cp_sweep = self.resume_sweep.take();
                    }
                    self.resume_at = None;
                }
                // Set up the phase's progress before the snapshot names the phase, so that no
                // checkpoint sees the phase without it.
                let precond_live = match phase {
                    PhaseSpec::Precondition {
                        passes,
                        block_size,
                        iodepth,
                        workers,
                    } => Some(self.precondition_live(
                        &precondition_job(*passes, *block_size, *iodepth, *workers),
                        *passes,
                        *block_size,
                        cp_precondition,
                    )),
                    _ => None,
                };
                let sweep_resume = match phase {
                    PhaseSpec::Sweep { job, points, .. } => {
                        self.sweep_resume(job, points, cp_sweep)
                    }
                    _ => None,
                };
                with_snapshot(&self.snapshot, |s| {
                    s.phase_index = i;
                    s.phase = phase.kind().to_string();
                    s.phase_started_unix = now_unix();
                    s.phase_elapsed_base = done_secs;
                    s.precondition = precond_live.clone();
                    s.sweep_progress = sweep_resume.clone();
                    if done_secs == 0.0 {
                        s.steady_history.clear();
                    }
                });
                let r = match phase {
                    PhaseSpec::Precondition {
                        passes,
                        block_size,
                        iodepth,
                        workers,
                    } => self.precondition(
                        &precondition_job(*passes, *block_size, *iodepth, *workers),
                        *passes,
                        precond_live.clone(),
                    ),
                    PhaseSpec::Sweep {
                        job,
                        max_duration,
                        point_duration,
                        points,
                    } => self.sweep(job, *max_duration, *point_duration, points, sweep_resume),
                    PhaseSpec::Soak {
                        jobs,
                        duration,
                        rotate,
                        steady,
                    } => self.soak(
                        jobs,
                        duration.map(|d| d.saturating_sub(Duration::from_secs_f64(done_secs))),
                        *rotate,
                        steady,
                    ),
                };
                if let Err(reason) = r {
                    tracing::error!(target_name = %self.spec.name, %reason, "target stopped");
                    with_snapshot(&self.snapshot, |s| {
                        s.up = false;
                        s.stop_reason = Some(reason);
                    });
                    break 'plan;
                }
            }
            if self.stopping() {
                break;
            }
            loop_count += 1;
            with_snapshot(&self.snapshot, |s| s.loop_count = loop_count);
            if !self.spec.loop_phases {
                // Finished: a checkpoint now points past the last phase.
                with_snapshot(&self.snapshot, |s| {
                    s.phase_index = self.spec.phases.len();
                    s.phase_elapsed_base = 0.0;
                });
                break;
            }
            tracing::info!(target_name = %self.spec.name, loop_count, "plan finished; looping");
        }
        self.finish();
    }

    fn finish(&mut self) {
        with_snapshot(&self.snapshot, |s| {
            s.running = false;
            s.pause_clock(now_unix());
            let names: Vec<String> = s.jobs.keys().cloned().collect();
            for n in names {
                s.deactivate_job(&n);
            }
        });
        self.save_results();
        tracing::info!(target_name = %self.spec.name, "target finished");
    }

    fn precondition(
        &mut self,
        job: &JobSpec,
        passes: u32,
        live: Option<Arc<PrecondLive>>,
    ) -> Result<(), String> {
        if live.as_ref().is_none_or(|l| !l.progress().is_complete()) {
            let out = self.run_segment(
                Segment {
                    job,
                    rate_iops: None,
                    duration: None,
                    limit_passes: Some(passes),
                    progress: live,
                },
                &mut |_, _| {},
            )?;
            if let Some(f) = out.fatal {
                return Err(f);
            }
        }
        self.verify_pass()
    }

    /// `(region_start, region_len, workers)` that worker `index` of `job` is planned with: with
    /// verification each worker gets its own stripe as a single-worker region.
    fn worker_region(&self, job: &JobSpec, index: usize, verify: bool) -> (u64, u64, u32) {
        let workers = job.workers.max(1);
        if verify && workers > 1 {
            let (start, len) = worker::stripe_bounds(
                0,
                self.region_len,
                workers,
                index,
                (VERIFY_UNIT as u64).max(job.bs.max() as u64),
            );
            (start, len, 1)
        } else {
            (0, self.region_len, job.workers)
        }
    }

    /// The sequential stripe `(start, len)` worker `index` of `job` walks.
    fn worker_stripe(&self, job: &JobSpec, index: usize, verify: bool) -> (u64, u64) {
        let (start, len, workers) = self.worker_region(job, index, verify);
        worker::stripe_bounds(start, len, workers, index, worker::job_align(job))
    }

    /// The precondition's progress for this run: the checkpoint's positions when they fit this
    /// plan and region (logged), else from the start.
    fn precondition_live(
        &self,
        job: &JobSpec,
        passes: u32,
        block_size: u32,
        resume: Option<PreconditionProgress>,
    ) -> Arc<PrecondLive> {
        let verify = self.spec.verify != VerifyMode::Off;
        let stripes: Vec<(u64, u64)> = (0..job.workers.max(1) as usize)
            .map(|i| self.worker_stripe(job, i, verify))
            .collect();
        let mut done = vec![0u64; stripes.len()];
        if let Some(p) = resume {
            let fits = p.passes == passes
                && p.block_size == block_size
                && p.stripes.len() == stripes.len()
                && p.stripes
                    .iter()
                    .zip(&stripes)
                    .all(|(a, b)| (a.start, a.len) == *b);
            if fits {
                for (d, sp) in done.iter_mut().zip(&p.stripes) {
                    *d = sp.clamped_done(passes, block_size);
                }
                let offsets: Vec<String> =
                    p.worker_offsets().iter().map(|o| o.to_string()).collect();
                tracing::info!(target_name = %self.spec.name,
                    done_bytes = p.done_bytes(), total_bytes = p.total_bytes(),
                    "precondition resumes at {}; worker offsets {}",
                    p.describe(), offsets.join(", "));
            } else {
                tracing::warn!(target_name = %self.spec.name,
                    "the checkpoint's precondition progress does not fit this region (size or workers changed); the precondition starts over");
            }
        }
        Arc::new(PrecondLive {
            passes,
            block_size,
            stripes,
            done: done.into_iter().map(AtomicU64::new).collect(),
        })
    }

    /// The sweep to continue, if an earlier run got past its uncontrolled run: the checkpoint's,
    /// or the results file's record of it when that has more points (the file is written after
    /// every point, the checkpoint only every interval), or an unfinished sweep of this job in
    /// the results file (killed before a checkpoint recorded it).
    fn sweep_resume(
        &self,
        job: &JobSpec,
        points: &[u32],
        cp: Option<SweepResult>,
    ) -> Option<SweepResult> {
        let found = earlier_sweep(&self.results.sweeps, job, cp)?;
        if !sweep_fits(&found, job, points) {
            tracing::warn!(target_name = %self.spec.name, job = %job.name,
                "the earlier sweep's points do not match this plan; the sweep starts over");
            return None;
        }
        Some(found)
    }

    fn sweep(
        &mut self,
        job: &JobSpec,
        max_duration: Duration,
        point_duration: Duration,
        points: &[u32],
        resumed: Option<SweepResult>,
    ) -> Result<(), String> {
        let mut result;
        let max_iops;
        match resumed {
            Some(r) => {
                // The earlier run's maximum and completed points stand; the point that was
                // interrupted runs again from its start.
                result = r;
                max_iops = result.max_iops;
                self.max_iops.insert(job.name.clone(), max_iops);
                let next = result.points.len();
                if next <= points.len() {
                    tracing::info!(target_name = %self.spec.name, job = %job.name,
                        "sweep resumes at point {next} of {} (max {} IOPS from the earlier run)",
                        points.len(), thousands(max_iops));
                } else {
                    tracing::info!(target_name = %self.spec.name, job = %job.name,
                        "sweep resumes after its last point (all {} done; max {} IOPS from the earlier run)",
                        points.len(), thousands(max_iops));
                }
            }
            None => {
                result = SweepResult {
                    profile: job.name.clone(),
                    block_size: job.bs.mean(),
                    read_pct: job.read_pct,
                    started: now_unix(),
                    ..Default::default()
                };
                let (max, m) = self.measure_max(job, max_duration)?;
                max_iops = m;
                result.max_iops = max_iops;
                result.points.push(point_from(0, 0.0, &max));
            }
        }
        self.publish_sweep(job, &result);
        let done = result.points.len().saturating_sub(1).min(points.len());
        for &pct in &points[done..] {
            if self.stopping() {
                break;
            }
            let target_iops = max_iops * pct as f64 / 100.0;
            let o = self.run_segment(
                Segment {
                    job,
                    rate_iops: Some(target_iops.max(1.0)),
                    duration: Some(point_duration),
                    limit_passes: None,
                    progress: None,
                },
                &mut |_, _| {},
            )?;
            if let Some(f) = o.fatal {
                return Err(f);
            }
            result.points.push(point_from(pct, target_iops, &o));
            self.publish_sweep(job, &result);
        }
        result.finished = Some(now_unix());
        self.publish_sweep(job, &result);
        if job.read_pct < 100 {
            self.verify_pass()?;
        }
        Ok(())
    }

    fn publish_sweep(&mut self, job: &JobSpec, result: &SweepResult) {
        with_snapshot(&self.snapshot, |s| {
            s.jobs.entry(job.name.clone()).or_default().sweep = Some(result.clone());
            s.sweep_progress = Some(result.clone());
        });
        if let Some(r) = self
            .results
            .sweeps
            .iter_mut()
            .find(|r| r.started == result.started)
        {
            *r = result.clone();
        } else {
            self.results.sweeps.push(result.clone());
        }
        self.save_results();
    }

    fn soak(
        &mut self,
        jobs: &[JobSpec],
        duration: Option<Duration>,
        rotate: Option<Duration>,
        steady: &SteadyConfig,
    ) -> Result<(), String> {
        let start = Instant::now();
        let resumed_history = read_snapshot(&self.snapshot).steady_history;
        let mut detectors: BTreeMap<String, (SteadyDetector, u64, Instant)> = BTreeMap::new();
        let mut idx = 0usize;
        loop {
            if self.stopping() {
                return Ok(());
            }
            let remaining = duration.map(|d| d.saturating_sub(start.elapsed()));
            if remaining == Some(Duration::ZERO) {
                return Ok(());
            }
            let job = &jobs[idx % jobs.len()];
            idx += 1;
            let seg_dur = match (remaining, rotate.filter(|_| jobs.len() > 1)) {
                (Some(r), Some(rot)) => Some(r.min(rot)),
                (Some(r), None) => Some(r),
                (None, Some(rot)) => Some(rot),
                (None, None) => None,
            };
            let seg_dur = if self.spec.verify == VerifyMode::Pass && job.read_pct < 100 {
                Some(seg_dur.map_or(VERIFY_PASS_INTERVAL, |d| d.min(VERIFY_PASS_INTERVAL)))
            } else {
                seg_dur
            };
            let rate_iops = self.resolve_rate(job)?;
            let name = job.name.clone();
            let det = detectors.entry(name.clone()).or_insert_with(|| {
                let mut d = SteadyDetector::new(steady.clone());
                // A resumed single-job soak continues its steady-state window.
                if jobs.len() == 1 {
                    for v in &resumed_history {
                        d.push_round(*v, now_unix());
                    }
                }
                (d, 0, Instant::now())
            });
            // A rotation restarts the round clock for this job.
            det.1 = 0;
            det.2 = Instant::now();
            let round = steady.round;
            let snapshot = self.snapshot.clone();
            let mut on_interval = |ops_delta: u64, now: Instant| {
                det.1 += ops_delta;
                let el = now.duration_since(det.2);
                if el >= round {
                    let iops = det.1 as f64 / el.as_secs_f64();
                    let st = det.0.push_round(iops, now_unix());
                    det.1 = 0;
                    det.2 = now;
                    with_snapshot(&snapshot, |s| {
                        s.jobs.entry(name.clone()).or_default().steady = Some(st);
                        s.steady_history.push(iops);
                        if s.steady_history.len() > STEADY_HISTORY_MAX {
                            s.steady_history.remove(0);
                        }
                    });
                }
            };
            let o = self.run_segment(
                Segment {
                    job,
                    rate_iops,
                    duration: seg_dur,
                    limit_passes: None,
                    progress: None,
                },
                &mut on_interval,
            )?;
            if let Some(st) = read_snapshot(&self.snapshot)
                .jobs
                .get(&job.name)
                .and_then(|j| j.steady.clone())
            {
                self.record_steady(&job.name, &st);
            }
            if let Some(f) = o.fatal {
                return Err(f);
            }
            if job.read_pct < 100 {
                self.verify_pass()?;
            }
        }
    }

    fn record_steady(&mut self, profile: &str, st: &SteadyStatus) {
        let out = SteadyOutcome {
            profile: profile.to_string(),
            reached: st.reached,
            round: st.first_round,
            since: st.first_time,
            window: st.window.clone(),
            average: st.average,
            range_ratio: st.range_ratio,
            slope_excursion_ratio: st.slope_excursion_ratio,
        };
        if let Some(e) = self
            .results
            .steady
            .iter_mut()
            .find(|e| e.profile == profile)
        {
            *e = out;
        } else {
            self.results.steady.push(out);
        }
        self.save_results();
    }

    /// Run `job` uncontrolled for `duration` and remember its IOPS as the job's maximum on this
    /// target (the reference for sweep points and percentage rate limits).
    fn measure_max(
        &mut self,
        job: &JobSpec,
        duration: Duration,
    ) -> Result<(SegmentOutcome, f64), String> {
        let uncontrolled = JobSpec {
            rate: None,
            ..job.clone()
        };
        let o = self.run_segment(
            Segment {
                job: &uncontrolled,
                rate_iops: None,
                duration: Some(duration),
                limit_passes: None,
                progress: None,
            },
            &mut |_, _| {},
        )?;
        if let Some(f) = o.fatal {
            return Err(f);
        }
        let max_iops = o.ops as f64 / o.secs.max(1e-9);
        self.max_iops.insert(job.name.clone(), max_iops);
        Ok((o, max_iops))
    }

    /// Turn a job's rate limit into total IOPS for the job.
    fn resolve_rate(&mut self, job: &JobSpec) -> Result<Option<f64>, String> {
        Ok(match &job.rate {
            None => None,
            Some(RateLimit::Iops(v)) => Some(*v),
            Some(RateLimit::BytesPerSec(b)) => Some(b / job.bs.mean().max(512.0)),
            Some(RateLimit::PercentOfMax(p)) => {
                let max = match self.max_iops.get(&job.name) {
                    Some(m) => *m,
                    None => {
                        // No sweep measured this job here: calibrate with a short uncontrolled run.
                        let d = (self.opts.stats_interval * 5).max(Duration::from_secs(5));
                        tracing::info!(target_name = %self.spec.name, job = %job.name, secs = d.as_secs_f64(),
                            "calibrating maximum IOPS for a percentage rate limit");
                        self.measure_max(job, d)?.1
                    }
                };
                Some((max * p / 100.0).max(1.0))
            }
        })
    }

    /// Run one job with its workers until the duration passes, every worker hits its byte limit,
    /// the device goes away, or the target is stopped. `on_interval(ops_delta, now)` runs after
    /// each stats interval.
    fn run_segment_once(
        &mut self,
        seg: Segment<'_>,
        on_interval: &mut dyn FnMut(u64, Instant),
    ) -> Result<SegmentOutcome, String> {
        let job = seg.job;
        let workers = job.workers.max(1) as usize;
        self.segment_counter += 1;
        with_snapshot(&self.snapshot, |s| {
            s.profile = job.name.clone();
            s.jobs.entry(job.name.clone()).or_default().active = true;
        });
        let verify = read_snapshot(&self.snapshot).verify;
        // Bounded: with recycling a worker queues at most MAX_OUTSTANDING reports plus its
        // final one, and sends into a preallocated channel never allocate.
        let (tx, rx) = mpsc::sync_channel::<WorkerReport>(worker::report_capacity(workers));
        let seg_stop = Arc::new(AtomicBool::new(false));
        let mut handles = Vec::with_capacity(workers);
        // Per worker: its used histograms go back to it (no allocation per interval, and the
        // worker coalesces while its reports are still queued).
        let mut recycle: Vec<mpsc::Sender<(Histogram<u64>, Histogram<u64>)>> =
            Vec::with_capacity(workers);
        let base_seed = seed_for(&self.spec.name, self.segment_counter);
        for i in 0..workers {
            let mut plan = WorkerPlan {
                index: i,
                job: job.clone(),
                fd: self.fd.clone(),
                region_start: 0,
                region_len: self.region_len,
                engine: self.spec.engine,
                rate_iops: seg.rate_iops.map(|r| r / workers as f64),
                limit_bytes: None,
                seed: base_seed.wrapping_add(i as u64),
                report_interval: self.opts.stats_interval,
                stop: seg_stop.clone(),
            };
            let (back_tx, back_rx) = mpsc::channel();
            recycle.push(back_tx);
            let mut wopts = WorkerOptions {
                live: Some(self.live.register()),
                recycle: Some(back_rx),
                ..WorkerOptions::default()
            };
            if let (Some(v), Some(mode)) = (&verify, self.hook_mode()) {
                // Workers of a job don't coordinate, so with verification each owns a disjoint
                // stripe of the region (a single-worker view of it).
                (plan.region_start, plan.region_len, plan.job.workers) =
                    self.worker_region(job, i, true);
                let hook = VerifyHook::new(&self.spec.name, v.map.clone(), v.counters.clone(), 512);
                wopts.hook = Some(match mode {
                    HookMode::Full => Box::new(hook) as Box<dyn BlockHook>,
                    HookMode::StampOnly => Box::new(StampOnly(hook)),
                });
            }
            plan.limit_bytes = seg.limit_passes.map(|p| {
                worker::stripe_bounds(
                    plan.region_start,
                    plan.region_len,
                    plan.job.workers,
                    i,
                    worker::job_align(&plan.job),
                )
                .1 * p as u64
            });
            if let Some(pl) = &seg.progress
                && let (Some(&(start, len)), Some(cell), Some(passes)) =
                    (pl.stripes.get(i), pl.done.get(i), seg.limit_passes)
            {
                // Continue this worker's walk where it got to (an earlier run, or before the
                // device went away) and write only the rest of its passes.
                debug_assert_eq!(
                    (start, len),
                    self.worker_stripe(job, i, verify.is_some() && self.hook_mode().is_some())
                );
                let sp = StripeProgress {
                    start,
                    len,
                    done_bytes: cell.load(Ordering::Acquire),
                };
                let (pos, left) = sp.resume_point(passes, pl.block_size);
                wopts.seq_start = pos;
                plan.limit_bytes = Some(left);
                wopts.hook = Some(Box::new(ProgressHook::new(
                    wopts.hook.take(),
                    pl.clone(),
                    i,
                    sp.clamped_done(passes, pl.block_size),
                    job.iodepth,
                )));
            }
            match worker::spawn_with(plan, wopts, tx.clone()) {
                Ok(h) => handles.push(h),
                Err(e) => {
                    seg_stop.store(true, Ordering::SeqCst);
                    for h in handles {
                        let _ = h.join();
                    }
                    return Err(format!("spawning worker thread failed: {e}"));
                }
            }
        }
        drop(tx);

        let base = read_snapshot(&self.snapshot)
            .jobs
            .get(&job.name)
            .map(|j| (j.read.clone(), j.write.clone()))
            .unwrap_or_default();
        let mut last: Vec<Option<(OpCounters, OpCounters)>> = vec![None; workers];
        let mut engine: Option<&'static str> = None;
        let mut seg_read_hist: Histogram<u64> = new_hdr();
        let mut seg_write_hist: Histogram<u64> = new_hdr();
        let mut iv_read_hist: Histogram<u64> = new_hdr();
        let mut iv_write_hist: Histogram<u64> = new_hdr();
        let started = Instant::now();
        let mut last_tick = started;
        let mut last_ops = 0u64;
        // Per worker: its rates over the intervals its reports cover, by its own clock.
        let mut rates = vec![RateWindow::default(); workers];
        let mut done = vec![false; workers];
        let mut stop_sent = false;
        let interval = self.opts.stats_interval;
        let mut fatal: Option<String> = None;
        let mut device_gone = false;
        let mut last_gone_errs = 0u64;

        loop {
            let now = Instant::now();
            let deadline_hit = seg
                .duration
                .is_some_and(|d| now.duration_since(started) >= d);
            if !stop_sent && (deadline_hit || self.stopping() || fatal.is_some() || device_gone) {
                seg_stop.store(true, Ordering::SeqCst);
                stop_sent = true;
            }
            let wait = interval.saturating_sub(now.duration_since(last_tick));
            let wait = match seg.duration {
                Some(d) if !stop_sent => wait.min(d.saturating_sub(now.duration_since(started))),
                _ => wait,
            }
            .max(Duration::from_millis(1));
            let mut take = |r: WorkerReport| {
                if engine.is_none() {
                    engine = Some(r.engine);
                }
                let _ = iv_read_hist.add(&r.read_hist);
                let _ = iv_write_hist.add(&r.write_hist);
                if r.worker < workers {
                    if r.done {
                        done[r.worker] = true;
                    }
                    rates[r.worker].update(&r, interval / 2);
                    last[r.worker] = Some((r.read, r.write));
                    let _ = recycle[r.worker].send((r.read_hist, r.write_hist));
                }
            };
            if let Ok(r) = rx.recv_timeout(wait.min(Duration::from_millis(100))) {
                take(r);
            }
            // Whether every worker has exited is read before the channel is drained, so a
            // worker's last report (sent before it exited) is always taken and counted.
            let finished = handles
                .iter()
                .all(|h: &std::thread::JoinHandle<_>| h.is_finished());
            while let Ok(r) = rx.try_recv() {
                take(r);
            }
            let all_done = done.iter().all(|d| *d) || finished;
            let now = Instant::now();
            if now.duration_since(last_tick) >= interval || all_done {
                // Aggregate cumulative counters of this segment.
                let mut sr = OpCounters::default();
                let mut sw = OpCounters::default();
                for (r, w) in last.iter().flatten() {
                    sr.merge(r);
                    sw.merge(w);
                }
                let el = now.duration_since(last_tick).as_secs_f64().max(1e-9);
                let ops = sr.ops + sw.ops;
                let d_ops = ops - last_ops.min(ops);
                let rq = quantiles(&iv_read_hist);
                let wq = quantiles(&iv_write_hist);
                // Workers still running: a finished one does no more I/O.
                let mut rate = [0.0f64; 4];
                for (w, _) in rates.iter().zip(&done).filter(|(_, d)| !**d) {
                    for (a, b) in rate.iter_mut().zip(w.rates) {
                        *a += b;
                    }
                }
                let mut tr = base.0.clone();
                tr.merge(&sr);
                let mut tw = base.1.clone();
                tw.merge(&sw);
                let name = job.name.clone();
                let eng = engine;
                with_snapshot(&self.snapshot, |s| {
                    if let Some(e) = eng {
                        s.engine = Some(e.to_string());
                    }
                    let j = s.jobs.entry(name).or_default();
                    j.read = tr;
                    j.write = tw;
                    [j.read_iops, j.write_iops, j.read_bw, j.write_bw] = rate;
                    // A tail shorter than half an interval (the segment ended just after a
                    // tick) has too few operations for quantiles: keep the last full interval's.
                    if !(all_done && el < interval.as_secs_f64() / 2.0) {
                        j.read_q = rq;
                        j.write_q = wq;
                    }
                    s.iops = j.read_iops + j.write_iops;
                });
                if let Some(max) = self.spec.max_errors {
                    let all: u64 = read_snapshot(&self.snapshot)
                        .jobs
                        .values()
                        .map(|j| j.read.errors.total() + j.write.errors.total())
                        .sum();
                    if all >= max && fatal.is_none() {
                        fatal = Some(format!(
                            "stopped after {all} I/O errors (max_errors = {max})"
                        ));
                    }
                }
                // ENODEV/ENXIO, or errors while the device node is gone: the device went away.
                let gone_errs: u64 = [&sr, &sw]
                    .iter()
                    .map(|c| c.errors.0[libc::ENODEV as usize] + c.errors.0[libc::ENXIO as usize])
                    .sum();
                let all_errs = sr.errors.total() + sw.errors.total();
                if self.identity.is_some()
                    && !device_gone
                    && (gone_errs > last_gone_errs
                        || (all_errs > 0 && !crate::safety::is_block_device(&self.spec.path)))
                {
                    device_gone = true;
                }
                last_gone_errs = gone_errs;
                if self.last_results_save.elapsed() >= RESULTS_SAVE_INTERVAL {
                    self.save_results();
                }
                if let Some(v) = &verify
                    && self.spec.verify_fatal
                    && fatal.is_none()
                    && v.counters.tripped.load(Ordering::Relaxed)
                {
                    fatal = Some(format!(
                        "data verification failed ({} mismatches; see the log); verify_fatal stops the target",
                        v.counters.total()
                    ));
                }
                on_interval(d_ops, now);
                let _ = seg_read_hist.add(&iv_read_hist);
                let _ = seg_write_hist.add(&iv_write_hist);
                iv_read_hist.reset();
                iv_write_hist.reset();
                last_ops = ops;
                last_tick = now;
            }
            if all_done {
                break;
            }
        }
        let mut worker_fatal = None;
        for h in handles {
            match h.join() {
                Ok(Ok(exit)) => {
                    if let ExitReason::Fatal(m) = exit.reason {
                        worker_fatal = Some(m);
                    }
                }
                Ok(Err(e)) => worker_fatal = Some(e.to_string()),
                Err(_) => worker_fatal = Some("worker thread panicked".into()),
            }
        }
        with_snapshot(&self.snapshot, |s| s.deactivate_job(&job.name));
        let secs = started.elapsed().as_secs_f64();
        let mut sr = OpCounters::default();
        let mut sw = OpCounters::default();
        for (r, w) in last.iter().flatten() {
            sr.merge(r);
            sw.merge(w);
        }
        let ops = sr.ops + sw.ops;
        let mut all_hist = seg_read_hist;
        let _ = all_hist.add(&seg_write_hist);
        let q = quantiles(&all_hist).unwrap_or([0.0; 4]);
        Ok(SegmentOutcome {
            ops,
            bytes: sr.bytes + sw.bytes,
            errors: sr.errors.total() + sw.errors.total(),
            secs,
            lat_avg_us: if ops > 0 {
                (sr.lat_sum_ns + sw.lat_sum_ns) as f64 / ops as f64 / 1000.0
            } else {
                0.0
            },
            q_us: q.map(|s| s * 1e6),
            fatal: if device_gone {
                None
            } else {
                fatal.or(worker_fatal)
            },
            device_gone,
        })
    }

    /// [`Self::run_segment_once`], pausing while the device is gone and resuming on the same
    /// device (checked by serial/WWN) when it returns.
    fn run_segment(
        &mut self,
        seg: Segment<'_>,
        on_interval: &mut dyn FnMut(u64, Instant),
    ) -> Result<SegmentOutcome, String> {
        let started = Instant::now();
        let mut total = SegmentOutcome::default();
        // After the device returns, a precondition continues at its workers' recorded positions
        // (`seg.progress`), a verify sweep starts over, and a timed segment runs for what is
        // left of its duration.
        let limit = seg.limit_passes;
        loop {
            let duration = seg.duration.map(|d| d.saturating_sub(started.elapsed()));
            let o = self.run_segment_once(
                Segment {
                    job: seg.job,
                    rate_iops: seg.rate_iops,
                    duration,
                    limit_passes: limit,
                    progress: seg.progress.clone(),
                },
                on_interval,
            )?;
            let w = total.ops as f64;
            let n = o.ops as f64;
            if w + n > 0.0 {
                total.lat_avg_us = (total.lat_avg_us * w + o.lat_avg_us * n) / (w + n);
                for i in 0..4 {
                    total.q_us[i] = total.q_us[i].max(o.q_us[i]);
                }
            }
            total.ops += o.ops;
            total.bytes += o.bytes;
            total.errors += o.errors;
            total.secs += o.secs;
            total.fatal = o.fatal;
            if !o.device_gone || self.stopping() {
                return Ok(total);
            }
            self.wait_for_device()?;
            if seg.duration.is_some_and(|d| started.elapsed() >= d) {
                return Ok(total);
            }
        }
    }

    /// Pause until the target's device is back (retrying with backoff), then reopen it.
    fn wait_for_device(&mut self) -> Result<(), String> {
        let path = self.spec.path.clone();
        tracing::warn!(target_name = %self.spec.name, path = %path.display(),
            "the target's device went away; pausing the workload and retrying");
        with_snapshot(&self.snapshot, |s| {
            s.up = false;
            // Paused, not running: the stall alert stays quiet, the device-down alert fires.
            s.running = false;
            // The soak clock stops while the device is gone.
            s.pause_clock(now_unix());
            s.stop_reason = Some(format!(
                "{} went away; waiting for it to return",
                path.display()
            ));
            s.iops = 0.0;
            for j in s.jobs.values_mut() {
                j.read_iops = 0.0;
                j.write_iops = 0.0;
                j.read_bw = 0.0;
                j.write_bw = 0.0;
            }
        });
        // Let go of the vanished device: the kernel frees an NVMe controller's instance (its
        // `nvmeN` name) only when the last open file of it closes, so holding the old fd would
        // make a returning drive come back under a new name, away from the configured path.
        match std::fs::File::open("/dev/null") {
            Ok(f) => self.fd = Arc::new(OwnedFd::from(f)),
            Err(e) => tracing::warn!(target_name = %self.spec.name, error = %e,
                "cannot release the vanished device's file (opening /dev/null failed)"),
        }
        let mut backoff = Duration::from_millis(500);
        loop {
            let deadline = Instant::now() + backoff;
            while Instant::now() < deadline {
                if self.stopping() {
                    return Ok(());
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            backoff = (backoff * 2).min(Duration::from_secs(30));
            if !crate::safety::is_block_device(&path) {
                continue;
            }
            if let Some(orig) = &self.identity {
                match crate::safety::identify(&path) {
                    Ok(now) if now.same_device(orig) => {}
                    Ok(now) => {
                        tracing::warn!(target_name = %self.spec.name, path = %path.display(),
                            was = %orig, now = %now, "a different device appeared at the target's path; not touching it");
                        continue;
                    }
                    Err(_) => continue,
                }
            }
            match open_target(&self.spec, plan_writes(&self.spec)) {
                Ok(t) => {
                    self.fd = Arc::new(t.fd);
                    tracing::info!(target_name = %self.spec.name, path = %path.display(),
                        "the device is back; resuming the workload");
                    with_snapshot(&self.snapshot, |s| {
                        s.up = true;
                        s.running = true;
                        s.resume_clock(now_unix());
                        s.stop_reason = None;
                    });
                    return Ok(());
                }
                Err(e) => {
                    tracing::warn!(target_name = %self.spec.name, error = %e, "reopening failed; retrying");
                }
            }
        }
    }

    fn save_results(&mut self) {
        let snap = read_snapshot(&self.snapshot);
        let t = snap.soak_totals();
        let verify_errors = snap.verify.as_ref().map_or(0, |v| v.counters.total());
        let prev = self.results.soak.take().unwrap_or_default();
        self.results.soak = Some(crate::workload::results::SoakSummary {
            started: snap.soak_started.unwrap_or(snap.started_at),
            elapsed_secs: t.soak_elapsed_secs,
            read_bytes: t.read_bytes,
            written_bytes: t.write_bytes,
            read_ops: t.read_ops,
            write_ops: t.write_ops,
            errors: t.errors,
            verify_errors,
            ..prev
        });
        if let (Some(d), Some(soak)) = (&snap.drive.figures, self.results.soak.as_mut()) {
            soak.set_drive(d.clone());
        }
        if let Some(id) = &snap.drive.identity {
            self.results.device = Some(id.clone());
        }
        self.last_results_save = Instant::now();
        let dir = self.opts.state_dir.join("results");
        let path = dir.join(format!("{}.json", self.spec.name));
        let r = (|| -> std::io::Result<()> {
            std::fs::create_dir_all(&dir)?;
            let data = serde_json::to_vec_pretty(&self.results)?;
            write_atomic(&path, &data)
        })();
        if let Err(e) = r {
            tracing::warn!(path = %path.display(), error = %e, "writing results failed");
        }
    }
}

/// temp file, fsync, rename, fsync the directory.
pub fn write_atomic(path: &Path, data: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let tmp = path.with_extension("tmp");
    {
        let mut f = File::create(&tmp)?;
        f.write_all(data)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)?;
    if let Some(d) = path.parent()
        && let Ok(df) = File::open(d)
    {
        let _ = df.sync_all();
    }
    Ok(())
}

fn same_sweep_job(r: &SweepResult, job: &JobSpec) -> bool {
    r.profile == job.name
        && r.read_pct == job.read_pct
        && (r.block_size - job.bs.mean()).abs() < 0.5
}

/// The earlier record of a sweep of `job` to continue: the checkpoint's (`cp`), replaced by the
/// results file's record of the same sweep (same start time) when that has more points, or,
/// without a checkpoint record, the newest unfinished sweep of `job` in the results file.
fn earlier_sweep(
    file: &[SweepResult],
    job: &JobSpec,
    cp: Option<SweepResult>,
) -> Option<SweepResult> {
    match cp {
        Some(c) => {
            let longer = file
                .iter()
                .find(|r| r.started == c.started && same_sweep_job(r, job))
                .filter(|r| r.points.len() > c.points.len())
                .cloned();
            Some(longer.unwrap_or(c))
        }
        None => file
            .iter()
            .rev()
            .find(|r| r.finished.is_none() && same_sweep_job(r, job))
            .cloned(),
    }
}

/// Whether an earlier sweep can be continued by this plan's sweep of `job` over `points`: the
/// same job, an uncontrolled run first, and its completed points a prefix of `points`.
fn sweep_fits(r: &SweepResult, job: &JobSpec, points: &[u32]) -> bool {
    let done: Vec<u32> = r.points.iter().skip(1).map(|p| p.pct).collect();
    same_sweep_job(r, job)
        && r.points.first().is_some_and(|p| p.pct == 0)
        && r.max_iops > 0.0
        && done.len() <= points.len()
        && points[..done.len()] == done[..]
}

/// The preconditioning job: sequential writes of `bs` over the region.
fn precondition_job(passes: u32, bs: u32, iodepth: u32, workers: u32) -> JobSpec {
    JobSpec {
        name: "precondition".into(),
        description: format!(
            "SNIA workload-independent preconditioning: {passes} sequential pass(es) of {} writes",
            crate::units::format_size(bs as u64)
        ),
        read_pct: 0,
        bs: BlockSizeMix::single(bs),
        access: Access::Sequential,
        iodepth,
        workers,
        rate: None,
    }
}

/// `123456.7` as `123,457`.
fn thousands(v: f64) -> String {
    let digits = format!("{:.0}", v.max(0.0));
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn point_from(pct: u32, target_iops: f64, o: &SegmentOutcome) -> SweepPoint {
    let iops = o.ops as f64 / o.secs.max(1e-9);
    SweepPoint {
        pct,
        target_iops,
        iops,
        bytes_per_sec: o.bytes as f64 / o.secs.max(1e-9),
        lat_avg_us: o.lat_avg_us,
        lat_p50_us: o.q_us[0],
        lat_p99_us: o.q_us[1],
        lat_p999_us: o.q_us[2],
        lat_p9999_us: o.q_us[3],
        duration_secs: o.secs,
        errors: o.errors,
    }
}

fn quantiles(h: &Histogram<u64>) -> Option<[f64; 4]> {
    if h.is_empty() {
        return None;
    }
    let mut q = [0.0; 4];
    for (i, (p, _)) in QUANTILES.iter().enumerate() {
        q[i] = h.value_at_quantile(*p) as f64 / 1e9;
    }
    Some(q)
}

fn seed_for(name: &str, counter: u64) -> u64 {
    // FNV-1a of the target name, mixed with the segment counter: reproducible per plan.
    let mut h: u64 = 0xcbf29ce484222325;
    for b in name.bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x100000001b3);
    }
    h ^ counter.wrapping_mul(0x9E3779B97F4A7C15)
}

/// The workload side of the accounting check: what nvsoak did to each block-device target.
pub struct TargetsHostIo(pub Vec<SharedSnapshot>);

impl HostIoSource for TargetsHostIo {
    fn host_io(&self) -> Vec<HostIo> {
        // Read under the lock, without cloning the whole snapshot: this runs once per device
        // per poll.
        let one = |s: &TargetSnapshot| {
            s.is_block.then(|| {
                // The live counters, not the interval totals: the poller reads this right
                // after a SMART read and compares the two.
                let t = s.live.totals();
                HostIo {
                    path: PathBuf::from(&s.path),
                    read_bytes: t.read_bytes,
                    written_bytes: t.written_bytes,
                    read_ops: t.read_ops,
                    write_ops: t.write_ops,
                    iops: s.iops,
                }
            })
        };
        self.0
            .iter()
            .filter_map(|s| match s.read() {
                Ok(g) => one(&g),
                Err(p) => one(&p.into_inner()),
            })
            .collect()
    }
}

/// Used by `skew` descriptions in tests and the status page.
pub fn describe_access(a: &Access) -> String {
    match a {
        Access::Sequential => "sequential".into(),
        Access::Random {
            skew: Skew::Uniform,
        } => "random".into(),
        Access::Random {
            skew: Skew::Zipf { theta },
        } => format!("random zipf:{theta}"),
        Access::Random {
            skew: Skew::HotBand { fraction, access },
        } => format!("random hotband:{}%:{}%", fraction * 100.0, access * 100.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::worker::{BsPicker, OffsetGen, Rng};

    fn live(stripes: Vec<(u64, u64)>, passes: u32, bs: u32) -> Arc<PrecondLive> {
        Arc::new(PrecondLive {
            passes,
            block_size: bs,
            done: stripes.iter().map(|_| AtomicU64::new(0)).collect(),
            stripes,
        })
    }

    fn write(h: &mut ProgressHook, off: u64, len: usize) {
        let mut buf = vec![0u8; len];
        h.before_write(&mut buf, off);
    }

    #[test]
    fn progress_hook_records_only_the_completed_prefix() {
        let l = live(vec![(0, 64 << 10)], 1, 4096);
        let mut h = ProgressHook::new(None, l.clone(), 0, 0, 4);
        for i in 0..4 {
            write(&mut h, i * 4096, 4096);
        }
        // Later writes complete first: nothing is recorded until the oldest has.
        h.after_write(4096, 4096, true);
        h.after_write(8192, 4096, true);
        assert_eq!(l.done[0].load(Ordering::Relaxed), 0);
        h.after_write(0, 4096, true);
        assert_eq!(l.done[0].load(Ordering::Relaxed), 12288);
        write(&mut h, 16384, 4096);
        h.after_write(12288, 4096, true);
        assert_eq!(l.done[0].load(Ordering::Relaxed), 16384);
        // A failed write holds the position at its start for good.
        write(&mut h, 20480, 4096);
        h.after_write(20480, 4096, false);
        h.after_write(16384, 4096, true);
        assert_eq!(l.done[0].load(Ordering::Relaxed), 16384);
        write(&mut h, 24576, 4096);
        h.after_write(24576, 4096, true);
        assert_eq!(l.done[0].load(Ordering::Relaxed), 16384);
        assert_eq!(l.progress().stripes[0].done_bytes, 16384);
    }

    /// A slow write while later ones complete and new ones take their place: the hook keeps
    /// the completed ones behind the slow one only until its ring fills, so the position moves
    /// on once the slow one completes. (It used to keep them all, in a ring of `iodepth + 1`,
    /// and stopped tracking for good when that filled: a precondition pulled or killed after
    /// that resumed from where the slow write was, however long ago.)
    #[test]
    fn progress_hook_survives_later_writes_overtaking_a_slow_one() {
        let l = live(vec![(0, 1 << 20)], 1, 4096);
        let mut h = ProgressHook::new(None, l.clone(), 0, 0, 2);
        write(&mut h, 0, 4096);
        // At most 2 in flight: the slow write at 0 and one more, completing and replaced.
        for i in 1..=20u64 {
            write(&mut h, i * 4096, 4096);
            h.after_write(i * 4096, 4096, true);
        }
        assert_eq!(l.done[0].load(Ordering::Relaxed), 0);
        h.after_write(0, 4096, true);
        assert_eq!(l.done[0].load(Ordering::Relaxed), 21 * 4096);
        // And it keeps tracking: two more, the newer first.
        write(&mut h, 21 * 4096, 4096);
        write(&mut h, 22 * 4096, 4096);
        h.after_write(22 * 4096, 4096, true);
        assert_eq!(l.done[0].load(Ordering::Relaxed), 21 * 4096);
        h.after_write(21 * 4096, 4096, true);
        assert_eq!(l.done[0].load(Ordering::Relaxed), 23 * 4096);
        // A failure with an older write in flight: the position is the older one's start.
        write(&mut h, 23 * 4096, 4096);
        write(&mut h, 24 * 4096, 4096);
        h.after_write(24 * 4096, 4096, false);
        h.after_write(23 * 4096, 4096, true);
        assert_eq!(l.done[0].load(Ordering::Relaxed), 23 * 4096);
    }

    /// Random completion orders: after every completion the published position is exactly the
    /// completed prefix of the walk.
    #[test]
    fn progress_hook_position_is_the_completed_prefix_under_any_order() {
        let bs = 4096u64;
        for (seed, depth) in [(1u64, 1usize), (2, 3), (3, 8), (4, 32)] {
            let l = live(vec![(0, 1 << 30)], 1, bs as u32);
            let mut h = ProgressHook::new(None, l.clone(), 0, 0, depth as u32);
            let mut rng = Rng::new(seed);
            let mut inflight: Vec<u64> = Vec::new();
            let mut completed = vec![false; 5000];
            let mut next = 0u64;
            while next < 4000 || !inflight.is_empty() {
                while next < 4000 && inflight.len() < depth {
                    write(&mut h, next * bs, bs as usize);
                    inflight.push(next);
                    next += 1;
                }
                // Mostly the newest first, so the oldest lags far behind now and then.
                let k = if rng.below(4) == 0 {
                    rng.below(inflight.len() as u64) as usize
                } else {
                    inflight.len() - 1
                };
                let b = inflight.swap_remove(k);
                h.after_write(b * bs, bs as usize, true);
                completed[b as usize] = true;
                let prefix = completed.iter().take_while(|c| **c).count() as u64;
                assert_eq!(
                    l.done[0].load(Ordering::Relaxed),
                    prefix * bs,
                    "seed {seed}, iodepth {depth}"
                );
            }
            assert_eq!(l.done[0].load(Ordering::Relaxed), 4000 * bs);
        }
    }

    #[test]
    fn progress_hook_counts_wraps_and_short_blocks_from_its_start() {
        // Resumed at 8 KiB into the second pass of a 10 KiB stripe: 2k (trimmed), then wrap.
        let l = live(vec![(4096, 10 << 10)], 3, 4096);
        let mut h = ProgressHook::new(None, l.clone(), 0, (10 << 10) + 8192, 2);
        write(&mut h, 4096 + 8192, 2048);
        write(&mut h, 4096, 4096);
        h.after_write(4096, 4096, true);
        h.after_write(4096 + 8192, 2048, true);
        assert_eq!(l.done[0].load(Ordering::Relaxed), 24 << 10);
        assert_eq!(
            l.progress().stripes[0].resume_point(3, 4096),
            (4096, 6 << 10)
        );
    }

    /// Run 1 walks each stripe with `depth` writes in flight, completing out of order, and is
    /// killed with its last writes still in flight; run 2 resumes from what the hook recorded,
    /// as the scheduler does. Every byte is written at least `passes` times, and at most the
    /// writes in flight at the kill are redone.
    #[test]
    fn a_resumed_precondition_writes_every_byte_passes_times() {
        let region: u64 = (1 << 20) + (24 << 10);
        let (bs, passes, depth, workers) = (8192u32, 3u32, 4usize, 3u32);
        let job = precondition_job(passes, bs, depth as u32, workers);
        let picker = BsPicker::new(&job.bs.entries);
        let align = worker::job_align(&job);
        let stripes: Vec<(u64, u64)> = (0..workers as usize)
            .map(|i| worker::stripe_bounds(0, region, workers, i, align))
            .collect();
        assert_ne!(stripes[0].1, stripes[2].1, "stripes of unequal length");
        // Where run 1 is killed, in I/Os: mid pass 1, exactly a pass boundary, mid pass 3.
        let blocks = |len: u64| len.div_ceil(bs as u64) as usize;
        let kill_at = [
            blocks(stripes[0].1) / 3,
            blocks(stripes[1].1),
            2 * blocks(stripes[2].1) + 7,
        ];
        let l = live(stripes.clone(), passes, bs);
        let mut rng = Rng::new(1);
        for (i, &(start, len)) in stripes.iter().enumerate() {
            let mut counts = vec![0u32; (len / 512) as usize];
            let mut mark = |off: u64, n: u32| {
                for b in (off - start) / 512..(off - start + n as u64) / 512 {
                    counts[b as usize] += 1;
                }
            };
            // Run 1.
            let mut g = OffsetGen::new(&job, picker.sizes(), 0, region, i).unwrap();
            let mut h = ProgressHook::new(None, l.clone(), i, 0, depth as u32);
            let mut inflight: Vec<(u64, u32)> = Vec::new();
            for _ in 0..kill_at[i] {
                let (off, n) = g.next(&mut rng, 0, bs);
                write(&mut h, off, n as usize);
                inflight.push((off, n));
                if inflight.len() == depth {
                    // Complete the newest half first, then the rest.
                    let mut batch = inflight.split_off(depth / 2);
                    batch.append(&mut inflight);
                    for (off, n) in batch {
                        h.after_write(off, n as usize, true);
                        mark(off, n);
                    }
                }
            }
            // Killed: the newest write of the batch in flight completed, the others never did.
            if let Some(&(off, n)) = inflight.last() {
                h.after_write(off, n as usize, true);
                mark(off, n);
            }
            let sp = l.progress().stripes[i].clone();
            assert_eq!((sp.start, sp.len), (start, len));
            let (pos, left) = sp.resume_point(passes, bs);
            assert_eq!(
                pos % bs as u64,
                0,
                "worker {i}: resume position on a block boundary"
            );
            // Run 2: the worker's walk from `pos` with `left` bytes, trimmed at the limit.
            let mut g = OffsetGen::new(&job, picker.sizes(), 0, region, i).unwrap();
            g.start_at(pos);
            let limit = left.div_ceil(align) * align;
            assert_eq!(limit, left);
            let mut submitted = 0u64;
            while submitted < limit {
                let (off, n) = g.next(&mut rng, 0, bs);
                let n = n.min((limit - submitted) as u32);
                mark(off, n);
                submitted += n as u64;
            }
            let min = counts.iter().copied().min().unwrap();
            let sum: u64 = counts.iter().map(|&c| c as u64).sum::<u64>() * 512;
            assert!(min >= passes, "worker {i}: a byte written only {min} times");
            let redone = sum - len * passes as u64;
            assert!(
                redone <= depth as u64 * bs as u64,
                "worker {i}: {redone} bytes written more than {passes} times"
            );
        }
    }

    fn sweep_rec(started: f64, pcts: &[u32], finished: bool) -> SweepResult {
        SweepResult {
            profile: "curve".into(),
            block_size: 4096.0,
            read_pct: 100,
            max_iops: 1000.0,
            started,
            finished: finished.then_some(started + 10.0),
            points: pcts
                .iter()
                .map(|&pct| SweepPoint {
                    pct,
                    iops: 10.0 * pct as f64,
                    ..Default::default()
                })
                .collect(),
        }
    }

    #[test]
    fn a_sweep_resumes_from_the_longest_record_of_it() {
        let job = JobSpec {
            name: "curve".into(),
            description: String::new(),
            read_pct: 100,
            bs: BlockSizeMix::single(4096),
            access: Access::Random {
                skew: Skew::Uniform,
            },
            iodepth: 8,
            workers: 1,
            rate: None,
        };
        let points = [10, 50, 90];
        let file = vec![
            sweep_rec(100.0, &[0, 10, 50, 90], true),
            sweep_rec(200.0, &[0, 10, 50], false),
        ];
        // The checkpoint is behind the results file (a point finished after the last save).
        let cp = sweep_rec(200.0, &[0, 10], false);
        let got = earlier_sweep(&file, &job, Some(cp.clone())).unwrap();
        assert_eq!(got, file[1]);
        // ... or ahead of it (not possible today, but never go backwards).
        let got = earlier_sweep(&file[..1], &job, Some(cp.clone())).unwrap();
        assert_eq!(got, cp);
        // No checkpoint record: the newest unfinished sweep of this job in the file.
        assert_eq!(earlier_sweep(&file, &job, None).unwrap(), file[1]);
        assert_eq!(earlier_sweep(&file[..1], &job, None), None);
        let other = JobSpec {
            name: "other".into(),
            ..job.clone()
        };
        assert_eq!(earlier_sweep(&file, &other, None), None);
        // Fits only as a prefix of this plan's points, after an uncontrolled run.
        assert!(sweep_fits(&file[1], &job, &points));
        assert!(sweep_fits(&file[0], &job, &points), "all points done");
        assert!(!sweep_fits(&file[1], &job, &[10, 70, 90]));
        assert!(!sweep_fits(&file[0], &job, &[10, 50]));
        assert!(!sweep_fits(
            &sweep_rec(1.0, &[10, 50], false),
            &job,
            &points
        ));
        assert!(!sweep_fits(&file[1], &other, &points));
    }

    #[test]
    fn thousands_separators() {
        assert_eq!(thousands(123_456.7), "123,457");
        assert_eq!(thousands(999.0), "999");
        assert_eq!(thousands(1000.0), "1,000");
        assert_eq!(thousands(1_234_567.0), "1,234,567");
        assert_eq!(thousands(0.2), "0");
    }
    fn report(ended: Instant, interval: Duration, ops: u64, bs: u64) -> WorkerReport {
        let mut w = crate::stats::WorkerStats::new();
        for _ in 0..ops {
            w.record(crate::workload::spec::Op::Read, bs, 1000);
        }
        w.take_report(0, interval, ended, None, false)
    }

    #[test]
    fn rates_use_the_workers_interval_and_fold_short_tails() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let mut r = RateWindow::default();
        // 1000 reads in the first 100 ms interval: 10,000 IOPS, 40.96 MB/s at 4K.
        r.update(&report(t0 + ms(100), ms(100), 1000, 4096), ms(50));
        assert!((r.rates[0] - 10_000.0).abs() < 1e-6, "{:?}", r.rates);
        assert!((r.rates[2] - 10_000.0 * 4096.0).abs() < 1e-3);
        assert_eq!(r.rates[1], 0.0);
        // A 1 ms tail with 40 more reads would be 40,000 IOPS: folded, the rate stays.
        let mut w = crate::stats::WorkerStats::new();
        for _ in 0..1040 {
            w.record(crate::workload::spec::Op::Read, 4096, 1000);
        }
        let tail = w.take_report(0, ms(1), t0 + ms(101), None, true);
        r.update(&tail, ms(50));
        assert!((r.rates[0] - 10_000.0).abs() < 1e-6, "{:?}", r.rates);
        // The next full span covers the tail too: 1040 + 460 reads over [100, 200] ms.
        let mut w = crate::stats::WorkerStats::new();
        for _ in 0..1500 {
            w.record(crate::workload::spec::Op::Read, 4096, 1000);
        }
        let next = w.take_report(0, ms(99), t0 + ms(200), None, false);
        r.update(&next, ms(50));
        assert!((r.rates[0] - 5_000.0).abs() < 1e-6, "{:?}", r.rates);
        // IOPS times the block size is the bandwidth, whatever the spans.
        assert!((r.rates[2] - r.rates[0] * 4096.0).abs() < 1e-3);
    }

    #[test]
    fn the_soak_clock_stops_when_paused_or_finished() {
        let mut s = TargetSnapshot {
            run_since: Some(1000.0),
            ..Default::default()
        };
        assert_eq!(s.run_secs_at(1010.0), 10.0);
        // The device went away at 1010 and came back at 1100.
        s.pause_clock(1010.0);
        assert_eq!(s.run_secs_at(1100.0), 10.0);
        s.resume_clock(1100.0);
        s.resume_clock(1105.0);
        assert_eq!(s.run_secs_at(1110.0), 20.0);
        // The plan finished at 1120: the clock shows 30 s from then on.
        s.pause_clock(1120.0);
        s.pause_clock(1200.0);
        assert_eq!(s.run_secs_at(5000.0), 30.0);
    }

    #[test]
    fn a_finished_job_keeps_its_totals_and_loses_its_rates() {
        let mut s = TargetSnapshot::default();
        let j = s.jobs.entry("a".into()).or_default();
        j.active = true;
        j.read.ops = 5;
        j.read_iops = 100.0;
        j.read_bw = 409_600.0;
        j.read_q = Some([1.0; 4]);
        s.iops = 100.0;
        s.deactivate_job("a");
        let j = &s.jobs["a"];
        assert!(!j.active);
        assert_eq!((j.read.ops, j.read_iops, j.read_bw), (5, 0.0, 0.0));
        assert_eq!(j.read_q, None);
        assert_eq!(s.iops, 0.0);
    }
}
