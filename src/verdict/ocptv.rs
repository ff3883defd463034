//! A qualification run in the OCP Test and Validation output format (OCPTV, schema 2.0): JSON
//! lines, one artifact each: the schema version, the test run start (the drive as the device
//! under test, the whole command line), one test step per phase actually run (precondition,
//! each sweep, each soak, each purge and self-test with its outcome; from the results file's
//! phase records, each step stamped with the times the phase started and ended), one step for
//! the gates (each gate a measurement with its validator where it has numbers, and a
//! diagnosis), then the test run end with the verdict. When data was not verified (the
//! `verify_errors` gate off or not evaluated) the record says "data not verified" where the
//! verdict stands. Written as `results/<target>.ocptv.jsonl` next to the results file each
//! time the verdict is stamped after the plan ended, and moved aside with the results file when
//! a run starts over (never overwritten by another run).
//!
//! The `ocptv` crate implements this format, but its API is asynchronous (a tokio-driven
//! emitter that streams a live run: `TestRun::start().await`, scoped steps): nvsoak writes the
//! record after the fact from its results file, on the scheduler's plain thread, so the few
//! artifact types are written here with serde instead. [`render`] is pure.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::model::results::{PhaseRecord, PhaseStatus, TargetResults};
use crate::model::steps::StepStatus;
use crate::model::verdict::{Gate, GateResult, GateState, PlanState, Verdict};

pub const SCHEMA_MAJOR: u64 = 2;
pub const SCHEMA_MINOR: u64 = 0;

/// RFC 3339, Z-normalised, milliseconds.
pub fn timestamp(unix: f64) -> String {
    let t = crate::model::fmt::fmt_time(unix);
    let ms = ((unix.max(0.0).fract()) * 1000.0).floor() as u32;
    format!("{}T{}.{ms:03}Z", &t[..10], &t[11..19])
}

/// A figure as a JSON number without float noise: integers as integers, anything else rounded
/// to 6 significant digits (`74.85000000000002` is `74.85`).
pub fn number(x: f64) -> Value {
    if !x.is_finite() {
        return Value::Null;
    }
    if x.fract() == 0.0 && x.abs() < 9.007_199_254_740_992e15 {
        return json!(x as i64);
    }
    let r: f64 = format!("{x:.5e}").parse().unwrap_or(x);
    if r.fract() == 0.0 && r.abs() < 9.007_199_254_740_992e15 {
        json!(r as i64)
    } else {
        json!(r)
    }
}

/// The process's whole command line, each argument quoted for a POSIX shell where it needs it.
pub fn command_line() -> String {
    quote_args(std::env::args())
}

