//! The batch view of a report over many drives (many hosts, `nvsoak report --from ...`): drives
//! grouped by model and capacity, each listed with its host, target and serial so a failing
//! drive can be found on the floor, the flagged ones first.
//!
//! Pure: computed from the [`Report`]'s drives; the HTML and Markdown renderers only lay it out.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::charts::esc;
use super::{DriveReport, Report};
use crate::model::fmt::{fmt_capacity, fmt_count};

/// A report gets a batch view when its drives come from more than one host or number more
/// than this.
pub const BATCH_MIN_DRIVES: usize = 8;
/// A drive whose peak IOPS for a profile is below this share of its group's median is flagged.
pub const OUTLIER_SHARE: f64 = 0.8;
/// Beyond this many drives the comparison charts (one curve per drive) are left out; the
/// ranking tables stay.
pub const MAX_CHART_DRIVES: usize = 12;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Batch {
    pub drives: usize,
    pub hosts: usize,
    pub flagged: usize,
    pub groups: Vec<BatchGroup>,
}

/// The drives of one model and capacity.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BatchGroup {
    /// Empty for targets with no drive identity (files).
    pub model: String,
    pub capacity_bytes: Option<u64>,
    pub hosts: usize,
    pub firmware: Vec<String>,
    /// Profiles swept on any drive of the group, in the order they first appear.
    pub profiles: Vec<String>,
    /// Each profile's median peak IOPS over the group.
    pub median_peak_iops: BTreeMap<String, f64>,
    /// Flagged drives first, then by host and target.
    pub rows: Vec<BatchRow>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BatchRow {
    /// Index into [`Report::drives`] (the drive's section is `#drive{index + 1}`).
    pub index: usize,
    pub label: String,
    pub host: String,
    pub target: String,
    pub path: String,
    pub serial: String,
    pub firmware: String,
    /// Peak IOPS by profile.
    pub peak_iops: BTreeMap<String, f64>,
    pub soak_errors: Option<u64>,
    pub verify_errors: Option<u64>,
    /// Why this drive needs a look, one short phrase each; empty when nothing stood out.
    pub flags: Vec<String>,
}

/// The batch view, when the report calls for one (see [`BATCH_MIN_DRIVES`]).
/// Archived runs (`--archived`) are history, not drives: the batch is over the current runs.
pub fn batch(report: &Report) -> Option<Batch> {
    let current = || {
        report
            .drives
            .iter()
            .enumerate()
            .filter(|(_, d)| d.archived.is_none())
    };
    let hosts: BTreeSet<&str> = current().map(|(_, d)| d.host.as_str()).collect();
    let drives = current().count();
    if hosts.len() < 2 && drives <= BATCH_MIN_DRIVES {
        return None;
    }
    let mut by_kind: BTreeMap<(String, Option<u64>), Vec<usize>> = BTreeMap::new();
    for (i, d) in current() {
        let key = match &d.device {
            Some(dev) => (
                dev.model.clone(),
                Some(dev.capacity_bytes).filter(|c| *c > 0),
            ),
            None => (String::new(), None),
        };
        by_kind.entry(key).or_default().push(i);
    }
    let groups: Vec<BatchGroup> = by_kind
        .into_iter()
        .map(|((model, cap), idx)| group(report, model, cap, &idx))
        .collect();
    let flagged = groups
        .iter()
        .flat_map(|g| &g.rows)
        .filter(|r| !r.flags.is_empty())
        .count();
    Some(Batch {
        drives,
        hosts: hosts.len(),
        flagged,
        groups,
    })
}

fn group(report: &Report, model: String, cap: Option<u64>, idx: &[usize]) -> BatchGroup {
    let drives: Vec<(usize, &DriveReport)> = idx.iter().map(|&i| (i, &report.drives[i])).collect();
    let mut profiles: Vec<String> = Vec::new();
    for (_, d) in &drives {
        for s in &d.sweeps {
            if !profiles.contains(&s.profile) {
                profiles.push(s.profile.clone());
            }
        }
    }
    let peaks = |d: &DriveReport| -> BTreeMap<String, f64> {
        d.sweeps
            .iter()
            .filter_map(|s| s.peak.as_ref().map(|p| (s.profile.clone(), p.iops)))
            .collect()
    };
    let mut median_peak_iops = BTreeMap::new();
    for p in &profiles {
        let mut v: Vec<f64> = drives
            .iter()
            .filter_map(|(_, d)| peaks(d).get(p).copied())
            .collect();
        if let Some(m) = median(&mut v) {
            median_peak_iops.insert(p.clone(), m);
        }
    }
    let mut rows: Vec<BatchRow> = drives
        .iter()
        .map(|(i, d)| row(*i, d, peaks(d), &median_peak_iops))
        .collect();
    rows.sort_by(|a, b| {
        a.flags
            .is_empty()
            .cmp(&b.flags.is_empty())
            .then_with(|| natural_cmp(&a.host, &b.host))
            .then_with(|| natural_cmp(&a.target, &b.target))
    });
    let hosts: BTreeSet<&str> = drives.iter().map(|(_, d)| d.host.as_str()).collect();
    let firmware: BTreeSet<String> = drives
        .iter()
        .filter_map(|(_, d)| d.device.as_ref().map(|dev| dev.firmware.clone()))
        .filter(|f| !f.is_empty())
        .collect();
    BatchGroup {
        model,
        capacity_bytes: cap,
        hosts: hosts.len(),
        firmware: firmware.into_iter().collect(),
        profiles,
        median_peak_iops,
        rows,
    }
}

