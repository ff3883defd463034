//! Records are never overwritten, and checkpoint saves never stall the daemon. Real daemons on
//! /dev/shm files (and two loop devices for the device check), the state directory read back:
//!
//! - each way a run starts over (a changed plan, `nvsoak state reset`, a SIGHUP restart of the
//!   target, a corrupt results file) leaves the earlier results file intact, byte for byte,
//!   under its moved-aside name, and `nvsoak report --archived` shows it labelled as archived;
//! - a checkpoint saved for loop device A is moved aside, naming both devices, when the same
//!   path is device B at the next start; a generation map that does not fit its target is
//!   reported (file and reason), not dropped silently;
//! - with a save held in flight (the test-only `NVSOAK_TEST_SLOW_CHECKPOINT_MS`), `/metrics`
//!   answers promptly, ticks are skipped and counted, and SIGTERM is acted on at once and still
//!   ends with a final checkpoint;
//! - a save that fails (the checkpoint's name taken by a directory) raises
//!   `nvsoak_checkpoint_save_failures_total` while the daemon keeps serving and soaking.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::common::{Daemon, Sample, bin, free_port, http_get, parse_metrics, shm_dir, sum};

/// A 16 MiB file target with one short read soak (`{duration}`), health polling off.
fn config(duration: &str, interval: &str) -> String {
    format!(
        r#"
[state]
dir = "{{dir}}/state"
checkpoint_interval = "{interval}"
[health]
enabled = false
[[target]]
name = "t0"
path = "{{dir}}/t0.dat"
size = "16MiB"
engine = "psync"
[[target.phase]]
kind = "soak"
profile = "4k-random-read"
iodepth = 2
rate = "2000iops"
duration = "{duration}"
"#
    )
}

/// The daemon's stderr, collected on a thread (the pipe never fills; tests wait for lines).
#[derive(Clone)]
struct Log(Arc<Mutex<String>>);

impl Log {
    fn attach(d: &mut Daemon) -> Log {
        let buf = Arc::new(Mutex::new(String::new()));
        if let Some(err) = d.child.stderr.take() {
            let b = buf.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(err).lines().map_while(Result::ok) {
                    let mut g = b.lock().unwrap_or_else(|p| p.into_inner());
                    g.push_str(&line);
                    g.push('\n');
                }
            });
        }
        Log(buf)
    }

    fn text(&self) -> String {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// Poll `f` every 50 ms until it returns `Some`, or panic with `what` after `timeout`.
fn wait_for<T>(timeout: Duration, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// SIGTERM and wait (at most `bound`); returns the scratch directory and how long it took.
fn stop(mut d: Daemon, bound: Duration) -> (tempfile::TempDir, Duration) {
    let pid = nix::unistd::Pid::from_raw(d.child.id() as i32);
    let t0 = Instant::now();
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).expect("SIGTERM");
    let status = wait_for(bound, "nvsoak to exit after SIGTERM", || {
        d.child.try_wait().expect("waiting for nvsoak")
    });
    assert!(status.success(), "nvsoak exited with {status}");
    (std::mem::replace(&mut d.dir, shm_dir()), t0.elapsed())
}

/// Run the plan until its target finished (the results file is then final), then stop.
fn run_to_end(dir: tempfile::TempDir, cfg: &str) -> (tempfile::TempDir, Log) {
    let mut d = Daemon::start_in(dir, cfg, &[]);
    let log = Log::attach(&mut d);
    // `nvsoak_phase_running` is 1 from the target's start until its plan ends (a resumed plan
    // that had already ended reads nothing more).
    let s = d.scrape_until(Duration::from_secs(60), |s| {
        !crate::common::find(s, "nvsoak_phase_running", &[("target", "t0")]).is_empty()
            && sum(s, "nvsoak_phase_running", &[("target", "t0")]) == 0.0
    });
    assert_eq!(
        sum(&s, "nvsoak_phase_running", &[("target", "t0")]),
        0.0,
        "the plan did not end"
    );
    let (dir, _) = stop(d, Duration::from_secs(30));
    (dir, log)
}

fn results(dir: &Path) -> PathBuf {
    dir.join("state/results")
}

/// The moved-aside copies of `t0.json` with reason `why`.
fn archived(dir: &Path, why: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(results(dir))
        .expect("results dir")
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(&format!("t0.json.{why}-")))
        })
        .collect();
    v.sort();
    v
}

