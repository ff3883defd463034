//! The Markdown report: tables in Markdown, charts as SVG files written next to it and linked
//! by relative path (`<stem>-<figure id>.svg`).

use std::path::{Path, PathBuf};

use super::compute::SoakFigures;

use super::html::{Figure, figures, frontier_text, point_text, rated_text};
use super::mdtext::cell;
use super::{Comparison, DriveReport, Report, ReportError};
use crate::model::curve::{CurvePoint, shortfall};
use crate::model::fmt::{
    fmt_bytes, fmt_capacity, fmt_count, fmt_elapsed, fmt_latency_us, fmt_pct, fmt_rate,
};

fn opt<T>(v: Option<T>, f: impl Fn(T) -> String) -> String {
    v.map(f).unwrap_or_else(|| "-".into())
}

fn image(md: &mut String, stem: &str, f: &Figure, files: &mut Vec<(String, String)>) {
    let name = format!("{stem}-{}.svg", f.id);
    md.push_str(&format!("![{}]({})\n\n", cell(&f.title), name));
    files.push((name, f.svg.clone()));
}

/// The Markdown text and the SVG files it links, as (file name, contents); `stem` prefixes the
/// SVG file names.
pub fn render(report: &Report, stem: &str) -> Result<(String, Vec<(String, String)>), ReportError> {
    let figs = figures(report)?;
    let mut files = Vec::new();
    let mut md = String::new();
    md.push_str("# nvsoak qualification report\n\n");
    md.push_str(&format!(
        "{}, nvsoak {}. Sub-1 ms frontier: {}.\n\n",
        report.drives_text(),
        report.nvsoak_version,
        report.frontier_basis
    ));
    md.push_str(&super::verdict::markdown(report));
    if let Some(b) = &report.batch {
        md.push_str(&super::batch::markdown(b));
    }
    let soaks: Vec<(&str, &SoakFigures)> = report
        .drives
        .iter()
        .filter_map(|d| d.soak.as_ref().map(|s| (d.label.as_str(), s)))
        .collect();
    let soak_cmp = report.drives.len() > 1 && !soaks.is_empty();
    if !report.comparisons.is_empty() || soak_cmp {
        md.push_str("## Comparison\n\n");
    }
    if soak_cmp {
        soak_comparison(&mut md, soaks);
    }
    for (c, f) in report.comparisons.iter().zip(&figs.comparisons) {
        let chart = report.drives.len() <= super::batch::MAX_CHART_DRIVES;
        comparison(&mut md, c, chart.then_some(f), stem, &mut files);
    }
    for (di, (d, fs)) in report.drives.iter().zip(&figs.drives).enumerate() {
        md.push_str(&format!("## {}\n\n", cell(&d.label)));
        drive_info(&mut md, d);
        if !d.sweeps.is_empty() {
            sweep_table(&mut md, d);
        }
        for (s, (avg, p99)) in d.sweeps.iter().zip(fs) {
            md.push_str(&format!(
                "### {}\n\nPeak {}; {}.\n\n",
                cell(&s.profile),
                opt(s.peak.as_ref(), point_text),
                frontier_text(s)
            ));
            image(&mut md, stem, avg, &mut files);
            image(&mut md, stem, p99, &mut files);
        }
        if !d.steady.is_empty() {
            steady_table(&mut md, d);
        }
        if let Some(s) = &d.soak {
            soak_section(&mut md, s);
        }
        super::soakchart::report_markdown(&mut md, stem, di, d, &mut files);
        md.push_str(&super::ocp_phases::markdown(d));
    }
    Ok((md, files))
}

/// The drives side by side over their soaks, with a verdict each.
fn soak_comparison(md: &mut String, soaks: Vec<(&str, &SoakFigures)>) {
    md.push_str("### Drives during the soak\n\n| Drive |");
    for c in super::compute::DRIVE_COMPARISON_HEADERS {
        md.push_str(&format!(" {c} |"));
    }
    md.push_str(" Verdict |\n|---|");
    md.push_str(&"---:|".repeat(super::compute::DRIVE_COMPARISON_HEADERS.len()));
    md.push_str("---|\n");
    for r in super::compute::drive_comparison(soaks.into_iter()) {
        md.push_str(&format!("| {} |", cell(&r.drive)));
        for c in &r.cells {
            md.push_str(&format!(" {} |", cell(c)));
        }
        let verdict = match r.verdict_text() {
            (true, t) => format!("**{t}**"),
            (false, t) => t,
        };
        md.push_str(&format!(" {verdict} |\n"));
    }
    md.push('\n');
}

