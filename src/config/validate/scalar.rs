//! Scalar config values: durations, sizes, whole numbers, floats, percentages, strings, choices
//! from a fixed list, label-safe names, device matchers and files that must exist. Each names the
//! key when it fails.

use std::path::Path;
use std::time::Duration;

use super::super::ConfigError;
use super::super::raw::Scalar;
use super::{R, bad};
use crate::model::units::{parse_duration, parse_size};
use crate::util::suggest::closest;

/// A duration with its unit (`"30s"`). A bare number, in a string or not, is refused with the
/// fix (`4 has no unit; write "4s" or "4m"`): 4 could be meant as seconds or minutes, and a
/// phase of 4 s is shorter than one steady-state round.
pub(super) fn duration(key: &str, v: &Scalar) -> R<Duration> {
    let bare = |n: String| {
        ConfigError::invalid(
            key,
            crate::model::units::UnitError::BareDuration { n }.to_string(),
        )
    };
    match v {
        Scalar::Str(s) => parse_duration(s).map_err(|e| ConfigError::invalid(key, e.to_string())),
        Scalar::Int(i) if *i >= 0 => Err(bare(i.to_string())),
        Scalar::Float(f) if f.is_finite() && *f >= 0.0 => Err(bare(f.to_string())),
        other => bad(
            key,
            format!("{other} is not a duration (write it like \"30s\", \"5m\", \"2h\")"),
        ),
    }
}

pub(super) fn duration_in(key: &str, v: &Scalar, min: Duration, max: Duration) -> R<Duration> {
    let d = duration(key, v)?;
    if d < min {
        return bad(
            key,
            format!(
                "{} is too short (at least {})",
                fmt_dur(d),
                crate::model::units::format_duration(min)
            ),
        );
    }
    if d > max {
        return bad(
            key,
            format!(
                "{} is too long (at most {})",
                fmt_dur(d),
                crate::model::units::format_duration(max)
            ),
        );
    }
    Ok(d)
}

pub(super) fn fmt_dur(d: Duration) -> String {
    crate::model::units::format_duration(d)
}

pub(super) fn size(key: &str, v: &Scalar) -> R<u64> {
    match v {
        Scalar::Str(s) => parse_size(s).map_err(|e| ConfigError::invalid(key, e.to_string())),
        Scalar::Int(i) if *i >= 0 => Ok(*i as u64),
        other => bad(
            key,
            format!("{other} is not a size (write it like \"4k\", \"1GiB\", \"3.2e12\")"),
        ),
    }
}

pub(super) fn integer(key: &str, v: &Scalar, lo: i64, hi: i64, what: &str) -> R<i64> {
    let n = match v {
        Scalar::Int(i) => *i,
        Scalar::Float(f) if f.fract() == 0.0 && f.abs() < 1e15 => *f as i64,
        Scalar::Str(s) => match s.trim().parse::<i64>() {
            Ok(n) => n,
            Err(_) => return bad(key, format!("{v} is not a whole number ({what})")),
        },
        other => return bad(key, format!("{other} is not a whole number ({what})")),
    };
    if n < lo || n > hi {
        return bad(key, format!("{n} is out of range ({what}: {lo} to {hi})"));
    }
    Ok(n)
}

pub(super) fn float(key: &str, v: &Scalar) -> R<f64> {
    let f = match v {
        Scalar::Int(i) => *i as f64,
        Scalar::Float(f) => *f,
        Scalar::Str(s) => s
            .trim()
            .parse::<f64>()
            .map_err(|_| ConfigError::invalid(key, format!("{v} is not a number")))?,
        other => return bad(key, format!("{other} is not a number")),
    };
    if !f.is_finite() {
        return bad(key, format!("{v} is not a finite number"));
    }
    Ok(f)
}

/// `"25%"` (or `"25"`) → 25.0.
pub(super) fn percent_str(key: &str, s: &str) -> R<f64> {
    let t = s.trim();
    let num = t.strip_suffix('%').unwrap_or(t).trim();
    match num.parse::<f64>() {
        Ok(p) if p.is_finite() => Ok(p),
        _ => bad(
            key,
            format!("\"{s}\" is not a percentage (write it like \"25%\")"),
        ),
    }
}

pub(super) fn percent(key: &str, v: &Scalar) -> R<f64> {
    match v {
        Scalar::Str(s) => percent_str(key, s),
        Scalar::Int(i) => Ok(*i as f64),
        Scalar::Float(f) if f.is_finite() => Ok(*f),
        other => bad(
            key,
            format!("{other} is not a percentage (write it like \"25%\")"),
        ),
    }
}

pub(super) fn string(key: &str, v: &Scalar) -> R<String> {
    match v {
        Scalar::Str(s) => Ok(s.clone()),
        other => bad(key, format!("{other} is not a string")),
    }
}

pub(super) fn one_of<T: Copy>(key: &str, v: &str, options: &[(&'static str, T)]) -> R<T> {
    if let Some((_, t)) = options.iter().find(|(n, _)| *n == v) {
        return Ok(*t);
    }
    let names: Vec<&str> = options.iter().map(|o| o.0).collect();
    let hint = closest(v, names.iter().copied())
        .map(|s| format!(" (did you mean \"{s}\"?)"))
        .unwrap_or_default();
    bad(
        key,
        format!(
            "unknown value \"{v}\"{hint}; expected one of: {}",
            names.join(", ")
        ),
    )
}

/// A label-safe name: metrics carry it as `target` / `job`.
pub(super) fn name(key: &str, s: &str) -> R<String> {
    if s.is_empty() {
        return bad(key, "empty name");
    }
    if s.len() > 64 {
        return bad(key, format!("\"{s}\" is longer than 64 characters"));
    }
    if let Some(c) = s
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
    {
        return bad(
            key,
            format!("\"{s}\" contains {c:?}; use letters, digits, '-', '_' and '.'"),
        );
    }
    Ok(s.to_string())
}

pub(super) fn matcher(key: &str, s: &str) -> R<()> {
    if s.trim().is_empty() {
        return bad(
            key,
            "empty matcher (use a controller name, serial, model, or re:REGEX)",
        );
    }
    if let Some(re) = s.strip_prefix("re:") {
        regex::Regex::new(re)
            .map_err(|e| ConfigError::invalid(key, format!("bad regular expression: {e}")))?;
    }
    Ok(())
}

/// A file the config names must exist and be a regular file.
pub(super) fn existing_file(key: &str, p: &Path) -> R<()> {
    match std::fs::metadata(p) {
        Ok(m) if m.is_file() => Ok(()),
        Ok(_) => bad(key, format!("{} is not a regular file", p.display())),
        Err(e) => bad(key, format!("{}: {e}", p.display())),
    }
}
