//! Tests of `soakchart`.

use super::*;

fn history(lat: impl Fn(u64) -> f64) -> SoakHistory {
    let mut h = SoakHistory::default();
    for i in 0..100u64 {
        h.push(SoakPoint {
            t: 1_000_000.0 + i as f64 * 60.0,
            secs: 60.0,
            read_ops: 600_000,
            write_ops: 300_000,
            lat_avg_us: lat(i),
            lat_p99_us: lat(i) * 4.0,
            ..Default::default()
        });
    }
    h
}

fn attr(svg: &str, name: &str) -> String {
    let key = format!("{name}=\"");
    let i = svg.find(&key).expect(name) + key.len();
    svg[i..].split('"').next().expect("attribute").to_string()
}

#[test]
fn four_series_events_and_the_steady_window() {
    let mut h = history(|_| 200.0);
    h.event(EventKind::IoErrors, 1_000_000.0 + 600.0, 3);
    h.event(EventKind::Throttled, 1_000_000.0 + 1200.0, 10);
    h.event(EventKind::Throttled, 1_000_000.0 + 1230.0, 10);
    h.set_steady("4k-rr", 1_000_000.0 + 1800.0, 1_000_000.0 + 3600.0);
    let svg = soak_chart("t<1>: soak over time", &h, None);
    assert_eq!(attr(&svg, "data-series-count"), "4");
    assert_eq!(attr(&svg, "data-event-count"), "2");
    assert_eq!(svg.matches("class=\"series\"").count(), 4);
    for s in ["read IOPS", "write IOPS", "average latency", "p99 latency"] {
        assert!(svg.contains(&format!("data-series=\"{s}\"")), "{s}");
    }
    assert_eq!(svg.matches("<g class=\"event\"").count(), 2);
    assert!(svg.contains("data-kind=\"io_errors\" data-count=\"3\""));
    assert_eq!(svg.matches("class=\"event-band\"").count(), 2);
    assert_eq!(svg.matches("class=\"steady-window\"").count(), 2);
    assert!(svg.contains("t&lt;1&gt;"));
    assert!(!svg.contains("t<1>"));
    // 200 µs average and 800 µs p99: linear, no 1 ms line (out of range).
    assert_eq!(attr(&svg, "data-latency-scale"), "linear");
    assert!(svg.contains("minutes since the soak started"));
    // The event markers sit at the right place on the time axis: 10 of 100 minutes.
    let plot_w = WIDTH - LEFT - RIGHT;
    let ex = LEFT + plot_w * 600.0 / 6000.0;
    assert!(svg.contains(&format!("x1=\"{ex:.1}\"")), "{ex}");
}

#[test]
fn one_slow_point_makes_the_latency_axis_logarithmic() {
    let h = history(|i| if i == 50 { 80_000.0 } else { 90.0 });
    let svg = soak_chart("t", &h, None);
    assert_eq!(attr(&svg, "data-latency-scale"), "log");
    assert!(svg.contains("latency (log)"));
    assert!(svg.contains("class=\"reference-label\""));
    // Decade ticks: 10 µs .. 1 s.
    for l in ["10 µs", "100 µs", "1 ms", "10 ms"] {
        assert!(svg.contains(&format!(">{l}</text>")), "{l}");
    }
    assert!(wants_log(&[100.0, 100.0 * LOG_RATIO + 1.0]));
    assert!(!wants_log(&[100.0, 100.0 * LOG_RATIO - 1.0]));
    assert!(!wants_log(&[0.0, 5.0]));
}

#[test]
fn the_legend_is_above_the_plot_areas() {
    let mut h = history(|_| 200.0);
    h.event(EventKind::MediaErrors, 1_000_300.0, 1);
    let svg = soak_chart("t", &h, None);
    let legend = &svg[svg.find("<g class=\"legend\">").expect("legend")..];
    let legend = &legend[..legend.find("</g>").expect("end")];
    let top1 = TITLE_H + LEGEND_H + 8.0;
    for part in legend.split(" y=\"").skip(1) {
        let y: f64 = part
            .split('"')
            .next()
            .and_then(|v| v.parse().ok())
            .expect("y");
        assert!(
            y < top1,
            "legend item at y={y} inside the plot (top {top1})"
        );
    }
    assert!(legend.contains("media errors"));
}

