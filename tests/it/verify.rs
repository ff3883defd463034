//! Data verification end to end on /dev/shm files: a running soak with `verify = "inline"`
//! catches corruption (bad_checksum), misdirected writes (wrong_offset) and lost writes
//! (stale_generation) injected into its target file, with the right offset in the log; a clean
//! run and a kill -9 restart report no false mismatches.

use std::os::unix::fs::FileExt;
use std::time::Duration;

use crate::common::{Daemon, sum};

pub(crate) const UNIT: u64 = 4096;

pub(crate) fn read_unit(path: &std::path::Path, off: u64) -> Vec<u8> {
    let f = std::fs::File::open(path).expect("opening target");
    let mut b = vec![0u8; UNIT as usize];
    f.read_exact_at(&mut b, off).expect("reading a unit");
    b
}

pub(crate) fn write_at(path: &std::path::Path, off: u64, data: &[u8]) {
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .expect("opening target");
    f.write_all_at(data, off).expect("injecting");
    f.sync_all().expect("sync");
}

pub(crate) fn verify_errors(s: &[crate::common::Sample], target: &str, kind: &str) -> f64 {
    sum(
        s,
        "nvsoak_verify_errors_total",
        &[("target", target), ("kind", kind)],
    )
}

/// precondition (1 pass) → a paced sequential rewrite → a random-read soak, all verified.
const CFG: &str = r#"
[state]
dir = "{dir}/state"
[health]
enabled = false
[[target]]
name = "v"
path = "{dir}/v.dat"
size = "16MiB"
engine = "io_uring"
verify = "inline"
[[target.phase]]
kind = "precondition"
passes = 1
[[target.phase]]
kind = "soak"
job = { name = "rewrite", read = 0, bs = "4k", access = "sequential", iodepth = 1, rate = "2000iops" }
duration = "3s"
[[target.phase]]
kind = "soak"
job = { name = "readback", read = 100, bs = "4k", access = "random", iodepth = 8, rate = "20000iops" }
duration = "10m"
"#;

#[test]
fn injected_corruption_misdirection_and_lost_write_are_caught() {
    let d = Daemon::start(CFG);
    let path = d.dir.path().join("v.dat");
    // The rewrite pass reaches 8 MiB after about a second; take the old copy before that.
    let stale_off = 8 << 20;
    d.scrape_until(Duration::from_secs(20), |s| {
        crate::common::find(
            s,
            "nvsoak_phase_info",
            &[("target", "v"), ("profile", "rewrite")],
        )
        .len()
            == 1
    });
    let old = read_unit(&path, stale_off);
    let s = d.scrape_until(Duration::from_secs(20), |s| {
        crate::common::find(
            s,
            "nvsoak_phase_info",
            &[("target", "v"), ("profile", "readback")],
        )
        .len()
            == 1
    });
    for k in [
        "wrong_offset",
        "stale_generation",
        "bad_checksum",
        "unreadable",
    ] {
        assert_eq!(
            verify_errors(&s, "v", k),
            0.0,
            "false {k} before any injection"
        );
    }
    let newer = read_unit(&path, stale_off);
    assert_ne!(
        old, newer,
        "the rewrite pass did not overwrite the unit at 8 MiB in time"
    );

    // 1. Corruption: flip bytes in the middle of a unit.
    let bad_off = 3 << 20;
    let mut u = read_unit(&path, bad_off);
    for b in &mut u[1000..1016] {
        *b ^= 0xA5;
    }
    write_at(&path, bad_off, &u);
    let s = d.scrape_until(Duration::from_secs(20), |s| {
        verify_errors(s, "v", "bad_checksum") > 0.0
    });
    assert!(
        verify_errors(&s, "v", "bad_checksum") > 0.0,
        "corruption not detected"
    );

    // 2. Misdirected write: the unit of 5 MiB lands at 6 MiB.
    let src = read_unit(&path, 5 << 20);
    write_at(&path, 6 << 20, &src);
    let s = d.scrape_until(Duration::from_secs(20), |s| {
        verify_errors(s, "v", "wrong_offset") > 0.0
    });
    assert!(
        verify_errors(&s, "v", "wrong_offset") > 0.0,
        "misdirected write not detected"
    );

    // 3. Lost write: the older copy of the unit at 8 MiB comes back.
    write_at(&path, stale_off, &old);
    let s = d.scrape_until(Duration::from_secs(20), |s| {
        verify_errors(s, "v", "stale_generation") > 0.0
    });
    assert!(
        verify_errors(&s, "v", "stale_generation") > 0.0,
        "lost write not detected"
    );
    assert_eq!(
        sum(&s, "nvsoak_target_up", &[("target", "v")]),
        1.0,
        "without verify_fatal the soak continues"
    );

    let (status, _, err) = d.terminate();
    assert!(status.success(), "{err}");
    for (kind, off) in [
        ("bad_checksum", bad_off),
        ("wrong_offset", 6 << 20),
        ("stale_generation", stale_off),
    ] {
        assert!(
            err.lines().any(|l| l.contains(&format!("kind=\"{kind}\""))
                || (l.contains(kind) && l.contains(&format!("offset={off}")))),
            "no log line for {kind} at offset {off}:\n{err}"
        );
        assert!(
            err.contains(&format!("offset={off}")),
            "log does not name offset {off} for {kind}"
        );
    }
}

