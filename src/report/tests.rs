//! Tests of `report`.

use super::*;

fn fixtures() -> Vec<Loaded> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/report");
    load_files(&[dir.join("drive-a.json"), dir.join("drive-b.json")]).expect("fixtures")
}

#[test]
fn the_soak_section_names_each_soak_phase_with_its_own_totals() {
    let mut f = fixtures();
    let soak = f[0].results.soak.get_or_insert_with(Default::default);
    soak.plan = Some(crate::model::results::PlanTotals {
        elapsed_secs: 720.0,
        written_bytes: 3 << 30,
        read_bytes: 1 << 30,
        ..Default::default()
    });
    soak.phases.push(crate::model::results::SoakPhase {
        phase: 2,
        profile: "4k-random-write".into(),
        started: 1_700_000_000.0,
        elapsed_secs: 60.0,
        written_bytes: 1 << 30,
        write_ops: 262_144,
        ..Default::default()
    });
    let r = build(&f);
    let want =
        "phase 2, 4k-random-write: 00:01:00, wrote 1.00 GiB, read 0 B, 262,144 ops, 0 I/O errors";
    let page = html::render(&r).expect("html");
    assert!(page.contains("Soak phases"), "{page}");
    assert!(page.contains(want), "{want} in {page}");
    let (md, _) = markdown::render(&r, "q").expect("markdown");
    assert!(md.contains(&format!("- {want}")), "{md}");
    // The soak's own duration is labelled so; the whole plan's row comes from soak.plan.
    assert!(page.contains("<th>Soak duration</th>"), "{page}");
    let whole = "00:12:00, wrote 3.00 GiB, read 1.00 GiB";
    assert!(
        page.contains(&format!("<th>Whole plan, every phase</th><td>{whole}</td>")),
        "{page}"
    );
    let phases_at = md.find("Soak phases:").expect("phases");
    let whole_at = md.find(whole).expect("whole plan");
    assert!(phases_at < whole_at, "{md}");
    assert!(md.contains("- Soak duration: "), "{md}");
    // A results file without phases (written before) says nothing of them, and without
    // soak.plan there is no whole-plan row (never a partial sum in its place).
    let plain = html::render(&build(&fixtures())).expect("html");
    assert!(!plain.contains("Soak phases"));
    assert!(!plain.contains("Whole plan"), "{plain}");
}

#[test]
fn a_target_spanning_a_rated_card_is_compared_with_the_cards_rating() {
    use crate::model::results::{MemberFigures, SpanCard, SweepPoint, SweepResult};
    let mut f = fixtures();
    let r = &mut f[0].results;
    r.device = None;
    r.members = vec![MemberFigures::default(), MemberFigures::default()];
    r.sweeps = vec![SweepResult {
        profile: "4k-random-read".into(),
        block_size: 4096.0,
        read_pct: 100,
        max_iops: 1_000_000.0,
        started: 1.0,
        finished: Some(2.0),
        points: vec![SweepPoint {
            pct: 0,
            iops: 1_000_000.0,
            lat_avg_us: 500.0,
            duration_secs: 10.0,
            member_iops: vec![600_000.0, 400_000.0],
            ..Default::default()
        }],
    }];
    r.card = Some(SpanCard {
        card: "0000:02:00.0".into(),
        rating: "Liqid Element AIC".into(),
        random_read_iops: Some(1_250_000.0),
        random_write_iops: Some(900_000.0),
        ..Default::default()
    });
    let rep = build(&f[..1]);
    let d = &rep.drives[0];
    assert_eq!(
        d.rated.as_ref().map(|r| r.source.as_str()),
        Some("card 0000:02:00.0: ratings table: Liqid Element AIC")
    );
    let share = d.sweeps[0].rated_share.as_ref().expect("of rated");
    assert!((share.ratio - 0.8).abs() < 1e-9, "{share:?}");
    let page = html::render(&rep).expect("html");
    assert!(page.contains(&html::rated_text(&d.sweeps[0])), "{page}");
    // Without the card (a single drive, or a card nobody rated), no card rating.
    f[0].results.card = None;
    assert!(build(&f[..1]).drives[0].rated.is_none());
}

