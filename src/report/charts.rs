//! The report's SVG charts, drawn by hand: the shared pieces (palette, escaping, number labels,
//! tick steps, value-to-pixel scales) and the line chart. The soak chart ([`super::soakchart`])
//! is drawn with the same pieces. No fonts are needed: SVG text is rendered by the viewer.
//!
//! Each data series is one `<polyline class="series" data-series="NAME">` (stroke width 2),
//! and on a time chart one more `<polyline class="series series-continued">` after each gap
//! in its samples ([`LineChart::gap`]), with a `<circle>` per point; axes and ticks are 1 px lines, the reference line (1 ms) is a
//! 1 px grey line, and legend swatches are `<rect>`s. The root element carries
//! `class="chart"` and `data-series-count`, so tests and tools can count the series.
//!
//! Architecture Invariant: charts are pure functions from numbers to SVG text; no I/O.

use std::fmt::Write as _;

use thiserror::Error;

#[derive(Debug, Error)]
pub enum ChartError {
    #[error("drawing chart {title:?} failed: {detail}")]
    Draw { title: String, detail: String },
}

/// One named line.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

/// A horizontal reference line (e.g. 1 ms).
#[derive(Debug, Clone, PartialEq)]
pub struct RefLine {
    pub y: f64,
    pub label: String,
}

#[derive(Debug, Clone)]
pub struct LineChart<'a> {
    pub title: &'a str,
    pub x_desc: &'a str,
    pub y_desc: &'a str,
    pub width: u32,
    pub height: u32,
    pub series: &'a [Series],
    /// Fixed x range; `None`: 0 to the largest x plus 5 %.
    pub x_range: Option<(f64, f64)>,
    /// Drawn when it falls inside the data's y range (so it never squashes a chart).
    pub reference: Option<RefLine>,
    pub legend: bool,
    /// What an axis's values are, which decides its tick labels (see [`Unit`]).
    pub x_unit: Unit,
    pub y_unit: Unit,
    /// x is minutes relative to now (negative: the past): labels read as time, "60 s ago" …
    /// "now" (seconds under two minutes, whole minutes beyond), instead of plain numbers.
    pub x_ago: bool,
    /// A logarithmic y axis when the largest positive value is more than [`LOG_RATIO`] times
    /// the smallest (one slow point would flatten the rest).
    pub y_log_auto: bool,
    /// Draw a marker per point (off for dense time series).
    pub markers: bool,
    /// Points to flag with a distinct marker (a red ring, `class="flagged"`), e.g. sweep points
    /// that fell short of their target rate; `flag_label` is their legend text.
    pub flagged: &'a [(f64, f64)],
    pub flag_label: &'a str,
    /// A time series' largest step between neighbouring points, in x units: beyond it the
    /// samples have a gap (the daemon was down, the target was stopped) and the line breaks
    /// there, so missing data is drawn as a gap, never bridged or read as zero. Each part
    /// after a break is its own `<polyline class="series series-continued">`. `None`: one
    /// line through every point (a sweep's curve).
    pub gap: Option<f64>,
}

/// What the values of an axis are, and so how its ticks read. A unit is in the tick labels
/// themselves whenever it changes along the axis (latency from µs to ms to s), so an axis
/// never reads "600k" microseconds or "200M" bytes per second.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Unit {
    /// Plain numbers ("0.5", "120").
    #[default]
    Plain,
    /// A count or a rate of operations with SI prefixes: "12k", "1.2M" (IOPS).
    Si,
    /// Microseconds, labelled in µs, ms or s as they grow: "500 µs", "1.5 ms", "2 s".
    LatencyUs,
    /// Bytes per second, SI prefixes: "200 MB/s" (rates are SI, as everywhere in nvsoak).
    BytesPerSec,
    /// Bytes, IEC prefixes: "512 KiB", "4 GiB" (sizes are IEC).
    Bytes,
}

