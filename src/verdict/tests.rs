//! Each gate: pass, fail, not evaluated (no data) and turned off.

use super::*;
use crate::model::results::{SoakSummary, SweepPoint, SweepResult};
use crate::model::verdict::describe;

/// A file target's clean run: a swept 4k random read and a soak without errors.
pub(super) fn clean_results() -> TargetResults {
    TargetResults {
        version: 2,
        host: "rack7".into(),
        target: "disk0".into(),
        path: "/dev/nvme0n1".into(),
        device: Some(crate::model::results::DeviceIdentity {
            controller: "nvme0".into(),
            model: "MODEL-X".into(),
            serial: "SER-123".into(),
            firmware: "FW-9".into(),
            capacity_bytes: 1 << 40,
        }),
        sweeps: vec![SweepResult {
            profile: "4k-random-read".into(),
            block_size: 4096.0,
            read_pct: 100,
            max_iops: 100_000.0,
            started: 1.0,
            finished: Some(2.0),
            points: vec![
                SweepPoint {
                    pct: 50,
                    target_iops: 50_000.0,
                    iops: 50_000.0,
                    lat_avg_us: 300.0,
                    lat_p99_us: 900.0,
                    ..Default::default()
                },
                SweepPoint {
                    pct: 0,
                    target_iops: 0.0,
                    iops: 100_000.0,
                    lat_avg_us: 1_500.0,
                    lat_p99_us: 4_000.0,
                    ..Default::default()
                },
            ],
        }],
        steady: Vec::new(),
        soak: Some(SoakSummary {
            elapsed_secs: 60.0,
            read_bytes: 1 << 30,
            written_bytes: 1 << 30,
            ..Default::default()
        }),
        qualification_steps: Vec::new(),
        verdict: None,
        ocp_phases: Vec::new(),
        phases: Vec::new(),
        members: Vec::new(),
        card: None,
        subject: Some(Subject {
            kind: SubjectKind::Drive,
            verify: true,
            verify_note: None,
            self_test_planned: false,
        }),
        verified_bytes: 1 << 30,
        device_key: None,
    }
}

/// [`clean_results`] as a file target.
fn file_results() -> TargetResults {
    let mut r = clean_results();
    r.device = None;
    r.subject = Some(Subject {
        kind: SubjectKind::File,
        ..r.subject.clone().unwrap_or_default()
    });
    r
}

/// A healthy drive's figures over the plan, every field distinct.
pub(super) fn drive() -> DriveSoak {
    DriveSoak {
        device: "nvme0".into(),
        media_errors: Some(0),
        error_log_entries: Some(0),
        percentage_used_start: 3,
        percentage_used_latest: 4,
        available_spare_start: 100,
        available_spare_latest: 97,
        available_spare_threshold: 10,
        critical_warning_latest: 0,
        critical_warning_seen: 0,
        temperature_max_kelvin: Some(318),
        data_written_bytes: Some(1_000_000_000),
        nvsoak_written_bytes: Some(1_000_400_000),
        ..Default::default()
    }
}

fn with_drive(d: DriveSoak) -> TargetResults {
    let mut r = clean_results();
    r.soak.as_mut().expect("soak").drive = Some(d);
    r
}

fn eval(g: &GateSettings, r: &TargetResults) -> Verdict {
    evaluate(
        g,
        r,
        &ExternalInputs::default(),
        None,
        PlanState::Finished,
        None,
        5.0,
    )
}

fn state(v: &Verdict, gate: Gate) -> GateState {
    v.gate(gate).expect("every gate is listed").state
}

