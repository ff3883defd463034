//! "Drive during the soak" for a block target on a SATA disk: the ATA side of
//! [`DriveTracking`]. The disk's counters at the soak-start poll ([`AtaCounters`], kept in the
//! checkpoint) and at the latest poll give the deltas ([`ata_soak`], pure); nvsoak's own bytes
//! written between the same two polls give the accounting check, as for NVMe drives. Where the
//! drive's written counter has an uncertain unit (a vendor attribute), the check's ratio is what
//! calibrates it: the report says so.

use serde::{Deserialize, Serialize};

use super::drive::{DriveTarget, DriveTracking, host_at};
use crate::health::HealthSnapshot;
use crate::health::collect::ata::sample::{AtaCounters, AtaSample};
use crate::model::results::{
    ACCOUNTING_TOLERANCE_BYTES, AtaSoak, DeviceIdentity, DriveSoak, HostAtSmart,
};

/// The checkpoint's record of an ATA soak start (`TargetState::ata_at_soak_start`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct AtaBaseline {
    pub counters: AtaCounters,
    pub temperature_max_c: Option<i16>,
}

/// One end of the soak period on an ATA drive.
#[derive(Debug, Clone, Copy)]
pub struct AtaReading<'a> {
    pub time: f64,
    pub counters: &'a AtaCounters,
    pub host: Option<HostAtSmart>,
}

/// The drive-side figures between `start` and `latest`. Pure. `capacity_bytes` is what DWPD
/// refers to; `temperature_max_c` is the highest the polls saw so far. `device` and the
/// rated figures are left for the caller.
pub fn ata_soak(
    start: &AtaReading<'_>,
    latest: &AtaReading<'_>,
    capacity_bytes: Option<u64>,
    temperature_max_c: Option<i16>,
) -> DriveSoak {
    let (s, l) = (start.counters, latest.counters);
    let mut backwards = false;
    let mut d = |a: Option<u64>, b: Option<u64>| -> Option<u64> {
        let (a, b) = (a?, b?);
        let v = b.checked_sub(a);
        backwards |= v.is_none();
        v
    };
    // Bytes written only when both ends count them the same way.
    let same_source = s.written_source.is_some() && s.written_source == l.written_source;
    let data_written_bytes = if same_source {
        d(s.written_bytes, l.written_bytes)
    } else {
        None
    };
    let data_read_bytes = d(s.read_bytes, l.read_bytes);
    let power_on_secs = d(s.power_on_seconds, l.power_on_seconds);
    let uncorrectable = d(s.uncorrectable, l.uncorrectable);
    let reallocated = d(s.reallocated, l.reallocated);
    let crc_errors = d(s.crc_errors, l.crc_errors);

    let unit = l.written_unit_bytes;
    let tolerance = unit.saturating_mul(2).max(ACCOUNTING_TOLERANCE_BYTES);
    let hd = |f: fn(&HostAtSmart) -> u64| match (start.host, latest.host) {
        (Some(a), Some(b)) => f(&b).checked_sub(f(&a)),
        _ => None,
    };
    let nvsoak_written_bytes = hd(|h| h.written_bytes);
    let (accounting_ratio, accounting_agrees) = match (data_written_bytes, nvsoak_written_bytes) {
        (Some(drive), Some(ours)) => (
            (ours > 0).then(|| drive as f64 / ours as f64),
            Some(drive.abs_diff(ours) <= tolerance),
        ),
        _ => (None, None),
    };
    let days = (latest.time - start.time) / 86_400.0;
    let observed_dwpd = match (data_written_bytes, capacity_bytes) {
        (Some(b), Some(c)) if c > 0 && days > 0.0 => Some(b as f64 / c as f64 / days),
        _ => None,
    };
    let temperature_max_c = [temperature_max_c, s.temperature_c, l.temperature_c]
        .into_iter()
        .flatten()
        .max();
    DriveSoak {
        start_time: start.time,
        latest_time: latest.time,
        data_written_bytes,
        data_read_bytes,
        // The report's "media errors rose" for an ATA drive: reported uncorrectable errors.
        media_errors: uncorrectable,
        percentage_used_start: s.percentage_used.unwrap_or(0),
        percentage_used_latest: l.percentage_used.unwrap_or(0),
        counter_went_backwards: backwards,
        nvsoak_written_bytes,
        nvsoak_read_bytes: hd(|h| h.read_bytes),
        nvsoak_write_ops: hd(|h| h.write_ops),
        nvsoak_read_ops: hd(|h| h.read_ops),
        accounting_ratio,
        accounting_agrees,
        observed_dwpd,
        capacity_bytes,
        ata: Some(AtaSoak {
            written_source: if same_source { l.written_source } else { None },
            written_unit_bytes: unit,
            accounting_tolerance_bytes: tolerance,
            power_on_secs,
            uncorrectable,
            reallocated,
            crc_errors,
            temperature_max_c,
            temperature_latest_c: l.temperature_c,
            percentage_used_start: s.percentage_used,
            percentage_used_latest: l.percentage_used,
            smart_passed_latest: l.smart_passed,
        }),
        ..Default::default()
    }
}

