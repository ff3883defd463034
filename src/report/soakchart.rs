//! "Soak over time": one SVG with two panels sharing the soak's time axis, IOPS (read, write)
//! above and latency (average, p99) below, with the events marked on both (a dashed line and a
//! labelled marker per event, a band per throttling period) and the steady-state window shaded.
//! The legend sits above the panels, outside the plot areas, so it never hides a point. The
//! latency axis is logarithmic when the largest latency is more than [`LOG_RATIO`] times the
//! smallest (one slow point would flatten the rest on a linear axis).
//!
//! Drawn by hand (not plotters) for full control of the layout; pure: numbers in, SVG text out.
//! Hooks for tests and tools: the root has `class="chart soak-chart"`, `data-series-count`,
//! `data-event-count` and `data-latency-scale` (`log` or `linear`); each series is a
//! `<polyline class="series" data-series="...">`, and each part of it after a gap in the data
//! (more than [`GAP_SECS`] between one point's end and the next one's start: the daemon was
//! down) another `<polyline class="series series-continued">`, so missing data is a gap, never
//! a bridge or a zero; plot areas are `<rect class="plot-area">`;
//! events are `<g class="event" data-kind="...">` (a restart also `data-cause="..."`, its
//! downtime a band); the steady window is
//! `<rect class="steady-window">`; time-axis labels are `<text class="x-label">`.
//!
//! Bounded whatever the history holds: at most [`MAX_DRAWN_POINTS`] points per series (a
//! longer series, which only a damaged or edited file has, is merged down in runs of
//! neighbours first, as the history itself compacts), [`MAX_DRAWN_EVENTS`] events and
//! [`MAX_DRAWN_STEADY`] steady windows; a figure that is not finite is left out, never
//! written as `NaN`.

use std::fmt::Write as _;

/// Above this max/min latency ratio the latency axis is logarithmic (the line charts' rule too).
pub use super::charts::LOG_RATIO;
use super::charts::{FONT, PALETTE, Scale, esc, latency_label, nice_step, si, wants_log};
use crate::model::soakhist::{EventKind, MAX_EVENTS, MAX_POINTS, SoakHistory, SoakPoint};

/// The most points one series draws: as many as a history keeps.
pub const MAX_DRAWN_POINTS: usize = MAX_POINTS;
/// The most events one chart draws: as many as a history keeps.
pub const MAX_DRAWN_EVENTS: usize = MAX_EVENTS;
/// The most steady windows one chart draws (a plan has one per steady-state phase).
pub const MAX_DRAWN_STEADY: usize = 32;

pub const WIDTH: f64 = 1000.0;
const LEFT: f64 = 84.0;
const RIGHT: f64 = 24.0;
const TITLE_H: f64 = 30.0;
const LEGEND_H: f64 = 24.0;
const PANEL_H: f64 = 170.0;
const PANEL_GAP: f64 = 44.0;
const AXIS_H: f64 = 48.0;
const PLOT_W: f64 = WIDTH - LEFT - RIGHT;
pub const HEIGHT: f64 = TITLE_H + LEGEND_H + 2.0 * PANEL_H + PANEL_GAP + AXIS_H + 8.0;

fn event_color(k: EventKind) -> &'static str {
    match k {
        EventKind::Throttled => "#ff7f0e",
        EventKind::IoErrors => "#d62728",
        EventKind::VerifyErrors => "#9467bd",
        EventKind::CriticalWarning => "#8b0000",
        EventKind::MediaErrors => "#e377c2",
        EventKind::UnsafeShutdown => "#7f7f7f",
        EventKind::Restart => "#17becf",
    }
}

/// One letter per event kind, drawn in its marker.
fn event_letter(k: EventKind) -> &'static str {
    match k {
        EventKind::Throttled => "T",
        EventKind::IoErrors => "E",
        EventKind::VerifyErrors => "V",
        EventKind::CriticalWarning => "C",
        EventKind::MediaErrors => "M",
        EventKind::UnsafeShutdown => "U",
        EventKind::Restart => "R",
    }
}

/// Time-axis units: the largest that still gives a few ticks over `span` seconds.
fn time_unit(span: f64) -> (f64, &'static str) {
    if span >= 2.0 * 86400.0 {
        (86400.0, "days")
    } else if span >= 2.0 * 3600.0 {
        (3600.0, "hours")
    } else if span >= 120.0 {
        (60.0, "minutes")
    } else {
        (1.0, "seconds")
    }
}

