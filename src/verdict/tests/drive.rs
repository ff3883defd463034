//! The drive's gates, read from an NVMe drive's figures over the plan: media and error-log
//! errors, critical warnings, temperature, spare and wear, write accounting, self-test, link
//! and OCP panics; and a file target, which has none of them.

use super::*;

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
