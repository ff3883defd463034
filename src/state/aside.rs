//! The one policy for moving a record out of the way: `<path>.<why>-<unix time>[-<n>]`, never
//! over an existing file, the directory fsynced after. The checkpoint (with the sidecars it
//! names), the results files and the known-drives list all leave their place through here;
//! nothing in `state` deletes a checkpoint.

use std::fs;
use std::path::{Path, PathBuf};

use super::sidecar::is_sidecar;
use super::{CHECKPOINT_FILE, StateError, fsync_dir, io_err, now_unix, read};

fn unique_aside(path: &Path, why: &str) -> PathBuf {
    let ts = now_unix() as u64;
    let base = format!("{}.{why}-{ts}", path.display());
    let mut p = PathBuf::from(&base);
    let mut n = 1;
    while p.exists() {
        p = PathBuf::from(format!("{base}-{n}"));
        n += 1;
    }
    p
}

/// Move one record file aside, never over an existing file: `path` becomes
/// `<path>.{why}-<unix time>` (with `-<n>` appended when that name is taken), and its directory
/// is fsynced. Returns the new path. The checkpoint, its sidecars and the results files all go
/// aside through here.
pub fn move_file_aside(path: &Path, why: &str) -> Result<PathBuf, StateError> {
    let to = unique_aside(path, why);
    fs::rename(path, &to).map_err(io_err(path))?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        fsync_dir(dir)?;
    }
    Ok(to)
}

/// Where a moved-aside record came from: `<name>.<why>-<unix time>[-<n>]` split into
/// (`name`, `why`, unix time). `None` for any other file name.
pub fn parse_aside_name(file_name: &str) -> Option<(&str, &str, u64)> {
    const REASONS: &[&str] = &[
        "corrupt", "stale", "reset", "restart", "device", "orphan", "foreign",
    ];
    let dot = file_name.rfind('.')?;
    let (name, tail) = (&file_name[..dot], &file_name[dot + 1..]);
    let (why, rest) = tail.split_once('-')?;
    if name.is_empty() || !REASONS.contains(&why) {
        return None;
    }
    let ts = rest.split('-').next()?;
    let n = rest.strip_prefix(ts).unwrap_or("");
    if !(n.is_empty()
        || n.strip_prefix('-')
            .is_some_and(|d| d.parse::<u64>().is_ok()))
    {
        return None;
    }
    Some((name, why, ts.parse().ok()?))
}

/// Move the checkpoint (and the sidecars it names, when it parses) aside with suffix
/// `.{why}-<unix time>`. Returns the checkpoint's new path, `None` if there was none.
pub(super) fn move_aside(dir: &Path, why: &str) -> Result<Option<PathBuf>, StateError> {
    let path = dir.join(CHECKPOINT_FILE);
    if !path.exists() {
        return Ok(None);
    }
    if let Ok(Some(cp)) = read(dir) {
        for g in cp.targets.iter().filter_map(|t| t.genmap.as_ref()) {
            if is_sidecar(&g.file) && !g.file.contains('/') {
                let sp = dir.join(&g.file);
                if sp.exists() {
                    let _ = fs::rename(&sp, unique_aside(&sp, why));
                }
            }
        }
    }
    move_file_aside(&path, why).map(Some)
}
