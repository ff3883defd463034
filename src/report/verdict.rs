//! The verdict at the top of the report: for many drives first the yield (passed and failed
//! per model and firmware, the failing gates ranked by how often they failed), then one row per
//! drive (PASS / FAIL / INCOMPLETE / RUNNING and the failed gates), then each drive's
//! gates with their figures. [`yield_of`] is pure, from the [`Report`]; [`html`] and
//! [`markdown`] lay it out.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::Report;
use super::charts::esc;
use crate::model::verdict::{GateState, Verdict};

/// Drives passed and failed over the report.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Yield {
    pub drives: usize,
    pub passed: usize,
    pub failed: usize,
    /// Drives still running, stopped early without a failure, or without a verdict.
    pub undecided: usize,
    /// One row per model and firmware, most failures first.
    pub groups: Vec<YieldGroup>,
    /// Each gate that failed somewhere, with how many drives failed it, most first.
    pub failing_gates: Vec<(String, usize)>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct YieldGroup {
    pub model: String,
    pub firmware: String,
    pub drives: usize,
    pub passed: usize,
    pub failed: usize,
    pub undecided: usize,
}

impl Yield {
    /// `passed / decided` (0..1), `None` when nothing is decided.
    pub fn ratio(&self) -> Option<f64> {
        let decided = self.passed + self.failed;
        (decided > 0).then(|| self.passed as f64 / decided as f64)
    }
}

/// Passed: a final PASS; failed: FAIL; anything else undecided.
fn outcome(v: Option<&Verdict>) -> (bool, bool) {
    match v {
        Some(v) => match v.status() {
            crate::model::verdict::VerdictStatus::Fail => (false, true),
            crate::model::verdict::VerdictStatus::Pass => (true, false),
            _ => (false, false),
        },
        None => (false, false),
    }
}

/// The yield group of a target without drive identity: a loop or SATA block device is a
/// block device, not a file.
fn no_identity_label(path: &str) -> &'static str {
    if super::target_kind(path).starts_with("a block device") {
        "(block device without drive identity)"
    } else {
        "(file target)"
    }
}

/// The yield over the report's current runs (archived runs are history, not drives).
pub fn yield_of(report: &Report) -> Yield {
    let mut y = Yield::default();
    let mut groups: BTreeMap<(String, String), YieldGroup> = BTreeMap::new();
    let mut gates: BTreeMap<String, usize> = BTreeMap::new();
    for d in report.drives.iter().filter(|d| d.archived.is_none()) {
        let (passed, failed) = outcome(d.verdict.as_ref());
        let (model, firmware) = d.device.as_ref().map_or_else(
            || (no_identity_label(&d.path).to_string(), String::new()),
            |dev| (dev.model.clone(), dev.firmware.clone()),
        );
        let g = groups
            .entry((model.clone(), firmware.clone()))
            .or_insert_with(|| YieldGroup {
                model,
                firmware,
                ..Default::default()
            });
        g.drives += 1;
        y.drives += 1;
        if passed {
            g.passed += 1;
            y.passed += 1;
        } else if failed {
            g.failed += 1;
            y.failed += 1;
        } else {
            g.undecided += 1;
            y.undecided += 1;
        }
        if let Some(v) = &d.verdict {
            for f in v.failed() {
                *gates.entry(f.gate.name().to_string()).or_default() += 1;
            }
        }
    }
    y.groups = groups.into_values().collect();
    y.groups.sort_by(|a, b| {
        b.failed
            .cmp(&a.failed)
            .then(a.model.cmp(&b.model))
            .then(a.firmware.cmp(&b.firmware))
    });
    y.failing_gates = gates.into_iter().collect();
    y.failing_gates
        .sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    y
}

/// `12 of 14 drives passed (86 %), 2 failed`.
pub fn yield_line(y: &Yield) -> String {
    let mut s = format!(
        "{} of {} passed",
        y.passed,
        crate::model::fmt::count_of(y.drives as u64, "drive")
    );
    if let Some(r) = y.ratio() {
        s.push_str(&format!(" ({:.0} % of those decided)", r * 100.0));
    }
    s.push_str(&format!(", {} failed", y.failed));
    if y.undecided > 0 {
        s.push_str(&format!(", {} not decided yet", y.undecided));
    }
    s
}

