//! Unit tests of the checkpoint, its sidecars, moving aside and the save counters.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

use super::sidecar::is_sidecar;
use super::*;
use crate::model::checkpoint::Checkpoint;
use crate::model::checkpoint::{PreconditionProgress, StripeProgress, TargetState};
use crate::model::genmap::GenMap;
use crate::model::totals::Totals;

fn sample() -> Checkpoint {
    let mut t = TargetState::new("t0", "/dev/shm/t0.dat");
    t.phase_index = 2;
    t.phase_elapsed_secs = 123.5;
    t.loop_count = 1;
    t.soak_started = Some(1_700_000_000.25);
    t.totals = Totals {
        read_bytes: 1 << 40,
        write_bytes: 5 << 30,
        read_ops: 268_435_456,
        write_ops: 1_310_720,
        errors: 3,
        verify_errors: 1,
        verify_errors_by_kind: [("bad_checksum".to_string(), 1)].into(),
        verified_bytes: 3 << 30,
        soak_elapsed_secs: 86_400.0,
        cpu_user_ns: 12_345_678_901,
        cpu_sys_ns: 98_765_432_109,
    };
    t.steady_history = vec![100_000.0, 101_000.5, 99_000.0];
    t.smart_at_soak_start = Some(serde_json::json!({"data_units_written": 12345}));
    t.verify_seed = Some(0xdead_beef);
    t.precondition = Some(PreconditionProgress {
        passes: 2,
        block_size: 131_072,
        stripes: vec![
            StripeProgress {
                start: 0,
                len: 1 << 30,
                done_bytes: (1 << 30) + (1 << 20),
            },
            StripeProgress {
                start: 1 << 30,
                len: 1 << 30,
                done_bytes: 3 << 20,
            },
        ],
    });
    t.sweep = Some(crate::model::results::SweepResult {
        profile: "4k-random-read".into(),
        block_size: 4096.0,
        read_pct: 100,
        max_iops: 123_456.5,
        started: 1_700_000_100.5,
        finished: None,
        points: vec![crate::model::results::SweepPoint {
            pct: 0,
            iops: 123_456.5,
            ..Default::default()
        }],
    });
    Checkpoint::new("abc".into(), vec![t, TargetState::new("t1", "/dev/loop9")])
}

fn sample_map() -> GenMap {
    let m = GenMap::new(0, 4096 * 1000, 0xdead_beef);
    for i in (0..1000u64).step_by(3) {
        m.set(i * 4096, (i % 9 + 1) as u32);
    }
    m
}

fn aside(dir: &Path, why: &str) -> Vec<String> {
    fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(&format!(".{why}-")))
        .collect()
}

#[test]
fn save_load_round_trip() {
    let d = tempfile::tempdir().unwrap();
    let cp = sample();
    let map = sample_map();
    save(d.path(), &cp, &[("t0", &map)]).unwrap();
    let l = load(d.path(), "abc").unwrap().expect("a checkpoint");
    let mut want = cp.clone();
    want.targets[0].genmap = l.checkpoint.targets[0].genmap.clone();
    // Bit-exact, floats included (serde_json's `float_roundtrip`).
    assert_eq!(l.checkpoint, want);
    let r = l.checkpoint.targets[0].genmap.as_ref().unwrap();
    assert_eq!(r.units, 1000);
    assert_eq!(r.written_units, 334);
    assert!(l.genmaps["t0"].same_generations(&map));
    assert_eq!(l.genmaps["t0"].recovered_units(), 1000);
    assert!(!l.genmaps.contains_key("t1"));
    // Saving again replaces the sidecar; only this and the previous save's are kept.
    for _ in 0..3 {
        save(d.path(), &cp, &[("t0", &map)]).unwrap();
    }
    let sidecars = fs::read_dir(d.path())
        .unwrap()
        .flatten()
        .filter(|e| is_sidecar(&e.file_name().to_string_lossy()))
        .count();
    assert_eq!(sidecars, 2);
    assert!(load(d.path(), "abc").unwrap().is_some());
    // An unknown target name is an error, not a silent skip.
    assert!(matches!(
        save(d.path(), &cp, &[("nope", &map)]),
        Err(StateError::UnknownTarget(_))
    ));
}

