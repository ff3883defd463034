//! The whole document: `[exporter]`, `[state]`, `[stats]`, `[log]`, `[health]` and the
//! targets (unique names and paths; the built-in default target when none is given).

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::super::raw::{RawConfig, Scalar};
use super::super::{
    ConfigError, ExporterSettings, LogSettings, Settings, StateSettings, StatsSettings,
    builtin_default_in,
};
use super::gates::gates;
use super::health::health;
use super::scalar::{duration_in, existing_file, integer, percent_str, size, string};
use super::target::{normalise, target};
use super::{R, bad};
use crate::model::spec::TargetSpec;
use crate::model::verify_cost::VerifyBudget;

fn listen(key: &str, v: &Scalar) -> R<SocketAddr> {
    let s = match v {
        Scalar::Str(s) => s.clone(),
        other => {
            return bad(
                key,
                format!("{other} is not an address; write it as a string like \"127.0.0.1:9757\""),
            );
        }
    };
    let t = s.trim();
    if let Some(port) = t.strip_prefix(':')
        && let Ok(p) = port.parse::<u16>()
    {
        return Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), p));
    }
    if let Some(port) = t.strip_prefix("localhost:")
        && let Ok(p) = port.parse::<u16>()
    {
        return Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), p));
    }
    t.parse::<SocketAddr>().map_err(|_| {
        ConfigError::invalid(
            key,
            format!("\"{s}\" is not an address like \"127.0.0.1:9757\", \"[::1]:9757\" or \":9757\" (all interfaces)"),
        )
    })
}

/// `default_dir`: `state.dir` when the config does not set it.
pub fn settings(raw: &RawConfig, default_dir: &Path) -> R<Settings> {
    let def = builtin_default_in(default_dir);
    let exporter = exporter(raw, &def)?;
    let state = state(raw, &def)?;
    let interval = match &raw.stats.interval {
        Some(v) => duration_in(
            "stats.interval",
            v,
            Duration::from_millis(10),
            Duration::from_secs(3600),
        )?,
        None => def.stats.interval,
    };
    let level = match &raw.log.level {
        Some(v) => log_level(v)?,
        None => def.log.level.clone(),
    };
    let progress_interval = match &raw.log.progress_interval {
        Some(v) => {
            let (min, max) = super::super::PROGRESS_INTERVAL_RANGE;
            duration_in("log.progress_interval", v, min, max)?
        }
        None => def.log.progress_interval,
    };
    let health = health(&raw.health)?;
    let targets = targets(raw, &def, &state.dir, interval)?;
    Ok(Settings {
        exporter,
        state,
        stats: StatsSettings { interval },
        health,
        log: LogSettings {
            level,
            progress_interval,
        },
        targets,
    })
}

fn exporter(raw: &RawConfig, def: &Settings) -> R<ExporterSettings> {
    let listen = match &raw.exporter.listen {
        Some(v) => listen("exporter.listen", v)?,
        None => def.exporter.listen,
    };
    if let Some(p) = &raw.exporter.web_config_file {
        existing_file("exporter.web_config_file", p)?;
    }
    let max_connections = match &raw.exporter.max_connections {
        Some(v) => integer(
            "exporter.max_connections",
            v,
            1,
            65536,
            "concurrent HTTP connections",
        )? as usize,
        None => def.exporter.max_connections,
    };
    Ok(ExporterSettings {
        listen,
        web_config_file: raw.exporter.web_config_file.clone(),
        max_connections,
    })
}

fn state(raw: &RawConfig, def: &Settings) -> R<StateSettings> {
    let dir = match &raw.state.dir {
        Some(d) if d.as_os_str().is_empty() => return bad("state.dir", "empty path"),
        Some(d) => d.clone(),
        None => def.state.dir.clone(),
    };
    if let Ok(m) = std::fs::metadata(&dir)
        && !m.is_dir()
    {
        return bad(
            "state.dir",
            format!("{} exists and is not a directory", dir.display()),
        );
    }
    let checkpoint_interval = match &raw.state.checkpoint_interval {
        Some(v) => duration_in(
            "state.checkpoint_interval",
            v,
            Duration::from_millis(100),
            Duration::from_secs(86400),
        )?,
        None => def.state.checkpoint_interval,
    };
    let max_verify_memory = match &raw.state.max_verify_memory {
        Some(v) => verify_budget(v)?,
        None => def.state.max_verify_memory,
    };
    Ok(StateSettings {
        dir,
        checkpoint_interval,
        max_verify_memory,
    })
}