fn current_results(dir: &Path) -> Vec<u8> {
    let p = results(dir).join("t0.json");
    let data = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    let v: serde_json::Value = serde_json::from_slice(&data).expect("a results file");
    assert_eq!(v["target"], "t0");
    data
}

fn nvsoak(args: &[&str], dir: &Path) -> String {
    let out = Command::new(bin())
        .args(args)
        .arg("--state")
        .arg(dir.join("state"))
        .output()
        .expect("running nvsoak");
    assert!(out.status.success(), "nvsoak {args:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn a_changed_plan_keeps_the_earlier_results_and_report_archived_shows_them() {
    let (dir, _) = run_to_end(shm_dir(), &config("2s", "1h"));
    let before = current_results(dir.path());
    // Another duration: another plan, so the checkpoint is stale and the run starts over.
    let (dir, log) = run_to_end(dir, &config("3s", "1h"));
    let aside = archived(dir.path(), "stale");
    assert_eq!(aside.len(), 1, "one stale copy: {aside:?}");
    assert_eq!(std::fs::read(&aside[0]).expect("archived"), before);
    assert_ne!(
        current_results(dir.path()),
        before,
        "a new file for the new run"
    );
    let name = aside[0].display().to_string();
    assert!(
        log.text().contains(&name),
        "the log says where it went ({name}):\n{}",
        log.text()
    );

    let plain = nvsoak(&["report", "--format", "json"], dir.path());
    let plain: serde_json::Value = serde_json::from_str(&plain).expect("json report");
    assert_eq!(plain["drives"].as_array().map(Vec::len), Some(1));
    let all = nvsoak(&["report", "--archived", "--format", "json"], dir.path());
    let all: serde_json::Value = serde_json::from_str(&all).expect("json report");
    let drives = all["drives"].as_array().expect("drives");
    assert_eq!(drives.len(), 2, "{all}");
    assert!(drives[0]["archived"].is_null());
    assert_eq!(drives[1]["archived"]["reason"], "stale");
    assert!(
        drives[1]["archived"]["moved_at"]
            .as_f64()
            .is_some_and(|t| t > 1.0e9)
    );
    let label = drives[1]["label"].as_str().expect("label");
    assert!(label.starts_with("t0 (archived 20"), "{label}");
    let html = nvsoak(&["report", "--archived"], dir.path());
    assert!(html.contains("Archived run") && html.contains("the plan changed"));
    // Issue 34: one drive and its archived run read "2 drives". One drive, one archived run,
    // in every form that counts them.
    assert!(
        html.contains("1 drive, 1 archived run, generated"),
        "{html}"
    );
    let md = nvsoak(&["report", "--archived", "--format", "md"], dir.path());
    assert!(md.contains("1 drive, 1 archived run, nvsoak"), "{md}");
    let plain_md = nvsoak(&["report", "--format", "md"], dir.path());
    assert!(plain_md.contains("\n1 drive, nvsoak"), "{plain_md}");
    let out = dir.path().join("r.html");
    let o = Command::new(bin())
        .args(["report", "--archived", "--out"])
        .arg(&out)
        .arg("--state")
        .arg(dir.path().join("state"))
        .output()
        .expect("running nvsoak report");
    assert!(o.status.success(), "{o:?}");
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("(1 drive, 1 archived run, "),
        "{o:?}"
    );
    // `report --config` reads the config's state.dir (the daemon's config is in the scratch
    // directory).
    let o = Command::new(bin())
        .args(["report", "--format", "json", "--config"])
        .arg(dir.path().join("nvsoak.toml"))
        .current_dir(dir.path())
        .output()
        .expect("running nvsoak report --config");
    assert!(o.status.success(), "{o:?}");
    let by_config: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json report");
    assert_eq!(by_config["drives"][0]["target"], "t0", "{by_config}");
}

