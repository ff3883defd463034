//! The config the package installs as `/etc/nvsoak/nvsoak.toml`: `systemctl enable --now`
//! with it must start no workload. Run as shipped (only the state directory moved to scratch):
//! the daemon serves `/metrics` and polls health, exports no target, and creates no file.

use crate::common::*;
use std::time::Duration;

fn shipped() -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("config/nvsoak.toml");
    let text = std::fs::read_to_string(&path).expect("reading config/nvsoak.toml");
    let line = "# dir = \"/var/lib/nvsoak\"";
    assert!(
        text.contains(line),
        "config/nvsoak.toml lost its state.dir line"
    );
    text.replacen(line, "dir = \"{dir}/state\"", 1)
}

#[test]
fn shipped_config_is_health_only_and_writes_nothing() {
    let text = shipped();
    assert!(
        !text.lines().any(|l| l.trim_start().starts_with("[[target")),
        "config/nvsoak.toml must ship with every [[target]] commented out"
    );
    assert!(
        !text
            .lines()
            .any(|l| l.trim_start().starts_with("[[health.device")),
        "config/nvsoak.toml must not rate real drives with example figures"
    );

    let d = Daemon::start(&text);
    let s = d.scrape_until(Duration::from_secs(20), |s| {
        !find(s, "nvsoak_health_poll_timestamp_seconds", &[]).is_empty()
    });
    assert!(
        !find(&s, "nvsoak_health_poll_timestamp_seconds", &[]).is_empty(),
        "the health poller runs"
    );
    for family in [
        "nvsoak_target_info",
        "nvsoak_target_up",
        "nvsoak_phase_info",
    ] {
        assert!(
            find(&s, family, &[]).is_empty(),
            "{family} exported with no target"
        );
    }
    let files: Vec<String> = std::fs::read_dir(d.dir.path().join("state"))
        .expect("listing the state dir")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    for f in &files {
        assert!(
            ["checkpoint.json", "lock"].contains(&f.as_str()) || f.starts_with(".checkpoint"),
            "the health-only daemon created {f} in its state dir: {files:?}"
        );
    }
    let (status, _, err) = d.terminate();
    assert!(status.success(), "exit {status}: {err}");
    assert!(err.contains("polling drive health only"), "{err}");
    assert!(!err.contains("default-target"), "{err}");
}

#[test]
fn check_config_says_the_shipped_file_is_health_only() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("config/nvsoak.toml");
    let o = std::process::Command::new(bin())
        .arg("check-config")
        .arg(&path)
        .output()
        .expect("running nvsoak check-config");
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    let code = o.status.code();
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("targets (0): none"), "{out}");
    assert!(out.contains("health polling only"), "{out}");
}
