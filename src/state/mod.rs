//! Persistence: checkpoint load/save for multi-day runs, its generation-map sidecars, the
//! results files, the state directory's lock, and moving records aside.
//!
//! The state directory holds `checkpoint.json` plus one binary generation-map sidecar per
//! verified target (`genmap-<n>-<target>-<stamp>.bin`, see [`crate::model::genmap::GenMap`]).
//!
//! Saving is atomic and crash-safe: each sidecar is written under a new name (temporary file,
//! fsync, rename), then the checkpoint, which names each sidecar with its length and crc32c, is
//! written the same way, then the directory is fsynced. The checkpoint on disk therefore always
//! refers to sidecars that exist: the previous save's sidecars are kept, older ones removed.
//! After `kill -9` at any point, the checkpoint is the old one or the new one, never a mix.
//!
//! Loading at start ([`load`], [`load_for`]) never silently reuses a bad checkpoint: one that
//! does not parse, has another format version, whose sidecar is missing, damaged or named for
//! another target, that was saved for a different plan, or whose block target is another device
//! now ([`device_key`]) is moved aside (`checkpoint.json.corrupt-<unix time>`, `.stale-`,
//! `.device-`) with a warning, and the run starts over. [`read`] only looks, for
//! `nvsoak state show` while a daemon runs. [`move_file_aside`] is the one way records
//! (checkpoints, sidecars, results files) leave their place. [`SaveStats`] counts the daemon's
//! background saves for `/metrics`.
//!
//!
//! ## Where each part lives
//!
//! - `checkpoint`: saving, reading and loading `checkpoint.json` ([`save`], [`read`], [`load`],
//!   [`load_for`], [`reset`]) and the device identity it is compared on ([`device_key`]);
//! - `sidecar`: the generation-map files a checkpoint names ([`read_genmap`]);
//! - `aside`: the one policy for moving a record out of the way ([`move_file_aside`],
//!   [`parse_aside_name`]);
//! - `save_stats`: the counters of the daemon's background saves ([`SaveStats`]);
//! - `results`: the results files; `lock`: the state directory's lock and ownership;
//! - [`StateDir`] (`util::beneath`): the one way into the state directory: every file in it reached
//!   beneath its descriptor with `RESOLVE_NO_SYMLINKS`, the lock's checked descriptor reused
//!   while it is held.

use std::fs;
use std::io::{self, BufWriter};
use std::path::{Path, PathBuf};

use thiserror::Error;

mod aside;
mod checkpoint;
mod lock;
pub mod results;
mod save_stats;
mod sidecar;
#[cfg(test)]
mod tests;

pub use crate::util::beneath::{Entry, StateDir};
pub use aside::{move_file_aside, parse_aside_name};
pub use checkpoint::{Fresh, Loaded, Reset, device_key, load, load_for, read, reset, save};
pub use lock::{LOCK_FILE, StateLock, check as check_dir, holder, is_nvsoak_name, lock};
pub use save_stats::{SaveStats, SaveStatsSnapshot};
pub use sidecar::read_genmap;

/// The checkpoint's file name in the state directory.
pub const CHECKPOINT_FILE: &str = "checkpoint.json";

#[derive(Debug, Error)]
pub enum StateError {
    #[error("state directory {}: {source}; check that it exists and is writable", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("checkpoint {}: {reason}; run `nvsoak state reset` to start over", path.display())]
    Corrupt { path: PathBuf, reason: String },
    #[error("checkpoint: target \"{0}\" has a generation map but no entry in the checkpoint")]
    UnknownTarget(String),
    #[error("state directory {} is in use by another nvsoak (pid {owner}); stop it, or give this run its own state.dir", path.display())]
    Locked { path: PathBuf, owner: String },
    #[error("state directory {} is not nvsoak's: {why}; give state.dir a directory of its own (a new one, or one only nvsoak has written)", path.display())]
    NotOurs { path: PathBuf, why: String },
    #[error("state directory {}: {why}", path.display())]
    Unsafe { path: PathBuf, why: String },
    #[error("serialising the checkpoint: {0}")]
    Serialise(#[from] serde_json::Error),
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> StateError + '_ {
    move |source| StateError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// sha256 (hex) of the resolved plan: the serde_json of `Settings.targets`.
pub fn plan_hash(targets: &[crate::model::spec::TargetSpec]) -> String {
    use sha2::Digest;
    let json = serde_json::to_vec(targets).expect("target specs always serialise");
    sha2::Sha256::digest(&json)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

pub fn now_unix() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// The state directory `dir` ([`StateDir::open`]).
fn open_dir(dir: &Path) -> Result<StateDir, StateError> {
    StateDir::open(dir).map_err(io_err(dir))
}

fn fsync_dir(sd: &StateDir) -> Result<(), StateError> {
    sd.sync("").map_err(io_err(sd.path()))
}

/// Write `name` in the state directory atomically ([`StateDir::write_atomic`]). The caller
/// fsyncs the directory.
fn write_atomic<T>(
    sd: &StateDir,
    name: &str,
    fill: impl FnOnce(&mut BufWriter<fs::File>) -> io::Result<T>,
) -> Result<T, StateError> {
    sd.write_atomic(name, fill)
        .map_err(io_err(&sd.display(name)))
}