/// Issue 34: `nvsoak report --format md` without `--out` exited 1. It writes the Markdown to
/// stdout, each chart's place naming the chart and how to get it; with `--out`, the SVGs go
/// beside the file as before.
#[test]
fn report_markdown_goes_to_stdout_without_out() {
    let (dir, _) = run_to_end(shm_dir(), &config("2s", "1h"));
    let md = nvsoak(&["report", "--format", "md"], dir.path());
    assert!(md.starts_with("# nvsoak qualification report\n"), "{md}");
    assert!(
        !md.contains(".svg)"),
        "no links to charts that were not written:\n{md}"
    );
    assert!(
        md.contains("*Chart: ")
            && md.contains("(written as an SVG file beside the report with --out)*"),
        "{md}"
    );
    let out = dir.path().join("q.md");
    let o = Command::new(bin())
        .args(["report", "--format", "md", "--out"])
        .arg(&out)
        .arg("--state")
        .arg(dir.path().join("state"))
        .output()
        .expect("running nvsoak report");
    assert!(o.status.success(), "{o:?}");
    let file = std::fs::read_to_string(&out).expect("markdown written");
    assert!(file.contains("](q-"), "{file}");
}

/// Issue 34: after `state reset`, an older generation-map sidecar stayed behind; only the one
/// the checkpoint named went aside. Every sidecar goes aside (none deleted), each named in
/// the output.
#[test]
fn state_reset_moves_every_generation_map_aside() {
    // Zipf-skewed writes: the stored map (the computed state writes no sidecar).
    let cfg = config("2s", "1h")
        .replace(
            "engine = \"psync\"\n",
            "engine = \"psync\"\nverify = \"inline\"\n",
        )
        .replace(
            "profile = \"4k-random-read\"\niodepth = 2\nrate = \"2000iops\"\n",
            "job = { name = \"mix\", read = 50, bs = \"4k:1,8k:1\", access = \"random\", skew = \"zipf:1.2\", iodepth = 2, rate = \"2000iops\" }\n",
        );
    assert!(
        cfg.contains("verify = \"inline\"") && cfg.contains("8k:1"),
        "{cfg}"
    );
    let (dir, _) = run_to_end(shm_dir(), &cfg);
    let state = dir.path().join("state");
    let genmaps = |d: &Path| -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(d)
            .expect("state dir")
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("genmap-"))
            .collect();
        v.sort();
        v
    };
    // One of an earlier run that no checkpoint names any more.
    std::fs::write(state.join("genmap-0-bay01-1764573300.bin"), b"older").expect("write");
    let before: Vec<String> = genmaps(&state)
        .into_iter()
        .filter(|n| n.ends_with(".bin"))
        .collect();
    assert!(
        before.len() >= 2,
        "the run wrote a generation map: {before:?}"
    );
    let out = nvsoak(&["state", "reset"], dir.path());
    let after = genmaps(&state);
    for name in &before {
        assert!(!state.join(name).exists(), "{name} stayed behind:\n{out}");
        assert!(
            after
                .iter()
                .any(|a| a.starts_with(&format!("{name}.reset-"))),
            "{name} was not moved aside: {after:?}\n{out}"
        );
        assert!(
            out.contains(&format!(
                "moved the generation map {}",
                state.join(name).display()
            )),
            "{out}"
        );
    }
    assert_eq!(after.len(), before.len(), "none deleted: {after:?}");
}

#[test]
fn state_reset_moves_the_results_aside() {
    let cfg = config("2s", "1h");
    let (dir, _) = run_to_end(shm_dir(), &cfg);
    let before = current_results(dir.path());
    let out = nvsoak(&["state", "reset"], dir.path());
    assert!(out.contains("moved the results file"), "{out}");
    let aside = archived(dir.path(), "reset");
    assert_eq!(aside.len(), 1, "{out}");
    assert_eq!(std::fs::read(&aside[0]).expect("archived"), before);
    assert!(!results(dir.path()).join("t0.json").exists());
    // The next run starts a new file and leaves the reset one alone.
    let (dir, _) = run_to_end(dir, &cfg);
    current_results(dir.path());
    assert_eq!(std::fs::read(&aside[0]).expect("archived"), before);
}