#[test]
fn a_one_drive_report_ranks_nothing_and_compares_nothing() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/report");
    let r = build(&load_files(&[dir.join("drive-a.json")]).expect("fixture"));
    assert_eq!(r.drives.len(), 1);
    assert!(r.comparisons.is_empty(), "{:?}", r.comparisons);
    let page = html::render(&r).expect("html");
    assert!(!page.contains("first place"), "{page}");
    assert!(!page.contains("id=\"comparison\""), "{page}");
    let (md, _) = markdown::render(&r, "q").expect("markdown");
    assert!(!md.contains("## Comparison"), "{md}");
    assert!(!md.contains("first place"), "{md}");
    // Two drives still rank.
    assert!(!build(&fixtures()).comparisons.is_empty());
}

#[test]
fn build_compares_profiles_across_drives() {
    let r = build(&fixtures());
    assert_eq!(r.drives.len(), 2);
    assert_eq!(r.drives[0].label, "HUAWEI ES3600P V5 A1B2C3");
    let profiles: Vec<&str> = r.comparisons.iter().map(|c| c.profile.as_str()).collect();
    // 64k-seq-read: only drive A ran it, so it is not ranked ("first place" of one).
    assert_eq!(profiles, vec!["4k-random-read"]);
    let rr = &r.comparisons[0].ranking;
    assert_eq!(rr[0].drive, "Test Drive B B9Y8X7");
    assert_eq!(rr[0].peak_iops, 121_500.0);
    let a_seq = &r.drives[0].sweeps[1];
    assert!(a_seq.sequential && a_seq.complete);
    // 64k: peak 50 000 @ 1 300 µs (uncontrolled); frontier 25 000 @ 300 µs (the 100 % point
    // is at 1 100 µs).
    assert_eq!(a_seq.peak.as_ref().map(|p| p.iops), Some(50_000.0));
    assert_eq!(a_seq.sub_ms.as_ref().map(|p| p.iops), Some(25_000.0));
    assert!(a_seq.crossed_1ms);
    assert!(!r.drives[1].sweeps[0].crossed_1ms);
}

#[test]
fn rated_figures_feed_the_share() {
    let rated = |d: &DeviceIdentity| {
        (d.serial == "A1B2C3").then(|| RatedFigures {
            source: "test table".into(),
            random_read_iops: Some(825_000.0),
            seq_read_bytes_per_sec: Some(3.5e9),
            ..Default::default()
        })
    };
    let r = build_with(&fixtures(), &rated);
    let share = |i: usize, j: usize| {
        r.drives[i].sweeps[j]
            .rated_share
            .as_ref()
            .map(|s| (s.ratio * 1e4).round() / 1e4)
    };
    assert_eq!(share(0, 0), Some(0.1212));
    assert_eq!(share(0, 1), Some(0.9362));
    assert_eq!(share(1, 0), None);
}

#[test]
fn ratings_table_gives_drive_a_its_rated_figures() {
    let r = build(&fixtures());
    let a = &r.drives[0];
    let rated = a
        .rated
        .as_ref()
        .expect("ES3600P V5 is in the ratings table");
    // Seed 000: ES3600P V5 3.2 TB: 3500 MB/s read, 825K random read IOPS, 17.52 PBW.
    assert_eq!(rated.random_read_iops, Some(825_000.0));
    assert_eq!(rated.seq_read_bytes_per_sec, Some(3.5e9));
    assert_eq!(rated.tbw_bytes, Some(17.52e15));
    assert!(rated.source.contains("ES3600P V5"), "{}", rated.source);
    let share = |j: usize| a.sweeps[j].rated_share.as_ref().map(|s| s.ratio);
    // 100 000 / 825 000 and 3 276 800 000 / 3 500 000 000.
    assert!((share(0).unwrap_or(0.0) - 100_000.0 / 825_000.0).abs() < 1e-12);
    assert!((share(1).unwrap_or(0.0) - 3_276_800_000.0 / 3.5e9).abs() < 1e-12);
    // "Test Drive B" is not in the table.
    assert!(r.drives[1].rated.is_none());
}

#[test]
fn labels_stay_unique_across_hosts() {
    let mut f = fixtures();
    let mut c = f[0].clone();
    c.results.host = "rack9".into();
    f.push(c.clone());
    f.push(c);
    let labels = unique_labels(&f);
    assert_eq!(labels[0], "HUAWEI ES3600P V5 A1B2C3 @rack1");
    assert_eq!(labels[2], "HUAWEI ES3600P V5 A1B2C3 @rack9");
    assert_eq!(labels[3], "HUAWEI ES3600P V5 A1B2C3 @rack9 #2");
}