fn headline_class(h: &str) -> &'static str {
    match h {
        "PASS" => "ok",
        "FAIL" => "bad",
        _ => "muted",
    }
}

/// The verdict as it stands, with "data not verified" beside it when the verify gate was off
/// or not evaluated: `PASS, data not verified (the verify_errors gate is off)`.
pub fn verdict_text(v: &Verdict) -> String {
    match v.data_not_verified() {
        Some(n) => format!("{}, {n}", v.headline()),
        None => v.headline().to_string(),
    }
}

fn failed_text(v: &Verdict) -> String {
    let f = v.failed_summary();
    if f.is_empty() {
        let missing: Vec<&str> = v.not_evaluated().map(|g| g.gate.name()).collect();
        if missing.is_empty() {
            "none".into()
        } else {
            format!(
                "none ({} not evaluated: {})",
                crate::model::fmt::count_of(missing.len() as u64, "gate"),
                missing.join(", ")
            )
        }
    } else {
        f.join("; ")
    }
}

/// The verdict section of the HTML report (empty when no drive has a verdict).
pub fn html(report: &Report) -> String {
    if report.drives.iter().all(|d| d.verdict.is_none()) {
        return String::new();
    }
    let mut h = String::from("<section id=\"verdict\">\n<h2>Verdict</h2>\n");
    if report.drives.len() > 1 {
        let y = yield_of(report);
        h.push_str(&format!(
            "<p id=\"yield\" class=\"yield\">Yield: {}.</p>\n",
            esc(&yield_line(&y))
        ));
        h.push_str("<table class=\"yield-groups\"><tr><th>Model</th><th>Firmware</th><th>Drives</th><th>Passed</th><th>Failed</th><th>Not decided</th></tr>\n");
        for g in &y.groups {
            h.push_str(&format!(
                "<tr><td>{}</td><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num{}\">{}</td><td class=\"num\">{}</td></tr>\n",
                esc(&g.model),
                esc(&g.firmware),
                g.drives,
                g.passed,
                if g.failed > 0 { " bad" } else { "" },
                g.failed,
                g.undecided
            ));
        }
        h.push_str("</table>\n");
        if !y.failing_gates.is_empty() {
            h.push_str("<table class=\"failing-gates\"><tr><th>Failing gate</th><th>Drives failing it</th></tr>\n");
            for (g, n) in &y.failing_gates {
                h.push_str(&format!(
                    "<tr><td>{}</td><td class=\"num\">{n}</td></tr>\n",
                    esc(g)
                ));
            }
            h.push_str("</table>\n");
        }
    }
    h.push_str("<table class=\"verdicts\"><tr><th>Drive</th><th>Host</th><th>Target</th><th>Verdict</th><th>Failed gates</th></tr>\n");
    for d in &report.drives {
        let (head, text, failed) = match &d.verdict {
            Some(v) => (v.headline(), verdict_text(v), failed_text(v)),
            None => (
                "no verdict",
                "no verdict".into(),
                "results file from before verdicts".into(),
            ),
        };
        h.push_str(&format!(
            "<tr><td>{}</td><td>{}</td><td>{}</td><td class=\"verdict {}\">{}</td><td>{}</td></tr>\n",
            esc(&d.label),
            esc(&d.host),
            esc(&d.target),
            headline_class(head),
            esc(&text),
            esc(&failed)
        ));
    }
    h.push_str("</table>\n");
    for d in &report.drives {
        let Some(v) = &d.verdict else { continue };
        h.push_str(&format!(
            "<details class=\"gates\"><summary>{}: {}</summary>\n<table><tr><th>Gate</th><th>State</th><th>Measured</th><th>Limit</th><th>Note</th></tr>\n",
            esc(&d.label),
            esc(&verdict_text(v))
        ));
        for g in &v.gates {
            let class = match g.state {
                GateState::Pass => "ok",
                GateState::Fail => "bad",
                _ => "muted",
            };
            h.push_str(&format!(
                "<tr><td>{}</td><td class=\"{class}\">{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
                esc(g.gate.describe()),
                esc(g.state.word()),
                esc(&g.measured),
                esc(&g.limit),
                esc(&g.note)
            ));
        }
        h.push_str("</table></details>\n");
    }
    h.push_str("</section>\n");
    h
}

