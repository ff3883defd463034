//! Watching the web config: the files it names are stamped (mtime, size, inode), new
//! connections trigger a check at most every [`RELOAD_CHECK_INTERVAL`], on a blocking thread,
//! and a config that loads replaces the one in force.

use super::*;

/// Watches the web config file and the files it names (certificates, keys, CAs) and reloads on
/// change, as exporter-toolkit does, so certificates and users rotate without restarting a soak.
pub(super) struct Reloader {
    pub(super) path: PathBuf,
    pub(super) stamps: Vec<FileStamp>,
    pub(super) last_check: std::time::Instant,
}

pub(super) type FileStamp = (PathBuf, Option<(std::time::SystemTime, u64, u64)>);

pub(super) fn stamps(files: &[PathBuf]) -> Vec<FileStamp> {
    use std::os::unix::fs::MetadataExt;
    files
        .iter()
        .map(|f| {
            let m = std::fs::metadata(f).ok().map(|m| {
                (
                    m.modified().unwrap_or(std::time::UNIX_EPOCH),
                    m.len(),
                    m.ino(),
                )
            });
            (f.clone(), m)
        })
        .collect()
}

/// How often, at most, new connections trigger a check of the web config files.
pub const RELOAD_CHECK_INTERVAL: Duration = Duration::from_secs(1);

impl Shared {
    pub(super) fn schedule_reload(self: &Arc<Self>) {
        let due = match self.reloader.as_ref().map(|m| m.try_lock()) {
            Some(Ok(r)) => r.last_check.elapsed() >= RELOAD_CHECK_INTERVAL,
            _ => false,
        };
        if !due || self.reload_pending.swap(true, Ordering::AcqRel) {
            return;
        }
        let me = self.clone();
        let work = move || {
            me.maybe_reload();
            me.reload_pending.store(false, Ordering::Release);
        };
        match tokio::runtime::Handle::try_current() {
            Ok(h) => drop(h.spawn_blocking(work)),
            Err(_) => work(),
        }
    }

    pub(super) fn maybe_reload(&self) {
        // try_lock: a connection never waits for another one's reload.
        let Some(Ok(mut r)) = self.reloader.as_ref().map(|m| m.try_lock()) else {
            return;
        };
        if r.last_check.elapsed() < RELOAD_CHECK_INTERVAL {
            return;
        }
        r.last_check = std::time::Instant::now();
        let files: Vec<PathBuf> = r.stamps.iter().map(|(p, _)| p.clone()).collect();
        let now = stamps(&files);
        if now == r.stamps {
            return;
        }
        match webconfig::load(&r.path) {
            Ok(web) => {
                // Stamps taken before the load: a change during it is picked up next time.
                r.stamps = if web.files == files {
                    now
                } else {
                    stamps(&web.files)
                };
                *crate::util::write(&self.state) = Arc::new(WebState::new(web));
                self.stats.reloads.fetch_add(1, Ordering::Relaxed);
                tracing::info!(file = %r.path.display(), "web config reloaded");
            }
            Err(e) => {
                r.stamps = now;
                self.stats.reload_errors.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(error = %e, "web config changed but does not load; keeping the previous one");
            }
        }
    }
}
