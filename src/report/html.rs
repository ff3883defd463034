//! The HTML report: one self-contained file (inline CSS, inline SVG, no script, no external
//! reference), so it opens offline on an air-gapped rack.

use super::charts::{self, LineChart, RefLine, Series, Unit, esc};
use super::compute;
use super::{DriveReport, Report, ReportError, SweepReport};
use crate::model::curve::CurvePoint;
use crate::model::fmt::{
    fmt_bytes, fmt_capacity, fmt_count, fmt_datasheet_bytes, fmt_elapsed, fmt_latency_us, fmt_pct,
    fmt_rate, fmt_time,
};

/// One chart of the report.
#[derive(Debug, Clone)]
pub struct Figure {
    /// File-name-safe identifier, unique in the report.
    pub id: String,
    pub title: String,
    pub svg: String,
    pub series: usize,
}

/// Which latency a curve chart plots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lat {
    Avg,
    P99,
}

impl Lat {
    fn of(self, p: &CurvePoint) -> f64 {
        match self {
            Lat::Avg => p.lat_avg_us,
            Lat::P99 => p.lat_p99_us,
        }
    }
    fn name(self) -> &'static str {
        match self {
            Lat::Avg => "average latency",
            Lat::P99 => "p99 latency",
        }
    }
}

pub const CHART_W: u32 = 860;
pub const CHART_H: u32 = 420;

/// An IOPS-against-latency chart of one or more drives' curves. Latency is plotted in µs and
/// labelled in µs, ms or s as it grows; the 1 ms line is drawn when it falls in the range.
pub fn curve_figure(
    id: String,
    title: String,
    lat: Lat,
    curves: &[(&str, &[CurvePoint])],
) -> Result<Figure, ReportError> {
    let series: Vec<Series> = curves
        .iter()
        .map(|(name, c)| Series {
            name: name.to_string(),
            points: c.iter().map(|p| (p.iops, lat.of(p))).collect(),
        })
        .collect();
    let flagged: Vec<(f64, f64)> = curves
        .iter()
        .flat_map(|(_, c)| c.iter())
        .filter(|p| crate::model::curve::shortfall(p).is_some())
        .map(|p| (p.iops, lat.of(p)))
        .collect();
    let svg = charts::line_chart(&LineChart {
        title: &title,
        x_desc: "IOPS",
        y_desc: lat.name(),
        width: CHART_W,
        height: CHART_H,
        series: &series,
        x_range: None,
        reference: Some(RefLine {
            y: 1000.0,
            label: "1 ms".into(),
        }),
        legend: true,
        x_unit: Unit::Si,
        y_unit: Unit::LatencyUs,
        x_ago: false,
        y_log_auto: true,
        markers: true,
        flagged: &flagged,
        flag_label: "short of target rate by more than 10 %",
        gap: None,
    })?;
    let n = series.iter().filter(|s| !s.points.is_empty()).count();
    Ok(Figure {
        id,
        title,
        svg,
        series: n,
    })
}

/// File-name-safe slug.
pub fn slug(s: &str) -> String {
    let mut o = String::new();
    for c in s.chars() {
        if c.is_ascii_alphanumeric() {
            o.push(c.to_ascii_lowercase());
        } else if !o.ends_with('-') {
            o.push('-');
        }
    }
    o.trim_matches('-').to_string()
}

/// The report's figures, in document order: per profile the comparison chart, then per drive
/// and sweep the average and p99 charts.
pub struct Figures {
    pub comparisons: Vec<Figure>,
    /// Parallel to `report.drives`; per sweep (avg, p99).
    pub drives: Vec<Vec<(Figure, Figure)>>,
}

pub fn figures(report: &Report) -> Result<Figures, ReportError> {
    let mut comparisons = Vec::new();
    for (i, c) in report.comparisons.iter().enumerate() {
        let curves: Vec<(&str, &[CurvePoint])> = report
            .drives
            .iter()
            .filter_map(|d| {
                d.sweeps
                    .iter()
                    .find(|s| s.profile == c.profile)
                    .map(|s| (d.label.as_str(), s.curve.as_slice()))
            })
            .collect();
        comparisons.push(curve_figure(
            format!("cmp-{}-{}", i + 1, slug(&c.profile)),
            format!("{}: IOPS vs average latency, all drives", c.profile),
            Lat::Avg,
            &curves,
        )?);
    }
    let mut drives = Vec::new();
    for (i, d) in report.drives.iter().enumerate() {
        let mut v = Vec::new();
        for s in &d.sweeps {
            let c = [(d.label.as_str(), s.curve.as_slice())];
            let base = format!("drive{}-{}", i + 1, slug(&s.profile));
            v.push((
                curve_figure(
                    format!("{base}-avg"),
                    format!("{}: IOPS vs average latency", s.profile),
                    Lat::Avg,
                    &c,
                )?,
                curve_figure(
                    format!("{base}-p99"),
                    format!("{}: IOPS vs p99 latency", s.profile),
                    Lat::P99,
                    &c,
                )?,
            ));
        }
        drives.push(v);
    }
    Ok(Figures {
        comparisons,
        drives,
    })
}

