//! The results schema: what a target's phases measured (the sweeps, the steady-state outcome
//! and the soak summary), as the scheduler writes it to `<state.dir>/results/<target>.json`
//! whenever a sweep point or round completes; `nvsoak report` reads these files.
//!
//! Format versions: 1 had no drive-side soak figures; 2 adds [`SoakSummary::drive`]
//! ([`DriveSoak`]); 3 adds [`SoakSummary::history`], the soak over time
//! ([`crate::model::soakhist`]). Every field added after version 1 is `serde(default)`, so
//! older files load.
//!
//! The file's reading, writing and moving aside is persistence: `state::results`.
//!
//! [`drive_soak`] is the pure computation of the drive-side figures: two SMART logs (at soak
//! start and at the latest successful poll) and nvsoak's own totals read at the same instants.

use serde::{Deserialize, Serialize};

use crate::ata::vendor::WritesSource;
use crate::nvme::log::smart::SmartLog;

/// The format version this nvsoak writes.
pub const RESULTS_VERSION: u32 = 3;

/// Bytes per SMART data unit (1000 x 512 bytes).
pub const DATA_UNIT_BYTES: u64 = 512_000;

/// How far the drive's data-written delta may be from nvsoak's bytes written before the
/// accounting check calls it a disagreement: the drive rounds its counter up to whole data
/// units, so each end of the period may be off by up to one unit.
pub const ACCOUNTING_TOLERANCE_BYTES: u64 = 2 * DATA_UNIT_BYTES;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TargetResults {
    /// Results file format version.
    pub version: u32,
    pub host: String,
    pub target: String,
    pub path: String,
    /// Identity of the drive behind the target, when it is an NVMe namespace.
    pub device: Option<DeviceIdentity>,
    pub sweeps: Vec<SweepResult>,
    pub steady: Vec<SteadyOutcome>,
    pub soak: Option<SoakSummary>,
    /// The purges and self-tests the plan ran, in order (`model::steps`).
    #[serde(default)]
    pub qualification_steps: Vec<crate::model::steps::StepOutcome>,
    /// The pass/fail verdict as of this write (final once the plan has ended); files written
    /// before verdicts existed have none.
    #[serde(default)]
    pub verdict: Option<crate::model::verdict::Verdict>,
    /// The drive's C3h latency-outlier counts at each phase's start and end
    /// (`model::ocp_phases`); empty for drives without C3h and older files.
    #[serde(default)]
    pub ocp_phases: Vec<crate::model::ocp_phases::OcpPhaseCounts>,
    /// Every phase run of the plan, in the order they ran, with the times they started and
    /// ended ([`PhaseRecord`]); empty in files written before nvsoak kept them.
    #[serde(default)]
    pub phases: Vec<PhaseRecord>,
    /// A target spanning several block devices (`paths`): each member's figures, in the order
    /// of `paths` over the whole plan (`soak.plan` is their sum). Empty for a target with one path.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub members: Vec<MemberFigures>,
    /// A spanning target whose members are all on one card that `[[health.card]]` rates: the
    /// card and its rating, which the report compares the target's sweeps with ("of rated").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub card: Option<SpanCard>,
    /// What the target is and what its plan checks, for which gates apply to it
    /// (`verdict::Subject`); `None` in files written before it was recorded.
    #[serde(default)]
    pub subject: Option<crate::model::verdict::Subject>,
    /// Bytes read back and checked against what was written (verify), over the whole plan.
    #[serde(default)]
    pub verified_bytes: u64,
    /// The verification scheme and the memory its state keeps, set when verification starts
    /// (`model::verify_cost`); `None` when verify is off, and in files written before it was
    /// recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verify_state: Option<crate::model::verify_cost::VerifyState>,
    /// Who the target's device is (`state::device_key`: WWN or serial, else for a loop device
    /// its backing file's device and inode with size and offset, else sysfs's identity): a
    /// resume or a finished plan is only ever judged on the device it tested.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_key: Option<String>,
}

pub use crate::model::soakhist::StopCause;