impl Unit {
    /// The tick label of `v`.
    pub fn label(self, v: f64) -> String {
        match self {
            Unit::Plain => plain(v),
            Unit::Si => si(v),
            Unit::LatencyUs => latency_label(v),
            Unit::BytesPerSec => {
                let s = si(v);
                // si() appends the prefix letter; "k" stays lower case as SI writes it.
                let (num, prefix) = match s.char_indices().last() {
                    Some((i, c)) if c.is_ascii_alphabetic() => (&s[..i], &s[i..]),
                    _ => (s.as_str(), ""),
                };
                format!("{num} {prefix}B/s")
            }
            Unit::Bytes => iec_label(v),
        }
    }
}

/// A latency tick from microseconds: "0", "100 µs", "1 ms", "2.5 ms", "1 s".
pub fn latency_label(us: f64) -> String {
    let a = us.abs();
    if a == 0.0 {
        "0".into()
    } else if a >= 1e6 {
        format!("{} s", trim(us / 1e6))
    } else if a >= 1000.0 {
        format!("{} ms", trim(us / 1000.0))
    } else {
        format!("{} µs", trim(us))
    }
}

/// A size tick from bytes, IEC prefixes: "0", "512 B", "4 KiB", "1.5 GiB".
pub fn iec_label(b: f64) -> String {
    if b == 0.0 || !b.is_finite() {
        return plain(b);
    }
    let (v, unit) = crate::model::fmt::iec_scale(b);
    format!("{} {unit}", trim(v))
}

/// At most three significant digits past the point, trailing zeros dropped: 2.50 -> "2.5".
fn trim(v: f64) -> String {
    let s = if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    };
    let s = if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    };
    if s == "-0" { "0".into() } else { s }
}

/// Series colours (Tableau 10), assigned in order.
pub const PALETTE: [&str; 10] = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf",
];

/// The text font of every chart.
pub(super) const FONT: &str = "font-family=\"sans-serif\"";

/// Above this max/min ratio a latency axis is logarithmic.
pub const LOG_RATIO: f64 = 30.0;

/// Whether a latency axis over these values should be logarithmic.
pub fn wants_log(values: &[f64]) -> bool {
    let pos = values.iter().copied().filter(|v| v.is_finite() && *v > 0.0);
    let (lo, hi) = pos.fold((f64::INFINITY, 0.0f64), |(a, b), v| (a.min(v), b.max(v)));
    lo.is_finite() && hi / lo > LOG_RATIO
}

/// A "nice" tick step (1, 2, 5 x 10^n) giving about `n` ticks over `range`.
pub fn nice_step(range: f64, n: f64) -> f64 {
    if !(range.is_finite() && range > 0.0) {
        return 1.0;
    }
    let raw = range / n.max(1.0);
    let mag = 10f64.powf(raw.log10().floor());
    let f = raw / mag;
    let m = if f <= 1.0 {
        1.0
    } else if f <= 2.0 {
        2.0
    } else if f <= 5.0 {
        5.0
    } else {
        10.0
    };
    m * mag
}

/// A value axis: maps `lo..=hi` (linearly or by decades) onto the pixels `from..=to`
/// (`from` is where `lo` lands: the bottom of a y axis, the left of an x axis).
#[derive(Debug, Clone, Copy)]
pub(super) struct Scale {
    pub log: bool,
    pub lo: f64,
    pub hi: f64,
    pub from: f64,
    pub to: f64,
}

impl Scale {
    /// The pixel of `v`, held inside the axis.
    pub fn px(&self, v: f64) -> f64 {
        let f = if self.log {
            (v.max(self.lo).log10() - self.lo.log10()) / (self.hi.log10() - self.lo.log10())
        } else {
            (v - self.lo) / (self.hi - self.lo)
        };
        // An axis too narrow, too wide or not finite (from hostile figures) puts its points at
        // its start rather than at NaN.
        self.from + (self.to - self.from) * if f.is_nan() { 0.0 } else { f.clamp(0.0, 1.0) }
    }

