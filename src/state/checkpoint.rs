//! The checkpoint file, `checkpoint.json`: saved atomically after its sidecars, read without
//! changing anything, and loaded at start only when it is sound, for this plan and for these
//! devices; anything else goes aside (see the module docs of `state`).

use std::collections::BTreeMap;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::model::checkpoint::{CHECKPOINT_VERSION, Checkpoint};
use crate::model::genmap::GenMap;

use super::aside::{move_file_aside, rename_aside};
use super::sidecar::is_sidecar;
use super::{
    CHECKPOINT_FILE, StateDir, StateError, fsync_dir, io_err, open_dir, sidecar, write_atomic,
};

/// A checkpoint loaded at start, with its generation maps (every unit marked recovered).
#[derive(Debug)]
pub struct Loaded {
    pub checkpoint: Checkpoint,
    /// Target name → its generation map.
    pub genmaps: BTreeMap<String, GenMap>,
    pub path: PathBuf,
}

/// Save a checkpoint (see the module docs for the crash-safety argument). `genmaps` pairs
/// target names of `cp.targets` with their maps; their [`GenMapRef`]s are filled in the saved
/// copy. Creates `dir` if needed.
///
/// [`GenMapRef`]: crate::model::checkpoint::GenMapRef
pub fn save(dir: &Path, cp: &Checkpoint, genmaps: &[(&str, &GenMap)]) -> Result<(), StateError> {
    fs::create_dir_all(dir).map_err(io_err(dir))?;
    let sd = open_dir(dir)?;
    let mut cp = cp.clone();
    sidecar::write_all(&sd, &mut cp, genmaps)?;
    let previous = read_in(&sd).ok().flatten();
    let json = serde_json::to_vec_pretty(&cp)?;
    write_atomic(&sd, CHECKPOINT_FILE, |w| w.write_all(&json))?;
    fsync_dir(&sd)?;
    sidecar::prune(&sd, &cp, previous.as_ref());
    Ok(())
}

/// Read and parse the checkpoint without changing anything (`Ok(None)` when there is none).
pub fn read(dir: &Path) -> Result<Option<Checkpoint>, StateError> {
    match StateDir::open(dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_err(dir)(e)),
        Ok(sd) => read_in(&sd),
    }
}

/// [`read`] beneath an open state directory.
pub(super) fn read_in(sd: &StateDir) -> Result<Option<Checkpoint>, StateError> {
    let path = sd.display(CHECKPOINT_FILE);
    let data = match sd.read(CHECKPOINT_FILE, crate::util::bounded::CHECKPOINT_LIMIT) {
        Ok(d) => d,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        // A FIFO, a directory, a symlink or a giant in its place is no checkpoint nvsoak wrote.
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::InvalidInput | io::ErrorKind::InvalidData
            ) || e.raw_os_error() == Some(libc::ELOOP) =>
        {
            return Err(StateError::Corrupt {
                path: path.clone(),
                reason: format!("not a checkpoint nvsoak wrote ({e})"),
            });
        }
        Err(e) => return Err(io_err(&path)(e)),
    };
    let cp: Checkpoint = serde_json::from_slice(&data).map_err(|e| StateError::Corrupt {
        path: path.clone(),
        reason: format!("not a valid checkpoint ({e})"),
    })?;
    if cp.version != CHECKPOINT_VERSION {
        return Err(StateError::Corrupt {
            path,
            reason: format!(
                "format version {} (this nvsoak reads version {CHECKPOINT_VERSION})",
                cp.version
            ),
        });
    }
    Ok(Some(cp))
}

/// The identity a checkpoint records for a block device, and compares on resume: its WWN or
/// serial ([`crate::safety::DeviceIdentity::stable_id`]), else (loop, null_blk) its kernel name
/// and device numbers, `loop3 (7:3)`.
pub fn device_key(id: &crate::safety::DeviceIdentity) -> String {
    match id.stable_id() {
        Some(s) if !s.is_empty() => s.to_string(),
        // Without serial or WWN, the name and numbers alone would take a loop device
        // re-attached to a fresh file for the device tested: its instance tells them apart.
        _ => match &id.instance {
            Some(inst) => format!("{} ({}:{}; {inst})", id.kernel_name, id.major, id.minor),
            None => format!("{} ({}:{})", id.kernel_name, id.major, id.minor),
        },
    }
}

/// Why [`load_for`] found nothing to resume (the run starts over).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fresh {
    /// There was no checkpoint.
    NoCheckpoint,
    /// It was unusable and went aside as `.corrupt-<ts>`.
    Corrupt,
    /// It belonged to another plan and went aside as `.stale-<ts>`.
    Stale,
    /// A block target is now another device; it went aside as `.device-<ts>`.
    OtherDevice,
}

impl Fresh {
    /// The suffix a target's earlier results file goes aside with when its run starts over.
    pub fn results_reason(self) -> &'static str {
        match self {
            Fresh::NoCheckpoint => "orphan",
            Fresh::Corrupt => "corrupt",
            Fresh::Stale => "stale",
            Fresh::OtherDevice => "device",
        }
    }
}

/// Load the checkpoint at start. A corrupt checkpoint (unparseable, other version, missing or
/// damaged generation map) is moved aside as `.corrupt-<ts>`, one for another plan as
/// `.stale-<ts>`, each with a warning, and `Ok(None)` returned so the run starts over.
/// Leftover temporary files of an interrupted save are removed. [`load_for`] also checks the
/// block devices and says why nothing was loaded.
pub fn load(dir: &Path, expected_plan_hash: &str) -> Result<Option<Loaded>, StateError> {
    Ok(load_for(dir, expected_plan_hash, &BTreeMap::new())?.ok())
}