/// How a phase run stands.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PhaseStatus {
    /// Started and not ended (or the daemon was killed in it: a resume continues it).
    #[default]
    Running,
    /// Ran to its end.
    Finished,
    /// Stopped by a signal or a reload before its end; a resumed run continues it.
    Stopped,
    /// An error stopped the target in this phase.
    Failed,
}

impl PhaseStatus {
    pub fn word(self) -> &'static str {
        match self {
            PhaseStatus::Running => "running",
            PhaseStatus::Finished => "finished",
            PhaseStatus::Stopped => "stopped before its end",
            PhaseStatus::Failed => "failed",
        }
    }
}

/// One phase of the plan as it ran: which phase (numbered from 1, as the log, `check-config`,
/// `state show`, the status page and the report number them), of which plan loop, and the Unix
/// times it started and ended. A phase stopped and resumed any number of times is one record:
/// its first start, its last end.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PhaseRecord {
    /// 1-based position in the plan.
    pub phase: usize,
    /// The same, 0-based (the checkpoint's `phase_index`).
    pub phase_index: usize,
    pub loop_count: u64,
    /// `precondition`, `sweep`, `soak`, `purge`, `self-test`.
    pub kind: String,
    /// The job names (joined by " + "), the purge method or the self-test.
    pub name: String,
    pub started: f64,
    /// `None` while it runs.
    pub ended: Option<f64>,
    pub status: PhaseStatus,
    /// Runs of the daemon the phase took (1, plus one per resume).
    pub runs: u32,
    /// Why it stopped, written when it stops before its end (`status` `Stopped`); `None`
    /// otherwise and in older files (read as [`StopCause::Stopped`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stopped_by: Option<StopCause>,
    /// The kernel's boot id of the run that last ran the phase (`None` in older files): a
    /// resume that finds the phase still `Running` (the daemon did not close it) under
    /// another boot id tells a power loss or a reset from a crash or `kill -9`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub boot_id: Option<String>,
}

impl PhaseRecord {
    /// "phase 2 (sweep rr)".
    pub fn title(&self) -> String {
        if self.name.is_empty() || self.name == self.kind {
            format!("phase {} ({})", self.phase, self.kind)
        } else {
            format!("phase {} ({} {})", self.phase, self.kind, self.name)
        }
    }
}

/// Phase `phase_index` of loop `loop_count` starts at `now`: a new record, or, when the last
/// record is that phase and did not end (`Stopped`, or `Running` after a kill), that record
/// reopened (its first start stays). Returns whether it was reopened.
pub fn phase_began(
    list: &mut Vec<PhaseRecord>,
    phase_index: usize,
    loop_count: u64,
    kind: &str,
    name: &str,
    now: f64,
) -> bool {
    if let Some(p) = list.last_mut().filter(|p| {
        p.phase_index == phase_index
            && p.loop_count == loop_count
            && p.kind == kind
            && matches!(p.status, PhaseStatus::Running | PhaseStatus::Stopped)
    }) {
        p.status = PhaseStatus::Running;
        p.ended = None;
        p.stopped_by = None;
        p.runs += 1;
        return true;
    }
    list.push(PhaseRecord {
        phase: phase_index + 1,
        phase_index,
        loop_count,
        kind: kind.to_string(),
        name: name.to_string(),
        started: now,
        ended: None,
        status: PhaseStatus::Running,
        runs: 1,
        stopped_by: None,
        boot_id: None,
    });
    false
}

/// When phase `phase_index` of loop `loop_count` (a `kind` phase) resumes the last record
/// (see [`phase_began`]), why and when that record's run stopped: the cause written when it
/// stopped (`Stopped`), or, when the daemon never closed it (`Running`), an unclean stop,
/// a power loss when the record's boot id is not `boot_id`. `None` when the phase does not
/// resume the last record. Call it before [`phase_began`] reopens the record.
pub fn resume_cause(
    list: &[PhaseRecord],
    phase_index: usize,
    loop_count: u64,
    kind: &str,
    boot_id: Option<&str>,
) -> Option<(StopCause, Option<f64>)> {
    let p = list
        .last()
        .filter(|p| p.phase_index == phase_index && p.loop_count == loop_count && p.kind == kind)?;
    match p.status {
        PhaseStatus::Stopped => Some((p.stopped_by.unwrap_or(StopCause::Stopped), p.ended)),
        PhaseStatus::Running => {
            let rebooted = matches!((p.boot_id.as_deref(), boot_id), (Some(a), Some(b)) if a != b);
            Some((
                if rebooted {
                    StopCause::PowerLoss
                } else {
                    StopCause::Unclean
                },
                None,
            ))
        }
        PhaseStatus::Finished | PhaseStatus::Failed => None,
    }
}