fn row(
    index: usize,
    d: &DriveReport,
    peak_iops: BTreeMap<String, f64>,
    medians: &BTreeMap<String, f64>,
) -> BatchRow {
    let mut flags = Vec::new();
    let soak = d.soak.as_ref();
    if let Some(s) = soak {
        if s.errors > 0 {
            flags.push(format!("{} I/O errors", s.errors));
        }
        if s.verify_errors > 0 {
            flags.push(format!("{} verify errors", s.verify_errors));
        }
        if s.media_errors_rose == Some(true) {
            flags.push("media errors rose".to_string());
        }
        if s.accounting_off == Some(true) {
            flags.push("drive and nvsoak disagree on bytes written".to_string());
        }
        if s.throttled == Some(true) {
            flags.push("throttled".to_string());
        }
        if let Some(f) = super::drive::batch_flag(s.drive.as_ref()) {
            flags.push(f.to_string());
        }
    }
    for s in &d.sweeps {
        if s.errors > 0 {
            flags.push(format!("{}: {} errors in the sweep", s.profile, s.errors));
        }
        if !s.complete {
            flags.push(format!("{}: sweep not finished", s.profile));
        }
    }
    for (p, iops) in &peak_iops {
        if let Some(m) = medians.get(p).filter(|m| **m > 0.0)
            && *iops < m * OUTLIER_SHARE
        {
            flags.push(format!(
                "{p}: peak {} IOPS, {:.0} % of the group's median",
                fmt_count(*iops),
                iops / m * 100.0
            ));
        }
    }
    let (serial, firmware) = d
        .device
        .as_ref()
        .map(|x| (x.serial.clone(), x.firmware.clone()))
        .unwrap_or_default();
    BatchRow {
        index,
        label: d.label.clone(),
        host: d.host.clone(),
        target: d.target.clone(),
        path: d.path.clone(),
        serial,
        firmware,
        peak_iops,
        soak_errors: soak.map(|s| s.errors),
        verify_errors: soak.map(|s| s.verify_errors),
        flags,
    }
}

/// Order "bay2" before "bay10": runs of digits compare as numbers.
fn natural_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    fn chunks(s: &str) -> Vec<(bool, &str)> {
        let mut out = Vec::new();
        let mut start = 0;
        let bytes = s.as_bytes();
        for i in 1..=bytes.len() {
            if i == bytes.len() || bytes[i].is_ascii_digit() != bytes[start].is_ascii_digit() {
                out.push((bytes[start].is_ascii_digit(), &s[start..i]));
                start = i;
            }
        }
        out
    }
    let (ca, cb) = (chunks(a), chunks(b));
    for (x, y) in ca.iter().zip(&cb) {
        let o = match (x, y) {
            ((true, n), (true, m)) => {
                let (n, m) = (n.trim_start_matches('0'), m.trim_start_matches('0'));
                n.len().cmp(&m.len()).then_with(|| n.cmp(m))
            }
            ((_, n), (_, m)) => n.cmp(m),
        };
        if o != std::cmp::Ordering::Equal {
            return o;
        }
    }
    ca.len().cmp(&cb.len()).then_with(|| a.cmp(b))
}

