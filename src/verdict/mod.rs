//! Pass/fail gates and the verdict per target: ship the drive or send it back.
//!
//! [`evaluate`] is pure: from a target's results (the same record `nvsoak report` reads), the
//! configured [`GateSettings`], the rated figures of the drive (when the ratings table knows it)
//! and the [`ExternalInputs`] other parts of nvsoak provide (self-test outcomes, the PCIe link,
//! the OCP panic count), it gives a [`Verdict`]: every gate with its state (pass, fail, not
//! evaluated, off), its figure and its limit. The scheduler stamps the verdict into the results
//! file every time it writes it ([`stamp`]), so it stands as of that write while the plan runs
//! and is final once the plan has ended.
//!
//! Defaults follow the anchors: Meta's ocp-diag-autoval-ssd (no new media errors or error-log
//! entries, critical warning never set, temperature at most 348 K, spare at or above the
//! drive's threshold) and the OCP Datacenter NVMe SSD specification (percentage used at most
//! 100 %), plus nvsoak's own checks (no I/O or verify errors, the accounting check).
//!
//! Architecture Invariant: a gate without the data it needs is "not evaluated", never a pass.

mod ata;
pub mod exit;
pub mod ocptv;

use serde::{Deserialize, Serialize};

use crate::nvme::log::smart::CRITICAL_WARNING_BITS;
use crate::report::compute::{self, LatencyBasis, RatedFigures, SUB_MS_LIMIT_US};
use crate::workload::results::{DATA_UNIT_BYTES, DriveSoak, TargetResults};

/// Autoval's temperature limit: 348 K.
pub const DEFAULT_MAX_TEMPERATURE_CELSIUS: f64 = 348.0 - 273.15;

/// The lower bound on available spare.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SpareMin {
    /// The drive's own Available Spare Threshold (SMART log byte 4).
    Threshold,
    /// A percentage of spare (0..=100).
    Percent(u8),
}

/// The gates of one target, as configured (`[gates]`, `[target.gates]`). `None` (or `false`)
/// turns a gate off.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GateSettings {
    /// A gate not evaluated fails the verdict (default: it is shown but does not fail it).
    pub strict: bool,
    /// Most verify errors allowed.
    pub max_verify_errors: Option<u64>,
    /// Most I/O errors allowed.
    pub max_io_errors: Option<u64>,
    /// Most new media errors (SMART log) allowed over the plan.
    pub max_new_media_errors: Option<u64>,
    /// Most new error-log entries (SMART log) allowed over the plan.
    pub max_new_error_log_entries: Option<u64>,
    /// The critical warning must never be set during the plan.
    pub critical_warning: bool,
    /// Self-tests must have passed.
    pub self_test: bool,
    /// Highest composite temperature allowed, °C.
    pub max_temperature_celsius: Option<f64>,
    pub min_available_spare: Option<SpareMin>,
    /// Highest percentage used allowed, percent.
    pub max_percentage_used: Option<u8>,
    /// How far (share of nvsoak's bytes written) the drive's data written may be from
    /// nvsoak's, beyond the data units' rounding.
    pub accounting_tolerance: Option<f64>,
    /// The PCIe link must not be degraded.
    pub link: bool,
    /// The OCP panic count must not change.
    pub ocp_panics: bool,
    /// Least share of the rated random IOPS a sweep must peak at (0.8 = 80 %).
    pub min_rated_iops_ratio: Option<f64>,
    /// Least IOPS of the sub-1 ms frontier (average latency below 1 ms).
    pub min_sub_1ms_iops: Option<f64>,
}

impl Default for GateSettings {
    fn default() -> Self {
        GateSettings {
            strict: false,
            max_verify_errors: Some(0),
            max_io_errors: Some(0),
            max_new_media_errors: Some(0),
            max_new_error_log_entries: Some(0),
            critical_warning: true,
            self_test: true,
            max_temperature_celsius: Some(DEFAULT_MAX_TEMPERATURE_CELSIUS),
            min_available_spare: Some(SpareMin::Threshold),
            max_percentage_used: Some(100),
            accounting_tolerance: Some(0.0),
            link: true,
            ocp_panics: true,
            min_rated_iops_ratio: None,
            min_sub_1ms_iops: None,
        }
    }
}

