//! Targets: name, path (file or block device), size and region, engine, verification, the
//! destroy opt-in, error budget and phases; plus where a not-yet-existing file would be created.

use std::os::unix::fs::FileTypeExt;
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use super::super::raw::RawTarget;
use super::phase::phase;
use super::scalar::{integer, name, one_of, percent, size};
use super::{R, bad, join};
use crate::model::spec::{EngineChoice, PhaseSpec, Region, TargetSpec, VerifyMode};
use crate::model::units::format_size;

/// Lexically normalised absolute path, for duplicate detection.
pub(super) fn normalise(p: &Path) -> PathBuf {
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
            PhaseSpec::Purge { .. } | PhaseSpec::SelfTest { .. } => 0,
        };
        if b > best.0 {
            best = (b, j);
        }
    }
    best
}

pub(super) fn target(i: usize, t: &RawTarget, stats_interval: Duration) -> R<TargetSpec> {
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
    if t.path.is_some() && t.paths.is_some() {
        return bad(
            k("paths"),
            "set together with path; give either path (one file or block device) or paths (several block devices), not both",
        );
    }
    let members = members(&key, t)?;
    let path = match (&t.path, members.first()) {
        (None, Some(first)) => first.clone(),
        (Some(p), None) if !p.as_os_str().is_empty() => p.clone(),
        _ => {
            return bad(
                k("path"),
                "missing: a file (created and preallocated to `size`) or a block device (or paths, several block devices)",
            );
        }
    };
    let (engine, verify, verify_fatal) = engine_and_verify(&key, t)?;
    let is_block = is_block_device(&key, &path, engine)?;
    let size = file_size(&key, t, &path, is_block)?;
    let region = region(&key, t)?;
    let (allow_destroy, allow_destroy_list, force) = destroy(&key, t, !members.is_empty())?;
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
    let phases = phases(&key, t, stats_interval, loop_phases)?;
    super::steps::check_target(
        &key,
        is_block,
        allow_destroy.is_some() || !allow_destroy_list.is_empty(),
        verify,
        loop_phases,
        &phases,
    )?;
    if let Some(bytes) = size {
        check_region_fits(&key, bytes, region, &phases)?;
    }
    if !members.is_empty() {
        check_spanning(&key, verify, &phases)?;
    }
    Ok(TargetSpec {
        name: tname,
        path,
        size,
        region: Region(region),
        engine,
        allow_destroy,
        members,
        allow_destroy_list,
        force_overwrite_signatures: force,
        direct: t.direct.unwrap_or(true),
        verify,
        verify_fatal,
        max_errors,
        phases,
        loop_phases,
        gates: Default::default(),
    })
}

/// Whether `path` is a block device (else a regular file, existing or to be created). A missing
/// path under /dev (other than /dev/shm) is refused: nvsoak does not create files there. The
/// passthrough engines also take a character device, an NVMe namespace's generic device,
/// which stands for its block device (resolved and checked when the target opens).
fn is_block_device(key: &str, path: &Path, engine: EngineChoice) -> R<bool> {
    let k = |s: &str| join(key, s);
    match std::fs::metadata(path) {
        Ok(m) if m.file_type().is_block_device() => Ok(true),
        Ok(m) if m.file_type().is_char_device() && engine.is_passthru() => Ok(true),
        Ok(m) if m.is_file() => Ok(false),
        Ok(m) if m.is_dir() => bad(
            k("path"),
            format!("{} is a directory; name a file inside it", path.display()),
        ),
        Ok(_) => bad(
            k("path"),
            format!(
                "{} is neither a regular file nor a block device{}",
                path.display(),
                crate::engine::passthru::generic_node_hint(path)
            ),
        ),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            // Judge where the file would really be created: `..` and symlinks (a dangling one
            // included) resolved, not the path's spelling.
            let real = crate::safety::resolve_for_create(path);
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
            Ok(false)
        }
        Err(e) => bad(k("path"), format!("cannot inspect {}: {e}", path.display())),
    }
}

