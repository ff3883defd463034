//! The checkpoint loop of the daemon: the checkpoint to resume from at start, and the saver
//! that writes it off the event loop, one save at a time.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use super::app::DaemonApp;
use crate::config::Settings;

/// Test-only: `NVSOAK_TEST_SLOW_CHECKPOINT_MS=<ms>` makes every checkpoint save sleep that long
/// before it writes (read once at start), so the integration tests can hold a save in flight.
/// Not for production use.
pub const TEST_SLOW_CHECKPOINT_ENV: &str = "NVSOAK_TEST_SLOW_CHECKPOINT_MS";

pub(super) fn test_slow_checkpoint() -> Duration {
    let ms = std::env::var(TEST_SLOW_CHECKPOINT_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or(0);
    if ms > 0 {
        tracing::warn!(
            "{TEST_SLOW_CHECKPOINT_ENV}={ms}: every checkpoint save is delayed (a test hook)"
        );
    }
    Duration::from_millis(ms)
}

/// Saves the checkpoint off the event loop: at most one save at a time, on tokio's blocking
/// pool, so a save of gigabytes of generation maps never stalls signals, the watchdog or the
/// loop's ticks. A checkpoint tick while a save runs is skipped (and counted); a save asked for
/// by a reload runs as soon as the one in flight ends; shutdown waits for it, then saves once
/// more.
pub(super) struct CheckpointSaver {
    app: Arc<DaemonApp>,
    dir: PathBuf,
    /// Test-only delay of each save ([`TEST_SLOW_CHECKPOINT_ENV`]).
    slow: Duration,
    in_flight: Option<tokio::task::JoinHandle<()>>,
    /// Plan hash of a save asked for while one was in flight.
    pending: Option<String>,
}

impl CheckpointSaver {
    pub(super) fn new(app: Arc<DaemonApp>, dir: PathBuf, slow: Duration) -> Self {
        CheckpointSaver {
            app,
            dir,
            slow,
            in_flight: None,
            pending: None,
        }
    }

    pub(super) fn busy(&self) -> bool {
        self.in_flight.is_some()
    }

    fn spawn(&mut self, hash: String) {
        let (app, dir, slow) = (self.app.clone(), self.dir.clone(), self.slow);
        // The targets now, so the saved list always matches `hash`, even if a reload swaps
        // the list while the save runs.
        let targets = app.targets.get();
        app.checkpoint_stats.started();
        self.in_flight = Some(tokio::task::spawn_blocking(move || {
            let t0 = Instant::now();
            let res = app.checkpoint(&dir, &hash, &targets, slow);
            if let Err(e) = &res {
                tracing::warn!(error = %e,
                    "saving the checkpoint failed; the previous one stays in place, will retry at the next interval");
            }
            app.checkpoint_stats
                .finished(res.is_ok(), t0.elapsed().as_secs_f64());
        }));
    }

    /// A checkpoint tick: start a save unless one is still in flight (then skip this tick).
    pub(super) fn tick(&mut self, hash: &str) {
        if self.busy() {
            self.app.checkpoint_stats.skipped_tick();
            tracing::debug!("checkpoint tick skipped: the previous save is still running");
        } else {
            self.spawn(hash.to_string());
        }
    }

    /// Save as soon as possible: now, or when the save in flight ends.
    pub(super) fn request(&mut self, hash: &str) {
        if self.busy() {
            self.pending = Some(hash.to_string());
        } else {
            self.spawn(hash.to_string());
        }
    }

    /// Resolves when the save in flight ends, then starts a pending one. Never resolves while
    /// none is in flight (guard the `select!` branch with [`Self::busy`]).
    pub(super) async fn settle(&mut self) {
        let Some(h) = self.in_flight.as_mut() else {
            return std::future::pending().await;
        };
        if let Err(e) = h.await {
            tracing::warn!(error = %e, "the checkpoint save task failed");
        }
        self.in_flight = None;
        if let Some(hash) = self.pending.take() {
            self.spawn(hash);
        }
    }

    /// Shutdown: wait for the save in flight (and a pending one), then save once more.
    pub(super) async fn finish(&mut self, hash: &str) {
        while self.busy() {
            self.settle().await;
        }
        self.spawn(hash.to_string());
        self.settle().await;
    }
}

/// The checkpoint to resume from, or why the run starts fresh. A checkpoint saved for another
/// device than a block target's path names now is not resumed.
pub(super) fn load_checkpoint(
    settings: &Settings,
    plan_hash: &str,
) -> Result<(Option<crate::state::Loaded>, Option<crate::state::Fresh>)> {
    // Who each block target is now: a checkpoint saved for another device is not resumed.
    let devices: std::collections::BTreeMap<String, String> = settings
        .targets
        .iter()
        .filter(|t| crate::safety::is_block_device(&t.path))
        .filter_map(|t| {
            // A spanning target is its members, in order.
            let keys = t
                .member_paths()
                .into_iter()
                .map(|p| {
                    crate::safety::identify(p)
                        .ok()
                        .map(|id| crate::state::device_key(&id))
                })
                .collect::<Option<Vec<String>>>()?;
            Some((t.name.clone(), keys.join(" + ")))
        })
        .collect();
    let r = match crate::state::load_for(&settings.state.dir, plan_hash, &devices)
        .with_context(|| format!("reading the checkpoint in {}", settings.state.dir.display()))?
    {
        Ok(l) => (Some(l), None),
        Err(why) => (None, Some(why)),
    };
    Ok(r)
}
