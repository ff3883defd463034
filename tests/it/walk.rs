//! The computed verification state (`model::walk`) end to end: a verified random-write soak
//! keeps a few bytes of state instead of a map, still catches corruption, misdirected and lost
//! writes, survives kill -9 with no false mismatch, and verifies 24 targets of 16 TB (loop
//! devices) in a few megabytes.

use std::time::Duration;

use crate::common::{Daemon, sum};
use crate::safety::{Scratch, p};

use crate::verify::{UNIT, read_unit, verify_errors as errors, write_at};

fn all_errors(s: &[crate::common::Sample], target: &str) -> f64 {
    sum(s, "nvsoak_verify_errors_total", &[("target", target)])
}

/// The daemon's peak resident set, from /proc.
fn peak_rss_bytes(d: &Daemon) -> u64 {
    let st = std::fs::read_to_string(format!("/proc/{}/status", d.child.id())).expect("status");
    st.lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .expect("VmHWM")
        * 1024
}

fn phase_is(s: &[crate::common::Sample], target: &str, profile: &str) -> bool {
    !crate::common::find(
        s,
        "nvsoak_phase_info",
        &[("target", target), ("profile", profile)],
    )
    .is_empty()
}

/// Random 4K writes mixed with reads by two workers (the permuted walk), then random reads.
const MIXED: &str = r#"
[state]
dir = "{dir}/state"
checkpoint_interval = "1s"
[health]
enabled = false
[[target]]
name = "w"
path = "{dir}/w.dat"
size = "16MiB"
engine = "io_uring"
verify = "inline"
[[target.phase]]
kind = "soak"
{job}
duration = "4s"
[[target.phase]]
kind = "soak"
job = { name = "readback", read = 100, bs = "4k", access = "random", iodepth = 8, rate = "20000iops" }
duration = "10m"
"#;

/// The job of the mix phase in [`MIXED`]: random 4K by two workers.
const UNIFORM_4K: &str =
    r#"job = { name = "mix", read = 40, bs = "4k", access = "random", iodepth = 8, workers = 2 }"#;
/// A database-like job: mixed block sizes (4K to 64K) and a hot band (70% of the I/Os to 10%
/// of the region), as the built-in SQL, Oracle and VDI profiles are.
const HOT_MIXED: &str = r#"job = { name = "mix", read = 45, bs = "4k:60,8k:10,16k:10,32k:10,64k:10", access = "random", skew = "hotband:10%:70%", iodepth = 16, workers = 2 }"#;

#[test]
fn a_random_write_soak_on_the_computed_state_catches_corruption_misdirection_and_lost_writes() {
    soak_catches_corruption(UNIFORM_4K);
}

#[test]
fn a_hot_band_mixed_size_soak_on_the_computed_state_catches_corruption_misdirection_and_lost_writes()
 {
    soak_catches_corruption(HOT_MIXED);
}

