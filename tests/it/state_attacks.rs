//! The state directory tried as an attacker and a careless operator would (issue 28, break 1):
//! its `lock` a symlink to a victim, a hard link to one or a FIFO; `state.dir` pointed at another
//! application's directory, named directly or through a symlink; a world-writable directory; and
//! `nvsoak state reset` while a daemon holds the state. Each is refused by `run` and by
//! `check-config` with the same message, and every byte of what was there is left as it was:
//! nothing truncated, nothing moved aside.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use crate::common::{Daemon, free_port, run_nvsoak};

/// A health-only plan (no target) whose state lives in `state`.
fn plan(state: &Path) -> String {
    format!(
        "[state]\ndir = \"{}\"\n[health]\nenabled = false\n",
        state.display()
    )
}

/// The message `main` prints after `nvsoak: `.
fn error_line(stderr: &str) -> String {
    stderr
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("nvsoak: "))
        .unwrap_or_else(|| panic!("no error line in:\n{stderr}"))
        .to_string()
}

/// `check-config` and `run` both refuse a plan on `state`; `run`'s message holds
/// `check-config`'s whole and `want`. Returns `run`'s.
fn both_refuse(scratch: &Path, state: &Path, want: &str) -> String {
    let cfg = scratch.join(format!("plan-{}.toml", free_port()));
    fs::write(&cfg, plan(state)).expect("writing the plan");
    let c = cfg.to_str().expect("utf-8 path");
    let (code, err) = run_nvsoak(&["check-config", c], "warn");
    assert_ne!(code, Some(0), "check-config approved it:\n{err}");
    let checked = error_line(&err);
    let addr = format!("127.0.0.1:{}", free_port());
    let (code, err) = run_nvsoak(
        &[
            "run",
            "--config",
            c,
            "--web.listen-address",
            &addr,
            "--exit-when-done",
        ],
        "warn",
    );
    assert_ne!(code, Some(0), "run did not refuse:\n{err}");
    let ran = error_line(&err);
    assert!(
        ran.contains(&checked),
        "check-config: {checked}\nrun: {ran}"
    );
    assert!(ran.contains(want), "{ran}");
    ran
}

/// Every file under `dir` (not following symlinks) with its bytes, sorted by name.
fn contents(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<_> = fs::read_dir(dir)
        .expect("listing")
        .flatten()
        .map(|e| {
            let p = e.path();
            let m = fs::symlink_metadata(&p).expect("lstat");
            let bytes = if m.file_type().is_file() {
                fs::read(&p).expect("read")
            } else if m.file_type().is_symlink() {
                fs::read_link(&p)
                    .expect("readlink")
                    .into_os_string()
                    .into_encoded_bytes()
            } else {
                Vec::new()
            };
            (e.file_name().to_string_lossy().into_owned(), bytes)
        })
        .collect();
    v.sort();
    v
}

#[test]
fn state_lock_symlinked_to_a_victim_leaves_the_victim_whole() {
    let d = tempfile::tempdir().expect("tempdir");
    let victim = d.path().join("victim.bin");
    let bytes: Vec<u8> = (0..4u32 << 20).map(|i| (i * 7 % 251) as u8).collect();
    fs::write(&victim, &bytes).expect("victim");
    let st = d.path().join("st");
    fs::create_dir(&st).expect("mkdir");
    std::os::unix::fs::symlink(&victim, st.join("lock")).expect("symlink");
    both_refuse(d.path(), &st, "its lock is a symbolic link");
    assert_eq!(
        fs::read(&victim).expect("victim"),
        bytes,
        "the victim changed"
    );
    // The neighbours: a hard link to the victim and a FIFO in the lock's place.
    fs::remove_file(st.join("lock")).expect("rm");
    fs::hard_link(&victim, st.join("lock")).expect("hard link");
    both_refuse(d.path(), &st, "hard links");
    assert_eq!(
        fs::read(&victim).expect("victim"),
        bytes,
        "the victim changed"
    );
    fs::remove_file(st.join("lock")).expect("rm");
    nix::unistd::mkfifo(
        &st.join("lock"),
        nix::sys::stat::Mode::from_bits_truncate(0o600),
    )
    .expect("mkfifo");
    both_refuse(d.path(), &st, "not a regular file");
    // A symlinked checkpoint in a directory without a lock.
    fs::remove_file(st.join("lock")).expect("rm");
    std::os::unix::fs::symlink(&victim, st.join("checkpoint.json")).expect("symlink");
    both_refuse(d.path(), &st, "checkpoint.json is a symbolic link");
    assert_eq!(
        fs::read(&victim).expect("victim"),
        bytes,
        "the victim changed"
    );
}

