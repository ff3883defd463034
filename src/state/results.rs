//! The results files' persistence: `<state.dir>/results/<target>.json` read, written
//! atomically and moved aside (the schema is `model::results`), beside the run's OCPTV record.
//!
//! Records are never overwritten by a run that does not continue them: [`archive`] moves an
//! earlier file aside as `<target>.json.<why>-<unix time>` (a changed plan, `state reset`, a
//! target restarted by SIGHUP, a corrupt file), and `nvsoak report --archived` reads those too.

use std::path::{Path, PathBuf};

use crate::model::checked;
use crate::model::results::TargetResults;
use crate::state::StateDir;

/// The results folder's name in the state directory.
const RESULTS_DIR: &str = "results";

/// `results/<target>.json`, beneath the state directory.
fn rel(target: &str) -> String {
    format!("{RESULTS_DIR}/{target}.json")
}

/// `results/<target>.ocptv.jsonl`, beneath the state directory.
fn ocptv_rel(target: &str) -> String {
    format!("{RESULTS_DIR}/{target}.ocptv.jsonl")
}

/// `<state_dir>/results/<target>.ocptv.jsonl` (for messages; it is reached beneath the state
/// directory's descriptor).
pub fn ocptv_path(state_dir: &Path, target: &str) -> PathBuf {
    state_dir.join(ocptv_rel(target))
}

/// Write `target`'s OCPTV record atomically beneath the state directory (the results folder
/// created when missing), its folder synced.
pub fn write_ocptv(state_dir: &Path, target: &str, text: &[u8]) -> std::io::Result<()> {
    let sd = StateDir::open(state_dir)?;
    sd.create_dirs(RESULTS_DIR)?;
    sd.write_all(&ocptv_rel(target), text)
}

/// `<state_dir>/results/<target>.json`.
/// The results file an earlier run of this plan wrote for `target`, if it is readable. One that
/// does not parse, or names another target, is moved aside (`.corrupt-` / `.foreign-<ts>`),
/// never overwritten.
pub fn load(state_dir: &Path, target: &str) -> Option<TargetResults> {
    let path = results_path(state_dir, target);
    let read = StateDir::open(state_dir)
        .and_then(|sd| sd.read(&rel(target), crate::util::bounded::RESULTS_LIMIT));
    let data = match read {
        Ok(d) => d,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => {
            // Moved aside, so this run's first save does not replace it (a FIFO, a symlink, a
            // giant or an unreadable file in its place is kept, under another name).
            tracing::warn!(path = %path.display(), error = %e,
                "reading the earlier results failed; it is moved aside and this run's results file starts empty");
            archive(state_dir, target, "corrupt");
            return None;
        }
    };
    let why = match checked_results(&data) {
        Ok(r) if r.target == target => return Some(r),
        Ok(r) => {
            tracing::warn!(path = %path.display(), found = %r.target,
                "the results file names another target");
            "foreign"
        }
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e,
                "the earlier results file does not parse");
            "corrupt"
        }
    };
    archive(state_dir, target, why);
    None
}

/// Why an earlier results file is not taken up.
#[derive(Debug, thiserror::Error)]
enum Unreadable {
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    #[error(transparent)]
    Figure(#[from] checked::OutOfRange),
}

/// A results file's text parsed, every figure in it checked first ([`checked`]).
fn checked_results(data: &[u8]) -> Result<TargetResults, Unreadable> {
    let value: serde_json::Value = serde_json::from_slice(data)?;
    if let Some(o) = checked::first_out_of_range(&value) {
        return Err(o.into());
    }
    Ok(serde_json::from_value(value)?)
}

/// Writes `r` as its target's results file (atomically, the directory created when missing);
/// a failure is logged and reported as `false`, and the run goes on.
pub fn save(state_dir: &Path, r: &TargetResults) -> bool {
    let path = results_path(state_dir, &r.target);
    let res = (|| -> std::io::Result<()> {
        let sd = StateDir::open(state_dir)?;
        sd.create_dirs(RESULTS_DIR)?;
        let data = serde_json::to_vec_pretty(r)?;
        sd.write_all(&rel(&r.target), &data)
    })();
    match res {
        Ok(()) => true,
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "writing results failed");
            false
        }
    }
}

/// `<state_dir>/results/<target>.json` (for messages; it is reached beneath the state
/// directory's descriptor).
pub fn results_path(state_dir: &Path, target: &str) -> PathBuf {
    state_dir.join(rel(target))
}

/// What each reason for moving a results file aside means, for the log and the report.
pub fn archive_reason_text(why: &str) -> &'static str {
    match why {
        "stale" => "the plan changed",
        "reset" => "nvsoak state reset",
        "restart" => "the target was restarted by a config reload",
        "corrupt" => "the file was unreadable or the checkpoint was corrupt",
        "device" => "the target is now another device",
        "orphan" => "there was no checkpoint to continue it",
        "foreign" => "the file named another target",
        _ => "moved aside",
    }
}

