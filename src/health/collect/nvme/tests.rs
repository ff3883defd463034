//! The NVMe collector's polls: every page read, a failed page leaving the others in place,
//! the accounting check by namespace, the first and latest SMART samples.

use super::*;
use crate::health::NoHostIo;
use crate::nvme::cmd::{OPC_GET_FEATURES, OPC_GET_LOG_PAGE, OPC_IDENTIFY};
use crate::nvme::identify::testdata as idt;
use crate::nvme::log::{error::testdata as errt, fwslot::testdata as fwt, smart::testdata as smt};
use crate::nvme::replay::{ReplayTransport, Reply};

/// Every page answered: the hand-built drive (no OCP page, no telemetry).
pub(crate) fn full_replay(dev: &str) -> ReplayTransport {
    let t = ReplayTransport::new(dev);
    t.on_loose(OPC_IDENTIFY, 0x01, Reply::Data(idt::id_ctrl(), 0));
    t.on_loose(OPC_IDENTIFY, 0x00, Reply::Data(idt::id_ns(), 0));
    t.on_loose(OPC_IDENTIFY, 0x17, Reply::Data(vec![0; 4096], 0));
    t.on_loose(OPC_GET_LOG_PAGE, 0x02, Reply::Data(smt::smart(), 0));
    t.on_loose(OPC_GET_LOG_PAGE, 0x01, Reply::Data(errt::error_log(), 0));
    t.on_loose(OPC_GET_LOG_PAGE, 0x03, Reply::Data(fwt::fw_slot(), 0));
    t.on_loose(OPC_GET_LOG_PAGE, 0xc0, Reply::Status(0x4109));
    t.on_loose(OPC_GET_LOG_PAGE, 0x08, Reply::Status(0x4109));
    t.on_loose(OPC_GET_FEATURES, 0x04, Reply::Data(vec![], 343));
    t
}

pub(crate) fn ctrl() -> Controller {
    Controller {
        name: "nvme0".into(),
        dev_path: "/dev/nvme0".into(),
        serial: "sysfs-serial".into(),
        model: "sysfs-model".into(),
        firmware: "x".into(),
        namespaces: vec![discover::Namespace {
            name: "nvme0n1".into(),
            nsid: 1,
            dev_path: "/dev/nvme0n1".into(),
        }],
    }
}

#[test]
fn poll_once_reads_every_page() {
    let t = full_replay("/dev/nvme0");
    let d = poll_once(&t, &ctrl(), &RatingContext::default(), &NoHostIo);
    assert!(d.up);
    assert_eq!(
        d.serial, "SN-HANDBUILT-0001",
        "identify replaces the sysfs strings"
    );
    assert_eq!(d.smart.as_ref().map(|s| s.temperature), Some(318));
    assert_eq!(d.error_log.as_ref().map(|e| e.len()), Some(3));
    assert_eq!(d.fw_slot.as_ref().map(|f| f.active_slot()), Some(2));
    assert_eq!(d.thresholds.map(|t| t.over_kelvin), Some(343));
    assert_eq!(
        d.namespaces[0].id.as_ref().map(|n| n.lba_size()),
        Some(4096)
    );
    assert_eq!(
        d.ocp_support,
        OcpSupport::Absent,
        "rejected C0h = no OCP page, not an error"
    );
    assert!(d.poll_errors.is_empty(), "{:?}", d.poll_errors);
    // Identify, namespace, SMART, error (ELPE 62 -> 63 entries), fw slot, 2 features,
    // UUID list (CTRATT bit 9), C0h, the telemetry header (LPA bit 3).
    let ops: Vec<(u8, u32)> = t
        .sent()
        .iter()
        .map(|c| (c.opcode, c.cdw10 & 0xff))
        .collect();
    assert_eq!(
        ops,
        vec![
            (6, 1),
            (6, 0),
            (2, 2),
            (2, 1),
            (2, 3),
            (0xa, 4),
            (0xa, 4),
            (6, 0x17),
            (2, 0xc0),
            (2, 0x08)
        ]
    );
}

