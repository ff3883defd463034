//! The soak over time, kept in the results file (format version 3): IOPS (read, write), average
//! and p99 latency, one point per step (a minute to start with), and the events on it
//! (throttling periods, I/O and verify errors, drive events) and the steady-state window.
//!
//! Bounded: once the series holds more than [`MAX_POINTS`] points, neighbours are merged in
//! pairs and the step doubles, so a 30-day soak keeps between 720 and 1,440 points, evenly
//! spread. Pure: the scheduler's sampler (`scheduler/soaksample.rs`) feeds it once per point,
//! off the I/O hot path.

use serde::{Deserialize, Serialize};

/// The first step: one point a minute.
pub const BASE_STEP_SECS: f64 = 60.0;
/// Above this many points, neighbours merge and the step doubles.
pub const MAX_POINTS: usize = 1440;
/// Above this many events, neighbouring events of a kind merge (wider gaps each time).
pub const MAX_EVENTS: usize = 512;

/// One point of the series: what the soak did from `t` for `secs` seconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SoakPoint {
    /// Unix time the point starts.
    pub t: f64,
    /// Seconds of I/O it covers.
    pub secs: f64,
    pub read_ops: u64,
    pub write_ops: u64,
    /// Average latency over the point's operations, microseconds.
    pub lat_avg_us: f64,
    /// The worst stats interval's p99 latency within the point, microseconds (0: no I/O).
    pub lat_p99_us: f64,
    /// I/O errors and verify errors counted during the point.
    pub errors: u64,
    pub verify_errors: u64,
}

impl SoakPoint {
    pub fn read_iops(&self) -> f64 {
        rate(self.read_ops, self.secs)
    }
    pub fn write_iops(&self) -> f64 {
        rate(self.write_ops, self.secs)
    }
    pub fn iops(&self) -> f64 {
        rate(self.read_ops.saturating_add(self.write_ops), self.secs)
    }
    /// Where the point sits on a time axis: its middle.
    pub fn mid(&self) -> f64 {
        self.t + self.secs / 2.0
    }
    fn end(&self) -> f64 {
        self.t + self.secs
    }

    /// `other` (the later point) folded into this one: operations add, the average is weighted
    /// by operations, the p99 is the worst of the two.
    pub fn merge(&mut self, other: &SoakPoint) {
        let (a, b) = (
            self.read_ops as f64 + self.write_ops as f64,
            other.read_ops as f64 + other.write_ops as f64,
        );
        self.lat_avg_us = if a + b > 0.0 {
            (self.lat_avg_us * a + other.lat_avg_us * b) / (a + b)
        } else {
            0.0
        };
        self.lat_p99_us = self.lat_p99_us.max(other.lat_p99_us);
        self.secs = (other.end() - self.t).max(self.secs + other.secs);
        // Counts read from a file can be anything a u64 holds.
        self.read_ops = self.read_ops.saturating_add(other.read_ops);
        self.write_ops = self.write_ops.saturating_add(other.write_ops);
        self.errors = self.errors.saturating_add(other.errors);
        self.verify_errors = self.verify_errors.saturating_add(other.verify_errors);
    }
}

fn rate(ops: u64, secs: f64) -> f64 {
    if secs > 0.0 { ops as f64 / secs } else { 0.0 }
}

/// What happened on the soak's time line.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    /// The drive throttled (thermal management time or episodes rose).
    #[default]
    Throttled,
    IoErrors,
    VerifyErrors,
    /// The drive's critical warning byte was set (the count is the byte).
    CriticalWarning,
    MediaErrors,
    UnsafeShutdown,
    /// The soak stopped and a later run of the daemon resumed it: `t` is when it stopped,
    /// `end` when it resumed, `cause` why it stopped.
    Restart,
}

/// Why a soak stopped before a later run resumed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopCause {
    /// The daemon was stopped by a signal (SIGTERM, SIGINT: a shutdown).
    Signal,
    /// A SIGHUP reload stopped the target (its plan or settings changed).
    Reload,
    /// The phase was recorded stopped, without a cause (a file written before causes were).
    Stopped,
    /// The daemon ended without closing the phase: a crash or `kill -9`.
    Unclean,
    /// As [`StopCause::Unclean`], and the host booted since: a power loss or a reset.
    PowerLoss,
}

