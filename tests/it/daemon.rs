//! The daemon end to end: `nvsoak run` with config files on /dev/shm targets, /metrics scraped
//! over HTTP and parsed, SIGTERM handling.

use std::time::Duration;

use crate::common::{Daemon, find, http_get, sum};

fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

fn soak_config(engine: &str, profile: &str, duration: &str) -> String {
    format!(
        r#"
[state]
dir = "{{dir}}/state"
[health]
enabled = false
[[target]]
name = "t0"
path = "{{dir}}/t0.dat"
size = "64MiB"
engine = "{engine}"
[[target.phase]]
kind = "soak"
profile = "{profile}"
iodepth = 8
duration = "{duration}"
"#
    )
}

#[test]
fn soak_serves_workload_metrics_for_each_engine() {
    for engine in ["io_uring", "psync"] {
        let d = Daemon::start(&soak_config(engine, "4k-random-read", "30s"));
        let s = d.scrape_until(Duration::from_secs(20), |s| {
            sum(s, "nvsoak_read_ops_total", &[("target", "t0")]) > 100.0
                && !find(s, "nvsoak_read_iops", &[("target", "t0")]).is_empty()
        });
        assert!(
            sum(
                &s,
                "nvsoak_read_ops_total",
                &[("target", "t0"), ("workload", "4k-random-read")]
            ) > 100.0,
            "{engine}: no reads counted"
        );
        assert_eq!(
            sum(&s, "nvsoak_write_ops_total", &[("target", "t0")]),
            0.0,
            "{engine}: a read profile wrote"
        );
        let bytes = sum(&s, "nvsoak_read_bytes_total", &[("target", "t0")]);
        let ops = sum(&s, "nvsoak_read_ops_total", &[("target", "t0")]);
        assert!(
            bytes >= ops * 4096.0,
            "{engine}: bytes {bytes} < ops {ops} x 4096"
        );
        assert_eq!(
            find(
                &s,
                "nvsoak_target_info",
                &[("target", "t0"), ("device", "")]
            )
            .len(),
            1,
            "{engine}: target_info missing"
        );
        assert_eq!(
            find(
                &s,
                "nvsoak_engine_info",
                &[("target", "t0"), ("engine", engine)]
            )
            .len(),
            1,
            "{engine}: engine_info missing"
        );
        assert_eq!(
            find(
                &s,
                "nvsoak_phase_info",
                &[
                    ("target", "t0"),
                    ("phase", "soak"),
                    ("profile", "4k-random-read")
                ]
            )
            .len(),
            1
        );
        // The histogram's +Inf bucket equals the op counter at the same scrape.
        let inf = sum(
            &s,
            "nvsoak_read_latency_seconds_bucket",
            &[("target", "t0"), ("le", "+Inf")],
        );
        let cnt = sum(&s, "nvsoak_read_latency_seconds_count", &[("target", "t0")]);
        assert_eq!(inf, cnt);
        assert!(cnt > 0.0);
        let p99 = find(
            &s,
            "nvsoak_read_latency_quantile_seconds",
            &[("target", "t0"), ("quantile", "0.99")],
        );
        assert_eq!(p99.len(), 1, "{engine}: p99 gauge missing");
        assert!(p99[0].value > 0.0 && p99[0].value < 10.0);
        let (code, body) = http_get(d.addr, "/").expect("GET /");
        assert_eq!(code, 200);
        assert!(body.contains("/metrics"), "landing page links to /metrics");
        let (status, took, err) = d.terminate();
        assert!(status.success(), "{engine}: exit {status:?}: {err}");
        assert!(
            took < Duration::from_secs(5),
            "{engine}: SIGTERM took {took:?}"
        );
    }
}

#[test]
fn metrics_pass_promtool_check() {
    if std::process::Command::new("promtool")
        .arg("--version")
        .output()
        .is_err()
    {
        panic!("promtool missing: apt-get install -y prometheus");
    }
    let d = Daemon::start(&soak_config("psync", "sql", "30s"));
    d.scrape_until(Duration::from_secs(20), |s| {
        sum(s, "nvsoak_read_ops_total", &[]) > 0.0 && sum(s, "nvsoak_write_ops_total", &[]) > 0.0
    });
    crate::common::assert_promtool_clean(&d.scrape_text());
}