pub const CSS: &str = "body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:1.5em auto;max-width:1300px;padding:0 1em;color:#222}\
h1{font-size:1.6em;margin-bottom:.2em}h2{border-bottom:2px solid #1f77b4;padding-bottom:.2em;margin-top:2em}h3{margin-top:1.5em}\
table{border-collapse:collapse;margin:.5em 0 1em}th,td{border:1px solid #ccc;padding:.25em .6em;text-align:left;vertical-align:top}\
th{background:#f2f5f9}tr.flagged td{background:#fff4ef}td.num{text-align:right;font-variant-numeric:tabular-nums}\
.charts{display:flex;flex-wrap:wrap;gap:12px}.charts figure{margin:0;border:1px solid #ddd;padding:4px;background:#fff}\
svg.chart{display:block;max-width:100%;height:auto}.muted{color:#777}.ok{color:#2ca02c}.bad{color:#d62728;font-weight:600}.short{color:#d62728}\
details{margin:.5em 0}summary{cursor:pointer;color:#1f77b4}";

fn row(cells: &[String]) -> String {
    let mut s = String::from("<tr>");
    for c in cells {
        s.push_str(c);
    }
    s.push_str("</tr>\n");
    s
}

fn td(s: &str) -> String {
    format!("<td>{}</td>", esc(s))
}

fn num(s: &str) -> String {
    format!("<td class=\"num\">{}</td>", esc(s))
}

fn opt<T>(v: Option<T>, f: impl Fn(T) -> String) -> String {
    v.map(f).unwrap_or_else(|| "-".into())
}

fn figure_html(f: &Figure) -> String {
    format!(
        "<figure id=\"{}\" data-series=\"{}\">{}</figure>\n",
        esc(&f.id),
        f.series,
        f.svg
    )
}

/// "79,950 IOPS at 640 µs (80 %)".
pub fn point_text(p: &CurvePoint) -> String {
    let load = if p.uncontrolled {
        "uncontrolled".to_string()
    } else {
        format!("{} %", p.pct)
    };
    format!(
        "{} IOPS at {} ({load})",
        fmt_count(p.iops),
        fmt_latency_us(p.lat_avg_us)
    )
}

/// Which run of a sweep a point is: "the uncontrolled run", "the 30 % load".
fn run_text(p: &CurvePoint) -> String {
    if p.uncontrolled {
        "the uncontrolled run".into()
    } else {
        format!("the {} % load", p.pct)
    }
}

/// The sub-1 ms sentence of a sweep, on the average latency (the statistic of the frontier
/// and of the first chart): the highest-IOPS point below 1 ms, naming its run, and the first
/// point in sweep order that reached 1 ms, which may lie below the frontier in IOPS.
pub fn frontier_text(s: &SweepReport) -> String {
    if s.curve.is_empty() {
        return "no point measured yet".into();
    }
    let at = |p: &CurvePoint| {
        format!(
            "{} IOPS at {} ({})",
            fmt_count(p.iops),
            fmt_latency_us(p.lat_avg_us),
            run_text(p)
        )
    };
    match (&s.sub_ms, &s.first_over_1ms) {
        (None, _) => "average latency 1 ms or more at every measured load".into(),
        (Some(f), Some(x)) => format!(
            "highest rate below 1 ms average: {}; first point over 1 ms: {}{}",
            at(f),
            at(x),
            if x.iops < f.iops {
                ", a lower rate than the highest below 1 ms"
            } else {
                ""
            }
        ),
        // An older JSON report without `first_over_1ms`.
        (Some(f), None) if s.crossed_1ms => format!(
            "highest rate below 1 ms average: {}; some point reached 1 ms",
            at(f)
        ),
        (Some(f), None) => format!(
            "below 1 ms average at every measured load, the highest rate {}",
            at(f)
        ),
    }
}

