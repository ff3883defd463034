//! "Drive during the soak": the rows of the report's drive table and the plain sentences above
//! it, for every drive, from its [`DriveSoak`]. Pure.
//!
//! One path for every protocol: [`rows`] and [`callouts`] are what the HTML and Markdown
//! renderers call. The rows and sentences every drive has are built once, in
//! [`super::drive_common`]; each protocol puts them in its table beside its own. An NVMe
//! drive's own rows (host commands, error log, unsafe shutdowns, spare, thermal management)
//! are here, as its figures are the [`DriveSoak`]'s own fields; a SATA drive's (the written
//! counter's source, power-on time, reallocated sectors, CRC errors, temperature, SMART
//! status, all from the ATA collector's [`AtaSoak`]) follow, in their own section.

use super::drive_common::{
    Reporting, Row, accounting_callout, accounting_ratio, backwards_callout, dwpd, media_errors,
    opt_count, period, plus, read, secs, throttle_callout, throttle_episodes, wear, written,
};
use crate::ata::vendor::WritesSource;
use crate::model::fmt::{count_of, fmt_bytes, fmt_elapsed};
use crate::model::results::{ACCOUNTING_TOLERANCE_BYTES, AtaSoak, DriveSoak};

/// An NVMe drive: every figure reported, bytes written in data units of a known size.
pub const NVME: Reporting = Reporting {
    kind: "controller",
    missing: "-",
    counts_writes: true,
    assumed_unit_tolerance: None,
};

/// The rows of a drive's "Drive during the soak" table.
pub fn rows(d: &DriveSoak) -> Vec<Row> {
    match &d.ata {
        Some(a) => sata_rows(d, a),
        None => nvme_rows(d),
    }
}

/// The plain sentences the report puts above a drive's soak figures.
pub fn callouts(d: &DriveSoak) -> Vec<String> {
    match &d.ata {
        Some(a) => sata_callouts(d, a),
        None => nvme_callouts(d),
    }
}

/// An NVMe drive's table: the rows every drive has, with its host commands, error log,
/// unsafe shutdowns, spare, temperature time and thermal management.
fn nvme_rows(d: &DriveSoak) -> Vec<Row> {
    let r = &NVME;
    let mut v = vec![
        period(d, r),
        written(d, r),
        accounting_ratio(d, r),
        read(d, r),
    ];
    v.extend(nvme_command_rows(d));
    v.push(media_errors("Media errors", d.media_errors, r));
    v.push((
        "Error log entries",
        plus(d.error_log_entries, r.missing),
        d.error_log_entries.is_some_and(|n| n > 0),
    ));
    v.push((
        "Unsafe shutdowns",
        plus(d.unsafe_shutdowns, r.missing),
        d.unsafe_shutdowns.is_some_and(|n| n > 0),
    ));
    v.push(wear(
        Some(d.percentage_used_start),
        Some(d.percentage_used_latest),
        r,
    ));
    v.extend(nvme_condition_rows(d));
    v.push(throttle_episodes(d));
    v.push(dwpd(d, r));
    v
}

/// Host write and read commands, the drive's count beside nvsoak's.
fn nvme_command_rows(d: &DriveSoak) -> [Row; 2] {
    [
        (
            "Host write commands (drive / nvsoak writes)",
            format!(
                "{} / {}",
                opt_count(d.host_write_commands),
                opt_count(d.nvsoak_write_ops)
            ),
            false,
        ),
        (
            "Host read commands (drive / nvsoak reads)",
            format!(
                "{} / {}",
                opt_count(d.host_read_commands),
                opt_count(d.nvsoak_read_ops)
            ),
            false,
        ),
    ]
}

/// Spare, warning and critical temperature time, thermal management T1 and T2.
fn nvme_condition_rows(d: &DriveSoak) -> [Row; 4] {
    let tmt = |n: Option<u64>, s: Option<u64>| {
        (
            format!("{}, {}", plus(n, "-"), secs(s)),
            n.is_some_and(|n| n > 0) || s.is_some_and(|n| n > 0),
        )
    };
    let (t1, t1_bad) = tmt(d.tmt1_transitions, d.tmt1_secs);
    let (t2, t2_bad) = tmt(d.tmt2_transitions, d.tmt2_secs);
    [
        (
            "Available spare (start / latest, threshold)",
            format!(
                "{} % / {} % ({} %)",
                d.available_spare_start, d.available_spare_latest, d.available_spare_threshold
            ),
            d.available_spare_latest < d.available_spare_threshold,
        ),
        (
            "Warning / critical temperature time",
            format!(
                "{} / {}",
                secs(d.warning_temp_secs),
                secs(d.critical_temp_secs)
            ),
            d.critical_temp_secs.is_some_and(|n| n > 0),
        ),
        ("Thermal management T1 (transitions, time)", t1, t1_bad),
        ("Thermal management T2 (transitions, time)", t2, t2_bad),
    ]
}