    /// Tick values: about `n` nice steps on a linear axis (whole multiples of the step, so
    /// "0" and "now" land exactly), each power of ten on a logarithmic one.
    pub fn ticks(&self, n: f64) -> Vec<f64> {
        // A figure read from a results file can be anything a float holds; an axis over it
        // gets no ticks rather than billions of them.
        if !(self.lo.is_finite() && self.hi.is_finite()) || self.hi < self.lo {
            return Vec::new();
        }
        if self.log {
            if self.lo <= 0.0 {
                return Vec::new();
            }
            let (a, b) = (
                self.lo.log10().floor() as i32,
                self.hi.log10().ceil() as i32,
            );
            (a..=b.min(a.saturating_add(MAX_TICKS)))
                .map(|e| 10f64.powi(e))
                .filter(|v| *v >= self.lo * 0.999 && *v <= self.hi * 1.001)
                .collect()
        } else {
            let step = nice_step(self.hi - self.lo, n);
            let first = (self.lo / step - 1e-9).ceil() as i64;
            let last = (self.hi / step + 1e-9).floor() as i64;
            (first..=last.min(first.saturating_add(i64::from(MAX_TICKS))))
                .map(|k| k as f64 * step)
                .collect()
        }
    }
}

/// The most ticks one axis draws, whatever its range.
const MAX_TICKS: i32 = 40;

/// 1234567 -> "1.23M", 12000 -> "12k", 0.5 -> "0.5".
pub fn si(v: f64) -> String {
    let a = v.abs();
    let (x, suffix) = if a >= 1e9 {
        (v / 1e9, "G")
    } else if a >= 1e6 {
        (v / 1e6, "M")
    } else if a >= 1e3 {
        (v / 1e3, "k")
    } else {
        (v, "")
    };
    let s = if x.abs() >= 100.0 || x.fract() == 0.0 {
        format!("{x:.0}")
    } else if x.abs() >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    };
    let s = if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    };
    format!("{s}{suffix}")
}

/// A time-axis label for `minutes` relative to now: "now", "45 s ago", "5 min ago".
pub fn ago(minutes: f64) -> String {
    let secs = (-minutes * 60.0).round();
    if !secs.is_finite() {
        "-".to_string()
    } else if secs.abs() < 0.5 {
        "now".to_string()
    } else if secs < 120.0 {
        format!("{secs:.0} s ago")
    } else {
        format!("{} min ago", plain((secs / 60.0 * 10.0).round() / 10.0))
    }
}

fn plain(v: f64) -> String {
    let s = if v.abs() >= 100.0 || v.fract() == 0.0 {
        format!("{v:.0}")
    } else if v.abs() >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    };
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// Height of one legend row below the plot.
const LEGEND_ROW: u32 = 18;

/// One legend entry: a swatch colour (or a red ring for flagged points) and its text.
struct LegendEntry {
    color: Option<&'static str>,
    text: String,
}

/// Lay the legend entries out in rows across `width` (a rough 7 px per character at 12 px);
/// returns each entry's (x, row).
fn legend_layout(entries: &[LegendEntry], width: u32) -> Vec<(u32, u32)> {
    let (mut x, mut row) = (8u32, 0u32);
    let mut out = Vec::with_capacity(entries.len());
    for e in entries {
        let w = 22 + (e.text.chars().count() as f64 * 7.0).ceil() as u32 + 14;
        if x > 8 && x + w > width.saturating_sub(8) {
            row += 1;
            x = 8;
        }
        out.push((x, row));
        x += w;
    }
    out
}

/// The line chart's frame: the plot area in pixels and the sizes of its text, from the chart's
/// size (a chart under 200 px high is a "small" one, with less room around the plot).
struct Frame {
    left: f64,
    right: f64,
    top: f64,
    bottom: f64,
    small: bool,
}

