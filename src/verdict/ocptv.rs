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
    match crate::state::results::write_ocptv(state_dir, &r.target, text.as_bytes()) {
        Ok(()) => Some(path),
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "writing the OCPTV record failed");
            None
        }
    }
}

#[cfg(test)]
mod tests;
