//! What a running target publishes, in three parts with one writer each: the handles fixed at
//! start ([`TargetFixed`]: name, path, verification state, live counters), the scrape view the
//! runner updates every interval ([`TargetView`]), and the drive tracking the daemon writes
//! from health polls ([`DriveTracking`], behind its own lock). [`TargetShared`] holds the three;
//! [`TargetSnapshot`] is a full copy of them for the renderers that show everything (metrics,
//! status page, history). Also per-job figures and verification state; the precondition
//! progress it holds ([`PrecondLive`]) is defined with the hook that writes it, in `hooks`.

use super::*;
use crate::model::totals::Totals;
use crate::workload::drive::DriveTracking;

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
    /// The CPU time of this job's worker threads, cumulative like `read` and `write`.
    pub cpu: crate::stats::CpuTime,
    /// Nanoseconds of worker CPU per completed I/O over the last stats interval (user space,
    /// kernel); `None` when the interval completed no I/O.
    pub cpu_per_io_ns: Option<(f64, f64)>,
    /// Worker threads of the running segment.
    pub workers: usize,
    /// True while a segment of this job runs. The interval figures (rates, quantiles) are only
    /// published while active: a finished job's are zero and its rate series go away.
    pub active: bool,
}

/// What never changes while a target runs: set once at start.
#[derive(Debug, Clone, Default)]
pub struct TargetFixed {
    pub name: String,
    pub path: String,
    pub is_block: bool,
    /// The block device's `state::device_key` at open, recorded in the checkpoint.
    pub device_key: Option<String>,
    /// Data verification state when `verify` is not `off`.
    pub verify: Option<VerifyCtx>,
    /// Completed I/O of this run, summed from the workers' live counters at the moment of
    /// reading (the `jobs` totals lag by up to one stats interval). For the accounting check.
    pub live: Arc<crate::stats::live::LiveIo>,
    /// The verdict's gates, the one part a reload changes in place (a reload that changes
    /// only gates re-judges the target and never restarts it): the scheduler reads them at
    /// every evaluation, the shutdown refresh of the results file too.
    pub gates: Arc<std::sync::RwLock<crate::model::verdict::GateSettings>>,
    /// A target spanning several block devices: its members' paths (`path` is the first).
    /// Such a target has no drive tracking of its own and is left out of the poller's
    /// accounting check (its I/O is spread over several drives).
    pub members: Vec<String>,
}

/// The scrape view: what the runner updates every interval and at each phase change.
#[derive(Debug, Clone, Default)]
pub struct TargetView {
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
    /// The whole plan's totals carried over from the checkpoint of an earlier run of this plan.
    pub carried: crate::model::totals::Totals,
    /// The soak phases' own totals and clock (see [`SoakAccount`]).
    pub soak: SoakAccount,
    /// Completed passes over the phase list.
    pub loop_count: u64,
    /// Unix time the current phase's clock last started in this run (its start, or the
    /// device's return), and seconds of it done before (earlier runs, and this run up to the
    /// last pause).
    pub phase_started_unix: f64,
    pub phase_elapsed_base: f64,
    /// The phase clock is stopped: the target stopped, the plan finished, or the device is gone.
    pub phase_paused: bool,
    /// Unix time the first soak phase started, across restarts (`None` before it).
    pub soak_started: Option<f64>,
    /// Steady-state rounds (IOPS) of the current soak job, newest last, bounded.
    pub steady_history: Vec<f64>,
    /// The running precondition's per-worker progress (set for the current phase only).
    pub precondition: Option<Arc<PrecondLive>>,
    /// The running sweep so far (set for the current phase only, once its maximum is known).
    pub sweep_progress: Option<SweepResult>,
    /// The verdict as of the latest results write (final once the plan ended).
    pub verdict: Option<crate::model::verdict::Verdict>,
    /// The soak over time (closed points, events, steady windows), replaced when it changes,
    /// and the point being built (see `soaksample.rs`).
    pub soak_history: Option<Arc<crate::model::soakhist::SoakHistory>>,
    pub soak_partial: Option<crate::model::soakhist::SoakPoint>,
    /// A target spanning several devices: each member's cumulative figures (earlier runs
    /// included), in the order of `paths`; empty for a target with one path.
    pub members: Vec<crate::model::results::MemberFigures>,
    /// Each member's rates over the last interval (read IOPS, write IOPS, read and write bytes
    /// per second), while a segment runs.
    pub member_rates: Vec<[f64; 4]>,
}

