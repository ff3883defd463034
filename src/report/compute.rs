//! The pure computations behind the report: the load curve of a sweep, its peak, the sub-1 ms
//! frontier, the share of the rated figures, the soak figures and the cross-drive ranking.
//!
//! Choices, stated once:
//! - **Curve order.** Points are ordered by offered load: the paced points by ascending percent
//!   of the measured maximum, then the uncontrolled run (`pct` 0 in the results file), which is
//!   the vdbench "max" run and so the rightmost point of a review's curve.
//! - **Peak.** The point with the highest measured IOPS, whichever it is (a paced 100% point can
//!   beat the uncontrolled run); ties go to the lower average latency.
//! - **Sub-1 ms frontier.** The highest-IOPS *measured* point whose *average* latency is below
//!   1 ms. Average, because that is what the reviews' vdbench curves plot and what "latency
//!   stayed below 1 ms up to about X IOPS" refers to; the p99 frontier is reported next to it.
//!   No interpolation between points: an interpolated figure would claim a load that was never
//!   run, and the curves are not monotonic near saturation.

use serde::{Deserialize, Serialize};

use super::drive_common::{opt_bytes, opt_count};
use crate::model::curve::{CurvePoint, RatedFigures};
use crate::model::fmt::{fmt_bytes, fmt_count, fmt_cpu_ns, fmt_elapsed, fmt_latency_us};
use crate::model::results::{DriveSoak, SoakSummary};

/// The soak figures the report shows, derived from the results file's summary.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SoakFigures {
    pub elapsed_secs: f64,
    pub read_bytes: u64,
    pub written_bytes: u64,
    pub errors: u64,
    pub verify_errors: u64,
    /// From the summary, else host bytes written per day over the drive's capacity.
    pub observed_dwpd: Option<f64>,
    /// From the summary, else from the rated figures.
    pub rated_dwpd: Option<f64>,
    /// `observed_dwpd / rated_dwpd`.
    pub dwpd_ratio: Option<f64>,
    pub endurance_consumed_ratio: Option<f64>,
    pub throttled_secs: Option<f64>,
    pub throttled_ratio: Option<f64>,
    pub iops_throttled: Option<f64>,
    pub iops_unthrottled: Option<f64>,
    /// `1 - throttled / unthrottled`: the share of IOPS lost while throttling.
    pub throttle_iops_cost_ratio: Option<f64>,
    /// Drive-side bytes written (SMART delta) over the same period.
    pub smart_written_bytes_delta: Option<u64>,
    /// Accounting check: drive bytes written over host bytes written (1.0 = they agree); over
    /// the same period when the drive figures have it.
    pub accounting_ratio: Option<f64>,
    /// The drive's own counters over the whole plan (from the first health poll, before the
    /// first write), when the results file has them.
    #[serde(default)]
    pub drive: Option<DriveSoak>,
    /// `None` (JSON `null`) when there is no drive data to tell: unknown, not "no".
    #[serde(default)]
    pub media_errors_rose: Option<bool>,
    /// The drive and nvsoak disagree on bytes written beyond the data units' rounding; `None`
    /// without drive data.
    #[serde(default)]
    pub accounting_off: Option<bool>,
    /// Worker CPU seconds over the soak phases, `(user, system)`; `None` in older files.
    #[serde(default)]
    pub cpu_secs: Option<(f64, f64)>,
    /// Worker CPU nanoseconds per soak I/O, `(user, system)`.
    #[serde(default)]
    pub cpu_per_io_ns: Option<(f64, f64)>,
    /// `None` without drive data.
    #[serde(default)]
    pub throttled: Option<bool>,
    /// What an operator must not miss about the drive, one plain sentence each.
    #[serde(default)]
    pub callouts: Vec<String>,
    /// The soak phases themselves (the figures above run from the soak's start to the end of
    /// the plan); empty for results files written before they were recorded.
    #[serde(default)]
    pub phases: Vec<crate::model::results::SoakPhase>,
    /// The soak over time (IOPS, latency, events), when the results file has it (version 3).
    #[serde(default)]
    pub history: Option<crate::model::soakhist::SoakHistory>,
    /// The whole plan's totals, every phase (`soak.plan`: precondition, sweeps and soaks,
    /// over all runs); `None` in older files, which then show no whole-plan row.
    #[serde(default)]
    pub plan: Option<crate::model::results::PlanTotals>,
}

