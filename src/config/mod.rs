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

pub mod describe;
mod raw;
pub mod suggest;
mod validate;

pub use validate::{block_sizes, rate, skew};

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
///
/// Environment overrides: a variable `NVSOAK_SECTION__KEY` sets `section.key` (lower-cased,
/// `__` separating levels) on top of the file; `NVSOAK_HEALTH__INCLUDE=nvme0,nvme1` sets a list.
/// Variables without `__` after the prefix (e.g. `NVSOAK_LOG`) are not config overrides and
/// are ignored. Targets (`[[target]]` arrays) cannot be set from the environment.
pub fn load(path: Option<&Path>) -> Result<Settings, ConfigError> {
    match path {
        None => Ok(builtin_default()),
        Some(p) => {
            let text = std::fs::read_to_string(p).map_err(|e| ConfigError::File {
                path: p.display().to_string(),
                reason: format!("cannot read the config file: {e}"),
            })?;
            load_str(&text, &p.display().to_string(), env_overrides())
        }
    }
}

/// Load from TOML text, with the given environment variables (name → value) as overrides.
/// `origin` names the text in file-level errors.
pub fn load_str(
    text: &str,
    origin: &str,
    env: Vec<(String, String)>,
) -> Result<Settings, ConfigError> {
    let mut env_keys: Vec<(String, String)> = Vec::new();
    let mut map = config::Map::new();
    for (k, v) in env {
        if let Some(key) = env_key(&k) {
            env_keys.push((key, k.clone()));
            map.insert(k, v);
        }
    }
    let built = config::Config::builder()
        .add_source(config::File::from_str(text, config::FileFormat::Toml))
        .add_source(
            config::Environment::with_prefix("NVSOAK")
                .prefix_separator("_")
                .separator("__")
                .try_parsing(true)
                .list_separator(",")
                .with_list_parse_key("health.include")
                .with_list_parse_key("health.exclude")
                .source(Some(map)),
        )
        .build()
        .map_err(|e| map_error(e, origin))
        .map_err(|e| annotate_env(e, &env_keys))?;
    let raw: raw::RawConfig = built
        .try_deserialize()
        .map_err(|e| map_error(e, origin))
        .map_err(|e| annotate_env(e, &env_keys))?;
    validate::settings(&raw).map_err(|e| annotate_env(e, &env_keys))
}

/// The `NVSOAK_*__*` variables of the process environment.
pub fn env_overrides() -> Vec<(String, String)> {
    std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .filter(|(k, _)| env_key(k).is_some())
        .collect()
}

/// `NVSOAK_EXPORTER__LISTEN` → `exporter.listen`; `None` for variables that are not overrides.
fn env_key(var: &str) -> Option<String> {
    let rest = var.strip_prefix("NVSOAK_")?;
    if !rest.contains("__") {
        return None;
    }
    Some(rest.to_lowercase().replace("__", "."))
}

/// Say which environment variable set a key an error is about.
fn annotate_env(e: ConfigError, env_keys: &[(String, String)]) -> ConfigError {
    match e {
        ConfigError::Invalid { key, reason } => {
            match env_keys.iter().find(|(k, _)| {
                key == *k || key.starts_with(&format!("{k}.")) || key.starts_with(&format!("{k}["))
            }) {
                Some((_, var)) => ConfigError::Invalid {
                    key,
                    reason: format!("{reason} (set by the environment variable {var})"),
                },
                None => ConfigError::Invalid { key, reason },
            }
        }
        other => other,
    }
}

/// Turn the `config` crate's errors (which carry key paths like `target[0].phase[1]`) into
/// ours: `target[0].phase[1].profle: unknown key (did you mean "profile"?)`.
fn map_error(e: config::ConfigError, origin: &str) -> ConfigError {
    use config::ConfigError as C;
    match e {
        C::FileParse { cause, .. } => ConfigError::File {
            path: origin.to_string(),
            reason: format!("not valid TOML: {}", cause.to_string().trim_end()),
        },
        C::NotFound(key) => ConfigError::invalid(fix_key(&key), "missing"),
        C::Type {
            unexpected,
            expected,
            key,
            ..
        } => ConfigError::invalid(
            key.map(|k| fix_key(&k))
                .unwrap_or_else(|| "(top level)".into()),
            polish(&format!("invalid type: {unexpected}, expected {expected}")),
        ),
        C::At { error, key, .. } => {
            let inner = match *error {
                C::Message(m) => m,
                other => other.to_string(),
            };
            message_error(key.as_deref().unwrap_or(""), &inner)
        }
        C::Message(m) => message_error("", &m),
        other => ConfigError::File {
            path: origin.to_string(),
            reason: other.to_string(),
        },
    }
}

/// The `config` crate joins an index and the next key without a dot (`target[0]phase[1]`);
/// restore it (`target[0].phase[1]`).
fn fix_key(key: &str) -> String {
    let mut out = String::with_capacity(key.len() + 4);
    let mut prev = None;
    for c in key.chars() {
        if prev == Some(']') && (c.is_alphanumeric() || c == '_') {
            out.push('.');
        }
        out.push(c);
        prev = Some(c);
    }
    out
}

/// Interpret a serde message at `key` (empty for the top level).
fn message_error(key: &str, msg: &str) -> ConfigError {
    let key = &fix_key(key);
    if let Some(rest) = msg.strip_prefix("unknown field `")
        && let Some(end) = rest.find('`')
    {
        let field = &rest[..end];
        let expected: Vec<&str> = rest[end + 1..].split('`').skip(1).step_by(2).collect();
        let full = if key.is_empty() {
            field.to_string()
        } else {
            format!("{key}.{field}")
        };
        let hint = suggest::closest(field, expected.iter().copied())
            .map(|s| format!(" (did you mean \"{s}\"?)"))
            .unwrap_or_default();
        let list = if expected.is_empty() {
            String::new()
        } else {
            format!("; known keys here: {}", expected.join(", "))
        };
        return ConfigError::invalid(full, format!("unknown key \"{field}\"{hint}{list}"));
    }
    let key = if key.is_empty() { "(top level)" } else { key };
    ConfigError::invalid(key, polish(msg))
}

/// serde's wording in TOML terms and without internal type names:
/// `invalid type: integer 5, expected struct RawJob` → `expected a table, found integer 5`.
fn polish(msg: &str) -> String {
    let words = |s: &str| {
        let mut t = s.trim().to_string();
        if let Some(i) = t.find("struct Raw") {
            t.replace_range(i.., "a table");
        }
        t.replace("a sequence", "a list")
            .replace("sequence", "a list")
            .replace("map", "a table")
            .replace("a a ", "a ")
    };
    if let Some(rest) = msg.strip_prefix("invalid type: ")
        && let Some((found, expected)) = rest.split_once(", expected ")
    {
        return format!("expected {}, found {}", words(expected), words(found));
    }
    msg.to_string()
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
