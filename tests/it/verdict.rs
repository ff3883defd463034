//! A PASS is earned (issue 29), each promise tested as an attacker of it would:
//! - SIGINT and SIGTERM under `--exit-when-done` at every kind of moment (precondition, sweep,
//!   soak, a checkpoint save in flight) exit INCOMPLETE (3), never 0, and stderr says which
//!   target had not finished and where it was;
//! - a plan that verified nothing is not a PASS with the default gates; with the verify gate
//!   turned off it may PASS, and the report says "data not verified";
//! - a loop device re-attached to a fresh file between runs is another device: its finished
//!   plan is not the fresh file's PASS, the old records go aside and the plan runs again;
//! - a gate changed by SIGHUP mid-soak re-judges without restarting: the soak's clock and
//!   totals carry on, and the new limit shows in `/metrics` at once;
//! - a gate that fails mid-plan shows in `/metrics` and the journal at that moment, not at
//!   the next results-file write.

use std::io::Read;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::{Daemon, Sample, bin, find, shm_dir};

fn gauge(s: &[Sample], name: &str, want: &[(&str, &str)]) -> Option<f64> {
    find(s, name, want).first().map(|x| x.value)
}

/// The verdict series that is 1, by its `verdict` label.
fn verdict_of(s: &[Sample], target: &str) -> Option<String> {
    find(s, "nvsoak_qualification_verdict", &[("target", target)])
        .into_iter()
        .find(|x| x.value == 1.0)
        .and_then(|x| x.labels.get("verdict").cloned())
}

fn results(dir: &std::path::Path, target: &str) -> serde_json::Value {
    let p = dir.join("state/results").join(format!("{target}.json"));
    serde_json::from_slice(&std::fs::read(&p).expect("the results file")).expect("results JSON")
}

fn gate_state(r: &serde_json::Value, gate: &str) -> String {
    r["verdict"]["gates"]
        .as_array()
        .and_then(|g| g.iter().find(|x| x["gate"] == gate))
        .and_then(|x| x["state"].as_str())
        .unwrap_or("")
        .to_string()
}

/// A plan on a verified file target: precondition, sweep, soak, each long enough to be caught.
const PLAN: &str = r#"
[state]
dir = "{dir}/state"
checkpoint_interval = "1s"
[stats]
interval = "200ms"
[health]
enabled = false
[[target]]
name = "t0"
path = "{dir}/t0.img"
size = "1GiB"
verify = "inline"
# A precondition runs flat out: 1 GiB in 4 KiB writes lasts long enough to be caught.
[[target.phase]]
kind = "precondition"
passes = 1
block_size = "4k"
iodepth = 1
[[target.phase]]
kind = "sweep"
profile = "4k-random-read"
iodepth = 2
points = [50, 100]
point_duration = "4s"
max_duration = "4s"
[[target.phase]]
kind = "soak"
profile = "4k-random-read"
iodepth = 2
rate = "2000iops"
duration = "120s"
"#;

