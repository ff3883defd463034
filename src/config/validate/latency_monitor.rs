//! `[health.latency_monitor]`: the OCP Latency Monitor feature (Set Features C5h) nvsoak enables
//! on OCP drives. Off unless `enabled = true`: enabling it changes the drive's state.
//!
//! The feature counts its thresholds in units of 5 ms, its bucket timer in units of 5 minutes
//! and its minimum window in units of 100 ms; values that do not fall on those steps are
//! refused rather than rounded, so the drive counts what the config says.

use std::time::Duration;

use super::super::raw::RawLatencyMonitor;
use super::scalar::duration;
use super::{R, bad, join};
use crate::nvme::log::ocp_latency::LatencyMonitorConfig;

/// nvme-cli's defaults for `ocp set-latency-monitor-feature`: 25, 95, 150 and 230 ms.
pub const DEFAULT_THRESHOLDS_MS: [u64; 4] = [25, 95, 150, 230];
/// A week (2016 x 5 minutes).
pub const DEFAULT_BUCKET_TIMER: Duration = Duration::from_secs(7 * 86400);
pub const DEFAULT_MINIMUM_WINDOW: Duration = Duration::from_secs(1);
/// Active latency configuration: every bucket and kind keeps its largest latency.
pub const ACTIVE_LATENCY_CONFIG: u16 = 0x0fff;

/// `d` as a whole number of `step`s in `1..=max` units, or an error naming `key`.
fn steps(key: &str, d: Duration, step: Duration, max: u64, what: &str) -> R<u64> {
    let (n, s) = (d.as_nanos(), step.as_nanos());
    if n == 0 || !n.is_multiple_of(s) {
        return bad(
            key,
            format!(
                "{} is not a positive multiple of {} (the {what} unit)",
                crate::units::format_duration(d),
                crate::units::format_duration(step)
            ),
        );
    }
    let units = (n / s) as u64;
    if units > max {
        return bad(
            key,
            format!(
                "{} is too long (at most {})",
                crate::units::format_duration(d),
                crate::units::format_duration(step * max as u32)
            ),
        );
    }
    Ok(units)
}

pub(super) fn latency_monitor(
    key: &str,
    raw: &RawLatencyMonitor,
) -> R<Option<LatencyMonitorConfig>> {
    let k = |s: &str| join(key, s);
    let thresholds_ms: Vec<Duration> = match &raw.thresholds {
        Some(list) => {
            if list.len() != 4 {
                return bad(
                    k("thresholds"),
                    format!(
                        "{} values given; the latency monitor has four thresholds (A, B, C, D), e.g. [\"25ms\", \"95ms\", \"150ms\", \"230ms\"]",
                        list.len()
                    ),
                );
            }
            list.iter()
                .enumerate()
                .map(|(i, v)| duration(&format!("{}[{i}]", k("thresholds")), v))
                .collect::<R<_>>()?
        }
        None => DEFAULT_THRESHOLDS_MS
            .iter()
            .map(|ms| Duration::from_millis(*ms))
            .collect(),
    };
    let mut thresholds = [0u8; 4];
    for (i, d) in thresholds_ms.iter().enumerate() {
        let key_i = format!("{}[{i}]", k("thresholds"));
        thresholds[i] = steps(&key_i, *d, Duration::from_millis(5), 255, "threshold")? as u8;
        if i > 0 && thresholds[i] <= thresholds[i - 1] {
            return bad(
                key_i,
                format!(
                    "{} is not above the threshold before it ({}): the buckets lie between increasing thresholds",
                    crate::units::format_duration(*d),
                    crate::units::format_duration(thresholds_ms[i - 1])
                ),
            );
        }
    }
    let timer = match &raw.bucket_timer {
        Some(v) => duration(&k("bucket_timer"), v)?,
        None => DEFAULT_BUCKET_TIMER,
    };
    let timer = steps(
        &k("bucket_timer"),
        timer,
        Duration::from_secs(300),
        u64::from(u16::MAX),
        "bucket timer",
    )? as u16;
    let window = match &raw.minimum_window {
        Some(v) => duration(&k("minimum_window"), v)?,
        None => DEFAULT_MINIMUM_WINDOW,
    };
    let window = steps(
        &k("minimum_window"),
        window,
        Duration::from_millis(100),
        255,
        "minimum window",
    )? as u8;
    if !raw.enabled.unwrap_or(false) {
        return Ok(None); // checked, but left alone
    }
    Ok(Some(LatencyMonitorConfig {
        active_bucket_timer_threshold: timer,
        thresholds,
        active_latency_config: ACTIVE_LATENCY_CONFIG,
        active_latency_min_window: window,
    }))
}
