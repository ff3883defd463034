//! Small helpers the whole crate shares, one of each: the Unix clock, atomic file writes, and
//! recovering a lock a panicking thread poisoned.

pub mod beneath;
pub mod bounded;
pub mod gate;
pub mod host;
pub mod sched;
pub mod suggest;
pub mod sysroot;

use std::fs::{self, File};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{SystemTime, UNIX_EPOCH};

/// Seconds since the Unix epoch (0 if the clock is before it).
pub fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

static TMP_SEQ: AtomicU64 = AtomicU64::new(0);

/// A temporary name for a file called `name`, unique to this process and call:
/// `.NAME.tmp-PID-N`.
pub fn tmp_name(name: &str) -> String {
    format!(
        ".{name}.tmp-{}-{}",
        std::process::id(),
        TMP_SEQ.fetch_add(1, Ordering::Relaxed)
    )
}

/// A temporary name beside `path`, unique to this process and call: `.NAME.tmp-PID-N`.
pub fn tmp_path(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(tmp_name(&name))
}

/// Write `path` atomically without syncing its directory: `fill` writes a temporary file
/// beside it (created exclusively, never an existing file), which is fsynced and renamed over
/// `path`; on any failure the temporary file is removed. Callers writing several files sync
/// the directory once ([`sync_dir`]).
pub fn write_file_atomic<T>(
    path: &Path,
    fill: impl FnOnce(&mut BufWriter<File>) -> io::Result<T>,
) -> io::Result<T> {
    let tmp = tmp_path(path);
    let res = (|| {
        let f = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)?;
        let mut w = BufWriter::with_capacity(1 << 20, f);
        let out = fill(&mut w)?;
        let f = w.into_inner().map_err(|e| e.into_error())?;
        f.sync_all()?;
        fs::rename(&tmp, path)?;
        Ok(out)
    })();
    if res.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    res
}

/// fsync the directory holding `path`, so a rename into it survives a crash.
pub fn sync_dir(path: &Path) -> io::Result<()> {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => File::open(d)?.sync_all(),
        _ => Ok(()),
    }
}

/// [`write_file_atomic`] of `data`, then the directory synced.
pub fn write_atomic(path: &Path, data: &[u8]) -> io::Result<()> {
    write_file_atomic(path, |w| w.write_all(data))?;
    sync_dir(path)
}

/// Read a lock even if a thread panicked while holding it: the data is plain figures, still
/// the best there is.
pub fn read<T>(l: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(|p| p.into_inner())
}

/// [`read`] for writing.
pub fn write<T>(l: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(|p| p.into_inner())
}

/// [`read`] for a mutex.
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_writes_replace_whole_and_leave_no_temporary_file() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("r.json");
        write_atomic(&p, b"one").unwrap();
        write_atomic(&p, b"two").unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"two");
        // A failing writer leaves the old file and no temporary file.
        let r = write_file_atomic(&p, |w| {
            w.write_all(b"partial")?;
            Err::<(), _>(io::Error::other("injected"))
        });
        assert!(r.is_err());
        assert_eq!(fs::read(&p).unwrap(), b"two");
        let names: Vec<_> = fs::read_dir(d.path()).unwrap().flatten().collect();
        assert_eq!(names.len(), 1, "{names:?}");
        assert!(unix_now() > 1.7e9);
    }

    #[test]
    fn poisoned_locks_are_recovered() {
        let l = std::sync::Arc::new(RwLock::new(1));
        let l2 = l.clone();
        let _ = std::thread::spawn(move || {
            let _g = l2.write().unwrap();
            panic!("poison it");
        })
        .join();
        assert!(l.is_poisoned());
        *write(&l) += 1;
        assert_eq!(*read(&l), 2);
    }
}
