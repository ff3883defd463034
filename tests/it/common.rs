#![allow(dead_code)]

use std::path::PathBuf;

/// Path of the `nvsoak` binary built for this test run.
pub fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_nvsoak"))
}

/// A scratch directory in /dev/shm (tmpfs supports O_DIRECT on current kernels), removed on drop.
pub fn shm_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("nvsoak-test-")
        .tempdir_in("/dev/shm")
        .or_else(|_| tempfile::tempdir())
        .expect("creating a scratch directory")
}

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A free port on 127.0.0.1 (bound and released; good enough for tests that start at once).
/// A port on 127.0.0.1 that is free now, below the kernel's ephemeral range (32768 and up):
/// a port handed out by `bind(0)` is an ephemeral one, which any outgoing connection of a
/// parallel test may take as its local port before the daemon binds it ("Address already in
/// use"). Each call in this process tries the next port of its own sequence.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let base = 20_000 + (std::process::id() % 97) * 128;
    for _ in 0..12_000 {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let port = 20_000 + (base - 20_000 + n) % 12_000;
        let Ok(port) = u16::try_from(port) else {
            continue;
        };
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    let l = TcpListener::bind("127.0.0.1:0").expect("binding an ephemeral port");
    l.local_addr().expect("local addr").port()
}

/// Plain HTTP/1.1 GET over a fresh connection. Returns (status, body).
pub fn http_get(addr: SocketAddr, path: &str) -> std::io::Result<(u16, String)> {
    http_get_with(addr, path, "")
}

/// [`http_get`] with extra header lines (each ending in `\r\n`).
pub fn http_get_with(
    addr: SocketAddr,
    path: &str,
    headers: &str,
) -> std::io::Result<(u16, String)> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\n{headers}Connection: close\r\n\r\n"
    )?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf)?;
    let text = String::from_utf8_lossy(&buf).to_string();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = match text.find("\r\n\r\n") {
        Some(i) => text[i + 4..].to_string(),
        None => String::new(),
    };
    // Undo chunked transfer encoding if the server used it.
    let head = &text[..text.find("\r\n\r\n").unwrap_or(0)];
    if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        return Ok((status, dechunk(&body)));
    }
    Ok((status, body))
}

fn dechunk(b: &str) -> String {
    let mut out = String::new();
    let mut rest = b;
    while let Some(i) = rest.find("\r\n") {
        let n = usize::from_str_radix(rest[..i].trim(), 16).unwrap_or(0);
        if n == 0 {
            break;
        }
        let start = i + 2;
        if start + n > rest.len() {
            break;
        }
        out.push_str(&rest[start..start + n]);
        rest = &rest[(start + n + 2).min(rest.len())..];
    }
    out
}

/// One sample of the Prometheus text format.
#[derive(Debug, Clone)]
pub struct Sample {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

/// Parse the Prometheus text exposition format (enough for our own output).
pub fn parse_metrics(text: &str) -> Vec<Sample> {
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (name_labels, value) = match line.rfind(' ') {
            Some(i) => (&line[..i], &line[i + 1..]),
            None => continue,
        };
        let value: f64 = match value {
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            v => match v.parse() {
                Ok(x) => x,
                Err(_) => continue,
            },
        };
        let (name, labels) = match name_labels.find('{') {
            Some(i) => {
                let inner = name_labels[i + 1..].trim_end_matches('}');
                let mut m = BTreeMap::new();
                let mut rest = inner;
                while let Some(eq) = rest.find("=\"") {
                    let k = rest[..eq].trim_start_matches(',').trim().to_string();
                    let after = &rest[eq + 2..];
                    let mut end = 0;
                    let bytes = after.as_bytes();
                    while end < bytes.len()
                        && !(bytes[end] == b'"' && (end == 0 || bytes[end - 1] != b'\\'))
                    {
                        end += 1;
                    }
                    m.insert(k, after[..end].replace("\\\"", "\"").replace("\\\\", "\\"));
                    rest = &after[(end + 1).min(after.len())..];
                }
                (name_labels[..i].to_string(), m)
            }
            None => (name_labels.to_string(), BTreeMap::new()),
        };
        out.push(Sample {
            name,
            labels,
            value,
        });
    }
    out
}

