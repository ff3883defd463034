//! The one policy for moving a record out of the way: `<path>.<why>-<unix time>[-<n>]`, never
//! over an existing file, the directory fsynced after. The checkpoint (with the sidecars it
//! names), the results files and the known-drives list all leave their place through here;
//! nothing in `state` deletes a checkpoint.

use std::io;
use std::path::PathBuf;

use super::{StateDir, StateError, io_err, now_unix};

/// Rename `rel` to `<rel>.{why}-<unix time>[-<n>]` beneath `sd`, never over an existing file
/// (`RENAME_NOREPLACE`: a name taken meanwhile moves on to the next `n`). Returns the new name.
pub(super) fn rename_aside(sd: &StateDir, rel: &str, why: &str) -> io::Result<String> {
    let base = format!("{rel}.{why}-{}", now_unix() as u64);
    let mut to = base.clone();
    for n in 1..10_000 {
        match sd.rename_noreplace(rel, &to) {
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => to = format!("{base}-{n}"),
            r => return r.map(|()| to),
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AlreadyExists,
        format!("every name {base}-N is taken"),
    ))
}

/// Move one record file aside, never over an existing file: `rel` (a name beneath the state
/// directory `sd`) becomes `<rel>.{why}-<unix time>` (with `-<n>` appended when that name is
/// taken), and its directory is fsynced. Returns the new path. The checkpoint, its sidecars and
/// the results files all go aside through here.
pub fn move_file_aside(sd: &StateDir, rel: &str, why: &str) -> Result<PathBuf, StateError> {
    let to = rename_aside(sd, rel, why).map_err(io_err(&sd.display(rel)))?;
    let parent = rel.rsplit_once('/').map_or("", |(p, _)| p);
    sd.sync(parent).map_err(io_err(&sd.display(parent)))?;
    Ok(sd.display(&to))
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