#[test]
fn a_clean_drive_passes_every_gate_that_applies_and_the_rest_are_not_applicable() {
    let v = eval(&GateSettings::default(), &with_drive(drive()));
    assert!(v.passed);
    assert_eq!(v.headline(), "PASS");
    assert_eq!(v.gates.len(), Gate::ALL.len());
    for g in [
        Gate::VerifyErrors,
        Gate::IoErrors,
        Gate::MediaErrors,
        Gate::ErrorLogEntries,
        Gate::CriticalWarning,
        Gate::Temperature,
        Gate::AvailableSpare,
        Gate::PercentageUsed,
        Gate::Accounting,
    ] {
        assert_eq!(state(&v, g), GateState::Pass, "{g:?}");
    }
    // No self-test phase, no PCIe link in sysfs, no C1h page: the gates do not apply.
    for g in [Gate::SelfTest, Gate::Link, Gate::OcpPanics] {
        assert_eq!(state(&v, g), GateState::NotApplicable, "{g:?}");
    }
    for g in [Gate::RatedIops, Gate::Sub1msIops] {
        assert_eq!(state(&v, g), GateState::Off, "{g:?} is off by default");
    }
}

/// A drive whose health pages could not be read is not a PASS on its I/O errors alone: every
/// drive gate applies and is not evaluated, and the verdict is INCOMPLETE naming them.
#[test]
fn a_drive_without_health_data_is_incomplete_not_pass() {
    let v = eval(&GateSettings::default(), &clean_results());
    assert_eq!(v.status(), VerdictStatus::Incomplete);
    assert!(!v.passed);
    for g in Gate::ALL.iter().filter(|g| g.is_drive_gate()) {
        assert_eq!(state(&v, *g), GateState::NotEvaluated, "{g:?}");
    }
    let missing = v.not_evaluated_summary();
    assert!(
        missing
            .iter()
            .any(|s| s.starts_with("temperature: not evaluated (no health data")),
        "{missing:?}"
    );
    // Turning those gates off is the operator's way to a PASS without them.
    let g = GateSettings {
        max_new_media_errors: None,
        max_new_error_log_entries: None,
        critical_warning: false,
        max_temperature_celsius: None,
        min_available_spare: None,
        max_percentage_used: None,
        accounting_tolerance: None,
        link: false,
        ocp_panics: false,
        ..Default::default()
    };
    assert_eq!(eval(&g, &clean_results()).status(), VerdictStatus::Pass);
}

/// The verify gate is evaluated only when data was verified: verify off (the default), or on
/// with nothing read back yet, leaves it not evaluated and the verdict INCOMPLETE; turned off,
/// the verdict may PASS and says "data not verified".
#[test]
fn nothing_verified_is_never_a_verify_pass() {
    let mut r = file_results();
    r.subject.as_mut().expect("subject").verify = false;
    r.verified_bytes = 0;
    let v = eval(&GateSettings::default(), &r);
    let g = v.gate(Gate::VerifyErrors).expect("listed");
    assert_eq!(g.state, GateState::NotEvaluated);
    assert!(g.note.contains("verify is off"), "{}", g.note);
    assert_eq!(v.status(), VerdictStatus::Incomplete);
    assert!(
        v.data_not_verified()
            .is_some_and(|s| s.starts_with("data not verified (verify is off")),
        "{:?}",
        v.data_not_verified()
    );
    // On, but nothing read back yet.
    let mut on = file_results();
    on.verified_bytes = 0;
    let v = eval(&GateSettings::default(), &on);
    assert_eq!(state(&v, Gate::VerifyErrors), GateState::NotEvaluated);
    assert_eq!(v.status(), VerdictStatus::Incomplete);
    // Verified: evaluated, with what it covers.
    let v = eval(&GateSettings::default(), &file_results());
    let g = v.gate(Gate::VerifyErrors).expect("listed");
    assert_eq!(g.state, GateState::Pass);
    assert!(g.measured.contains("verified"), "{}", g.measured);
    assert_eq!(v.status(), VerdictStatus::Pass);
    assert_eq!(v.data_not_verified(), None);
    // Turned off: PASS, and the verdict says data was not verified.
    let off = GateSettings {
        max_verify_errors: None,
        ..Default::default()
    };
    let v = eval(&off, &r);
    assert_eq!(v.status(), VerdictStatus::Pass);
    assert_eq!(
        v.data_not_verified().as_deref(),
        Some("data not verified (the verify_errors gate is off)")
    );
}

