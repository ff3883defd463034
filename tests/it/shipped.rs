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

/// Keys the config structs still accept only to refuse them with a message saying what
/// replaced them: not listed in the shipped file.
const RETIRED: &[&str] = &["gates.strict", "target[].gates.strict"];

/// The key paths `config/nvsoak.toml` lists, set or commented out, in the form of
/// `config::keys::list` (`target[].phase[].job.bs`): every `key = ...` line under the table
/// header above it (a header's own path too), and the keys of an inline table.
fn listed_keys(text: &str, arrays: &[String]) -> Vec<String> {
    let is_key = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
    };
    let mut seen = Vec::new();
    let mut prefix = String::new();
    for line in text.lines() {
        let l = line.trim_start().trim_start_matches('#').trim_start();
        if l.starts_with('[') {
            let inner = l.trim_start_matches('[');
            let Some(end) = inner.find(']') else { continue };
            let mut path = String::new();
            for part in inner[..end].split('.') {
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(part.trim());
                if arrays.contains(&path) {
                    seen.push(path.clone());
                    path.push_str("[]");
                }
            }
            if !path.ends_with("[]") {
                seen.push(path.clone());
            }
            prefix = path;
            continue;
        }
        let Some((key, value)) = l.split_once('=') else {
            continue;
        };
        let key = key.trim();
        if !is_key(key) {
            continue;
        }
        let at = if prefix.is_empty() {
            key.to_string()
        } else {
            format!("{prefix}.{key}")
        };
        let value = value.trim_start();
        if let Some(body) = value.strip_prefix('{') {
            let body = body.split('}').next().unwrap_or("");
            for field in body.split(',') {
                if let Some((k, _)) = field.split_once('=')
                    && is_key(k.trim())
                {
                    seen.push(format!("{at}.{}", k.trim()));
                }
            }
        }
        seen.push(at);
    }
    seen
}

/// "Every key is listed with its default", the file says: every key the config structs
/// accept (`config::keys::list`, walked from the code) is in it, set or commented out under
/// its table, and the `engine` line names every engine the parser accepts (`config::ENGINES`).
#[test]
fn the_shipped_file_lists_every_key_and_every_engine() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("config/nvsoak.toml");
    let text = std::fs::read_to_string(&path).expect("reading config/nvsoak.toml");
    assert!(
        text.contains("Every key is listed with its default"),
        "{text}"
    );
    let keys = nvsoak::config::keys::list();
    let arrays: Vec<String> = keys
        .iter()
        .filter(|k| k.kind == "list of tables")
        .map(|k| k.path.clone())
        .collect();
    let listed = listed_keys(&text, &arrays);
    let missing: Vec<&str> = keys
        .iter()
        .map(|k| k.path.as_str())
        .filter(|k| !RETIRED.contains(k) && !listed.iter().any(|l| l == k))
        .collect();
    assert!(
        missing.is_empty(),
        "config/nvsoak.toml says it lists every key, but lacks {missing:?}"
    );
    // The walk of the file finds what it should: no key it lists is unknown to the code.
    let unknown: Vec<&String> = listed
        .iter()
        .filter(|l| !keys.iter().any(|k| &k.path == *l))
        .collect();
    assert!(unknown.is_empty(), "config/nvsoak.toml lists {unknown:?}");

    let engine_line = text
        .lines()
        .map(|l| l.trim_start().trim_start_matches('#').trim_start())
        .find(|l| l.starts_with("engine ="))
        .expect("config/nvsoak.toml has an engine line");
    let words: Vec<&str> = engine_line
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .collect();
    let absent: Vec<&str> = nvsoak::config::ENGINES
        .iter()
        .copied()
        .filter(|e| !words.contains(e))
        .collect();
    assert!(
        absent.is_empty(),
        "the engine line of config/nvsoak.toml does not name {absent:?}: {engine_line}"
    );
}
