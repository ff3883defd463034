//! The per-target scheduler: one plain OS thread per target that opens the target, runs its
//! phases in order (precondition, sweep, soak; looping when asked), spawns the job's worker
//! threads for each run segment, aggregates their interval reports, evaluates steady state and
//! publishes a [`TargetSnapshot`] that scrapes read.
//!
//! Architecture Invariant: the scheduler never touches the I/O hot path; it only sees worker
//! reports, once per stats interval.
//!
//! `start` opens the target and builds the state it starts with, `run` is the plan loop on its
//! thread, `phase` one file per phase kind, `segment` one run of a job's workers; this file holds
//! the `Runner`, its results writes and live verdict, and the rejudging of ended targets.

mod dryrun;
mod error;
mod ocp_phases;
mod open;
mod phase;
mod phaselog;
mod recover;
mod run;
mod segment;
mod snapshot;
mod soaksample;
mod start;
mod verify_plan;

pub use crate::workload::hooks::PrecondLive;
pub(crate) use crate::workload::hooks::{HookMode, ProgressHook, StampOnly};
pub use error::RunError;
pub use open::{
    OpenedTarget, check_aliases, open_members, open_target, open_target_expecting, plan_writes,
    preflight,
};
pub(crate) use phase::precondition::precondition_job;
pub(crate) use segment::{Segment, SegmentOutcome};
pub(crate) use snapshot::STEADY_HISTORY_MAX;
pub use snapshot::{
    JobStats, SharedSnapshot, TargetFixed, TargetShared, TargetSnapshot, TargetView, TargetsHostIo,
    VerifyCtx,
};
pub use start::start;
pub use verify_plan::{PlannedVerify, check_plan_budget, planned_verify};

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{Seek, SeekFrom};
use std::os::fd::OwnedFd;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use thiserror::Error;

use crate::health::{HostIo, HostIoSource};
use crate::model::checkpoint::{PreconditionProgress, StripeProgress};
use crate::model::results::{SteadyOutcome, SweepPoint, SweepResult, TargetResults};
use crate::model::spec::{
    Access, BlockSizeMix, JobSpec, PhaseSpec, RateLimit, Skew, SteadyConfig, TargetSpec, VerifyMode,
};
use crate::model::walk::Leg;
use crate::stats::{OpCounters, QUANTILES, WorkerReport, new_hdr};
use crate::workload::pattern::{
    GenMap, VERIFY_UNIT, VerifyCounters, VerifyHook, VerifyState, walk_fits,
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
    /// Two targets are one device or file.
    #[error("{0}")]
    Alias(crate::safety::SafetyError),
    #[error("target {target}: worker failed: {reason}")]
    Worker { target: String, reason: String },
    #[error("target {target}: region of {path} is empty (size {size} bytes)")]
    EmptyRegion {
        target: String,
        path: PathBuf,
        size: u64,
    },
}

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
    /// `log.progress_interval`: how often a running soak logs a progress line.
    pub progress_interval: Duration,
    /// Where `results/<target>.json` is written.
    pub state_dir: PathBuf,
}

pub use crate::util::unix_now as now_unix;

/// Fold a stopped target's latest drive figures and identity into its results file. The daemon
/// calls this after its final health poll at shutdown, once the target's thread (the file's
/// writer while it runs) has ended. Returns whether the file was rewritten.
pub fn refresh_results_drive(state_dir: &Path, target: &TargetShared) -> bool {
    let (figures, identity) = target.drive(|d| (d.figures.clone(), d.identity.clone()));
    let Some(fig) = figures else {
        return false;
    };
    let name = &target.fixed.name;
    let Some(mut r) = crate::state::results::load(state_dir, name) else {
        return false;
    };
    let Some(soak) = r.soak.as_mut() else {
        return false;
    };
    soak.set_drive(fig);
    if let Some(id) = identity {
        r.device = Some(id);
    }
    // The verdict again, with the final drive figures.
    restamp(state_dir, target, &mut r)
}