impl Frame {
    fn of(c: &LineChart<'_>) -> Result<Frame, ChartError> {
        let small = c.height < 200;
        let (margin, caption, x_area, y_area) = if small {
            (4.0, 13.0, 34.0, 44.0)
        } else {
            (8.0, 16.0, 42.0, 66.0)
        };
        // Room for the last time label ("now"), centred on the right edge of the plot.
        let margin_right = if c.x_ago { 16.0 } else { margin };
        let f = Frame {
            left: margin + y_area,
            right: f64::from(c.width) - margin_right,
            top: margin + caption + 8.0,
            bottom: f64::from(c.height) - margin - x_area,
            small,
        };
        if f.right - f.left < 10.0 || f.bottom - f.top < 10.0 {
            return Err(ChartError::Draw {
                title: c.title.to_string(),
                detail: format!(
                    "{}x{} px leaves no room for the plot area",
                    c.width, c.height
                ),
            });
        }
        Ok(f)
    }

    fn label_size(&self) -> u32 {
        if self.small { 11 } else { 13 }
    }
}

/// A text element; the text stands on its own line (tools read labels line by line).
fn text(out: &mut String, x: f64, y: f64, attrs: &str, size: u32, s: &str) {
    let _ = writeln!(
        out,
        "<text x=\"{x:.1}\" y=\"{y:.1}\" {attrs} {FONT} font-size=\"{size}\">\n{}\n</text>",
        esc(s)
    );
}

/// Draw the chart; returns the SVG document as a string. Fails only when the size leaves no
/// room for the plot.
///
/// The legend (series names, and the flagged points' meaning) is drawn in its own strip below
/// the plot, as `<g class="legend">`, so it never hides a point; the plot area is marked with
/// an invisible `<rect class="plot-area">` for layout checks.
pub fn line_chart(c: &LineChart<'_>) -> Result<String, ChartError> {
    let frame = Frame::of(c)?;
    let drawn: Vec<(usize, &Series)> = c
        .series
        .iter()
        .enumerate()
        .filter(|(_, s)| s.points.iter().any(|(x, y)| x.is_finite() && y.is_finite()))
        .collect();
    let (xs, ys, max_y) = scales(c, &drawn, &frame);
    let entries = legend_entries(c, &drawn);
    let layout = legend_layout(&entries, c.width);
    let legend_h = layout
        .last()
        .map(|(_, row)| (row + 1) * LEGEND_ROW + 6)
        .unwrap_or(0);
    let (w, h) = (c.width, c.height + legend_h);

    let mut s = String::new();
    let _ = writeln!(
        s,
        "<svg class=\"chart\" role=\"img\" data-series-count=\"{}\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" xmlns=\"http://www.w3.org/2000/svg\">",
        drawn.len()
    );
    let _ = writeln!(s, "<title>{}</title>", esc(c.title));
    let _ = writeln!(s, "<rect width=\"100%\" height=\"100%\" fill=\"#fff\"/>");
    text(
        &mut s,
        f64::from(c.width) / 2.0,
        if frame.small { 17.0 } else { 24.0 },
        "text-anchor=\"middle\"",
        if frame.small { 13 } else { 16 },
        c.title,
    );
    axes(&mut s, c, &frame, &xs, &ys);
    // The reference is drawn only inside the data's range, so it never squashes a chart.
    let reference = c.reference.as_ref();
    if let Some(r) = reference.filter(|r| r.y > 0.0 && r.y >= ys.lo && r.y <= max_y) {
        let py = ys.px(r.y);
        let _ = writeln!(
            s,
            "<line class=\"reference\" x1=\"{:.1}\" x2=\"{:.1}\" y1=\"{py:.1}\" y2=\"{py:.1}\" stroke=\"#555\"/>",
            frame.left, frame.right
        );
        // Just above the line, clear of the y axis.
        let lx = frame.left + (frame.right - frame.left) * 0.015;
        text(&mut s, lx, py - 4.0, "fill=\"#555\"", 13, &r.label);
    }
    let keep = |&(x, y): &(f64, f64)| x.is_finite() && y.is_finite() && (!ys.log || y > 0.0);
    for (i, series) in &drawn {
        let color = PALETTE[i % PALETTE.len()];
        let pts = within_budget(series.points.iter().copied().filter(keep).collect());
        for (k, part) in split_at_gaps(&pts, c.gap).into_iter().enumerate() {
            let coords: Vec<String> = part
                .iter()
                .map(|(x, y)| format!("{:.1},{:.1}", xs.px(*x), ys.px(*y)))
                .collect();
            let _ = writeln!(
                s,
                "<polyline class=\"{}\" data-series=\"{}\" points=\"{}\" fill=\"none\" stroke=\"{color}\" stroke-width=\"2\"/>",
                if k == 0 {
                    "series"
                } else {
                    "series series-continued"
                },
                esc(&series.name),
                coords.join(" ")
            );
            // A lone sample between two gaps is a dot (a one-point line draws nothing).
            if !c.markers && part.len() == 1 {
                let _ = writeln!(
                    s,
                    "<circle class=\"lone\" cx=\"{:.1}\" cy=\"{:.1}\" r=\"2\" fill=\"{color}\"/>",
                    xs.px(part[0].0),
                    ys.px(part[0].1)
                );
            }
        }
        if c.markers {
            for (x, y) in &pts {
                let _ = writeln!(
                    s,
                    "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"3\" fill=\"{color}\"/>",
                    xs.px(*x),
                    ys.px(*y)
                );
            }
        }
    }
    let flagged = within_budget(c.flagged.iter().copied().filter(keep).collect());
    flag_points(&mut s, &flagged, &xs, &ys);
    plot_area_rect(&mut s, &frame, ys.log);
    legend_svg(&mut s, &entries, &layout, c.height);
    s.push_str("</svg>\n");
    Ok(s)
}

