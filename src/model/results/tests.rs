//! Tests of `results`.

use super::*;

fn soak_rec(phase: usize, secs: f64, written: u64, stopped: bool) -> SoakPhase {
    SoakPhase {
        phase,
        profile: "4k-random-write".into(),
        started: 1000.0,
        elapsed_secs: secs,
        written_bytes: written,
        write_ops: written / 4096,
        stopped,
        ..Default::default()
    }
}

/// A resumed phase's record tells why its earlier run stopped: the cause written at the stop,
/// "stopped" for a record without one (an older file), an unclean stop for a record the daemon
/// never closed, a power loss when that record's boot is not this one.
#[test]
fn a_resume_reads_why_the_phase_stopped() {
    let mut l = Vec::new();
    phase_began(&mut l, 1, 0, "soak", "rw", 20.0);
    l[0].boot_id = Some("boot-a".into());
    // Killed: still running.
    assert_eq!(
        resume_cause(&l, 1, 0, "soak", Some("boot-a")),
        Some((StopCause::Unclean, None))
    );
    assert_eq!(
        resume_cause(&l, 1, 0, "soak", Some("boot-b")),
        Some((StopCause::PowerLoss, None))
    );
    // No boot id on either side: an unclean stop, not a power loss.
    assert_eq!(
        resume_cause(&l, 1, 0, "soak", None),
        Some((StopCause::Unclean, None))
    );
    phase_closed(&mut l, PhaseStatus::Stopped, 30.0);
    assert_eq!(
        resume_cause(&l, 1, 0, "soak", Some("boot-a")),
        Some((StopCause::Stopped, Some(30.0)))
    );
    l[0].stopped_by = Some(StopCause::Reload);
    // Through JSON (an older file has no stopped_by: it loads as None).
    let json = serde_json::to_string(&l).expect("json");
    assert!(json.contains("\"stopped_by\":\"reload\""), "{json}");
    let l2: Vec<PhaseRecord> = serde_json::from_str(&json).expect("load");
    assert_eq!(
        resume_cause(&l2, 1, 0, "soak", Some("boot-b")),
        Some((StopCause::Reload, Some(30.0)))
    );
    let old: Vec<PhaseRecord> = serde_json::from_str(
        r#"[{"phase":2,"phase_index":1,"loop_count":0,"kind":"soak","started":20,"ended":30,"status":"stopped","runs":1}]"#,
    )
    .expect("an older record loads");
    assert_eq!(old[0].stopped_by, None);
    // Another phase, another loop, or a finished phase: no resume of that record.
    assert_eq!(resume_cause(&l2, 2, 0, "soak", None), None);
    assert_eq!(resume_cause(&l2, 1, 1, "soak", None), None);
    let mut l3 = l2.clone();
    phase_began(&mut l3, 1, 0, "soak", "rw", 40.0);
    assert_eq!(l3[0].stopped_by, None, "reopened: the cause is cleared");
    phase_closed(&mut l3, PhaseStatus::Finished, 50.0);
    assert_eq!(resume_cause(&l3, 1, 0, "soak", None), None);
}

/// A phase stopped (or killed) and resumed is one record with its first start and its
/// last end; the same phase in the next loop, or a finished one, is never reopened.
#[test]
fn phase_records_keep_their_first_start_and_last_end() {
    let mut l = Vec::new();
    assert!(!phase_began(
        &mut l,
        0,
        0,
        "precondition",
        "precondition",
        10.0
    ));
    phase_closed(&mut l, PhaseStatus::Finished, 20.0);
    assert!(!phase_began(&mut l, 1, 0, "soak", "rw", 20.0));
    phase_closed(&mut l, PhaseStatus::Stopped, 30.0);
    assert_eq!(
        (l[1].ended, l[1].status),
        (Some(30.0), PhaseStatus::Stopped)
    );
    // Through JSON, as a restart reloads the results file.
    let mut l: Vec<PhaseRecord> =
        serde_json::from_str(&serde_json::to_string(&l).expect("json")).expect("load");
    assert!(phase_began(&mut l, 1, 0, "soak", "rw", 90.0), "resumed");
    assert_eq!(
        (l[1].ended, l[1].status, l[1].runs),
        (None, PhaseStatus::Running, 2)
    );
    // Killed while running, then resumed again: still the same record.
    assert!(phase_began(&mut l, 1, 0, "soak", "rw", 95.0));
    phase_closed(&mut l, PhaseStatus::Finished, 120.0);
    assert_eq!(l.len(), 2);
    assert_eq!(
        (l[1].started, l[1].ended, l[1].runs),
        (20.0, Some(120.0), 3)
    );
    assert_eq!((l[1].phase, l[1].phase_index), (2, 1));
    assert_eq!(l[1].title(), "phase 2 (soak rw)");
    assert_eq!(l[0].title(), "phase 1 (precondition)");
    // Finished: the next loop's run of it is a new record; closing twice changes nothing.
    assert!(!phase_began(&mut l, 1, 1, "soak", "rw", 130.0));
    assert!(!phase_began(
        &mut l,
        0,
        1,
        "precondition",
        "precondition",
        131.0
    ));
    phase_closed(&mut l, PhaseStatus::Failed, 140.0);
    phase_closed(&mut l, PhaseStatus::Finished, 150.0);
    assert_eq!(l.len(), 4);
    assert_eq!(
        (l[3].status, l[3].ended),
        (PhaseStatus::Failed, Some(140.0))
    );
    // A clock that stepped back never gives an end before the start.
    phase_began(&mut l, 1, 1, "soak", "rw", 200.0);
    phase_closed(&mut l, PhaseStatus::Finished, 199.0);
    assert!(l[4].ended >= Some(l[4].started));
}

