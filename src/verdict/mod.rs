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
//! What a verdict means ([`VerdictStatus`]): **PASS** only when the plan ran to its end and
//! every gate that applies to the target was evaluated and passed; **FAIL** as soon as one gate
//! failed (a failed gate never passes again, whatever stops the plan later); **INCOMPLETE**
//! when the plan stopped before its end (a signal, an error, a vanished device) or a gate that
//! applies could not be evaluated; **RUNNING** while the plan runs and nothing failed yet.
//! Whether a gate applies comes from the [`Subject`]: drive gates do not apply to a file (they
//! are "not applicable", never "pass"); the verify gate applies to every target and is
//! evaluated only once data was verified.
//!
//! Architecture Invariant: a gate without the data it needs is "not evaluated", never a pass,
//! and a verdict with a gate not evaluated is never PASS (`verdict::tests`).

pub mod exit;
pub mod ocptv;

use crate::model::curve::{LatencyBasis, RatedFigures, SUB_MS_LIMIT_US};
use crate::model::drive::{DriveCondition, Figure};
use crate::model::results::{DATA_UNIT_BYTES, DriveSoak, TargetResults};
use crate::model::verdict::{
    ExternalInputs, Gate, GateResult, GateSettings, GateState, Outcome, PlanState, SpareMin,
    Subject, SubjectKind, Verdict, VerdictStatus,
};

