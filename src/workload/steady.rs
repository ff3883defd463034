//! Steady-state detection: a pure function of the per-round values (IOPS by default) pushed into
//! it. No clock, no I/O: the scheduler measures a round and calls [`SteadyDetector::push_round`].
//!
//! Criteria ([`SteadyCriterion`]):
//! - **SNIA PTS** (default): over a window of `window` rounds (SNIA: 5), the range
//!   `max - min` is ≤ `max_range` (SNIA: 20%) of the window average, and the excursion of the
//!   least-squares line fitted across the window, `|slope| × (window - 1)`, is
//!   ≤ `max_slope_excursion` (SNIA: 10%) of the average.
//! - **fio `iops:N%`**: every round of the window is within N% of the window mean, i.e.
//!   `max |x - mean| / mean ≤ N%`. N is carried in `SteadyConfig::max_range`.
//! - **fio `iops_slope:N%`**: `|slope| / mean ≤ N%`, the slope being per round. N is carried in
//!   `SteadyConfig::max_slope_excursion`.
//!
//! The criterion is evaluated continuously: after every round, over the newest `window` rounds.
//! Nothing is reached before the window is full. Once reached, `since_round`/`since_time` stay
//! at the round where the current steady stretch began (the round that completed the first
//! window that held). If a later window breaks the criterion, `reached` goes back to false and
//! `since_*` is cleared; when it holds again, `since_*` is the new round. The first time steady
//! state was ever reached is kept in `first_round`/`first_time`.
//!
//! Values that are NaN, infinite or negative are counted as 0. A window whose average is 0 (no
//! I/O at all) is never steady; its ratios are reported as 0.

use std::collections::VecDeque;

use serde::Serialize;

use crate::model::spec::{SteadyConfig, SteadyCriterion};

/// What the detector knows after the latest round.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct SteadyStatus {
    /// The criterion holds over the current (full) window.
    pub reached: bool,
    /// 1-based round at which the current steady stretch began (`None` while not reached).
    pub since_round: Option<u64>,
    /// Unix time (seconds) of that round.
    pub since_time: Option<f64>,
    /// 1-based round at which steady state was first reached, kept when it later breaks.
    pub first_round: Option<u64>,
    pub first_time: Option<f64>,
    /// The newest rounds (at most `window`), oldest first.
    pub window: Vec<f64>,
    /// Mean of `window`.
    pub average: f64,
    /// `max - min` of `window`.
    pub range: f64,
    /// `range / average`.
    pub range_ratio: f64,
    /// Least-squares slope across `window`, per round.
    pub slope: f64,
    /// `|slope| × (window.len() - 1)`: how far the fitted line moves across the window.
    pub slope_excursion: f64,
    /// `slope_excursion / average`.
    pub slope_excursion_ratio: f64,
    /// `|slope| / average` (fio `iops_slope`).
    pub slope_ratio: f64,
    /// `max |x - average| / average` (fio `iops`).
    pub max_deviation_ratio: f64,
    /// Rounds pushed so far.
    pub rounds: u64,
}

/// Steady-state detector over a sliding window of rounds.
#[derive(Debug, Clone)]
pub struct SteadyDetector {
    cfg: SteadyConfig,
    values: VecDeque<f64>,
    rounds: u64,
    since: Option<(u64, f64)>,
    first: Option<(u64, f64)>,
    last: SteadyStatus,
}

impl SteadyDetector {
    /// A window below 2 rounds cannot fit a line; it is raised to 2.
    pub fn new(cfg: SteadyConfig) -> Self {
        let mut cfg = cfg;
        cfg.window = cfg.window.max(2);
        SteadyDetector {
            values: VecDeque::with_capacity(cfg.window),
            cfg,
            rounds: 0,
            since: None,
            first: None,
            last: SteadyStatus::default(),
        }
    }

    pub fn config(&self) -> &SteadyConfig {
        &self.cfg
    }

