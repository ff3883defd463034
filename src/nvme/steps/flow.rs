//! The flows that run a self-test or a purge to an outcome: one polling loop (`Waiting`), the
//! self-test with its abort on stop or timeout, and the purge (Format NVM or Sanitize) with the
//! Sanitize Status log's progress.

use std::time::{Duration, Instant};

use super::super::caps::StepCaps;
use super::super::log::sanitize::SanitizeState;
use super::super::log::selftest::SelfTestResult;
use super::super::{AdminTransport, NvmeError};
use super::*;

/// What the caller of a flow decides: how long to wait, how often to look, when to stop.
pub struct Waiting<'a> {
    /// Give up (and abort a self-test) after this long.
    pub timeout: Duration,
    /// Between two reads of the progress log.
    pub poll: Duration,
    /// True when the target is asked to stop.
    pub stop: &'a dyn Fn() -> bool,
    /// Called with the completion (percent) each time the progress log is read.
    pub progress: &'a mut dyn FnMut(f64),
}

/// One read of a progress log during a wait.
enum Look<T> {
    /// The operation ended (100 % done); the wait is over.
    Ended(T),
    /// The operation ended without completing (no 100 % reported); the wait is over.
    Failed(T),
    /// Still running, this far (percent).
    Running(f64),
}

/// How a wait ended when the operation did not.
enum Waited<T> {
    Ended(T),
    /// Asked to stop while it ran, at this completion (percent).
    Stopped(f64),
    /// Ran past the timeout, at this completion (percent), after this long.
    TimedOut(f64, Duration),
}

impl Waiting<'_> {
    /// The one polling loop of every flow: `look` reads the progress log; the progress is
    /// reported (100 % once it ended complete), then stop and the timeout are checked (a
    /// look that ended wins over both), then a nap.
    fn until<T>(
        &mut self,
        mut look: impl FnMut() -> Result<Look<T>, NvmeError>,
    ) -> Result<Waited<T>, NvmeError> {
        let started = Instant::now();
        loop {
            match look()? {
                Look::Ended(v) => {
                    (self.progress)(100.0);
                    return Ok(Waited::Ended(v));
                }
                Look::Failed(v) => return Ok(Waited::Ended(v)),
                Look::Running(pct) => {
                    (self.progress)(pct);
                    if (self.stop)() {
                        return Ok(Waited::Stopped(pct));
                    }
                    if started.elapsed() >= self.timeout {
                        return Ok(Waited::TimedOut(pct, started.elapsed()));
                    }
                }
            }
            self.nap();
        }
    }

    /// Sleep one poll interval in short steps, returning early on stop.
    fn nap(&self) {
        let end = Instant::now() + self.poll;
        while !(self.stop)() {
            let now = Instant::now();
            if now >= end {
                return;
            }
            std::thread::sleep((end - now).min(Duration::from_millis(100)));
        }
    }
}

/// How a self-test ended.
#[derive(Debug, Clone, PartialEq)]
pub enum SelfTestEnd {
    /// OACS bit 4 clear, or the controller refused the opcode.
    NotSupported(String),
    /// The test ran to its end (passed or failed: see the result).
    Finished(SelfTestResult),
    /// Stopped on request: the test was aborted (STC Fh).
    Aborted,
    /// It ran past the wait: the test was aborted.
    TimedOut { waited: Duration },
    /// The controller's log shows no new result after the test (another one ran over it).
    NoResult,
}

