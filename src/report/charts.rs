//! SVG line charts drawn with plotters' SVG backend (no fonts needed: SVG text is rendered by
//! the viewer).
//!
//! Each data series is one `<polyline class="series" data-series="NAME">` (stroke width 2),
//! with a `<circle>` per point; axes and ticks are 1 px polylines, the reference line (1 ms) is
//! a 1 px grey polyline, and legend swatches are `<rect>`s. The root element carries
//! `class="chart"` and `data-series-count`, so tests and tools can count the series.
//!
//! Architecture Invariant: charts are pure functions from numbers to SVG text; no I/O.

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

/// Draw the chart; returns the SVG document as a string.
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
    let reference = c.reference.as_ref().filter(|r| r.y <= max_y && r.y > 0.0);
    let y1 = if max_y > 0.0 { max_y * 1.1 } else { 1.0 };

    let mut out = String::new();
    let mut flagged_px: Vec<(i32, i32)> = Vec::new();
    {
        let root = SVGBackend::with_string(&mut out, (c.width, c.height)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| err(&e))?;
        let small = c.height < 200;
        let mut chart = ChartBuilder::on(&root)
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
            .x_label_area_size(if small { 34 } else { 36 })
            .y_label_area_size(if small { 44 } else { 60 })
            .build_cartesian_2d(x0..x1, 0f64..y1)
            .map_err(|e| err(&e))?;
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
        chart
            .configure_mesh()
            .x_desc(c.x_desc)
            .y_desc(c.y_desc)
            .x_labels(if small { 5 } else { 8 })
            .y_labels(if small { 4 } else { 8 })
            .max_light_lines(1)
            .x_label_formatter(&xf)
            .y_label_formatter(&yf)
            .draw()
            .map_err(|e| err(&e))?;
        if let Some(r) = reference {
            let grey = RGBColor(0x55, 0x55, 0x55);
            chart
                .draw_series(LineSeries::new(
                    vec![(x0, r.y), (x1, r.y)],
                    grey.stroke_width(1),
                ))
                .map_err(|e| err(&e))?;
            chart
                .draw_series(std::iter::once(Text::new(
                    r.label.clone(),
                    (x0 + (x1 - x0) * 0.01, r.y + y1 * 0.01),
                    ("sans-serif", 12).into_font().color(&grey),
                )))
                .map_err(|e| err(&e))?;
        }
        for (i, s) in &drawn {
            let color = PALETTE[i % PALETTE.len()];
            let pts: Vec<(f64, f64)> = s
                .points
                .iter()
                .copied()
                .filter(|(x, y)| x.is_finite() && y.is_finite())
                .collect();
            let ann = chart
                .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
                .map_err(|e| err(&e))?;
            if c.legend {
                ann.label(s.name.clone()).legend(move |(x, y)| {
                    Rectangle::new([(x, y - 4), (x + 12, y + 4)], color.filled())
                });
            }
            if c.markers {
                chart
                    .draw_series(pts.iter().map(|p| Circle::new(*p, 3, color.filled())))
                    .map_err(|e| err(&e))?;
            }
        }
        for p in c
            .flagged
            .iter()
            .filter(|(x, y)| x.is_finite() && y.is_finite())
        {
            flagged_px.push(chart.backend_coord(p));
        }
        if c.legend && !drawn.is_empty() {
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::UpperLeft)
                .background_style(WHITE.mix(0.85))
                .border_style(RGBColor(0xcc, 0xcc, 0xcc))
                .draw()
                .map_err(|e| err(&e))?;
        }
        root.present().map_err(|e| err(&e))?;
    }
    let names: Vec<&str> = drawn.iter().map(|(_, s)| s.name.as_str()).collect();
    Ok(flag_points(
        &tag_series(&out, c.title, &names),
        &flagged_px,
        c.flag_label,
    ))
}

/// Ring each flagged point (pixel coordinates) in red, with one legend line at the bottom
/// right; the SVG is unchanged when none is flagged.
fn flag_points(svg: &str, px: &[(i32, i32)], label: &str) -> String {
    if px.is_empty() {
        return svg.to_string();
    }
    let Some(end) = svg.rfind("</svg>") else {
        return svg.to_string();
    };
    let mut g = format!(
        "<g class=\"flagged\" data-flagged-count=\"{}\">\n",
        px.len()
    );
    for (x, y) in px {
        g.push_str(&format!(
            "<circle class=\"flagged\" cx=\"{x}\" cy=\"{y}\" r=\"7\" fill=\"none\" stroke=\"#d62728\" stroke-width=\"1.5\"/>\n"
        ));
    }
    if !label.is_empty() {
        g.push_str(&format!(
            "<text class=\"flag-label\" x=\"98%\" y=\"97%\" text-anchor=\"end\" font-family=\"sans-serif\" font-size=\"11\" fill=\"#d62728\">\u{25ef} {}</text>\n",
            esc(label)
        ));
    }
    g.push_str("</g>\n");
    format!("{}{}{}", &svg[..end], g, &svg[end..])
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
