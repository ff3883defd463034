//! The drive bookkeeping's tests: an NVMe controller's samples here, a SATA disk's (polled
//! through the ATA collector's replay transport) in [`sata`]; both go through the one
//! [`DriveTracking::update`].

use super::*;
use crate::health::{DeviceHealth, HealthSnapshot, HostIo, SmartSample};
use crate::nvme::discover::{Controller, Namespace};
use crate::nvme::log::smart::SmartLog;
use crate::workload::scheduler::{self, TargetShared};

fn device(first: Option<SmartSample>, last: Option<SmartSample>) -> DeviceHealth {
    let mut d = DeviceHealth::new(&Controller {
        name: "nvme0".into(),
        dev_path: "/dev/nvme0".into(),
        serial: "S".into(),
        model: "M".into(),
        firmware: "F".into(),
        namespaces: vec![Namespace {
            name: "nvme0n1".into(),
            nsid: 1,
            dev_path: "/dev/nvme0n1".into(),
        }],
    });
    d.first_sample = first;
    d.last_sample = last;
    d
}

fn sample(time: f64, units: u128, written: u64, events: u64, throttling: bool) -> SmartSample {
    SmartSample {
        time,
        smart: SmartLog {
            data_units_written: units,
            ..Default::default()
        },
        host: vec![HostIo {
            path: "/dev/nvme0n1".into(),
            written_bytes: written,
            ..Default::default()
        }],
        throttle_events: events,
        throttling,
    }
}

fn target(started_at: f64) -> scheduler::TargetSnapshot {
    scheduler::TargetSnapshot {
        name: "t".into(),
        path: "/dev/nvme0n1".into(),
        is_block: true,
        started_at,
        ..Default::default()
    }
}

/// The daemon's update of one target, on a full copy of it.
fn update_target_drive(t: &mut scheduler::TargetSnapshot, health: &HealthSnapshot) {
    let on = DriveTarget {
        path: Path::new(&t.path),
        started_at: t.started_at,
        soak_started: t.soak_started,
        carried: &t.carried,
    };
    t.drive.update(&on, health);
    t.controller = t.drive.controller.clone();
}

fn snap(d: DeviceHealth) -> HealthSnapshot {
    HealthSnapshot {
        devices: vec![d],
        ..Default::default()
    }
}

#[test]
fn a_by_id_target_maps_to_the_controller_the_poller_found() {
    // The target is named through a /dev/disk/by-id link: parsing its name finds no
    // controller, the poller's mapping (which resolves it) does, and the label follows.
    let by_id = "/dev/disk/by-id/nvme-M_S";
    let mut t = target(100.0);
    t.path = by_id.into();
    assert_eq!(crate::nvme::controller_of_node(by_id), None);
    let mut s = sample(130.0, 1, 0, 0, false);
    s.host[0].path = by_id.into();
    update_target_drive(&mut t, &snap(device(Some(s.clone()), Some(s))));
    assert_eq!(t.controller.as_deref(), Some("nvme0"));
    let info = crate::metrics::workload::DaemonInfo {
        version: "v",
        revision: "r",
        uptime_secs: 0.0,
        auth: None,
        refused: Vec::new(),
    };
    let fams = crate::metrics::workload::families(std::slice::from_ref(&t), &[], &info);
    let f = fams
        .iter()
        .find(|f| f.name() == "nvsoak_target_info")
        .expect("nvsoak_target_info");
    let device: Vec<String> = f.get_metric()[0]
        .get_label()
        .iter()
        .filter(|l| l.name() == "device")
        .map(|l| l.value().to_string())
        .collect();
    assert_eq!(device, vec!["nvme0".to_string()]);
}

