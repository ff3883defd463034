//! Issue 17's purge and self-test on a loop device this test creates: a block device nvsoak may
//! claim (allowed by its path), but not an NVMe namespace. The purge is claimed like a write,
//! then refused before any admin command with the reason, recorded in the results file's
//! `qualification_steps`, and the target stops (`--exit-when-done` exits non-zero); the device's
//! bytes are unchanged. A self-test on the same device is recorded as refused and the plan
//! finishes. Needs root and losetup; skips with a printed reason otherwise.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common::{bin, free_port, shm_dir, wait_exit};

struct Loop(String);

impl Drop for Loop {
    fn drop(&mut self) {
        let _ = Command::new("losetup").args(["-d", &self.0]).status();
    }
}

fn attach(file: &Path) -> Option<Loop> {
    let out = Command::new("losetup")
        .args(["--find", "--show"])
        .arg(file)
        .output()
        .ok()
        .filter(|o| o.status.success())?;
    Some(Loop(
        String::from_utf8_lossy(&out.stdout).trim().to_string(),
    ))
}

fn run(dir: &Path, cfg: &str) -> (Option<i32>, String) {
    let cfg_path = dir.join("nvsoak.toml");
    std::fs::write(&cfg_path, cfg).expect("writing config");
    let mut child = Command::new(bin())
        .arg("run")
        .arg("--config")
        .arg(&cfg_path)
        .arg("--web.listen-address")
        .arg(format!("127.0.0.1:{}", free_port()))
        .arg("--exit-when-done")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting nvsoak run");
    let (st, err) = wait_exit(
        &mut child,
        Duration::from_secs(120),
        "nvsoak run did not exit",
    );
    (st.code(), err)
}

/// `nvsoak check-config` on `cfg`, which must refuse it: its stderr.
fn check_config(dir: &Path, cfg: &str) -> String {
    let cfg_path = dir.join("check.toml");
    std::fs::write(&cfg_path, cfg).expect("writing config");
    let out = Command::new(bin())
        .arg("check-config")
        .arg(&cfg_path)
        .stdin(Stdio::null())
        .output()
        .expect("running check-config");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "check-config approved it: {err}");
    err
}

fn steps(dir: &Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(dir.join("state/results/lp.json")).expect("results file");
    let v: serde_json::Value = serde_json::from_str(&text).expect("results JSON");
    v["qualification_steps"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

#[test]
fn purge_and_self_test_on_a_device_that_is_not_nvme_are_refused_and_recorded() {
    let dir = shm_dir();
    let img = dir.path().join("lp.img");
    let pattern = vec![0x5au8; 4 << 20];
    std::fs::write(&img, &pattern).expect("writing the image");
    let Some(lp) = attach(&img) else {
        eprintln!("skipped: attaching a loop device needs root and losetup");
        return;
    };
    let cfg = |phase: &str| {
        format!(
            "[state]\ndir = \"{d}/state\"\n[health]\nenabled = false\n\
             [[target]]\nname = \"lp\"\npath = \"{p}\"\nallow_destroy = \"{p}\"\n{phase}",
            d = dir.path().display(),
            p = lp.0
        )
    };
    let purge = cfg(
        "[[target.phase]]\nkind = \"purge\"\nmethod = \"format-crypto\"\n\
          [[target.phase]]\nkind = \"soak\"\nprofile = \"4k-random-write\"\nduration = \"5s\"\n",
    );
    // check-config is run's dry run: it refuses the purge with the step's own reason.
    let checked = check_config(dir.path(), &purge);
    let (code, log) = run(dir.path(), &purge);
    assert!(code.is_some_and(|c| c != 0), "exit {code:?}: {log}");
    let reason = checked
        .split("purge refused: ")
        .nth(1)
        .unwrap_or_else(|| panic!("check-config did not refuse the purge: {checked}"));
    assert!(
        log.contains(reason.trim()),
        "run: {log}\ncheck-config: {checked}"
    );
    assert!(
        log.contains("purge refused") && log.contains("is not an NVMe namespace"),
        "{log}"
    );
    assert!(!log.contains("phase 2 (soak) started"), "{log}");
    let s = steps(dir.path());
    assert_eq!(s.len(), 1, "{s:?}");
    assert_eq!(s[0]["kind"], "purge");
    assert_eq!(s[0]["method"], "format-crypto");
    assert_eq!(s[0]["status"], "refused");
    assert!(
        s[0]["detail"]
            .as_str()
            .is_some_and(|d| d.contains("not an NVMe namespace")),
        "{:?}",
        s[0]
    );
    assert!(
        std::fs::read(&img).ok() == Some(pattern.clone()),
        "the device changed"
    );

    // A self-test never stops the plan: recorded as refused, and the plan finishes. A refused
    // self-test leaves its gate not evaluated: the verdict is INCOMPLETE (exit 3), never PASS.
    std::fs::remove_dir_all(dir.path().join("state")).expect("clearing state");
    let self_test = cfg("[[target.phase]]\nkind = \"self-test\"\n");
    let checked = check_config(dir.path(), &self_test);
    assert!(
        checked.contains("self-test refused: ") && checked.contains("not an NVMe namespace"),
        "{checked}"
    );
    let (code, log) = run(dir.path(), &self_test);
    assert_eq!(code, Some(3), "{log}");
    assert!(
        log.contains("self_test: not evaluated (no self-test outcome"),
        "{log}"
    );
    let s = steps(dir.path());
    assert_eq!(s.len(), 1, "{s:?}");
    assert_eq!(
        (&s[0]["kind"], &s[0]["status"]),
        (&"self-test".into(), &"refused".into())
    );
    assert!(log.contains("self-test short: refused"), "{log}");
    assert!(
        std::fs::read(&img).ok() == Some(pattern),
        "the device changed"
    );
}
