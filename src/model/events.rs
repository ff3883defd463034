//! Drive events and the drive's own latency-outlier counts: what the health poller records
//! from the OCP pages and the telemetry header, and the results file keeps.

use crate::nvme::log::ocp_latency::PerOp;

/// The `kind` label values of drive events.
pub mod kind {
    /// C1h's panic ID or panic count changed.
    pub const OCP_PANIC: &str = "ocp_panic";
    /// 08h's controller-initiated data generation number changed.
    pub const TELEMETRY_GENERATION: &str = "telemetry_generation";
}

/// Something the drive reported changing during the run.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct DriveEvent {
    /// Unix time of the poll that saw it.
    pub time: f64,
    /// [`kind`]
    pub kind: String,
    /// What changed, from and to ("panic ID 0x0 -> 0x1f, panic count 0 -> 1").
    pub detail: String,
}

/// The static bucket counters of a C3h page, bucket 0..3, each read, write, deallocate.
pub type LatencyCounts = [PerOp<u32>; 4];