#[test]
fn a_resumed_soak_adds_to_its_stopped_entry_only() {
    let mut s = SoakSummary::default();
    s.record_phase(soak_rec(2, 10.0, 4096 * 10, true), false);
    // Resumed twice: still one entry, its totals the sum, stopped until it ends.
    s.record_phase(soak_rec(2, 5.0, 4096 * 5, true), true);
    s.record_phase(soak_rec(2, 1.0, 4096, false), true);
    assert_eq!(s.phases.len(), 1);
    assert_eq!(s.phases[0].elapsed_secs, 16.0);
    assert_eq!(s.phases[0].written_bytes, 4096 * 16);
    assert_eq!(s.phases[0].write_ops, 16);
    assert!(!s.phases[0].stopped);
    assert_eq!(s.phases[0].started, 1000.0);
    // A finished entry is never added to; nor is one of another phase, nor a fresh run.
    s.record_phase(soak_rec(2, 3.0, 4096, true), true);
    s.record_phase(soak_rec(3, 3.0, 4096, true), true);
    s.record_phase(soak_rec(3, 3.0, 4096, true), false);
    assert_eq!(s.phases.len(), 4);
    assert_eq!(s.phases[0].elapsed_secs, 16.0);
}

/// A SMART log with every counter the drive-side figures use set to a distinct value.
fn start_log() -> SmartLog {
    SmartLog {
        critical_warning: 0,
        avail_spare: 100,
        spare_thresh: 10,
        percent_used: 3,
        data_units_read: 1_000,
        data_units_written: 2_000,
        host_read_commands: 30_000,
        host_write_commands: 40_000,
        unsafe_shutdowns: 5,
        media_errors: 6,
        num_err_log_entries: 7,
        warning_temp_time: 8,
        critical_comp_time: 9,
        thm_temp1_trans_count: 10,
        thm_temp2_trans_count: 11,
        thm_temp1_total_time: 12,
        thm_temp2_total_time: 13,
        ..Default::default()
    }
}

fn host(time: f64, written: u64) -> HostAtSmart {
    HostAtSmart {
        time,
        read_bytes: written / 2,
        written_bytes: written,
        read_ops: written / 8192,
        write_ops: written / 4096,
    }
}

