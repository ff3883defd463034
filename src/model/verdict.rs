//! The verdict's records: the gate settings (`[gates]`), the gates and their states, what a
//! verdict says and about which subject, and the inputs other parts provide. `verdict`
//! evaluates them; the results file, the report, the metrics and the exit status read them.

use serde::{Deserialize, Serialize};

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
    /// Most verify errors allowed. The gate is evaluated only once data was verified.
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

    /// Whether the gate reads the drive's own figures (it does not apply to a target without
    /// a drive of its own).
    pub fn is_drive_gate(self) -> bool {
        matches!(
            self,
            Gate::MediaErrors
                | Gate::ErrorLogEntries
                | Gate::CriticalWarning
                | Gate::Temperature
                | Gate::AvailableSpare
                | Gate::PercentageUsed
                | Gate::Accounting
                | Gate::Link
                | Gate::OcpPanics
        )
    }

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
    /// The gate applies, but its data is missing: the verdict cannot be PASS.
    #[default]
    NotEvaluated,
    /// The gate does not apply to this target (drive gates on a file, the self-test gate of a
    /// plan without a self-test phase).
    NotApplicable,
    /// Turned off in the config.
    Off,
}

impl GateState {
    pub fn word(self) -> &'static str {
        match self {
            GateState::Pass => "pass",
            GateState::Fail => "fail",
            GateState::NotEvaluated => "not evaluated",
            GateState::NotApplicable => "not applicable",
            GateState::Off => "off",
        }
    }

    /// The label value (`not_evaluated`).
    pub fn label(self) -> &'static str {
        match self {
            GateState::Pass => "pass",
            GateState::Fail => "fail",
            GateState::NotEvaluated => "not_evaluated",
            GateState::NotApplicable => "not_applicable",
            GateState::Off => "off",
        }
    }
}

/// What kind of thing a target is, for which gates apply to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SubjectKind {
    /// A regular file: no drive gates.
    #[default]
    File,
    /// A block device with no drive of its own behind it (loop, device-mapper, md, ram: no
    /// `device` link in sysfs): no drive gates.
    BlockDevice,
    /// A block device on a drive (an NVMe namespace, a SCSI/SATA disk): every drive gate
    /// applies, and missing health data leaves it not evaluated.
    Drive,
    /// Several block devices (`paths`): the drive figures are the members', not the target's.
    Span,
}

impl SubjectKind {
    pub fn has_drive(self) -> bool {
        self == SubjectKind::Drive
    }

    pub fn describe(self) -> &'static str {
        match self {
            SubjectKind::File => "a file target has no drive",
            SubjectKind::BlockDevice => {
                "a block device with no drive behind it (loop, device-mapper, md or ram device)"
            }
            SubjectKind::Drive => "a drive",
            SubjectKind::Span => {
                "a target spanning several block devices (each member's drive figures are in /metrics)"
            }
        }
    }
}

/// What the target is and what its plan does, for which gates apply (recorded in the results
/// file, `subject`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Subject {
    pub kind: SubjectKind,
    /// Whether the plan verifies data (`verify` is `inline` or `pass`).
    pub verify: bool,
    /// Why the plan cannot verify (a spanning target, a read-only plan), when it does not.
    pub verify_note: Option<String>,
    /// Whether the plan has a self-test phase.
    pub self_test_planned: bool,
}

/// The verdict, in one word.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VerdictStatus {
    /// The plan is running and no gate failed yet.
    #[default]
    Running,
    /// The plan ran to its end and every gate that applies was evaluated and passed.
    Pass,
    /// A gate failed.
    Fail,
    /// Stopped before the end of the plan, or a gate that applies was not evaluated.
    Incomplete,
}

impl VerdictStatus {
    pub fn word(self) -> &'static str {
        match self {
            VerdictStatus::Running => "RUNNING",
            VerdictStatus::Pass => "PASS",
            VerdictStatus::Fail => "FAIL",
            VerdictStatus::Incomplete => "INCOMPLETE",
        }
    }

    /// The label value (`incomplete`).
    pub fn label(self) -> &'static str {
        match self {
            VerdictStatus::Running => "running",
            VerdictStatus::Pass => "pass",
            VerdictStatus::Fail => "fail",
            VerdictStatus::Incomplete => "incomplete",
        }
    }

    pub const ALL: [VerdictStatus; 4] = [
        VerdictStatus::Pass,
        VerdictStatus::Fail,
        VerdictStatus::Incomplete,
        VerdictStatus::Running,
    ];
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
    /// The verdict in one word ([`VerdictStatus`]).
    pub status: VerdictStatus,
    /// `status` is PASS: the plan finished and every gate that applies passed.
    pub passed: bool,
    pub plan: PlanState,
    /// Why the target stopped, for [`PlanState::Stopped`].
    pub stop_reason: Option<String>,
    /// Unix time of the evaluation.
    pub evaluated_at: f64,
    pub gates: Vec<GateResult>,
}

