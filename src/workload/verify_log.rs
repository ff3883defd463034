//! How verification failures reach the journal: the first few failing blocks of a target in
//! full, one ERROR line each; after that (and for every repeat of a block already logged, which
//! a random read-back hits again and again) one summary line per interval with the count, the kinds and the offset
//! range, so a corrupting drive produces a readable log and not a line per block.
//!
//! Shared by all workers of a target (inside its `VerifyCounters`), lock-free: relaxed atomics,
//! and a compare-and-swap on the window's start so exactly one caller logs each summary.

use crate::workload::pattern::VerifyKind;
use std::sync::atomic::{AtomicU64, Ordering};

/// Distinct failing offsets of one target logged in full before summaries take over.
pub const LOG_FIRST: u64 = 8;
const SLOTS: usize = LOG_FIRST as usize;

/// The summary window: pending mismatches are logged once it is this old.
pub const SUMMARY_INTERVAL_MS: u64 = 10_000;

/// What a summary reports: mismatches not logged in full since the last summary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    pub count: u64,
    /// Count per kind, in `VerifyKind::ALL` order.
    pub by_kind: [u64; 4],
    pub min_offset: u64,
    pub max_offset: u64,
}

impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kinds: Vec<String> = VerifyKind::ALL
            .iter()
            .zip(self.by_kind)
            .filter(|(_, n)| *n > 0)
            .map(|(k, n)| format!("{} {n}", k.label()))
            .collect();
        let noun = if self.count == 1 {
            "mismatch"
        } else {
            "mismatches"
        };
        write!(
            f,
            "{} more {noun} ({}) at offsets {}..={}",
            self.count,
            kinds.join(", "),
            self.min_offset,
            self.max_offset
        )
    }
}

/// The rate limiter and summary accumulator of one target's mismatch log.
#[derive(Debug)]
pub struct MismatchLog {
    /// Slots claimed in `logged_offsets` (may run past `LOG_FIRST`: then all are taken).
    logged: AtomicU64,
    /// The offsets logged in full, `u64::MAX` where not yet claimed.
    logged_offsets: [AtomicU64; SLOTS],
    pending: [AtomicU64; 4],
    min_offset: AtomicU64,
    max_offset: AtomicU64,
    /// Milliseconds (on `now_ms`'s clock) when the first pending mismatch arrived; 0 = none.
    since_ms: AtomicU64,
}

impl Default for MismatchLog {
    fn default() -> Self {
        MismatchLog {
            logged: AtomicU64::new(0),
            logged_offsets: std::array::from_fn(|_| AtomicU64::new(u64::MAX)),
            pending: Default::default(),
            min_offset: AtomicU64::new(u64::MAX),
            max_offset: AtomicU64::new(0),
            since_ms: AtomicU64::new(0),
        }
    }
}

/// What the caller does with one mismatch.
#[derive(Debug, PartialEq, Eq)]
pub enum Action {
    /// Log it in full; `last` when it is the last one logged so.
    Full { last: bool },
    /// Counted into the pending summary; log this summary now if one is due.
    Summarised(Option<Summary>),
}

fn index(kind: VerifyKind) -> usize {
    VerifyKind::ALL.iter().position(|k| *k == kind).unwrap_or(0)
}

impl MismatchLog {
    /// Note one mismatch at `offset`, at time `now_ms` (milliseconds, never 0).
    pub fn note(&self, kind: VerifyKind, offset: u64, now_ms: u64) -> Action {
        let seen = self
            .logged_offsets
            .iter()
            .any(|o| o.load(Ordering::Relaxed) == offset);
        if !seen && self.logged.load(Ordering::Relaxed) < LOG_FIRST {
            let n = self.logged.fetch_add(1, Ordering::Relaxed);
            if let Some(slot) = self.logged_offsets.get(n as usize) {
                slot.store(offset, Ordering::Relaxed);
                return Action::Full {
                    last: n + 1 == LOG_FIRST,
                };
            }
        }
        self.pending[index(kind)].fetch_add(1, Ordering::Relaxed);
        self.min_offset.fetch_min(offset, Ordering::Relaxed);
        self.max_offset.fetch_max(offset, Ordering::Relaxed);
        let since = match self.since_ms.compare_exchange(
            0,
            now_ms.max(1),
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(_) => now_ms.max(1),
            Err(s) => s,
        };
        if now_ms.saturating_sub(since) >= SUMMARY_INTERVAL_MS {
            Action::Summarised(self.take_if(since))
        } else {
            Action::Summarised(None)
        }
    }

    /// The pending summary, whatever its age (at the end of a segment, or on a timer), if any.
    pub fn flush(&self) -> Option<Summary> {
        let since = self.since_ms.load(Ordering::Acquire);
        if since == 0 {
            return None;
        }
        self.take_if(since)
    }

