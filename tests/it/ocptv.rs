//! The OCPTV record and the phase numbering, end to end: a real `nvsoak run` on a /dev/shm
//! file with precondition, sweep and soak, stopped by SIGTERM in the soak and resumed with
//! `--exit-when-done`. The log, `nvsoak state show` and the results file number the phases
//! the same way (from 1); the resumed soak logs "resumed" with the time it has left; the
//! OCPTV record has one step per phase run, each started and ended at the times the results
//! file keeps, in order, the resumed soak one step.

use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use crate::common::*;

const PLAN: &str = r#"
[state]
dir = "{dir}/state"
[health]
enabled = false
[[target]]
name = "tv"
path = "{dir}/tv.dat"
size = "8MiB"
direct = false
[[target.phase]]
kind = "precondition"
passes = 1
[[target.phase]]
kind = "sweep"
job = { name = "rr", read = 100, bs = "4k", iodepth = 4 }
max_duration = "1s"
point_duration = "1s"
points = [50]
[[target.phase]]
kind = "soak"
job = { name = "rw", read = 0, bs = "4k", iodepth = 4 }
duration = "4s"
"#;

fn state_show(dir: &Path) -> String {
    let out = std::process::Command::new(bin())
        .args(["state", "show", "--config"])
        .arg(dir.join("nvsoak.toml"))
        .output()
        .expect("running nvsoak state show");
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn results(dir: &Path) -> Value {
    let p = dir.join("state/results/tv.json");
    serde_json::from_slice(&std::fs::read(&p).expect("the results file")).expect("results JSON")
}

/// `(phase, kind, status)` of each phase record in the results file.
fn records(r: &Value) -> Vec<(u64, String, String)> {
    r["phases"]
        .as_array()
        .expect("phase records")
        .iter()
        .map(|p| {
            (
                p["phase"].as_u64().expect("phase"),
                p["kind"].as_str().expect("kind").to_string(),
                p["status"].as_str().expect("status").to_string(),
            )
        })
        .collect()
}

fn lines_with<'a>(err: &'a str, needle: &str) -> Vec<&'a str> {
    err.lines().filter(|l| l.contains(needle)).collect()
}