pub fn rated_text(s: &SweepReport) -> String {
    match &s.rated_share {
        Some(r) => format!(
            "{} of {} ({})",
            fmt_pct(r.ratio),
            r.basis.describe(),
            match r.basis {
                crate::model::curve::RatedBasis::RandomReadIops
                | crate::model::curve::RatedBasis::RandomWriteIops => fmt_count(r.rated),
                _ => fmt_rate(r.rated),
            }
        ),
        None => "-".into(),
    }
}

fn identity_table(d: &DriveReport) -> String {
    let mut t = String::from("<table class=\"identity\">\n");
    let mut kv = |k: &str, v: String| t.push_str(&row(&[format!("<th>{}</th>", esc(k)), td(&v)]));
    if let Some(a) = &d.archived {
        kv("Archived run", a.describe());
    }
    match &d.device {
        Some(dev) => {
            kv("Model", dev.model.clone());
            kv("Serial", dev.serial.clone());
            kv("Firmware", dev.firmware.clone());
            kv("Capacity", fmt_capacity(dev.capacity_bytes as f64));
            kv("Controller", dev.controller.clone());
        }
        None => kv("Device", super::target_kind(&d.path).into()),
    }
    kv("Host", d.host.clone());
    kv("Target", format!("{} ({})", d.target, d.path));
    match &d.rated {
        Some(r) => {
            kv("Rated figures", r.source.clone());
            kv(
                "Rated random read / write",
                format!(
                    "{} / {} IOPS",
                    opt(r.random_read_iops, fmt_count),
                    opt(r.random_write_iops, fmt_count)
                ),
            );
            kv(
                "Rated sequential read / write",
                format!(
                    "{} / {}",
                    opt(r.seq_read_bytes_per_sec, fmt_rate),
                    opt(r.seq_write_bytes_per_sec, fmt_rate)
                ),
            );
            kv(
                "Rated endurance",
                format!(
                    "{} TBW, {} DWPD, {} years",
                    opt(r.tbw_bytes, fmt_datasheet_bytes),
                    opt(r.dwpd, |v| format!("{v}")),
                    opt(r.warranty_years, |v| format!("{v}"))
                ),
            );
        }
        None => kv("Rated figures", "not in the ratings table".into()),
    }
    t.push_str("</table>\n");
    t
}

fn sweeps_table(d: &DriveReport) -> String {
    let mut t = String::from(
        "<table class=\"sweeps\"><tr><th>Profile</th><th>Peak IOPS</th><th>Avg latency at peak</th>\
         <th>p99 at peak</th><th>Bandwidth at peak</th><th>Sub-1 ms (average)</th><th>Sub-1 ms (p99)</th>\
         <th>Of rated</th><th>Errors</th></tr>\n",
    );
    for s in &d.sweeps {
        let pk = s.peak.as_ref();
        t.push_str(&row(&[
            td(&format!(
                "{}{}",
                s.profile,
                if s.complete { "" } else { " (incomplete)" }
            )),
            num(&opt(pk, |p| fmt_count(p.iops))),
            num(&opt(pk, |p| fmt_latency_us(p.lat_avg_us))),
            num(&opt(pk, |p| fmt_latency_us(p.lat_p99_us))),
            num(&opt(pk, |p| fmt_rate(p.bytes_per_sec))),
            td(&opt(s.sub_ms.as_ref(), point_text)),
            td(&opt(s.sub_ms_p99.as_ref(), |p| {
                format!(
                    "{} IOPS at {} p99",
                    fmt_count(p.iops),
                    fmt_latency_us(p.lat_p99_us)
                )
            })),
            td(&rated_text(s)),
            num(&s.errors.to_string()),
        ]));
    }
    t.push_str("</table>\n");
    t
}

/// The shortfall cell of a point: "short 57 %" (flagged) when it fell more than 10 % below its
/// target rate, else empty.
fn short_cell(p: &CurvePoint) -> String {
    match crate::model::curve::shortfall(p) {
        Some(f) => format!("<td class=\"num short\">short {}</td>", fmt_pct(f)),
        None => "<td class=\"num\"></td>".into(),
    }
}

