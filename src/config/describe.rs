//! Human-readable rendering of a validated plan (`nvsoak check-config`) and of jobs
//! (`nvsoak profiles`).

use std::fmt::Write;
use std::time::Duration;

use super::{HealthSettings, Settings};
use crate::model::fmt::{fmt_bytes, fmt_capacity, fmt_datasheet_bytes, fmt_rate};
use crate::model::profiles::describe_access;
use crate::model::spec::*;
use crate::model::units::{format_duration, format_size};

/// `1G` when exact in binary units (the config's own notation), otherwise the bytes with their
/// size in IEC units (`model::fmt`'s convention): `1000000 bytes (976.56 KiB)`.
pub fn bytes(b: u64) -> String {
    let f = format_size(b);
    if f.ends_with(|c: char| c.is_ascii_alphabetic()) || b < 1024 {
        return f;
    }
    format!("{b} bytes ({})", fmt_bytes(b as f64))
}

/// A byte rate: `200M/s` when exact in binary units, otherwise in SI units as drive makers
/// rate throughput: `200000000 bytes/s (200 MB/s)`.
fn byte_rate(b: u64) -> String {
    let f = format_size(b);
    if f.ends_with(|c: char| c.is_ascii_alphabetic()) || b < 1024 {
        return format!("{f}/s");
    }
    format!("{b} bytes/s ({})", fmt_rate(b as f64))
}

fn dur(d: Duration) -> String {
    format_duration(d)
}

fn pct(f: f64) -> String {
    let p = f * 100.0;
    if (p - p.round()).abs() < 1e-9 {
        format!("{}%", p.round() as i64)
    } else {
        format!("{p:.2}%")
    }
}

fn num(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        format!("{}", x as i64)
    } else {
        format!("{x}")
    }
}

pub fn rate(r: &Option<RateLimit>) -> String {
    match r {
        None => "none (as fast as the target goes)".into(),
        Some(RateLimit::Iops(x)) => format!("{} IOPS", num(*x)),
        Some(RateLimit::BytesPerSec(b)) => byte_rate(*b as u64),
        Some(RateLimit::PercentOfMax(p)) => format!(
            "{}% of the measured maximum (from a preceding sweep of this job, or a calibration run)",
            num(*p)
        ),
    }
}

/// A job as an indented block of `key value` lines.
pub fn job(out: &mut String, indent: &str, j: &JobSpec) {
    let _ = writeln!(out, "{indent}job {}", j.name);
    let i = format!("{indent}  ");
    let _ = writeln!(
        out,
        "{i}{:<12} {}% read / {}% write",
        "mix",
        j.read_pct,
        100 - j.read_pct as u32
    );
    let bs = if j.bs.entries.len() > 1 {
        format!("{} (weighted; mean {:.1}k)", j.bs, j.bs.mean() / 1024.0)
    } else {
        j.bs.to_string()
    };
    let _ = writeln!(out, "{i}{:<12} {bs}", "bs");
    let _ = writeln!(out, "{i}{:<12} {}", "access", describe_access(&j.access));
    let _ = writeln!(out, "{i}{:<12} {}", "iodepth", j.iodepth);
    let _ = writeln!(out, "{i}{:<12} {}", "workers", j.workers);
    let _ = writeln!(
        out,
        "{i}{:<12} {}",
        "in flight",
        j.iodepth as u64 * j.workers as u64
    );
    let _ = writeln!(out, "{i}{:<12} {}", "rate", rate(&j.rate));
    let _ = writeln!(out, "{i}{:<12} {}", "description", j.description);
}

fn steady(s: &SteadyConfig) -> String {
    let crit = match s.criterion {
        SteadyCriterion::Snia => format!(
            "snia: range ≤ {} and slope excursion ≤ {} of the window average",
            pct(s.max_range),
            pct(s.max_slope_excursion)
        ),
        SteadyCriterion::FioIops => format!(
            "iops: every round within {} of the window mean",
            pct(s.max_range)
        ),
        SteadyCriterion::FioIopsSlope => format!(
            "iops_slope: |least-squares slope| ≤ {} of the mean per round",
            pct(s.max_slope_excursion)
        ),
    };
    format!(
        "{crit}, over a window of {} rounds of {}",
        s.window,
        dur(s.round)
    )
}

