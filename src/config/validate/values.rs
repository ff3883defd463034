//! Workload values shared by inline jobs and phase overrides: block sizes and weighted mixes,
//! rate limits, access skews, iodepth and worker counts.

use super::super::ConfigError;
use super::super::raw::Scalar;
use super::scalar::{integer, percent_str, size};
use super::{MAX_BLOCK, R, bad};
use crate::model::spec::{BlockSizeMix, RateLimit, Skew};
use crate::model::units::{UnitError, format_size, parse_size};
use crate::util::suggest::closest;

/// `"4k"`, `4096`, or a weighted mix `"4k:60,8k:30,64k:10"`.
pub fn block_sizes(key: &str, v: &Scalar) -> R<BlockSizeMix> {
    let mut entries: Vec<(u32, u32)> = Vec::new();
    for (b, w) in mix_parts(key, v)? {
        let bytes = block_size(key, &b)?;
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

/// The `(size, weight)` entries of a block size or mix, sizes not yet checked.
fn mix_parts(key: &str, v: &Scalar) -> R<Vec<(Scalar, u32)>> {
    let s = match v {
        Scalar::Int(_) => return Ok(vec![(v.clone(), 1)]),
        Scalar::Str(s) => s,
        other => {
            return bad(
                key,
                format!("{other} is not a block size like \"4k\" or a mix like \"4k:60,8k:40\""),
            );
        }
    };
    let mut out = Vec::new();
    for part in s.split(',') {
        let part = part.trim();
        if part.is_empty() {
            return bad(key, format!("\"{s}\" has an empty entry"));
        }
        let (b, w) = match part.split_once(':') {
            Some((b, w)) => (b, mix_weight(key, part, w)?),
            None => (part, 1),
        };
        out.push((Scalar::Str(b.trim().to_string()), w));
    }
    Ok(out)
}

/// The weight after `:` in one entry of a mix.
fn mix_weight(key: &str, part: &str, w: &str) -> R<u32> {
    match w.trim().parse::<u32>() {
        Ok(w) if w > 0 => Ok(w),
        _ => bad(
            key,
            format!("weight \"{w}\" in \"{part}\" is not a positive whole number"),
        ),
    }
}

/// One block size: non-zero, sector-aligned, at most [`MAX_BLOCK`].
fn block_size(key: &str, b: &Scalar) -> R<u32> {
    let bytes = size(key, b)?;
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
    Ok(bytes as u32)
}

/// `"5000iops"`, `"50k iops"`, `"200MiB/s"`, `"200e6/s"`, `"50%"`.
pub fn rate(key: &str, v: &Scalar) -> R<RateLimit> {
    let hint = "write a rate like \"5000iops\", \"200MiB/s\", \"200e6/s\" or \"50%\" (of the measured maximum)";
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
        // The same units as every size, and the same refusal of `MB`, with `/s` in its fix.
        let bytes = parse_size(b).map_err(|e| match e {
            UnitError::AmbiguousSizeUnit(a) => ConfigError::invalid(key, a.message("/s")),
            e => ConfigError::invalid(key, format!("{e}; {hint}")),
        })?;
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

pub(super) fn iodepth(key: &str, v: &Scalar) -> R<u32> {
    Ok(integer(key, v, 1, 4096, "iodepth, I/Os in flight per worker")? as u32)
}

pub(super) fn workers(key: &str, v: &Scalar) -> R<u32> {
    Ok(integer(key, v, 1, 256, "workers, threads per job")? as u32)
}
