//! Fuzz-style tests of the renderers over hostile input, from a seeded generator (the same
//! cases every run): extreme floats (NaN, ±inf, `f64::MAX`, 1e308, -0, subnormals), empty and
//! huge series, and odd strings (markup and script injection, control characters, very long).
//!
//! Each asserts what holds whatever the input (HTML, Markdown and its SVG files): nothing
//! panics, the output is bounded (a series draws at most its point budget, a chart stays
//! within a fixed size plus its escaped text), no `NaN` or `inf` is written, every string
//! comes out escaped, and a results file that cannot be drawn becomes the error page. The
//! work is bounded by those budgets, not timed.

use super::charts::{LineChart, MAX_SERIES_POINTS, Series, Unit, line_chart};

const UNITS: [Unit; 5] = [
    Unit::Plain,
    Unit::Si,
    Unit::LatencyUs,
    Unit::BytesPerSec,
    Unit::Bytes,
];
use super::soakchart::{MAX_DRAWN_EVENTS, MAX_DRAWN_POINTS, MAX_DRAWN_STEADY, soak_chart};
use super::*;
use crate::model::results::SoakSummary;
use crate::model::soakhist::{
    EventKind, SoakEvent, SoakHistory, SoakPoint, SteadyWindow, StopCause,
};

/// xorshift64*: a small seeded generator, enough to pick cases.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<T: Copy>(&mut self, v: &[T]) -> T {
        v[self.below(v.len())]
    }
    /// A float a hostile file or a broken device could give, or an ordinary one.
    fn float(&mut self) -> f64 {
        const HOSTILE: [f64; 14] = [
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::MAX,
            -f64::MAX,
            1e308,
            -1e308,
            -0.0,
            0.0,
            f64::MIN_POSITIVE,
            5e-324,
            1e-310,
            1e20,
            -1.0,
        ];
        if self.below(3) == 0 {
            (self.next() % 10_000_000) as f64 / 7.0
        } else {
            self.pick(&HOSTILE)
        }
    }
    fn count(&mut self) -> u64 {
        let any = self.next();
        self.pick(&[0, 1, 1000, u64::MAX, u64::MAX / 2, any])
    }
    /// A string meant to break out of markup, or to break the page's layout or encoding.
    fn string(&mut self) -> String {
        match self.below(10) {
            0 => "<script>alert(1)</script>".into(),
            1 => "\"><img src=x onerror=alert(1)>".into(),
            2 => "</svg></title><script>alert(2)</script>".into(),
            3 => "'; x='\u{0}\u{1}\u{1b}[31m\u{7f}\u{85}\u{8}".into(),
            4 => "&amp; &#x3c; ]]> <!-- javascript:alert(3)".into(),
            5 => "\u{202e}drow\u{feff}\u{fffe}".into(),
            6 => String::new(),
            7 => "<".repeat(20_000),
            8 => format!("drive-{}", self.below(1000)),
            _ => "x".repeat(100_000),
        }
    }
}

/// The hostile strings' markup, which must never come out as markup.
const RAW: [&str; 4] = [
    "<script>alert",
    "<img src=x",
    "</title><script>",
    "<!-- javascript",
];

/// `out` holds no `NaN`, no `inf` written as a number, no raw hostile markup and no control
/// character but tab and line breaks.
fn assert_clean(out: &str, what: &str) {
    assert!(!out.contains("NaN"), "{what}: NaN in the output");
    for (i, _) in out.match_indices("inf") {
        let before = out[..i].chars().next_back();
        let after = out[i + 3..].chars().next();
        assert!(
            before.is_some_and(|c| c.is_alphanumeric())
                || after.is_some_and(|c| c.is_alphanumeric()),
            "{what}: inf as a number at byte {i}: {:?}",
            &out[i.saturating_sub(40)..(i + 40).min(out.len())]
        );
    }
    for raw in RAW {
        let at = out.find(raw);
        assert_eq!(
            at,
            None,
            "{what}: unescaped {raw:?}: {:?}",
            at.map(|i| &out[i.saturating_sub(60)..(i + 40).min(out.len())])
        );
    }
    let bad = out
        .chars()
        .find(|c| c.is_control() && !matches!(c, '\t' | '\n' | '\r'));
    assert_eq!(bad, None, "{what}: a control character in the output");
}