/// The running phase (the last record) ended at `now` with `status`.
pub fn phase_closed(list: &mut [PhaseRecord], status: PhaseStatus, now: f64) {
    if let Some(p) = list.last_mut().filter(|p| p.status == PhaseStatus::Running) {
        p.status = status;
        p.ended = Some(now.max(p.started));
    }
}

/// The card a spanning target covers, with the rating `[[health.card]]` gave it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SpanCard {
    /// The card's id (its switch upstream port's address, else `slot:NAME`).
    pub card: String,
    /// The rating series, e.g. "Liqid Element AIC".
    pub rating: String,
    pub random_read_iops: Option<f64>,
    pub random_write_iops: Option<f64>,
    pub seq_read_bytes_per_second: Option<f64>,
    pub seq_write_bytes_per_second: Option<f64>,
}

/// One member of a target spanning several block devices: what nvsoak did on it, cumulative
/// over the plan (restarts included). Workers are spread over the members (worker `i` on
/// member `i mod n`), so these are the figures of the workers on that member.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MemberFigures {
    pub path: String,
    /// The kernel's name of the block device (`nvme1n1`, `loop3`): the `device` label of the
    /// `nvsoak_target_member_*` metrics.
    #[serde(default)]
    pub device: String,
    /// The NVMe controller the namespace is on (`nvme1`), to join with `nvme_*` series.
    #[serde(default)]
    pub controller: Option<String>,
    /// The device's `state::device_key` (WWN or serial, else kernel name and numbers).
    #[serde(default)]
    pub device_key: Option<String>,
    pub read_ops: u64,
    pub write_ops: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    #[serde(default)]
    pub errors: u64,
}

