//! "Drive during the soak": the rows of the report's drive table and the plain sentences above
//! it, for every drive, from its [`DriveSoak`]. Pure.
//!
//! One path for every protocol: [`rows`] and [`callouts`] are what the HTML and Markdown
//! renderers call. The rows and sentences every drive has are built once, in
//! [`super::drive_common`]; each protocol puts them in its table beside its own. An NVMe
//! drive's own rows (host commands, error log, unsafe shutdowns, spare, thermal management)
//! are here, as its figures are the [`DriveSoak`]'s own fields; a SATA drive's (the written
//! counter's source, power-on time, reallocated sectors, CRC errors, temperature, SMART
//! status) are in [`super::drive_ata`].

use super::drive_common::{
    Reporting, Row, accounting_callout, accounting_ratio, backwards_callout, dwpd, media_errors,
    opt_count, period, plus, read, secs, throttle_callout, throttle_episodes, wear, written,
};
use crate::model::fmt::{count_of, fmt_elapsed};
use crate::model::results::{ACCOUNTING_TOLERANCE_BYTES, DriveSoak};

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
        Some(a) => super::drive_ata::rows(d, a),
        None => nvme_rows(d),
    }
}

/// The plain sentences the report puts above a drive's soak figures.
pub fn callouts(d: &DriveSoak) -> Vec<String> {
    match &d.ata {
        Some(a) => super::drive_ata::callouts(d, a),
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
