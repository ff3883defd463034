//! The journal's story of a plan: one INFO line when each phase starts and one when it ends,
//! with its outcome in that line (sweep: the maximum and the sub-1 ms frontier; soak: steady
//! state reached or not, and in which round; every phase: duration and totals), and why a
//! target's plan ended (finished, stopped on request, or stopped on an error).

use std::time::Instant;

use super::{Runner, TargetView};
use crate::model::fmt::fmt_bytes;
use crate::model::results::SweepResult;
use crate::model::spec::PhaseSpec;
use crate::stats::OpCounters;

/// What a phase's end line is measured against: the totals when it started.
#[derive(Clone)]
pub(crate) struct PhaseStart {
    index: usize,
    /// The phase continues one an earlier run stopped (its results entry is added to).
    resumed: bool,
    at: Instant,
    read: OpCounters,
    write: OpCounters,
}

/// The running soak phase's entry in the results file: where it is in `soak.phases`, what
/// earlier runs had recorded in it when this run started it, and what its figures are
/// measured against.
pub(crate) struct SoakEntry {
    start: PhaseStart,
    phase: PhaseSpec,
    index: usize,
    base: crate::model::results::SoakPhase,
}

/// A phase's own figures, from its start to now.
struct PhaseTotals {
    line: String,
    secs: f64,
    read_bytes: u64,
    written_bytes: u64,
    read_ops: u64,
    write_ops: u64,
    errors: u64,
}

/// The job names a phase runs.
fn job_names(phase: &PhaseSpec) -> Vec<String> {
    match phase {
        PhaseSpec::Precondition { .. } => vec!["precondition".to_string()],
        PhaseSpec::Sweep { job, .. } => vec![job.name.clone()],
        PhaseSpec::Soak { jobs, .. } => jobs.iter().map(|j| j.name.clone()).collect(),
        PhaseSpec::Purge { .. } | PhaseSpec::SelfTest { .. } => Vec::new(),
    }
}

/// The name a phase's record carries: its job names, the purge method or the self-test.
fn record_name(phase: &PhaseSpec) -> String {
    match phase {
        PhaseSpec::Purge { method, .. } => method.name().to_string(),
        PhaseSpec::SelfTest { test, .. } => test.name().to_string(),
        _ => job_names(phase).join(" + "),
    }
}

/// Where a resumed phase resumes, in words: a soak with the time done and the time left, a
/// precondition at its progress, a sweep at its next point.
pub(crate) fn resume_point(
    phase: &PhaseSpec,
    done_secs: f64,
    precondition: Option<&crate::model::checkpoint::PreconditionProgress>,
    sweep: Option<&SweepResult>,
) -> String {
    match phase {
        PhaseSpec::Soak {
            duration: Some(d), ..
        } => {
            let left = (d.as_secs_f64() - done_secs).max(0.0);
            format!(
                "{} done, {} left of {}",
                fmt_secs(done_secs),
                fmt_secs(left),
                fmt_secs(d.as_secs_f64())
            )
        }
        PhaseSpec::Soak { duration: None, .. } => {
            format!("{} done; it runs until stopped", fmt_secs(done_secs))
        }
        PhaseSpec::Precondition { .. } => match precondition {
            Some(p) if p.done_bytes() > 0 => format!("at {}", p.describe()),
            _ => "from its start (no progress was kept)".to_string(),
        },
        PhaseSpec::Sweep { points, .. } => match sweep {
            // The first point is the uncontrolled run; the next is 1-based among the rest.
            Some(s) if s.points.len() > points.len() => format!(
                "after its last point (all {} done), max {} IOPS from the earlier run",
                points.len(),
                super::thousands(s.max_iops)
            ),
            Some(s) if !s.points.is_empty() => format!(
                "at point {} of {}, max {} IOPS from the earlier run",
                s.points.len(),
                points.len(),
                super::thousands(s.max_iops)
            ),
            _ => "from its start (its uncontrolled run had not ended)".to_string(),
        },
        PhaseSpec::Purge { .. } => "a purge already completed is not run again".to_string(),
        PhaseSpec::SelfTest { .. } => "the self-test runs again".to_string(),
    }
}