/// [`assert_clean`] for Markdown, where outside text is escaped with backslashes: every
/// hostile payload's `<` is escaped.
fn assert_clean_markdown(md: &str, what: &str) {
    let unescaped: String = md.replace("\\<", "");
    assert_clean(&unescaped, what);
}

fn hostile_history(rng: &mut Rng, points: usize, events: usize) -> SoakHistory {
    let mut h = SoakHistory::new(rng.float());
    let base = rng.pick(&[0.0, 1.7e9, 1e20, f64::MAX, f64::NAN]);
    for i in 0..points {
        let ordinary = rng.below(2) == 0;
        h.points.push(SoakPoint {
            t: if ordinary {
                base + i as f64 * 60.0
            } else {
                rng.float()
            },
            secs: if ordinary { 60.0 } else { rng.float() },
            read_ops: rng.count(),
            write_ops: rng.count(),
            lat_avg_us: rng.float(),
            lat_p99_us: rng.float(),
            errors: rng.count(),
            verify_errors: rng.count(),
        });
    }
    for _ in 0..events {
        h.events.push(SoakEvent {
            kind: rng.pick(&EventKind::ALL),
            t: rng.float(),
            end: rng.float(),
            count: rng.count(),
            cause: [None, Some(StopCause::Signal), Some(StopCause::PowerLoss)][rng.below(3)],
        });
    }
    for _ in 0..rng.below(4) {
        h.steady.push(SteadyWindow {
            profile: rng.string(),
            start: rng.float(),
            end: rng.float(),
        });
    }
    h
}

/// The number of points of each `<polyline>` in `svg`.
fn polyline_points(svg: &str) -> Vec<usize> {
    svg.split("<polyline")
        .skip(1)
        .map(|p| {
            let at = p.find("points=\"").expect("points") + "points=\"".len();
            let pts = &p[at..at + p[at..].find('"').expect("end of points")];
            pts.split_whitespace().count()
        })
        .collect()
}

/// A chart's size beyond the text it was given: its fixed parts and the budgeted points,
/// events and windows, each a few hundred bytes at most.
const CHART_BYTES: usize = 4 * MAX_DRAWN_POINTS * 40 + MAX_DRAWN_EVENTS * 800 + 200_000;

#[test]
fn soak_charts_of_hostile_histories_are_bounded_clean_and_escaped() {
    let mut rng = Rng(0x6e76_736f_616b);
    for case in 0..300 {
        let title = rng.string();
        let (points, events) = (rng.pick(&[0, 1, 2, 50, 3000]), rng.below(40));
        let h = hostile_history(&mut rng, points, events);
        let partial = (rng.below(2) == 0)
            .then(|| h.points.first().copied())
            .flatten();
        let svg = soak_chart(&title, &h, partial.as_ref());
        let what = format!("case {case}");
        assert_clean(&svg, &what);
        for n in polyline_points(&svg) {
            assert!(n <= MAX_DRAWN_POINTS, "{what}: {n} points in one series");
        }
        assert!(svg.matches("<g class=\"event\"").count() <= MAX_DRAWN_EVENTS);
        assert!(svg.matches("class=\"steady-window\"").count() <= 2 * MAX_DRAWN_STEADY);
        // The text given is written escaped (at most 6 bytes a byte: `&quot;`), twice for the
        // title and twice per window.
        let text: usize =
            title.len() * 2 + h.steady.iter().map(|w| w.profile.len() * 2).sum::<usize>();
        assert!(
            svg.len() <= CHART_BYTES + 6 * text,
            "{what}: {} bytes",
            svg.len()
        );
    }
}

