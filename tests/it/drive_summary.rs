//! Drive-side soak figures end to end: the daemon (in-process, `daemon::run_with`) soaks a
//! real block device while its health poller reads a fake sysfs tree through a replay
//! transport whose SMART counters change at every poll. The block device is a loop device on a
//! /dev/shm file, reached through a device node named like the fake controller's namespace
//! (`nvme9n1`), which is how the poller ties a target to a controller. Needs root and losetup;
//! skips with a printed reason otherwise. The loop device is detached by a drop guard. The
//! soak is interrupted once (SIGTERM, caught by the in-process daemon) and resumed from its
//! checkpoint, so the deltas must span both runs.

use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nvsoak::health::poller::Opener;
use nvsoak::model::results::{DriveSoak, TargetResults};
use nvsoak::nvme::cmd::{OPC_GET_FEATURES, OPC_GET_LOG_PAGE, OPC_IDENTIFY};
use nvsoak::nvme::discover::Controller;
use nvsoak::nvme::log::smart::{self, SmartLog};
use nvsoak::nvme::replay::{ReplayTransport, Reply};
use nvsoak::nvme::{AdminCmd, AdminTransport, NvmeError};

use crate::common::{bin, free_port, shm_dir};

/// SMART page `k` of the replay: every counter the drive summary uses moves by its own step
/// per poll, so a delta identifies the pair of pages it spans.
fn page(k: u32) -> Vec<u8> {
    let k128 = u128::from(k);
    let mut b = vec![0u8; smart::LEN];
    b[1..3].copy_from_slice(&310u16.to_le_bytes()); // 36.85 °C, below WCTEMP
    b[3] = 100 - k as u8; // available spare
    b[4] = 10;
    b[5] = 3 + (k / 3) as u8; // percentage used
    let mut put = |o: usize, v: u128| b[o..o + 16].copy_from_slice(&v.to_le_bytes());
    put(32, 5_000_000 + 700 * k128); // data units read
    put(48, 9_000_000 + 1_000 * k128); // data units written
    put(64, 80_000_000 + 50_000 * k128); // host read commands
    put(80, 90_000_000 + 60_000 * k128); // host write commands
    put(112, 40); // power cycles
    put(144, 11 + k128 / 4); // unsafe shutdowns
    put(160, 2 + k128); // media errors: rise every poll
    put(176, 20 + 2 * k128); // error log entries
    let mut put32 = |o: usize, v: u32| b[o..o + 4].copy_from_slice(&v.to_le_bytes());
    put32(192, 30 + k); // warning temperature time, minutes
    put32(196, 1); // critical temperature time, minutes
    put32(216, 4 + k); // TMT1 transitions
    put32(220, 1); // TMT2 transitions
    put32(224, 100 + 5 * k); // TMT1 seconds
    put32(228, 7); // TMT2 seconds
    b
}

const PAGES: u32 = 64;

/// The replay transport, except that the k-th SMART read gets [`page`] k (the last one
/// repeats); records which page each read got.
struct StepSmart {
    inner: ReplayTransport,
    served: Mutex<Vec<u32>>,
}

impl AdminTransport for StepSmart {
    fn device(&self) -> String {
        self.inner.device()
    }
    fn admin(&self, cmd: &AdminCmd, data: &mut [u8]) -> Result<u32, NvmeError> {
        if cmd.opcode == OPC_GET_LOG_PAGE && cmd.cdw10 & 0xff == u32::from(smart::LID) {
            let mut served = self.served.lock().unwrap_or_else(|p| p.into_inner());
            let k = (served.len() as u32).min(PAGES - 1);
            served.push(k);
            let p = page(k);
            data.fill(0);
            let n = p.len().min(data.len());
            data[..n].copy_from_slice(&p[..n]);
            return Ok(0);
        }
        self.inner.admin(cmd, data)
    }
}

