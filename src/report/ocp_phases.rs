//! "Drive latency outliers per phase": the drive's own OCP Latency Monitor (C3h) counts of
//! reads, writes and deallocates over each bucket's threshold, compared across the plan's
//! phases (`model::ocp_phases`). Pure; the HTML and Markdown renderers each call one
//! function. Nothing is shown for a drive without C3h; a phase without both readings says so.

use std::fmt::Write as _;

use super::DriveReport;
use super::charts::esc;
use crate::model::events::LatencyCounts;
use crate::model::ocp_phases::OcpPhaseCounts;

pub const HEADING: &str = "Drive latency outliers per phase (OCP C3h)";
const NOTE: &str = "Commands the drive itself counted over each latency-monitor bucket's threshold during the phase (static buckets, from the health poller's reads at the phase's start and end).";

/// One table row: phase label, then per bucket 0..3 the read/write/deallocate deltas, or why
/// there are none.
fn rows(d: &DriveReport) -> Vec<(String, Result<LatencyCounts, &'static str>)> {
    d.ocp_phases
        .iter()
        .filter(|p| p.start.is_some() || p.end.is_some())
        .map(|p| (label(p), delta(p)))
        .collect()
}

fn label(p: &OcpPhaseCounts) -> String {
    let mut s = format!("{} ({})", p.phase_index + 1, p.kind);
    if p.loop_count > 0 {
        let _ = write!(s, ", loop {}", p.loop_count + 1);
    }
    if p.ended.is_none() {
        s.push_str(", so far");
    }
    s
}

fn delta(p: &OcpPhaseCounts) -> Result<LatencyCounts, &'static str> {
    if p.start.is_none() || p.end.is_none() {
        return Err("no C3h reading at one end");
    }
    p.delta()
        .ok_or("the drive's counters went backwards (log reset)")
}

fn triple(c: &crate::nvme::log::ocp_latency::PerOp<u32>) -> String {
    format!("{} / {} / {}", c.read, c.write, c.deallocate)
}

const BUCKETS: usize = 4;

/// The Markdown section; empty when the drive has no C3h readings.
pub fn markdown(d: &DriveReport) -> String {
    let rows = rows(d);
    if rows.is_empty() {
        return String::new();
    }
    let mut md = format!("### {HEADING}\n\n{NOTE} Each cell: reads / writes / deallocates.\n\n");
    md.push_str("| Phase |");
    for b in 0..BUCKETS {
        let _ = write!(md, " Bucket {b} |");
    }
    md.push_str("\n|---|");
    md.push_str(&"---:|".repeat(BUCKETS));
    md.push('\n');
    for (label, r) in rows {
        let _ = write!(md, "| {} |", label.replace('|', "\\|"));
        match r {
            Ok(c) => {
                for b in &c {
                    let _ = write!(md, " {} |", triple(b));
                }
            }
            Err(why) => {
                let _ = write!(md, " {why} |{}", " |".repeat(BUCKETS - 1));
            }
        }
        md.push('\n');
    }
    md.push('\n');
    md
}

/// The HTML section; empty when the drive has no C3h readings.
pub fn html(d: &DriveReport) -> String {
    let rows = rows(d);
    if rows.is_empty() {
        return String::new();
    }
    let mut h = format!(
        "<h3>{}</h3>\n<p>{} Each cell: reads / writes / deallocates.</p>\n<table class=\"ocp-phases\"><thead><tr><th>Phase</th>",
        esc(HEADING),
        esc(NOTE)
    );
    for b in 0..BUCKETS {
        let _ = write!(h, "<th>Bucket {b}</th>");
    }
    h.push_str("</tr></thead><tbody>\n");
    for (label, r) in rows {
        let _ = write!(h, "<tr><td>{}</td>", esc(&label));
        match r {
            Ok(c) => {
                for b in &c {
                    let _ = write!(h, "<td class=\"num\">{}</td>", esc(&triple(b)));
                }
            }
            Err(why) => {
                let _ = write!(h, "<td colspan=\"{BUCKETS}\">{}</td>", esc(why));
            }
        }
        h.push_str("</tr>\n");
    }
    h.push_str("</tbody></table>\n");
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nvme::log::ocp_latency::PerOp;

    fn counts(base: u32) -> LatencyCounts {
        let mut c = LatencyCounts::default();
        for (i, b) in c.iter_mut().enumerate() {
            let i = i as u32;
            *b = PerOp {
                read: base + 100 * i + 1,
                write: base + 100 * i + 2,
                deallocate: base + 100 * i + 3,
            };
        }
        c
    }

    fn report(phases: Vec<OcpPhaseCounts>) -> DriveReport {
        DriveReport {
            label: "d".into(),
            archived: None,
            host: "h".into(),
            target: "t".into(),
            path: "/dev/nvme0n1".into(),
            source: "s".into(),
            device: None,
            rated: None,
            sweeps: Vec::new(),
            steady: Vec::new(),
            soak: None,
            verdict: None,
            ocp_phases: phases,
        }
    }

    fn phase(i: usize, kind: &str, start: u32, end: Option<LatencyCounts>) -> OcpPhaseCounts {
        OcpPhaseCounts {
            phase_index: i,
            phase: i + 1,
            kind: kind.into(),
            loop_count: 0,
            started: 1.0,
            ended: Some(2.0),
            start: Some(counts(start)),
            end,
        }
    }

    #[test]
    fn each_phase_shows_its_own_outliers_per_bucket() {
        let mut soak_end = counts(10);
        soak_end[1].write += 5;
        soak_end[3].deallocate += 2;
        let mut running = phase(2, "soak", 0, Some(counts(4)));
        running.ended = None;
        running.loop_count = 1;
        let d = report(vec![
            phase(0, "precondition", 0, Some(counts(10))),
            phase(1, "soak", 10, Some(soak_end)),
            running,
            phase(3, "soak", 50, None),
        ]);
        let md = markdown(&d);
        assert!(md.contains(&format!("### {HEADING}")), "{md}");
        assert!(
            md.contains(
                "| 1 (precondition) | 10 / 10 / 10 | 10 / 10 / 10 | 10 / 10 / 10 | 10 / 10 / 10 |"
            ),
            "{md}"
        );
        assert!(
            md.contains("| 2 (soak) | 0 / 0 / 0 | 0 / 5 / 0 | 0 / 0 / 0 | 0 / 0 / 2 |"),
            "{md}"
        );
        assert!(
            md.contains("| 3 (soak), loop 2, so far | 4 / 4 / 4 |"),
            "{md}"
        );
        assert!(
            md.contains("| 4 (soak) | no C3h reading at one end |"),
            "{md}"
        );
        let h = html(&d);
        assert!(
            h.contains("<tr><td>2 (soak)</td><td class=\"num\">0 / 0 / 0</td><td class=\"num\">0 / 5 / 0</td>"),
            "{h}"
        );
        assert!(
            h.contains("<td colspan=\"4\">no C3h reading at one end</td>"),
            "{h}"
        );
    }

    #[test]
    fn a_drive_without_c3h_gets_no_section_and_a_reset_is_said() {
        let none = report(vec![OcpPhaseCounts {
            phase_index: 0,
            kind: "soak".into(),
            ..Default::default()
        }]);
        assert_eq!(markdown(&none), "");
        assert_eq!(html(&none), "");
        let reset = report(vec![phase(0, "soak", 50, Some(counts(0)))]);
        assert!(markdown(&reset).contains("counters went backwards"));
    }
}