/// `args` joined by spaces, an argument with anything but `[A-Za-z0-9_./=:,+@%-]` in single
/// quotes (an empty one as `''`).
pub fn quote_args(args: impl IntoIterator<Item = String>) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "_./=:,+@%-".contains(c);
    args.into_iter()
        .map(|a| {
            if !a.is_empty() && a.chars().all(plain) {
                a
            } else {
                format!("'{}'", a.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

struct Out {
    lines: Vec<Value>,
}

impl Out {
    fn push(&mut self, time: f64, key: &str, body: Value) {
        let mut v = json!({
            "sequenceNumber": self.lines.len(),
            "timestamp": timestamp(time),
        });
        if let Some(m) = v.as_object_mut() {
            m.insert(key.to_string(), body);
        }
        self.lines.push(v);
    }

    fn step(&mut self, time: f64, id: &str, body: Value) {
        let mut b = body;
        if let Some(m) = b.as_object_mut() {
            m.insert("testStepId".into(), json!(id));
        }
        self.push(time, "testStepArtifact", b);
    }

    fn measurement(&mut self, time: f64, id: &str, name: &str, value: f64, unit: &str) {
        let mut m = json!({"name": name, "value": number(value), "hardwareInfoId": HW_ID});
        if let (false, Some(o)) = (unit.is_empty(), m.as_object_mut()) {
            o.insert("unit".into(), json!(unit));
        }
        self.step(time, id, json!({ "measurement": m }));
    }

    fn log(&mut self, time: f64, id: &str, severity: &str, message: &str) {
        self.step(
            time,
            id,
            json!({"log": {"severity": severity, "message": message}}),
        );
    }
}

const HW_ID: &str = "drive";

/// The host's name as an ID part: a results file from a host without a hostname (the kernel's
/// `(none)`, or empty) gets the fallback [`crate::util::host::hostname`] gives.
fn host_id(host: &str) -> String {
    crate::util::host::usable_hostname(host)
        .map(str::to_string)
        .unwrap_or_else(crate::util::host::hostname)
}

/// The `n`-th (0-based) of `items` for which `same` holds, else the last such.
fn nth_match<T>(items: &[T], n: usize, same: impl Fn(&T) -> bool) -> Option<&T> {
    let hits: Vec<&T> = items.iter().filter(|t| same(t)).collect();
    hits.get(n).or(hits.last()).copied()
}

/// The data was not verified: the `verify_errors` gate is off or was not evaluated.
pub fn data_not_verified(v: &Verdict) -> bool {
    v.gates.iter().any(|g| {
        g.gate == Gate::VerifyErrors && matches!(g.state, GateState::Off | GateState::NotEvaluated)
    })
}

/// The artifacts of `r`'s run with `v`, one JSON value per line; `command_line` is the
/// daemon's ([`command_line`]).
pub fn render(r: &TargetResults, v: &Verdict, command_line: &str) -> Vec<Value> {
    let run_start = r
        .phases
        .first()
        .map(|p| p.started)
        .or_else(|| r.sweeps.first().map(|s| s.started))
        .or_else(|| r.soak.as_ref().map(|s| s.started))
        .filter(|t| *t > 0.0)
        .unwrap_or(v.evaluated_at);
    let mut o = Out { lines: Vec::new() };
    o.lines.push(json!({
        "schemaVersion": {"major": SCHEMA_MAJOR, "minor": SCHEMA_MINOR},
        "sequenceNumber": 0,
        "timestamp": timestamp(run_start),
    }));
    let mut hw = json!({"hardwareInfoId": HW_ID, "name": r.path});
    if let (Some(d), Some(m)) = (&r.device, hw.as_object_mut()) {
        m.insert("name".into(), json!(d.model));
        m.insert("serialNumber".into(), json!(d.serial));
        m.insert("version".into(), json!(d.firmware));
        m.insert("location".into(), json!(d.controller));
    }
    let host = host_id(&r.host);
    o.push(
        run_start,
        "testRunArtifact",
        json!({"testRunStart": {
            "name": "nvsoak qualification",
            "version": env!("CARGO_PKG_VERSION"),
            "commandLine": command_line,
            "parameters": {"target": r.target, "path": r.path, "host": host},
            "dutInfo": {
                "dutInfoId": format!("{host}/{}", r.target),
                "name": host,
                "hardwareInfos": [hw],
                "softwareInfos": [{
                    "softwareInfoId": "nvsoak",
                    "name": "nvsoak",
                    "version": env!("CARGO_PKG_VERSION"),
                    "softwareType": "APPLICATION",
                }],
            },
        }}),
    );
    let mut n = 0;
    if r.phases.is_empty() {
        legacy_steps(&mut o, r, &mut n);
    } else {
        for (i, p) in r.phases.iter().enumerate() {
            let id = format!("step{n}");
            n += 1;
            // Which run of this phase's kind and name it is, to find its own figures.
            let ordinal = r.phases[..i]
                .iter()
                .filter(|q| q.kind == p.kind && q.name == p.name && q.phase == p.phase)
                .count();
            phase_step(&mut o, r, p, ordinal, &id, v.evaluated_at);
        }
    }
    gates_step(&mut o, v, &format!("step{n}"));
    // INCOMPLETE (stopped early, or a gate not evaluated) is never a PASS.
    let status = if v.plan == PlanState::Finished {
        "COMPLETE"
    } else {
        "ERROR"
    };
    let result = match v.status() {
        crate::model::verdict::VerdictStatus::Pass => "PASS",
        crate::model::verdict::VerdictStatus::Fail => "FAIL",
        _ => "NOT_APPLICABLE",
    };
    let mut verdict = format!("verdict {}", v.headline());
    if data_not_verified(v) {
        verdict.push_str(": data not verified");
    }
    o.push(
        v.evaluated_at,
        "testRunArtifact",
        json!({"log": {"severity": "INFO", "message": verdict}}),
    );
    o.push(
        v.evaluated_at,
        "testRunArtifact",
        json!({"testRunEnd": {"status": status, "result": result}}),
    );
    o.lines
}

/// One phase's step: started and ended at the phase's own times, with its figures.
fn phase_step(o: &mut Out, r: &TargetResults, p: &PhaseRecord, ordinal: usize, id: &str, now: f64) {
    let end = p.ended.unwrap_or(now).max(p.started);
    o.step(p.started, id, json!({"testStepStart": {"name": p.title()}}));
    let mut status = match p.status {
        PhaseStatus::Finished => "COMPLETE",
        _ => "ERROR",
    };
    match p.kind.as_str() {
        "sweep" => {
            if let Some(s) = nth_match(&r.sweeps, ordinal, |s| s.profile == p.name) {
                sweep_measurements(o, end, id, s);
            }
        }
        "soak" => {
            let soak = r.soak.as_ref().map_or(&[][..], |s| &s.phases[..]);
            if let Some(s) = nth_match(soak, ordinal, |s| s.phase == p.phase) {
                o.measurement(end, id, "elapsed", s.elapsed_secs, "s");
                o.measurement(end, id, "read_bytes", s.read_bytes as f64, "B");
                o.measurement(end, id, "written_bytes", s.written_bytes as f64, "B");
                o.measurement(end, id, "read_ops", s.read_ops as f64, "");
                o.measurement(end, id, "write_ops", s.write_ops as f64, "");
                o.measurement(end, id, "io_errors", s.errors as f64, "");
            }
        }
        "purge" | "self-test" => {
            let step = nth_match(&r.qualification_steps, ordinal, |s| {
                s.phase_index == p.phase_index && s.kind == p.kind && s.loop_count == p.loop_count
            })
            .or_else(|| {
                r.qualification_steps
                    .iter()
                    .rev()
                    .find(|s| s.phase_index == p.phase_index && s.kind == p.kind)
            });
            match step {
                Some(s) => {
                    let kind = match s.status {
                        StepStatus::Passed => "PASS",
                        StepStatus::Failed => "FAIL",
                        _ => "UNKNOWN",
                    };
                    o.step(
                        end,
                        id,
                        json!({"diagnosis": {
                            "verdict": format!("{}-{}", s.kind, s.status.name().replace(' ', "-")),
                            "type": kind,
                            "message": s.line(),
                            "hardwareInfoId": HW_ID,
                        }}),
                    );
                    if matches!(s.status, StepStatus::NotSupported | StepStatus::Refused)
                        && status == "COMPLETE"
                    {
                        status = "SKIP";
                    }
                }
                None => o.log(
                    end,
                    id,
                    "WARNING",
                    &format!("{}: no outcome recorded", p.kind),
                ),
            }
        }
        _ => {}
    }
    match p.status {
        PhaseStatus::Finished => {}
        PhaseStatus::Running | PhaseStatus::Stopped => o.log(
            end,
            id,
            "WARNING",
            &format!("{} stopped before its end", p.title()),
        ),
        PhaseStatus::Failed => o.log(
            end,
            id,
            "ERROR",
            &format!("{}: an error stopped the target", p.title()),
        ),
    }
    if p.runs > 1 {
        o.log(
            end,
            id,
            "INFO",
            &format!(
                "{} ran over {} runs of the daemon (resumed from its checkpoint)",
                p.title(),
                p.runs
            ),
        );
    }
    o.step(end, id, json!({"testStepEnd": {"status": status}}));
}

fn sweep_measurements(o: &mut Out, time: f64, id: &str, s: &crate::model::results::SweepResult) {
    let curve = crate::model::curve::curve(s);
    if let Some(p) = crate::model::curve::peak(&curve) {
        o.measurement(time, id, "peak_iops", p.iops.round(), "IOPS");
        o.measurement(time, id, "peak_latency_avg", p.lat_avg_us / 1e6, "s");
    }
    if let Some(p) = crate::model::curve::frontier(
        &curve,
        crate::model::curve::LatencyBasis::Average,
        crate::model::curve::SUB_MS_LIMIT_US,
    ) {
        o.measurement(time, id, "sub_1ms_frontier_iops", p.iops.round(), "IOPS");
    }
}

/// Results files written before the phase records: one step per sweep and one for the soak.
fn legacy_steps(o: &mut Out, r: &TargetResults, n: &mut usize) {
    for s in &r.sweeps {
        let id = format!("step{n}");
        *n += 1;
        let end = s.finished.unwrap_or(s.started);
        o.step(
            s.started,
            &id,
            json!({"testStepStart": {"name": format!("sweep {}", s.profile)}}),
        );
        sweep_measurements(o, end, &id, s);
        let status = if s.finished.is_some() {
            "COMPLETE"
        } else {
            "ERROR"
        };
        o.step(end, &id, json!({"testStepEnd": {"status": status}}));
    }
    if let Some(soak) = &r.soak {
        let id = format!("step{n}");
        *n += 1;
        let end = soak.started + soak.elapsed_secs;
        o.step(
            soak.started,
            &id,
            json!({"testStepStart": {"name": "soak"}}),
        );
        o.measurement(end, &id, "elapsed", soak.elapsed_secs, "s");
        o.measurement(end, &id, "read_bytes", soak.read_bytes as f64, "B");
        o.measurement(end, &id, "written_bytes", soak.written_bytes as f64, "B");
        o.measurement(end, &id, "io_errors", soak.errors as f64, "");
        o.step(end, &id, json!({"testStepEnd": {"status": "COMPLETE"}}));
    }
}

/// A gate's figure and limit as an OCPTV measurement: temperatures in kelvin (the drive's
/// own whole-kelvin unit: `348 K`, not `74.85000000000002 °C`), every number without float
/// noise.
fn gate_measurement(g: &GateResult, value: f64, limit: f64) -> Value {
    let kind = if matches!(
        g.gate,
        Gate::RatedIops | Gate::Sub1msIops | Gate::AvailableSpare
    ) {
        "GREATER_THAN_OR_EQUAL"
    } else if matches!(g.gate, Gate::SelfTest | Gate::Link) {
        "EQUAL"
    } else {
        "LESS_THAN_OR_EQUAL"
    };
    let (value, limit, unit) = match g.gate {
        Gate::Temperature => (value + 273.15, limit + 273.15, "K"),
        Gate::AvailableSpare | Gate::PercentageUsed => (value, limit, "%"),
        Gate::RatedIops | Gate::Sub1msIops => (value, limit, "IOPS"),
        _ => (value, limit, ""),
    };
    let mut m = json!({
        "name": g.gate.name(),
        "value": number(value),
        "hardwareInfoId": HW_ID,
        "validators": [{"type": kind, "value": number(limit)}],
    });
    if let (false, Some(o)) = (unit.is_empty(), m.as_object_mut()) {
        o.insert("unit".into(), json!(unit));
    }
    m
}

/// The gates' step: each gate's measurement (where it has numbers) and diagnosis.
fn gates_step(o: &mut Out, v: &Verdict, id: &str) {
    let t = v.evaluated_at;
    o.step(t, id, json!({"testStepStart": {"name": "gates"}}));
    for g in &v.gates {
        let unverified = g.gate == Gate::VerifyErrors
            && matches!(g.state, GateState::Off | GateState::NotEvaluated);
        if g.state == GateState::Off && !unverified {
            continue;
        }
        if let (Some(value), Some(limit)) = (g.value, g.threshold) {
            o.step(
                t,
                id,
                json!({ "measurement": gate_measurement(g, value, limit) }),
            );
        }
        let kind = match g.state {
            GateState::Pass => "PASS",
            GateState::Fail => "FAIL",
            _ => "UNKNOWN",
        };
        let message = match g.state {
            GateState::Pass | GateState::Fail => {
                format!("{}: {} ({})", g.gate.describe(), g.measured, g.limit)
            }
            _ if unverified => format!(
                "{}: {}: data not verified{}",
                g.gate.describe(),
                g.state.word(),
                if g.note.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", g.note)
                }
            ),
            _ => format!("{}: {}: {}", g.gate.describe(), g.state.word(), g.note),
        };
        o.step(
            t,
            id,
            json!({"diagnosis": {
                "verdict": format!("{}-{}", g.gate.name(), g.state.word().replace(' ', "-")),
                "type": kind,
                "message": message,
                "hardwareInfoId": HW_ID,
            }}),
        );
    }
    o.step(t, id, json!({"testStepEnd": {"status": "COMPLETE"}}));
}

/// Write `r`'s OCPTV record (atomically) when it has a verdict from the end of its plan.
/// Returns where, `None` when there is nothing final to write or the write failed (logged).
pub fn write(state_dir: &Path, r: &TargetResults) -> Option<PathBuf> {
    let v = r.verdict.as_ref()?;
    if matches!(v.plan, PlanState::Running | PlanState::Interrupted) {
        return None;
    }
    let mut text = String::new();
    for line in render(r, v, &command_line()) {
        text.push_str(&line.to_string());
        text.push('\n');
    }
    let path = crate::state::results::ocptv_path(state_dir, &r.target);
    match crate::util::write_atomic(&path, text.as_bytes()) {
        Ok(()) => Some(path),
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "writing the OCPTV record failed");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{clean_results, drive};
    use super::super::{ExternalInputs, GateSettings, evaluate};
    use super::*;
    use crate::model::results::{SoakPhase, phase_began, phase_closed};
    use crate::model::steps::StepOutcome;

    const T0: f64 = 1_764_691_200.0;

    #[test]
    fn timestamps_are_rfc3339_z() {
        assert_eq!(timestamp(1_764_691_200.25), "2025-12-02T16:00:00.250Z");
        assert_eq!(timestamp(0.0), "1970-01-01T00:00:00.000Z");
    }

    fn judged(r: &TargetResults) -> Verdict {
        evaluate(
            &GateSettings::default(),
            r,
            &ExternalInputs::default(),
            None,
            PlanState::Finished,
            None,
            T0 + 1000.0,
        )
    }

    fn steps(lines: &[Value]) -> Vec<&Value> {
        lines
            .iter()
            .filter_map(|l| l.get("testStepArtifact"))
            .collect()
    }

    /// The shape a consumer of OCPTV expects: the schema version first, sequence numbers in
    /// order, a run start naming the drive, steps started and ended, one diagnosis per gate
    /// evaluated, and the run end carrying the verdict (a results file without phase records:
    /// one step per sweep and one for the soak).
    #[test]
    fn the_record_has_the_ocptv_shape_and_the_verdict() {
        let mut r = clean_results();
        r.soak.as_mut().expect("soak").errors = 7;
        r.soak.as_mut().expect("soak").drive = Some(drive());
        let v = judged(&r);
        let lines = render(&r, &v, "nvsoak run");
        assert_eq!(lines[0]["schemaVersion"], json!({"major": 2, "minor": 0}));
        for (i, l) in lines.iter().enumerate() {
            assert_eq!(l["sequenceNumber"], json!(i), "{l}");
            assert!(
                l["timestamp"]
                    .as_str()
                    .is_some_and(|t| t.len() == 24 && t.ends_with('Z')),
                "{l}"
            );
            let kinds = ["schemaVersion", "testRunArtifact", "testStepArtifact"]
                .iter()
                .filter(|k| l.get(**k).is_some())
                .count();
            assert_eq!(kinds, 1, "one artifact per line: {l}");
        }
        let start = &lines[1]["testRunArtifact"]["testRunStart"];
        assert_eq!(
            start["dutInfo"]["hardwareInfos"][0]["serialNumber"],
            "SER-123"
        );
        assert_eq!(start["dutInfo"]["hardwareInfos"][0]["version"], "FW-9");
        let st = steps(&lines);
        let starts = st
            .iter()
            .filter(|s| s.get("testStepStart").is_some())
            .count();
        let ends = st.iter().filter(|s| s.get("testStepEnd").is_some()).count();
        assert_eq!((starts, ends), (3, 3), "sweep, soak and gates steps");
        let diag: Vec<&Value> = st.iter().filter_map(|s| s.get("diagnosis")).collect();
        let shown = v
            .gates
            .iter()
            .filter(|g| g.state != GateState::Off || g.gate == Gate::VerifyErrors)
            .count();
        assert_eq!(diag.len(), shown);
        let io = diag
            .iter()
            .find(|d| d["verdict"] == "io_errors-fail")
            .expect("the failed I/O gate's diagnosis");
        assert_eq!(io["type"], "FAIL");
        assert!(
            io["message"]
                .as_str()
                .is_some_and(|m| m.contains("7 errors"))
        );
        let m = st
            .iter()
            .filter_map(|s| s.get("measurement"))
            .find(|m| m["name"] == "io_errors" && m.get("validators").is_some())
            .expect("the gate's measurement");
        assert_eq!(m["validators"][0]["type"], "LESS_THAN_OR_EQUAL");
        assert_eq!(m["value"], json!(7));
        let end = &lines.last().expect("lines")["testRunArtifact"]["testRunEnd"];
        assert_eq!(end["status"], "COMPLETE");
        assert_eq!(end["result"], "FAIL");
    }

    /// A plan of precondition, sweep, soak (stopped once and resumed) and self-test, as the
    /// scheduler records it.
    fn four_phases() -> TargetResults {
        let mut r = clean_results();
        r.sweeps[0].profile = "rr".into();
        let l = &mut r.phases;
        phase_began(l, 0, 0, "precondition", "precondition", T0);
        phase_closed(l, PhaseStatus::Finished, T0 + 10.0);
        phase_began(l, 1, 0, "sweep", "rr", T0 + 10.0);
        phase_closed(l, PhaseStatus::Finished, T0 + 30.5);
        phase_began(l, 2, 0, "soak", "rw", T0 + 30.5);
        phase_closed(l, PhaseStatus::Stopped, T0 + 40.0);
        assert!(phase_began(l, 2, 0, "soak", "rw", T0 + 100.0), "resumed");
        phase_closed(l, PhaseStatus::Finished, T0 + 150.0);
        phase_began(l, 3, 0, "self-test", "short", T0 + 150.0);
        phase_closed(l, PhaseStatus::Finished, T0 + 200.0);
        let soak = r.soak.as_mut().expect("soak");
        soak.phases.push(SoakPhase {
            phase: 3,
            profile: "rw".into(),
            started: T0 + 30.5,
            ended: Some(T0 + 150.0),
            elapsed_secs: 59.5,
            written_bytes: 4096 * 1000,
            write_ops: 1000,
            ..Default::default()
        });
        r.qualification_steps.push(StepOutcome {
            phase_index: 3,
            phase: 4,
            kind: "self-test".into(),
            method: "short".into(),
            status: StepStatus::Passed,
            started: T0 + 150.0,
            ended: T0 + 200.0,
            ..Default::default()
        });
        r
    }

    /// One step per phase run, in order, each started and ended at the phase's own times,
    /// named by its 1-based number, with that phase's figures; a resumed phase is one step.
    #[test]
    fn one_step_per_phase_with_its_times_and_figures() {
        let r = four_phases();
        let lines = render(&r, &judged(&r), "nvsoak run");
        let mut found = Vec::new();
        for l in &lines {
            let Some(a) = l.get("testStepArtifact") else {
                continue;
            };
            if let Some(s) = a.get("testStepStart") {
                found.push((
                    a["testStepId"].clone(),
                    s["name"].clone(),
                    l["timestamp"].clone(),
                ));
            }
        }
        let names: Vec<&str> = found.iter().filter_map(|f| f.1.as_str()).collect();
        assert_eq!(
            names,
            [
                "phase 1 (precondition)",
                "phase 2 (sweep rr)",
                "phase 3 (soak rw)",
                "phase 4 (self-test short)",
                "gates"
            ]
        );
        let end_of = |id: &Value| {
            lines
                .iter()
                .find(|l| {
                    l["testStepArtifact"]["testStepId"] == *id
                        && l["testStepArtifact"].get("testStepEnd").is_some()
                })
                .map(|l| {
                    (
                        l["timestamp"].clone(),
                        l["testStepArtifact"]["testStepEnd"]["status"].clone(),
                    )
                })
                .expect("each step ends")
        };
        let want = [
            (T0, T0 + 10.0),
            (T0 + 10.0, T0 + 30.5),
            (T0 + 30.5, T0 + 150.0),
            (T0 + 150.0, T0 + 200.0),
        ];
        for (f, (a, b)) in found.iter().zip(want) {
            assert_eq!(f.2, json!(timestamp(a)), "{f:?}");
            let (t, status) = end_of(&f.0);
            assert_eq!(t, json!(timestamp(b)), "{f:?}");
            assert_eq!(status, "COMPLETE", "{f:?}");
        }
        let in_step = |id: &Value, kind: &str| -> Vec<Value> {
            steps(&lines)
                .into_iter()
                .filter(|s| s["testStepId"] == *id)
                .filter_map(|s| s.get(kind).cloned())
                .collect()
        };
        let sweep = in_step(&found[1].0, "measurement");
        assert!(
            sweep
                .iter()
                .any(|m| m["name"] == "peak_iops" && m["value"] == json!(100_000)),
            "{sweep:?}"
        );
        let soak = in_step(&found[2].0, "measurement");
        assert!(
            soak.iter()
                .any(|m| m["name"] == "written_bytes" && m["value"] == json!(4_096_000)),
            "{soak:?}"
        );
        assert!(
            soak.iter()
                .any(|m| m["name"] == "elapsed" && m["value"] == json!(59.5)),
            "{soak:?}"
        );
        let resumed = in_step(&found[2].0, "log");
        assert!(
            resumed
                .iter()
                .any(|l| l["message"].as_str().is_some_and(|m| m.contains("2 runs"))),
            "{resumed:?}"
        );
        let st = in_step(&found[3].0, "diagnosis");
        assert_eq!(st.len(), 1, "{st:?}");
        assert_eq!(st[0]["type"], "PASS");
        assert_eq!(st[0]["verdict"], "self-test-passed");
        // Sequence numbers follow the times: each artifact at or after the one before.
        let times: Vec<&str> = lines
            .iter()
            .filter_map(|l| l["timestamp"].as_str())
            .collect();
        assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
    }

    /// A phase stopped by a signal or an error ends its step with ERROR and says why.
    #[test]
    fn a_stopped_or_failed_phase_ends_its_step_in_error() {
        let mut r = clean_results();
        phase_began(&mut r.phases, 0, 0, "precondition", "precondition", T0);
        phase_closed(&mut r.phases, PhaseStatus::Failed, T0 + 5.0);
        let v = judged(&r);
        let lines = render(&r, &v, "nvsoak run");
        let st = steps(&lines);
        let end = st.iter().find_map(|s| s.get("testStepEnd")).expect("end");
        assert_eq!(end["status"], "ERROR");
        assert!(st.iter().filter_map(|s| s.get("log")).any(|l| {
            l["severity"] == "ERROR"
                && l["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("phase 1 (precondition)"))
        }));
    }

    /// `348 K`, not `74.85000000000002`: temperatures in whole kelvin, numbers without float
    /// noise anywhere in the record.
    #[test]
    fn limits_and_figures_carry_no_float_noise() {
        assert_eq!(number(74.850_000_000_000_02), json!(74.85));
        assert_eq!(number(348.0), json!(348));
        assert_eq!(number(0.000_123_456_789), json!(0.000_123_457));
        assert_eq!(number(1_073_741_824.0), json!(1_073_741_824u64));
        let mut r = four_phases();
        r.soak.as_mut().expect("soak").drive = Some(drive());
        let v = judged(&r);
        let t = v
            .gates
            .iter()
            .find(|g| g.gate == Gate::Temperature)
            .expect("the temperature gate");
        assert_eq!(t.state, GateState::Pass, "{t:?}");
        let lines = render(&r, &v, "nvsoak run");
        let m = steps(&lines)
            .into_iter()
            .filter_map(|s| s.get("measurement"))
            .find(|m| m["name"] == "temperature")
            .cloned()
            .expect("the temperature measurement");
        assert_eq!(m["unit"], "K");
        assert_eq!(m["value"], json!(318));
        assert_eq!(m["validators"][0]["value"], json!(348));
        let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
        for noise in ["0000000", "9999999"] {
            assert!(!text.contains(noise), "{noise} in {text}");
        }
    }

    #[test]
    fn the_command_line_is_whole_and_quoted_where_needed() {
        let args = [
            "/usr/bin/nvsoak",
            "run",
            "--config",
            "/etc/my plan.toml",
            "it's",
            "",
        ];
        let line = quote_args(args.iter().map(|s| s.to_string()));
        assert_eq!(
            line,
            r"/usr/bin/nvsoak run --config '/etc/my plan.toml' 'it'\''s' ''"
        );
        let r = clean_results();
        let lines = render(&r, &judged(&r), &line);
        assert_eq!(
            lines[1]["testRunArtifact"]["testRunStart"]["commandLine"],
            json!(line)
        );
        // The daemon's own: every argument of this process, in order.
        let own = command_line();
        assert!(std::env::args().all(|a| own.contains(&a)), "{own}");
    }

    #[test]
    fn a_host_without_a_hostname_gets_a_sensible_id() {
        use crate::util::host::pick_hostname;
        let id = "0123456789abcdef0123456789abcdef\n";
        assert_eq!(pick_hostname(Some("rack7-n3\n"), Some(id)), "rack7-n3");
        assert_eq!(
            pick_hostname(Some("(none)\n"), Some(id)),
            "host-0123456789ab"
        );
        assert_eq!(pick_hostname(Some("  \n"), Some(id)), "host-0123456789ab");
        assert_eq!(pick_hostname(Some("(none)"), None), "localhost");
        assert_eq!(pick_hostname(None, Some("not-an-id")), "localhost");
        // An older results file from such a host: the record's IDs do not carry "(none)".
        let mut r = clean_results();
        r.host = "(none)".into();
        let lines = render(&r, &judged(&r), "nvsoak run");
        let start = &lines[1]["testRunArtifact"]["testRunStart"];
        let dut = start["dutInfo"]["dutInfoId"].as_str().expect("id");
        assert!(!dut.contains("(none)") && dut.ends_with("/disk0"), "{dut}");
        assert_eq!(
            start["dutInfo"]["name"],
            json!(dut.trim_end_matches("/disk0"))
        );
    }

    /// Where the verdict stands (the run's closing log and the verify gate's diagnosis), a
    /// record whose data was not verified says so; one whose data was verified does not.
    #[test]
    fn data_not_verified_is_said_where_the_verdict_stands() {
        let r = clean_results();
        for (state, said) in [
            (GateState::Off, true),
            (GateState::NotEvaluated, true),
            (GateState::Pass, false),
        ] {
            let mut v = judged(&r);
            for g in v.gates.iter_mut().filter(|g| g.gate == Gate::VerifyErrors) {
                g.state = state;
            }
            let lines = render(&r, &v, "nvsoak run");
            let n = lines.len();
            let closing = &lines[n - 2]["testRunArtifact"]["log"]["message"];
            assert!(
                closing.as_str().is_some_and(|m| m.starts_with("verdict ")),
                "{closing}"
            );
            assert_eq!(
                closing
                    .as_str()
                    .is_some_and(|m| m.contains("data not verified")),
                said,
                "{state:?}: {closing}"
            );
            let diag = steps(&lines)
                .into_iter()
                .filter_map(|s| s.get("diagnosis"))
                .find(|d| {
                    d["verdict"]
                        .as_str()
                        .is_some_and(|x| x.starts_with("verify_errors-"))
                })
                .cloned()
                .expect("the verify gate's diagnosis");
            assert_eq!(
                diag["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("data not verified")),
                said,
                "{state:?}: {diag}"
            );
        }
    }

    #[test]
    fn a_running_plan_writes_no_record_and_a_final_one_is_written() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(dir.path().join("results")).expect("mkdir");
        let mut r = clean_results();
        // A verified file target: every gate that applies has its data.
        r.subject = Some(crate::model::verdict::Subject {
            kind: crate::model::verdict::SubjectKind::File,
            verify: true,
            ..Default::default()
        });
        crate::verdict::stamp(
            &mut r,
            &GateSettings::default(),
            &ExternalInputs::default(),
            PlanState::Running,
            None,
        );
        assert_eq!(write(dir.path(), &r), None);
        crate::verdict::stamp(
            &mut r,
            &GateSettings::default(),
            &ExternalInputs::default(),
            PlanState::Finished,
            None,
        );
        let p = write(dir.path(), &r).expect("written");
        let text = std::fs::read_to_string(&p).expect("read");
        let last: Value = serde_json::from_str(text.lines().last().expect("a line")).expect("json");
        assert!(
            last["testRunArtifact"]["testRunEnd"]["result"].is_string(),
            "{last}"
        );
        assert_eq!(last["testRunArtifact"]["testRunEnd"]["status"], "COMPLETE");
    }
}