/// Judge `r` (a target whose thread has ended) again with the target's gates now, the plan as
/// far as its last verdict said; the snapshot, the results file and the OCPTV record follow.
/// Returns whether the results file was written.
fn restamp(state_dir: &Path, target: &TargetShared, r: &mut TargetResults) -> bool {
    let (plan, reason) = r
        .verdict
        .as_ref()
        .map_or((crate::model::verdict::PlanState::Interrupted, None), |v| {
            (v.plan, v.stop_reason.clone())
        });
    let inputs = crate::model::verdict::ExternalInputs::from_results(r);
    crate::verdict::stamp(r, &target.gates(), &inputs, plan, reason);
    let verdict = r.verdict.clone();
    target.update(|s| s.verdict = verdict);
    let saved = crate::state::results::save(state_dir, r);
    crate::verdict::ocptv::write(state_dir, r);
    saved
}

/// Judge a target whose plan has ended again, with the gates it has now (a reload that changed
/// only gates): its results file's verdict and OCPTV record are rewritten, the snapshot's too.
pub fn rejudge_ended(state_dir: &Path, target: &TargetShared) {
    let name = &target.fixed.name;
    if let Some(mut r) = crate::state::results::load(state_dir, name) {
        restamp(state_dir, target, &mut r);
    }
}

pub(crate) struct Runner {
    spec: TargetSpec,
    fd: Arc<OwnedFd>,
    /// A target spanning several block devices: each member's descriptor (claimed, held
    /// `O_EXCL`), in the order of `paths`; worker `i` uses member `i mod n`. Empty otherwise.
    member_fds: Vec<Arc<OwnedFd>>,
    /// The passthrough engines' generic device of each descriptor the workers use (`fd`'s, or
    /// each member's in order), resolved once by the first engine opened on it; replaced with
    /// the descriptors (`wait_for_device`). Empty for the other engines.
    passthru: Vec<crate::engine::passthru::SharedNode>,
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
    /// How far the plan got, for the verdict (running until the plan loop ends).
    plan_state: crate::model::verdict::PlanState,
    /// When the verdict was last evaluated ([`Runner::judge_live`]).
    last_live_judged: Instant,
    /// Gates whose failure this run already told (one WARN line each).
    warned_gates: std::collections::BTreeSet<crate::model::verdict::Gate>,
    /// The snapshot's live counters, handed to each worker.
    live: Arc<crate::stats::live::LiveIo>,
    /// The soak over time, between soak phases (a soak phase's sampler holds it while it runs
    /// and publishes it in the view).
    soak_history: crate::model::soakhist::SoakHistory,
    /// The running soak phase's entry in the results file's `soak.phases` (see
    /// `phaselog::SoakEntry`).
    soak_entry: Option<phaselog::SoakEntry>,
}

/// How often a running segment refreshes its results file (its totals, and the running soak
/// phase's entry, are then at most this old after `kill -9`).
const RESULTS_SAVE_INTERVAL: Duration = Duration::from_secs(60);

/// [`RESULTS_SAVE_INTERVAL`], or `NVSOAK_TEST_RESULTS_SAVE_MS` (test-only, read once) so a test
/// of a few seconds sees the results file ahead of the checkpoint at a `kill -9`.
pub(crate) fn results_save_interval() -> Duration {
    static EVERY: std::sync::OnceLock<Duration> = std::sync::OnceLock::new();
    *EVERY.get_or_init(|| {
        std::env::var("NVSOAK_TEST_RESULTS_SAVE_MS")
            .ok()
            .and_then(|v| v.parse::<u64>().ok())
            .filter(|ms| *ms > 0)
            .map_or(RESULTS_SAVE_INTERVAL, Duration::from_millis)
    })
}

