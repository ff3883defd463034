//! Configuration: raw serde structs (`raw`), then validation into the finished [`Settings`].
//! Every error names the key path (`target[0].phase[1].profile`) and the reason.
//!
//! Architecture Invariant: nothing outside this module sees raw config; downstream code gets
//! validated types only.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;
use thiserror::Error;

use crate::workload::spec::TargetSpec;

/// A config error, naming the key and the reason.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum ConfigError {
    #[error("{key}: {reason}")]
    Invalid { key: String, reason: String },
    #[error("{path}: {reason}")]
    File { path: String, reason: String },
}

impl ConfigError {
    pub fn invalid(key: impl Into<String>, reason: impl Into<String>) -> Self {
        ConfigError::Invalid {
            key: key.into(),
            reason: reason.into(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Settings {
    pub exporter: ExporterSettings,
    pub state: StateSettings,
    pub stats: StatsSettings,
    pub health: HealthSettings,
    pub log: LogSettings,
    pub targets: Vec<TargetSpec>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ExporterSettings {
    pub listen: SocketAddr,
    /// exporter-toolkit web config (TLS, basic auth).
    pub web_config_file: Option<PathBuf>,
    /// Upper bound on concurrent HTTP connections.
    pub max_connections: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StateSettings {
    pub dir: PathBuf,
    pub checkpoint_interval: Duration,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StatsSettings {
    /// How often workers publish snapshots (default 1 s).
    pub interval: Duration,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HealthSettings {
    pub enabled: bool,
    pub poll_interval: Duration,
    pub rescan_interval: Duration,
    /// Controller names (`nvme0`), serials, or `re:REGEX`; empty = all.
    pub include: Vec<String>,
    pub exclude: Vec<String>,
    /// Drive ratings table; default `config/drives.toml` next to the binary's config, or the
    /// built-in copy.
    pub ratings_file: Option<PathBuf>,
    /// Per-device rated endurance from config, overriding the ratings table.
    pub devices: Vec<DeviceRatingOverride>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeviceRatingOverride {
    /// Serial, controller name, or model (exact), or `re:REGEX` against the model.
    pub matcher: String,
    pub rated_tbw_bytes: Option<u64>,
    pub rated_dwpd: Option<f64>,
    pub warranty_years: Option<f64>,
    pub capacity_bytes: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LogSettings {
    /// tracing filter, e.g. `info` or `nvsoak=debug`; `RUST_LOG` wins when set.
    pub level: String,
}

pub const DEFAULT_LISTEN: &str = "127.0.0.1:9757";

/// Default state directory: `/var/lib/nvsoak` as root, `./nvsoak-state` otherwise.
pub fn default_state_dir() -> PathBuf {
    if nix::unistd::geteuid().is_root() {
        PathBuf::from("/var/lib/nvsoak")
    } else {
        PathBuf::from("./nvsoak-state")
    }
}

/// Load and validate a config file (TOML), with `NVSOAK_` environment overrides
/// (`NVSOAK_EXPORTER__LISTEN=...`). `None` gives the built-in default.
pub fn load(path: Option<&Path>) -> Result<Settings, ConfigError> {
    match path {
        None => Ok(builtin_default()),
        Some(p) => Err(ConfigError::File {
            path: p.display().to_string(),
            reason: "config files are not supported yet".into(),
        }),
    }
}

/// The built-in default: a soak of `4k-random-read` on a 1 GiB file under the state directory.
pub fn builtin_default() -> Settings {
    use crate::workload::spec::*;
    let dir = default_state_dir();
    let job = JobSpec {
        name: "4k-random-read".into(),
        description: "4K random read, QD128".into(),
        read_pct: 100,
        bs: BlockSizeMix::single(4096),
        access: Access::Random {
            skew: Skew::Uniform,
        },
        iodepth: 128,
        workers: 1,
        rate: None,
    };
    Settings {
        exporter: ExporterSettings {
            listen: DEFAULT_LISTEN.parse().expect("constant address"),
            web_config_file: None,
            max_connections: 64,
        },
        state: StateSettings {
            dir: dir.clone(),
            checkpoint_interval: Duration::from_secs(60),
        },
        stats: StatsSettings {
            interval: Duration::from_secs(1),
        },
        health: HealthSettings {
            enabled: true,
            poll_interval: Duration::from_secs(30),
            rescan_interval: Duration::from_secs(60),
            include: vec![],
            exclude: vec![],
            ratings_file: None,
            devices: vec![],
        },
        log: LogSettings {
            level: "info".into(),
        },
        targets: vec![TargetSpec {
            name: "default".into(),
            path: dir.join("default-target.dat"),
            size: Some(1 << 30),
            region: Region(1.0),
            engine: EngineChoice::Auto,
            allow_destroy: None,
            force_overwrite_signatures: false,
            direct: true,
            verify: VerifyMode::Off,
            verify_fatal: false,
            max_errors: None,
            phases: vec![PhaseSpec::Soak {
                jobs: vec![job],
                duration: None,
                rotate: None,
                steady: SteadyConfig::default(),
            }],
            loop_phases: false,
        }],
    }
}
