//! Raw config → validated [`Settings`]. Every check names the key path and the reason.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::os::unix::fs::FileTypeExt;
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use super::raw::*;
use super::suggest::closest;
use super::*;
use crate::units::{format_size, parse_duration, parse_size};
use crate::workload::profiles;
use crate::workload::spec::*;

type R<T> = Result<T, ConfigError>;

fn bad<T>(key: impl Into<String>, reason: impl Into<String>) -> R<T> {
    Err(ConfigError::invalid(key, reason))
}

fn join(prefix: &str, key: &str) -> String {
    if prefix.is_empty() {
        key.to_string()
    } else {
        format!("{prefix}.{key}")
    }
}

/// Largest block size nvsoak accepts (registered buffers are sized to it).
pub const MAX_BLOCK: u64 = 16 << 20;

// ---------------------------------------------------------------------------------------------
// Scalars

fn duration(key: &str, v: &Scalar) -> R<Duration> {
    match v {
        Scalar::Str(s) => parse_duration(s).map_err(|e| ConfigError::invalid(key, e)),
        Scalar::Int(i) if *i >= 0 => Ok(Duration::from_secs(*i as u64)),
        Scalar::Float(f) if f.is_finite() && *f >= 0.0 && *f < 1e12 => {
            Ok(Duration::from_secs_f64(*f))
        }
        other => bad(
            key,
            format!("{other} is not a duration (write it like \"30s\", \"5m\", \"2h\")"),
        ),
    }
}

fn duration_in(key: &str, v: &Scalar, min: Duration, max: Duration) -> R<Duration> {
    let d = duration(key, v)?;
    if d < min {
        return bad(
            key,
            format!(
                "{} is too short (at least {})",
                fmt_dur(d),
                crate::units::format_duration(min)
            ),
        );
    }
    if d > max {
        return bad(
            key,
            format!(
                "{} is too long (at most {})",
                fmt_dur(d),
                crate::units::format_duration(max)
            ),
        );
    }
    Ok(d)
}

fn fmt_dur(d: Duration) -> String {
    crate::units::format_duration(d)
}

fn size(key: &str, v: &Scalar) -> R<u64> {
    match v {
        Scalar::Str(s) => parse_size(s).map_err(|e| ConfigError::invalid(key, e)),
        Scalar::Int(i) if *i >= 0 => Ok(*i as u64),
        other => bad(
            key,
            format!("{other} is not a size (write it like \"4k\", \"1GiB\", \"3.2TB\")"),
        ),
    }
}