#[test]
fn precondition_writes_the_region_exactly_passes_times() {
    let cfg = r#"
[state]
dir = "{dir}/state"
[health]
enabled = false
[[target]]
name = "pre"
path = "{dir}/pre.dat"
size = "16MiB"
region = "50%"
engine = "io_uring"
[[target.phase]]
kind = "precondition"
passes = 2
block_size = "128k"
"#;
    let d = Daemon::start(cfg);
    let s = d.scrape_until(Duration::from_secs(30), |s| {
        sum(s, "nvsoak_phase_running", &[("target", "pre")]) == 0.0
    });
    assert_eq!(
        sum(&s, "nvsoak_phase_running", &[("target", "pre")]),
        0.0,
        "precondition did not finish"
    );
    let region = 8.0 * 1048576.0;
    assert_eq!(
        sum(&s, "nvsoak_write_bytes_total", &[("target", "pre")]),
        2.0 * region
    );
    assert_eq!(
        sum(&s, "nvsoak_write_ops_total", &[("target", "pre")]),
        2.0 * region / 131072.0
    );
    let data = std::fs::read(d.dir.path().join("pre.dat")).expect("reading target back");
    assert_eq!(data.len(), 16 << 20);
    // Every 4 KiB block of the region was written (non-zero); nothing past the region was.
    for (i, blk) in data[..8 << 20].chunks(4096).enumerate() {
        assert!(
            blk.iter().any(|b| *b != 0),
            "block {i} inside the region is still zero"
        );
    }
    assert!(
        data[8 << 20..].iter().all(|b| *b == 0),
        "bytes outside the region were written"
    );
    let (status, _, err) = d.terminate();
    assert!(status.success(), "{err}");
}

#[test]
fn sweep_produces_its_points() {
    let cfg = r#"
[state]
dir = "{dir}/state"
[health]
enabled = false
[[target]]
name = "sw"
path = "{dir}/sw.dat"
size = "32MiB"
engine = "psync"
[[target.phase]]
kind = "sweep"
profile = "4k-random-read"
iodepth = 4
max_duration = "1s"
point_duration = "1s"
points = [10, 50, 100]
"#;
    let d = Daemon::start(cfg);
    let s = d.scrape_until(Duration::from_secs(40), |s| {
        sum(s, "nvsoak_phase_running", &[("target", "sw")]) == 0.0
    });
    let max = sum(&s, "nvsoak_sweep_max_iops", &[("target", "sw")]);
    assert!(max > 0.0, "no max IOPS");
    for p in ["10", "50", "100"] {
        let got = sum(
            &s,
            "nvsoak_sweep_point_iops",
            &[("target", "sw"), ("point", p)],
        );
        let want = sum(
            &s,
            "nvsoak_sweep_point_target_iops",
            &[("target", "sw"), ("point", p)],
        );
        assert!(got > 0.0, "point {p} missing");
        assert!((want - max * p.parse::<f64>().unwrap_or(0.0) / 100.0).abs() < 1.0 + want * 0.01);
    }
    // The 10% point is paced: it may not exceed its target by much.
    let p10 = sum(
        &s,
        "nvsoak_sweep_point_iops",
        &[("target", "sw"), ("point", "10")],
    );
    let t10 = sum(
        &s,
        "nvsoak_sweep_point_target_iops",
        &[("target", "sw"), ("point", "10")],
    );
    assert!(
        p10 < t10 * 1.3 + 5.0,
        "10% point ran at {p10} IOPS for a target of {t10}"
    );
    let results =
        std::fs::read_to_string(d.dir.path().join("state/results/sw.json")).expect("results file");
    let v: serde_json::Value = serde_json::from_str(&results).expect("results JSON");
    assert_eq!(
        v["sweeps"][0]["points"].as_array().map(|a| a.len()),
        Some(4),
        "{results}"
    );
    // The daemon serves the qualification report from the same results.
    let (code, body) = http_get(d.addr, "/report").expect("GET /report");
    assert_eq!(code, 200);
    assert!(body.contains("<svg"), "/report has no chart");
    assert!(
        body.contains("4k-random-read"),
        "/report does not name the swept profile"
    );
    let (status, _, err) = d.terminate();
    assert!(status.success(), "{err}");
}