/// A full copy of one target's three parts, for renderers that show everything (metrics, the
/// status page, its history). Readers that need a field or two use [`TargetShared`]'s
/// accessors instead of this copy.
#[derive(Debug, Clone, Default)]
pub struct TargetSnapshot {
    pub name: String,
    pub path: String,
    pub is_block: bool,
    /// The block device's `state::device_key` at open.
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
    /// The soak clock: see [`TargetView::run_secs_base`].
    pub run_secs_base: f64,
    pub run_since: Option<f64>,
    /// The whole plan's totals carried over from the checkpoint of an earlier run of this plan.
    pub carried: crate::model::totals::Totals,
    /// See [`TargetView::soak`].
    pub soak: SoakAccount,
    pub loop_count: u64,
    pub phase_started_unix: f64,
    pub phase_elapsed_base: f64,
    pub phase_paused: bool,
    pub soak_started: Option<f64>,
    pub steady_history: Vec<f64>,
    pub verify: Option<VerifyCtx>,
    /// Drive-side soak bookkeeping and figures (the daemon's part).
    pub drive: DriveTracking,
    /// The NVMe controller the target is on (`nvme0`), for `nvsoak_target_info`'s `device`
    /// label (a copy of `drive.controller`).
    pub controller: Option<String>,
    pub live: Arc<crate::stats::live::LiveIo>,
    pub precondition: Option<Arc<PrecondLive>>,
    pub sweep_progress: Option<SweepResult>,
    /// The verdict as of the latest results write.
    pub verdict: Option<crate::model::verdict::Verdict>,
    /// See [`TargetView::soak_history`].
    pub soak_history: Option<Arc<crate::model::soakhist::SoakHistory>>,
    pub soak_partial: Option<crate::model::soakhist::SoakPoint>,
    /// A target spanning several devices: each member's cumulative figures (earlier runs
    /// included), in the order of `paths`; empty for a target with one path.
    pub members: Vec<crate::model::results::MemberFigures>,
    /// Each member's rates over the last interval (read IOPS, write IOPS, read and write bytes
    /// per second), while a segment runs.
    pub member_rates: Vec<[f64; 4]>,
}

/// A target's data-verification state: the generation map its workers stamp and check
/// (shared, lock-free: each worker owns a disjoint stripe), and the mismatch counters.
#[derive(Debug, Clone)]
pub struct VerifyCtx {
    pub state: crate::workload::pattern::VerifyState,
    pub counters: Arc<VerifyCounters>,
    /// The scheme and the bytes of memory its state keeps (the results file's `verify_state`,
    /// `nvsoak_verify_state_bytes`).
    pub cost: crate::model::verify_cost::VerifyState,
}

/// Rounds of steady-state history kept for the checkpoint.
pub(crate) const STEADY_HISTORY_MAX: usize = 256;

/// Reads and writes summed over every job.
pub(crate) fn job_totals(jobs: &BTreeMap<String, JobStats>) -> (OpCounters, OpCounters) {
    let mut r = OpCounters::default();
    let mut w = OpCounters::default();
    for j in jobs.values() {
        r.merge(&j.read);
        w.merge(&j.write);
    }
    (r, w)
}

/// This run's I/O and worker CPU over every job, as totals (no elapsed time).
fn io_of(jobs: &BTreeMap<String, JobStats>) -> Totals {
    let (r, w) = job_totals(jobs);
    Totals {
        read_bytes: r.bytes,
        write_bytes: w.bytes,
        read_ops: r.ops,
        write_ops: w.ops,
        errors: r.errors.total() + w.errors.total(),
        cpu_user_ns: jobs.values().map(|j| j.cpu.user_ns).sum(),
        cpu_sys_ns: jobs.values().map(|j| j.cpu.sys_ns).sum(),
        ..Default::default()
    }
}

/// `a += b` for the I/O counters and the elapsed time (not the verification counts).
fn add_io(a: &mut Totals, b: &Totals) {
    a.read_bytes += b.read_bytes;
    a.write_bytes += b.write_bytes;
    a.read_ops += b.read_ops;
    a.write_ops += b.write_ops;
    a.errors += b.errors;
    a.soak_elapsed_secs += b.soak_elapsed_secs;
    a.cpu_user_ns += b.cpu_user_ns;
    a.cpu_sys_ns += b.cpu_sys_ns;
}