/// SIGINT and SIGTERM while each phase runs, and while a checkpoint save is in flight: exit 3
/// (INCOMPLETE), stderr names the target, the phase it was in and how far it got, and the
/// results file's verdict is INCOMPLETE. A script `nvsoak run --exit-when-done && mark_passed`
/// must never pass such a drive.
#[test]
fn a_signal_under_exit_when_done_is_incomplete_never_a_pass() {
    use nix::sys::signal::Signal::{SIGINT, SIGTERM};
    let cases = [
        ("precondition", SIGINT, false),
        ("sweep", SIGTERM, false),
        ("soak", SIGINT, false),
        ("soak", SIGTERM, true),
    ];
    for (phase, sig, slow_checkpoint) in cases {
        let dir = shm_dir();
        let env: &[(&str, &str)] = if slow_checkpoint {
            &[("NVSOAK_TEST_SLOW_CHECKPOINT_MS", "1500")]
        } else {
            &[]
        };
        let d = Daemon::spawn_in_env(dir, PLAN, &["--exit-when-done"], env);
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok((200, body)) = crate::common::http_get(d.addr, "/metrics") {
                let s = crate::common::parse_metrics(&body);
                if !find(
                    &s,
                    "nvsoak_phase_info",
                    &[("target", "t0"), ("phase", phase)],
                )
                .is_empty()
                    && (!slow_checkpoint
                        || gauge(&s, "nvsoak_checkpoint_saves_total", &[]).unwrap_or(0.0) >= 1.0)
                {
                    break;
                }
            }
            assert!(
                Instant::now() < deadline,
                "t0 never reached its {phase} phase"
            );
            std::thread::sleep(Duration::from_millis(25));
        }
        let mut d = d;
        let pid = nix::unistd::Pid::from_raw(d.child.id() as i32);
        nix::sys::signal::kill(pid, sig).expect("signal");
        let status = {
            let deadline = Instant::now() + Duration::from_secs(30);
            loop {
                if let Some(st) = d.child.try_wait().expect("wait") {
                    break st;
                }
                assert!(Instant::now() < deadline, "nvsoak did not stop on {sig}");
                std::thread::sleep(Duration::from_millis(20));
            }
        };
        let mut err = String::new();
        if let Some(mut e) = d.child.stderr.take() {
            let _ = e.read_to_string(&mut err);
        }
        assert_eq!(
            status.code(),
            Some(3),
            "{sig} during the {phase}: expected exit 3 (INCOMPLETE):\n{err}"
        );
        let msg = err
            .lines()
            .find(|l| l.contains("--exit-when-done: INCOMPLETE"))
            .unwrap_or_else(|| panic!("no INCOMPLETE line on stderr:\n{err}"));
        let want = format!("t0: stopped by {sig:?} before the end of its plan, at phase ");
        assert!(msg.contains(&want), "{msg}");
        assert!(msg.contains(&format!("of 3 ({phase})")), "{msg}");
        if phase == "precondition" {
            assert!(msg.contains("% written"), "{msg}");
        }
        let r = results(d.dir.path(), "t0");
        assert_eq!(r["verdict"]["status"], "incomplete", "{}", r["verdict"]);
        assert_eq!(r["verdict"]["passed"], false);
    }
}

const NO_VERIFY: &str = r#"
[state]
dir = "{dir}/state"
[health]
enabled = false
[[target]]
name = "nv"
path = "{dir}/nv.img"
size = "16MiB"
[[target.phase]]
kind = "soak"
profile = "sql-80-20"
iodepth = 2
rate = "1000iops"
duration = "2s"
"#;

fn run_to_end(dir: &std::path::Path, config: &str) -> (Option<i32>, String) {
    crate::common::run_exit_when_done(dir, config)
}

/// Verify is off by default: the plan runs to its end without an error, and still it is not a
/// PASS, because nothing checked the data. Turning the gate off is the operator's choice, and
/// the report then says the data was not verified where the verdict stands.
#[test]
fn a_plan_that_verified_nothing_is_not_a_pass_with_the_default_gates() {
    let dir = shm_dir();
    let (code, err) = run_to_end(dir.path(), NO_VERIFY);
    assert_eq!(code, Some(3), "expected INCOMPLETE:\n{err}");
    assert!(
        err.contains("--exit-when-done: INCOMPLETE")
            && err.contains("nv: verify_errors: not evaluated (verify is off"),
        "{err}"
    );
    let r = results(dir.path(), "nv");
    assert_eq!(r["verdict"]["status"], "incomplete");
    assert_eq!(r["verdict"]["plan"], "finished");
    assert_eq!(gate_state(&r, "verify_errors"), "not_evaluated");
    // Drive gates do not apply to a file: not applicable, neither pass nor not evaluated.
    assert_eq!(gate_state(&r, "temperature"), "not_applicable");
    assert_eq!(gate_state(&r, "io_errors"), "pass");

    // The gate turned off: PASS, and the report says the data was not verified.
    let dir = shm_dir();
    let cfg = format!("{NO_VERIFY}[target.gates]\nverify_errors = false\n");
    let (code, err) = run_to_end(dir.path(), &cfg);
    assert_eq!(code, Some(0), "expected PASS:\n{err}");
    let r = results(dir.path(), "nv");
    assert_eq!(r["verdict"]["status"], "pass");
    assert_eq!(gate_state(&r, "verify_errors"), "off");
    let md_path = dir.path().join("report.md");
    let out = Command::new(bin())
        .args(["report", "--format", "md", "--state"])
        .arg(dir.path().join("state"))
        .arg("--out")
        .arg(&md_path)
        .output()
        .expect("nvsoak report");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let md = std::fs::read_to_string(&md_path).expect("the Markdown report");
    assert!(
        md.contains("PASS, data not verified (the verify_errors gate is off)"),
        "{md}"
    );
    let ocptv = std::fs::read_to_string(dir.path().join("state/results/nv.ocptv.jsonl"))
        .expect("the OCPTV record");
    assert!(
        ocptv.contains("verdict PASS: data not verified"),
        "the OCPTV record does not say the data was not verified:\n{ocptv}"
    );

    // Verified: PASS without the caveat.
    let dir = shm_dir();
    let cfg = NO_VERIFY.replace("size = \"16MiB\"", "size = \"16MiB\"\nverify = \"inline\"");
    let (code, err) = run_to_end(dir.path(), &cfg);
    assert_eq!(code, Some(0), "expected PASS:\n{err}");
    let r = results(dir.path(), "nv");
    assert_eq!(gate_state(&r, "verify_errors"), "pass");
    assert!(r["verified_bytes"].as_u64().is_some_and(|b| b > 0), "{r}");
}