/// One profile's comparison across drives: chart, ranking table and summaries.
fn comparison(
    md: &mut String,
    c: &Comparison,
    f: Option<&Figure>,
    stem: &str,
    files: &mut Vec<(String, String)>,
) {
    md.push_str(&format!("### {}\n\n", cell(&c.profile)));
    match f {
        Some(f) => image(md, stem, f, files),
        None => md.push_str(
            "No comparison chart for this many drives: see the ranking and the batch tables.\n\n",
        ),
    }
    md.push_str("| Rank | Drive | Peak IOPS | Average at peak | p99 at peak | Sub-1 ms IOPS |\n|---:|---|---:|---:|---:|---:|\n");
    for e in &c.ranking {
        md.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} |\n",
            e.rank,
            cell(&e.drive),
            fmt_count(e.peak_iops),
            fmt_latency_us(e.lat_avg_us_at_peak),
            fmt_latency_us(e.lat_p99_us_at_peak),
            opt(e.sub_ms_iops, fmt_count)
        ));
    }
    md.push('\n');
    for e in &c.ranking {
        md.push_str(&format!("- {}: {}\n", cell(&e.drive), cell(&e.summary)));
    }
    md.push('\n');
}

/// A drive's identity table: archived run, model, serial, firmware, capacity, host, target.
fn drive_info(md: &mut String, d: &DriveReport) {
    md.push_str("| | |\n|---|---|\n");
    if let Some(a) = &d.archived {
        md.push_str(&format!("| Archived run | {} |\n", cell(&a.describe())));
    }
    if let Some(dev) = &d.device {
        md.push_str(&format!(
            "| Model | {} |\n| Serial | {} |\n| Firmware | {} |\n| Capacity | {} |\n",
            cell(&dev.model),
            cell(&dev.serial),
            cell(&dev.firmware),
            fmt_capacity(dev.capacity_bytes as f64)
        ));
    }
    md.push_str(&format!(
        "| Host | {} |\n| Target | {} ({}) |\n| Rated figures | {} |\n\n",
        cell(&d.host),
        cell(&d.target),
        cell(&d.path),
        cell(&opt(d.rated.as_ref(), |r| r.source.clone()))
    ));
}

/// A drive's sweeps, one row per profile.
fn sweep_table(md: &mut String, d: &DriveReport) {
    md.push_str("| Profile | Peak IOPS | Average at peak | p99 at peak | Bandwidth at peak | Sub-1 ms (average) | Of rated | Short of target (>10 %) |\n|---|---:|---:|---:|---:|---|---|---|\n");
    for s in &d.sweeps {
        let pk = s.peak.as_ref();
        md.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} |\n",
            cell(&s.profile),
            opt(pk, |p| fmt_count(p.iops)),
            opt(pk, |p| fmt_latency_us(p.lat_avg_us)),
            opt(pk, |p| fmt_latency_us(p.lat_p99_us)),
            opt(pk, |p| fmt_rate(p.bytes_per_sec)),
            cell(&opt(s.sub_ms.as_ref(), point_text)),
            cell(&rated_text(s)),
            short_points(&s.curve)
        ));
    }
    md.push('\n');
}

/// The paced points that fell more than 10 % short of their target rate, "80 %: 3,089 of 7,113
/// IOPS (short 56.6 %)", joined by "; "; "none" when every point came within 10 %.
fn short_points(curve: &[CurvePoint]) -> String {
    let short: Vec<String> = curve
        .iter()
        .filter_map(|p| {
            shortfall(p).map(|f| {
                format!(
                    "{} %: {} of {} IOPS (short {})",
                    p.pct,
                    fmt_count(p.iops),
                    fmt_count(p.target_iops),
                    fmt_pct(f)
                )
            })
        })
        .collect();
    if short.is_empty() {
        "none".into()
    } else {
        short.join("; ")
    }
}

/// A drive's steady-state results, one row per profile.
fn steady_table(md: &mut String, d: &DriveReport) {
    md.push_str("### Steady state\n\n| Profile | Reached | Round | Window average | Range / average | Slope excursion / average |\n|---|---|---:|---:|---:|---:|\n");
    for s in &d.steady {
        md.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} |\n",
            cell(&s.profile),
            if s.reached { "yes" } else { "no" },
            opt(s.round, |r| r.to_string()),
            fmt_count(s.average),
            fmt_pct(s.range_ratio),
            fmt_pct(s.slope_excursion_ratio)
        ));
    }
    md.push('\n');
}

