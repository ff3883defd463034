//! The target lifecycle: what runs now ([`Running`]: the settings in effect, the set of
//! running targets and the plan hash the checkpoint is saved under), start-up of every target
//! from the checkpoint, a SIGHUP reload applied to that set, and the stop at shutdown. Targets
//! start and stop through [`TargetSet`] here and in a reload alike.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::Result;

use super::HealthWiring;
use super::app::{DaemonApp, TargetList};
use super::checkpoint::CheckpointSaver;
use crate::config::Settings;
use crate::workload::scheduler::{self, RunOptions, SharedSnapshot, TargetError, TargetHandle};
use crate::workload::targets::{StartFrom, TargetSet};

/// What runs now: the settings in effect, the running targets, and the plan hash the
/// checkpoint is saved under (always the hash of `settings.targets`).
pub(super) struct Running {
    pub(super) settings: Settings,
    pub(super) targets: TargetSet,
    pub(super) plan_hash: String,
}

impl Running {
    pub(super) fn snapshots(&self) -> Vec<SharedSnapshot> {
        self.targets.snapshots()
    }

    /// SIGHUP: read the config file again and apply it to the running set (see
    /// [`crate::reload::apply::reload`]); the plan hash follows the targets that run.
    /// Blocking.
    pub(super) fn reload(
        &mut self,
        flags: &super::RunFlags,
        opts: &RunOptions,
        global_stop: &Arc<AtomicBool>,
    ) -> crate::reload::apply::ReloadOutcome {
        let out = crate::reload::apply::reload(
            flags.config_path.as_deref(),
            &flags.overrides,
            &mut self.settings,
            &mut self.targets,
            opts,
            global_stop,
        );
        if out.applied {
            self.plan_hash = crate::state::plan_hash(&self.settings.targets);
        }
        out
    }
}

/// One health poll before any target writes: the soak-start SMART baseline of each block
/// target then predates its first write, so the drive's deltas cover the whole soak. The
/// targets' entries carry zero host figures (nothing written yet in this run).
pub(super) fn pre_poll(
    settings: &Settings,
    wiring: &HealthWiring,
) -> Option<(crate::health::Poller, f64)> {
    settings.health.enabled.then(|| {
        let at = crate::health::poller::unix_now();
        let mut p = crate::health::Poller::new(
            settings.health.clone(),
            &wiring.sysfs_root,
            wiring.opener.clone(),
        );
        p.remember(&crate::health::known::load(&settings.state.dir));
        let zero: Vec<crate::health::HostIo> = settings
            .targets
            .iter()
            .filter(|t| crate::safety::is_block_device(&t.path))
            .map(|t| crate::health::HostIo {
                path: t.path.clone(),
                ..Default::default()
            })
            .collect();
        p.poll(std::sync::Arc::new(zero));
        (p, at)
    })
}

/// Start every target, refusing aliases first; on a failure the started ones are stopped.
/// Every target is opened and claimed before any plan runs (a [`Gate`] holds them), so a
/// refusal stops the start before any I/O, and the opening does not compete with the I/O.
/// The targets are opened on a few threads at once (a fresh file target's preallocation is
/// most of its opening), each thread's file targets' process checks made by one walk over
/// `/proc` once it claimed them all ([`UseBatch`]); a finding cancels the start, before any
/// plan ran. The error of a refused start is the first refused target's in the config's
/// order, as when they were opened one by one: targets are taken in that order, so every
/// target before a refused one was opened too.
///
/// [`Gate`]: crate::util::gate::Gate
/// [`UseBatch`]: crate::safety::UseBatch
pub(super) fn start_targets(
    settings: &Settings,
    opts: &RunOptions,
    global_stop: &Arc<AtomicBool>,
    loaded: &mut Option<crate::state::Loaded>,
    fresh: Option<crate::state::Fresh>,
) -> Result<TargetSet> {
    // Two names for one device or file are refused before anything opens.
    scheduler::check_aliases(&settings.targets)?;
    let specs = &settings.targets;
    let froms: Vec<std::sync::Mutex<Option<StartFrom>>> = specs
        .iter()
        .map(|spec| {
            let resume = loaded
                .as_ref()
                .and_then(|l| l.checkpoint.target(&spec.name).cloned());
            let from = match resume {
                Some(state) => StartFrom::Resume {
                    state: Box::new(state),
                    genmap: loaded.as_mut().and_then(|l| l.genmaps.remove(&spec.name)),
                },
                // Starting over: the earlier results file goes aside, never overwritten.
                None => StartFrom::Fresh {
                    why: fresh.map_or("orphan", crate::state::Fresh::results_reason),
                },
            };
            std::sync::Mutex::new(Some(from))
        })
        .collect();
    type Slot = std::sync::Mutex<Option<std::result::Result<TargetHandle, TargetError>>>;
    let slots: Vec<Slot> = specs.iter().map(|_| std::sync::Mutex::new(None)).collect();
    let gate = crate::util::gate::Gate::new();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let openers = std::thread::available_parallelism()
        .map_or(2, std::num::NonZeroUsize::get)
        .clamp(1, 4)
        .min(specs.len().max(1));
    let open_one = |i: usize| {
        let from = crate::util::lock(&froms[i]).take();
        let Some(from) = from else { return };
        let r = TargetSet::launch(&specs[i], from, opts, global_stop, Some(gate.clone()));
        if r.is_err() {
            failed.store(true, Ordering::SeqCst);
        }
        *crate::util::lock(&slots[i]) = Some(r);
    };
    let refusals: Vec<Box<crate::safety::BatchRefusal>> = std::thread::scope(|s| {
        let threads: Vec<_> = (0..openers)
            .map(|_| {
                s.spawn(|| {
                    let batch = crate::safety::UseBatch::begin();
                    loop {
                        let i = next.fetch_add(1, Ordering::SeqCst);
                        if i >= specs.len() || failed.load(Ordering::SeqCst) {
                            break;
                        }
                        open_one(i);
                    }
                    if failed.load(Ordering::SeqCst) {
                        return None;
                    }
                    batch.finish().err()
                })
            })
            .collect();
        threads
            .into_iter()
            .filter_map(|t| t.join().ok().flatten())
            .collect()
    });
    let mut set = TargetSet::new();
    let mut first_err: Option<TargetError> = None;
    for slot in slots {
        match slot
            .into_inner()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
        {
            Some(Ok(h)) => set.adopt(h),
            Some(Err(e)) => {
                first_err.get_or_insert(e);
            }
            None => {}
        }
    }
    let first_err = first_err.or_else(|| {
        // Each thread's batch names its first finding; the first in the config's order wins.
        refusals
            .into_iter()
            .min_by_key(|r| specs.iter().position(|t| t.name == r.target))
            .map(|r| TargetError::Refused {
                target: r.target,
                reason: r.error.to_string(),
            })
    });
    if let Some(e) = first_err {
        global_stop.store(true, Ordering::SeqCst);
        gate.cancel();
        set.stop_all();
        return Err(e.into());
    }
    tracing::debug!(
        targets = set.len(),
        openers,
        "every target opened and claimed; their plans start"
    );
    gate.open();
    Ok(set)
}