/// Inputs other parts of nvsoak provide; `None` until they do (the gate is then "not
/// evaluated").
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ExternalInputs {
    /// The self-test phases' outcome.
    pub self_test: Option<Outcome>,
    /// Whether the PCIe link ran degraded (below its capability) during the plan.
    pub link_degraded: Option<Outcome>,
    /// How much the OCP Error Recovery log's panic count rose over the plan.
    pub ocp_panic_count_change: Option<u64>,
}

impl ExternalInputs {
    /// The inputs a results file itself carries: the self-test phases' outcome from
    /// `qualification_steps` (every self-test passed, or the controller has none); `None` when
    /// the plan ran no self-test yet.
    pub fn from_results(r: &TargetResults) -> ExternalInputs {
        use crate::workload::steps::StepStatus;
        // A refused self-test (not an NVMe namespace, or a controller that cannot run one
        // now) has no outcome to judge: it leaves the gate "not evaluated" rather than failed.
        let tests: Vec<_> = r
            .qualification_steps
            .iter()
            .filter(|s| s.kind == "self-test" && s.status != StepStatus::Refused)
            .collect();
        let self_test = (!tests.is_empty()).then(|| {
            let ok = |s: StepStatus| matches!(s, StepStatus::Passed | StepStatus::NotSupported);
            let value = tests.iter().all(|t| ok(t.status));
            let detail = tests
                .iter()
                .map(|t| format!("{} self-test: {}", t.method, t.status.name()))
                .collect::<Vec<_>>()
                .join("; ");
            Outcome { value, detail }
        });
        let drive = r.soak.as_ref().and_then(|s| s.drive.as_ref());
        let link_degraded = drive.and_then(|d| d.link_degraded).map(|value| Outcome {
            value,
            detail: if value {
                "a link on the drive's path ran below what both ends support".into()
            } else {
                "every link on the drive's path at its full speed and width".into()
            },
        });
        // The panics the daemon saw as events (ID or count changed), when the drive has C1h.
        let ocp_panic_count_change = drive.and_then(|d| {
            d.ocp_panic_changed.map(|changed| {
                let seen = d
                    .drive_events
                    .iter()
                    .filter(|e| e.kind == crate::health::ocp_pages::kind::OCP_PANIC)
                    .count() as u64;
                if changed { seen.max(1) } else { 0 }
            })
        });
        ExternalInputs {
            self_test,
            link_degraded,
            ocp_panic_count_change,
        }
    }
}

/// A yes/no outcome with what it rests on, for inputs like self-tests and the link.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Outcome {
    /// For `self_test`: every self-test passed (or the controller has none); for
    /// `link_degraded`: the link was degraded.
    pub value: bool,
    /// What it rests on, e.g. "extended self-test: completed without error" or "x2 of x4".
    pub detail: String,
}

/// The gates, by the name they carry in metrics, the report and OCPTV.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Gate {
    VerifyErrors,
    IoErrors,
    MediaErrors,
    ErrorLogEntries,
    CriticalWarning,
    SelfTest,
    Temperature,
    AvailableSpare,
    PercentageUsed,
    Accounting,
    Link,
    OcpPanics,
    RatedIops,
    Sub1msIops,
}

impl Gate {
    pub const ALL: [Gate; 14] = [
        Gate::VerifyErrors,
        Gate::IoErrors,
        Gate::MediaErrors,
        Gate::ErrorLogEntries,
        Gate::CriticalWarning,
        Gate::SelfTest,
        Gate::Temperature,
        Gate::AvailableSpare,
        Gate::PercentageUsed,
        Gate::Accounting,
        Gate::Link,
        Gate::OcpPanics,
        Gate::RatedIops,
        Gate::Sub1msIops,
    ];