#[test]
fn a_million_points_and_events_are_drawn_within_the_budget() {
    let points = (0..1_000_000u64)
        .map(|i| SoakPoint {
            t: 1.7e9 + i as f64 * 60.0,
            secs: 60.0,
            read_ops: 1000 + i % 7,
            write_ops: 500,
            lat_avg_us: 100.0 + (i % 13) as f64,
            lat_p99_us: 900.0,
            ..Default::default()
        })
        .collect();
    let events = (0..1_000_000u64)
        .map(|i| SoakEvent {
            kind: EventKind::IoErrors,
            t: 1.7e9 + i as f64 * 60.0,
            end: 1.7e9 + i as f64 * 60.0,
            count: 1,
            cause: None,
        })
        .collect();
    let h = SoakHistory {
        points,
        events,
        ..Default::default()
    };
    let svg = soak_chart("big", &h, None);
    let pts = polyline_points(&svg);
    assert_eq!(pts.len(), 4, "four series drawn");
    for n in pts {
        assert!(
            (MAX_DRAWN_POINTS / 2..=MAX_DRAWN_POINTS).contains(&n),
            "{n} points"
        );
    }
    assert_eq!(svg.matches("<g class=\"event\"").count(), MAX_DRAWN_EVENTS);
    assert!(svg.len() <= CHART_BYTES, "{} bytes", svg.len());
    assert_clean(&svg, "a million points");
    // Empty: a chart with nothing in it is still a chart, without a point.
    let empty = soak_chart("empty", &SoakHistory::default(), None);
    assert!(polyline_points(&empty).is_empty());
    assert_clean(&empty, "empty");
}

#[test]
fn line_charts_of_hostile_series_are_bounded_clean_and_escaped() {
    let mut rng = Rng(0x6c69_6e65);
    for case in 0..200 {
        let n = rng.pick(&[0, 1, 3, 100, 10_000]);
        let series: Vec<Series> = (0..rng.below(4))
            .map(|_| Series {
                name: rng.string(),
                points: (0..n).map(|_| (rng.float(), rng.float())).collect(),
            })
            .collect();
        let flagged: Vec<(f64, f64)> = (0..rng.below(3) * n)
            .map(|_| (rng.float(), rng.float()))
            .collect();
        let (title, x_desc, y_desc, flag_label) =
            (rng.string(), rng.string(), rng.string(), rng.string());
        let x_range = (rng.below(3) == 0).then(|| (rng.float(), rng.float()));
        let c = LineChart {
            title: &title,
            x_desc: &x_desc,
            y_desc: &y_desc,
            width: 860,
            height: 420,
            series: &series,
            x_range,
            reference: Some(crate::report::charts::RefLine {
                y: rng.float(),
                label: rng.string(),
            }),
            legend: true,
            x_unit: UNITS[rng.below(UNITS.len())],
            y_unit: UNITS[rng.below(UNITS.len())],
            x_ago: rng.below(2) == 0,
            y_log_auto: rng.below(2) == 0,
            markers: rng.below(2) == 0,
            flagged: &flagged,
            flag_label: &flag_label,
            gap: None,
        };
        let what = format!("case {case}");
        let svg = line_chart(&c).expect("an 860x420 chart has room for its plot");
        assert_clean(&svg, &what);
        for p in polyline_points(&svg) {
            assert!(p <= MAX_SERIES_POINTS, "{what}: {p} points");
        }
        let markers = svg.matches("<circle").count();
        assert!(
            markers <= (series.len() + 1) * MAX_SERIES_POINTS,
            "{what}: {markers} markers"
        );
    }
}

/// A results file with every figure, name and series hostile.
fn hostile_results(rng: &mut Rng) -> TargetResults {
    let text = include_str!("../../tests/fixtures/report/drive-a.json");
    let mut r: TargetResults = serde_json::from_str(text).expect("fixture");
    r.host = rng.string();
    r.target = rng.string();
    if let Some(d) = r.device.as_mut() {
        d.model = rng.string();
        d.serial = rng.string();
    }
    for s in &mut r.sweeps {
        s.profile = rng.string();
        s.max_iops = rng.float();
        for p in &mut s.points {
            p.iops = rng.float();
            p.target_iops = rng.float();
            p.bytes_per_sec = rng.float();
            p.lat_avg_us = rng.float();
            p.lat_p99_us = rng.float();
            p.lat_p999_us = rng.float();
        }
    }
    let (n, events) = (rng.pick(&[0, 5, 2000]), rng.below(30));
    r.soak = Some(SoakSummary {
        elapsed_secs: rng.float(),
        read_bytes: rng.count(),
        written_bytes: rng.count(),
        history: Some(hostile_history(rng, n, events)),
        ..Default::default()
    });
    r
}

