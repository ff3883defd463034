//! Figures that are right (issue 12): every report a worker sent is counted, rates across phase
//! changes are physically plausible, a finished job's rate series go away, the soak clock stops.

use std::time::Duration;

use crate::common::{Daemon, sum};

/// Many short byte-limited segments (precondition phases), several workers each, a 10 ms stats
/// interval: the target's write totals equal exactly what the workers wrote, every time. A
/// worker's last report lost at a segment's end shows as missing bytes.
#[test]
fn short_segments_count_every_worker_report() {
    const PHASES: usize = 6;
    let mut cfg = String::from(
        r#"
[state]
dir = "{dir}/state"
[health]
enabled = false
[stats]
interval = "10ms"
[[target]]
name = "fig"
path = "{dir}/fig.dat"
size = "8MiB"
region = "50%"
engine = "io_uring"
"#,
    );
    for _ in 0..PHASES {
        cfg.push_str(
            "[[target.phase]]\nkind = \"precondition\"\npasses = 1\nblock_size = \"64k\"\nworkers = 4\n",
        );
    }
    for round in 0..2 {
        let d = Daemon::start(&cfg);
        let s = d.scrape_until(Duration::from_secs(60), |s| {
            sum(s, "nvsoak_phase_running", &[("target", "fig")]) == 0.0
        });
        assert_eq!(
            sum(&s, "nvsoak_phase_running", &[("target", "fig")]),
            0.0,
            "round {round}: the plan did not finish"
        );
        let region = 4.0 * 1048576.0;
        assert_eq!(
            sum(&s, "nvsoak_write_bytes_total", &[("target", "fig")]),
            PHASES as f64 * region,
            "round {round}: write bytes"
        );
        assert_eq!(
            sum(&s, "nvsoak_write_ops_total", &[("target", "fig")]),
            PHASES as f64 * region / 65536.0,
            "round {round}: write ops"
        );
        let (status, _, err) = d.terminate();
        assert!(status.success(), "{err}");
    }
}

