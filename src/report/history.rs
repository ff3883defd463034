//! The daemon's in-memory history for the status page's "last hour" charts: per target
//! (IOPS, bandwidth, p99 latency) and per device (temperature).
//!
//! Bounded in two ways: each series keeps at most `capacity` samples, at most one per `step`
//! (pushes arriving sooner are dropped, so a fast caller cannot shorten the window), and
//! samples older than `capacity × step` are dropped; at most [`MAX_SERIES`] series of each kind
//! are kept (the one updated longest ago is evicted). With the defaults (3600 × 1 s) that is
//! one hour, about 115 KiB per target.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use crate::workload::scheduler::TargetSnapshot;

pub const DEFAULT_CAPACITY: usize = 3600;
pub const DEFAULT_STEP: Duration = Duration::from_secs(1);
/// The least gap between samples that breaks a chart's line (see [`History::gap_secs`]).
pub const GAP_SECS: f64 = 5.0;
/// Upper bound on the number of target series and, separately, device series.
pub const MAX_SERIES: usize = 256;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TargetSample {
    /// Unix time, seconds.
    pub t: f64,
    /// Reads + writes per second over the last stats interval.
    pub iops: f64,
    pub bytes_per_sec: f64,
    /// Worst p99 latency (reads or writes) of the jobs that did I/O in the interval, seconds.
    pub p99_secs: Option<f64>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DeviceSample {
    pub t: f64,
    pub temperature_c: f64,
}

#[derive(Debug, Clone)]
pub struct History {
    capacity: usize,
    step: f64,
    targets: BTreeMap<String, VecDeque<TargetSample>>,
    devices: BTreeMap<String, VecDeque<DeviceSample>>,
}

impl Default for History {
    fn default() -> Self {
        History::new(DEFAULT_CAPACITY, DEFAULT_STEP)
    }
}

trait Timed {
    fn t(&self) -> f64;
}
impl Timed for TargetSample {
    fn t(&self) -> f64 {
        self.t
    }
}
impl Timed for DeviceSample {
    fn t(&self) -> f64 {
        self.t
    }
}

fn push_bounded<S: Timed>(
    map: &mut BTreeMap<String, VecDeque<S>>,
    key: &str,
    sample: S,
    capacity: usize,
    step: f64,
) {
    if !map.contains_key(key) && map.len() >= MAX_SERIES {
        let stalest = map
            .iter()
            .min_by(|a, b| {
                let la = a.1.back().map_or(f64::MIN, |s| s.t());
                let lb = b.1.back().map_or(f64::MIN, |s| s.t());
                la.total_cmp(&lb)
            })
            .map(|(k, _)| k.clone());
        if let Some(k) = stalest {
            map.remove(&k);
        }
    }
    let q = map.entry(key.to_string()).or_default();
    if let Some(last) = q.back() {
        // Too soon (allow 1 % jitter of the caller's tick), or the clock went backwards.
        if sample.t() < last.t() + step * 0.99 {
            return;
        }
    }
    let t = sample.t();
    q.push_back(sample);
    let horizon = t - capacity as f64 * step;
    while q.len() > capacity || q.front().is_some_and(|s| s.t() < horizon) {
        q.pop_front();
    }
}

/// The sample a target snapshot contributes.
pub fn target_sample(now: f64, s: &TargetSnapshot) -> TargetSample {
    let mut bw = 0.0;
    let mut p99: Option<f64> = None;
    for j in s.jobs.values() {
        bw += j.read_bw + j.write_bw;
        let qs = [
            (j.read_iops, j.read_q.map(|q| q[1])),
            (j.write_iops, j.write_q.map(|q| q[1])),
        ];
        for (iops, q) in qs {
            if let Some(q) = q.filter(|_| iops > 0.0) {
                p99 = Some(p99.map_or(q, |p: f64| p.max(q)));
            }
        }
    }
    TargetSample {
        t: now,
        iops: s.iops,
        bytes_per_sec: bw,
        p99_secs: p99,
    }
}

impl History {
    /// `capacity` samples per series, at most one per `step`.
    pub fn new(capacity: usize, step: Duration) -> Self {
        History {
            capacity: capacity.max(1),
            step: step.as_secs_f64(),
            targets: BTreeMap::new(),
            devices: BTreeMap::new(),
        }
    }

    /// Record every target's current figures at `now` (unix seconds). A target that is not
    /// running (stopped, down, its plan finished) has no figures to record: it adds no
    /// sample, so its charts show a gap rather than zeros.
    pub fn push(&mut self, now: f64, targets: &[TargetSnapshot]) {
        for s in targets.iter().filter(|s| s.up && s.running) {
            push_bounded(
                &mut self.targets,
                &s.name,
                target_sample(now, s),
                self.capacity,
                self.step,
            );
        }
    }

    /// Record a device's composite temperature at `now`.
    pub fn push_device(&mut self, now: f64, device: &str, temperature_c: f64) {
        if temperature_c.is_finite() {
            push_bounded(
                &mut self.devices,
                device,
                DeviceSample {
                    t: now,
                    temperature_c,
                },
                self.capacity,
                self.step,
            );
        }
    }

    pub fn target(&self, name: &str) -> Option<&VecDeque<TargetSample>> {
        self.targets.get(name)
    }

    pub fn device(&self, name: &str) -> Option<&VecDeque<DeviceSample>> {
        self.devices.get(name)
    }

    /// The window the history covers: `capacity × step`.
    pub fn span_secs(&self) -> f64 {
        self.capacity as f64 * self.step
    }

    /// Seconds between samples at the most (one per step).
    pub fn step_secs(&self) -> f64 {
        self.step
    }

    /// The widest step between neighbouring samples that is still one line on a chart: a
    /// few steps (a tick can come late on a loaded host), at least [`GAP_SECS`]. Beyond it
    /// the samples have a gap (the daemon or the target was down) and the line breaks.
    pub fn gap_secs(&self) -> f64 {
        (3.0 * self.step).max(GAP_SECS)
    }

    /// Newest sample time over every series.
    pub fn latest(&self) -> Option<f64> {
        let t = self.targets.values().filter_map(|q| q.back().map(|s| s.t));
        let d = self.devices.values().filter_map(|q| q.back().map(|s| s.t));
        t.chain(d).reduce(f64::max)
    }

    /// Samples held, over every series.
    pub fn len(&self) -> usize {
        self.targets.values().map(|q| q.len()).sum::<usize>()
            + self.devices.values().map(|q| q.len()).sum::<usize>()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::scheduler::JobStats;

    fn snap(name: &str, iops: f64) -> TargetSnapshot {
        let mut s = TargetSnapshot {
            name: name.into(),
            iops,
            up: true,
            running: true,
            ..Default::default()
        };
        s.jobs.insert(
            "4k-random-read".into(),
            JobStats {
                read_iops: iops,
                read_bw: iops * 4096.0,
                read_q: Some([50e-6, 200e-6, 400e-6, 800e-6]),
                write_iops: 0.0,
                // Stale write quantiles of a job that did no writes this interval: ignored.
                write_q: Some([1.0, 2.0, 3.0, 4.0]),
                ..Default::default()
            },
        );
        s
    }

    #[test]
    fn samples_carry_iops_bandwidth_and_worst_active_p99() {
        let s = target_sample(10.0, &snap("a", 1000.0));
        assert_eq!(s.iops, 1000.0);
        assert_eq!(s.bytes_per_sec, 4_096_000.0);
        assert_eq!(s.p99_secs, Some(200e-6));
    }

    #[test]
    fn bounded_by_capacity_step_and_age() {
        let mut h = History::new(10, Duration::from_secs(1));
        // 100 pushes, 0.5 s apart: only every other one is kept (one per step) ...
        for i in 0..100 {
            h.push(1000.0 + i as f64 * 0.5, &[snap("a", i as f64)]);
        }
        let q = h.target("a").expect("series");
        // ... and only the newest 10 of those.
        assert_eq!(q.len(), 10);
        assert_eq!(q.back().map(|s| s.iops), Some(98.0));
        assert_eq!(q.front().map(|s| s.t), Some(1000.0 + 80.0 * 0.5));
        // A push after a long gap drops everything older than capacity × step.
        h.push(2000.0, &[snap("a", 1.0)]);
        assert_eq!(h.target("a").map(|q| q.len()), Some(1));
        // The clock going backwards is ignored.
        h.push(1990.0, &[snap("a", 5.0)]);
        assert_eq!(h.target("a").map(|q| q.len()), Some(1));
        assert_eq!(h.span_secs(), 10.0);
    }

    #[test]
    fn a_target_that_is_not_running_adds_no_sample() {
        let mut h = History::new(100, Duration::from_secs(1));
        h.push(10.0, &[snap("a", 5.0)]);
        let stopped = TargetSnapshot {
            running: false,
            ..snap("a", 0.0)
        };
        let down = TargetSnapshot {
            up: false,
            ..snap("a", 0.0)
        };
        h.push(11.0, &[stopped]);
        h.push(12.0, &[down]);
        let q = h.target("a").expect("series");
        assert_eq!(q.len(), 1, "{q:?}");
        assert_eq!(q.back().map(|s| s.iops), Some(5.0));
        assert_eq!(h.gap_secs(), GAP_SECS);
        assert_eq!(History::new(10, Duration::from_secs(10)).gap_secs(), 30.0);
    }

    #[test]
    fn series_count_is_bounded() {
        let mut h = History::new(4, Duration::from_secs(1));
        for i in 0..(MAX_SERIES + 10) {
            h.push_device(i as f64, &format!("nvme{i}"), 40.0);
        }
        assert_eq!(h.devices.len(), MAX_SERIES);
        // The oldest devices were evicted, the newest kept.
        assert!(h.device("nvme0").is_none());
        assert!(h.device(&format!("nvme{}", MAX_SERIES + 9)).is_some());
        assert_eq!(h.latest(), Some((MAX_SERIES + 9) as f64));
        h.push_device(1e9, "nan", f64::NAN);
        assert!(h.device("nan").is_none());
    }
}