/// The verification pass reads back what the walk wrote, rather than sweeping the region,
/// when that is under 1/this of the region's units.
const READ_BACK_BELOW: u64 = 8;

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

    /// `verify = "pass"`: read the whole region sequentially, checking every block written;
    /// under the computed state, while no leg has written every block yet, read back just
    /// what the legs wrote instead ([`Self::read_back`]).
    fn verify_pass(&mut self) -> Result<(), RunError> {
        if self.spec.verify != VerifyMode::Pass || self.stopping() {
            return Ok(());
        }
        // Read back only when that is much less than a sweep: a sweep also reads the units
        // nothing wrote, so it sees a misdirected write where it landed as well as where it
        // is missing (the read-back sees it where it is missing, as a stale generation).
        let legs = match self.snapshot.fixed.verify.as_ref().map(|v| &v.state) {
            Some(VerifyState::Walk(w)) => w.read_back_legs().filter(|legs| {
                crate::model::walk::WalkMap::written_units(legs) < w.units() / READ_BACK_BELOW
            }),
            _ => None,
        };
        if let Some(legs) = legs {
            return self.read_back(&legs);
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
        let prev_profile = self.snapshot.view(|s| s.profile.clone());
        self.in_verify_pass = true;
        let r = self.run_segment(
            Segment {
                job: &job,
                rate_iops: None,
                duration: None,
                limit_passes: Some(1),
                progress: None,
                read_back: None,
            },
            &mut |_, _| {},
        );
        let mismatches = self.end_verify_pass(prev_profile);
        match &r {
            Ok(o) => tracing::info!(target_name = %self.spec.name, bytes = o.bytes, mismatches,
                "verification pass finished"),
            // A stop condition ended the pass: it finished all the same, as far as it got.
            Err(e) if e.is_stop_condition() => tracing::info!(target_name = %self.spec.name,
                mismatches, "verification pass finished"),
            Err(_) => {}
        }
        r.map(|_| ())
    }

    /// The verification pass over what the walk's legs wrote: each leg's positions in the
    /// order it wrote them, one worker per slice, every unit checked. On a large region that
    /// one soak has only begun to cover (a 16 TB drive takes many hours per random pass), this
    /// checks everything written in the time the writing took, where a sequential sweep would
    /// read terabytes that hold nothing of the soak's.
    fn read_back(&mut self, legs: &[Arc<crate::model::walk::Leg>]) -> Result<(), RunError> {
        let prev_profile = self.snapshot.view(|s| s.profile.clone());
        self.in_verify_pass = true;
        let mut bytes = 0;
        let mut r = Ok(());
        for leg in legs {
            let bs = leg.block_units * VERIFY_UNIT as u32;
            let job = JobSpec {
                name: "verify-pass".into(),
                description: format!(
                    "verification pass: reads back, in the order written, every {} KiB block a {} leg of the soak wrote",
                    bs / 1024,
                    if leg.perm.is_some() {
                        "random"
                    } else {
                        "sequential"
                    }
                ),
                read_pct: 100,
                bs: BlockSizeMix::single(bs),
                access: if leg.perm.is_some() {
                    Access::Random {
                        skew: Skew::Uniform,
                    }
                } else {
                    Access::Sequential
                },
                iodepth: 16,
                workers: leg.slices.len() as u32,
                rate: None,
            };
            r = self
                .run_segment(
                    Segment {
                        job: &job,
                        rate_iops: None,
                        duration: None,
                        limit_passes: None,
                        progress: None,
                        read_back: Some(leg.clone()),
                    },
                    &mut |_, _| {},
                )
                .map(|o| bytes += o.bytes);
            if r.is_err() || self.stopping() {
                break;
            }
        }
        let mismatches = self.end_verify_pass(prev_profile);
        match &r {
            Ok(()) => tracing::info!(target_name = %self.spec.name, bytes, legs = legs.len(),
                mismatches, "verification pass finished: read back what the soak wrote"),
            Err(e) if e.is_stop_condition() => tracing::info!(target_name = %self.spec.name,
                bytes, mismatches, "verification pass finished"),
            Err(_) => {}
        }
        r
    }

    /// After a verification pass: back to the soak's hook mode and profile; the target's
    /// mismatches so far.
    fn end_verify_pass(&mut self, prev_profile: String) -> u64 {
        self.in_verify_pass = false;
        self.snapshot.update(|s| s.profile = prev_profile);
        self.snapshot
            .fixed
            .verify
            .as_ref()
            .map_or(0, |v| v.counters.total())
    }

    fn stopping(&self) -> bool {
        self.stop.load(Ordering::SeqCst) || self.global_stop.load(Ordering::SeqCst)
    }

    fn save_results(&mut self) {
        self.refresh_results(true);
        self.last_results_save = Instant::now();
        crate::state::results::save(&self.opts.state_dir, &self.results);
        crate::verdict::ocptv::write(&self.opts.state_dir, &self.results);
    }

    /// Judge the target again from what is known now, without writing the results file: the
    /// scheduler calls this every stats interval (at most every [`LIVE_JUDGE_EVERY`]), so the
    /// verdict in `/metrics` follows a failed gate within one poll plus one interval.
    pub(crate) fn judge_live(&mut self) {
        if self.last_live_judged.elapsed() < LIVE_JUDGE_EVERY {
            return;
        }
        self.refresh_results(false);
    }

    /// Bring the results record up to date with the snapshot and judge it (the verdict goes
    /// to the snapshot too). `with_history` copies the soak history (for a file write; the
    /// live verdict does not need it). A gate that fails for the first time in this run is
    /// told at once, with one WARN line.
    fn refresh_results(&mut self, with_history: bool) {
        self.last_live_judged = Instant::now();
        // The running soak phase's entry is kept current, so a kill loses none of it.
        self.soak_entry_update();
        let (t, plan, soak_started, history) = self.snapshot.view(|s| {
            (
                s.soak_totals(),
                s.plan_totals(),
                s.soak_started.unwrap_or(0.0),
                s.soak_history.clone(),
            )
        });
        let (figures, identity) = self
            .snapshot
            .drive(|d| (d.figures.clone(), d.identity.clone()));
        let verify_errors = self
            .snapshot
            .fixed
            .verify
            .as_ref()
            .map_or(0, |v| v.counters.total());
        let prev = self.results.soak.take().unwrap_or_default();
        self.results.soak = Some(crate::model::results::SoakSummary {
            started: soak_started,
            elapsed_secs: t.soak_elapsed_secs,
            read_bytes: t.read_bytes,
            written_bytes: t.write_bytes,
            read_ops: t.read_ops,
            write_ops: t.write_ops,
            errors: t.errors,
            verify_errors,
            cpu_user_secs: Some(t.cpu_user_ns as f64 / 1e9),
            cpu_system_secs: Some(t.cpu_sys_ns as f64 / 1e9),
            plan: Some(crate::model::results::PlanTotals::of(&plan)),
            history: if with_history {
                history.map(|h| (*h).clone()).or(prev.history.clone())
            } else {
                prev.history.clone()
            },
            ..prev
        });
        if let (Some(d), Some(soak)) = (figures, self.results.soak.as_mut()) {
            soak.set_drive(d);
        }
        if let Some(id) = identity {
            self.results.device = Some(id);
        }
        self.results.members = self.snapshot.view(|s| s.members.clone());
        self.results.verified_bytes = self
            .snapshot
            .fixed
            .verify
            .as_ref()
            .map_or(0, |v| v.counters.checked_bytes());
        if let Some(card) = self.snapshot.drive(|d| d.card.clone()) {
            self.results.card = Some(card);
        }
        self.ocp_phase_refresh(false);
        let reason = (self.plan_state == crate::model::verdict::PlanState::Stopped)
            .then(|| self.snapshot.view(|v| v.stop_reason.clone()))
            .flatten();
        let inputs = crate::model::verdict::ExternalInputs::from_results(&self.results);
        crate::verdict::stamp(
            &mut self.results,
            &self.snapshot.gates(),
            &inputs,
            self.plan_state,
            reason,
        );
        self.warn_failed_gates();
        let verdict = self.results.verdict.clone();
        self.snapshot.update(|s| s.verdict = verdict);
    }

    /// One WARN line for each gate of the verdict that fails for the first time in this run.
    fn warn_failed_gates(&mut self) {
        if let Some(v) = &self.results.verdict {
            for g in v.failed() {
                if self.warned_gates.insert(g.gate) {
                    let serial = self
                        .results
                        .device
                        .as_ref()
                        .map_or("", |d| d.serial.as_str());
                    tracing::warn!(target_name = %self.spec.name, serial, gate = g.gate.name(),
                        measured = %g.measured, limit = %g.limit,
                        "qualification gate {} failed on target {}{}: {} ({})",
                        g.gate.name(), self.spec.name,
                        if serial.is_empty() { String::new() } else { format!(" (serial {serial})") },
                        g.measured, g.limit);
                }
            }
        }
    }
}