/// A results file from before subjects were recorded has no record of verification: its
/// verify gate is not evaluated, never passed.
#[test]
fn an_old_results_file_is_not_a_verified_pass() {
    let mut r = with_drive(drive());
    r.subject = None;
    let v = eval(&GateSettings::default(), &r);
    let g = v.gate(Gate::VerifyErrors).expect("listed");
    assert_eq!(g.state, GateState::NotEvaluated);
    assert!(g.note.contains("no record of verification"), "{}", g.note);
}

#[test]
fn a_file_target_has_its_drive_gates_not_applicable_never_passed() {
    let r = file_results();
    let v = eval(&GateSettings::default(), &r);
    assert_eq!(v.status(), VerdictStatus::Pass, "verified, no I/O error");
    for g in Gate::ALL.iter().filter(|g| g.is_drive_gate()) {
        let gr = v.gate(*g).expect("listed");
        assert_eq!(gr.state, GateState::NotApplicable, "{g:?}");
        assert!(
            gr.note.contains("file target has no drive"),
            "{g:?}: {}",
            gr.note
        );
    }
    // A loop device has no drive either.
    let mut lo = file_results();
    lo.subject.as_mut().expect("subject").kind = SubjectKind::BlockDevice;
    let v = eval(&GateSettings::default(), &lo);
    assert_eq!(state(&v, Gate::Temperature), GateState::NotApplicable);
    assert_eq!(v.status(), VerdictStatus::Pass);
    // Drive figures on a file target (impossible in practice) are never judged.
    let mut odd = file_results();
    odd.soak.as_mut().expect("soak").drive = Some(DriveSoak {
        media_errors: Some(9),
        ..drive()
    });
    assert_eq!(
        state(&eval(&GateSettings::default(), &odd), Gate::MediaErrors),
        GateState::NotApplicable
    );
}

#[test]
fn io_and_verify_error_gates() {
    let mut r = with_drive(drive());
    r.soak.as_mut().expect("soak").errors = 12;
    r.soak.as_mut().expect("soak").verify_errors = 3;
    let v = eval(&GateSettings::default(), &r);
    assert!(!v.passed);
    let io = v.gate(Gate::IoErrors).expect("io");
    assert_eq!(io.state, GateState::Fail);
    assert_eq!((io.value, io.threshold), (Some(12.0), Some(0.0)));
    assert_eq!(state(&v, Gate::VerifyErrors), GateState::Fail);
    assert_eq!(
        v.failed_summary(),
        vec![
            "verify_errors: 3 errors in 1.07 GB verified (at most 0)".to_string(),
            "io_errors: 12 errors (at most 0)".to_string()
        ]
    );
    // Changed: 12 allowed passes, 11 fails.
    let g = GateSettings {
        max_io_errors: Some(12),
        max_verify_errors: None,
        ..Default::default()
    };
    let v = eval(&g, &r);
    assert_eq!(state(&v, Gate::IoErrors), GateState::Pass);
    assert_eq!(state(&v, Gate::VerifyErrors), GateState::Off);
    assert!(v.passed);
    let g = GateSettings {
        max_io_errors: Some(11),
        max_verify_errors: None,
        ..Default::default()
    };
    assert_eq!(state(&eval(&g, &r), Gate::IoErrors), GateState::Fail);
    // No soak summary yet: not evaluated.
    let mut empty = clean_results();
    empty.soak = None;
    assert_eq!(
        state(&eval(&GateSettings::default(), &empty), Gate::IoErrors),
        GateState::NotEvaluated
    );
}