/// `a - b` for the I/O counters (never below zero).
fn sub_io(a: &Totals, b: &Totals) -> Totals {
    Totals {
        read_bytes: a.read_bytes.saturating_sub(b.read_bytes),
        write_bytes: a.write_bytes.saturating_sub(b.write_bytes),
        read_ops: a.read_ops.saturating_sub(b.read_ops),
        write_ops: a.write_ops.saturating_sub(b.write_ops),
        errors: a.errors.saturating_sub(b.errors),
        cpu_user_ns: a.cpu_user_ns.saturating_sub(b.cpu_user_ns),
        cpu_sys_ns: a.cpu_sys_ns.saturating_sub(b.cpu_sys_ns),
        ..Default::default()
    }
}

/// The whole plan's totals: the checkpoint's plus this run's, with `run_secs` of plan clock.
fn plan_totals_of(carried: &Totals, jobs: &BTreeMap<String, JobStats>, run_secs: f64) -> Totals {
    let mut t = carried.clone();
    add_io(&mut t, &io_of(jobs));
    t.soak_elapsed_secs += run_secs;
    t
}

/// The soak phases' own totals and clock, across restarts: what every figure labelled "soak"
/// shows (`nvsoak_soak_*`, the results file's `soak`, `state show`, the reports). The job
/// counters are cumulative over the whole run (precondition and sweeps included), so the soak's
/// part is taken as differences: the run's I/O when a soak phase starts is its `mark`, and when
/// it ends (or stops) what it added goes into `done`.
///
/// Architecture Invariant: only the I/O and time of soak phases (their verification passes
/// included) reach these totals; a precondition's or a sweep's never does.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SoakAccount {
    /// The soak totals of earlier runs (the checkpoint's, or the results file's when that is
    /// ahead after `kill -9`).
    pub carried: Totals,
    /// This run's soak I/O of the soak phases that ended, and seconds the soak clock ran.
    pub done: Totals,
    /// This run's I/O (every job) when the current soak phase started; `None` outside a soak.
    pub mark: Option<Totals>,
    /// Since when the soak clock runs (`None` outside a soak phase and while the device is gone).
    pub since: Option<f64>,
}

impl SoakAccount {
    /// The soak totals at unix time `now`, given this run's job counters.
    pub fn totals(&self, jobs: &BTreeMap<String, JobStats>, now: f64) -> Totals {
        let mut t = self.carried.clone();
        add_io(&mut t, &self.done);
        if let Some(m) = &self.mark {
            add_io(&mut t, &sub_io(&io_of(jobs), m));
        }
        t.soak_elapsed_secs += self.since.map_or(0.0, |s| (now - s).max(0.0));
        t
    }

    /// A soak phase starts at `now`: the soak clock runs and its I/O counts from here.
    pub fn begin(&mut self, jobs: &BTreeMap<String, JobStats>, now: f64) {
        self.end(jobs, now);
        self.mark = Some(io_of(jobs));
        self.since = Some(now);
    }

    /// The soak phase ended or stopped at `now`: what it added is kept in `done`.
    pub fn end(&mut self, jobs: &BTreeMap<String, JobStats>, now: f64) {
        self.pause(now);
        if let Some(m) = self.mark.take() {
            add_io(&mut self.done, &sub_io(&io_of(jobs), &m));
        }
    }

    /// Stops the soak clock (the target stopped, or its device is gone).
    pub fn pause(&mut self, now: f64) {
        if let Some(s) = self.since.take() {
            self.done.soak_elapsed_secs += (now - s).max(0.0);
        }
    }

    /// Starts the soak clock again (the device is back), when a soak phase runs.
    pub fn resume(&mut self, now: f64) {
        if self.mark.is_some() {
            self.since.get_or_insert(now);
        }
    }
}

fn run_secs_of(base: f64, since: Option<f64>, now: f64) -> f64 {
    base + since.map_or(0.0, |t| (now - t).max(0.0))
}

impl TargetView {
    /// Seconds into the current phase, counting earlier runs. The clock stops when the target
    /// stops ([`TargetView::pause_clock`]), so the checkpoint saved at shutdown keeps this run's
    /// time in the phase: a soak stopped cleanly resumes with the time it has left.
    pub fn phase_elapsed_secs(&self) -> f64 {
        self.phase_elapsed_at(now_unix())
    }

    pub fn phase_elapsed_at(&self, now: f64) -> f64 {
        if self.phase_paused {
            self.phase_elapsed_base
        } else {
            self.phase_elapsed_base + (now - self.phase_started_unix).max(0.0)
        }
    }

