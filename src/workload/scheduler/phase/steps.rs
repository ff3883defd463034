//! The qualification step phases: `purge` (Format NVM with a secure erase, or Sanitize) and
//! `self-test` (Device Self-test). Both send admin commands to the controller of the namespace
//! the target claimed, found from the claimed descriptor (`nvme::claimed`), and record their
//! outcome in the results file's `qualification_steps`.
//!
//! A purge runs only on a target claimed for writing (`plan_writes`: every write-safety check
//! passed on the descriptor, which is held `O_EXCL` through the erase); a refused or failed
//! purge stops the target, since the rest of the plan assumes a purged drive. A purge recorded
//! as passed for this phase and loop is not run again on resume. A self-test never stops the
//! target: its outcome is recorded for the verdict.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::model::spec::PhaseSpec;
use crate::model::steps::self_test_wait;
use crate::model::steps::{StepOutcome, StepStatus, purge_completed};
use crate::nvme::AdminTransport;
use crate::nvme::caps::{self, StepCaps};
use crate::nvme::claimed::{self, ClaimedError, ClaimedNamespace};
use crate::nvme::cmd;
use crate::nvme::ioctl::IoctlTransport;
use crate::nvme::steps::{
    PurgeEnd, PurgeMethod, SelfTestEnd, SelfTestKind, Waiting, run_purge, run_self_test,
};
use crate::nvme::{NvmeError, identify};
use crate::workload::scheduler::error::PurgeError;
use crate::workload::scheduler::{RunError, Runner, now_unix};

/// Between two reads of a progress log.
const POLL: Duration = Duration::from_secs(2);

/// `kind = "purge"`.
pub(crate) struct Purge {
    pub method: PurgeMethod,
    pub timeout: Duration,
}

/// `kind = "self-test"`.
pub(crate) struct SelfTest {
    pub test: SelfTestKind,
    pub timeout: Option<Duration>,
}

fn read_caps(t: &dyn AdminTransport) -> Result<StepCaps, NvmeError> {
    let mut buf = vec![0u8; identify::ID_LEN];
    t.admin(
        &cmd::identify(cmd::CNS_CONTROLLER, 0, cmd::WHAT_ID_CTRL),
        &mut buf,
    )?;
    caps::parse_ctrl_caps(&buf).map_err(|source| NvmeError::Parse {
        device: t.device(),
        what: cmd::WHAT_ID_CTRL,
        source,
    })
}

fn read_ns_format(t: &dyn AdminTransport, nsid: u32) -> Result<caps::NsFormat, NvmeError> {
    let mut buf = vec![0u8; identify::ID_LEN];
    t.admin(
        &cmd::identify(cmd::CNS_NAMESPACE, nsid, cmd::WHAT_ID_NS),
        &mut buf,
    )?;
    caps::parse_ns_format(&buf).map_err(|source| NvmeError::Parse {
        device: t.device(),
        what: cmd::WHAT_ID_NS,
        source,
    })
}

impl Runner {
    fn stop_flags(&self) -> (Arc<AtomicBool>, Arc<AtomicBool>) {
        (self.stop.clone(), self.global_stop.clone())
    }

    /// A new outcome for the phase running now.
    fn step_outcome(&self, kind: &str, method: &str) -> StepOutcome {
        let (phase_index, loop_count) = self.snapshot.view(|s| (s.phase_index, s.loop_count));
        StepOutcome {
            phase_index,
            phase: phase_index + 1,
            loop_count,
            kind: kind.to_string(),
            method: method.to_string(),
            started: now_unix(),
            ..Default::default()
        }
    }

    /// Keep the outcome in the results file (written now) and log it.
    fn record_step(&mut self, mut o: StepOutcome) {
        o.ended = now_unix();
        let line = o.line();
        match o.status {
            StepStatus::Passed | StepStatus::NotSupported => {
                tracing::info!(target_name = %self.spec.name, kind = %o.kind, method = %o.method,
                    status = o.status.name(), "{line}")
            }
            _ => tracing::warn!(target_name = %self.spec.name, kind = %o.kind,
                method = %o.method, status = o.status.name(), "{line}"),
        }
        self.results.qualification_steps.push(o);
        self.save_results();
    }

    /// The namespace behind the claimed descriptor and its controller, opened.
    fn step_controller(
        &self,
        timeout: Duration,
    ) -> Result<(ClaimedNamespace, IoctlTransport), ClaimedError> {
        let ns = claimed::namespace_of_fd(Path::new("/sys"), &*self.fd)?;
        let ms = u32::try_from(timeout.as_millis()).unwrap_or(u32::MAX);
        let t = claimed::open_controller(Path::new("/dev"), &ns, ms)?;
        Ok((ns, t))
    }

