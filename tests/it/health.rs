//! The background health poller on a fake sysfs tree with the replay transport: the metric
//! text a scrape would get (names, labels, units), a failed page, a vanished drive; and the
//! `nvsoak health` binary where there is no NVMe controller.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use nvsoak::health::poller::Opener;
use nvsoak::health::{HostIo, HostIoSource, NoHostIo, spawn_with};
use nvsoak::nvme::AdminTransport;
use nvsoak::nvme::cmd::OPC_GET_LOG_PAGE;
use nvsoak::nvme::discover::Controller;
use nvsoak::nvme::replay::{ReplayTransport, Reply};

use crate::common::{Sample, bin, find, parse_metrics};

fn add_ctrl(root: &Path, name: &str, serial: &str) {
    let dir = root.join("class/nvme").join(name);
    std::fs::create_dir_all(dir.join(format!("{name}n1"))).expect("mkdir");
    std::fs::write(dir.join("serial"), format!("{serial}\n")).expect("write");
    std::fs::write(
        dir.join("model"),
        "HWE62P43032M000N nvsoak handbuilt model\n",
    )
    .expect("write");
    std::fs::write(dir.join("firmware_rev"), "FW1.2.3\n").expect("write");
    std::fs::write(dir.join(format!("{name}n1/nsid")), "1\n").expect("write");
}

fn opener(t: &Arc<ReplayTransport>) -> Opener {
    let t = Arc::clone(t);
    Arc::new(move |_c: &Controller| Ok(Box::new(Arc::clone(&t)) as Box<dyn AdminTransport>))
}

fn settings() -> nvsoak::config::HealthSettings {
    let mut s = nvsoak::config::builtin_default().health;
    s.poll_interval = Duration::from_secs(3600); // polls happen on poll_now only
    s.rescan_interval = Duration::ZERO;
    s
}

