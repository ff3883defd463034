//! "Drive during the soak" for a SATA drive: what is particular to it in the rows and
//! call-outs the report shows when a [`DriveSoak`] carries ATA figures ([`AtaSoak`]). Pure;
//! [`super::drive::rows`] and [`super::drive::callouts`] hand over to it, and the rows every
//! drive has come from [`super::drive_common`], so only the SATA drive's own figures are here. Every
//! figure names its source; what the drive does not report is said so, never shown as a
//! zero.

use super::drive_common::{self as drive, Reporting, Row, plus};
use crate::ata::vendor::WritesSource;
use crate::model::fmt::{fmt_bytes, fmt_elapsed};
use crate::model::results::AtaSoak;
use crate::model::results::DriveSoak;

/// What the drive's bytes-written figure is, in words.
pub fn source_text(a: &AtaSoak) -> String {
    match a.written_source {
        Some(WritesSource::DeviceStatistics) => {
            "Device Statistics (logical sectors written)".into()
        }
        Some(WritesSource::Attribute241) => format!(
            "SMART attribute 241, unit assumed {} (the accounting ratio calibrates it)",
            fmt_bytes(a.written_unit_bytes as f64)
        ),
        None => "none: the drive reports neither Device Statistics nor attribute 241".into(),
    }
}

/// How a SATA drive reports: a figure it lacks is "not reported"; it may count no bytes
/// written, or count them in a vendor unit the accounting ratio calibrates.
fn reporting(a: &AtaSoak) -> Reporting {
    Reporting {
        kind: "SATA disk",
        missing: "not reported",
        counts_writes: a.written_source.is_some(),
        assumed_unit_tolerance: a.unit_uncertain().then_some(a.accounting_tolerance_bytes),
    }
}

/// The rows of a SATA drive's "Drive during the soak" table: the rows every drive has
/// ([`super::drive_common`]), with the written counter's source, power-on time, reallocated sectors,
/// CRC errors, temperature and SMART status.
pub fn rows(d: &DriveSoak, a: &AtaSoak) -> Vec<Row> {
    let r = &reporting(a);
    let rose = |c: Option<u64>| c.is_some_and(|n| n > 0);
    let temp = match (a.temperature_max_c, a.temperature_latest_c) {
        (None, None) => "not reported".to_string(),
        (m, l) => format!(
            "{} °C / {} °C",
            m.map(|v| v.to_string()).unwrap_or_else(|| "-".into()),
            l.map(|v| v.to_string()).unwrap_or_else(|| "-".into())
        ),
    };
    vec![
        drive::period(d, r),
        ("Bytes written: drive's source", source_text(a), false),
        drive::written(d, r),
        drive::accounting_ratio(d, r),
        drive::read(d, r),
        (
            "Power-on time",
            a.power_on_secs
                .map(|s| fmt_elapsed(s as f64))
                .unwrap_or_else(|| r.missing.into()),
            false,
        ),
        drive::media_errors("Reported uncorrectable errors", a.uncorrectable, r),
        (
            "Reallocated sectors",
            plus(a.reallocated, r.missing),
            rose(a.reallocated),
        ),
        (
            "Interface CRC errors",
            plus(a.crc_errors, r.missing),
            rose(a.crc_errors),
        ),
        ("Temperature (highest seen / latest)", temp, false),
        drive::wear(a.percentage_used_start, a.percentage_used_latest, r),
        (
            "SMART status (latest)",
            match a.smart_passed_latest {
                Some(true) => "passed".into(),
                Some(false) => "FAILED: a pre-failure attribute at or below its threshold".into(),
                None => r.missing.into(),
            },
            a.smart_passed_latest == Some(false),
        ),
        drive::throttle_episodes(d),
        drive::dwpd(d, r),
    ]
}