#[test]
fn verify_fatal_stops_the_target() {
    let cfg = CFG.replace(
        "verify = \"inline\"",
        "verify = \"inline\"\nverify_fatal = true",
    );
    let d = Daemon::start(&cfg);
    let path = d.dir.path().join("v.dat");
    d.scrape_until(Duration::from_secs(30), |s| {
        crate::common::find(
            s,
            "nvsoak_phase_info",
            &[("target", "v"), ("profile", "readback")],
        )
        .len()
            == 1
    });
    let mut u = read_unit(&path, 1 << 20);
    u[2000] ^= 0xFF;
    write_at(&path, 1 << 20, &u);
    let s = d.scrape_until(Duration::from_secs(20), |s| {
        sum(s, "nvsoak_target_up", &[("target", "v")]) == 0.0
    });
    assert_eq!(
        sum(&s, "nvsoak_target_up", &[("target", "v")]),
        0.0,
        "verify_fatal did not stop the target"
    );
    assert!(verify_errors(&s, "v", "bad_checksum") > 0.0);
    // The daemon keeps serving after the target stopped.
    let s2 = d.scrape();
    assert_eq!(sum(&s2, "nvsoak_phase_running", &[("target", "v")]), 0.0);
    let (status, _, err) = d.terminate();
    assert!(status.success(), "{err}");
}

#[test]
fn mixed_soak_and_kill9_restart_report_no_false_mismatches() {
    let cfg = r#"
[state]
dir = "{dir}/state"
checkpoint_interval = "1s"
[health]
enabled = false
[[target]]
name = "m"
path = "{dir}/m.dat"
size = "16MiB"
engine = "io_uring"
verify = "inline"
[[target.phase]]
kind = "soak"
job = { name = "mix", read = 60, bs = "4k:60,8k:30,64k:10", access = "random", iodepth = 16, workers = 2 }
duration = "10m"
"#;
    let d = Daemon::start(cfg);
    let s = d.scrape_until(Duration::from_secs(20), |s| {
        sum(s, "nvsoak_soak_elapsed_seconds", &[("target", "m")]) >= 3.5
    });
    assert!(sum(&s, "nvsoak_write_ops_total", &[("target", "m")]) > 1000.0);
    assert!(sum(&s, "nvsoak_read_ops_total", &[("target", "m")]) > 1000.0);
    assert_eq!(
        sum(&s, "nvsoak_verify_errors_total", &[("target", "m")]),
        0.0,
        "false mismatches in a clean run"
    );
    assert_eq!(
        crate::common::find(&s, "nvsoak_verify_errors_total", &[("target", "m")]).len(),
        4
    );
    let dir = d.kill9();
    let d = Daemon::start_in(dir, cfg, &[]);
    let before = sum(&d.scrape(), "nvsoak_read_ops_total", &[("target", "m")]);
    // Progress, not speed: the bound only ends a hung run (workers run at nice 19, so a busy
    // machine slows them a lot).
    let s = d.scrape_until(Duration::from_secs(120), |s| {
        sum(s, "nvsoak_read_ops_total", &[("target", "m")]) > before + 200_000.0
    });
    assert!(
        sum(&s, "nvsoak_read_ops_total", &[("target", "m")]) > before + 200_000.0,
        "resumed soak made no progress"
    );
    assert_eq!(
        sum(&s, "nvsoak_verify_errors_total", &[("target", "m")]),
        0.0,
        "false mismatches after kill -9 and resume"
    );
    let (status, _, err) = d.terminate();
    assert!(status.success(), "{err}");
}