#[test]
fn checkpoint_without_the_newer_fields_still_loads() {
    // A checkpoint saved before precondition and sweep progress existed.
    let d = tempfile::tempdir().unwrap();
    let mut v = serde_json::to_value(sample()).unwrap();
    for t in v["targets"].as_array_mut().unwrap() {
        let t = t.as_object_mut().unwrap();
        assert!(t.remove("precondition").is_some() && t.remove("sweep").is_some());
        t.remove("verify_seed");
        t.remove("genmap");
    }
    fs::write(
        d.path().join(CHECKPOINT_FILE),
        serde_json::to_vec(&v).unwrap(),
    )
    .unwrap();
    let l = load(d.path(), "abc")
        .unwrap()
        .expect("an old checkpoint loads");
    let t = &l.checkpoint.targets[0];
    assert_eq!(t.phase_index, 2);
    assert_eq!(t.precondition, None);
    assert_eq!(t.sweep, None);
    assert_eq!(t.totals.write_bytes, 5 << 30);
}

#[test]
fn checkpoint_with_the_removed_next_generation_still_loads() {
    // Checkpoints saved before `next_generation` (never set) was dropped carry the key.
    let d = tempfile::tempdir().unwrap();
    let mut v = serde_json::to_value(sample()).unwrap();
    for t in v["targets"].as_array_mut().unwrap() {
        let t = t.as_object_mut().unwrap();
        assert!(t.insert("next_generation".into(), 77.into()).is_none());
    }
    fs::write(
        d.path().join(CHECKPOINT_FILE),
        serde_json::to_vec(&v).unwrap(),
    )
    .unwrap();
    let l = load(d.path(), "abc")
        .unwrap()
        .expect("a checkpoint with next_generation loads");
    assert_eq!(l.checkpoint.targets[0], sample().targets[0]);
}

#[test]
fn precondition_position_arithmetic() {
    // A 10 KiB stripe with 4 KiB blocks: each pass is 4k, 4k, then a trimmed 2k block.
    let at = |done_bytes| StripeProgress {
        start: 1 << 20,
        len: 10 << 10,
        done_bytes,
    };
    let k = |n: u64| n << 10;
    assert_eq!(at(0).resume_point(3, 4096), (0, k(30)));
    assert_eq!(at(k(4)).resume_point(3, 4096), (k(4), k(26)));
    assert_eq!(at(k(8)).resume_point(3, 4096), (k(8), k(22)));
    // The stripe's end (after the short block) wraps to the next pass.
    assert_eq!(at(k(10)).resume_point(3, 4096), (0, k(20)));
    assert_eq!(at(k(14)).resume_point(3, 4096), (k(4), k(16)));
    // Not on a block boundary: rounded down to the block it is in (never ahead).
    assert_eq!(at(k(11)).resume_point(3, 4096), (0, k(20)));
    assert_eq!(at(k(17)).resume_point(3, 4096), (k(4), k(16)));
    assert_eq!(at(k(19)).clamped_done(3, 4096), k(18));
    // Done, and beyond (a checkpoint can never say more than the walk; clamp anyway).
    assert_eq!(at(k(30)).resume_point(3, 4096), (0, 0));
    assert_eq!(at(k(31)).resume_point(3, 4096), (0, 0));
    assert_eq!(at(k(99)).clamped_done(3, 4096), k(30));
    // Pass, fraction and offsets from the stripes together.
    let p = PreconditionProgress {
        passes: 2,
        block_size: 4096,
        stripes: vec![
            at(k(10) + k(4)),
            StripeProgress {
                start: 0,
                len: k(10),
                done_bytes: k(8),
            },
        ],
    };
    assert_eq!(p.total_bytes(), k(40));
    assert_eq!(p.done_bytes(), k(22));
    assert_eq!(p.pass_and_fraction(), (2, 0.1));
    assert_eq!(p.worker_offsets(), vec![(1 << 20) + k(4), k(8)]);
    assert!(!p.is_complete());
    assert_eq!(
        p.describe(),
        "pass 2 of 2, 10% into it, 55% overall (22.00 KiB of 40.00 KiB written)"
    );
    let full = PreconditionProgress {
        stripes: vec![
            at(k(20)),
            StripeProgress {
                start: 0,
                len: k(10),
                done_bytes: k(20),
            },
        ],
        ..p.clone()
    };
    assert!(full.is_complete());
    assert_eq!(full.pass_and_fraction(), (2, 1.0));
    let fresh = PreconditionProgress {
        stripes: vec![at(0)],
        ..p
    };
    assert_eq!(fresh.pass_and_fraction(), (1, 0.0));
}

