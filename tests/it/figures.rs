//! Figures that are right: every report a worker sent is counted (issue 12).

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
