//! The soak's sampler: once per stats interval (from the soak phase's interval callback, on
//! the scheduler thread, never the I/O hot path) it reads the target's published counters,
//! adds the interval to the point being built and, once that covers a step, adds the point to
//! the [`SoakHistory`] the view publishes (and the results file keeps). Drive events come from
//! the drive figures the daemon puts in the snapshot (rising media errors, unsafe shutdowns,
//! throttling, a critical warning); I/O and verify errors from the counters.

use std::sync::Arc;

use super::snapshot::job_totals;
use super::{TargetShared, now_unix};
use crate::model::results::DriveSoak;
use crate::model::soakhist::{EventKind, SoakHistory, SoakPoint};

/// The counters a point is measured from, at one instant.
#[derive(Debug, Clone, Copy, Default)]
struct Cum {
    t: f64,
    read_ops: u64,
    write_ops: u64,
    lat_ns: u64,
    errors: u64,
    verify_errors: u64,
}

/// The drive figures events are seen in (deltas since the soak's baseline).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct DriveMarks {
    media_errors: u64,
    unsafe_shutdowns: u64,
    critical_warning: u8,
    throttle_secs: Option<u64>,
    throttle_episodes: u64,
}

fn marks(d: &DriveSoak) -> DriveMarks {
    DriveMarks {
        media_errors: d.media_errors.unwrap_or(0),
        unsafe_shutdowns: d.unsafe_shutdowns.unwrap_or(0),
        critical_warning: d.critical_warning_latest,
        throttle_secs: match (d.tmt1_secs, d.tmt2_secs) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
        },
        throttle_episodes: d.throttle_episodes.unwrap_or(0),
    }
}

pub(crate) struct SoakSampler {
    history: SoakHistory,
    base_step: f64,
    /// The most a gap between two samples may be and still be one run of I/O.
    max_gap: f64,
    last: Option<Cum>,
    acc: Option<SoakPoint>,
    acc_lat_ns: u128,
    drive_last: Option<DriveMarks>,
    dirty: bool,
}