/// The live verdict is evaluated at most this often (the stats interval may be 1 ms).
const LIVE_JUDGE_EVERY: Duration = Duration::from_millis(250);

/// Results files are written atomically: see [`crate::util::write_atomic`].
pub use crate::util::write_atomic;

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

pub(crate) fn quantiles(h: &Histogram<u64>) -> Option<[f64; 4]> {
    if h.is_empty() {
        return None;
    }
    let mut q = [0.0; 4];
    for (i, (p, _)) in QUANTILES.iter().enumerate() {
        q[i] = h.value_at_quantile(*p) as f64 / 1e9;
    }
    Some(q)
}

pub(crate) fn seed_for(name: &str, counter: u64) -> u64 {
    // FNV-1a of the target name, mixed with the segment counter: reproducible per plan.
    let mut h: u64 = 0xcbf29ce484222325;
    for b in name.bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x100000001b3);
    }
    h ^ counter.wrapping_mul(0x9E3779B97F4A7C15)
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
    use segment::RateWindow;

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
            w.record(crate::model::spec::Op::Read, bs, 1000);
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
            w.record(crate::model::spec::Op::Read, 4096, 1000);
        }
        let tail = w.take_report(0, ms(1), t0 + ms(101), None, true);
        r.update(&tail, ms(50));
        assert!((r.rates[0] - 10_000.0).abs() < 1e-6, "{:?}", r.rates);
        // The next full span covers the tail too: 1040 + 460 reads over [100, 200] ms.
        let mut w = crate::stats::WorkerStats::new();
        for _ in 0..1500 {
            w.record(crate::model::spec::Op::Read, 4096, 1000);
        }
        let next = w.take_report(0, ms(99), t0 + ms(200), None, false);
        r.update(&next, ms(50));
        assert!((r.rates[0] - 5_000.0).abs() < 1e-6, "{:?}", r.rates);
        // IOPS times the block size is the bandwidth, whatever the spans.
        assert!((r.rates[2] - r.rates[0] * 4096.0).abs() < 1e-3);
    }

    #[test]
    fn the_soak_clock_stops_when_paused_or_finished() {
        let mut s = TargetView {
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
    fn a_stopped_phase_keeps_its_time_and_the_soak_counts_only_soak_phases() {
        let mut s = TargetView::default();
        // The phase resumed 4 s in at 100 and stopped at 106: the checkpoint says 10 s.
        s.start_phase_clock(4.0, 100.0);
        assert_eq!(s.phase_elapsed_at(103.0), 7.0);
        s.pause_clock(106.0);
        assert_eq!(s.phase_elapsed_at(500.0), 10.0);
        // The device came back at 200: the phase clock runs on from 10 s.
        s.resume_clock(200.0);
        assert_eq!(s.phase_elapsed_at(203.0), 13.0);

        // A precondition wrote 1 MiB, then a read-only soak read 4 KiB twice.
        let mut v = TargetView {
            carried: crate::model::totals::Totals {
                write_bytes: 7,
                ..Default::default()
            },
            ..Default::default()
        };
        v.soak.carried.read_bytes = 100;
        v.jobs.entry("precondition".into()).or_default().write.bytes = 1 << 20;
        v.soak.begin(&v.jobs, 1000.0);
        v.jobs.entry("rr".into()).or_default().read.bytes = 4096;
        let t = v.soak.totals(&v.jobs, 1002.0);
        assert_eq!(
            (t.write_bytes, t.read_bytes, t.soak_elapsed_secs),
            (0, 4196, 2.0)
        );
        v.soak.end(&v.jobs, 1003.0);
        // A later sweep's I/O is not the soak's; a second soak phase adds to it.
        v.jobs.entry("sweep".into()).or_default().write.bytes = 5;
        let t = v.soak.totals(&v.jobs, 2000.0);
        assert_eq!(
            (t.write_bytes, t.read_bytes, t.soak_elapsed_secs),
            (0, 4196, 3.0)
        );
        v.soak.begin(&v.jobs, 2000.0);
        v.jobs.entry("rr".into()).or_default().read.bytes = 8192;
        v.pause_clock(2001.0);
        let t = v.soak.totals(&v.jobs, 9000.0);
        assert_eq!(
            (t.write_bytes, t.read_bytes, t.soak_elapsed_secs),
            (0, 8292, 4.0)
        );
        // The plan's totals count every phase.
        let p = v.plan_totals();
        assert_eq!((p.write_bytes, p.read_bytes), (7 + (1 << 20) + 5, 8192));
    }

    #[test]
    fn a_finished_job_keeps_its_totals_and_loses_its_rates() {
        let mut s = TargetView::default();
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
