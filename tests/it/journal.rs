//! What a journal reader sees of a plan: an INFO line when each phase starts and one when it
//! ends with its outcome (sweep: maximum and sub-1 ms frontier; soak: steady state and in which
//! round; totals), one line per sweep point, a soak's progress every `log.progress_interval`,
//! what a resumed plan resumes, a spanning target's members and each device given up to
//! `allow_destroy`, and "plan finished" told apart from a stop by signal.

use crate::common::*;
use crate::faults::LogTail;
use std::time::{Duration, Instant};

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
    // One line per sweep point: the uncontrolled run (point 0) and the one point of the plan.
    let max = lines_with(&err, "sweep point 0/1: uncontrolled (the maximum): ");
    assert_eq!(max.len(), 1, "{err}");
    let pt = lines_with(&err, "sweep point 1/1: 50% of max = ");
    assert_eq!(pt.len(), 1, "{err}");
    let max_iops = field(max[0], "iops");
    assert!(max_iops > 0.0, "{}", max[0]);
    let p = pt[0];
    assert!(
        p.contains(" INFO ") && p.contains("job=rr") && p.contains("0 errors"),
        "{p}"
    );
    assert_eq!(field(p, "pct"), 50.0, "{p}");
    assert_eq!(field(p, "errors"), 0.0, "{p}");
    assert!(
        (field(p, "target_iops") - max_iops / 2.0).abs() < 1.0,
        "asked for half the maximum: {p}"
    );
    let iops = field(p, "iops");
    assert!(iops > 0.0 && iops < max_iops * 1.1, "{p}");
    assert!(field(p, "lat_mean_us") > 0.0, "{p}");
    assert!(
        field(p, "lat_p99_us") >= field(p, "lat_mean_us") * 0.5,
        "{p}"
    );
    // The default progress interval (5 minutes) is longer than this 3 s soak.
    assert!(lines_with(&err, "soak progress:").is_empty(), "{err}");
}

/// The value of `name=` in a log line, as a number; panics naming the line when absent.
#[track_caller]
fn field(line: &str, name: &str) -> f64 {
    let at = line
        .find(&format!(" {name}="))
        .unwrap_or_else(|| panic!("no {name}= in {line}"));
    let rest = &line[at + name.len() + 2..];
    let v = rest.split(' ').next().unwrap_or("");
    v.trim_matches('"')
        .parse()
        .unwrap_or_else(|_| panic!("{name}={v} is not a number in {line}"))
}

