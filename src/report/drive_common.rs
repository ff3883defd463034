//! The rows of the "Drive during the soak" table and the sentences above it that every drive
//! has, whatever its protocol: period, data written and read, the accounting check, media
//! errors, wear, throttle episodes and DWPD; accounting, throttling and counters that went
//! backwards. Each is built here once, from the drive's [`DriveSoak`] and a [`Reporting`] that
//! says how its protocol reports; `drive.rs` (its NVMe and SATA sections) puts them in
//! their tables beside their own rows. Pure.

use crate::model::fmt::{count_of, fmt_bytes, fmt_count, fmt_elapsed};
use crate::model::results::DriveSoak;

/// One row: (figure, value, whether it is bad).
pub type Row = (&'static str, String, bool);

/// How a drive's protocol reports, as the rows every drive has need to know it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Reporting {
    /// What the device is, in the period row: "controller", "SATA disk".
    pub kind: &'static str,
    /// The text for a figure the drive does not report: "-" for NVMe, whose SMART log has
    /// every figure, "not reported" for a SATA drive.
    pub missing: &'static str,
    /// The drive counts bytes written at all (a SATA drive may not).
    pub counts_writes: bool,
    /// The step the accounting check allows, when the written counter's unit is an assumption
    /// that the accounting ratio calibrates (a vendor attribute); `None` when it is known.
    pub assumed_unit_tolerance: Option<u64>,
}

/// A byte count, or "-".
pub fn opt_bytes(b: Option<u64>) -> String {
    b.map(|b| fmt_bytes(b as f64)).unwrap_or_else(|| "-".into())
}

/// A count, or "-".
pub fn opt_count(c: Option<u64>) -> String {
    c.map(|c| fmt_count(c as f64)).unwrap_or_else(|| "-".into())
}

/// A counter's rise, "+3", or `missing`.
pub fn plus(c: Option<u64>, missing: &str) -> String {
    c.map(|c| format!("+{}", fmt_count(c as f64)))
        .unwrap_or_else(|| missing.into())
}

/// A time in seconds, or "-".
pub fn secs(s: Option<u64>) -> String {
    s.map(|s| fmt_elapsed(s as f64))
        .unwrap_or_else(|| "-".into())
}

/// "Period": the time the deltas span, and the device.
pub fn period(d: &DriveSoak, r: &Reporting) -> Row {
    (
        "Period",
        format!(
            "{} ({} {})",
            fmt_elapsed(d.latest_time - d.start_time),
            r.kind,
            if d.device.is_empty() { "-" } else { &d.device }
        ),
        false,
    )
}

/// "Data written": the drive's count beside nvsoak's.
pub fn written(d: &DriveSoak, r: &Reporting) -> Row {
    let value = if r.counts_writes {
        format!(
            "{} / {}",
            opt_bytes(d.data_written_bytes),
            opt_bytes(d.nvsoak_written_bytes)
        )
    } else {
        format!(
            "no drive-side bytes written / {}",
            opt_bytes(d.nvsoak_written_bytes)
        )
    };
    ("Data written (drive / nvsoak)", value, d.accounting_off())
}

/// "Accounting ratio": drive bytes written over nvsoak's, and whether they agree.
pub fn accounting_ratio(d: &DriveSoak, r: &Reporting) -> Row {
    let value = match (
        d.accounting_ratio,
        d.accounting_agrees,
        r.assumed_unit_tolerance,
    ) {
        (Some(x), Some(true), Some(tol)) => format!(
            "{x:.4}: agrees within two counter steps ({}); the counter's unit is {:.4} × the assumed one",
            fmt_bytes(tol as f64),
            x
        ),
        (Some(x), Some(true), None) => format!("{x:.4}: agrees within rounding"),
        (Some(x), Some(false), Some(_)) => format!(
            "{x:.4}: disagrees; if nvsoak was the only writer, the counter's unit is {:.4} × the assumed one",
            x
        ),
        (Some(x), Some(false), None) => format!("{x:.4}: disagrees"),
        (None, Some(false), _) => "nvsoak wrote nothing; the drive did".into(),
        _ if !r.counts_writes => "no check: the drive counts no bytes written".into(),
        _ => "-".into(),
    };
    (
        "Accounting ratio (drive / nvsoak)",
        value,
        d.accounting_off(),
    )
}