#[test]
fn phases_are_numbered_alike_everywhere_and_the_ocptv_record_has_one_step_per_phase() {
    // Run 1: stopped by SIGTERM once the soak runs.
    let mut d = Daemon::start(PLAN);
    let s = d.scrape_until(Duration::from_secs(90), |s| {
        !find(
            s,
            "nvsoak_phase_info",
            &[("target", "tv"), ("phase", "soak")],
        )
        .is_empty()
    });
    assert!(
        !find(
            &s,
            "nvsoak_phase_info",
            &[("target", "tv"), ("phase", "soak")]
        )
        .is_empty(),
        "the soak never started"
    );
    let dir = std::mem::replace(&mut d.dir, shm_dir());
    let (status, _, err) = d.terminate();
    assert!(status.code().is_some(), "{status:?}: {err}");
    let run1_log = err.clone();
    for (n, kind) in [(1, "precondition"), (2, "sweep"), (3, "soak")] {
        assert_eq!(
            lines_with(&err, &format!("phase {n} ({kind}) started")).len(),
            1,
            "{err}"
        );
    }
    assert_eq!(
        lines_with(&err, "phase 3 (soak) stopped after").len(),
        1,
        "{err}"
    );
    // `state show` and the results file name the phase the log does.
    let show = state_show(dir.path());
    assert!(show.contains("position     phase 3 (soak)"), "{show}");
    let r = results(dir.path());
    assert_eq!(
        records(&r),
        [
            (1, "precondition".to_string(), "finished".to_string()),
            (2, "sweep".to_string(), "finished".to_string()),
            (3, "soak".to_string(), "stopped".to_string()),
        ],
        "{r}"
    );
    assert_eq!(r["phases"][2]["phase_index"], 2, "0-based beside it");
    assert_eq!(r["soak"]["phases"][0]["phase"], 3, "{r}");

    // Run 2: resumes the soak and runs to the end of the plan.
    let mut d = Daemon::spawn_in(dir, PLAN, &["--exit-when-done"]);
    let (status, err) = wait_exit(
        &mut d.child,
        Duration::from_secs(120),
        "the plan did not end",
    );
    assert!(status.code().is_some(), "{status:?}: {err}");
    let resumed = lines_with(&err, "phase 3 (soak) resumed: ");
    assert_eq!(resumed.len(), 1, "{err}");
    assert!(
        resumed[0].contains(" left of 4 s"),
        "the time it has left: {}",
        resumed[0]
    );
    assert!(
        lines_with(&err, "phase 3 (soak) started").is_empty(),
        "{err}"
    );
    assert_eq!(
        lines_with(&err, "phase 3 (soak) finished in").len(),
        1,
        "{err}"
    );
    assert!(
        lines_with(&err, "phase 1 (precondition)").is_empty(),
        "{err}"
    );

    let r = results(d.dir.path());
    assert_eq!(
        records(&r),
        [
            (1, "precondition".to_string(), "finished".to_string()),
            (2, "sweep".to_string(), "finished".to_string()),
            (3, "soak".to_string(), "finished".to_string()),
        ],
        "{r}"
    );
    assert_eq!(r["phases"][2]["runs"], 2, "{r}");

    // The OCPTV record: one step per phase run, at the results file's times, in order.
    let text = std::fs::read_to_string(d.dir.path().join("state/results/tv.ocptv.jsonl"))
        .expect("the OCPTV record");
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON value per line"))
        .collect();
    let start = &lines[1]["testRunArtifact"]["testRunStart"];
    let cmd = start["commandLine"].as_str().expect("commandLine");
    assert!(
        cmd.contains(" run --config ") && cmd.ends_with(" --exit-when-done"),
        "the whole command line: {cmd}"
    );
    let mut steps: Vec<(String, String, Option<String>, String)> = Vec::new();
    for l in &lines {
        let a = &l["testStepArtifact"];
        let ts = l["timestamp"].as_str().expect("timestamp").to_string();
        if let Some(s) = a.get("testStepStart") {
            let name = s["name"].as_str().expect("name").to_string();
            steps.push((a["testStepId"].to_string(), name, None, ts));
        } else if let Some(e) = a.get("testStepEnd") {
            let id = a["testStepId"].to_string();
            let st = steps
                .iter_mut()
                .find(|s| s.0 == id)
                .expect("a started step");
            assert!(st.2.is_none(), "one end per step");
            st.2 = Some(ts.clone());
            assert_eq!(e["status"], "COMPLETE", "{}: {e}", st.1);
        }
    }
    let names: Vec<&str> = steps.iter().map(|s| s.1.as_str()).collect();
    assert_eq!(
        names,
        [
            "phase 1 (precondition)",
            "phase 2 (sweep rr)",
            "phase 3 (soak rw)",
            "gates"
        ]
    );
    let mut last_end = String::new();
    for (i, (_, name, end, start)) in steps.iter().enumerate() {
        let end = end.as_ref().expect("every step ends");
        assert!(start <= end, "{name}: {start} after {end}");
        assert!(
            *start >= last_end,
            "{name} starts before the step before ended"
        );
        last_end = end.clone();
        if i < 3 {
            let rec = &r["phases"][i];
            let want = |k: &str| nvsoak::verdict::ocptv::timestamp(rec[k].as_f64().expect(k));
            assert_eq!(*start, want("started"), "{name}");
            assert_eq!(*end, want("ended"), "{name}");
        }
    }
    let resumed_note = lines.iter().any(|l| {
        l["testStepArtifact"]["log"]["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("phase 3 (soak rw) ran over 2 runs"))
    });
    assert!(resumed_note, "{text}");

    // One units convention in every text this run produced: the journal of both runs,
    // `state show` before and after, and the Markdown report (its tables; charts aside).
    let md = d.dir.path().join("r.md");
    let out = std::process::Command::new(bin())
        .args(["report", "--state"])
        .arg(d.dir.path().join("state"))
        .args(["--format", "md", "--out"])
        .arg(&md)
        .output()
        .expect("running nvsoak report");
    assert!(out.status.success(), "{out:?}");
    let report = std::fs::read_to_string(&md).expect("the Markdown report");
    let after = state_show(d.dir.path());
    let sizes = regex::Regex::new(r"\d (?:B|KiB|MiB|GiB)\b").expect("regex");
    for (what, t) in [
        ("the first run's log", run1_log.as_str()),
        ("the resumed run's log", err.as_str()),
        ("state show", show.as_str()),
        ("state show after", after.as_str()),
        ("the report", report.as_str()),
    ] {
        assert!(sizes.is_match(t), "{what} writes no size at all:\n{t}");
        let breaks = unit_convention_breaks(t);
        assert!(breaks.is_empty(), "{what}:\n{}", breaks.join("\n"));
    }
    let end = &lines.last().expect("lines")["testRunArtifact"]["testRunEnd"];
    assert_eq!(end["status"], "COMPLETE", "the plan finished: {end}");
}

#[test]
fn the_units_sweep_catches_a_mix_of_conventions() {
    for bad in [
        "phase 1 (precondition) finished: wrote 51.20 MB",
        "read 3.20 TB, wrote 1.00 GiB",
        "bandwidth 40.00 MiB/s",
    ] {
        assert!(
            !unit_convention_breaks(bad).is_empty(),
            "let through: {bad}"
        );
    }
    for good in [
        "wrote 48.83 MiB, read 0 B at 406 MB/s",
        "capacity 2.91 TiB (3.20 TB)",
        "Rated endurance: 17.52 PB TBW, 1 DWPD, 5 years",
        "source: ratings table: Acme Test B 3.20 TB",
        "size = \"16MiB\", rate 200MiB/s",
    ] {
        assert_eq!(
            unit_convention_breaks(good),
            Vec::<String>::new(),
            "refused: {good}"
        );
    }
}