#[test]
fn a_sweep_in_progress_renders_without_figures() {
    use crate::model::results::{SweepPoint, SweepResult};
    let mut f = fixtures();
    f.truncate(1);
    // A second drive whose sweep has started but measured nothing yet, and one whose only
    // point is the uncontrolled run.
    let mut empty = f[0].clone();
    empty.results.device = None;
    empty.results.target = "fresh".into();
    empty.results.sweeps = vec![SweepResult {
        profile: "4k-random-read".into(),
        block_size: 4096.0,
        read_pct: 100,
        started: 1.0,
        ..Default::default()
    }];
    let mut one = empty.clone();
    one.results.target = "one-point".into();
    one.results.sweeps[0].points.push(SweepPoint {
        pct: 0,
        iops: 5000.0,
        bytes_per_sec: 5000.0 * 4096.0,
        lat_avg_us: 400.0,
        lat_p99_us: 900.0,
        duration_secs: 1.0,
        ..Default::default()
    });
    f.push(empty);
    f.push(one);
    let r = build(&f);
    let fresh = &r.drives[1].sweeps[0];
    assert!(!fresh.complete && fresh.curve.is_empty() && fresh.peak.is_none());
    assert!(fresh.sub_ms.is_none());
    // The comparison ranks only drives with a peak.
    assert_eq!(r.comparisons[0].ranking.len(), 2);
    assert_eq!(r.comparisons[0].ranking[1].drive, "one-point");
    let page = html::render(&r).expect("html");
    assert!(page.contains("4k-random-read (incomplete)"));
    assert!(page.contains("Peak -; no point measured yet."), "{page}");
    assert!(page.contains(
        "Peak 5,000 IOPS at 400 µs (uncontrolled); below 1 ms average at every measured load, \
             the highest rate 5,000 IOPS at 400 µs (the uncontrolled run)."
    ));
    // 1 comparison chart (4k; 64k has one drive) + drive A 2x2 + fresh 2 + one-point 2.
    assert_eq!(page.matches("<svg class=\"chart\"").count(), 9);
    assert!(page.contains("data-series-count=\"0\""));
}

#[test]
fn the_sweep_sentence_names_a_crossing_below_the_best_sub_1ms_point() {
    use crate::model::results::{SweepPoint, SweepResult};
    let mut f = fixtures();
    let point = |pct: u32, iops: f64, avg: f64| SweepPoint {
        pct,
        target_iops: iops,
        iops,
        bytes_per_sec: iops * 4096.0,
        lat_avg_us: avg,
        lat_p99_us: avg * 2.0,
        duration_secs: 10.0,
        ..Default::default()
    };
    // The 30 % load crossed 1 ms at 80k IOPS; the uncontrolled run did 266k at 431 µs.
    f[0].results.sweeps = vec![SweepResult {
        profile: "4k-random-read".into(),
        block_size: 4096.0,
        read_pct: 100,
        max_iops: 266_078.0,
        started: 1.0,
        finished: Some(2.0),
        points: vec![
            point(10, 26_000.0, 120.0),
            point(30, 80_000.0, 1230.0),
            point(50, 133_000.0, 300.0),
            point(0, 266_078.0, 431.0),
        ],
    }];
    let r = build(&f[..1]);
    let s = &r.drives[0].sweeps[0];
    assert_eq!(s.sub_ms.as_ref().map(|p| p.iops), Some(266_078.0));
    let first = s.first_over_1ms.as_ref().expect("a point crossed 1 ms");
    assert_eq!((first.pct, first.iops), (30, 80_000.0));
    let text = html::frontier_text(s);
    assert_eq!(
        text,
        "highest rate below 1 ms average: 266,078 IOPS at 431 µs (the uncontrolled run); \
         first point over 1 ms: 80,000 IOPS at 1.23 ms (the 30 % load), a lower rate than the \
         highest below 1 ms"
    );
    assert!(!text.contains("above it"), "{text}");
    let json = render_json(&r).expect("json");
    let v: serde_json::Value = serde_json::from_str(&json).expect("json parses");
    assert_eq!(
        v["drives"][0]["sweeps"][0]["first_over_1ms"]["iops"],
        80_000.0
    );
    // Every point below 1 ms: no crossing.
    f[0].results.sweeps[0].points.remove(1);
    let r = build(&f[..1]);
    assert!(r.drives[0].sweeps[0].first_over_1ms.is_none());
    assert!(html::frontier_text(&r.drives[0].sweeps[0]).starts_with("below 1 ms average at every"));
}

