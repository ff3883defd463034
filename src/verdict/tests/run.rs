//! The gates on what the run itself measured: I/O errors, verification, rated IOPS and
//! latency.

use super::*;

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
            "verify_errors: 3 errors in 1.00 GiB verified (at most 0)".to_string(),
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