/// Phase `j` (0-based) of the plan, numbered from 1 as the log, `state show`, the status page
/// and the results file number it.
fn phase(out: &mut String, j: usize, p: &PhaseSpec) {
    let n = j + 1;
    match p {
        PhaseSpec::Precondition {
            passes,
            block_size,
            iodepth,
            workers,
        } => {
            let _ = writeln!(
                out,
                "    phase {n} precondition: {} of sequential {} writes over the region, iodepth {iodepth}, workers {workers}",
                if *passes == 1 {
                    "1 pass".to_string()
                } else {
                    format!("{passes} passes")
                },
                format_size(*block_size as u64)
            );
        }
        PhaseSpec::Sweep {
            job: jb,
            max_duration,
            point_duration,
            points,
        } => {
            let pts: Vec<String> = points.iter().map(|p| format!("{p}%")).collect();
            let total = *max_duration + *point_duration * points.len() as u32;
            let _ = writeln!(
                out,
                "    phase {n} sweep: an uncontrolled run of {} to find the maximum IOPS, then {} for {} each (about {} in all)",
                dur(*max_duration),
                pts.join(", "),
                dur(*point_duration),
                dur(Duration::from_secs(total.as_secs()))
            );
            job(out, "      ", jb);
        }
        PhaseSpec::Soak {
            jobs,
            duration,
            rotate,
            steady: st,
        } => {
            let d = match duration {
                Some(d) => format!("for {}", dur(*d)),
                None => "until stopped".into(),
            };
            let r = match rotate {
                Some(r) => format!(
                    ", rotating through {} profiles every {}",
                    jobs.len(),
                    dur(*r)
                ),
                None => String::new(),
            };
            let _ = writeln!(out, "    phase {n} soak {d}{r}");
            let _ = writeln!(out, "      steady state: {}", steady(st));
            for jb in jobs {
                job(out, "      ", jb);
            }
        }
        PhaseSpec::Purge { .. } | PhaseSpec::SelfTest { .. } => {
            if let Some(line) = crate::model::steps::plan_line(p) {
                let _ = writeln!(out, "    phase {n} {line}");
            }
        }
    }
}

fn target(out: &mut String, t: &TargetSpec) {
    let _ = writeln!(out, "  target {}", t.name);
    let kind = match t.size {
        Some(s) => format!("file, {} preallocated", bytes(s)),
        None => "block device".into(),
    };
    if t.is_spanning() {
        for (m, p) in t.members.iter().enumerate() {
            let _ = writeln!(
                out,
                "    {:<26} {} (block device)",
                format!("paths[{m}]"),
                p.display()
            );
        }
    } else {
        let _ = writeln!(out, "    {:<26} {} ({kind})", "path", t.path.display());
    }
    let region = match t.size {
        Some(s) => format!(
            "{} ({})",
            pct(t.region.0),
            bytes(((s as f64 * t.region.0) as u64) / 512 * 512)
        ),
        None => format!("{} of the device", pct(t.region.0)),
    };
    let _ = writeln!(out, "    {:<26} {region}", "region");
    let engine = match t.engine {
        EngineChoice::Auto => "auto (io_uring, falling back to psync when refused)".into(),
        e => e.as_str().to_string(),
    };
    let _ = writeln!(out, "    {:<26} {engine}", "engine");
    let _ = writeln!(out, "    {:<26} {}", "direct (O_DIRECT)", yes(t.direct));
    let v = match t.verify {
        VerifyMode::Off => "off",
        VerifyMode::Inline => "inline",
        VerifyMode::Pass => "pass",
    };
    let _ = writeln!(out, "    {:<26} {v}", "verify");
    let _ = writeln!(out, "    {:<26} {}", "verify_fatal", yes(t.verify_fatal));
    let _ = writeln!(
        out,
        "    {:<26} {}",
        "max_errors",
        t.max_errors
            .map(|m| m.to_string())
            .unwrap_or_else(|| "unlimited".into())
    );
    let _ = writeln!(
        out,
        "    {:<26} {}",
        "allow_destroy",
        if t.allow_destroy_list.is_empty() {
            t.allow_destroy.clone().unwrap_or_else(|| "(none)".into())
        } else {
            t.allow_destroy_list.join(", ")
        }
    );
    let _ = writeln!(
        out,
        "    {:<26} {}",
        "force_overwrite_signatures",
        yes(t.force_overwrite_signatures)
    );
    let _ = writeln!(out, "    {:<26} {}", "loop", yes(t.loop_phases));
    let _ = writeln!(
        out,
        "    {:<26} {}",
        "gates",
        crate::model::verdict::describe(&t.gates)
    );
    for (j, p) in t.phases.iter().enumerate() {
        phase(out, j, p);
    }
}

fn yes(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}