/// A drive without a volatile write cache is not asked for the feature; one with a cache is
/// read every poll (enabled, then turned off), and a failed read is counted under its page
/// and keeps the last state.
#[test]
fn the_volatile_write_cache_is_read_only_when_the_drive_has_one() {
    let t = full_replay("/dev/nvme0");
    let d = poll_once(&t, &ctrl(), &RatingContext::default(), &NoHostIo);
    assert_eq!(d.write_cache, Some(WriteCache::Absent));
    assert!(
        !t.sent()
            .iter()
            .any(|c| c.opcode == OPC_GET_FEATURES && c.cdw10 == 6)
    );
    let mut id = idt::id_ctrl();
    id[525] = 0x07;
    t.on_loose(OPC_IDENTIFY, 0x01, Reply::Data(id, 0));
    t.on_loose(OPC_GET_FEATURES, 0x06, Reply::Data(vec![], 1));
    let mut d = DeviceHealth::new(&ctrl());
    let ctx = RatingContext::default();
    poll_device(&t, &mut d, 1000.0, &NoHostIo, &ctx);
    assert_eq!(d.write_cache, Some(WriteCache::Enabled));
    t.on_loose(OPC_GET_FEATURES, 0x06, Reply::Data(vec![], 0xffff_fffe));
    poll_device(&t, &mut d, 1030.0, &NoHostIo, &ctx);
    assert_eq!(
        d.write_cache,
        Some(WriteCache::Disabled),
        "WCE is bit 0 only"
    );
    t.on_loose(OPC_GET_FEATURES, 0x06, Reply::Status(0x0002));
    poll_device(&t, &mut d, 1060.0, &NoHostIo, &ctx);
    assert_eq!(
        d.write_cache,
        Some(WriteCache::Disabled),
        "the last state is kept"
    );
    assert_eq!(d.poll_errors.get(page::WRITE_CACHE), Some(&1));
}

#[test]
fn a_failed_page_leaves_the_others_in_place() {
    let t = full_replay("/dev/nvme0");
    let mut d = DeviceHealth::new(&ctrl());
    let ctx = RatingContext::default();
    poll_device(&t, &mut d, 1000.0, &NoHostIo, &ctx);
    // The error log and SMART now fail; everything else keeps its last value.
    t.on_loose(OPC_GET_LOG_PAGE, 0x01, Reply::Status(0x0006));
    t.on_loose(OPC_GET_LOG_PAGE, 0x02, Reply::Errno(libc::EIO));
    poll_device(&t, &mut d, 1030.0, &NoHostIo, &ctx);
    assert!(!d.up, "nvme_up follows the SMART read");
    assert_eq!(
        d.smart.as_ref().map(|s| s.temperature),
        Some(318),
        "last SMART kept"
    );
    assert_eq!(
        d.error_log.as_ref().map(|e| e.len()),
        Some(3),
        "last error log kept"
    );
    assert_eq!(d.poll_errors.get(page::ERROR), Some(&1));
    assert_eq!(d.poll_errors.get(page::SMART), Some(&1));
    assert_eq!(d.poll_errors.get(page::FW_SLOT), None);
    assert!(
        d.last_error
            .as_deref()
            .is_some_and(|m| m.contains("reading")),
        "{:?}",
        d.last_error
    );
    t.on_loose(OPC_GET_LOG_PAGE, 0x02, Reply::Data(smt::smart(), 0));
    poll_device(&t, &mut d, 1060.0, &NoHostIo, &ctx);
    assert!(d.up);
    assert_eq!(d.poll_errors.get(page::ERROR), Some(&2));
}

