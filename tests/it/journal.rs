//! What a journal reader sees of a plan: an INFO line when each phase starts and one when it
//! ends with its outcome (sweep: maximum and sub-1 ms frontier; soak: steady state and in which
//! round; totals), and "plan finished" told apart from a stop by signal.

use crate::common::*;
use std::time::Duration;

const PLAN: &str = r#"
[state]
dir = "{dir}/state"
[health]
enabled = false
[[target]]
name = "j"
path = "{dir}/j.dat"
size = "8MiB"
direct = false
[[target.phase]]
kind = "precondition"
passes = 1
[[target.phase]]
kind = "sweep"
job = { name = "rr", read = 100, bs = "4k", iodepth = 4 }
max_duration = "1s"
point_duration = "1s"
points = [50]
[[target.phase]]
kind = "soak"
job = { name = "rr", read = 100, bs = "4k", iodepth = 4 }
duration = "3s"
steady_round = "1s"
steady_window = 2
steady_criterion = "iops:99%"
# Not a verified plan: without this the verdict is INCOMPLETE (exit 3).
[gates]
verify_errors = false
"#;

fn lines_with<'a>(err: &'a str, needle: &str) -> Vec<&'a str> {
    err.lines().filter(|l| l.contains(needle)).collect()
}

#[test]
fn each_phase_starts_and_ends_in_one_line_and_the_plan_says_it_finished() {
    let mut d = Daemon::spawn_in(shm_dir(), PLAN, &["--exit-when-done"]);
    let (status, err) = wait_exit(
        &mut d.child,
        Duration::from_secs(120),
        "the plan did not end",
    );
    assert!(status.success(), "{err}");
    for (n, kind) in [(1, "precondition"), (2, "sweep"), (3, "soak")] {
        assert_eq!(
            lines_with(&err, &format!("phase {n} ({kind}) started")).len(),
            1,
            "{err}"
        );
        let ended = lines_with(&err, &format!("phase {n} ({kind}) finished in"));
        assert_eq!(ended.len(), 1, "{err}");
        assert!(ended[0].contains(" INFO "), "{}", ended[0]);
        assert!(ended[0].contains("0 I/O errors"), "{}", ended[0]);
    }
    let pre = lines_with(&err, "phase 1 (precondition) finished")[0];
    assert!(
        pre.contains("wrote 8.00 MiB") && pre.contains("1 pass over the region"),
        "{pre}"
    );
    let sweep = lines_with(&err, "phase 2 (sweep) finished")[0];
    assert!(
        sweep.contains("max ") && sweep.contains(" IOPS; "),
        "{sweep}"
    );
    assert!(
        sweep.contains("sub-1 ms frontier") || sweep.contains("no point under 1 ms"),
        "{sweep}"
    );
    let soak = lines_with(&err, "phase 3 (soak) finished")[0];
    assert!(soak.contains("rr: steady state"), "{soak}");
    assert_eq!(lines_with(&err, "plan finished").len(), 1, "{err}");
    assert!(lines_with(&err, "stopped by signal").is_empty(), "{err}");
}

#[test]
fn a_stop_by_signal_is_not_a_finished_plan() {
    let cfg = PLAN.replace("duration = \"3s\"", "duration = \"1h\"");
    let d = Daemon::start(&cfg);
    d.scrape_until(Duration::from_secs(60), |s| {
        !find(
            s,
            "nvsoak_phase_info",
            &[("target", "j"), ("phase", "soak")],
        )
        .is_empty()
    });
    let (status, _, err) = d.terminate();
    assert!(status.success(), "{err}");
    assert_eq!(lines_with(&err, "phase 3 (soak) started").len(), 1, "{err}");
    assert!(
        lines_with(&err, "phase 3 (soak) finished").is_empty(),
        "{err}"
    );
    assert_eq!(lines_with(&err, "stopped by signal").len(), 1, "{err}");
    assert!(lines_with(&err, "plan finished").is_empty(), "{err}");
}