/// `state.max_verify_memory`: a size (`"12GiB"`) or a share of the host's memory (`"50%"`).
fn verify_budget(v: &Scalar) -> R<VerifyBudget> {
    const KEY: &str = crate::model::verify_cost::BUDGET_KEY;
    let share = match v {
        Scalar::Str(s) if s.trim().ends_with('%') => Some(percent_str(KEY, s)?),
        _ => None,
    };
    match share {
        Some(p) if p <= 0.0 || p > 100.0 => bad(
            KEY,
            format!("{p}% is out of range (a share of the host's memory: above 0%, at most 100%)"),
        ),
        Some(p) => Ok(VerifyBudget::ShareOfMemory(p / 100.0)),
        None => match size(KEY, v) {
            Ok(0) => bad(
                KEY,
                "0 bytes would refuse every verified target; give a size such as \"8GiB\" or a share of the host's memory such as \"50%\"",
            ),
            Ok(b) => Ok(VerifyBudget::Bytes(b)),
            // An ambiguous unit ("8GB") keeps the size rule's message, which gives the fix.
            Err(e) if matches!(v, Scalar::Str(s) if s.contains('B') && !s.contains("iB")) => Err(e),
            Err(_) => bad(
                KEY,
                format!(
                    "{v} is neither a size (\"8GiB\") nor a share of the host's memory (\"50%\")"
                ),
            ),
        },
    }
}

/// `log.level`: a non-empty tracing filter.
fn log_level(v: &Scalar) -> R<String> {
    let s = string("log.level", v)?;
    if s.trim().is_empty() {
        return bad(
            "log.level",
            "empty; use e.g. \"info\", \"debug\" or \"nvsoak=debug,warn\"",
        );
    }
    if let Err(e) = tracing_subscriber::EnvFilter::builder().parse(&s) {
        return bad(
            "log.level",
            format!(
                "\"{s}\" is not a log filter ({e}); use e.g. \"info\", \"debug\" or \"nvsoak=debug,warn\""
            ),
        );
    }
    Ok(s)
}

/// The `[[target]]`s, names and paths unique; with none, the built-in default target under the
/// configured state directory, or no target at all with `default_target = false` (health
/// polling only: the installed config's mode).
fn targets(raw: &RawConfig, def: &Settings, dir: &Path, interval: Duration) -> R<Vec<TargetSpec>> {
    if raw.target.is_empty() && raw.default_target == Some(false) {
        return Ok(Vec::new());
    }
    if raw.target.is_empty() {
        let mut t = def.targets[0].clone();
        t.path = dir.join("default-target.dat");
        t.gates = gates(raw.gates.as_ref(), None, None)?;
        return Ok(vec![t]);
    }
    let mut out: Vec<TargetSpec> = Vec::new();
    let mut names: HashMap<String, usize> = HashMap::new();
    let mut paths: HashMap<PathBuf, usize> = HashMap::new();
    for (i, t) in raw.target.iter().enumerate() {
        let mut spec = target(i, t, interval)?;
        spec.gates = gates(raw.gates.as_ref(), t.gates.as_ref(), Some(i))?;
        if let Some(j) = names.insert(spec.name.clone(), i) {
            return bad(
                format!("target[{i}].name"),
                format!(
                    "\"{}\" is already the name of target[{j}]; names must be unique",
                    spec.name
                ),
            );
        }
        for (m, p) in spec.member_paths().into_iter().enumerate() {
            if let Some(j) = paths.insert(normalise(p), i) {
                let key = if spec.is_spanning() {
                    format!("target[{i}].paths[{m}]")
                } else {
                    format!("target[{i}].path")
                };
                let why = if j == i {
                    "is named twice in this target".to_string()
                } else if out.get(j).is_some_and(TargetSpec::is_spanning) {
                    format!("is already one of the paths of target[{j}]")
                } else {
                    format!("is already the path of target[{j}]")
                };
                return bad(
                    key,
                    format!(
                        "{} {why}; two targets cannot share a file or device",
                        p.display()
                    ),
                );
            }
        }
        out.push(spec);
    }
    Ok(out)
}
