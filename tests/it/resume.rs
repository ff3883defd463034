//! Precondition and sweep phases resume where they stopped after `kill -9`: real daemons on
//! /dev/shm files, the checkpoint and results files read back from the state directory.
//!
//! - a precondition resumes at each worker's checkpointed position, writes only the remainder
//!   (bytes written by the second run = total − checkpointed position), and the plan moves on;
//! - with `verify = "inline"`, reading the region back after a resumed precondition finds no
//!   false mismatches, and every 4 KiB unit was written;
//! - a sweep resumes at its first point not completed, with the earlier maximum (no new
//!   uncontrolled run), and the results file has every point once, the earlier ones unchanged.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::common::{Daemon, Sample, find, sum};

fn read_json(path: &Path) -> Option<serde_json::Value> {
    let data = std::fs::read(path).ok()?;
    serde_json::from_slice(&data).ok()
}

fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
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

/// Sum of `done_bytes` over the stripes of the checkpoint's precondition progress (target 0),
/// while the checkpoint is at phase 0.
fn precondition_done(cp: &serde_json::Value) -> Option<u64> {
    let t = &cp["targets"][0];
    if t["phase_index"].as_u64()? != 0 {
        return None;
    }
    t["precondition"]["stripes"]
        .as_array()?
        .iter()
        .map(|s| s["done_bytes"].as_u64())
        .sum()
}