/// The whole plan's row: "00:12:00, wrote 3.00 GB, read 1.00 GB"; `None` without `soak.plan`.
pub fn plan_text(s: &SoakFigures) -> Option<String> {
    s.plan.as_ref().map(|p| {
        format!(
            "{}, wrote {}, read {}",
            fmt_elapsed(p.elapsed_secs),
            fmt_bytes(p.written_bytes as f64),
            fmt_bytes(p.read_bytes as f64)
        )
    })
}

/// One line of the cross-drive soak comparison.
#[derive(Debug, Clone, PartialEq)]
pub struct DriveComparisonRow {
    pub drive: String,
    pub cells: Vec<String>,
    /// Short flags ("media errors rose", ...); empty when nothing went wrong.
    pub verdict: Vec<&'static str>,
    /// Whether the drive side was read at all (an NVMe drive with a successful SMART poll).
    pub drive_data: bool,
}

impl DriveComparisonRow {
    /// The verdict cell: (whether it is bad, text). Nothing flagged gives "ok" only when there
    /// was drive data to judge; without it the verdict is "no drive data", never "ok".
    pub fn verdict_text(&self) -> (bool, String) {
        if !self.verdict.is_empty() {
            (true, self.verdict.join(", "))
        } else if self.drive_data {
            (false, "ok".into())
        } else {
            (false, "no drive data".into())
        }
    }
}

/// Column headers of [`drive_comparison`].
pub const DRIVE_COMPARISON_HEADERS: [&str; 10] = [
    "Soak",
    "Written by nvsoak (soak)",
    "Drive written (whole plan)",
    "Accounting ratio",
    "Media errors",
    "Error log entries",
    "Throttle episodes",
    "T1 / T2 time",
    "Percentage used",
    "Observed DWPD",
];

/// The soak figures of every drive side by side (drives without a soak are left out). The
/// first columns are the soak phases' own (time, bytes written); the drive's counters cover the
/// whole plan from the first health poll (precondition and sweeps included), as does the
/// accounting ratio, which compares them with nvsoak's writes over that same period
/// (`soak.plan`, not the soak's own).
pub fn drive_comparison<'a>(
    drives: impl Iterator<Item = (&'a str, &'a SoakFigures)>,
) -> Vec<DriveComparisonRow> {
    drives
        .map(|(label, s)| {
            let d = s.drive.as_ref();
            let dash = || "-".to_string();
            let mut verdict = Vec::new();
            if s.media_errors_rose == Some(true) {
                verdict.push("media errors rose");
            }
            if s.accounting_off == Some(true) {
                verdict.push("accounting disagrees");
            }
            if s.throttled == Some(true) {
                verdict.push("throttled");
            }
            if s.errors > 0 {
                verdict.push("I/O errors");
            }
            if s.verify_errors > 0 {
                verdict.push("verify errors");
            }
            let cells = vec![
                fmt_elapsed(s.elapsed_secs),
                fmt_bytes(s.written_bytes as f64),
                d.map(|d| opt_bytes(d.data_written_bytes))
                    .unwrap_or_else(dash),
                s.accounting_ratio
                    .map(|r| format!("{r:.4}"))
                    .unwrap_or_else(dash),
                d.map(|d| opt_count(d.media_errors).to_string())
                    .unwrap_or_else(dash),
                d.map(|d| opt_count(d.error_log_entries))
                    .unwrap_or_else(dash),
                d.map(|d| opt_count(d.throttle_episodes))
                    .unwrap_or_else(dash),
                d.map(|d| {
                    format!(
                        "{} / {}",
                        fmt_elapsed(d.tmt1_secs.unwrap_or(0) as f64),
                        fmt_elapsed(d.tmt2_secs.unwrap_or(0) as f64)
                    )
                })
                .unwrap_or_else(dash),
                d.map(|d| match &d.ata {
                    // A SATA drive without Device Statistics reports no percentage used.
                    Some(a) if a.percentage_used_latest.is_none() => dash(),
                    _ => format!(
                        "{} → {} %",
                        d.percentage_used_start, d.percentage_used_latest
                    ),
                })
                .unwrap_or_else(dash),
                s.observed_dwpd
                    .map(|v| format!("{v:.2}"))
                    .unwrap_or_else(dash),
            ];
            DriveComparisonRow {
                drive: label.to_string(),
                cells,
                verdict,
                drive_data: d.is_some(),
            }
        })
        .collect()
}