#[test]
fn corrupt_checkpoint_is_moved_aside() {
    let d = tempfile::tempdir().unwrap();
    save(d.path(), &sample(), &[]).unwrap();
    let p = d.path().join(CHECKPOINT_FILE);
    let full = fs::read(&p).unwrap();
    // Truncated.
    fs::write(&p, &full[..full.len() / 2]).unwrap();
    assert!(load(d.path(), "abc").unwrap().is_none());
    assert!(!p.exists());
    assert_eq!(aside(d.path(), "corrupt").len(), 1);
    // Garbled.
    fs::write(&p, b"\x00\x01garbage{").unwrap();
    assert!(load(d.path(), "abc").unwrap().is_none());
    assert_eq!(aside(d.path(), "corrupt").len(), 2);
    // Another format version.
    let mut cp = sample();
    cp.version = 99;
    fs::write(&p, serde_json::to_vec(&cp).unwrap()).unwrap();
    assert!(matches!(read(d.path()), Err(StateError::Corrupt { .. })));
    assert!(load(d.path(), "abc").unwrap().is_none());
    assert_eq!(aside(d.path(), "corrupt").len(), 3);
}

#[test]
fn damaged_genmap_moves_the_checkpoint_aside() {
    let d = tempfile::tempdir().unwrap();
    save(d.path(), &sample(), &[("t0", &sample_map())]).unwrap();
    let cp = read(d.path()).unwrap().unwrap();
    let side = d.path().join(&cp.targets[0].genmap.as_ref().unwrap().file);
    let mut b = fs::read(&side).unwrap();
    b[40] ^= 0xff;
    fs::write(&side, &b).unwrap();
    assert!(load(d.path(), "abc").unwrap().is_none());
    assert!(!d.path().join(CHECKPOINT_FILE).exists());
    // The sidecar went aside with it, as evidence.
    assert_eq!(aside(d.path(), "corrupt").len(), 2);
    // Missing sidecar.
    save(d.path(), &sample(), &[("t0", &sample_map())]).unwrap();
    let cp = read(d.path()).unwrap().unwrap();
    fs::remove_file(d.path().join(&cp.targets[0].genmap.as_ref().unwrap().file)).unwrap();
    assert!(load(d.path(), "abc").unwrap().is_none());
}

#[test]
fn other_plan_is_moved_aside_as_stale() {
    let d = tempfile::tempdir().unwrap();
    save(d.path(), &sample(), &[]).unwrap();
    assert!(load(d.path(), "another-plan").unwrap().is_none());
    assert_eq!(aside(d.path(), "stale").len(), 1);
    assert!(load(d.path(), "abc").unwrap().is_none(), "never reused");
}

#[test]
fn leftover_temp_file_does_not_break_load() {
    let d = tempfile::tempdir().unwrap();
    save(d.path(), &sample(), &[("t0", &sample_map())]).unwrap();
    // A crash mid-save leaves a half-written temporary checkpoint and sidecar.
    let tmp = d.path().join(".checkpoint.json.tmp-999999-0");
    fs::write(&tmp, b"{\"version\": 1, \"plan_ha").unwrap();
    let tmp2 = d.path().join(".genmap-0-t0-1.bin.tmp-999999-1");
    fs::write(&tmp2, b"NVGEN").unwrap();
    let l = load(d.path(), "abc")
        .unwrap()
        .expect("the last complete save");
    assert_eq!(l.checkpoint.targets[0].phase_index, 2);
    assert!(!tmp.exists() && !tmp2.exists(), "leftovers are cleaned up");
    save(d.path(), &sample(), &[]).unwrap();
    assert!(load(d.path(), "abc").unwrap().is_some());
}