fn vm_rss_bytes(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = s.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// 32 workers at a 10 ms stats interval: reports used to queue unboundedly (603 MB in a second,
/// then the OOM killer). Workers now coalesce while their earlier reports are queued, so RSS
/// stays bounded, and the byte-limited plan still counts every byte the workers wrote.
#[test]
fn many_workers_at_10ms_stay_bounded_and_counted() {
    let cfg = r#"
[state]
dir = "{dir}/state"
[health]
enabled = false
[stats]
interval = "10ms"
[[target]]
name = "many"
path = "{dir}/many.dat"
size = "32MiB"
engine = "io_uring"
[[target.phase]]
kind = "precondition"
passes = 40
block_size = "4k"
iodepth = 4
workers = 32
"#;
    const BOUND: u64 = 200 << 20;
    let d = Daemon::start(cfg);
    let pid = d.child.id();
    let mut peak = 0u64;
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    let s = loop {
        if let Some(rss) = vm_rss_bytes(pid) {
            peak = peak.max(rss);
            assert!(
                rss < BOUND,
                "RSS {} MiB with 32 workers at 10 ms (bound {} MiB)",
                rss >> 20,
                BOUND >> 20
            );
        }
        let s = d.scrape();
        if sum(&s, "nvsoak_phase_running", &[("target", "many")]) == 0.0
            && sum(&s, "nvsoak_write_bytes_total", &[("target", "many")]) > 0.0
        {
            break s;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the precondition did not finish"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let region = 32.0 * 1048576.0;
    assert_eq!(
        sum(&s, "nvsoak_write_bytes_total", &[("target", "many")]),
        40.0 * region
    );
    eprintln!("32 workers at 10 ms: peak RSS {} MiB", peak >> 20);
    let (status, _, err) = d.terminate();
    assert!(status.success(), "{err}");
}

/// Block size of each workload of [`PHASE_CHANGES`].
const BLOCK: &[(&str, f64)] = &[
    ("r4k", 4096.0),
    ("w128k", 131072.0),
    ("paced", 4096.0),
    ("precondition", 65536.0),
];

/// Short phases of different block sizes back to back at a 10 ms stats interval, so many ticks
/// fall just after a phase change.
const PHASE_CHANGES: &str = r#"
[state]
dir = "{dir}/state"
[health]
enabled = false
[stats]
interval = "10ms"
[[target]]
name = "pc"
path = "{dir}/pc.dat"
size = "16MiB"
engine = "io_uring"
[[target.phase]]
kind = "soak"
job = { name = "r4k", read = 100, bs = "4k", iodepth = 8, workers = 2 }
duration = "1s"
[[target.phase]]
kind = "soak"
job = { name = "w128k", read = 0, bs = "128k", access = "sequential", iodepth = 4 }
duration = "1s"
[[target.phase]]
kind = "soak"
job = { name = "paced", read = 100, bs = "4k", iodepth = 4, rate = "2000iops" }
duration = "1s"
[[target.phase]]
kind = "precondition"
passes = 1
block_size = "64k"
workers = 2
[[target.phase]]
kind = "soak"
job = { name = "r4k", read = 100, bs = "4k", iodepth = 8, workers = 2 }
duration = "1s"
"#;

/// Checks one scrape's rate gauges: IOPS × block size is the bandwidth, nothing beyond what
/// tmpfs on this machine could move, the paced job near its rate, and at most the current
/// profile's series present. Returns the workloads that had rate series.
fn check_rates(s: &[crate::common::Sample]) -> Vec<String> {
    use crate::common::find;
    let current: Vec<&str> = find(s, "nvsoak_phase_info", &[("target", "pc")])
        .iter()
        .filter_map(|x| x.labels.get("profile").map(String::as_str))
        .collect();
    let mut seen = Vec::new();
    for op in ["read", "write"] {
        for x in find(s, &format!("nvsoak_{op}_iops"), &[("target", "pc")]) {
            let w = x.labels.get("workload").cloned().unwrap_or_default();
            let bs = BLOCK
                .iter()
                .find(|(n, _)| *n == w)
                .map(|(_, b)| *b)
                .unwrap_or_else(|| panic!("unexpected workload {w}"));
            let bw = sum(
                s,
                &format!("nvsoak_{op}_bandwidth_bytes_per_second"),
                &[("target", "pc"), ("workload", &w)],
            );
            let iops = x.value;
            assert!(
                (bw - iops * bs).abs() <= bw * 0.01 + 1.0,
                "{w} {op}: {iops} IOPS × {bs} B is not {bw} B/s"
            );
            // tmpfs through O_DIRECT on a shared 2-core machine moves a few GB/s at best.
            assert!(bw < 40e9, "{w} {op}: {bw} B/s");
            assert!(iops < 5e6, "{w} {op}: {iops} IOPS");
            if w == "paced" {
                assert!(iops <= 2000.0 * 3.0, "paced {op}: {iops} IOPS for 2000");
            }
            assert!(
                current.contains(&w.as_str()),
                "{w} has rate series but the current profile is {current:?}"
            );
            if !seen.contains(&w) {
                seen.push(w);
            }
        }
    }
    assert!(
        seen.len() <= 1,
        "rate series of several jobs at once: {seen:?}"
    );
    seen
}

/// Rates through a plan of short phases: every scrape's rates are physically plausible and
/// belong to the running job only; once the plan finished, no rate or quantile series remain
/// while the totals stay.
#[test]
fn rates_stay_plausible_across_phase_changes_and_finished_jobs_go_away() {
    let d = Daemon::start(PHASE_CHANGES);
    let mut jobs_seen: Vec<String> = Vec::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    let s = loop {
        let s = d.scrape();
        for w in check_rates(&s) {
            if !jobs_seen.contains(&w) {
                jobs_seen.push(w);
            }
        }
        if sum(&s, "nvsoak_phase_running", &[("target", "pc")]) == 0.0 {
            break s;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the plan did not finish"
        );
        std::thread::sleep(Duration::from_millis(15));
    };
    assert!(jobs_seen.len() >= 3, "rates seen only for {jobs_seen:?}");
    for name in [
        "nvsoak_read_iops",
        "nvsoak_write_iops",
        "nvsoak_read_bandwidth_bytes_per_second",
        "nvsoak_write_bandwidth_bytes_per_second",
    ] {
        let left = crate::common::find(&s, name, &[("target", "pc")]);
        assert!(left.is_empty(), "{name} after the plan finished: {left:?}");
    }
    let quantiles: Vec<_> = s
        .iter()
        .filter(|x| {
            x.name.ends_with("_latency_quantile_seconds") && x.labels.contains_key("quantile")
        })
        .collect();
    assert!(
        quantiles.is_empty(),
        "quantiles of finished jobs: {quantiles:?}"
    );
    assert!(
        sum(
            &s,
            "nvsoak_read_ops_total",
            &[("target", "pc"), ("workload", "r4k")]
        ) > 0.0
    );
    assert_eq!(
        sum(
            &s,
            "nvsoak_write_bytes_total",
            &[("target", "pc"), ("workload", "precondition")]
        ),
        16.0 * 1048576.0
    );
    let (status, _, err) = d.terminate();
    assert!(status.success(), "{err}");
}

/// `nvsoak_soak_elapsed_seconds` stops when the plan has finished: it shows the plan's length,
/// and stays there (the device-gone pause is the same clock, unit-tested in the scheduler).
#[test]
fn soak_elapsed_stops_when_the_plan_finished() {
    let cfg = r#"
[state]
dir = "{dir}/state"
[health]
enabled = false
[[target]]
name = "el"
path = "{dir}/el.dat"
size = "8MiB"
[[target.phase]]
kind = "soak"
profile = "4k-random-read"
iodepth = 4
duration = "2s"
"#;
    let d = Daemon::start(cfg);
    let s = d.scrape_until(Duration::from_secs(30), |s| {
        sum(s, "nvsoak_phase_running", &[("target", "el")]) == 0.0
    });
    assert_eq!(sum(&s, "nvsoak_phase_running", &[("target", "el")]), 0.0);
    let first = sum(&s, "nvsoak_soak_elapsed_seconds", &[("target", "el")]);
    assert!(
        (2.0..10.0).contains(&first),
        "soak elapsed {first} s for a 2 s plan"
    );
    // Time passes; the finished soak's clock does not.
    std::thread::sleep(Duration::from_millis(1500));
    let later = sum(
        &d.scrape(),
        "nvsoak_soak_elapsed_seconds",
        &[("target", "el")],
    );
    assert_eq!(
        later, first,
        "the soak clock ran on after the plan finished"
    );
    let (status, _, err) = d.terminate();
    assert!(status.success(), "{err}");
}