fn integer(key: &str, v: &Scalar, lo: i64, hi: i64, what: &str) -> R<i64> {
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

fn float(key: &str, v: &Scalar) -> R<f64> {
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
fn percent_str(key: &str, s: &str) -> R<f64> {
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

fn percent(key: &str, v: &Scalar) -> R<f64> {
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

fn string(key: &str, v: &Scalar) -> R<String> {
    match v {
        Scalar::Str(s) => Ok(s.clone()),
        other => bad(key, format!("{other} is not a string")),
    }
}

fn one_of<T: Copy>(key: &str, v: &str, options: &[(&'static str, T)]) -> R<T> {
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
fn name(key: &str, s: &str) -> R<String> {
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

fn matcher(key: &str, s: &str) -> R<()> {
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

// ---------------------------------------------------------------------------------------------
// Workload values

/// `"4k"`, `4096`, or a weighted mix `"4k:60,8k:30,64k:10"`.
pub fn block_sizes(key: &str, v: &Scalar) -> R<BlockSizeMix> {
    let mut entries: Vec<(u32, u32)> = Vec::new();
    let text = match v {
        Scalar::Int(_) => None,
        Scalar::Str(s) => Some(s.clone()),
        other => {
            return bad(
                key,
                format!("{other} is not a block size like \"4k\" or a mix like \"4k:60,8k:40\""),
            );
        }
    };
    let parts: Vec<(Scalar, u32)> = match &text {
        None => vec![(v.clone(), 1)],
        Some(s) => {
            let mut out = Vec::new();
            for part in s.split(',') {
                let part = part.trim();
                if part.is_empty() {
                    return bad(key, format!("\"{s}\" has an empty entry"));
                }
                let (b, w) = match part.split_once(':') {
                    Some((b, w)) => {
                        let w = match w.trim().parse::<u32>() {
                            Ok(w) if w > 0 => w,
                            _ => {
                                return bad(
                                    key,
                                    format!(
                                        "weight \"{w}\" in \"{part}\" is not a positive whole number"
                                    ),
                                );
                            }
                        };
                        (b, w)
                    }
                    None => (part, 1),
                };
                out.push((Scalar::Str(b.trim().to_string()), w));
            }
            out
        }
    };
    for (b, w) in parts {
        let bytes = size(key, &b)?;
        if bytes == 0 {
            return bad(key, "a block size of 0");
        }
        if bytes % 512 != 0 {
            return bad(
                key,
                format!(
                    "block size {bytes} is not a multiple of 512 (O_DIRECT needs sector alignment)"
                ),
            );
        }
        if bytes > MAX_BLOCK {
            return bad(
                key,
                format!(
                    "block size {} is larger than the maximum 16M",
                    format_size(bytes)
                ),
            );
        }
        let bytes = bytes as u32;
        if entries.iter().any(|e| e.0 == bytes) {
            return bad(
                key,
                format!("block size {} is listed twice", format_size(bytes as u64)),
            );
        }
        entries.push((bytes, w));
    }
    Ok(BlockSizeMix { entries })
}

/// `"5000iops"`, `"50k iops"`, `"200MB/s"`, `"50%"`.
pub fn rate(key: &str, v: &Scalar) -> R<RateLimit> {
    let hint = "write a rate like \"5000iops\", \"200MB/s\" or \"50%\" (of the measured maximum)";
    let s = match v {
        Scalar::Str(s) => s.trim().to_string(),
        other => return bad(key, format!("{other} has no unit; {hint}")),
    };
    let lower = s.to_ascii_lowercase();
    if let Some(p) = s.strip_suffix('%') {
        let p = percent_str(key, p)?;
        if p <= 0.0 || p > 1000.0 {
            return bad(
                key,
                format!("{p}% is out of range (above 0%, at most 1000%)"),
            );
        }
        return Ok(RateLimit::PercentOfMax(p));
    }
    if let Some(n) = lower.strip_suffix("iops") {
        let n = n.trim();
        let (num, mult) = match n.chars().last() {
            Some('k') => (&n[..n.len() - 1], 1e3),
            Some('m') => (&n[..n.len() - 1], 1e6),
            _ => (n, 1.0),
        };
        return match num.trim().parse::<f64>() {
            Ok(x) if x.is_finite() && x > 0.0 => Ok(RateLimit::Iops(x * mult)),
            _ => bad(
                key,
                format!("\"{s}\": the IOPS must be a positive number; {hint}"),
            ),
        };
    }
    if let Some(b) = s.strip_suffix("/s") {
        let bytes = parse_size(b).map_err(|e| ConfigError::invalid(key, format!("{e}; {hint}")))?;
        if bytes == 0 {
            return bad(key, "a rate of 0 bytes/s");
        }
        return Ok(RateLimit::BytesPerSec(bytes as f64));
    }
    bad(key, format!("\"{s}\" is not a rate; {hint}"))
}

/// `"uniform"`, `"zipf:1.2"`, `"hotband:10%:90%"`.
pub fn skew(key: &str, s: &str) -> R<Skew> {
    let t = s.trim();
    let hint = "expected \"uniform\", \"zipf:THETA\" (e.g. \"zipf:1.2\") or \"hotband:SIZE%:ACCESS%\" (e.g. \"hotband:10%:90%\")";
    if t == "uniform" {
        return Ok(Skew::Uniform);
    }
    if let Some(th) = t.strip_prefix("zipf:") {
        return match th.trim().parse::<f64>() {
            Ok(theta) if theta.is_finite() && theta > 0.0 && theta <= 100.0 => {
                Ok(Skew::Zipf { theta })
            }
            _ => bad(
                key,
                format!("zipf exponent \"{th}\" must be a number above 0 (e.g. 1.2)"),
            ),
        };
    }
    if let Some(rest) = t.strip_prefix("hotband:") {
        let Some((f, a)) = rest.split_once(':') else {
            return bad(key, format!("\"{s}\": {hint}"));
        };
        let f = percent_str(key, f)?;
        let a = percent_str(key, a)?;
        if f <= 0.0 || f >= 100.0 {
            return bad(
                key,
                format!("hot band size {f}% must be above 0% and below 100%"),
            );
        }
        if a <= 0.0 || a > 100.0 {
            return bad(
                key,
                format!("hot band access {a}% must be above 0% and at most 100%"),
            );
        }
        return Ok(Skew::HotBand {
            fraction: f / 100.0,
            access: a / 100.0,
        });
    }
    let word = t.split(':').next().unwrap_or(t);
    let hint2 = closest(word, ["uniform", "zipf", "hotband"])
        .map(|w| format!(" (did you mean \"{w}\"?)"))
        .unwrap_or_default();
    bad(key, format!("unknown skew \"{s}\"{hint2}; {hint}"))
}

fn iodepth(key: &str, v: &Scalar) -> R<u32> {
    Ok(integer(key, v, 1, 4096, "iodepth, I/Os in flight per worker")? as u32)
}

fn workers(key: &str, v: &Scalar) -> R<u32> {
    Ok(integer(key, v, 1, 256, "workers, threads per job")? as u32)
}

fn inline_job(key: &str, j: &RawJob) -> R<JobSpec> {
    let jname = match &j.name {
        Some(n) => {
            let n = name(&join(key, "name"), n)?;
            if profiles::lookup(&n).is_some() {
                return bad(
                    join(key, "name"),
                    format!(
                        "\"{n}\" is a built-in profile; give the inline job another name, or use profile = \"{n}\" with overrides"
                    ),
                );
            }
            n
        }
        None => "inline".to_string(),
    };
    let read = match &j.read {
        Some(v) => {
            let p = match v {
                Scalar::Str(s) => percent_str(&join(key, "read"), s)?,
                other => float(&join(key, "read"), other)?,
            };
            if !(0.0..=100.0).contains(&p) || p.fract() != 0.0 {
                return bad(
                    join(key, "read"),
                    format!("{p} is not a read percentage (a whole number from 0 to 100)"),
                );
            }
            p as u8
        }
        None => {
            return bad(
                join(key, "read"),
                "missing: the read percentage of the job (0 = all writes, 100 = all reads)",
            );
        }
    };
    let bs = match &j.bs {
        Some(v) => block_sizes(&join(key, "bs"), v)?,
        None => {
            return bad(
                join(key, "bs"),
                "missing: the block size (\"4k\") or a weighted mix (\"4k:60,8k:40\")",
            );
        }
    };
    let sequential = match j.access.as_deref() {
        None => false,
        Some(a) => one_of(
            &join(key, "access"),
            a,
            &[("random", false), ("sequential", true), ("seq", true)],
        )?,
    };
    let access = if sequential {
        if j.skew.is_some() {
            return bad(
                join(key, "skew"),
                "skew only applies to random access (this job is sequential)",
            );
        }
        Access::Sequential
    } else {
        let skew = match &j.skew {
            Some(s) => skew(&join(key, "skew"), s)?,
            None => Skew::Uniform,
        };
        Access::Random { skew }
    };
    let iodepth = match &j.iodepth {
        Some(v) => iodepth(&join(key, "iodepth"), v)?,
        None => 32,
    };
    let workers = match &j.workers {
        Some(v) => workers(&join(key, "workers"), v)?,
        None => 1,
    };
    let rate = match &j.rate {
        Some(v) => Some(rate(&join(key, "rate"), v)?),
        None => None,
    };
    let mut job = JobSpec {
        name: jname,
        description: String::new(),
        read_pct: read,
        bs,
        access,
        iodepth,
        workers,
        rate,
    };
    job.description = match &j.description {
        Some(d) => d.clone(),
        None => format!(
            "inline job: {}% read, bs {}, {}",
            job.read_pct,
            job.bs,
            profiles::describe_access(&job.access)
        ),
    };
    Ok(job)
}

fn profile(key: &str, p: &str) -> R<JobSpec> {
    profiles::lookup(p).ok_or_else(|| {
        let hint = profiles::suggest(p)
            .map(|s| format!(" (did you mean \"{s}\"?)"))
            .unwrap_or_else(|| " (`nvsoak profiles` lists them)".into());
        ConfigError::invalid(key, format!("unknown profile \"{p}\"{hint}"))
    })
}

// ---------------------------------------------------------------------------------------------
// Phases

const DEFAULT_POINTS: [u32; 8] = [10, 50, 70, 80, 90, 100, 110, 120];

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Precondition,
    Sweep,
    Soak,
}

fn kind_name(k: Kind) -> &'static str {
    match k {
        Kind::Precondition => "precondition",
        Kind::Sweep => "sweep",
        Kind::Soak => "soak",
    }
}

fn check_applicable(key: &str, p: &RawPhase, kind: Kind) -> R<()> {
    use Kind::*;
    let set: [(&str, bool, &[Kind], &str); 16] = [
        ("profile", p.profile.is_some(), &[Sweep, Soak], ""),
        ("job", p.job.is_some(), &[Sweep, Soak], ""),
        (
            "profiles",
            p.profiles.is_some(),
            &[Soak],
            "a rotation of profiles runs in a soak",
        ),
        (
            "rotate",
            p.rotate.is_some(),
            &[Soak],
            "rotation is for soaks",
        ),
        (
            "iodepth",
            p.iodepth.is_some(),
            &[Precondition, Sweep, Soak],
            "",
        ),
        (
            "workers",
            p.workers.is_some(),
            &[Precondition, Sweep, Soak],
            "",
        ),
        (
            "rate",
            p.rate.is_some(),
            &[Soak],
            "a sweep sets its own rates (the uncontrolled maximum, then points as % of it) and a precondition runs flat out",
        ),
        (
            "duration",
            p.duration.is_some(),
            &[Soak],
            "a precondition lasts `passes` full passes, a sweep lasts max_duration plus points × point_duration",
        ),
        (
            "steady_round",
            p.steady_round.is_some(),
            &[Soak],
            "steady state is evaluated in soaks",
        ),
        (
            "steady_window",
            p.steady_window.is_some(),
            &[Soak],
            "steady state is evaluated in soaks",
        ),
        (
            "steady_criterion",
            p.steady_criterion.is_some(),
            &[Soak],
            "steady state is evaluated in soaks",
        ),
        ("passes", p.passes.is_some(), &[Precondition], ""),
        (
            "block_size",
            p.block_size.is_some(),
            &[Precondition],
            "set the job's bs instead",
        ),
        ("max_duration", p.max_duration.is_some(), &[Sweep], ""),
        ("point_duration", p.point_duration.is_some(), &[Sweep], ""),
        ("points", p.points.is_some(), &[Sweep], ""),
    ];
    for (k, is_set, kinds, why) in set {
        if is_set && !kinds.contains(&kind) {
            let only: Vec<&str> = kinds.iter().map(|k| kind_name(*k)).collect();
            let why = if why.is_empty() {
                String::new()
            } else {
                format!("; {why}")
            };
            return bad(
                join(key, k),
                format!(
                    "only applies to {} phases, and this phase is a {}{why}",
                    only.join(" and "),
                    kind_name(kind)
                ),
            );
        }
    }
    Ok(())
}

/// Apply the phase-level overrides (iodepth, workers, rate) to a resolved job.
fn with_overrides(key: &str, mut job: JobSpec, p: &RawPhase) -> R<JobSpec> {
    let mut changed = Vec::new();
    if let Some(v) = &p.iodepth {
        job.iodepth = iodepth(&join(key, "iodepth"), v)?;
        changed.push(format!("iodepth {}", job.iodepth));
    }
    if let Some(v) = &p.workers {
        job.workers = workers(&join(key, "workers"), v)?;
        changed.push(format!("workers {}", job.workers));
    }
    if let Some(v) = &p.rate {
        job.rate = Some(rate(&join(key, "rate"), v)?);
        changed.push("rate limited".to_string());
    }
    if !changed.is_empty() {
        job.description = format!("{} [overridden: {}]", job.description, changed.join(", "));
    }
    Ok(job)
}

/// The single job of a sweep or a non-rotating soak: `profile` or `job`.
fn single_job(key: &str, p: &RawPhase, kind: Kind) -> R<JobSpec> {
    match (&p.profile, &p.job) {
        (Some(_), Some(_)) => bad(join(key, "job"), "give either profile or job, not both"),
        (Some(name), None) => with_overrides(key, profile(&join(key, "profile"), name)?, p),
        (None, Some(j)) => with_overrides(key, inline_job(&join(key, "job"), j)?, p),
        (None, None) => bad(
            join(key, "profile"),
            format!(
                "missing: a {} phase needs profile = \"NAME\" (see `nvsoak profiles`) or an inline job = {{ ... }}",
                kind_name(kind)
            ),
        ),
    }
}

fn steady(key: &str, p: &RawPhase, stats_interval: Duration) -> R<SteadyConfig> {
    let mut cfg = SteadyConfig::default();
    if let Some(v) = &p.steady_round {
        let k = join(key, "steady_round");
        cfg.round = duration_in(
            &k,
            v,
            Duration::from_millis(100),
            Duration::from_secs(30 * 86400),
        )?;
        if cfg.round < stats_interval {
            return bad(
                k,
                format!(
                    "{} is shorter than stats.interval ({}); a round needs at least one interval",
                    fmt_dur(cfg.round),
                    fmt_dur(stats_interval)
                ),
            );
        }
    }
    if let Some(v) = &p.steady_window {
        cfg.window = integer(
            &join(key, "steady_window"),
            v,
            2,
            1000,
            "rounds in the steady-state window (SNIA: 5)",
        )? as usize;
    }
    if let Some(c) = &p.steady_criterion {
        let k = join(key, "steady_criterion");
        let c = c.trim();
        let (name, arg) = match c.split_once(':') {
            Some((n, a)) => (n.trim(), Some(a.trim())),
            None => (c, None),
        };
        let crit = one_of(
            &k,
            name,
            &[
                ("snia", SteadyCriterion::Snia),
                ("iops", SteadyCriterion::FioIops),
                ("iops_slope", SteadyCriterion::FioIopsSlope),
            ],
        )?;
        match (crit, arg) {
            (SteadyCriterion::Snia, None) => {}
            (SteadyCriterion::Snia, Some(_)) => {
                return bad(
                    k,
                    "\"snia\" takes no argument (its limits are fixed: range 20%, slope excursion 10%)",
                );
            }
            (_, None) => {
                return bad(k, format!("\"{name}\" needs a limit, e.g. \"{name}:10%\""));
            }
            (crit, Some(a)) => {
                let pct = percent_str(&k, a)?;
                if pct <= 0.0 || pct > 100.0 {
                    return bad(k, format!("limit {pct}% must be above 0% and at most 100%"));
                }
                if crit == SteadyCriterion::FioIops {
                    cfg.max_range = pct / 100.0;
                } else {
                    cfg.max_slope_excursion = pct / 100.0;
                }
            }
        }
        cfg.criterion = crit;
    }
    Ok(cfg)
}

fn phase(key: &str, p: &RawPhase, stats_interval: Duration) -> R<PhaseSpec> {
    let kind = match p.kind.as_deref() {
        Some(k) => one_of(
            &join(key, "kind"),
            k,
            &[
                ("precondition", Kind::Precondition),
                ("sweep", Kind::Sweep),
                ("soak", Kind::Soak),
            ],
        )?,
        None => return bad(join(key, "kind"), "missing: precondition, sweep or soak"),
    };
    check_applicable(key, p, kind)?;
    match kind {
        Kind::Precondition => {
            let passes = match &p.passes {
                Some(v) => integer(
                    &join(key, "passes"),
                    v,
                    1,
                    1000,
                    "full writes of the region",
                )? as u32,
                None => 2,
            };
            let block_size = match &p.block_size {
                Some(v) => {
                    let k = join(key, "block_size");
                    let b = size(&k, v)?;
                    if b == 0 || b % 512 != 0 || b > MAX_BLOCK {
                        return bad(
                            k,
                            format!(
                                "{} must be a multiple of 512 from 512 to 16M",
                                format_size(b)
                            ),
                        );
                    }
                    b as u32
                }
                None => 128 << 10,
            };
            let iodepth = match &p.iodepth {
                Some(v) => iodepth(&join(key, "iodepth"), v)?,
                None => 32,
            };
            let workers = match &p.workers {
                Some(v) => workers(&join(key, "workers"), v)?,
                None => 1,
            };
            Ok(PhaseSpec::Precondition {
                passes,
                block_size,
                iodepth,
                workers,
            })
        }
        Kind::Sweep => {
            let job = single_job(key, p, kind)?;
            if job.rate.is_some() {
                return bad(
                    join(key, "job.rate"),
                    "a sweep sets its own rates (the uncontrolled maximum, then points as % of it); remove rate",
                );
            }
            let max_duration = match &p.max_duration {
                Some(v) => duration_in(
                    &join(key, "max_duration"),
                    v,
                    Duration::from_millis(100),
                    Duration::from_secs(86400),
                )?,
                None => Duration::from_secs(60),
            };
            let point_duration = match &p.point_duration {
                Some(v) => duration_in(
                    &join(key, "point_duration"),
                    v,
                    Duration::from_millis(100),
                    Duration::from_secs(86400),
                )?,
                None => Duration::from_secs(60),
            };
            let points = match &p.points {
                None => DEFAULT_POINTS.to_vec(),
                Some(list) => {
                    if list.is_empty() {
                        return bad(
                            join(key, "points"),
                            "empty; list percentages of the maximum, e.g. [10, 50, 100]",
                        );
                    }
                    let mut out = Vec::new();
                    for (i, v) in list.iter().enumerate() {
                        let k = format!("{}[{i}]", join(key, "points"));
                        let n = match v {
                            Scalar::Str(s) => {
                                let p = percent_str(&k, s)?;
                                if p.fract() != 0.0 {
                                    return bad(k, format!("{p}% is not a whole percentage"));
                                }
                                p as i64
                            }
                            other => {
                                integer(&k, other, i64::MIN, i64::MAX, "percent of the maximum")?
                            }
                        };
                        if !(1..=1000).contains(&n) {
                            return bad(
                                k,
                                format!(
                                    "{n}% is out of range (1% to 1000% of the measured maximum)"
                                ),
                            );
                        }
                        if out.contains(&(n as u32)) {
                            return bad(k, format!("{n}% is listed twice"));
                        }
                        out.push(n as u32);
                    }
                    out
                }
            };
            Ok(PhaseSpec::Sweep {
                job,
                max_duration,
                point_duration,
                points,
            })
        }
        Kind::Soak => {
            let jobs = if let Some(list) = &p.profiles {
                let k = join(key, "profiles");
                if p.profile.is_some() || p.job.is_some() {
                    return bad(k, "give one of profile, job or profiles, not several");
                }
                if list.is_empty() {
                    return bad(k, "empty; list the profiles to rotate through");
                }
                let mut jobs: Vec<JobSpec> = Vec::new();
                for (i, n) in list.iter().enumerate() {
                    let ki = format!("{k}[{i}]");
                    if jobs.iter().any(|j| &j.name == n) {
                        return bad(ki, format!("profile \"{n}\" is listed twice"));
                    }
                    jobs.push(with_overrides(key, profile(&ki, n)?, p)?);
                }
                jobs
            } else {
                vec![single_job(key, p, kind)?]
            };
            let rotate = match &p.rotate {
                Some(v) => {
                    if jobs.len() < 2 {
                        return bad(
                            join(key, "rotate"),
                            "rotation needs profiles = [\"a\", \"b\", ...] with at least two entries",
                        );
                    }
                    Some(duration_in(
                        &join(key, "rotate"),
                        v,
                        Duration::from_millis(100),
                        Duration::from_secs(365 * 86400),
                    )?)
                }
                None if jobs.len() > 1 => {
                    return bad(
                        join(key, "rotate"),
                        "missing: a rotation of profiles needs rotate = \"1h\" (how long each runs before the next)",
                    );
                }
                None => None,
            };
            let duration = match &p.duration {
                Some(v) => Some(duration_in(
                    &join(key, "duration"),
                    v,
                    Duration::from_millis(100),
                    Duration::from_secs(10 * 365 * 86400),
                )?),
                None => None,
            };
            Ok(PhaseSpec::Soak {
                jobs,
                duration,
                rotate,
                steady: steady(key, p, stats_interval)?,
            })
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Targets

/// Lexically normalised absolute path, for duplicate detection.
fn normalise(p: &Path) -> PathBuf {
    if let Ok(c) = std::fs::canonicalize(p) {
        return c;
    }
    let abs = if p.is_absolute() {
        p.to_path_buf()
    } else {
        std::env::current_dir().unwrap_or_default().join(p)
    };
    let mut out = PathBuf::new();
    for c in abs.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

fn max_block(phases: &[PhaseSpec]) -> (u64, usize) {
    let mut best = (0u64, 0usize);
    for (j, p) in phases.iter().enumerate() {
        let b = match p {
            PhaseSpec::Precondition { block_size, .. } => *block_size as u64,
            PhaseSpec::Sweep { job, .. } => job.bs.max() as u64,
            PhaseSpec::Soak { jobs, .. } => {
                jobs.iter().map(|j| j.bs.max() as u64).max().unwrap_or(0)
            }
        };
        if b > best.0 {
            best = (b, j);
        }
    }
    best
}

fn target(i: usize, t: &RawTarget, stats_interval: Duration) -> R<TargetSpec> {
    let key = format!("target[{i}]");
    let k = |s: &str| join(&key, s);
    let tname = match &t.name {
        Some(n) => name(&k("name"), n)?,
        None => {
            return bad(
                k("name"),
                "missing: every target needs a name (used as the `target` label)",
            );
        }
    };
    let path = match &t.path {
        Some(p) if !p.as_os_str().is_empty() => p.clone(),
        _ => {
            return bad(
                k("path"),
                "missing: a file (created and preallocated to `size`) or a block device",
            );
        }
    };
    let is_block = match std::fs::metadata(&path) {
        Ok(m) if m.file_type().is_block_device() => true,
        Ok(m) if m.is_file() => false,
        Ok(m) if m.is_dir() => {
            return bad(
                k("path"),
                format!("{} is a directory; name a file inside it", path.display()),
            );
        }
        Ok(_) => {
            return bad(
                k("path"),
                format!(
                    "{} is neither a regular file nor a block device",
                    path.display()
                ),
            );
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            // Judge where the file would really be created: `..` and symlinks (a dangling one
            // included) resolved, not the path's spelling.
            let real = resolve_for_create(&path);
            if real.starts_with("/dev") && !real.starts_with("/dev/shm") {
                let via = if real != path {
                    format!(" (it resolves to {})", real.display())
                } else {
                    String::new()
                };
                return bad(
                    k("path"),
                    format!(
                        "{} does not exist{via}; a block device must be present, and nvsoak does not create files under /dev (use /dev/shm or another directory)",
                        path.display()
                    ),
                );
            }
            false
        }
        Err(e) => return bad(k("path"), format!("cannot inspect {}: {e}", path.display())),
    };
    let size = match (&t.size, is_block) {
        (Some(_), true) => {
            return bad(
                k("size"),
                format!(
                    "{} is a block device, which has its own size; remove size (use region to exercise part of it)",
                    path.display()
                ),
            );
        }
        (None, false) => {
            return bad(
                k("size"),
                format!(
                    "missing: {} is a file target, which nvsoak creates and preallocates; give its size, e.g. size = \"1GiB\"",
                    path.display()
                ),
            );
        }
        (None, true) => None,
        (Some(v), false) => {
            let b = size(&k("size"), v)?;
            if b == 0 {
                return bad(k("size"), "a file target of 0 bytes");
            }
            if b % 512 != 0 {
                return bad(
                    k("size"),
                    format!("{b} bytes is not a multiple of 512 (O_DIRECT needs sector alignment)"),
                );
            }
            Some(b)
        }
    };
    let region = match &t.region {
        None => 1.0,
        Some(v) => {
            let p = percent(&k("region"), v)?;
            if p <= 0.0 || p > 100.0 {
                return bad(
                    k("region"),
                    format!("{p}% is out of range (above 0%, at most 100%)"),
                );
            }
            p / 100.0
        }
    };
    let engine = match t.engine.as_deref() {
        None => EngineChoice::Auto,
        Some(e) => one_of(
            &k("engine"),
            e,
            &[
                ("auto", EngineChoice::Auto),
                ("io_uring", EngineChoice::IoUring),
                ("psync", EngineChoice::Psync),
                ("null", EngineChoice::Null),
            ],
        )?,
    };
    let verify = match t.verify.as_deref() {
        None => VerifyMode::Off,
        Some(v) => one_of(
            &k("verify"),
            v,
            &[
                ("off", VerifyMode::Off),
                ("inline", VerifyMode::Inline),
                ("pass", VerifyMode::Pass),
            ],
        )?,
    };
    let verify_fatal = t.verify_fatal.unwrap_or(false);
    if verify_fatal && verify == VerifyMode::Off {
        return bad(
            k("verify_fatal"),
            "has no effect with verify = \"off\"; set verify = \"inline\" or \"pass\"",
        );
    }
    if engine == EngineChoice::Null && verify != VerifyMode::Off {
        return bad(
            k("verify"),
            "cannot be checked with engine = \"null\", which moves no data (every read would \
             report a stale generation); set verify = \"off\" or use io_uring or psync",
        );
    }
    let allow_destroy = match &t.allow_destroy {
        Some(s) if s.trim().is_empty() => {
            return bad(
                k("allow_destroy"),
                "empty; name the device's serial or WWN (or, for loop devices, its path)",
            );
        }
        Some(s) => Some(s.trim().to_string()),
        None => None,
    };
    let force = t.force_overwrite_signatures.unwrap_or(false);
    if force && allow_destroy.is_none() {
        return bad(
            k("force_overwrite_signatures"),
            "only takes effect together with allow_destroy naming the device; set allow_destroy first",
        );
    }
    let max_errors = match &t.max_errors {
        Some(v) => Some(integer(
            &k("max_errors"),
            v,
            1,
            i64::MAX,
            "I/O errors before the target stops",
        )? as u64),
        None => None,
    };
    let loop_phases = t.loop_phases.unwrap_or(false);
    if t.phase.is_empty() {
        return bad(
            k("phase"),
            "no phases; add at least one [[target.phase]] (e.g. kind = \"soak\", profile = \"4k-random-read\")",
        );
    }
    let mut phases = Vec::new();
    for (j, p) in t.phase.iter().enumerate() {
        phases.push(phase(&format!("{key}.phase[{j}]"), p, stats_interval)?);
    }
    let last = phases.len() - 1;
    for (j, p) in phases.iter().enumerate() {
        if let PhaseSpec::Soak { duration: None, .. } = p {
            if j < last {
                return bad(
                    format!("{key}.phase[{j}].duration"),
                    format!(
                        "missing: a soak without duration runs until stopped, so phase[{}] would never run; give it a duration or make it the last phase",
                        j + 1
                    ),
                );
            }
            if loop_phases {
                return bad(
                    k("loop"),
                    format!(
                        "the last phase (phase[{j}]) is a soak without duration, which never ends, so the plan never loops; give it a duration or remove loop"
                    ),
                );
            }
        }
    }
    if let Some(bytes) = size {
        let region_bytes = ((bytes as f64 * region) as u64) / 512 * 512;
        let (mb, j) = max_block(&phases);
        if region_bytes < mb {
            let (kk, what) = if region < 1.0 {
                (
                    k("region"),
                    format!(
                        "the region ({} of {})",
                        format_size(region_bytes),
                        format_size(bytes)
                    ),
                )
            } else {
                (k("size"), format!("the file ({})", format_size(bytes)))
            };
            return bad(
                kk,
                format!(
                    "{what} is smaller than the {} blocks of phase[{j}]; make it larger",
                    format_size(mb)
                ),
            );
        }
    }
    Ok(TargetSpec {
        name: tname,
        path,
        size,
        region: Region(region),
        engine,
        allow_destroy,
        force_overwrite_signatures: force,
        direct: t.direct.unwrap_or(true),
        verify,
        verify_fatal,
        max_errors,
        phases,
        loop_phases,
    })
}

// ---------------------------------------------------------------------------------------------
// Everything

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

fn existing_file(key: &str, p: &Path) -> R<()> {
    match std::fs::metadata(p) {
        Ok(m) if m.is_file() => Ok(()),
        Ok(_) => bad(key, format!("{} is not a regular file", p.display())),
        Err(e) => bad(key, format!("{}: {e}", p.display())),
    }
}

fn health(raw: &RawHealth) -> R<HealthSettings> {
    let poll_interval = match &raw.poll_interval {
        Some(v) => duration_in(
            "health.poll_interval",
            v,
            Duration::from_millis(100),
            Duration::from_secs(86400),
        )?,
        None => Duration::from_secs(30),
    };
    let rescan_interval = match &raw.rescan_interval {
        Some(v) => duration_in(
            "health.rescan_interval",
            v,
            Duration::from_millis(100),
            Duration::from_secs(86400),
        )?,
        None => Duration::from_secs(60),
    };
    for (list, n) in [(&raw.include, "include"), (&raw.exclude, "exclude")] {
        for (i, m) in list.iter().enumerate() {
            matcher(&format!("health.{n}[{i}]"), m)?;
        }
    }
    if let Some(p) = &raw.ratings_file {
        existing_file("health.ratings_file", p)?;
    }
    let mut devices: Vec<DeviceRatingOverride> = Vec::new();
    for (i, d) in raw.device.iter().enumerate() {
        let key = format!("health.device[{i}]");
        let k = |s: &str| join(&key, s);
        let m = match &d.matcher {
            Some(m) => {
                matcher(&k("match"), m)?;
                m.clone()
            }
            None => {
                return bad(
                    k("match"),
                    "missing: a serial, controller name (nvme0), exact model, or re:REGEX on the model",
                );
            }
        };
        if devices.iter().any(|o| o.matcher == m) {
            return bad(
                k("match"),
                format!("\"{m}\" is already matched by an earlier health.device"),
            );
        }
        let rated_tbw_bytes = match &d.rated_tbw {
            Some(v) => {
                // Accept the spec-sheet spelling "17.52PBW" as well as "17.52PB".
                let v = match v {
                    Scalar::Str(s) => {
                        Scalar::Str(s.trim().strip_suffix('W').unwrap_or(s.trim()).to_string())
                    }
                    other => other.clone(),
                };
                let b = size(&k("rated_tbw"), &v)?;
                if b == 0 {
                    return bad(k("rated_tbw"), "a rated endurance of 0 bytes");
                }
                Some(b)
            }
            None => None,
        };
        let rated_dwpd = match &d.rated_dwpd {
            Some(v) => {
                let f = float(&k("rated_dwpd"), v)?;
                if f <= 0.0 || f > 1000.0 {
                    return bad(
                        k("rated_dwpd"),
                        format!("{f} is out of range (above 0, at most 1000 drive writes per day)"),
                    );
                }
                Some(f)
            }
            None => None,
        };
        let warranty_years = match &d.warranty_years {
            Some(v) => {
                let f = float(&k("warranty_years"), v)?;
                if f <= 0.0 || f > 50.0 {
                    return bad(
                        k("warranty_years"),
                        format!("{f} is out of range (above 0, at most 50 years)"),
                    );
                }
                Some(f)
            }
            None => None,
        };
        let capacity_bytes = match &d.capacity {
            Some(v) => {
                let b = size(&k("capacity"), v)?;
                if b == 0 {
                    return bad(k("capacity"), "a capacity of 0 bytes");
                }
                Some(b)
            }
            None => None,
        };
        if rated_dwpd.is_some() != warranty_years.is_some() {
            let missing = if rated_dwpd.is_some() {
                "warranty_years"
            } else {
                "rated_dwpd"
            };
            return bad(
                k(missing),
                "missing: rated_dwpd and warranty_years go together (endurance = DWPD × capacity × 365 × years)",
            );
        }
        if rated_tbw_bytes.is_none() && rated_dwpd.is_none() {
            return bad(
                k("rated_tbw"),
                "missing: give rated_tbw (e.g. \"17.52PB\"), or rated_dwpd with warranty_years",
            );
        }
        devices.push(DeviceRatingOverride {
            matcher: m,
            rated_tbw_bytes,
            rated_dwpd,
            warranty_years,
            capacity_bytes,
        });
    }
    Ok(HealthSettings {
        enabled: raw.enabled.unwrap_or(true),
        poll_interval,
        rescan_interval,
        include: raw.include.clone(),
        exclude: raw.exclude.clone(),
        ratings_file: raw.ratings_file.clone(),
        devices,
    })
}

pub fn settings(raw: &RawConfig) -> R<Settings> {
    let def = builtin_default();
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
        Some(v) => {
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
            s
        }
        None => def.log.level.clone(),
    };
    let health = health(&raw.health)?;

    let targets = if raw.target.is_empty() && raw.default_target == Some(false) {
        // Health polling only: the installed config's mode.
        Vec::new()
    } else if raw.target.is_empty() {
        // No [[target]]: the built-in default target, under the configured state directory.
        let mut t = def.targets[0].clone();
        t.path = dir.join("default-target.dat");
        vec![t]
    } else {
        let mut out: Vec<TargetSpec> = Vec::new();
        let mut names: HashMap<String, usize> = HashMap::new();
        let mut paths: HashMap<PathBuf, usize> = HashMap::new();
        for (i, t) in raw.target.iter().enumerate() {
            let spec = target(i, t, interval)?;
            if let Some(j) = names.insert(spec.name.clone(), i) {
                return bad(
                    format!("target[{i}].name"),
                    format!(
                        "\"{}\" is already the name of target[{j}]; names must be unique",
                        spec.name
                    ),
                );
            }
            if let Some(j) = paths.insert(normalise(&spec.path), i) {
                return bad(
                    format!("target[{i}].path"),
                    format!(
                        "{} is already the path of target[{j}]; two targets cannot share a file or device",
                        spec.path.display()
                    ),
                );
            }
            out.push(spec);
        }
        out
    };
    Ok(Settings {
        exporter: ExporterSettings {
            listen,
            web_config_file: raw.exporter.web_config_file.clone(),
            max_connections,
        },
        state: StateSettings {
            dir,
            checkpoint_interval,
        },
        stats: StatsSettings { interval },
        health,
        log: LogSettings { level },
        targets,
    })
}

/// Where a file that does not exist yet would be created: symlinks followed (a dangling one to
/// its target), the nearest existing ancestor canonicalised, and `..` in the rest applied, so
/// `/dev/shm/../x.dat` is `/dev/x.dat`.
pub(crate) fn resolve_for_create(path: &Path) -> PathBuf {
    let mut p = path.to_path_buf();
    // Follow a chain of (possibly dangling) symlinks at the last component, bounded like the
    // kernel's own limit.
    for _ in 0..40 {
        match std::fs::symlink_metadata(&p) {
            Ok(m) if m.file_type().is_symlink() => match std::fs::read_link(&p) {
                Ok(t) if t.is_absolute() => p = t,
                Ok(t) => p = p.parent().map(|d| d.join(&t)).unwrap_or(t),
                Err(_) => break,
            },
            _ => break,
        }
    }
    // The nearest existing ancestor, canonicalised, then the missing components lexically.
    let mut rest: Vec<std::ffi::OsString> = Vec::new();
    let mut base = p.clone();
    let mut resolved = loop {
        if let Ok(c) = std::fs::canonicalize(&base) {
            break c;
        }
        match (base.file_name(), base.parent()) {
            (Some(name), Some(parent)) => {
                rest.push(name.to_os_string());
                base = parent.to_path_buf();
            }
            _ => break base.clone(),
        }
    };
    for c in rest.iter().rev() {
        resolved.push(c);
    }
    // `..` and `.` that follow a missing directory, applied lexically.
    let mut out = PathBuf::new();
    for c in resolved.components() {
        match c {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    out
}
