//! The `[health]` section: poll and rescan intervals, device matchers, the ratings file and
//! per-device endurance overrides (`[[health.device]]`).

use std::time::Duration;

use super::super::raw::{RawDevice, RawHealth, Scalar};
use super::super::{DeviceRatingOverride, HealthSettings};
use super::scalar::{duration_in, existing_file, float, matcher, size};
use super::{R, bad, join};

pub(super) fn health(raw: &RawHealth) -> R<HealthSettings> {
    let poll_interval = match &raw.poll_interval {
        Some(v) => duration_in(
            "health.poll_interval",
            v,
            Duration::from_millis(100),
            Duration::from_secs(86400),
        )?,
        None => Duration::from_secs(30),
    };
    let rescan_interval = match &raw.rescan_interval {
        Some(v) => duration_in(
            "health.rescan_interval",
            v,
            Duration::from_millis(100),
            Duration::from_secs(86400),
        )?,
        None => Duration::from_secs(60),
    };
    for (list, n) in [(&raw.include, "include"), (&raw.exclude, "exclude")] {
        for (i, m) in list.iter().enumerate() {
            matcher(&format!("health.{n}[{i}]"), m)?;
        }
    }
    if let Some(p) = &raw.ratings_file {
        existing_file("health.ratings_file", p)?;
    }
    let mut devices: Vec<DeviceRatingOverride> = Vec::new();
    for (i, d) in raw.device.iter().enumerate() {
        let o = device(&format!("health.device[{i}]"), d, &devices)?;
        devices.push(o);
    }
    let cards = super::card::cards(&raw.card)?;
    Ok(HealthSettings {
        enabled: raw.enabled.unwrap_or(true),
        poll_interval,
        rescan_interval,
        include: raw.include.clone(),
        exclude: raw.exclude.clone(),
        ratings_file: raw.ratings_file.clone(),
        devices,
        cards,
        latency_monitor: match &raw.latency_monitor {
            Some(l) => super::latency_monitor::latency_monitor("health.latency_monitor", l)?,
            None => None,
        },
    })
}

/// One `[[health.device]]`: a matcher not used by an earlier one, and a rated endurance given
/// either as `rated_tbw` or as `rated_dwpd` with `warranty_years`.
fn device(key: &str, d: &RawDevice, earlier: &[DeviceRatingOverride]) -> R<DeviceRatingOverride> {
    let k = |s: &str| join(key, s);
    let m = match &d.matcher {
        Some(m) => {
            matcher(&k("match"), m)?;
            m.clone()
        }
        None => {
            return bad(
                k("match"),
                "missing: a serial, controller name (nvme0), exact model, or re:REGEX on the model",
            );
        }
    };
    if earlier.iter().any(|o| o.matcher == m) {
        return bad(
            k("match"),
            format!("\"{m}\" is already matched by an earlier health.device"),
        );
    }
    let rated_tbw_bytes = d
        .rated_tbw
        .as_ref()
        .map(|v| rated_tbw(key, v))
        .transpose()?;
    let rated_dwpd = match &d.rated_dwpd {
        Some(v) => {
            let f = float(&k("rated_dwpd"), v)?;
            if f <= 0.0 || f > 1000.0 {
                return bad(
                    k("rated_dwpd"),
                    format!("{f} is out of range (above 0, at most 1000 drive writes per day)"),
                );
            }
            Some(f)
        }
        None => None,
    };
    let warranty_years = match &d.warranty_years {
        Some(v) => {
            let f = float(&k("warranty_years"), v)?;
            if f <= 0.0 || f > 50.0 {
                return bad(
                    k("warranty_years"),
                    format!("{f} is out of range (above 0, at most 50 years)"),
                );
            }
            Some(f)
        }
        None => None,
    };
    let capacity_bytes = d.capacity.as_ref().map(|v| capacity(key, v)).transpose()?;
    check_endurance(key, rated_tbw_bytes, rated_dwpd, warranty_years)?;
    Ok(DeviceRatingOverride {
        matcher: m,
        rated_tbw_bytes,
        rated_dwpd,
        warranty_years,
        capacity_bytes,
    })
}

/// `rated_tbw` in bytes, non-zero, in the units of every size (`"17.52e15"`); a trailing `W`
/// (the spec sheet's "PBW") is dropped first, so `"17.52PBW"` is refused as `"17.52PB"` is, as
/// ambiguous, with both readings in the message.
fn rated_tbw(key: &str, v: &Scalar) -> R<u64> {
    let k = join(key, "rated_tbw");
    let v = match v {
        Scalar::Str(s) => Scalar::Str(s.trim().strip_suffix('W').unwrap_or(s.trim()).to_string()),
        other => other.clone(),
    };
    let b = size(&k, &v)?;
    if b == 0 {
        return bad(k, "a rated endurance of 0 bytes");
    }
    Ok(b)
}

/// `capacity` in bytes, non-zero.
fn capacity(key: &str, v: &Scalar) -> R<u64> {
    let k = join(key, "capacity");
    let b = size(&k, v)?;
    if b == 0 {
        return bad(k, "a capacity of 0 bytes");
    }
    Ok(b)
}

/// Endurance is `rated_tbw`, or `rated_dwpd` together with `warranty_years`.
fn check_endurance(
    key: &str,
    rated_tbw_bytes: Option<u64>,
    rated_dwpd: Option<f64>,
    warranty_years: Option<f64>,
) -> R<()> {
    if rated_dwpd.is_some() != warranty_years.is_some() {
        let missing = if rated_dwpd.is_some() {
            "warranty_years"
        } else {
            "rated_dwpd"
        };
        return bad(
            join(key, missing),
            "missing: rated_dwpd and warranty_years go together (endurance = DWPD × capacity × 365 × years)",
        );
    }
    if rated_tbw_bytes.is_none() && rated_dwpd.is_none() {
        return bad(
            join(key, "rated_tbw"),
            "missing: give rated_tbw (e.g. \"17.52e15\", 17.52 PB), or rated_dwpd with warranty_years",
        );
    }
    Ok(())
}
