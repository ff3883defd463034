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
                crate::model::units::format_duration(d),
                crate::model::units::format_duration(step)
            ),
        );
    }
    let units = (n / s) as u64;
    if units > max {
        return bad(
            key,
            format!(
                "{} is too long (at most {})",
                crate::model::units::format_duration(d),
                crate::model::units::format_duration(step * max as u32)
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
                    crate::model::units::format_duration(*d),
                    crate::model::units::format_duration(thresholds_ms[i - 1])
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

#[cfg(test)]
mod tests {
    use crate::nvme::log::ocp_latency::LatencyMonitorConfig;

    fn load(table: &str) -> Result<Option<LatencyMonitorConfig>, String> {
        let doc = format!("default_target = false\n[health.latency_monitor]\n{table}\n");
        crate::config::load_str(&doc, "test", Vec::new())
            .map(|s| s.health.latency_monitor)
            .map_err(|e| format!("{e:#}"))
    }

    #[test]
    fn off_by_default_and_when_not_enabled() {
        let s =
            crate::config::load_str("default_target = false\n", "test", Vec::new()).expect("valid");
        assert_eq!(s.health.latency_monitor, None);
        assert_eq!(
            load("thresholds = [\"5ms\", \"10ms\", \"15ms\", \"20ms\"]"),
            Ok(None)
        );
    }

    #[test]
    fn enabled_values_in_the_feature_units() {
        let c = load(
            "enabled = true\nthresholds = [\"5ms\", \"50ms\", \"0.1s\", \"1275ms\"]\nbucket_timer = \"1h\"\nminimum_window = \"300ms\"",
        )
        .expect("valid")
        .expect("enabled");
        assert_eq!(c.thresholds, [1, 10, 20, 255]);
        assert_eq!(c.active_bucket_timer_threshold, 12);
        assert_eq!(c.active_latency_min_window, 3);
        assert_eq!(c.active_latency_config, 0x0fff);
        let d = load("enabled = true").expect("valid").expect("enabled");
        assert_eq!(d.thresholds, [5, 19, 30, 46], "25, 95, 150, 230 ms");
        assert_eq!(d.active_bucket_timer_threshold, 2016, "a week");
        assert_eq!(d.active_latency_min_window, 10);
    }

    #[test]
    fn bad_values_name_the_key() {
        for (table, key, why) in [
            (
                "thresholds = [\"5ms\", \"7ms\", \"15ms\", \"20ms\"]",
                "health.latency_monitor.thresholds[1]",
                "multiple of 5ms",
            ),
            (
                "thresholds = [\"5ms\", \"10ms\"]",
                "health.latency_monitor.thresholds",
                "four thresholds",
            ),
            (
                "thresholds = [\"20ms\", \"10ms\", \"30ms\", \"40ms\"]",
                "health.latency_monitor.thresholds[1]",
                "not above",
            ),
            (
                "thresholds = [\"5ms\", \"10ms\", \"15ms\", \"2s\"]",
                "health.latency_monitor.thresholds[3]",
                "too long",
            ),
            (
                "bucket_timer = \"7m\"",
                "health.latency_monitor.bucket_timer",
                "multiple of 5m",
            ),
            (
                "minimum_window = \"30s\"",
                "health.latency_monitor.minimum_window",
                "too long",
            ),
            ("thresold = 1", "thresold", "unknown"),
        ] {
            let e = load(&format!("enabled = true\n{table}")).expect_err(table);
            assert!(e.contains(key), "{table}: {e}");
            assert!(e.contains(why), "{table}: {e}");
        }
    }
}