    /// The status after the latest round (all zero before the first).
    pub fn status(&self) -> &SteadyStatus {
        &self.last
    }

    /// Forget all rounds (e.g. after the workload changed).
    pub fn reset(&mut self) {
        *self = SteadyDetector::new(self.cfg.clone());
    }

    /// Add one round's value (e.g. its average IOPS), measured at unix time `at`, and evaluate
    /// the criterion over the newest window.
    pub fn push_round(&mut self, value: f64, at: f64) -> SteadyStatus {
        let v = if value.is_finite() && value > 0.0 {
            value
        } else {
            0.0
        };
        if self.values.len() == self.cfg.window {
            self.values.pop_front();
        }
        self.values.push_back(v);
        self.rounds += 1;

        let w: Vec<f64> = self.values.iter().copied().collect();
        let m = window_metrics(&w);
        let full = w.len() == self.cfg.window;
        let holds = full
            && m.average > 0.0
            && match self.cfg.criterion {
                SteadyCriterion::Snia => {
                    m.range_ratio <= self.cfg.max_range
                        && m.slope_excursion_ratio <= self.cfg.max_slope_excursion
                }
                SteadyCriterion::FioIops => m.max_deviation_ratio <= self.cfg.max_range,
                SteadyCriterion::FioIopsSlope => m.slope_ratio <= self.cfg.max_slope_excursion,
            };
        if holds {
            if self.since.is_none() {
                self.since = Some((self.rounds, at));
            }
            if self.first.is_none() {
                self.first = self.since;
            }
        } else {
            self.since = None;
        }
        self.last = SteadyStatus {
            reached: holds,
            since_round: self.since.map(|s| s.0),
            since_time: self.since.map(|s| s.1),
            first_round: self.first.map(|s| s.0),
            first_time: self.first.map(|s| s.1),
            window: w,
            average: m.average,
            range: m.range,
            range_ratio: m.range_ratio,
            slope: m.slope,
            slope_excursion: m.slope_excursion,
            slope_excursion_ratio: m.slope_excursion_ratio,
            slope_ratio: m.slope_ratio,
            max_deviation_ratio: m.max_deviation_ratio,
            rounds: self.rounds,
        };
        self.last.clone()
    }
}

/// Statistics of one window, independent of the criterion.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct WindowMetrics {
    pub average: f64,
    pub range: f64,
    pub range_ratio: f64,
    pub slope: f64,
    pub slope_excursion: f64,
    pub slope_excursion_ratio: f64,
    pub slope_ratio: f64,
    pub max_deviation_ratio: f64,
}