fn step_smart() -> Arc<StepSmart> {
    let t = ReplayTransport::new("/dev/nvme9");
    t.on_loose(
        OPC_IDENTIFY,
        0x01,
        Reply::Data(crate::common::nvme_fixture("id-ctrl.bin"), 0),
    );
    t.on_loose(
        OPC_IDENTIFY,
        0x00,
        Reply::Data(crate::common::nvme_fixture("id-ns.bin"), 0),
    );
    t.on_loose(OPC_IDENTIFY, 0x17, Reply::Data(vec![0; 4096], 0));
    t.on_loose(
        OPC_GET_LOG_PAGE,
        0x01,
        Reply::Data(crate::common::nvme_fixture("error.bin"), 0),
    );
    t.on_loose(
        OPC_GET_LOG_PAGE,
        0x03,
        Reply::Data(crate::common::nvme_fixture("fw-slot.bin"), 0),
    );
    // No OCP page: its fixture reports throttling, which would hide the SMART-driven episode.
    t.on_loose(OPC_GET_LOG_PAGE, 0xc0, Reply::Status(0x4109));
    t.on_loose(OPC_GET_FEATURES, 0x04, Reply::Data(vec![], 343));
    Arc::new(StepSmart {
        inner: t,
        served: Mutex::new(Vec::new()),
    })
}

/// A loop device on a /dev/shm file, detached on drop.
struct Loop {
    dev: String,
}