fn points_table(s: &SweepReport) -> String {
    let mut t = format!(
        "<details><summary>{} measured points of {}</summary><table class=\"points\"><tr><th>Load</th><th>Target IOPS</th>\
         <th>IOPS</th><th>Short of target</th><th>Bandwidth</th><th>Average</th><th>p99</th><th>Errors</th></tr>\n",
        s.curve.len(),
        esc(&s.profile)
    );
    for p in &s.curve {
        t.push_str(&row(&[
            td(&if p.uncontrolled {
                "uncontrolled".into()
            } else {
                format!("{} %", p.pct)
            }),
            num(&if p.uncontrolled {
                "-".into()
            } else {
                fmt_count(p.target_iops)
            }),
            num(&fmt_count(p.iops)),
            short_cell(p),
            num(&fmt_rate(p.bytes_per_sec)),
            num(&fmt_latency_us(p.lat_avg_us)),
            num(&fmt_latency_us(p.lat_p99_us)),
            num(&p.errors.to_string()),
        ]));
    }
    t.push_str("</table></details>\n");
    t
}

fn steady_table(d: &DriveReport) -> String {
    if d.steady.is_empty() {
        return "<p class=\"muted\">No steady-state evaluation recorded.</p>\n".into();
    }
    let mut t = String::from(
        "<table class=\"steady\"><tr><th>Profile</th><th>Reached</th><th>Round</th><th>Window IOPS</th>\
         <th>Window average</th><th>Range / average</th><th>Slope excursion / average</th></tr>\n",
    );
    for s in &d.steady {
        let window: Vec<String> = s.window.iter().map(|v| fmt_count(*v)).collect();
        t.push_str(&row(&[
            td(&s.profile),
            format!(
                "<td class=\"{}\">{}</td>",
                if s.reached { "ok" } else { "bad" },
                if s.reached { "yes" } else { "no" }
            ),
            num(&opt(s.round, |r| r.to_string())),
            td(&window.join(", ")),
            num(&fmt_count(s.average)),
            num(&fmt_pct(s.range_ratio)),
            num(&fmt_pct(s.slope_excursion_ratio)),
        ]));
    }
    t.push_str("</table>\n");
    t
}

/// The soak table's thermal throttling figure: time throttled and the IOPS it cost.
fn throttling_text(s: &compute::SoakFigures) -> String {
    match s.throttled_secs {
        Some(t) => format!(
            "{} ({} of the soak), IOPS {} throttled vs {} unthrottled: {} lost",
            fmt_elapsed(t),
            opt(s.throttled_ratio, fmt_pct),
            opt(s.iops_throttled, fmt_count),
            opt(s.iops_unthrottled, fmt_count),
            opt(s.throttle_iops_cost_ratio, fmt_pct)
        ),
        None => "-".into(),
    }
}

/// The soak table's accounting check: the drive's bytes written (SMART) beside nvsoak's.
fn accounting_text(s: &compute::SoakFigures) -> String {
    match (s.smart_written_bytes_delta, s.accounting_ratio) {
        (Some(d), Some(r)) => format!(
            "{} by SMART vs {} by nvsoak: ratio {r:.3}",
            fmt_bytes(d as f64),
            // Over the same period when the drive figures pair them, else the soak's total.
            fmt_bytes(
                s.drive
                    .as_ref()
                    .and_then(|x| x.nvsoak_written_bytes)
                    .unwrap_or(s.written_bytes) as f64
            )
        ),
        _ => "-".into(),
    }
}

fn soak_table(d: &DriveReport) -> String {
    let Some(s) = &d.soak else {
        return "<p class=\"muted\">No soak recorded.</p>\n".into();
    };
    let mut t = String::from("<table class=\"soak\">\n");
    let mut kv = |k: &str, v: String, bad: bool| {
        t.push_str(&row(&[
            format!("<th>{}</th>", esc(k)),
            format!(
                "<td{}>{}</td>",
                if bad { " class=\"bad\"" } else { "" },
                esc(&v)
            ),
        ]))
    };
    for (i, l) in compute::soak_phase_lines(s).into_iter().enumerate() {
        kv(if i == 0 { "Soak phases" } else { "" }, l, false);
    }
    // The soak's own figures (its phases' sum), then the whole plan's from `soak.plan`.
    kv("Soak duration", fmt_elapsed(s.elapsed_secs), false);
    kv(
        "Soak written / read",
        format!(
            "{} / {}",
            fmt_bytes(s.written_bytes as f64),
            fmt_bytes(s.read_bytes as f64)
        ),
        false,
    );
    if let Some(p) = compute::plan_text(s) {
        kv("Whole plan, every phase", p, false);
    }
    let mut dwpd = format!(
        "{} (rated {})",
        opt(s.observed_dwpd, |v| format!("{v:.2}")),
        opt(s.rated_dwpd, |v| format!("{v}"))
    );
    if let Some(r) = s.dwpd_ratio {
        dwpd.push_str(&format!(": {} of rated", fmt_pct(r)));
    }
    kv("Observed DWPD", dwpd, false);
    kv(
        "Endurance consumed",
        opt(s.endurance_consumed_ratio, |r| {
            format!("{:.3} %", r * 100.0)
        }),
        false,
    );
    kv("Thermal throttling", throttling_text(s), false);
    if let Some(cpu) = compute::cpu_text(s) {
        kv("Worker CPU, soak phases", cpu, false);
    }
    kv("I/O errors", s.errors.to_string(), s.errors > 0);
    kv(
        "Verify errors",
        s.verify_errors.to_string(),
        s.verify_errors > 0,
    );
    kv(
        "Accounting check (drive / host written)",
        accounting_text(s),
        s.accounting_off == Some(true),
    );
    t.push_str("</table>\n");
    t
}

