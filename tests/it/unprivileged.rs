//! nvsoak without root, on files. An unprivileged process may not look at root's processes'
//! open files and memory maps, so the in-use checks cannot say "no one" about every process.
//! On a file nvsoak made (or marked) that is nvsoak's own data, and the soak runs; on a file
//! that may be someone else's (named by `allow_destroy`), the checks still fail closed and
//! the file keeps its bytes.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};

use crate::common::free_port;

const NOBODY: u32 = 65534;

/// `nvsoak ARGS` run as `nobody` from the copy of the binary at `bin`: (exit code, stderr).
fn as_nobody(bin: &Path, args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
        ])
        .arg(bin)
        .args(args)
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .output()
        .expect("running nvsoak as nobody");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `nvsoak run --config CFG --exit-when-done` as `nobody`, on a port of its own.
fn run_as_nobody(bin: &Path, cfg: &str) -> (Option<i32>, String) {
    let addr = format!("127.0.0.1:{}", free_port());
    as_nobody(
        bin,
        &[
            "run",
            "--config",
            cfg,
            "--web.listen-address",
            &addr,
            "--exit-when-done",
        ],
    )
}

fn plan(state: &Path, path: &Path, allow_destroy: Option<&Path>) -> String {
    let allow = allow_destroy
        .map(|a| format!("allow_destroy = \"{}\"\n", a.display()))
        .unwrap_or_default();
    format!(
        r#"
[state]
dir = "{state}"
[health]
enabled = false
[[target]]
name = "f"
path = "{path}"
{allow}engine = "psync"
direct = false
size = "1MiB"
[[target.phase]]
kind = "soak"
job = {{ name = "w", read = 0, bs = "4k", access = "random", iodepth = 1, rate = "2000iops" }}
duration = "1s"
[gates]
verify_errors = false
"#,
        state = state.display(),
        path = path.display(),
    )
}

fn pattern() -> Vec<u8> {
    (0..1u32 << 20).map(|i| (i % 251) as u8).collect()
}

#[test]
fn without_root_its_own_file_soaks_and_a_file_it_cannot_vouch_for_is_refused() {
    if !crate::common::can_act_as_nobody() {
        return;
    }
    let d = crate::common::shm_dir();
    fs::set_permissions(d.path(), fs::Permissions::from_mode(0o755)).expect("chmod");
    let home = d.path().join("home");
    fs::create_dir(&home).expect("mkdir");
    nix::unistd::chown(&home, Some(NOBODY.into()), Some(NOBODY.into())).expect("chown");
    // The test binary's own tree may not be open to nobody: a copy it may run.
    let bin = d.path().join("nvsoak");
    fs::copy(crate::common::bin(), &bin).expect("copy the binary");
    fs::set_permissions(&bin, fs::Permissions::from_mode(0o755)).expect("chmod");
    let state = home.join("state");
    // Root's processes (this test among them) hold their maps from nobody: the premise.
    let me = format!("/proc/{}/maps", std::process::id());
    let peek = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "cat",
            &me,
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("setpriv cat");
    assert!(!peek.success(), "nobody could read root's {me}");

    // A file nvsoak creates: its own, soaked; and found again as its own by check-config.
    let own = home.join("own.dat");
    let cfg = d.path().join("own.toml");
    fs::write(&cfg, plan(&state, &own, None)).expect("plan");
    let cfg_s = cfg.to_str().expect("utf-8");
    let (code, err) = run_as_nobody(&bin, cfg_s);
    assert_eq!(code, Some(0), "nobody's soak on its own file: {err}");
    assert_eq!(fs::metadata(&own).expect("made").len(), 1 << 20);
    assert_ne!(
        fs::read(&own).expect("read"),
        vec![0u8; 1 << 20],
        "not written"
    );
    let (code, err) = as_nobody(&bin, &["check-config", cfg_s]);
    assert_eq!(code, Some(0), "its own, marked file found again: {err}");

    // nobody's file that nvsoak did not make, named by allow_destroy: it may be another
    // program's, and root's processes cannot be looked at, so nothing may be written.
    let theirs = home.join("theirs.dat");
    fs::write(&theirs, pattern()).expect("file");
    nix::unistd::chown(&theirs, Some(NOBODY.into()), Some(NOBODY.into())).expect("chown");
    let cfg = d.path().join("theirs.toml");
    fs::write(&cfg, plan(&home.join("state2"), &theirs, Some(&theirs))).expect("plan");
    let cfg_s = cfg.to_str().expect("utf-8");
    let (code, err) = as_nobody(&bin, &["check-config", cfg_s]);
    assert_ne!(code, Some(0), "check-config approved it:\n{err}");
    assert!(err.contains("cannot tell whether it is in use"), "{err}");
    let (code, err) = run_as_nobody(&bin, cfg_s);
    assert_ne!(code, Some(0), "run wrote it:\n{err}");
    assert!(err.contains("could not be looked at"), "{err}");
    assert_eq!(fs::read(&theirs).expect("read"), pattern(), "written");
}
