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
            let text = crate::util::bounded::read_to_string(p, crate::util::bounded::CONFIG_LIMIT)
                .map_err(|e| ConfigError::File {
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

/// The built-in default: a soak of `4k-random-read` on a 1 GiB file under the state directory.
pub fn builtin_default() -> Settings {
    use crate::model::spec::*;
    let dir = default_state_dir();
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
            soak_with("iodepth = 4\nworkers = 3\nrate = \"200MB/s\"")
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
}
