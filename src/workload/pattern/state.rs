//! A target's verification state, stored (any workload, 2.125 bytes per 4 KiB unit) or
//! computed (`model::walk`, bytes per run segment); which jobs the walk can follow is
//! [`crate::model::walk::walk_fits`].

use std::sync::Arc;

use super::GenMap;
use crate::model::walk::WalkMap;

/// A target's verification state, shared by its workers and the checkpointer.
#[derive(Debug, Clone)]
pub enum VerifyState {
    /// A generation per unit: any workload, 544 MiB per TiB of region.
    Stored(Arc<GenMap>),
    /// Computed from each run segment's counters: plans [`crate::model::walk::plan_fits`]
    /// accepts.
    Walk(Arc<WalkMap>),
}

impl VerifyState {
    pub fn seed(&self) -> u64 {
        match self {
            VerifyState::Stored(m) => m.seed(),
            VerifyState::Walk(w) => w.seed(),
        }
    }

    /// Bytes of memory the state uses now.
    pub fn memory_bytes(&self) -> usize {
        match self {
            VerifyState::Stored(m) => m.memory_bytes(),
            VerifyState::Walk(w) => w.memory_bytes(),
        }
    }

    /// The scheme's name, for logs and reports.
    pub fn scheme(&self) -> &'static str {
        match self {
            VerifyState::Stored(_) => "stored map",
            VerifyState::Walk(_) => "computed walk",
        }
    }

    pub fn as_stored(&self) -> Option<&GenMap> {
        match self {
            VerifyState::Stored(m) => Some(m),
            VerifyState::Walk(_) => None,
        }
    }
}