/// `pts` (in x order) cut where neighbours are more than `gap` apart; one part without a gap.
pub fn split_at_gaps(pts: &[(f64, f64)], gap: Option<f64>) -> Vec<&[(f64, f64)]> {
    let Some(gap) = gap.filter(|g| g.is_finite() && *g > 0.0) else {
        return vec![pts];
    };
    let mut parts = Vec::new();
    let mut from = 0;
    for i in 1..pts.len() {
        if pts[i].0 - pts[i - 1].0 > gap {
            parts.push(&pts[from..i]);
            from = i;
        }
    }
    parts.push(&pts[from..]);
    parts
}

/// The most points one series (or the flagged points) of a line chart draws. A sweep has a
/// few dozen; only a damaged or edited file has more.
pub const MAX_SERIES_POINTS: usize = 2000;

/// `pts`, or every k-th of them and the last when there are more than [`MAX_SERIES_POINTS`].
fn within_budget(pts: Vec<(f64, f64)>) -> Vec<(f64, f64)> {
    if pts.len() <= MAX_SERIES_POINTS {
        return pts;
    }
    let every = pts.len().div_ceil(MAX_SERIES_POINTS - 1);
    let last = pts[pts.len() - 1];
    let mut out: Vec<(f64, f64)> = pts.into_iter().step_by(every).collect();
    out.push(last);
    out
}