fn soak_catches_corruption(job: &str) {
    let d = Daemon::start(&MIXED.replace("{job}", job));
    let path = d.dir.path().join("w.dat");
    let s = d.scrape_until(Duration::from_secs(30), |s| phase_is(s, "w", "mix"));
    assert!(phase_is(&s, "w", "mix"));
    // A unit's copy from the mix, which the mix then writes again (16 MiB is 4,096 units;
    // the mix writes tens of thousands a second).
    let stale_off = 12 << 20;
    let old = read_unit(&path, stale_off);
    let s = d.scrape_until(Duration::from_secs(30), |s| phase_is(s, "w", "readback"));
    assert!(phase_is(&s, "w", "readback"), "the mix did not end");
    assert!(sum(&s, "nvsoak_write_ops_total", &[("target", "w")]) > 4096.0);
    // 20,000 random reads of the region's 4,096 units: all but a few read back, including
    // the blocks the mix's workers stopped inside.
    let reads = sum(&s, "nvsoak_read_ops_total", &[("target", "w")]);
    let s = d.scrape_until(Duration::from_secs(60), |s| {
        sum(s, "nvsoak_read_ops_total", &[("target", "w")]) > reads + 20_000.0
    });
    assert!(sum(&s, "nvsoak_read_ops_total", &[("target", "w")]) > reads + 20_000.0);
    assert_eq!(all_errors(&s, "w"), 0.0, "false mismatches in a clean run");
    assert_ne!(
        old,
        read_unit(&path, stale_off),
        "the mix did not rewrite 12 MiB"
    );
    // No generation map sidecar: the checkpoint holds the state.
    let cp = std::fs::read_to_string(d.dir.path().join("state/checkpoint.json")).expect("cp");
    assert!(
        cp.contains("\"verify_walk\""),
        "no computed state in the checkpoint"
    );
    let sidecars = std::fs::read_dir(d.dir.path().join("state"))
        .expect("state dir")
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.file_name().to_string_lossy().starts_with("genmap-"))
        })
        .count();
    assert_eq!(sidecars, 0, "a generation map was saved");

    // Corruption at the two ends of the region.
    for off in [UNIT, (16 << 20) - 2 * UNIT] {
        let mut u = read_unit(&path, off);
        for b in &mut u[2000..2016] {
            *b ^= 0x5A;
        }
        write_at(&path, off, &u);
    }
    let s = d.scrape_until(Duration::from_secs(30), |s| {
        errors(s, "w", "bad_checksum") >= 2.0
    });
    assert!(errors(&s, "w", "bad_checksum") >= 2.0, "corruption missed");
    // A misdirected write and a lost one.
    write_at(&path, 9 << 20, &read_unit(&path, 5 << 20));
    write_at(&path, stale_off, &old);
    let s = d.scrape_until(Duration::from_secs(30), |s| {
        errors(s, "w", "wrong_offset") > 0.0 && errors(s, "w", "stale_generation") > 0.0
    });
    assert!(
        errors(&s, "w", "wrong_offset") > 0.0,
        "misdirected write missed"
    );
    assert!(
        errors(&s, "w", "stale_generation") > 0.0,
        "lost write missed"
    );
    let (status, _, err) = d.terminate();
    assert!(status.success(), "{err}");
    assert!(
        err.contains("scheme=\"computed walk\""),
        "not the computed state:\n{err}"
    );
    for off in [UNIT, 9 << 20, stale_off] {
        assert!(
            err.contains(&format!("offset={off}")),
            "no log line for offset {off}"
        );
    }
}

#[test]
fn kill9_in_a_random_write_soak_resumes_the_computed_state_without_false_mismatches() {
    kill9_resumes(
        r#"job = { name = "mix", read = 60, bs = "4k", access = "random", iodepth = 16, workers = 2 }"#,
    );
}

#[test]
fn kill9_in_a_hot_band_mixed_size_soak_resumes_the_computed_state_without_false_mismatches() {
    kill9_resumes(HOT_MIXED);
}

fn kill9_resumes(job: &str) {
    let cfg = &r#"
[state]
dir = "{dir}/state"
checkpoint_interval = "1s"
[health]
enabled = false
[[target]]
name = "k"
path = "{dir}/k.dat"
size = "16MiB"
engine = "io_uring"
verify = "inline"
[[target.phase]]
kind = "precondition"
passes = 1
[[target.phase]]
kind = "soak"
{job}
duration = "10m"
"#
    .replace("{job}", job);
    let d = Daemon::start(cfg);
    let s = d.scrape_until(Duration::from_secs(30), |s| {
        sum(s, "nvsoak_soak_elapsed_seconds", &[("target", "k")]) >= 3.0
    });
    assert!(sum(&s, "nvsoak_write_ops_total", &[("target", "k")]) > 1000.0);
    assert_eq!(all_errors(&s, "k"), 0.0, "false mismatches in a clean run");
    let mut dir = d.kill9();
    // Twice: the second restart resumes a state that already went through one.
    for round in 0..2 {
        let d = Daemon::start_in(dir, cfg, &[]);
        let before = sum(&d.scrape(), "nvsoak_read_ops_total", &[("target", "k")]);
        let s = d.scrape_until(Duration::from_secs(120), |s| {
            sum(s, "nvsoak_read_ops_total", &[("target", "k")]) > before + 100_000.0
        });
        assert!(
            sum(&s, "nvsoak_read_ops_total", &[("target", "k")]) > before + 100_000.0,
            "round {round}: the resumed soak made no progress"
        );
        assert_eq!(
            crate::common::find(&s, "nvsoak_verify_errors_total", &[("target", "k")]).len(),
            4,
            "round {round}: verification is not on"
        );
        assert_eq!(
            all_errors(&s, "k"),
            0.0,
            "round {round}: false mismatches after kill -9 and resume"
        );
        dir = d.kill9();
    }
}