    /// The label value (`io_errors`).
    pub fn name(self) -> &'static str {
        match self {
            Gate::VerifyErrors => "verify_errors",
            Gate::IoErrors => "io_errors",
            Gate::MediaErrors => "media_errors",
            Gate::ErrorLogEntries => "error_log_entries",
            Gate::CriticalWarning => "critical_warning",
            Gate::SelfTest => "self_test",
            Gate::Temperature => "temperature",
            Gate::AvailableSpare => "available_spare",
            Gate::PercentageUsed => "percentage_used",
            Gate::Accounting => "accounting",
            Gate::Link => "link",
            Gate::OcpPanics => "ocp_panics",
            Gate::RatedIops => "rated_iops",
            Gate::Sub1msIops => "sub_1ms_iops",
        }
    }

    /// What the gate asks, in words.
    pub fn describe(self) -> &'static str {
        match self {
            Gate::VerifyErrors => "no verify errors",
            Gate::IoErrors => "no I/O errors",
            Gate::MediaErrors => "no new media errors",
            Gate::ErrorLogEntries => "no new error-log entries",
            Gate::CriticalWarning => "critical warning never set",
            Gate::SelfTest => "self-tests passed",
            Gate::Temperature => "temperature within limit",
            Gate::AvailableSpare => "available spare within bounds",
            Gate::PercentageUsed => "percentage used within bounds",
            Gate::Accounting => "accounting check within tolerance",
            Gate::Link => "PCIe link not degraded",
            Gate::OcpPanics => "no new OCP panics",
            Gate::RatedIops => "share of rated IOPS",
            Gate::Sub1msIops => "sub-1 ms frontier",
        }
    }
}

/// Where a gate stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GateState {
    Pass,
    Fail,
    #[default]
    NotEvaluated,
    /// Turned off in the config.
    Off,
}

impl GateState {
    pub fn word(self) -> &'static str {
        match self {
            GateState::Pass => "pass",
            GateState::Fail => "fail",
            GateState::NotEvaluated => "not evaluated",
            GateState::Off => "off",
        }
    }
}

/// One gate's outcome with its figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct GateResult {
    pub gate: Gate,
    pub state: GateState,
    /// The figure, in words ("3 errors", "81.0 °C").
    pub measured: String,
    /// The limit, in words ("at most 0", "at most 74.85 °C").
    pub limit: String,
    /// The figure and limit as numbers, where they are numbers (for OCPTV measurements).
    pub value: Option<f64>,
    pub threshold: Option<f64>,
    /// Why the gate was not evaluated, or what failed.
    pub note: String,
}

impl Default for GateResult {
    fn default() -> Self {
        GateResult {
            gate: Gate::IoErrors,
            state: GateState::NotEvaluated,
            measured: String::new(),
            limit: String::new(),
            value: None,
            threshold: None,
            note: String::new(),
        }
    }
}

/// How far the plan got when the verdict was evaluated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PlanState {
    /// The plan is running: the verdict stands as of now.
    #[default]
    Running,
    /// The plan ran to its end: the verdict is final.
    Finished,
    /// The target stopped on an error before the end of its plan.
    Stopped,
    /// Stopped by a signal or a reload before its end; a restart resumes it.
    Interrupted,
}

/// The verdict of one target.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Verdict {
    /// No gate failed (and, with `strict`, every gate was evaluated).
    pub passed: bool,
    pub plan: PlanState,
    /// Why the target stopped, for [`PlanState::Stopped`].
    pub stop_reason: Option<String>,
    /// Unix time of the evaluation.
    pub evaluated_at: f64,
    pub strict: bool,
    pub gates: Vec<GateResult>,
}

impl Verdict {
    /// The gates that failed (with `strict`, the ones not evaluated too).
    pub fn failed(&self) -> impl Iterator<Item = &GateResult> {
        self.gates.iter().filter(|g| {
            g.state == GateState::Fail || (self.strict && g.state == GateState::NotEvaluated)
        })
    }

    pub fn not_evaluated(&self) -> impl Iterator<Item = &GateResult> {
        self.gates
            .iter()
            .filter(|g| g.state == GateState::NotEvaluated)
    }

    /// `PASS`, `FAIL`, `INCOMPLETE` (stopped before the end, nothing failed) or `PASS so
    /// far` (running or interrupted, nothing failed yet). A failed gate is a FAIL at once:
    /// errors and new media errors never go away.
    pub fn headline(&self) -> &'static str {
        if !self.passed {
            "FAIL"
        } else {
            match self.plan {
                PlanState::Finished => "PASS",
                PlanState::Stopped => "INCOMPLETE",
                PlanState::Running | PlanState::Interrupted => "PASS so far",
            }
        }
    }

    /// The failed gates with their figures, one phrase each:
    /// `io_errors: 12 errors (at most 0)`.
    pub fn failed_summary(&self) -> Vec<String> {
        self.failed()
            .map(|g| {
                if g.state == GateState::NotEvaluated {
                    format!("{}: not evaluated ({})", g.gate.name(), g.note)
                } else {
                    format!("{}: {} ({})", g.gate.name(), g.measured, g.limit)
                }
            })
            .collect()
    }

    pub fn gate(&self, gate: Gate) -> Option<&GateResult> {
        self.gates.iter().find(|g| g.gate == gate)
    }
}