/// "95 s", "1 h 02 min 05 s".
fn fmt_secs(secs: f64) -> String {
    let s = secs.max(0.0).round() as u64;
    let (h, m, sec) = (s / 3600, (s / 60) % 60, s % 60);
    if h > 0 {
        format!("{h} h {m:02} min {sec:02} s")
    } else if m > 0 {
        format!("{m} min {sec:02} s")
    } else {
        format!("{sec} s")
    }
}

/// "max 12,345 IOPS; sub-1 ms frontier 9,876 IOPS at 80%" (or "no point under 1 ms").
pub(crate) fn sweep_outcome(s: &SweepResult) -> String {
    let best = s
        .points
        .iter()
        .filter(|p| p.lat_avg_us > 0.0 && p.lat_avg_us < 1000.0)
        .max_by(|a, b| a.iops.total_cmp(&b.iops));
    let frontier = match best {
        Some(p) if p.pct == 0 => format!(
            "sub-1 ms frontier {} IOPS (the uncontrolled run)",
            super::thousands(p.iops)
        ),
        Some(p) => format!(
            "sub-1 ms frontier {} IOPS at {}%",
            super::thousands(p.iops),
            p.pct
        ),
        None => "no point under 1 ms average latency".to_string(),
    };
    format!("max {} IOPS; {frontier}", super::thousands(s.max_iops))
}

/// The outcome part of a phase's end line, from the scrape view.
fn outcome(phase: &PhaseSpec, v: &TargetView) -> String {
    let names = job_names(phase);
    let jobs = names.iter().filter_map(|n| v.jobs.get(n).map(|j| (n, j)));
    match phase {
        PhaseSpec::Precondition { passes, .. } => {
            let noun = if *passes == 1 { "pass" } else { "passes" };
            format!("{passes} {noun} over the region")
        }
        PhaseSpec::Sweep { .. } => jobs
            .filter_map(|(_, j)| j.sweep.as_ref())
            .map(sweep_outcome)
            .next()
            .unwrap_or_else(|| "no sweep result".to_string()),
        PhaseSpec::Soak { .. } => {
            let parts: Vec<String> = jobs
                .map(|(n, j)| match &j.steady {
                    Some(st) if st.reached => format!(
                        "{n}: steady state reached in round {} ({} IOPS window average)",
                        st.since_round.unwrap_or(0),
                        super::thousands(st.average)
                    ),
                    Some(st) => match st.first_round {
                        Some(r) => {
                            format!("{n}: steady state reached in round {r}, not held at the end")
                        }
                        None => format!("{n}: steady state not reached"),
                    },
                    None => format!("{n}: no steady-state rounds"),
                })
                .collect();
            if parts.is_empty() {
                "no job ran".to_string()
            } else {
                parts.join("; ")
            }
        }
        // The step's own outcome replaces this (`phase_ended`).
        PhaseSpec::Purge { .. } | PhaseSpec::SelfTest { .. } => String::new(),
    }
}

impl Runner {
    /// Logs the phase's start ("started", or "resumed" with where it resumes) and opens its
    /// record in the results file (a resumed phase reopens the record its earlier run left);
    /// returns what its end is measured against.
    pub(crate) fn phase_started(
        &mut self,
        index: usize,
        phase: &PhaseSpec,
        done: f64,
        resumed: bool,
    ) -> PhaseStart {
        let (read, write, loop_count, precondition, sweep) = self.snapshot.view(|v| {
            let (r, w) = super::snapshot::job_totals(&v.jobs);
            (
                r,
                w,
                v.loop_count,
                v.precondition.as_ref().map(|p| p.progress()),
                v.sweep_progress.clone(),
            )
        });
        let jobs = job_names(phase).join(", ");
        let n = index + 1;
        if resumed {
            let at = resume_point(phase, done, precondition.as_ref(), sweep.as_ref());
            tracing::info!(target_name = %self.spec.name, phase = n, phase_index = index,
                kind = phase.kind(), %jobs, done_secs = done,
                "phase {n} ({}) resumed: {at}", phase.kind());
        } else {
            tracing::info!(target_name = %self.spec.name, phase = n, phase_index = index,
                kind = phase.kind(), %jobs, "phase {n} ({}) started", phase.kind());
        }
        let boot_id = crate::util::host::boot_id();
        let now = super::now_unix();
        if resumed && matches!(phase, PhaseSpec::Soak { .. }) {
            self.soak_restarted(index, loop_count, phase.kind(), boot_id.as_deref(), now);
        }
        crate::model::results::phase_began(
            &mut self.results.phases,
            index,
            loop_count,
            phase.kind(),
            &record_name(phase),
            now,
        );
        if let Some(p) = self.results.phases.last_mut() {
            p.boot_id = boot_id;
        }
        self.save_results();
        PhaseStart {
            index,
            resumed,
            at: Instant::now(),
            read,
            write,
        }
    }

