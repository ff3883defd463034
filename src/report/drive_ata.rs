//! "Drive during the soak" for a SATA drive: the rows and call-outs the report shows when a
//! [`DriveSoak`] carries ATA figures ([`AtaSoak`]). Pure; `compute::drive_rows` and
//! `compute::drive_callouts` hand over to it, so the HTML and Markdown renderers need nothing
//! of their own. Every figure names its source; what the drive does not report is said so,
//! never shown as a zero.

use crate::ata::vendor::WritesSource;
use crate::model::fmt::{fmt_bytes, fmt_count, fmt_elapsed};
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

fn opt_bytes(b: Option<u64>) -> String {
    b.map(|b| fmt_bytes(b as f64)).unwrap_or_else(|| "-".into())
}

fn plus(c: Option<u64>) -> String {
    c.map(|c| format!("+{}", fmt_count(c as f64)))
        .unwrap_or_else(|| "not reported".into())
}

fn pct(p: Option<u8>) -> String {
    p.map(|p| format!("{p} %"))
        .unwrap_or_else(|| "not reported".into())
}

/// The rows of a SATA drive's "Drive during the soak" table: (figure, value, whether it is
/// bad).
pub fn rows(d: &DriveSoak, a: &AtaSoak) -> Vec<(&'static str, String, bool)> {
    let written = match (a.written_source, d.data_written_bytes) {
        (None, _) => format!(
            "no drive-side bytes written / {}",
            opt_bytes(d.nvsoak_written_bytes)
        ),
        (Some(_), w) => format!("{} / {}", opt_bytes(w), opt_bytes(d.nvsoak_written_bytes)),
    };
    let ratio = match (d.accounting_ratio, d.accounting_agrees) {
        (Some(r), Some(true)) if a.unit_uncertain() => format!(
            "{r:.4}: agrees within two counter steps ({}); the counter's unit is {:.4} × the assumed one",
            fmt_bytes(a.accounting_tolerance_bytes as f64),
            r
        ),
        (Some(r), Some(true)) => format!("{r:.4}: agrees within rounding"),
        (Some(r), Some(false)) if a.unit_uncertain() => format!(
            "{r:.4}: disagrees; if nvsoak was the only writer, the counter's unit is {:.4} × the assumed one",
            r
        ),
        (Some(r), Some(false)) => format!("{r:.4}: disagrees"),
        (None, Some(false)) => "nvsoak wrote nothing; the drive did".into(),
        _ if a.written_source.is_none() => "no check: the drive counts no bytes written".into(),
        _ => "-".into(),
    };
    let temp = match (a.temperature_max_c, a.temperature_latest_c) {
        (None, None) => "not reported".to_string(),
        (m, l) => format!(
            "{} °C / {} °C",
            m.map(|v| v.to_string()).unwrap_or_else(|| "-".into()),
            l.map(|v| v.to_string()).unwrap_or_else(|| "-".into())
        ),
    };
    let rose = |c: Option<u64>| c.is_some_and(|n| n > 0);
    vec![
        (
            "Period",
            format!(
                "{} (SATA disk {})",
                fmt_elapsed(d.latest_time - d.start_time),
                if d.device.is_empty() { "-" } else { &d.device }
            ),
            false,
        ),
        ("Bytes written: drive's source", source_text(a), false),
        ("Data written (drive / nvsoak)", written, d.accounting_off()),
        (
            "Accounting ratio (drive / nvsoak)",
            ratio,
            d.accounting_off(),
        ),
        (
            "Data read (drive / nvsoak)",
            format!(
                "{} / {}",
                d.data_read_bytes
                    .map(|b| fmt_bytes(b as f64))
                    .unwrap_or_else(|| "not reported".into()),
                opt_bytes(d.nvsoak_read_bytes)
            ),
            false,
        ),
        (
            "Power-on time",
            a.power_on_secs
                .map(|s| fmt_elapsed(s as f64))
                .unwrap_or_else(|| "not reported".into()),
            false,
        ),
        (
            "Reported uncorrectable errors",
            plus(a.uncorrectable),
            rose(a.uncorrectable),
        ),
        (
            "Reallocated sectors",
            plus(a.reallocated),
            rose(a.reallocated),
        ),
        (
            "Interface CRC errors",
            plus(a.crc_errors),
            rose(a.crc_errors),
        ),
        ("Temperature (highest seen / latest)", temp, false),
        (
            "Percentage used (start / latest)",
            format!(
                "{} / {}",
                pct(a.percentage_used_start),
                pct(a.percentage_used_latest)
            ),
            a.percentage_used_latest.is_some_and(|p| p >= 100),
        ),
        (
            "SMART status (latest)",
            match a.smart_passed_latest {
                Some(true) => "passed".into(),
                Some(false) => "FAILED: a pre-failure attribute at or below its threshold".into(),
                None => "not reported".into(),
            },
            a.smart_passed_latest == Some(false),
        ),
        (
            "Throttle episodes seen by nvsoak",
            d.throttle_episodes
                .map(|n| fmt_count(n as f64))
                .unwrap_or_else(|| "-".into()),
            d.throttle_episodes.is_some_and(|n| n > 0),
        ),
        (
            "Observed DWPD (drive bytes)",
            match (d.observed_dwpd, d.rated_dwpd) {
                (Some(o), Some(r)) => format!("{o:.2} (rated {r})"),
                (Some(o), None) => format!("{o:.2}"),
                _ if a.written_source.is_none() => "- (no drive-side bytes written)".into(),
                _ => "-".into(),
            },
            false,
        ),
    ]
}

/// The plain sentences above a SATA drive's soak figures.
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
    if d.accounting_off() {
        v.push(format!(
            "Accounting disagrees: the drive counted {} written ({}) while nvsoak wrote {} over the same period (ratio {}), more than the {} the counter's steps allow.",
            opt_bytes(d.data_written_bytes),
            source_text(a),
            opt_bytes(d.nvsoak_written_bytes),
            d.accounting_ratio
                .map(|r| format!("{r:.3}"))
                .unwrap_or_else(|| "-".into()),
            fmt_bytes(a.accounting_tolerance_bytes as f64)
        ));
    }
    if a.written_source.is_none() {
        // Not a fault, but the report must not read "accounting agrees" when there was none.
        v.push("The drive counts no bytes written (no Device Statistics, no attribute 241): no accounting check against nvsoak's writes.".into());
    }
    if d.throttle_episodes.is_some_and(|e| e > 0) {
        v.push(format!(
            "The drive throttled: {} seen by nvsoak.",
            crate::model::fmt::count_of(n(d.throttle_episodes), "episode")
        ));
    }
    if d.counter_went_backwards {
        v.push(
            "Some drive counters went backwards during the soak (drive reset or replaced?): their deltas are left out."
                .into(),
        );
    }
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
