//! Which plans the computed state can follow: every job that writes is uniformly random or
//! sequential without reads mixed in, with one block size of whole 4 KiB units.

use crate::model::genmap::VERIFY_UNIT;
use crate::model::spec::{Access, JobSpec, PhaseSpec, Skew, TargetSpec};

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

/// Every job of the target's plan that writes can be followed by the computed walk.
pub fn plan_fits(spec: &TargetSpec) -> bool {
    spec.phases.iter().all(|p| match p {
        PhaseSpec::Precondition { block_size, .. } => {
            *block_size > 0 && (*block_size as usize).is_multiple_of(VERIFY_UNIT)
        }
        PhaseSpec::Sweep { job, .. } => walk_fits(job).is_some(),
        PhaseSpec::Soak { jobs, .. } => jobs.iter().all(|j| walk_fits(j).is_some()),
        PhaseSpec::Purge { .. } | PhaseSpec::SelfTest { .. } => true,
    })
}