impl StopCause {
    /// The name used in attributes and JSON (`power_loss`).
    pub fn key(self) -> &'static str {
        match self {
            StopCause::Signal => "signal",
            StopCause::Reload => "reload",
            StopCause::Stopped => "stopped",
            StopCause::Unclean => "unclean",
            StopCause::PowerLoss => "power_loss",
        }
    }

    /// Words for the event list ("stopped by a signal").
    pub fn words(self) -> &'static str {
        match self {
            StopCause::Signal => "stopped by a signal",
            StopCause::Reload => "stopped by a reload",
            StopCause::Stopped => "stopped",
            StopCause::Unclean => "unclean stop: a crash or kill -9",
            StopCause::PowerLoss => "power loss: the host rebooted",
        }
    }
}

impl EventKind {
    /// All kinds, in the order charts list them.
    pub const ALL: [EventKind; 7] = [
        EventKind::Throttled,
        EventKind::IoErrors,
        EventKind::VerifyErrors,
        EventKind::CriticalWarning,
        EventKind::MediaErrors,
        EventKind::UnsafeShutdown,
        EventKind::Restart,
    ];

    /// Words for a legend ("throttling").
    pub fn label(self) -> &'static str {
        match self {
            EventKind::Throttled => "throttling",
            EventKind::IoErrors => "I/O errors",
            EventKind::VerifyErrors => "verify errors",
            EventKind::CriticalWarning => "critical warning",
            EventKind::MediaErrors => "media errors",
            EventKind::UnsafeShutdown => "unsafe shutdown",
            EventKind::Restart => "restart",
        }
    }

    /// The name used in attributes and JSON (`io_errors`).
    pub fn key(self) -> &'static str {
        match self {
            EventKind::Throttled => "throttled",
            EventKind::IoErrors => "io_errors",
            EventKind::VerifyErrors => "verify_errors",
            EventKind::CriticalWarning => "critical_warning",
            EventKind::MediaErrors => "media_errors",
            EventKind::UnsafeShutdown => "unsafe_shutdown",
            EventKind::Restart => "restart",
        }
    }
}

/// An event, or a period of events of one kind (`t` to `end`), with how many it covers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SoakEvent {
    pub kind: EventKind,
    /// Unix time it was first seen, and last seen (equal for a single event).
    pub t: f64,
    pub end: f64,
    /// Errors, media errors or unsafe shutdowns added; for throttling the seconds throttled
    /// (when the drive counts them) else episodes; for a critical warning the byte's bits, OR-ed;
    /// for restarts how many.
    pub count: u64,
    /// A restart's cause (of the first, when restarts close together were merged); `None`
    /// for every other kind.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cause: Option<StopCause>,
}

/// The window of steady-state rounds that met the criterion, for one profile.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SteadyWindow {
    pub profile: String,
    /// Unix times the window's first round started and its last round (when steady state was
    /// reached) ended.
    pub start: f64,
    pub end: f64,
}

/// The soak's time series, bounded (see the module docs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SoakHistory {
    /// Seconds per point now (doubles at each downsampling).
    pub step_secs: f64,
    pub points: Vec<SoakPoint>,
    pub events: Vec<SoakEvent>,
    pub steady: Vec<SteadyWindow>,
}

impl Default for SoakHistory {
    fn default() -> Self {
        SoakHistory {
            step_secs: BASE_STEP_SECS,
            points: Vec::new(),
            events: Vec::new(),
            steady: Vec::new(),
        }
    }
}

impl SoakHistory {
    pub fn new(step_secs: f64) -> Self {
        SoakHistory {
            step_secs: if step_secs > 0.0 {
                step_secs
            } else {
                BASE_STEP_SECS
            },
            ..Default::default()
        }
    }

    pub fn is_empty(&self) -> bool {
        self.points.is_empty() && self.events.is_empty()
    }