    /// Run a purge phase: skip it if this phase and loop already passed one, else check the
    /// controller may run it, erase, and record how it ended.
    fn purge(&mut self, method: PurgeMethod, timeout: Duration) -> Result<(), RunError> {
        let mut o = self.step_outcome("purge", method.name());
        o.waited_limit_secs = timeout.as_secs_f64();
        if purge_completed(
            &self.results.qualification_steps,
            o.phase_index,
            o.loop_count,
        ) {
            tracing::info!(target_name = %self.spec.name, method = method.name(),
                "purge already completed in this phase (results file); not run again");
            return Ok(());
        }
        self.snapshot
            .update(|s| s.profile = method.name().to_string());
        let (ns, t, format) = match self.purge_preflight(&mut o, method, timeout) {
            Ok(v) => v,
            Err((status, why)) => return self.purge_failed(o, status, why),
        };
        let (stop, global) = self.stop_flags();
        let stopping = move || stop.load(Ordering::SeqCst) || global.load(Ordering::SeqCst);
        let name = self.spec.name.clone();
        let mut progress = |pct: f64| {
            tracing::debug!(target_name = %name, progress_pct = pct, "purge progress");
        };
        let mut w = Waiting {
            timeout,
            poll: POLL,
            stop: &stopping,
            progress: &mut progress,
        };
        let end = run_purge(&t, method, ns.nsid, &format, &mut w);
        self.purge_ended(o, &ns.block, timeout, end)
    }

    /// Open the claimed namespace's controller and check the purge may run there: the
    /// controller offers the method, and it erases no namespace the target was not given.
    /// The outcome learns the controller and namespace; a refusal says with which status.
    fn purge_preflight(
        &self,
        o: &mut StepOutcome,
        method: PurgeMethod,
        timeout: Duration,
    ) -> Result<(ClaimedNamespace, IoctlTransport, caps::NsFormat), (StepStatus, PurgeError)> {
        // Format NVM completes when the erase is done: the command's timeout is the wait. A
        // sanitize returns at once and its progress is polled.
        let (ns, t) = self
            .step_controller(timeout.max(Duration::from_secs(10)))
            .map_err(|e| (StepStatus::Refused, e.into()))?;
        o.controller = Some(ns.controller.clone());
        o.nsid = Some(ns.nsid);
        tracing::info!(target_name = %self.spec.name, method = method.name(),
            controller = %ns.controller, nsid = ns.nsid, timeout_secs = timeout.as_secs(),
            "purge started: {} of {} (nsid {}) on {}", method.name(), ns.block, ns.nsid,
            ns.controller);
        let caps = read_caps(&t).map_err(|e| (StepStatus::Error, e.into()))?;
        if let Some(why) = method.unsupported(&caps) {
            let method = method.name();
            return Err((StepStatus::Refused, PurgeError::Unsupported { method, why }));
        }
        if method.erases_every_namespace(&caps) && !ns.others.is_empty() {
            let refusal = PurgeError::OtherNamespaces {
                method: method.name(),
                others: ns.others.clone(),
                controller: ns.controller.clone(),
                fna: caps.fna,
            };
            return Err((StepStatus::Refused, refusal));
        }
        let format = read_ns_format(&t, ns.nsid).map_err(|e| (StepStatus::Error, e.into()))?;
        Ok((ns, t, format))
    }

    /// Record how an erase of `block` ended; only a passed or a stopped sanitize lets the plan
    /// go on.
    fn purge_ended(
        &mut self,
        mut o: StepOutcome,
        block: &str,
        timeout: Duration,
        end: Result<PurgeEnd, NvmeError>,
    ) -> Result<(), RunError> {
        match end {
            Ok(PurgeEnd::Done { sanitize_state }) => {
                // Nothing cached from before the erase may be read back.
                let _ = nix::fcntl::posix_fadvise(
                    &*self.fd,
                    0,
                    0,
                    nix::fcntl::PosixFadviseAdvice::POSIX_FADV_DONTNEED,
                );
                o.status = StepStatus::Passed;
                o.detail = match sanitize_state {
                    Some(s) => format!("{block} erased; sanitize status {s:?}"),
                    None => format!("{block} erased"),
                };
                self.record_step(o);
                Ok(())
            }
            Ok(PurgeEnd::Failed(why)) => {
                self.purge_failed(o, StepStatus::Failed, PurgeError::Drive(why))
            }
            Ok(PurgeEnd::StillRunning {
                progress_pct,
                stopped: true,
            }) => {
                o.status = StepStatus::Aborted;
                o.detail = format!(
                    "stopped at {progress_pct:.0}%: a sanitize cannot be aborted and goes on in the drive; a restart waits for it"
                );
                self.record_step(o);
                Ok(())
            }
            Ok(PurgeEnd::StillRunning { progress_pct, .. }) => {
                let waited = timeout;
                let e = PurgeError::StillRunning {
                    progress_pct,
                    waited,
                };
                self.purge_failed(o, StepStatus::TimedOut, e)
            }
            Err(e) => self.purge_failed(o, StepStatus::Error, e.into()),
        }
    }

