//! Records only go forward, and "soak" means soak (issue 29). Real daemons on /dev/shm files:
//!
//! - a soak stopped again and again, by SIGTERM, SIGINT, SIGKILL and SIGHUP (unchanged config),
//!   each at a random moment: after every stop, no counter of the results file (soak and whole
//!   plan: elapsed, read/write ops and bytes, errors) and no `nvsoak_soak_*` series of a real
//!   `/metrics` scrape is below what it was before it (a clean stop: below the last scrape; a
//!   kill: below the last record, the results file, written every 300 ms here through
//!   `NVSOAK_TEST_RESULTS_SAVE_MS`, while the checkpoint is saved only at clean stops); a clean
//!   stop's checkpoint keeps the soak's time in the phase, and the resumed soak runs only the
//!   time it has left; the soak phase's entry holds every run's part, killed ones included;
//! - a plan of precondition, sweep and a read-only soak: the soak's written bytes are 0 in the
//!   results file, in `/metrics` and in `nvsoak state show`, and the soak's start is the soak
//!   phase's start, while the whole plan's totals (`soak.plan`, `state show`'s "whole plan")
//!   count the precondition's writes.

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::{Daemon, Sample, bin, shm_dir, sum};

/// A 16 MiB file, one write soak of 7 s; the checkpoint interval is long, so a kill leaves the
/// checkpoint of the last clean stop and the results file (saved every 300 ms) ahead of it.
const SOAK: &str = r#"
[state]
dir = "{dir}/state"
checkpoint_interval = "10m"
[stats]
interval = "100ms"
[health]
enabled = false
[[target]]
name = "t0"
path = "{dir}/t0.dat"
size = "16MiB"
engine = "psync"
direct = false
[[target.phase]]
kind = "soak"
job = { name = "rw", read = 50, bs = "4k", access = "random", iodepth = 1, rate = "1500iops" }
duration = "7s"
"#;

const SOAK_SECS: f64 = 7.0;

fn results(dir: &std::path::Path) -> Option<Value> {
    let text = std::fs::read_to_string(dir.join("state/results/t0.json")).ok()?;
    serde_json::from_str(&text).ok()
}

fn checkpoint(dir: &std::path::Path) -> Value {
    let text = std::fs::read_to_string(dir.join("state/checkpoint.json")).expect("checkpoint");
    serde_json::from_str(&text).expect("checkpoint parses")
}

/// Every counter the results file keeps for the target, by name.
fn record_counters(r: &Value) -> Vec<(String, f64)> {
    let mut out = Vec::new();
    for (part, v) in [("soak", &r["soak"]), ("plan", &r["soak"]["plan"])] {
        for k in [
            "elapsed_secs",
            "read_bytes",
            "written_bytes",
            "read_ops",
            "write_ops",
            "errors",
        ] {
            out.push((format!("{part}.{k}"), v[k].as_f64().unwrap_or(0.0)));
        }
    }
    out
}

/// The results file's soak figures in the order of [`metric_counters`].
fn soak_as_metrics(r: &Value) -> Vec<(String, f64)> {
    ["elapsed_secs", "read_bytes", "written_bytes", "errors"]
        .iter()
        .map(|k| (format!("soak.{k}"), r["soak"][k].as_f64().unwrap_or(0.0)))
        .collect()
}

/// The soak series of a scrape.
fn metric_counters(s: &[Sample]) -> Vec<(String, f64)> {
    [
        "nvsoak_soak_elapsed_seconds",
        "nvsoak_soak_read_bytes",
        "nvsoak_soak_written_bytes",
        "nvsoak_soak_errors",
    ]
    .iter()
    .map(|n| (n.to_string(), sum(s, n, &[("target", "t0")])))
    .collect()
}

/// `now` is nowhere below `before` (a tolerance only for the two clocks' rounding).
fn assert_not_below(what: &str, before: &[(String, f64)], now: &[(String, f64)]) {
    for ((name, b), (_, n)) in before.iter().zip(now) {
        assert!(
            *n + 1e-3 >= *b,
            "{what}: {name} went backwards: {b} before, {n} now\nbefore {before:?}\nnow {now:?}"
        );
    }
}

/// A moment between 0.6 and 1.4 s, different each call (the clock's nanoseconds).
fn random_moment() -> Duration {
    let n = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    Duration::from_millis(600 + u64::from(n % 800))
}

