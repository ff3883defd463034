//! The config file as written: serde structs that reject unknown keys. Values whose spelling
//! varies (sizes, durations, percentages, rates) are kept as [`Scalar`] and interpreted by
//! `validate`, which names the key in every error.

use std::path::PathBuf;

use serde::Deserialize;
use serde::de::{self, Deserializer, Visitor};

/// A string, integer, float or boolean as written; validation decides what it means.
#[derive(Debug, Clone, PartialEq)]
pub enum Scalar {
    Str(String),
    Int(i64),
    Float(f64),
    Bool(bool),
}

impl std::fmt::Display for Scalar {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Scalar::Str(s) => write!(f, "\"{s}\""),
            Scalar::Int(i) => write!(f, "{i}"),
            Scalar::Float(x) => write!(f, "{x}"),
            Scalar::Bool(b) => write!(f, "{b}"),
        }
    }
}

impl<'de> Deserialize<'de> for Scalar {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Scalar;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a string or a number")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Scalar, E> {
                Ok(Scalar::Str(v.to_string()))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Scalar, E> {
                Ok(Scalar::Str(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Scalar, E> {
                Ok(Scalar::Int(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Scalar, E> {
                i64::try_from(v)
                    .map(Scalar::Int)
                    .map_err(|_| E::custom(format!("{v} is too large")))
            }
            fn visit_i128<E: de::Error>(self, v: i128) -> Result<Scalar, E> {
                i64::try_from(v)
                    .map(Scalar::Int)
                    .map_err(|_| E::custom(format!("{v} is too large")))
            }
            fn visit_u128<E: de::Error>(self, v: u128) -> Result<Scalar, E> {
                i64::try_from(v)
                    .map(Scalar::Int)
                    .map_err(|_| E::custom(format!("{v} is too large")))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Scalar, E> {
                Ok(Scalar::Float(v))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<Scalar, E> {
                Ok(Scalar::Bool(v))
            }
        }
        d.deserialize_any(V)
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawConfig {
    #[serde(default)]
    pub exporter: RawExporter,
    #[serde(default)]
    pub state: RawState,
    #[serde(default)]
    pub stats: RawStats,
    #[serde(default)]
    pub log: RawLog,
    #[serde(default)]
    pub health: RawHealth,
    /// With no `[[target]]`: `false` runs health polling only; `true` (the default) the
    /// built-in default target.
    #[serde(default)]
    pub default_target: Option<bool>,
    #[serde(default)]
    pub target: Vec<RawTarget>,
    /// Pass/fail gates for every target (`[target.gates]` overrides them per key).
    #[serde(default)]
    pub gates: Option<RawGates>,
}

/// `[gates]` and `[target.gates]`: each key a limit, or `false` to turn the gate off.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawGates {
    pub strict: Option<Scalar>,
    pub verify_errors: Option<Scalar>,
    pub io_errors: Option<Scalar>,
    pub media_errors: Option<Scalar>,
    pub error_log_entries: Option<Scalar>,
    pub critical_warning: Option<Scalar>,
    pub self_test: Option<Scalar>,
    pub max_temperature: Option<Scalar>,
    pub min_available_spare: Option<Scalar>,
    pub max_percentage_used: Option<Scalar>,
    pub accounting_tolerance: Option<Scalar>,
    pub link: Option<Scalar>,
    pub ocp_panics: Option<Scalar>,
    pub min_rated_iops: Option<Scalar>,
    pub min_sub_1ms_iops: Option<Scalar>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawExporter {
    pub listen: Option<Scalar>,
    pub web_config_file: Option<PathBuf>,
    pub max_connections: Option<Scalar>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawState {
    pub dir: Option<PathBuf>,
    pub checkpoint_interval: Option<Scalar>,
    pub max_verify_memory: Option<Scalar>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawStats {
    pub interval: Option<Scalar>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawLog {
    pub level: Option<Scalar>,
    pub progress_interval: Option<Scalar>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawHealth {
    pub enabled: Option<bool>,
    pub poll_interval: Option<Scalar>,
    pub rescan_interval: Option<Scalar>,
    #[serde(default)]
    pub include: Vec<String>,
    #[serde(default)]
    pub exclude: Vec<String>,
    pub ratings_file: Option<PathBuf>,
    #[serde(default)]
    pub device: Vec<RawDevice>,
    #[serde(default)]
    pub card: Vec<RawCard>,
    pub latency_monitor: Option<RawLatencyMonitor>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawCard {
    #[serde(rename = "match")]
    pub matcher: Option<String>,
    pub rating: Option<String>,
}

/// `[health.latency_monitor]`: the OCP Latency Monitor feature (C5h) nvsoak enables.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawLatencyMonitor {
    pub enabled: Option<bool>,
    pub thresholds: Option<Vec<Scalar>>,
    pub bucket_timer: Option<Scalar>,
    pub minimum_window: Option<Scalar>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawDevice {
    #[serde(rename = "match")]
    pub matcher: Option<String>,
    pub rated_tbw: Option<Scalar>,
    pub rated_dwpd: Option<Scalar>,
    pub warranty_years: Option<Scalar>,
    pub capacity: Option<Scalar>,
}

/// A string, or a list of strings (`allow_destroy` of a target spanning several devices).
#[derive(Debug, Clone, PartialEq)]
pub enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

impl<'de> Deserialize<'de> for OneOrMany {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = OneOrMany;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a string or a list of strings")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<OneOrMany, E> {
                Ok(OneOrMany::One(v.to_string()))
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<OneOrMany, A::Error> {
                let mut all = Vec::new();
                while let Some(s) = seq.next_element::<String>()? {
                    all.push(s);
                }
                Ok(OneOrMany::Many(all))
            }
        }
        d.deserialize_any(V)
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTarget {
    pub name: Option<String>,
    pub path: Option<PathBuf>,
    /// Several block devices, one target spanning them (instead of `path`).
    pub paths: Option<Vec<PathBuf>>,
    pub size: Option<Scalar>,
    pub region: Option<Scalar>,
    pub engine: Option<String>,
    pub direct: Option<bool>,
    pub allow_destroy: Option<OneOrMany>,
    pub force_overwrite_signatures: Option<bool>,
    pub verify: Option<String>,
    pub verify_fatal: Option<bool>,
    pub max_errors: Option<Scalar>,
    #[serde(rename = "loop")]
    pub loop_phases: Option<bool>,
    #[serde(default)]
    pub phase: Vec<RawPhase>,
    /// Per-target gates, over `[gates]`.
    #[serde(default)]
    pub gates: Option<RawGates>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawPhase {
    pub kind: Option<String>,
    // What runs.
    pub profile: Option<String>,
    pub job: Option<RawJob>,
    pub profiles: Option<Vec<String>>,
    pub rotate: Option<Scalar>,
    // Overrides of the job.
    pub iodepth: Option<Scalar>,
    pub workers: Option<Scalar>,
    pub rate: Option<Scalar>,
    // Soak.
    pub duration: Option<Scalar>,
    pub steady_round: Option<Scalar>,
    pub steady_window: Option<Scalar>,
    pub steady_criterion: Option<String>,
    // Precondition.
    pub passes: Option<Scalar>,
    pub block_size: Option<Scalar>,
    // Sweep.
    pub max_duration: Option<Scalar>,
    pub point_duration: Option<Scalar>,
    pub points: Option<Vec<Scalar>>,
    // Purge and self-test.
    pub method: Option<String>,
    pub test: Option<String>,
    pub timeout: Option<Scalar>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawJob {
    pub name: Option<String>,
    pub description: Option<String>,
    pub read: Option<Scalar>,
    pub bs: Option<Scalar>,
    pub access: Option<String>,
    pub skew: Option<String>,
    pub iodepth: Option<Scalar>,
    pub workers: Option<Scalar>,
    pub rate: Option<Scalar>,
}