impl Verdict {
    /// The verdict from the gates and how far the plan got (see the module's documentation).
    pub fn status_of(gates: &[GateResult], plan: PlanState) -> VerdictStatus {
        if gates.iter().any(|g| g.state == GateState::Fail) {
            return VerdictStatus::Fail;
        }
        match plan {
            PlanState::Running => VerdictStatus::Running,
            PlanState::Stopped | PlanState::Interrupted => VerdictStatus::Incomplete,
            PlanState::Finished => {
                if gates.iter().any(|g| g.state == GateState::NotEvaluated) {
                    VerdictStatus::Incomplete
                } else {
                    VerdictStatus::Pass
                }
            }
        }
    }

    pub fn status(&self) -> VerdictStatus {
        Verdict::status_of(&self.gates, self.plan)
    }

    /// The gates that failed.
    pub fn failed(&self) -> impl Iterator<Item = &GateResult> {
        self.gates.iter().filter(|g| g.state == GateState::Fail)
    }

    pub fn not_evaluated(&self) -> impl Iterator<Item = &GateResult> {
        self.gates
            .iter()
            .filter(|g| g.state == GateState::NotEvaluated)
    }

    /// `PASS`, `FAIL`, `INCOMPLETE` or `RUNNING`. A failed gate is a FAIL at once: errors and
    /// new media errors never go away.
    pub fn headline(&self) -> &'static str {
        self.status().word()
    }

    /// Whether data was verified, in words, for the places the verdict stands: `None` when the
    /// verify gate was evaluated, else "data not verified" with why.
    pub fn data_not_verified(&self) -> Option<String> {
        let g = self.gate(Gate::VerifyErrors)?;
        match g.state {
            GateState::Pass | GateState::Fail => None,
            GateState::Off => Some("data not verified (the verify_errors gate is off)".into()),
            _ => Some(format!("data not verified ({})", g.note)),
        }
    }

    /// The failed gates with their figures, one phrase each:
    /// `io_errors: 12 errors (at most 0)`.
    pub fn failed_summary(&self) -> Vec<String> {
        self.failed()
            .map(|g| format!("{}: {} ({})", g.gate.name(), g.measured, g.limit))
            .collect()
    }

    /// The gates not evaluated with why, one phrase each: `temperature: not evaluated (the
    /// drive reported no composite temperature)`.
    pub fn not_evaluated_summary(&self) -> Vec<String> {
        self.not_evaluated()
            .map(|g| format!("{}: not evaluated ({})", g.gate.name(), g.note))
            .collect()
    }

    /// How many gates are in each state, for the journal: `12 gates: 9 pass, 2 not
    /// applicable, 1 off`.
    pub fn tally(&self) -> String {
        let mut parts = Vec::new();
        for st in [
            GateState::Pass,
            GateState::Fail,
            GateState::NotEvaluated,
            GateState::NotApplicable,
            GateState::Off,
        ] {
            let n = self.gates.iter().filter(|g| g.state == st).count();
            if n > 0 {
                parts.push(format!("{n} {}", st.word()));
            }
        }
        format!("{} gates: {}", self.gates.len(), parts.join(", "))
    }

    pub fn gate(&self, gate: Gate) -> Option<&GateResult> {
        self.gates.iter().find(|g| g.gate == gate)
    }
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
            .map(|t| format!("within {} + rounding", crate::model::fmt::fmt_pct(t))),
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
            .map(|r| format!(">= {} of rated", crate::model::fmt::fmt_pct(r))),
    );
    opt(
        Gate::Sub1msIops,
        g.min_sub_1ms_iops
            .map(|n| format!(">= {} IOPS", crate::model::fmt::fmt_count(n))),
    );
    let mut s = on.join(", ");
    if !off.is_empty() {
        s.push_str(&format!("; off: {}", off.join(", ")));
    }
    s
}
