//! Health poller, its collectors (one per drive protocol) and the endurance and thermal
//! derivations.
//!
//! The poller runs on tokio, does its ioctls in `spawn_blocking`, and publishes an immutable
//! snapshot that each scrape reads. The workload side tells it what nvsoak itself did to each
//! device through [`HostIoSource`], for the accounting check and throttling cost.

use std::path::PathBuf;

/// What nvsoak's own workload did to one block device, cumulative since the daemon started.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HostIo {
    /// The target's block device path as configured (e.g. `/dev/nvme0n1`).
    pub path: PathBuf,
    pub read_bytes: u64,
    pub written_bytes: u64,
    pub read_ops: u64,
    pub write_ops: u64,
    /// IOPS (reads + writes) over the last stats interval.
    pub iops: f64,
}

/// Implemented by the workload scheduler; called by the poller right after each device's SMART
/// read, so both figures describe the same instant.
pub trait HostIoSource: Send + Sync {
    fn host_io(&self) -> Vec<HostIo>;
}

/// A fixed list (tests, and callers that already hold the figures).
impl HostIoSource for Vec<HostIo> {
    fn host_io(&self) -> Vec<HostIo> {
        self.clone()
    }
}

/// A source with no workload (used by `nvsoak health` and tests).
pub struct NoHostIo;

impl HostIoSource for NoHostIo {
    fn host_io(&self) -> Vec<HostIo> {
        Vec::new()
    }
}

pub mod collect;
pub mod derive;
pub mod endurance;
mod inflight;
pub mod known;
pub mod poller;

pub use collect::nvme::{DeviceHealth, SmartSample, poll_once};
pub use poller::{HealthHandle, HealthSnapshot, Poller, spawn, spawn_prepared, spawn_with};