fn median(v: &mut [f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// "HUAWEI ES3600P V5, 2.91 TiB (3.20 TB)" (or "targets without a drive (files)").
pub fn group_title(g: &BatchGroup) -> String {
    match (g.model.is_empty(), g.capacity_bytes) {
        (true, _) => "targets without a drive (files)".to_string(),
        (false, Some(c)) => format!("{}, {}", g.model, fmt_capacity(c as f64)),
        (false, None) => g.model.clone(),
    }
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// One line for the top of the batch view.
pub fn summary(b: &Batch) -> String {
    format!(
        "{} from {}, in {} of model and capacity; {} flagged.",
        plural(b.drives, "drive", "drives"),
        plural(b.hosts, "host", "hosts"),
        plural(b.groups.len(), "group", "groups"),
        plural(b.flagged, "drive", "drives"),
    )
}

fn group_line(g: &BatchGroup) -> String {
    let mut s = format!(
        "{} on {}",
        plural(g.rows.len(), "drive", "drives"),
        plural(g.hosts, "host", "hosts")
    );
    if !g.firmware.is_empty() {
        s.push_str(&format!(", firmware {}", g.firmware.join(", ")));
    }
    for (p, m) in &g.median_peak_iops {
        s.push_str(&format!("; {p} median peak {} IOPS", fmt_count(*m)));
    }
    s
}

fn peak_cell(r: &BatchRow, p: &str) -> String {
    r.peak_iops
        .get(p)
        .map(|v| fmt_count(*v))
        .unwrap_or_else(|| "-".to_string())
}

fn count_cell(v: Option<u64>) -> String {
    v.map(|n| n.to_string()).unwrap_or_else(|| "-".to_string())
}

/// The batch view as an HTML section.
pub fn html(b: &Batch) -> String {
    let mut h = String::from("<h2 id=\"batch\">Batch</h2>\n");
    h.push_str(&format!("<p>{}</p>\n", esc(&summary(b))));
    for (gi, g) in b.groups.iter().enumerate() {
        h.push_str(&format!(
            "<h3 id=\"batch-{}\">{}</h3>\n<p class=\"muted\">{}.</p>\n",
            gi + 1,
            esc(&group_title(g)),
            esc(&group_line(g))
        ));
        h.push_str("<table class=\"batch\"><tr><th>Drive</th><th>Host</th><th>Target</th><th>Serial</th><th>Firmware</th>");
        for p in &g.profiles {
            h.push_str(&format!("<th>Peak IOPS, {}</th>", esc(p)));
        }
        h.push_str("<th>Soak I/O errors</th><th>Verify errors</th><th>Flags</th></tr>\n");
        for r in &g.rows {
            let cls = if r.flags.is_empty() {
                ""
            } else {
                " class=\"flagged\""
            };
            h.push_str(&format!(
                "<tr{cls}><td><a href=\"#drive{}\">{}</a></td><td>{}</td><td title=\"{}\">{}</td><td>{}</td><td>{}</td>",
                r.index + 1,
                esc(&r.label),
                esc(&r.host),
                esc(&r.path),
                esc(&r.target),
                esc(&r.serial),
                esc(&r.firmware)
            ));
            for p in &g.profiles {
                h.push_str(&format!("<td class=\"num\">{}</td>", peak_cell(r, p)));
            }
            h.push_str(&format!(
                "<td class=\"num\">{}</td><td class=\"num\">{}</td><td>{}</td></tr>\n",
                count_cell(r.soak_errors),
                count_cell(r.verify_errors),
                esc(&r.flags.join("; "))
            ));
        }
        h.push_str("</table>\n");
    }
    h
}

fn md_cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

/// The batch view as Markdown.
pub fn markdown(b: &Batch) -> String {
    let mut md = format!("## Batch\n\n{}\n\n", summary(b));
    for g in &b.groups {
        md.push_str(&format!(
            "### {}\n\n{}.\n\n",
            md_cell(&group_title(g)),
            md_cell(&group_line(g))
        ));
        md.push_str("| Drive | Host | Target | Serial | Firmware |");
        for p in &g.profiles {
            md.push_str(&format!(" Peak IOPS, {} |", md_cell(p)));
        }
        md.push_str(" Soak I/O errors | Verify errors | Flags |\n|---|---|---|---|---|");
        for _ in &g.profiles {
            md.push_str("---:|");
        }
        md.push_str("---:|---:|---|\n");
        for r in &g.rows {
            md.push_str(&format!(
                "| {} | {} | {} | {} | {} |",
                md_cell(&r.label),
                md_cell(&r.host),
                md_cell(&r.target),
                md_cell(&r.serial),
                md_cell(&r.firmware)
            ));
            for p in &g.profiles {
                md.push_str(&format!(" {} |", peak_cell(r, p)));
            }
            md.push_str(&format!(
                " {} | {} | {} |\n",
                count_cell(r.soak_errors),
                count_cell(r.verify_errors),
                md_cell(&r.flags.join("; "))
            ));
        }
        md.push('\n');
    }
    md
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn natural_order_reads_numbers_as_numbers() {
        let mut v = vec!["bay10", "bay2", "bay1", "host3-bay2", "", "bay02x"];
        v.sort_by(|a, b| natural_cmp(a, b));
        assert_eq!(v, ["", "bay1", "bay2", "bay02x", "bay10", "host3-bay2"]);
    }

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&mut []), None);
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&mut [4.0, 1.0, 2.0, 3.0]), Some(2.5));
    }
}