/// `size`: required for a file target (non-zero, sector-aligned), refused for a block device.
fn file_size(key: &str, t: &RawTarget, path: &Path, is_block: bool) -> R<Option<u64>> {
    let k = |s: &str| join(key, s);
    match (&t.size, is_block) {
        (Some(_), true) => bad(
            k("size"),
            format!(
                "{} is a block device, which has its own size; remove size (use region to exercise part of it)",
                path.display()
            ),
        ),
        (None, false) => bad(
            k("size"),
            format!(
                "missing: {} is a file target, which nvsoak creates and preallocates; give its size, e.g. size = \"1GiB\"",
                path.display()
            ),
        ),
        (None, true) => Ok(None),
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
            Ok(Some(b))
        }
    }
}

/// `region` as a fraction of the target (1.0 when unset).
fn region(key: &str, t: &RawTarget) -> R<f64> {
    let Some(v) = &t.region else {
        return Ok(1.0);
    };
    let k = join(key, "region");
    let p = percent(&k, v)?;
    if p <= 0.0 || p > 100.0 {
        return bad(k, format!("{p}% is out of range (above 0%, at most 100%)"));
    }
    Ok(p / 100.0)
}

/// `engine`, `verify` and `verify_fatal`, and the combinations that make no sense.
fn engine_and_verify(key: &str, t: &RawTarget) -> R<(EngineChoice, VerifyMode, bool)> {
    let k = |s: &str| join(key, s);
    let engine = match t.engine.as_deref() {
        None => EngineChoice::Auto,
        // Each of `config::ENGINES` with the choice it names (the same order).
        Some(e) => one_of(
            &k("engine"),
            e,
            &super::super::ENGINES
                .iter()
                .copied()
                .zip(EngineChoice::ALL)
                .collect::<Vec<_>>(),
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
    if engine == EngineChoice::IoUringPoll && t.direct == Some(false) {
        return bad(
            k("direct"),
            "must be true with engine = \"io_uring_poll\": polled completions need O_DIRECT \
             (Linux refuses IOPOLL on buffered I/O); set direct = true or engine = \"io_uring\"",
        );
    }
    Ok((engine, verify, verify_fatal))
}

/// `allow_destroy` (trimmed, never empty) and `force_overwrite_signatures`, which needs it. A
/// list is for a target with `paths` (every member named, each name naming a member, checked
/// when the members are opened); a target with `path` takes one string (or a list of one).
/// Returns the single name (`path`) or the list (`paths`).
fn destroy(key: &str, t: &RawTarget, spanning: bool) -> R<(Option<String>, Vec<String>, bool)> {
    use super::super::raw::OneOrMany;
    let k = |s: &str| join(key, s);
    let names: Vec<(String, String)> = match &t.allow_destroy {
        None => Vec::new(),
        Some(OneOrMany::One(s)) => vec![(k("allow_destroy"), s.clone())],
        Some(OneOrMany::Many(v)) if v.is_empty() => {
            return bad(
                k("allow_destroy"),
                "an empty list; name every member's serial or WWN (or, for loop devices, its path)",
            );
        }
        Some(OneOrMany::Many(v)) => v
            .iter()
            .enumerate()
            .map(|(m, s)| (format!("{}[{m}]", k("allow_destroy")), s.clone()))
            .collect(),
    };
    let mut list: Vec<String> = Vec::new();
    for (nk, s) in &names {
        let s = s.trim();
        if s.is_empty() {
            return bad(
                nk.clone(),
                "empty; name the device's serial or WWN (or, for loop devices, its path)",
            );
        }
        if let Some(j) = list.iter().position(|x| x == s) {
            return bad(
                nk.clone(),
                format!("\"{s}\" is already allow_destroy[{j}]; name each device once"),
            );
        }
        list.push(s.to_string());
    }
    if !spanning && list.len() > 1 {
        return bad(
            k("allow_destroy"),
            format!(
                "a list of {} names for a target with one path; name that device's serial or WWN (a list is for a target with paths)",
                list.len()
            ),
        );
    }
    let force = t.force_overwrite_signatures.unwrap_or(false);
    if force && list.is_empty() {
        return bad(
            k("force_overwrite_signatures"),
            "only takes effect together with allow_destroy naming the device; set allow_destroy first",
        );
    }
    if spanning {
        Ok((None, list, force))
    } else {
        Ok((list.pop(), Vec::new(), force))
    }
}

/// `paths`: at least two block devices, none of them twice (by path or device number); empty
/// when the target has `path`.
fn members(key: &str, t: &RawTarget) -> R<Vec<PathBuf>> {
    use std::os::unix::fs::MetadataExt;
    let Some(paths) = &t.paths else {
        return Ok(Vec::new());
    };
    let k = |s: &str| join(key, s);
    if paths.len() < 2 {
        return bad(
            k("paths"),
            format!(
                "{} device(s); paths spans at least two block devices (for one, use path)",
                paths.len()
            ),
        );
    }
    let mut seen: Vec<(PathBuf, u64)> = Vec::new();
    for (m, p) in paths.iter().enumerate() {
        let mk = format!("{}[{m}]", k("paths"));
        if p.as_os_str().is_empty() {
            return bad(mk, "empty; name a block device");
        }
        let meta = match std::fs::metadata(p) {
            Ok(m) => m,
            Err(e) => {
                return bad(
                    mk,
                    format!(
                        "{}: {e}; every member of paths must be a block device that exists",
                        p.display()
                    ),
                );
            }
        };
        if !meta.file_type().is_block_device() {
            return bad(
                mk,
                format!(
                    "{} is not a block device; paths names block devices only (a file target takes path and size)",
                    p.display()
                ),
            );
        }
        let norm = normalise(p);
        if let Some(j) = seen
            .iter()
            .position(|(q, rdev)| *q == norm || *rdev == meta.rdev())
        {
            return bad(
                mk,
                format!(
                    "{} is the same device as paths[{j}] ({}); each member must be another device",
                    p.display(),
                    paths[j].display()
                ),
            );
        }
        seen.push((norm, meta.rdev()));
    }
    Ok(paths.clone())
}

/// What a target spanning several devices does not do (yet): verification (one generation map
/// per target), and purges and self-tests (one controller's commands).
fn check_spanning(key: &str, verify: VerifyMode, phases: &[PhaseSpec]) -> R<()> {
    if verify != VerifyMode::Off {
        return bad(
            join(key, "verify"),
            "not supported on a target with paths (several devices) yet; set verify = \"off\" or give each device its own target",
        );
    }
    for (j, p) in phases.iter().enumerate() {
        if matches!(p, PhaseSpec::Purge { .. } | PhaseSpec::SelfTest { .. }) {
            return bad(
                format!("{key}.phase[{j}].kind"),
                format!(
                    "\"{}\" acts on one controller and is not supported on a target with paths; run it in a target of each device",
                    p.kind()
                ),
            );
        }
    }
    Ok(())
}

/// The target's phases; a soak without duration may only be the last, and never with `loop`.
fn phases(
    key: &str,
    t: &RawTarget,
    stats_interval: Duration,
    loop_phases: bool,
) -> R<Vec<PhaseSpec>> {
    if t.phase.is_empty() {
        return bad(
            join(key, "phase"),
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
                    join(key, "loop"),
                    format!(
                        "the last phase (phase[{j}]) is a soak without duration, which never ends, so the plan never loops; give it a duration or remove loop"
                    ),
                );
            }
        }
    }
    Ok(phases)
}

/// A file target's region must hold the largest block of any phase.
fn check_region_fits(key: &str, bytes: u64, region: f64, phases: &[PhaseSpec]) -> R<()> {
    let region_bytes = ((bytes as f64 * region) as u64) / 512 * 512;
    let (mb, j) = max_block(phases);
    if region_bytes >= mb {
        return Ok(());
    }
    let (kk, what) = if region < 1.0 {
        (
            join(key, "region"),
            format!(
                "the region ({} of {})",
                format_size(region_bytes),
                format_size(bytes)
            ),
        )
    } else {
        (
            join(key, "size"),
            format!("the file ({})", format_size(bytes)),
        )
    };
    bad(
        kk,
        format!(
            "{what} is smaller than the {} blocks of phase[{j}]; make it larger",
            format_size(mb)
        ),
    )
}
