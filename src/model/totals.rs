//! A target's I/O totals, carried across restarts: the checkpoint's and the results file's
//! record of the same I/O.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// I/O totals of one target, carried across restarts: the whole plan's
/// (`TargetState::totals`) or the soak phases' only (`TargetState::soak`).
///
/// Records only go forward: a restart carries these over and adds to them, never resets them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Totals {
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub read_ops: u64,
    pub write_ops: u64,
    /// I/O errors of all kinds.
    pub errors: u64,
    /// Verification failures of all kinds.
    pub verify_errors: u64,
    /// Verification failures by kind label (`wrong_offset`, ...).
    #[serde(default)]
    pub verify_errors_by_kind: BTreeMap<String, u64>,
    /// Bytes verified (read back and checked), summed over restarts.
    #[serde(default)]
    pub verified_bytes: u64,
    /// Seconds the soak phases have run (in `TargetState::soak`), or the plan has run (in
    /// `TargetState::totals`), summed over restarts (downtime excluded).
    #[serde(default)]
    pub soak_elapsed_secs: f64,
    /// CPU time of the I/O worker threads, nanoseconds, summed over restarts: nvsoak's own
    /// code (user) and the kernel's work on the workers' behalf (system), getrusage per thread.
    /// 0 in records written before nvsoak kept them.
    #[serde(default)]
    pub cpu_user_ns: u64,
    #[serde(default)]
    pub cpu_sys_ns: u64,
}

impl Totals {
    /// Each counter the larger of the two: the later record of the same I/O. After `kill -9`
    /// the results file (written more often) may be ahead of the checkpoint, or behind it; the
    /// I/O either one recorded happened, so a resumed run carries the larger of each.
    /// `verify_errors_by_kind` is not merged: it restores the verification state, which goes
    /// back to the checkpoint with the generation map.
    pub fn max_each(&mut self, other: &Totals) {
        self.read_bytes = self.read_bytes.max(other.read_bytes);
        self.write_bytes = self.write_bytes.max(other.write_bytes);
        self.read_ops = self.read_ops.max(other.read_ops);
        self.write_ops = self.write_ops.max(other.write_ops);
        self.errors = self.errors.max(other.errors);
        self.verify_errors = self.verify_errors.max(other.verify_errors);
        self.soak_elapsed_secs = self.soak_elapsed_secs.max(other.soak_elapsed_secs);
        self.cpu_user_ns = self.cpu_user_ns.max(other.cpu_user_ns);
        self.cpu_sys_ns = self.cpu_sys_ns.max(other.cpu_sys_ns);
    }
}