fn off(gate: Gate) -> GateResult {
    GateResult {
        gate,
        state: GateState::Off,
        note: "turned off in the config".into(),
        ..Default::default()
    }
}

fn unknown(gate: Gate, limit: String, why: &str) -> GateResult {
    GateResult {
        gate,
        state: GateState::NotEvaluated,
        limit,
        note: why.into(),
        ..Default::default()
    }
}

fn judged(gate: Gate, ok: bool, measured: String, limit: String) -> GateResult {
    GateResult {
        gate,
        state: if ok { GateState::Pass } else { GateState::Fail },
        measured,
        limit,
        ..Default::default()
    }
}

fn with_numbers(mut g: GateResult, value: f64, threshold: f64) -> GateResult {
    g.value = Some(value);
    g.threshold = Some(threshold);
    g
}

const NO_DRIVE: &str =
    "no drive data: a file target, or health polling found no NVMe drive for it (or is off)";

fn count_gate(gate: Gate, max: Option<u64>, got: Option<u64>, noun: &str, why: &str) -> GateResult {
    let Some(max) = max else {
        return off(gate);
    };
    let limit = format!("at most {max}");
    match got {
        None => unknown(gate, limit, why),
        Some(n) => with_numbers(
            judged(gate, n <= max, compute::count_of(n, noun), limit),
            n as f64,
            max as f64,
        ),
    }
}

fn warning_bits(v: u8) -> String {
    let names: Vec<&str> = CRITICAL_WARNING_BITS
        .iter()
        .filter(|(bit, _)| v & (1 << bit) != 0)
        .map(|(_, n)| *n)
        .collect();
    if names.is_empty() {
        format!("0x{v:02x}")
    } else {
        format!("0x{v:02x} ({})", names.join(", "))
    }
}

/// Evaluate every gate. Pure. `rated` are the drive's rated figures (ratings table), when
/// known; `plan` how far the plan got; `now` the Unix time recorded.
pub fn evaluate(
    g: &GateSettings,
    r: &TargetResults,
    ext: &ExternalInputs,
    rated: Option<&RatedFigures>,
    plan: PlanState,
    stop_reason: Option<String>,
    now: f64,
) -> Verdict {
    let soak = r.soak.as_ref();
    let drive: Option<&DriveSoak> = soak.and_then(|s| s.drive.as_ref());
    let no_run = "no I/O recorded yet";
    let mut gates = vec![
        count_gate(
            Gate::VerifyErrors,
            g.max_verify_errors,
            soak.map(|s| s.verify_errors),
            "error",
            no_run,
        ),
        count_gate(
            Gate::IoErrors,
            g.max_io_errors,
            soak.map(|s| s.errors),
            "error",
            no_run,
        ),
    ];
    let backwards = "a SMART counter went backwards (drive reset or replaced)";
    gates.push(count_gate(
        Gate::MediaErrors,
        g.max_new_media_errors,
        drive.and_then(|d| d.media_errors),
        "new media error",
        if drive.is_some() { backwards } else { NO_DRIVE },
    ));
    gates.push(count_gate(
        Gate::ErrorLogEntries,
        g.max_new_error_log_entries,
        drive.and_then(|d| d.error_log_entries),
        "new error-log entry",
        if drive.is_some() { backwards } else { NO_DRIVE },
    ));
    gates.push(critical_warning(g, drive));
    gates.push(outcome_gate(
        Gate::SelfTest,
        g.self_test,
        ext.self_test.as_ref(),
        false,
        "no self-test outcome: the plan has no self-test phase",
    ));
    gates.push(temperature(g, drive));
    gates.push(spare(g, drive));
    gates.push(percentage_used(g, drive));
    gates.push(accounting(g, drive));
    gates.push(outcome_gate(
        Gate::Link,
        g.link,
        ext.link_degraded.as_ref(),
        true,
        "no PCIe link figures for this target",
    ));
    gates.push(if !g.ocp_panics {
        off(Gate::OcpPanics)
    } else {
        match ext.ocp_panic_count_change {
            None => unknown(
                Gate::OcpPanics,
                "no change".into(),
                "no OCP Error Recovery log (C1h) for this drive",
            ),
            Some(n) => with_numbers(
                judged(
                    Gate::OcpPanics,
                    n == 0,
                    compute::count_of(n, "new panic"),
                    "no change".into(),
                ),
                n as f64,
                0.0,
            ),
        }
    });
    gates.push(rated_iops(g, r, rated));
    gates.push(sub_1ms(g, r));
    let failed = gates.iter().any(|x| x.state == GateState::Fail);
    let unevaluated = gates.iter().any(|x| x.state == GateState::NotEvaluated);
    Verdict {
        passed: !(failed || (g.strict && unevaluated)),
        plan,
        stop_reason,
        evaluated_at: now,
        strict: g.strict,
        gates,
    }
}