/// A loop device without serial or WWN, re-attached to a fresh, never-written file between two
/// runs, is another device: the second run does not answer "plan already finished" with the
/// first run's PASS. The old records go aside as `device`, and the plan runs again on the new
/// file (which then holds nvsoak's writes).
#[test]
fn a_loop_device_reattached_to_another_file_is_judged_again() {
    let Some(mut s) = crate::safety::Scratch::new("loop re-attach") else {
        return;
    };
    let dev = s.loop_dev(16, false);
    let devs = crate::safety::p(&dev).to_string();
    let cfg = format!(
        r#"
[state]
dir = "{{dir}}/state"
[health]
enabled = false
[[target]]
name = "lo"
path = "{devs}"
allow_destroy = "{devs}"
verify = "pass"
[[target.phase]]
kind = "soak"
profile = "4k-random-write"
iodepth = 2
rate = "1000iops"
duration = "2s"
"#
    );
    let dir = s.dir.path().to_path_buf();
    let (code, err) = run_to_end(&dir, &cfg);
    assert_eq!(code, Some(0), "first run:\n{err}");
    let first = results(&dir, "lo");
    assert_eq!(first["verdict"]["status"], "pass");
    // The same device again: nothing to run, the finished plan's verdict stands.
    let (code, err) = run_to_end(&dir, &cfg);
    assert_eq!(code, Some(0), "same device:\n{err}");
    assert!(err.contains("already finished"), "{err}");

    // Re-attach the same loop node to a fresh file of the same size.
    crate::safety::sh("losetup", &["-d", &devs]);
    let fresh = dir.join("fresh.img");
    let f = std::fs::File::create(&fresh).expect("fresh backing file");
    f.set_len(16 << 20).expect("size");
    drop(f);
    crate::safety::sh("losetup", &[&devs, crate::safety::p(&fresh)]);
    let (code, err) = run_to_end(&dir, &cfg);
    assert!(
        !err.contains("already finished"),
        "a fresh file was given the old PASS:\n{err}"
    );
    assert_eq!(code, Some(0), "second device:\n{err}");
    assert!(
        err.contains("backing file") && err.contains("inode"),
        "the log does not say the device changed:\n{err}"
    );
    let names: Vec<String> = std::fs::read_dir(dir.join("state/results"))
        .expect("results dir")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        names.iter().any(|n| n.starts_with("lo.json.device-")),
        "the first device's results were not moved aside: {names:?}"
    );
    let second = results(&dir, "lo");
    assert_ne!(second["device_key"], first["device_key"]);
    assert!(
        second["soak"]["written_bytes"]
            .as_u64()
            .is_some_and(|b| b > 0),
        "the fresh file was not written: {}",
        second["soak"]
    );
    // The fresh file now holds nvsoak's writes (it was all zeros).
    let data = std::fs::read(&fresh).expect("read the fresh file");
    assert!(
        data.iter().any(|b| *b != 0),
        "nothing written to the fresh file"
    );
}

const ENDLESS: &str = r#"
[state]
dir = "{dir}/state"
[stats]
interval = "200ms"
[health]
enabled = false
[[target]]
name = "g"
path = "{dir}/g.img"
size = "16MiB"
verify = "inline"
[[target.phase]]
kind = "soak"
profile = "4k-random-read"
iodepth = 2
rate = "2000iops"
duration = "10m"
"#;

fn soak_secs(s: &[Sample]) -> f64 {
    gauge(s, "nvsoak_soak_elapsed_seconds", &[("target", "g")]).unwrap_or(0.0)
}

fn read_ops(s: &[Sample]) -> f64 {
    crate::common::sum(s, "nvsoak_read_ops_total", &[("target", "g")])
}

