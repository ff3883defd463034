//! A qualification run in the OCP Test and Validation output format (OCPTV, schema 2.0): JSON
//! lines, one artifact each: the schema version, the test run start (the drive as the device
//! under test), one step per sweep, one for the soak, one for the gates (each gate a
//! measurement with its validator where it has numbers, and a diagnosis), then the test run end
//! with the verdict. Written as `results/<target>.ocptv.jsonl` next to the results file each
//! time the verdict is stamped after the plan ended, and moved aside with the results file when
//! a run starts over (never overwritten by another run).
//!
//! The `ocptv` crate implements this format, but its API is asynchronous (a tokio-driven
//! emitter that streams a live run: `TestRun::start().await`, scoped steps): nvsoak writes the
//! record after the fact from its results file, on the scheduler's plain thread, so the few
//! artifact types are written here with serde instead. [`render`] is pure.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::{GateState, PlanState, Verdict};
use crate::report::compute;
use crate::workload::results::TargetResults;

pub const SCHEMA_MAJOR: u64 = 2;
pub const SCHEMA_MINOR: u64 = 0;

/// `results/<target>.ocptv.jsonl`.
pub fn ocptv_path(state_dir: &Path, target: &str) -> PathBuf {
    state_dir
        .join("results")
        .join(format!("{target}.ocptv.jsonl"))
}

/// RFC 3339, Z-normalised, milliseconds.
pub fn timestamp(unix: f64) -> String {
    let t = crate::report::html::fmt_time(unix);
    let ms = ((unix.max(0.0).fract()) * 1000.0).floor() as u32;
    format!("{}T{}.{ms:03}Z", &t[..10], &t[11..19])
}

struct Out {
    lines: Vec<Value>,
    time: f64,
}

impl Out {
    fn push(&mut self, key: &str, body: Value) {
        let mut v = json!({
            "sequenceNumber": self.lines.len(),
            "timestamp": timestamp(self.time),
        });
        if let Some(m) = v.as_object_mut() {
            m.insert(key.to_string(), body);
        }
        self.lines.push(v);
    }

    fn step(&mut self, id: &str, body: Value) {
        let mut b = body;
        if let Some(m) = b.as_object_mut() {
            m.insert("testStepId".into(), json!(id));
        }
        self.push("testStepArtifact", b);
    }

    fn measurement(&mut self, id: &str, name: &str, value: f64, unit: &str) {
        self.step(
            id,
            json!({"measurement": {
                "name": name, "value": value, "unit": unit, "hardwareInfoId": HW_ID,
            }}),
        );
    }
}

const HW_ID: &str = "drive";