pub fn soak_figures(
    s: &SoakSummary,
    capacity_bytes: Option<u64>,
    rated: Option<&RatedFigures>,
) -> SoakFigures {
    soak_figures_with(s, capacity_bytes, rated, false)
}

/// [`soak_figures`]; with `prefer_rated` (an operator-supplied ratings table) the rated DWPD
/// comes from `rated` before the one the daemon recorded in the summary.
pub fn soak_figures_with(
    s: &SoakSummary,
    capacity_bytes: Option<u64>,
    rated: Option<&RatedFigures>,
    prefer_rated: bool,
) -> SoakFigures {
    let days = s.elapsed_secs / 86400.0;
    let observed_dwpd = s
        .observed_dwpd
        .or_else(|| match capacity_bytes {
            Some(c) if c > 0 && days > 0.0 => Some(s.written_bytes as f64 / c as f64 / days),
            _ => None,
        })
        .filter(|v| v.is_finite());
    let table_dwpd = rated.and_then(|r| r.dwpd);
    let rated_dwpd = if prefer_rated {
        table_dwpd.or(s.rated_dwpd)
    } else {
        s.rated_dwpd.or(table_dwpd)
    };
    let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b).filter(|v| v.is_finite()),
        _ => None,
    };
    let throttle_iops_cost_ratio = match (s.iops_throttled, s.iops_unthrottled) {
        (Some(t), Some(u)) if u > 0.0 => Some(1.0 - t / u).filter(|v| v.is_finite()),
        _ => None,
    };
    // The drive figures pair the two sides over the same period; without them (older
    // files), the delta against the soak's total.
    let accounting_ratio = match (&s.drive, s.smart_written_bytes_delta) {
        (Some(d), _) => d.accounting_ratio,
        (None, Some(d)) if s.written_bytes > 0 => Some(d as f64 / s.written_bytes as f64),
        _ => None,
    };
    let mut drive = s.drive.clone();
    if let (Some(d), true) = (drive.as_mut(), prefer_rated && table_dwpd.is_some()) {
        d.rated_dwpd = table_dwpd;
    }
    SoakFigures {
        elapsed_secs: s.elapsed_secs,
        read_bytes: s.read_bytes,
        written_bytes: s.written_bytes,
        errors: s.errors,
        verify_errors: s.verify_errors,
        observed_dwpd,
        rated_dwpd,
        dwpd_ratio: ratio(observed_dwpd, rated_dwpd),
        endurance_consumed_ratio: s.endurance_consumed_ratio,
        throttled_secs: s.throttled_secs,
        throttled_ratio: ratio(s.throttled_secs, Some(s.elapsed_secs)),
        iops_throttled: s.iops_throttled,
        iops_unthrottled: s.iops_unthrottled,
        throttle_iops_cost_ratio,
        smart_written_bytes_delta: s.smart_written_bytes_delta,
        accounting_ratio,
        media_errors_rose: drive.as_ref().map(|d| d.media_errors_rose()),
        accounting_off: drive.as_ref().map(|d| d.accounting_off()),
        throttled: drive.as_ref().map(|d| d.throttled()),
        callouts: drive
            .as_ref()
            .map(super::drive::callouts)
            .unwrap_or_default(),
        drive,
        phases: s.phases.clone(),
        history: s.history.clone(),
        plan: s.plan.clone(),
        cpu_secs: s.cpu_user_secs.zip(s.cpu_system_secs),
        cpu_per_io_ns: s.cpu_per_io_ns(),
    }
}

/// The soak's worker CPU in words: "12.3 s (user 2.1 s, system 10.2 s); 1.20 µs per I/O, of
/// which nvsoak's own code 180 ns (15 %)"; `None` without CPU figures.
pub fn cpu_text(s: &SoakFigures) -> Option<String> {
    let (u, k) = s.cpu_secs?;
    let mut out = format!("{:.1} s (user {u:.1} s, system {k:.1} s)", u + k);
    if let Some((pu, pk)) = s.cpu_per_io_ns {
        let total = pu + pk;
        out.push_str(&format!(
            "; {} per I/O, of which nvsoak's own code {}",
            fmt_cpu_ns(total),
            fmt_cpu_ns(pu)
        ));
        if total > 0.0 {
            out.push_str(&format!(" ({:.0} %)", 100.0 * pu / total));
        }
    }
    Some(out)
}