/// Move `target`'s results file aside as `<target>.json.<why>-<unix time>` (never over another
/// file) and log where it went; `why` is one of the reasons of [`archive_reason_text`]. Returns
/// the new path, `None` when there was no file (or it could not be moved: logged).
pub fn archive(state_dir: &Path, target: &str, why: &str) -> Option<PathBuf> {
    let path = results_path(state_dir, target);
    let sd = StateDir::open(state_dir).ok()?;
    if !sd.exists(&rel(target)) {
        return None;
    }
    // The run's OCPTV record goes aside with it.
    let ocptv = ocptv_rel(target);
    if sd.exists(&ocptv)
        && let Err(e) = crate::state::move_file_aside(&sd, &ocptv, why)
    {
        tracing::error!(target_name = %target, path = %sd.display(&ocptv).display(), error = %e,
            "could not move the earlier OCPTV record aside");
    }
    match crate::state::move_file_aside(&sd, &rel(target), why) {
        Ok(to) => {
            tracing::warn!(target_name = %target, results = %path.display(),
                moved_to = %to.display(),
                "earlier results file moved aside ({}); this run starts a new one (`nvsoak report --archived` includes it)",
                archive_reason_text(why));
            Some(to)
        }
        Err(e) => {
            tracing::error!(target_name = %target, results = %path.display(), error = %e,
                "could not move the earlier results file aside");
            None
        }
    }
}

/// Move every `<state_dir>/results/*.json` aside with `why` (`nvsoak state reset`). Returns
/// (from, to) for each.
pub fn archive_all(
    state_dir: &Path,
    why: &str,
) -> Result<Vec<(PathBuf, PathBuf)>, crate::state::StateError> {
    let io = |source| crate::state::StateError::Io {
        path: state_dir.join(RESULTS_DIR),
        source,
    };
    let listed = StateDir::open(state_dir).and_then(|sd| Ok((sd.list(RESULTS_DIR)?, sd)));
    let (entries, sd) = match listed {
        Ok(l) => l,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io(e)),
    };
    let mut moved = Vec::new();
    for e in entries
        .iter()
        .filter(|e| e.is_file && (e.name.ends_with(".json") || e.name.ends_with(".ocptv.jsonl")))
    {
        let from = format!("{RESULTS_DIR}/{}", e.name);
        let to = crate::state::move_file_aside(&sd, &from, why)?;
        moved.push((sd.display(&from), to));
    }
    Ok(moved)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn archive_moves_results_aside_byte_for_byte() {
        let d = tempfile::tempdir().expect("tempdir");
        assert_eq!(archive(d.path(), "t0", "stale"), None, "nothing to move");
        let p = results_path(d.path(), "t0");
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(&p, b"{\"first\": 1}").expect("write");
        let to = archive(d.path(), "t0", "stale").expect("moved");
        assert!(!p.exists());
        assert_eq!(std::fs::read(&to).expect("read"), b"{\"first\": 1}");
        let name = to.file_name().and_then(|n| n.to_str()).expect("name");
        assert!(name.starts_with("t0.json.stale-"), "{name}");
        // state reset: every current file, not the archived ones.
        std::fs::write(&p, b"second").expect("write");
        std::fs::write(results_path(d.path(), "t1"), b"third").expect("write");
        let moved = archive_all(d.path(), "reset").expect("reset");
        assert_eq!(moved.len(), 2);
        for (from, to) in &moved {
            assert!(!from.exists());
            assert!(to.to_string_lossy().contains(".json.reset-"));
        }
        assert_eq!(std::fs::read(&to).expect("read"), b"{\"first\": 1}");
        assert_eq!(
            archive_reason_text("restart"),
            "the target was restarted by a config reload"
        );
    }

    /// An earlier results file with a figure no run writes is not taken up: it is moved aside
    /// as corrupt, byte for byte, and the same file with the figure in range is.
    #[test]
    fn a_results_file_with_a_figure_out_of_range_is_moved_aside() {
        let d = tempfile::tempdir().expect("tempdir");
        let p = results_path(d.path(), "t0");
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        let good = TargetResults {
            target: "t0".into(),
            sweeps: vec![crate::model::results::SweepResult {
                points: vec![crate::model::results::SweepPoint {
                    lat_avg_us: 120.5,
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        };
        let mut v = serde_json::to_value(&good).expect("json");
        *v.pointer_mut("/sweeps/0/points/0/lat_avg_us")
            .expect("the figure") = serde_json::json!(f64::MAX);
        let forged = serde_json::to_vec(&v).expect("json");
        std::fs::write(&p, &forged).expect("write");
        assert_eq!(load(d.path(), "t0"), None);
        assert!(!p.exists(), "moved aside");
        let aside: Vec<_> = std::fs::read_dir(p.parent().expect("parent"))
            .expect("read results/")
            .flatten()
            .map(|e| e.path())
            .collect();
        assert_eq!(aside.len(), 1);
        assert!(aside[0].to_string_lossy().contains("t0.json.corrupt-"));
        assert_eq!(std::fs::read(&aside[0]).expect("read"), forged);
        std::fs::write(&p, serde_json::to_vec(&good).expect("json")).expect("write");
        let r = load(d.path(), "t0").expect("taken up");
        assert_eq!(r.sweeps[0].points[0].lat_avg_us, 120.5);
    }
}
