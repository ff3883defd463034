//! Tests of `charts`.

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
        x_unit: Unit::Si,
        y_unit: Unit::Plain,
        x_ago: false,
        y_log_auto: false,
        markers: true,
        flagged: &[],
        flag_label: "",
        gap: None,
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
        x_unit: Unit::Si,
        y_unit: Unit::Plain,
        x_ago: false,
        y_log_auto: false,
        markers: true,
        flagged: &flagged,
        flag_label: "short of target",
        gap: None,
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
        x_unit: Unit::Si,
        y_unit: Unit::Plain,
        x_ago: false,
        y_log_auto: true,
        markers: true,
        flagged: &[(9000.0, 900.0)],
        flag_label: "short of target",
        gap: None,
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
            x_unit: Unit::Si,
            y_unit: Unit::Plain,
            x_ago: false,
            y_log_auto: true,
            markers: true,
            flagged: &[],
            flag_label: "",
            gap: None,
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
        x_unit: Unit::Plain,
        y_unit: Unit::Si,
        x_ago: true,
        y_log_auto: false,
        markers: false,
        flagged: &[],
        flag_label: "",
        gap: None,
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

/// An axis over figures read from a hostile results file stays bounded: a range up to
/// `f64::MAX`, an infinite or inverted one, or a log axis reaching zero gets at most
/// `MAX_TICKS + 1` ticks (or none), never a loop over billions of steps.
#[test]
fn ticks_on_a_hostile_range_are_bounded() {
    let scale = |log: bool, lo: f64, hi: f64| Scale {
        log,
        lo,
        hi,
        from: 0.0,
        to: 100.0,
    };
    let cap = MAX_TICKS as usize + 1;
    for log in [false, true] {
        let t = scale(log, 1.0, f64::MAX).ticks(5.0);
        assert!(t.len() <= cap, "log={log}: {} ticks", t.len());
        assert!(t.iter().all(|v| v.is_finite()), "log={log}: {t:?}");
        assert!(scale(log, 1.0, f64::INFINITY).ticks(5.0).is_empty());
        assert!(scale(log, f64::NAN, 10.0).ticks(5.0).is_empty());
        assert!(scale(log, 10.0, 1.0).ticks(5.0).is_empty());
    }
    assert!(scale(true, 0.0, 1000.0).ticks(5.0).is_empty());
    assert!(scale(true, -5.0, 1000.0).ticks(5.0).is_empty());
    // A sane range still gets its ticks.
    assert_eq!(
        scale(true, 1.0, 1000.0).ticks(5.0),
        vec![1.0, 10.0, 100.0, 1000.0]
    );
    assert!(scale(false, 0.0, 100.0).ticks(5.0).len() >= 4);
}

/// A whole chart over series reaching `f64::MAX` comes back (no hang, no panic).
#[test]
fn a_chart_over_the_largest_float_returns() {
    let series = [Series {
        name: "forged".into(),
        points: vec![(1.0, 1.0), (f64::MAX, f64::MAX)],
    }];
    let svg = chart(&series, None);
    assert!(svg.contains("<svg"), "{svg}");
}

