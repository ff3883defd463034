//! The sweep phase: the job's maximum IOPS measured unthrottled, then one point per target
//! rate (10 to 120% of that maximum); resumes at its first point not completed.

use crate::workload::scheduler::*;

impl Runner {
    /// The sweep to continue, if an earlier run got past its uncontrolled run: the checkpoint's,
    /// or the results file's record of it when that has more points (the file is written after
    /// every point, the checkpoint only every interval), or an unfinished sweep of this job in
    /// the results file (killed before a checkpoint recorded it).
    pub(crate) fn sweep_resume(
        &self,
        job: &JobSpec,
        points: &[u32],
        cp: Option<SweepResult>,
    ) -> Option<SweepResult> {
        let found = earlier_sweep(&self.results.sweeps, job, cp)?;
        if !sweep_fits(&found, job, points) {
            tracing::warn!(target_name = %self.spec.name, job = %job.name,
                "the earlier sweep's points do not match this plan; the sweep starts over");
            return None;
        }
        Some(found)
    }

    pub(crate) fn sweep(
        &mut self,
        job: &JobSpec,
        max_duration: Duration,
        point_duration: Duration,
        points: &[u32],
        resumed: Option<SweepResult>,
    ) -> Result<(), RunError> {
        let mut result;
        let max_iops;
        match resumed {
            Some(r) => {
                // The earlier run's maximum and completed points stand; the point that was
                // interrupted runs again from its start.
                result = r;
                max_iops = result.max_iops;
                self.max_iops.insert(job.name.clone(), max_iops);
                let next = result.points.len();
                if next <= points.len() {
                    tracing::info!(target_name = %self.spec.name, job = %job.name,
                        "sweep resumes at point {next} of {} (max {} IOPS from the earlier run)",
                        points.len(), thousands(max_iops));
                } else {
                    tracing::info!(target_name = %self.spec.name, job = %job.name,
                        "sweep resumes after its last point (all {} done; max {} IOPS from the earlier run)",
                        points.len(), thousands(max_iops));
                }
            }
            None => {
                result = SweepResult {
                    profile: job.name.clone(),
                    block_size: job.bs.mean(),
                    read_pct: job.read_pct,
                    started: now_unix(),
                    ..Default::default()
                };
                let (max, m) = self.measure_max(job, max_duration)?;
                max_iops = m;
                result.max_iops = max_iops;
                let p = point_from(0, 0.0, &max);
                if !self.stopping() {
                    self.log_sweep_point(job, 0, points.len(), &p);
                }
                result.points.push(p);
            }
        }
        self.publish_sweep(job, &result);
        let done = result.points.len().saturating_sub(1).min(points.len());
        for &pct in &points[done..] {
            if self.stopping() {
                break;
            }
            let target_iops = max_iops * pct as f64 / 100.0;
            let o = self.run_segment(
                Segment {
                    job,
                    rate_iops: Some(target_iops.max(1.0)),
                    duration: Some(point_duration),
                    limit_passes: None,
                    progress: None,
                    read_back: None,
                },
                &mut |_, _| {},
            )?;
            let p = point_from(pct, target_iops, &o);
            // A point cut short by a stop is not a point of the curve: it runs again on resume.
            if !self.stopping() {
                self.log_sweep_point(job, result.points.len(), points.len(), &p);
            }
            result.points.push(p);
            self.publish_sweep(job, &result);
        }
        result.finished = Some(now_unix());
        self.publish_sweep(job, &result);
        if job.read_pct < 100 {
            self.verify_pass()?;
        }
        Ok(())
    }

    /// The journal's line for a sweep point as it finishes: which of how many, what was asked
    /// (the uncontrolled run, point 0, asks for the maximum), what the device did.
    fn log_sweep_point(&self, job: &JobSpec, index: usize, total: usize, p: &SweepPoint) {
        use crate::model::fmt::{fmt_count, fmt_latency_us};
        let asked = if index == 0 {
            "uncontrolled (the maximum)".to_string()
        } else {
            format!("{}% of max = {} IOPS", p.pct, fmt_count(p.target_iops))
        };
        tracing::info!(target_name = %self.spec.name, job = %job.name, point = index,
            points = total, pct = p.pct, target_iops = p.target_iops, iops = p.iops,
            lat_mean_us = p.lat_avg_us, lat_p99_us = p.lat_p99_us, errors = p.errors,
            "sweep point {index}/{total}: {asked}: {} IOPS, mean {}, p99 {}, {}",
            fmt_count(p.iops), fmt_latency_us(p.lat_avg_us), fmt_latency_us(p.lat_p99_us),
            crate::model::fmt::count_of(p.errors, "error"));
    }

