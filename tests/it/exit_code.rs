//! `nvsoak run --exit-when-done`: the exit status is the verdict: 0 every target PASSed, 2 a
//! target FAILed a gate, 3 a target stopped before the end of its plan with no gate failed.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{bin, free_port, shm_dir, wait_exit};

/// A soak whose target file is truncated under it: every read then hits EOF (counted as ENXIO),
/// `max_errors` stops the target. With the I/O error gate on (the default) the verdict is FAIL
/// (exit 2, the gate named); with it off, nothing failed but the plan did not finish: exit 3,
/// naming the target and the reason, never success for a plan that did not finish.
#[test]
fn exit_when_done_exits_non_zero_when_a_target_stopped_on_an_error() {
    let (code, err, _) = truncated_soak("");
    assert_eq!(code, Some(2), "expected exit 2 (FAIL):\n{err}");
    assert!(
        err.contains("--exit-when-done: FAIL") && err.contains("shrinks: io_errors: "),
        "the error does not name the target and its failed gate:\n{err}"
    );
    assert!(err.contains("max_errors = 20"), "no stop reason:\n{err}");
    let (code, err, dir) = truncated_soak("[target.gates]\nio_errors = false\n");
    assert_eq!(code, Some(3), "expected exit 3 (INCOMPLETE):\n{err}");
    assert!(
        err.contains("--exit-when-done: INCOMPLETE")
            && err.contains("shrinks")
            && err.contains("max_errors = 20"),
        "the error does not name the target and its reason:\n{err}"
    );
    // The final checkpoint is still written on the way out.
    assert!(
        dir.path()
            .join("state")
            .read_dir()
            .is_ok_and(|mut d| d.next().is_some()),
        "nothing in the state directory"
    );
}

/// Runs the truncated-file soak with `gates` appended to the target; (exit code, stderr, dir).
fn truncated_soak(gates: &str) -> (Option<i32>, String, tempfile::TempDir) {
    let dir = shm_dir();
    let target = dir.path().join("shrinks.img");
    let cfg = format!(
        r#"
[state]
dir = "{d}/state"
[health]
enabled = false
[[target]]
name = "shrinks"
path = "{t}"
size = "16MiB"
max_errors = 20
[[target.phase]]
kind = "soak"
profile = "4k-random-read"
iodepth = 2
rate = "2000iops"
duration = "10m"
{gates}
"#,
        d = dir.path().display(),
        t = target.display()
    );
    let cfg_path = dir.path().join("nvsoak.toml");
    std::fs::write(&cfg_path, cfg).expect("writing config");
    let mut child = Command::new(bin())
        .arg("run")
        .arg("--config")
        .arg(&cfg_path)
        .arg("--web.listen-address")
        .arg(format!("127.0.0.1:{}", free_port()))
        .arg("--exit-when-done")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting nvsoak run");
    // The file is created and preallocated before the workload starts: once it has its full
    // size, cut it to nothing, so every read of the running soak reads EOF.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if std::fs::metadata(&target).is_ok_and(|m| m.len() == 16 << 20) {
            break;
        }
        if let Some(st) = child.try_wait().expect("waiting for nvsoak") {
            panic!("nvsoak exited ({st}) before its target file was preallocated");
        }
        assert!(
            Instant::now() < deadline,
            "the target file never reached 16 MiB"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::fs::OpenOptions::new()
        .write(true)
        .open(&target)
        .and_then(|f| f.set_len(0))
        .expect("truncating the target file");
    let (status, err) = wait_exit(
        &mut child,
        Duration::from_secs(60),
        "max_errors did not stop the target (the 10 min soak is still running)",
    );
    assert!(!err.contains("panicked"), "{err}");
    (status.code(), err, dir)
}

/// `nvsoak run --exit-when-done` with `config` (`{dir}` replaced) to its end: (exit code,
/// stderr).
fn run_to_end(dir: &tempfile::TempDir, config: &str) -> (Option<i32>, String) {
    crate::common::run_exit_when_done(dir.path(), config)
}

fn results(dir: &tempfile::TempDir, target: &str) -> serde_json::Value {
    let p = dir
        .path()
        .join("state/results")
        .join(format!("{target}.json"));
    serde_json::from_slice(&std::fs::read(&p).expect("the results file")).expect("results JSON")
}

fn ocptv_lines(dir: &tempfile::TempDir, target: &str) -> Vec<serde_json::Value> {
    let p = dir
        .path()
        .join("state/results")
        .join(format!("{target}.ocptv.jsonl"));
    std::fs::read_to_string(&p)
        .expect("the OCPTV record next to the results file")
        .lines()
        .map(|l| serde_json::from_str(l).expect("each OCPTV line is JSON"))
        .collect()
}