/// The plain sentences above a SATA drive's soak figures: SMART status, the errors that
/// rose, CRC errors, then the sentences every drive may get ([`super::drive_common`]), and that the
/// drive counts no bytes written when it does not.
pub fn callouts(d: &DriveSoak, a: &AtaSoak) -> Vec<String> {
    let mut v = Vec::new();
    let n = |x: Option<u64>| x.unwrap_or(0);
    if a.smart_passed_latest == Some(false) {
        v.push("SMART status FAILED at the latest poll: a pre-failure attribute is at or below its threshold.".into());
    }
    if d.media_errors_rose() {
        v.push(format!(
            "Errors rose during the soak: reported uncorrectable +{}, reallocated sectors +{}.",
            n(a.uncorrectable),
            n(a.reallocated)
        ));
    }
    if a.crc_errors.is_some_and(|c| c > 0) {
        v.push(format!(
            "Interface CRC errors rose by {} (cable, backplane or port?).",
            n(a.crc_errors)
        ));
    }
    v.extend(drive::accounting_callout(
        d,
        Some(&source_text(a)),
        a.accounting_tolerance_bytes,
        "the counter's steps allow",
    ));
    if a.written_source.is_none() {
        // Not a fault, but the report must not read "accounting agrees" when there was none.
        v.push("The drive counts no bytes written (no Device Statistics, no attribute 241): no accounting check against nvsoak's writes.".into());
    }
    if d.throttle_episodes.is_some_and(|e| e > 0) {
        v.push(drive::throttle_callout(d, ""));
    }
    v.extend(drive::backwards_callout(d));
    v
}