#[test]
fn rate_limited_soak_holds_its_rate() {
    let cfg = r#"
[state]
dir = "{dir}/state"
[health]
enabled = false
[[target]]
name = "rl"
path = "{dir}/rl.dat"
size = "32MiB"
engine = "io_uring"
[[target.phase]]
kind = "soak"
job = { name = "paced", read = 100, bs = "4k", access = "random", iodepth = 8, workers = 2, rate = "2000iops" }
duration = "4s"
"#;
    let d = Daemon::start(cfg);
    let s = d.scrape_until(Duration::from_secs(30), |s| {
        sum(s, "nvsoak_phase_running", &[("target", "rl")]) == 0.0
    });
    let ops = sum(&s, "nvsoak_read_ops_total", &[("target", "rl")]);
    // 2000 IOPS for 4 s = 8000; generous bounds for a shared 2-core machine.
    assert!(
        (5600.0..=8800.0).contains(&ops),
        "paced soak did {ops} ops, expected about 8000"
    );
    let (status, _, err) = d.terminate();
    assert!(status.success(), "{err}");
}

#[test]
fn kill9_then_resume_loses_at_most_one_checkpoint_interval() {
    let cfg = r#"
[state]
dir = "{dir}/state"
checkpoint_interval = "2s"
[stats]
interval = "200ms"
[health]
enabled = false
[[target]]
name = "ck"
path = "{dir}/ck.dat"
size = "32MiB"
engine = "io_uring"
[[target.phase]]
kind = "soak"
profile = "4k-random-write"
iodepth = 4
rate = "3000iops"
duration = "10m"
"#;
    let d = Daemon::start(cfg);
    // Wait for a few checkpoints' worth of writes.
    let s = d.scrape_until(Duration::from_secs(20), |s| {
        sum(s, "nvsoak_soak_elapsed_seconds", &[("target", "ck")]) >= 5.0
    });
    let before = sum(&s, "nvsoak_soak_written_bytes", &[("target", "ck")]);
    let elapsed = sum(&s, "nvsoak_soak_elapsed_seconds", &[("target", "ck")]);
    assert!(before > 0.0, "nothing written before the kill");
    let killed_at = unix_now();
    let dir = d.kill9();
    let cp = std::fs::read_to_string(dir.path().join("state/checkpoint.json"))
        .expect("checkpoint after kill -9");
    let v: serde_json::Value = serde_json::from_str(&cp).expect("checkpoint parses after kill -9");
    assert_eq!(v["targets"][0]["name"], "ck");
    let saved_at = v["saved_at"].as_f64().expect("saved_at");
    let ck_written = v["targets"][0]["totals"]["write_bytes"]
        .as_f64()
        .expect("write_bytes");
    // The newest checkpoint is at most one interval (2 s) old at the kill, plus scheduling slack
    // on a loaded 2-core machine.
    assert!(
        killed_at - saved_at <= 3.0,
        "newest checkpoint was {:.2} s old at the kill",
        killed_at - saved_at
    );
    let d = Daemon::start_in(dir, cfg, &[]);
    let s = d.scrape();
    let after = sum(&s, "nvsoak_soak_written_bytes", &[("target", "ck")]);
    let rate = before / elapsed.max(0.1);
    assert!(
        after >= ck_written,
        "resume lost checkpointed totals: {after} < {ck_written}"
    );
    // What was lost is at most one checkpoint interval (2 s) of totals, plus the snapshot's lag
    // behind the workers (two 200 ms stats intervals).
    assert!(
        after >= before - rate * (2.0 + 0.4),
        "resumed soak reports {after} bytes written, {before} before the kill (rate {rate:.0} B/s)"
    );
    let el_after = sum(&s, "nvsoak_soak_elapsed_seconds", &[("target", "ck")]);
    assert!(
        el_after >= elapsed - 2.6,
        "elapsed went from {elapsed} to {el_after}"
    );
    assert_eq!(
        find(
            &s,
            "nvsoak_phase_info",
            &[("target", "ck"), ("phase", "soak")]
        )
        .len(),
        1
    );
    let (status, _, err) = d.terminate();
    assert!(status.success(), "{err}");
}