    /// Starts the clock of the phase now running, `done_secs` into it (earlier runs).
    pub(crate) fn start_phase_clock(&mut self, done_secs: f64, now: f64) {
        self.phase_started_unix = now;
        self.phase_elapsed_base = done_secs;
        self.phase_paused = false;
    }

    /// The soak phases' totals: the checkpoint's plus this run's soak phases'.
    pub fn soak_totals(&self) -> Totals {
        self.soak.totals(&self.jobs, now_unix())
    }

    /// The whole plan's totals (every phase): the checkpoint's plus this run's.
    pub fn plan_totals(&self) -> Totals {
        plan_totals_of(&self.carried, &self.jobs, self.run_secs_at(now_unix()))
    }

    /// Seconds the soak clock of this run shows at unix time `now`.
    pub fn run_secs_at(&self, now: f64) -> f64 {
        run_secs_of(self.run_secs_base, self.run_since, now)
    }

    /// Stops the clocks at `now` (the plan finished or stopped, or the device went away): the
    /// plan's, the soak's and the phase's.
    pub fn pause_clock(&mut self, now: f64) {
        if let Some(t) = self.run_since.take() {
            self.run_secs_base += (now - t).max(0.0);
        }
        self.soak.pause(now);
        if !self.phase_paused {
            self.phase_elapsed_base = self.phase_elapsed_at(now);
            self.phase_paused = true;
        }
    }

    /// Starts the clocks again at `now` (the device is back).
    pub fn resume_clock(&mut self, now: f64) {
        self.run_since.get_or_insert(now);
        self.soak.resume(now);
        if self.phase_paused {
            self.phase_started_unix = now;
            self.phase_paused = false;
        }
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

    /// Errors over every job.
    pub fn errors(&self) -> u64 {
        self.jobs
            .values()
            .map(|j| j.read.errors.total() + j.write.errors.total())
            .sum()
    }
}

impl TargetSnapshot {
    /// The soak phases' totals: the checkpoint's plus this run's soak phases'.
    pub fn soak_totals(&self) -> Totals {
        self.soak.totals(&self.jobs, now_unix())
    }

    /// The whole plan's totals (every phase): the checkpoint's plus this run's.
    pub fn plan_totals(&self) -> Totals {
        plan_totals_of(
            &self.carried,
            &self.jobs,
            run_secs_of(self.run_secs_base, self.run_since, now_unix()),
        )
    }

    pub fn totals(&self) -> (OpCounters, OpCounters) {
        job_totals(&self.jobs)
    }
}

/// One running target's published state: the fixed handles, the scrape view (the runner's
/// lock) and the drive tracking (the daemon's lock). The two locks are never held together.
#[derive(Debug)]
pub struct TargetShared {
    pub fixed: TargetFixed,
    view: RwLock<TargetView>,
    drive: RwLock<DriveTracking>,
}

pub type SharedSnapshot = Arc<TargetShared>;

impl TargetShared {
    pub fn new(fixed: TargetFixed, view: TargetView, drive: DriveTracking) -> TargetShared {
        TargetShared {
            fixed,
            view: RwLock::new(view),
            drive: RwLock::new(drive),
        }
    }