/// A time chart over samples with a hole breaks its line there: the part after the hole is
/// its own `series-continued` polyline, and nothing is drawn across the hole (no zero, no
/// bridge).
#[test]
fn a_gap_in_the_samples_breaks_the_line() {
    // One sample a second for 20 s, none for 40 s (the daemon was down), then 10 more.
    let mut points: Vec<(f64, f64)> = (0..20)
        .map(|i| (f64::from(i) / 60.0 - 1.0, 100.0))
        .collect();
    points.extend((60..70).map(|i| (f64::from(i) / 60.0 - 1.2, 100.0)));
    let series = [Series {
        name: "t".into(),
        points,
    }];
    let draw = |gap: Option<f64>| {
        line_chart(&LineChart {
            title: "t: IOPS",
            x_desc: "",
            y_desc: "IOPS",
            width: 400,
            height: 150,
            series: &series,
            x_range: Some((-2.0, 0.0)),
            reference: None,
            legend: false,
            x_unit: Unit::Plain,
            y_unit: Unit::Si,
            x_ago: true,
            y_log_auto: false,
            markers: false,
            flagged: &[],
            flag_label: "",
            gap,
        })
        .expect("renders")
    };
    let svg = draw(Some(5.0 / 60.0));
    assert_eq!(
        svg.matches("<polyline class=\"series\"").count(),
        1,
        "{svg}"
    );
    assert_eq!(
        svg.matches("<polyline class=\"series series-continued\"")
            .count(),
        1,
        "{svg}"
    );
    let coords = |class: &str| -> usize {
        let key = format!("<polyline class=\"{class}\"");
        let rest = svg.split(&key).nth(1).expect("polyline");
        let pts = rest.split("points=\"").nth(1).expect("points");
        pts.split('"').next().expect("end").split(' ').count()
    };
    assert_eq!(coords("series"), 20);
    assert_eq!(coords("series series-continued"), 10);
    // The series is still one series.
    assert!(svg.contains("data-series-count=\"1\""));
    // Without a gap rule (a sweep's curve) it is one line.
    let one = draw(None);
    assert!(!one.contains("series-continued"), "{one}");
    assert_eq!(
        split_at_gaps(&[(0.0, 1.0), (1.0, 1.0), (9.0, 1.0)], Some(2.0)).len(),
        2
    );
    assert_eq!(split_at_gaps(&[], Some(2.0)).len(), 1);
}

/// Axis units: latency in µs switches to ms and s (never "600k" µs), rates are SI with their
/// unit ("200 MB/s", not "200M"), sizes IEC.
#[test]
fn axis_labels_carry_units_that_grow_with_the_values() {
    assert_eq!(Unit::LatencyUs.label(0.0), "0");
    assert_eq!(Unit::LatencyUs.label(250.0), "250 µs");
    assert_eq!(Unit::LatencyUs.label(1500.0), "1.5 ms");
    assert_eq!(Unit::LatencyUs.label(600_000.0), "600 ms");
    assert_eq!(Unit::LatencyUs.label(2_000_000.0), "2 s");
    assert_eq!(Unit::BytesPerSec.label(200e6), "200 MB/s");
    assert_eq!(Unit::BytesPerSec.label(1.5e9), "1.5 GB/s");
    assert_eq!(Unit::BytesPerSec.label(0.0), "0 B/s");
    assert_eq!(Unit::BytesPerSec.label(500.0), "500 B/s");
    assert_eq!(Unit::Si.label(266_000.0), "266k");
    assert_eq!(Unit::Bytes.label(4096.0), "4 KiB");
    assert_eq!(Unit::Bytes.label(1.5 * 1024.0 * 1024.0 * 1024.0), "1.5 GiB");
    // A p99 chart reaching 600 ms labels its ticks in ms.
    let series = [Series {
        name: "t".into(),
        points: vec![(-1.0, 200_000.0), (-0.5, 600_000.0), (0.0, 400_000.0)],
    }];
    let svg = line_chart(&LineChart {
        title: "t: p99 latency",
        x_desc: "",
        y_desc: "p99 latency",
        width: 400,
        height: 150,
        series: &series,
        x_range: Some((-1.0, 0.0)),
        reference: None,
        legend: false,
        x_unit: Unit::Plain,
        y_unit: Unit::LatencyUs,
        x_ago: true,
        y_log_auto: false,
        markers: false,
        flagged: &[],
        flag_label: "",
        gap: None,
    })
    .expect("renders");
    let labels: Vec<&str> = svg.lines().map(str::trim).collect();
    assert!(labels.iter().any(|l| l.ends_with(" ms")), "{svg}");
    assert!(!labels.iter().any(|l| l.ends_with('k')), "{svg}");
}
