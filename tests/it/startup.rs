//! Start-up order and hostile web config files: the web config is loaded and the port bound
//! before any target starts, so a busy port, a bad certificate or a FIFO as web config exits
//! non-zero with one message before any file is created; `check-config` checks the web config.

use std::path::Path;

use crate::common::shm_dir;

fn config(dir: &Path, extra_exporter: &str) -> String {
    format!(
        r#"
[exporter]
{extra_exporter}
[state]
dir = "{d}/state"
[health]
enabled = false
[[target]]
name = "t0"
path = "{d}/t0.dat"
size = "16MiB"
engine = "psync"
direct = false
[[target.phase]]
kind = "soak"
profile = "4k-random-read"
duration = "30s"
"#,
        d = dir.display()
    )
}

/// Runs `nvsoak ARGS` to completion (stdin closed) and returns (code, stderr).
fn nvsoak(args: &[&str]) -> (Option<i32>, String) {
    crate::common::run_nvsoak(args, "info")
}

fn assert_nothing_created(dir: &Path) {
    assert!(!dir.join("t0.dat").exists(), "the target file was created");
    assert!(
        !dir.join("state").exists(),
        "the state directory was created"
    );
}

fn error_lines(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter(|l| l.contains("nvsoak:") || l.contains("ERROR"))
        .collect()
}

#[test]
fn busy_port_exits_before_any_file_with_one_message() {
    let dir = shm_dir();
    let busy = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = busy.local_addr().expect("addr").to_string();
    let cfg = dir.path().join("nvsoak.toml");
    std::fs::write(&cfg, config(dir.path(), "")).expect("write");
    let (code, stderr) = nvsoak(&[
        "run",
        "--config",
        cfg.to_str().expect("utf-8"),
        "--web.listen-address",
        &addr,
    ]);
    assert_eq!(code, Some(1), "{stderr}");
    assert_eq!(
        stderr.matches("Address already in use").count(),
        1,
        "{stderr}"
    );
    assert_eq!(error_lines(&stderr).len(), 1, "{stderr}");
    assert!(stderr.contains(&addr), "{stderr}");
    assert_nothing_created(dir.path());
}

#[test]
fn bad_certificate_exits_before_any_file() {
    let dir = shm_dir();
    std::fs::write(dir.path().join("server.pem"), "not a certificate\n").expect("write");
    std::fs::write(dir.path().join("server.key"), "not a key\n").expect("write");
    let web = dir.path().join("web.yml");
    std::fs::write(
        &web,
        "tls_server_config:\n  cert_file: server.pem\n  key_file: server.key\n",
    )
    .expect("write");
    let cfg = dir.path().join("nvsoak.toml");
    std::fs::write(&cfg, config(dir.path(), "listen = \"127.0.0.1:0\"")).expect("write");
    let (code, stderr) = nvsoak(&[
        "run",
        "--config",
        cfg.to_str().expect("utf-8"),
        "--web.config.file",
        web.to_str().expect("utf-8"),
    ]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("tls_server_config.cert_file") && stderr.contains("web.yml"),
        "{stderr}"
    );
    assert_eq!(error_lines(&stderr).len(), 1, "{stderr}");
    assert_nothing_created(dir.path());
}

#[test]
fn a_fifo_as_web_config_is_refused_at_start() {
    let dir = shm_dir();
    let web = dir.path().join("web.yml");
    nix::unistd::mkfifo(&web, nix::sys::stat::Mode::from_bits_truncate(0o600)).expect("mkfifo");
    let cfg = dir.path().join("nvsoak.toml");
    std::fs::write(&cfg, config(dir.path(), "listen = \"127.0.0.1:0\"")).expect("write");
    // No writer ever opens the FIFO: a blocking open would hang here, not fail.
    let (code, stderr) = nvsoak(&[
        "run",
        "--config",
        cfg.to_str().expect("utf-8"),
        "--web.config.file",
        web.to_str().expect("utf-8"),
    ]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains(&web.display().to_string()) && stderr.contains("a FIFO"),
        "{stderr}"
    );
    assert_nothing_created(dir.path());
}

#[test]
fn check_config_validates_the_web_config() {
    let dir = shm_dir();
    let web = dir.path().join("web.yml");
    std::fs::write(&web, "basic_auth_users:\n  alice: plaintext\n").expect("write");
    // Named by the config file.
    let cfg = dir.path().join("nvsoak.toml");
    std::fs::write(
        &cfg,
        config(
            dir.path(),
            &format!("web_config_file = \"{}\"", web.display()),
        ),
    )
    .expect("write");
    let (code, stderr) = nvsoak(&["check-config", cfg.to_str().expect("utf-8")]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains(&web.display().to_string()) && stderr.contains("basic_auth_users.alice"),
        "{stderr}"
    );
    // Named by --web.config.file, over a config without one.
    let plain = dir.path().join("plain.toml");
    std::fs::write(&plain, config(dir.path(), "")).expect("write");
    let (code, stderr) = nvsoak(&["check-config", plain.to_str().expect("utf-8")]);
    assert_eq!(code, Some(0), "{stderr}");
    let (code, stderr) = nvsoak(&[
        "check-config",
        plain.to_str().expect("utf-8"),
        "--web.config.file",
        web.to_str().expect("utf-8"),
    ]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("basic_auth_users.alice"), "{stderr}");
    assert_nothing_created(dir.path());
}