    /// A soak phase resumes the record an earlier run left: the restart goes on the soak's
    /// history as an event, from when that run stopped (its record's end, else the last the
    /// results file saw of it: the soak entry's last write, the history's end) to now, with
    /// why it stopped.
    fn soak_restarted(
        &mut self,
        index: usize,
        loop_count: u64,
        kind: &str,
        boot_id: Option<&str>,
        now: f64,
    ) {
        let Some((cause, ended)) = crate::model::results::resume_cause(
            &self.results.phases,
            index,
            loop_count,
            kind,
            boot_id,
        ) else {
            return;
        };
        let last_seen = [
            ended,
            self.results
                .soak
                .as_ref()
                .and_then(|s| s.phases.last())
                .and_then(|p| p.ended),
            self.soak_history.span().map(|s| s.1),
        ]
        .into_iter()
        .flatten()
        .filter(|t| t.is_finite() && *t <= now)
        .fold(None, |a: Option<f64>, t| Some(a.map_or(t, |a| a.max(t))));
        self.soak_history
            .restart(last_seen.unwrap_or(now), now, cause);
        let h = std::sync::Arc::new(self.soak_history.clone());
        self.snapshot.update(|v| v.soak_history = Some(h));
        tracing::info!(target_name = %self.spec.name, phase = index + 1, cause = cause.key(),
            "soak resumed after a restart ({})", cause.words());
    }

    /// The phase's record ends now with `status`.
    fn close_phase_record(&mut self, status: crate::model::results::PhaseStatus) {
        crate::model::results::phase_closed(&mut self.results.phases, status, super::now_unix());
    }

    /// An error stopped the target in this phase (the error itself is logged by the caller).
    pub(crate) fn phase_failed(&mut self) {
        self.close_phase_record(crate::model::results::PhaseStatus::Failed);
        self.save_results();
    }

    /// The phase's own totals since `start`, and its outcome in words.
    fn phase_totals(&self, start: &PhaseStart, phase: &PhaseSpec) -> PhaseTotals {
        self.snapshot.view(|v| {
            let (r, w) = super::snapshot::job_totals(&v.jobs);
            PhaseTotals {
                line: outcome(phase, v),
                secs: start.at.elapsed().as_secs_f64(),
                read_bytes: r.bytes.saturating_sub(start.read.bytes),
                written_bytes: w.bytes.saturating_sub(start.write.bytes),
                read_ops: r.ops.saturating_sub(start.read.ops),
                write_ops: w.ops.saturating_sub(start.write.ops),
                errors: (r.errors.total() + w.errors.total())
                    .saturating_sub(start.read.errors.total() + start.write.errors.total()),
            }
        })
    }

    /// Opens the soak phase's entry in the results file's `soak.phases` as it starts (a
    /// resumed phase continues the entry the earlier run left, stopped), so every results
    /// write while it runs keeps the entry current ([`Runner::soak_entry_update`]): a run
    /// killed with `-9` still has its part in the entry, as in the soak totals.
    pub(crate) fn soak_entry_open(&mut self, start: &PhaseStart, phase: &PhaseSpec) {
        let profile = job_names(phase).join(" + ");
        let soak = self.results.soak.get_or_insert_with(Default::default);
        let index = soak.open_phase(start.index + 1, &profile, super::now_unix(), start.resumed);
        let base = soak.phases[index].clone();
        self.soak_entry = Some(SoakEntry {
            start: start.clone(),
            phase: phase.clone(),
            index,
            base,
        });
    }