/// The pre-start poll describes these targets (nothing written yet): their baseline.
pub(super) fn set_baselines(set: &TargetSet, p: &crate::health::Poller, at: f64) {
    let pre = p.snapshot();
    for h in set.iter() {
        h.snapshot.update_drive(|d| d.polls_from = Some(at));
        h.snapshot.update_drive_from(&pre);
    }
}

/// After a SIGHUP reload was applied: publish the new target list, poll at once so targets
/// it started get their soak-start SMART baseline within moments of their first writes (not a
/// poll interval later), and save the checkpoint now (or right after the save in flight) so
/// the one on disk matches the plan that runs.
pub(super) fn after_reload(
    out: &crate::reload::apply::ReloadOutcome,
    running: &Running,
    targets: &TargetList,
    app: &DaemonApp,
    saver: &mut CheckpointSaver,
) {
    targets.set(running.snapshots());
    *crate::util::lock(&app.refused) = out.refused.clone();
    // The next scrape shows the new targets, not a body rendered before the reload.
    let interval = running.settings.stats.interval;
    app.metrics_cache
        .set_max_age(super::app::metrics_max_age(interval));
    app.status_cache
        .set_max_age(super::app::status_max_age(interval));
    if out.started_targets
        && let Some(h) = &app.health
    {
        h.poll_now();
    }
    saver.request(&running.plan_hash);
}

/// With --exit-when-done: the targets that stopped on an error ("name: reason"). A target
/// that stopped on an error (max_errors, verify_fatal, a device that never came back) did not
/// finish its plan: the daemon then exits non-zero.
pub(super) fn stopped_on_error_of(running: &Running) -> Vec<String> {
    running
        .snapshots()
        .iter()
        .filter_map(|s| {
            s.view(|v| v.stop_reason.clone())
                .map(|r| format!("{}: {r}", s.fixed.name))
        })
        .collect()
}

/// Shutdown, first part: stop the targets (their workers drain in-flight I/O) within 4 s,
/// then one last health poll so the results files' drive figures cover the soak to its end.
pub(super) async fn stop_targets(
    app: &Arc<DaemonApp>,
    running: &mut Running,
    global_stop: &Arc<AtomicBool>,
    state_dir: &Path,
) {
    let stopping_since = Instant::now();
    global_stop.store(true, Ordering::SeqCst);
    // Workers drain their in-flight I/O; join them off the runtime.
    let handles = running.targets.take_all();
    let joined = tokio::task::spawn_blocking(move || {
        for h in handles {
            h.join();
        }
    });
    let all_joined = tokio::time::timeout(Duration::from_secs(4), joined)
        .await
        .is_ok();
    if !all_joined {
        tracing::warn!("targets did not stop within 4 s; exiting anyway");
    }
    // One last poll after the last write, so the results files' drive figures (and the
    // checkpoint's) cover the soak to its end. Bounded (at most 1.5 s, and within 4.5 s of
    // the stop request), so shutdown keeps its 5 s promise.
    let budget = Duration::from_millis(4500)
        .saturating_sub(stopping_since.elapsed())
        .min(Duration::from_millis(1500));
    if all_joined
        && !budget.is_zero()
        && let Some(h) = &app.health
    {
        let polls = h.snapshot().polls;
        h.poll_now();
        if h.wait_for_polls(polls + 1, budget).await.is_some() {
            app.update_drive_figures();
            let dir = state_dir.to_path_buf();
            let targets = app.targets.get();
            let _ = tokio::task::spawn_blocking(move || {
                for s in targets.iter().filter(|s| s.fixed.is_block) {
                    scheduler::refresh_results_drive(&dir, s);
                }
            })
            .await;
        } else {
            tracing::warn!(
                "no final health poll within {budget:?}; the results keep the previous one"
            );
        }
    }
}