#[test]
fn checkpoint_is_always_parseable_while_saving() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().to_path_buf();
    let map = sample_map();
    save(&dir, &sample(), &[("t0", &map)]).unwrap();
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = {
        let dir = dir.clone();
        let done = done.clone();
        std::thread::spawn(move || {
            let mut reads = 0u64;
            while !done.load(Ordering::Relaxed) || reads == 0 {
                let cp = read(&dir).expect("parseable").expect("present");
                assert_eq!(cp.plan_hash, "abc");
                // The sidecar it names exists and matches (kept for one more save).
                if let Some(r) = &cp.targets[0].genmap
                    && let Err(e) = read_genmap(&dir, r)
                {
                    // It may have been superseded twice while we read; then it is gone,
                    // never half-written.
                    assert!(e.to_string().contains("missing"), "{e}");
                }
                reads += 1;
            }
            reads
        })
    };
    for i in 0..200u64 {
        let mut cp = sample();
        cp.targets[0].totals.read_ops = i;
        map.set(0, (i % 100 + 1) as u32);
        save(&dir, &cp, &[("t0", &map)]).unwrap();
    }
    done.store(true, Ordering::Relaxed);
    let reads = reader.join().expect("reader thread");
    assert!(reads > 0);
    let l = load(&dir, "abc").unwrap().unwrap();
    assert_eq!(l.checkpoint.targets[0].totals.read_ops, 199);
    assert_eq!(l.genmaps["t0"].get(0), 100);
}

#[test]
fn reset_moves_aside() {
    let d = tempfile::tempdir().unwrap();
    assert_eq!(reset(d.path()).unwrap(), Reset::default());
    save(d.path(), &sample(), &[("t0", &sample_map())]).unwrap();
    let to = reset(d.path()).unwrap().checkpoint.expect("moved");
    assert!(to.to_string_lossy().contains("checkpoint.json.reset-"));
    assert!(to.exists());
    assert!(load(d.path(), "abc").unwrap().is_none());
}

/// Issue 34: after `state reset` an older `genmap-0-bay01-….bin` stayed behind; only the one
/// the checkpoint named went aside. Every sidecar goes aside, none is deleted, and nothing
/// that is not a sidecar is touched.
#[test]
fn reset_moves_every_sidecar_aside_and_deletes_none() {
    let d = tempfile::tempdir().unwrap();
    // Two saves: the previous save's sidecar is kept beside the newest.
    save(d.path(), &sample(), &[("t0", &sample_map())]).unwrap();
    save(d.path(), &sample(), &[("t0", &sample_map())]).unwrap();
    // One no checkpoint names (a run of another plan), and a file that is not a sidecar.
    fs::write(d.path().join("genmap-3-bay01-17.bin"), b"old").unwrap();
    fs::write(d.path().join("notes.txt"), b"mine").unwrap();
    let sidecars = |d: &Path| -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("genmap-"))
            .collect();
        v.sort();
        v
    };
    let before = sidecars(d.path());
    assert!(before.len() >= 3, "{before:?}");
    let r = reset(d.path()).unwrap();
    assert!(r.checkpoint.is_some());
    assert_eq!(r.sidecars.len(), before.len(), "{r:?}");
    let after = sidecars(d.path());
    assert_eq!(after.len(), before.len(), "none deleted: {after:?}");
    for name in &before {
        assert!(!d.path().join(name).exists(), "{name} stayed");
        assert!(
            after
                .iter()
                .any(|a| a.starts_with(&format!("{name}.reset-"))),
            "{name} not moved aside: {after:?}"
        );
    }
    assert_eq!(fs::read(d.path().join("notes.txt")).unwrap(), b"mine");
    let moved = after
        .iter()
        .find(|a| a.starts_with("genmap-3-bay01-17.bin.reset-"))
        .expect("moved aside");
    assert_eq!(fs::read(d.path().join(moved)).unwrap(), b"old");
    // A second reset finds nothing more to move.
    assert_eq!(reset(d.path()).unwrap(), Reset::default());
}

#[test]
fn aside_names_parse_back_and_never_collide() {
    assert_eq!(
        parse_aside_name("t0.json.stale-1764573300"),
        Some(("t0.json", "stale", 1_764_573_300))
    );
    assert_eq!(
        parse_aside_name("a.b.json.reset-17-2"),
        Some(("a.b.json", "reset", 17))
    );
    assert_eq!(
        parse_aside_name("checkpoint.json.corrupt-5"),
        Some(("checkpoint.json", "corrupt", 5))
    );
    for bad in [
        "t0.json",
        "t0.json.stale",
        "t0.json.stale-x",
        "t0.json.other-5",
        "t0.json.stale-5-x",
        ".stale-5",
    ] {
        assert_eq!(parse_aside_name(bad), None, "{bad}");
    }
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("r.json");
    let sd = StateDir::open(d.path()).unwrap();
    let mut moved = Vec::new();
    for i in 0..3 {
        fs::write(&p, format!("run {i}")).unwrap();
        moved.push(move_file_aside(&sd, "r.json", "restart").unwrap());
    }
    assert!(!p.exists());
    for (i, m) in moved.iter().enumerate() {
        assert_eq!(fs::read_to_string(m).unwrap(), format!("run {i}"));
        let name = m.file_name().unwrap().to_str().unwrap();
        assert_eq!(parse_aside_name(name).map(|x| x.1), Some("restart"));
    }
}

