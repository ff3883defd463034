//! The tally of one target's verification failures by kind and of the bytes verified, shared
//! by its workers, the metrics collector and the checkpoint.

use std::sync::atomic::{AtomicU64, Ordering};

use super::VerifyKind;

/// Verification failures of one target by kind, shared between its workers (each adds with
/// relaxed atomics) and the metrics collector (`nvsoak_verify_errors_total{target,kind}`).
#[derive(Debug, Default)]
pub struct VerifyCounters {
    counts: [AtomicU64; 4],
    /// Bytes of units read back and checked against a generation this target wrote (units
    /// never written are not counted): whether data was verified at all, for the verify gate.
    /// Each hook adds its own count in batches (`VerifyHook`), so this trails by at most a few
    /// reads per worker.
    checked_bytes: AtomicU64,
    /// Set by the first mismatch; with `verify_fatal` the scheduler stops the target on it.
    pub tripped: std::sync::atomic::AtomicBool,
    /// The journal's view: the first few mismatches in full, then summaries.
    pub log: crate::workload::verify_log::MismatchLog,
}

impl VerifyCounters {
    fn index(kind: VerifyKind) -> usize {
        match kind {
            VerifyKind::WrongOffset => 0,
            VerifyKind::StaleGeneration => 1,
            VerifyKind::BadChecksum => 2,
            VerifyKind::Unreadable => 3,
        }
    }
    pub fn add(&self, kind: VerifyKind, n: u64) {
        self.counts[Self::index(kind)].fetch_add(n, Ordering::Relaxed);
        self.tripped.store(true, Ordering::Relaxed);
    }
    pub fn get(&self, kind: VerifyKind) -> u64 {
        self.counts[Self::index(kind)].load(Ordering::Relaxed)
    }
    pub fn total(&self) -> u64 {
        VerifyKind::ALL.iter().map(|k| self.get(*k)).sum()
    }
    /// (kind label, count) for each kind, for metrics and checkpoints.
    pub fn by_label(&self) -> [(&'static str, u64); 4] {
        VerifyKind::ALL.map(|k| (k.label(), self.get(k)))
    }
    pub fn add_checked(&self, bytes: u64) {
        self.checked_bytes.fetch_add(bytes, Ordering::Relaxed);
    }
    /// Bytes verified so far (see `checked_bytes`), this run and the runs before it.
    pub fn checked_bytes(&self) -> u64 {
        self.checked_bytes.load(Ordering::Relaxed)
    }
    /// Start from the verified bytes carried over from a checkpoint.
    pub fn restore_checked(&self, bytes: u64) {
        self.checked_bytes.store(bytes, Ordering::Relaxed);
    }
    /// Start from counts carried over from a checkpoint.
    pub fn restore(&self, by_label: &std::collections::BTreeMap<String, u64>) {
        for k in VerifyKind::ALL {
            if let Some(n) = by_label.get(k.label()) {
                self.counts[Self::index(k)].store(*n, Ordering::Relaxed);
            }
        }
    }
}
