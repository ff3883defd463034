//! The qualification steps' admin commands: Format NVM (80h) with a secure erase, Sanitize (84h),
//! Device Self-test (14h), and the flows that run them to an outcome over any
//! [`AdminTransport`]: capability checks against Identify, progress from the Self-test log (06h)
//! or the Sanitize Status log (81h), a bounded wait, and the self-test's abort on stop.
//!
//! The flows poll; they take the poll interval, the deadline and the stop check from the caller,
//! so the replay tests run them with no waiting at all.

use std::time::{Duration, Instant};

use super::caps::{NsFormat, StepCaps};
use super::cmd::get_log_page;
use super::log::sanitize::{self, SanitizeState, SanitizeStatus};
use super::log::selftest::{self, SelfTestLog, SelfTestResult};
use super::{AdminCmd, AdminTransport, NvmeError};

pub const OPC_DEVICE_SELF_TEST: u8 = 0x14;
pub const OPC_FORMAT_NVM: u8 = 0x80;
pub const OPC_SANITIZE: u8 = 0x84;

pub const WHAT_SELF_TEST_LOG: &str = "reading the Device Self-test log";
pub const WHAT_SANITIZE_LOG: &str = "reading the Sanitize Status log";
pub const WHAT_START_SELF_TEST: &str = "starting a device self-test";
pub const WHAT_ABORT_SELF_TEST: &str = "aborting the device self-test";
pub const WHAT_FORMAT: &str = "formatting the namespace (Format NVM)";
pub const WHAT_SANITIZE: &str = "starting a sanitize";

/// Short or extended device self-test (the STC values 1h and 2h).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SelfTestKind {
    Short,
    Extended,
}

impl SelfTestKind {
    pub fn stc(self) -> u8 {
        match self {
            SelfTestKind::Short => 1,
            SelfTestKind::Extended => 2,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            SelfTestKind::Short => "short",
            SelfTestKind::Extended => "extended",
        }
    }
    /// How long the controller may take: 2 minutes for a short test (the spec's limit), the
    /// controller's EDSTT for an extended one (`None` when it reports none).
    pub fn expected(self, caps: &StepCaps) -> Option<Duration> {
        match self {
            SelfTestKind::Short => Some(Duration::from_secs(120)),
            SelfTestKind::Extended if caps.edstt_minutes > 0 => {
                Some(Duration::from_secs(u64::from(caps.edstt_minutes) * 60))
            }
            SelfTestKind::Extended => None,
        }
    }
}

/// How a purge erases.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PurgeMethod {
    /// Format NVM, SES 1: user data erase.
    FormatUserData,
    /// Format NVM, SES 2: cryptographic erase.
    FormatCrypto,
    /// Sanitize, SANACT 2: block erase.
    SanitizeBlock,
    /// Sanitize, SANACT 4: crypto erase.
    SanitizeCrypto,
    /// Sanitize, SANACT 3: overwrite (one pass of zeroes).
    SanitizeOverwrite,
}

impl PurgeMethod {
    pub const ALL: [(&'static str, PurgeMethod); 5] = [
        ("format-user-data", PurgeMethod::FormatUserData),
        ("format-crypto", PurgeMethod::FormatCrypto),
        ("sanitize-block", PurgeMethod::SanitizeBlock),
        ("sanitize-crypto", PurgeMethod::SanitizeCrypto),
        ("sanitize-overwrite", PurgeMethod::SanitizeOverwrite),
    ];
    pub fn name(self) -> &'static str {
        PurgeMethod::ALL
            .iter()
            .find(|(_, m)| *m == self)
            .map_or("?", |(n, _)| n)
    }
    pub fn is_sanitize(self) -> bool {
        matches!(
            self,
            PurgeMethod::SanitizeBlock
                | PurgeMethod::SanitizeCrypto
                | PurgeMethod::SanitizeOverwrite
        )
    }
    /// Why the controller cannot do this, from Identify; `None` when it can.
    pub fn unsupported(self, caps: &StepCaps) -> Option<String> {
        let why = match self {
            PurgeMethod::FormatUserData | PurgeMethod::FormatCrypto if !caps.format_supported() => {
                format!(
                    "the controller does not support Format NVM (OACS {:#06x}, bit 1 clear)",
                    caps.oacs
                )
            }
            PurgeMethod::FormatCrypto if !caps.crypto_format_supported() => format!(
                "the controller does not support a cryptographic erase by Format NVM (FNA {:#04x}, bit 2 clear)",
                caps.fna
            ),
            PurgeMethod::SanitizeBlock if !caps.sanitize_block() => format!(
                "the controller does not support a sanitize block erase (SANICAP {:#010x}, bit 1 clear)",
                caps.sanicap
            ),
            PurgeMethod::SanitizeCrypto if !caps.sanitize_crypto() => format!(
                "the controller does not support a sanitize crypto erase (SANICAP {:#010x}, bit 0 clear)",
                caps.sanicap
            ),
            PurgeMethod::SanitizeOverwrite if !caps.sanitize_overwrite() => format!(
                "the controller does not support a sanitize overwrite (SANICAP {:#010x}, bit 2 clear)",
                caps.sanicap
            ),
            _ => return None,
        };
        Some(why)
    }
    /// Whether the erase reaches every namespace of the controller (a sanitize always does:
    /// it acts on the whole NVM subsystem; a format when FNA says so).
    pub fn erases_every_namespace(self, caps: &StepCaps) -> bool {
        match self {
            PurgeMethod::FormatUserData | PurgeMethod::FormatCrypto => {
                caps.format_all_namespaces() || caps.secure_erase_all_namespaces()
            }
            _ => true,
        }
    }
}