    /// Read the scrape view under its lock (no copy).
    /// The gates in effect now (see [`TargetFixed::gates`]).
    pub fn gates(&self) -> crate::model::verdict::GateSettings {
        self.fixed
            .gates
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Replace the gates (a reload that changed only them).
    pub fn set_gates(&self, g: crate::model::verdict::GateSettings) {
        *self
            .fixed
            .gates
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = g;
    }

    pub fn view<R>(&self, f: impl FnOnce(&TargetView) -> R) -> R {
        f(&crate::util::read(&self.view))
    }

    /// Change the scrape view (the runner).
    pub(crate) fn update(&self, f: impl FnOnce(&mut TargetView)) {
        f(&mut crate::util::write(&self.view))
    }

    /// Read the drive tracking under its lock (no copy).
    pub fn drive<R>(&self, f: impl FnOnce(&DriveTracking) -> R) -> R {
        f(&crate::util::read(&self.drive))
    }

    /// Change the drive tracking (the daemon, from health polls).
    pub fn update_drive<R>(&self, f: impl FnOnce(&mut DriveTracking) -> R) -> R {
        f(&mut crate::util::write(&self.drive))
    }

    /// A full copy, for the renderers that show everything.
    pub fn snapshot(&self) -> TargetSnapshot {
        let v = self.view(TargetView::clone);
        let drive = self.drive(DriveTracking::clone);
        let f = &self.fixed;
        TargetSnapshot {
            name: f.name.clone(),
            path: f.path.clone(),
            is_block: f.is_block,
            device_key: f.device_key.clone(),
            engine: v.engine,
            phase_index: v.phase_index,
            phase: v.phase,
            profile: v.profile,
            running: v.running,
            up: v.up,
            stop_reason: v.stop_reason,
            jobs: v.jobs,
            iops: v.iops,
            started_at: v.started_at,
            run_secs_base: v.run_secs_base,
            run_since: v.run_since,
            carried: v.carried,
            soak: v.soak,
            loop_count: v.loop_count,
            phase_started_unix: v.phase_started_unix,
            phase_elapsed_base: v.phase_elapsed_base,
            phase_paused: v.phase_paused,
            soak_started: v.soak_started,
            steady_history: v.steady_history,
            verify: f.verify.clone(),
            controller: drive.controller.clone(),
            drive,
            live: f.live.clone(),
            precondition: v.precondition,
            sweep_progress: v.sweep_progress,
            verdict: v.verdict,
            soak_history: v.soak_history,
            soak_partial: v.soak_partial,
            members: v.members,
            member_rates: v.member_rates,
        }
    }

    /// The checkpoint record of this target, read under each lock in turn (no full copy).
    pub fn to_state(&self) -> crate::model::checkpoint::TargetState {
        let f = &self.fixed;
        let mut st = crate::model::checkpoint::TargetState::new(&f.name, &f.path);
        st.identity = f.device_key.clone();
        self.view(|v| {
            st.phase_index = v.phase_index;
            st.phase_elapsed_secs = v.phase_elapsed_secs();
            st.loop_count = v.loop_count;
            st.soak_started = v.soak_started;
            st.totals = v.plan_totals();
            st.soak = Some(v.soak_totals());
            st.steady_history = v.steady_history.clone();
            st.precondition = v.precondition.as_ref().map(|p| p.progress());
            st.sweep = v.sweep_progress.clone();
            st.members = v.members.clone();
        });
        self.drive(|d| {
            st.smart_at_soak_start = d.smart_at_soak_start_json();
            st.host_at_soak_start = d.host_at_soak_start;
            st.drive_throttle_episodes = d.episodes();
            st.drive_warning_seen = d.warning_seen;
            st.drive_temperature_max_kelvin = d.temperature_max_kelvin;
            st.ata_at_soak_start = d.ata_at_soak_start_json();
            st.ocp_at_soak_start = crate::workload::drive_ocp::baseline_json(d);
        });
        if let Some(v) = &f.verify {
            // Verification state is the target's, whichever phase read the block: both
            // totals carry the same counts.
            st.totals.verify_errors = v.counters.total();
            st.totals.verify_errors_by_kind = v
                .counters
                .by_label()
                .iter()
                .map(|(k, n)| (k.to_string(), *n))
                .collect();
            st.totals.verified_bytes = v.counters.checked_bytes();
            if let Some(soak) = st.soak.as_mut() {
                soak.verify_errors = st.totals.verify_errors;
                soak.verify_errors_by_kind = st.totals.verify_errors_by_kind.clone();
            }
            st.verify_seed = Some(v.state.seed());
            if let crate::workload::pattern::VerifyState::Walk(w) = &v.state {
                st.verify_walk = Some(w.record());
            }
        }
        st
    }

    /// The daemon's drive update of this target from a health snapshot (block targets only).
    pub fn update_drive_from(&self, health: &crate::health::HealthSnapshot) {
        // A spanning target's I/O is spread over its members' drives: no one drive's SMART
        // figures are its figures.
        if !self.fixed.members.is_empty() {
            // It is compared with the card its members are on, when a rating names that card.
            let ctrls: Vec<Option<String>> =
                self.view(|v| v.members.iter().map(|m| m.controller.clone()).collect());
            let card = crate::pcie::span_card(&health.pcie, &ctrls);
            self.update_drive(|d| d.card = card);
            return;
        }
        if !self.fixed.is_block {
            return;
        }
        let (started_at, soak_started, carried) =
            self.view(|v| (v.started_at, v.soak_started, v.carried.clone()));
        let on = crate::workload::drive::DriveTarget {
            path: Path::new(&self.fixed.path),
            started_at,
            soak_started,
            carried: &carried,
        };
        self.update_drive(|d| d.update(&on, health));
    }
}

/// Splits a full copy back into its parts (tests build targets this way).
#[cfg(test)]
impl From<TargetSnapshot> for TargetShared {
    fn from(s: TargetSnapshot) -> TargetShared {
        let mut drive = s.drive;
        drive.controller = drive.controller.or(s.controller);
        TargetShared::new(
            TargetFixed {
                name: s.name,
                path: s.path,
                is_block: s.is_block,
                device_key: s.device_key,
                verify: s.verify,
                live: s.live,
                gates: Default::default(),
                members: Vec::new(),
            },
            TargetView {
                engine: s.engine,
                phase_index: s.phase_index,
                phase: s.phase,
                profile: s.profile,
                running: s.running,
                up: s.up,
                stop_reason: s.stop_reason,
                jobs: s.jobs,
                iops: s.iops,
                started_at: s.started_at,
                run_secs_base: s.run_secs_base,
                run_since: s.run_since,
                carried: s.carried,
                soak: s.soak,
                loop_count: s.loop_count,
                phase_started_unix: s.phase_started_unix,
                phase_elapsed_base: s.phase_elapsed_base,
                phase_paused: s.phase_paused,
                soak_started: s.soak_started,
                steady_history: s.steady_history,
                precondition: s.precondition,
                sweep_progress: s.sweep_progress,
                verdict: s.verdict,
                soak_history: s.soak_history,
                soak_partial: s.soak_partial,
                members: s.members,
                member_rates: s.member_rates,
            },
            drive,
        )
    }
}

/// The workload side of the accounting check: what nvsoak did to each block-device target.
pub struct TargetsHostIo(pub Vec<SharedSnapshot>);

impl HostIoSource for TargetsHostIo {
    fn host_io(&self) -> Vec<HostIo> {
        // The live counters, not the interval totals: the poller reads this right after a
        // SMART read and compares the two. One field of the view, read under its lock: this
        // runs once per device per poll.
        self.0
            .iter()
            .filter(|s| s.fixed.is_block && s.fixed.members.is_empty())
            .map(|s| {
                let t = s.fixed.live.totals();
                HostIo {
                    path: PathBuf::from(&s.fixed.path),
                    read_bytes: t.read_bytes,
                    written_bytes: t.written_bytes,
                    read_ops: t.read_ops,
                    write_ops: t.write_ops,
                    iops: s.view(|v| v.iops),
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod cpu_tests {
    use super::*;

    fn jobs(user_ns: u64, sys_ns: u64, ops: u64) -> BTreeMap<String, JobStats> {
        let mut j = JobStats {
            cpu: crate::stats::CpuTime { user_ns, sys_ns },
            ..Default::default()
        };
        j.read.ops = ops;
        BTreeMap::from([("mix".to_string(), j)])
    }

    /// Only the soak phases' worker CPU reaches the soak totals (a precondition's does not),
    /// and an earlier run's carried CPU is added, never replaced.
    #[test]
    fn soak_totals_carry_only_the_soak_phases_cpu_over_restarts() {
        let mut a = SoakAccount {
            carried: Totals {
                cpu_user_ns: 7,
                cpu_sys_ns: 11,
                ..Default::default()
            },
            ..Default::default()
        };
        // The precondition ran with 1000 + 5000 ns of CPU before the soak began.
        a.begin(&jobs(1_000, 5_000, 100), 10.0);
        let t = a.totals(&jobs(1_300, 5_900, 160), 11.0);
        assert_eq!((t.cpu_user_ns, t.cpu_sys_ns), (7 + 300, 11 + 900));
        a.end(&jobs(1_500, 6_000, 200), 12.0);
        // A sweep after the soak adds CPU that is not the soak's.
        let t = a.totals(&jobs(9_999, 99_999, 900), 13.0);
        assert_eq!((t.cpu_user_ns, t.cpu_sys_ns), (7 + 500, 11 + 1_000));
        assert_eq!(t.read_ops, 100);
    }

    #[test]
    fn the_larger_record_of_cpu_wins_after_kill_9() {
        let mut cp = Totals {
            cpu_user_ns: 10,
            cpu_sys_ns: 50,
            ..Default::default()
        };
        cp.max_each(&Totals {
            cpu_user_ns: 20,
            cpu_sys_ns: 40,
            ..Default::default()
        });
        assert_eq!((cp.cpu_user_ns, cp.cpu_sys_ns), (20, 50));
    }
}