#[test]
fn a_sighup_restart_moves_the_results_aside() {
    let mut d = Daemon::start(&config("2s", "1h"));
    let log = Log::attach(&mut d);
    d.scrape_until(Duration::from_secs(60), |s| {
        sum(s, "nvsoak_phase_running", &[("target", "t0")]) == 0.0
            && sum(s, "nvsoak_read_ops_total", &[("target", "t0")]) > 0.0
    });
    let before = current_results(d.dir.path());
    let cfg = config("3s", "1h").replace("{dir}", &d.dir.path().display().to_string());
    std::fs::write(d.dir.path().join("nvsoak.toml"), cfg).expect("rewriting the config");
    let pid = nix::unistd::Pid::from_raw(d.child.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGHUP).expect("SIGHUP");
    let aside = wait_for(
        Duration::from_secs(20),
        "the restart's moved-aside file",
        || {
            let a = archived(d.dir.path(), "restart");
            (!a.is_empty()).then_some(a)
        },
    );
    assert_eq!(aside.len(), 1);
    assert_eq!(std::fs::read(&aside[0]).expect("archived"), before);
    wait_for(
        Duration::from_secs(20),
        "the restarted run's results",
        || std::fs::read(results(d.dir.path()).join("t0.json")).ok(),
    );
    assert!(log.text().contains("moved aside"), "{}", log.text());
    let (dir, _) = stop(d, Duration::from_secs(30));
    assert_eq!(std::fs::read(&aside[0]).expect("archived"), before);
    drop(dir);
}

#[test]
fn a_corrupt_results_file_is_moved_aside_not_overwritten() {
    let cfg = config("2s", "1h");
    let (dir, _) = run_to_end(shm_dir(), &cfg);
    let garbage = b"{\"version\": 2, \"host\": \"trunc".to_vec();
    std::fs::write(results(dir.path()).join("t0.json"), &garbage).expect("corrupting");
    // Same plan: the checkpoint resumes, the results file does not parse.
    let (dir, _) = run_to_end(dir, &cfg);
    let aside = archived(dir.path(), "corrupt");
    assert_eq!(aside.len(), 1);
    assert_eq!(std::fs::read(&aside[0]).expect("archived"), garbage);
    current_results(dir.path());
    // report --archived skips it with a note, and still reports the current run.
    let out = Command::new(bin())
        .args(["report", "--archived", "--format", "json", "--state"])
        .arg(dir.path().join("state"))
        .output()
        .expect("report");
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("skipping an archived results file"));
}

/// Start `nvsoak run` in `dir` with extra environment, waiting for /healthz.
fn start_env(dir: tempfile::TempDir, config: &str, env: &[(&str, &str)]) -> Daemon {
    let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().expect("addr");
    let cfg = config.replace("{dir}", &dir.path().display().to_string());
    let cfg_path = dir.path().join("nvsoak.toml");
    std::fs::write(&cfg_path, cfg).expect("writing config");
    let child = Command::new(bin())
        .arg("run")
        .arg("--config")
        .arg(&cfg_path)
        .arg("--web.listen-address")
        .arg(addr.to_string())
        .env("RUST_LOG", "info")
        .envs(env.iter().copied())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting nvsoak");
    let d = Daemon { child, addr, dir };
    wait_for(Duration::from_secs(20), "/healthz", || {
        matches!(http_get(d.addr, "/healthz"), Ok((200, _))).then_some(())
    });
    d
}

/// One scrape, and how long it took.
fn timed_scrape(d: &Daemon) -> (Vec<Sample>, Duration) {
    let t0 = Instant::now();
    let (code, body) = http_get(d.addr, "/metrics").expect("scraping /metrics");
    assert_eq!(code, 200);
    (parse_metrics(&body), t0.elapsed())
}