/// The x and y scales, and the largest y: the x range (the chart's own, else from the data,
/// never empty); the y range from 0 (linear) or by whole decades (logarithmic, when asked for
/// and wanted).
fn scales(c: &LineChart<'_>, drawn: &[(usize, &Series)], f: &Frame) -> (Scale, Scale, f64) {
    let finite = |v: &f64| v.is_finite();
    let xs = || {
        drawn
            .iter()
            .flat_map(|(_, s)| s.points.iter().map(|p| p.0))
            .filter(finite)
    };
    let ys: Vec<f64> = drawn
        .iter()
        .flat_map(|(_, s)| s.points.iter().map(|p| p.1))
        .filter(finite)
        .collect();
    let max_x = xs().fold(0.0f64, f64::max);
    let min_x = xs().fold(0.0f64, f64::min);
    let max_y = ys.iter().copied().fold(0.0f64, f64::max);
    let (x0, x1) = c
        .x_range
        .unwrap_or((min_x, if max_x > 0.0 { max_x * 1.05 } else { 1.0 }));
    let x1 = if x1 > x0 { x1 } else { x0 + 1.0 };
    let log = c.y_log_auto && wants_log(&ys);
    let (y0, y1) = if log {
        let lo = ys
            .iter()
            .copied()
            .filter(|v| *v > 0.0)
            .fold(f64::INFINITY, f64::min);
        (
            10f64.powf(lo.log10().floor()),
            10f64.powf(max_y.log10().ceil()),
        )
    } else {
        (0.0, if max_y > 0.0 { max_y * 1.1 } else { 1.0 })
    };
    let x = Scale {
        log: false,
        lo: x0,
        hi: x1,
        from: f.left,
        to: f.right,
    };
    let y = Scale {
        log,
        lo: y0,
        hi: y1,
        from: f.bottom,
        to: f.top,
    };
    (x, y, max_y)
}

/// Grid, tick labels, both axis lines and the axis descriptions.
fn axes(s: &mut String, c: &LineChart<'_>, f: &Frame, xs: &Scale, ys: &Scale) {
    let size = f.label_size();
    let desc = if f.small { 11 } else { 14 };
    for v in xs.ticks(if f.small { 5.0 } else { 8.0 }) {
        let px = xs.px(v);
        let label = if c.x_ago { ago(v) } else { c.x_unit.label(v) };
        let _ = writeln!(
            s,
            "<line x1=\"{px:.1}\" x2=\"{px:.1}\" y1=\"{:.1}\" y2=\"{:.1}\" stroke=\"#eee\"/>\n<line x1=\"{px:.1}\" x2=\"{px:.1}\" y1=\"{:.1}\" y2=\"{:.1}\" stroke=\"#000\"/>",
            f.top,
            f.bottom,
            f.bottom,
            f.bottom + 5.0
        );
        let y = f.bottom + 8.0 + f64::from(size);
        text(s, px, y, "text-anchor=\"middle\"", size, &label);
    }
    for v in ys.ticks(if f.small { 4.0 } else { 8.0 }) {
        let py = ys.px(v);
        let label = c.y_unit.label(v);
        let _ = writeln!(
            s,
            "<line x1=\"{:.1}\" x2=\"{:.1}\" y1=\"{py:.1}\" y2=\"{py:.1}\" stroke=\"#eee\"/>\n<line x1=\"{:.1}\" x2=\"{:.1}\" y1=\"{py:.1}\" y2=\"{py:.1}\" stroke=\"#000\"/>",
            f.left,
            f.right,
            f.left - 5.0,
            f.left
        );
        let y = py + f64::from(size) / 3.0;
        text(s, f.left - 8.0, y, "text-anchor=\"end\"", size, &label);
    }
    let _ = writeln!(
        s,
        "<polyline points=\"{l:.1},{t:.1} {l:.1},{b:.1} {r:.1},{b:.1}\" fill=\"none\" stroke=\"#000\"/>",
        l = f.left,
        t = f.top,
        b = f.bottom,
        r = f.right
    );
    if !c.x_desc.is_empty() {
        let y = f64::from(c.height) - if f.small { 4.0 } else { 8.0 };
        let x = (f.left + f.right) / 2.0;
        text(s, x, y, "text-anchor=\"middle\"", desc, c.x_desc);
    }
    let y_desc = if ys.log {
        format!("{} (log scale)", c.y_desc)
    } else {
        c.y_desc.to_string()
    };
    if !y_desc.is_empty() {
        let (x, y) = (f64::from(desc) + 2.0, (f.top + f.bottom) / 2.0);
        let rotate = format!("text-anchor=\"middle\" transform=\"rotate(-90 {x:.1} {y:.1})\"");
        text(s, x, y, &rotate, desc, &y_desc);
    }
}

