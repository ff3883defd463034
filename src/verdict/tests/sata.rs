//! The drive's gates on a SATA drive: the ATA figures each gate reads instead, and the gates
//! that do not apply.

use super::*;

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