#[test]
fn prestart_poll_is_the_baseline_and_later_polls_run_from_it() {
    // Taken before the target started: its host entry is zero, the carried totals count.
    let mut pre = sample(99.5, 7, 0, 2, true);
    pre.smart.host_write_commands = 70;
    let mut t = target(100.0);
    t.carried.write_bytes = 1 << 20;
    t.drive.polls_from = Some(99.0);
    update_target_drive(&mut t, &snap(device(Some(pre.clone()), Some(pre.clone()))));
    let start: SmartLog = t.drive.smart_at_soak_start.clone().expect("baseline");
    assert_eq!(start.data_units_written, 7);
    assert_eq!(start.host_write_commands, 70);
    let base = t.drive.host_at_soak_start.expect("host baseline");
    assert_eq!((base.time, base.written_bytes), (99.5, 1 << 20));
    assert_eq!(
        t.drive.episodes_base,
        Some(1),
        "the episode under way counts"
    );
    // The next poll (after the target started) keeps that baseline.
    let later = sample(130.0, 17, 10 * 512_000, 2, false);
    update_target_drive(&mut t, &snap(device(Some(pre), Some(later))));
    let f = t.drive.figures.clone().expect("figures");
    assert_eq!(f.data_written_bytes, Some(10 * 512_000));
    assert_eq!(f.nvsoak_written_bytes, Some(10 * 512_000));
    // A target that already has a baseline (a resumed soak) keeps it.
    let mut resumed = target(100.0);
    resumed.drive.polls_from = Some(98.0);
    resumed.drive.smart_at_soak_start = Some(SmartLog {
        data_units_written: 1,
        ..Default::default()
    });
    let other = sample(99.0, 99, 0, 0, false);
    update_target_drive(
        &mut resumed,
        &snap(device(Some(other.clone()), Some(other))),
    );
    assert_eq!(
        resumed.drive.smart_at_soak_start,
        Some(SmartLog {
            data_units_written: 1,
            ..Default::default()
        })
    );
    assert!(resumed.drive.host_at_soak_start.is_none());
}

#[test]
fn baseline_is_the_first_poll_of_the_run_and_deltas_run_to_the_latest() {
    let mut t = target(100.0);
    // The poller's first read (throttling already: that episode counts), then a later one.
    let h = snap(device(
        Some(sample(101.0, 10, 4096, 1, true)),
        Some(sample(131.0, 30, 4096 + 10 * 512_000, 3, false)),
    ));
    update_target_drive(&mut t, &h);
    let start: SmartLog = t.drive.smart_at_soak_start.clone().expect("baseline");
    assert_eq!(
        start.data_units_written, 10,
        "the first poll, not the latest"
    );
    let base = t.drive.host_at_soak_start.expect("host baseline");
    assert_eq!((base.time, base.written_bytes), (101.0, 4096));
    let f = t.drive.figures.clone().expect("figures");
    assert_eq!(f.device, "nvme0");
    assert_eq!(f.data_written_bytes, Some(20 * 512_000));
    assert_eq!(f.nvsoak_written_bytes, Some(10 * 512_000));
    assert_eq!(f.accounting_agrees, Some(false));
    assert_eq!(
        f.throttle_episodes,
        Some(3),
        "events 3, one under way at the start"
    );
    // The checkpoint carries the baseline and the episodes.
    let st = TargetShared::from(t.clone()).to_state();
    assert_eq!(
        st.smart_at_soak_start,
        t.drive
            .smart_at_soak_start
            .as_ref()
            .and_then(|s| serde_json::to_value(s).ok())
    );
    assert_eq!(st.host_at_soak_start, Some(base));
    assert_eq!(st.drive_throttle_episodes, 3);
}

#[test]
fn a_warning_and_the_peak_temperature_seen_before_a_restart_survive_it() {
    let mut d = DriveTracking {
        warning_seen: 0x04,
        temperature_max_kelvin: 351,
        ..Default::default()
    };
    let mut st = crate::model::checkpoint::TargetState::new("t", "/dev/x");
    st.drive_warning_seen = d.warning_seen;
    st.drive_temperature_max_kelvin = d.temperature_max_kelvin;
    let json = serde_json::to_string(&st).expect("ser");
    let back: crate::model::checkpoint::TargetState = serde_json::from_str(&json).expect("de");
    d = DriveTracking::default();
    d.restore("t", &back);
    assert_eq!((d.warning_seen, d.temperature_max_kelvin), (0x04, 351));
    // A checkpoint from before these fields loads with none seen.
    let mut v: serde_json::Value = serde_json::from_str(&json).expect("value");
    if let Some(m) = v.as_object_mut() {
        m.remove("drive_warning_seen");
        m.remove("drive_temperature_max_kelvin");
    }
    let old: crate::model::checkpoint::TargetState = serde_json::from_value(v).expect("old loads");
    assert_eq!(old.drive_warning_seen, 0);
}

