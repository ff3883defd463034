//! `nvsoak run --exit-when-done`: the exit status says whether every target finished its plan.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{bin, free_port, shm_dir, wait_exit};

/// A soak whose target file is truncated under it: every read then hits EOF (counted as ENXIO),
/// `max_errors` stops the target, and `--exit-when-done` exits non-zero naming the target and
/// the reason, instead of reporting success for a plan that did not finish.
#[test]
fn exit_when_done_exits_non_zero_when_a_target_stopped_on_an_error() {
    let dir = shm_dir();
    let target = dir.path().join("shrinks.img");
    let cfg = format!(
        r#"
[state]
dir = "{d}/state"
[health]
enabled = false
[[target]]
name = "shrinks"
path = "{t}"
size = "16MiB"
max_errors = 20
[[target.phase]]
kind = "soak"
profile = "4k-random-read"
iodepth = 2
rate = "2000iops"
duration = "10m"
"#,
        d = dir.path().display(),
        t = target.display()
    );
    let cfg_path = dir.path().join("nvsoak.toml");
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
    // The file is created and preallocated before the workload starts: once it has its full
    // size, cut it to nothing, so every read of the running soak reads EOF.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if std::fs::metadata(&target).is_ok_and(|m| m.len() == 16 << 20) {
            break;
        }
        if let Some(st) = child.try_wait().expect("waiting for nvsoak") {
            panic!("nvsoak exited ({st}) before its target file was preallocated");
        }
        assert!(
            Instant::now() < deadline,
            "the target file never reached 16 MiB"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::fs::OpenOptions::new()
        .write(true)
        .open(&target)
        .and_then(|f| f.set_len(0))
        .expect("truncating the target file");
    let (status, err) = wait_exit(
        &mut child,
        Duration::from_secs(60),
        "max_errors did not stop the target (the 10 min soak is still running)",
    );
    assert_eq!(status.code(), Some(1), "expected exit 1:\n{err}");
    assert!(
        err.contains("--exit-when-done")
            && err.contains("shrinks")
            && err.contains("max_errors = 20"),
        "the error does not name the target and its reason:\n{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    // The final checkpoint is still written on the way out.
    assert!(
        dir.path()
            .join("state")
            .read_dir()
            .is_ok_and(|mut d| d.next().is_some()),
        "nothing in the state directory"
    );
}
