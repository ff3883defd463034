//! The soak over time, end to end: a soak without a duration on a file, sampled every 300 ms
//! (`NVSOAK_TEST_SOAK_STEP_MS`), shown on the status page while it runs, kept in the results
//! file (version 3), ended with its phase line at shutdown, and charted by `nvsoak report`;
//! a results file with events and a steady window charted with each marked.

use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use crate::common::{Daemon, bin, http_get, shm_dir};

const ENDLESS: &str = r#"
[state]
dir = "{dir}/state"
[stats]
interval = "100ms"
[health]
enabled = false
[[target]]
name = "s"
path = "{dir}/s.dat"
size = "8MiB"
direct = false
[[target.phase]]
kind = "soak"
job = { name = "rr", read = 100, bs = "4k", iodepth = 4 }
steady_round = "200ms"
steady_window = 3
steady_criterion = "iops:99%"
"#;

fn attr(svg: &str, name: &str) -> Option<String> {
    let key = format!("{name}=\"");
    let i = svg.find(&key)? + key.len();
    svg[i..].split('"').next().map(str::to_string)
}

#[test]
fn an_endless_soak_keeps_its_history_shows_it_and_ends_its_phase_at_shutdown() {
    let mut d = Daemon::spawn_in_env(
        shm_dir(),
        ENDLESS,
        &[],
        &[("NVSOAK_TEST_SOAK_STEP_MS", "300")],
    );
    // The status page shows the soak chart once a few points are in.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let page = loop {
        assert!(
            std::time::Instant::now() < deadline,
            "no soak chart with points on the status page"
        );
        if let Ok(Some(st)) = d.child.try_wait() {
            panic!("nvsoak exited early: {st}");
        }
        if let Ok((200, body)) = http_get(d.addr, "/")
            && body.contains("soak-chart")
            && body.matches("class=\"point\"").count() >= 9
        {
            break body;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let chart = &page[page
        .find("<svg class=\"chart soak-chart\"")
        .expect("soak chart")..];
    // Reads only: read IOPS, average and p99 latency.
    assert_eq!(attr(chart, "data-series-count").as_deref(), Some("3"));
    for s in ["read IOPS", "average latency", "p99 latency"] {
        assert!(chart.contains(&format!("data-series=\"{s}\"")), "{s}");
    }
    assert!(page.contains("s — soak over time"), "{page}");
    // Health polling is off in this config, and the page says so.
    assert!(
        page.contains("class=\"muted no-drives\">No drive health: health polling is off"),
        "{page}"
    );
    // The scratch directory outlives the daemon (terminate drops the daemon's).
    let dir = std::mem::replace(&mut d.dir, shm_dir());
    let state = dir.path().join("state");
    let (status, _, err) = d.terminate();
    assert!(status.success(), "{err}");
    let ended: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("phase 1 (soak) stopped after"))
        .collect();
    assert_eq!(ended.len(), 1, "{err}");
    assert!(
        ended[0].contains("0 I/O errors")
            && ended[0].contains("rr: steady state")
            && ended[0].contains("(it runs until stopped)"),
        "{}",
        ended[0]
    );
    assert!(!err.contains("phase 1 (soak) finished"), "{err}");

    // The results file (version 3) keeps the history.
    let r: Value = serde_json::from_str(
        &std::fs::read_to_string(state.join("results/s.json")).expect("results file"),
    )
    .expect("results JSON");
    assert_eq!(r["version"], 3);
    let h = &r["soak"]["history"];
    let pts = h["points"].as_array().expect("points");
    assert!(pts.len() >= 3, "{h}");
    let total_reads = r["soak"]["read_ops"].as_u64().expect("read_ops");
    let mut sum = 0;
    let mut last_end = 0.0;
    for p in pts {
        let (t, secs) = (
            p["t"].as_f64().expect("t"),
            p["secs"].as_f64().expect("secs"),
        );
        assert!(
            secs > 0.0 && secs < 1.0,
            "a 300 ms step point of {secs} s: {p}"
        );
        assert!(t >= last_end - 1e-6, "points overlap: {h}");
        last_end = t + secs;
        assert_eq!(p["write_ops"], 0);
        sum += p["read_ops"].as_u64().expect("read_ops");
    }
    assert!(sum > 0 && sum <= total_reads, "{sum} of {total_reads}");
    assert_eq!(h["step_secs"], 0.3);
    // The stopped soak is one entry of soak.phases, marked stopped, with its own totals.
    let phases = r["soak"]["phases"].as_array().expect("soak.phases");
    assert_eq!(phases.len(), 1, "{phases:?}");
    assert_eq!(phases[0]["stopped"], true);
    assert_eq!(phases[0]["phase"], 1);
    assert_eq!(phases[0]["profile"], "rr");
    let first_reads = phases[0]["read_ops"].as_u64().expect("read_ops");
    let first_secs = phases[0]["elapsed_secs"].as_f64().expect("elapsed_secs");
    assert!(first_reads > 0 && first_secs > 0.0, "{phases:?}");

    // The report charts it.
    let ss = state.display().to_string();
    let out = Command::new(bin())
        .args(["report", "--state", &ss, "--format", "html"])
        .output()
        .expect("nvsoak report");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let html = String::from_utf8_lossy(&out.stdout);
    assert!(html.contains("<h3>Soak over time</h3>"), "{html}");
    let chart = &html[html.find("<svg class=\"chart soak-chart\"").expect("chart")..];
    assert_eq!(attr(chart, "data-series-count").as_deref(), Some("3"));
    assert!(html.contains("(stopped before its end)"), "{html}");

    // Restarted, the soak resumes: the same entry grows, no second one appears, however often.
    let mut reads = first_reads;
    let mut secs = first_secs;
    // The metric counts the soak's reads across restarts (carried by the checkpoint).
    let mut total_before = total_reads;
    let mut dir = dir;
    for round in 0..2 {
        let d = Daemon::spawn_in_env(dir, ENDLESS, &[], &[("NVSOAK_TEST_SOAK_STEP_MS", "300")]);
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        // Wait until this run has read something of its own.
        loop {
            assert!(
                std::time::Instant::now() < deadline,
                "round {round}: no reads"
            );
            if let Ok((200, body)) = http_get(d.addr, "/metrics")
                && crate::common::sum(
                    &crate::common::parse_metrics(&body),
                    "nvsoak_read_ops_total",
                    &[("target", "s")],
                ) > total_before as f64 + 1000.0
            {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let mut d = d;
        dir = std::mem::replace(&mut d.dir, shm_dir());
        let (status, _, err) = d.terminate();
        assert!(status.success(), "{err}");
        assert!(err.contains("resuming from the checkpoint"), "{err}");
        let r: Value = serde_json::from_str(
            &std::fs::read_to_string(dir.path().join("state/results/s.json")).expect("results"),
        )
        .expect("results JSON");
        let phases = r["soak"]["phases"].as_array().expect("soak.phases");
        assert_eq!(phases.len(), 1, "round {round}: {phases:?}");
        assert_eq!(phases[0]["stopped"], true);
        let now_reads = phases[0]["read_ops"].as_u64().expect("read_ops");
        let now_secs = phases[0]["elapsed_secs"].as_f64().expect("elapsed_secs");
        assert!(
            now_reads > reads + 1000,
            "round {round}: {now_reads} after {reads}"
        );
        assert!(
            now_secs > secs,
            "round {round}: {now_secs} s after {secs} s"
        );
        // The entry's reads are the soak's: the checkpoint-carried total agrees with it.
        let total = r["soak"]["read_ops"].as_u64().expect("soak read_ops");
        assert!(now_reads <= total, "{now_reads} > {total}");
        reads = now_reads;
        secs = now_secs;
        total_before = total;
        // Each restart is an event on the soak's history, from the stop to the resume, with
        // its cause; the phase record says what stopped it.
        let restarts: Vec<&Value> = r["soak"]["history"]["events"]
            .as_array()
            .expect("events")
            .iter()
            .filter(|e| e["kind"] == "restart")
            .collect();
        assert_eq!(restarts.len(), round + 1, "round {round}: {restarts:?}");
        for e in &restarts {
            assert_eq!(e["cause"], "signal", "{e}");
            let (t, end) = (
                e["t"].as_f64().unwrap_or(0.0),
                e["end"].as_f64().unwrap_or(0.0),
            );
            assert!(t > 0.0 && end > t, "{e}");
        }
        let last = r["phases"]
            .as_array()
            .and_then(|p| p.last())
            .expect("record");
        assert_eq!(last["status"], "stopped", "{last}");
        assert_eq!(last["stopped_by"], "signal", "{last}");
    }
    // The report lists the restarts and marks them; it does not say nothing happened.
    let ss = dir.path().join("state").display().to_string();
    let out = Command::new(bin())
        .args(["report", "--state", &ss, "--format", "html"])
        .output()
        .expect("nvsoak report");
    let html = String::from_utf8_lossy(&out.stdout);
    assert!(!html.contains("No events during the soak"), "{html}");
    assert!(html.contains("restart (stopped by a signal)"), "{html}");
    assert_eq!(
        html.matches("data-kind=\"restart\" data-count=\"1\" data-cause=\"signal\"")
            .count(),
        2,
        "{html}"
    );
}

/// A version-3 results file with a day of history, events and a steady window.
pub(crate) fn with_history() -> Value {
    let t0 = 1_750_000_000.0;
    let points: Vec<Value> = (0..1440)
        .map(|i| {
            serde_json::json!({
                "t": t0 + i as f64 * 60.0, "secs": 60.0,
                "read_ops": 3_000_000 + i, "write_ops": 1_200_000,
                "lat_avg_us": if i == 700 { 90_000.0 } else { 120.0 },
                "lat_p99_us": 480.0, "errors": 0, "verify_errors": 0
            })
        })
        .collect();
    serde_json::json!({
        "version": 3, "host": "rack1", "target": "d1", "path": "/dev/nvme0n1",
        "device": null, "sweeps": [], "steady": [],
        "soak": {
            "started": t0, "elapsed_secs": 86400.0, "read_bytes": 1, "written_bytes": 1,
            "read_ops": 1, "write_ops": 1, "errors": 3, "verify_errors": 0,
            "smart_written_bytes_delta": null, "observed_dwpd": null, "rated_dwpd": null,
            "endurance_consumed_ratio": null, "throttled_secs": null, "iops_throttled": null,
            "iops_unthrottled": null,
            "history": {
                "step_secs": 60.0, "points": points,
                "events": [
                    {"kind": "io_errors", "t": t0 + 3600.0, "end": t0 + 3600.0, "count": 3},
                    {"kind": "throttled", "t": t0 + 7200.0, "end": t0 + 9000.0, "count": 1800},
                    {"kind": "media_errors", "t": t0 + 40000.0, "end": t0 + 40000.0, "count": 2}
                ],
                "steady": [{"profile": "4k-rw", "start": t0 + 1800.0, "end": t0 + 3000.0}]
            }
        }
    })
}

#[test]
fn the_report_marks_each_event_and_the_steady_window() {
    let dir = shm_dir();
    let f = dir.path().join("d1.json");
    std::fs::write(&f, with_history().to_string()).expect("fixture");
    let fs = f.display().to_string();
    let out = Command::new(bin())
        .args(["report", "--from", &fs, "--format", "html"])
        .output()
        .expect("nvsoak report");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let html = String::from_utf8_lossy(&out.stdout);
    let chart = &html[html.find("<svg class=\"chart soak-chart\"").expect("chart")..];
    let chart = &chart[..chart.find("</svg>").expect("end")];
    assert_eq!(attr(chart, "data-series-count").as_deref(), Some("4"));
    assert_eq!(attr(chart, "data-event-count").as_deref(), Some("3"));
    // One 90 ms minute among 120 µs ones: the latency axis is logarithmic.
    assert_eq!(attr(chart, "data-latency-scale").as_deref(), Some("log"));
    for k in ["io_errors", "throttled", "media_errors"] {
        assert!(
            chart.contains(&format!("<g class=\"event\" data-kind=\"{k}\"")),
            "{k}"
        );
    }
    assert!(chart.contains("class=\"event-band\" data-kind=\"throttled\""));
    assert!(chart.contains("class=\"steady-window\" data-profile=\"4k-rw\""));
    assert!(chart.contains("hours since the soak started"));
    // In words under the chart.
    assert!(
        html.contains("<li>at 01:00:00, 3 I/O errors</li>"),
        "{html}"
    );
    assert!(html.contains("<li>from 02:00:00 to 02:30:00, throttling</li>"));
    assert!(html.contains("steady state (4k-rw) over the window 00:30:00 to 00:50:00"));

    // The Markdown report writes the chart next to it and links it.
    let md = dir.path().join("r.md");
    let mds = md.display().to_string();
    let out = Command::new(bin())
        .args([
            "report", "--from", &fs, "--format", "markdown", "--out", &mds,
        ])
        .output()
        .expect("nvsoak report");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&md).expect("markdown");
    assert!(text.contains("### Soak over time"), "{text}");
    let svg = std::fs::read_dir(dir.path())
        .expect("dir")
        .filter_map(|e| e.ok())
        .find(|e| e.file_name().to_string_lossy().ends_with("--soak.svg"))
        .expect("the soak chart's SVG file");
    let name = svg.file_name().to_string_lossy().to_string();
    assert!(text.contains(&format!("]({name})")), "{text}");
    let body = std::fs::read_to_string(svg.path()).expect("svg");
    assert_eq!(attr(&body, "data-event-count").as_deref(), Some("3"));
    assert!(text.contains("- at 11:06:40, 2 media errors"), "{text}");
}

#[test]
fn a_results_file_without_history_has_no_soak_chart() {
    let dir = shm_dir();
    let mut v = with_history();
    v["version"] = 2.into();
    if let Some(s) = v["soak"].as_object_mut() {
        s.remove("history");
    }
    let f = dir.path().join("d1.json");
    std::fs::write(&f, v.to_string()).expect("fixture");
    let fs = f.display().to_string();
    let out = Command::new(bin())
        .args(["report", "--from", &fs, "--format", "html"])
        .output()
        .expect("nvsoak report");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let html = String::from_utf8_lossy(&out.stdout);
    assert!(html.contains("<h3>Soak</h3>"));
    assert!(!html.contains("Soak over time"), "{html}");
}