    /// Claims the window that started at `since` (one caller wins) and empties it.
    fn take_if(&self, since: u64) -> Option<Summary> {
        self.since_ms
            .compare_exchange(since, 0, Ordering::AcqRel, Ordering::Acquire)
            .ok()?;
        let by_kind = [0, 1, 2, 3].map(|i| self.pending[i].swap(0, Ordering::Relaxed));
        let count = by_kind.iter().sum();
        let min_offset = self.min_offset.swap(u64::MAX, Ordering::Relaxed);
        let max_offset = self.max_offset.swap(0, Ordering::Relaxed);
        (count > 0).then_some(Summary {
            count,
            by_kind,
            min_offset: min_offset.min(max_offset),
            max_offset,
        })
    }
}

/// Milliseconds on the monotonic clock, for [`MismatchLog::note`].
pub fn now_ms() -> u64 {
    use std::sync::OnceLock;
    static START: OnceLock<std::time::Instant> = OnceLock::new();
    let start = *START.get_or_init(std::time::Instant::now);
    u64::try_from(start.elapsed().as_millis())
        .unwrap_or(u64::MAX)
        .saturating_add(1)
}

/// Logs a summary of target `target` as one ERROR line.
pub fn log_summary(target: &str, s: &Summary) {
    tracing::error!(
        target_name = %target,
        count = s.count,
        min_offset = s.min_offset,
        max_offset = s.max_offset,
        "data verification failed on target {target}: {s}"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_few_in_full_then_one_summary_per_interval() {
        let log = MismatchLog::default();
        for i in 0..LOG_FIRST {
            assert_eq!(
                log.note(VerifyKind::BadChecksum, i * 4096, 1),
                Action::Full {
                    last: i + 1 == LOG_FIRST
                }
            );
            if i == 0 {
                // A block read again: counted into the summary, not a second full line.
                assert_eq!(
                    log.note(VerifyKind::BadChecksum, 0, 1),
                    Action::Summarised(None)
                );
            }
        }
        // A flood inside one window: counted, nothing logged.
        for i in 0..1000u64 {
            let kind = if i % 2 == 0 {
                VerifyKind::StaleGeneration
            } else {
                VerifyKind::Unreadable
            };
            assert_eq!(
                log.note(kind, 1_000_000 + i * 4096, 100 + i),
                Action::Summarised(None)
            );
        }
        // The window is 10 s old: this mismatch brings the summary of all of them.
        let Action::Summarised(Some(s)) = log.note(VerifyKind::WrongOffset, 512, 100 + 10_000)
        else {
            panic!("no summary after the interval")
        };
        assert_eq!(s.count, 1002);
        assert_eq!(s.by_kind, [1, 500, 1, 500]);
        assert_eq!((s.min_offset, s.max_offset), (0, 1_000_000 + 999 * 4096));
        assert_eq!(
            s.to_string(),
            "1002 more mismatches (wrong_offset 1, stale_generation 500, bad_checksum 1, unreadable 500) at offsets 0..=5091904"
        );
        // Emptied: nothing pending, no second summary of the same mismatches.
        assert_eq!(log.flush(), None);
        // A tail shorter than the interval is flushed at the end.
        assert_eq!(
            log.note(VerifyKind::BadChecksum, 8192, 20_000),
            Action::Summarised(None)
        );
        let tail = log.flush().expect("the tail");
        assert_eq!(
            (tail.count, tail.min_offset, tail.max_offset),
            (1, 8192, 8192)
        );
        assert_eq!(
            tail.to_string(),
            "1 more mismatch (bad_checksum 1) at offsets 8192..=8192"
        );
    }

    #[test]
    fn concurrent_workers_lose_no_count_and_log_each_once() {
        let log = std::sync::Arc::new(MismatchLog::default());
        let summed = std::sync::Arc::new(AtomicU64::new(0));
        let full = std::sync::Arc::new(AtomicU64::new(0));
        let threads: Vec<_> = (0..4u64)
            .map(|t| {
                let (log, summed, full) = (log.clone(), summed.clone(), full.clone());
                std::thread::spawn(move || {
                    for i in 0..5000u64 {
                        // Each thread's clock runs past several windows.
                        match log.note(VerifyKind::BadChecksum, t * 1_000_000 + i, 1 + i * 10) {
                            Action::Full { .. } => {
                                full.fetch_add(1, Ordering::Relaxed);
                            }
                            Action::Summarised(Some(s)) => {
                                summed.fetch_add(s.count, Ordering::Relaxed);
                            }
                            Action::Summarised(None) => {}
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("worker thread");
        }
        let tail = log.flush().map_or(0, |s| s.count);
        assert_eq!(full.load(Ordering::Relaxed), LOG_FIRST);
        assert_eq!(
            full.load(Ordering::Relaxed) + summed.load(Ordering::Relaxed) + tail,
            20_000,
            "every mismatch is in a full line or exactly one summary"
        );
    }
}
