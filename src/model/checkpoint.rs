//! The checkpoint schema: what `checkpoint.json` holds for a multi-day run (the plan's
//! position, totals, the soak's baselines and each phase's progress), with the pure
//! arithmetic of a precondition's position. Loading, saving, locking and moving aside are
//! `state`'s.

use serde::{Deserialize, Serialize};

use crate::model::totals::Totals;

/// Format version of `checkpoint.json`.
pub const CHECKPOINT_VERSION: u32 = 1;
/// Where a target's generation map sidecar is, and what it must contain.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GenMapRef {
    /// File name inside the state directory.
    pub file: String,
    pub len: u64,
    pub crc32c: u32,
    /// Units covered and units written at save time (for `state show`).
    pub units: u64,
    pub written_units: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TargetState {
    pub name: String,
    pub path: String,
    /// The block device's `state::device_key` (WWN or serial, else kernel name and device numbers);
    /// None for files. A resume against another device moves the checkpoint aside.
    pub identity: Option<String>,
    /// Index into the target's phase list.
    pub phase_index: usize,
    /// How far into that phase, in seconds.
    pub phase_elapsed_secs: f64,
    /// Completed passes over the phase list (plans with `loop`).
    pub loop_count: u64,
    /// Unix time the first soak phase started (first start, not the latest restart); `None`
    /// until a soak phase has run. Checkpoints written before `soak` existed have the plan's
    /// start here.
    pub soak_started: Option<f64>,
    /// The whole plan's totals (every phase: precondition, sweeps, soaks, verification
    /// passes), with the plan's running time. The drive accounting check compares the drive's
    /// data written with these, since the drive baseline predates the plan's first write.
    pub totals: Totals,
    /// The soak phases' own totals, with the soak's running time: what every figure labelled
    /// "soak" shows. `None` in checkpoints written before it existed, whose `totals` stood for
    /// both (the resumed run then carries those, so no figure goes backwards).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub soak: Option<Totals>,
    /// Steady-state rounds so far (IOPS per round), newest last.
    pub steady_history: Vec<f64>,
    /// SMART/health log at soak start, so per-soak deltas of drive counters are known.
    pub smart_at_soak_start: Option<serde_json::Value>,
    /// nvsoak's soak totals at the instant `smart_at_soak_start` was read (the accounting
    /// check over the soak compares like with like).
    #[serde(default)]
    pub host_at_soak_start: Option<crate::model::results::HostAtSmart>,
    /// Throttling episodes the poller saw on the target's drive during the soak so far.
    #[serde(default)]
    pub drive_throttle_episodes: u64,
    /// Critical-warning bits seen set at any poll of the soak so far (the verdict's gate).
    #[serde(default)]
    pub drive_warning_seen: u8,
    /// Highest composite temperature seen during the soak so far, kelvin (0: none).
    #[serde(default)]
    pub drive_temperature_max_kelvin: u16,
    /// A SATA disk's counters at soak start and the highest temperature seen since
    /// (`health::collect::ata::soak::AtaBaseline` as JSON); NVMe drives use `smart_at_soak_start`.
    #[serde(default)]
    pub ata_at_soak_start: Option<serde_json::Value>,
    /// The drive's own view at soak start and its events so far
    /// (`workload::drive_ocp::OcpBaseline` as JSON): C1h panic ID/count, C3h counters.
    #[serde(default)]
    pub ocp_at_soak_start: Option<serde_json::Value>,
    /// A target spanning several devices: each member's figures so far (`TargetView::members`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub members: Vec<crate::model::results::MemberFigures>,
    /// The verify writer seed of this soak (kept so a restart recognises its own blocks).
    #[serde(default)]
    pub verify_seed: Option<u64>,
    /// Filled by `state::save` when a generation map is saved for this target.
    #[serde(default)]
    pub genmap: Option<GenMapRef>,
    /// The computed verification state (`model::walk`), when the target keeps that instead
    /// of a generation map: a few counters per run segment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verify_walk: Option<crate::model::walk::WalkRecord>,
    /// How far the precondition at `phase_index` got, when that phase is a precondition.
    #[serde(default)]
    pub precondition: Option<PreconditionProgress>,
    /// The sweep at `phase_index` so far (maximum and completed points), when that phase is a
    /// sweep and its uncontrolled run finished.
    #[serde(default)]
    pub sweep: Option<crate::model::results::SweepResult>,
}

/// Progress of a precondition phase: one entry per worker stripe, in worker order. Each worker
/// walks its stripe sequentially `passes` times; `done_bytes` counts the bytes of that walk
/// (over all passes, earlier runs included) whose writes completed, in walk order: only a
/// prefix is recorded, so an I/O still in flight (or failed) holds the position at its start.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PreconditionProgress {
    pub passes: u32,
    pub block_size: u32,
    pub stripes: Vec<StripeProgress>,
}