/// `nvsoak state show --config <dir>/nvsoak.toml` (the config the daemon ran with).
fn state_show(dir: &Path) -> String {
    let out = std::process::Command::new(crate::common::bin())
        .args(["state", "show", "--config"])
        .arg(dir.join("nvsoak.toml"))
        .output()
        .expect("running nvsoak state show");
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn precondition_written(s: &[Sample], target: &str) -> f64 {
    sum(
        s,
        "nvsoak_write_bytes_total",
        &[("target", target), ("workload", "precondition")],
    )
}

fn in_phase(s: &[Sample], target: &str, phase: &str) -> bool {
    !find(
        s,
        "nvsoak_phase_info",
        &[("target", target), ("phase", phase)],
    )
    .is_empty()
}

const REGION: u64 = 32 << 20;
const PASSES: u64 = 1000;
const CHECKPOINT_SECS: f64 = 0.5;
/// Writes in flight at most: 2 workers × iodepth 4 × 128 KiB.
const IN_FLIGHT: f64 = (2 * 4 * 128 * 1024) as f64;

/// 1000 sequential passes over 32 MiB (32 GiB of writes, several seconds on /dev/shm) with two
/// workers, then a read soak. `{verify}` is replaced by the target's verify mode.
const PRECOND: &str = r#"
[state]
dir = "{dir}/state"
checkpoint_interval = "500ms"
[stats]
interval = "200ms"
[health]
enabled = false
[[target]]
name = "pc"
path = "{dir}/pc.dat"
size = "32MiB"
engine = "io_uring"
verify = "{verify}"
[[target.phase]]
kind = "precondition"
passes = 1000
iodepth = 4
workers = 2
[[target.phase]]
kind = "soak"
job = { name = "readback", read = 100, bs = "4k", access = "random", iodepth = 8 }
duration = "10m"
"#;

/// Start the precondition, kill -9 it once a checkpoint records at least 10 % of it, and
/// return the scratch dir and the checkpointed position (bytes, all stripes).
fn kill_mid_precondition(cfg: &str, env: &[(&str, &str)]) -> (tempfile::TempDir, u64) {
    let total = REGION * PASSES;
    let d = Daemon::start_in_env(crate::common::shm_dir(), cfg, env);
    let cp_path = d.dir.path().join("state/checkpoint.json");
    // Run 1's write rate, over at least 0.7 s of the precondition.
    let (s0, t0) = (precondition_written(&d.scrape(), "pc"), Instant::now());
    wait_for(
        Duration::from_secs(60),
        "a checkpoint at 10% of the precondition",
        || {
            let done = read_json(&cp_path).and_then(|v| precondition_done(&v))?;
            (done >= total / 10 && t0.elapsed() >= Duration::from_millis(700)).then_some(done)
        },
    );
    let w1 = precondition_written(&d.scrape(), "pc");
    let rate = (w1 - s0) / t0.elapsed().as_secs_f64();
    let scraped = Instant::now();
    let killed_at = unix_now();
    let dir = d.kill9();
    let scrape_to_kill = scraped.elapsed().as_secs_f64();
    let cp =
        read_json(&dir.path().join("state/checkpoint.json")).expect("checkpoint after kill -9");
    let p_cp = precondition_done(&cp).expect("the checkpoint is in the precondition");
    assert!(
        p_cp < total,
        "the precondition finished before the kill ({p_cp} of {total} bytes); this test needs it mid-phase"
    );
    let saved_at = cp["saved_at"].as_f64().expect("saved_at");
    assert!(
        killed_at - saved_at <= CHECKPOINT_SECS + 1.5,
        "newest checkpoint was {:.2} s old at the kill",
        killed_at - saved_at
    );
    // Conservative and fresh: what run 1 had written beyond the checkpointed position is at
    // most one checkpoint interval's worth (plus slack for a loaded machine and in-flight I/O).
    assert!(
        w1 - (p_cp as f64) <= rate * (CHECKPOINT_SECS + 1.5) + IN_FLIGHT,
        "run 1 wrote {w1} bytes, the checkpoint records {p_cp} (rate {rate:.0} B/s)"
    );
    // Never ahead of what run 1 wrote: the scrape lags the workers by up to two stats
    // intervals, and some writes completed between the scrape and the kill.
    assert!(
        p_cp as f64 <= w1 + rate * (scrape_to_kill + 0.4 + 0.5),
        "the checkpoint records {p_cp} bytes, run 1 had written {w1} (rate {rate:.0} B/s)"
    );
    // Each stripe's position is on a 128 KiB block boundary of its pass.
    for s in cp["targets"][0]["precondition"]["stripes"]
        .as_array()
        .expect("stripes")
    {
        let (len, done) = (
            s["len"].as_u64().unwrap(),
            s["done_bytes"].as_u64().unwrap(),
        );
        assert_eq!(
            done % len % (128 << 10),
            0,
            "stripe position {done} not block-aligned"
        );
    }
    eprintln!(
        "run 1: {w1} bytes by the last scrape at {rate:.0} B/s; checkpoint {:.2} s old at the kill records {p_cp} of {total}",
        killed_at - saved_at
    );
    let show = state_show(dir.path());
    let line = show
        .lines()
        .find(|l| l.trim_start().starts_with("precondition"))
        .unwrap_or_else(|| panic!("state show has no precondition line:\n{show}"));
    assert!(
        line.contains(" of 1000, ") && line.contains("worker offsets"),
        "{line}"
    );
    (dir, p_cp)
}

#[test]
fn kill9_mid_precondition_resumes_and_writes_only_the_remainder() {
    let cfg = PRECOND.replace("{verify}", "off");
    let total = REGION * PASSES;
    let (dir, p_cp) = kill_mid_precondition(&cfg, &[]);

    let d = Daemon::start_in(dir, &cfg, &[]);
    let s = d.scrape_until(Duration::from_secs(120), |s| in_phase(s, "pc", "soak"));
    assert!(
        in_phase(&s, "pc", "soak"),
        "the plan did not move on to the soak after the resumed precondition"
    );
    let w2 = precondition_written(&s, "pc");
    // Run 2 writes exactly what the checkpoint says is left: each worker from its position to
    // the end of its passes.
    assert_eq!(
        w2,
        (total - p_cp) as f64,
        "run 2 wrote {w2} bytes; total {total} − checkpointed {p_cp} = {}",
        total - p_cp
    );
    eprintln!("run 2: {w2} bytes = total {total} − checkpointed {p_cp}");
    // The checkpoint moved on with the plan: phase 1, no precondition progress left in it.
    let cp_path = d.dir.path().join("state/checkpoint.json");
    wait_for(Duration::from_secs(10), "a checkpoint in the soak", || {
        let v = read_json(&cp_path)?;
        let t = &v["targets"][0];
        (t["phase_index"].as_u64()? == 1 && t["precondition"].is_null()).then_some(())
    });
    let (status, _, err) = d.terminate();
    assert!(status.success(), "{err}");
    let line = err
        .lines()
        .find(|l| l.contains("precondition resumes at pass"))
        .unwrap_or_else(|| panic!("no resume line in the log:\n{err}"));
    assert!(line.contains("worker offsets"), "{line}");
}

#[test]
fn inline_verify_finds_no_false_mismatches_after_a_resumed_precondition() {
    resumed_precondition_verifies(&[("NVSOAK_VERIFY_STATE", "stored")]);
}

/// The same under the computed state (`model::walk`): the precondition's legs before and after
/// the kill, no generation map anywhere.
#[test]
fn the_computed_state_finds_no_false_mismatches_after_a_resumed_precondition() {
    resumed_precondition_verifies(&[]);
}

/// Kill -9 in a verified precondition, resume it, and read the region back: no false
/// mismatch, and the checkpoint's verification state (`env` chooses it) says every unit was
/// written.
fn resumed_precondition_verifies(env: &[(&str, &str)]) {
    let stored = !env.is_empty();
    let cfg = PRECOND.replace("{verify}", "inline");
    let total = REGION * PASSES;
    let (dir, p_cp) = kill_mid_precondition(&cfg, env);

    let d = Daemon::start_in_env(dir, &cfg, env);
    // A bound, not a timing: the remaining tens of GB take about two minutes alone, more on a
    // machine shared with the rest of the suite.
    let s = d.scrape_until(Duration::from_secs(360), |s| in_phase(s, "pc", "soak"));
    assert!(
        in_phase(&s, "pc", "soak"),
        "the resumed precondition did not finish"
    );
    assert_eq!(precondition_written(&s, "pc"), (total - p_cp) as f64);
    // Read the region back (8192 units; 200k random reads touch each one many times).
    let s = d.scrape_until(Duration::from_secs(60), |s| {
        sum(s, "nvsoak_read_ops_total", &[("target", "pc")]) >= 200_000.0
    });
    assert!(sum(&s, "nvsoak_read_ops_total", &[("target", "pc")]) >= 200_000.0);
    for kind in [
        "wrong_offset",
        "stale_generation",
        "bad_checksum",
        "unreadable",
    ] {
        assert_eq!(
            sum(
                &s,
                "nvsoak_verify_errors_total",
                &[("target", "pc"), ("kind", kind)]
            ),
            0.0,
            "false {kind} mismatches after the resumed precondition"
        );
    }
    // A checkpoint from the soak: the verification state says every unit was written.
    let cp_path = d.dir.path().join("state/checkpoint.json");
    let t = wait_for(Duration::from_secs(10), "a checkpoint in the soak", || {
        let v = read_json(&cp_path)?;
        (v["targets"][0]["phase_index"].as_u64()? == 1).then(|| v["targets"][0].clone())
    });
    if stored {
        let map = &t["genmap"];
        assert_eq!(map["units"].as_u64(), Some(REGION / 4096));
        assert_eq!(
            map["written_units"].as_u64(),
            Some(REGION / 4096),
            "units never written by the two runs of the precondition"
        );
    } else {
        assert!(
            t["genmap"].is_null(),
            "a generation map under the computed state"
        );
        let w = &t["verify_walk"];
        assert_eq!(w["units"].as_u64(), Some(REGION / 4096));
        // Each unit is in one worker's stripe, and the legs kept hold at least run 2's writes
        // (a leg that wrote every unit drops the older ones).
        let legs = w["legs"].as_array().expect("legs");
        let mut blocks = 0u64;
        let mut writes = 0u64;
        for l in legs {
            let bu = l["block_units"].as_u64().expect("block_units");
            for sl in l["slices"].as_array().expect("slices") {
                writes += sl[3].as_u64().expect("count") * bu;
            }
            if blocks == 0 {
                blocks = l["slices"]
                    .as_array()
                    .expect("slices")
                    .iter()
                    .map(|sl| sl[1].as_u64().expect("len") * bu)
                    .sum();
            }
        }
        assert_eq!(blocks, REGION / 4096, "the stripes do not cover the region");
        assert!(
            writes >= (total - p_cp) / 4096,
            "the legs record {writes} unit writes, fewer than run 2 made"
        );
    }
    let (status, _, err) = d.terminate();
    assert!(status.success(), "{err}");
    assert!(err.contains("precondition resumes at pass"), "{err}");
}

/// An uncontrolled run of 3 s, then eight points of 1 s at 2..16 % of the maximum (low, so that
/// an uncontrolled run would stand out in the I/O count), then a soak.
const SWEEP: &str = r#"
[state]
dir = "{dir}/state"
checkpoint_interval = "500ms"
[stats]
interval = "200ms"
[health]
enabled = false
[[target]]
name = "sw"
path = "{dir}/sw.dat"
size = "64MiB"
engine = "io_uring"
[[target.phase]]
kind = "sweep"
job = { name = "curve", read = 100, bs = "4k", access = "random", iodepth = 8 }
max_duration = "3s"
point_duration = "1s"
points = [2, 4, 6, 8, 10, 12, 14, 16]
[[target.phase]]
kind = "soak"
job = { name = "after", read = 100, bs = "4k", access = "random", iodepth = 1, rate = "100iops" }
duration = "10m"
"#;

const POINTS: [u64; 8] = [2, 4, 6, 8, 10, 12, 14, 16];

fn sweep_points(r: &serde_json::Value) -> Vec<serde_json::Value> {
    r["sweeps"][0]["points"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

#[test]
fn kill9_mid_sweep_resumes_at_the_next_point_with_the_same_max() {
    let d = Daemon::start(SWEEP);
    let results = d.dir.path().join("state/results/sw.json");
    // The uncontrolled run and three points are done (the file is written after each point).
    let before = wait_for(Duration::from_secs(60), "three sweep points", || {
        let r = read_json(&results)?;
        (sweep_points(&r).len() >= 4).then_some(r)
    });
    let dir = d.kill9();
    let done_before = sweep_points(&before);
    let show = state_show(dir.path());
    assert!(
        show.lines()
            .any(|l| l.trim_start().starts_with("sweep        curve: ")
                && l.contains(" of 8 points done, max ")),
        "state show has no sweep line:\n{show}"
    );
    let max = before["sweeps"][0]["max_iops"].as_f64().expect("max_iops");
    assert!(max > 1000.0, "implausible maximum {max}");
    assert!(before["sweeps"][0]["finished"].is_null());

    let d = Daemon::start_in(dir, SWEEP, &[]);
    let s = d.scrape_until(Duration::from_secs(60), |s| in_phase(s, "sw", "soak"));
    assert!(
        in_phase(&s, "sw", "soak"),
        "the resumed sweep did not finish"
    );
    let after = read_json(&d.dir.path().join("state/results/sw.json")).expect("results file");
    let sweeps = after["sweeps"].as_array().expect("sweeps");
    assert_eq!(sweeps.len(), 1, "one sweep, not a second one: {after:#}");
    let sw = &sweeps[0];
    assert!(!sw["finished"].is_null(), "the sweep is finished");
    assert_eq!(
        sw["max_iops"].as_f64(),
        Some(max),
        "the maximum was re-measured"
    );
    assert_eq!(sw["started"], before["sweeps"][0]["started"]);
    let pcts: Vec<u64> = sweep_points(&after)
        .iter()
        .map(|p| p["pct"].as_u64().expect("pct"))
        .collect();
    let mut want = vec![0];
    want.extend(POINTS);
    assert_eq!(pcts, want, "every point exactly once, in order");
    // The points measured before the kill are kept as they were, not re-run (compared to
    // 1e-12: a JSON round trip of a float may move its last bit).
    for (a, b) in sweep_points(&after).iter().zip(&done_before) {
        let (a, b) = (a.as_object().expect("point"), b.as_object().expect("point"));
        assert_eq!(a.len(), b.len());
        for (k, va) in a {
            let (x, y) = (va.as_f64().expect("number"), b[k].as_f64().expect("number"));
            assert!(
                (x - y).abs() <= 1e-12 * x.abs().max(y.abs()),
                "point {}: {k} changed from {y} to {x}",
                b["pct"]
            );
        }
    }
    // No new uncontrolled run: run 2 only ran the points left, each paced at pct % of the
    // maximum for 1 s (an uncontrolled run would add about 3 s × max on its own).
    let ops2 = sum(
        &s,
        "nvsoak_read_ops_total",
        &[("target", "sw"), ("workload", "curve")],
    );
    let left: f64 = POINTS[done_before.len() - 1..]
        .iter()
        .map(|p| *p as f64 / 100.0 * max)
        .sum();
    assert!(
        ops2 <= left * 1.3 + 0.3 * max,
        "run 2 did {ops2} sweep I/Os; the {} points left account for {left:.0} (max {max:.0})",
        POINTS.len() + 1 - done_before.len()
    );
    assert!(
        ops2 >= left * 0.3,
        "run 2 did only {ops2} sweep I/Os, expected about {left:.0}"
    );
    eprintln!(
        "sweep: {} points before the kill, max {max:.0} IOPS kept; run 2 did {ops2} I/Os for {left:.0} expected",
        done_before.len() - 1
    );
    let (status, _, err) = d.terminate();
    assert!(status.success(), "{err}");
    let line = err
        .lines()
        .find(|l| l.contains("sweep resumes at point"))
        .unwrap_or_else(|| panic!("no resume line in the log:\n{err}"));
    assert!(line.contains("from the earlier run"), "{line}");
    assert!(line.contains(&format!("of {}", POINTS.len())), "{line}");
}
