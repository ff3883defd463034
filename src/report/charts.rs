//! SVG line charts drawn with plotters' SVG backend (no fonts needed: SVG text is rendered by
//! the viewer).
//!
//! Each data series is one `<polyline class="series" data-series="NAME">` (stroke width 2),
//! with a `<circle>` per point; axes and ticks are 1 px polylines, the reference line (1 ms) is
//! a 1 px grey polyline, and legend swatches are `<rect>`s. The root element carries
//! `class="chart"` and `data-series-count`, so tests and tools can count the series.
//!
//! Architecture Invariant: charts are pure functions from numbers to SVG text; no I/O.

use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
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
    /// Axis labels with k/M suffixes (for IOPS, bytes).
    pub x_si: bool,
    pub y_si: bool,
    /// x is minutes relative to now (negative: the past): labels read as time, "60 s ago" …
    /// "now" (seconds under two minutes, whole minutes beyond), instead of plain numbers.
    pub x_ago: bool,
    /// A logarithmic y axis when the largest positive value is more than
    /// `soakchart::LOG_RATIO` times the smallest (one slow point would flatten the rest).
    pub y_log_auto: bool,
    /// Draw a marker per point (off for dense time series).
    pub markers: bool,
    /// Points to flag with a distinct marker (a red ring, `class="flagged"`), e.g. sweep points
    /// that fell short of their target rate; `flag_label` is their legend text.
    pub flagged: &'a [(f64, f64)],
    pub flag_label: &'a str,
}

/// Series colours (Tableau 10), assigned in order.
pub const PALETTE: [RGBColor; 10] = [
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0x8c, 0x56, 0x4b),
    RGBColor(0xe3, 0x77, 0xc2),
    RGBColor(0x7f, 0x7f, 0x7f),
    RGBColor(0xbc, 0xbd, 0x22),
    RGBColor(0x17, 0xbe, 0xcf),
];

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
    if secs.abs() < 0.5 {
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
    color: Option<RGBColor>,
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

/// Draw the chart; returns the SVG document as a string.
///
/// The legend (series names, and the flagged points' meaning) is drawn in its own strip below
/// the plot, as `<g class="legend">`, so it never hides a point; the plot area is marked with
/// an invisible `<rect class="plot-area">` for layout checks.
pub fn line_chart(c: &LineChart<'_>) -> Result<String, ChartError> {
    let err = |e: &dyn std::fmt::Display| ChartError::Draw {
        title: c.title.to_string(),
        detail: e.to_string(),
    };
    let drawn: Vec<(usize, &Series)> = c
        .series
        .iter()
        .enumerate()
        .filter(|(_, s)| s.points.iter().any(|(x, y)| x.is_finite() && y.is_finite()))
        .collect();
    let (x0, x1, max_y) = bounds(c, &drawn);
    let ys: Vec<f64> = drawn
        .iter()
        .flat_map(|(_, s)| s.points.iter().map(|p| p.1))
        .collect();
    let log = c.y_log_auto && super::soakchart::wants_log(&ys);
    let (y0, y1) = if log {
        let lo = ys
            .iter()
            .copied()
            .filter(|v| v.is_finite() && *v > 0.0)
            .fold(f64::INFINITY, f64::min);
        (
            10f64.powf(lo.log10().floor()),
            10f64.powf(max_y.log10().ceil()),
        )
    } else {
        (0.0, if max_y > 0.0 { max_y * 1.1 } else { 1.0 })
    };
    let reference = c
        .reference
        .as_ref()
        .filter(|r| r.y <= max_y && r.y > 0.0 && r.y >= y0);

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
    let layout = legend_layout(&entries, c.width);
    let legend_h = layout
        .last()
        .map(|(_, row)| (row + 1) * LEGEND_ROW + 6)
        .unwrap_or(0);

    let mut out = String::new();
    let painted;
    {
        let root =
            SVGBackend::with_string(&mut out, (c.width, c.height + legend_h)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| err(&e))?;
        let (plot, _legend) = root.split_vertically(c.height);
        let small = c.height < 200;
        let mut builder = ChartBuilder::on(&plot);
        builder
            .caption(c.title, ("sans-serif", if small { 13 } else { 16 }))
            .margin(if small { 4 } else { 8 })
            // Room for the last time label ("now"), centred on the right edge of the plot.
            .margin_right(if c.x_ago {
                16
            } else if small {
                4
            } else {
                8
            })
            .x_label_area_size(if small { 34 } else { 42 })
            .y_label_area_size(if small { 44 } else { 66 });
        let frame = Frame {
            c,
            drawn: &drawn,
            reference,
            x: (x0, x1),
            y: (y0, y1),
            log,
        };
        painted = if log {
            let chart = builder
                .build_cartesian_2d(x0..x1, (y0..y1).log_scale())
                .map_err(|e| err(&e))?;
            frame.paint(chart)?
        } else {
            let chart = builder
                .build_cartesian_2d(x0..x1, y0..y1)
                .map_err(|e| err(&e))?;
            frame.paint(chart)?
        };
        root.present().map_err(|e| err(&e))?;
    }
    let names: Vec<&str> = drawn.iter().map(|(_, s)| s.name.as_str()).collect();
    let svg = flag_points(&tag_series(&out, c.title, &names), &painted.flagged);
    Ok(add_overlay(
        &svg,
        &plot_area_rect(painted.area, log),
        &legend_svg(&entries, &layout, c.height),
    ))
}

/// What [`Frame::paint`] leaves for the SVG overlay: the flagged points' pixels and the plot
/// area (x range, y range in pixels).
struct Painted {
    flagged: Vec<(i32, i32)>,
    area: (std::ops::Range<i32>, std::ops::Range<i32>),
}

/// The chart's data and ranges, drawn on a linear or a logarithmic y axis.
struct Frame<'c, 'a> {
    c: &'c LineChart<'a>,
    drawn: &'c [(usize, &'c Series)],
    reference: Option<&'c RefLine>,
    x: (f64, f64),
    y: (f64, f64),
    log: bool,
}