    /// Sets the running soak phase's entry to what earlier runs recorded plus this run's part
    /// so far (still marked stopped: it has not ended).
    pub(crate) fn soak_entry_update(&mut self) {
        let Some(e) = self.soak_entry.take() else {
            return;
        };
        let t = self.phase_totals(&e.start, &e.phase);
        self.set_soak_entry(&e, &t, true);
        self.soak_entry = Some(e);
    }

    fn set_soak_entry(&mut self, e: &SoakEntry, t: &PhaseTotals, stopped: bool) {
        let run = crate::model::results::SoakPhase {
            ended: Some(super::now_unix()),
            elapsed_secs: t.secs,
            read_bytes: t.read_bytes,
            written_bytes: t.written_bytes,
            read_ops: t.read_ops,
            write_ops: t.write_ops,
            errors: t.errors,
            stopped,
            ..Default::default()
        };
        if let Some(entry) = self
            .results
            .soak
            .as_mut()
            .and_then(|s| s.phases.get_mut(e.index))
        {
            entry.set_from(&e.base, &run);
        }
    }

    /// Keeps a soak phase's own totals in the results file (once, however often it was
    /// stopped and resumed) and saves it.
    fn record_soak_phase(&mut self, t: &PhaseTotals, stopped: bool) {
        if let Some(e) = self.soak_entry.take() {
            self.set_soak_entry(&e, t, stopped);
        }
        self.save_results();
    }

    /// Logs the phase's end in one line: duration, totals and outcome; its record in the
    /// results file ends now (a soak phase's own totals are kept there too).
    pub(crate) fn phase_ended(&mut self, start: &PhaseStart, phase: &PhaseSpec) {
        let t = self.phase_totals(start, phase);
        let line = crate::workload::scheduler::phase::steps::end_line(self, start.index, phase)
            .unwrap_or_else(|| t.line.clone());
        self.close_phase_record(crate::model::results::PhaseStatus::Finished);
        if matches!(phase, PhaseSpec::Soak { .. }) {
            // Saves the results file.
            self.record_soak_phase(&t, false);
        } else {
            self.save_results();
        }
        let secs = t.secs;
        let n = start.index + 1;
        tracing::info!(target_name = %self.spec.name, phase = n, phase_index = start.index,
            kind = phase.kind(), secs, read_bytes = t.read_bytes,
            written_bytes = t.written_bytes, errors = t.errors,
            "phase {n} ({}) finished in {secs:.0} s: read {}, wrote {}, {} I/O errors; {line}",
            phase.kind(), fmt_bytes(t.read_bytes as f64), fmt_bytes(t.written_bytes as f64), t.errors);
    }

    /// A phase stopped at shutdown or reload before its end (a soak without a duration only
    /// ever ends this way): its end line with its totals, and its record marked stopped, which
    /// a resumed run reopens; a soak's entry in `soak.phases` too, which a resumed run adds to.
    pub(crate) fn phase_stopped(&mut self, start: &PhaseStart, phase: &PhaseSpec) {
        let t = self.phase_totals(start, phase);
        let line = crate::workload::scheduler::phase::steps::end_line(self, start.index, phase)
            .unwrap_or_else(|| t.line.clone());
        self.close_phase_record(crate::model::results::PhaseStatus::Stopped);
        // A shutdown sets the daemon's stop; a reload stops this target alone.
        let cause = if self.global_stop.load(std::sync::atomic::Ordering::SeqCst) {
            crate::model::results::StopCause::Signal
        } else {
            crate::model::results::StopCause::Reload
        };
        if let Some(p) = self
            .results
            .phases
            .last_mut()
            .filter(|p| p.status == crate::model::results::PhaseStatus::Stopped)
        {
            p.stopped_by = Some(cause);
        }
        if matches!(phase, PhaseSpec::Soak { .. }) {
            self.record_soak_phase(&t, true);
        } else {
            self.save_results();
        }
        let secs = t.secs;
        let why = if matches!(phase, PhaseSpec::Soak { duration: None, .. }) {
            "it runs until stopped"
        } else {
            "the checkpoint resumes it"
        };
        let n = start.index + 1;
        tracing::info!(target_name = %self.spec.name, phase = n, phase_index = start.index,
            kind = phase.kind(), secs, read_bytes = t.read_bytes,
            written_bytes = t.written_bytes, errors = t.errors,
            "phase {n} ({}) stopped after {secs:.0} s ({why}): read {}, wrote {}, {} I/O errors; {}",
            phase.kind(), fmt_bytes(t.read_bytes as f64), fmt_bytes(t.written_bytes as f64), t.errors,
            line);
    }