#[test]
fn deltas_between_two_logs() {
    let s = start_log();
    let mut l = s.clone();
    l.avail_spare = 98;
    l.percent_used = 4;
    l.critical_warning = 0x04;
    l.data_units_read += 50;
    l.data_units_written += 100;
    l.host_read_commands += 300;
    l.host_write_commands += 400;
    l.unsafe_shutdowns += 1;
    l.media_errors += 2;
    l.num_err_log_entries += 3;
    l.warning_temp_time += 4;
    l.critical_comp_time += 5;
    l.thm_temp1_trans_count += 6;
    l.thm_temp2_trans_count += 7;
    l.thm_temp1_total_time += 8;
    l.thm_temp2_total_time += 9;
    // 100 data units = 51 200 000 bytes, nvsoak wrote 51 200 000 - 4096 of them.
    let a = DriveReading {
        time: 1000.0,
        smart: &s,
        host: Some(host(1000.0, 1 << 30)),
    };
    let b = DriveReading {
        time: 1000.0 + 43_200.0,
        smart: &l,
        host: Some(host(1000.0 + 43_200.0, (1 << 30) + 51_200_000 - 4096)),
    };
    let d = drive_soak(&a, &b, Some(102_400_000));
    assert_eq!(d.data_written_bytes, Some(51_200_000));
    assert_eq!(d.data_read_bytes, Some(25_600_000));
    assert_eq!(d.host_read_commands, Some(300));
    assert_eq!(d.host_write_commands, Some(400));
    assert_eq!(d.unsafe_shutdowns, Some(1));
    assert_eq!(d.media_errors, Some(2));
    assert_eq!(d.error_log_entries, Some(3));
    assert_eq!(d.warning_temp_secs, Some(240), "minutes x 60");
    assert_eq!(d.critical_temp_secs, Some(300));
    assert_eq!(d.tmt1_transitions, Some(6));
    assert_eq!(d.tmt2_transitions, Some(7));
    assert_eq!(d.tmt1_secs, Some(8));
    assert_eq!(d.tmt2_secs, Some(9));
    assert_eq!((d.percentage_used_start, d.percentage_used_latest), (3, 4));
    assert_eq!(
        (d.available_spare_start, d.available_spare_latest),
        (100, 98)
    );
    assert_eq!(d.available_spare_threshold, 10);
    assert_eq!(d.critical_warning_latest, 4);
    assert!(!d.counter_went_backwards);
    assert_eq!(d.nvsoak_written_bytes, Some(51_200_000 - 4096));
    let r = d.accounting_ratio.expect("ratio");
    assert!((r - 51_200_000.0 / 51_195_904.0).abs() < 1e-12, "{r}");
    assert_eq!(d.accounting_agrees, Some(true), "4 KiB is within rounding");
    // 51.2 MB in half a day on a 102.4 MB drive: 1 drive write per day.
    assert!((d.observed_dwpd.expect("dwpd") - 1.0).abs() < 1e-12);
    assert!(d.media_errors_rose() && d.throttled() && !d.accounting_off());
}

#[test]
fn accounting_beyond_rounding_disagrees() {
    let s = start_log();
    let mut l = s.clone();
    l.data_units_written += 10; // 5 120 000 bytes
    fn at(t: f64, smart: &SmartLog, w: u64) -> DriveReading<'_> {
        DriveReading {
            time: t,
            smart,
            host: Some(host(t, w)),
        }
    }
    // Exactly two data units apart: still rounding.
    let ok = drive_soak(
        &at(0.0, &s, 0),
        &at(60.0, &l, 5_120_000 - 2 * 512_000),
        None,
    );
    assert_eq!(ok.accounting_agrees, Some(true));
    assert_eq!(ok.observed_dwpd, None, "no capacity, no DWPD");
    let off = drive_soak(
        &at(0.0, &s, 0),
        &at(60.0, &l, 5_120_000 - 2 * 512_000 - 1),
        None,
    );
    assert_eq!(off.accounting_agrees, Some(false));
    assert!(off.accounting_off());
    // Nothing written by nvsoak: no ratio, and the drive's 10 units disagree.
    let idle = drive_soak(&at(0.0, &s, 7), &at(60.0, &l, 7), None);
    assert_eq!(idle.accounting_ratio, None);
    assert_eq!(idle.accounting_agrees, Some(false));
    // Unknown host figures at the start (an old checkpoint): no accounting at all.
    let unknown = drive_soak(
        &DriveReading {
            time: 0.0,
            smart: &s,
            host: None,
        },
        &at(60.0, &l, 5_120_000),
        None,
    );
    assert_eq!(unknown.data_written_bytes, Some(5_120_000));
    assert_eq!(unknown.nvsoak_written_bytes, None);
    assert_eq!(
        (unknown.accounting_ratio, unknown.accounting_agrees),
        (None, None)
    );
    assert!(!unknown.media_errors_rose() && !unknown.throttled());
}

#[test]
fn counters_going_backwards_give_no_delta() {
    let s = start_log();
    let mut l = s.clone();
    // A drive reset or swapped: counters below the soak-start values.
    l.data_units_written = 1_999;
    l.media_errors = 0;
    l.thm_temp1_total_time = 0;
    l.host_write_commands += 5;
    let a = DriveReading {
        time: 0.0,
        smart: &s,
        host: Some(host(0.0, 1000)),
    };
    let b = DriveReading {
        time: 10.0,
        smart: &l,
        // nvsoak's totals went backwards too (a checkpoint older than the baseline).
        host: Some(host(10.0, 10)),
    };
    let d = drive_soak(&a, &b, Some(1 << 30));
    assert!(d.counter_went_backwards);
    assert_eq!(d.data_written_bytes, None);
    assert_eq!(d.media_errors, None);
    assert_eq!(d.tmt1_secs, None);
    assert_eq!(d.host_write_commands, Some(5), "other counters still count");
    assert_eq!(d.nvsoak_written_bytes, None);
    assert_eq!((d.accounting_ratio, d.accounting_agrees), (None, None));
    assert_eq!(d.observed_dwpd, None);
    assert!(!d.media_errors_rose());
}