fn critical_warning(g: &GateSettings, drive: Option<&DriveSoak>) -> GateResult {
    let gate = Gate::CriticalWarning;
    if !g.critical_warning {
        return off(gate);
    }
    let limit = "never set".to_string();
    let Some(d) = drive else {
        return unknown(gate, limit, NO_DRIVE);
    };
    // A SATA disk has no critical warning byte (the NVMe-shaped field stays 0): its
    // counterpart is SMART RETURN STATUS, never passed on that zero.
    if let Some(a) = &d.ata {
        return ata::smart_status(a, limit);
    }
    let seen = d.critical_warning_seen | d.critical_warning_latest;
    let measured = if seen == 0 {
        "never set".to_string()
    } else {
        format!("set: {}", warning_bits(seen))
    };
    with_numbers(
        judged(gate, seen == 0, measured, limit),
        f64::from(seen),
        0.0,
    )
}

fn outcome_gate(
    gate: Gate,
    on: bool,
    input: Option<&Outcome>,
    bad_when_true: bool,
    why: &str,
) -> GateResult {
    if !on {
        return off(gate);
    }
    let limit = if bad_when_true {
        "not degraded".to_string()
    } else {
        "passed".to_string()
    };
    match input {
        None => unknown(gate, limit, why),
        Some(o) => {
            let ok = o.value != bad_when_true;
            let mut r = judged(gate, ok, o.detail.clone(), limit);
            r.value = Some(if ok { 1.0 } else { 0.0 });
            r.threshold = Some(1.0);
            r
        }
    }
}

fn temperature(g: &GateSettings, drive: Option<&DriveSoak>) -> GateResult {
    let gate = Gate::Temperature;
    let Some(max) = g.max_temperature_celsius else {
        return off(gate);
    };
    let limit = format!("at most {max:.2} °C ({:.2} K)", max + 273.15);
    let Some(d) = drive else {
        return unknown(gate, limit, NO_DRIVE);
    };
    if let Some(a) = &d.ata {
        return ata::temperature(a, max, limit);
    }
    let Some(k) = d.temperature_max_kelvin.filter(|k| *k > 0) else {
        return unknown(gate, limit, "the drive reported no composite temperature");
    };
    let c = crate::nvme::log::smart::SmartLog::kelvin_to_celsius(k);
    with_numbers(
        judged(gate, c <= max, format!("peak {c:.2} °C ({k} K)"), limit),
        c,
        max,
    )
}

fn spare(g: &GateSettings, drive: Option<&DriveSoak>) -> GateResult {
    let gate = Gate::AvailableSpare;
    let Some(min) = g.min_available_spare else {
        return off(gate);
    };
    let bare_limit = || match min {
        SpareMin::Threshold => "at least the drive's threshold".to_string(),
        SpareMin::Percent(p) => format!("at least {p} %"),
    };
    let Some(d) = drive else {
        return unknown(gate, bare_limit(), NO_DRIVE);
    };
    if d.ata.is_some() {
        return ata::spare(bare_limit());
    }
    let floor = match min {
        SpareMin::Threshold => d.available_spare_threshold,
        SpareMin::Percent(p) => p,
    };
    let limit = match min {
        SpareMin::Threshold => format!("at least the drive's threshold, {floor} %"),
        SpareMin::Percent(p) => format!("at least {p} %"),
    };
    let v = d.available_spare_latest;
    with_numbers(
        judged(gate, v >= floor, format!("{v} %"), limit),
        f64::from(v),
        f64::from(floor),
    )
}