#[test]
fn media_error_and_error_log_gates() {
    let mut d = drive();
    d.media_errors = Some(2);
    d.error_log_entries = Some(5);
    let v = eval(&GateSettings::default(), &with_drive(d.clone()));
    assert_eq!(state(&v, Gate::MediaErrors), GateState::Fail);
    assert_eq!(state(&v, Gate::ErrorLogEntries), GateState::Fail);
    assert!(
        v.gate(Gate::MediaErrors)
            .is_some_and(|g| g.measured == "2 new media errors")
    );
    // A counter that went backwards is unknown, not a pass.
    d.media_errors = None;
    let v = eval(&GateSettings::default(), &with_drive(d.clone()));
    let g = v.gate(Gate::MediaErrors).expect("media");
    assert_eq!(g.state, GateState::NotEvaluated);
    assert!(g.note.contains("went backwards"), "{}", g.note);
    let off = GateSettings {
        max_new_media_errors: None,
        max_new_error_log_entries: Some(5),
        ..Default::default()
    };
    let v = eval(&off, &with_drive(d));
    assert_eq!(state(&v, Gate::MediaErrors), GateState::Off);
    assert_eq!(state(&v, Gate::ErrorLogEntries), GateState::Pass);
}

#[test]
fn critical_warning_gate_sees_a_bit_set_at_any_poll() {
    let mut d = drive();
    // Set at some poll, cleared by the latest one: still a failure.
    d.critical_warning_seen = 0b0000_0010;
    let v = eval(&GateSettings::default(), &with_drive(d.clone()));
    let g = v.gate(Gate::CriticalWarning).expect("cw");
    assert_eq!(g.state, GateState::Fail);
    assert_eq!(g.measured, "set: 0x02 (temperature)");
    d.critical_warning_seen = 0;
    d.critical_warning_latest = 0b0000_0101;
    let g = eval(&GateSettings::default(), &with_drive(d.clone()));
    assert_eq!(
        g.gate(Gate::CriticalWarning).map(|g| g.measured.as_str()),
        Some("set: 0x05 (spare, reliability)")
    );
    let off = GateSettings {
        critical_warning: false,
        ..Default::default()
    };
    assert_eq!(
        state(&eval(&off, &with_drive(d)), Gate::CriticalWarning),
        GateState::Off
    );
}

#[test]
fn temperature_gate_uses_autovals_348_k_by_default() {
    let mut d = drive();
    d.temperature_max_kelvin = Some(348);
    let v = eval(&GateSettings::default(), &with_drive(d.clone()));
    assert_eq!(
        state(&v, Gate::Temperature),
        GateState::Pass,
        "348 K is the limit"
    );
    d.temperature_max_kelvin = Some(349);
    let v = eval(&GateSettings::default(), &with_drive(d.clone()));
    let g = v.gate(Gate::Temperature).expect("t");
    assert_eq!(g.state, GateState::Fail);
    assert_eq!(g.measured, "peak 75.85 °C (349 K)");
    assert_eq!(g.limit, "at most 74.85 °C (348.00 K)");
    let higher = GateSettings {
        max_temperature_celsius: Some(80.0),
        ..Default::default()
    };
    assert_eq!(
        state(&eval(&higher, &with_drive(d.clone())), Gate::Temperature),
        GateState::Pass
    );
    d.temperature_max_kelvin = None;
    assert_eq!(
        state(
            &eval(&GateSettings::default(), &with_drive(d)),
            Gate::Temperature
        ),
        GateState::NotEvaluated
    );
}

#[test]
fn spare_and_percentage_used_gates() {
    let mut d = drive();
    d.available_spare_latest = 9;
    d.percentage_used_latest = 101;
    let v = eval(&GateSettings::default(), &with_drive(d.clone()));
    let s = v.gate(Gate::AvailableSpare).expect("spare");
    assert_eq!(s.state, GateState::Fail);
    assert_eq!(s.limit, "at least the drive's threshold, 10 %");
    assert_eq!(state(&v, Gate::PercentageUsed), GateState::Fail);
    let g = GateSettings {
        min_available_spare: Some(SpareMin::Percent(5)),
        max_percentage_used: None,
        ..Default::default()
    };
    let v = eval(&g, &with_drive(d));
    assert_eq!(state(&v, Gate::AvailableSpare), GateState::Pass);
    assert_eq!(state(&v, Gate::PercentageUsed), GateState::Off);
}

