//! The counters of the daemon's background checkpoint saves, for `/metrics`.

use std::sync::atomic::{AtomicU64, Ordering};

use super::now_unix;

/// Counters of the daemon's checkpoint saves (they run off the event loop, one at a time), for
/// `/metrics`. Shared between the saving thread and the scrapes; all relaxed atomics.
#[derive(Debug, Default)]
pub struct SaveStats {
    saves: AtomicU64,
    failures: AtomicU64,
    skipped_ticks: AtomicU64,
    /// f64 bits; 0: no save succeeded yet.
    last_success_unix: AtomicU64,
    last_duration_secs: AtomicU64,
    in_flight: std::sync::atomic::AtomicBool,
}

/// What [`SaveStats`] holds at one instant.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SaveStatsSnapshot {
    pub saves: u64,
    pub failures: u64,
    pub skipped_ticks: u64,
    /// Unix time of the last successful save (`None` until one succeeded).
    pub last_success_unix: Option<f64>,
    /// How long the last save (successful or not) took.
    pub last_duration_secs: Option<f64>,
    pub in_flight: bool,
}

impl SaveStats {
    pub fn started(&self) {
        self.in_flight.store(true, Ordering::Relaxed);
    }

    /// A save ended after `secs`; `ok` says whether it succeeded.
    pub fn finished(&self, ok: bool, secs: f64) {
        if ok {
            self.saves.fetch_add(1, Ordering::Relaxed);
            self.last_success_unix
                .store(now_unix().to_bits(), Ordering::Relaxed);
        } else {
            self.failures.fetch_add(1, Ordering::Relaxed);
        }
        self.last_duration_secs
            .store(secs.to_bits(), Ordering::Relaxed);
        self.in_flight.store(false, Ordering::Relaxed);
    }

    /// A checkpoint tick came while a save was still in flight, and was skipped.
    pub fn skipped_tick(&self) {
        self.skipped_ticks.fetch_add(1, Ordering::Relaxed);
    }

    pub fn snapshot(&self) -> SaveStatsSnapshot {
        let f = |a: &AtomicU64| {
            let v = f64::from_bits(a.load(Ordering::Relaxed));
            (v > 0.0).then_some(v)
        };
        let saves = self.saves.load(Ordering::Relaxed);
        let failures = self.failures.load(Ordering::Relaxed);
        SaveStatsSnapshot {
            saves,
            failures,
            skipped_ticks: self.skipped_ticks.load(Ordering::Relaxed),
            last_success_unix: f(&self.last_success_unix),
            last_duration_secs: (saves + failures > 0)
                .then(|| f64::from_bits(self.last_duration_secs.load(Ordering::Relaxed))),
            in_flight: self.in_flight.load(Ordering::Relaxed),
        }
    }
}
