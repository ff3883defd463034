//! Which plans the computed state can follow: every job that writes is random (uniform or
//! with a hot band, any mix of block sizes that divide the largest) or sequential without
//! reads mixed in with one block size, in whole 4 KiB units. Zipf and mixed-size sequential
//! writes keep the stored map.

use crate::model::genmap::VERIFY_UNIT;
use crate::model::spec::{Access, JobSpec, PhaseSpec, Skew, TargetSpec};

/// The walk's block size when it can follow the job's writes, `None` when the stored map is
/// needed. Every size must be a whole number of 4 KiB units. Random writes, uniform or with a
/// hot band, walk blocks of the largest size, which every other size must divide (smaller
/// writes are pieces of a block: `workload::worker::walker`); sequential writes without reads
/// mixed in walk the stripes with one block size. Read-only jobs always fit (`Some(None)`:
/// they write nothing the walk must follow).
pub fn walk_fits(job: &JobSpec) -> Option<Option<u32>> {
    if job.read_pct >= 100 {
        return Some(None);
    }
    let sizes = || job.bs.entries.iter().map(|e| e.0);
    let max = sizes().max()?;
    if sizes().any(|s| s == 0 || !(s as usize).is_multiple_of(VERIFY_UNIT) || max % s != 0) {
        return None;
    }
    match job.access {
        Access::Random {
            skew: Skew::Uniform | Skew::HotBand { .. },
        } => Some(Some(max)),
        Access::Sequential if job.read_pct == 0 && job.bs.entries.len() == 1 => Some(Some(max)),
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Every built-in profile (4K random, 64K sequential, SQL, Oracle, VDI) verifies on the
    /// computed state; a zipf job and sizes that do not divide the largest keep the map.
    #[test]
    fn every_builtin_profile_fits_the_walk() {
        for job in crate::model::profiles::builtin() {
            assert!(
                walk_fits(&job).is_some(),
                "{}: the stored map would cost 544 MiB per TiB",
                job.name
            );
        }
        let mut zipf = crate::model::profiles::lookup("sql").expect("sql");
        zipf.access = Access::Random {
            skew: Skew::Zipf { theta: 1.2 },
        };
        assert_eq!(walk_fits(&zipf), None);
        let mut odd = crate::model::profiles::lookup("sql").expect("sql");
        odd.bs.entries = vec![(8192, 1), (12288, 1)];
        assert_eq!(walk_fits(&odd), None, "12K is not a multiple of 8K");
        odd.bs.entries = vec![(4096, 1), (8192, 1), (65536, 1)];
        assert_eq!(walk_fits(&odd), Some(Some(65536)));
    }
}