fn drive_section(d: &DriveReport) -> String {
    let Some(s) = &d.soak else {
        return String::new();
    };
    let Some(dr) = &s.drive else {
        return "<p class=\"muted\">No drive-side figures: not an NVMe namespace, health polling off, or no successful SMART poll during the soak.</p>\n".into();
    };
    let mut h = String::new();
    if s.callouts.is_empty() {
        h.push_str("<p class=\"ok\">No media errors, accounting agrees, no throttling.</p>\n");
    }
    for c in &s.callouts {
        h.push_str(&format!("<p class=\"bad callout\">{}</p>\n", esc(c)));
    }
    h.push_str("<table class=\"drive-soak\">\n");
    for (k, v, bad) in super::drive::rows(dr) {
        h.push_str(&row(&[
            format!("<th>{}</th>", esc(k)),
            format!(
                "<td{}>{}</td>",
                if bad { " class=\"bad\"" } else { "" },
                esc(&v)
            ),
        ]));
    }
    h.push_str("</table>\n");
    h
}

/// The soak figures of every drive side by side (only with more than one drive).
fn drive_comparison_table(report: &Report) -> String {
    let soaks: Vec<(&str, &super::compute::SoakFigures)> = report
        .drives
        .iter()
        .filter_map(|d| d.soak.as_ref().map(|s| (d.label.as_str(), s)))
        .collect();
    if report.drives.len() < 2 || soaks.is_empty() {
        return String::new();
    }
    let mut t = String::from(
        "<h3 id=\"cmp-soak\">Drives during the soak</h3>\n<table class=\"drive-comparison\"><tr><th>Drive</th>",
    );
    for c in super::compute::DRIVE_COMPARISON_HEADERS {
        t.push_str(&format!("<th>{}</th>", esc(c)));
    }
    t.push_str("<th>Verdict</th></tr>\n");
    for r in super::compute::drive_comparison(soaks.into_iter()) {
        let mut cells = vec![td(&r.drive)];
        cells.extend(r.cells.iter().map(|c| num(c)));
        cells.push(match r.verdict_text() {
            (true, t) => format!("<td class=\"bad\">{}</td>", esc(&t)),
            (false, t) if r.drive_data => format!("<td class=\"ok\">{}</td>", esc(&t)),
            (false, t) => format!("<td class=\"muted\">{}</td>", esc(&t)),
        });
        t.push_str(&row(&cells));
    }
    t.push_str("</table>\n");
    t
}