fn tick_label(v: f64) -> String {
    let s = format!("{v:.2}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" { "0".into() } else { s.into() }
}

/// A series: its name, its (time, value) points in parts (a new part after each gap in the
/// data), and the axis it is drawn against.
type Line<'a> = (&'static str, Vec<Vec<(f64, f64)>>, &'a Scale);

/// Seconds between one point's end and the next one's start beyond which the soak has a gap
/// (the daemon was down, the device away, the target stopped): the lines break there.
pub const GAP_SECS: f64 = super::history::GAP_SECS;

/// `pts` cut where the soak has a gap, each part as (time, value) of the points `value` keeps.
fn parts(pts: &[SoakPoint], value: impl Fn(&SoakPoint) -> Option<f64>) -> Vec<Vec<(f64, f64)>> {
    let mut out: Vec<Vec<(f64, f64)>> = vec![Vec::new()];
    let mut prev_end: Option<f64> = None;
    for p in pts {
        if prev_end.is_some_and(|e| p.t - e > GAP_SECS) && out.last().is_some_and(|l| !l.is_empty())
        {
            out.push(Vec::new());
        }
        prev_end = Some(p.t + p.secs);
        if let (Some(v), Some(last)) = (value(p).filter(|v| v.is_finite()), out.last_mut()) {
            last.push((p.mid(), v));
        }
    }
    out
}

/// The chart's series values from the history (and the point being built, for a running soak),
/// at most [`MAX_DRAWN_POINTS`] of them.
fn points(h: &SoakHistory, partial: Option<&SoakPoint>) -> Vec<SoakPoint> {
    let drawable = |p: &&SoakPoint| p.secs > 0.0 && p.secs.is_finite() && p.t.is_finite();
    let mut pts: Vec<SoakPoint> = h.points.iter().filter(drawable).copied().collect();
    if let Some(p) = partial.filter(drawable) {
        pts.push(*p);
    }
    within_budget(pts)
}

/// `pts` merged in runs of neighbours until at most [`MAX_DRAWN_POINTS`] are left.
fn within_budget(pts: Vec<SoakPoint>) -> Vec<SoakPoint> {
    if pts.len() <= MAX_DRAWN_POINTS {
        return pts;
    }
    let run = pts.len().div_ceil(MAX_DRAWN_POINTS);
    pts.chunks(run)
        .map(|c| {
            let mut m = c[0];
            for p in &c[1..] {
                m.merge(p);
            }
            m
        })
        .collect()
}

/// The events a chart draws: the first [`MAX_DRAWN_EVENTS`] at a finite time.
fn drawn_events(h: &SoakHistory) -> impl Iterator<Item = &crate::model::soakhist::SoakEvent> {
    h.events
        .iter()
        .filter(|e| e.t.is_finite() && e.end.is_finite())
        .take(MAX_DRAWN_EVENTS)
}

/// Whether there is anything to draw.
pub fn has_data(h: &SoakHistory, partial: Option<&SoakPoint>) -> bool {
    !points(h, partial).is_empty() || !h.events.is_empty()
}

/// A panel's y axis: `lo..=hi` over the panel whose top edge is at `top`.
fn panel(log: bool, lo: f64, hi: f64, top: f64) -> Scale {
    Scale {
        log,
        lo,
        hi,
        from: top + PANEL_H,
        to: top,
    }
}

/// The chart's geometry: the time range across both panels, the panels' tops and y axes
/// (IOPS above, latency below) and the largest latency.
#[derive(Clone, Copy)]
struct Geometry {
    t0: f64,
    t1: f64,
    top1: f64,
    top2: f64,
    y1: Scale,
    y2: Scale,
    log: bool,
    lat_max: f64,
}

impl Geometry {
    fn of(pts: &[SoakPoint], h: &SoakHistory) -> Geometry {
        let (t0, t1) = {
            let lo = pts
                .iter()
                .map(|p| p.t)
                .chain(drawn_events(h).map(|e| e.t))
                .fold(f64::INFINITY, f64::min);
            let hi = pts
                .iter()
                .map(|p| p.t + p.secs)
                .chain(drawn_events(h).map(|e| e.end))
                .fold(f64::NEG_INFINITY, f64::max);
            if lo.is_finite() && hi > lo {
                (lo, hi)
            } else if lo.is_finite() {
                (lo, lo + 60.0)
            } else {
                (0.0, 60.0)
            }
        };
        let top1 = TITLE_H + LEGEND_H + 8.0;
        let top2 = top1 + PANEL_H + PANEL_GAP;

        let max_iops = pts
            .iter()
            .map(|p| p.read_iops().max(p.write_iops()))
            .filter(|v| v.is_finite())
            .fold(0.0f64, f64::max);
        let iops_hi = if max_iops > 0.0 {
            let s = nice_step(max_iops * 1.05, 4.0);
            (max_iops * 1.05 / s).ceil() * s
        } else {
            1.0
        };
        let y1 = panel(false, 0.0, iops_hi, top1);
        let lats: Vec<f64> = pts
            .iter()
            .flat_map(|p| [p.lat_avg_us, p.lat_p99_us])
            .filter(|v| v.is_finite() && *v > 0.0)
            .collect();
        let log = wants_log(&lats);
        let lat_max = lats.iter().copied().fold(0.0f64, f64::max);
        let lat_min = lats.iter().copied().fold(f64::INFINITY, f64::min);
        let y2 = if log {
            panel(
                true,
                10f64.powf(lat_min.log10().floor()),
                10f64.powf(lat_max.log10().ceil()),
                top2,
            )
        } else {
            let hi = if lat_max > 0.0 {
                let s = nice_step(lat_max * 1.05, 4.0);
                (lat_max * 1.05 / s).ceil() * s
            } else {
                1.0
            };
            panel(false, 0.0, hi, top2)
        };
        Geometry {
            t0,
            t1,
            top1,
            top2,
            y1,
            y2,
            log,
            lat_max,
        }
    }

    /// The x pixel of time `t`, held inside the plot (at its left edge when the time range is
    /// too narrow for the float to tell its ends apart).
    fn x(&self, t: f64) -> f64 {
        let f = (t - self.t0) / (self.t1 - self.t0);
        LEFT + PLOT_W * if f.is_nan() { 0.0 } else { f.clamp(0.0, 1.0) }
    }
}

/// The four series, each against its panel's axis.
fn series_of<'g>(pts: &[SoakPoint], g: &'g Geometry) -> [Line<'g>; 4] {
    let positive = |v: f64| (v > 0.0).then_some(v);
    [
        ("read IOPS", parts(pts, |p| Some(p.read_iops())), &g.y1),
        ("write IOPS", parts(pts, |p| Some(p.write_iops())), &g.y1),
        (
            "average latency",
            parts(pts, |p| positive(p.lat_avg_us)),
            &g.y2,
        ),
        ("p99 latency", parts(pts, |p| positive(p.lat_p99_us)), &g.y2),
    ]
}