/// 24 verified targets of 16 TB each (loop devices over sparse files), soaked at once with
/// random writes and reads: the state stays bytes, the daemon megabytes. As stored maps they
/// would need 8.3 GB each, 200 GB in all.
#[test]
fn twenty_four_16_tb_targets_verify_in_megabytes() {
    let Some(mut s) = Scratch::new("twenty_four_16_tb_targets_verify_in_megabytes") else {
        return;
    };
    let mut cfg = String::from(
        r#"
[state]
dir = "{dir}/state"
checkpoint_interval = "1s"
[health]
enabled = false
"#,
    );
    for i in 0..24 {
        // 16.0 TB (15,258,789 MiB): 3.9 billion units.
        let dev = s.loop_dev(15_258_789, false);
        cfg.push_str(&format!(
            r#"
[[target]]
name = "t{i}"
path = "{dev}"
allow_destroy = "{dev}"
engine = "io_uring"
verify = "inline"
[[target.phase]]
kind = "soak"
job = {{ name = "mix", read = 50, bs = "4k", access = "random", iodepth = 4, workers = 2, rate = "600iops" }}
duration = "10m"
"#,
            dev = p(&dev)
        ));
    }
    let targets: Vec<String> = (0..24).map(|i| format!("t{i}")).collect();
    let d = Daemon::start(&cfg);
    let s = d.scrape_until(Duration::from_secs(180), |s| {
        targets
            .iter()
            .all(|t| sum(s, "nvsoak_write_ops_total", &[("target", t)]) > 1000.0)
    });
    for t in &targets {
        assert!(
            sum(&s, "nvsoak_write_ops_total", &[("target", t)]) > 1000.0,
            "{t} did not write"
        );
        assert_eq!(all_errors(&s, t), 0.0, "false mismatches on {t}");
    }
    let rss = peak_rss_bytes(&d);
    eprintln!("24 verified targets of 16 TB: peak RSS {} MiB", rss >> 20);
    // The issue's bound is 2 GiB for all 24; stored maps would need 200 GB.
    assert!(rss < 512 << 20, "peak RSS {rss} bytes");
    let cp = std::fs::read(d.dir.path().join("state/checkpoint.json")).expect("checkpoint");
    eprintln!("checkpoint of 24 verified targets: {} bytes", cp.len());
    assert!(cp.len() < 1 << 20, "checkpoint of {} bytes", cp.len());
    let (status, _, err) = d.terminate();
    assert!(status.success(), "{err}");
    let walks = err
        .lines()
        .filter(|l| l.contains("data verification on") && l.contains("scheme=\"computed walk\""))
        .count();
    assert_eq!(walks, 24, "not every target on the computed state:\n{err}");
}

/// Whether `u` is a whole unit as nvsoak stamps it: its magic, and a crc32c that matches.
fn stamped_whole(u: &[u8]) -> bool {
    let mut z = u.to_vec();
    z[20..24].fill(0);
    &u[..8] == b"NVSOAKv1" && u32::from_le_bytes([u[20], u[21], u[22], u[23]]) == crc32c::crc32c(&z)
}

/// The first offset at or after `from` that holds data in the sparse file `path`
/// (`SEEK_DATA`), if any.
fn next_data(path: &std::path::Path, from: u64) -> Option<u64> {
    let f = std::fs::File::open(path).expect("opening the backing file");
    nix::unistd::lseek(&f, from as i64, nix::unistd::Whence::SeekData)
        .ok()
        .map(|o| o as u64)
}

/// A verified random-write soak on a 16 TB region: in 20 s it writes a few hundred thousand
/// units scattered over 3.9 billion, and three of them, terabytes apart, are corrupted on the
/// device behind nvsoak's back. The verification pass reads back exactly what the soak wrote
/// (a sequential sweep would read 16 TB of nothing) and finds all three, with no false
/// mismatch; the state stays bytes and the daemon tens of megabytes.
#[test]
fn corruption_terabytes_apart_on_a_16_tb_soak_is_found_by_the_read_back() {
    read_back_finds_corruption(
        "corruption_terabytes_apart_on_a_16_tb_soak_is_found_by_the_read_back",
        r#"bs = "4k", access = "random""#,
    );
}

/// The same with mixed block sizes and a hot band: the read-back reads each leg's blocks
/// (64 KiB, written whole or in pieces), both bands' slices of every worker.
#[test]
fn corruption_terabytes_apart_on_a_16_tb_hot_band_mixed_size_soak_is_found_by_the_read_back() {
    read_back_finds_corruption(
        "corruption_terabytes_apart_on_a_16_tb_hot_band_mixed_size_soak_is_found_by_the_read_back",
        r#"bs = "4k:60,8k:10,16k:10,32k:10,64k:10", access = "random", skew = "hotband:10%:70%""#,
    );
}

