//! A SATA disk's soak figures: its counters at the soak-start poll ([`AtaCounters`], kept in
//! the checkpoint as an [`AtaBaseline`]) and at the latest poll give the deltas ([`ata_soak`],
//! pure); nvsoak's own bytes written between the same two polls give the accounting check, as
//! for NVMe drives (`model::results::drive_soak`). Where the drive's written counter has an
//! uncertain unit (a vendor attribute), the check's ratio is what calibrates it: the report
//! says so. The drive bookkeeping (`workload::drive`) calls it for a sample whose reading is
//! ATA's.

use serde::{Deserialize, Serialize};

use super::sample::AtaCounters;
use crate::model::results::{ACCOUNTING_TOLERANCE_BYTES, AtaSoak, DriveSoak, HostAtSmart};

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ata::vendor::WritesSource;

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
}
