//! A full chassis on one daemon: 32 targets (the null engine, paced, so the figures are the
//! daemon's own cost rather than the I/O's) and 32 replayed NVMe controllers on a fake sysfs
//! tree, in one in-process daemon. Measured and printed: the CPU of every thread that is not an
//! I/O worker, RSS, the size of one `/metrics` response and the time to fetch it, and the series
//! per drive and per target; asserted: every drive polled on time, and the series inside the
//! cardinality budget docs/fleet.md writes down.
//!
//! Its own test binary: the in-process daemon installs signal handlers for the whole process.

#[path = "it/common.rs"]
mod common;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use nvsoak::health::poller::Opener;
use nvsoak::nvme::AdminTransport;
use nvsoak::nvme::discover::Controller;

use common::{Sample, fake_ctrl, free_port, http_get, parse_metrics, replay_drive};

const DRIVES: usize = 32;
const TARGETS: usize = 32;
/// The cardinality budget in docs/fleet.md ("A full chassis"): series per NVMe drive and per
/// target, histograms' buckets included.
const BUDGET_PER_DRIVE: usize = 120;
const BUDGET_PER_TARGET: usize = 150;

fn config(port: u16, dir: &Path) -> String {
    let mut c = format!(
        "default_target = false\n\
         [exporter]\nlisten = \"127.0.0.1:{port}\"\n\
         [state]\ndir = \"{}\"\ncheckpoint_interval = \"5s\"\n\
         [stats]\ninterval = \"1s\"\n\
         [health]\nenabled = true\npoll_interval = \"1s\"\n",
        dir.join("state").display()
    );
    for i in 0..TARGETS {
        let _ = write!(
            c,
            "\n[[target]]\nname = \"t{i}\"\npath = \"{}\"\nsize = \"4MiB\"\ndirect = false\n\
             engine = \"null\"\n\
             [[target.phase]]\nkind = \"soak\"\nprofile = \"4k-random-read\"\n\
             workers = 1\niodepth = 4\nrate = \"2000iops\"\n",
            dir.join(format!("t{i}.dat")).display()
        );
    }
    c
}

/// utime + stime of this process and of its I/O worker threads (named `nvsoak-w*`), seconds.
fn cpu_seconds() -> (f64, f64) {
    let tick = 100.0; // USER_HZ on Linux
    let parse = |stat: &str| -> f64 {
        // Fields after the command (which may hold spaces) start after the last ')'.
        let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
        let f: Vec<&str> = rest.split_whitespace().collect();
        let u: f64 = f.get(11).and_then(|v| v.parse().ok()).unwrap_or(0.0);
        let s: f64 = f.get(12).and_then(|v| v.parse().ok()).unwrap_or(0.0);
        (u + s) / tick
    };
    let total = parse(&std::fs::read_to_string("/proc/self/stat").expect("stat"));
    let mut workers = 0.0;
    for t in std::fs::read_dir("/proc/self/task")
        .expect("tasks")
        .flatten()
    {
        let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        if comm.starts_with("nvsoak-w")
            && let Ok(stat) = std::fs::read_to_string(t.path().join("stat"))
        {
            workers += parse(&stat);
        }
    }
    (total, workers)
}

fn rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|kb| kb.parse::<u64>().ok())
        .map(|kb| kb * 1024)
        .unwrap_or(0)
}

/// Series by the value of `label` (only series that carry it, not empty).
fn series_by(samples: &[Sample], label: &str) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for s in samples {
        if let Some(v) = s.labels.get(label).filter(|v| !v.is_empty()) {
            *out.entry(v.clone()).or_insert(0) += 1;
        }
    }
    out
}

