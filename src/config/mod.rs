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

use crate::model::spec::TargetSpec;

mod de;
pub mod describe;
pub mod keys;
mod raw;
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
    /// `state.max_verify_memory`: the most memory the verification state of all verified
    /// targets may take together (default half of the host's memory).
    pub max_verify_memory: crate::model::verify_cost::VerifyBudget,
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
    /// Card ratings (`[[health.card]]`): which cards a ratings-table series rates.
    pub cards: Vec<CardRating>,
    /// `[health.latency_monitor]` when enabled: the OCP Latency Monitor settings nvsoak sets on
    /// OCP drives (`config/validate/latency_monitor.rs`); `None` (the default) leaves drives as
    /// they are.
    pub latency_monitor: Option<crate::nvme::log::ocp_latency::LatencyMonitorConfig>,
}

/// One `[[health.card]]`: a card (switch upstream port address, `slot:NAME`, or a controller
/// name or serial on the card) and the ratings-table series that rates it as a whole.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CardRating {
    pub matcher: String,
    /// Looked up in the ratings table like a model string (`Liqid Element AIC`).
    pub rating: String,
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
    /// `log.progress_interval`: how often a running soak phase logs a progress line (IOPS,
    /// bandwidth, latency, errors, temperature, time elapsed and left). Default 5 minutes.
    pub progress_interval: Duration,
}

/// `log.progress_interval` when the config sets none.
pub const DEFAULT_PROGRESS_INTERVAL: Duration = Duration::from_secs(300);
/// The shortest and longest `log.progress_interval` accepted.
pub const PROGRESS_INTERVAL_RANGE: (Duration, Duration) =
    (Duration::from_secs(1), Duration::from_secs(7 * 86400));

/// Every `engine` a target may name, in the order the docs list them: the names of
/// [`EngineChoice::ALL`](crate::model::op::EngineChoice::ALL), which the parser accepts.
pub const ENGINES: [&str; crate::model::op::EngineChoice::ALL.len()] = {
    let all = crate::model::op::EngineChoice::ALL;
    let mut names = [""; crate::model::op::EngineChoice::ALL.len()];
    let mut i = 0;
    while i < all.len() {
        names[i] = all[i].as_str();
        i += 1;
    }
    names
};

pub const DEFAULT_LISTEN: &str = "127.0.0.1:9757";

/// Default `state.dir` of a config file that sets none: `/var/lib/nvsoak` as root (the
/// packaged unit's `StateDirectory=`, with `--config /etc/nvsoak/nvsoak.toml`), `./nvsoak-state`
/// otherwise.
pub fn default_state_dir() -> PathBuf {
    if nix::unistd::geteuid().is_root() {
        PathBuf::from("/var/lib/nvsoak")
    } else {
        PathBuf::from("./nvsoak-state")
    }
}

/// The state directory of the built-in default (`nvsoak run` without `--config`), root or not:
/// `nvsoak-state` in the current directory, as an absolute path, so the person who ran it
/// from a checkout sees it where they stand (and `run` prints it); never `/var/lib`.
pub fn builtin_state_dir() -> PathBuf {
    std::env::current_dir()
        .map(|d| d.join("nvsoak-state"))
        .unwrap_or_else(|_| PathBuf::from("./nvsoak-state"))
}

/// The state directory `nvsoak report` and `nvsoak state` read when given neither `--state` nor
/// `--config`: `NVSOAK_STATE__DIR` when set; else the built-in default's (`./nvsoak-state`)
/// when it exists, as after `nvsoak run` from here; else [`default_state_dir`] (the
/// service's).
pub fn state_dir_to_read() -> PathBuf {
    state_dir_to_read_from(&env_overrides(), &builtin_state_dir())
}

fn state_dir_to_read_from(env: &[(String, String)], here: &Path) -> PathBuf {
    if let Some((_, v)) = env
        .iter()
        .find(|(k, v)| env_key(k).as_deref() == Some("state.dir") && !v.is_empty())
    {
        return PathBuf::from(v);
    }
    if here.is_dir() {
        return here.to_path_buf();
    }
    default_state_dir()
}