fn md(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

/// The verdict section of the Markdown report.
pub fn markdown(report: &Report) -> String {
    if report.drives.iter().all(|d| d.verdict.is_none()) {
        return String::new();
    }
    let mut m = String::from("## Verdict\n\n");
    if report.drives.len() > 1 {
        let y = yield_of(report);
        m.push_str(&format!("Yield: {}.\n\n", yield_line(&y)));
        m.push_str("| Model | Firmware | Drives | Passed | Failed | Not decided |\n|---|---|--:|--:|--:|--:|\n");
        for g in &y.groups {
            m.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} |\n",
                md(&g.model),
                md(&g.firmware),
                g.drives,
                g.passed,
                g.failed,
                g.undecided
            ));
        }
        m.push('\n');
        if !y.failing_gates.is_empty() {
            m.push_str("| Failing gate | Drives failing it |\n|---|--:|\n");
            for (g, n) in &y.failing_gates {
                m.push_str(&format!("| {} | {n} |\n", md(g)));
            }
            m.push('\n');
        }
    }
    m.push_str("| Drive | Host | Target | Verdict | Failed gates |\n|---|---|---|---|---|\n");
    for d in &report.drives {
        let (head, failed) = match &d.verdict {
            Some(v) => (verdict_text(v), failed_text(v)),
            None => (
                "no verdict".to_string(),
                "results file from before verdicts".into(),
            ),
        };
        m.push_str(&format!(
            "| {} | {} | {} | **{}** | {} |\n",
            md(&d.label),
            md(&d.host),
            md(&d.target),
            md(&head),
            md(&failed)
        ));
    }
    m.push('\n');
    for d in &report.drives {
        let Some(v) = &d.verdict else { continue };
        m.push_str(&format!(
            "### Gates: {} ({})\n\n| Gate | State | Measured | Limit | Note |\n|---|---|---|---|---|\n",
            md(&d.label),
            md(&verdict_text(v))
        ));
        for g in &v.gates {
            m.push_str(&format!(
                "| {} | {} | {} | {} | {} |\n",
                g.gate.describe(),
                g.state.word(),
                md(&g.measured),
                md(&g.limit),
                md(&g.note)
            ));
        }
        m.push('\n');
    }
    m
}

