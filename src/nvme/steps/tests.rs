//! The flows against replayed controllers, with no waiting.

use super::*;
use crate::nvme::caps::{parse_ctrl_caps, testdata::id_ctrl_steps};
use crate::nvme::log::sanitize::{SanitizeState, testdata as san};
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