/// The daemon's `/report` reads the running target's in-memory figures, as the status page
/// does: the same soak points (the closed ones and the one being built), the running soak
/// phase's time so far marked running (not "stopped before its end"), the whole plan's row
/// from the live plan totals.
#[test]
fn the_live_report_reads_the_running_targets_figures() {
    use crate::model::soakhist::{SoakHistory, SoakPoint};
    let mut f = fixtures();
    let name = f[1].results.target.clone();
    let soak = f[1].results.soak.get_or_insert_with(Default::default);
    soak.history = Some(SoakHistory::default());
    soak.phases = vec![crate::model::results::SoakPhase {
        phase: 1,
        profile: "rr".into(),
        started: 1_700_000_000.0,
        elapsed_secs: 107.0,
        stopped: true,
        ..Default::default()
    }];
    let mut h = SoakHistory::default();
    let point = |i: u32| SoakPoint {
        t: 1_700_000_000.0 + f64::from(i) * 60.0,
        secs: 60.0,
        read_ops: 60_000,
        lat_avg_us: 100.0,
        lat_p99_us: 300.0,
        ..Default::default()
    };
    for i in 0..3 {
        h.push(point(i));
    }
    let live = crate::workload::scheduler::TargetSnapshot {
        name,
        phase: "soak".into(),
        phase_index: 0,
        running: true,
        up: true,
        phase_elapsed_base: 227.0,
        phase_paused: true,
        soak_started: Some(1_700_000_000.0),
        soak_history: Some(std::sync::Arc::new(h)),
        soak_partial: Some(SoakPoint {
            secs: 20.0,
            ..point(3)
        }),
        ..Default::default()
    };
    let status = crate::report::soakchart::status_html(&live);
    overlay_live(&mut f, std::slice::from_ref(&live));
    let page = html::render(&build(&f)).expect("html");
    // The same soak chart points as the status page: 3 closed, 1 being built.
    let circles = |h: &str| {
        let at = h.find("soak-chart").expect("a soak chart");
        h[at..].matches("class=\"point\"").count()
    };
    assert_eq!(circles(&page), circles(&status));
    assert_eq!(circles(&page), 4 * 3, "read IOPS, average and p99 latency");
    assert!(page.contains("phase 1, rr: 00:03:47"), "{page}");
    assert!(page.contains("(running)"), "{page}");
    assert!(!page.contains("stopped before its end"), "{page}");
    assert!(page.contains("<th>Soak duration</th>"), "{page}");
    assert!(page.contains("<th>Whole plan, every phase</th>"), "{page}");
    // A snapshot of a target with no file, or before its soak, changes nothing.
    let mut g = fixtures();
    let before = html::render(&build(&g)).expect("html");
    let other = crate::workload::scheduler::TargetSnapshot {
        name: "not-a-target".into(),
        ..live.clone()
    };
    overlay_live(&mut g, &[other]);
    assert_eq!(html::render(&build(&g)).expect("html"), before);
}

#[test]
fn report_page_explains_a_missing_report() {
    let dir = tempfile::tempdir().expect("tempdir");
    let page = report_page_html(dir.path());
    assert!(page.contains("No report yet: no results in"), "{page}");
    assert!(!page.contains("<svg"));
    let results = dir.path().join("results");
    std::fs::create_dir_all(&results).expect("mkdir");
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/report/drive-b.json");
    std::fs::copy(fixture, results.join("nvme-b.json")).expect("copy");
    let page = report_page_html(dir.path());
    // One drive, one profile: avg + p99 charts (one drive has no comparison, issue 14).
    assert_eq!(page.matches("<svg class=\"chart\"").count(), 2);
}

fn with_drive(mut l: Loaded, d: crate::model::results::DriveSoak) -> Loaded {
    l.results
        .soak
        .get_or_insert_with(Default::default)
        .set_drive(d);
    l
}