/// Waits until `pred` holds for the daemon's log so far; panics with the log after `timeout`.
fn wait_log(tail: &LogTail, timeout: Duration, what: &str, pred: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + timeout;
    loop {
        let t = tail.text();
        if pred(&t) {
            return t;
        }
        assert!(
            Instant::now() < deadline,
            "{what} within {timeout:?}; log:\n{t}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A soak of an hour, logging its progress every second.
const SOAK_ONLY: &str = r#"
[state]
dir = "{dir}/state"
[log]
progress_interval = "1s"
[health]
enabled = false
[[target]]
name = "j"
path = "{dir}/j.dat"
size = "8MiB"
direct = false
[[target.phase]]
kind = "soak"
job = { name = "rr", read = 100, bs = "4k", iodepth = 4 }
duration = "1h"
[gates]
verify_errors = false
"#;

#[test]
fn a_running_soak_logs_its_progress_every_interval() {
    let mut d = Daemon::start(SOAK_ONLY);
    let tail = LogTail::attach(&mut d);
    let log = wait_log(&tail, Duration::from_secs(60), "two progress lines", |t| {
        lines_with(t, "soak progress: ").len() >= 2
    });
    let (status, _, _) = d.terminate();
    assert!(status.success(), "{}", tail.text());
    let lines = lines_with(&log, "soak progress: ");
    let (a, b) = (lines[0], lines[1]);
    for l in [a, b] {
        assert!(l.contains(" INFO ") && l.contains("target_name=j"), "{l}");
        let iops = field(l, "iops");
        assert!(iops > 0.0, "{l}");
        // 4 KiB reads: the bandwidth is the IOPS in 4 KiB units.
        assert!(
            (field(l, "bytes_per_sec") / iops - 4096.0).abs() < 1.0,
            "{l}"
        );
        assert!(field(l, "lat_mean_us") > 0.0, "{l}");
        assert!(field(l, "lat_p99_us") > 0.0, "{l}");
        assert_eq!(field(l, "errors"), 0.0, "{l}");
        assert!(
            l.contains(" IOPS, ") && l.contains("0 errors") && l.contains(" left"),
            "{l}"
        );
        // No drive behind a file: no temperature in the words.
        assert!(!l.contains("°C"), "{l}");
        let (el, left) = (field(l, "elapsed_secs"), field(l, "left_secs"));
        assert!((0.9..600.0).contains(&el), "{l}");
        assert!(
            (el + left - 3600.0).abs() < 5.0,
            "elapsed and left make the hour: {l}"
        );
    }
    let gap = field(b, "elapsed_secs") - field(a, "elapsed_secs");
    assert!(gap >= 0.9, "one interval apart at least: {a}\n{b}");
    assert!(field(b, "left_secs") < field(a, "left_secs"), "{a}\n{b}");
}

/// The plan resumed from its checkpoint says where: the phase, its kind, the time done in it
/// and left of it, and the phase's start line says "resumed", not "started".
#[test]
fn a_resumed_soak_says_what_it_resumes_and_how_long_is_left() {
    let mut d = Daemon::start(SOAK_ONLY);
    let tail = LogTail::attach(&mut d);
    wait_log(&tail, Duration::from_secs(60), "two progress lines", |t| {
        lines_with(t, "soak progress: ").len() >= 2
    });
    let dir = std::mem::replace(&mut d.dir, shm_dir());
    let (status, _, _) = d.terminate();
    assert!(status.success(), "{}", tail.text());
    let first = tail.text();
    assert_eq!(
        lines_with(&first, "phase 1 (soak) started").len(),
        1,
        "{first}"
    );

    let mut d = Daemon::start_in(dir, SOAK_ONLY, &[]);
    let tail = LogTail::attach(&mut d);
    let log = wait_log(&tail, Duration::from_secs(60), "a progress line", |t| {
        !lines_with(t, "soak progress: ").is_empty()
    });
    let (status, _, _) = d.terminate();
    assert!(status.success(), "{}", tail.text());
    let resuming = lines_with(&log, "resuming from the checkpoint: phase 1 of 1 (soak): ");
    assert_eq!(resuming.len(), 1, "{log}");
    let r = resuming[0];
    let done = field(r, "elapsed_secs");
    assert!(done >= 1.5, "the first run's time in the soak: {r}");
    assert!((done + field(r, "left_secs") - 3600.0).abs() < 0.5, "{r}");
    assert!(r.contains(" left of 1 h 00 min 00 s"), "{r}");
    assert!(r.contains("kind=\"soak\""), "{r}");
    let resumed = lines_with(&log, "phase 1 (soak) resumed: ");
    assert_eq!(resumed.len(), 1, "{log}");
    assert!(resumed[0].contains(" done, "), "{}", resumed[0]);
    assert!(
        lines_with(&log, "phase 1 (soak) started").is_empty(),
        "{log}"
    );
    // The progress line counts the time of both runs.
    let p = lines_with(&log, "soak progress: ")[0];
    assert!(field(p, "elapsed_secs") > done, "{p}");
}

/// A target spanning two loop devices: its start line names both members, so does
/// `nvsoak_target_info{members}`, and the moment each member is given up to `allow_destroy`
/// is a line naming the device (path, size, model, serial, WWN). Needs root and losetup.
#[test]
fn a_spanning_target_names_every_member_and_each_device_it_destroys() {
    use crate::safety::{Scratch, p};
    let Some(mut s) = Scratch::new("journal of a spanning target") else {
        return;
    };
    let a = s.loop_dev(16, false);
    let b = s.loop_dev(16, false);
    let cfg = format!(
        r#"
[state]
dir = "{{dir}}/state"
[health]
enabled = false
[[target]]
name = "card"
paths = ["{a}", "{b}"]
allow_destroy = ["{a}", "{b}"]
engine = "psync"
[[target.phase]]
kind = "soak"
job = {{ name = "w", read = 0, bs = "4k", iodepth = 1, workers = 2 }}
duration = "1h"
"#,
        a = p(&a),
        b = p(&b)
    );
    let mut d = Daemon::start(&cfg);
    let tail = LogTail::attach(&mut d);
    let log = wait_log(&tail, Duration::from_secs(60), "the target's start", |t| {
        t.contains("target started")
    });
    let m = d.scrape();
    let members = format!("{},{}", p(&a), p(&b));
    assert_eq!(
        find(
            &m,
            "nvsoak_target_info",
            &[("target", "card"), ("path", p(&a)), ("members", &members)]
        )
        .len(),
        1,
        "{}",
        d.scrape_text()
    );
    let (status, _, _) = d.terminate();
    assert!(status.success(), "{}", tail.text());
    let started = lines_with(&log, "target started");
    assert_eq!(started.len(), 1, "{log}");
    assert!(
        started[0].contains(&format!("spanning 2 devices: {}, {}", p(&a), p(&b))),
        "{}",
        started[0]
    );
    for dev in [&a, &b] {
        let gone: Vec<&str> = lines_with(&log, "allow_destroy accepted: ")
            .into_iter()
            .filter(|l| l.contains(&format!(" path={} ", p(dev))))
            .collect();
        assert_eq!(gone.len(), 1, "{}: {log}", dev.display());
        let l = gone[0];
        assert!(l.contains(" WARN "), "{l}");
        assert!(l.contains("its data is destroyed"), "{l}");
        assert_eq!(field(l, "size_bytes"), (16u64 << 20) as f64, "{l}");
        // A loop device has no model, serial or WWN: each is named, as "-".
        for f in ["model=-", "serial=-", "wwn=-"] {
            assert!(l.contains(f), "{f} in {l}");
        }
    }
    // Destroyed only once claimed: the line comes before any phase.
    let first_destroy = log.find("allow_destroy accepted: ").unwrap_or(usize::MAX);
    let first_phase = log.find("phase 1 (soak) started").unwrap_or(0);
    assert!(first_destroy < first_phase, "{log}");
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

/// A target on one block device: the line that gives it up to `allow_destroy` names it, with
/// its size, once, before the plan's first phase. Needs root and losetup.
#[test]
fn a_device_given_up_to_allow_destroy_is_named_in_one_line() {
    use crate::safety::{Scratch, p};
    let Some(mut s) = Scratch::new("journal of a destroyed device") else {
        return;
    };
    let a = s.loop_dev(8, false);
    let cfg = format!(
        r#"
[state]
dir = "{{dir}}/state"
[health]
enabled = false
[[target]]
name = "disk"
path = "{a}"
allow_destroy = "{a}"
engine = "psync"
[[target.phase]]
kind = "soak"
job = {{ name = "w", read = 0, bs = "4k", iodepth = 1 }}
duration = "1h"
"#,
        a = p(&a)
    );
    let mut d = Daemon::start(&cfg);
    let tail = LogTail::attach(&mut d);
    let log = wait_log(&tail, Duration::from_secs(60), "the soak's start", |t| {
        t.contains("phase 1 (soak) started")
    });
    let (status, _, _) = d.terminate();
    assert!(status.success(), "{}", tail.text());
    let gone = lines_with(&log, "allow_destroy accepted: ");
    assert_eq!(gone.len(), 1, "{log}");
    let l = gone[0];
    assert!(l.contains(&format!(" path={} ", p(&a))), "{l}");
    assert!(l.contains(&format!("{} (8.00 MiB, ", p(&a))), "{l}");
    assert_eq!(field(l, "size_bytes"), (8u64 << 20) as f64, "{l}");
    assert!(
        log.find("allow_destroy accepted: ") < log.find("phase 1 (soak) started"),
        "{log}"
    );
}