#[test]
fn reports_of_hostile_results_render_clean_or_refuse() {
    let mut rng = Rng(0x7265_706f_7274);
    let dir = tempfile::tempdir().expect("tempdir");
    for case in 0..60 {
        let r = hostile_results(&mut rng);
        let what = format!("case {case}");
        // Straight to the renderer, as figures held in memory: it draws them all safely.
        let loaded = Loaded {
            source: PathBuf::from("t.json"),
            results: r.clone(),
            archived: None,
        };
        let report = build_with(std::slice::from_ref(&loaded), &|_| None);
        let html = html::render(&report).expect("a report renders");
        assert_clean(&html, &what);
        let (md, svgs) = markdown::render(&report, "report").expect("a markdown report renders");
        assert_clean_markdown(&md, &format!("{what}, markdown"));
        for (name, svg) in &svgs {
            assert_clean(svg, &format!("{what}, {name}"));
        }
        // Through a file: a figure out of range is refused naming it, anything else renders.
        let path = dir.path().join(format!("case{case}.json"));
        std::fs::write(&path, serde_json::to_vec(&r).expect("json")).expect("write");
        match load_file(&path) {
            Ok(l) => {
                let report = build_with(std::slice::from_ref(&l), &|_| None);
                assert_clean(&html::render(&report).expect("renders"), &what);
            }
            Err(ReportError::Figure { figure, .. }) => assert!(!figure.is_empty(), "{what}"),
            Err(e) => panic!("{what}: {e}"),
        }
    }
}

/// The daemon's `/report` over a state directory whose results file cannot be drawn is the
/// error page naming the figure, not a panic or an empty answer.
#[test]
fn a_results_file_that_cannot_be_drawn_is_the_error_page() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(dir.path().join("results")).expect("results dir");
    let text = include_str!("../../tests/fixtures/report/drive-a.json");
    let forged = text.replacen(
        "\"lat_avg_us\": 1280",
        "\"lat_avg_us\": 1.7976931348623157e308",
        1,
    );
    assert_ne!(forged, text, "the fixture has the figure to forge");
    std::fs::write(dir.path().join("results/t0.json"), forged).expect("write");
    let page = report_page_html(dir.path());
    assert!(page.starts_with("<!doctype html>"), "{page}");
    assert!(page.contains("No report yet"), "{page}");
    assert!(page.contains("sweeps[0].points[0].lat_avg_us"), "{page}");
    assert_clean(&page, "error page");
}

/// The status page over drives whose figures a broken device or poller could give: it renders
/// every drive, with no `NaN` or `inf` and every name escaped.
#[test]
fn the_status_page_over_hostile_drive_figures_is_clean_and_escaped() {
    use super::drive_status::DriveStatus;
    use super::history::History;
    let mut rng = Rng(0x7374_6174_7573);
    for case in 0..100 {
        let opt = |rng: &mut Rng| (rng.below(4) != 0).then(|| rng.float());
        let drives: Vec<DriveStatus> = (0..1 + rng.below(4))
            .map(|_| DriveStatus {
                device: rng.string(),
                model: rng.string(),
                serial: rng.string(),
                up: rng.below(2) == 0,
                temperature_c: opt(&mut rng),
                warning_temp_c: opt(&mut rng),
                critical_temp_c: opt(&mut rng),
                percentage_used: opt(&mut rng),
                available_spare: opt(&mut rng),
                data_written_bytes: opt(&mut rng),
                rated_endurance_bytes: opt(&mut rng),
                throttling: Some(rng.below(2) == 0),
                throttle_events: Some(rng.count()),
                media_errors: Some(rng.count()),
                error_log_entries: Some(rng.count()),
                critical_warning: Some(rng.below(256) as u8),
                smart_passed: Some(rng.below(2) == 0),
                reallocated_sectors: Some(rng.count()),
            })
            .collect();
        let mut history = History::new(600, std::time::Duration::from_secs(1));
        for (i, d) in drives.iter().enumerate() {
            for k in 0..rng.below(700) {
                let t = 1.7e9 + (i * 1000 + k) as f64;
                history.push_device(t, &d.device, rng.float());
            }
        }
        let why = rng.string();
        let page = super::status::render_status_why(&[], &drives, &history, &why);
        let what = format!("case {case}");
        assert_clean(&page, &what);
        assert!(page.starts_with("<!doctype html>"), "{what}");
    }
}