/// The batch view's flag for a SATA drive whose SMART status failed at the latest poll.
pub fn batch_flag(d: Option<&DriveSoak>) -> Option<&'static str> {
    let a = d?.ata.as_ref()?;
    (a.smart_passed_latest == Some(false)).then_some("SMART status failed")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn soak(a: AtaSoak) -> DriveSoak {
        DriveSoak {
            device: "sdb".into(),
            start_time: 0.0,
            latest_time: 3600.0,
            data_written_bytes: Some(51_200_000),
            nvsoak_written_bytes: Some(51_200_000),
            data_read_bytes: None,
            nvsoak_read_bytes: Some(4096),
            accounting_ratio: Some(1.0),
            accounting_agrees: Some(true),
            media_errors: a.uncorrectable,
            throttle_episodes: Some(0),
            ata: Some(a),
            ..Default::default()
        }
    }

    fn row<'a>(
        rows: &'a [(&'static str, String, bool)],
        name: &str,
    ) -> &'a (&'static str, String, bool) {
        rows.iter()
            .find(|r| r.0 == name)
            .unwrap_or_else(|| panic!("no row {name}: {rows:?}"))
    }

    #[test]
    fn devstat_rows_name_the_source_and_flag_what_rose() {
        let a = AtaSoak {
            written_source: Some(WritesSource::DeviceStatistics),
            written_unit_bytes: 512,
            accounting_tolerance_bytes: 1_024_000,
            power_on_secs: Some(7200),
            uncorrectable: Some(0),
            reallocated: Some(3),
            crc_errors: Some(0),
            temperature_max_c: Some(61),
            temperature_latest_c: Some(48),
            percentage_used_start: Some(4),
            percentage_used_latest: Some(5),
            smart_passed_latest: Some(false),
        };
        let d = soak(a.clone());
        let r = rows(&d, &a);
        assert_eq!(
            row(&r, "Bytes written: drive's source").1,
            "Device Statistics (logical sectors written)"
        );
        assert_eq!(
            row(&r, "Data written (drive / nvsoak)").1,
            "51.20 MB / 51.20 MB"
        );
        assert_eq!(
            row(&r, "Accounting ratio (drive / nvsoak)").1,
            "1.0000: agrees within rounding"
        );
        assert_eq!(
            row(&r, "Data read (drive / nvsoak)").1,
            "not reported / 4.10 kB"
        );
        assert_eq!(row(&r, "Power-on time").1, fmt_elapsed(7200.0));
        let re = row(&r, "Reallocated sectors");
        assert_eq!((re.1.as_str(), re.2), ("+3", true));
        let un = row(&r, "Reported uncorrectable errors");
        assert_eq!((un.1.as_str(), un.2), ("+0", false));
        assert_eq!(
            row(&r, "Temperature (highest seen / latest)").1,
            "61 °C / 48 °C"
        );
        assert_eq!(row(&r, "Percentage used (start / latest)").1, "4 % / 5 %");
        assert!(row(&r, "SMART status (latest)").2);
        let c = callouts(&d, &a);
        assert!(c[0].starts_with("SMART status FAILED"), "{c:?}");
        assert!(
            c.iter().any(|s| s.contains("reallocated sectors +3")),
            "{c:?}"
        );
        assert_eq!(c.len(), 2, "{c:?}");
    }

    #[test]
    fn a_drive_without_written_bytes_says_so_and_a_vendor_unit_is_calibrated() {
        // QEMU's ATA disk: no Device Statistics, no attribute 241.
        let a = AtaSoak {
            accounting_tolerance_bytes: 1_024_000,
            ..Default::default()
        };
        let mut d = soak(a.clone());
        d.data_written_bytes = None;
        d.accounting_ratio = None;
        d.accounting_agrees = None;
        let r = rows(&d, &a);
        assert_eq!(
            row(&r, "Data written (drive / nvsoak)").1,
            "no drive-side bytes written / 51.20 MB"
        );
        assert_eq!(
            row(&r, "Accounting ratio (drive / nvsoak)").1,
            "no check: the drive counts no bytes written"
        );
        assert_eq!(row(&r, "Reallocated sectors").1, "not reported");
        assert_eq!(
            row(&r, "Percentage used (start / latest)").1,
            "not reported / not reported"
        );
        assert!(r.iter().all(|x| !x.2), "nothing flagged: {r:?}");
        assert_eq!(
            callouts(&d, &a),
            [
                "The drive counts no bytes written (no Device Statistics, no attribute 241): no accounting check against nvsoak's writes."
            ]
        );
        // IronWolf 110 attribute 241: the ratio is the unit's calibration.
        let a = AtaSoak {
            written_source: Some(WritesSource::Attribute241),
            written_unit_bytes: 1 << 30,
            accounting_tolerance_bytes: 2 << 30,
            ..Default::default()
        };
        let mut d = soak(a.clone());
        d.accounting_ratio = Some(0.9313);
        d.accounting_agrees = Some(false);
        let r = rows(&d, &a);
        assert!(
            row(&r, "Bytes written: drive's source")
                .1
                .contains("attribute 241, unit assumed 1.07 GB"),
            "{r:?}"
        );
        let ratio = row(&r, "Accounting ratio (drive / nvsoak)");
        assert!(
            ratio.2
                && ratio
                    .1
                    .contains("the counter's unit is 0.9313 × the assumed one"),
            "{ratio:?}"
        );
        let c = callouts(&d, &a);
        assert!(
            c.iter()
                .any(|s| s.starts_with("Accounting disagrees") && s.contains("attribute 241")),
            "{c:?}"
        );
    }

    #[test]
    fn the_batch_view_flags_a_failed_smart_status_and_rising_errors() {
        let failed = AtaSoak {
            smart_passed_latest: Some(false),
            uncorrectable: Some(1),
            ..Default::default()
        };
        let figures = |a: AtaSoak| {
            let d = soak(a);
            crate::report::compute::SoakFigures {
                media_errors_rose: Some(d.media_errors_rose()),
                drive: Some(d),
                ..Default::default()
            }
        };
        let f = figures(failed);
        assert_eq!(batch_flag(f.drive.as_ref()), Some("SMART status failed"));
        assert_eq!(f.media_errors_rose, Some(true), "uncorrectable +1");
        let ok = figures(AtaSoak {
            smart_passed_latest: Some(true),
            uncorrectable: Some(0),
            ..Default::default()
        });
        assert_eq!(batch_flag(ok.drive.as_ref()), None);
        assert_eq!(ok.media_errors_rose, Some(false));
        // An NVMe drive's figures have no ATA part: no flag.
        let nvme = crate::report::compute::SoakFigures {
            drive: Some(DriveSoak::default()),
            ..Default::default()
        };
        assert_eq!(batch_flag(nvme.drive.as_ref()), None);
    }
}