    /// Add a point. A point that follows a short last point without a gap (the tail of a
    /// segment, or points of a step since doubled) is merged into it until that one covers
    /// the step; then the series is downsampled if it is too long.
    pub fn push(&mut self, p: SoakPoint) {
        if !(p.t.is_finite() && p.secs.is_finite() && p.secs >= 0.0) {
            return;
        }
        let step = self.step_secs.max(1e-3);
        match self.points.last_mut() {
            Some(last)
                if last.secs < step * 0.999
                    && p.t >= last.t
                    && p.t - last.end() < step / 2.0
                    && p.end() - last.t <= step * 1.5 =>
            {
                last.merge(&p)
            }
            _ => self.points.push(p),
        }
        while self.points.len() > MAX_POINTS {
            self.halve();
        }
    }

    /// Merge neighbours in pairs and double the step.
    fn halve(&mut self) {
        let mut out = Vec::with_capacity(self.points.len() / 2 + 1);
        for pair in self.points.chunks(2) {
            let mut a = pair[0];
            if let Some(b) = pair.get(1) {
                a.merge(b);
            }
            out.push(a);
        }
        self.points = out;
        self.step_secs *= 2.0;
        self.merge_events(self.step_secs);
    }

    /// Record `count` events of `kind` at `t`: an event of that kind seen less than a step
    /// earlier is extended (one period), else a new one starts.
    pub fn event(&mut self, kind: EventKind, t: f64, count: u64) {
        if !t.is_finite() {
            return;
        }
        let step = self.step_secs;
        if let Some(e) = self.events.iter_mut().rev().find(|e| e.kind == kind)
            && t >= e.end
            && t - e.end <= step
        {
            e.end = t;
            e.count = if kind == EventKind::CriticalWarning {
                e.count | count
            } else {
                e.count.saturating_add(count)
            };
            return;
        }
        self.events.push(SoakEvent {
            kind,
            t,
            end: t,
            count,
            cause: None,
        });
        self.bound_events();
    }

    /// Record a restart: the soak stopped at `stopped` (`cause`) and resumed at `resumed`.
    /// Never merged into an earlier restart by [`SoakHistory::event`]'s rule: each restart is
    /// its own period, until the list outgrows [`MAX_EVENTS`].
    pub fn restart(&mut self, stopped: f64, resumed: f64, cause: StopCause) {
        if !(stopped.is_finite() && resumed.is_finite()) {
            return;
        }
        self.events.push(SoakEvent {
            kind: EventKind::Restart,
            t: stopped.min(resumed),
            end: resumed,
            count: 1,
            cause: Some(cause),
        });
        self.bound_events();
    }

    /// Merge events with wider gaps until at most [`MAX_EVENTS`] are left.
    fn bound_events(&mut self) {
        let mut gap = self.step_secs;
        while self.events.len() > MAX_EVENTS {
            gap *= 2.0;
            self.merge_events(gap);
        }
    }

    /// Merge events of one kind less than `gap` apart.
    fn merge_events(&mut self, gap: f64) {
        let mut out: Vec<SoakEvent> = Vec::with_capacity(self.events.len());
        for e in self.events.drain(..) {
            if let Some(prev) = out.iter_mut().rev().find(|p| p.kind == e.kind)
                && e.t >= prev.end
                && e.t - prev.end < gap
            {
                prev.end = prev.end.max(e.end);
                prev.count = if e.kind == EventKind::CriticalWarning {
                    prev.count | e.count
                } else {
                    prev.count.saturating_add(e.count)
                };
                continue;
            }
            out.push(e);
        }
        self.events = out;
    }

    /// Record (or move) a profile's steady-state window.
    pub fn set_steady(&mut self, profile: &str, start: f64, end: f64) {
        if !(start.is_finite() && end.is_finite()) || end < start {
            return;
        }
        let w = SteadyWindow {
            profile: profile.to_string(),
            start,
            end,
        };
        match self.steady.iter_mut().find(|s| s.profile == profile) {
            Some(s) => *s = w,
            None => self.steady.push(w),
        }
    }

