//! Validated workload types: what a job, a phase and a target are once the config has been
//! checked. Everything downstream (profiles, scheduler, workers, metrics) speaks these types;
//! only `config` builds them from raw TOML.

use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;

/// The I/O vocabulary lives below both the workload and the engines.
pub use crate::model::op::{EngineChoice, Op};

/// A weighted block-size mix, e.g. `4k:60,8k:30,64k:10`. Weights are relative.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BlockSizeMix {
    /// (block size in bytes, weight). Never empty, weights > 0, sizes multiples of 512.
    pub entries: Vec<(u32, u32)>,
}

impl BlockSizeMix {
    pub fn single(bs: u32) -> Self {
        BlockSizeMix {
            entries: vec![(bs, 1)],
        }
    }
    pub fn max(&self) -> u32 {
        self.entries.iter().map(|e| e.0).max().unwrap_or(4096)
    }
    pub fn min(&self) -> u32 {
        self.entries.iter().map(|e| e.0).min().unwrap_or(4096)
    }
    /// Weighted mean block size in bytes.
    pub fn mean(&self) -> f64 {
        let w: u64 = self.entries.iter().map(|e| e.1 as u64).sum();
        if w == 0 {
            return 0.0;
        }
        self.entries
            .iter()
            .map(|e| e.0 as f64 * e.1 as f64)
            .sum::<f64>()
            / w as f64
    }
}

impl std::fmt::Display for BlockSizeMix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.entries.len() == 1 {
            return write!(
                f,
                "{}",
                crate::model::units::format_size(self.entries[0].0 as u64)
            );
        }
        let parts: Vec<String> = self
            .entries
            .iter()
            .map(|(b, w)| format!("{}:{}", crate::model::units::format_size(*b as u64), w))
            .collect();
        write!(f, "{}", parts.join(","))
    }
}

/// How offsets are distributed over the region for random access.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Skew {
    Uniform,
    /// Zipf over the region's blocks with exponent `theta` (fio's `random_distribution=zipf:θ`).
    Zipf {
        theta: f64,
    },
    /// `access` (0..1) of the I/Os go to the first `fraction` (0..1) of the region.
    HotBand {
        fraction: f64,
        access: f64,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Access {
    Random { skew: Skew },
    Sequential,
}

/// Pacing for a job.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", content = "value", rename_all = "snake_case")]
pub enum RateLimit {
    /// I/Os per second over the whole job (all workers).
    Iops(f64),
    /// Bytes per second over the whole job.
    BytesPerSec(f64),
    /// Percentage (e.g. 50.0) of the maximum IOPS measured for this job on this target by a
    /// sweep's uncontrolled run, or by a short calibration run when none is known.
    PercentOfMax(f64),
}

/// One job: what each worker thread does.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobSpec {
    /// Profile name, or `inline` / the configured name for inline jobs.
    pub name: String,
    /// Human description, including the basis of built-in profiles.
    pub description: String,
    /// 0..=100.
    pub read_pct: u8,
    pub bs: BlockSizeMix,
    pub access: Access,
    /// Outstanding I/Os per worker.
    pub iodepth: u32,
    pub workers: u32,
    pub rate: Option<RateLimit>,
}

/// Data verification mode of a target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum VerifyMode {
    #[default]
    Off,
    Inline,
    Pass,
}

/// Steady-state criteria (SNIA PTS by default, fio's criteria optional).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SteadyConfig {
    /// Length of one round.
    pub round: Duration,
    /// Number of rounds in the window (SNIA: 5).
    pub window: usize,
    /// Max range (max-min) as a fraction of the window average (SNIA: 0.20).
    pub max_range: f64,
    /// Max excursion of the least-squares line across the window as a fraction of the average
    /// (SNIA: 0.10).
    pub max_slope_excursion: f64,
    pub criterion: SteadyCriterion,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SteadyCriterion {
    /// SNIA PTS: range and slope excursion.
    Snia,
    /// fio `ss=iops:N%`: every sample within N% of the mean. N/100 is carried in
    /// `SteadyConfig::max_range`.
    FioIops,
    /// fio `ss=iops_slope:N%`: |slope| ≤ N% of the mean per sample. N/100 is carried in
    /// `SteadyConfig::max_slope_excursion`.
    FioIopsSlope,
}