impl MemberFigures {
    /// Add what a segment did on this member.
    pub fn add(&mut self, o: &MemberFigures) {
        self.read_ops += o.read_ops;
        self.write_ops += o.write_ops;
        self.read_bytes += o.read_bytes;
        self.write_bytes += o.write_bytes;
        self.errors += o.errors;
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DeviceIdentity {
    pub controller: String,
    pub model: String,
    pub serial: String,
    pub firmware: String,
    pub capacity_bytes: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SweepResult {
    /// Profile (job) name.
    pub profile: String,
    /// Mean block size of the job in bytes (for bandwidth figures).
    pub block_size: f64,
    pub read_pct: u8,
    /// IOPS of the uncontrolled run.
    pub max_iops: f64,
    /// Unix time (seconds) the sweep started and ended.
    pub started: f64,
    pub finished: Option<f64>,
    pub points: Vec<SweepPoint>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SweepPoint {
    /// Percent of max_iops this point targeted (e.g. 50); 0 for the uncontrolled run.
    pub pct: u32,
    pub target_iops: f64,
    pub iops: f64,
    pub bytes_per_sec: f64,
    /// Latency over all ops of the point, microseconds.
    pub lat_avg_us: f64,
    pub lat_p50_us: f64,
    pub lat_p99_us: f64,
    pub lat_p999_us: f64,
    pub lat_p9999_us: f64,
    pub duration_secs: f64,
    pub errors: u64,
    /// A target spanning several devices: each member's IOPS at this point (in the order of
    /// `paths`; they sum to `iops`). Empty otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub member_iops: Vec<f64>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SteadyOutcome {
    pub profile: String,
    pub reached: bool,
    /// 1-based round in which steady state was first reached.
    pub round: Option<u64>,
    /// Unix time it was reached.
    pub since: Option<f64>,
    /// The window's per-round IOPS when reached (or the last window).
    pub window: Vec<f64>,
    pub average: f64,
    pub range_ratio: f64,
    pub slope_excursion_ratio: f64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SoakSummary {
    /// Unix time the first soak phase started (0 before one has).
    pub started: f64,
    /// Seconds, bytes, ops and I/O errors of the soak phases only, summed over every run
    /// (never less than an earlier write of this file: records only go forward).
    pub elapsed_secs: f64,
    pub read_bytes: u64,
    pub written_bytes: u64,
    pub read_ops: u64,
    pub write_ops: u64,
    pub errors: u64,
    /// Verification failures found in this plan, whichever phase read the block.
    pub verify_errors: u64,
    /// CPU seconds of the I/O worker threads during the soak phases, summed over every run:
    /// nvsoak's own code (`user`) and the kernel's work on the workers' behalf (`system`).
    /// `None` in files written before nvsoak recorded them. [`SoakSummary::cpu_per_io_ns`]
    /// divides them by the soak's I/Os.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_user_secs: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_system_secs: Option<f64>,
    /// Drive-side figures, when the target is an NVMe namespace and health polling works.
    pub smart_written_bytes_delta: Option<u64>,
    pub observed_dwpd: Option<f64>,
    pub rated_dwpd: Option<f64>,
    pub endurance_consumed_ratio: Option<f64>,
    pub throttled_secs: Option<f64>,
    pub iops_throttled: Option<f64>,
    pub iops_unthrottled: Option<f64>,
    /// The drive's own counters (format version 2), from the first health poll of the plan
    /// (before its first write) to the latest: the whole plan, precondition and sweeps
    /// included, compared with nvsoak's writes over that same period (`plan`).
    #[serde(default)]
    pub drive: Option<DriveSoak>,
    /// The whole plan's totals, every phase ([`PlanTotals`]; `None` in older files): what
    /// `drive`, which covers the plan from its first write, is compared with. The figures
    /// above cover soak phases only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<PlanTotals>,
    /// Each soak phase, with its own totals (the figures above are their sum over the soak
    /// phases; files written before this rule covered the whole plan from its start); a phase
    /// still running or stopped is marked `stopped`. Files written before have none.
    #[serde(default)]
    pub phases: Vec<SoakPhase>,
    /// The soak over time: IOPS and latency points, events, steady-state windows (format
    /// version 3); `None` in older files.
    #[serde(default)]
    pub history: Option<crate::model::soakhist::SoakHistory>,
}

impl SoakPhase {
    /// This entry as `base` (what earlier runs recorded) plus `run` (this run's part so far);
    /// `stopped` is the run's.
    pub fn set_from(&mut self, base: &SoakPhase, run: &SoakPhase) {
        self.elapsed_secs = base.elapsed_secs + run.elapsed_secs;
        self.read_bytes = base.read_bytes + run.read_bytes;
        self.written_bytes = base.written_bytes + run.written_bytes;
        self.read_ops = base.read_ops + run.read_ops;
        self.write_ops = base.write_ops + run.write_ops;
        self.errors = base.errors + run.errors;
        self.stopped = run.stopped;
        if run.ended.is_some() {
            self.ended = run.ended;
        }
    }
}

/// The whole plan's totals of a target (every phase: precondition, sweeps, soaks, verification
/// passes), over all runs of the plan: what the drive accounting check compares the drive's
/// own counters with (its baseline predates the plan's first write). The soak summary has the
/// soak phases' own.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PlanTotals {
    /// Seconds the plan has run (downtime excluded).
    pub elapsed_secs: f64,
    pub read_bytes: u64,
    pub written_bytes: u64,
    pub read_ops: u64,
    pub write_ops: u64,
    pub errors: u64,
}

impl PlanTotals {
    pub fn of(t: &crate::model::totals::Totals) -> PlanTotals {
        PlanTotals {
            elapsed_secs: t.soak_elapsed_secs,
            read_bytes: t.read_bytes,
            written_bytes: t.write_bytes,
            read_ops: t.read_ops,
            write_ops: t.write_ops,
            errors: t.errors,
        }
    }

    pub fn to_totals(&self) -> crate::model::totals::Totals {
        crate::model::totals::Totals {
            soak_elapsed_secs: self.elapsed_secs,
            read_bytes: self.read_bytes,
            write_bytes: self.written_bytes,
            read_ops: self.read_ops,
            write_ops: self.write_ops,
            errors: self.errors,
            ..Default::default()
        }
    }
}

impl SoakSummary {
    /// Worker CPU nanoseconds per completed soak I/O, `(user, system)`; `None` when the file
    /// has no CPU figures or the soak completed no I/O.
    pub fn cpu_per_io_ns(&self) -> Option<(f64, f64)> {
        let ops = self.read_ops + self.write_ops;
        match (self.cpu_user_secs, self.cpu_system_secs) {
            (Some(u), Some(k)) if ops > 0 => Some((u * 1e9 / ops as f64, k * 1e9 / ops as f64)),
            _ => None,
        }
    }

    /// The soak's totals as checkpoint totals (for the resume's larger-of rule).
    pub fn to_totals(&self) -> crate::model::totals::Totals {
        crate::model::totals::Totals {
            soak_elapsed_secs: self.elapsed_secs,
            read_bytes: self.read_bytes,
            write_bytes: self.written_bytes,
            read_ops: self.read_ops,
            write_ops: self.write_ops,
            errors: self.errors,
            verify_errors: self.verify_errors,
            cpu_user_ns: self.cpu_user_secs.map_or(0, |s| (s * 1e9) as u64),
            cpu_sys_ns: self.cpu_system_secs.map_or(0, |s| (s * 1e9) as u64),
            ..Default::default()
        }
    }
}

/// One soak phase's own figures, kept current while it runs and final when it ends.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SoakPhase {
    /// 1-based position in the plan.
    pub phase: usize,
    /// The phase's job names, joined by " + ".
    pub profile: String,
    pub started: f64,
    /// Unix time it ended (or was last stopped); `None` in older files.
    pub ended: Option<f64>,
    pub elapsed_secs: f64,
    pub read_bytes: u64,
    pub written_bytes: u64,
    pub read_ops: u64,
    pub write_ops: u64,
    pub errors: u64,
    /// The phase was stopped (shutdown, reload) before its end: a soak without a duration
    /// always ends this way. A resumed run adds to this entry instead of adding another.
    pub stopped: bool,
    /// The phase is running now, with `elapsed_secs` its time so far: set only on the live
    /// report's copy (the daemon's `/report`, from the running target), never written.
    #[serde(skip)]
    pub running: bool,
}

impl SoakSummary {
    /// Records a soak phase's figures. When `resumed`, the run continued a phase an earlier run
    /// stopped: its figures are added to that run's entry (the last stopped entry of the same
    /// phase and profile), so a soak stopped and resumed any number of times is one entry.
    pub fn record_phase(&mut self, rec: SoakPhase, resumed: bool) {
        let i = self.open_phase(rec.phase, &rec.profile, rec.started, resumed);
        let entry = &mut self.phases[i];
        let base = entry.clone();
        entry.set_from(&base, &rec);
    }

    /// The index of the entry a soak phase starting now writes to: when `resumed`, the last
    /// entry if it is a stopped one of the same phase and profile (the run continues it), else
    /// a new entry (zero totals, marked stopped until the phase ends). The scheduler keeps the
    /// entry current at every results write, so a run killed with `-9` still has its part in
    /// it, and the run that resumes it adds to it.
    pub fn open_phase(
        &mut self,
        phase: usize,
        profile: &str,
        started: f64,
        resumed: bool,
    ) -> usize {
        if resumed
            && let Some(prev) = self.phases.last()
            && prev.stopped
            && prev.phase == phase
            && prev.profile == profile
        {
            return self.phases.len() - 1;
        }
        self.phases.push(SoakPhase {
            phase,
            profile: profile.to_string(),
            started,
            stopped: true,
            ..Default::default()
        });
        self.phases.len() - 1
    }

    /// Store the drive-side figures, and the version-1 fields derived from them.
    pub fn set_drive(&mut self, d: DriveSoak) {
        self.smart_written_bytes_delta = d.data_written_bytes;
        self.observed_dwpd = d.observed_dwpd;
        self.rated_dwpd = d.rated_dwpd.or(self.rated_dwpd);
        self.endurance_consumed_ratio = d.endurance_consumed_ratio;
        self.throttled_secs = match (d.tmt1_secs, d.tmt2_secs) {
            (Some(a), Some(b)) => Some(a as f64 + b as f64),
            _ => None,
        };
        self.iops_throttled = d.iops_throttled;
        self.iops_unthrottled = d.iops_unthrottled;
        self.drive = Some(d);
    }
}

/// nvsoak's own soak totals for one target (all runs of the soak), read right after a SMART
/// read of its drive.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct HostAtSmart {
    /// Unix time of the poll.
    pub time: f64,
    pub read_bytes: u64,
    pub written_bytes: u64,
    pub read_ops: u64,
    pub write_ops: u64,
}

/// One end of the soak period: a SMART log, when it was read, and nvsoak's totals at that
/// instant (`None` when unknown, e.g. a checkpoint from before nvsoak recorded them).
#[derive(Debug, Clone, Copy)]
pub struct DriveReading<'a> {
    pub time: f64,
    pub smart: &'a SmartLog,
    pub host: Option<HostAtSmart>,
}

/// The drive's counters over the soak: from the SMART log at soak start to the latest
/// successful poll. A delta is `None` when a counter went backwards (drive reset or replaced),
/// never negative.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct DriveSoak {
    /// The controller (`nvme0`).
    pub device: String,
    /// Unix time of the two SMART reads the deltas span.
    pub start_time: f64,
    pub latest_time: f64,
    /// Data units written / read (x 512 000 bytes).
    pub data_written_bytes: Option<u64>,
    pub data_read_bytes: Option<u64>,
    pub host_write_commands: Option<u64>,
    pub host_read_commands: Option<u64>,
    pub media_errors: Option<u64>,
    pub error_log_entries: Option<u64>,
    pub unsafe_shutdowns: Option<u64>,
    /// Warning / critical composite temperature time, seconds.
    pub warning_temp_secs: Option<u64>,
    pub critical_temp_secs: Option<u64>,
    /// Thermal management temperature 1 / 2 transition counts and time (seconds).
    pub tmt1_transitions: Option<u64>,
    pub tmt2_transitions: Option<u64>,
    pub tmt1_secs: Option<u64>,
    pub tmt2_secs: Option<u64>,
    /// Throttling episodes nvsoak's poller saw during the soak (summed over restarts).
    pub throttle_episodes: Option<u64>,
    /// Percent, as the drive reports them.
    pub percentage_used_start: u8,
    pub percentage_used_latest: u8,
    pub available_spare_start: u8,
    pub available_spare_latest: u8,
    pub available_spare_threshold: u8,
    pub critical_warning_latest: u8,
    /// Every critical-warning bit seen set at any poll of the period (OR of the polls).
    pub critical_warning_seen: u8,
    /// Highest composite temperature seen at any poll of the period, kelvin.
    pub temperature_max_kelvin: Option<u16>,
    /// Some counter went backwards between the two reads.
    pub counter_went_backwards: bool,
    /// nvsoak's own I/O between the two reads.
    pub nvsoak_written_bytes: Option<u64>,
    pub nvsoak_read_bytes: Option<u64>,
    pub nvsoak_write_ops: Option<u64>,
    pub nvsoak_read_ops: Option<u64>,
    /// `data_written_bytes / nvsoak_written_bytes` (1.0: they agree).
    pub accounting_ratio: Option<f64>,
    /// The two agree within [`ACCOUNTING_TOLERANCE_BYTES`].
    pub accounting_agrees: Option<bool>,
    /// Drive bytes written per day over the capacity, over the period.
    pub observed_dwpd: Option<f64>,
    pub capacity_bytes: Option<u64>,
    /// From the poller's derivations at the latest poll (config or ratings table).
    pub rated_dwpd: Option<f64>,
    pub endurance_consumed_ratio: Option<f64>,
    pub iops_throttled: Option<f64>,
    pub iops_unthrottled: Option<f64>,
    /// A SATA drive's own figures (`health::collect::ata::soak`); `None` for NVMe drives. For a SATA
    /// drive, `media_errors` holds its reported uncorrectable errors.
    pub ata: Option<crate::model::results::AtaSoak>,
    /// The drive's own view (`health::ocp_pages`; absent from older files, so defaulted).
    /// OCP C1h: the panic ID or panic count changed during the soak; `None` when the drive has
    /// no C1h page. Counts the events this run of the daemon saw.
    pub ocp_panic_changed: Option<bool>,
    /// Telemetry 08h: the controller-initiated data generation number changed during the soak;
    /// `None` when the drive has no telemetry page.
    pub telemetry_generation_changed: Option<bool>,
    /// The PCIe link of the drive (or a port on its path) ran below what both ends support
    /// at a poll during the plan (`pcie::link_degraded_during`); `None` when sysfs has no link
    /// figures for it.
    pub link_degraded: Option<bool>,
    /// The drive events seen during the soak, oldest first.
    pub drive_events: Vec<crate::model::events::DriveEvent>,
    /// OCP C3h static bucket counters (per bucket: read, write, deallocate) at the first C3h
    /// read of the soak and at the latest poll.
    pub ocp_latency_start: Option<crate::model::events::LatencyCounts>,
    pub ocp_latency_latest: Option<crate::model::events::LatencyCounts>,
}