    /// Logs why the plan ended: `finished` (every phase ran), else a stop on request.
    pub(crate) fn plan_ended(&self, finished: bool, failed: bool) {
        if failed {
            // The error was logged where it happened ("target stopped").
        } else if finished {
            tracing::info!(target_name = %self.spec.name, "plan finished");
        } else {
            tracing::info!(target_name = %self.spec.name,
                "stopped by signal or reload before the end of its plan; the checkpoint resumes it");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::results::SweepPoint;

    fn point(pct: u32, iops: f64, lat_avg_us: f64) -> SweepPoint {
        SweepPoint {
            pct,
            target_iops: iops,
            iops,
            lat_avg_us,
            ..Default::default()
        }
    }

    /// A resumed phase says where it resumes: a soak its time done and left, a precondition
    /// its progress, a sweep its next point.
    #[test]
    fn a_resumed_phase_says_where_it_resumes() {
        use std::time::Duration;
        let job = crate::workload::scheduler::precondition_job(1, 4096, 1, 1);
        let soak = PhaseSpec::Soak {
            jobs: vec![job.clone()],
            duration: Some(Duration::from_secs(480)),
            rotate: None,
            steady: Default::default(),
        };
        assert_eq!(
            resume_point(&soak, 125.4, None, None),
            "2 min 05 s done, 5 min 55 s left of 8 min 00 s"
        );
        let endless = PhaseSpec::Soak {
            jobs: vec![job.clone()],
            duration: None,
            rotate: None,
            steady: Default::default(),
        };
        assert_eq!(
            resume_point(&endless, 3725.0, None, None),
            "1 h 02 min 05 s done; it runs until stopped"
        );
        let sweep = PhaseSpec::Sweep {
            job,
            max_duration: Duration::from_secs(1),
            point_duration: Duration::from_secs(1),
            points: vec![50, 80, 100],
        };
        let mut s = SweepResult {
            max_iops: 12_345.0,
            points: vec![point(0, 12_345.0, 500.0), point(50, 6000.0, 200.0)],
            ..Default::default()
        };
        assert_eq!(
            resume_point(&sweep, 0.0, None, Some(&s)),
            "at point 2 of 3, max 12,345 IOPS from the earlier run"
        );
        s.points.push(point(80, 9000.0, 300.0));
        s.points.push(point(100, 11000.0, 400.0));
        assert!(resume_point(&sweep, 0.0, None, Some(&s)).starts_with("after its last point"));
        assert!(resume_point(&sweep, 0.0, None, None).starts_with("from its start"));
        let pre = PhaseSpec::Precondition {
            passes: 1,
            block_size: 4096,
            iodepth: 1,
            workers: 1,
        };
        let progress = crate::model::checkpoint::PreconditionProgress {
            passes: 1,
            block_size: 4096,
            stripes: vec![crate::model::checkpoint::StripeProgress {
                start: 0,
                len: 8 << 20,
                done_bytes: 2 << 20,
            }],
        };
        let at = resume_point(&pre, 0.0, Some(&progress), None);
        assert!(at.starts_with("at pass 1 of 1, 25% into it"), "{at}");
    }

    #[test]
    fn sweep_outcome_names_the_maximum_and_the_frontier() {
        let mut s = SweepResult {
            max_iops: 120_000.0,
            points: vec![
                point(0, 120_000.0, 2100.0),
                point(50, 60_000.0, 400.0),
                point(80, 95_000.0, 950.0),
                point(90, 104_000.0, 1200.0),
            ],
            ..Default::default()
        };
        assert_eq!(
            sweep_outcome(&s),
            "max 120,000 IOPS; sub-1 ms frontier 95,000 IOPS at 80%"
        );
        for p in &mut s.points {
            p.lat_avg_us += 2000.0;
        }
        assert_eq!(
            sweep_outcome(&s),
            "max 120,000 IOPS; no point under 1 ms average latency"
        );
    }
}
