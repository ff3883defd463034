//! A file target's mark tried as a forger would (issue 28, break 2). In a sticky, world-writable
//! directory, `nobody` writes a `.NAME.nvsoak` sidecar naming root's file's inode and device;
//! a `user.nvsoak.target` attribute sits on a file others may write, or on a file another user
//! owns. None of them makes the file nvsoak's: `run` and `check-config` refuse it and its bytes
//! stay as they were. Where the filesystem takes no extended attributes at all (ramfs), the mark
//! is a record in nvsoak's own state directory, never a file beside the target.

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::{Command, Stdio};

use crate::common::{free_port, run_nvsoak};
use crate::safety::{Scratch, p, sh};

/// A one-second write soak on `path` (no allow_destroy) with its state in `state`.
fn plan(state: &Path, path: &Path) -> String {
    format!(
        r#"
[state]
dir = "{state}"
[health]
enabled = false
[[target]]
name = "r"
path = "{path}"
engine = "psync"
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

fn run(cfg: &Path) -> (Option<i32>, String) {
    let addr = format!("127.0.0.1:{}", free_port());
    run_nvsoak(
        &[
            "run",
            "--config",
            p(cfg),
            "--web.listen-address",
            &addr,
            "--exit-when-done",
        ],
        "warn",
    )
}

/// `check-config` and `run` both refuse the plan at `cfg` as "nvsoak did not create it".
fn both_refuse(cfg: &Path) {
    let (code, err) = run_nvsoak(&["check-config", p(cfg)], "warn");
    assert_ne!(code, Some(0), "check-config approved it:\n{err}");
    assert!(err.contains("nvsoak did not create it"), "{err}");
    let (code, err) = run(cfg);
    assert_ne!(code, Some(0), "run wrote it:\n{err}");
    assert!(err.contains("nvsoak did not create it"), "{err}");
}

fn set_user_mark(path: &Path, value: &str) -> bool {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).expect("path");
    // SAFETY: both strings are NUL-terminated or sized; no memory is kept by the kernel.
    let r = unsafe {
        libc::setxattr(
            c.as_ptr(),
            c"user.nvsoak.target".as_ptr(),
            value.as_ptr().cast(),
            value.len(),
            0,
        )
    };
    r == 0
}

fn pattern() -> Vec<u8> {
    (0..1u32 << 20).map(|i| (i % 253) as u8).collect()
}

#[test]
fn a_sidecar_forged_by_nobody_does_not_make_roots_file_nvsoaks() {
    if !crate::common::can_act_as_nobody() {
        return;
    }
    let d = crate::common::shm_dir();
    fs::set_permissions(d.path(), fs::Permissions::from_mode(0o755)).expect("chmod");
    let public = d.path().join("public");
    fs::create_dir(&public).expect("mkdir");
    fs::set_permissions(&public, fs::Permissions::from_mode(0o1777)).expect("chmod");
    let victim = public.join("rootfile.dat");
    fs::write(&victim, pattern()).expect("victim");
    let st = fs::metadata(&victim).expect("stat");
    // What nobody writes beside it: the old sidecar's exact form.
    let forged = format!("nvsoak target=r ino={} dev={}", st.ino(), st.dev());
    let out = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "sh",
            "-c",
        ])
        .arg(format!(
            "echo '{forged}' > '{}'",
            public.join(".rootfile.dat.nvsoak").display()
        ))
        .stdin(Stdio::null())
        .output()
        .expect("running sh as nobody");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let cfg = d.path().join("plan.toml");
    fs::write(&cfg, plan(&d.path().join("state"), &victim)).expect("plan");
    both_refuse(&cfg);
    assert_eq!(
        fs::read(&victim).expect("victim"),
        pattern(),
        "root's file was written"
    );

    // The neighbours: a user attribute on a file anyone may write (anyone could have set it),
    // and on a file that nobody owns (nobody could have set it).
    if set_user_mark(&victim, &format!("{forged}\n")) {
        fs::set_permissions(&victim, fs::Permissions::from_mode(0o666)).expect("chmod");
        both_refuse(&cfg);
        fs::set_permissions(&victim, fs::Permissions::from_mode(0o644)).expect("chmod");
        nix::unistd::chown(&victim, Some(65534.into()), Some(65534.into())).expect("chown");
        both_refuse(&cfg);
        assert_eq!(
            fs::read(&victim).expect("victim"),
            pattern(),
            "the file was written"
        );
    } else {
        eprintln!("user attributes unsupported on /dev/shm here; the sidecar case alone ran");
    }
    // What nvsoak makes itself is its own: a new file is created, marked and reused.
    let own = public.join("own.dat");
    fs::write(&cfg, plan(&d.path().join("state"), &own)).expect("plan");
    let (code, err) = run(&cfg);
    assert_eq!(code, Some(0), "{err}");
    let (code, err) = run(&cfg);
    assert_eq!(
        code,
        Some(0),
        "nvsoak's own file refused on the second run: {err}"
    );
    assert!(
        !public.join(".own.dat.nvsoak").exists(),
        "a sidecar was written"
    );
}

#[test]
fn without_extended_attributes_the_mark_is_a_record_in_the_state_directory() {
    let Some(mut s) = Scratch::new("mark record") else {
        return;
    };
    // ramfs has no extended attributes at all (like tmpfs before Linux 6.6 for a non-root user).
    let mp = s.dir.path().join("ramfs");
    fs::create_dir(&mp).expect("mount point");
    sh("mount", &["-t", "ramfs", "ramfs", p(&mp)]);
    s.on_drop("umount", &[p(&mp)]);
    let f = mp.join("t.dat");
    let state = s.dir.path().join("state");
    let cfg = s.dir.path().join("plan.toml");
    fs::write(&cfg, plan(&state, &f)).expect("plan");
    let (code, err) = run(&cfg);
    assert_eq!(code, Some(0), "{err}");
    let st = fs::metadata(&f).expect("stat");
    let record = state
        .join("marks")
        .join(format!("{}-{}", st.dev(), st.ino()));
    let mark = fs::read_to_string(&record).expect("the mark's record");
    assert!(
        mark.contains(&format!("ino={} dev={}", st.ino(), st.dev())),
        "{mark}"
    );
    assert!(
        !mp.join(".t.dat.nvsoak").exists(),
        "a sidecar beside the target"
    );
    // Ours: a second run opens it without allow_destroy.
    let (code, err) = run(&cfg);
    assert_eq!(code, Some(0), "{err}");
    // A file put in its place (another inode) is not ours, the record notwithstanding, and a
    // sidecar beside it naming its inode (what earlier versions believed) changes nothing.
    fs::remove_file(&f).expect("rm");
    fs::write(&f, pattern()).expect("write");
    let st = fs::metadata(&f).expect("stat");
    fs::write(
        mp.join(".t.dat.nvsoak"),
        format!("nvsoak target=r ino={} dev={}\n", st.ino(), st.dev()),
    )
    .expect("forged sidecar");
    both_refuse(&cfg);
    assert_eq!(fs::read(&f).expect("read"), pattern());
}