    fn purge_failed(
        &mut self,
        mut o: StepOutcome,
        status: StepStatus,
        why: PurgeError,
    ) -> Result<(), RunError> {
        o.status = status;
        o.detail = why.to_string();
        self.record_step(o);
        Err(RunError::Purge {
            status,
            source: why,
        })
    }

    fn self_test(&mut self, test: SelfTestKind, timeout: Option<Duration>) -> Result<(), RunError> {
        let mut o = self.step_outcome("self-test", test.name());
        self.snapshot
            .update(|s| s.profile = test.name().to_string());
        let (ns, t) = match self.step_controller(Duration::from_secs(10)) {
            Ok(v) => v,
            Err(why) => {
                o.status = StepStatus::Refused;
                o.detail = why.to_string();
                self.record_step(o);
                return Ok(());
            }
        };
        o.controller = Some(ns.controller.clone());
        o.nsid = Some(ns.nsid);
        let caps = match read_caps(&t) {
            Ok(c) => c,
            Err(e) => {
                o.detail = e.to_string();
                self.record_step(o);
                return Ok(());
            }
        };
        let wait = self_test_wait(test, timeout, &caps);
        o.waited_limit_secs = wait.as_secs_f64();
        tracing::info!(target_name = %self.spec.name, test = test.name(),
            controller = %ns.controller, nsid = ns.nsid, wait_secs = wait.as_secs(),
            "self-test started: {} device self-test of {} (nsid {}) on {}, waiting at most {}",
            test.name(), ns.block, ns.nsid, ns.controller, crate::model::units::format_duration(wait));
        let (stop, global) = self.stop_flags();
        let stopping = move || stop.load(Ordering::SeqCst) || global.load(Ordering::SeqCst);
        let name = self.spec.name.clone();
        let mut progress = |pct: f64| {
            tracing::debug!(target_name = %name, progress_pct = pct, "self-test progress");
        };
        let mut w = Waiting {
            timeout: wait,
            poll: POLL,
            stop: &stopping,
            progress: &mut progress,
        };
        match run_self_test(&t, &caps, test, ns.nsid, &mut w) {
            Ok(SelfTestEnd::NotSupported(why)) => {
                o.status = StepStatus::NotSupported;
                o.detail = why;
            }
            Ok(SelfTestEnd::Finished(res)) => {
                o.status = if res.passed() {
                    StepStatus::Passed
                } else if res.aborted() {
                    StepStatus::Aborted
                } else {
                    StepStatus::Failed
                };
                let mut d = res.result_text().to_string();
                if let Some(s) = res.segment {
                    d.push_str(&format!("; segment {s}"));
                }
                if let Some(lba) = res.failing_lba {
                    d.push_str(&format!("; failing LBA {lba}"));
                }
                if let (Some(sct), Some(sc)) = (res.status_code_type, res.status_code) {
                    d.push_str(&format!("; status SCT {sct:#x} SC {sc:#04x}"));
                }
                o.detail = d;
                o.self_test = Some(res);
            }
            Ok(SelfTestEnd::Aborted) => {
                o.status = StepStatus::Aborted;
                o.detail = "stopped on request; the self-test was aborted".into();
            }
            Ok(SelfTestEnd::TimedOut { waited }) => {
                o.status = StepStatus::TimedOut;
                o.detail = format!(
                    "still running after {}; the self-test was aborted",
                    crate::model::units::format_duration(Duration::from_secs(waited.as_secs()))
                );
            }
            Ok(SelfTestEnd::NoResult) => {
                o.detail = "the Self-test log shows no new result after the test".into();
            }
            Err(e) => o.detail = e.to_string(),
        }
        self.record_step(o);
        Ok(())
    }
}

/// The end line's outcome of a step phase: its recorded outcome.
pub(crate) fn end_line(r: &Runner, index: usize, phase: &PhaseSpec) -> Option<String> {
    if !matches!(phase, PhaseSpec::Purge { .. } | PhaseSpec::SelfTest { .. }) {
        return None;
    }
    let kind = phase.kind();
    Some(
        r.results
            .qualification_steps
            .iter()
            .rev()
            .find(|s| s.phase_index == index && s.kind == kind)
            .map_or_else(|| format!("{kind}: no outcome recorded"), StepOutcome::line),
    )
}

impl super::Phase for Purge {
    fn run(&mut self, r: &mut Runner) -> Result<(), RunError> {
        r.purge(self.method, self.timeout)
    }
}

impl super::Phase for SelfTest {
    fn run(&mut self, r: &mut Runner) -> Result<(), RunError> {
        r.self_test(self.test, self.timeout)
    }
}