/// Mean, range and least-squares slope (x = 0, 1, .., n-1) of `w`.
pub fn window_metrics(w: &[f64]) -> WindowMetrics {
    let n = w.len();
    if n == 0 {
        return WindowMetrics::default();
    }
    let nf = n as f64;
    let average = w.iter().sum::<f64>() / nf;
    let max = w.iter().copied().fold(f64::MIN, f64::max);
    let min = w.iter().copied().fold(f64::MAX, f64::min);
    let range = max - min;
    let slope = if n < 2 {
        0.0
    } else {
        let xm = (nf - 1.0) / 2.0;
        let (mut sxy, mut sxx) = (0.0, 0.0);
        for (i, y) in w.iter().enumerate() {
            let dx = i as f64 - xm;
            sxy += dx * (y - average);
            sxx += dx * dx;
        }
        sxy / sxx
    };
    let slope_excursion = slope.abs() * (nf - 1.0);
    let max_dev = w.iter().map(|y| (y - average).abs()).fold(0.0, f64::max);
    let ratio = |x: f64| if average > 0.0 { x / average } else { 0.0 };
    WindowMetrics {
        average,
        range,
        range_ratio: ratio(range),
        slope,
        slope_excursion,
        slope_excursion_ratio: ratio(slope_excursion),
        slope_ratio: ratio(slope.abs()),
        max_deviation_ratio: ratio(max_dev),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn snia() -> SteadyConfig {
        SteadyConfig::default()
    }

    fn feed(d: &mut SteadyDetector, xs: &[f64]) -> Vec<SteadyStatus> {
        xs.iter()
            .enumerate()
            .map(|(i, x)| d.push_round(*x, 1000.0 + 60.0 * i as f64))
            .collect()
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    /// Worked by hand. Window [100, 102, 101, 105, 104]:
    /// - mean = 512 / 5 = 102.4; range = 105 - 100 = 5 → 5 / 102.4 = 4.8828125%
    /// - x = 0..4, x̄ = 2; dx = -2, -1, 0, 1, 2; Σdx² = 10
    /// - dy = y - 102.4 = -2.4, -0.4, -1.4, 2.6, 1.6
    /// - Σdx·dy = 4.8 + 0.4 + 0 + 2.6 + 3.2 = 11.0 → slope = 11 / 10 = 1.1 per round
    /// - excursion = 1.1 × (5 - 1) = 4.4 → 4.4 / 102.4 = 4.296875%
    /// - both within SNIA's 20% / 10%: steady at round 5.
    #[test]
    fn worked_example_rising() {
        let mut d = SteadyDetector::new(snia());
        let st = feed(&mut d, &[100.0, 102.0, 101.0, 105.0, 104.0]);
        let last = st.last().unwrap();
        assert!(close(last.average, 102.4));
        assert!(close(last.range, 5.0));
        assert!(close(last.range_ratio, 0.048828125));
        assert!(close(last.slope, 1.1));
        assert!(close(last.slope_excursion, 4.4));
        assert!(close(last.slope_excursion_ratio, 0.04296875));
        assert!(last.reached);
        assert_eq!(last.since_round, Some(5));
        assert_eq!(last.since_time, Some(1240.0));
        assert!(st[..4].iter().all(|s| !s.reached), "window not full yet");
    }

    /// Worked by hand. Window [100, 104, 98, 102, 101]:
    /// - mean = 505 / 5 = 101; range = 104 - 98 = 6 → 6 / 101 = 5.94%
    /// - dx = -2, -1, 0, 1, 2; dy = -1, 3, -3, 1, 0; Σdx·dy = 2 - 3 + 0 + 1 + 0 = 0 → slope 0,
    ///   excursion 0 (the window wiggles but does not trend)
    /// - fio `iops`: max |dy| = 3 → 3 / 101 = 2.97%
    #[test]
    fn worked_example_flat_wiggle() {
        let mut d = SteadyDetector::new(snia());
        let last = feed(&mut d, &[100.0, 104.0, 98.0, 102.0, 101.0])
            .pop()
            .unwrap();
        assert!(close(last.average, 101.0));
        assert!(close(last.range_ratio, 6.0 / 101.0));
        assert!(close(last.slope, 0.0));
        assert!(close(last.slope_excursion_ratio, 0.0));
        assert!(close(last.max_deviation_ratio, 3.0 / 101.0));
        assert!(last.reached);
    }

    #[test]
    fn flat_series_is_steady_once_window_full() {
        let mut d = SteadyDetector::new(snia());
        let st = feed(&mut d, &[5000.0; 8]);
        assert!(!st[3].reached);
        assert!(st[4].reached);
        assert_eq!(st[4].since_round, Some(5));
        // It stays at the first round it held.
        assert_eq!(st[7].since_round, Some(5));
        assert_eq!(st[7].rounds, 8);
        assert_eq!(st[7].window.len(), 5);
        assert_eq!(st[7].range, 0.0);
    }

    #[test]
    fn trending_series_fails_on_slope() {
        // +4% of ~100 per round: range 16 (≤ 20%) but excursion 16/108 = 14.8% > 10%.
        let mut d = SteadyDetector::new(snia());
        let last = feed(&mut d, &[100.0, 104.0, 108.0, 112.0, 116.0])
            .pop()
            .unwrap();
        assert!(close(last.slope, 4.0));
        assert!(close(last.range_ratio, 16.0 / 108.0));
        assert!(last.range_ratio <= 0.20);
        assert!(close(last.slope_excursion_ratio, 16.0 / 108.0));
        assert!(!last.reached);
    }

    #[test]
    fn noisy_series_fails_on_range() {
        // Alternating ±15%: no trend, but range 30% of the mean.
        let mut d = SteadyDetector::new(snia());
        let st = feed(&mut d, &[85.0, 115.0, 85.0, 115.0, 85.0, 115.0]);
        let last = st.last().unwrap();
        assert!(last.range_ratio > 0.20);
        assert!(last.slope_excursion_ratio <= 0.10);
        assert!(st.iter().all(|s| !s.reached));
    }

    #[test]
    fn breaks_and_recovers() {
        let mut d = SteadyDetector::new(snia());
        let st = feed(
            &mut d,
            &[
                100.0, 100.0, 100.0, 100.0, 100.0, 40.0, 100.0, 100.0, 100.0, 100.0, 100.0,
            ],
        );
        assert!(st[4].reached);
        assert_eq!(st[4].since_round, Some(5));
        // The dip is inside the window for rounds 6..=10.
        for s in &st[5..10] {
            assert!(!s.reached, "round {} should not be steady", s.rounds);
            assert_eq!(s.since_round, None);
            assert_eq!(s.first_round, Some(5));
        }
        assert!(st[10].reached);
        assert_eq!(st[10].since_round, Some(11));
        assert_eq!(st[10].first_round, Some(5));
    }

    #[test]
    fn fio_iops_criterion() {
        let cfg = SteadyConfig {
            criterion: SteadyCriterion::FioIops,
            max_range: 0.02,
            ..snia()
        };
        let mut d = SteadyDetector::new(cfg.clone());
        // Max deviation 3/101 = 2.97% > 2%.
        assert!(!feed(&mut d, &[100.0, 104.0, 98.0, 102.0, 101.0])[4].reached);
        let mut d = SteadyDetector::new(SteadyConfig {
            max_range: 0.03,
            ..cfg
        });
        assert!(feed(&mut d, &[100.0, 104.0, 98.0, 102.0, 101.0])[4].reached);
    }

    #[test]
    fn fio_iops_slope_criterion() {
        let cfg = SteadyConfig {
            criterion: SteadyCriterion::FioIopsSlope,
            max_slope_excursion: 0.01,
            round: Duration::from_secs(1),
            window: 5,
            ..snia()
        };
        // slope 1.1 / mean 102.4 = 1.07% > 1%.
        let mut d = SteadyDetector::new(cfg.clone());
        let last = feed(&mut d, &[100.0, 102.0, 101.0, 105.0, 104.0])
            .pop()
            .unwrap();
        assert!(close(last.slope_ratio, 1.1 / 102.4));
        assert!(!last.reached);
        let mut d = SteadyDetector::new(SteadyConfig {
            max_slope_excursion: 0.011,
            ..cfg
        });
        assert!(feed(&mut d, &[100.0, 102.0, 101.0, 105.0, 104.0])[4].reached);
    }

    #[test]
    fn zeros_and_garbage_are_never_steady() {
        let mut d = SteadyDetector::new(snia());
        let st = feed(&mut d, &[0.0, f64::NAN, -5.0, f64::INFINITY, 0.0, 0.0]);
        let last = st.last().unwrap();
        assert!(!last.reached);
        assert_eq!(last.average, 0.0);
        assert_eq!(last.range_ratio, 0.0);
        assert!(last.window.iter().all(|v| *v == 0.0));
    }

    #[test]
    fn window_of_one_is_raised_to_two() {
        let mut d = SteadyDetector::new(SteadyConfig {
            window: 1,
            ..snia()
        });
        assert!(!d.push_round(10.0, 0.0).reached);
        assert!(d.push_round(10.0, 1.0).reached);
        assert_eq!(d.status().since_round, Some(2));
    }
}