#[test]
fn accounting_gate_allows_rounding_plus_the_tolerance() {
    let mut d = drive();
    // 400 kB apart: within two data units.
    let v = eval(&GateSettings::default(), &with_drive(d.clone()));
    assert_eq!(state(&v, Gate::Accounting), GateState::Pass);
    d.data_written_bytes = Some(1_100_000_000);
    let v = eval(&GateSettings::default(), &with_drive(d.clone()));
    assert_eq!(state(&v, Gate::Accounting), GateState::Fail);
    let loose = GateSettings {
        accounting_tolerance: Some(0.10),
        ..Default::default()
    };
    assert_eq!(
        state(&eval(&loose, &with_drive(d.clone())), Gate::Accounting),
        GateState::Pass
    );
    d.nvsoak_written_bytes = None;
    assert_eq!(
        state(
            &eval(&GateSettings::default(), &with_drive(d)),
            Gate::Accounting
        ),
        GateState::NotEvaluated
    );
}

#[test]
fn external_inputs_are_evaluated_when_present() {
    let mut r = with_drive(drive());
    r.subject.as_mut().expect("subject").self_test_planned = true;
    let ext = ExternalInputs {
        self_test: Some(Outcome {
            value: false,
            detail: "extended: failed segment 3, LBA 0x1234".into(),
        }),
        link_degraded: Some(Outcome {
            value: true,
            detail: "x2 of x4".into(),
        }),
        ocp_panic_count_change: Some(1),
    };
    let v = evaluate(
        &GateSettings::default(),
        &r,
        &ext,
        None,
        PlanState::Finished,
        None,
        0.0,
    );
    assert_eq!(state(&v, Gate::SelfTest), GateState::Fail);
    assert_eq!(state(&v, Gate::Link), GateState::Fail);
    assert_eq!(state(&v, Gate::OcpPanics), GateState::Fail);
    assert_eq!(
        v.gate(Gate::Link).map(|g| g.measured.as_str()),
        Some("x2 of x4")
    );
    let good = ExternalInputs {
        self_test: Some(Outcome {
            value: true,
            detail: "not supported".into(),
        }),
        link_degraded: Some(Outcome {
            value: false,
            detail: "x4 of x4".into(),
        }),
        ocp_panic_count_change: Some(0),
    };
    let v = evaluate(
        &GateSettings::default(),
        &r,
        &good,
        None,
        PlanState::Finished,
        None,
        0.0,
    );
    for g in [Gate::SelfTest, Gate::Link, Gate::OcpPanics] {
        assert_eq!(state(&v, g), GateState::Pass, "{g:?}");
    }
    let off = GateSettings {
        self_test: false,
        link: false,
        ocp_panics: false,
        ..Default::default()
    };
    let v = evaluate(&off, &r, &ext, None, PlanState::Finished, None, 0.0);
    assert!(v.passed, "{:?}", v.not_evaluated_summary());
    for g in [Gate::SelfTest, Gate::Link, Gate::OcpPanics] {
        assert_eq!(state(&v, g), GateState::Off, "{g:?}");
    }
}

#[test]
fn rated_iops_and_sub_1ms_gates() {
    let r = with_drive(drive());
    let g = GateSettings {
        min_rated_iops_ratio: Some(0.8),
        min_sub_1ms_iops: Some(40_000.0),
        ..Default::default()
    };
    // No rated figures: not evaluated.
    let v = eval(&g, &r);
    assert_eq!(state(&v, Gate::RatedIops), GateState::NotEvaluated);
    // The frontier is the 50 % point (300 µs average): 50 000 IOPS.
    let f = v.gate(Gate::Sub1msIops).expect("frontier");
    assert_eq!(f.state, GateState::Pass);
    assert_eq!(f.value, Some(50_000.0));
    let rated = RatedFigures {
        random_read_iops: Some(150_000.0),
        ..Default::default()
    };
    let v = evaluate(
        &g,
        &r,
        &ExternalInputs::default(),
        Some(&rated),
        PlanState::Finished,
        None,
        0.0,
    );
    let ri = v.gate(Gate::RatedIops).expect("rated");
    assert_eq!(ri.state, GateState::Fail, "100k of 150k is 67 %");
    assert!((ri.value.unwrap_or(0.0) - 2.0 / 3.0).abs() < 1e-9);
    let rated = RatedFigures {
        random_read_iops: Some(110_000.0),
        ..Default::default()
    };
    let stricter = GateSettings {
        min_sub_1ms_iops: Some(60_000.0),
        ..g
    };
    let v = evaluate(
        &stricter,
        &r,
        &ExternalInputs::default(),
        Some(&rated),
        PlanState::Finished,
        None,
        0.0,
    );
    assert_eq!(state(&v, Gate::RatedIops), GateState::Pass);
    assert_eq!(state(&v, Gate::Sub1msIops), GateState::Fail);
    let mut no_sweep = r.clone();
    no_sweep.sweeps.clear();
    assert_eq!(
        state(&eval(&stricter, &no_sweep), Gate::Sub1msIops),
        GateState::NotEvaluated
    );
}