/// The legend's entries: each drawn series, then the flagged points' meaning.
fn legend_entries(c: &LineChart<'_>, drawn: &[(usize, &Series)]) -> Vec<LegendEntry> {
    let mut entries: Vec<LegendEntry> = Vec::new();
    if c.legend {
        entries.extend(drawn.iter().map(|(i, s)| LegendEntry {
            color: Some(PALETTE[i % PALETTE.len()]),
            text: s.name.clone(),
        }));
    }
    let any_flagged = c
        .flagged
        .iter()
        .any(|(x, y)| x.is_finite() && y.is_finite());
    if any_flagged && !c.flag_label.is_empty() {
        entries.push(LegendEntry {
            color: None,
            text: c.flag_label.to_string(),
        });
    }
    entries
}

/// An invisible rectangle over the plot area (tests and tools check the legend against it).
fn plot_area_rect(s: &mut String, f: &Frame, log: bool) {
    let _ = writeln!(
        s,
        "<rect class=\"plot-area\" data-y-scale=\"{}\" x=\"{:.0}\" y=\"{:.0}\" width=\"{:.0}\" height=\"{:.0}\" fill=\"none\" stroke=\"none\"/>",
        if log { "log" } else { "linear" },
        f.left,
        f.top,
        f.right - f.left,
        f.bottom - f.top
    );
}

/// The legend strip below the plot: a swatch (or a red ring for flagged points) and a name
/// per entry.
fn legend_svg(g: &mut String, entries: &[LegendEntry], layout: &[(u32, u32)], top: u32) {
    if entries.is_empty() {
        return;
    }
    g.push_str("<g class=\"legend\">\n");
    for (e, (x, row)) in entries.iter().zip(layout) {
        let cy = top + row * LEGEND_ROW + LEGEND_ROW / 2 + 3;
        match e.color {
            Some(color) => {
                let _ = writeln!(
                    g,
                    "<rect class=\"swatch\" x=\"{x}\" y=\"{}\" width=\"14\" height=\"8\" fill=\"{color}\"/>",
                    cy - 4
                );
            }
            None => {
                let _ = writeln!(
                    g,
                    "<circle class=\"swatch flagged-key\" cx=\"{}\" cy=\"{cy}\" r=\"6\" fill=\"none\" stroke=\"#d62728\" stroke-width=\"1.5\"/>",
                    x + 7
                );
            }
        }
        let _ = writeln!(
            g,
            "<text class=\"{}\" x=\"{}\" y=\"{}\" {FONT} font-size=\"12\" fill=\"{}\">{}</text>",
            if e.color.is_some() {
                "legend-label"
            } else {
                "legend-label flag-label"
            },
            x + 20,
            cy + 4,
            if e.color.is_some() { "#333" } else { "#d62728" },
            esc(&e.text)
        );
    }
    g.push_str("</g>\n");
}

/// Ring each flagged point in red, where its marker is (the legend strip says what a ring
/// means); nothing is added when none is flagged.
fn flag_points(s: &mut String, pts: &[(f64, f64)], xs: &Scale, ys: &Scale) {
    if pts.is_empty() {
        return;
    }
    let _ = writeln!(
        s,
        "<g class=\"flagged\" data-flagged-count=\"{}\">",
        pts.len()
    );
    for (x, y) in pts {
        let _ = writeln!(
            s,
            "<circle class=\"flagged\" cx=\"{:.1}\" cy=\"{:.1}\" r=\"7\" fill=\"none\" stroke=\"#d62728\" stroke-width=\"1.5\"/>",
            xs.px(*x),
            ys.px(*y)
        );
    }
    s.push_str("</g>\n");
}

/// Escape text for HTML/SVG content and attribute values. A control character other than a
/// tab or a line break, which neither HTML nor an SVG file may hold, becomes U+FFFD.
pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            '\t' | '\n' | '\r' => o.push(ch),
            c if c.is_control() => o.push('\u{FFFD}'),
            c => o.push(c),
        }
    }
    o
}

#[cfg(test)]
mod tests;