#[test]
fn drive_figures_are_shown_and_called_out() {
    use crate::model::results::DriveSoak;
    let f = fixtures();
    let bad = DriveSoak {
        device: "nvme0".into(),
        start_time: 1000.0,
        latest_time: 1000.0 + 86_400.0,
        data_written_bytes: Some(3_300_000_000_000),
        nvsoak_written_bytes: Some(3_200_000_000_000),
        accounting_ratio: Some(1.03125),
        accounting_agrees: Some(false),
        media_errors: Some(4),
        error_log_entries: Some(9),
        throttle_episodes: Some(2),
        tmt1_transitions: Some(3),
        tmt1_secs: Some(600),
        tmt2_transitions: Some(0),
        tmt2_secs: Some(0),
        percentage_used_start: 1,
        percentage_used_latest: 2,
        ..Default::default()
    };
    let good = DriveSoak {
        device: "nvme1".into(),
        data_written_bytes: Some(5_120_000),
        nvsoak_written_bytes: Some(5_120_000 - 4096),
        accounting_ratio: Some(5_120_000.0 / 5_115_904.0),
        accounting_agrees: Some(true),
        media_errors: Some(0),
        throttle_episodes: Some(0),
        tmt1_transitions: Some(0),
        tmt1_secs: Some(0),
        ..Default::default()
    };
    let inputs = vec![
        with_drive(f[0].clone(), good),
        with_drive(f[1].clone(), bad),
    ];
    let r = build(&inputs);
    let a = r.drives[0].soak.as_ref().expect("soak a");
    assert_eq!(
        (a.media_errors_rose, a.accounting_off, a.throttled),
        (Some(false), Some(false), Some(false))
    );
    assert!(a.callouts.is_empty(), "{:?}", a.callouts);
    let b = r.drives[1].soak.as_ref().expect("soak b");
    assert_eq!(
        (b.media_errors_rose, b.accounting_off, b.throttled),
        (Some(true), Some(true), Some(true))
    );
    assert_eq!(b.callouts.len(), 3, "{:?}", b.callouts);
    assert!(b.callouts[0].starts_with("Media errors rose during the soak: +4"));
    assert!(
        b.callouts[1].contains("the drive counted 3.00 TiB written while nvsoak wrote 2.91 TiB")
    );
    assert!(b.callouts[2].starts_with("The drive throttled: 2 episodes"));
    assert_eq!(b.accounting_ratio, Some(1.03125), "the same-period ratio");

    let page = html::render(&r).expect("html");
    assert_eq!(page.matches("<h3>Drive during the soak</h3>").count(), 2);
    assert!(
        page.contains("<p class=\"ok\">No media errors, accounting agrees, no throttling.</p>")
    );
    assert!(page.contains("<p class=\"bad callout\">Media errors rose during the soak: +4"));
    assert!(page.contains("<h3 id=\"cmp-soak\">Drives during the soak</h3>"));
    assert!(
        page.contains("<td class=\"bad\">media errors rose, accounting disagrees, throttled</td>")
    );
    assert!(
        page.contains("<td class=\"bad\">+4</td>"),
        "media errors row is flagged"
    );

    let (md, _) = markdown::render(&r, "r").expect("md");
    assert_eq!(md.matches("### Drive during the soak").count(), 2);
    assert!(md.contains("**Accounting disagrees: the drive counted 3.00 TiB"));
    assert!(
        md.contains("| Accounting ratio (drive / nvsoak) | **1.0312: disagrees** |"),
        "{md}"
    );
    assert!(
        md.contains("| Accounting ratio (drive / nvsoak) | 1.0008: agrees within rounding |"),
        "{md}"
    );
    assert!(md.contains("| Throttle episodes seen by nvsoak | **2** |"));
    assert!(md.contains("### Drives during the soak"));
    assert!(
        md.contains("| **media errors rose, accounting disagrees, throttled** |"),
        "{md}"
    );
    assert!(md.contains(" ok |\n"), "the good drive's verdict");

    let json: serde_json::Value =
        serde_json::from_str(&render_json(&r).expect("json")).expect("parse");
    let jb = &json["drives"][1]["soak"];
    assert_eq!(jb["drive"]["media_errors"], 4);
    assert_eq!(jb["accounting_off"], true);
    assert_eq!(jb["callouts"].as_array().map(|a| a.len()), Some(3));
}

#[test]
fn a_soak_without_drive_figures_says_why() {
    let r = build(&fixtures()[1..]);
    let page = html::render(&r).expect("html");
    assert!(page.contains("No drive-side figures: not an NVMe namespace"));
    assert!(!page.contains("cmp-soak"), "one drive: no soak comparison");
}