#[test]
fn a_resumed_soak_keeps_its_baseline_and_adds_the_carried_totals() {
    let mut t = target(1000.0);
    t.drive.smart_at_soak_start = Some(SmartLog {
        data_units_written: 5,
        ..Default::default()
    });
    t.drive.host_at_soak_start = Some(crate::model::results::HostAtSmart {
        time: 10.0,
        written_bytes: 0,
        ..Default::default()
    });
    t.carried.write_bytes = 2 * 512_000;
    t.drive.episodes_carried = 2;
    // This run's own counters restart at 0; the poller's first read predates nothing.
    let h = snap(device(
        Some(sample(1001.0, 8, 0, 0, false)),
        Some(sample(1031.0, 9, 2 * 512_000, 1, true)),
    ));
    update_target_drive(&mut t, &h);
    let f = t.drive.figures.clone().expect("figures");
    assert_eq!(f.start_time, 10.0);
    assert_eq!(f.data_written_bytes, Some(4 * 512_000));
    assert_eq!(
        f.nvsoak_written_bytes,
        Some(4 * 512_000),
        "carried + this run"
    );
    assert_eq!(f.accounting_agrees, Some(true));
    assert_eq!(f.throttle_episodes, Some(3));
}

#[test]
fn polls_before_the_target_started_are_not_its_baseline() {
    // A target started by a reload: the poller's first read belongs to the old one.
    let mut t = target(500.0);
    let h = snap(device(
        Some(sample(1.0, 1, 999, 0, false)),
        Some(sample(400.0, 7, 999, 0, false)),
    ));
    update_target_drive(&mut t, &h);
    assert!(t.drive.smart_at_soak_start.is_none() && t.drive.figures.is_none());
    let h = snap(device(
        Some(sample(1.0, 1, 999, 0, false)),
        Some(sample(530.0, 8, 0, 0, false)),
    ));
    update_target_drive(&mut t, &h);
    let f = t.drive.figures.clone().expect("figures");
    assert_eq!(f.start_time, 530.0);
    assert_eq!(f.data_written_bytes, Some(0));
    // A file target or another drive's namespace: nothing.
    let mut other = target(0.0);
    other.path = "/dev/nvme1n1".into();
    update_target_drive(&mut other, &h);
    assert!(other.drive.figures.is_none() && other.drive.smart_at_soak_start.is_none());
}

