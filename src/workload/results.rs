//! Persisted results of a target's phases: what the sweep measured, the steady-state outcome
//! and the soak summary. The scheduler writes `<state.dir>/results/<target>.json` (atomically)
//! whenever a sweep point or round completes; `nvsoak report` reads these files.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TargetResults {
    /// Results file format version.
    pub version: u32,
    pub host: String,
    pub target: String,
    pub path: String,
    /// Identity of the drive behind the target, when it is an NVMe namespace.
    pub device: Option<DeviceIdentity>,
    pub sweeps: Vec<SweepResult>,
    pub steady: Vec<SteadyOutcome>,
    pub soak: Option<SoakSummary>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DeviceIdentity {
    pub controller: String,
    pub model: String,
    pub serial: String,
    pub firmware: String,
    pub capacity_bytes: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SweepResult {
    /// Profile (job) name.
    pub profile: String,
    /// Mean block size of the job in bytes (for bandwidth figures).
    pub block_size: f64,
    pub read_pct: u8,
    /// IOPS of the uncontrolled run.
    pub max_iops: f64,
    /// Unix time (seconds) the sweep started and ended.
    pub started: f64,
    pub finished: Option<f64>,
    pub points: Vec<SweepPoint>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SweepPoint {
    /// Percent of max_iops this point targeted (e.g. 50); 0 for the uncontrolled run.
    pub pct: u32,
    pub target_iops: f64,
    pub iops: f64,
    pub bytes_per_sec: f64,
    /// Latency over all ops of the point, microseconds.
    pub lat_avg_us: f64,
    pub lat_p50_us: f64,
    pub lat_p99_us: f64,
    pub lat_p999_us: f64,
    pub lat_p9999_us: f64,
    pub duration_secs: f64,
    pub errors: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SteadyOutcome {
    pub profile: String,
    pub reached: bool,
    /// 1-based round in which steady state was first reached.
    pub round: Option<u64>,
    /// Unix time it was reached.
    pub since: Option<f64>,
    /// The window's per-round IOPS when reached (or the last window).
    pub window: Vec<f64>,
    pub average: f64,
    pub range_ratio: f64,
    pub slope_excursion_ratio: f64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SoakSummary {
    pub started: f64,
    pub elapsed_secs: f64,
    pub read_bytes: u64,
    pub written_bytes: u64,
    pub read_ops: u64,
    pub write_ops: u64,
    pub errors: u64,
    pub verify_errors: u64,
    /// Drive-side figures, when the target is an NVMe namespace and health polling works.
    pub smart_written_bytes_delta: Option<u64>,
    pub observed_dwpd: Option<f64>,
    pub rated_dwpd: Option<f64>,
    pub endurance_consumed_ratio: Option<f64>,
    pub throttled_secs: Option<f64>,
    pub iops_throttled: Option<f64>,
    pub iops_unthrottled: Option<f64>,
}