/// One line per soak phase: "phase 2, 4k-random-write: 00:01:00, wrote 1.07 GB, read 0 B,
/// 262,144 ops, 0 I/O errors", with " (stopped before its end)" for a phase that was stopped
/// (an endless soak at shutdown, or one the daemon has not resumed since).
pub fn soak_phase_lines(s: &SoakFigures) -> Vec<String> {
    s.phases
        .iter()
        .map(|p| {
            format!(
                "phase {}, {}: {}, wrote {}, read {}, {} ops, {} I/O errors{}",
                p.phase,
                p.profile,
                fmt_elapsed(p.elapsed_secs),
                fmt_bytes(p.written_bytes as f64),
                fmt_bytes(p.read_bytes as f64),
                fmt_count((p.read_ops + p.write_ops) as f64),
                p.errors,
                if p.running {
                    " (running)"
                } else if p.stopped {
                    " (stopped before its end)"
                } else {
                    ""
                }
            )
        })
        .collect()
}

/// One drive's standing in a workload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RankEntry {
    /// 1-based.
    pub rank: usize,
    pub drive: String,
    pub peak_iops: f64,
    pub lat_avg_us_at_peak: f64,
    pub lat_p99_us_at_peak: f64,
    /// IOPS of the sub-1 ms frontier, when the drive has one.
    pub sub_ms_iops: Option<f64>,
    /// "first place with 121,500 IOPS at 880 µs".
    pub summary: String,
}

/// Rank drives by peak IOPS (descending), ties by lower average latency at the peak, then by
/// name so the order is deterministic. `entries`: (drive, peak, sub-1 ms frontier).
pub fn rank(entries: &[(String, CurvePoint, Option<CurvePoint>)]) -> Vec<RankEntry> {
    let mut v: Vec<&(String, CurvePoint, Option<CurvePoint>)> = entries.iter().collect();
    v.sort_by(|a, b| {
        b.1.iops
            .total_cmp(&a.1.iops)
            .then(a.1.lat_avg_us.total_cmp(&b.1.lat_avg_us))
            .then(a.0.cmp(&b.0))
    });
    v.iter()
        .enumerate()
        .map(|(i, (drive, pk, sub))| RankEntry {
            rank: i + 1,
            drive: drive.clone(),
            peak_iops: pk.iops,
            lat_avg_us_at_peak: pk.lat_avg_us,
            lat_p99_us_at_peak: pk.lat_p99_us,
            sub_ms_iops: sub.as_ref().map(|s| s.iops),
            summary: format!(
                "{} place with {} IOPS at {}",
                place_word(i + 1),
                fmt_count(pk.iops),
                fmt_latency_us(pk.lat_avg_us)
            ),
        })
        .collect()
}