/// The first step of a soak's history: a minute, or `NVSOAK_TEST_SOAK_STEP_MS` (test-only,
/// read once per soak phase) so a test of a few seconds gets several points.
pub(crate) fn base_step_secs() -> f64 {
    std::env::var("NVSOAK_TEST_SOAK_STEP_MS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .filter(|ms| *ms > 0)
        .map_or(crate::model::soakhist::BASE_STEP_SECS, |ms| {
            ms as f64 / 1000.0
        })
}

impl SoakSampler {
    /// Continue `history` (empty for a new soak) with points of `base_step` seconds; samples
    /// further apart than `max_gap` seconds start a new point.
    pub(crate) fn new(history: SoakHistory, base_step: f64, max_gap: f64) -> Self {
        let history = if history.points.is_empty() && history.events.is_empty() {
            SoakHistory::new(base_step)
        } else {
            history
        };
        SoakSampler {
            history,
            base_step,
            max_gap,
            last: None,
            acc: None,
            acc_lat_ns: 0,
            drive_last: None,
            dirty: true,
        }
    }

    fn read(shared: &TargetShared) -> (Cum, f64) {
        let (cum, p99) = shared.view(|v| {
            let (r, w) = job_totals(&v.jobs);
            let p99 = v
                .jobs
                .values()
                .filter(|j| j.active)
                .flat_map(|j| [j.read_q, j.write_q])
                .flatten()
                .map(|q| q[1])
                .fold(0.0f64, f64::max);
            (
                Cum {
                    t: now_unix(),
                    read_ops: r.ops,
                    write_ops: w.ops,
                    lat_ns: r.lat_sum_ns.saturating_add(w.lat_sum_ns),
                    errors: r.errors.total() + w.errors.total(),
                    verify_errors: 0,
                },
                p99 * 1e6,
            )
        });
        let verify_errors = shared
            .fixed
            .verify
            .as_ref()
            .map_or(0, |v| v.counters.total());
        (
            Cum {
                verify_errors,
                ..cum
            },
            p99,
        )
    }

    /// Take the current counters as the start of the next interval (at the start of each
    /// segment: I/O in between, such as a verification sweep, is not the soak's).
    pub(crate) fn resync(&mut self, shared: &TargetShared) {
        self.last = Some(Self::read(shared).0);
    }

    /// One stats interval ended: add it to the point being built; publish.
    pub(crate) fn sample(&mut self, shared: &TargetShared) {
        let (now, p99) = Self::read(shared);
        let Some(prev) = self.last.replace(now) else {
            return;
        };
        let dt = now.t - prev.t;
        if dt <= 0.0 {
            return;
        }
        // A long gap (the device was away): the point being built ends where it was.
        if dt > self.max_gap {
            self.close();
        }
        let ops = (now.read_ops.saturating_sub(prev.read_ops))
            + now.write_ops.saturating_sub(prev.write_ops);
        let errors = now.errors.saturating_sub(prev.errors);
        let verify = now.verify_errors.saturating_sub(prev.verify_errors);
        let secs = dt.min(self.max_gap);
        let acc = self.acc.get_or_insert(SoakPoint {
            t: now.t - secs,
            ..Default::default()
        });
        acc.secs = now.t - acc.t;
        acc.read_ops += now.read_ops.saturating_sub(prev.read_ops);
        acc.write_ops += now.write_ops.saturating_sub(prev.write_ops);
        acc.errors += errors;
        acc.verify_errors += verify;
        if ops > 0 {
            acc.lat_p99_us = acc.lat_p99_us.max(p99);
        }
        self.acc_lat_ns += u128::from(now.lat_ns.saturating_sub(prev.lat_ns));
        if errors > 0 {
            self.history.event(EventKind::IoErrors, now.t, errors);
            self.dirty = true;
        }
        if verify > 0 {
            self.history.event(EventKind::VerifyErrors, now.t, verify);
            self.dirty = true;
        }
        if acc.secs >= self.base_step {
            self.close();
        }
        let figures = shared.drive(|d| d.figures.as_ref().map(marks));
        if let Some(m) = figures {
            self.drive_events(now.t, m);
        }
        self.publish(shared);
    }

    /// Events from the drive figures: rises since the last sample (the first sample of a run
    /// is the baseline, so a resumed soak does not repeat what it recorded before), and a
    /// critical warning whenever it changes to a set value.
    fn drive_events(&mut self, t: f64, m: DriveMarks) {
        let Some(p) = self.drive_last.replace(m) else {
            if m.critical_warning != 0 {
                self.history
                    .event(EventKind::CriticalWarning, t, u64::from(m.critical_warning));
                self.dirty = true;
            }
            return;
        };
        let mut ev = |k, n: u64| {
            if n > 0 {
                self.history.event(k, t, n);
                self.dirty = true;
            }
        };
        ev(
            EventKind::MediaErrors,
            m.media_errors.saturating_sub(p.media_errors),
        );
        ev(
            EventKind::UnsafeShutdown,
            m.unsafe_shutdowns.saturating_sub(p.unsafe_shutdowns),
        );
        let throttled = match (m.throttle_secs, p.throttle_secs) {
            (Some(a), Some(b)) if a > b => a - b,
            _ => m.throttle_episodes.saturating_sub(p.throttle_episodes),
        };
        ev(EventKind::Throttled, throttled);
        if m.critical_warning != 0 && m.critical_warning != p.critical_warning {
            ev(EventKind::CriticalWarning, u64::from(m.critical_warning));
        }
    }

    /// A steady-state window reached (unix times of its first round's start and its end).
    pub(crate) fn steady(&mut self, profile: &str, start: f64, end: f64) {
        let before = self.history.steady.clone();
        self.history.set_steady(profile, start, end);
        if self.history.steady != before {
            self.dirty = true;
        }
    }

    /// The point being built goes into the history.
    fn close(&mut self) {
        if let Some(mut p) = self.acc.take() {
            let ops = p.read_ops + p.write_ops;
            p.lat_avg_us = if ops > 0 {
                self.acc_lat_ns as f64 / ops as f64 / 1000.0
            } else {
                0.0
            };
            self.acc_lat_ns = 0;
            if p.secs > 0.0 {
                self.history.push(p);
                self.dirty = true;
            }
        }
    }

    /// The history (when it changed) and the point being built, into the view.
    fn publish(&mut self, shared: &TargetShared) {
        let hist = self.dirty.then(|| Arc::new(self.history.clone()));
        self.dirty = false;
        let partial = self.acc.map(|mut p| {
            let ops = p.read_ops + p.write_ops;
            if ops > 0 {
                p.lat_avg_us = self.acc_lat_ns as f64 / ops as f64 / 1000.0;
            }
            p
        });
        shared.update(|v| {
            if let Some(h) = hist {
                v.soak_history = Some(h);
            }
            v.soak_partial = partial;
        });
    }

    /// The soak phase ends: the last point, short or not, goes into the history.
    pub(crate) fn finish(mut self, shared: &TargetShared) -> SoakHistory {
        self.close();
        self.dirty = true;
        self.publish(shared);
        self.history
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drive(media: u64, unsafe_sd: u64, cw: u8, tmt: Option<u64>) -> DriveMarks {
        DriveMarks {
            media_errors: media,
            unsafe_shutdowns: unsafe_sd,
            critical_warning: cw,
            throttle_secs: tmt,
            throttle_episodes: 0,
        }
    }

    #[test]
    fn drive_events_are_placed_when_the_figures_rise() {
        let mut s = SoakSampler::new(SoakHistory::default(), 60.0, 10.0);
        // The first reading is the baseline: nothing is an event yet.
        s.drive_events(100.0, drive(3, 1, 0, Some(10)));
        assert!(s.history.events.is_empty());
        s.drive_events(101.0, drive(3, 1, 0, Some(10)));
        assert!(s.history.events.is_empty());
        s.drive_events(200.0, drive(5, 1, 0, Some(40)));
        s.drive_events(300.0, drive(5, 2, 0x02, Some(40)));
        let by = |k| {
            s.history
                .events
                .iter()
                .filter(|e| e.kind == k)
                .map(|e| (e.t, e.count))
                .collect::<Vec<_>>()
        };
        assert_eq!(by(EventKind::MediaErrors), vec![(200.0, 2)]);
        assert_eq!(by(EventKind::Throttled), vec![(200.0, 30)]);
        assert_eq!(by(EventKind::UnsafeShutdown), vec![(300.0, 1)]);
        assert_eq!(by(EventKind::CriticalWarning), vec![(300.0, 2)]);
    }

    #[test]
    fn a_critical_warning_already_set_is_marked_at_the_first_reading() {
        let mut s = SoakSampler::new(SoakHistory::default(), 60.0, 10.0);
        s.drive_events(100.0, drive(0, 0, 0x01, None));
        assert_eq!(s.history.events.len(), 1);
        assert_eq!(s.history.events[0].kind, EventKind::CriticalWarning);
        // Episodes count when the drive has no thermal management time.
        let mut m = drive(0, 0, 0x01, None);
        m.throttle_episodes = 2;
        s.drive_events(160.0, m);
        assert_eq!(
            s.history
                .events
                .iter()
                .filter(|e| e.kind == EventKind::Throttled)
                .map(|e| e.count)
                .sum::<u64>(),
            2
        );
    }
}