    pub(crate) fn publish_sweep(&mut self, job: &JobSpec, result: &SweepResult) {
        self.snapshot.update(|s| {
            s.jobs.entry(job.name.clone()).or_default().sweep = Some(result.clone());
            s.sweep_progress = Some(result.clone());
        });
        if let Some(r) = self
            .results
            .sweeps
            .iter_mut()
            .find(|r| r.started == result.started)
        {
            *r = result.clone();
        } else {
            self.results.sweeps.push(result.clone());
        }
        self.save_results();
    }

    /// Run `job` uncontrolled for `duration` and remember its IOPS as the job's maximum on this
    /// target (the reference for sweep points and percentage rate limits).
    pub(crate) fn measure_max(
        &mut self,
        job: &JobSpec,
        duration: Duration,
    ) -> Result<(SegmentOutcome, f64), RunError> {
        let uncontrolled = JobSpec {
            rate: None,
            ..job.clone()
        };
        let o = self.run_segment(
            Segment {
                job: &uncontrolled,
                rate_iops: None,
                duration: Some(duration),
                limit_passes: None,
                progress: None,
                read_back: None,
            },
            &mut |_, _| {},
        )?;
        let max_iops = o.ops as f64 / o.secs.max(1e-9);
        self.max_iops.insert(job.name.clone(), max_iops);
        Ok((o, max_iops))
    }

    /// Turn a job's rate limit into total IOPS for the job.
    pub(crate) fn resolve_rate(&mut self, job: &JobSpec) -> Result<Option<f64>, RunError> {
        Ok(match &job.rate {
            None => None,
            Some(RateLimit::Iops(v)) => Some(*v),
            Some(RateLimit::BytesPerSec(b)) => Some(b / job.bs.mean().max(512.0)),
            Some(RateLimit::PercentOfMax(p)) => {
                let max = match self.max_iops.get(&job.name) {
                    Some(m) => *m,
                    None => {
                        // No sweep measured this job here: calibrate with a short uncontrolled run.
                        let d = (self.opts.stats_interval * 5).max(Duration::from_secs(5));
                        tracing::info!(target_name = %self.spec.name, job = %job.name, secs = d.as_secs_f64(),
                            "calibrating maximum IOPS for a percentage rate limit");
                        self.measure_max(job, d)?.1
                    }
                };
                Some((max * p / 100.0).max(1.0))
            }
        })
    }
}

pub(crate) fn same_sweep_job(r: &SweepResult, job: &JobSpec) -> bool {
    r.profile == job.name
        && r.read_pct == job.read_pct
        && (r.block_size - job.bs.mean()).abs() < 0.5
}

/// The earlier record of a sweep of `job` to continue: the checkpoint's (`cp`), replaced by the
/// results file's record of the same sweep (same start time) when that has more points, or,
/// without a checkpoint record, the newest unfinished sweep of `job` in the results file.
pub(crate) fn earlier_sweep(
    file: &[SweepResult],
    job: &JobSpec,
    cp: Option<SweepResult>,
) -> Option<SweepResult> {
    match cp {
        Some(c) => {
            let longer = file
                .iter()
                .find(|r| r.started == c.started && same_sweep_job(r, job))
                .filter(|r| r.points.len() > c.points.len())
                .cloned();
            Some(longer.unwrap_or(c))
        }
        None => file
            .iter()
            .rev()
            .find(|r| r.finished.is_none() && same_sweep_job(r, job))
            .cloned(),
    }
}

/// Whether an earlier sweep can be continued by this plan's sweep of `job` over `points`: the
/// same job, an uncontrolled run first, and its completed points a prefix of `points`.
pub(crate) fn sweep_fits(r: &SweepResult, job: &JobSpec, points: &[u32]) -> bool {
    let done: Vec<u32> = r.points.iter().skip(1).map(|p| p.pct).collect();
    same_sweep_job(r, job)
        && r.points.first().is_some_and(|p| p.pct == 0)
        && r.max_iops > 0.0
        && done.len() <= points.len()
        && points[..done.len()] == done[..]
}

