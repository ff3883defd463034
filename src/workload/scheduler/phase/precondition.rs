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
                    read_back: None,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::worker;
    use crate::workload::worker::{BsPicker, OffsetGen, Rng};

    fn live(stripes: Vec<(u64, u64)>, passes: u32, bs: u32) -> Arc<PrecondLive> {
        Arc::new(PrecondLive {
            passes,
            block_size: bs,
            done: stripes.iter().map(|_| AtomicU64::new(0)).collect(),
            stripes,
        })
    }

    fn write(h: &mut ProgressHook, off: u64, len: usize) {
        let mut buf = vec![0u8; len];
        h.before_write(&mut buf, off);
    }

    /// Run 1 walks each stripe with `depth` writes in flight, completing out of order, and is
    /// killed with its last writes still in flight; run 2 resumes from what the hook recorded,
    /// as the scheduler does. Every byte is written at least `passes` times, and at most the
    /// writes in flight at the kill are redone.
    #[test]
    fn a_resumed_precondition_writes_every_byte_passes_times() {
        let region: u64 = (1 << 20) + (24 << 10);
        let (bs, passes, depth, workers) = (8192u32, 3u32, 4usize, 3u32);
        let job = precondition_job(passes, bs, depth as u32, workers);
        let picker = BsPicker::new(&job.bs.entries);
        let align = worker::job_align(&job);
        let stripes: Vec<(u64, u64)> = (0..workers as usize)
            .map(|i| worker::stripe_bounds(0, region, workers, i, align))
            .collect();
        assert_ne!(stripes[0].1, stripes[2].1, "stripes of unequal length");
        // Where run 1 is killed, in I/Os: mid pass 1, exactly a pass boundary, mid pass 3.
        let blocks = |len: u64| len.div_ceil(bs as u64) as usize;
        let kill_at = [
            blocks(stripes[0].1) / 3,
            blocks(stripes[1].1),
            2 * blocks(stripes[2].1) + 7,
        ];
        let l = live(stripes.clone(), passes, bs);
        let mut rng = Rng::new(1);
        for (i, &(start, len)) in stripes.iter().enumerate() {
            let mut counts = vec![0u32; (len / 512) as usize];
            let mut mark = |off: u64, n: u32| {
                for b in (off - start) / 512..(off - start + n as u64) / 512 {
                    counts[b as usize] += 1;
                }
            };
            // Run 1.
            let mut g = OffsetGen::new(&job, picker.sizes(), 0, region, i).unwrap();
            let mut h = ProgressHook::new(None, l.clone(), i, 0, depth as u32);
            let mut inflight: Vec<(u64, u32)> = Vec::new();
            for _ in 0..kill_at[i] {
                let (off, n) = g.next(&mut rng, 0, bs, true);
                write(&mut h, off, n as usize);
                inflight.push((off, n));
                if inflight.len() == depth {
                    // Complete the newest half first, then the rest.
                    let mut batch = inflight.split_off(depth / 2);
                    batch.append(&mut inflight);
                    for (off, n) in batch {
                        h.after_write(off, n as usize, true);
                        mark(off, n);
                    }
                }
            }
            // Killed: the newest write of the batch in flight completed, the others never did.
            if let Some(&(off, n)) = inflight.last() {
                h.after_write(off, n as usize, true);
                mark(off, n);
            }
            let sp = l.progress().stripes[i].clone();
            assert_eq!((sp.start, sp.len), (start, len));
            let (pos, left) = sp.resume_point(passes, bs);
            assert_eq!(
                pos % bs as u64,
                0,
                "worker {i}: resume position on a block boundary"
            );
            // Run 2: the worker's walk from `pos` with `left` bytes, trimmed at the limit.
            let mut g = OffsetGen::new(&job, picker.sizes(), 0, region, i).unwrap();
            g.start_at(pos);
            let limit = left.div_ceil(align) * align;
            assert_eq!(limit, left);
            let mut submitted = 0u64;
            while submitted < limit {
                let (off, n) = g.next(&mut rng, 0, bs, true);
                let n = n.min((limit - submitted) as u32);
                mark(off, n);
                submitted += n as u64;
            }
            let min = counts.iter().copied().min().unwrap();
            let sum: u64 = counts.iter().map(|&c| c as u64).sum::<u64>() * 512;
            assert!(min >= passes, "worker {i}: a byte written only {min} times");
            let redone = sum - len * passes as u64;
            assert!(
                redone <= depth as u64 * bs as u64,
                "worker {i}: {redone} bytes written more than {passes} times"
            );
        }
    }
}