/// Load and validate a config file (TOML), with `NVSOAK_` environment overrides
/// (`NVSOAK_EXPORTER__LISTEN=...`). `None` gives the built-in default ([`builtin_default`]),
/// with the same overrides: `NVSOAK_STATE__DIR=/tmp/x nvsoak run` soaks `/tmp/x`.
///
/// Environment overrides: a variable `NVSOAK_SECTION__KEY` sets `section.key` (lower-cased,
/// `__` separating levels) on top of the file; `NVSOAK_HEALTH__INCLUDE=nvme0,nvme1` sets a list.
/// Variables without `__` after the prefix (e.g. `NVSOAK_LOG`) are not config overrides and
/// are ignored. Targets (`[[target]]` arrays) cannot be set from the environment.
pub fn load(path: Option<&Path>) -> Result<Settings, ConfigError> {
    match path {
        None => load_builtin(env_overrides()),
        Some(p) => {
            let text = crate::util::bounded::read_to_string(p, crate::util::bounded::CONFIG_LIMIT)
                .map_err(|e| ConfigError::File {
                    path: p.display().to_string(),
                    reason: format!("cannot read the config file: {e}"),
                })?;
            load_str(&text, &p.display().to_string(), env_overrides())
        }
    }
}

/// The built-in default with the given environment overrides: an empty config (which runs the
/// default target) whose `state.dir` defaults to [`builtin_state_dir`].
pub fn load_builtin(env: Vec<(String, String)>) -> Result<Settings, ConfigError> {
    load_text("", "the built-in default", env, &builtin_state_dir())
}

/// Load from TOML text, with the given environment variables (name → value) as overrides.
/// `origin` names the text in file-level errors.
pub fn load_str(
    text: &str,
    origin: &str,
    env: Vec<(String, String)>,
) -> Result<Settings, ConfigError> {
    load_text(text, origin, env, &default_state_dir())
}

