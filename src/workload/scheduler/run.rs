//! The plan loop on the target's thread: the phases in order from where the checkpoint says the
//! plan got to, looping when asked; each phase set up from its resume state, named in the
//! snapshot, run and recorded; then the plan's end, its verdict and the last results write.

use super::*;

impl Runner {
    pub(super) fn run(&mut self) {
        if self.already_finished() {
            // Its verdict is the finished plan's, judged again on what it recorded.
            self.plan_state = crate::model::verdict::PlanState::Finished;
            self.finish();
            return;
        }
        let failed = self.run_plan();
        let finished = !self.stopping() && !failed;
        self.plan_ended(finished, failed);
        self.plan_state = if failed {
            crate::model::verdict::PlanState::Stopped
        } else if finished {
            crate::model::verdict::PlanState::Finished
        } else {
            crate::model::verdict::PlanState::Interrupted
        };
        self.finish();
    }

    /// Whether the checkpoint points past the last phase of a plan that does not loop: then
    /// there is nothing to run. A looping plan starts its next loop from the first phase.
    fn already_finished(&mut self) -> bool {
        if let Some((ri, _)) = self.resume_at
            && ri >= self.spec.phases.len()
        {
            self.resume_at = None;
            if !self.spec.loop_phases {
                tracing::info!(target_name = %self.spec.name,
                        "the checkpoint says this plan already finished; nothing to run (nvsoak state reset starts over)");
                return true;
            }
        }
        false
    }

    /// The phases in order, looping when asked, until the plan finishes, a stop is asked for or
    /// a phase fails. Returns whether a phase failed (and so stopped the target).
    fn run_plan(&mut self) -> bool {
        let mut loop_count = self.snapshot.view(|s| s.loop_count);
        loop {
            for (i, phase) in self.spec.phases.clone().iter().enumerate() {
                if self.stopping() {
                    return false;
                }
                let Some((resume, resumed)) = self.phase_resume(i) else {
                    continue;
                };
                if let Err(reason) = self.run_phase(i, phase, resume, resumed) {
                    self.target_stopped(i, phase, &reason);
                    return true;
                }
            }
            if self.stopping() {
                return false;
            }
            loop_count += 1;
            self.snapshot.update(|s| s.loop_count = loop_count);
            if !self.spec.loop_phases {
                // Finished: a checkpoint now points past the last phase.
                self.snapshot.update(|s| {
                    s.phase_index = self.spec.phases.len();
                    s.phase_elapsed_base = 0.0;
                    s.phase_paused = true;
                });
                return false;
            }
            tracing::info!(target_name = %self.spec.name, loop_count, "plan finished; looping");
        }
    }

    /// Where phase `i` starts on this pass: `None` when it is before the checkpoint's phase
    /// (skipped), else its resume state and whether it continues an earlier run. Every phase
    /// resumes where the checkpoint says it got to: a soak with the time it has left, a
    /// precondition at each worker's position, a sweep at its first point not completed.
    fn phase_resume(&mut self, i: usize) -> Option<(phase::Resume, bool)> {
        let Some((ri, el)) = self.resume_at else {
            return Some((phase::Resume::default(), false));
        };
        if i < ri {
            return None;
        }
        self.resume_at = None;
        if i > ri {
            return Some((phase::Resume::default(), false));
        }
        let resume = phase::Resume {
            done_secs: el,
            precondition: self.resume_precondition.take(),
            sweep: self.resume_sweep.take(),
        };
        Some((resume, true))
    }

    /// Phase `i`: set up, named in the snapshot, run, and given its end line and record. An
    /// error (which stops the target) is returned before the end line (see
    /// [`Runner::target_stopped`]).
    fn run_phase(
        &mut self,
        i: usize,
        phase: &PhaseSpec,
        resume: phase::Resume,
        resumed: bool,
    ) -> Result<(), RunError> {
        let done_secs = resume.done_secs;
        // Set up the phase's progress before the snapshot names the phase, so that no
        // checkpoint sees the phase without it.
        let mut runner = phase::for_spec(phase);
        let published = runner.prepare(self, resume);
        let is_soak = matches!(phase, PhaseSpec::Soak { .. });
        self.publish_phase(i, phase, done_secs, published);
        let started = self.phase_started(i, phase, done_secs, resumed);
        if is_soak {
            self.soak_entry_open(&started, phase);
        }
        self.ocp_phase_began(i, phase);
        let r = runner.run(self);
        if is_soak {
            self.snapshot.update(|s| s.soak.end(&s.jobs, now_unix()));
        }
        r?;
        if !self.stopping() {
            self.ocp_phase_refresh(true);
            self.phase_ended(&started, phase);
        } else {
            self.ocp_phase_refresh(is_soak);
            // A phase stopped before its end (a soak without a duration only ever ends
            // this way) still gets its end line and its record, marked stopped.
            self.phase_stopped(&started, phase);
        }
        Ok(())
    }

    /// The snapshot names phase `i` (`done_secs` of it already run) with the progress it
    /// publishes; from a soak phase on, the soak's figures count.
    fn publish_phase(
        &mut self,
        i: usize,
        phase: &PhaseSpec,
        done_secs: f64,
        published: phase::Published,
    ) {
        let is_soak = matches!(phase, PhaseSpec::Soak { .. });
        self.snapshot.update(|s| {
            let now = now_unix();
            s.phase_index = i;
            s.phase = phase.kind().to_string();
            s.start_phase_clock(done_secs, now);
            if is_soak {
                // From here the soak's figures count (precondition and sweeps not).
                s.soak.begin(&s.jobs, now);
                s.soak_started.get_or_insert(now);
            }
            s.precondition = published.precondition;
            s.sweep_progress = published.sweep;
            if done_secs == 0.0 {
                s.steady_history.clear();
            }
        });
    }

    /// Phase `i` failed with `reason`: the target stops, saying why.
    fn target_stopped(&mut self, i: usize, phase: &PhaseSpec, reason: &RunError) {
        tracing::error!(target_name = %self.spec.name, phase = i + 1, %reason,
            "target stopped in phase {} ({})", i + 1, phase.kind());
        self.phase_failed();
        self.snapshot.update(|s| {
            s.up = false;
            s.stop_reason = Some(reason.to_string());
        });
    }

    fn finish(&mut self) {
        self.snapshot.update(|s| {
            s.running = false;
            s.pause_clock(now_unix());
            let names: Vec<String> = s.jobs.keys().cloned().collect();
            for n in names {
                s.deactivate_job(&n);
            }
        });
        self.save_results();
        tracing::debug!(target_name = %self.spec.name, "target runner exited");
    }
}