#[test]
fn a_slow_checkpoint_save_stalls_neither_metrics_nor_sigterm() {
    const SLOW_MS: u64 = 6000;
    let slow = SLOW_MS.to_string();
    let mut d = start_env(
        shm_dir(),
        &config("10m", "300ms"),
        &[("NVSOAK_TEST_SLOW_CHECKPOINT_MS", &slow)],
    );
    let log = Log::attach(&mut d);
    let in_flight = |s: &[Sample]| sum(s, "nvsoak_checkpoint_save_in_progress", &[]) == 1.0;
    wait_for(Duration::from_secs(20), "a save in flight", || {
        in_flight(&timed_scrape(&d).0).then_some(())
    });
    // While it runs: scrapes answer at once, and the loop skips (and counts) its ticks.
    let mut worst = Duration::ZERO;
    for _ in 0..5 {
        let (_, took) = timed_scrape(&d);
        assert!(took < Duration::from_secs(2), "/metrics took {took:?}");
        worst = worst.max(took);
        std::thread::sleep(Duration::from_millis(100));
    }
    eprintln!("slowest /metrics during a {SLOW_MS} ms save: {worst:?}");
    wait_for(Duration::from_secs(20), "skipped checkpoint ticks", || {
        (sum(
            &timed_scrape(&d).0,
            "nvsoak_checkpoint_skipped_ticks_total",
            &[],
        ) >= 2.0)
            .then_some(())
    });
    wait_for(Duration::from_secs(20), "a save in flight again", || {
        in_flight(&timed_scrape(&d).0).then_some(())
    });
    let sigterm_at = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs_f64();
    let pid = nix::unistd::Pid::from_raw(d.child.id() as i32);
    let t0 = Instant::now();
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).expect("SIGTERM");
    // Well before the save in flight (up to 6 s) ends: the event loop did not wait for it.
    wait_for(
        Duration::from_secs(3),
        "SIGTERM acted on during the save",
        || log.text().contains("SIGTERM: stopping").then_some(()),
    );
    let acted = t0.elapsed();
    // It waits for the save in flight, then writes the final checkpoint (both slow).
    let status = wait_for(
        Duration::from_millis(2 * SLOW_MS + 20_000),
        "nvsoak to exit",
        || d.child.try_wait().expect("waiting"),
    );
    assert!(status.success(), "{status}: {}", log.text());
    eprintln!(
        "SIGTERM acted on after {acted:?} (polled every 50 ms), exit after {:?}",
        t0.elapsed()
    );
    let cp = nvsoak::state::read(&d.dir.path().join("state"))
        .expect("readable")
        .expect("a checkpoint");
    assert!(
        cp.saved_at >= sigterm_at,
        "the final checkpoint is written after SIGTERM ({} < {sigterm_at})",
        cp.saved_at
    );
}

#[test]
fn a_failed_save_is_counted_and_the_daemon_keeps_serving() {
    let mut d = Daemon::start(&config("10m", "200ms"));
    let log = Log::attach(&mut d);
    let state = d.dir.path().join("state");
    let cp = state.join("checkpoint.json");
    d.scrape_until(Duration::from_secs(20), |s| {
        sum(s, "nvsoak_checkpoint_saves_total", &[]) >= 1.0
    });
    assert!(cp.is_file());
    // The checkpoint's name taken by a directory: the rename of every save fails, even as root.
    std::fs::rename(&cp, state.join("kept-by-test.json")).expect("keeping the checkpoint");
    std::fs::create_dir(&cp).expect("a directory in its place");
    std::fs::write(cp.join("occupied"), b"x").expect("non-empty");
    let s = d.scrape_until(Duration::from_secs(20), |s| {
        sum(s, "nvsoak_checkpoint_save_failures_total", &[]) >= 2.0
    });
    assert!(sum(&s, "nvsoak_checkpoint_save_failures_total", &[]) >= 2.0);
    let ops = sum(&s, "nvsoak_read_ops_total", &[("target", "t0")]);
    let later = d.scrape_until(Duration::from_secs(20), |s| {
        sum(s, "nvsoak_read_ops_total", &[("target", "t0")]) > ops
    });
    assert!(
        sum(&later, "nvsoak_read_ops_total", &[("target", "t0")]) > ops,
        "the soak goes on"
    );
    assert!(log.text().contains("saving the checkpoint failed"));
    // Free the name: saves succeed again.
    std::fs::remove_dir_all(&cp).expect("removing the directory");
    let saves = sum(&later, "nvsoak_checkpoint_saves_total", &[]);
    let s = d.scrape_until(Duration::from_secs(20), |s| {
        sum(s, "nvsoak_checkpoint_saves_total", &[]) > saves
    });
    assert!(sum(&s, "nvsoak_checkpoint_saves_total", &[]) > saves);
    assert!(cp.is_file());
    stop(d, Duration::from_secs(30));
}