impl Frame<'_, '_> {
    fn paint<Y>(
        &self,
        mut chart: ChartContext<'_, SVGBackend<'_>, Cartesian2d<RangedCoordf64, Y>>,
    ) -> Result<Painted, ChartError>
    where
        Y: Ranged<ValueType = f64> + plotters::coord::ranged1d::ValueFormatter<f64>,
    {
        let c = self.c;
        let err = |e: &dyn std::fmt::Display| ChartError::Draw {
            title: c.title.to_string(),
            detail: e.to_string(),
        };
        let small = c.height < 200;
        let xf = |v: &f64| {
            if c.x_ago {
                ago(*v)
            } else if c.x_si {
                si(*v)
            } else {
                plain(*v)
            }
        };
        let yf = |v: &f64| if c.y_si { si(*v) } else { plain(*v) };
        let (x0, x1) = self.x;
        let (y0, y1) = self.y;
        chart
            .configure_mesh()
            .x_desc(c.x_desc)
            .y_desc(if self.log {
                format!("{} (log scale)", c.y_desc)
            } else {
                c.y_desc.to_string()
            })
            .x_labels(if small { 5 } else { 8 })
            .y_labels(if small { 4 } else { 8 })
            .max_light_lines(1)
            .label_style(("sans-serif", if small { 11 } else { 13 }))
            .axis_desc_style(("sans-serif", if small { 11 } else { 14 }))
            .x_label_formatter(&xf)
            .y_label_formatter(&yf)
            .draw()
            .map_err(|e| err(&e))?;
        if let Some(r) = self.reference {
            let grey = RGBColor(0x55, 0x55, 0x55);
            chart
                .draw_series(LineSeries::new(
                    vec![(x0, r.y), (x1, r.y)],
                    grey.stroke_width(1),
                ))
                .map_err(|e| err(&e))?;
            // Just above the line, clear of the y axis.
            let above = if self.log {
                r.y * (y1 / y0).powf(0.015)
            } else {
                r.y + (y1 - y0) * 0.015
            };
            chart
                .draw_series(std::iter::once(Text::new(
                    r.label.clone(),
                    (x0 + (x1 - x0) * 0.015, above),
                    ("sans-serif", 13).into_font().color(&grey),
                )))
                .map_err(|e| err(&e))?;
        }
        for (i, s) in self.drawn {
            let color = PALETTE[i % PALETTE.len()];
            let pts: Vec<(f64, f64)> = s
                .points
                .iter()
                .copied()
                .filter(|(x, y)| x.is_finite() && y.is_finite() && (!self.log || *y > 0.0))
                .collect();
            chart
                .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
                .map_err(|e| err(&e))?;
            if c.markers {
                chart
                    .draw_series(pts.iter().map(|p| Circle::new(*p, 3, color.filled())))
                    .map_err(|e| err(&e))?;
            }
        }
        let flagged = c
            .flagged
            .iter()
            .filter(|(x, y)| x.is_finite() && y.is_finite() && (!self.log || *y > 0.0))
            .map(|p| chart.backend_coord(p))
            .collect();
        Ok(Painted {
            flagged,
            area: chart.plotting_area().get_pixel_range(),
        })
    }
}