impl Loop {
    fn new(backing: &Path, mib: u64) -> Result<Loop, String> {
        let f = std::fs::File::create(backing).map_err(|e| format!("backing file: {e}"))?;
        f.set_len(mib << 20).map_err(|e| format!("sizing: {e}"))?;
        drop(f);
        let out = Command::new("losetup")
            .args(["-f", "--show"])
            .arg(backing)
            .output()
            .map_err(|e| format!("losetup: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "losetup failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(Loop {
            dev: String::from_utf8_lossy(&out.stdout).trim().to_string(),
        })
    }
}

impl Drop for Loop {
    fn drop(&mut self) {
        let _ = Command::new("losetup").args(["-d", &self.dev]).status();
    }
}

/// A block device node at `node` for the same device as `dev`.
fn mknod_like(dev: &str, node: &Path) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt;
    let md = std::fs::metadata(dev).map_err(|e| format!("{dev}: {e}"))?;
    if !md.file_type().is_block_device() {
        return Err(format!("{dev} is not a block device"));
    }
    nix::sys::stat::mknod(
        node,
        nix::sys::stat::SFlag::S_IFBLK,
        nix::sys::stat::Mode::from_bits_truncate(0o600),
        md.rdev(),
    )
    .map_err(|e| format!("mknod {}: {e}", node.display()))
}

fn fake_sysfs(root: &Path) {
    let dir = root.join("class/nvme/nvme9");
    std::fs::create_dir_all(dir.join("nvme9n1")).expect("mkdir");
    for (f, v) in [
        ("serial", "SN-HANDBUILT-0001"),
        ("model", "HWE62P43032M000N nvsoak handbuilt model"),
        ("firmware_rev", "FW1.2.3"),
        ("nvme9n1/nsid", "1"),
    ] {
        std::fs::write(dir.join(f), format!("{v}\n")).expect("sysfs");
    }
}

fn delta(a: u128, b: u128) -> Option<u64> {
    u64::try_from(b - a).ok()
}

/// The figures `drive_soak` must give for SMART pages `a` and `b`, drive side only.
fn expected(a: &SmartLog, b: &SmartLog) -> DriveSoak {
    DriveSoak {
        data_written_bytes: delta(a.data_units_written, b.data_units_written).map(|u| u * 512_000),
        data_read_bytes: delta(a.data_units_read, b.data_units_read).map(|u| u * 512_000),
        host_write_commands: delta(a.host_write_commands, b.host_write_commands),
        host_read_commands: delta(a.host_read_commands, b.host_read_commands),
        media_errors: delta(a.media_errors, b.media_errors),
        error_log_entries: delta(a.num_err_log_entries, b.num_err_log_entries),
        unsafe_shutdowns: delta(a.unsafe_shutdowns, b.unsafe_shutdowns),
        warning_temp_secs: Some(u64::from(b.warning_temp_time - a.warning_temp_time) * 60),
        critical_temp_secs: Some(u64::from(b.critical_comp_time - a.critical_comp_time) * 60),
        tmt1_transitions: Some(u64::from(b.thm_temp1_trans_count - a.thm_temp1_trans_count)),
        tmt2_transitions: Some(u64::from(b.thm_temp2_trans_count - a.thm_temp2_trans_count)),
        tmt1_secs: Some(u64::from(b.thm_temp1_total_time - a.thm_temp1_total_time)),
        tmt2_secs: Some(u64::from(b.thm_temp2_total_time - a.thm_temp2_total_time)),
        percentage_used_start: a.percent_used,
        percentage_used_latest: b.percent_used,
        available_spare_start: a.avail_spare,
        available_spare_latest: b.avail_spare,
        available_spare_threshold: b.spare_thresh,
        critical_warning_latest: b.critical_warning,
        ..Default::default()
    }
}

/// Only the fields `expected` fills, for comparing.
fn drive_side(d: &DriveSoak) -> DriveSoak {
    DriveSoak {
        data_written_bytes: d.data_written_bytes,
        data_read_bytes: d.data_read_bytes,
        host_write_commands: d.host_write_commands,
        host_read_commands: d.host_read_commands,
        media_errors: d.media_errors,
        error_log_entries: d.error_log_entries,
        unsafe_shutdowns: d.unsafe_shutdowns,
        warning_temp_secs: d.warning_temp_secs,
        critical_temp_secs: d.critical_temp_secs,
        tmt1_transitions: d.tmt1_transitions,
        tmt2_transitions: d.tmt2_transitions,
        tmt1_secs: d.tmt1_secs,
        tmt2_secs: d.tmt2_secs,
        percentage_used_start: d.percentage_used_start,
        percentage_used_latest: d.percentage_used_latest,
        available_spare_start: d.available_spare_start,
        available_spare_latest: d.available_spare_latest,
        available_spare_threshold: d.available_spare_threshold,
        critical_warning_latest: d.critical_warning_latest,
        ..Default::default()
    }
}

struct Soaked {
    /// Keeps the scratch directory (and the loop's backing file) alive.
    _dir: tempfile::TempDir,
    state: PathBuf,
    results: PathBuf,
    served: Vec<u32>,
    /// SMART reads of the first (interrupted) run, and its checkpoint record.
    served_first_run: usize,
    first_run: nvsoak::model::checkpoint::TargetState,
}

/// Run a short soak on the loop device with replayed health. `None`: skipped (printed).
fn soak_on_replayed_drive(test: &str) -> Option<Soaked> {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipping {test}: needs root (loop devices)");
        return None;
    }
    if Command::new("losetup").arg("--version").output().is_err() {
        eprintln!("skipping {test}: losetup is missing (util-linux)");
        return None;
    }
    let dir = shm_dir();
    let lo = match Loop::new(&dir.path().join("drive.img"), 64) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("skipping {test}: {e}");
            return None;
        }
    };
    let node = dir.path().join("nvme9n1");
    mknod_like(&lo.dev, &node).expect("device node for the loop device");
    let sysfs = dir.path().join("sys");
    fake_sysfs(&sysfs);
    let state = dir.path().join("state");
    let config = format!(
        r#"
[exporter]
listen = "127.0.0.1:{port}"
[state]
dir = "{state}"
checkpoint_interval = "1s"
[health]
poll_interval = "1s"
rescan_interval = "1h"
[[target]]
name = "drive"
path = "{node}"
allow_destroy = "{node}"
engine = "psync"
[[target.phase]]
kind = "soak"
profile = "4k-random-write"
iodepth = 1
rate = "2000iops"
duration = "10s"
"#,
        port = free_port(),
        state = state.display(),
        node = node.display(),
    );
    let t = step_smart();
    // First run: stopped with SIGTERM once its checkpoint has the soak-start baseline and the
    // poller has read three pages; the second run resumes the soak from the checkpoint, on the
    // same fake drive (its counters carry on, as a real drive's do across a daemon restart).
    run_daemon(&config, &sysfs, &t, &state, true);
    let served_first_run = t.served.lock().unwrap_or_else(|p| p.into_inner()).len();
    let cp1 = nvsoak::state::read(&state)
        .expect("checkpoint readable")
        .expect("checkpoint saved at SIGTERM");
    let first_run = cp1.target("drive").expect("target").clone();
    assert!(
        first_run.phase_elapsed_secs < 10.0,
        "the first run was interrupted mid-soak: {}",
        first_run.phase_elapsed_secs
    );
    run_daemon(&config, &sysfs, &t, &state, false);
    drop(lo);
    let served = t.served.lock().unwrap_or_else(|p| p.into_inner()).clone();
    Some(Soaked {
        results: state.join("results/drive.json"),
        state,
        _dir: dir,
        served,
        served_first_run,
        first_run,
    })
}