#[test]
fn counters_above_u64_do_not_overflow() {
    let mut s = start_log();
    s.data_units_written = (1u128 << 64) + 5;
    let mut l = s.clone();
    l.data_units_written += 3;
    // A delta too large for u64 is dropped, not wrapped.
    l.data_units_read = s.data_units_read + (1u128 << 64);
    fn r(smart: &SmartLog) -> DriveReading<'_> {
        DriveReading {
            time: 0.0,
            smart,
            host: None,
        }
    }
    let d = drive_soak(&r(&s), &r(&l), None);
    assert_eq!(d.data_written_bytes, Some(3 * 512_000));
    assert_eq!(d.data_read_bytes, None);
    assert!(!d.counter_went_backwards);
}

#[test]
fn version_1_files_load_and_set_drive_fills_the_old_fields() {
    let v1 = r#"{"version":1,"host":"h","target":"t","path":"/dev/x","device":null,
        "sweeps":[],"steady":[],"soak":{"started":1.0,"elapsed_secs":2.0,"read_bytes":3,
        "written_bytes":4,"read_ops":5,"write_ops":6,"errors":0,"verify_errors":0,
        "smart_written_bytes_delta":null,"observed_dwpd":null,"rated_dwpd":3.0,
        "endurance_consumed_ratio":null,"throttled_secs":null,"iops_throttled":null,
        "iops_unthrottled":null}}"#;
    let r: TargetResults = serde_json::from_str(v1).expect("version 1 loads");
    let mut soak = r.soak.expect("soak");
    assert_eq!(soak.drive, None);
    soak.set_drive(DriveSoak {
        data_written_bytes: Some(512_000),
        observed_dwpd: Some(0.5),
        tmt1_secs: Some(10),
        tmt2_secs: Some(5),
        ..Default::default()
    });
    assert_eq!(soak.smart_written_bytes_delta, Some(512_000));
    assert_eq!(soak.observed_dwpd, Some(0.5));
    assert_eq!(soak.throttled_secs, Some(15.0));
    assert_eq!(soak.rated_dwpd, Some(3.0), "kept when the drive has none");
    let text = serde_json::to_string(&soak).expect("encode");
    let back: SoakSummary = serde_json::from_str(&text).expect("decode");
    assert_eq!(back, soak);
    // A DriveSoak from a later version with fields missing still loads.
    let d: DriveSoak =
        serde_json::from_str(r#"{"device":"nvme0","media_errors":2}"#).expect("partial");
    assert_eq!((d.device.as_str(), d.media_errors), ("nvme0", Some(2)));
}

/// The checkpoint stores the soak-start log as JSON; it must read back field for field.
#[test]
fn smart_log_round_trips_through_the_checkpoint_json() {
    let mut s = start_log();
    s.temperature = 318;
    s.temp_sensor = [300, 301, 0, 0, 0, 0, 0, 302];
    s.power_on_hours = 99;
    let v = serde_json::to_value(&s).expect("to value");
    let back: SmartLog = serde_json::from_value(v).expect("from value");
    assert_eq!(back, s);
}

#[test]
fn soak_cpu_per_io_is_the_soak_cpu_over_its_ios_and_absent_in_older_files() {
    let s = SoakSummary {
        read_ops: 600,
        write_ops: 400,
        cpu_user_secs: Some(0.0002),
        cpu_system_secs: Some(0.0018),
        ..Default::default()
    };
    let (u, k) = s.cpu_per_io_ns().expect("figures");
    assert!(
        (u - 200.0).abs() < 1e-6 && (k - 1800.0).abs() < 1e-6,
        "{u} {k}"
    );
    let t = s.to_totals();
    assert_eq!((t.cpu_user_ns, t.cpu_sys_ns), (200_000, 1_800_000));
    // No I/O: no per-I/O figure (not 0, not infinity).
    let idle = SoakSummary {
        cpu_user_secs: Some(1.0),
        cpu_system_secs: Some(1.0),
        ..Default::default()
    };
    assert_eq!(idle.cpu_per_io_ns(), None);
    // A file written before the figures existed loads without them, and writes none back.
    let old: SoakSummary = serde_json::from_str(
        r#"{"started":0,"elapsed_secs":1,"read_bytes":0,"written_bytes":0,"read_ops":5,"write_ops":5,"errors":0,"verify_errors":0,"smart_written_bytes_delta":null,"observed_dwpd":null,"rated_dwpd":null,"endurance_consumed_ratio":null,"throttled_secs":null,"iops_throttled":null,"iops_unthrottled":null}"#,
    )
    .expect("old soak summary");
    assert_eq!((old.cpu_user_secs, old.cpu_per_io_ns()), (None, None));
    let back = serde_json::to_string(&old).expect("json");
    assert!(!back.contains("cpu_"), "{back}");
}