fn run_cmd(cmd: &str, args: &[&str]) -> Result<String, String> {
    let out = Command::new(cmd)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{cmd}: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    } else {
        Err(format!(
            "{cmd} {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// Loop devices over sparse files in a scratch directory, detached on drop.
struct Loops {
    dir: tempfile::TempDir,
    devs: Vec<String>,
}

impl Loops {
    fn new(test: &str) -> Option<Loops> {
        if !nix::unistd::geteuid().is_root() || run_cmd("losetup", &["--version"]).is_err() {
            eprintln!("skipping {test}: needs root and losetup for loop devices");
            return None;
        }
        Some(Loops {
            dir: shm_dir(),
            devs: Vec::new(),
        })
    }

    fn add(&mut self, mib: u64) -> String {
        let backing = self.dir.path().join(format!("loop{}.img", self.devs.len()));
        let f = std::fs::File::create(&backing).expect("backing file");
        f.set_len(mib << 20).expect("sizing");
        let dev = run_cmd(
            "losetup",
            &["-f", "--show", backing.to_str().expect("utf-8")],
        )
        .unwrap_or_else(|e| panic!("{e}"));
        self.devs.push(dev.clone());
        dev
    }
}

impl Drop for Loops {
    fn drop(&mut self) {
        for d in self.devs.drain(..).rev() {
            let _ = run_cmd("losetup", &["-d", &d]);
        }
    }
}

#[test]
fn a_checkpoint_for_device_a_is_moved_aside_when_the_path_is_device_b() {
    let Some(mut loops) = Loops::new("device A/B checkpoint") else {
        return;
    };
    let (a, b) = (loops.add(16), loops.add(16));
    let dir = shm_dir();
    // The config names a symlink, so the plan (and its hash) stay the same when it moves, as
    // /dev/nvme0n1 does when drives enumerate in another order.
    let link = dir.path().join("disk");
    std::os::unix::fs::symlink(&a, &link).expect("symlink to A");
    let cfg = format!(
        r#"
[state]
dir = "{{dir}}/state"
checkpoint_interval = "1h"
[health]
enabled = false
[[target]]
name = "t0"
path = "{}"
engine = "psync"
direct = false
[[target.phase]]
kind = "soak"
profile = "4k-random-read"
iodepth = 2
rate = "2000iops"
duration = "10m"
"#,
        link.display()
    );
    let d = Daemon::start_in(dir, &cfg, &[]);
    d.scrape_until(Duration::from_secs(20), |s| {
        sum(s, "nvsoak_read_ops_total", &[("target", "t0")]) > 0.0
    });
    let (dir, _) = stop(d, Duration::from_secs(30));
    let state = dir.path().join("state");
    let saved = nvsoak::state::read(&state)
        .expect("readable")
        .expect("a checkpoint");
    let key = |dev: &str| {
        let name = dev.trim_start_matches("/dev/");
        let devno =
            std::fs::read_to_string(format!("/sys/class/block/{name}/dev")).expect("sysfs dev");
        // A loop device has no serial: its key adds the backing file's identity after the
        // device numbers.
        format!("{name} ({}; backing file ", devno.trim())
    };
    let id = |c: &nvsoak::model::checkpoint::Checkpoint| {
        c.targets[0].identity.clone().unwrap_or_default()
    };
    assert!(id(&saved).starts_with(&key(&a)), "{}", id(&saved));

    std::fs::remove_file(&link).expect("unlink");
    std::os::unix::fs::symlink(&b, &link).expect("symlink to B");
    let mut d = Daemon::start_in(dir, &cfg, &[]);
    let log = Log::attach(&mut d);
    d.scrape_until(Duration::from_secs(20), |s| {
        sum(s, "nvsoak_read_ops_total", &[("target", "t0")]) > 0.0
    });
    let (dir, _) = stop(d, Duration::from_secs(30));
    let text = log.text();
    let line = text
        .lines()
        .find(|l| l.contains("checkpoint was saved for device"))
        .unwrap_or_else(|| panic!("no device mismatch warning:\n{text}"));
    assert!(
        line.contains(&key(&a)) && line.contains(&key(&b)),
        "names both devices: {line}"
    );
    let state = dir.path().join("state");
    let moved: Vec<String> = std::fs::read_dir(&state)
        .expect("state dir")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("checkpoint.json.device-"))
        .collect();
    assert_eq!(moved.len(), 1, "{moved:?}");
    let now = nvsoak::state::read(&state)
        .expect("readable")
        .expect("the new run's checkpoint");
    assert!(id(&now).starts_with(&key(&b)), "{}", id(&now));
    assert_eq!(archived(dir.path(), "device").len(), 1, "results aside too");
}

#[test]
fn a_generation_map_that_does_not_fit_is_reported_not_dropped_silently() {
    let cfg = r#"
[state]
dir = "{dir}/state"
checkpoint_interval = "1h"
[health]
enabled = false
[[target]]
name = "v"
path = "{dir}/v.dat"
size = "16MiB"
engine = "psync"
verify = "inline"
[[target.phase]]
kind = "soak"
job = { name = "mix", read = 50, bs = "4k", access = "random", iodepth = 2, rate = "2000iops" }
duration = "10m"
"#;
    // The stored map is what this test is about: the computed state has no sidecar.
    let env = [("NVSOAK_VERIFY_STATE", "stored")];
    let d = Daemon::start_in_env(crate::common::shm_dir(), cfg, &env);
    d.scrape_until(Duration::from_secs(20), |s| {
        sum(s, "nvsoak_write_ops_total", &[("target", "v")]) > 100.0
    });
    let (dir, _) = stop(d, Duration::from_secs(30));
    // The checkpoint's writer seed no longer matches its sidecar's (the plan is unchanged).
    let p = dir.path().join("state/checkpoint.json");
    let mut cp: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&p).expect("checkpoint")).expect("json");
    let seed = cp["targets"][0]["verify_seed"]
        .as_u64()
        .expect("a verify seed");
    let sidecar = cp["targets"][0]["genmap"]["file"]
        .as_str()
        .expect("a sidecar")
        .to_string();
    cp["targets"][0]["verify_seed"] = serde_json::json!(seed ^ 1);
    std::fs::write(&p, serde_json::to_vec(&cp).expect("json")).expect("rewriting");
    let mut d = Daemon::start_in_env(dir, cfg, &env);
    let log = Log::attach(&mut d);
    let s = d.scrape_until(Duration::from_secs(20), |s| {
        sum(s, "nvsoak_read_ops_total", &[("target", "v")]) > 100.0
    });
    assert_eq!(
        sum(&s, "nvsoak_verify_errors_total", &[("target", "v")]),
        0.0,
        "a fresh map, no false mismatches"
    );
    stop(d, Duration::from_secs(30));
    let text = log.text();
    let line = text
        .lines()
        .find(|l| l.contains("generation map does not match this target"))
        .unwrap_or_else(|| panic!("no warning about the generation map:\n{text}"));
    assert!(
        line.contains(&sidecar) && line.contains("seed"),
        "names the file and why: {line}"
    );
}
