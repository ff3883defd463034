//! Tests of `ocptv`.

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