fn percentage_used(g: &GateSettings, drive: Option<&DriveSoak>) -> GateResult {
    let gate = Gate::PercentageUsed;
    let Some(max) = g.max_percentage_used else {
        return off(gate);
    };
    let limit = format!("at most {max} %");
    let Some(d) = drive else {
        return unknown(gate, limit, NO_DRIVE);
    };
    if let Some(a) = &d.ata {
        return ata::percentage_used(a, max, limit);
    }
    let v = d.percentage_used_latest;
    with_numbers(
        judged(gate, v <= max, format!("{v} %"), limit),
        f64::from(v),
        f64::from(max),
    )
}

fn accounting(g: &GateSettings, drive: Option<&DriveSoak>) -> GateResult {
    let gate = Gate::Accounting;
    let Some(tol) = g.accounting_tolerance else {
        return off(gate);
    };
    let limit = format!(
        "within {} of nvsoak's bytes written, plus two data units of rounding",
        compute::fmt_pct(tol)
    );
    let Some(d) = drive else {
        return unknown(gate, limit, NO_DRIVE);
    };
    let (Some(theirs), Some(ours)) = (d.data_written_bytes, d.nvsoak_written_bytes) else {
        return unknown(
            gate,
            limit,
            "no pair of drive and nvsoak byte counts over the same period",
        );
    };
    let allowed = 2.0 * DATA_UNIT_BYTES as f64 + tol * ours as f64;
    let diff = theirs.abs_diff(ours) as f64;
    let measured = format!(
        "drive {} vs nvsoak {} written",
        compute::fmt_bytes(theirs as f64),
        compute::fmt_bytes(ours as f64)
    );
    with_numbers(
        judged(gate, diff <= allowed, measured, limit),
        diff,
        allowed,
    )
}

fn rated_iops(g: &GateSettings, r: &TargetResults, rated: Option<&RatedFigures>) -> GateResult {
    let gate = Gate::RatedIops;
    let Some(min) = g.min_rated_iops_ratio else {
        return off(gate);
    };
    let limit = format!("at least {} of the rated IOPS", compute::fmt_pct(min));
    let Some(rated) = rated else {
        return unknown(
            gate,
            limit,
            "no rated figures for this drive (ratings table)",
        );
    };
    // The worst comparable sweep (pure random reads or writes with a rated figure).
    let mut worst: Option<(String, compute::RatedShare)> = None;
    for s in &r.sweeps {
        let Some(basis) =
            compute::rated_basis(s.read_pct, compute::is_sequential(&s.profile, s.block_size))
        else {
            continue;
        };
        if !matches!(
            basis,
            compute::RatedBasis::RandomReadIops | compute::RatedBasis::RandomWriteIops
        ) {
            continue;
        }
        let curve = compute::curve(s);
        if let Some(share) = compute::rated_share(&curve, basis, rated)
            && worst.as_ref().is_none_or(|(_, w)| share.ratio < w.ratio)
        {
            worst = Some((s.profile.clone(), share));
        }
    }
    let Some((profile, share)) = worst else {
        return unknown(
            gate,
            limit,
            "no random-read or random-write sweep with a rated figure to compare",
        );
    };
    with_numbers(
        judged(
            gate,
            share.ratio >= min,
            format!(
                "{}: {} IOPS, {} of {} ({})",
                profile,
                compute::fmt_count(share.measured),
                compute::fmt_pct(share.ratio),
                compute::fmt_count(share.rated),
                share.basis.describe()
            ),
            limit,
        ),
        share.ratio,
        min,
    )
}

fn sub_1ms(g: &GateSettings, r: &TargetResults) -> GateResult {
    let gate = Gate::Sub1msIops;
    let Some(min) = g.min_sub_1ms_iops else {
        return off(gate);
    };
    let limit = format!(
        "at least {} IOPS below 1 ms average latency",
        compute::fmt_count(min)
    );
    if r.sweeps.iter().all(|s| s.points.is_empty()) {
        return unknown(gate, limit, "no sweep measured");
    }
    // The lowest frontier over the sweeps: every swept workload must reach it.
    let mut worst: Option<(String, f64)> = None;
    for s in r.sweeps.iter().filter(|s| !s.points.is_empty()) {
        let curve = compute::curve(s);
        let f = compute::frontier(&curve, LatencyBasis::Average, SUB_MS_LIMIT_US)
            .map_or(0.0, |p| p.iops);
        if worst.as_ref().is_none_or(|(_, w)| f < *w) {
            worst = Some((s.profile.clone(), f));
        }
    }
    let Some((profile, f)) = worst else {
        return unknown(gate, limit, "no sweep measured");
    };
    with_numbers(
        judged(
            gate,
            f >= min,
            format!("{profile}: {} IOPS", compute::fmt_count(f)),
            limit,
        ),
        f,
        min,
    )
}