#[test]
fn headline_follows_the_plan() {
    let r = with_drive(drive());
    let at = |plan| {
        evaluate(
            &GateSettings::default(),
            &r,
            &ExternalInputs::default(),
            None,
            plan,
            None,
            0.0,
        )
        .headline()
    };
    assert_eq!(at(PlanState::Finished), "PASS");
    assert_eq!(at(PlanState::Running), "RUNNING");
    assert_eq!(at(PlanState::Stopped), "INCOMPLETE");
    // Stopped by a signal (a restart would resume it): INCOMPLETE, never PASS.
    assert_eq!(at(PlanState::Interrupted), "INCOMPLETE");
    // A FAIL stays a FAIL, whatever stopped the plan.
    let mut bad = r.clone();
    bad.soak.as_mut().expect("soak").errors = 1;
    for plan in [
        PlanState::Running,
        PlanState::Finished,
        PlanState::Stopped,
        PlanState::Interrupted,
    ] {
        let v = evaluate(
            &GateSettings::default(),
            &bad,
            &ExternalInputs::default(),
            None,
            plan,
            None,
            0.0,
        );
        assert_eq!(v.headline(), "FAIL", "{plan:?}");
    }
}

#[test]
fn old_results_files_load_without_a_verdict_and_new_ones_round_trip() {
    let old = r#"{"version":2,"host":"h","target":"t","path":"/p","device":null,
        "sweeps":[],"steady":[],"soak":null}"#;
    let r: TargetResults = serde_json::from_str(old).expect("an old file loads");
    assert_eq!(r.verdict, None);
    let mut r = with_drive(drive());
    stamp(
        &mut r,
        &GateSettings::default(),
        &ExternalInputs::default(),
        PlanState::Finished,
        None,
    );
    let text = serde_json::to_string(&r).expect("ser");
    let back: TargetResults = serde_json::from_str(&text).expect("de");
    assert_eq!(back.verdict, r.verdict);
    assert!(text.contains("\"gate\":\"critical_warning\""), "{text}");
}

#[test]
fn describe_lists_the_gates_on_and_off() {
    let d = describe(&GateSettings::default());
    assert!(
        d.starts_with("verify_errors <= 0, io_errors <= 0, media_errors <= 0"),
        "{d}"
    );
    assert!(d.contains("temperature <= 74.85 °C"), "{d}");
    assert!(d.ends_with("; off: rated_iops, sub_1ms_iops"), "{d}");
    let g = GateSettings {
        max_io_errors: None,
        ..Default::default()
    };
    let d = describe(&g);
    assert!(d.contains("off: io_errors, rated_iops"), "{d}");
}