/// The chart. `title` names the target or drive.
pub fn soak_chart(title: &str, h: &SoakHistory, partial: Option<&SoakPoint>) -> String {
    let pts = points(h, partial);
    let g = Geometry::of(&pts, h);
    let log = g.log;
    let series = series_of(&pts, &g);
    let drawn: Vec<usize> = (0..series.len())
        .filter(|i| series[*i].1.iter().flatten().any(|(_, v)| *v > 0.0))
        .collect();

    let mut s = String::new();
    let _ = writeln!(
        s,
        "<svg class=\"chart soak-chart\" role=\"img\" data-series-count=\"{}\" data-event-count=\"{}\" data-latency-scale=\"{}\" width=\"{WIDTH}\" height=\"{HEIGHT}\" viewBox=\"0 0 {WIDTH} {HEIGHT}\" xmlns=\"http://www.w3.org/2000/svg\">",
        drawn.len(),
        drawn_events(h).count(),
        if log { "log" } else { "linear" }
    );
    let _ = writeln!(s, "<title>{}</title>", esc(title));
    let _ = writeln!(s, "<rect width=\"100%\" height=\"100%\" fill=\"#fff\"/>");
    let _ = writeln!(
        s,
        "<text x=\"{}\" y=\"20\" text-anchor=\"middle\" {FONT} font-size=\"17\" font-weight=\"600\">{}</text>",
        WIDTH / 2.0,
        esc(title)
    );

    legend(&mut s, &series, &drawn, h);
    panels(&mut s, &g);
    bands(&mut s, h, &g);
    reference(&mut s, &g);
    lines(&mut s, &series, &drawn, &g);
    events(&mut s, h, &g);
    time_axis(&mut s, &g);
    s.push_str("</svg>\n");
    s
}