/// [`load`], and a checkpoint whose block target is now another device is moved aside as
/// `.device-<ts>` (a warning names both identities) rather than resumed against the wrong
/// generation map. `devices` maps target names to their device's [`device_key`] now; a target
/// without an entry (a file) or a recorded identity (an older checkpoint) is not compared.
/// `Err(Fresh)` says why the run starts over.
pub fn load_for(
    dir: &Path,
    expected_plan_hash: &str,
    devices: &BTreeMap<String, String>,
) -> Result<Result<Loaded, Fresh>, StateError> {
    let sd = match StateDir::open(dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Err(Fresh::NoCheckpoint)),
        r => r.map_err(io_err(dir))?,
    };
    // Temporary files of a save that was interrupted (never a record: renamed into place or
    // nothing).
    for e in sd.list("").unwrap_or_default() {
        if e.is_file && e.name.starts_with('.') && e.name.contains(".tmp-") {
            let _ = sd.remove(&e.name);
        }
    }
    let path = sd.display(CHECKPOINT_FILE);
    let cp = match read_in(&sd) {
        Ok(None) => return Ok(Err(Fresh::NoCheckpoint)),
        Ok(Some(cp)) => cp,
        Err(StateError::Corrupt { reason, .. }) => {
            let to = move_aside(&sd, "corrupt")?;
            tracing::warn!(
                checkpoint = %path.display(),
                moved_to = ?to,
                "checkpoint is unusable ({reason}); moved it aside and starting over"
            );
            return Ok(Err(Fresh::Corrupt));
        }
        Err(e) => return Err(e),
    };
    if cp.plan_hash != expected_plan_hash {
        let to = move_aside(&sd, "stale")?;
        tracing::warn!(
            checkpoint = %path.display(),
            moved_to = ?to,
            saved_plan = %cp.plan_hash,
            current_plan = %expected_plan_hash,
            "checkpoint belongs to a different plan (the targets or phases changed); moved it aside and starting over"
        );
        return Ok(Err(Fresh::Stale));
    }
    for t in &cp.targets {
        if let (Some(saved), Some(now)) = (&t.identity, devices.get(&t.name))
            && saved != now
        {
            let to = move_aside(&sd, "device")?;
            tracing::warn!(
                checkpoint = %path.display(),
                moved_to = ?to,
                target = %t.name,
                path = %t.path,
                checkpoint_device = %saved,
                current_device = %now,
                "checkpoint was saved for device {saved}, but {} is now device {now}; moved it aside and starting over",
                t.path
            );
            return Ok(Err(Fresh::OtherDevice));
        }
    }
    let genmaps = match sidecar::read_all(&sd, &cp) {
        Ok(m) => m,
        Err((t, sidecar, e)) => {
            let to = move_aside(&sd, "corrupt")?;
            tracing::warn!(
                checkpoint = %path.display(),
                moved_to = ?to,
                target = %t,
                sidecar = %sidecar,
                "checkpoint is unusable ({e}); moved it aside and starting over"
            );
            return Ok(Err(Fresh::Corrupt));
        }
    };
    Ok(Ok(Loaded {
        checkpoint: cp,
        genmaps,
        path,
    }))
}

/// Move the checkpoint and every generation-map sidecar in the directory aside
/// (`.reset-<ts>`, never over a file, never deleted) so the next run starts over. Returns what
/// went where.
pub fn reset(dir: &Path) -> Result<Reset, StateError> {
    let sd = match StateDir::open(dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Reset::default()),
        Err(e) => return Err(io_err(dir)(e)),
        Ok(sd) => sd,
    };
    // Every sidecar, not only those the checkpoint names: the previous save's is kept beside
    // the newest, and one a damaged checkpoint named cannot be told from it.
    let mut sidecars = Vec::new();
    for e in sd.list("").map_err(io_err(dir))? {
        if is_sidecar(&e.name) {
            let to = rename_aside(&sd, &e.name, "reset").map_err(io_err(&sd.display(&e.name)))?;
            sidecars.push((sd.display(&e.name), sd.display(&to)));
        }
    }
    let checkpoint = if sd.exists(CHECKPOINT_FILE) {
        Some(move_file_aside(&sd, CHECKPOINT_FILE, "reset")?)
    } else {
        None
    };
    fsync_dir(&sd)?;
    Ok(Reset {
        checkpoint,
        sidecars,
    })
}

/// What [`reset`] moved aside.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Reset {
    /// The checkpoint's new path, `None` when there was none.
    pub checkpoint: Option<PathBuf>,
    /// Every generation-map sidecar in the directory: (old path, new path).
    pub sidecars: Vec<(PathBuf, PathBuf)>,
}

/// Move the checkpoint (and the sidecars it names, when it parses) aside with suffix
/// `.{why}-<unix time>`. Returns the checkpoint's new path, `None` if there was none.
pub(super) fn move_aside(sd: &StateDir, why: &str) -> Result<Option<PathBuf>, StateError> {
    if !sd.exists(CHECKPOINT_FILE) {
        return Ok(None);
    }
    if let Ok(Some(cp)) = read_in(sd) {
        for g in cp.targets.iter().filter_map(|t| t.genmap.as_ref()) {
            if is_sidecar(&g.file) && !g.file.contains('/') && sd.exists(&g.file) {
                let _ = rename_aside(sd, &g.file, why);
            }
        }
    }
    let moved = move_file_aside(sd, CHECKPOINT_FILE, why).map(Some);
    fsync_dir(sd)?;
    moved
}