// `ExternalInputs` is a record of `model::verdict`; reading it off a results file is the
// verdict's own judgement, so it lives here.
impl ExternalInputs {
    /// The inputs a results file itself carries: the self-test phases' outcome from
    /// `qualification_steps` (every self-test passed, or the controller has none); `None` when
    /// the plan ran no self-test yet.
    pub fn from_results(r: &TargetResults) -> ExternalInputs {
        use crate::model::steps::StepStatus;
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
                    .filter(|e| e.kind == crate::model::events::kind::OCP_PANIC)
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

const NO_DRIVE: &str = "no health data for this drive: health polling is off, or found no NVMe controller or SATA disk for it";

fn not_applicable(gate: Gate, why: &str) -> GateResult {
    GateResult {
        gate,
        state: GateState::NotApplicable,
        note: why.into(),
        ..Default::default()
    }
}

fn count_gate(gate: Gate, max: Option<u64>, got: Option<u64>, noun: &str, why: &str) -> GateResult {
    let Some(max) = max else {
        return off(gate);
    };
    let limit = format!("at most {max}");
    match got {
        None => unknown(gate, limit, why),
        Some(n) => with_numbers(
            judged(gate, n <= max, crate::model::fmt::count_of(n, noun), limit),
            n as f64,
            max as f64,
        ),
    }
}

/// The subject of a results file written before subjects were recorded: a drive when it has
/// drive identity or figures, else a file; no record of verification.
fn legacy_subject(r: &TargetResults) -> Subject {
    let drive = r.device.is_some() || r.soak.as_ref().is_some_and(|s| s.drive.is_some());
    Subject {
        kind: if drive {
            SubjectKind::Drive
        } else {
            SubjectKind::File
        },
        verify: false,
        verify_note: Some("this results file has no record of verification".into()),
        self_test_planned: r.qualification_steps.iter().any(|s| s.kind == "self-test"),
    }
}

/// The verify gate: evaluated only once data was read back and checked.
fn verify_gate(g: &GateSettings, r: &TargetResults, subject: &Subject) -> GateResult {
    let gate = Gate::VerifyErrors;
    let Some(max) = g.max_verify_errors else {
        return off(gate);
    };
    let limit = format!("at most {max}");
    if !subject.verify {
        let why = subject.verify_note.clone().unwrap_or_else(|| {
            "verify is off: set verify = \"inline\" or \"pass\" on the target, or turn the gate off with verify_errors = false".into()
        });
        return unknown(gate, limit, &why);
    }
    let errors = r.soak.as_ref().map_or(0, |s| s.verify_errors);
    if r.verified_bytes == 0 && errors == 0 {
        return unknown(gate, limit, "no data verified yet");
    }
    let mut res = count_gate(gate, Some(max), Some(errors), "error", "");
    res.measured = format!(
        "{} in {} verified",
        res.measured,
        crate::model::fmt::fmt_bytes(r.verified_bytes as f64)
    );
    res
}

/// Evaluate every gate. Pure. `rated` are the drive's rated figures (ratings table), when
/// known; `plan` how far the plan got; `now` the Unix time recorded. Which gates apply comes
/// from `r.subject` (see [`Subject`]).
pub fn evaluate(
    g: &GateSettings,
    r: &TargetResults,
    ext: &ExternalInputs,
    rated: Option<&RatedFigures>,
    plan: PlanState,
    stop_reason: Option<String>,
    now: f64,
) -> Verdict {
    let subject = r.subject.clone().unwrap_or_else(|| legacy_subject(r));
    let soak = r.soak.as_ref();
    let drive: Option<&DriveSoak> = soak.and_then(|s| s.drive.as_ref());
    let no_run = "no I/O recorded yet";
    let mut gates = vec![
        verify_gate(g, r, &subject),
        // Every I/O error of the plan counts (precondition and sweeps too): the whole plan's
        // totals, or the soak's in files written before they were kept apart.
        count_gate(
            Gate::IoErrors,
            g.max_io_errors,
            soak.map(|s| s.plan.as_ref().map_or(s.errors, |p| p.errors)),
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
    gates.push(self_test(g, &subject, ext));
    gates.push(temperature(g, drive));
    gates.push(spare(g, drive));
    gates.push(percentage_used(g, drive));
    gates.push(accounting(g, drive));
    gates.push(link(g, drive, ext));
    gates.push(ocp_panics(g, drive, ext));
    gates.push(rated_iops(g, r, rated));
    gates.push(sub_1ms(g, r));
    // Drive gates do not apply to a target without a drive of its own.
    if !subject.kind.has_drive() {
        for x in gates.iter_mut() {
            if x.gate.is_drive_gate() && x.state != GateState::Off {
                *x = not_applicable(x.gate, subject.kind.describe());
            }
        }
    }
    let status = Verdict::status_of(&gates, plan);
    Verdict {
        status,
        passed: status == VerdictStatus::Pass,
        plan,
        stop_reason,
        evaluated_at: now,
        gates,
    }
}

/// The self-test gate: the drive's self-test outcome, when the plan has a self-test phase.
fn self_test(g: &GateSettings, subject: &Subject, ext: &ExternalInputs) -> GateResult {
    if g.self_test && !subject.self_test_planned {
        not_applicable(Gate::SelfTest, "the plan has no self-test phase")
    } else {
        outcome_gate(
            Gate::SelfTest,
            g.self_test,
            ext.self_test.as_ref(),
            false,
            "no self-test outcome: the self-test was refused or has not run yet",
        )
    }
}

/// The PCIe link gate: the drive's link (or a port on its path) never ran degraded.
fn link(g: &GateSettings, drive: Option<&DriveSoak>, ext: &ExternalInputs) -> GateResult {
    match drive {
        _ if !g.link => off(Gate::Link),
        None => unknown(Gate::Link, "not degraded".into(), NO_DRIVE),
        Some(d) => match DriveCondition::of(d).pcie_link {
            Figure::NotInProtocol(why) | Figure::Unreported(why) => not_applicable(Gate::Link, why),
            Figure::Reported(()) if ext.link_degraded.is_none() => not_applicable(
                Gate::Link,
                "no PCIe link on the drive's path (sysfs gives no link speed or width: not a PCIe device)",
            ),
            Figure::Reported(()) => {
                outcome_gate(Gate::Link, true, ext.link_degraded.as_ref(), true, "")
            }
        },
    }
}

/// The OCP panics gate: the drive's panic count (OCP C1h) did not change.
fn ocp_panics(g: &GateSettings, drive: Option<&DriveSoak>, ext: &ExternalInputs) -> GateResult {
    if !g.ocp_panics {
        off(Gate::OcpPanics)
    } else {
        match (drive, ext.ocp_panic_count_change) {
            (None, _) => unknown(Gate::OcpPanics, "no change".into(), NO_DRIVE),
            (Some(_), None) => not_applicable(
                Gate::OcpPanics,
                "the drive has no OCP Error Recovery log (C1h)",
            ),
            (Some(_), Some(n)) => with_numbers(
                judged(
                    Gate::OcpPanics,
                    n == 0,
                    crate::model::fmt::count_of(n, "new panic"),
                    "no change".into(),
                ),
                n as f64,
                0.0,
            ),
        }
    }
}

/// A drive figure the gate needs: the figure, or the gate's result without it.
fn figure<T>(f: Figure<T>, gate: Gate, limit: String) -> Result<(T, String), GateResult> {
    match f {
        Figure::Reported(v) => Ok((v, limit)),
        Figure::Unreported(why) => Err(unknown(gate, limit, why)),
        Figure::NotInProtocol(why) => Err(GateResult {
            limit,
            ..not_applicable(gate, why)
        }),
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
    // NVMe's critical-warning bits, or a SATA disk's SMART RETURN STATUS (never the zero its
    // NVMe-shaped field holds).
    let (a, limit) = match figure(DriveCondition::of(d).alarm, gate, limit) {
        Ok(f) => f,
        Err(r) => return r,
    };
    with_numbers(judged(gate, !a.raised, a.shown, limit), a.value, 0.0)
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
    let (t, limit) = match figure(DriveCondition::of(d).temperature_peak, gate, limit) {
        Ok(f) => f,
        Err(r) => return r,
    };
    with_numbers(
        judged(gate, t.celsius <= max, t.shown, limit),
        t.celsius,
        max,
    )
}

fn spare(g: &GateSettings, drive: Option<&DriveSoak>) -> GateResult {
    let gate = Gate::AvailableSpare;
    let Some(min) = g.min_available_spare else {
        return off(gate);
    };
    let bare_limit = match min {
        SpareMin::Threshold => "at least the drive's threshold".to_string(),
        SpareMin::Percent(p) => format!("at least {p} %"),
    };
    let Some(d) = drive else {
        return unknown(gate, bare_limit, NO_DRIVE);
    };
    let (s, _) = match figure(DriveCondition::of(d).spare, gate, bare_limit) {
        Ok(f) => f,
        Err(r) => return r,
    };
    let (floor, limit) = match min {
        SpareMin::Threshold => (
            s.threshold,
            format!("at least the drive's threshold, {} %", s.threshold),
        ),
        SpareMin::Percent(p) => (p, format!("at least {p} %")),
    };
    let v = s.latest;
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
    let (v, limit) = match figure(DriveCondition::of(d).percentage_used, gate, limit) {
        Ok(f) => f,
        Err(r) => return r,
    };
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
        crate::model::fmt::fmt_pct(tol)
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
        crate::model::fmt::fmt_bytes(theirs as f64),
        crate::model::fmt::fmt_bytes(ours as f64)
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
    let limit = format!(
        "at least {} of the rated IOPS",
        crate::model::fmt::fmt_pct(min)
    );
    let Some(rated) = rated else {
        return unknown(
            gate,
            limit,
            "no rated figures for this drive (ratings table)",
        );
    };
    // The worst comparable sweep (pure random reads or writes with a rated figure).
    let mut worst: Option<(String, crate::model::curve::RatedShare)> = None;
    for s in &r.sweeps {
        let Some(basis) = crate::model::curve::rated_basis(
            s.read_pct,
            crate::model::curve::is_sequential(&s.profile, s.block_size),
        ) else {
            continue;
        };
        if !matches!(
            basis,
            crate::model::curve::RatedBasis::RandomReadIops
                | crate::model::curve::RatedBasis::RandomWriteIops
        ) {
            continue;
        }
        let curve = crate::model::curve::curve(s);
        if let Some(share) = crate::model::curve::rated_share(&curve, basis, rated)
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
                crate::model::fmt::fmt_count(share.measured),
                crate::model::fmt::fmt_pct(share.ratio),
                crate::model::fmt::fmt_count(share.rated),
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
        crate::model::fmt::fmt_count(min)
    );
    if r.sweeps.iter().all(|s| s.points.is_empty()) {
        return unknown(gate, limit, "no sweep measured");
    }
    // The lowest frontier over the sweeps: every swept workload must reach it.
    let mut worst: Option<(String, f64)> = None;
    for s in r.sweeps.iter().filter(|s| !s.points.is_empty()) {
        let curve = crate::model::curve::curve(s);
        let f = crate::model::curve::frontier(&curve, LatencyBasis::Average, SUB_MS_LIMIT_US)
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
            format!("{profile}: {} IOPS", crate::model::fmt::fmt_count(f)),
            limit,
        ),
        f,
        min,
    )
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
    let rated = r
        .device
        .as_ref()
        .and_then(crate::model::curve::rated_figures);
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