/// One worker's stripe of a precondition: `[start, start + len)` of the target, and how many
/// bytes of its `passes × len` walk are done.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StripeProgress {
    pub start: u64,
    pub len: u64,
    pub done_bytes: u64,
}

impl StripeProgress {
    /// Bytes this stripe writes over all passes.
    pub fn total_bytes(&self, passes: u32) -> u64 {
        self.len * passes as u64
    }

    /// `done_bytes` clamped to the walk and rounded down to whole blocks of `block_size` from
    /// the start of the pass it is in (the last block of a pass may be shorter: it ends at the
    /// stripe's end).
    pub fn clamped_done(&self, passes: u32, block_size: u32) -> u64 {
        let done = self.done_bytes.min(self.total_bytes(passes));
        if self.len == 0 || done == self.total_bytes(passes) {
            return done;
        }
        let bs = (block_size as u64).max(1);
        let pass_start = done / self.len * self.len;
        pass_start + (done - pass_start) / bs * bs
    }

    /// Where a worker resuming this stripe starts: the position inside the stripe (bytes from
    /// `start`) and the bytes it has left to write.
    pub fn resume_point(&self, passes: u32, block_size: u32) -> (u64, u64) {
        let done = self.clamped_done(passes, block_size);
        let pos = if self.len == 0 { 0 } else { done % self.len };
        (pos, self.total_bytes(passes) - done)
    }
}

impl PreconditionProgress {
    pub fn total_bytes(&self) -> u64 {
        self.stripes
            .iter()
            .map(|s| s.total_bytes(self.passes))
            .sum()
    }

    pub fn done_bytes(&self) -> u64 {
        self.stripes
            .iter()
            .map(|s| s.clamped_done(self.passes, self.block_size))
            .sum()
    }

    pub fn is_complete(&self) -> bool {
        self.done_bytes() >= self.total_bytes()
    }

    /// The pass the precondition is in (1-based; `passes` when complete) and how far into it
    /// (0..1), from the summed progress of all stripes.
    pub fn pass_and_fraction(&self) -> (u32, f64) {
        let total = self.total_bytes();
        if total == 0 || self.passes == 0 {
            return (self.passes.max(1), 1.0);
        }
        let done = self.done_bytes();
        if done >= total {
            return (self.passes, 1.0);
        }
        let region = total / self.passes as u64;
        let pass = done / region;
        (
            pass as u32 + 1,
            (done - pass * region) as f64 / region as f64,
        )
    }

    /// Absolute target offsets each worker continues at.
    pub fn worker_offsets(&self) -> Vec<u64> {
        self.stripes
            .iter()
            .map(|s| s.start + s.resume_point(self.passes, self.block_size).0)
            .collect()
    }

    /// One line for logs and `nvsoak state show`:
    /// `pass 2 of 2, 61% into it, 80% overall (6.44 GiB of 8.00 GiB written)`.
    pub fn describe(&self) -> String {
        let (pass, frac) = self.pass_and_fraction();
        let (done, total) = (self.done_bytes(), self.total_bytes());
        let overall = if total == 0 {
            1.0
        } else {
            done as f64 / total as f64
        };
        format!(
            "pass {pass} of {}, {:.0}% into it, {:.0}% overall ({} of {} written)",
            self.passes,
            (frac * 100.0).floor(),
            (overall * 100.0).floor(),
            crate::model::fmt::fmt_bytes(done as f64),
            crate::model::fmt::fmt_bytes(total as f64)
        )
    }
}

impl TargetState {
    /// A fresh state for a target that has not run yet.
    pub fn new(name: &str, path: &str) -> Self {
        TargetState {
            name: name.to_string(),
            path: path.to_string(),
            identity: None,
            phase_index: 0,
            phase_elapsed_secs: 0.0,
            loop_count: 0,
            soak_started: None,
            totals: Totals::default(),
            soak: None,
            steady_history: Vec::new(),
            smart_at_soak_start: None,
            host_at_soak_start: None,
            drive_throttle_episodes: 0,
            drive_warning_seen: 0,
            drive_temperature_max_kelvin: 0,
            ata_at_soak_start: None,
            ocp_at_soak_start: None,
            members: Vec::new(),
            verify_seed: None,
            genmap: None,
            verify_walk: None,
            precondition: None,
            sweep: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Checkpoint {
    pub version: u32,
    /// `state::plan_hash` of the plan this checkpoint belongs to.
    pub plan_hash: String,
    /// Unix time of the save.
    pub saved_at: f64,
    pub targets: Vec<TargetState>,
}

impl Checkpoint {
    pub fn new(plan_hash: String, targets: Vec<TargetState>) -> Self {
        Checkpoint {
            version: CHECKPOINT_VERSION,
            plan_hash,
            saved_at: crate::util::unix_now(),
            targets,
        }
    }

    pub fn target(&self, name: &str) -> Option<&TargetState> {
        self.targets.iter().find(|t| t.name == name)
    }
}
