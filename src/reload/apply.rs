//! Applying a SIGHUP reload: load and validate the file again, then stop, start and reorder the
//! running targets by the pure diff of the parent module. The daemon calls [`reload`] off the
//! event loop (it opens files and joins threads).

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use crate::daemon::{RunFlags, Running};
use crate::workload::scheduler::{self, RunOptions};

/// What a SIGHUP did.
#[derive(Debug, Default)]
pub(crate) struct ReloadOutcome {
    pub(crate) applied: bool,
    pub(crate) checkpoint_interval_changed: bool,
    /// At least one target was (re)started.
    pub(crate) started_targets: bool,
    /// The targets of the new config whose start was refused, with why.
    pub(crate) refused: Vec<crate::model::spec::RefusedTarget>,
}

/// SIGHUP: load and validate the config file again and apply it. An invalid file changes
/// nothing. Unchanged targets keep running untouched; removed ones are stopped; changed and new
/// ones are started from the start of their plan. Blocking (it opens files and joins threads).
pub(crate) fn reload(
    run: &mut Running,
    flags: &RunFlags,
    opts: &RunOptions,
    global_stop: &Arc<AtomicBool>,
) -> ReloadOutcome {
    let Some(path) = flags.config_path.as_deref() else {
        tracing::warn!(
            "SIGHUP: running the built-in default (no --config), so there is no file to reload"
        );
        return ReloadOutcome::default();
    };
    let mut new = match crate::config::load(Some(path)) {
        Ok(s) => s,
        Err(e) => {
            tracing::error!(config = %path.display(),
                "SIGHUP: config rejected, keeping the running config unchanged: {e}");
            return ReloadOutcome::default();
        }
    };
    flags.overrides.apply(&mut new);
    for key in crate::reload::needs_restart(&run.settings, &new) {
        tracing::warn!(config = %path.display(), key,
            "SIGHUP: {key} changed; it takes effect only after a restart, keeping the running value");
    }
    let merged = crate::reload::merge_live(&run.settings, &new);
    if let Err(e) = scheduler::check_aliases(&merged.targets) {
        tracing::error!(config = %path.display(),
            "SIGHUP: config rejected, keeping the running config unchanged: {e}");
        return ReloadOutcome::default();
    }
    let diff = crate::reload::diff_targets(&run.settings.targets, &merged.targets);
    let checkpoint_interval_changed =
        merged.state.checkpoint_interval != run.settings.state.checkpoint_interval;

    // Gates are judgement, not plan: a target whose gates alone changed keeps running and is
    // judged again (its thread at its next interval; a target whose plan already ended, here).
    let mut rejudged = Vec::new();
    for spec in &diff.rejudged {
        if let Some(h) = run.handles.iter().find(|h| h.name == spec.name) {
            h.snapshot.set_gates(spec.gates.clone());
            if h.is_finished() {
                scheduler::rejudge_ended(&opts.state_dir, &h.snapshot);
            }
            tracing::info!(target_name = %spec.name,
                "SIGHUP: only the gates changed; the target keeps running and is judged with the new gates");
            rejudged.push(spec.name.clone());
        }
    }
    let mut stopped = Vec::new();
    for name in diff.to_stop() {
        if let Some(i) = run.handles.iter().position(|h| h.name == name) {
            let h = run.handles.remove(i);
            h.join();
            tracing::info!(target_name = %name, "SIGHUP: target stopped");
            stopped.push(name);
        }
    }
    let mut started = Vec::new();
    let mut failed = Vec::new();
    let mut refused = Vec::new();
    for spec in diff.to_start() {
        // A changed target starts its plan over: its earlier results go aside first.
        crate::state::results::archive(&opts.state_dir, &spec.name, "restart");
        match scheduler::start(spec.clone(), opts.clone(), global_stop.clone(), None, None) {
            Ok(h) => {
                tracing::info!(target_name = %spec.name, path = %spec.path.display(), "target started");
                run.handles.push(h);
                started.push(spec.name.clone());
            }
            Err(e) => {
                tracing::error!(target_name = %spec.name, path = %spec.path.display(),
                    "SIGHUP: target could not be started, it stays stopped: {e}");
                failed.push(spec.name.clone());
                refused.push(crate::model::spec::RefusedTarget {
                    name: spec.name.clone(),
                    path: spec.path.display().to_string(),
                    reason: e.to_string(),
                });
            }
        }
    }
    // The running plan: the new config's targets, in its order, minus those that failed.
    let mut specs = merged.targets.clone();
    specs.retain(|t| run.handles.iter().any(|h| h.name == t.name));
    run.handles.sort_by_key(|h| {
        specs
            .iter()
            .position(|t| t.name == h.name)
            .unwrap_or(usize::MAX)
    });
    run.settings = merged;
    run.settings.targets = specs;
    run.plan_hash = crate::state::plan_hash(&run.settings.targets);
    tracing::info!(config = %path.display(),
        unchanged = ?diff.unchanged, rejudged = ?rejudged, stopped = ?stopped, started = ?started, failed = ?failed,
        "SIGHUP: config reloaded");
    ReloadOutcome {
        applied: true,
        checkpoint_interval_changed,
        started_targets: !started.is_empty(),
        refused,
    }
}