/// "first", "second", ... as the reviews write it; "11th" and on past tenth.
pub fn place_word(n: usize) -> String {
    const WORDS: [&str; 10] = [
        "first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth",
        "tenth",
    ];
    match n {
        1..=10 => WORDS[n - 1].to_string(),
        _ => {
            let suffix = match (n % 10, n % 100) {
                (_, 11..=13) => "th",
                (1, _) => "st",
                (2, _) => "nd",
                (3, _) => "rd",
                _ => "th",
            };
            format!("{n}{suffix}")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::curve::*;
    use crate::model::fmt::*;
    use crate::model::results::SweepResult;
    use crate::model::results::TargetResults;

    fn fixture(name: &str) -> TargetResults {
        let text = match name {
            "a" => include_str!("../../tests/fixtures/report/drive-a.json"),
            _ => include_str!("../../tests/fixtures/report/drive-b.json"),
        };
        serde_json::from_str(text).expect("fixture parses")
    }

    fn sweep<'a>(r: &'a TargetResults, profile: &str) -> &'a SweepResult {
        r.sweeps
            .iter()
            .find(|s| s.profile == profile)
            .expect("fixture has the profile")
    }

    #[test]
    fn without_drive_data_the_drive_flags_are_unknown_not_false() {
        let s = SoakSummary {
            elapsed_secs: 60.0,
            written_bytes: 1 << 30,
            ..Default::default()
        };
        let f = soak_figures(&s, None, None);
        let v = serde_json::to_value(&f).expect("JSON");
        for k in ["media_errors_rose", "accounting_off", "throttled"] {
            assert!(v[k].is_null(), "{k}: {v}");
        }
        // Results written before still load: a stored `false` stays a known "no".
        let old: SoakFigures =
            serde_json::from_str(r#"{"elapsed_secs":1,"read_bytes":0,"written_bytes":0,"errors":0,"verify_errors":0,"observed_dwpd":null,"rated_dwpd":null,"dwpd_ratio":null,"endurance_consumed_ratio":null,"throttled_secs":null,"throttled_ratio":null,"iops_throttled":null,"iops_unthrottled":null,"throttle_iops_cost_ratio":null,"smart_written_bytes_delta":null,"accounting_ratio":null,"throttled":false}"#)
                .expect("old figures load");
        assert_eq!(old.throttled, Some(false));
        assert_eq!(old.media_errors_rose, None);
    }

    #[test]
    fn a_drive_without_drive_data_is_not_judged_ok() {
        let none = SoakFigures::default();
        let with = SoakFigures {
            drive: Some(DriveSoak::default()),
            ..Default::default()
        };
        let bad = SoakFigures {
            errors: 3,
            ..Default::default()
        };
        let rows = drive_comparison([("file", &none), ("nvme", &with), ("eio", &bad)].into_iter());
        let v: Vec<(bool, String)> = rows.iter().map(|r| r.verdict_text()).collect();
        assert_eq!(
            v,
            vec![
                (false, "no drive data".to_string()),
                (false, "ok".to_string()),
                (true, "I/O errors".to_string()),
            ]
        );
    }

    #[test]
    fn one_round_is_singular() {
        assert_eq!(count_of(1, "round"), "1 round");
        assert_eq!(count_of(0, "round"), "0 rounds");
        assert_eq!(count_of(7, "round"), "7 rounds");
        // No "entrys": the gates' figures read as English.
        assert_eq!(
            count_of(2, "new error-log entry"),
            "2 new error-log entries"
        );
        assert_eq!(count_of(0, "pass"), "0 passes");
        assert_eq!(count_of(3, "day"), "3 days");
        assert_eq!(count_of(1, "entry"), "1 entry");
    }

    #[test]
    fn points_more_than_ten_percent_below_their_target_are_short() {
        let p = |pct: u32, target: f64, iops: f64| CurvePoint {
            pct,
            uncontrolled: pct == 0,
            target_iops: target,
            iops,
            bytes_per_sec: iops * 4096.0,
            lat_avg_us: 100.0,
            lat_p99_us: 200.0,
            errors: 0,
        };
        let s = shortfall(&p(80, 7113.0, 3089.0)).expect("57 % short");
        assert!((s - (1.0 - 3089.0 / 7113.0)).abs() < 1e-9, "{s}");
        assert_eq!(
            shortfall(&p(80, 1000.0, 910.0)),
            None,
            "9 % short is within tolerance"
        );
        assert!(shortfall(&p(80, 1000.0, 880.0)).is_some(), "12 % short");
        assert_eq!(shortfall(&p(0, 0.0, 5000.0)), None, "uncontrolled run");
        assert_eq!(shortfall(&p(50, 0.0, 5000.0)), None, "no target");
    }

    #[test]
    fn curve_orders_by_load_with_the_uncontrolled_run_last() {
        let a = fixture("a");
        let c = curve(sweep(&a, "4k-random-read"));
        // The file lists the uncontrolled run first (as the scheduler writes it), then 10, 50,
        // 80, 90, 100, and one 60% point that completed no I/O (dropped).
        let order: Vec<u32> = c.iter().map(|p| p.pct).collect();
        assert_eq!(order, vec![10, 50, 80, 90, 100, 0]);
        assert!(c.last().is_some_and(|p| p.uncontrolled));
    }

    #[test]
    fn peak_of_drive_a_is_the_uncontrolled_run() {
        let a = fixture("a");
        let c = curve(sweep(&a, "4k-random-read"));
        // IOPS: 9 998, 49 990, 79 950, 89 900, 98 500 (100 %), 100 000 (uncontrolled).
        // The largest is the uncontrolled run: 100 000 IOPS at 1 280 µs average, 2 600 µs p99.
        let p = peak(&c).expect("peak");
        assert!(p.uncontrolled);
        assert_eq!(p.iops, 100_000.0);
        assert_eq!(p.lat_avg_us, 1280.0);
        assert_eq!(p.lat_p99_us, 2600.0);
    }

    #[test]
    fn peak_of_drive_b_is_the_paced_100_percent_point() {
        let b = fixture("b");
        let c = curve(sweep(&b, "4k-random-read"));
        // IOPS: 11 999, 59 990, 95 900, 107 800, 121 500 (100 %), 120 000 (uncontrolled):
        // the paced 100 % point beats the uncontrolled run, 121 500 IOPS at 880 µs.
        let p = peak(&c).expect("peak");
        assert_eq!(p.pct, 100);
        assert_eq!(p.iops, 121_500.0);
        assert_eq!(p.lat_avg_us, 880.0);
    }

    #[test]
    fn sub_ms_frontier_is_the_highest_measured_point_below_1ms() {
        let a = fixture("a");
        let c = curve(sweep(&a, "4k-random-read"));
        // Average latencies 95, 210, 640, 1 050, 1 240, 1 280 µs: below 1 000 µs are the
        // 10/50/80 % points, the highest of which is 79 950 IOPS at 640 µs.
        let f = frontier(&c, LatencyBasis::Average, SUB_MS_LIMIT_US).expect("frontier");
        assert_eq!((f.pct, f.iops, f.lat_avg_us), (80, 79_950.0, 640.0));
        // p99: 180, 450, 1 450, ... µs: only 10 % and 50 % are below, so 49 990 IOPS.
        let f = frontier(&c, LatencyBasis::P99, SUB_MS_LIMIT_US).expect("p99 frontier");
        assert_eq!((f.pct, f.iops), (50, 49_990.0));

        let b = fixture("b");
        let c = curve(sweep(&b, "4k-random-read"));
        // Drive B never reaches 1 ms (highest average 900 µs): the frontier is its peak.
        let f = frontier(&c, LatencyBasis::Average, SUB_MS_LIMIT_US).expect("frontier");
        assert_eq!(f.iops, 121_500.0);
        // p99 150, 300, 800, 1 100, 1 800, 1 900 µs: 95 900 IOPS (80 %).
        let f = frontier(&c, LatencyBasis::P99, SUB_MS_LIMIT_US).expect("p99 frontier");
        assert_eq!(f.iops, 95_900.0);
        // A limit below every point: no frontier.
        assert!(frontier(&c, LatencyBasis::Average, 50.0).is_none());
    }

    #[test]
    fn ranking_reads_like_the_reviews() {
        let a = fixture("a");
        let b = fixture("b");
        let entry = |name: &str, r: &TargetResults| {
            let c = curve(sweep(r, "4k-random-read"));
            let p = peak(&c).cloned().expect("peak");
            let f = frontier(&c, LatencyBasis::Average, SUB_MS_LIMIT_US).cloned();
            (name.to_string(), p, f)
        };
        let r = rank(&[entry("drive-a", &a), entry("drive-b", &b)]);
        assert_eq!(r.len(), 2);
        // 121 500 > 100 000: B first.
        assert_eq!((r[0].rank, r[0].drive.as_str()), (1, "drive-b"));
        assert_eq!(r[0].summary, "first place with 121,500 IOPS at 880 µs");
        assert_eq!(r[1].summary, "second place with 100,000 IOPS at 1.28 ms");
        assert_eq!(r[1].sub_ms_iops, Some(79_950.0));
    }

    #[test]
    fn ties_rank_by_latency_then_name() {
        let p = |iops: f64, lat: f64| CurvePoint {
            pct: 100,
            uncontrolled: false,
            target_iops: iops,
            iops,
            bytes_per_sec: 0.0,
            lat_avg_us: lat,
            lat_p99_us: lat,
            errors: 0,
        };
        let r = rank(&[
            ("z".into(), p(1000.0, 500.0), None),
            ("y".into(), p(1000.0, 400.0), None),
            ("x".into(), p(1000.0, 500.0), None),
        ]);
        let names: Vec<&str> = r.iter().map(|e| e.drive.as_str()).collect();
        assert_eq!(names, vec!["y", "x", "z"]);
    }

    #[test]
    fn rated_share_uses_iops_for_random_and_bandwidth_for_sequential() {
        let a = fixture("a");
        let rated = RatedFigures {
            source: "test".into(),
            random_read_iops: Some(825_000.0),
            seq_read_bytes_per_sec: Some(3.5e9),
            ..Default::default()
        };
        let c = curve(sweep(&a, "4k-random-read"));
        assert!(!is_sequential("4k-random-read", 4096.0));
        let basis = rated_basis(100, false).expect("basis");
        let s = rated_share(&c, basis, &rated).expect("share");
        // 100 000 / 825 000 = 0.121212...
        assert!((s.ratio - 100_000.0 / 825_000.0).abs() < 1e-12);
        assert!((s.ratio - 0.1212).abs() < 1e-4);

        let s64 = sweep(&a, "64k-seq-read");
        assert!(is_sequential("64k-seq-read", s64.block_size));
        let c = curve(s64);
        let s = rated_share(&c, RatedBasis::SeqReadBandwidth, &rated).expect("share");
        // Highest bandwidth: the uncontrolled run, 50 000 × 65 536 = 3 276 800 000 B/s;
        // 3 276 800 000 / 3 500 000 000 = 0.936228...
        assert_eq!(s.measured, 3_276_800_000.0);
        assert!((s.ratio - 0.936_228_571).abs() < 1e-8);
        // No rated write figure: no share.
        assert!(rated_share(&c, RatedBasis::SeqWriteBandwidth, &rated).is_none());
        // Mixed workloads have no rated basis; inline 128 KiB jobs count as sequential.
        assert_eq!(rated_basis(70, false), None);
        assert!(is_sequential("my-inline-job", 131072.0));
        assert!(!is_sequential("my-inline-job", 8192.0));
    }

    #[test]
    fn soak_figures_from_drive_b() {
        let b = fixture("b");
        let s = b.soak.as_ref().expect("soak");
        let f = soak_figures(s, b.device.as_ref().map(|d| d.capacity_bytes), None);
        // The summary carries observed (1.0) and rated (3.0) DWPD: 1/3 of the rating.
        assert_eq!(f.observed_dwpd, Some(1.0));
        assert!((f.dwpd_ratio.expect("ratio") - 1.0 / 3.0).abs() < 1e-12);
        // Throttled 80 000 vs 100 000 IOPS: 20 % of the IOPS lost while throttled;
        // 600 s of 86 400 s throttled = 0.69 %.
        assert!((f.throttle_iops_cost_ratio.expect("cost") - 0.2).abs() < 1e-12);
        assert!((f.throttled_ratio.expect("ratio") - 600.0 / 86400.0).abs() < 1e-12);
        // Drive wrote 3.3 TB for 3.2 TB from the host: 3.3 / 3.2 = 1.03125.
        assert_eq!(f.accounting_ratio, Some(1.03125));

        // Without DWPD in the summary: 3.2 TB written in one day on a 3.2 TB drive = 1 DWPD;
        // the rated DWPD then comes from the ratings.
        let bare = SoakSummary {
            observed_dwpd: None,
            rated_dwpd: None,
            ..s.clone()
        };
        let rated = RatedFigures {
            dwpd: Some(3.0),
            ..Default::default()
        };
        let f = soak_figures(&bare, Some(3_200_000_000_000), Some(&rated));
        assert_eq!(f.observed_dwpd, Some(1.0));
        assert_eq!(f.rated_dwpd, Some(3.0));
        // Unknown capacity: no DWPD at all.
        assert_eq!(soak_figures(&bare, None, None).observed_dwpd, None);
    }

    #[test]
    fn formatting() {
        assert_eq!(fmt_count(121_500.4), "121,500");
        assert_eq!(fmt_count(999.0), "999");
        assert_eq!(fmt_count(1_000_000.0), "1,000,000");
        assert_eq!(fmt_latency_us(880.0), "880 µs");
        assert_eq!(fmt_latency_us(12.34), "12.3 µs");
        assert_eq!(fmt_latency_us(2460.0), "2.46 ms");
        assert_eq!(fmt_rate(406e6), "406 MB/s");
        assert_eq!(fmt_bytes(3.2e12), "2.91 TiB");
        assert_eq!(fmt_elapsed(90061.0), "1 d 01:01:01");
        assert_eq!(place_word(3), "third");
        assert_eq!(place_word(11), "11th");
        assert_eq!(place_word(22), "22nd");
    }
}