impl DriveSoak {
    /// Media errors rose during the soak (for a SATA drive: reported uncorrectable errors or
    /// reallocated sectors).
    pub fn media_errors_rose(&self) -> bool {
        self.media_errors.is_some_and(|n| n > 0)
            || self
                .ata
                .as_ref()
                .is_some_and(|a| a.reallocated.is_some_and(|n| n > 0))
    }

    /// The drive throttled during the soak: an episode seen, or thermal management time or
    /// transitions rose.
    pub fn throttled(&self) -> bool {
        [
            self.throttle_episodes,
            self.tmt1_transitions,
            self.tmt2_transitions,
            self.tmt1_secs,
            self.tmt2_secs,
        ]
        .iter()
        .any(|v| v.is_some_and(|n| n > 0))
    }

    /// The accounting check failed (beyond rounding).
    pub fn accounting_off(&self) -> bool {
        self.accounting_agrees == Some(false)
    }
}

/// The drive-side figures between `start` and `latest`. Pure. `capacity_bytes` is what DWPD
/// refers to (rated capacity, else the drive's). `device`, the throttle episodes and the
/// rated figures are left for the caller, which knows them from the poller.
pub fn drive_soak(
    start: &DriveReading<'_>,
    latest: &DriveReading<'_>,
    capacity_bytes: Option<u64>,
) -> DriveSoak {
    let mut backwards = false;
    let mut d128 = |a: u128, b: u128| -> Option<u64> {
        match b.checked_sub(a) {
            Some(v) => u64::try_from(v).ok(),
            None => {
                backwards = true;
                None
            }
        }
    };
    let (s, l) = (start.smart, latest.smart);
    let written_units = d128(s.data_units_written, l.data_units_written);
    let read_units = d128(s.data_units_read, l.data_units_read);
    let host_write_commands = d128(s.host_write_commands, l.host_write_commands);
    let host_read_commands = d128(s.host_read_commands, l.host_read_commands);
    let media_errors = d128(s.media_errors, l.media_errors);
    let error_log_entries = d128(s.num_err_log_entries, l.num_err_log_entries);
    let unsafe_shutdowns = d128(s.unsafe_shutdowns, l.unsafe_shutdowns);
    let mut d32 = |a: u32, b: u32| -> Option<u64> {
        match b.checked_sub(a) {
            Some(v) => Some(u64::from(v)),
            None => {
                backwards = true;
                None
            }
        }
    };
    let warning_temp_secs = d32(s.warning_temp_time, l.warning_temp_time).map(|m| m * 60);
    let critical_temp_secs = d32(s.critical_comp_time, l.critical_comp_time).map(|m| m * 60);
    let tmt1_transitions = d32(s.thm_temp1_trans_count, l.thm_temp1_trans_count);
    let tmt2_transitions = d32(s.thm_temp2_trans_count, l.thm_temp2_trans_count);
    let tmt1_secs = d32(s.thm_temp1_total_time, l.thm_temp1_total_time);
    let tmt2_secs = d32(s.thm_temp2_total_time, l.thm_temp2_total_time);
    let data_written_bytes = written_units.and_then(|u| u.checked_mul(DATA_UNIT_BYTES));
    let data_read_bytes = read_units.and_then(|u| u.checked_mul(DATA_UNIT_BYTES));

    let host = match (start.host, latest.host) {
        (Some(a), Some(b)) => Some((a, b)),
        _ => None,
    };
    let hd = |f: fn(&HostAtSmart) -> u64| host.and_then(|(a, b)| f(&b).checked_sub(f(&a)));
    let nvsoak_written_bytes = hd(|h| h.written_bytes);
    let (accounting_ratio, accounting_agrees) = match (data_written_bytes, nvsoak_written_bytes) {
        (Some(drive), Some(ours)) => (
            (ours > 0).then(|| drive as f64 / ours as f64),
            Some(drive.abs_diff(ours) <= ACCOUNTING_TOLERANCE_BYTES),
        ),
        _ => (None, None),
    };
    let days = (latest.time - start.time) / 86_400.0;
    let observed_dwpd = match (data_written_bytes, capacity_bytes) {
        (Some(b), Some(c)) if c > 0 && days > 0.0 => Some(b as f64 / c as f64 / days),
        _ => None,
    };
    DriveSoak {
        device: String::new(),
        start_time: start.time,
        latest_time: latest.time,
        data_written_bytes,
        data_read_bytes,
        host_write_commands,
        host_read_commands,
        media_errors,
        error_log_entries,
        unsafe_shutdowns,
        warning_temp_secs,
        critical_temp_secs,
        tmt1_transitions,
        tmt2_transitions,
        tmt1_secs,
        tmt2_secs,
        throttle_episodes: None,
        percentage_used_start: s.percent_used,
        percentage_used_latest: l.percent_used,
        available_spare_start: s.avail_spare,
        available_spare_latest: l.avail_spare,
        available_spare_threshold: l.spare_thresh,
        critical_warning_latest: l.critical_warning,
        critical_warning_seen: s.critical_warning | l.critical_warning,
        temperature_max_kelvin: Some(s.temperature.max(l.temperature)).filter(|k| *k > 0),
        counter_went_backwards: backwards,
        nvsoak_written_bytes,
        nvsoak_read_bytes: hd(|h| h.read_bytes),
        nvsoak_write_ops: hd(|h| h.write_ops),
        nvsoak_read_ops: hd(|h| h.read_ops),
        accounting_ratio,
        accounting_agrees,
        observed_dwpd,
        capacity_bytes,
        ..Default::default()
    }
}