/// The legend, above the plot areas: the series, then each event kind present, then the
/// steady-state window.
fn legend(s: &mut String, series: &[Line<'_>], drawn: &[usize], h: &SoakHistory) {
    // Legend, above the plot areas: the series, then each event kind present.
    let mut lx = LEFT;
    let ly = TITLE_H + 14.0;
    let _ = writeln!(s, "<g class=\"legend\">");
    for i in drawn {
        let name = series[*i].0;
        let c = PALETTE[*i % PALETTE.len()];
        let _ = writeln!(
            s,
            "<rect x=\"{lx}\" y=\"{}\" width=\"14\" height=\"4\" fill=\"{c}\"/><text x=\"{}\" y=\"{}\" {FONT} font-size=\"13\">{}</text>",
            ly - 6.0,
            lx + 18.0,
            ly,
            esc(name)
        );
        lx += 26.0 + name.len() as f64 * 7.2;
    }
    for k in EventKind::ALL {
        if h.events.iter().any(|e| e.kind == k) {
            let _ = writeln!(
                s,
                "<circle cx=\"{}\" cy=\"{}\" r=\"7\" fill=\"{}\"/><text x=\"{}\" y=\"{}\" text-anchor=\"middle\" {FONT} font-size=\"10\" fill=\"#fff\">{}</text><text x=\"{}\" y=\"{ly}\" {FONT} font-size=\"13\">{}</text>",
                lx + 7.0,
                ly - 4.0,
                event_color(k),
                lx + 7.0,
                ly - 0.5,
                event_letter(k),
                lx + 18.0,
                esc(k.label())
            );
            lx += 28.0 + k.label().len() as f64 * 7.2;
        }
    }
    if !h.steady.is_empty() {
        let _ = writeln!(
            s,
            "<rect x=\"{lx}\" y=\"{}\" width=\"14\" height=\"12\" fill=\"#2ca02c\" fill-opacity=\"0.18\" stroke=\"#2ca02c\"/><text x=\"{}\" y=\"{ly}\" {FONT} font-size=\"13\">steady-state window</text>",
            ly - 10.0,
            lx + 18.0
        );
    }
    let _ = writeln!(s, "</g>");
}

/// Each panel's frame, grid and y labels.
fn panels(s: &mut String, g: &Geometry) {
    let Geometry {
        top1, top2, y1, y2, ..
    } = *g;
    // Panels: frame, grid and y labels.
    for (y, top, name, unit) in [
        (&y1, top1, "iops", "IOPS"),
        (&y2, top2, "latency", "latency"),
    ] {
        let _ = writeln!(
            s,
            "<rect class=\"plot-area\" data-panel=\"{name}\" x=\"{LEFT}\" y=\"{top}\" width=\"{PLOT_W}\" height=\"{PANEL_H}\" fill=\"none\" stroke=\"#999\"/>"
        );
        for v in y.ticks(4.0) {
            let py = y.px(v);
            let label = if name == "iops" {
                si(v)
            } else {
                latency_label(v)
            };
            let _ = writeln!(
                s,
                "<line x1=\"{LEFT}\" x2=\"{}\" y1=\"{py:.1}\" y2=\"{py:.1}\" stroke=\"#e5e5e5\"/><text class=\"y-label\" x=\"{}\" y=\"{:.1}\" text-anchor=\"end\" {FONT} font-size=\"12\">{}</text>",
                LEFT + PLOT_W,
                LEFT - 6.0,
                py + 4.0,
                esc(&label)
            );
        }
        let _ = writeln!(
            s,
            "<text x=\"16\" y=\"{:.1}\" transform=\"rotate(-90 16 {:.1})\" text-anchor=\"middle\" {FONT} font-size=\"13\">{}{}</text>",
            top + PANEL_H / 2.0,
            top + PANEL_H / 2.0,
            unit,
            if y.log { " (log)" } else { "" }
        );
    }
}

/// Steady-state windows and throttling periods, shaded across both panels.
fn bands(s: &mut String, h: &SoakHistory, g: &Geometry) {
    let Geometry {
        t0, t1, top1, top2, ..
    } = *g;
    let x = |t: f64| g.x(t);
    // Steady-state windows and throttling periods, shaded across both panels.
    let band = |s: &mut String, class: &str, attrs: &str, a: f64, b: f64, fill: &str| {
        let (xa, xb) = (x(a), x(b).max(x(a) + 2.0));
        for top in [top1, top2] {
            let _ = writeln!(
                s,
                "<rect class=\"{class}\" {attrs} x=\"{xa:.1}\" y=\"{top}\" width=\"{:.1}\" height=\"{PANEL_H}\" fill=\"{fill}\" fill-opacity=\"0.15\"/>",
                xb - xa
            );
        }
    };
    for w in h.steady.iter().take(MAX_DRAWN_STEADY) {
        band(
            s,
            "steady-window",
            &format!("data-profile=\"{}\"", esc(&w.profile)),
            w.start.max(t0),
            w.end.min(t1),
            "#2ca02c",
        );
    }
    // Throttling periods, and the time a restart kept the soak down.
    for e in drawn_events(h)
        .filter(|e| matches!(e.kind, EventKind::Throttled | EventKind::Restart) && e.end > e.t)
    {
        band(
            s,
            "event-band",
            &format!("data-kind=\"{}\"", e.kind.key()),
            e.t,
            e.end,
            event_color(e.kind),
        );
    }
}

/// The 1 ms reference line on the latency panel.
fn reference(s: &mut String, g: &Geometry) {
    let Geometry { y2, lat_max, .. } = *g;
    // The 1 ms reference, when it falls in the latency range; its label sits inside the plot
    // at the right, clear of the axis labels.
    if y2.lo <= 1000.0 && 1000.0 <= y2.hi && lat_max > 0.0 {
        let py = y2.px(1000.0);
        let _ = writeln!(
            s,
            "<line class=\"reference\" x1=\"{LEFT}\" x2=\"{}\" y1=\"{py:.1}\" y2=\"{py:.1}\" stroke=\"#555\" stroke-dasharray=\"6 4\"/><text class=\"reference-label\" x=\"{}\" y=\"{:.1}\" text-anchor=\"end\" {FONT} font-size=\"12\" fill=\"#555\">1 ms</text>",
            LEFT + PLOT_W,
            LEFT + PLOT_W - 6.0,
            py - 5.0
        );
    }
}

/// The series' lines, with a marker per point when they are few.
fn lines(s: &mut String, series: &[Line<'_>], drawn: &[usize], g: &Geometry) {
    let x = |t: f64| g.x(t);
    // The series, a line per part (a part after a gap is `series-continued`).
    for i in drawn {
        let (name, parts, y) = &series[*i];
        let c = PALETTE[*i % PALETTE.len()];
        let n: usize = parts.iter().map(Vec::len).sum();
        for (k, part) in parts.iter().filter(|p| !p.is_empty()).enumerate() {
            let coords: Vec<String> = part
                .iter()
                .map(|(t, v)| format!("{:.1},{:.1}", x(*t), y.px(*v)))
                .collect();
            let _ = writeln!(
                s,
                "<polyline class=\"{}\" data-series=\"{}\" points=\"{}\" fill=\"none\" stroke=\"{c}\" stroke-width=\"2\"/>",
                if k == 0 {
                    "series"
                } else {
                    "series series-continued"
                },
                esc(name),
                coords.join(" ")
            );
            // A lone point between gaps would draw nothing as a line: a dot.
            if n < 40 || part.len() == 1 {
                for (t, v) in part {
                    let _ = writeln!(
                        s,
                        "<circle class=\"point\" cx=\"{:.1}\" cy=\"{:.1}\" r=\"3\" fill=\"{c}\"/>",
                        x(*t),
                        y.px(*v)
                    );
                }
            }
        }
    }
}

/// The events: a dashed line through both panels and a lettered marker each.
fn events(s: &mut String, h: &SoakHistory, g: &Geometry) {
    let Geometry { top1, top2, .. } = *g;
    let x = |t: f64| g.x(t);
    // Events: a dashed line through both panels and a lettered marker above the IOPS panel.
    for e in drawn_events(h) {
        let ex = x(e.t);
        let c = event_color(e.kind);
        let detail = match e.kind {
            EventKind::Throttled => format!("throttling ({})", e.count),
            _ => event_words(e),
        };
        let cause = e
            .cause
            .filter(|_| e.kind == EventKind::Restart)
            .map(|c| format!(" data-cause=\"{}\"", c.key()))
            .unwrap_or_default();
        let _ = writeln!(
            s,
            "<g class=\"event\" data-kind=\"{}\" data-count=\"{}\"{cause}><title>{}</title><line x1=\"{ex:.1}\" x2=\"{ex:.1}\" y1=\"{top1}\" y2=\"{}\" stroke=\"{c}\" stroke-dasharray=\"3 3\"/><line x1=\"{ex:.1}\" x2=\"{ex:.1}\" y1=\"{top2}\" y2=\"{}\" stroke=\"{c}\" stroke-dasharray=\"3 3\"/><circle cx=\"{ex:.1}\" cy=\"{}\" r=\"7\" fill=\"{c}\"/><text x=\"{ex:.1}\" y=\"{}\" text-anchor=\"middle\" {FONT} font-size=\"10\" fill=\"#fff\">{}</text></g>",
            e.kind.key(),
            e.count,
            esc(&detail),
            top1 + PANEL_H,
            top2 + PANEL_H,
            top1 + 9.0,
            top1 + 12.5,
            event_letter(e.kind)
        );
    }
}

/// An event in words: "3 I/O errors", "critical warning 0x04", "restart (stopped by a
/// signal)".
fn event_words(e: &crate::model::soakhist::SoakEvent) -> String {
    match e.kind {
        EventKind::CriticalWarning => format!("critical warning 0x{:02x}", e.count),
        EventKind::Throttled => "throttling".to_string(),
        EventKind::Restart => {
            let why = e
                .cause
                .unwrap_or(crate::model::soakhist::StopCause::Stopped);
            if e.count > 1 {
                format!("{} restarts (the first {})", e.count, why.words())
            } else {
                format!("restart ({})", why.words())
            }
        }
        k => format!("{} {}", e.count, k.label()),
    }
}

/// The time axis, under the latency panel.
fn time_axis(s: &mut String, g: &Geometry) {
    let Geometry { t0, t1, top2, .. } = *g;
    let x = |t: f64| g.x(t);
    // Time axis, under the latency panel: time since the soak's first point.
    let (unit, unit_name) = time_unit(t1 - t0);
    let span_u = (t1 - t0) / unit;
    let step = nice_step(span_u, 8.0);
    let base = top2 + PANEL_H;
    let mut v = 0.0;
    let mut k = 0;
    while v <= span_u + step * 1e-9 && k < 30 {
        let px = x(t0 + v * unit);
        let _ = writeln!(
            s,
            "<line x1=\"{px:.1}\" x2=\"{px:.1}\" y1=\"{base}\" y2=\"{}\" stroke=\"#999\"/><text class=\"x-label\" x=\"{px:.1}\" y=\"{}\" text-anchor=\"middle\" {FONT} font-size=\"12\">{}</text>",
            base + 5.0,
            base + 19.0,
            tick_label(v)
        );
        v += step;
        k += 1;
    }
    let _ = writeln!(
        s,
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" {FONT} font-size=\"13\">{unit_name} since the soak started</text>",
        LEFT + PLOT_W / 2.0,
        base + 40.0
    );
}

/// At most this many events are listed under a chart (the chart marks them all).
const MAX_LISTED: usize = 20;

/// One line per event, relative to the soak's first point: "at 01:10:00, 3 I/O errors",
/// "from 02:00:00 to 02:30:00, throttling (1800)".
pub fn event_lines(h: &SoakHistory) -> Vec<String> {
    let t0 = h.span().map_or(0.0, |s| s.0);
    let at = |t: f64| crate::model::fmt::fmt_elapsed(t - t0);
    h.events
        .iter()
        .take(MAX_LISTED)
        .map(|e| {
            let what = event_words(e);
            if e.end > e.t {
                format!("from {} to {}, {what}", at(e.t), at(e.end))
            } else {
                format!("at {}, {what}", at(e.t))
            }
        })
        .collect()
}

fn steady_lines(h: &SoakHistory) -> Vec<String> {
    let t0 = h.span().map_or(0.0, |s| s.0);
    let at = |t: f64| crate::model::fmt::fmt_elapsed(t - t0);
    h.steady
        .iter()
        .take(MAX_LISTED)
        .map(|w| {
            format!(
                "steady state ({}) over the window {} to {}",
                w.profile,
                at(w.start),
                at(w.end)
            )
        })
        .collect()
}

/// The report's id of a drive's chart (`drive1--soak`: profile slugs never hold `--`).
pub fn figure_id(drive_index: usize) -> String {
    format!("drive{}--soak", drive_index + 1)
}

/// The report's "Soak over time" for a drive (HTML): the chart, then the events and steady
/// windows in words; empty when the results file has no history.
pub fn report_html(drive_index: usize, d: &super::DriveReport) -> String {
    let Some(h) = d.soak.as_ref().and_then(|s| s.history.as_ref()) else {
        return String::new();
    };
    if !has_data(h, None) {
        return String::new();
    }
    let mut o = String::from("<h3>Soak over time</h3>\n");
    let _ = writeln!(
        o,
        "<figure id=\"{}\" class=\"soak-over-time\" data-series=\"4\">{}</figure>",
        figure_id(drive_index),
        soak_chart(&format!("{}: soak over time", d.label), h, None)
    );
    o.push_str(&lines_html(h));
    o
}

fn lines_html(h: &SoakHistory) -> String {
    let lines: Vec<String> = steady_lines(h).into_iter().chain(event_lines(h)).collect();
    let mut o = String::new();
    if lines.is_empty() {
        o.push_str("<p class=\"soak-events muted\">No events during the soak.</p>\n");
    } else {
        o.push_str("<ul class=\"soak-events\">");
        for l in lines {
            let _ = write!(o, "<li>{}</li>", esc(&l));
        }
        o.push_str("</ul>\n");
        if h.events.len() > MAX_LISTED {
            let _ = writeln!(
                o,
                "<p class=\"muted\">{} more events are marked on the chart.</p>",
                h.events.len() - MAX_LISTED
            );
        }
    }
    o
}

/// The Markdown report's "Soak over time": the chart as an SVG file (`<stem>-<id>.svg`, added
/// to `files`) and the events in words.
pub fn report_markdown(
    md: &mut String,
    stem: &str,
    drive_index: usize,
    d: &super::DriveReport,
    files: &mut Vec<(String, String)>,
) {
    let Some(h) = d.soak.as_ref().and_then(|s| s.history.as_ref()) else {
        return;
    };
    if !has_data(h, None) {
        return;
    }
    let name = format!("{stem}-{}.svg", figure_id(drive_index));
    md.push_str("### Soak over time\n\n");
    let _ = write!(
        md,
        "![{}: soak over time]({name})\n\n",
        super::mdtext::cell(&d.label)
    );
    files.push((
        name,
        soak_chart(&format!("{}: soak over time", d.label), h, None),
    ));
    let lines: Vec<String> = steady_lines(h).into_iter().chain(event_lines(h)).collect();
    if lines.is_empty() {
        md.push_str("No events during the soak.\n\n");
    } else {
        for l in lines {
            let _ = writeln!(md, "- {}", super::mdtext::cell(&l));
        }
        md.push('\n');
    }
}

/// The status page's "soak over time" for a running (or stopped) target: the history so far
/// and the point being built; empty before the first soak interval.
pub fn status_html(s: &crate::workload::scheduler::TargetSnapshot) -> String {
    let empty = SoakHistory::default();
    let h = s.soak_history.as_deref().unwrap_or(&empty);
    if !has_data(h, s.soak_partial.as_ref()) {
        return String::new();
    }
    let mut o = format!(
        "<h3>{} — soak over time</h3>\n<figure class=\"soak-over-time\">",
        esc(&s.name)
    );
    o.push_str(&soak_chart(
        &format!("{}: soak over time", s.name),
        h,
        s.soak_partial.as_ref(),
    ));
    o.push_str("</figure>\n");
    o.push_str(&lines_html(h));
    o
}

#[cfg(test)]
mod tests;