/// A drive's soak totals, each soak phase's own, then the drive-side figures over the soak.
fn soak_section(md: &mut String, s: &SoakFigures) {
    md.push_str("### Soak\n\n");
    let phases = super::compute::soak_phase_lines(s);
    if !phases.is_empty() {
        md.push_str("Soak phases:\n\n");
        for l in &phases {
            md.push_str(&format!("- {}\n", cell(l)));
        }
        md.push('\n');
    }
    if let Some(p) = super::compute::plan_text(s) {
        md.push_str(&format!(
            "- Whole plan, every phase (precondition and sweeps included): {}\n",
            cell(&p)
        ));
    }
    md.push_str(&format!(
        "- Soak duration: {}\n- Soak written / read: {} / {}\n- Observed DWPD: {} (rated {})\n- Endurance consumed: {}\n- Throttled: {} ({} IOPS lost)\n- Errors: {}, verify errors: {}\n- Accounting (drive / host written): {}\n\n",
        fmt_elapsed(s.elapsed_secs),
        fmt_bytes(s.written_bytes as f64),
        fmt_bytes(s.read_bytes as f64),
        opt(s.observed_dwpd, |v| format!("{v:.2}")),
        opt(s.rated_dwpd, |v| format!("{v}")),
        opt(s.endurance_consumed_ratio, |r| format!("{:.3} %", r * 100.0)),
        opt(s.throttled_secs, fmt_elapsed),
        opt(s.throttle_iops_cost_ratio, fmt_pct),
        s.errors,
        s.verify_errors,
        opt(s.accounting_ratio, |r| format!("{r:.3}"))
    ));
    if let Some(cpu) = super::compute::cpu_text(s) {
        md.push_str(&format!("Worker CPU, soak phases: {}\n\n", cell(&cpu)));
    }
    md.push_str("### Drive during the soak\n\n");
    match &s.drive {
        None => md.push_str("No drive-side figures: not an NVMe namespace, health polling off, or no successful SMART poll during the soak.\n\n"),
        Some(dr) => {
            if s.callouts.is_empty() {
                md.push_str("No media errors, accounting agrees, no throttling.\n\n");
            }
            for c in &s.callouts {
                md.push_str(&format!("**{}**\n\n", cell(c)));
            }
            md.push_str("| Figure | Over the soak |\n|---|---|\n");
            for (k, v, bad) in super::drive::rows(dr) {
                let v = cell(&v);
                md.push_str(&format!(
                    "| {k} | {} |\n",
                    if bad { format!("**{v}**") } else { v }
                ));
            }
            md.push('\n');
        }
    }
}

/// The Markdown report as one text, for stdout: there is no file to put its SVG charts beside,
/// so each chart's place says what it is and how to get it.
pub fn render_standalone(report: &Report) -> Result<String, ReportError> {
    let (md, files) = render(report, "chart")?;
    let names: std::collections::HashSet<&str> = files.iter().map(|(n, _)| n.as_str()).collect();
    let mut out = String::with_capacity(md.len());
    for line in md.lines() {
        let chart = line
            .strip_prefix("![")
            .and_then(|l| l.strip_suffix(')'))
            .and_then(|l| l.rsplit_once("]("))
            .filter(|(_, name)| names.contains(name));
        match chart {
            Some((title, _)) => out.push_str(&format!(
                "*Chart: {title} (written as an SVG file beside the report with --out)*"
            )),
            None => out.push_str(line),
        }
        out.push('\n');
    }
    Ok(out)
}

/// Write the Markdown report to `out` and its SVGs next to it; returns every path written.
pub fn write(report: &Report, out: &Path) -> Result<Vec<PathBuf>, ReportError> {
    let stem = out
        .file_stem()
        .map(|s| s.to_string_lossy().to_string())
        .unwrap_or_else(|| "report".into());
    let dir = out.parent().unwrap_or(Path::new(""));
    let (md, files) = render(report, &stem)?;
    let mut written = Vec::new();
    for (name, svg) in files {
        let p = dir.join(&name);
        crate::util::write_atomic(&p, svg.as_bytes()).map_err(|source| ReportError::Write {
            path: p.clone(),
            source,
        })?;
        written.push(p);
    }
    crate::util::write_atomic(out, md.as_bytes()).map_err(|source| ReportError::Write {
        path: out.to_path_buf(),
        source,
    })?;
    written.push(out.to_path_buf());
    Ok(written)
}