/// Device Self-test: CDW10 STC [3:0].
pub fn self_test_cmd(stc: u8, nsid: u32) -> AdminCmd {
    AdminCmd {
        nsid,
        cdw10: u32::from(stc & 0x0f),
        ..AdminCmd::new(
            OPC_DEVICE_SELF_TEST,
            if stc == 0x0f {
                WHAT_ABORT_SELF_TEST
            } else {
                WHAT_START_SELF_TEST
            },
        )
    }
}

pub fn self_test_log_cmd() -> AdminCmd {
    get_log_page(
        selftest::LID,
        super::log::NSID_ALL,
        selftest::LEN,
        0,
        0,
        WHAT_SELF_TEST_LOG,
    )
}

pub fn sanitize_log_cmd() -> AdminCmd {
    get_log_page(
        sanitize::LID,
        super::log::NSID_ALL,
        sanitize::LEN,
        0,
        0,
        WHAT_SANITIZE_LOG,
    )
}

/// Format NVM of `nsid`, keeping its format: CDW10 LBAF [3:0], MSET [4], PI [7:5], PIL [8],
/// SES [11:9], LBAFU [13:12].
pub fn format_cmd(nsid: u32, f: &NsFormat, ses: u8) -> AdminCmd {
    let cdw10 = u32::from(f.lbaf & 0x0f)
        | (u32::from(f.mset) << 4)
        | (u32::from(f.pi & 0x7) << 5)
        | (u32::from(f.pil) << 8)
        | (u32::from(ses & 0x7) << 9)
        | (u32::from((f.lbaf >> 4) & 0x3) << 12);
    AdminCmd {
        nsid,
        cdw10,
        ..AdminCmd::new(OPC_FORMAT_NVM, WHAT_FORMAT)
    }
}

/// Sanitize: CDW10 SANACT [2:0], AUSE [3] = 0, OWPASS [7:4] = 1 for an overwrite; CDW11 the
/// overwrite pattern (zeroes).
pub fn sanitize_cmd(method: PurgeMethod) -> AdminCmd {
    let cdw10 = match method {
        PurgeMethod::SanitizeBlock => 2,
        PurgeMethod::SanitizeOverwrite => 3 | (1 << 4),
        _ => 4,
    };
    AdminCmd {
        cdw10,
        ..AdminCmd::new(OPC_SANITIZE, WHAT_SANITIZE)
    }
}

fn parsed<T>(
    t: &dyn AdminTransport,
    what: &'static str,
    r: Result<T, super::ParseError>,
) -> Result<T, NvmeError> {
    r.map_err(|source| NvmeError::Parse {
        device: t.device(),
        what,
        source,
    })
}

pub fn read_self_test_log(t: &dyn AdminTransport) -> Result<SelfTestLog, NvmeError> {
    let mut buf = vec![0u8; selftest::LEN];
    t.admin(&self_test_log_cmd(), &mut buf)?;
    parsed(t, WHAT_SELF_TEST_LOG, selftest::parse(&buf))
}