/// Run the daemon in-process until its plan ends, or with `interrupt` until it has
/// checkpointed a baseline, then SIGTERM it (the daemon's handler catches it).
fn run_daemon(config: &str, sysfs: &Path, t: &Arc<StepSmart>, state: &Path, interrupt: bool) {
    let settings = nvsoak::config::load_str(config, "drive_summary test config", Vec::new())
        .expect("valid config");
    let opener: Opener = {
        let t = Arc::clone(t);
        Arc::new(move |_c: &Controller| Ok(Box::new(Arc::clone(&t)) as Box<dyn AdminTransport>))
    };
    let wiring = nvsoak::daemon::HealthWiring {
        sysfs_root: sysfs.to_path_buf(),
        opener,
    };
    let flags = nvsoak::daemon::RunFlags {
        exit_when_done: true,
        ..Default::default()
    };
    let daemon = std::thread::spawn(move || nvsoak::daemon::run_with(settings, flags, wiring));
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut signalled = false;
    while !daemon.is_finished() {
        assert!(
            Instant::now() < deadline,
            "the 10 s soak did not finish within 90 s"
        );
        if interrupt && !signalled {
            let polls = t.served.lock().unwrap_or_else(|p| p.into_inner()).len();
            let baseline = matches!(nvsoak::state::read(state), Ok(Some(cp))
                if cp.target("drive").is_some_and(|t| t.smart_at_soak_start.is_some()));
            if polls >= 3 && baseline {
                // The daemon's handlers are installed before its first checkpoint.
                nix::sys::signal::kill(nix::unistd::getpid(), nix::sys::signal::SIGTERM)
                    .expect("SIGTERM");
                signalled = true;
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    daemon
        .join()
        .expect("daemon thread")
        .expect("daemon ran cleanly");
    assert_eq!(
        signalled, interrupt,
        "the first run ended before its baseline was checkpointed"
    );
}

#[test]
fn soak_summary_carries_the_replayed_drive_deltas() {
    let Some(s) = soak_on_replayed_drive("soak_summary_carries_the_replayed_drive_deltas") else {
        return;
    };
    assert!(
        s.served.len() >= 3,
        "expected several polls in 10 s at 1 s: {:?}",
        s.served
    );
    let first = smart::parse(&page(0)).expect("page 0");

    // The checkpoint carries the first poll's SMART log, field for field.
    let cp = nvsoak::state::read(&s.state)
        .expect("checkpoint readable")
        .expect("checkpoint saved");
    let t = cp.target("drive").expect("target in the checkpoint");
    let at_start: SmartLog = serde_json::from_value(
        t.smart_at_soak_start
            .clone()
            .expect("smart_at_soak_start recorded"),
    )
    .expect("a SMART log");
    assert_eq!(at_start, first);
    assert_eq!(
        t.smart_at_soak_start,
        serde_json::to_value(&first).ok(),
        "the stored JSON is the parsed page 0"
    );
    let host0 = t.host_at_soak_start.expect("host figures at soak start");
    // The second run kept the first run's baseline.
    assert_eq!(t.smart_at_soak_start, s.first_run.smart_at_soak_start);
    assert_eq!(Some(host0), s.first_run.host_at_soak_start);
    assert_eq!(s.first_run.drive_throttle_episodes, 1);
    assert!(host0.written_bytes <= t.totals.write_bytes);

    // The results file: the deltas from page 0 to one later page, exactly.
    let text = std::fs::read_to_string(&s.results).expect("results file");
    let r: TargetResults = serde_json::from_str(&text).expect("results parse");
    assert_eq!(r.version, nvsoak::model::results::RESULTS_VERSION);
    let id = r
        .device
        .clone()
        .expect("the drive's identity from the poller");
    assert_eq!(
        (id.controller.as_str(), id.serial.as_str()),
        ("nvme9", "SN-HANDBUILT-0001")
    );
    assert!(id.capacity_bytes > 0);
    let soak = r.soak.expect("soak summary");
    let d = soak
        .drive
        .clone()
        .expect("drive figures in the soak summary");
    assert_eq!(d.device, "nvme9");
    let k = (1..PAGES)
        .find(|k| {
            let pk = smart::parse(&page(*k)).expect("page");
            drive_side(&d) == expected(&first, &pk)
        })
        .unwrap_or_else(|| panic!("the deltas match no pair (page 0, page k): {d:#?}"));
    assert!(s.served.contains(&k), "page {k} was served: {:?}", s.served);
    assert!(
        k as usize >= s.served_first_run,
        "the deltas run from the first run's first page to a page of the second run ({k} vs {} pages in the first run)",
        s.served_first_run
    );
    eprintln!(
        "drive deltas span pages 0..{k} of {} served",
        s.served.len()
    );
    assert!(d.media_errors_rose() && d.throttled());
    assert_eq!(d.start_time, host0.time);
    assert!(d.latest_time > d.start_time);
    // TMT1 transitions rise at every poll: one long episode per run, summed over the restart.
    assert_eq!(d.throttle_episodes, Some(2));
    assert_eq!(soak.smart_written_bytes_delta, d.data_written_bytes);
    assert_eq!(
        soak.throttled_secs,
        Some((d.tmt1_secs.unwrap_or(0) + d.tmt2_secs.unwrap_or(0)) as f64)
    );
    // nvsoak's side over the same period: what the workload wrote between the two reads.
    let ours = d
        .nvsoak_written_bytes
        .expect("nvsoak bytes over the period");
    assert!(
        ours > 0 && ours <= soak.written_bytes,
        "{ours} of {}",
        soak.written_bytes
    );
    assert_eq!(ours % 4096, 0, "whole 4 KiB writes");
    let drive = d.data_written_bytes.expect("drive bytes");
    assert_eq!(d.accounting_ratio, Some(drive as f64 / ours as f64));
    assert_eq!(
        d.accounting_agrees,
        Some(drive.abs_diff(ours) <= 2 * 512_000),
        "the replayed drive counts 512 MB per poll, nvsoak writes ~8 MB per second"
    );
    assert!(d.accounting_off());

    // The report shows them, and calls out what went wrong.
    let out = s.state.join("report.md");
    let st = Command::new(bin())
        .args(["report", "--format", "md", "--from"])
        .arg(&s.results)
        .arg("--out")
        .arg(&out)
        .output()
        .expect("nvsoak report");
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
    let md = std::fs::read_to_string(&out).expect("report.md");
    assert!(md.contains("### Drive during the soak"), "{md}");
    let written = nvsoak::model::fmt::fmt_bytes(drive as f64);
    assert!(md.contains(&written), "{written} in\n{md}");
    let errs = format!("| Media errors | **+{}** |", d.media_errors.unwrap_or(0));
    assert!(md.contains(&errs), "{errs} in\n{md}");
    assert!(md.contains("**Media errors rose during the soak"), "{md}");
    assert!(md.contains("**The drive throttled"), "{md}");
    assert!(md.contains("**Accounting disagrees"), "{md}");
    let json = Command::new(bin())
        .args(["report", "--format", "json", "--from"])
        .arg(&s.results)
        .output()
        .expect("nvsoak report --format json");
    assert!(json.status.success());
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).expect("json report");
    let jd = &v["drives"][0]["soak"]["drive"];
    assert_eq!(jd["data_written_bytes"], serde_json::json!(drive));
    assert_eq!(jd["media_errors"], serde_json::json!(d.media_errors));
    assert_eq!(v["drives"][0]["soak"]["media_errors_rose"], true);
}