impl Default for SteadyConfig {
    fn default() -> Self {
        SteadyConfig {
            round: Duration::from_secs(60),
            window: 5,
            max_range: 0.20,
            max_slope_excursion: 0.10,
            criterion: SteadyCriterion::Snia,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum PhaseSpec {
    /// Sequential writes over the whole region, `passes` times (SNIA WIPC: 2 passes, 128 KiB).
    Precondition {
        passes: u32,
        block_size: u32,
        iodepth: u32,
        workers: u32,
    },
    /// vdbench-style iorate curve: an uncontrolled run for `max_duration`, then each of
    /// `points` (percent of the measured max) for `point_duration`.
    Sweep {
        job: JobSpec,
        max_duration: Duration,
        point_duration: Duration,
        points: Vec<u32>,
    },
    /// One job, or a rotation of jobs switching every `rotate`, for `duration` or forever.
    Soak {
        jobs: Vec<JobSpec>,
        duration: Option<Duration>,
        rotate: Option<Duration>,
        steady: SteadyConfig,
    },
    /// Erase the namespace before testing (SNIA PTS purge): Format NVM with a secure erase or a
    /// Sanitize, waiting at most `timeout`.
    Purge {
        method: crate::nvme::steps::PurgeMethod,
        timeout: Duration,
    },
    /// A device self-test (short or extended), waiting at most `timeout` when set, else the
    /// controller's own estimate plus a margin.
    SelfTest {
        test: crate::nvme::steps::SelfTestKind,
        timeout: Option<Duration>,
    },
}

impl PhaseSpec {
    pub fn kind(&self) -> &'static str {
        match self {
            PhaseSpec::Precondition { .. } => "precondition",
            PhaseSpec::Sweep { .. } => "sweep",
            PhaseSpec::Soak { .. } => "soak",
            PhaseSpec::Purge { .. } => "purge",
            PhaseSpec::SelfTest { .. } => "self-test",
        }
    }
}

impl TargetSpec {
    /// Whether the target spans several block devices (`paths`).
    pub fn is_spanning(&self) -> bool {
        self.members.len() > 1
    }

    /// The block devices or file the target writes: its members, or its one path.
    pub fn member_paths(&self) -> Vec<&std::path::Path> {
        if self.members.is_empty() {
            vec![self.path.as_path()]
        } else {
            self.members.iter().map(PathBuf::as_path).collect()
        }
    }
}

/// The part of the target that is exercised, as a fraction 0..=1 of its size, starting at 0.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Region(pub f64);

impl Region {
    /// The bytes exercised of a target of `size` bytes: this fraction of it, in whole MiB
    /// (whole 4 KiB units when smaller); 0 when that is nothing. The scheduler's region and
    /// `check-config`'s verification figures both come from here.
    pub fn len_of(self, size: u64) -> u64 {
        let align: u64 = 1 << 20;
        let region_len = ((size as f64 * self.0) as u64).min(size);
        if region_len >= align {
            region_len - region_len % align
        } else {
            region_len - region_len % 4096
        }
    }
}

/// A target of the config that is not running because starting it was refused (at a SIGHUP
/// reload): it stays in `/metrics` as down, with the reason, until a reload starts or removes it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RefusedTarget {
    pub name: String,
    pub path: String,
    pub reason: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TargetSpec {
    pub name: String,
    pub path: PathBuf,
    /// Size for file targets (created and preallocated); `None` for block devices.
    pub size: Option<u64>,
    pub region: Region,
    pub engine: EngineChoice,
    /// Serial, WWN, or (for devices with neither) exact device path that may be overwritten.
    pub allow_destroy: Option<String>,
    /// A target that spans several block devices (`paths`): every member, in order; `path` is
    /// the first. Empty for a target with one `path`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub members: Vec<PathBuf>,
    /// A spanning target's `allow_destroy` names: every member must be named by one of them,
    /// and every name must name a member. Empty otherwise (`allow_destroy` is used).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow_destroy_list: Vec<String>,
    pub force_overwrite_signatures: bool,
    /// Open with O_DIRECT (default true).
    pub direct: bool,
    pub verify: VerifyMode,
    pub verify_fatal: bool,
    /// Stop the target once this many I/O errors were counted.
    pub max_errors: Option<u64>,
    pub phases: Vec<PhaseSpec>,
    /// Run the phase list again from the start when it ends.
    pub loop_phases: bool,
    /// Pass/fail gates of the verdict. Not part of the plan hash (changing a gate does not
    /// start the plan over; a reload restarts the target, which resumes from its checkpoint).
    #[serde(skip)]
    pub gates: crate::model::verdict::GateSettings,
}
