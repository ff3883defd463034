//! The soak's progress lines in the journal: while a soak phase runs, one INFO line every
//! `log.progress_interval` (default 5 minutes) with what the drive did since the last line
//! (IOPS, bandwidth, mean latency), the last stats interval's p99, the soak's errors so far,
//! the drive's temperature when a poll knows it, and the time in the phase and left of it.

use std::time::{Duration, Instant};

use crate::model::fmt::{count_of, fmt_count, fmt_elapsed, fmt_latency_us, fmt_rate};
use crate::workload::scheduler::{TargetShared, TargetView};

/// Cumulative counters of every job of the target, read at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Counts {
    ops: u64,
    bytes: u64,
    lat_sum_ns: u64,
}

fn counts_of(v: &TargetView) -> Counts {
    let mut c = Counts::default();
    for j in v.jobs.values() {
        for op in [&j.read, &j.write] {
            c.ops += op.ops;
            c.bytes += op.bytes;
            c.lat_sum_ns += op.lat_sum_ns;
        }
    }
    c
}

/// The larger p99 (µs) of reads and writes of the jobs running over the last stats interval.
fn p99_us_of(v: &TargetView) -> Option<f64> {
    v.jobs
        .values()
        .filter(|j| j.active)
        .flat_map(|j| [j.read_q, j.write_q])
        .flatten()
        .map(|q| q[1] * 1e6)
        .reduce(f64::max)
}

/// One progress line's figures.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ProgressLine {
    pub iops: f64,
    pub bytes_per_sec: f64,
    /// Mean latency over the window; `None` when it completed no I/O.
    pub lat_mean_us: Option<f64>,
    pub lat_p99_us: Option<f64>,
    /// I/O errors of the soak so far.
    pub errors: u64,
    pub temperature_c: Option<f64>,
    /// Seconds into the phase (earlier runs counted) and left of it (`None`: until stopped).
    pub elapsed_secs: f64,
    pub left_secs: Option<f64>,
}

impl ProgressLine {
    /// The line as the journal reads it.
    pub(crate) fn words(&self) -> String {
        let lat = |v: Option<f64>| v.map_or_else(|| "-".to_string(), fmt_latency_us);
        let temp = self
            .temperature_c
            .map_or_else(String::new, |t| format!(", drive {t:.0} °C"));
        let left = self.left_secs.map_or_else(
            || "until stopped".to_string(),
            |l| format!("{} left", fmt_elapsed(l)),
        );
        format!(
            "soak progress: {} IOPS, {}, mean {}, p99 {}, {}{temp}; {} in, {left}",
            fmt_count(self.iops),
            fmt_rate(self.bytes_per_sec),
            lat(self.lat_mean_us),
            lat(self.lat_p99_us),
            count_of(self.errors, "error"),
            fmt_elapsed(self.elapsed_secs),
        )
    }
}

/// The figures of the window from `before` to `after`, `secs` long.
fn line_of(before: Counts, after: Counts, secs: f64) -> (f64, f64, Option<f64>) {
    let ops = after.ops.saturating_sub(before.ops);
    let bytes = after.bytes.saturating_sub(before.bytes);
    let lat = after.lat_sum_ns.saturating_sub(before.lat_sum_ns);
    let secs = secs.max(1e-9);
    let mean = (ops > 0).then(|| lat as f64 / ops as f64 / 1000.0);
    (ops as f64 / secs, bytes as f64 / secs, mean)
}

/// The clock of a soak's progress lines.
pub(crate) struct SoakProgress {
    every: Duration,
    last: Instant,
    at_last: Counts,
}

impl SoakProgress {
    pub(crate) fn new(every: Duration, now: Instant, snapshot: &TargetShared) -> Self {
        SoakProgress {
            every,
            last: now,
            at_last: snapshot.view(counts_of),
        }
    }

    /// Called every stats interval: logs a line when `every` has passed since the last one.
    pub(crate) fn tick(
        &mut self,
        target: &str,
        snapshot: &TargetShared,
        now: Instant,
        left: Option<Duration>,
    ) {
        let secs = now.duration_since(self.last);
        if secs < self.every {
            return;
        }
        let (counts, p99, errors, elapsed) = snapshot.view(|v| {
            (
                counts_of(v),
                p99_us_of(v),
                v.soak_totals().errors,
                v.phase_elapsed_secs(),
            )
        });
        let (iops, bytes_per_sec, lat_mean_us) = line_of(self.at_last, counts, secs.as_secs_f64());
        let line = ProgressLine {
            iops,
            bytes_per_sec,
            lat_mean_us,
            lat_p99_us: p99,
            errors,
            temperature_c: snapshot.drive(|d| d.temperature_c),
            elapsed_secs: elapsed,
            left_secs: left.map(|l| l.as_secs_f64()),
        };
        tracing::info!(target_name = %target, iops = line.iops, bytes_per_sec = line.bytes_per_sec,
            lat_mean_us = line.lat_mean_us.unwrap_or(f64::NAN),
            lat_p99_us = line.lat_p99_us.unwrap_or(f64::NAN), errors = line.errors,
            temperature_c = line.temperature_c.unwrap_or(f64::NAN),
            elapsed_secs = line.elapsed_secs, left_secs = line.left_secs.unwrap_or(f64::NAN),
            "{}", line.words());
        self.last = now;
        self.at_last = counts;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_progress_line_gives_the_window_s_rates_and_the_time_left() {
        let before = Counts {
            ops: 1000,
            bytes: 1000 * 4096,
            lat_sum_ns: 1000 * 50_000,
        };
        let after = Counts {
            ops: 1000 + 300_000,
            bytes: (1000 + 300_000) * 4096,
            lat_sum_ns: 1000 * 50_000 + 300_000 * 80_000,
        };
        let (iops, bw, mean) = line_of(before, after, 300.0);
        assert_eq!(iops, 1000.0);
        assert_eq!(bw, 4_096_000.0);
        assert_eq!(mean, Some(80.0));
        let line = ProgressLine {
            iops,
            bytes_per_sec: bw,
            lat_mean_us: mean,
            lat_p99_us: Some(1280.0),
            errors: 1,
            temperature_c: Some(41.4),
            elapsed_secs: 3600.0,
            left_secs: Some(82800.0),
        };
        assert_eq!(
            line.words(),
            "soak progress: 1,000 IOPS, 4.10 MB/s, mean 80.0 µs, p99 1.28 ms, 1 error, \
             drive 41 °C; 01:00:00 in, 23:00:00 left"
        );
        // No I/O in the window, no temperature, no duration.
        let (iops, _, mean) = line_of(after, after, 300.0);
        let idle = ProgressLine {
            iops,
            bytes_per_sec: 0.0,
            lat_mean_us: mean,
            lat_p99_us: None,
            errors: 0,
            temperature_c: None,
            elapsed_secs: 90_000.0,
            left_secs: None,
        };
        assert_eq!(
            idle.words(),
            "soak progress: 0 IOPS, 0 B/s, mean -, p99 -, 0 errors; 1 d 01:00:00 in, until stopped"
        );
    }
}