/// The self-test gate reads the results file's own `qualification_steps`: a plan without a
/// self-test phase has it "not applicable", a planned one not run (or refused) "not
/// evaluated", "not supported" passes (the controller has none), a failed one fails the gate.
#[test]
fn self_test_gate_reads_the_recorded_steps() {
    use crate::model::steps::{StepOutcome, StepStatus};
    let judge = |r: &TargetResults| {
        let ext = ExternalInputs::from_results(r);
        let v = evaluate(
            &GateSettings::default(),
            r,
            &ext,
            None,
            PlanState::Finished,
            None,
            1.0,
        );
        v.gate(Gate::SelfTest).expect("listed").clone()
    };
    let mut r = clean_results();
    assert_eq!(
        judge(&r).state,
        GateState::NotApplicable,
        "no self-test phase in the plan"
    );
    r.subject.as_mut().expect("subject").self_test_planned = true;
    assert_eq!(
        judge(&r).state,
        GateState::NotEvaluated,
        "planned, not run yet"
    );
    r.qualification_steps = vec![StepOutcome {
        kind: "self-test".into(),
        method: "short".into(),
        status: StepStatus::Refused,
        ..Default::default()
    }];
    assert_eq!(
        judge(&r).state,
        GateState::NotEvaluated,
        "refused: no outcome"
    );
    let step = |method: &str, status| StepOutcome {
        kind: "self-test".into(),
        method: method.into(),
        status,
        ..Default::default()
    };
    r.qualification_steps = vec![
        StepOutcome {
            kind: "purge".into(),
            status: StepStatus::Failed,
            ..Default::default()
        },
        step("short", StepStatus::NotSupported),
    ];
    let g = judge(&r);
    assert_eq!(g.state, GateState::Pass, "{g:?}");
    assert!(
        g.measured.contains("short self-test: not supported"),
        "{g:?}"
    );
    r.qualification_steps
        .push(step("extended", StepStatus::Failed));
    let g = judge(&r);
    assert_eq!(g.state, GateState::Fail, "{g:?}");
    assert!(g.measured.contains("extended self-test: failed"), "{g:?}");
}

/// The link and OCP panic gates read the drive figures the results file carries.
#[test]
fn link_and_ocp_panic_gates_read_the_drive_figures() {
    let judge = |r: &TargetResults, gate| {
        let ext = ExternalInputs::from_results(r);
        let v = evaluate(
            &GateSettings::default(),
            r,
            &ext,
            None,
            PlanState::Finished,
            None,
            1.0,
        );
        v.gate(gate).expect("listed").state
    };
    let mut d = drive();
    // No link figures (not on a PCIe link), no C1h page: the gates do not apply.
    assert_eq!(
        judge(&with_drive(d.clone()), Gate::Link),
        GateState::NotApplicable
    );
    assert_eq!(
        judge(&with_drive(d.clone()), Gate::OcpPanics),
        GateState::NotApplicable
    );
    // No health data at all: not evaluated.
    assert_eq!(judge(&clean_results(), Gate::Link), GateState::NotEvaluated);
    assert_eq!(
        judge(&clean_results(), Gate::OcpPanics),
        GateState::NotEvaluated
    );
    d.link_degraded = Some(false);
    d.ocp_panic_changed = Some(false);
    assert_eq!(judge(&with_drive(d.clone()), Gate::Link), GateState::Pass);
    assert_eq!(
        judge(&with_drive(d.clone()), Gate::OcpPanics),
        GateState::Pass
    );
    d.link_degraded = Some(true);
    d.ocp_panic_changed = Some(true);
    assert_eq!(judge(&with_drive(d.clone()), Gate::Link), GateState::Fail);
    assert_eq!(judge(&with_drive(d), Gate::OcpPanics), GateState::Fail);
}

