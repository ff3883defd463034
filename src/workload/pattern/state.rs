//! Which verification state a target keeps: the stored generation map (any workload, 2.125
//! bytes per 4 KiB unit) or the computed walk (`model::walk`, bytes per run segment), and
//! which jobs the walk can follow.

use std::sync::Arc;

use super::{GenMap, VERIFY_UNIT};
use crate::model::spec::{Access, JobSpec, Skew};
use crate::model::walk::WalkMap;

/// A target's verification state, shared by its workers and the checkpointer.
#[derive(Debug, Clone)]
pub enum VerifyState {
    /// A generation per unit: any workload, 544 MiB per TiB of region.
    Stored(Arc<GenMap>),
    /// Computed from each run segment's counters: jobs [`walk_fits`] accepts.
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

/// The job's one block size when the walk can follow its writes: one block size, a whole
/// number of 4 KiB units, and writes that are either uniformly random (a permuted walk) or
/// sequential without reads mixed in (the stripe walk). Read-only jobs always fit (they write
/// nothing the walk must follow). `None`: the stored map is needed.
pub fn walk_fits(job: &JobSpec) -> Option<Option<u32>> {
    if job.read_pct >= 100 {
        return Some(None);
    }
    let [(bs, _)] = job.bs.entries[..] else {
        return None;
    };
    if bs == 0 || !(bs as usize).is_multiple_of(VERIFY_UNIT) {
        return None;
    }
    match job.access {
        Access::Random {
            skew: Skew::Uniform,
        } => Some(Some(bs)),
        Access::Sequential if job.read_pct == 0 => Some(Some(bs)),
        _ => None,
    }
}