/// "family=count, ..." for the series whose `label` is `value`, largest first.
fn families_of(samples: &[Sample], label: &str, value: &str) -> String {
    let mut by: BTreeMap<String, usize> = BTreeMap::new();
    for s in samples
        .iter()
        .filter(|s| s.labels.get(label).is_some_and(|v| v == value))
    {
        let fam = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|x| s.name.strip_suffix(x))
            .unwrap_or(&s.name);
        *by.entry(fam.to_string()).or_insert(0) += 1;
    }
    let mut v: Vec<(String, usize)> = by.into_iter().collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    v.iter()
        .map(|(f, n)| format!("{f}={n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn value(samples: &[Sample], name: &str) -> Option<f64> {
    samples.iter().find(|s| s.name == name).map(|s| s.value)
}

#[test]
fn one_daemon_holds_a_full_chassis() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sysfs = dir.path().join("sys");
    let mut transports = BTreeMap::new();
    for i in 0..DRIVES {
        let (name, serial) = (format!("nvme{i}"), format!("SCALE{i:04}"));
        fake_ctrl(&sysfs, &name, &serial, "SCALETEST 3.84TB");
        transports.insert(
            name.clone(),
            replay_drive(&format!("/dev/{name}"), Some(&serial), Some(0)),
        );
    }
    let opener: Opener = Arc::new(move |c: &Controller| {
        let t = transports
            .get(&c.name)
            .ok_or_else(|| nvsoak::nvme::NvmeError::Open {
                device: c.dev_path.display().to_string(),
                source: std::io::Error::from_raw_os_error(nix::libc::ENODEV),
            })?;
        Ok(Box::new(Arc::clone(t)) as Box<dyn AdminTransport>)
    });
    let port = free_port();
    let settings = nvsoak::config::load_str(&config(port, dir.path()), "scale test", Vec::new())
        .expect("valid config");
    let wiring = nvsoak::daemon::HealthWiring {
        sysfs_root: sysfs.clone(),
        opener,
    };
    let daemon = std::thread::spawn(move || {
        nvsoak::daemon::run_with(settings, nvsoak::daemon::RunFlags::default(), wiring)
    });
    let addr: std::net::SocketAddr = ([127, 0, 0, 1], port).into();
    let scrape = || -> Option<(String, Duration)> {
        let t = Instant::now();
        match http_get(addr, "/metrics") {
            Ok((200, body)) => Some((body, t.elapsed())),
            _ => None,
        }
    };

    // Every target running and every drive up.
    let deadline = Instant::now() + Duration::from_secs(120);
    let samples = loop {
        if let Some((body, _)) = scrape() {
            let s = parse_metrics(&body);
            let up = s.iter().filter(|x| x.name == "nvme_up" && x.value == 1.0);
            let running = s
                .iter()
                .filter(|x| x.name == "nvsoak_target_up" && x.value == 1.0);
            if up.count() == DRIVES && running.count() == TARGETS {
                break s;
            }
        }
        assert!(
            Instant::now() < deadline,
            "not all targets and drives came up"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    let polled_at = |s: &[Sample]| value(s, "nvsoak_health_poll_timestamp_seconds");
    let mut polls = std::collections::BTreeSet::new();

    // A measured window: one scrape a second (Prometheus' usual interval is 15 s).
    let window = Duration::from_secs(10);
    let (cpu0, workers0) = cpu_seconds();
    let started = Instant::now();
    let mut fetch = Vec::new();
    let mut last = samples;
    let mut size = 0;
    while started.elapsed() < window {
        let (body, took) = scrape().expect("scrape");
        size = body.len();
        fetch.push(took);
        last = parse_metrics(&body);
        if let Some(t) = polled_at(&last) {
            polls.insert(t.to_bits());
        }
        std::thread::sleep(Duration::from_secs(1));
    }
    let secs = started.elapsed().as_secs_f64();
    let (cpu1, workers1) = cpu_seconds();
    let other_cpu = ((cpu1 - cpu0) - (workers1 - workers0)) / secs;
    let worker_cpu = (workers1 - workers0) / secs;
    fetch.sort();
    let p50 = fetch[fetch.len() / 2];
    let max = fetch[fetch.len() - 1];
    let rss = rss_bytes();
    let per_drive = series_by(&last, "device");
    let per_target = series_by(&last, "target");
    let polls = polls.len() as f64;
    println!(
        "scale: {TARGETS} targets, {DRIVES} drives: daemon CPU outside the I/O workers {:.1} % of one core \
         (workers {:.1} %), RSS {:.1} MiB, /metrics {} bytes in {} series, fetched in p50 {:.1} ms / max {:.1} ms, \
         series per drive max {}, per target max {}, {polls} distinct polls seen over {secs:.1} s",
        other_cpu * 100.0,
        worker_cpu * 100.0,
        rss as f64 / (1 << 20) as f64,
        size,
        last.len(),
        p50.as_secs_f64() * 1e3,
        max.as_secs_f64() * 1e3,
        per_drive.values().max().unwrap_or(&0),
        per_target.values().max().unwrap_or(&0),
    );

    println!(
        "scale: nvme0's series by family: {}",
        families_of(&last, "device", "nvme0")
    );
    println!(
        "scale: t0's series by family: {}",
        families_of(&last, "target", "t0")
    );
    assert_eq!(
        per_drive.len(),
        DRIVES,
        "series for every drive: {per_drive:?}"
    );
    assert_eq!(per_target.len(), TARGETS, "series for every target");
    for (d, n) in &per_drive {
        assert!(
            *n <= BUDGET_PER_DRIVE,
            "{d}: {n} series, budget {BUDGET_PER_DRIVE}"
        );
    }
    for (t, n) in &per_target {
        assert!(
            *n <= BUDGET_PER_TARGET,
            "{t}: {n} series, budget {BUDGET_PER_TARGET}"
        );
    }
    // Polled on time: one poll a second and one scrape a second, so at least half the
    // scrapes saw a new poll on a loaded 2-core machine, and every drive answered the latest.
    assert!(
        polls >= fetch.len() as f64 / 2.0,
        "{polls} distinct polls over {} scrapes",
        fetch.len()
    );
    for s in last.iter().filter(|s| s.name == "nvme_up") {
        assert_eq!(s.value, 1.0, "{:?} down", s.labels);
    }
    // Generous bounds: the point is the printed figures, these catch a runaway.
    assert!(
        other_cpu < 1.0,
        "the daemon's own threads took {other_cpu:.2} cores"
    );
    assert!(rss < 512 << 20, "RSS {rss} bytes");
    assert!(size < 4 << 20, "/metrics is {size} bytes");

    nix::sys::signal::kill(nix::unistd::getpid(), nix::sys::signal::SIGTERM).expect("SIGTERM");
    daemon
        .join()
        .expect("daemon thread")
        .expect("daemon ran cleanly");
}