/// Samples named `name` whose labels include every pair in `want`.
pub fn find<'a>(samples: &'a [Sample], name: &str, want: &[(&str, &str)]) -> Vec<&'a Sample> {
    samples
        .iter()
        .filter(|s| {
            s.name == name
                && want
                    .iter()
                    .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
        })
        .collect()
}

/// Sum of the values of matching samples (0 when none).
pub fn sum(samples: &[Sample], name: &str, want: &[(&str, &str)]) -> f64 {
    find(samples, name, want).iter().map(|s| s.value).sum()
}

/// Wait up to `timeout` for `child` to exit (past it: killed, reaped, then `panic!` with
/// `on_timeout`); its exit status and what it wrote to its piped stderr.
pub fn wait_exit(
    child: &mut Child,
    timeout: Duration,
    on_timeout: &str,
) -> (std::process::ExitStatus, String) {
    let deadline = Instant::now() + timeout;
    let status = loop {
        if let Some(st) = child.try_wait().expect("waiting for nvsoak") {
            break st;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{on_timeout}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut err);
    }
    (status, err)
}

/// Runs `nvsoak ARGS` to completion (stdin closed, `RUST_LOG=rust_log`) and returns (exit code,
/// stderr).
pub fn run_nvsoak(args: &[&str], rust_log: &str) -> (Option<i32>, String) {
    let out = Command::new(bin())
        .args(args)
        .env("RUST_LOG", rust_log)
        .stdin(Stdio::null())
        .output()
        .expect("running nvsoak");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A running `nvsoak run` process, killed on drop.
pub struct Daemon {
    pub child: Child,
    pub addr: SocketAddr,
    pub dir: tempfile::TempDir,
}

impl Daemon {
    /// Start `nvsoak run --config <dir>/nvsoak.toml` with `config` (TOML; `{dir}` is replaced by
    /// the scratch directory) listening on a free port.
    pub fn start(config: &str) -> Daemon {
        Self::start_with(config, &[])
    }

    pub fn start_with(config: &str, extra_args: &[&str]) -> Daemon {
        Self::start_in(shm_dir(), config, extra_args)
    }

    /// Start in an existing scratch directory (e.g. to resume from its checkpoint).
    pub fn start_in(dir: tempfile::TempDir, config: &str, extra_args: &[&str]) -> Daemon {
        let mut d = Self::spawn_in(dir, config, extra_args);
        d.wait_http(Duration::from_secs(20));
        d
    }

    /// [`Daemon::start_in`] with extra environment variables (test-only knobs).
    pub fn start_in_env(dir: tempfile::TempDir, config: &str, env: &[(&str, &str)]) -> Daemon {
        let mut d = Self::spawn_in_env(dir, config, &[], env);
        d.wait_http(Duration::from_secs(20));
        d
    }

    /// [`Daemon::start_in`] without waiting for `/healthz` (which needs credentials when the
    /// web config asks for basic auth).
    pub fn spawn_in(dir: tempfile::TempDir, config: &str, extra_args: &[&str]) -> Daemon {
        Self::spawn_in_env(dir, config, extra_args, &[])
    }

    /// [`Daemon::spawn_in`] with extra environment variables (test-only knobs).
    pub fn spawn_in_env(
        dir: tempfile::TempDir,
        config: &str,
        extra_args: &[&str],
        env: &[(&str, &str)],
    ) -> Daemon {
        let port = free_port();
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().expect("addr");
        let cfg = config.replace("{dir}", &dir.path().display().to_string());
        let cfg_path = dir.path().join("nvsoak.toml");
        std::fs::write(&cfg_path, cfg).expect("writing config");
        let child = Command::new(bin())
            .arg("run")
            .arg("--config")
            .arg(&cfg_path)
            .arg("--web.listen-address")
            .arg(addr.to_string())
            .args(extra_args)
            .envs(env.iter().copied())
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("starting nvsoak");
        Daemon { child, addr, dir }
    }

    fn wait_http(&mut self, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Ok((200, _)) = http_get(self.addr, "/healthz") {
                return;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                let mut err = String::new();
                if let Some(mut e) = self.child.stderr.take() {
                    use std::io::Read;
                    let _ = e.read_to_string(&mut err);
                }
                panic!("nvsoak exited ({status}) before serving /healthz:\n{err}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!(
            "nvsoak did not serve /healthz on {} within {timeout:?}",
            self.addr
        );
    }

    pub fn scrape(&self) -> Vec<Sample> {
        let (code, body) = http_get(self.addr, "/metrics").expect("scraping /metrics");
        assert_eq!(code, 200, "/metrics answered {code}: {body}");
        parse_metrics(&body)
    }

    pub fn scrape_text(&self) -> String {
        http_get(self.addr, "/metrics")
            .expect("scraping /metrics")
            .1
    }

    /// Scrape until `pred` holds or `timeout` passes; returns the last scrape.
    pub fn scrape_until(&self, timeout: Duration, pred: impl Fn(&[Sample]) -> bool) -> Vec<Sample> {
        let deadline = Instant::now() + timeout;
        loop {
            let s = self.scrape();
            if pred(&s) || Instant::now() >= deadline {
                return s;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// SIGTERM, then wait; returns (exit status, time to exit, stderr).
    pub fn terminate(mut self) -> (std::process::ExitStatus, Duration, String) {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let t0 = Instant::now();
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let deadline = t0 + Duration::from_secs(15);
        let status = loop {
            if let Some(st) = self.child.try_wait().expect("waiting for nvsoak") {
                break st;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                break self.child.wait().expect("waiting for nvsoak");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let el = t0.elapsed();
        let mut err = String::new();
        if let Some(mut e) = self.child.stderr.take() {
            let _ = e.read_to_string(&mut err);
        }
        (status, el, err)
    }
}

impl Daemon {
    /// SIGKILL (no chance to checkpoint); hands back the scratch directory.
    pub fn kill9(mut self) -> tempfile::TempDir {
        let _ = self.child.kill();
        let _ = self.child.wait();

        std::mem::replace(&mut self.dir, shm_dir())
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A hand-built NVMe page from `tests/fixtures/nvme/handbuilt/`.
pub fn nvme_fixture(name: &str) -> Vec<u8> {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/nvme/handbuilt")
        .join(name);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// A replayed controller answering every command the poller sends with the hand-built pages
/// (OCP C0h, C1h and C3h and the telemetry header 08h included, temperature threshold 343 K).
pub fn handbuilt_replay() -> std::sync::Arc<nvsoak::nvme::replay::ReplayTransport> {
    replay_drive("/dev/nvme0", None, None)
}

/// [`handbuilt_replay`] for controller `dev`, answering Identify with `serial` (bytes 4..23)
/// when given, and with `critical_warning` in SMART byte 0 when given.
pub fn replay_drive(
    dev: &str,
    serial: Option<&str>,
    critical_warning: Option<u8>,
) -> std::sync::Arc<nvsoak::nvme::replay::ReplayTransport> {
    use nvsoak::nvme::cmd::{OPC_GET_FEATURES, OPC_GET_LOG_PAGE, OPC_IDENTIFY};
    use nvsoak::nvme::replay::{ReplayTransport, Reply};
    let t = ReplayTransport::new(dev);
    let page = |n: &str| Reply::Data(nvme_fixture(n), 0);
    let mut id = nvme_fixture("id-ctrl.bin");
    if let Some(sn) = serial {
        let sn = format!("{sn:<20}");
        id[4..24].copy_from_slice(&sn.as_bytes()[..20]);
    }
    let mut smart = nvme_fixture("smart.bin");
    if let Some(w) = critical_warning {
        smart[0] = w;
    }
    t.on_loose(OPC_IDENTIFY, 0x01, Reply::Data(id, 0));
    t.on_loose(OPC_IDENTIFY, 0x00, page("id-ns.bin"));
    t.on_loose(OPC_IDENTIFY, 0x17, Reply::Data(vec![0; 4096], 0));
    t.on_loose(OPC_GET_LOG_PAGE, 0x02, Reply::Data(smart, 0));
    t.on_loose(OPC_GET_LOG_PAGE, 0x01, page("error.bin"));
    t.on_loose(OPC_GET_LOG_PAGE, 0x03, page("fw-slot.bin"));
    t.on_loose(OPC_GET_LOG_PAGE, 0xc0, page("ocp-c0.bin"));
    t.on_loose(OPC_GET_LOG_PAGE, 0xc1, page("ocp-c1.bin"));
    t.on_loose(OPC_GET_LOG_PAGE, 0xc3, page("ocp-c3.bin"));
    t.on_loose(OPC_GET_LOG_PAGE, 0x08, page("telemetry-08.bin"));
    t.on_loose(OPC_GET_FEATURES, 0x04, Reply::Data(vec![], 343));
    std::sync::Arc::new(t)
}

/// A controller `name` (one namespace, nsid 1) in a fake sysfs tree at `root`.
pub fn fake_ctrl(root: &std::path::Path, name: &str, serial: &str, model: &str) {
    let dir = root.join("class/nvme").join(name);
    std::fs::create_dir_all(dir.join(format!("{name}n1"))).expect("mkdir");
    std::fs::write(dir.join("serial"), format!("{serial}\n")).expect("write");
    std::fs::write(dir.join("model"), format!("{model}\n")).expect("write");
    std::fs::write(dir.join("firmware_rev"), "FW1\n").expect("write");
    std::fs::write(dir.join(format!("{name}n1/nsid")), "1\n").expect("write");
}

/// What `promtool check metrics` says about `text` (empty when it is clean).
pub fn promtool_findings(text: &str) -> String {
    use std::io::Write;
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool missing: apt-get install -y prometheus");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(text.as_bytes())
        .expect("writing to promtool");
    let out = child.wait_with_output().expect("promtool output");
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() || !all.trim().is_empty(),
        "promtool failed without saying why: {}",
        out.status
    );
    all
}

/// Panics with promtool's findings (and the text) unless `text` is clean.
pub fn assert_promtool_clean(text: &str) {
    let all = promtool_findings(text);
    assert!(
        all.trim().is_empty(),
        "promtool findings:\n{all}\n---\n{text}"
    );
}

/// `nvsoak run --exit-when-done` with `config` (`{dir}` replaced by `dir`, written as
/// `dir/nvsoak.toml`) to its end, within 120 s: (exit code, stderr). Never a panic in stderr.
pub fn run_exit_when_done(dir: &std::path::Path, config: &str) -> (Option<i32>, String) {
    let cfg_path = dir.join("nvsoak.toml");
    std::fs::write(
        &cfg_path,
        config.replace("{dir}", &dir.display().to_string()),
    )
    .expect("writing config");
    let mut child = Command::new(bin())
        .arg("run")
        .arg("--config")
        .arg(&cfg_path)
        .arg("--web.listen-address")
        .arg(format!("127.0.0.1:{}", free_port()))
        .arg("--exit-when-done")
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting nvsoak run");
    let (status, err) = wait_exit(
        &mut child,
        Duration::from_secs(120),
        "the short plan did not end within 120 s",
    );
    assert!(!err.contains("panicked"), "{err}");
    (status.code(), err)
}

/// Whether this test process may act as `nobody` (uid 65534): it is root and util-linux's
/// `setpriv` is there. Says why not on stderr.
pub fn can_act_as_nobody() -> bool {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipped: needs root to act as nobody");
        return false;
    }
    if Command::new("setpriv").arg("--version").output().is_err() {
        eprintln!("skipped: setpriv (util-linux) is missing");
        return false;
    }
    true
}

/// Where a text breaks nvsoak's units convention (sizes in IEC units, rates in SI units,
/// `model::fmt`): a size in decimal units ("51.20 MB", not followed by "/s") or a rate in
/// binary ones ("40.00 MiB/s"). A decimal figure that is a datasheet's passes: a capacity's
/// bracketed figure after its IEC size ("2.91 TiB (3.20 TB)"), a rated "... TBW", and a line
/// naming the ratings table or a datasheet. Each break is returned with its line.
pub fn unit_convention_breaks(text: &str) -> Vec<String> {
    let decimal = regex::Regex::new(r"\b\d+(?:\.\d+)? (?:kB|MB|GB|TB|PB|EB)\b").expect("regex");
    let binary_rate =
        regex::Regex::new(r"\b\d+(?:\.\d+)? (?:KiB|MiB|GiB|TiB|PiB)/s").expect("regex");
    let mut out = Vec::new();
    for line in text.lines() {
        if line.contains("ratings table") || line.contains("datasheet") {
            continue;
        }
        for m in decimal.find_iter(line) {
            let after = &line[m.end()..];
            let before = &line[..m.start()];
            let rate = after.starts_with("/s");
            let capacity = before.ends_with("iB (");
            let rated = after.starts_with(" TBW");
            if !(rate || capacity || rated) {
                out.push(format!("size in decimal units {:?}: {line}", m.as_str()));
            }
        }
        for m in binary_rate.find_iter(line) {
            out.push(format!("rate in binary units {:?}: {line}", m.as_str()));
        }
    }
    out
}