#[test]
fn time_labels_do_not_overlap_and_units_follow_the_span() {
    for minutes in [3u64, 90, 600, 4000, 43_200] {
        let mut h = SoakHistory::default();
        for i in 0..minutes.min(1440) {
            let step = minutes as f64 * 60.0 / minutes.min(1440) as f64;
            h.push(SoakPoint {
                t: i as f64 * step,
                secs: step,
                read_ops: 10,
                ..Default::default()
            });
        }
        let svg = soak_chart("t", &h, None);
        let xs: Vec<f64> = svg
            .split("<text class=\"x-label\" x=\"")
            .skip(1)
            .filter_map(|p| p.split('"').next().and_then(|v| v.parse().ok()))
            .collect();
        assert!(xs.len() >= 3, "{minutes}: {xs:?}");
        for w in xs.windows(2) {
            assert!(w[1] - w[0] >= 50.0, "{minutes} min: labels {w:?} overlap");
        }
    }
    assert_eq!(time_unit(3.0 * 86400.0).1, "days");
    assert_eq!(time_unit(5.0 * 3600.0).1, "hours");
    assert_eq!(time_unit(600.0).1, "minutes");
}

#[test]
fn a_running_soak_shows_the_point_being_built() {
    let h = SoakHistory::default();
    assert!(!has_data(&h, None));
    let p = SoakPoint {
        t: 10.0,
        secs: 5.0,
        read_ops: 500,
        lat_avg_us: 50.0,
        lat_p99_us: 90.0,
        ..Default::default()
    };
    assert!(has_data(&h, Some(&p)));
    let svg = soak_chart("t", &h, Some(&p));
    // Reads only: read IOPS and the two latencies.
    assert_eq!(attr(&svg, "data-series-count"), "3");
    assert!(svg.contains("seconds since the soak started"));
}

/// A soak stopped for 10 minutes and resumed: the lines break over the time it was down
/// (the part after it is `series-continued`), never drawn as zero or bridged.
#[test]
fn a_restart_gap_breaks_every_line() {
    let mut h = SoakHistory::default();
    let point = |t: f64| SoakPoint {
        t,
        secs: 60.0,
        read_ops: 600_000,
        write_ops: 300_000,
        lat_avg_us: 200.0,
        lat_p99_us: 800.0,
        ..Default::default()
    };
    for i in 0..10 {
        h.push(point(1_000_000.0 + f64::from(i) * 60.0));
    }
    for i in 20..30 {
        h.push(point(1_000_000.0 + f64::from(i) * 60.0));
    }
    let svg = soak_chart("t", &h, None);
    assert_eq!(
        svg.matches("<polyline class=\"series\"").count(),
        4,
        "{svg}"
    );
    assert_eq!(
        svg.matches("<polyline class=\"series series-continued\"")
            .count(),
        4,
        "{svg}"
    );
    assert_eq!(attr(&svg, "data-series-count"), "4");
    // Contiguous points are one line each.
    let plain = soak_chart("t", &history(|_| 200.0), None);
    assert!(!plain.contains("series-continued"));
}

/// A restart is an event with its cause: marked on the chart (with the downtime shaded),
/// listed in words, and "No events during the soak" is not said.
#[test]
fn a_restart_is_an_event_with_its_cause() {
    use crate::model::soakhist::StopCause;
    let mut h = history(|_| 200.0);
    let t0 = 1_000_000.0;
    h.restart(t0 + 600.0, t0 + 900.0, StopCause::PowerLoss);
    h.restart(t0 + 3000.0, t0 + 3010.0, StopCause::Signal);
    let svg = soak_chart("t", &h, None);
    assert_eq!(attr(&svg, "data-event-count"), "2");
    assert!(
        svg.contains("data-kind=\"restart\" data-count=\"1\" data-cause=\"power_loss\""),
        "{svg}"
    );
    assert!(svg.contains("data-cause=\"signal\""), "{svg}");
    assert!(
        svg.contains("<rect class=\"event-band\" data-kind=\"restart\""),
        "{svg}"
    );
    let lines = event_lines(&h);
    assert_eq!(
        lines,
        vec![
            "from 00:10:00 to 00:15:00, restart (power loss: the host rebooted)".to_string(),
            "from 00:50:00 to 00:50:10, restart (stopped by a signal)".to_string(),
        ]
    );
    let html = lines_html(&h);
    assert!(!html.contains("No events during the soak"), "{html}");
    assert!(html.contains("restart (stopped by a signal)"), "{html}");
    // Through JSON: the cause is kept.
    let back: SoakHistory =
        serde_json::from_str(&serde_json::to_string(&h).expect("json")).expect("load");
    assert_eq!(back.events[0].cause, Some(StopCause::PowerLoss));
}