pub fn render(report: &Report) -> Result<String, ReportError> {
    let figs = figures(report)?;
    let mut h = String::new();
    h.push_str("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n");
    h.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    h.push_str("<title>nvsoak qualification report</title>\n<style>");
    h.push_str(CSS);
    h.push_str("</style></head><body>\n");
    h.push_str(&format!(
        "<h1>nvsoak qualification report</h1>\n<p class=\"muted\">{}, generated {} by nvsoak {}. \
         Sub-1 ms frontier: {}.</p>\n",
        report.drives_text(),
        fmt_time(report.generated),
        esc(&report.nvsoak_version),
        esc(&report.frontier_basis)
    ));
    h.push_str(&super::verdict::html(report));
    if let Some(b) = &report.batch {
        h.push_str(&super::batch::html(b));
    }
    let soak_cmp = drive_comparison_table(report);
    if !report.comparisons.is_empty() || !soak_cmp.is_empty() {
        h.push_str("<h2 id=\"comparison\">Comparison</h2>\n");
    }
    h.push_str(&soak_cmp);
    for (c, f) in report.comparisons.iter().zip(&figs.comparisons) {
        h.push_str(&format!(
            "<h3 id=\"cmp-{}\">{}</h3>\n",
            esc(&slug(&c.profile)),
            esc(&c.profile)
        ));
        if report.drives.len() <= super::batch::MAX_CHART_DRIVES {
            h.push_str("<div class=\"charts\">");
            h.push_str(&figure_html(f));
            h.push_str("</div>\n");
        } else {
            h.push_str(&format!(
                "<p class=\"muted\">No comparison chart for {} drives (one curve each would be unreadable): see the ranking below and the batch tables above.</p>\n",
                report.drives.len()
            ));
        }
        h.push_str("<table class=\"ranking\"><tr><th>Rank</th><th>Drive</th><th>Peak IOPS</th><th>Average at peak</th><th>p99 at peak</th><th>Sub-1 ms IOPS</th><th>Result</th></tr>\n");
        for e in &c.ranking {
            h.push_str(&row(&[
                num(&e.rank.to_string()),
                td(&e.drive),
                num(&fmt_count(e.peak_iops)),
                num(&fmt_latency_us(e.lat_avg_us_at_peak)),
                num(&fmt_latency_us(e.lat_p99_us_at_peak)),
                num(&opt(e.sub_ms_iops, fmt_count)),
                td(&format!("{}: {}", e.drive, e.summary)),
            ]));
        }
        h.push_str("</table>\n");
    }
    for (i, (d, fs)) in report.drives.iter().zip(&figs.drives).enumerate() {
        h.push_str(&format!(
            "<h2 id=\"drive{}\">{}</h2>\n",
            i + 1,
            esc(&d.label)
        ));
        h.push_str(&identity_table(d));
        if d.sweeps.is_empty() {
            h.push_str("<p class=\"muted\">No sweep recorded.</p>\n");
        } else {
            h.push_str("<h3>Sweeps</h3>\n");
            h.push_str(&sweeps_table(d));
        }
        for (s, (avg, p99)) in d.sweeps.iter().zip(fs) {
            h.push_str(&format!(
                "<h3>{}</h3>\n<p>Peak {}; {}.</p>\n<div class=\"charts\">",
                esc(&s.profile),
                esc(&opt(s.peak.as_ref(), point_text)),
                esc(&frontier_text(s))
            ));
            h.push_str(&figure_html(avg));
            h.push_str(&figure_html(p99));
            h.push_str("</div>\n");
            h.push_str(&points_table(s));
        }
        h.push_str("<h3>Steady state</h3>\n");
        h.push_str(&steady_table(d));
        h.push_str("<h3>Soak</h3>\n");
        h.push_str(&soak_table(d));
        h.push_str(&super::soakchart::report_html(i, d));
        h.push_str(&super::ocp_phases::html(d));
        if d.soak.is_some() {
            h.push_str("<h3>Drive during the soak</h3>\n");
            h.push_str(&drive_section(d));
        }
    }
    h.push_str("</body></html>\n");
    Ok(h)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_time() {
        assert_eq!(fmt_time(0.0), "1970-01-01 00:00:00 UTC");
        // 2026-12-01 00:00:00 UTC = 1796083200.
        assert_eq!(fmt_time(1_796_083_200.0), "2026-12-01 00:00:00 UTC");
        assert_eq!(fmt_time(951_782_400.0 + 3661.0), "2000-02-29 01:01:01 UTC");
    }

    #[test]
    fn a_loop_device_is_a_block_device_not_a_file() {
        assert_eq!(
            crate::report::target_kind("/dev/loop3"),
            "a block device (not an NVMe namespace)"
        );
        assert_eq!(
            crate::report::target_kind("/dev/sda"),
            "a block device (not an NVMe namespace)"
        );
        assert_eq!(
            crate::report::target_kind("/dev/shm/t.img"),
            "a file (not an NVMe namespace)"
        );
        assert_eq!(
            crate::report::target_kind("/var/tmp/t.img"),
            "a file (not an NVMe namespace)"
        );
    }

    #[test]
    fn slugs() {
        assert_eq!(slug("4k-random-read"), "4k-random-read");
        assert_eq!(slug("My Job / 2"), "my-job-2");
    }
}