pub(crate) fn point_from(pct: u32, target_iops: f64, o: &SegmentOutcome) -> SweepPoint {
    let iops = o.ops as f64 / o.secs.max(1e-9);
    SweepPoint {
        pct,
        target_iops,
        iops,
        bytes_per_sec: o.bytes as f64 / o.secs.max(1e-9),
        lat_avg_us: o.lat_avg_us,
        lat_p50_us: o.q_us[0],
        lat_p99_us: o.q_us[1],
        lat_p999_us: o.q_us[2],
        lat_p9999_us: o.q_us[3],
        duration_secs: o.secs,
        errors: o.errors,
        member_iops: o
            .members
            .iter()
            .map(|m| (m.read_ops + m.write_ops) as f64 / o.secs.max(1e-9))
            .collect(),
    }
}

/// `kind = "sweep"`.
pub(crate) struct Sweep {
    pub job: JobSpec,
    pub max_duration: Duration,
    pub point_duration: Duration,
    pub points: Vec<u32>,
    pub resume: Option<SweepResult>,
}

impl super::Phase for Sweep {
    fn prepare(&mut self, r: &mut Runner, resume: super::Resume) -> super::Published {
        self.resume = r.sweep_resume(&self.job, &self.points, resume.sweep);
        super::Published {
            precondition: None,
            sweep: self.resume.clone(),
        }
    }
    fn run(&mut self, r: &mut Runner) -> Result<(), RunError> {
        r.sweep(
            &self.job,
            self.max_duration,
            self.point_duration,
            &self.points,
            self.resume.take(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sweep_rec(started: f64, pcts: &[u32], finished: bool) -> SweepResult {
        SweepResult {
            profile: "curve".into(),
            block_size: 4096.0,
            read_pct: 100,
            max_iops: 1000.0,
            started,
            finished: finished.then_some(started + 10.0),
            points: pcts
                .iter()
                .map(|&pct| SweepPoint {
                    pct,
                    iops: 10.0 * pct as f64,
                    ..Default::default()
                })
                .collect(),
        }
    }

    #[test]
    fn a_sweep_resumes_from_the_longest_record_of_it() {
        let job = JobSpec {
            name: "curve".into(),
            description: String::new(),
            read_pct: 100,
            bs: BlockSizeMix::single(4096),
            access: Access::Random {
                skew: Skew::Uniform,
            },
            iodepth: 8,
            workers: 1,
            rate: None,
        };
        let points = [10, 50, 90];
        let file = vec![
            sweep_rec(100.0, &[0, 10, 50, 90], true),
            sweep_rec(200.0, &[0, 10, 50], false),
        ];
        // The checkpoint is behind the results file (a point finished after the last save).
        let cp = sweep_rec(200.0, &[0, 10], false);
        let got = earlier_sweep(&file, &job, Some(cp.clone())).unwrap();
        assert_eq!(got, file[1]);
        // ... or ahead of it (not possible today, but never go backwards).
        let got = earlier_sweep(&file[..1], &job, Some(cp.clone())).unwrap();
        assert_eq!(got, cp);
        // No checkpoint record: the newest unfinished sweep of this job in the file.
        assert_eq!(earlier_sweep(&file, &job, None).unwrap(), file[1]);
        assert_eq!(earlier_sweep(&file[..1], &job, None), None);
        let other = JobSpec {
            name: "other".into(),
            ..job.clone()
        };
        assert_eq!(earlier_sweep(&file, &other, None), None);
        // Fits only as a prefix of this plan's points, after an uncontrolled run.
        assert!(sweep_fits(&file[1], &job, &points));
        assert!(sweep_fits(&file[0], &job, &points), "all points done");
        assert!(!sweep_fits(&file[1], &job, &[10, 70, 90]));
        assert!(!sweep_fits(&file[0], &job, &[10, 50]));
        assert!(!sweep_fits(
            &sweep_rec(1.0, &[10, 50], false),
            &job,
            &points
        ));
        assert!(!sweep_fits(&file[1], &other, &points));
    }
}