/// A SATA disk's figures as `health::collect::ata::soak::ata_soak` leaves them: the NVMe-shaped
/// spare and percentage fields at zero, the ATA figures in `ata`.
fn sata_drive(temp_max_c: Option<i16>, pct_used: Option<u8>) -> DriveSoak {
    DriveSoak {
        device: "sda".into(),
        media_errors: Some(0),
        ata: Some(crate::model::results::AtaSoak {
            temperature_max_c: temp_max_c,
            temperature_latest_c: temp_max_c.map(|c| c - 3),
            percentage_used_start: pct_used.map(|p| p.saturating_sub(1)),
            percentage_used_latest: pct_used,
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[test]
fn a_sata_drives_temperature_gate_reads_the_ata_peak() {
    let v = eval(
        &GateSettings::default(),
        &with_drive(sata_drive(Some(74), Some(7))),
    );
    let g = v.gate(Gate::Temperature).expect("t");
    assert_eq!(g.state, GateState::Pass, "{g:?}");
    assert_eq!(g.measured, "peak 74 °C (347.15 K)");
    assert_eq!(g.value, Some(74.0));
    let v = eval(
        &GateSettings::default(),
        &with_drive(sata_drive(Some(75), Some(7))),
    );
    let g = v.gate(Gate::Temperature).expect("t");
    assert_eq!(g.state, GateState::Fail, "75 °C is above 348 K");
    assert_eq!(g.measured, "peak 75 °C (348.15 K)");
    assert_eq!(g.limit, "at most 74.85 °C (348.00 K)");
    let v = eval(
        &GateSettings::default(),
        &with_drive(sata_drive(None, Some(7))),
    );
    let g = v.gate(Gate::Temperature).expect("t");
    assert_eq!(g.state, GateState::NotEvaluated);
    assert!(
        g.note.contains("SATA drive reported no temperature"),
        "{}",
        g.note
    );
}

#[test]
fn a_sata_drives_percentage_used_reads_device_statistics_and_spare_does_not_apply() {
    let v = eval(
        &GateSettings::default(),
        &with_drive(sata_drive(Some(40), Some(7))),
    );
    let p = v.gate(Gate::PercentageUsed).expect("p");
    assert_eq!((p.state, p.measured.as_str()), (GateState::Pass, "7 %"));
    let s = v.gate(Gate::AvailableSpare).expect("s");
    assert_eq!(s.state, GateState::NotApplicable, "never passed on a zero");
    assert_eq!(s.note, "a SATA drive reports no available spare");
    assert_eq!(s.limit, "at least the drive's threshold");
    let tight = GateSettings {
        max_percentage_used: Some(5),
        min_available_spare: None,
        ..Default::default()
    };
    let v = eval(&tight, &with_drive(sata_drive(Some(40), Some(7))));
    assert_eq!(state(&v, Gate::PercentageUsed), GateState::Fail);
    assert_eq!(state(&v, Gate::AvailableSpare), GateState::Off);
    let v = eval(
        &GateSettings::default(),
        &with_drive(sata_drive(Some(40), None)),
    );
    let p = v.gate(Gate::PercentageUsed).expect("p");
    assert_eq!(
        p.state,
        GateState::NotEvaluated,
        "not the 0 of the NVMe field"
    );
    assert!(p.note.contains("Percentage Used"), "{}", p.note);
}

#[test]
fn a_sata_drives_critical_warning_gate_reads_smart_return_status() {
    let with_status = |st: Option<bool>| {
        let mut d = sata_drive(Some(40), Some(7));
        if let Some(a) = d.ata.as_mut() {
            a.smart_passed_latest = st;
        }
        with_drive(d)
    };
    let v = eval(&GateSettings::default(), &with_status(Some(true)));
    let g = v.gate(Gate::CriticalWarning).expect("cw");
    assert_eq!(g.state, GateState::Pass, "{g:?}");
    assert_eq!(g.measured, "SMART RETURN STATUS: passed");
    let v = eval(&GateSettings::default(), &with_status(Some(false)));
    let g = v.gate(Gate::CriticalWarning).expect("cw");
    assert_eq!(g.state, GateState::Fail, "{g:?}");
    assert!(g.measured.contains("threshold exceeded"), "{}", g.measured);
    assert!(!v.passed);
    // No status: not evaluated, never passed on the NVMe field's zero.
    let v = eval(&GateSettings::default(), &with_status(None));
    let g = v.gate(Gate::CriticalWarning).expect("cw");
    assert_eq!(g.state, GateState::NotEvaluated, "{g:?}");
    assert!(g.note.contains("SMART RETURN STATUS"), "{}", g.note);
}
