//! nvsoak's own cost per I/O, as an operator reads it: the workers' CPU time by mode on
//! `/metrics`, the cost per I/O over the last interval, and the same figure on the status page.
//! What is asserted cannot drift with the machine's load: a thread spends at most one CPU
//! second per second, counters only grow, and the figure per I/O agrees with the totals.

use std::time::{Duration, Instant};

use crate::common::{Daemon, Sample, find, http_get, sum};

const CFG: &str = r#"
[state]
dir = "{dir}/state"
[health]
enabled = false
[stats]
interval = "100ms"
[[target]]
name = "cpu"
path = "{dir}/cpu.dat"
size = "32MiB"
engine = "psync"
direct = false
[[target.phase]]
kind = "soak"
job = { name = "mix", read = 70, bs = "4k", access = "random", iodepth = 1, workers = 2 }
duration = "10m"
[gates]
verify_errors = false
"#;

fn cpu(s: &[Sample], mode: &str) -> f64 {
    sum(
        s,
        "nvsoak_workload_cpu_seconds_total",
        &[("target", "cpu"), ("mode", mode)],
    )
}

fn ops(s: &[Sample]) -> f64 {
    sum(s, "nvsoak_read_ops_total", &[("target", "cpu")])
        + sum(s, "nvsoak_write_ops_total", &[("target", "cpu")])
}

#[test]
fn worker_cpu_is_exported_by_mode_bounded_by_wall_time_and_per_io() {
    let started = Instant::now();
    let d = Daemon::start(CFG);
    let first = d.scrape_until(Duration::from_secs(60), |s| {
        cpu(s, "user") + cpu(s, "system") > 0.05
            && !find(
                s,
                "nvsoak_workload_cpu_per_io_seconds",
                &[("target", "cpu")],
            )
            .is_empty()
    });
    let (user, system) = (cpu(&first, "user"), cpu(&first, "system"));
    assert!(
        user > 0.0 && system > 0.0,
        "user {user} s, system {system} s"
    );
    // Two worker threads cannot have used more than two CPU seconds per second since the
    // daemon was started (plus the resolution of getrusage).
    let wall = started.elapsed().as_secs_f64();
    assert!(
        user + system <= 2.0 * wall + 0.01,
        "{user} + {system} CPU seconds in {wall} s of wall time, by 2 workers"
    );
    assert_eq!(
        sum(&first, "nvsoak_workload_workers", &[("target", "cpu")]),
        2.0
    );
    let per_io: f64 = find(
        &first,
        "nvsoak_workload_cpu_per_io_seconds",
        &[("target", "cpu")],
    )
    .iter()
    .map(|s| s.value)
    .sum();
    assert!(per_io > 0.0, "per-I/O cost {per_io}");
    // The interval figure and the totals describe the same workers: within a factor of 10 of
    // each other (the interval is 100 ms of a run of seconds; no machine's noise moves the
    // cost per I/O tenfold).
    let avg = (user + system) / ops(&first);
    assert!(
        per_io < avg * 10.0 && per_io > avg / 10.0,
        "last interval {per_io} s per I/O against {avg} s per I/O over the run"
    );
    // Counters only grow.
    let second = d.scrape_until(Duration::from_secs(30), |s| {
        cpu(s, "user") + cpu(s, "system") > user + system
    });
    assert!(cpu(&second, "user") >= user && cpu(&second, "system") >= system);
    assert!(cpu(&second, "user") + cpu(&second, "system") > user + system);
    // The status page shows the figure in the target's row.
    let (code, page) = http_get(d.addr, "/").expect("status page");
    assert_eq!(code, 200);
    assert!(
        page.contains("CPU per I/O (nvsoak / kernel)"),
        "no CPU column"
    );
    let table = &page[page
        .find("<table id=\"targets\">")
        .expect("the targets table")..];
    let row = table
        .lines()
        .find(|l| l.starts_with("<tr><td>cpu</td>"))
        .unwrap_or_else(|| panic!("no row for target cpu in:\n{page}"));
    assert!(
        (row.contains(" ns / ") || row.contains(" µs / ")),
        "no CPU per I/O figure in the row: {row}"
    );
    let _ = d.terminate();
}
