//! Each gate: pass, fail, not evaluated (no data) and turned off. Here the fixtures and the
//! verdict as a whole (its headline, the gates listed, old files); each family of gates in a
//! file of its own.

mod drive;
mod run;
mod sata;

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
        verify_state: None,
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