/// An NVMe drive's sentences: media errors, accounting, throttling with its thermal
/// management, a critical warning, counters that went backwards.
fn nvme_callouts(d: &DriveSoak) -> Vec<String> {
    let mut v = Vec::new();
    let n = |x: Option<u64>| x.unwrap_or(0);
    if d.media_errors_rose() {
        v.push(format!(
            "Media errors rose during the soak: +{} (error log entries +{}).",
            n(d.media_errors),
            n(d.error_log_entries)
        ));
    }
    v.extend(accounting_callout(
        d,
        None,
        ACCOUNTING_TOLERANCE_BYTES,
        "that rounding to data units allows",
    ));
    if d.throttled() {
        v.push(throttle_callout(
            d,
            &format!(
                "; thermal management T1 {} for {}, T2 {} for {}",
                count_of(n(d.tmt1_transitions), "transition"),
                fmt_elapsed(n(d.tmt1_secs) as f64),
                n(d.tmt2_transitions),
                fmt_elapsed(n(d.tmt2_secs) as f64)
            ),
        ));
    }
    if d.critical_warning_latest != 0 {
        v.push(format!(
            "The drive reports a critical warning (0x{:02x}) at the latest poll.",
            d.critical_warning_latest
        ));
    }
    v.extend(backwards_callout(d));
    v
}

// A SATA drive's own rows and sentences. Every figure names its source; what the drive does
// not report is said so, never shown as a zero.

/// What the drive's bytes-written figure is, in words.
pub fn sata_source_text(a: &AtaSoak) -> String {
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
fn sata_reporting(a: &AtaSoak) -> Reporting {
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
fn sata_rows(d: &DriveSoak, a: &AtaSoak) -> Vec<Row> {
    let r = &sata_reporting(a);
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
        period(d, r),
        ("Bytes written: drive's source", sata_source_text(a), false),
        written(d, r),
        accounting_ratio(d, r),
        read(d, r),
        (
            "Power-on time",
            a.power_on_secs
                .map(|s| fmt_elapsed(s as f64))
                .unwrap_or_else(|| r.missing.into()),
            false,
        ),
        media_errors("Reported uncorrectable errors", a.uncorrectable, r),
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
        wear(a.percentage_used_start, a.percentage_used_latest, r),
        (
            "SMART status (latest)",
            match a.smart_passed_latest {
                Some(true) => "passed".into(),
                Some(false) => "FAILED: a pre-failure attribute at or below its threshold".into(),
                None => r.missing.into(),
            },
            a.smart_passed_latest == Some(false),
        ),
        throttle_episodes(d),
        dwpd(d, r),
    ]
}

/// The plain sentences above a SATA drive's soak figures: SMART status, the errors that
/// rose, CRC errors, then the sentences every drive may get ([`super::drive_common`]), and that the
/// drive counts no bytes written when it does not.
fn sata_callouts(d: &DriveSoak, a: &AtaSoak) -> Vec<String> {
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
    v.extend(accounting_callout(
        d,
        Some(&sata_source_text(a)),
        a.accounting_tolerance_bytes,
        "the counter's steps allow",
    ));
    if a.written_source.is_none() {
        // Not a fault, but the report must not read "accounting agrees" when there was none.
        v.push("The drive counts no bytes written (no Device Statistics, no attribute 241): no accounting check against nvsoak's writes.".into());
    }
    if d.throttle_episodes.is_some_and(|e| e > 0) {
        v.push(throttle_callout(d, ""));
    }
    v.extend(backwards_callout(d));
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
        let r = sata_rows(&d, &a);
        assert_eq!(
            row(&r, "Bytes written: drive's source").1,
            "Device Statistics (logical sectors written)"
        );
        assert_eq!(
            row(&r, "Data written (drive / nvsoak)").1,
            "48.83 MiB / 48.83 MiB"
        );
        assert_eq!(
            row(&r, "Accounting ratio (drive / nvsoak)").1,
            "1.0000: agrees within rounding"
        );
        assert_eq!(
            row(&r, "Data read (drive / nvsoak)").1,
            "not reported / 4.00 KiB"
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
        let c = sata_callouts(&d, &a);
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
        let r = sata_rows(&d, &a);
        assert_eq!(
            row(&r, "Data written (drive / nvsoak)").1,
            "no drive-side bytes written / 48.83 MiB"
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
            sata_callouts(&d, &a),
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
        let r = sata_rows(&d, &a);
        assert!(
            row(&r, "Bytes written: drive's source")
                .1
                .contains("attribute 241, unit assumed 1.00 GiB"),
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
        let c = sata_callouts(&d, &a);
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