/// "Data read": the drive's count beside nvsoak's.
pub fn read(d: &DriveSoak, r: &Reporting) -> Row {
    (
        "Data read (drive / nvsoak)",
        format!(
            "{} / {}",
            d.data_read_bytes
                .map(|b| fmt_bytes(b as f64))
                .unwrap_or_else(|| r.missing.into()),
            opt_bytes(d.nvsoak_read_bytes)
        ),
        false,
    )
}

/// The media errors row, under the protocol's own name for them; bad when they rose.
pub fn media_errors(label: &'static str, n: Option<u64>, r: &Reporting) -> Row {
    (label, plus(n, r.missing), n.is_some_and(|n| n > 0))
}

/// "Percentage used": wear at the start and at the latest poll; bad at 100 % or more.
pub fn wear(start: Option<u8>, latest: Option<u8>, r: &Reporting) -> Row {
    let pct = |p: Option<u8>| {
        p.map(|p| format!("{p} %"))
            .unwrap_or_else(|| r.missing.into())
    };
    (
        "Percentage used (start / latest)",
        format!("{} / {}", pct(start), pct(latest)),
        latest.is_some_and(|p| p >= 100),
    )
}

/// "Throttle episodes seen by nvsoak".
pub fn throttle_episodes(d: &DriveSoak) -> Row {
    (
        "Throttle episodes seen by nvsoak",
        opt_count(d.throttle_episodes),
        d.throttle_episodes.is_some_and(|n| n > 0),
    )
}

/// "Observed DWPD" from the drive's bytes written, with the rated figure.
pub fn dwpd(d: &DriveSoak, r: &Reporting) -> Row {
    (
        "Observed DWPD (drive bytes)",
        match (d.observed_dwpd, d.rated_dwpd) {
            (Some(o), Some(x)) => format!("{o:.2} (rated {x})"),
            (Some(o), None) => format!("{o:.2}"),
            _ if !r.counts_writes => "- (no drive-side bytes written)".into(),
            _ => "-".into(),
        },
        false,
    )
}

/// The drive and nvsoak disagree on bytes written: `source` says where the drive's count
/// came from (when that is worth saying), `allowance` what the tolerance is ("that rounding
/// to data units allows").
pub fn accounting_callout(
    d: &DriveSoak,
    source: Option<&str>,
    tolerance: u64,
    allowance: &str,
) -> Option<String> {
    d.accounting_off().then(|| {
        format!(
            "Accounting disagrees: the drive counted {} written{} while nvsoak wrote {} over the same period (ratio {}), more than the {} {allowance}.",
            opt_bytes(d.data_written_bytes),
            source.map(|s| format!(" ({s})")).unwrap_or_default(),
            opt_bytes(d.nvsoak_written_bytes),
            d.accounting_ratio
                .map(|r| format!("{r:.3}"))
                .unwrap_or_else(|| "-".into()),
            fmt_bytes(tolerance as f64)
        )
    })
}

/// The drive throttled: the episodes nvsoak saw, then `detail` (the protocol's own account,
/// "; thermal management ...") when there is one.
pub fn throttle_callout(d: &DriveSoak, detail: &str) -> String {
    format!(
        "The drive throttled: {} seen by nvsoak{detail}.",
        count_of(d.throttle_episodes.unwrap_or(0), "episode")
    )
}

/// Some counter went backwards between the two reads.
pub fn backwards_callout(d: &DriveSoak) -> Option<String> {
    d.counter_went_backwards.then(|| {
        "Some drive counters went backwards during the soak (drive reset or replaced?): their deltas are left out."
            .into()
    })
}