#[test]
fn accounting_matches_host_io_by_namespace() {
    let t = full_replay("/dev/nvme0");
    let mut d = DeviceHealth::new(&ctrl());
    let ctx = RatingContext::default();
    let host = |w: u64| {
        vec![
            HostIo {
                path: "/dev/nvme0n1".into(),
                written_bytes: w,
                iops: 100.0,
                ..Default::default()
            },
            HostIo {
                path: "/dev/nvme1n1".into(),
                written_bytes: 999_999_999,
                ..Default::default()
            },
        ]
    };
    poll_device(&t, &mut d, 0.0, &host(0), &ctx);
    let mut page = smt::smart();
    let duw = crate::nvme::log::smart::parse(&page)
        .expect("parse")
        .data_units_written;
    page[48..64].copy_from_slice(&(duw + 10).to_le_bytes());
    t.on_loose(OPC_GET_LOG_PAGE, 0x02, Reply::Data(page, 0));
    poll_device(&t, &mut d, 30.0, &host(5_120_000), &ctx);
    let a = d.derived.accounting.expect("accounting");
    assert_eq!(a.host_written_bytes, 5_120_000.0);
    assert_eq!(a.drive_written_bytes, 5_120_000.0);
    assert_eq!(a.ratio, Some(1.0));
    assert_eq!(d.derived.throttle.unthrottled_iops, Some(100.0));
}

#[test]
fn smart_samples_keep_the_first_read_and_follow_the_latest() {
    let t = full_replay("/dev/nvme0");
    let mut d = DeviceHealth::new(&ctrl());
    let ctx = RatingContext::default();
    let host = |w: u64| {
        vec![
            HostIo {
                path: "/dev/nvme0n1".into(),
                written_bytes: w,
                ..Default::default()
            },
            HostIo {
                path: "/dev/nvme1n1".into(),
                written_bytes: 1,
                ..Default::default()
            },
        ]
    };
    poll_device(&t, &mut d, 10.0, &host(100), &ctx);
    let first = d.first_sample.clone().expect("first sample");
    assert_eq!(first.time, 10.0);
    assert_eq!(first.host.len(), 1, "only the targets on this drive");
    assert_eq!(first.host[0].written_bytes, 100);
    assert_eq!(Some(&first.smart), d.smart.as_ref());
    poll_device(&t, &mut d, 40.0, &host(200), &ctx);
    assert_eq!(
        d.first_sample.as_ref(),
        Some(&first),
        "the first read stays"
    );
    assert_eq!(d.last_sample.as_ref().map(|s| s.time), Some(40.0));
    // A failed SMART read leaves the latest sample at the last good one.
    t.on_loose(OPC_GET_LOG_PAGE, 0x02, Reply::Errno(libc::EIO));
    poll_device(&t, &mut d, 70.0, &host(300), &ctx);
    let last = d.last_sample.as_ref().expect("last");
    assert_eq!((last.time, last.host[0].written_bytes), (40.0, 200));
}

/// The host figures are read right after the SMART command, before any other page, so the
/// accounting check compares two figures of the same instant.
#[test]
fn host_io_is_read_right_after_the_smart_command() {
    struct Probe {
        t: Arc<ReplayTransport>,
        seen: std::sync::Mutex<Vec<(u8, u32)>>,
    }
    impl HostIoSource for Probe {
        fn host_io(&self) -> Vec<HostIo> {
            let sent = self.t.sent();
            let last = sent.last().map(|c| (c.opcode, c.cdw10)).unwrap_or((0, 0));
            self.seen.lock().expect("lock").push(last);
            Vec::new()
        }
    }
    let t = Arc::new(full_replay("/dev/nvme0"));
    let probe = Probe {
        t: Arc::clone(&t),
        seen: std::sync::Mutex::new(Vec::new()),
    };
    let mut d = DeviceHealth::new(&ctrl());
    poll_device(t.as_ref(), &mut d, 0.0, &probe, &RatingContext::default());
    let seen = probe.seen.lock().expect("lock").clone();
    assert_eq!(seen.len(), 1, "one read per device poll");
    assert_eq!(seen[0].0, OPC_GET_LOG_PAGE);
    assert_eq!(
        seen[0].1 & 0xff,
        0x02,
        "the last command before it was SMART 02h"
    );
    assert!(
        t.sent().len() > 3 + 1,
        "other pages were read after it: {}",
        t.sent().len()
    );
}