/// An invisible rectangle over the plot area (tests and tools check the legend against it).
fn plot_area_rect(area: (std::ops::Range<i32>, std::ops::Range<i32>), log: bool) -> String {
    let (xs, ys) = area;
    format!(
        "<rect class=\"plot-area\" data-y-scale=\"{}\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"none\"/>\n",
        if log { "log" } else { "linear" },
        xs.start,
        ys.start,
        (xs.end - xs.start).max(0),
        (ys.end - ys.start).max(0)
    )
}

/// The legend strip below the plot: a swatch (or a red ring for flagged points) and a name
/// per entry.
fn legend_svg(entries: &[LegendEntry], layout: &[(u32, u32)], top: u32) -> String {
    if entries.is_empty() {
        return String::new();
    }
    let mut g = String::from("<g class=\"legend\">\n");
    for (e, (x, row)) in entries.iter().zip(layout) {
        let cy = top + row * LEGEND_ROW + LEGEND_ROW / 2 + 3;
        match e.color {
            Some(RGBColor(r, gr, b)) => g.push_str(&format!(
                "<rect class=\"swatch\" x=\"{x}\" y=\"{}\" width=\"14\" height=\"8\" fill=\"#{r:02x}{gr:02x}{b:02x}\"/>\n",
                cy - 4
            )),
            None => g.push_str(&format!(
                "<circle class=\"swatch flagged-key\" cx=\"{}\" cy=\"{cy}\" r=\"6\" fill=\"none\" stroke=\"#d62728\" stroke-width=\"1.5\"/>\n",
                x + 7
            )),
        }
        g.push_str(&format!(
            "<text class=\"{}\" x=\"{}\" y=\"{}\" font-family=\"sans-serif\" font-size=\"12\" fill=\"{}\">{}</text>\n",
            if e.color.is_some() { "legend-label" } else { "legend-label flag-label" },
            x + 20,
            cy + 4,
            if e.color.is_some() { "#333" } else { "#d62728" },
            esc(&e.text)
        ));
    }
    g.push_str("</g>\n");
    g
}

/// Insert SVG elements just before the closing tag.
fn add_overlay(svg: &str, a: &str, b: &str) -> String {
    let Some(end) = svg.rfind("</svg>") else {
        return svg.to_string();
    };
    format!("{}{a}{b}{}", &svg[..end], &svg[end..])
}

/// Ring each flagged point (pixel coordinates) in red (the legend strip says what a ring
/// means); the SVG is unchanged when none is flagged.
fn flag_points(svg: &str, px: &[(i32, i32)]) -> String {
    if px.is_empty() {
        return svg.to_string();
    }
    let mut g = format!(
        "<g class=\"flagged\" data-flagged-count=\"{}\">\n",
        px.len()
    );
    for (x, y) in px {
        g.push_str(&format!(
            "<circle class=\"flagged\" cx=\"{x}\" cy=\"{y}\" r=\"7\" fill=\"none\" stroke=\"#d62728\" stroke-width=\"1.5\"/>\n"
        ));
    }
    g.push_str("</g>\n");
    add_overlay(svg, &g, "")
}