/// The verdict table of the status page: each target's verdict as it stands, with the failed
/// gates and the gates not evaluated (empty before any target has one).
pub fn status_html(targets: &[crate::workload::scheduler::TargetSnapshot]) -> String {
    if targets.iter().all(|t| t.verdict.is_none()) {
        return String::new();
    }
    let mut h = String::from(
        "<h2>Verdict</h2>\n<table id=\"verdicts\"><tr><th>Target</th><th>Verdict</th><th>Failed gates</th><th>Not evaluated</th></tr>\n",
    );
    for t in targets {
        let (head, failed, unknown) = match &t.verdict {
            Some(v) => (
                v.headline(),
                failed_text(v),
                v.not_evaluated()
                    .map(|g| g.gate.name())
                    .collect::<Vec<_>>()
                    .join(", "),
            ),
            None => ("not evaluated yet", String::new(), String::new()),
        };
        h.push_str(&format!(
            "<tr><td>{}</td><td class=\"verdict {}\">{}</td><td>{}</td><td class=\"muted\">{}</td></tr>\n",
            esc(&t.name),
            headline_class(head),
            esc(head),
            esc(&failed),
            esc(&unknown)
        ));
    }
    h.push_str("</table>\n");
    h
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_loop_device_groups_as_a_block_device_not_a_file() {
        assert_eq!(
            super::no_identity_label("/dev/loop7"),
            "(block device without drive identity)"
        );
        assert_eq!(super::no_identity_label("/dev/shm/x.dat"), "(file target)");
    }

    use super::*;
    use crate::model::results::{DeviceIdentity, SoakSummary, TargetResults};
    use crate::model::verdict::{ExternalInputs, GateSettings, PlanState};
    use crate::report::{Loaded, build_with};
    use crate::verdict::stamp;

    fn drive(serial: &str, model: &str, fw: &str, errors: u64, media: u64) -> Loaded {
        let mut r = TargetResults {
            version: 2,
            host: format!("host-{serial}"),
            target: "disk0".into(),
            path: "/dev/nvme0n1".into(),
            device: Some(DeviceIdentity {
                controller: "nvme0".into(),
                model: model.into(),
                serial: serial.into(),
                firmware: fw.into(),
                capacity_bytes: 1 << 40,
            }),
            soak: Some(SoakSummary {
                elapsed_secs: 10.0,
                errors,
                drive: Some(crate::model::results::DriveSoak {
                    media_errors: Some(media),
                    error_log_entries: Some(0),
                    available_spare_latest: 100,
                    available_spare_threshold: 10,
                    temperature_max_kelvin: Some(320),
                    data_written_bytes: Some(0),
                    nvsoak_written_bytes: Some(0),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            subject: Some(crate::model::verdict::Subject {
                kind: crate::model::verdict::SubjectKind::Drive,
                verify: true,
                ..Default::default()
            }),
            verified_bytes: 1 << 20,
            ..Default::default()
        };
        stamp(
            &mut r,
            &GateSettings::default(),
            &ExternalInputs::default(),
            PlanState::Finished,
            None,
        );
        Loaded {
            source: format!("/r/{serial}.json").into(),
            results: r,
            archived: None,
        }
    }

    fn report() -> Report {
        build_with(
            &[
                drive("A1", "MODEL-A", "FW1", 0, 0),
                drive("A2", "MODEL-A", "FW1", 3, 1),
                drive("A3", "MODEL-A", "FW2", 0, 2),
                drive("B1", "MODEL-B", "FW7", 0, 0),
            ],
            &|_| None,
        )
    }

    #[test]
    fn yield_per_model_and_firmware_and_gates_ranked() {
        let y = yield_of(&report());
        assert_eq!((y.drives, y.passed, y.failed, y.undecided), (4, 2, 2, 0));
        assert_eq!(
            y.failing_gates,
            vec![
                ("media_errors".to_string(), 2),
                ("io_errors".to_string(), 1)
            ]
        );
        let rows: Vec<(&str, &str, usize, usize, usize)> = y
            .groups
            .iter()
            .map(|g| {
                (
                    g.model.as_str(),
                    g.firmware.as_str(),
                    g.drives,
                    g.passed,
                    g.failed,
                )
            })
            .collect();
        assert_eq!(
            rows,
            vec![
                ("MODEL-A", "FW1", 2, 1, 1),
                ("MODEL-A", "FW2", 1, 0, 1),
                ("MODEL-B", "FW7", 1, 1, 0),
            ]
        );
        assert_eq!(
            yield_line(&y),
            "2 of 4 drives passed (50 % of those decided), 2 failed"
        );
    }

    #[test]
    fn html_and_markdown_open_with_the_yield_then_the_verdicts() {
        let r = report();
        let h = html(&r);
        let y = h.find("id=\"yield\"").expect("yield");
        let t = h.find("class=\"verdicts\"").expect("verdict table");
        assert!(y < t, "the yield comes first");
        assert!(h.contains("<td class=\"verdict bad\">FAIL</td>"), "{h}");
        assert!(
            h.contains(
                "io_errors: 3 errors (at most 0); media_errors: 1 new media error (at most 0)"
            ),
            "{h}"
        );
        let m = markdown(&r);
        assert!(
            m.starts_with("## Verdict\n\nYield: 2 of 4 drives passed"),
            "{m}"
        );
        assert!(m.contains("| MODEL-A | FW2 | 1 | 0 | 1 | 0 |"), "{m}");
        assert!(m.contains("| media_errors | 2 |"), "{m}");
        // The whole report puts the verdict before everything else.
        let full = crate::report::html::render(&r).expect("renders");
        let v = full
            .find("<section id=\"verdict\">")
            .expect("verdict section");
        assert!(
            full.find("<h2").is_some_and(|first| first > v),
            "the verdict is the first section"
        );
        let json = crate::report::render_json(&r).expect("json");
        assert!(json.contains("\"yield\""), "{json}");
    }

    #[test]
    fn old_results_without_a_verdict_render_without_a_section() {
        let mut l = drive("A1", "MODEL-A", "FW1", 0, 0);
        l.results.verdict = None;
        let r = build_with(&[l], &|_| None);
        assert_eq!(html(&r), "");
        assert_eq!(markdown(&r), "");
    }
}