#[test]
fn another_applications_directory_is_refused_and_left_as_it_was() {
    let d = tempfile::tempdir().expect("tempdir");
    let app = d.path().join("app");
    fs::create_dir(&app).expect("mkdir");
    // An application that also keeps a pid lock and a checkpoint.json.
    fs::write(app.join("lock"), "4242\n").expect("lock");
    fs::write(app.join("checkpoint.json"), r#"{"wal": 17, "epoch": 3}"#).expect("cp");
    fs::write(app.join("data.db"), vec![0x5au8; 1 << 20]).expect("db");
    let before = contents(&app);
    both_refuse(d.path(), &app, "\"data.db\", which nvsoak never writes");
    let link = d.path().join("via-link");
    std::os::unix::fs::symlink(&app, &link).expect("symlink");
    both_refuse(d.path(), &link, "is not nvsoak's");
    // Only a lock and a checkpoint of another shape: still not nvsoak's.
    fs::remove_file(app.join("data.db")).expect("rm");
    both_refuse(d.path(), &app, "checkpoint.json is not one nvsoak wrote");
    // A lock that is not a PID at all.
    fs::write(app.join("lock"), "postgres 4242\n").expect("lock");
    both_refuse(
        d.path(),
        &app,
        "its lock holds something nvsoak never writes",
    );
    fs::write(app.join("lock"), "4242\n").expect("lock");
    fs::write(app.join("data.db"), vec![0x5au8; 1 << 20]).expect("db");
    assert_eq!(contents(&app), before, "the application's files changed");
    // `state reset` on it changes nothing either.
    let (code, err) = run_nvsoak(
        &["state", "reset", "--state", app.to_str().expect("utf-8")],
        "warn",
    );
    assert_ne!(code, Some(0), "{err}");
    assert!(err.contains("is not nvsoak's"), "{err}");
    assert_eq!(
        contents(&app),
        before,
        "state reset changed the application's files"
    );
}

#[test]
fn a_world_writable_state_directory_is_refused() {
    let d = tempfile::tempdir().expect("tempdir");
    let st = d.path().join("st");
    fs::create_dir(&st).expect("mkdir");
    fs::set_permissions(&st, fs::Permissions::from_mode(0o777)).expect("chmod");
    both_refuse(
        d.path(),
        &st,
        "writable by its group or by everyone (mode 777)",
    );
    assert!(!st.join("lock").exists(), "a lock was made in it");
}

#[test]
fn state_reset_refuses_while_a_daemon_holds_the_state() {
    let d = Daemon::start("[state]\ndir = \"{dir}/state\"\n[health]\nenabled = false\n");
    let state = d.dir.path().join("state");
    let pid = d.child.id().to_string();
    // The daemon serves only once it holds the state; the lock names it.
    assert_eq!(
        fs::read_to_string(state.join("lock")).expect("lock"),
        format!("nvsoak pid={pid}\n")
    );
    let (code, err) = run_nvsoak(
        &["state", "reset", "--state", state.to_str().expect("utf-8")],
        "warn",
    );
    assert_ne!(code, Some(0), "reset ran beside the daemon:\n{err}");
    assert!(
        err.contains(&format!("held by a running nvsoak (pid {pid})")),
        "{err}"
    );
    assert!(
        !fs::read_dir(&state)
            .expect("listing")
            .flatten()
            .any(|e| e.file_name().to_string_lossy().contains(".reset-")),
        "something was moved aside"
    );
    let (status, _, err) = d.terminate();
    assert!(status.success(), "{err}");
    // Once it stopped, the reset runs.
    let (code, err) = run_nvsoak(
        &["state", "reset", "--state", state.to_str().expect("utf-8")],
        "warn",
    );
    assert_eq!(code, Some(0), "{err}");
}

/// A soak of a minute on a small file target, its results refreshed every 200 ms.
const SOAK: &str = r#"
[state]
dir = "{dir}/state"
checkpoint_interval = "200ms"
[health]
enabled = false
[[target]]
name = "t0"
path = "{dir}/t0.dat"
size = "16MiB"
engine = "psync"
[[target.phase]]
kind = "soak"
profile = "4k-random-read"
iodepth = 2
rate = "2000iops"
duration = "1m"
"#;

/// Start [`SOAK`] and wait until its results file is on disk.
fn soaking() -> Daemon {
    let d = Daemon::spawn_in_env(
        crate::common::shm_dir(),
        SOAK,
        &[],
        &[("NVSOAK_TEST_RESULTS_SAVE_MS", "200")],
    );
    let results = d.dir.path().join("state/results/t0.json");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !results.is_file() {
        assert!(
            std::time::Instant::now() < deadline,
            "no results file within 30 s"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    d
}

/// SIGTERM, keeping the scratch directory to look at afterwards.
fn terminate_keeping(
    mut d: Daemon,
) -> (
    tempfile::TempDir,
    (std::process::ExitStatus, std::time::Duration, String),
) {
    let dir = std::mem::replace(&mut d.dir, crate::common::shm_dir());
    (dir, d.terminate())
}

#[test]
fn symlinks_inside_the_state_directory_are_refused_at_start_and_their_targets_left_whole() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let victim_dir = scratch.path().join("victim-dir");
    fs::create_dir(&victim_dir).expect("mkdir");
    fs::write(victim_dir.join("t0.json"), b"another application's").expect("write");
    let victim_file = scratch.path().join("victim-file");
    fs::write(&victim_file, b"precious").expect("write");
    for (name, to) in [
        ("results", &victim_dir),
        ("marks", &victim_dir),
        ("results", &victim_file),
    ] {
        let state = tempfile::tempdir_in(scratch.path()).expect("tempdir");
        let state = state.keep();
        std::os::unix::fs::symlink(to, state.join(name)).expect("symlink");
        let before = (contents(&victim_dir), fs::read(&victim_file).expect("read"));
        let msg = both_refuse(
            scratch.path(),
            &state,
            &format!("its {name} is a symbolic link"),
        );
        assert!(msg.contains("never follows one"), "{msg}");
        assert_eq!(
            (contents(&victim_dir), fs::read(&victim_file).expect("read")),
            before,
            "{name}: the link's target changed"
        );
        assert_eq!(
            contents(&state).len(),
            1,
            "{name}: nothing was made beside the link"
        );
    }
}

#[test]
fn symlinks_inside_the_state_directory_made_mid_run_are_never_followed() {
    let d = soaking();
    let state = d.dir.path().join("state");
    let victim = d.dir.path().join("victim");
    fs::create_dir(&victim).expect("mkdir");
    // The results folder swapped for a link to another directory while the soak runs: every
    // later save of the results (the one at shutdown at least) meets the link.
    fs::rename(state.join("results"), state.join("kept-by-test")).expect("mv");
    std::os::unix::fs::symlink(&victim, state.join("results")).expect("symlink");
    let (_kept, (status, _, err)) = terminate_keeping(d);
    assert!(status.success(), "{err}");
    assert_eq!(
        contents(&victim),
        Vec::new(),
        "written through the link:\n{err}"
    );
    assert!(err.contains("writing results failed"), "{err}");
    assert!(
        state.join("kept-by-test/t0.json").is_file(),
        "the earlier record is where it was"
    );
}

#[test]
fn a_state_directory_swapped_for_a_symlink_mid_run_keeps_its_records_where_it_was_checked() {
    let d = soaking();
    let state = d.dir.path().join("state");
    let moved = d.dir.path().join("state-moved");
    let victim = d.dir.path().join("victim");
    fs::create_dir(&victim).expect("mkdir");
    let before = fs::read(state.join("results/t0.json")).expect("read");
    let swapped_at = nvsoak::util::unix_now();
    fs::rename(&state, &moved).expect("mv");
    std::os::unix::fs::symlink(&victim, &state).expect("symlink");
    let (_kept, (status, _, err)) = terminate_keeping(d);
    assert!(status.success(), "{err}");
    assert_eq!(
        contents(&victim),
        Vec::new(),
        "written through the swapped path:\n{err}"
    );
    // The shutdown's saves went to the directory the lock checked, by its descriptor.
    let after = fs::read(moved.join("results/t0.json")).expect("read");
    assert_ne!(after, before, "the results were not saved at shutdown");
    let cp = nvsoak::state::read(&moved)
        .expect("readable")
        .expect("a checkpoint");
    assert!(cp.saved_at >= swapped_at, "{} < {swapped_at}", cp.saved_at);
}
