//! The derived `nvsoak_*` drive figures, the same names for every protocol: where the rated
//! endurance comes from, endurance consumed, observed DWPD and projected wear-out, write
//! amplification, the accounting check and thermal throttling. They read the collector's
//! [`Derived`], which is protocol-neutral.

use super::family::F;
use crate::health::collect::Derived;
use crate::health::derive::{self, RatedEndurance};

/// The derivations count wear-out in days; the metric is in base units.
fn days_to_seconds(days: f64) -> f64 {
    days * 86_400.0
}

/// Every derived figure of one drive; `polled` says the drive's health page was read at least
/// once (the throttling state means something).
pub(super) fn drive(f: &mut F, dev: &str, x: &Derived, polled: bool) {
    if let Some(r) = &x.rated {
        rated(f, dev, r);
    }
    wear(f, dev, x);
    if let Some(a) = &x.accounting {
        accounting(f, dev, a);
    }
    if polled {
        throttle(f, dev, &x.throttle);
    }
}

fn rated(f: &mut F, dev: &str, r: &RatedEndurance) {
    let l = [("device", dev)];
    let source = match r.source {
        derive::RatingSource::Config => "config",
        derive::RatingSource::Table => "table",
    };
    f.gauge(
        "nvsoak_rated_info",
        "Where the rated endurance comes from (source config or table; series from config/drives.toml), value 1.",
        &[
            ("device", dev),
            ("source", source),
            ("series", r.series.as_deref().unwrap_or("")),
        ],
        1.0,
    );
    if let Some(b) = r.bytes {
        f.gauge(
            "nvsoak_rated_endurance_bytes",
            "Rated bytes written over the warranty (config [[health.device]], else config/drives.toml; DWPD x capacity x 365 x years when no TBW).",
            &l,
            b,
        );
    }
    if let Some(w) = r.dwpd {
        f.gauge(
            "nvsoak_rated_dwpd",
            "Rated drive writes per day (config [[health.device]], else config/drives.toml).",
            &l,
            w,
        );
    }
    if let Some(y) = r.warranty_years {
        f.gauge(
            "nvsoak_rated_warranty_seconds",
            "Warranty period the rated endurance refers to (years x 365 days).",
            &l,
            y * derive::YEAR_SECONDS,
        );
    }
}

/// Endurance consumed, observed DWPD, projected wear-out and write amplification.
fn wear(f: &mut F, dev: &str, x: &Derived) {
    let l = [("device", dev)];
    f.opt(
        "nvsoak_endurance_consumed_ratio",
        "Lifetime host bytes written (NVMe: SMART 02h bytes 48..63 x 512000; ATA: nvsoak_drive_lifetime_written_bytes) / rated endurance bytes.",
        &l,
        x.endurance_consumed_ratio,
    );
    f.opt(
        "nvsoak_observed_dwpd",
        "Observed drive writes per day from lifetime bytes written (NVMe: SMART 02h bytes 48..63; ATA: nvsoak_drive_lifetime_written_bytes): window soak = since the poller started, 24h = the last 24 hours.",
        &[("device", dev), ("window", "soak")],
        x.observed_dwpd_soak,
    );
    f.opt(
        "nvsoak_observed_dwpd",
        "",
        &[("device", dev), ("window", "24h")],
        x.observed_dwpd_24h,
    );
    f.opt(
        "nvsoak_projected_wearout_seconds",
        "Projected time until wear-out, in seconds: basis tbw = rated bytes at the last 24 h write rate; basis percentage_used = 100 % at the slope of percentage used (NVMe: SMART 02h byte 5; ATA: Device Statistics 07h) since the poller started.",
        &[("device", dev), ("basis", "tbw")],
        x.projected_wearout_days_tbw.map(days_to_seconds),
    );
    f.opt(
        "nvsoak_projected_wearout_seconds",
        "",
        &[("device", dev), ("basis", "percentage_used")],
        x.projected_wearout_days_percentage_used
            .map(days_to_seconds),
    );
    f.opt(
        "nvsoak_write_amplification_ratio",
        "Lifetime write amplification: flash bytes written / host bytes written (NVMe: OCP C0h bytes 0..15 / SMART 02h bytes 48..63 x 512000; ATA IronWolf 110: attribute 233 / 241).",
        &l,
        x.write_amplification,
    );
}

fn accounting(f: &mut F, dev: &str, a: &derive::Accounting) {
    let l = [("device", dev)];
    f.gauge(
        "nvsoak_accounting_host_written_bytes",
        "Bytes nvsoak itself wrote to this drive (an NVMe controller's namespaces, an ATA disk and its partitions) since the first poll that saw both.",
        &l,
        a.host_written_bytes,
    );
    f.gauge(
        "nvsoak_accounting_drive_written_bytes",
        "The drive's lifetime bytes written delta over the same period (NVMe: SMART 02h bytes 48..63 x 512000, rounded up to 512000 bytes by the drive; ATA: nvsoak_drive_lifetime_written_bytes).",
        &l,
        a.drive_written_bytes,
    );
    f.opt(
        "nvsoak_accounting_ratio",
        "Drive-reported / host-written bytes over the same period; far from 1 beyond rounding means the drive's SMART accounting disagrees with the host.",
        &l,
        a.ratio,
    );
}

fn throttle(f: &mut F, dev: &str, t: &derive::Throttle) {
    let l = [("device", dev)];
    f.gauge(
        "nvsoak_thermal_throttling",
        "1 while throttling: thermal management counts or times (NVMe SMART 02h bytes 216..231; ATA time over temperature, Device Statistics 05h) rose since the previous poll, OCP C0h byte 97 is non-zero, or the temperature >= WCTEMP (ATA: the specified maximum operating temperature).",
        &l,
        if t.throttling { 1.0 } else { 0.0 },
    );
    f.counter(
        "nvsoak_thermal_throttle_events_total",
        "Throttling episodes (0 -> 1 changes of nvsoak_thermal_throttling) since the poller started.",
        &l,
        t.events as f64,
    );
    f.opt(
        "nvsoak_throttled_iops",
        "Mean workload IOPS on this device over polls that found it throttling.",
        &l,
        t.throttled_iops,
    );
    f.opt(
        "nvsoak_unthrottled_iops",
        "Mean workload IOPS on this device over polls that found it not throttling.",
        &l,
        t.unthrottled_iops,
    );
}
