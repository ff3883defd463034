//! The NVMe drives this daemon has seen, kept in `<state.dir>/drives.json` across restarts, so
//! that a drive that was there and is gone after a restart is still exported, as `nvme_up 0`
//! with its `nvme_info`, and `NvmeDeviceDown` fires for it (a drive simply missing from the
//! scrape pages nobody).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::util::beneath::StateDir;

/// One remembered controller.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KnownDrive {
    pub name: String,
    pub serial: String,
    pub model: String,
    pub firmware: String,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct File {
    drives: Vec<KnownDrive>,
}

/// The list's name in the state directory.
const NAME: &str = "drives.json";

/// `<state_dir>/drives.json` (for messages; it is reached beneath the state directory's
/// descriptor, [`StateDir`]).
pub fn path(state_dir: &Path) -> PathBuf {
    state_dir.join(NAME)
}

fn read(state_dir: &Path) -> std::io::Result<Vec<u8>> {
    StateDir::open(state_dir)?.read(NAME, crate::util::bounded::DRIVES_LIMIT)
}

/// The remembered drives; none when the file is missing. An unreadable file is logged and
/// left in place (the next save replaces it atomically with what the poller knows).
pub fn load(state_dir: &Path) -> Vec<KnownDrive> {
    let p = path(state_dir);
    match read(state_dir) {
        Ok(b) => match serde_json::from_slice::<File>(&b) {
            Ok(f) => f.drives,
            Err(e) => {
                tracing::warn!(path = %p.display(), error = %e,
                    "the list of known drives is unreadable; drives gone since the last run are not reported");
                Vec::new()
            }
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => {
            tracing::warn!(path = %p.display(), error = %e, "reading the list of known drives failed");
            Vec::new()
        }
    }
}

/// Writes `drives` (atomically) when they differ from what the file holds; with no drive ever
/// seen, no file.
pub fn save(state_dir: &Path, drives: &[KnownDrive]) -> std::io::Result<()> {
    let sd = StateDir::open(state_dir)?;
    let held = load_quiet(state_dir);
    if held.as_deref() == Some(drives) || (drives.is_empty() && !sd.exists(NAME)) {
        return Ok(());
    }
    let body = serde_json::to_vec_pretty(&File {
        drives: drives.to_vec(),
    })
    .map_err(std::io::Error::other)?;
    sd.write_all(NAME, &body)
}

fn load_quiet(state_dir: &Path) -> Option<Vec<KnownDrive>> {
    let b = read(state_dir).ok()?;
    serde_json::from_slice::<File>(&b).ok().map(|f| f.drives)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_a_corrupt_file_loses_nothing_else() {
        let d = tempfile::tempdir().expect("tempdir");
        assert!(load(d.path()).is_empty());
        save(d.path(), &[]).expect("save none");
        assert!(!path(d.path()).exists(), "no drive, no file");
        let drives = vec![KnownDrive {
            name: "nvme3".into(),
            serial: "S3".into(),
            model: "M".into(),
            firmware: "F".into(),
        }];
        save(d.path(), &drives).expect("save");
        assert_eq!(load(d.path()), drives);
        std::fs::write(path(d.path()), b"{not json").expect("corrupt");
        assert!(load(d.path()).is_empty());
        save(d.path(), &drives).expect("save over a corrupt file");
        assert_eq!(load(d.path()), drives);
    }
}
