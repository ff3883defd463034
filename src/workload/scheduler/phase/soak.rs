//! The soak phase: its jobs run (rotating when asked) for the duration, with SNIA-style
//! steady-state detection recorded as it goes.

use crate::workload::scheduler::soaksample::{SoakSampler, base_step_secs};
use crate::workload::scheduler::*;

impl Runner {
    /// Runs the soak, sampling its history (IOPS, latency, events) once per interval.
    pub(crate) fn soak(
        &mut self,
        jobs: &[JobSpec],
        duration: Option<Duration>,
        rotate: Option<Duration>,
        steady: &SteadyConfig,
    ) -> Result<(), RunError> {
        let interval = self.opts.stats_interval.as_secs_f64();
        let mut sampler = SoakSampler::new(
            std::mem::take(&mut self.soak_history),
            base_step_secs(),
            (interval * 3.0).max(5.0),
        );
        let r = self.soak_sampled(&mut sampler, jobs, duration, rotate, steady);
        let snapshot = self.snapshot.clone();
        self.soak_history = sampler.finish(&snapshot);
        self.save_results();
        r
    }

    fn soak_sampled(
        &mut self,
        sampler: &mut SoakSampler,
        jobs: &[JobSpec],
        duration: Option<Duration>,
        rotate: Option<Duration>,
        steady: &SteadyConfig,
    ) -> Result<(), RunError> {
        let start = Instant::now();
        let mut progress =
            super::progress::SoakProgress::new(self.opts.progress_interval, start, &self.snapshot);
        let target = self.spec.name.clone();
        let resumed_history = self.snapshot.view(|s| s.steady_history.clone());
        let mut detectors: BTreeMap<String, (SteadyDetector, u64, Instant)> = BTreeMap::new();
        let mut idx = 0usize;
        loop {
            if self.stopping() {
                return Ok(());
            }
            let remaining = duration.map(|d| d.saturating_sub(start.elapsed()));
            if remaining == Some(Duration::ZERO) {
                return Ok(());
            }
            let job = &jobs[idx % jobs.len()];
            idx += 1;
            let seg_dur = match (remaining, rotate.filter(|_| jobs.len() > 1)) {
                (Some(r), Some(rot)) => Some(r.min(rot)),
                (Some(r), None) => Some(r),
                (None, Some(rot)) => Some(rot),
                (None, None) => None,
            };
            let seg_dur = if self.spec.verify == VerifyMode::Pass && job.read_pct < 100 {
                Some(seg_dur.map_or(VERIFY_PASS_INTERVAL, |d| d.min(VERIFY_PASS_INTERVAL)))
            } else {
                seg_dur
            };
            let rate_iops = self.resolve_rate(job)?;
            let name = job.name.clone();
            let det = detectors.entry(name.clone()).or_insert_with(|| {
                let mut d = SteadyDetector::new(steady.clone());
                // A resumed single-job soak continues its steady-state window.
                if jobs.len() == 1 {
                    for v in &resumed_history {
                        d.push_round(*v, now_unix());
                    }
                }
                (d, 0, Instant::now())
            });
            // A rotation restarts the round clock for this job.
            det.1 = 0;
            det.2 = Instant::now();
            let round = steady.round;
            let snapshot = self.snapshot.clone();
            sampler.resync(&snapshot);
            let mut on_interval = |ops_delta: u64, now: Instant| {
                sampler.sample(&snapshot);
                let left = duration.map(|d| d.saturating_sub(now.duration_since(start)));
                progress.tick(&target, &snapshot, now, left);
                det.1 += ops_delta;
                let el = now.duration_since(det.2);
                if el >= round {
                    let iops = det.1 as f64 / el.as_secs_f64();
                    let st = det.0.push_round(iops, now_unix());
                    if let Some(end) = st.first_time {
                        let rounds = st.window.len() as f64;
                        sampler.steady(&name, end - rounds * round.as_secs_f64(), end);
                    }
                    det.1 = 0;
                    det.2 = now;
                    snapshot.update(|s| {
                        s.jobs.entry(name.clone()).or_default().steady = Some(st);
                        s.steady_history.push(iops);
                        if s.steady_history.len() > STEADY_HISTORY_MAX {
                            s.steady_history.remove(0);
                        }
                    });
                }
            };
            let o = self.run_segment(
                Segment {
                    job,
                    rate_iops,
                    duration: seg_dur,
                    limit_passes: None,
                    progress: None,
                    read_back: None,
                },
                &mut on_interval,
            );
            // The job's steady state so far is recorded even when the segment stopped the
            // target.
            if let Some(st) = self
                .snapshot
                .view(|s| s.jobs.get(&job.name).and_then(|j| j.steady.clone()))
            {
                self.record_steady(&job.name, &st);
            }
            o?;
            if job.read_pct < 100 {
                self.verify_pass()?;
            }
        }
    }

    pub(crate) fn record_steady(&mut self, profile: &str, st: &SteadyStatus) {
        let out = SteadyOutcome {
            profile: profile.to_string(),
            reached: st.reached,
            round: st.first_round,
            since: st.first_time,
            window: st.window.clone(),
            average: st.average,
            range_ratio: st.range_ratio,
            slope_excursion_ratio: st.slope_excursion_ratio,
        };
        if let Some(e) = self
            .results
            .steady
            .iter_mut()
            .find(|e| e.profile == profile)
        {
            *e = out;
        } else {
            self.results.steady.push(out);
        }
        self.save_results();
    }
}

/// `kind = "soak"`.
pub(crate) struct Soak {
    pub jobs: Vec<JobSpec>,
    pub duration: Option<Duration>,
    /// What is left of `duration` after the checkpoint's time in the phase.
    pub left: Option<Duration>,
    pub rotate: Option<Duration>,
    pub steady: SteadyConfig,
}

impl super::Phase for Soak {
    fn prepare(&mut self, _r: &mut Runner, resume: super::Resume) -> super::Published {
        self.left = super::remaining(self.duration, resume.done_secs);
        super::Published::default()
    }
    fn run(&mut self, r: &mut Runner) -> Result<(), RunError> {
        r.soak(&self.jobs, self.left, self.rotate, &self.steady)
    }
}