fn signal(d: &Daemon, sig: nix::sys::signal::Signal) {
    let pid = nix::unistd::Pid::from_raw(d.child.id() as i32);
    nix::sys::signal::kill(pid, sig).expect("signalling nvsoak");
}

fn start(dir: tempfile::TempDir) -> Daemon {
    let mut d = Daemon::spawn_in_env(dir, SOAK, &[], &[("NVSOAK_TEST_RESULTS_SAVE_MS", "300")]);
    let deadline = Instant::now() + Duration::from_secs(20);
    while crate::common::http_get(d.addr, "/healthz")
        .ok()
        .map(|r| r.0)
        != Some(200)
    {
        assert!(Instant::now() < deadline, "nvsoak did not serve /healthz");
        if let Ok(Some(st)) = d.child.try_wait() {
            panic!("nvsoak exited early: {st}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    d
}

/// Waits for the daemon to exit after a stop signal; hands back its directory.
fn wait_stopped(mut d: Daemon) -> tempfile::TempDir {
    let (st, err) = crate::common::wait_exit(
        &mut d.child,
        Duration::from_secs(15),
        "nvsoak did not exit after the stop signal",
    );
    assert!(
        st.code().is_some(),
        "nvsoak died of a signal ({st}):\n{err}"
    );
    std::mem::replace(&mut d.dir, shm_dir())
}

#[test]
fn stops_of_every_kind_at_random_moments_never_take_a_record_back() {
    use nix::sys::signal::Signal;
    let mut dir = shm_dir();
    // What the records said before the last stop, and what /metrics said (clean stops only:
    // a kill loses the I/O after the last record, which no process can keep).
    let mut last_records: Vec<(String, f64)> = Vec::new();
    let mut last_metrics: Vec<(String, f64)> = Vec::new();
    let mut last_soak: Vec<(String, f64)> = Vec::new();
    for (round, stop) in [
        Signal::SIGTERM,
        Signal::SIGKILL,
        Signal::SIGHUP,
        Signal::SIGINT,
        Signal::SIGKILL,
        Signal::SIGTERM,
    ]
    .into_iter()
    .enumerate()
    {
        // Where the checkpoint puts the soak phase at this start.
        let cp_before = std::fs::metadata(dir.path().join("state/checkpoint.json"))
            .is_ok()
            .then(|| checkpoint(dir.path())["targets"][0]["phase_elapsed_secs"].as_f64())
            .flatten()
            .unwrap_or(0.0);
        let d = start(dir);
        let s = d.scrape();
        let m = metric_counters(&s);
        // The resumed daemon starts from the records, never below them.
        assert_not_below(&format!("round {round}: /metrics at start"), &last_soak, &m);
        assert_not_below(
            &format!("round {round}: /metrics at start"),
            &last_metrics,
            &m,
        );
        std::thread::sleep(random_moment());
        let mut before = metric_counters(&d.scrape());
        let rec_before = results(d.dir.path()).map(|r| record_counters(&r));
        if let Some(r) = &rec_before {
            assert_not_below(
                &format!("round {round}: results while running"),
                &last_records,
                r,
            );
        }
        match stop {
            Signal::SIGHUP => {
                // An unchanged config: nothing restarts, nothing goes back.
                signal(&d, stop);
                std::thread::sleep(Duration::from_millis(500));
                let after = metric_counters(&d.scrape());
                assert_not_below(
                    &format!("round {round}: /metrics after SIGHUP"),
                    &before,
                    &after,
                );
                if let Some(r) = &rec_before {
                    let now = record_counters(&results(d.dir.path()).expect("results"));
                    assert_not_below(&format!("round {round}: results after SIGHUP"), r, &now);
                }
                // Then a clean stop, to go on.
                signal(&d, Signal::SIGTERM);
                before = metric_counters(&d.scrape());
                dir = wait_stopped(d);
                last_metrics = before.clone();
            }
            Signal::SIGKILL => {
                dir = d.kill9();
                last_metrics = Vec::new();
            }
            _ => {
                signal(&d, stop);
                dir = wait_stopped(d);
                last_metrics = before.clone();
            }
        }
        let r = results(dir.path()).expect("results file after the stop");
        let rec = record_counters(&r);
        if let Some(b) = &rec_before {
            assert_not_below(&format!("round {round}: results after {stop:?}"), b, &rec);
        }
        // A clean stop's final write covers everything /metrics showed before it.
        assert_not_below(
            &format!("round {round}: results after {stop:?} against /metrics"),
            &last_metrics,
            &soak_as_metrics(&r),
        );
        if stop != Signal::SIGKILL {
            // The checkpoint keeps the soak's time in the phase (it was lost at clean stops).
            let cp = checkpoint(dir.path());
            let el = cp["targets"][0]["phase_elapsed_secs"]
                .as_f64()
                .unwrap_or(0.0);
            // This run's soak time (the soak clock from its start to the stop) is added to
            // where the phase was.
            let ran = before[0].1 - m[0].1;
            assert!(
                ran > 0.3 && el + 0.3 >= cp_before + ran,
                "round {round}: the checkpoint after {stop:?} keeps {el:.2} s of the soak phase; \
                 it was {cp_before:.2} s at the start and this run soaked {ran:.2} s"
            );
        }
        last_soak = soak_as_metrics(&r);
        last_records = rec;
    }
    // The soak resumes with the time it has left: from the last clean stop, it finishes within
    // that remainder (plus start-up), not a whole duration.
    let cp = checkpoint(dir.path());
    let done = cp["targets"][0]["phase_elapsed_secs"]
        .as_f64()
        .expect("phase_elapsed_secs");
    assert!(done < SOAK_SECS, "the soak already ran out: {done:.2} s");
    let d = start(dir);
    let t0 = Instant::now();
    let deadline = t0 + Duration::from_secs(30);
    let r = loop {
        assert!(Instant::now() < deadline, "the resumed soak did not finish");
        if let Some(r) = results(d.dir.path())
            && r["soak"]["phases"][0]["stopped"] == Value::Bool(false)
        {
            break r;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let took = t0.elapsed().as_secs_f64();
    let left = SOAK_SECS - done;
    assert!(
        took < left + 2.5,
        "the soak resumed {done:.2} s in took {took:.2} s to end, more than the {left:.2} s it had left"
    );
    assert!(
        took + 0.3 >= left,
        "the soak ended after {took:.2} s, before the {left:.2} s it had left"
    );
    assert_not_below("the finished soak", &last_records, &record_counters(&r));
    // One phase entry, holding every run's part, killed ones included: it agrees with the soak
    // totals (up to the I/O a kill lost from one but not the other: one 300 ms save).
    let phases = r["soak"]["phases"].as_array().expect("soak.phases");
    assert_eq!(phases.len(), 1, "{phases:?}");
    let p = &phases[0];
    for (k, slack) in [
        ("written_bytes", 0.15),
        ("write_ops", 0.15),
        ("read_ops", 0.15),
        ("elapsed_secs", 0.15),
    ] {
        let (entry, total) = (
            p[k].as_f64().unwrap_or(0.0),
            r["soak"][k].as_f64().unwrap_or(0.0),
        );
        assert!(
            total > 0.0 && entry >= total * (1.0 - slack) && entry <= total * (1.0 + slack),
            "soak.phases[0].{k} = {entry}, the soak's {k} = {total}"
        );
    }
    // Every run's soak time is counted: at least the whole duration.
    let el = r["soak"]["elapsed_secs"].as_f64().unwrap_or(0.0);
    assert!(
        el + 0.3 >= SOAK_SECS,
        "soak elapsed {el:.2} s of {SOAK_SECS} s"
    );
}

/// Precondition, sweep and a read-only soak on a small file.
const PLAN: &str = r#"
[state]
dir = "{dir}/state"
checkpoint_interval = "1s"
[stats]
interval = "100ms"
[health]
enabled = false
[[target]]
name = "t0"
path = "{dir}/t0.dat"
size = "8MiB"
engine = "psync"
direct = false
[[target.phase]]
kind = "precondition"
passes = 1
[[target.phase]]
kind = "sweep"
job = { name = "curve", read = 100, bs = "4k", access = "random", iodepth = 2 }
max_duration = "1s"
point_duration = "500ms"
points = [50]
[[target.phase]]
kind = "soak"
job = { name = "ro", read = 100, bs = "4k", access = "random", iodepth = 2, rate = "1000iops" }
duration = "10m"
"#;

#[test]
fn a_read_only_soak_after_a_precondition_and_a_sweep_writes_nothing_and_starts_with_its_phase() {
    let started = nvsoak::util::unix_now();
    let d = Daemon::start(PLAN);
    // Well into the soak: more than a second of its own, and a checkpoint or two.
    let s = d.scrape_until(Duration::from_secs(30), |s| {
        sum(s, "nvsoak_soak_elapsed_seconds", &[("target", "t0")]) >= 2.0
    });
    let soak_secs = sum(&s, "nvsoak_soak_elapsed_seconds", &[("target", "t0")]);
    assert!(soak_secs >= 2.0, "the soak did not run");
    assert_eq!(
        sum(&s, "nvsoak_soak_written_bytes", &[("target", "t0")]),
        0.0,
        "a read-only soak wrote (the precondition's writes counted as the soak's)"
    );
    assert!(sum(&s, "nvsoak_soak_read_bytes", &[("target", "t0")]) > 0.0);
    let running_show = state_show(d.dir.path());
    signal(&d, nix::sys::signal::Signal::SIGTERM);
    let dir = wait_stopped(d);
    let r = results(dir.path()).expect("results file");
    let soak = &r["soak"];
    assert_eq!(soak["written_bytes"], 0, "soak summary: {soak}");
    assert_eq!(soak["write_ops"], 0, "soak summary: {soak}");
    assert!(soak["read_ops"].as_u64().unwrap_or(0) > 0, "{soak}");
    // The whole plan's totals count the precondition's pass over the 8 MiB file.
    let plan_written = soak["plan"]["written_bytes"].as_u64().unwrap_or(0);
    assert!(plan_written >= 8 << 20, "soak.plan: {}", soak["plan"]);
    // The soak started with its phase, after the precondition and the sweep (at least its
    // 500 ms point and its uncontrolled run), not when the plan started.
    let phase_start = soak["phases"][0]["started"].as_f64().expect("phase start");
    let soak_start = soak["started"].as_f64().expect("soak start");
    assert!(
        (soak_start - phase_start).abs() < 0.5,
        "soak started {soak_start}, its phase {phase_start}"
    );
    assert!(
        soak_start >= started + 1.0,
        "soak start {soak_start} is the plan's start ({started}), not the soak phase's"
    );
    let el = soak["elapsed_secs"].as_f64().unwrap_or(0.0);
    let wall = nvsoak::util::unix_now() - soak_start;
    assert!(
        el >= soak_secs && el <= wall + 0.5,
        "soak elapsed {el:.2} s; {soak_secs:.2} s scraped, {wall:.2} s since the soak started"
    );
    // The checkpoint and `state show` say the same: soak start, soak writes 0, the plan's apart.
    let cp = checkpoint(dir.path());
    let t = &cp["targets"][0];
    assert!(
        (t["soak_started"].as_f64().unwrap_or(0.0) - soak_start).abs() < 0.5,
        "checkpoint soak_started {} vs {soak_start}",
        t["soak_started"]
    );
    assert_eq!(t["soak"]["write_bytes"], 0, "{}", t["soak"]);
    assert!(t["totals"]["write_bytes"].as_u64().unwrap_or(0) >= 8 << 20);
    let show = state_show(dir.path());
    for out in [&running_show, &show] {
        assert!(out.contains("  written      0 B in 0 ops"), "{out}");
        assert!(out.contains("  whole plan   read "), "{out}");
        let line = out
            .lines()
            .find(|l| l.trim_start().starts_with("soak ") && l.contains("started"))
            .unwrap_or_else(|| panic!("no soak line:\n{out}"));
        let wanted = Command::new("date")
            .args(["-u", "-d"])
            .arg(format!("@{}", soak_start.floor() as i64))
            .arg("+%Y-%m-%d %H:%M:%S UTC")
            .output()
            .expect("date");
        let wanted = String::from_utf8_lossy(&wanted.stdout).trim().to_string();
        let earlier = Command::new("date")
            .args(["-u", "-d"])
            .arg(format!("@{}", soak_start.floor() as i64 - 1))
            .arg("+%Y-%m-%d %H:%M:%S UTC")
            .output()
            .expect("date");
        let earlier = String::from_utf8_lossy(&earlier.stdout).trim().to_string();
        assert!(
            line.contains(&wanted) || line.contains(&earlier),
            "state show's soak start is not the soak phase's ({wanted}): {line}"
        );
    }
}

fn state_show(dir: &std::path::Path) -> String {
    let out = Command::new(bin())
        .args(["state", "show", "--state"])
        .arg(dir.join("state"))
        .output()
        .expect("running nvsoak state show");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}
