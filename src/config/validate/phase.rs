//! Phases: `kind` and which keys apply to it, then a precondition, a sweep or a soak (with its
//! job or rotation of profiles, phase-level overrides and steady-state settings).

use std::time::Duration;

use super::super::raw::{RawPhase, Scalar};
use super::job::{inline_job, profile};
use super::scalar::{duration_in, fmt_dur, integer, one_of, percent_str, size};
use super::values::{iodepth, rate, workers};
use super::{MAX_BLOCK, R, bad, join};
use crate::model::spec::{JobSpec, PhaseSpec, SteadyConfig, SteadyCriterion};
use crate::model::units::format_size;

const DEFAULT_POINTS: [u32; 8] = [10, 50, 70, 80, 90, 100, 110, 120];

#[derive(Clone, Copy, PartialEq)]
pub(super) enum Kind {
    Precondition,
    Sweep,
    Soak,
    Purge,
    SelfTest,
}

pub(super) fn kind_name(k: Kind) -> &'static str {
    match k {
        Kind::Precondition => "precondition",
        Kind::Sweep => "sweep",
        Kind::Soak => "soak",
        Kind::Purge => "purge",
        Kind::SelfTest => "self-test",
    }
}

/// A phase key, whether it is set, the kinds it applies to, and why (for the error).
type Rule = (&'static str, bool, &'static [Kind], &'static str);

/// Every phase key that applies to some kinds only.
fn applicability(p: &RawPhase) -> [Rule; 19] {
    use Kind::*;
    [
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
        ("method", p.method.is_some(), &[Purge], ""),
        ("test", p.test.is_some(), &[SelfTest], ""),
        ("timeout", p.timeout.is_some(), &[Purge, SelfTest], ""),
    ]
}

fn check_applicable(key: &str, p: &RawPhase, kind: Kind) -> R<()> {
    for (k, is_set, kinds, why) in applicability(p) {
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

pub(super) fn phase(key: &str, p: &RawPhase, stats_interval: Duration) -> R<PhaseSpec> {
    let kind = match p.kind.as_deref() {
        Some(k) => one_of(
            &join(key, "kind"),
            k,
            &[
                ("precondition", Kind::Precondition),
                ("sweep", Kind::Sweep),
                ("soak", Kind::Soak),
                ("purge", Kind::Purge),
                ("self-test", Kind::SelfTest),
            ],
        )?,
        None => {
            return bad(
                join(key, "kind"),
                "missing: precondition, sweep, soak, purge or self-test",
            );
        }
    };
    check_applicable(key, p, kind)?;
    match kind {
        Kind::Precondition => precondition(key, p),
        Kind::Sweep => sweep(key, p),
        Kind::Soak => soak(key, p, stats_interval),
        Kind::Purge => super::steps::purge(key, p),
        Kind::SelfTest => super::steps::self_test(key, p),
    }
}

fn precondition(key: &str, p: &RawPhase) -> R<PhaseSpec> {
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

fn sweep(key: &str, p: &RawPhase) -> R<PhaseSpec> {
    let job = single_job(key, p, Kind::Sweep)?;
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
        Some(list) => sweep_points(key, list)?,
    };
    Ok(PhaseSpec::Sweep {
        job,
        max_duration,
        point_duration,
        points,
    })
}

/// A sweep's `points`: distinct whole percentages of the measured maximum, 1% to 1000%.
fn sweep_points(key: &str, list: &[Scalar]) -> R<Vec<u32>> {
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
            other => integer(&k, other, i64::MIN, i64::MAX, "percent of the maximum")?,
        };
        if !(1..=1000).contains(&n) {
            return bad(
                k,
                format!("{n}% is out of range (1% to 1000% of the measured maximum)"),
            );
        }
        if out.contains(&(n as u32)) {
            return bad(k, format!("{n}% is listed twice"));
        }
        out.push(n as u32);
    }
    Ok(out)
}

fn soak(key: &str, p: &RawPhase, stats_interval: Duration) -> R<PhaseSpec> {
    let jobs = soak_jobs(key, p)?;
    let rotate = soak_rotate(key, p, jobs.len())?;
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

/// A soak's jobs: a rotation of `profiles`, or the single `profile` / `job`.
fn soak_jobs(key: &str, p: &RawPhase) -> R<Vec<JobSpec>> {
    let Some(list) = &p.profiles else {
        return Ok(vec![single_job(key, p, Kind::Soak)?]);
    };
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
    Ok(jobs)
}

/// A soak's `rotate`: required for a rotation of two or more jobs, refused otherwise.
fn soak_rotate(key: &str, p: &RawPhase, jobs: usize) -> R<Option<Duration>> {
    match &p.rotate {
        Some(v) => {
            if jobs < 2 {
                return bad(
                    join(key, "rotate"),
                    "rotation needs profiles = [\"a\", \"b\", ...] with at least two entries",
                );
            }
            Ok(Some(duration_in(
                &join(key, "rotate"),
                v,
                Duration::from_millis(100),
                Duration::from_secs(365 * 86400),
            )?))
        }
        None if jobs > 1 => bad(
            join(key, "rotate"),
            "missing: a rotation of profiles needs rotate = \"1h\" (how long each runs before the next)",
        ),
        None => Ok(None),
    }
}