const SHORT_SOAK: &str = r#"
[state]
dir = "{dir}/state"
[health]
enabled = false
[[target]]
name = "clean"
path = "{dir}/clean.img"
size = "16MiB"
verify = "inline"
[[target.phase]]
kind = "soak"
profile = "sql-80-20"
iodepth = 2
rate = "1000iops"
duration = "3s"
"#;

/// A clean, verified file-target run PASSes: exit 0, the verdict in the results file with its
/// drive gates "not applicable" (a file has no drive), and the OCPTV record with the PASS. A second run
/// over the same state directory (another plan) moves both records aside, never over them.
#[test]
fn a_clean_file_target_run_passes_with_exit_0_and_writes_the_verdict() {
    let dir = shm_dir();
    let (code, err) = run_to_end(&dir, SHORT_SOAK);
    assert_eq!(code, Some(0), "expected PASS:\n{err}");
    assert!(err.contains("verdict") && err.contains("PASS"), "{err}");
    let r = results(&dir, "clean");
    let v = &r["verdict"];
    assert_eq!(v["passed"], true, "{v}");
    assert_eq!(v["plan"], "finished");
    let state = |gate: &str| {
        v["gates"]
            .as_array()
            .and_then(|g| g.iter().find(|x| x["gate"] == gate))
            .map(|x| x["state"].as_str().unwrap_or("").to_string())
    };
    assert_eq!(state("io_errors").as_deref(), Some("pass"));
    assert_eq!(state("verify_errors").as_deref(), Some("pass"));
    // A file has no drive: the drive gates do not apply (never "pass", never "not evaluated").
    assert_eq!(state("media_errors").as_deref(), Some("not_applicable"));
    assert_eq!(state("critical_warning").as_deref(), Some("not_applicable"));
    let lines = ocptv_lines(&dir, "clean");
    assert_eq!(lines[0]["schemaVersion"]["major"], 2);
    let end = &lines.last().expect("lines")["testRunArtifact"]["testRunEnd"];
    assert_eq!(end["result"], "PASS", "{end}");
    assert_eq!(end["status"], "COMPLETE");

    // Another plan in the same state directory: both records of the first run go aside.
    let (code, err) = run_to_end(&dir, &SHORT_SOAK.replace("1000iops", "900iops"));
    assert_eq!(code, Some(0), "{err}");
    let names: Vec<String> = std::fs::read_dir(dir.path().join("state/results"))
        .expect("results dir")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        names.iter().any(|n| n.starts_with("clean.json.stale-"))
            && names
                .iter()
                .any(|n| n.starts_with("clean.ocptv.jsonl.stale-")),
        "{names:?}"
    );
    assert!(names.iter().any(|n| n == "clean.ocptv.jsonl"), "{names:?}");
}

/// Reads that hit a device-mapper `error` range: the plan runs to its end (no `max_errors`),
/// the I/O error gate FAILs with its figure, the exit status is 2 and the OCPTV record carries
/// the FAIL and the gate's diagnosis.
#[test]
fn io_errors_from_a_device_mapper_error_range_fail_the_verdict_with_exit_2() {
    let dev = match crate::faults::DmErrorDevice::new() {
        Ok(d) => d,
        Err(reason) => {
            eprintln!("skipped: {reason}");
            return;
        }
    };
    let dir = shm_dir();
    // A read-only plan: the device only needs to exist.
    let cfg = format!(
        r#"
[state]
dir = "{{dir}}/state"
[health]
enabled = false
[[target]]
name = "flaky"
path = "{p}"
[[target.phase]]
kind = "soak"
profile = "4k-random-read"
iodepth = 2
rate = "1000iops"
duration = "3s"
"#,
        p = dev.path.display()
    );
    let (code, err) = run_to_end(&dir, &cfg);
    assert_eq!(code, Some(2), "expected FAIL:\n{err}");
    assert!(
        err.contains("--exit-when-done: FAIL") && err.contains("flaky: io_errors: "),
        "the failed gate is not named:\n{err}"
    );
    let r = results(&dir, "flaky");
    assert_eq!(r["verdict"]["passed"], false);
    assert_eq!(r["verdict"]["plan"], "finished", "the plan ran to its end");
    let io = r["verdict"]["gates"]
        .as_array()
        .and_then(|g| g.iter().find(|x| x["gate"] == "io_errors"))
        .expect("the I/O error gate")
        .clone();
    assert_eq!(io["state"], "fail");
    assert!(io["value"].as_f64().is_some_and(|n| n > 0.0), "{io}");
    let lines = ocptv_lines(&dir, "flaky");
    let end = &lines.last().expect("lines")["testRunArtifact"]["testRunEnd"];
    assert_eq!(end["result"], "FAIL");
    assert!(
        lines
            .iter()
            .any(|l| l["testStepArtifact"]["diagnosis"]["verdict"] == "io_errors-fail"),
        "no diagnosis for the failed gate"
    );
}
