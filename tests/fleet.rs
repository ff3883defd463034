//! Two-tier Prometheus, for real: nvsoak (in-process, health-only, two replayed NVMe drives on a
//! fake sysfs tree) is scraped by a rack-level Prometheus running the shipped
//! `config/prometheus-rack.yml` (the recording rules and alerts of `dashboards/rules/`,
//! external labels, remote_write), which remote-writes to a central Prometheus started with its
//! remote-write receiver. Checked on the central side: every query of the fleet dashboard
//! answers with the same series as at the rack, each drive labelled with its rack and host, and
//! an alert computed at the rack arrives there.
//!
//! Its own test binary: the in-process daemon installs signal handlers for the whole process.
//! Everything listens on 127.0.0.1.

#[path = "it/common.rs"]
mod common;

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nvsoak::health::poller::Opener;
use nvsoak::nvme::AdminTransport;
use nvsoak::nvme::discover::Controller;

use common::{fake_ctrl, free_port, http_get, replay_drive};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A Prometheus server, killed on drop.
struct Prom {
    child: Child,
    addr: SocketAddr,
    log: PathBuf,
}

impl Prom {
    fn start(dir: &Path, name: &str, config: &str, extra: &[&str]) -> Prom {
        let cfg = dir.join(format!("{name}.yml"));
        std::fs::write(&cfg, config).expect("write prometheus config");
        let check = Command::new("promtool")
            .arg("check")
            .arg("config")
            .arg(&cfg)
            .output()
            .expect("promtool (apt-get install -y prometheus)");
        assert!(
            check.status.success(),
            "promtool check config {name}: {}{}",
            String::from_utf8_lossy(&check.stdout),
            String::from_utf8_lossy(&check.stderr)
        );
        let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().expect("addr");
        let log = dir.join(format!("{name}.log"));
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", cfg.display()))
            .arg(format!("--storage.tsdb.path={}", dir.join(name).display()))
            .arg(format!("--web.listen-address={addr}"))
            .args(extra)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("prometheus log"))
            .spawn()
            .expect("prometheus (apt-get install -y prometheus)");
        let p = Prom { child, addr, log };
        p.wait(Duration::from_secs(60), "ready", || {
            matches!(http_get(p.addr, "/-/ready"), Ok((200, _)))
        });
        p
    }

    fn wait(&self, limit: Duration, what: &str, mut f: impl FnMut() -> bool) {
        let deadline = Instant::now() + limit;
        while !f() {
            assert!(
                Instant::now() < deadline,
                "prometheus {}: not {what} within {limit:?}; its log:\n{}",
                self.addr,
                std::fs::read_to_string(&self.log).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// An instant query; the result vector (empty on any error).
    fn query(&self, q: &str) -> Vec<serde_json::Value> {
        let path = format!("/api/v1/query?query={}", encode(q));
        let Ok((200, body)) = http_get(self.addr, &path) else {
            return Vec::new();
        };
        let v: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
        v["data"]["result"].as_array().cloned().unwrap_or_default()
    }
}

impl Drop for Prom {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The label sets of a result, without `drop` labels, as sorted `k=v` strings.
fn label_sets(result: &[serde_json::Value], drop: &[&str]) -> BTreeSet<String> {
    result
        .iter()
        .map(|r| {
            let mut kv: Vec<String> = r["metric"]
                .as_object()
                .map(|m| {
                    m.iter()
                        .filter(|(k, _)| !drop.contains(&k.as_str()))
                        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                        .collect()
                })
                .unwrap_or_default();
            kv.sort();
            kv.join(",")
        })
        .collect()
}

/// Every PromQL expression of the fleet dashboard, with `$instance` matching all.
fn fleet_queries() -> Vec<String> {
    let path = repo().join("dashboards/grafana/nvsoak-fleet.json");
    let d: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("fleet dashboard"))
            .expect("fleet dashboard JSON");
    let mut out = Vec::new();
    for p in d["panels"].as_array().into_iter().flatten() {
        for t in p["targets"].as_array().into_iter().flatten() {
            if let Some(e) = t["expr"].as_str() {
                out.push(e.replace("$instance", ".*"));
            }
        }
    }
    out
}

#[test]
fn rack_prometheus_remote_writes_drives_and_alerts_to_the_centre() {
    for tool in ["prometheus", "promtool"] {
        if Command::new(tool).arg("--version").output().is_err() {
            panic!("{tool} missing: apt-get install -y prometheus");
        }
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let sysfs = dir.path().join("sys");
    fake_ctrl(&sysfs, "nvme0", "FLEET0", "FLEETTEST 3.84TB");
    fake_ctrl(&sysfs, "nvme1", "FLEET1", "FLEETTEST 3.84TB");
    // Two drives, each its own serial (the Drives stat counts serials, not controllers).
    let clean = replay_drive("/dev/nvme0", Some("FLEET0"), Some(0));
    let warned = replay_drive("/dev/nvme1", Some("FLEET1"), Some(0x02)); // temperature above threshold
    let opener: Opener = Arc::new(move |c: &Controller| {
        let t = if c.name == "nvme1" { &warned } else { &clean };
        Ok(Box::new(Arc::clone(t)) as Box<dyn AdminTransport>)
    });

    // nvsoak: the shipped health-only config, polling every second, on a free port.
    let port = free_port();
    let shipped =
        std::fs::read_to_string(repo().join("config/nvsoak.toml")).expect("config/nvsoak.toml");
    let config = shipped
        .replacen(
            "listen = \"127.0.0.1:9757\"",
            &format!("listen = \"127.0.0.1:{port}\""),
            1,
        )
        .replacen(
            "# dir = \"/var/lib/nvsoak\"",
            &format!("dir = \"{}\"", dir.path().join("state").display()),
            1,
        )
        .replacen("poll_interval = \"30s\"", "poll_interval = \"1s\"", 1);
    let settings =
        nvsoak::config::load_str(&config, "fleet test config", Vec::new()).expect("valid config");
    let wiring = nvsoak::daemon::HealthWiring {
        sysfs_root: sysfs.clone(),
        opener,
    };
    let daemon = std::thread::spawn(move || {
        nvsoak::daemon::run_with(settings, nvsoak::daemon::RunFlags::default(), wiring)
    });

    // The centre: no scrapes of its own, only the remote-write receiver.
    let central = Prom::start(
        dir.path(),
        "central",
        "global:\n  evaluation_interval: 1s\n",
        &["--web.enable-remote-write-receiver"],
    );
    // The rack: the shipped file, with this test's paths, 1 s intervals and no Alertmanager.
    let sd = dir.path().join("sd");
    std::fs::create_dir_all(&sd).expect("mkdir sd");
    std::fs::write(
        sd.join("rack1.yml"),
        format!("- targets: [\"127.0.0.1:{port}\"]\n"),
    )
    .expect("write file_sd");
    let rack_cfg = std::fs::read_to_string(repo().join("config/prometheus-rack.yml"))
        .expect("config/prometheus-rack.yml")
        .replace(
            "/etc/prometheus/rules/",
            &format!("{}/", repo().join("dashboards/rules").display()),
        )
        .replace("/etc/prometheus/nvsoak/", &format!("{}/", sd.display()))
        .replace("scrape_interval: 15s", "scrape_interval: 1s")
        .replace("evaluation_interval: 15s", "evaluation_interval: 1s")
        .replace("scrape_timeout: 10s", "scrape_timeout: 1s")
        .replace("refresh_interval: 1m", "refresh_interval: 1s")
        .replace(
            "http://central-prometheus.example.internal:9090",
            &format!("http://{}", central.addr),
        )
        .replace("targets: [\"localhost:9093\"]", "targets: []");
    assert!(
        rack_cfg.contains(&central.addr.to_string()),
        "remote_write url not replaced"
    );
    let rack = Prom::start(dir.path(), "rack", &rack_cfg, &[]);

    // Each drive reaches the centre with its rack (external label) and host (relabelled).
    central.wait(Duration::from_secs(90), "holding both drives", || {
        central
            .query("nvme_info{rack=\"rack1\", host=\"127.0.0.1\"}")
            .len()
            == 2
    });
    let devices: BTreeSet<String> = central
        .query("nvme_info")
        .iter()
        .filter_map(|r| r["metric"]["device"].as_str().map(str::to_string))
        .collect();
    assert_eq!(devices, BTreeSet::from(["nvme0".into(), "nvme1".into()]));

    // The rack has evaluated its recording rules and the centre holds their results.
    central.wait(
        Duration::from_secs(90),
        "holding the rack's rule results",
        || {
            !rack.query("nvme:temperature_max:celsius").is_empty()
                && central.query("nvme:temperature_max:celsius").len() == 2
        },
    );
    // Every fleet-dashboard query answers at the centre with the rack's series (plus the
    // external labels), once the recording rules' results have been sent.
    let queries = fleet_queries();
    assert!(queries.len() >= 10, "fleet dashboard queries: {queries:?}");
    let mut drive_queries = 0;
    for q in &queries {
        let mut last = (BTreeSet::new(), BTreeSet::new());
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let at_rack = label_sets(&rack.query(q), &[]);
            let at_centre_all = central.query(q);
            let at_centre = label_sets(&at_centre_all, &["rack", "prometheus"]);
            if at_rack == at_centre {
                if at_centre_all
                    .iter()
                    .any(|r| r["metric"]["device"] == "nvme1")
                {
                    drive_queries += 1;
                }
                break;
            }
            last = (at_rack, at_centre);
            assert!(
                Instant::now() < deadline,
                "fleet query {q}: the centre answers {:?}, the rack {:?}",
                last.1,
                last.0
            );
            std::thread::sleep(Duration::from_millis(500));
        }
        let _ = last;
    }
    assert!(
        drive_queries >= 5,
        "only {drive_queries} fleet queries returned the drives at the centre"
    );
    // The rack's recording-rule results arrive labelled with the rack too.
    let recorded = central.query("{__name__=~\"nvme:.+\"}");
    assert!(
        !recorded.is_empty(),
        "no nvme:* recording rule result at the centre"
    );
    for r in &recorded {
        assert_eq!(r["metric"]["rack"], "rack1", "{r}");
        assert_eq!(r["metric"]["prometheus"], "rack1-prom", "{r}");
    }
    let drives = central
        .query("count(count by (instance, serial) (nvme_info{instance=~\".*\"})) or vector(0)");
    assert_eq!(drives[0]["value"][1], "2", "the Drives stat at the centre");

    // An alert evaluated at the rack (NvmeCriticalWarning, `for: 1m`) arrives at the centre, for
    // the warned drive only.
    let firing = "ALERTS{alertname=\"NvmeCriticalWarning\", alertstate=\"firing\", rack=\"rack1\"}";
    central.wait(
        Duration::from_secs(150),
        "receiving the rack's alert",
        || !central.query(firing).is_empty(),
    );
    let devices: BTreeSet<String> = central
        .query(firing)
        .iter()
        .filter_map(|r| r["metric"]["device"].as_str().map(str::to_string))
        .collect();
    assert_eq!(devices, BTreeSet::from(["nvme1".to_string()]));

    // Stop the daemon (its handler catches SIGTERM for this process).
    nix::sys::signal::kill(nix::unistd::getpid(), nix::sys::signal::SIGTERM).expect("SIGTERM");
    daemon
        .join()
        .expect("daemon thread")
        .expect("daemon ran cleanly");
}
