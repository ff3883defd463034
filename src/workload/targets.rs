//! The running targets as a set of values that come and go: the daemon's start-up, a SIGHUP
//! reload (and, next, drive bays) start and stop members through the same two calls,
//! [`TargetSet::start`] and [`TargetSet::stop`], so every start follows one policy for the
//! target's earlier results: resumed from its checkpoint entry, or moved aside (never
//! overwritten) before the plan starts over.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use crate::model::checkpoint::TargetState;
use crate::model::spec::TargetSpec;
use crate::workload::pattern::GenMap;
use crate::workload::scheduler::{self, RunOptions, SharedSnapshot, TargetError, TargetHandle};

/// How a target starts.
#[derive(Debug)]
pub enum StartFrom {
    /// From its checkpoint entry (and its generation map, for a verified target).
    Resume {
        state: Box<TargetState>,
        genmap: Option<GenMap>,
    },
    /// From the start of its plan; `why` is the suffix its earlier results file goes aside
    /// with ([`crate::state::results::archive_reason_text`]).
    Fresh { why: &'static str },
}

/// The targets that run now, in the config's order.
#[derive(Default)]
pub struct TargetSet {
    handles: Vec<TargetHandle>,
}

impl TargetSet {
    pub fn new() -> Self {
        TargetSet::default()
    }

    /// Start `spec` and add it to the set. A fresh start first moves the target's earlier
    /// results file (and OCPTV record) aside. On a refusal (the target could not be opened
    /// or claimed) the set is unchanged and the error says why.
    pub fn start(
        &mut self,
        spec: &TargetSpec,
        from: StartFrom,
        opts: &RunOptions,
        global_stop: &Arc<AtomicBool>,
    ) -> Result<(), TargetError> {
        let h = Self::launch(spec, from, opts, global_stop, None)?;
        self.adopt(h);
        Ok(())
    }

    /// What [`TargetSet::start`] does before the handle joins a set, with the plan's I/O
    /// held until `gate` (when given) opens: the daemon's start-up opens and claims every
    /// target first, on a few threads at once, and then lets their plans run together, so
    /// that opening the last target does not compete for a CPU with the I/O of all the others
    /// (issue 35: 200 file targets took 4.8 s to start that way, most of it waiting).
    pub fn launch(
        spec: &TargetSpec,
        from: StartFrom,
        opts: &RunOptions,
        global_stop: &Arc<AtomicBool>,
        gate: Option<crate::util::gate::Gate>,
    ) -> Result<TargetHandle, TargetError> {
        let (resume, genmap) = match from {
            StartFrom::Resume { state, genmap } => (Some(*state), genmap),
            StartFrom::Fresh { why } => {
                crate::state::results::archive(&opts.state_dir, &spec.name, why);
                (None, None)
            }
        };
        let h = scheduler::start(
            spec.clone(),
            opts.clone(),
            global_stop.clone(),
            resume,
            genmap,
            gate,
        )?;
        if spec.members.is_empty() {
            tracing::info!(target_name = %spec.name, path = %spec.path.display(), "target started");
        } else {
            let members = spec
                .members
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ");
            tracing::info!(target_name = %spec.name, path = %spec.path.display(), %members,
                "target started, spanning {} devices: {members}", spec.members.len());
        }
        Ok(h)
    }

    /// Add a handle from [`TargetSet::launch`] to the set (after the others).
    pub fn adopt(&mut self, h: TargetHandle) {
        self.handles.push(h);
    }

    /// Stop the target named `name` and wait for its workers to drain; `false` if none runs.
    /// Blocking.
    pub fn stop(&mut self, name: &str) -> bool {
        match self.handles.iter().position(|h| h.name == name) {
            Some(i) => {
                self.handles.remove(i).join();
                true
            }
            None => false,
        }
    }

    /// Take every member out of the set, to be joined by the caller (off the event loop).
    pub fn take_all(&mut self) -> Vec<TargetHandle> {
        std::mem::take(&mut self.handles)
    }

    /// Stop every member and wait for each. Blocking.
    pub fn stop_all(&mut self) {
        for h in self.take_all() {
            h.join();
        }
    }

    pub fn get(&self, name: &str) -> Option<&TargetHandle> {
        self.handles.iter().find(|h| h.name == name)
    }

    pub fn contains(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    pub fn iter(&self) -> impl Iterator<Item = &TargetHandle> {
        self.handles.iter()
    }

    pub fn len(&self) -> usize {
        self.handles.len()
    }

    pub fn is_empty(&self) -> bool {
        self.handles.is_empty()
    }

    /// Every member's plan has ended (true for an empty set).
    pub fn all_finished(&self) -> bool {
        self.handles.iter().all(TargetHandle::is_finished)
    }

    /// The members' shared snapshots, in the set's order.
    pub fn snapshots(&self) -> Vec<SharedSnapshot> {
        self.handles.iter().map(|h| h.snapshot.clone()).collect()
    }

    /// Put the members in the order of `specs` (a member not named there goes last).
    pub fn order_by(&mut self, specs: &[TargetSpec]) {
        self.handles.sort_by_key(|h| {
            specs
                .iter()
                .position(|t| t.name == h.name)
                .unwrap_or(usize::MAX)
        });
    }
}