/// [`load_str`] with the `state.dir` to use when neither the text nor the environment sets it.
fn load_text(
    text: &str,
    origin: &str,
    env: Vec<(String, String)>,
    default_dir: &Path,
) -> Result<Settings, ConfigError> {
    let mut env_keys: Vec<(String, String)> = Vec::new();
    let mut map = config::Map::new();
    for (k, v) in env {
        if let Some(key) = env_key(&k) {
            env_keys.push((key, k.clone()));
            map.insert(k, v);
        }
    }
    if let Some((_, var)) = env_keys
        .iter()
        .find(|(k, _)| k == "target" || k.starts_with("target."))
    {
        return Err(ConfigError::invalid(
            "target",
            format!(
                "targets cannot be set from the environment; unset the environment variable {var}"
            ),
        ));
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
    // The merged tree as plain data, then our own deserializer over it: its errors carry the
    // failing key's path and what went wrong as values (config/de.rs).
    let merged: de::Value = built.try_deserialize().map_err(|e| map_error(e, origin))?;
    let raw: raw::RawConfig = de::from_value(&merged)
        .map_err(|(path, e)| de_error(&path, e))
        .map_err(|e| annotate_env(e, &env_keys))?;
    validate::settings(&raw, default_dir).map_err(|e| annotate_env(e, &env_keys))
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
            // The error is about the variable's key, something below it, or a table above it
            // (`NVSOAK_X__Y` gives an unknown key `x`).
            match env_keys.iter().find(|(k, _)| {
                key == *k
                    || key.starts_with(&format!("{k}."))
                    || key.starts_with(&format!("{k}["))
                    || k.starts_with(&format!("{key}."))
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

/// The `config` crate's errors while reading and merging the file and the environment (the
/// keys' values are judged later, by [`de_error`] and `validate`).
fn map_error(e: config::ConfigError, origin: &str) -> ConfigError {
    match e {
        config::ConfigError::FileParse { cause, .. } => ConfigError::File {
            path: origin.to_string(),
            reason: format!("not valid TOML: {}", cause.to_string().trim_end()),
        },
        other => ConfigError::File {
            path: origin.to_string(),
            reason: other.to_string(),
        },
    }
}

/// A deserializer error at `path` as a config error naming the key:
/// `target[0].phase[1].profle: unknown key "profle" (did you mean "profile"?); known keys here: …`.
fn de_error(path: &str, e: de::DeError) -> ConfigError {
    match e {
        de::DeError::UnknownField { field, expected } => {
            let hint = crate::util::suggest::closest(&field, expected.iter().copied())
                .map(|s| format!(" (did you mean \"{s}\"?)"))
                .unwrap_or_default();
            let list = if expected.is_empty() {
                String::new()
            } else {
                format!("; known keys here: {}", expected.join(", "))
            };
            ConfigError::invalid(path, format!("unknown key \"{field}\"{hint}{list}"))
        }
        other => {
            let key = if path.is_empty() { "(top level)" } else { path };
            ConfigError::invalid(key, other.to_string())
        }
    }
}

/// The built-in default: a soak of `4k-random-read` on a 1 GiB file under the state directory
/// ([`builtin_state_dir`]), without environment overrides ([`load`] with `None` applies them).
pub fn builtin_default() -> Settings {
    builtin_default_in(&builtin_state_dir())
}

/// [`builtin_default`] with its state directory (and so its target) under `dir`.
pub fn builtin_default_in(dir: &Path) -> Settings {
    use crate::model::spec::*;
    let dir = dir.to_path_buf();
    let job = crate::model::profiles::lookup("4k-random-read").unwrap_or_else(|| JobSpec {
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
    });
    Settings {
        exporter: ExporterSettings {
            listen: DEFAULT_LISTEN.parse().expect("constant address"),
            web_config_file: None,
            max_connections: 64,
        },
        state: StateSettings {
            dir: dir.clone(),
            checkpoint_interval: Duration::from_secs(60),
            max_verify_memory: Default::default(),
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
            cards: vec![],
            latency_monitor: None,
        },
        log: LogSettings {
            level: "info".into(),
            progress_interval: DEFAULT_PROGRESS_INTERVAL,
        },
        targets: vec![TargetSpec {
            name: "default".into(),
            path: dir.join("default-target.dat"),
            size: Some(1 << 30),
            region: Region(1.0),
            engine: EngineChoice::Auto,
            allow_destroy: None,
            members: Vec::new(),
            allow_destroy_list: Vec::new(),
            force_overwrite_signatures: false,
            direct: true,
            verify: VerifyMode::Off,
            verify_fatal: false,
            max_errors: None,
            // Write the region once before reading it: random reads of a preallocated file
            // that was never written come back from unwritten extents without device I/O, and
            // would measure the filesystem, not the drive.
            phases: vec![
                PhaseSpec::Precondition {
                    passes: 1,
                    block_size: 128 << 10,
                    iodepth: 32,
                    workers: 1,
                },
                PhaseSpec::Soak {
                    jobs: vec![job],
                    duration: None,
                    rotate: None,
                    steady: SteadyConfig::default(),
                },
            ],
            loop_phases: false,
            gates: Default::default(),
        }],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::spec::*;

    fn load_toml(t: &str) -> Result<Settings, ConfigError> {
        load_str(t, "test.toml", vec![])
    }

    /// A boolean key takes only `true` or `false`: a number, a `nan` or a word that reads as
    /// yes is refused naming the key (none of them may switch off a safety check).
    #[test]
    fn booleans_are_strict() {
        for v in [
            "nan", "inf", "0.5", "-1", "1", "0", "\"1\"", "\"yes\"", "\"true\"",
        ] {
            let t = format!(
                "[[target]]\nname = \"a\"\npath = \"/tmp/nvsoak-never-created\"\nsize = \"1M\"\n\
                 force_overwrite_signatures = {v}\n"
            );
            let e = load_toml(&t).expect_err(v).to_string();
            assert!(
                e.starts_with("target[0].force_overwrite_signatures: expected a boolean, found"),
                "{v}: {e}"
            );
        }
        for (v, env) in [
            ("maybe", "NVSOAK_HEALTH__ENABLED"),
            ("1.5", "NVSOAK_HEALTH__ENABLED"),
        ] {
            let e = load_str("", "test.toml", vec![(env.to_string(), v.to_string())])
                .expect_err(v)
                .to_string();
            assert!(
                e.starts_with("health.enabled: expected a boolean") && e.contains(env),
                "{v}: {e}"
            );
        }
    }

    /// The full demo (config/nvsoak.toml before the installed file became health-only).
    const FULL: &str = include_str!("../../config/examples/demo.toml");
    const INSTALLED: &str = include_str!("../../config/nvsoak.toml");

    #[test]
    fn installed_config_is_health_only_with_the_defaults() {
        let s = load_toml(INSTALLED).expect("config/nvsoak.toml is valid");
        let d = builtin_default();
        assert!(s.targets.is_empty(), "{:?}", s.targets);
        assert!(s.health.devices.is_empty(), "{:?}", s.health.devices);
        assert!(s.health.enabled);
        assert_eq!(s.exporter.listen, d.exporter.listen);
        assert_eq!(s.health.poll_interval, d.health.poll_interval);
        assert_eq!(s.stats.interval, d.stats.interval);
        assert_eq!(s.state.checkpoint_interval, d.state.checkpoint_interval);
    }

    #[test]
    fn shipped_reference_resolves_to_typed_values() {
        let s = load_toml(FULL).expect("config/examples/demo.toml is valid");
        assert_eq!(s.exporter.listen, DEFAULT_LISTEN.parse().unwrap());
        assert_eq!(
            s.health.devices[0].rated_tbw_bytes,
            Some(17_520_000_000_000_000)
        );
        assert_eq!(s.health.devices[1].rated_dwpd, Some(3.0));
        assert_eq!(s.health.devices[1].warranty_years, Some(5.0));
        let t = &s.targets[0];
        assert_eq!(t.size, Some(1 << 30));
        assert_eq!(t.engine, EngineChoice::Auto);
        assert_eq!(t.phases.len(), 4);
        assert_eq!(
            t.phases[0],
            PhaseSpec::Precondition {
                passes: 2,
                block_size: 128 << 10,
                iodepth: 32,
                workers: 1
            }
        );
        match &t.phases[1] {
            PhaseSpec::Sweep { job, points, .. } => {
                assert_eq!(job.name, "4k-random-read");
                assert_eq!(points, &vec![10, 50, 70, 80, 90, 100, 110, 120]);
            }
            p => panic!("phase 1 is {p:?}"),
        }
        match &t.phases[3] {
            PhaseSpec::Soak { jobs, duration, .. } => {
                let j = &jobs[0];
                assert_eq!(j.name, "oltp-mix");
                assert_eq!(j.read_pct, 70);
                assert_eq!(j.bs.entries, vec![(4096, 60), (8192, 30), (65536, 10)]);
                assert_eq!(
                    j.access,
                    Access::Random {
                        skew: Skew::Zipf { theta: 1.2 }
                    }
                );
                assert_eq!((j.iodepth, j.workers), (32, 2));
                assert_eq!(j.rate, Some(RateLimit::Iops(5000.0)));
                assert_eq!(*duration, None);
            }
            p => panic!("phase 3 is {p:?}"),
        }
    }

    fn soak_with(extra: &str) -> PhaseSpec {
        let t = format!(
            "[[target]]\nname = \"t\"\npath = \"/dev/shm/nvsoak-unit-t.dat\"\nsize = \"1M\"\n\
             [[target.phase]]\nkind = \"soak\"\nprofile = \"sql\"\n{extra}\n"
        );
        load_toml(&t).expect("valid").targets[0].phases[0].clone()
    }

    #[test]
    fn steady_criteria_map_onto_the_config() {
        let PhaseSpec::Soak { steady, .. } = soak_with("steady_criterion = \"iops:15%\"") else {
            unreachable!()
        };
        assert_eq!(steady.criterion, SteadyCriterion::FioIops);
        assert!((steady.max_range - 0.15).abs() < 1e-12);
        let PhaseSpec::Soak { steady, .. } = soak_with(
            "steady_criterion = \"iops_slope:5%\"\nsteady_round = \"10s\"\nsteady_window = 8",
        ) else {
            unreachable!()
        };
        assert_eq!(steady.criterion, SteadyCriterion::FioIopsSlope);
        assert!((steady.max_slope_excursion - 0.05).abs() < 1e-12);
        assert_eq!(steady.round, Duration::from_secs(10));
        assert_eq!(steady.window, 8);
        let PhaseSpec::Soak { steady, .. } = soak_with("") else {
            unreachable!()
        };
        assert_eq!(steady, SteadyConfig::default());
    }

    #[test]
    fn overrides_and_rates() {
        let PhaseSpec::Soak { jobs, .. } =
            soak_with("iodepth = 4\nworkers = 3\nrate = \"200e6/s\"")
        else {
            unreachable!()
        };
        let base = crate::model::profiles::lookup("sql").unwrap();
        assert_eq!((jobs[0].iodepth, jobs[0].workers), (4, 3));
        assert_eq!(jobs[0].rate, Some(RateLimit::BytesPerSec(200e6)));
        assert_eq!(jobs[0].bs, base.bs);
        assert_eq!(jobs[0].name, "sql");
        let r = |s: &str| rate("k", &raw::Scalar::Str(s.into()));
        assert_eq!(r("50k iops"), Ok(RateLimit::Iops(50_000.0)));
        assert_eq!(r("75%"), Ok(RateLimit::PercentOfMax(75.0)));
        assert_eq!(r("1GiB/s"), Ok(RateLimit::BytesPerSec((1u64 << 30) as f64)));
        assert_eq!(
            r("200M/s"),
            Ok(RateLimit::BytesPerSec((200u64 << 20) as f64))
        );
        // MB is 1024² to fio and 10⁶ to a datasheet: refused in a rate as in every size, the fix
        // spelled as a rate.
        assert_eq!(
            r("200MB/s").unwrap_err().to_string(),
            "k: \"200MB/s\" is ambiguous: fio reads MB as MiB, drive datasheets as decimal; write \
             \"200MiB/s\" for 209715200 bytes/s (binary, as fio reads it) or \"200e6/s\" for \
             200000000 bytes/s (decimal, as a datasheet reads it)"
        );
        assert!(r("-5iops").is_err());
        assert_eq!(
            skew("k", "hotband:10%:90%"),
            Ok(Skew::HotBand {
                fraction: 0.1,
                access: 0.9
            })
        );
    }

    #[test]
    fn env_overrides_apply_and_are_named() {
        let env = vec![
            (
                "NVSOAK_EXPORTER__LISTEN".to_string(),
                "127.0.0.1:1234".to_string(),
            ),
            ("NVSOAK_HEALTH__ENABLED".to_string(), "false".to_string()),
            (
                "NVSOAK_STATE__CHECKPOINT_INTERVAL".to_string(),
                "5s".to_string(),
            ),
            ("NVSOAK_UNRELATED".to_string(), "x".to_string()),
        ];
        let s = load_str("", "t", env).unwrap();
        assert_eq!(s.exporter.listen, "127.0.0.1:1234".parse().unwrap());
        assert!(!s.health.enabled);
        assert_eq!(s.state.checkpoint_interval, Duration::from_secs(5));
        let e = load_str(
            "",
            "t",
            vec![("NVSOAK_STATS__INTERVAL".into(), "fast".into())],
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "stats.interval: \"fast\" is not a valid duration (expected e.g. 30s, 5m, 2h) \
             (set by the environment variable NVSOAK_STATS__INTERVAL)"
        );
        assert!(e.to_string().contains("NVSOAK_STATS__INTERVAL"));
        // An unknown section, and targets, name their variable too.
        let e = load_str("", "t", vec![("NVSOAK_X__Y".into(), "1".into())]).unwrap_err();
        assert!(
            e.to_string().starts_with("x: unknown key \"x\"")
                && e.to_string().contains("NVSOAK_X__Y"),
            "{e}"
        );
        for var in ["NVSOAK_TARGET__PATH", "NVSOAK_TARGET__0__PATH"] {
            let e = load_str("", "t", vec![(var.into(), "/x".into())]).unwrap_err();
            assert_eq!(
                e.to_string(),
                format!(
                    "target: targets cannot be set from the environment; unset the \
                     environment variable {var}"
                )
            );
        }
    }

    // Every key that holds a size, a rate or a duration: a config in which `{v}` is its value,
    // and the key its error names. Every key of the config that takes a string or a number is
    // in one of `size_keys`, `rate_keys`, `duration_keys` or `OTHER_SCALAR_KEYS`, so a new key
    // has to say what it holds, and gets the tests below.
    const TARGET: &str = "[[target]]\nname = \"t\"\npath = \"/dev/shm/nvsoak-unit-units.dat\"\n";
    const SOAK: &str = "[[target.phase]]\nkind = \"soak\"\nprofile = \"sql\"\n";

    /// (key in `keys::list`, the config with `{v}` for the value, the key its error names).
    fn size_keys() -> Vec<(&'static str, String, &'static str)> {
        vec![
            (
                "target[].size",
                format!("{TARGET}size = {{v}}\n{SOAK}"),
                "target[0].size",
            ),
            (
                "target[].phase[].block_size",
                format!(
                    "{TARGET}size = \"1M\"\n[[target.phase]]\nkind = \"precondition\"\n\
                     block_size = {{v}}\n{SOAK}"
                ),
                "target[0].phase[0].block_size",
            ),
            (
                "target[].phase[].job.bs",
                format!(
                    "{TARGET}size = \"1M\"\n[[target.phase]]\nkind = \"soak\"\n\
                     job = {{ read = 100, bs = {{v}} }}\n"
                ),
                "target[0].phase[0].job.bs",
            ),
            (
                "state.max_verify_memory",
                "[state]\nmax_verify_memory = {v}\n".to_string(),
                "state.max_verify_memory",
            ),
            (
                "health.device[].rated_tbw",
                "[[health.device]]\nmatch = \"S1\"\nrated_tbw = {v}\n".to_string(),
                "health.device[0].rated_tbw",
            ),
            (
                "health.device[].capacity",
                "[[health.device]]\nmatch = \"S1\"\nrated_dwpd = 1\nwarranty_years = 5\n\
                 capacity = {v}\n"
                    .to_string(),
                "health.device[0].capacity",
            ),
        ]
    }

    /// Rates are bytes per second: the same units, `/s` after them.
    fn rate_keys() -> Vec<(&'static str, String, &'static str)> {
        vec![
            (
                "target[].phase[].rate",
                format!("{TARGET}size = \"1M\"\n{SOAK}rate = {{v}}\n"),
                "target[0].phase[0].rate",
            ),
            (
                "target[].phase[].job.rate",
                format!(
                    "{TARGET}size = \"1M\"\n[[target.phase]]\nkind = \"soak\"\n\
                     job = {{ read = 100, bs = \"4k\", rate = {{v}} }}\n"
                ),
                "target[0].phase[0].job.rate",
            ),
        ]
    }

    fn duration_keys() -> Vec<(&'static str, String, &'static str)> {
        let t = format!("{TARGET}size = \"1M\"\n");
        let lm = "[health.latency_monitor]\nenabled = true\n";
        vec![
            (
                "state.checkpoint_interval",
                "[state]\ncheckpoint_interval = {v}\n".to_string(),
                "state.checkpoint_interval",
            ),
            (
                "stats.interval",
                "[stats]\ninterval = {v}\n".to_string(),
                "stats.interval",
            ),
            (
                "log.progress_interval",
                "[log]\nprogress_interval = {v}\n".to_string(),
                "log.progress_interval",
            ),
            (
                "health.poll_interval",
                "[health]\npoll_interval = {v}\n".to_string(),
                "health.poll_interval",
            ),
            (
                "health.rescan_interval",
                "[health]\nrescan_interval = {v}\n".to_string(),
                "health.rescan_interval",
            ),
            (
                "health.latency_monitor.thresholds",
                format!("{lm}thresholds = [{{v}}, \"95ms\", \"150ms\", \"230ms\"]\n"),
                "health.latency_monitor.thresholds[0]",
            ),
            (
                "health.latency_monitor.bucket_timer",
                format!("{lm}bucket_timer = {{v}}\n"),
                "health.latency_monitor.bucket_timer",
            ),
            (
                "health.latency_monitor.minimum_window",
                format!("{lm}minimum_window = {{v}}\n"),
                "health.latency_monitor.minimum_window",
            ),
            (
                "target[].phase[].duration",
                format!("{t}{SOAK}duration = {{v}}\n"),
                "target[0].phase[0].duration",
            ),
            (
                "target[].phase[].rotate",
                format!(
                    "{t}[[target.phase]]\nkind = \"soak\"\nprofiles = [\"sql\", \"oracle\"]\n\
                     rotate = {{v}}\n"
                ),
                "target[0].phase[0].rotate",
            ),
            (
                "target[].phase[].steady_round",
                format!("{t}{SOAK}steady_round = {{v}}\n"),
                "target[0].phase[0].steady_round",
            ),
            (
                "target[].phase[].max_duration",
                format!(
                    "{t}[[target.phase]]\nkind = \"sweep\"\nprofile = \"sql\"\nmax_duration = {{v}}\n"
                ),
                "target[0].phase[0].max_duration",
            ),
            (
                "target[].phase[].point_duration",
                format!(
                    "{t}[[target.phase]]\nkind = \"sweep\"\nprofile = \"sql\"\n\
                     point_duration = {{v}}\n"
                ),
                "target[0].phase[0].point_duration",
            ),
            (
                "target[].phase[].timeout",
                format!("{t}[[target.phase]]\nkind = \"self-test\"\ntimeout = {{v}}\n{SOAK}"),
                "target[0].phase[0].timeout",
            ),
        ]
    }

    /// The keys that take a string or a number and hold neither a size nor a duration.
    const OTHER_SCALAR_KEYS: &[&str] = &[
        "exporter.listen",
        "exporter.max_connections",
        "log.level",
        "health.include",
        "health.exclude",
        "health.device[].rated_dwpd",
        "health.device[].warranty_years",
        "target[].paths",
        "target[].region",
        "target[].allow_destroy",
        "target[].max_errors",
        "target[].phase[].job.read",
        "target[].phase[].job.iodepth",
        "target[].phase[].job.workers",
        "target[].phase[].profiles",
        "target[].phase[].iodepth",
        "target[].phase[].workers",
        "target[].phase[].steady_window",
        "target[].phase[].passes",
        "target[].phase[].points",
    ];

    #[test]
    fn every_scalar_key_is_known_as_a_size_a_duration_or_neither() {
        let sized: Vec<&str> = size_keys()
            .into_iter()
            .chain(rate_keys())
            .chain(duration_keys())
            .map(|(k, _, _)| k)
            .collect();
        for key in keys::list() {
            if !matches!(key.kind, "string or number" | "list") {
                continue;
            }
            // The gates are thresholds and switches: counts, temperatures, percentages.
            if key.path.starts_with("gates.") || key.path.starts_with("target[].gates.") {
                continue;
            }
            assert!(
                sized.contains(&key.path.as_str())
                    || OTHER_SCALAR_KEYS.contains(&key.path.as_str()),
                "{}: say whether it holds a size (size_keys), a rate (rate_keys), a duration \
                 (duration_keys) or none of them (OTHER_SCALAR_KEYS)",
                key.path
            );
        }
    }

    /// `KB`, `MB`, `GB`, `TB`, `PB` are refused in every size key (and every rate), naming the
    /// key and giving both readings; the binary spelling goes in.
    #[test]
    fn every_size_key_refuses_the_ambiguous_units_with_the_fix() {
        for (path, cfg, key) in size_keys() {
            let e = load_toml(&cfg.replace("{v}", "\"128KB\""))
                .expect_err(path)
                .to_string();
            assert_eq!(
                e,
                format!(
                    "{key}: \"128KB\" is ambiguous: fio reads KB as KiB, drive datasheets as \
                     decimal; write \"128KiB\" for 131072 bytes (binary, as fio reads it) or \
                     \"128000\" for 128000 bytes (decimal, as a datasheet reads it)"
                ),
                "{path}"
            );
            let e = load_toml(&cfg.replace("{v}", "\"4GB\""))
                .expect_err(path)
                .to_string();
            assert!(
                e.starts_with(&format!("{key}: \"4GB\" is ambiguous")),
                "{path}: {e}"
            );
            load_toml(&cfg.replace("{v}", "\"128KiB\"")).unwrap_or_else(|e| panic!("{path}: {e}"));
        }
        for (path, cfg, key) in rate_keys() {
            let e = load_toml(&cfg.replace("{v}", "\"128KB/s\""))
                .expect_err(path)
                .to_string();
            assert!(
                e.starts_with(&format!("{key}: \"128KB/s\" is ambiguous"))
                    && e.contains("write \"128KiB/s\" for 131072 bytes/s"),
                "{path}: {e}"
            );
            load_toml(&cfg.replace("{v}", "\"128KiB/s\""))
                .unwrap_or_else(|e| panic!("{path}: {e}"));
            load_toml(&cfg.replace("{v}", "\"128e3/s\"")).unwrap_or_else(|e| panic!("{path}: {e}"));
        }
    }

    /// A bare number where a duration is meant is refused in every duration key, as a TOML
    /// number, a float or a string, naming the key and the fix.
    #[test]
    fn every_duration_key_refuses_a_bare_number_with_the_fix() {
        for (path, cfg, key) in duration_keys() {
            for (v, n) in [("4", "4"), ("\"4\"", "4"), ("2.5", "2.5")] {
                let e = load_toml(&cfg.replace("{v}", v))
                    .expect_err(path)
                    .to_string();
                assert_eq!(
                    e,
                    format!(
                        "{key}: {n} has no unit; write \"{n}s\" or \"{n}m\" (units: ms, s, m, h, d)"
                    ),
                    "{path} = {v}"
                );
            }
        }
        // From the environment too, naming the variable.
        let e = load_str("", "t", vec![("NVSOAK_STATS__INTERVAL".into(), "5".into())])
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "stats.interval: 5 has no unit; write \"5s\" or \"5m\" (units: ms, s, m, h, d) \
             (set by the environment variable NVSOAK_STATS__INTERVAL)"
        );
    }

    /// Issue 34: `NVSOAK_STATE__DIR=/tmp/x nvsoak run` (no config) wrote into /var/lib/nvsoak,
    /// because the built-in default was built without the environment. It is the empty config
    /// now, with the same overrides, and its target follows the state directory.
    #[test]
    fn env_overrides_apply_to_the_builtin_default() {
        let plain = load_builtin(vec![]).expect("the built-in default is valid");
        assert_eq!(plain, builtin_default());
        assert_eq!(plain.state.dir, builtin_state_dir());
        let s = load_builtin(vec![
            ("NVSOAK_STATE__DIR".into(), "/tmp/nvsoak-unit-x".into()),
            ("NVSOAK_EXPORTER__LISTEN".into(), "127.0.0.1:1234".into()),
            ("NVSOAK_STATS__INTERVAL".into(), "2s".into()),
        ])
        .expect("valid");
        assert_eq!(s.state.dir, Path::new("/tmp/nvsoak-unit-x"));
        assert_eq!(
            s.targets[0].path,
            Path::new("/tmp/nvsoak-unit-x/default-target.dat")
        );
        assert_eq!(s.exporter.listen, "127.0.0.1:1234".parse().unwrap());
        assert_eq!(s.stats.interval, Duration::from_secs(2));
        assert_eq!(s.targets[0].phases, plain.targets[0].phases);
        // A bad override of the default is refused, naming the variable.
        let e = load_builtin(vec![("NVSOAK_STATS__INTERVAL".into(), "fast".into())])
            .unwrap_err()
            .to_string();
        assert!(e.contains("NVSOAK_STATS__INTERVAL"), "{e}");
    }

    /// The built-in default's state directory is where the person stands, root or not, and
    /// absolute, so what `run` prints can be found; a config file keeps the service's default.
    #[test]
    fn the_builtin_state_dir_is_here() {
        let here = std::env::current_dir().unwrap();
        assert_eq!(builtin_state_dir(), here.join("nvsoak-state"));
        assert!(builtin_state_dir().is_absolute());
        assert_eq!(load_toml("").unwrap().state.dir, default_state_dir());
        let d = tempfile::tempdir().unwrap();
        let missing = d.path().join("nvsoak-state");
        assert_eq!(state_dir_to_read_from(&[], &missing), default_state_dir());
        std::fs::create_dir(&missing).unwrap();
        assert_eq!(state_dir_to_read_from(&[], &missing), missing);
        let env = vec![("NVSOAK_STATE__DIR".to_string(), "/srv/soak".to_string())];
        assert_eq!(
            state_dir_to_read_from(&env, &missing),
            Path::new("/srv/soak")
        );
    }

    /// Random single-byte edits, insertions and deletions of the reference config: every
    /// result is either a valid config or an error, never a panic.
    #[test]
    fn mutated_configs_never_panic() {
        let base = FULL.as_bytes();
        let alphabet = b"=[]{}\",.:%0123456789-_ aezkMGsh\n#'\\";
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let (mut ok, mut err) = (0, 0);
        for _ in 0..1500 {
            let mut b = base.to_vec();
            for _ in 0..(1 + next() % 4) {
                let pos = (next() as usize) % b.len();
                let c = alphabet[(next() as usize) % alphabet.len()];
                match next() % 3 {
                    0 => b[pos] = c,
                    1 => b.insert(pos, c),
                    _ => {
                        b.remove(pos);
                    }
                }
            }
            let text = String::from_utf8_lossy(&b);
            match load_str(&text, "fuzz.toml", vec![]) {
                Ok(_) => ok += 1,
                Err(e) => {
                    assert!(!e.to_string().is_empty());
                    err += 1;
                }
            }
        }
        // The mutations must exercise both outcomes to mean anything.
        assert!(ok > 10 && err > 10, "ok {ok}, err {err}");
    }

    /// `log.progress_interval`: 5 minutes unless set; 1 s to 7 days accepted, anything outside
    /// refused naming the key and the bound.
    #[test]
    fn the_progress_interval_is_five_minutes_and_kept_between_a_second_and_a_week() {
        let cfg = |v: &str| format!("default_target = false\n[log]\nprogress_interval = {v}\n");
        let d = load_toml("default_target = false\n").expect("empty config");
        assert_eq!(d.log.progress_interval, Duration::from_secs(300));
        for (v, want) in [
            ("\"1s\"", Duration::from_secs(1)),
            ("\"90s\"", Duration::from_secs(90)),
            ("\"7d\"", Duration::from_secs(7 * 86400)),
        ] {
            let s = load_toml(&cfg(v)).expect(v);
            assert_eq!(s.log.progress_interval, want, "{v}");
        }
        let e = load_toml(&cfg("\"500ms\"")).unwrap_err().to_string();
        assert_eq!(
            e, "log.progress_interval: 500ms is too short (at least 1s)",
            "{e}"
        );
        let e = load_toml(&cfg("\"8d\"")).unwrap_err().to_string();
        assert!(
            e.starts_with("log.progress_interval: ") && e.contains("too long (at most 7d)"),
            "{e}"
        );
        let e = load_toml(&cfg("\"soon\"")).unwrap_err().to_string();
        assert!(e.starts_with("log.progress_interval: "), "{e}");
        // From the environment too.
        let s = load_str(
            "default_target = false\n",
            "t",
            vec![("NVSOAK_LOG__PROGRESS_INTERVAL".into(), "2m".into())],
        )
        .expect("set from the environment");
        assert_eq!(s.log.progress_interval, Duration::from_secs(120));
    }

    /// `config::ENGINES` is what the parser accepts: each name chooses the engine of that
    /// name, and a name outside it is refused listing all of them.
    #[test]
    fn every_engine_name_is_accepted_and_chooses_itself() {
        for name in ENGINES {
            let s = load_toml(&format!(
                "[[target]]\nname = \"t\"\npath = \"/dev/shm/nvsoak-unit-eng.dat\"\nsize = \"1M\"\n\
                 engine = \"{name}\"\n[[target.phase]]\nkind = \"soak\"\nprofile = \"sql\"\n"
            ))
            .expect(name);
            assert_eq!(s.targets[0].engine.as_str(), name);
        }
        let e = load_toml(
            "[[target]]\nname = \"t\"\npath = \"/dev/shm/nvsoak-unit-eng.dat\"\nsize = \"1M\"\n\
             engine = \"spdk\"\n[[target.phase]]\nkind = \"soak\"\nprofile = \"sql\"\n",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains(&ENGINES.join(", ")), "{e}");
    }
}
