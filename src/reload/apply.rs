//! Applying a SIGHUP reload: load and validate the file again, then stop, start and reorder the
//! running targets by the pure diff of the parent module. The daemon calls [`reload`] off the
//! event loop (it opens files and joins threads).

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use crate::config::Settings;
use crate::reload::Overrides;
use crate::workload::scheduler::{self, RunOptions};
use crate::workload::targets::{StartFrom, TargetSet};

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
///
/// `config_path` is the file to read again (`None`: the built-in default, nothing to reload),
/// `overrides` the command line's settings applied over it; `settings` and `targets` are what
/// runs now, and are changed in place when the new file is applied.
pub(crate) fn reload(
    config_path: Option<&Path>,
    overrides: &Overrides,
    settings: &mut Settings,
    targets: &mut TargetSet,
    opts: &RunOptions,
    global_stop: &Arc<AtomicBool>,
) -> ReloadOutcome {
    let Some(path) = config_path else {
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
    overrides.apply(&mut new);
    for key in crate::reload::needs_restart(settings, &new) {
        tracing::warn!(config = %path.display(), key,
            "SIGHUP: {key} changed; it takes effect only after a restart, keeping the running value");
    }
    let merged = crate::reload::merge_live(settings, &new);
    if let Err(e) = scheduler::check_aliases(&merged.targets) {
        tracing::error!(config = %path.display(),
            "SIGHUP: config rejected, keeping the running config unchanged: {e}");
        return ReloadOutcome::default();
    }
    // The verification state of the whole new plan, running targets included, within the
    // budget, as at start: a reload cannot take what `run` would refuse.
    if let Err(e) = scheduler::check_plan_budget(
        &merged.targets,
        merged.state.max_verify_memory,
        crate::util::host::mem_total(),
    ) {
        tracing::error!(config = %path.display(),
            "SIGHUP: config rejected, keeping the running config unchanged: {e}");
        return ReloadOutcome::default();
    }
    let diff = crate::reload::diff_targets(&settings.targets, &merged.targets);
    let checkpoint_interval_changed =
        merged.state.checkpoint_interval != settings.state.checkpoint_interval;

    // Gates are judgement, not plan: a target whose gates alone changed keeps running and is
    // judged again (its thread at its next interval; a target whose plan already ended, here).
    let mut rejudged = Vec::new();
    for spec in &diff.rejudged {
        if let Some(h) = targets.get(&spec.name) {
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
        if targets.stop(&name) {
            tracing::info!(target_name = %name, "SIGHUP: target stopped");
            stopped.push(name);
        }
    }
    let mut started = Vec::new();
    let mut failed = Vec::new();
    let mut refused = Vec::new();
    for spec in diff.to_start() {
        // A changed target starts its plan over: its earlier results go aside first.
        let from = StartFrom::Fresh { why: "restart" };
        match targets.start(&spec, from, opts, global_stop) {
            Ok(()) => {
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
    specs.retain(|t| targets.contains(&t.name));
    targets.order_by(&specs);
    *settings = merged;
    settings.targets = specs;
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