/// Run a device self-test of `nsid` and wait for its result.
pub fn run_self_test(
    t: &dyn AdminTransport,
    caps: &StepCaps,
    kind: SelfTestKind,
    nsid: u32,
    w: &mut Waiting<'_>,
) -> Result<SelfTestEnd, NvmeError> {
    if !caps.self_test_supported() {
        return Ok(SelfTestEnd::NotSupported(format!(
            "the controller does not support Device Self-test (OACS {:#06x}, bit 4 clear)",
            caps.oacs
        )));
    }
    let before = read_self_test_log(t)?;
    if before.in_progress() {
        return Err(NvmeError::Parse {
            device: t.device(),
            what: WHAT_START_SELF_TEST,
            source: super::super::ParseError::Invalid {
                what: "Device Self-test log 06h",
                detail: format!(
                    "a self-test (code {}) is already running, {}% done, started by someone else; not starting another",
                    before.current, before.completion_pct
                ),
            },
        });
    }
    match t.admin(&self_test_cmd(kind.stc(), nsid), &mut []) {
        Ok(_) => {}
        // Invalid Command Opcode: the controller has no Device Self-test after all.
        Err(e) if e.status().is_some_and(|s| s & 0x7ff == 0x001) => {
            return Ok(SelfTestEnd::NotSupported(format!(
                "the controller refused Device Self-test: {e}"
            )));
        }
        Err(e) => return Err(e),
    }
    let waited = w.until(|| {
        let log = read_self_test_log(t)?;
        if log.in_progress() {
            return Ok(Look::Running(f64::from(log.completion_pct)));
        }
        Ok(Look::Ended(match log.newest() {
            Some(r) if Some(r) != before.newest() || log.results.len() != before.results.len() => {
                SelfTestEnd::Finished(r.clone())
            }
            _ => SelfTestEnd::NoResult,
        }))
    })?;
    match waited {
        Waited::Ended(end) => Ok(end),
        Waited::Stopped(_) => {
            t.admin(&self_test_cmd(0x0f, nsid), &mut [])?;
            Ok(SelfTestEnd::Aborted)
        }
        Waited::TimedOut(_, waited) => {
            t.admin(&self_test_cmd(0x0f, nsid), &mut [])?;
            Ok(SelfTestEnd::TimedOut { waited })
        }
    }
}

/// How a purge ended.
#[derive(Debug, Clone, PartialEq)]
pub enum PurgeEnd {
    /// Erased; for a sanitize, the final Sanitize Status state.
    Done {
        sanitize_state: Option<SanitizeState>,
    },
    /// The controller reports the sanitize failed.
    Failed(String),
    /// A sanitize still running when the wait ran out, or when asked to stop (a sanitize cannot
    /// be aborted; it goes on in the drive, and a restart waits for it).
    StillRunning { progress_pct: f64, stopped: bool },
}

/// Erase `nsid` by `method`. `format` is the namespace's current format (kept by Format NVM).
/// The caller has claimed the namespace (every write-safety check passed on its descriptor)
/// and checked [`PurgeMethod::unsupported`] and which namespaces the erase reaches.
pub fn run_purge(
    t: &dyn AdminTransport,
    method: PurgeMethod,
    nsid: u32,
    format: &NsFormat,
    w: &mut Waiting<'_>,
) -> Result<PurgeEnd, NvmeError> {
    if !method.is_sanitize() {
        let ses = if method == PurgeMethod::FormatCrypto {
            2
        } else {
            1
        };
        // Format NVM completes when the erase is done: the transport's command timeout is the
        // bounded wait.
        t.admin(&format_cmd(nsid, format, ses), &mut [])?;
        (w.progress)(100.0);
        return Ok(PurgeEnd::Done {
            sanitize_state: None,
        });
    }
    // A sanitize already running (an earlier run stopped while it went on) is waited for,
    // not started again.
    let first = read_sanitize_status(t)?;
    if first.state != SanitizeState::InProgress {
        t.admin(&sanitize_cmd(method), &mut [])?;
    }
    let waited = w.until(|| {
        let s = read_sanitize_status(t)?;
        Ok(match s.state {
            SanitizeState::InProgress => Look::Running(s.fraction() * 100.0),
            SanitizeState::Completed | SanitizeState::CompletedNoDeallocate => {
                Look::Ended(PurgeEnd::Done {
                    sanitize_state: Some(s.state),
                })
            }
            SanitizeState::Failed => Look::Failed(PurgeEnd::Failed(
                "the Sanitize Status log reports the sanitize failed (the drive may need a Sanitize with Exit Failure Mode)".into(),
            )),
            other => Look::Failed(PurgeEnd::Failed(format!(
                "after the sanitize command the Sanitize Status log shows {other:?}, not a completed sanitize"
            ))),
        })
    })?;
    Ok(match waited {
        Waited::Ended(end) => end,
        Waited::Stopped(pct) => PurgeEnd::StillRunning {
            progress_pct: pct,
            stopped: true,
        },
        Waited::TimedOut(pct, _) => PurgeEnd::StillRunning {
            progress_pct: pct,
            stopped: false,
        },
    })
}