/// The artifacts of `r`'s run with `v`, one JSON value per line.
pub fn render(r: &TargetResults, v: &Verdict) -> Vec<Value> {
    let mut o = Out {
        lines: Vec::new(),
        time: v.evaluated_at,
    };
    o.lines.push(json!({
        "schemaVersion": {"major": SCHEMA_MAJOR, "minor": SCHEMA_MINOR},
        "sequenceNumber": 0,
        "timestamp": timestamp(o.time),
    }));
    let mut hw = json!({"hardwareInfoId": HW_ID, "name": r.path});
    if let (Some(d), Some(m)) = (&r.device, hw.as_object_mut()) {
        m.insert("name".into(), json!(d.model));
        m.insert("serialNumber".into(), json!(d.serial));
        m.insert("version".into(), json!(d.firmware));
        m.insert("location".into(), json!(d.controller));
    }
    o.push(
        "testRunArtifact",
        json!({"testRunStart": {
            "name": "nvsoak qualification",
            "version": env!("CARGO_PKG_VERSION"),
            "commandLine": "nvsoak run",
            "parameters": {"target": r.target, "path": r.path, "host": r.host},
            "dutInfo": {
                "dutInfoId": format!("{}/{}", r.host, r.target),
                "name": r.host,
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
    for s in &r.sweeps {
        let id = format!("step{n}");
        n += 1;
        o.step(
            &id,
            json!({"testStepStart": {"name": format!("sweep {}", s.profile)}}),
        );
        let curve = compute::curve(s);
        if let Some(p) = compute::peak(&curve) {
            o.measurement(&id, "peak_iops", p.iops, "IOPS");
            o.measurement(&id, "peak_latency_avg", p.lat_avg_us / 1e6, "s");
        }
        if let Some(p) = compute::frontier(
            &curve,
            compute::LatencyBasis::Average,
            compute::SUB_MS_LIMIT_US,
        ) {
            o.measurement(&id, "sub_1ms_frontier_iops", p.iops, "IOPS");
        }
        let status = if s.finished.is_some() {
            "COMPLETE"
        } else {
            "ERROR"
        };
        o.step(&id, json!({"testStepEnd": {"status": status}}));
    }
    if let Some(soak) = &r.soak {
        let id = format!("step{n}");
        n += 1;
        o.step(&id, json!({"testStepStart": {"name": "soak"}}));
        o.measurement(&id, "elapsed", soak.elapsed_secs, "s");
        o.measurement(&id, "read_bytes", soak.read_bytes as f64, "B");
        o.measurement(&id, "written_bytes", soak.written_bytes as f64, "B");
        o.measurement(&id, "io_errors", soak.errors as f64, "");
        o.measurement(&id, "verify_errors", soak.verify_errors as f64, "");
        if let Some(d) = &soak.drive {
            if let Some(b) = d.data_written_bytes {
                o.measurement(&id, "drive_data_written_bytes", b as f64, "B");
            }
            if let Some(k) = d.temperature_max_kelvin {
                o.measurement(
                    &id,
                    "temperature_max",
                    crate::nvme::log::smart::SmartLog::kelvin_to_celsius(k),
                    "°C",
                );
            }
        }
        o.step(&id, json!({"testStepEnd": {"status": "COMPLETE"}}));
    }
    let id = format!("step{n}");
    o.step(&id, json!({"testStepStart": {"name": "gates"}}));
    for g in &v.gates {
        if g.state == GateState::Off {
            continue;
        }
        if let (Some(value), Some(limit)) = (g.value, g.threshold) {
            let kind = if matches!(
                g.gate,
                super::Gate::RatedIops | super::Gate::Sub1msIops | super::Gate::AvailableSpare
            ) {
                "GREATER_THAN_OR_EQUAL"
            } else if matches!(g.gate, super::Gate::SelfTest | super::Gate::Link) {
                "EQUAL"
            } else {
                "LESS_THAN_OR_EQUAL"
            };
            o.step(
                &id,
                json!({"measurement": {
                    "name": g.gate.name(),
                    "value": value,
                    "hardwareInfoId": HW_ID,
                    "validators": [{"type": kind, "value": limit}],
                }}),
            );
        }
        let (kind, verdict) = match g.state {
            GateState::Pass => ("PASS", "pass"),
            GateState::Fail => ("FAIL", "fail"),
            GateState::NotApplicable => ("UNKNOWN", "not-applicable"),
            _ => ("UNKNOWN", "not-evaluated"),
        };
        let message = match g.state {
            GateState::NotEvaluated => format!("{}: not evaluated: {}", g.gate.describe(), g.note),
            GateState::NotApplicable => {
                format!("{}: not applicable: {}", g.gate.describe(), g.note)
            }
            _ => format!("{}: {} ({})", g.gate.describe(), g.measured, g.limit),
        };
        o.step(
            &id,
            json!({"diagnosis": {
                "verdict": format!("{}-{verdict}", g.gate.name()),
                "type": kind,
                "message": message,
                "hardwareInfoId": HW_ID,
            }}),
        );
    }
    o.step(&id, json!({"testStepEnd": {"status": "COMPLETE"}}));
    // INCOMPLETE (stopped early, or a gate not evaluated) is never a PASS.
    let status = if v.plan == PlanState::Finished {
        "COMPLETE"
    } else {
        "ERROR"
    };
    let result = match v.status() {
        crate::verdict::VerdictStatus::Pass => "PASS",
        crate::verdict::VerdictStatus::Fail => "FAIL",
        _ => "NOT_APPLICABLE",
    };
    o.push(
        "testRunArtifact",
        json!({"testRunEnd": {"status": status, "result": result}}),
    );
    o.lines
}

/// Write `r`'s OCPTV record (atomically) when it has a verdict from the end of its plan.
/// Returns where, `None` when there is nothing final to write or the write failed (logged).
pub fn write(state_dir: &Path, r: &TargetResults) -> Option<PathBuf> {
    let v = r.verdict.as_ref()?;
    if matches!(v.plan, PlanState::Running | PlanState::Interrupted) {
        return None;
    }
    let mut text = String::new();
    for line in render(r, v) {
        text.push_str(&line.to_string());
        text.push('\n');
    }
    let path = ocptv_path(state_dir, &r.target);
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

    #[test]
    fn timestamps_are_rfc3339_z() {
        assert_eq!(timestamp(1_764_691_200.25), "2025-12-02T16:00:00.250Z");
        assert_eq!(timestamp(0.0), "1970-01-01T00:00:00.000Z");
    }

    /// The shape a consumer of OCPTV expects: the schema version first, sequence numbers in
    /// order, a run start naming the drive, steps started and ended, one diagnosis per gate
    /// evaluated, and the run end carrying the verdict.
    #[test]
    fn the_record_has_the_ocptv_shape_and_the_verdict() {
        let mut r = clean_results();
        r.soak.as_mut().expect("soak").errors = 7;
        r.soak.as_mut().expect("soak").drive = Some(drive());
        let v = evaluate(
            &GateSettings::default(),
            &r,
            &ExternalInputs::default(),
            None,
            PlanState::Finished,
            None,
            1_764_691_200.0,
        );
        let lines = render(&r, &v);
        assert_eq!(lines[0]["schemaVersion"], json!({"major": 2, "minor": 0}));
        for (i, l) in lines.iter().enumerate() {
            assert_eq!(l["sequenceNumber"], json!(i), "{l}");
            assert_eq!(l["timestamp"], json!("2025-12-02T16:00:00.000Z"));
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
        let steps: Vec<&Value> = lines
            .iter()
            .filter_map(|l| l.get("testStepArtifact"))
            .collect();
        let starts = steps
            .iter()
            .filter(|s| s.get("testStepStart").is_some())
            .count();
        let ends = steps
            .iter()
            .filter(|s| s.get("testStepEnd").is_some())
            .count();
        assert_eq!((starts, ends), (3, 3), "sweep, soak and gates steps");
        let diag: Vec<&Value> = steps.iter().filter_map(|s| s.get("diagnosis")).collect();
        let evaluated = v.gates.iter().filter(|g| g.state != GateState::Off).count();
        assert_eq!(diag.len(), evaluated);
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
        let m = steps
            .iter()
            .filter_map(|s| s.get("measurement"))
            .find(|m| m["name"] == "io_errors" && m.get("validators").is_some())
            .expect("the gate's measurement");
        assert_eq!(m["validators"][0]["type"], "LESS_THAN_OR_EQUAL");
        assert_eq!(m["value"], json!(7.0));
        let end = &lines.last().expect("lines")["testRunArtifact"]["testRunEnd"];
        assert_eq!(end["status"], "COMPLETE");
        assert_eq!(end["result"], "FAIL");
    }

    #[test]
    fn a_running_plan_writes_no_record_and_a_final_one_is_written() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(dir.path().join("results")).expect("mkdir");
        let mut r = clean_results();
        // A verified file target: every gate that applies has its data.
        r.subject = Some(crate::verdict::Subject {
            kind: crate::verdict::SubjectKind::File,
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
        assert_eq!(last["testRunArtifact"]["testRunEnd"]["result"], "PASS");
    }
}