fn read_back_finds_corruption(name: &str, job: &str) {
    let Some(mut s) = Scratch::new(name) else {
        return;
    };
    // 16.0 TB (15,258,789 MiB) on a sparse tmpfs file.
    let dev = s.loop_dev(15_258_789, false);
    let backing = s.dir.path().join("loop0.img");
    assert!(backing.exists(), "the loop device's backing file moved");
    let cfg = format!(
        r#"
[state]
dir = "{{dir}}/state"
checkpoint_interval = "1s"
[health]
enabled = false
[[target]]
name = "big"
path = "{dev}"
allow_destroy = "{dev}"
engine = "io_uring"
verify = "pass"
[[target.phase]]
kind = "soak"
job = {{ name = "rw", read = 0, {job}, iodepth = 8, workers = 2 }}
duration = "20s"
[[target.phase]]
kind = "soak"
job = {{ name = "after", read = 100, bs = "4k", access = "random", iodepth = 1, rate = "50iops" }}
duration = "10m"
"#,
        dev = p(&dev)
    );
    let d = Daemon::start(&cfg);
    let s1 = d.scrape_until(Duration::from_secs(60), |s| {
        phase_is(s, "big", "rw")
            && sum(s, "nvsoak_write_ops_total", &[("target", "big")]) > 20_000.0
    });
    assert!(phase_is(&s1, "big", "rw"), "the soak did not start");
    // Plant corruption in written units near the start, the middle and the end of the 16 TB:
    // each the first whole stamped unit at or after a probe point. A random walk writes each
    // block once per pass, so nothing rewrites them before the pass reads them back.
    let tb: u64 = 1_000_000_000_000;
    let mut planted = Vec::new();
    for probe in [0, 8 * tb, 15 * tb] {
        let mut at = probe;
        let off = loop {
            let Some(o) = next_data(&backing, at) else {
                panic!("no data written after {probe}");
            };
            let o = o / UNIT * UNIT;
            if stamped_whole(&read_unit(&backing, o)) {
                break o;
            }
            at = o + UNIT;
        };
        let mut u = read_unit(&backing, off);
        for b in &mut u[2000..2016] {
            *b ^= 0x5A;
        }
        // Through the backing file, whose page cache the loop device reads.
        write_at(&backing, off, &u);
        planted.push(off);
    }
    assert!(
        planted[1] - planted[0] > 7 * tb && planted[2] - planted[1] > 6 * tb,
        "{planted:?}"
    );
    let s2 = d.scrape_until(Duration::from_secs(240), |s| {
        errors(s, "big", "bad_checksum") >= 3.0 || phase_is(s, "big", "after")
    });
    let s2 = if errors(&s2, "big", "bad_checksum") >= 3.0 {
        s2
    } else {
        // The pass ended: its figures are in the next scrape.
        d.scrape_until(Duration::from_secs(10), |s| {
            errors(s, "big", "bad_checksum") >= 3.0
        })
    };
    assert_eq!(
        errors(&s2, "big", "bad_checksum"),
        3.0,
        "not every planted corruption was found"
    );
    for kind in ["stale_generation", "wrong_offset", "unreadable"] {
        assert_eq!(errors(&s2, "big", kind), 0.0, "false {kind} mismatches");
    }
    let writes = sum(&s2, "nvsoak_write_ops_total", &[("target", "big")]);
    let state = sum(&s2, "nvsoak_verify_state_bytes", &[("target", "big")]);
    assert!(
        state > 0.0 && state < (64 << 20) as f64,
        "state of {state} bytes"
    );
    let rss = peak_rss_bytes(&d);
    eprintln!(
        "16 TB verified soak: {writes} units written, state {state} bytes, peak RSS {} MiB",
        rss >> 20
    );
    assert!(rss < 256 << 20, "peak RSS {rss} bytes");
    let s3 = d.scrape_until(Duration::from_secs(240), |s| phase_is(s, "big", "after"));
    assert!(
        phase_is(&s3, "big", "after"),
        "the verification pass did not end"
    );
    let (status, _, err) = d.terminate();
    assert!(status.success(), "{err}");
    for off in &planted {
        assert!(
            err.contains(&format!("offset={off}")),
            "no log line for offset {off}:\n{err}"
        );
    }
    // The pass read back at least every unit the soak wrote.
    let line = err
        .lines()
        .find(|l| l.contains("read back what the soak wrote"))
        .unwrap_or_else(|| panic!("no read-back line:\n{err}"));
    let bytes: f64 = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix("bytes="))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no bytes in {line}"));
    assert!(
        bytes >= writes * UNIT as f64,
        "read back {bytes} bytes of {writes} units:\n{line}"
    );
}