/// The gates in one line, for `check-config`'s plan:
/// `verify_errors <= 0, io_errors <= 0, ..., temperature <= 74.85 °C; off: rated_iops`.
pub fn describe(g: &GateSettings) -> String {
    let mut on: Vec<String> = Vec::new();
    let mut off: Vec<&str> = Vec::new();
    let mut count = |gate: Gate, v: Option<u64>| match v {
        Some(n) => on.push(format!("{} <= {n}", gate.name())),
        None => off.push(gate.name()),
    };
    count(Gate::VerifyErrors, g.max_verify_errors);
    count(Gate::IoErrors, g.max_io_errors);
    count(Gate::MediaErrors, g.max_new_media_errors);
    count(Gate::ErrorLogEntries, g.max_new_error_log_entries);
    let mut flag = |gate: Gate, v: bool, what: &str| {
        if v {
            on.push(format!("{} {what}", gate.name()));
        } else {
            off.push(gate.name());
        }
    };
    flag(Gate::CriticalWarning, g.critical_warning, "never set");
    flag(Gate::SelfTest, g.self_test, "passed");
    let mut opt = |gate: Gate, v: Option<String>| match v {
        Some(s) => on.push(format!("{} {s}", gate.name())),
        None => off.push(gate.name()),
    };
    opt(
        Gate::Temperature,
        g.max_temperature_celsius.map(|c| format!("<= {c:.2} °C")),
    );
    opt(
        Gate::AvailableSpare,
        g.min_available_spare.map(|m| match m {
            SpareMin::Threshold => ">= the drive's threshold".to_string(),
            SpareMin::Percent(p) => format!(">= {p} %"),
        }),
    );
    opt(
        Gate::PercentageUsed,
        g.max_percentage_used.map(|p| format!("<= {p} %")),
    );
    opt(
        Gate::Accounting,
        g.accounting_tolerance
            .map(|t| format!("within {} + rounding", compute::fmt_pct(t))),
    );
    let mut flag = |gate: Gate, v: bool, what: &str| {
        if v {
            on.push(format!("{} {what}", gate.name()));
        } else {
            off.push(gate.name());
        }
    };
    flag(Gate::Link, g.link, "not degraded");
    flag(Gate::OcpPanics, g.ocp_panics, "unchanged");
    let mut opt = |gate: Gate, v: Option<String>| match v {
        Some(s) => on.push(format!("{} {s}", gate.name())),
        None => off.push(gate.name()),
    };
    opt(
        Gate::RatedIops,
        g.min_rated_iops_ratio
            .map(|r| format!(">= {} of rated", compute::fmt_pct(r))),
    );
    opt(
        Gate::Sub1msIops,
        g.min_sub_1ms_iops
            .map(|n| format!(">= {} IOPS", compute::fmt_count(n))),
    );
    let mut s = on.join(", ");
    if !off.is_empty() {
        s.push_str(&format!("; off: {}", off.join(", ")));
    }
    if g.strict {
        s.push_str("; strict (a gate not evaluated fails)");
    }
    s
}

/// Evaluate and store the verdict in `r` (what the scheduler does each time it writes the
/// results file). The rated figures come from the built-in ratings table.
pub fn stamp(
    r: &mut TargetResults,
    g: &GateSettings,
    ext: &ExternalInputs,
    plan: PlanState,
    stop_reason: Option<String>,
) {
    let rated = r.device.as_ref().and_then(crate::report::rated_figures);
    let v = evaluate(
        g,
        r,
        ext,
        rated.as_ref(),
        plan,
        stop_reason,
        crate::util::unix_now(),
    );
    r.verdict = Some(v);
}

#[cfg(test)]
mod tests;