/// The x range (the chart's own, else from the data, never empty) and the largest y of the
/// drawn series.
fn bounds(c: &LineChart<'_>, drawn: &[(usize, &Series)]) -> (f64, f64, f64) {
    let finite = |v: &f64| v.is_finite();
    let xs = drawn
        .iter()
        .flat_map(|(_, s)| s.points.iter().map(|p| p.0))
        .filter(finite);
    let ys = drawn
        .iter()
        .flat_map(|(_, s)| s.points.iter().map(|p| p.1))
        .filter(finite);
    let max_x = xs.fold(0.0f64, f64::max);
    let min_x = drawn
        .iter()
        .flat_map(|(_, s)| s.points.iter().map(|p| p.0))
        .filter(finite)
        .fold(0.0f64, f64::min);
    let max_y = ys.fold(0.0f64, f64::max);
    let (x0, x1) = c
        .x_range
        .unwrap_or((min_x, if max_x > 0.0 { max_x * 1.05 } else { 1.0 }));
    let x1 = if x1 > x0 { x1 } else { x0 + 1.0 };
    (x0, x1, max_y)
}

/// Mark the series polylines (stroke width 2, in drawing order) and the root element.
fn tag_series(svg: &str, title: &str, names: &[&str]) -> String {
    let mut out = String::with_capacity(svg.len() + 256);
    let mut k = 0;
    let mut root_done = false;
    for line in svg.lines() {
        if !root_done && line.starts_with("<svg ") {
            out.push_str(&format!(
                "<svg class=\"chart\" role=\"img\" data-series-count=\"{}\" {}\n<title>{}</title>\n",
                names.len(),
                &line[5..],
                esc(title)
            ));
            root_done = true;
            continue;
        }
        if line.starts_with("<polyline ") && line.contains("stroke-width=\"2\"") && k < names.len()
        {
            out.push_str(&format!(
                "<polyline class=\"series\" data-series=\"{}\" {}\n",
                esc(names[k]),
                &line[10..]
            ));
            k += 1;
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// Escape text for HTML/SVG content and attribute values.
pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chart(series: &[Series], reference: Option<RefLine>) -> String {
        line_chart(&LineChart {
            title: "4k <random> read",
            x_desc: "IOPS",
            y_desc: "latency (µs)",
            width: 640,
            height: 360,
            series,
            x_range: None,
            reference,
            legend: true,
            x_si: true,
            y_si: false,
            x_ago: false,
            y_log_auto: false,
            markers: true,
            flagged: &[],
            flag_label: "",
        })
        .expect("chart")
    }

    #[test]
    fn flagged_points_get_a_ring_each_and_a_legend_line() {
        let series = [Series {
            name: "drive a".into(),
            points: vec![(1000.0, 100.0), (3000.0, 300.0), (9000.0, 900.0)],
        }];
        let flagged = [(3000.0, 300.0)];
        let svg = line_chart(&LineChart {
            title: "t",
            x_desc: "IOPS",
            y_desc: "latency (µs)",
            width: 640,
            height: 360,
            series: &series,
            x_range: None,
            reference: None,
            legend: true,
            x_si: true,
            y_si: false,
            x_ago: false,
            y_log_auto: false,
            markers: true,
            flagged: &flagged,
            flag_label: "short of target",
        })
        .expect("chart");
        assert_eq!(svg.matches("<circle class=\"flagged\"").count(), 1, "{svg}");
        assert!(svg.contains("data-flagged-count=\"1\""), "{svg}");
        assert!(svg.contains("short of target"), "{svg}");
        // The ring sits where the point's own marker is.
        let ring = svg.find("<circle class=\"flagged\"").expect("ring");
        let cx = svg[ring..]
            .split("cx=\"")
            .nth(1)
            .and_then(|t| t.split('"').next())
            .expect("cx");
        assert!(
            svg[..ring].contains(&format!("cx=\"{cx}\"")),
            "{cx} in {svg}"
        );
        assert!(svg.trim_end().ends_with("</svg>"));
        // None flagged: no ring, no label.
        let plain = chart(&series, None);
        assert!(!plain.contains("flagged"), "{plain}");
    }

    #[test]
    fn one_tagged_polyline_per_series() {
        let s = vec![
            Series {
                name: "drive a".into(),
                points: vec![(1000.0, 100.0), (5000.0, 300.0), (9000.0, 1500.0)],
            },
            Series {
                name: "drive \"b\"".into(),
                points: vec![(2000.0, 90.0), (8000.0, 900.0)],
            },
            Series {
                name: "empty".into(),
                points: vec![],
            },
        ];
        let svg = chart(
            &s,
            Some(RefLine {
                y: 1000.0,
                label: "1 ms".into(),
            }),
        );
        assert!(svg.starts_with("<svg class=\"chart\" role=\"img\" data-series-count=\"2\""));
        assert_eq!(svg.matches("class=\"series\"").count(), 2, "{svg}");
        assert!(svg.contains("data-series=\"drive a\""));
        assert!(svg.contains("data-series=\"drive &quot;b&quot;\""));
        // 3 + 2 markers.
        assert_eq!(svg.matches("<circle").count(), 5);
        // The reference line is drawn (1 ms is inside 0..1500) but not tagged as a series.
        assert!(svg.contains(">\n1 ms\n<") || svg.contains("1 ms"), "{svg}");
        assert!(svg.contains("<title>4k &lt;random&gt; read</title>"));
        assert!(svg.contains("drive a"));
        assert!(
            !svg.contains("http://")
                || !svg
                    .replace("http://www.w3.org/2000/svg", "")
                    .contains("http://")
        );
    }

    #[test]
    fn reference_outside_the_data_is_left_out() {
        let s = vec![Series {
            name: "fast".into(),
            points: vec![(1000.0, 10.0), (2000.0, 20.0)],
        }];
        let svg = chart(
            &s,
            Some(RefLine {
                y: 1000.0,
                label: "1 ms".into(),
            }),
        );
        assert!(!svg.contains("1 ms"));
        assert_eq!(svg.matches("class=\"series\"").count(), 1);
    }

    /// The `y`, `height` (or `cy`) attribute of an SVG element's text.
    fn attr(el: &str, name: &str) -> f64 {
        el.split(&format!(" {name}=\""))
            .nth(1)
            .and_then(|t| t.split('"').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {name} in {el}"))
    }

    /// The legend sits in its own strip below the plot area: no swatch or label inside it,
    /// however many series (it wraps into rows), and the flagged points' key is in it too.
    #[test]
    fn the_legend_is_below_the_plot_and_never_over_a_point() {
        let series: Vec<Series> = (0..7)
            .map(|i| Series {
                name: format!("a rather long drive name {i}"),
                points: vec![(1000.0 * (i + 1) as f64, 100.0), (9000.0, 900.0)],
            })
            .collect();
        let svg = line_chart(&LineChart {
            title: "t",
            x_desc: "IOPS",
            y_desc: "latency (µs)",
            width: 600,
            height: 380,
            series: &series,
            x_range: None,
            reference: None,
            legend: true,
            x_si: true,
            y_si: false,
            x_ago: false,
            y_log_auto: true,
            markers: true,
            flagged: &[(9000.0, 900.0)],
            flag_label: "short of target",
        })
        .expect("chart");
        let plot = svg
            .lines()
            .find(|l| l.starts_with("<rect class=\"plot-area\""))
            .expect("plot area");
        let bottom = attr(plot, "y") + attr(plot, "height");
        assert!(bottom <= 380.0, "{plot}");
        let legend = &svg[svg.find("<g class=\"legend\">").expect("legend")..];
        let labels: Vec<&str> = legend
            .lines()
            .filter(|l| l.starts_with("<text class=\"legend-label"))
            .collect();
        assert_eq!(labels.len(), 8, "{legend}");
        let rows: std::collections::BTreeSet<i64> =
            labels.iter().map(|l| attr(l, "y") as i64).collect();
        assert!(rows.len() >= 2, "7 long names on 600 px wrap: {rows:?}");
        for l in legend
            .lines()
            .filter(|l| l.starts_with("<rect class=\"swatch"))
        {
            assert!(attr(l, "y") > bottom, "a swatch over the plot: {l}");
        }
        for l in &labels {
            assert!(attr(l, "y") - 11.0 > bottom, "a label over the plot: {l}");
        }
        assert!(legend.contains("short of target"), "{legend}");
        // The SVG is as tall as the plot plus the legend rows.
        let h = attr(svg.lines().next().expect("root"), "height");
        assert!(h >= 380.0 + 2.0 * LEGEND_ROW as f64, "{h}");
    }

    /// One point a hundred times slower than the rest makes the latency axis logarithmic (so
    /// the rest are not flattened onto the x axis); close values keep a linear axis.
    #[test]
    fn one_slow_point_makes_the_y_axis_logarithmic() {
        let chart_of = |ys: &[f64]| {
            let series = [Series {
                name: "d".into(),
                points: ys
                    .iter()
                    .enumerate()
                    .map(|(i, y)| (1000.0 * (i + 1) as f64, *y))
                    .collect(),
            }];
            line_chart(&LineChart {
                title: "t",
                x_desc: "IOPS",
                y_desc: "p99 latency (µs)",
                width: 600,
                height: 380,
                series: &series,
                x_range: None,
                reference: Some(RefLine {
                    y: 1000.0,
                    label: "1 ms".into(),
                }),
                legend: true,
                x_si: true,
                y_si: false,
                x_ago: false,
                y_log_auto: true,
                markers: true,
                flagged: &[],
                flag_label: "",
            })
            .expect("chart")
        };
        let ys = [80.0, 90.0, 110.0, 150.0, 40_000.0];
        let svg = chart_of(&ys);
        assert!(svg.contains("data-y-scale=\"log\""), "{svg}");
        assert!(svg.contains("(log scale)"), "{svg}");
        // The four fast points are spread over a visible height, not squashed together.
        let cys: Vec<f64> = svg
            .lines()
            .filter(|l| l.starts_with("<circle"))
            .map(|l| attr(l, "cy"))
            .collect();
        assert_eq!(cys.len(), 5, "{svg}");
        // On a linear axis up to 44,000 they would be under a pixel apart.
        assert!(cys[0] - cys[3] > 10.0, "fast points squashed: {cys:?}");
        assert!(svg.contains("1 ms"), "{svg}");
        let lin = chart_of(&[80.0, 90.0, 110.0, 150.0, 300.0]);
        assert!(lin.contains("data-y-scale=\"linear\""), "{lin}");
        assert!(!lin.contains("(log scale)"), "{lin}");
    }

    #[test]
    fn si_labels() {
        assert_eq!(si(12000.0), "12k");
        assert_eq!(si(1_250_000.0), "1.25M");
        assert_eq!(si(3.5e9), "3.5G");
        assert_eq!(si(0.0), "0");
        assert_eq!(plain(0.25), "0.25");
    }

    #[test]
    fn time_ago_labels() {
        assert_eq!(ago(0.0), "now");
        assert_eq!(ago(-0.0), "now");
        assert_eq!(ago(-0.25), "15 s ago");
        assert_eq!(ago(-1.0), "60 s ago");
        assert_eq!(ago(-5.0), "5 min ago");
        assert_eq!(ago(-2.5), "2.5 min ago");
    }

    /// A chart with `x_ago` labels its time axis "60 s ago" … "now", not "-1" … "0".
    #[test]
    fn an_ago_axis_reads_as_time() {
        let series = [Series {
            name: "IOPS".into(),
            points: vec![(-1.0, 10.0), (-0.5, 20.0), (0.0, 15.0)],
        }];
        let svg = line_chart(&LineChart {
            title: "t",
            x_desc: "",
            y_desc: "IOPS",
            width: 400,
            height: 150,
            series: &series,
            x_range: Some((-1.0, 0.0)),
            reference: None,
            legend: false,
            x_si: false,
            y_si: true,
            x_ago: true,
            y_log_auto: false,
            markers: false,
            flagged: &[],
            flag_label: "",
        })
        .expect("renders");
        let labels: Vec<&str> = svg.lines().map(str::trim).collect();
        assert!(labels.contains(&"60 s ago"), "{svg}");
        assert!(labels.contains(&"now"), "{svg}");
        assert!(!labels.contains(&"-1"), "{svg}");
        // "now" sits on the plot's right edge: its centre leaves room for the word.
        let now_x: f64 = svg
            .split("<text ")
            .find(|t| t.contains("\nnow\n"))
            .and_then(|t| t.split("x=\"").nth(1))
            .and_then(|t| t.split('"').next())
            .and_then(|x| x.parse().ok())
            .expect("the now label's x");
        assert!(now_x <= 400.0 - 12.0, "now at x={now_x}");
    }
}
