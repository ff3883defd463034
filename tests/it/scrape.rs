//! `/metrics` under load (issue 37): the rendered body is served again for a moment (at most a
//! stats interval) and its counters still advance from interval to interval, and the I/O worker
//! threads run at a lower priority than the daemon's own threads.

use std::time::Duration;

use crate::common::{Daemon, sum};

fn config(interval: &str) -> String {
    format!(
        r#"
[state]
dir = "{{dir}}/state"
[health]
enabled = false
[stats]
interval = "{interval}"
[[target]]
name = "t0"
path = "{{dir}}/t0.dat"
size = "16MiB"
engine = "psync"
[[target.phase]]
kind = "soak"
profile = "4k-random-read"
iodepth = 1
duration = "60s"
"#
    )
}

#[test]
fn scrapes_across_stats_intervals_show_advancing_counters() {
    let d = Daemon::start(&config("200ms"));
    let first = d.scrape_until(Duration::from_secs(20), |s| {
        sum(s, "nvsoak_read_ops_total", &[("target", "t0")]) > 0.0
    });
    let a = sum(&first, "nvsoak_read_ops_total", &[("target", "t0")]);
    assert!(a > 0.0, "no reads counted");
    // Each later interval publishes more reads; a body kept past its interval would not.
    let mut seen = vec![a];
    for _ in 0..3 {
        let last = seen[seen.len() - 1];
        let s = d.scrape_until(Duration::from_secs(20), |s| {
            sum(s, "nvsoak_read_ops_total", &[("target", "t0")]) > last
        });
        seen.push(sum(&s, "nvsoak_read_ops_total", &[("target", "t0")]));
    }
    assert!(
        seen.windows(2).all(|w| w[1] > w[0]),
        "the counters did not advance from scrape to scrape: {seen:?}"
    );
    d.terminate();
}

#[test]
fn scrapes_close_together_are_served_the_same_rendered_body() {
    let d = Daemon::start(&config("1s"));
    // The uptime gauge changes with every render, so two equal bodies were rendered once. Two
    // scrapes in a row usually fall within one body's life; a few tries absorb a slow machine.
    let mut same = false;
    for _ in 0..20 {
        let a = d.scrape_text();
        let b = d.scrape_text();
        assert!(a.contains("nvsoak_uptime_seconds"), "{a}");
        if a == b {
            same = true;
            break;
        }
    }
    assert!(same, "every scrape was rendered again");
    d.terminate();
}

/// `(thread name, nice value)` of every thread of `pid`, from /proc/PID/task/TID/stat (the
/// nice value is field 19; the name, in parentheses, may hold spaces).
fn thread_nice(pid: u32) -> Vec<(String, i64)> {
    let mut out = Vec::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return out;
    };
    for t in tasks.flatten() {
        let Ok(stat) = std::fs::read_to_string(t.path().join("stat")) else {
            continue;
        };
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let name = stat[open + 1..close].to_string();
        // Fields after the name start at field 3 (state); nice is field 19.
        let nice = stat[close + 1..]
            .split_ascii_whitespace()
            .nth(19 - 3)
            .and_then(|v| v.parse::<i64>().ok());
        if let Some(n) = nice {
            out.push((name, n));
        }
    }
    out
}

#[test]
fn io_workers_run_at_a_higher_nice_value_than_the_daemon_threads() {
    let d = Daemon::start(&config("1s"));
    let pid = d.child.id();
    // Wait for reads, so the worker thread is up and past its set-up.
    d.scrape_until(Duration::from_secs(20), |s| {
        sum(s, "nvsoak_read_ops_total", &[("target", "t0")]) > 0.0
    });
    let threads = thread_nice(pid);
    let own = threads
        .iter()
        .find(|(n, _)| n == "nvsoak")
        .map(|(_, v)| *v)
        .expect("the main thread");
    let workers: Vec<i64> = threads
        .iter()
        .filter(|(n, _)| n.starts_with("nvsoak-w"))
        .map(|(_, v)| *v)
        .collect();
    let runtime: Vec<i64> = threads
        .iter()
        .filter(|(n, _)| n.starts_with("nvsoak-rt"))
        .map(|(_, v)| *v)
        .collect();
    assert!(!workers.is_empty(), "no worker thread among {threads:?}");
    assert!(!runtime.is_empty(), "no runtime thread among {threads:?}");
    let want = (own + i64::from(nvsoak::workload::worker::WORKER_NICE)).min(19);
    assert!(
        workers.iter().all(|n| *n == want),
        "workers should run at nice {want}: {threads:?}"
    );
    assert!(
        runtime.iter().all(|n| *n == own),
        "the runtime threads should keep the process's nice {own}: {threads:?}"
    );
    d.terminate();
}
