//! Jobs: an inline `job = { ... }` table validated into a [`JobSpec`], or a built-in profile
//! looked up by name.

use super::super::ConfigError;
use super::super::raw::{RawJob, Scalar};
use super::scalar::{float, name, one_of, percent_str};
use super::values::{block_sizes, iodepth, rate, skew, workers};
use super::{R, bad, join};
use crate::model::profiles;
use crate::model::spec::{Access, JobSpec, Skew};

pub(super) fn inline_job(key: &str, j: &RawJob) -> R<JobSpec> {
    let jname = job_name(key, j)?;
    let read = read_pct(key, j)?;
    let bs = match &j.bs {
        Some(v) => block_sizes(&join(key, "bs"), v)?,
        None => {
            return bad(
                join(key, "bs"),
                "missing: the block size (\"4k\") or a weighted mix (\"4k:60,8k:40\")",
            );
        }
    };
    let access = access(key, j)?;
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

/// The inline job's name: label-safe and not a built-in profile's; `inline` when unset.
fn job_name(key: &str, j: &RawJob) -> R<String> {
    let Some(n) = &j.name else {
        return Ok("inline".to_string());
    };
    let n = name(&join(key, "name"), n)?;
    if profiles::lookup(&n).is_some() {
        return bad(
            join(key, "name"),
            format!(
                "\"{n}\" is a built-in profile; give the inline job another name, or use profile = \"{n}\" with overrides"
            ),
        );
    }
    Ok(n)
}

/// The required read percentage, a whole number from 0 to 100.
fn read_pct(key: &str, j: &RawJob) -> R<u8> {
    let Some(v) = &j.read else {
        return bad(
            join(key, "read"),
            "missing: the read percentage of the job (0 = all writes, 100 = all reads)",
        );
    };
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
    Ok(p as u8)
}

/// `access` and `skew`: random (uniform unless skewed) or sequential (no skew allowed).
fn access(key: &str, j: &RawJob) -> R<Access> {
    let sequential = match j.access.as_deref() {
        None => false,
        Some(a) => one_of(
            &join(key, "access"),
            a,
            &[("random", false), ("sequential", true), ("seq", true)],
        )?,
    };
    if sequential {
        if j.skew.is_some() {
            return bad(
                join(key, "skew"),
                "skew only applies to random access (this job is sequential)",
            );
        }
        return Ok(Access::Sequential);
    }
    let skew = match &j.skew {
        Some(s) => skew(&join(key, "skew"), s)?,
        None => Skew::Uniform,
    };
    Ok(Access::Random { skew })
}

pub(super) fn profile(key: &str, p: &str) -> R<JobSpec> {
    profiles::lookup(p).ok_or_else(|| {
        let hint = profiles::suggest(p)
            .map(|s| format!(" (did you mean \"{s}\"?)"))
            .unwrap_or_else(|| " (`nvsoak profiles` lists them)".into());
        ConfigError::invalid(key, format!("unknown profile \"{p}\"{hint}"))
    })
}