/// The ATA-only figures of a [`DriveSoak`]: where the written bytes came from and the
/// counters NVMe drives do not have. Deltas are `None` when the drive does not report the
/// counter or it went backwards.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct AtaSoak {
    /// Where the drive's bytes written came from (`device_statistics`, `attribute_241`);
    /// `None`: the drive reports no bytes written.
    pub written_source: Option<WritesSource>,
    /// The step of that counter in bytes, and the accounting tolerance it gives (one step at
    /// each end, at least [`ACCOUNTING_TOLERANCE_BYTES`]).
    pub written_unit_bytes: u64,
    pub accounting_tolerance_bytes: u64,
    pub power_on_secs: Option<u64>,
    pub uncorrectable: Option<u64>,
    pub reallocated: Option<u64>,
    pub crc_errors: Option<u64>,
    /// The highest temperature nvsoak's polls saw during the soak, and the latest.
    pub temperature_max_c: Option<i16>,
    pub temperature_latest_c: Option<i16>,
    /// Percentage Used Endurance Indicator (Device Statistics), when the drive reports it.
    pub percentage_used_start: Option<u8>,
    pub percentage_used_latest: Option<u8>,
    /// SMART RETURN STATUS at the latest poll.
    pub smart_passed_latest: Option<bool>,
}

impl AtaSoak {
    /// The written counter's unit is an assumption (a vendor attribute), which the accounting
    /// ratio calibrates.
    pub fn unit_uncertain(&self) -> bool {
        self.written_source == Some(WritesSource::Attribute241)
    }
}

#[cfg(test)]
mod tests;