#[test]
fn an_explicit_ratings_table_wins_over_the_summary() {
    let table = crate::nvme::ratings::RatingsTable::parse(
        r#"
[[drive]]
vendor = "Acme"
series = "Test B"
match = ["Test Drive B"]
dwpd = 7.0
warranty_years = 5.0
[[drive.capacity]]
capacity_bytes = 3_200_000_000_000
random_read_iops = 243_000
"#,
        "test table",
    )
    .expect("table");
    let r = build_with_table(&fixtures(), &table);
    let b = &r.drives[1];
    let rated = b.rated.as_ref().expect("rated from the operator's table");
    assert!(rated.source.contains("Acme Test B"), "{}", rated.source);
    assert_eq!(b.soak.as_ref().and_then(|s| s.rated_dwpd), Some(7.0));
    // 121 500 of 243 000 rated random read IOPS.
    assert_eq!(b.sweeps[0].rated_share.as_ref().map(|s| s.ratio), Some(0.5));
    // Drive A is not in this table, so it has no rated figures now.
    assert!(r.drives[0].rated.is_none());
    // Without the table, drive B's summary DWPD (3) stands.
    assert_eq!(
        build(&fixtures()).drives[1]
            .soak
            .as_ref()
            .and_then(|s| s.rated_dwpd),
        Some(3.0)
    );
}

#[test]
fn load_errors_name_the_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let e = load_state_dir(dir.path()).expect_err("empty dir");
    assert!(e.to_string().contains("no results in"), "{e}");
    std::fs::create_dir_all(dir.path().join("results")).expect("mkdir");
    let bad = dir.path().join("results/x.json");
    std::fs::write(&bad, "{not json").expect("write");
    let e = load_state_dir(dir.path()).expect_err("bad json");
    assert!(
        e.to_string().contains("x.json is not a results file"),
        "{e}"
    );
}

#[test]
fn archived_runs_are_read_on_request_and_labelled() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rdir = dir.path().join("results");
    std::fs::create_dir_all(&rdir).expect("mkdir");
    let fix = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/report/drive-a.json");
    let text = std::fs::read(&fix).expect("fixture");
    let cur = rdir.join("t0.json");
    std::fs::write(&cur, &text).expect("write");
    std::fs::write(rdir.join("t0.json.stale-1764573300"), &text).expect("write");
    // Moved aside because it did not parse: skipped, with the reason.
    std::fs::write(rdir.join("t0.json.corrupt-1764573000"), "{not json").expect("write");
    assert_eq!(load_state_dir(dir.path()).expect("current").len(), 1);
    let (all, skipped) = load_state_dir_with(dir.path(), true).expect("archived");
    assert_eq!(all.len(), 2);
    assert_eq!(skipped.len(), 1);
    assert!(skipped[0].contains("corrupt-1764573000"), "{skipped:?}");
    assert!(all[0].archived.is_none(), "the current run first");
    let a = all[1].archived.as_ref().expect("archived");
    assert_eq!((a.reason.as_str(), a.moved_at), ("stale", 1_764_573_300.0));
    let r = build(&all);
    assert_eq!(r.drives[0].label, "HUAWEI ES3600P V5 A1B2C3");
    assert_eq!(
        r.drives[1].label,
        "HUAWEI ES3600P V5 A1B2C3 (archived 2025-12-01 07:15:00 UTC)"
    );
    let html = html::render(&r).expect("html");
    assert!(
        html.contains("archived, moved aside 2025-12-01 07:15:00 UTC: the plan changed"),
        "the HTML says which run is archived"
    );
    let json = render_json(&r).expect("json");
    assert!(json.contains("\"reason\": \"stale\""), "{json}");
    let md_path = dir.path().join("report.md");
    markdown::write(&r, &md_path).expect("markdown");
    let md = std::fs::read_to_string(&md_path).expect("read markdown");
    assert!(
        md.contains(
            "| Archived run | archived, moved aside 2025-12-01 07:15:00 UTC: the plan changed |"
        ),
        "{md}"
    );
    // Only archived files left (after state reset): still a report.
    std::fs::remove_file(&cur).expect("rm");
    let (only, _) = load_state_dir_with(dir.path(), true).expect("archived only");
    assert_eq!(only.len(), 1);
    assert!(load_state_dir(dir.path()).is_err());
}