    /// The time the series covers: from the first point's start to the last point's end (or
    /// the events', when there are no points).
    pub fn span(&self) -> Option<(f64, f64)> {
        let starts = self
            .points
            .iter()
            .map(|p| p.t)
            .chain(self.events.iter().map(|e| e.t));
        let ends = self
            .points
            .iter()
            .map(|p| p.end())
            .chain(self.events.iter().map(|e| e.end));
        let lo = starts.fold(f64::INFINITY, f64::min);
        let hi = ends.fold(f64::NEG_INFINITY, f64::max);
        (lo.is_finite() && hi.is_finite()).then_some((lo, hi.max(lo)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn minute(i: u64, t0: f64) -> SoakPoint {
        SoakPoint {
            t: t0 + i as f64 * 60.0,
            secs: 60.0,
            read_ops: 60_000 + i,
            write_ops: 30_000,
            lat_avg_us: 100.0 + (i % 7) as f64,
            lat_p99_us: 400.0 + (i % 13) as f64,
            errors: u64::from(i.is_multiple_of(1000)),
            verify_errors: 0,
        }
    }

    #[test]
    fn merge_adds_operations_weights_the_average_and_keeps_the_worst_p99() {
        let mut a = SoakPoint {
            t: 1000.0,
            secs: 60.0,
            read_ops: 100,
            write_ops: 200,
            lat_avg_us: 10.0,
            lat_p99_us: 50.0,
            errors: 1,
            verify_errors: 2,
        };
        let b = SoakPoint {
            t: 1060.0,
            secs: 60.0,
            read_ops: 50,
            write_ops: 50,
            lat_avg_us: 30.0,
            lat_p99_us: 40.0,
            errors: 3,
            verify_errors: 4,
        };
        a.merge(&b);
        assert_eq!(
            (a.read_ops, a.write_ops, a.errors, a.verify_errors),
            (150, 250, 4, 6)
        );
        assert_eq!(a.secs, 120.0);
        // (10 x 300 + 30 x 100) / 400
        assert!((a.lat_avg_us - 15.0).abs() < 1e-9, "{}", a.lat_avg_us);
        assert_eq!(a.lat_p99_us, 50.0);
        assert!((a.read_iops() - 150.0 / 120.0).abs() < 1e-9);
        assert!((a.write_iops() - 250.0 / 120.0).abs() < 1e-9);
    }

    #[test]
    fn a_30_day_soak_stays_bounded_and_evenly_spread() {
        let t0 = 1_700_000_000.0;
        let mut h = SoakHistory::default();
        let minutes = 30 * 24 * 60u64;
        let mut total_ops = 0u64;
        for i in 0..minutes {
            let p = minute(i, t0);
            total_ops += p.read_ops + p.write_ops;
            h.push(p);
            if i.is_multiple_of(600) {
                h.event(EventKind::IoErrors, p.t + 1.0, 1);
            }
        }
        assert!(h.points.len() <= MAX_POINTS, "{}", h.points.len());
        assert!(h.points.len() > MAX_POINTS / 2, "{}", h.points.len());
        // 43,200 minutes, 1,440 max: the step doubled five times (32 minutes).
        assert_eq!(h.step_secs, 60.0 * 32.0);
        // Even: every point but the last covers exactly one step, back to back.
        for w in h.points.windows(2) {
            assert_eq!(w[0].secs, h.step_secs);
            assert_eq!(w[1].t, w[0].t + h.step_secs);
        }
        let last = h.points.last().expect("points");
        assert!(last.secs <= h.step_secs && last.secs > 0.0);
        assert_eq!(h.points[0].t, t0);
        assert_eq!(last.t + last.secs, t0 + minutes as f64 * 60.0);
        // Nothing lost: every operation is still counted.
        let kept: u64 = h.points.iter().map(|p| p.read_ops + p.write_ops).sum();
        assert_eq!(kept, total_ops);
        // The worst p99 survives the merges.
        assert!(h.points.iter().any(|p| p.lat_p99_us == 412.0));
        // The file stays small.
        let json = serde_json::to_string(&h).expect("serialises");
        assert!(json.len() < 300_000, "{} bytes", json.len());
        assert!(h.events.len() <= MAX_EVENTS);
        assert_eq!(h.events.iter().map(|e| e.count).sum::<u64>(), 72);
    }

    #[test]
    fn short_points_fill_up_to_a_step_and_gaps_start_a_new_point() {
        let mut h = SoakHistory::new(60.0);
        let p = |t: f64, secs: f64| SoakPoint {
            t,
            secs,
            read_ops: (secs * 10.0) as u64,
            ..Default::default()
        };
        h.push(p(0.0, 20.0));
        h.push(p(20.0, 40.0));
        assert_eq!(h.points.len(), 1);
        assert_eq!(h.points[0].secs, 60.0);
        h.push(p(60.0, 60.0));
        assert_eq!(h.points.len(), 2);
        h.push(p(120.0, 10.0));
        // An hour later (a stopped daemon): a new point, not one spanning the gap.
        h.push(p(3730.0, 60.0));
        assert_eq!(h.points.len(), 4);
        assert_eq!(h.points[3].t, 3730.0);
        // Bad numbers are refused.
        h.push(p(f64::NAN, 60.0));
        assert_eq!(h.points.len(), 4);
    }

    #[test]
    fn events_of_a_kind_close_together_are_one_period() {
        let mut h = SoakHistory::new(60.0);
        h.event(EventKind::Throttled, 100.0, 5);
        h.event(EventKind::Throttled, 150.0, 5);
        h.event(EventKind::IoErrors, 155.0, 3);
        h.event(EventKind::Throttled, 200.0, 2);
        h.event(EventKind::Throttled, 1000.0, 1);
        h.event(EventKind::CriticalWarning, 300.0, 0x02);
        h.event(EventKind::CriticalWarning, 320.0, 0x04);
        let thr: Vec<_> = h
            .events
            .iter()
            .filter(|e| e.kind == EventKind::Throttled)
            .collect();
        assert_eq!(thr.len(), 2);
        assert_eq!((thr[0].t, thr[0].end, thr[0].count), (100.0, 200.0, 12));
        assert_eq!((thr[1].t, thr[1].count), (1000.0, 1));
        let cw: Vec<_> = h
            .events
            .iter()
            .filter(|e| e.kind == EventKind::CriticalWarning)
            .collect();
        assert_eq!(cw.len(), 1);
        assert_eq!(cw[0].count, 0x06);
        assert_eq!(h.span(), Some((100.0, 1000.0)));
    }

    #[test]
    fn events_stay_bounded() {
        let mut h = SoakHistory::new(60.0);
        for i in 0..10_000u64 {
            let kind = EventKind::ALL[(i % 6) as usize];
            h.event(kind, i as f64 * 1000.0, 1);
        }
        assert!(h.events.len() <= MAX_EVENTS, "{}", h.events.len());
        // Counts add up (a critical warning's count is its bits, OR-ed, so it is left out).
        let counted: u64 = h
            .events
            .iter()
            .filter(|e| e.kind != EventKind::CriticalWarning)
            .map(|e| e.count)
            .sum();
        assert_eq!(
            counted,
            (0..10_000u64).filter(|i| i % 6 != 3).count() as u64
        );
    }

    #[test]
    fn steady_window_is_one_per_profile() {
        let mut h = SoakHistory::default();
        h.set_steady("a", 10.0, 20.0);
        h.set_steady("a", 15.0, 25.0);
        h.set_steady("b", 1.0, 2.0);
        h.set_steady("c", 5.0, 1.0);
        assert_eq!(h.steady.len(), 2);
        assert_eq!((h.steady[0].start, h.steady[0].end), (15.0, 25.0));
    }

    #[test]
    fn old_files_without_a_history_load() {
        let h: SoakHistory = serde_json::from_str("{}").expect("loads");
        assert_eq!(h.step_secs, BASE_STEP_SECS);
        let p: SoakPoint = serde_json::from_str(r#"{"t":1.0}"#).expect("loads");
        assert_eq!(p.secs, 0.0);
    }
}