/// A corrupting drive floods the journal with no more than a few full lines: the first failing
/// blocks in full, then summaries (count, kinds, offset range) that together account for every
/// mismatch counted, the tail flushed when the target stops.
#[test]
fn a_mismatch_flood_is_summarised_not_logged_line_by_line() {
    let d = Daemon::start(CFG);
    let path = d.dir.path().join("v.dat");
    d.scrape_until(Duration::from_secs(30), |s| {
        crate::common::find(
            s,
            "nvsoak_phase_info",
            &[("target", "v"), ("profile", "readback")],
        )
        .len()
            == 1
    });
    // 64 corrupted units from 2 MiB on: the random read-back hits each again and again.
    for i in 0..64u64 {
        let off = (2 << 20) + i * 65536;
        let mut u = read_unit(&path, off);
        u[100] ^= 0x5A;
        write_at(&path, off, &u);
    }
    let s = d.scrape_until(Duration::from_secs(30), |s| {
        verify_errors(s, "v", "bad_checksum") >= 300.0
    });
    let counted = verify_errors(&s, "v", "bad_checksum");
    assert!(counted >= 300.0, "only {counted} mismatches counted");
    let (status, _, err) = d.terminate();
    assert!(status.success(), "{err}");
    let lines: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("data verification failed on target v"))
        .collect();
    let full = lines
        .iter()
        .filter(|l| !l.contains("more mismatch"))
        .count();
    let summaries: Vec<&&str> = lines
        .iter()
        .filter(|l| l.contains("more mismatch"))
        .collect();
    assert!(
        (1..=8).contains(&full),
        "{full} full lines, expected the first 1-8 failing blocks:\n{err}"
    );
    assert!(
        !summaries.is_empty() && summaries.len() <= 8,
        "{} summary lines:\n{err}",
        summaries.len()
    );
    let summed: u64 = summaries
        .iter()
        .filter_map(|l| {
            let (_, rest) = l.split_once("target v: ")?;
            rest.split_whitespace().next()?.parse::<u64>().ok()
        })
        .sum();
    assert!(
        summed + full as u64 >= counted as u64,
        "the log accounts for {summed} + {full} of {counted} mismatches:\n{err}"
    );
    assert!(
        summaries
            .iter()
            .all(|l| l.contains("bad_checksum") && l.contains("at offsets 2097")),
        "a summary lacks its kinds or offset range:\n{err}"
    );
}

/// `nvsoak_verify_state_bytes` and the results file's `verify_state` carry what the 16 MiB
/// target's generation map keeps: 4096 units x 2 bytes + 64 words of recovered bits.
#[test]
fn the_verification_state_size_is_on_metrics_and_in_the_results_file() {
    let want = 4096.0 * 2.0 + 64.0 * 8.0;
    // The stored map (the plan would get the computed state; tests/it/walk.rs has that).
    let d = Daemon::start_in_env(
        crate::common::shm_dir(),
        CFG,
        &[("NVSOAK_VERIFY_STATE", "stored")],
    );
    let s = d.scrape_until(Duration::from_secs(20), |s| {
        !crate::common::find(s, "nvsoak_verify_state_bytes", &[("target", "v")]).is_empty()
    });
    assert_eq!(
        sum(
            &s,
            "nvsoak_verify_state_bytes",
            &[("target", "v"), ("scheme", "stored_map")]
        ),
        want
    );
    // The results file is written at each phase's end (the precondition's is within seconds).
    let p = d.dir.path().join("state/results/v.json");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let r = loop {
        let r = std::fs::read(&p)
            .ok()
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok());
        match r {
            Some(r) if !r["verify_state"].is_null() => break r,
            _ if std::time::Instant::now() > deadline => {
                panic!("{} has no verify_state within 30 s: {r:?}", p.display())
            }
            _ => std::thread::sleep(Duration::from_millis(200)),
        }
    };
    assert_eq!(
        r["verify_state"]["scheme"], "stored_map",
        "{}",
        r["verify_state"]
    );
    assert_eq!(
        r["verify_state"]["state_bytes"], 8704,
        "{}",
        r["verify_state"]
    );
    d.terminate();
}