/// [`DriveTracking::update`] for a target on a SATA disk: the disk whose latest sample carries
/// the target's host figures. Returns false when no disk does (not a SATA target, or not
/// polled yet).
pub(crate) fn update(tr: &mut DriveTracking, t: &DriveTarget<'_>, health: &HealthSnapshot) -> bool {
    let on = |s: &AtaSample| s.host.iter().find(|h| h.path == t.path).cloned();
    let Some((d, latest, latest_io)) = health.ata.iter().find_map(|d| {
        let s = d.last_sample.as_ref()?;
        let io = on(s)?;
        Some((d, s, io))
    }) else {
        return false;
    };
    tr.controller = Some(d.name.clone());
    let from = tr.polls_from.unwrap_or(t.started_at);
    if latest.time < from {
        return true;
    }
    if tr.episodes_base.is_none() || tr.ata_at_soak_start.is_none() {
        let (first, first_io) = d
            .first_sample
            .as_ref()
            .filter(|s| s.time >= from)
            .and_then(|s| on(s).map(|io| (s, io)))
            .unwrap_or((latest, latest_io.clone()));
        if tr.episodes_base.is_none() {
            tr.episodes_base = Some(
                first
                    .throttle_events
                    .saturating_sub(u64::from(first.throttling)),
            );
        }
        if tr.ata_at_soak_start.is_none() {
            tr.ata_at_soak_start = Some(first.counters.clone());
            tr.host_at_soak_start = Some(host_at(t.carried, first.time, &first_io));
        }
    }
    tr.episodes_this_run = latest
        .throttle_events
        .saturating_sub(tr.episodes_base.unwrap_or(0));
    let Some(start) = tr.ata_at_soak_start.clone() else {
        return true;
    };
    let start_time = tr
        .host_at_soak_start
        .map(|h| h.time)
        .or(t.soak_started)
        .unwrap_or(latest.time);
    let rated = d.derived.rated.as_ref();
    let capacity = rated
        .and_then(|r| r.capacity_bytes)
        .map(|c| c as u64)
        .or(Some(d.capacity_bytes()))
        .filter(|c| *c > 0);
    let mut f = ata_soak(
        &AtaReading {
            time: start_time,
            counters: &start,
            host: tr.host_at_soak_start,
        },
        &AtaReading {
            time: latest.time,
            counters: &latest.counters,
            host: Some(host_at(t.carried, latest.time, &latest_io)),
        },
        capacity,
        tr.temperature_max_c,
    );
    tr.temperature_max_c = f.ata.as_ref().and_then(|a| a.temperature_max_c);
    f.device = d.name.clone();
    tr.identity = Some(DeviceIdentity {
        controller: d.name.clone(),
        model: d.model.clone(),
        serial: d.serial.clone(),
        firmware: d.firmware.clone(),
        capacity_bytes: d.capacity_bytes(),
    });
    f.throttle_episodes = Some(tr.episodes());
    f.rated_dwpd = rated.and_then(|r| r.dwpd);
    f.endurance_consumed_ratio = d.derived.endurance_consumed_ratio;
    f.iops_throttled = d.derived.throttle.throttled_iops;
    f.iops_unthrottled = d.derived.throttle.unthrottled_iops;
    tr.figures = Some(f);
    true
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::ata::cmd;
    use crate::ata::devstat::testdata::{OK, page};
    use crate::ata::transport::{Replay, Reply};
    use crate::ata::vendor::WritesSource;
    use crate::health::HostIo;
    use crate::health::collect::RatingContext;
    use crate::health::collect::ata::testdata::{disk, full_replay, good};
    use crate::health::collect::ata::{AtaHealth, poll_disk};
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
    fn a_counter_that_went_backwards_gives_no_delta() {
        let s = AtaCounters {
            written_bytes: Some(1 << 30),
            written_source: Some(WritesSource::DeviceStatistics),
            written_unit_bytes: 512,
            uncorrectable: Some(9),
            reallocated: Some(4),
            power_on_seconds: Some(3600),
            ..Default::default()
        };
        let l = AtaCounters {
            written_bytes: Some(1 << 20),
            uncorrectable: Some(2),
            reallocated: Some(6),
            power_on_seconds: Some(7200),
            ..s.clone()
        };
        let at = |time, c, w| AtaReading {
            time,
            counters: c,
            host: Some(HostAtSmart {
                time,
                written_bytes: w,
                ..Default::default()
            }),
        };
        let f = ata_soak(&at(0.0, &s, 0), &at(60.0, &l, 4096), Some(1 << 40), None);
        assert!(f.counter_went_backwards);
        assert_eq!(f.data_written_bytes, None);
        assert_eq!((f.accounting_ratio, f.accounting_agrees), (None, None));
        assert_eq!(f.observed_dwpd, None);
        let a = f.ata.clone().expect("ata");
        assert_eq!(a.uncorrectable, None);
        assert_eq!(a.reallocated, Some(2), "the others still count");
        assert_eq!(a.power_on_secs, Some(3600));
        assert!(f.media_errors_rose(), "reallocated sectors rose");
    }

    #[test]
    fn a_vendor_counter_is_calibrated_by_the_ratio_and_none_is_said_plainly() {
        // IronWolf 110 without Device Statistics: attribute 241 in "GB", assumed GiB.
        let s = AtaCounters {
            written_bytes: Some(10 << 30),
            written_source: Some(WritesSource::Attribute241),
            written_unit_bytes: 1 << 30,
            ..Default::default()
        };
        let l = AtaCounters {
            written_bytes: Some(14 << 30),
            ..s.clone()
        };
        let at = |time, c, w| AtaReading {
            time,
            counters: c,
            host: Some(HostAtSmart {
                time,
                written_bytes: w,
                ..Default::default()
            }),
        };
        // nvsoak wrote 4 GB (decimal): the drive's 4 "GB" read as GiB are 7.4 % more.
        let f = ata_soak(&at(0.0, &s, 0), &at(600.0, &l, 4_000_000_000), None, None);
        let a = f.ata.clone().expect("ata");
        assert!(a.unit_uncertain());
        assert_eq!(a.accounting_tolerance_bytes, 2 << 30);
        let r = f.accounting_ratio.expect("ratio");
        assert!((r - (4u64 << 30) as f64 / 4e9).abs() < 1e-12, "{r}");
        assert_eq!(f.accounting_agrees, Some(true), "within two counter steps");
        // QEMU's disk: no Device Statistics, no attribute 241: no drive-side bytes at all.
        let none = AtaCounters {
            power_on_seconds: Some(0),
            ..Default::default()
        };
        let f = ata_soak(
            &at(0.0, &none, 0),
            &at(600.0, &none, 1 << 20),
            Some(1 << 30),
            None,
        );
        assert_eq!(f.data_written_bytes, None);
        assert_eq!(f.nvsoak_written_bytes, Some(1 << 20));
        assert_eq!((f.accounting_ratio, f.accounting_agrees), (None, None));
        assert_eq!(f.ata.as_ref().and_then(|a| a.written_source), None);
        assert!(!f.counter_went_backwards && !f.accounting_off());
        // A source that changed between the two polls (devstat lost) gives no delta either.
        let dev = AtaCounters {
            written_source: Some(WritesSource::DeviceStatistics),
            ..s.clone()
        };
        let f = ata_soak(&at(0.0, &dev, 0), &at(600.0, &l, 1), None, None);
        assert_eq!(f.data_written_bytes, None);
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