pub fn read_sanitize_status(t: &dyn AdminTransport) -> Result<SanitizeStatus, NvmeError> {
    let mut buf = vec![0u8; sanitize::LEN];
    t.admin(&sanitize_log_cmd(), &mut buf)?;
    parsed(t, WHAT_SANITIZE_LOG, sanitize::parse(&buf))
}

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
            source: super::ParseError::Invalid {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nvme::caps::{parse_ctrl_caps, testdata::id_ctrl_steps};
    use crate::nvme::log::sanitize::testdata as san;
    use crate::nvme::log::selftest::testdata::{desc, failed_extended, page};
    use crate::nvme::replay::{ReplayTransport, Reply};
    use std::cell::Cell;

    fn caps() -> StepCaps {
        parse_ctrl_caps(&id_ctrl_steps()).expect("caps")
    }

    /// Runs a self-test flow with no waiting; returns the outcome and the progress seen.
    fn run(
        t: &ReplayTransport,
        caps: &StepCaps,
        kind: SelfTestKind,
        stop_after_reads: Option<usize>,
        timeout: Duration,
    ) -> (Result<SelfTestEnd, NvmeError>, Vec<f64>) {
        let mut seen = Vec::new();
        let reads = Cell::new(0usize);
        let stop = || {
            let n = t.sent().iter().filter(|c| c.opcode == 0x02).count();
            reads.set(n);
            stop_after_reads.is_some_and(|k| n >= k)
        };
        let mut progress = |p: f64| seen.push(p);
        let mut w = Waiting {
            timeout,
            poll: Duration::ZERO,
            stop: &stop,
            progress: &mut progress,
        };
        let r = run_self_test(t, caps, kind, 7, &mut w);
        (r, seen)
    }

    fn older() -> [u8; 28] {
        desc(1, 0, 0, 0, 100, 0, 0, 0, 0)
    }

    #[test]
    fn short_self_test_runs_with_progress_and_passes() {
        let t = ReplayTransport::new("/dev/nvme9");
        let passed = desc(1, 0, 0, 0, 101, 0, 0, 0, 0);
        t.on_seq(
            &self_test_log_cmd(),
            vec![
                Reply::Data(page(0, 0, &[older()]), 0),
                Reply::Data(page(1, 10, &[older()]), 0),
                Reply::Data(page(1, 60, &[older()]), 0),
                Reply::Data(page(0, 0, &[passed, older()]), 0),
            ],
        );
        t.on(&self_test_cmd(1, 7), Reply::Data(vec![], 0));
        let (r, seen) = run(
            &t,
            &caps(),
            SelfTestKind::Short,
            None,
            Duration::from_secs(600),
        );
        match r.expect("flow") {
            SelfTestEnd::Finished(res) => {
                assert!(res.passed());
                assert_eq!((res.code, res.power_on_hours), (1, 101));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(seen, vec![10.0, 60.0, 100.0]);
        let s = t.sent();
        // The log first (nothing running), then the start: opcode 14h, NSID 7, STC 1.
        assert_eq!((s[0].opcode, s[0].cdw10 & 0xff), (0x02, 0x06));
        assert_eq!(s[0].cdw10, 0x008c_8006, "564 bytes: NUMDL 140, RAE set");
        assert_eq!((s[1].opcode, s[1].nsid, s[1].cdw10), (0x14, 7, 1));
        assert!(s[2..].iter().all(|c| c.opcode == 0x02), "{s:?}");
        assert_eq!(s.len(), 5);
    }

    #[test]
    fn extended_self_test_failure_reports_the_failing_lba() {
        let t = ReplayTransport::new("/dev/nvme9");
        t.on_seq(
            &self_test_log_cmd(),
            vec![
                Reply::Data(page(0, 0, &[]), 0),
                Reply::Data(page(2, 95, &[]), 0),
                Reply::Data(failed_extended(), 0),
            ],
        );
        t.on(&self_test_cmd(2, 7), Reply::Data(vec![], 0));
        let (r, _) = run(
            &t,
            &caps(),
            SelfTestKind::Extended,
            None,
            Duration::from_secs(600),
        );
        let SelfTestEnd::Finished(res) = r.expect("flow") else {
            panic!("not finished")
        };
        assert!(!res.passed());
        assert_eq!(res.result, 7);
        assert_eq!(res.segment, Some(3));
        assert_eq!(res.failing_lba, Some(0x12_3456_789a));
        assert_eq!(
            (res.status_code_type, res.status_code),
            (Some(2), Some(0x81))
        );
        assert_eq!(t.sent()[1].cdw10, 2);
    }

    #[test]
    fn stop_aborts_the_self_test() {
        let t = ReplayTransport::new("/dev/nvme9");
        t.on_seq(
            &self_test_log_cmd(),
            vec![
                Reply::Data(page(0, 0, &[]), 0),
                Reply::Data(page(2, 5, &[]), 0),
            ],
        );
        t.on(&self_test_cmd(2, 7), Reply::Data(vec![], 0));
        t.on(&self_test_cmd(0xf, 7), Reply::Data(vec![], 0));
        // Stop once the progress log was read twice (before the start, then once running).
        let (r, seen) = run(
            &t,
            &caps(),
            SelfTestKind::Extended,
            Some(2),
            Duration::from_secs(600),
        );
        assert_eq!(r.expect("flow"), SelfTestEnd::Aborted);
        assert_eq!(seen, vec![5.0]);
        let last = t.sent().last().cloned().expect("sent");
        assert_eq!(
            (last.opcode, last.nsid, last.cdw10),
            (0x14, 7, 0xf),
            "STC Fh"
        );
    }

    #[test]
    fn a_test_past_its_wait_is_aborted() {
        let t = ReplayTransport::new("/dev/nvme9");
        t.on_seq(
            &self_test_log_cmd(),
            vec![
                Reply::Data(page(0, 0, &[]), 0),
                Reply::Data(page(1, 50, &[]), 0),
            ],
        );
        t.on(&self_test_cmd(1, 7), Reply::Data(vec![], 0));
        t.on(&self_test_cmd(0xf, 7), Reply::Data(vec![], 0));
        let (r, _) = run(&t, &caps(), SelfTestKind::Short, None, Duration::ZERO);
        assert!(matches!(r.expect("flow"), SelfTestEnd::TimedOut { .. }));
        assert_eq!(t.sent().last().map(|c| c.cdw10), Some(0xf));
    }

    #[test]
    fn not_supported_sends_nothing_and_busy_is_refused() {
        let t = ReplayTransport::new("/dev/nvme9");
        let plain = parse_ctrl_caps(&crate::nvme::identify::testdata::id_ctrl()).expect("caps");
        let (r, _) = run(
            &t,
            &plain,
            SelfTestKind::Short,
            None,
            Duration::from_secs(1),
        );
        match r.expect("flow") {
            SelfTestEnd::NotSupported(why) => assert!(why.contains("bit 4 clear"), "{why}"),
            other => panic!("{other:?}"),
        }
        assert!(t.sent().is_empty());
        // Someone else's test is running: not started over it.
        t.on(&self_test_log_cmd(), Reply::Data(page(2, 30, &[]), 0));
        let (r, _) = run(
            &t,
            &caps(),
            SelfTestKind::Short,
            None,
            Duration::from_secs(1),
        );
        let e = r.expect_err("busy");
        assert!(e.to_string().contains("already running, 30% done"), "{e}");
        assert!(t.sent().iter().all(|c| c.opcode != 0x14));
        // A controller that answers Invalid Command Opcode is "not supported" too.
        let t = ReplayTransport::new("/dev/nvme9");
        t.on(&self_test_log_cmd(), Reply::Data(page(0, 0, &[]), 0));
        t.on(&self_test_cmd(1, 7), Reply::Status(0x4001));
        let (r, _) = run(
            &t,
            &caps(),
            SelfTestKind::Short,
            None,
            Duration::from_secs(1),
        );
        assert!(matches!(r.expect("flow"), SelfTestEnd::NotSupported(_)));
    }

    #[test]
    fn expected_durations() {
        let c = caps();
        assert_eq!(
            SelfTestKind::Short.expected(&c),
            Some(Duration::from_secs(120))
        );
        assert_eq!(
            SelfTestKind::Extended.expected(&c),
            Some(Duration::from_secs(37 * 60))
        );
        assert_eq!(SelfTestKind::Extended.expected(&StepCaps::default()), None);
    }

    #[test]
    fn format_keeps_the_namespace_format_and_sets_ses() {
        let f = NsFormat {
            lbaf: 0x13,
            mset: true,
            pi: 2,
            pil: true,
        };
        let c = format_cmd(3, &f, 2);
        assert_eq!((c.opcode, c.nsid), (0x80, 3));
        // LBAF 3, MSET, PI 2 (bits 7:5), PIL (bit 8), SES 2 (bits 11:9), LBAFU 1 (bits 13:12).
        assert_eq!(
            c.cdw10,
            0x3 | 0x10 | (2 << 5) | (1 << 8) | (2 << 9) | (1 << 12)
        );
        let t = ReplayTransport::new("/dev/nvme9");
        t.on(
            &format_cmd(1, &NsFormat::default(), 1),
            Reply::Data(vec![], 0),
        );
        let stop = || false;
        let mut seen = Vec::new();
        let mut progress = |p: f64| seen.push(p);
        let mut w = Waiting {
            timeout: Duration::from_secs(1),
            poll: Duration::ZERO,
            stop: &stop,
            progress: &mut progress,
        };
        let end = run_purge(
            &t,
            PurgeMethod::FormatUserData,
            1,
            &NsFormat::default(),
            &mut w,
        );
        assert_eq!(
            end.expect("format"),
            PurgeEnd::Done {
                sanitize_state: None
            }
        );
        assert_eq!(t.sent()[0].cdw10, 1 << 9, "SES 1: user data erase");
        assert_eq!(t.sent().len(), 1);
    }

    #[test]
    fn sanitize_waits_on_the_status_log() {
        let t = ReplayTransport::new("/dev/nvme9");
        t.on_seq(
            &sanitize_log_cmd(),
            vec![
                Reply::Data(san::page(0, 1, 0), 0),
                Reply::Data(san::page(0x8000, 2, 4), 0),
                Reply::Data(san::page(0xffff, 1 | 0x100, 4), 0),
            ],
        );
        t.on(
            &sanitize_cmd(PurgeMethod::SanitizeCrypto),
            Reply::Data(vec![], 0),
        );
        let stop = || false;
        let mut seen = Vec::new();
        let mut progress = |p: f64| seen.push(p);
        let mut w = Waiting {
            timeout: Duration::from_secs(60),
            poll: Duration::ZERO,
            stop: &stop,
            progress: &mut progress,
        };
        let end = run_purge(
            &t,
            PurgeMethod::SanitizeCrypto,
            1,
            &NsFormat::default(),
            &mut w,
        )
        .expect("sanitize");
        assert_eq!(
            end,
            PurgeEnd::Done {
                sanitize_state: Some(SanitizeState::Completed)
            }
        );
        assert_eq!(seen, vec![50.0, 100.0]);
        let s = t.sent();
        assert_eq!(
            (s[1].opcode, s[1].nsid, s[1].cdw10),
            (0x84, 0, 4),
            "SANACT 4: crypto erase"
        );
        assert_eq!(s[0].cdw10 & 0xff, 0x81);
        assert_eq!(sanitize_cmd(PurgeMethod::SanitizeOverwrite).cdw10, 0x13);
        assert_eq!(sanitize_cmd(PurgeMethod::SanitizeBlock).cdw10, 2);
        // One already running is waited for, not started again; a failure is reported.
        let t = ReplayTransport::new("/dev/nvme9");
        t.on_seq(
            &sanitize_log_cmd(),
            vec![
                Reply::Data(san::page(0x1000, 2, 2), 0),
                Reply::Data(san::page(0x1000, 3, 2), 0),
            ],
        );
        let mut progress = |_p: f64| {};
        let mut w = Waiting {
            timeout: Duration::from_secs(60),
            poll: Duration::ZERO,
            stop: &stop,
            progress: &mut progress,
        };
        let end = run_purge(
            &t,
            PurgeMethod::SanitizeBlock,
            1,
            &NsFormat::default(),
            &mut w,
        )
        .expect("sanitize");
        assert!(matches!(end, PurgeEnd::Failed(_)), "{end:?}");
        assert!(t.sent().iter().all(|c| c.opcode != 0x84));
    }

    #[test]
    fn unsupported_methods_say_why() {
        let c = caps(); // format + crypto format; sanitize crypto + overwrite
        assert_eq!(PurgeMethod::FormatCrypto.unsupported(&c), None);
        assert_eq!(PurgeMethod::SanitizeOverwrite.unsupported(&c), None);
        let why = PurgeMethod::SanitizeBlock
            .unsupported(&c)
            .expect("no block erase");
        assert!(why.contains("SANICAP 0x60000005, bit 1 clear"), "{why}");
        let plain = StepCaps::default();
        let why = PurgeMethod::FormatUserData
            .unsupported(&plain)
            .expect("no format");
        assert!(why.contains("OACS 0x0000, bit 1 clear"), "{why}");
        let fmt_only = StepCaps {
            oacs: 0x2,
            ..Default::default()
        };
        assert!(
            PurgeMethod::FormatCrypto
                .unsupported(&fmt_only)
                .expect("no crypto")
                .contains("FNA 0x00, bit 2 clear")
        );
        assert!(c.secure_erase_all_namespaces());
        assert!(PurgeMethod::FormatUserData.erases_every_namespace(&c));
        assert!(!PurgeMethod::FormatUserData.erases_every_namespace(&fmt_only));
        assert!(PurgeMethod::SanitizeBlock.erases_every_namespace(&fmt_only));
    }
}