/// SIGHUP with only a gate changed: the target keeps running (the soak clock and op counts
/// carry on, no "started" line, no results file moved aside), and the new limit is in
/// `/metrics` within a stats interval or two.
#[test]
fn a_gate_change_by_sighup_mid_soak_rejudges_without_restarting() {
    let d = Daemon::start(ENDLESS);
    let before = d.scrape_until(Duration::from_secs(30), |s| soak_secs(s) >= 2.0);
    let (secs0, ops0) = (soak_secs(&before), read_ops(&before));
    assert!(secs0 >= 2.0 && ops0 > 0.0, "the soak did not run");
    assert_eq!(
        gauge(
            &before,
            "nvsoak_qualification_gate_limit",
            &[("target", "g"), ("gate", "io_errors")]
        ),
        Some(0.0)
    );
    let cfg = format!("{ENDLESS}[target.gates]\nio_errors = 5\n")
        .replace("{dir}", &d.dir.path().display().to_string());
    std::fs::write(d.dir.path().join("nvsoak.toml"), cfg).expect("rewriting the config");
    let pid = nix::unistd::Pid::from_raw(d.child.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGHUP).expect("SIGHUP");
    let after = d.scrape_until(Duration::from_secs(20), |s| {
        gauge(
            s,
            "nvsoak_qualification_gate_limit",
            &[("target", "g"), ("gate", "io_errors")],
        ) == Some(5.0)
    });
    assert_eq!(
        gauge(
            &after,
            "nvsoak_qualification_gate_limit",
            &[("target", "g"), ("gate", "io_errors")]
        ),
        Some(5.0),
        "the new limit never showed"
    );
    let later = d.scrape_until(Duration::from_secs(20), |s| soak_secs(s) >= secs0 + 1.0);
    assert!(
        soak_secs(&later) >= secs0 + 1.0,
        "the soak clock went back or stopped: {secs0} then {}",
        soak_secs(&later)
    );
    assert!(read_ops(&later) > ops0, "the op count went back");
    let names: Vec<String> = std::fs::read_dir(d.dir.path().join("state/results"))
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    assert!(
        !names.iter().any(|n| n.contains(".restart-")),
        "the gate change restarted the target: {names:?}"
    );
    let (_, _, err) = d.terminate();
    assert!(err.contains("only the gates changed"), "{err}");
    assert_eq!(
        err.matches("target started").count(),
        1,
        "the target was restarted:\n{err}"
    );
}

/// A gate that fails when a sweep ends shows in `/metrics` as FAIL while the plan still runs
/// (long before the next results-file write, a minute later), and the journal has one WARN
/// line naming the target, the gate and its figure at that moment.
#[test]
fn a_failed_gate_shows_at_once_in_metrics_and_the_journal() {
    let cfg = r#"
[state]
dir = "{dir}/state"
[stats]
interval = "200ms"
[health]
enabled = false
[[target]]
name = "f"
path = "{dir}/f.img"
size = "16MiB"
verify = "inline"
[[target.phase]]
kind = "sweep"
profile = "4k-random-read"
iodepth = 2
points = [100]
point_duration = "2s"
max_duration = "2s"
[[target.phase]]
kind = "soak"
profile = "4k-random-read"
iodepth = 2
rate = "1000iops"
duration = "10m"
[target.gates]
min_sub_1ms_iops = 1000000000
"#;
    let d = Daemon::start(cfg);
    let s = d.scrape_until(Duration::from_secs(40), |s| {
        verdict_of(s, "f").as_deref() == Some("fail")
    });
    assert_eq!(verdict_of(&s, "f").as_deref(), Some("fail"), "never FAIL");
    // Judged while the plan runs (the results file is written only every minute).
    assert_eq!(
        gauge(&s, "nvsoak_qualification_finished", &[("target", "f")]),
        Some(0.0)
    );
    assert_eq!(
        gauge(&s, "nvsoak_phase_running", &[("target", "f")]),
        Some(1.0)
    );
    assert_eq!(
        gauge(&s, "nvsoak_qualification_passed", &[("target", "f")]),
        Some(0.0)
    );
    assert_eq!(
        gauge(
            &s,
            "nvsoak_qualification_gate_state",
            &[("target", "f"), ("gate", "sub_1ms_iops"), ("state", "fail")]
        ),
        Some(1.0)
    );
    let (_, _, err) = d.terminate();
    let warns: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("WARN") && l.contains("qualification gate sub_1ms_iops failed"))
        .collect();
    assert_eq!(warns.len(), 1, "one WARN line for the failed gate:\n{err}");
    assert!(warns[0].contains("target f"), "{}", warns[0]);
}
