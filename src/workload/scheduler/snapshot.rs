//! What a running target publishes: its snapshot (read by scrapes, checkpoints and the status
//! page), per-job figures, precondition progress and verification state.

use super::*;

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
    /// The block device's `state::device_key` at open, recorded in the checkpoint.
    pub device_key: Option<String>,
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
    /// The NVMe controller the target is on (`nvme0`), for `nvsoak_target_info`'s `device`
    /// label: from the opened device node at start, then from the health poller's mapping of
    /// the target to a controller (the one mapping both use), so `/dev/disk/by-id` paths join.
    pub controller: Option<String>,
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

/// A target's data-verification state: the generation map its workers stamp and check
/// (shared, lock-free: each worker owns a disjoint stripe), and the mismatch counters.
#[derive(Debug, Clone)]
pub struct VerifyCtx {
    pub map: Arc<GenMap>,
    pub counters: Arc<VerifyCounters>,
}

/// Rounds of steady-state history kept for the checkpoint.
pub(crate) const STEADY_HISTORY_MAX: usize = 256;

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
    pub(crate) fn deactivate_job(&mut self, job: &str) {
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
        st.identity = self.device_key.clone();
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

pub(crate) fn read_snapshot(s: &SharedSnapshot) -> TargetSnapshot {
    crate::util::read(s).clone()
}

pub(crate) fn with_snapshot(s: &SharedSnapshot, f: impl FnOnce(&mut TargetSnapshot)) {
    f(&mut crate::util::write(s))
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