#[test]
fn checkpoint_for_another_device_is_moved_aside() {
    let d = tempfile::tempdir().unwrap();
    let mut cp = sample();
    cp.targets[1].identity = Some("S123".into());
    save(d.path(), &cp, &[("t0", &sample_map())]).unwrap();
    let same: BTreeMap<String, String> = [("t1".to_string(), "S123".to_string())].into();
    assert!(load_for(d.path(), "abc", &same).unwrap().is_ok());
    // No current identity (a file) or none recorded: not compared.
    assert!(load_for(d.path(), "abc", &BTreeMap::new()).unwrap().is_ok());
    let other: BTreeMap<String, String> = [("t1".to_string(), "S999".to_string())].into();
    assert_eq!(
        load_for(d.path(), "abc", &other).unwrap().err(),
        Some(Fresh::OtherDevice)
    );
    assert!(!d.path().join(CHECKPOINT_FILE).exists());
    // The checkpoint and its sidecar, as evidence.
    assert_eq!(aside(d.path(), "device").len(), 2);
    assert_eq!(
        load_for(d.path(), "abc", &other).unwrap().err(),
        Some(Fresh::NoCheckpoint)
    );
}

#[test]
fn sidecar_of_another_target_is_not_used() {
    let d = tempfile::tempdir().unwrap();
    save(d.path(), &sample(), &[("t0", &sample_map())]).unwrap();
    // Point t1 at t0's sidecar (a hand-edited or mixed-up checkpoint).
    let mut cp = read(d.path()).unwrap().unwrap();
    cp.targets[1].genmap = cp.targets[0].genmap.clone();
    fs::write(
        d.path().join(CHECKPOINT_FILE),
        serde_json::to_vec(&cp).unwrap(),
    )
    .unwrap();
    assert_eq!(
        load_for(d.path(), "abc", &BTreeMap::new()).unwrap().err(),
        Some(Fresh::Corrupt)
    );
    assert_eq!(aside(d.path(), "corrupt").len(), 2);
}

#[test]
fn save_stats_count_and_time() {
    let s = SaveStats::default();
    assert_eq!(s.snapshot(), SaveStatsSnapshot::default());
    s.started();
    assert!(s.snapshot().in_flight);
    s.skipped_tick();
    s.finished(false, 0.5);
    let snap = s.snapshot();
    assert_eq!((snap.saves, snap.failures, snap.skipped_ticks), (0, 1, 1));
    assert_eq!(snap.last_success_unix, None);
    assert_eq!(snap.last_duration_secs, Some(0.5));
    assert!(!snap.in_flight);
    s.started();
    s.finished(true, 0.25);
    let snap = s.snapshot();
    assert_eq!((snap.saves, snap.failures), (1, 1));
    assert!(snap.last_success_unix.is_some_and(|t| t > 1.0e9));
    assert_eq!(snap.last_duration_secs, Some(0.25));
}

#[test]
fn state_dir_lock_is_exclusive() {
    let d = tempfile::tempdir().unwrap();
    let l = lock(d.path()).unwrap();
    assert_eq!(
        fs::read_to_string(&l.path).unwrap(),
        format!("nvsoak pid={}\n", std::process::id())
    );
    // flock locks belong to the open file, so a second open conflicts even in-process.
    let e = lock(d.path()).unwrap_err();
    assert!(matches!(e, StateError::Locked { .. }), "{e}");
    assert!(
        e.to_string()
            .contains(&format!("pid {}", std::process::id())),
        "{e}"
    );
    drop(l);
    lock(d.path()).expect("free again");
}

#[test]
fn plan_hash_tracks_the_plan() {
    let s = crate::config::builtin_default();
    let h = plan_hash(&s.targets);
    assert_eq!(h.len(), 64);
    assert_eq!(h, plan_hash(&s.targets.clone()));
    let mut t = s.targets.clone();
    t[0].name = "other".into();
    assert_ne!(h, plan_hash(&t));
}