/// The drive's own view reaches the soak figures: a panic after the soak started is
/// `ocp_panic_changed`, a drive without a telemetry page leaves that figure `None`, and the
/// C3h counters keep the first reading as the start.
#[test]
fn ocp_panics_and_latency_counts_reach_the_soak_figures() {
    use crate::model::events::{DriveEvent, kind};
    use crate::nvme::log::ocp_latency::{LatencyMonitorLog, PerOp};
    let mut t = target(100.0);
    let s = sample(130.0, 1, 0, 0, false);
    let mut d = device(Some(s.clone()), Some(s));
    d.pages.recovery = Some(Default::default());
    let mut l = LatencyMonitorLog::default();
    l.statics.counters[2] = PerOp {
        read: 5,
        write: 6,
        deallocate: 7,
    };
    d.pages.latency = Some(l.clone());
    update_target_drive(&mut t, &snap(d.clone()));
    let f = t.drive.figures.clone().expect("figures");
    assert_eq!(f.ocp_panic_changed, Some(false));
    assert_eq!(f.telemetry_generation_changed, None, "no 08h page");
    assert!(f.drive_events.is_empty());
    assert_eq!(f.ocp_latency_start.map(|c| c[2].read), Some(5));
    // Later: a panic at 150 s and more outliers.
    d.pages.events.push(DriveEvent {
        time: 150.0,
        kind: kind::OCP_PANIC.into(),
        detail: "OCP panic: panic ID 0x0 -> 0x9".into(),
    });
    d.pages.last_event.insert(kind::OCP_PANIC.into(), 150.0);
    l.statics.counters[2].read = 9;
    d.pages.latency = Some(l);
    update_target_drive(&mut t, &snap(d));
    let f = t.drive.figures.clone().expect("figures");
    assert_eq!(f.ocp_panic_changed, Some(true));
    assert_eq!(f.drive_events.len(), 1);
    assert_eq!(
        f.ocp_latency_start.map(|c| c[2].read),
        Some(5),
        "the start stays"
    );
    assert_eq!(f.ocp_latency_latest.map(|c| c[2].read), Some(9));
    // An older results file without these fields still loads.
    let old: crate::model::results::DriveSoak =
        serde_json::from_str(r#"{"device":"nvme0","start_time":1.0,"latest_time":2.0}"#)
            .expect("old file");
    assert_eq!(old.ocp_panic_changed, None);
    assert!(old.drive_events.is_empty());
}

/// A block target on a SATA disk: the same bookkeeping on the ATA collector's sample.
mod sata {
    use std::path::Path;

    use super::super::*;
    use crate::ata::cmd;
    use crate::ata::devstat::testdata::{OK, page};
    use crate::ata::transport::{Replay, Reply};
    use crate::ata::vendor::WritesSource;
    use crate::health::HealthSnapshot;
    use crate::health::HostIo;
    use crate::health::collect::RatingContext;
    use crate::health::collect::ata::soak::AtaBaseline;
    use crate::health::collect::ata::testdata::{disk, full_replay, good};
    use crate::health::collect::ata::{AtaHealth, poll_disk};
    use crate::model::results::ACCOUNTING_TOLERANCE_BYTES;
    use crate::model::totals::Totals;

    const DEV: &str = "/dev/sdq";

    /// What the drive counts at one poll: every figure distinct.
    struct Counts {
        written_sectors: u64,
        read_sectors: u64,
        hours: u64,
        uncorrectable: u64,
        temperature: u64,
        crc: u64,
        percentage_used: u64,
    }

    fn set(t: &Replay, c: &Counts) {
        let pages = [
            (
                1,
                page(
                    1,
                    &[
                        (8, OK | 17),
                        (16, OK | c.hours),
                        (24, OK | c.written_sectors),
                        (40, OK | c.read_sectors),
                    ],
                ),
            ),
            (4, page(4, &[(8, OK | c.uncorrectable)])),
            (5, page(5, &[(8, OK | c.temperature), (88, OK | 70)])),
            (6, page(6, &[(24, OK | c.crc)])),
            (7, page(7, &[(8, OK | c.percentage_used)])),
        ];
        for (p, b) in pages {
            t.on(&cmd::read_devstat_page(p), Reply::Regs(b, good()));
        }
    }

    fn host(written: u64) -> Vec<HostIo> {
        vec![HostIo {
            path: DEV.into(),
            written_bytes: written,
            read_bytes: written / 4,
            write_ops: written / 4096,
            read_ops: written / 16384,
            ..Default::default()
        }]
    }

    fn poll(t: &Replay, d: &mut AtaHealth, now: f64, written: u64) {
        let mut warned = false;
        poll_disk(
            t,
            d,
            now,
            &host(written),
            &RatingContext::default(),
            &mut warned,
        );
    }

    fn snap(d: &AtaHealth) -> HealthSnapshot {
        HealthSnapshot {
            ata: vec![d.clone()],
            ..Default::default()
        }
    }

    fn update_at(tr: &mut DriveTracking, carried: &Totals, h: &HealthSnapshot) {
        let t = DriveTarget {
            path: Path::new(DEV),
            started_at: 100.0,
            soak_started: Some(100.0),
            carried,
        };
        tr.update(&t, h);
    }

    const START: Counts = Counts {
        written_sectors: 1_000_000,
        read_sectors: 2_000_000,
        hours: 500,
        uncorrectable: 3,
        temperature: 40,
        crc: 7,
        percentage_used: 4,
    };

    /// Two polls of a drive that reports Device Statistics; `drive_sectors` written between
    /// them while nvsoak wrote `ours` bytes. Returns the tracking after both.
    fn soak(drive_sectors: u64, ours: u64) -> (DriveTracking, AtaHealth) {
        let t = full_replay(DEV);
        set(&t, &START);
        let mut d = AtaHealth::new(&disk("sdq"));
        poll(&t, &mut d, 101.0, 0);
        let mut tr = DriveTracking::default();
        let carried = Totals::default();
        update_at(&mut tr, &carried, &snap(&d));
        // A hotter poll in between: the maximum is kept though the latest is cooler.
        set(
            &t,
            &Counts {
                temperature: 55,
                ..START
            },
        );
        poll(&t, &mut d, 101.0 + 21_600.0, ours / 2);
        update_at(&mut tr, &carried, &snap(&d));
        set(
            &t,
            &Counts {
                written_sectors: START.written_sectors + drive_sectors,
                read_sectors: START.read_sectors + 4_000,
                hours: START.hours + 12,
                uncorrectable: START.uncorrectable + 2,
                temperature: 45,
                crc: START.crc + 1,
                percentage_used: 5,
            },
        );
        poll(&t, &mut d, 101.0 + 43_200.0, ours);
        update_at(&mut tr, &carried, &snap(&d));
        (tr, d)
    }

    #[test]
    fn devstat_bytes_written_agree_with_nvsoaks_writes() {
        // 100 000 sectors = 51.2 MB; nvsoak wrote 4 KiB less (within rounding).
        let (tr, d) = soak(100_000, 51_200_000 - 4096);
        assert_eq!(tr.controller.as_deref(), Some("sdq"));
        let start = tr.ata_at_soak_start.clone().expect("baseline");
        assert_eq!(start.written_bytes, Some(1_000_000 * 512));
        assert_eq!(tr.host_at_soak_start.map(|h| h.time), Some(101.0));
        let f = tr.figures.clone().expect("figures");
        assert_eq!(f.device, "sdq");
        assert_eq!((f.start_time, f.latest_time), (101.0, 101.0 + 43_200.0));
        assert_eq!(f.data_written_bytes, Some(51_200_000));
        assert_eq!(f.data_read_bytes, Some(4_000 * 512));
        assert_eq!(f.nvsoak_written_bytes, Some(51_200_000 - 4096));
        assert_eq!(f.nvsoak_read_bytes, Some((51_200_000 - 4096) / 4));
        assert_eq!(f.accounting_agrees, Some(true));
        let r = f.accounting_ratio.expect("ratio");
        assert!((r - 51_200_000.0 / 51_195_904.0).abs() < 1e-12, "{r}");
        assert_eq!(f.media_errors, Some(2), "reported uncorrectable +2");
        assert!(f.media_errors_rose() && !f.accounting_off());
        // 51.2 MB in half a day on the IronWolf's rated 3.84 TB.
        let dwpd = f.observed_dwpd.expect("dwpd");
        assert!(
            (dwpd - 51_200_000.0 / 3_840e9 / 0.5).abs() < 1e-15,
            "{dwpd}"
        );
        assert_eq!(f.capacity_bytes, Some(3_840_000_000_000));
        let a = f.ata.clone().expect("ata figures");
        assert_eq!(a.written_source, Some(WritesSource::DeviceStatistics));
        assert!(!a.unit_uncertain());
        assert_eq!(a.written_unit_bytes, 512);
        assert_eq!(a.accounting_tolerance_bytes, ACCOUNTING_TOLERANCE_BYTES);
        assert_eq!(a.power_on_secs, Some(12 * 3600));
        assert_eq!(a.uncorrectable, Some(2));
        assert_eq!(a.crc_errors, Some(1));
        assert_eq!(a.reallocated, Some(0), "attribute 5 unchanged");
        assert_eq!(
            (a.temperature_max_c, a.temperature_latest_c),
            (Some(55), Some(45))
        );
        assert_eq!(
            (a.percentage_used_start, a.percentage_used_latest),
            (Some(4), Some(5))
        );
        assert_eq!((f.percentage_used_start, f.percentage_used_latest), (4, 5));
        assert_eq!(a.smart_passed_latest, Some(true));
        assert!(!f.counter_went_backwards);
        assert_eq!(f.throttle_episodes, Some(0));
        let id = tr.identity.clone().expect("identity");
        assert_eq!(
            (id.controller.as_str(), id.serial.as_str()),
            ("sdq", d.serial.as_str())
        );
    }

    #[test]
    fn devstat_bytes_written_beyond_rounding_disagree() {
        // The drive counted twice what nvsoak wrote (write amplification in the host path?).
        let (tr, _) = soak(200_000, 51_200_000);
        let f = tr.figures.clone().expect("figures");
        assert_eq!(f.data_written_bytes, Some(102_400_000));
        assert_eq!(f.accounting_agrees, Some(false));
        assert_eq!(f.accounting_ratio, Some(2.0));
        assert!(f.accounting_off());
        // Just outside the tolerance also disagrees; just inside agrees.
        let (tr, _) = soak(100_000, 51_200_000 - ACCOUNTING_TOLERANCE_BYTES - 512);
        assert_eq!(tr.figures.and_then(|f| f.accounting_agrees), Some(false));
        let (tr, _) = soak(100_000, 51_200_000 - ACCOUNTING_TOLERANCE_BYTES);
        assert_eq!(tr.figures.and_then(|f| f.accounting_agrees), Some(true));
    }

    #[test]
    fn the_checkpoint_keeps_the_ata_baseline_across_a_restart() {
        let (tr, d) = soak(100_000, 51_200_000);
        let target = crate::workload::scheduler::TargetSnapshot {
            name: "t".into(),
            path: DEV.into(),
            is_block: true,
            drive: tr.clone(),
            ..Default::default()
        };
        let st = crate::workload::scheduler::TargetShared::from(target).to_state();
        assert!(st.smart_at_soak_start.is_none());
        let json = st
            .ata_at_soak_start
            .clone()
            .expect("ata baseline in the checkpoint");
        let back: AtaBaseline = serde_json::from_value(json).expect("parses");
        assert_eq!(Some(back.counters), tr.ata_at_soak_start);
        assert_eq!(back.temperature_max_c, Some(55));
        // A resumed run: the baseline comes back, and the next poll's deltas run from it,
        // with the carried totals counted on nvsoak's side.
        let mut resumed = DriveTracking::default();
        resumed.restore("t", &st);
        assert_eq!(resumed.ata_at_soak_start, tr.ata_at_soak_start);
        assert_eq!(resumed.host_at_soak_start, tr.host_at_soak_start);
        assert_eq!(resumed.temperature_max_c, Some(55));
        let carried = Totals {
            write_bytes: 51_200_000,
            ..Default::default()
        };
        let t = full_replay(DEV);
        set(
            &t,
            &Counts {
                written_sectors: START.written_sectors + 200_000,
                temperature: 44,
                ..START
            },
        );
        let mut d2 = AtaHealth::new(&disk("sdq"));
        poll(&t, &mut d2, 100_000.0, 51_200_000);
        let _ = d;
        update_at(&mut resumed, &carried, &snap(&d2));
        let f = resumed.figures.expect("figures");
        assert_eq!(f.start_time, 101.0);
        assert_eq!(f.data_written_bytes, Some(200_000 * 512));
        assert_eq!(f.nvsoak_written_bytes, Some(102_400_000));
        assert_eq!(f.accounting_agrees, Some(true));
        assert_eq!(f.ata.and_then(|a| a.temperature_max_c), Some(55));
        // An unparsable record is dropped: a new baseline is taken.
        let mut bad = st.clone();
        bad.ata_at_soak_start = Some(serde_json::json!({"counters": 7}));
        let mut fresh = DriveTracking::default();
        fresh.restore("t", &bad);
        assert!(fresh.ata_at_soak_start.is_none());
    }

    #[test]
    fn an_nvme_target_is_not_taken_for_a_sata_one() {
        let t = full_replay(DEV);
        set(&t, &START);
        let mut d = AtaHealth::new(&disk("sdq"));
        poll(&t, &mut d, 101.0, 0);
        let mut tr = DriveTracking::default();
        let carried = Totals::default();
        let other = DriveTarget {
            path: Path::new("/dev/sdr"),
            started_at: 100.0,
            soak_started: None,
            carried: &carried,
        };
        tr.update(&other, &snap(&d));
        assert!(tr.figures.is_none() && tr.controller.is_none());
        // Polls from before the target started do not describe it.
        let later = DriveTarget {
            path: Path::new(DEV),
            started_at: 200.0,
            soak_started: None,
            carried: &carried,
        };
        tr.update(&later, &snap(&d));
        assert_eq!(tr.controller.as_deref(), Some("sdq"));
        assert!(tr.ata_at_soak_start.is_none() && tr.figures.is_none());
    }
}