fn value(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> f64 {
    let found = find(samples, name, labels);
    assert_eq!(found.len(), 1, "{name}{labels:?}: {found:?}");
    found[0].value
}

fn text(h: &nvsoak::health::HealthHandle) -> String {
    nvsoak::metrics::encode_text(&nvsoak::metrics::health::families(&h.snapshot())).expect("encode")
}

struct Writes(u64);
impl HostIoSource for Writes {
    fn host_io(&self) -> Vec<HostIo> {
        vec![HostIo {
            path: "/dev/nvme0n1".into(),
            written_bytes: self.0,
            iops: 1234.0,
            ..Default::default()
        }]
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replayed_snapshot_exports_every_family_in_base_units() {
    let root = tempfile::tempdir().expect("tempdir");
    add_ctrl(root.path(), "nvme0", "SN-HANDBUILT-0001");
    let t = crate::common::handbuilt_replay();
    let (_tx, rx) = tokio::sync::watch::channel(false);
    let h = spawn_with(
        settings(),
        Arc::new(Writes(0)),
        rx,
        root.path().to_path_buf(),
        opener(&t),
    );
    h.wait_for_polls(1, Duration::from_secs(10))
        .await
        .expect("first poll");
    let text = text(&h);
    let s = parse_metrics(&text);
    let dev = [("device", "nvme0")];
    assert_eq!(value(&s, "nvme_up", &dev), 1.0);
    let info = find(&s, "nvme_info", &dev);
    assert_eq!(info.len(), 1);
    assert_eq!(info[0].labels["serial"], "SN-HANDBUILT-0001");
    assert_eq!(info[0].labels["firmware"], "FW1.2.3");
    assert_eq!(value(&s, "nvme_critical_warning", &dev), 37.0);
    for (cond, want) in [
        ("spare", 1.0),
        ("temperature", 0.0),
        ("reliability", 1.0),
        ("read_only", 0.0),
        ("volatile_backup", 0.0),
        ("pmr_read_only", 1.0),
    ] {
        assert_eq!(
            value(
                &s,
                "nvme_critical_warning_active",
                &[("device", "nvme0"), ("condition", cond)]
            ),
            want,
            "{cond}"
        );
    }
    assert_eq!(value(&s, "nvme_temperature_celsius", &dev), 44.85);
    assert_eq!(
        find(&s, "nvme_temperature_sensor_celsius", &dev).len(),
        4,
        "only implemented sensors"
    );
    assert_eq!(
        value(&s, "nvme_warning_temperature_threshold_celsius", &dev),
        69.85
    );
    assert_eq!(
        value(&s, "nvme_critical_temperature_threshold_celsius", &dev),
        84.85
    );
    assert_eq!(value(&s, "nvme_available_spare_ratio", &dev), 0.97);
    assert_eq!(value(&s, "nvme_available_spare_threshold_ratio", &dev), 0.1);
    assert_eq!(
        value(&s, "nvme_percentage_used_ratio", &dev),
        1.04,
        "not clamped"
    );
    let read = value(&s, "nvme_data_read_bytes_total", &dev);
    assert!((read - ((1u128 << 64) + 32) as f64 * 512_000.0).abs() / read < 1e-12);
    assert_eq!(
        value(&s, "nvme_host_write_commands_total", &dev),
        80_000_080.0
    );
    assert_eq!(
        value(&s, "nvme_controller_busy_seconds_total", &dev),
        96.0 * 60.0
    );
    assert_eq!(
        value(&s, "nvme_power_on_seconds_total", &dev),
        12_800.0 * 3600.0
    );
    assert_eq!(value(&s, "nvme_power_cycles_total", &dev), 112.0);
    assert_eq!(value(&s, "nvme_unsafe_shutdowns_total", &dev), 144.0);
    assert_eq!(value(&s, "nvme_error_log_entries_total", &dev), 176.0);
    assert_eq!(
        value(&s, "nvme_critical_temperature_seconds_total", &dev),
        196.0 * 60.0
    );
    assert_eq!(
        value(
            &s,
            "nvme_thermal_transitions_total",
            &[("device", "nvme0"), ("level", "1")]
        ),
        216.0
    );
    assert_eq!(
        value(
            &s,
            "nvme_thermal_management_seconds_total",
            &[("device", "nvme0"), ("level", "2")]
        ),
        228.0
    );
    let ns = [("device", "nvme0"), ("namespace", "nvme0n1")];
    assert_eq!(value(&s, "nvme_namespace_lba_size_bytes", &ns), 4096.0);
    assert_eq!(
        value(&s, "nvme_namespace_size_bytes", &ns),
        781_404_246.0 * 4096.0
    );
    assert_eq!(
        value(&s, "nvme_total_capacity_bytes", &dev),
        3_200_631_791_616.0
    );
    assert_eq!(
        value(
            &s,
            "nvme_error_log_status_total",
            &[("device", "nvme0"), ("status", "0x281")]
        ),
        2.0
    );
    // OCP C0h (GUID present).
    assert_eq!(value(&s, "nvme_ocp_thermal_throttling_status", &dev), 1.0);
    assert_eq!(
        value(&s, "nvme_ocp_bad_user_nand_blocks", &dev),
        ((1u64 << 40) + 0x20) as f64
    );
    assert_eq!(
        value(&s, "nvme_ocp_pcie_correctable_errors_total", &dev),
        104.0
    );
    assert!(value(&s, "nvsoak_write_amplification_ratio", &dev) > 0.0);
    // Derived: the model matches no table row, so no rated figures; throttling from OCP.
    assert!(find(&s, "nvsoak_rated_endurance_bytes", &dev).is_empty());
    assert_eq!(value(&s, "nvsoak_thermal_throttling", &dev), 1.0);
    assert_eq!(value(&s, "nvsoak_thermal_throttle_events_total", &dev), 1.0);
    assert_eq!(value(&s, "nvsoak_throttled_iops", &dev), 1234.0);
    assert_eq!(value(&s, "nvsoak_accounting_host_written_bytes", &dev), 0.0);
    // The poller itself.
    assert!(value(&s, "nvsoak_health_poll_timestamp_seconds", &[]) > 1.7e9);
    assert!(value(&s, "nvsoak_health_poll_duration_seconds", &[]) >= 0.0);
    assert_eq!(
        value(
            &s,
            "nvsoak_health_poll_errors_total",
            &[("device", "nvme0"), ("log", "smart")]
        ),
        0.0
    );
    assert!(
        text.contains("# HELP nvme_data_written_bytes_total Data written by the host (SMART log 02h, bytes 48..63, data units x 512000). As of the latest background health poll."),
        "{text}"
    );
    assert!(
        text.contains("# TYPE nvme_media_errors_total counter"),
        "{text}"
    );
    assert!(
        text.contains("# TYPE nvme_temperature_celsius gauge"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_page_keeps_the_rest_and_vanished_drive_stays_down() {
    let root = tempfile::tempdir().expect("tempdir");
    add_ctrl(root.path(), "nvme0", "SN-HANDBUILT-0001");
    let t = crate::common::handbuilt_replay();
    let (tx, rx) = tokio::sync::watch::channel(false);
    let h = spawn_with(
        settings(),
        Arc::new(NoHostIo),
        rx,
        root.path().to_path_buf(),
        opener(&t),
    );
    h.wait_for_polls(1, Duration::from_secs(10))
        .await
        .expect("poll 1");
    // SMART now fails with an NVMe status: nvme_up 0, the other pages and the last SMART
    // values stay, and the error is counted under log="smart".
    t.on_loose(OPC_GET_LOG_PAGE, 0x02, Reply::Status(0x0006));
    h.poll_now();
    h.wait_for_polls(2, Duration::from_secs(10))
        .await
        .expect("poll 2");
    let s = parse_metrics(&text(&h));
    let dev = [("device", "nvme0")];
    assert_eq!(value(&s, "nvme_up", &dev), 0.0);
    assert_eq!(
        value(&s, "nvme_temperature_celsius", &dev),
        44.85,
        "last SMART kept"
    );
    assert_eq!(value(&s, "nvme_firmware_active_slot", &dev), 2.0);
    assert_eq!(
        value(
            &s,
            "nvsoak_health_poll_errors_total",
            &[("device", "nvme0"), ("log", "smart")]
        ),
        1.0
    );
    assert_eq!(
        value(
            &s,
            "nvsoak_health_poll_errors_total",
            &[("device", "nvme0"), ("log", "error")]
        ),
        0.0
    );
    // The drive leaves sysfs: still exported, up 0. Another one is hot-added.
    t.on_loose(
        OPC_GET_LOG_PAGE,
        0x02,
        Reply::Data(crate::common::nvme_fixture("smart.bin"), 0),
    );
    std::fs::remove_dir_all(root.path().join("class/nvme/nvme0")).expect("unplug");
    add_ctrl(root.path(), "nvme1", "OTHER");
    h.poll_now();
    h.wait_for_polls(3, Duration::from_secs(10))
        .await
        .expect("poll 3");
    let s = parse_metrics(&text(&h));
    assert_eq!(value(&s, "nvme_up", &dev), 0.0, "vanished, never dropped");
    assert_eq!(
        value(&s, "nvme_up", &[("device", "nvme1")]),
        1.0,
        "hot-added"
    );
    // It returns.
    add_ctrl(root.path(), "nvme0", "SN-HANDBUILT-0001");
    h.poll_now();
    h.wait_for_polls(4, Duration::from_secs(10))
        .await
        .expect("poll 4");
    let s = parse_metrics(&text(&h));
    assert_eq!(value(&s, "nvme_up", &dev), 1.0);
    tx.send(true).expect("stop");
}

/// Issue 34: `health --json` on a machine without drives printed nothing and exited 1. It
/// prints `[]` (exit 0) and says why on stderr; the text form says it found none, naming both
/// protocols, and fails.
#[test]
fn health_without_drives_prints_an_empty_list_in_json_and_says_so() {
    let empty = tempfile::tempdir().expect("tempdir");
    let out = std::process::Command::new(bin())
        .args(["health", "--json"])
        .env("NVSOAK_SYSFS_ROOT", empty.path())
        .output()
        .expect("run nvsoak health");
    assert!(out.status.success(), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    assert_eq!(v, serde_json::json!([]));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("nvsoak: no drives found: no NVMe controller under")
            && err.contains("and no SATA disk under"),
        "{err}"
    );
    let out = std::process::Command::new(bin())
        .args(["health"])
        .env("NVSOAK_SYSFS_ROOT", empty.path())
        .output()
        .expect("run nvsoak health");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.starts_with("nvsoak: no drives found:"), "{err}");
    assert!(out.stdout.is_empty(), "{out:?}");
}

#[test]
fn health_names_a_controller_it_cannot_open() {
    // sysfs lists nvme97, but /dev/nvme97 does not exist on this machine.
    let root = tempfile::tempdir().expect("tempdir");
    add_ctrl(root.path(), "nvme97", "GHOST");
    assert!(!Path::new("/dev/nvme97").exists());
    let out = std::process::Command::new(bin())
        .args(["health", "nvme97"])
        .env("NVSOAK_SYSFS_ROOT", root.path())
        .output()
        .expect("run nvsoak health");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("/dev/nvme97: cannot open the controller"),
        "{err}"
    );
    let out = std::process::Command::new(bin())
        .args(["health", "nvme5"])
        .env("NVSOAK_SYSFS_ROOT", root.path())
        .output()
        .expect("run nvsoak health");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("nvme5: no such NVMe controller (found: nvme97)"),
        "{err}"
    );
}