fn list(v: &[String], empty: &str) -> String {
    if v.is_empty() {
        empty.to_string()
    } else {
        v.join(", ")
    }
}

/// The whole resolved plan.
pub fn plan(s: &Settings) -> String {
    let mut out = String::new();
    daemon_sections(&mut out, s);
    health_section(&mut out, &s.health);
    targets_section(&mut out, s);
    out
}

/// `[exporter]`, `[state]`, `[stats]` and `[log]`.
fn daemon_sections(w: &mut String, s: &Settings) {
    let _ = writeln!(w, "exporter");
    let _ = writeln!(w, "  {:<20} {}", "listen", s.exporter.listen);
    let _ = writeln!(
        w,
        "  {:<20} {}",
        "web_config_file",
        s.exporter
            .web_config_file
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| "(none: plain HTTP, no auth)".into())
    );
    let _ = writeln!(
        w,
        "  {:<20} {}",
        "max_connections", s.exporter.max_connections
    );
    let _ = writeln!(w, "state");
    let _ = writeln!(w, "  {:<20} {}", "dir", s.state.dir.display());
    let _ = writeln!(
        w,
        "  {:<20} {}",
        "checkpoint_interval",
        dur(s.state.checkpoint_interval)
    );
    let _ = writeln!(
        w,
        "  {:<20} {}",
        "max_verify_memory",
        match s.state.max_verify_memory {
            crate::model::verify_cost::VerifyBudget::Bytes(b) => bytes(b),
            crate::model::verify_cost::VerifyBudget::ShareOfMemory(f) =>
                format!("{}% of the host's memory", num(f * 100.0)),
        }
    );
    let _ = writeln!(w, "stats");
    let _ = writeln!(w, "  {:<20} {}", "interval", dur(s.stats.interval));
    let _ = writeln!(w, "log");
    let _ = writeln!(w, "  {:<20} {}", "level", s.log.level);
}

/// `[health]` with its per-device overrides.
fn health_section(w: &mut String, h: &HealthSettings) {
    let _ = writeln!(w, "health");
    let _ = writeln!(w, "  {:<20} {}", "enabled", yes(h.enabled));
    let _ = writeln!(w, "  {:<20} {}", "poll_interval", dur(h.poll_interval));
    let _ = writeln!(w, "  {:<20} {}", "rescan_interval", dur(h.rescan_interval));
    let _ = writeln!(
        w,
        "  {:<20} {}",
        "include",
        list(&h.include, "(all controllers)")
    );
    let _ = writeln!(w, "  {:<20} {}", "exclude", list(&h.exclude, "(none)"));
    let _ = writeln!(
        w,
        "  {:<20} {}",
        "ratings_file",
        h.ratings_file
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| "(built-in drive ratings table)".into())
    );
    let _ = writeln!(
        w,
        "  {:<20} {}",
        "latency_monitor",
        match &h.latency_monitor {
            None => "off (the drives' OCP latency monitor is left as it is)".to_string(),
            Some(c) => format!(
                "enabled on OCP drives (Set Features C5h): thresholds {} ms, bucket timer {} min, minimum window {} ms",
                c.thresholds
                    .iter()
                    .map(|t| (u32::from(*t) * 5).to_string())
                    .collect::<Vec<_>>()
                    .join("/"),
                u32::from(c.active_bucket_timer_threshold) * 5,
                u32::from(c.active_latency_min_window) * 100
            ),
        }
    );
    for d in &h.devices {
        let mut parts = Vec::new();
        if let Some(b) = d.rated_tbw_bytes {
            // The datasheet's figure, in its decimal units.
            parts.push(format!(
                "rated_tbw {} ({b} bytes, as the datasheet rates it)",
                fmt_datasheet_bytes(b as f64)
            ));
        }
        if let Some(x) = d.rated_dwpd {
            parts.push(format!("rated_dwpd {}", num(x)));
        }
        if let Some(x) = d.warranty_years {
            parts.push(format!("warranty_years {}", num(x)));
        }
        if let Some(b) = d.capacity_bytes {
            parts.push(format!("capacity {}", fmt_capacity(b as f64)));
        }
        let _ = writeln!(w, "  device {:<13} {}", d.matcher, parts.join(", "));
    }
}

/// The targets, each with its plan.
fn targets_section(w: &mut String, s: &Settings) {
    if s.targets.is_empty() {
        let _ = writeln!(
            w,
            "targets (0): none, default_target = false: health polling only"
        );
    } else {
        let _ = writeln!(w, "targets ({})", s.targets.len());
    }
    for t in &s.targets {
        target(w, t);
    }
}
