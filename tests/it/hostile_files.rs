//! Every file nvsoak reads, replaced by what an attacker or an accident puts there (issue 28,
//! breaks 6 and 7): a FIFO (which blocks an ordinary open), a symlink to `/dev/zero` (which
//! never ends), a directory, and a sparse 20 GB file. The config, the checkpoint, a results file
//! and the known-drives list each get every one. Start-up never hangs and memory stays bounded:
//! the config is refused with its reason, and a state file is moved aside (never deleted) while
//! the daemon goes on to serve `/metrics`.

use std::fs;
use std::path::Path;
use std::time::Duration;

use crate::common::{Daemon, free_port, run_nvsoak, shm_dir};
use crate::faults::{LogTail, sighup};

const PLAN: &str = r#"
[state]
dir = "{dir}/state"
[health]
enabled = false
[[target]]
name = "t0"
path = "{dir}/t0.dat"
size = "4MiB"
engine = "psync"
direct = false
[[target.phase]]
kind = "soak"
profile = "4k-random-read"
iodepth = 1
rate = "500iops"
duration = "10m"
"#;

/// The kinds of thing put in a file's place.
#[derive(Debug, Clone, Copy)]
enum Hostile {
    Fifo,
    DevZero,
    Directory,
    SparseGiant,
}

const ALL: [Hostile; 4] = [
    Hostile::Fifo,
    Hostile::DevZero,
    Hostile::Directory,
    Hostile::SparseGiant,
];

fn plant(path: &Path, h: Hostile) {
    let _ = fs::remove_file(path);
    match h {
        Hostile::Fifo => nix::unistd::mkfifo(path, nix::sys::stat::Mode::from_bits_truncate(0o600))
            .expect("mkfifo"),
        Hostile::DevZero => std::os::unix::fs::symlink("/dev/zero", path).expect("symlink"),
        Hostile::Directory => fs::create_dir(path).expect("mkdir"),
        Hostile::SparseGiant => fs::File::create(path)
            .and_then(|f| f.set_len(20 << 30))
            .expect("sparse file"),
    }
}

/// Peak resident memory of a process, in KiB.
fn peak_rss_kib(pid: u32) -> u64 {
    fs::read_to_string(format!("/proc/{pid}/status"))
        .expect("status")
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .expect("VmHWM")
}

#[test]
fn a_hostile_config_file_is_refused_at_once_by_check_config_and_run() {
    let d = shm_dir();
    for h in ALL {
        let cfg = d.path().join(format!("plan-{}.toml", free_port()));
        plant(&cfg, h);
        let c = cfg.to_str().expect("utf-8");
        let (code, err) = run_nvsoak(&["check-config", c], "warn");
        assert_ne!(code, Some(0), "{h:?}: check-config approved it");
        assert!(err.contains("cannot read the config file"), "{h:?}: {err}");
        let addr = format!("127.0.0.1:{}", free_port());
        let (code, err) = run_nvsoak(
            &["run", "--config", c, "--web.listen-address", &addr],
            "warn",
        );
        assert_ne!(code, Some(0), "{h:?}: run started");
        assert!(err.contains("cannot read the config file"), "{h:?}: {err}");
        assert!(
            err.contains("not a regular file") || err.contains("larger than"),
            "{h:?}: {err}"
        );
    }
}

#[test]
fn a_hostile_config_at_sighup_is_rejected_and_the_daemon_keeps_serving_in_bounded_memory() {
    for h in [Hostile::DevZero, Hostile::SparseGiant, Hostile::Fifo] {
        let mut d = Daemon::start(PLAN);
        let log = LogTail::attach(&mut d);
        let cfg = d.dir.path().join("nvsoak.toml");
        plant(&cfg, h);
        sighup(&d);
        let t = log.wait_for("config rejected", Duration::from_secs(20));
        assert!(
            t.contains("not a regular file") || t.contains("larger than"),
            "{h:?}: {t}"
        );
        let kib = peak_rss_kib(d.child.id());
        assert!(
            kib < 512 << 10,
            "{h:?}: peak RSS {kib} KiB after the reload"
        );
        let s = d.scrape();
        assert!(
            s.iter()
                .any(|x| x.name == "nvsoak_target_up" && x.value == 1.0),
            "{h:?}: the running target went away"
        );
    }
}

#[test]
fn a_hostile_state_file_is_moved_aside_and_start_up_goes_on() {
    for (file, aside_prefix) in [
        ("checkpoint.json", "checkpoint.json.corrupt-"),
        ("results/t0.json", "t0.json."),
        ("drives.json", ""),
    ] {
        for h in ALL {
            let dir = shm_dir();
            let state = dir.path().join("state");
            fs::create_dir_all(state.join("results")).expect("mkdir");
            fs::write(state.join("lock"), "nvsoak pid=1\n").expect("an earlier run's lock");
            let path = state.join(file);
            plant(&path, h);
            // Daemon::start waits for /healthz, which is served only after the state is loaded.
            let plan = if file == "drives.json" {
                PLAN.replace("enabled = false", "enabled = true")
            } else {
                PLAN.to_string()
            };
            let d = Daemon::start_in(dir, &plan, &[]);
            let kib = peak_rss_kib(d.child.id());
            assert!(kib < 512 << 10, "{file} as {h:?}: peak RSS {kib} KiB");
            if !aside_prefix.is_empty() {
                let parent = path.parent().expect("parent");
                let aside: Vec<String> = fs::read_dir(parent)
                    .expect("listing")
                    .flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| n.starts_with(aside_prefix))
                    .collect();
                assert_eq!(
                    aside.len(),
                    1,
                    "{file} as {h:?}: moved aside once: {aside:?}"
                );
            }
            let s = d.scrape();
            assert!(
                s.iter().any(|x| x.name == "nvsoak_target_up"),
                "{file} as {h:?}: no target in /metrics"
            );
            let (status, _, err) = d.terminate();
            assert!(status.success(), "{file} as {h:?}: {err}");
        }
    }
}
