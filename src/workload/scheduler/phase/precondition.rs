//! The precondition phase: every worker writes its stripe sequentially `passes` times, its
//! position recorded as it goes so a restart writes only the rest.

use crate::workload::scheduler::*;

impl Runner {
    pub(crate) fn precondition(
        &mut self,
        job: &JobSpec,
        passes: u32,
        live: Option<Arc<PrecondLive>>,
    ) -> Result<(), RunError> {
        if live.as_ref().is_none_or(|l| !l.progress().is_complete()) {
            self.run_segment(
                Segment {
                    job,
                    rate_iops: None,
                    duration: None,
                    limit_passes: Some(passes),
                    progress: live,
                },
                &mut |_, _| {},
            )?;
        }
        self.verify_pass()
    }

    /// `(region_start, region_len, workers)` that worker `index` of `job` is planned with: with
    /// verification each worker gets its own stripe as a single-worker region.
    pub(crate) fn worker_region(
        &self,
        job: &JobSpec,
        index: usize,
        verify: bool,
    ) -> (u64, u64, u32) {
        let workers = job.workers.max(1);
        let n = self.member_fds.len();
        if n > 0 {
            // A spanning target: worker `index` is on member `index mod n`, with the other
            // workers on that member; it walks its own stripe of the member's region.
            let on_member = (workers as usize)
                .saturating_sub(index % n)
                .div_ceil(n)
                .max(1);
            let (start, len) = worker::stripe_bounds(
                0,
                self.region_len,
                on_member as u32,
                index / n,
                (VERIFY_UNIT as u64).max(job.bs.max() as u64),
            );
            (start, len, 1)
        } else if verify && workers > 1 {
            let (start, len) = worker::stripe_bounds(
                0,
                self.region_len,
                workers,
                index,
                (VERIFY_UNIT as u64).max(job.bs.max() as u64),
            );
            (start, len, 1)
        } else {
            (0, self.region_len, job.workers)
        }
    }

    /// The sequential stripe `(start, len)` worker `index` of `job` walks.
    pub(crate) fn worker_stripe(&self, job: &JobSpec, index: usize, verify: bool) -> (u64, u64) {
        let (start, len, workers) = self.worker_region(job, index, verify);
        worker::stripe_bounds(start, len, workers, index, worker::job_align(job))
    }

    /// The precondition's progress for this run: the checkpoint's positions when they fit this
    /// plan and region (logged), else from the start.
    pub(crate) fn precondition_live(
        &self,
        job: &JobSpec,
        passes: u32,
        block_size: u32,
        resume: Option<PreconditionProgress>,
    ) -> Arc<PrecondLive> {
        let verify = self.spec.verify != VerifyMode::Off;
        let stripes: Vec<(u64, u64)> = (0..job.workers.max(1) as usize)
            .map(|i| self.worker_stripe(job, i, verify))
            .collect();
        let mut done = vec![0u64; stripes.len()];
        if let Some(p) = resume {
            let fits = p.passes == passes
                && p.block_size == block_size
                && p.stripes.len() == stripes.len()
                && p.stripes
                    .iter()
                    .zip(&stripes)
                    .all(|(a, b)| (a.start, a.len) == *b);
            if fits {
                for (d, sp) in done.iter_mut().zip(&p.stripes) {
                    *d = sp.clamped_done(passes, block_size);
                }
                let offsets: Vec<String> =
                    p.worker_offsets().iter().map(|o| o.to_string()).collect();
                tracing::info!(target_name = %self.spec.name,
                    done_bytes = p.done_bytes(), total_bytes = p.total_bytes(),
                    "precondition resumes at {}; worker offsets {}",
                    p.describe(), offsets.join(", "));
            } else {
                tracing::warn!(target_name = %self.spec.name,
                    "the checkpoint's precondition progress does not fit this region (size or workers changed); the precondition starts over");
            }
        }
        Arc::new(PrecondLive {
            passes,
            block_size,
            stripes,
            done: done.into_iter().map(AtomicU64::new).collect(),
        })
    }
}

/// The preconditioning job: sequential writes of `bs` over the region.
pub(crate) fn precondition_job(passes: u32, bs: u32, iodepth: u32, workers: u32) -> JobSpec {
    JobSpec {
        name: "precondition".into(),
        description: format!(
            "SNIA workload-independent preconditioning: {} of {} writes",
            crate::model::fmt::count_of(passes.into(), "sequential pass"),
            crate::model::units::format_size(bs as u64)
        ),
        read_pct: 0,
        bs: BlockSizeMix::single(bs),
        access: Access::Sequential,
        iodepth,
        workers,
        rate: None,
    }
}

/// `kind = "precondition"`.
pub(crate) struct Precondition {
    pub job: JobSpec,
    pub passes: u32,
    pub block_size: u32,
    pub live: Option<Arc<PrecondLive>>,
}

impl super::Phase for Precondition {
    fn prepare(&mut self, r: &mut Runner, resume: super::Resume) -> super::Published {
        let live =
            r.precondition_live(&self.job, self.passes, self.block_size, resume.precondition);
        self.live = Some(live.clone());
        super::Published {
            precondition: Some(live),
            sweep: None,
        }
    }
    fn run(&mut self, r: &mut Runner) -> Result<(), RunError> {
        r.precondition(&self.job, self.passes, self.live.clone())
    }
}
