//! The daemon's `/` page: server-rendered HTML with inline SVG, refreshed by a `<meta>` tag (no
//! script, no external asset), so it works on an air-gapped rack.
//!
//! Drives are passed as [`DriveStatus`] rows, one flat, protocol-neutral view per drive of
//! the health poller's snapshot ([`drives_from_health`] builds them in `drive_status.rs` from
//! the protocol-neutral drive samples), so the drive table does not depend on the poller's
//! internals.

use super::charts::{self, LineChart, RefLine, Series, Unit, esc};
pub use super::drive_status::DriveStatus;
use super::history::{History, TargetSample};
use crate::model::fmt::{
    count_of, fmt_bytes, fmt_count, fmt_cpu_ns, fmt_latency_us, fmt_pct, fmt_rate,
};
use crate::workload::scheduler::TargetSnapshot;

/// Seconds between automatic reloads of the page.
pub const REFRESH_SECS: u32 = 10;

/// What the status page shows of each drive, from the latest health poll: the NVMe
/// controllers, then the SATA disks, each as the one [`DriveStatus`] shape.
pub fn drives_from_health(snap: &crate::health::HealthSnapshot) -> Vec<DriveStatus> {
    snap.drives()
        .map(|d| super::drive_status::row(&d))
        .collect()
}

const CSS: &str = "body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:1em auto;max-width:1300px;padding:0 1em;color:#222}\
h1{font-size:1.4em;margin-bottom:.2em}h2{border-bottom:2px solid #1f77b4;padding-bottom:.2em;margin-top:1.5em}\
table{border-collapse:collapse;margin:.5em 0 1em}th,td{border:1px solid #ccc;padding:.25em .6em;text-align:left}\
th{background:#f2f5f9}td.num{text-align:right;font-variant-numeric:tabular-nums}\
.charts{display:flex;flex-wrap:wrap;gap:8px}.charts figure{margin:0;border:1px solid #ddd;padding:2px}\
svg.chart{display:block;max-width:100%;height:auto}.muted{color:#777}.ok{color:#2ca02c}.warn{color:#ff7f0e;font-weight:600}.bad{color:#d62728;font-weight:600}\
nav a{margin-right:1em}nav.target-index{margin:.5em 0}details.target-charts>summary h3{display:inline}\
details.target-charts{margin:.8em 0}";

fn num(s: &str) -> String {
    format!("<td class=\"num\">{}</td>", esc(s))
}

fn td(s: &str) -> String {
    format!("<td>{}</td>", esc(s))
}

fn cls(class: &str, s: &str) -> String {
    format!("<td class=\"{class}\">{}</td>", esc(s))
}

fn opt<T>(v: Option<T>, f: impl Fn(T) -> String) -> String {
    v.map(f).unwrap_or_else(|| "-".into())
}

const SPARK_W: u32 = 400;
const SPARK_H: u32 = 150;

/// What one "last N minutes" chart draws, beside its points.
struct Spark<'a> {
    title: &'a str,
    y_desc: &'a str,
    name: &'a str,
    y_unit: Unit,
    /// The chart's x range: the last `span_min` minutes.
    span_min: f64,
    /// Minutes between neighbouring samples beyond which the line breaks (a gap in the data).
    gap_min: f64,
    reference: Option<RefLine>,
}

fn spark(c: Spark<'_>, points: Vec<(f64, f64)>) -> String {
    let few = points.len() < 10;
    let series = [Series {
        name: c.name.to_string(),
        points,
    }];
    let svg = charts::line_chart(&LineChart {
        title: c.title,
        x_desc: "",
        y_desc: c.y_desc,
        width: SPARK_W,
        height: SPARK_H,
        series: &series,
        x_range: Some((-c.span_min, 0.0)),
        reference: c.reference,
        legend: false,
        x_unit: Unit::Plain,
        y_unit: c.y_unit,
        x_ago: true,
        y_log_auto: false,
        // A young history (a few samples) would be an invisible line: mark the points.
        markers: few,
        flagged: &[],
        flag_label: "",
        gap: Some(c.gap_min),
    });
    match svg {
        Ok(s) => format!("<figure>{s}</figure>"),
        Err(e) => format!("<p class=\"bad\">{}</p>", esc(&e.to_string())),
    }
}

fn target_rows(targets: &[TargetSnapshot]) -> String {
    let mut t = String::from(
        "<table id=\"targets\"><tr><th>Target</th><th>Path</th><th>Engine</th><th>State</th><th>Phase</th><th>Profile</th>\
         <th>Steady state</th><th>IOPS</th><th>Bandwidth</th><th>Read p50 / p99</th><th>Write p50 / p99</th>\
         <th title=\"CPU time of the I/O worker threads per completed I/O over the last interval: nvsoak's own code / the kernel on its behalf\">CPU per I/O (nvsoak / kernel)</th><th>Errors</th></tr>\n",
    );
    for s in targets {
        let (r, w) = s.totals();
        let errors = r.errors.total() + w.errors.total();
        let state = if !s.up {
            cls(
                "bad",
                &format!("down: {}", s.stop_reason.as_deref().unwrap_or("stopped")),
            )
        } else if s.running {
            cls("ok", "running")
        } else {
            td(&format!(
                "finished{}",
                s.stop_reason
                    .as_deref()
                    .map(|r| format!(": {r}"))
                    .unwrap_or_default()
            ))
        };
        let job = s.jobs.get(&s.profile);
        let bw: f64 = s.jobs.values().map(|j| j.read_bw + j.write_bw).sum();
        let steady = match job.and_then(|j| j.steady.as_ref()) {
            Some(st) if st.reached => cls(
                "ok",
                &format!(
                    "reached at round {} (range {}, {})",
                    opt(st.since_round, |r| r.to_string()),
                    fmt_pct(st.range_ratio),
                    count_of(st.rounds, "round")
                ),
            ),
            Some(st) => td(&format!(
                "not yet ({}, range {})",
                count_of(st.rounds, "round"),
                fmt_pct(st.range_ratio)
            )),
            None => td("-"),
        };
        let q = |iops: f64, q: Option<[f64; 4]>| match q.filter(|_| iops > 0.0) {
            Some(q) => format!(
                "{} / {}",
                fmt_latency_us(q[0] * 1e6),
                fmt_latency_us(q[1] * 1e6)
            ),
            None => "-".into(),
        };
        t.push_str(&format!(
            "<tr>{}{}{}{}{}{}{}{}{}{}{}{}{}</tr>\n",
            td(&s.name),
            td(&s.path),
            td(s.engine.as_deref().unwrap_or("-")),
            state,
            td(&phase_cell(s)),
            td(&s.profile),
            steady,
            num(&fmt_count(s.iops)),
            num(&fmt_rate(bw)),
            num(&job.map_or("-".into(), |j| q(j.read_iops, j.read_q))),
            num(&job.map_or("-".into(), |j| q(j.write_iops, j.write_q))),
            num(&job
                .filter(|j| j.active)
                .and_then(|j| j.cpu_per_io_ns)
                .map_or("-".into(), |(u, k)| format!(
                    "{} / {}",
                    fmt_cpu_ns(u),
                    fmt_cpu_ns(k)
                ))),
            if errors > 0 {
                cls("bad", &errors.to_string())
            } else {
                num("0")
            },
        ));
    }
    t.push_str("</table>\n");
    t
}

/// The members of the targets that span several block devices, one row each: what nvsoak
/// did on it (earlier runs included) and its rate over the last interval. Empty when no
/// target spans devices.
fn member_rows(targets: &[TargetSnapshot]) -> String {
    if targets.iter().all(|s| s.members.is_empty()) {
        return String::new();
    }
    let mut t = String::from(
        "<h3>Members of spanning targets</h3>\n<table id=\"members\"><tr><th>Target</th><th>Member</th><th>Device</th><th>Controller</th>\
         <th>IOPS (read / write)</th><th>Read</th><th>Written</th><th>I/O errors</th></tr>\n",
    );
    for s in targets {
        for (i, m) in s.members.iter().enumerate() {
            let rate = s.member_rates.get(i).map_or("-".to_string(), |r| {
                format!("{} / {}", fmt_count(r[0]), fmt_count(r[1]))
            });
            t.push_str(&format!(
                "<tr>{}{}{}{}{}{}{}{}</tr>\n",
                td(&s.name),
                td(&m.path),
                td(&m.device),
                td(m.controller.as_deref().unwrap_or("-")),
                num(&rate),
                num(&fmt_bytes(m.read_bytes as f64)),
                num(&fmt_bytes(m.write_bytes as f64)),
                if m.errors > 0 {
                    cls("bad", &m.errors.to_string())
                } else {
                    num("0")
                },
            ));
        }
    }
    t.push_str("</table>\n");
    t
}

fn drive_rows(drives: &[DriveStatus]) -> String {
    let mut t = String::from(
        "<table id=\"drives\"><tr><th>Device</th><th>Model</th><th>Serial</th><th>Poll</th><th>Temperature</th>\
         <th>Wear (used)</th><th>Spare</th><th>Written vs rated TBW</th><th>Throttling</th><th>Media errors</th><th>Error log</th><th>Critical warning</th><th>SMART status / reallocated</th></tr>\n",
    );
    for d in drives {
        let d = &d.clone().finite();
        let temp = match d.temperature_c {
            Some(c) => {
                let text = format!(
                    "{c:.0} °C (warning {}, critical {})",
                    opt(d.warning_temp_c, |v| format!("{v:.0}")),
                    opt(d.critical_temp_c, |v| format!("{v:.0}"))
                );
                let class = if d.critical_temp_c.is_some_and(|x| c >= x) {
                    "bad"
                } else if d.warning_temp_c.is_some_and(|x| c >= x) {
                    "warn"
                } else {
                    "ok"
                };
                cls(class, &text)
            }
            None => td("-"),
        };
        let tbw = match (d.data_written_bytes, d.rated_endurance_bytes) {
            (Some(w), Some(r)) if r > 0.0 => {
                format!("{} of {} ({})", fmt_bytes(w), fmt_bytes(r), fmt_pct(w / r))
            }
            (Some(w), _) => format!("{} (rating unknown)", fmt_bytes(w)),
            _ => "-".into(),
        };
        let throttling = match d.throttling {
            Some(true) => cls(
                "bad",
                &format!(
                    "throttling ({} episodes)",
                    opt(d.throttle_events, |v| v.to_string())
                ),
            ),
            Some(false) => td(&format!(
                "no ({} episodes)",
                opt(d.throttle_events, |v| v.to_string())
            )),
            None => td("-"),
        };
        let count = |v: Option<u64>| match v {
            Some(n) if n > 0 => cls("bad", &n.to_string()),
            Some(n) => num(&n.to_string()),
            None => num("-"),
        };
        t.push_str(&format!(
            "<tr>{}{}{}{}{temp}{}{}{}{throttling}{}{}{}{}</tr>\n",
            td(&d.device),
            td(&d.model),
            td(&d.serial),
            if d.up {
                cls("ok", "up")
            } else {
                cls("bad", "down")
            },
            num(&opt(d.percentage_used, fmt_pct)),
            num(&opt(d.available_spare, fmt_pct)),
            td(&tbw),
            count(d.media_errors),
            count(d.error_log_entries),
            match d.critical_warning {
                Some(0) => num("0"),
                Some(v) => cls("bad", &format!("{v:#04x}")),
                None => num("-"),
            },
            super::drive_status::smart_cell(d),
        ));
    }
    t.push_str("</table>\n");
    t
}

/// The x range of a "last N minutes" chart: the smallest of 1, 2, 5, 10, 15, 30 and 60 minutes
/// that covers the oldest sample, capped at the history's span, so a young history is not
/// squeezed against the right edge.
pub fn window_minutes(oldest_age_secs: f64, span_min: f64) -> f64 {
    let age_min = oldest_age_secs.max(0.0) / 60.0;
    [1.0, 2.0, 5.0, 10.0, 15.0, 30.0, 60.0]
        .into_iter()
        .find(|w| *w >= age_min)
        .unwrap_or(span_min)
        .min(span_min.max(1.0 / 60.0))
}

/// The status page. `drives` is empty when health polling is off or has not reported yet.
pub fn render_status(
    targets: &[TargetSnapshot],
    drives: &[DriveStatus],
    history: &History,
) -> String {
    render_status_why(
        targets,
        drives,
        history,
        "No drive health: health polling is off, no NVMe controller was found, \
         or the first poll has not finished.",
    )
}

/// [`render_status`], saying `no_drives` (see [`super::nodrives`]) when there are no drives.
pub fn render_status_why(
    targets: &[TargetSnapshot],
    drives: &[DriveStatus],
    history: &History,
    no_drives: &str,
) -> String {
    let span = history.span_secs();
    let span_min = span / 60.0;
    let now = history.latest().unwrap_or(0.0);
    let mut h = String::new();
    page_head(&mut h, &crate::util::host::hostname());
    h.push_str(&super::verdict::status_html(targets));
    h.push_str("<h2>Targets</h2>\n");
    if targets.is_empty() {
        h.push_str("<p class=\"muted\">No targets configured.</p>\n");
    } else {
        h.push_str(&target_rows(targets));
        h.push_str(&member_rows(targets));
    }
    if !targets.is_empty() {
        h.push_str(&target_index(targets));
    }
    for (i, s) in targets.iter().enumerate() {
        target_charts(&mut h, i, s, history, now, span_min);
    }
    drive_section(&mut h, drives, history, now, span_min, no_drives);
    h.push_str("</body></html>\n");
    h
}

/// The document head (refresh, style) and the page title with its links.
fn page_head(h: &mut String, host: &str) {
    h.push_str("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n");
    h.push_str(&format!(
        "<meta http-equiv=\"refresh\" content=\"{REFRESH_SECS}\">\n"
    ));
    h.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    // An inline empty icon, so browsers do not request /favicon.ico.
    h.push_str("<link rel=\"icon\" href=\"data:,\">\n");
    h.push_str(&format!(
        "<title>nvsoak status — {}</title>\n<style>",
        esc(host)
    ));
    h.push_str(CSS);
    h.push_str("</style></head><body>\n");
    h.push_str(&format!(
        "<h1>nvsoak {} status — <span class=\"host\">{}</span></h1>\n<nav><a href=\"/metrics\">/metrics</a><a href=\"/report\">qualification report</a>\
         <span class=\"muted\">reloads every {REFRESH_SECS} s</span></nav>\n",
        esc(env!("CARGO_PKG_VERSION")),
        esc(host)
    ));
}

/// The id of target `i`'s block of charts (`target-1`, ...), which the page's index links to.
fn target_anchor(i: usize) -> String {
    format!("target-{}", i + 1)
}

/// The index of the targets' chart blocks: one link per target, numbered as the blocks are.
fn target_index(targets: &[TargetSnapshot]) -> String {
    let mut o = String::from("<nav class=\"target-index\">Charts:");
    for (i, s) in targets.iter().enumerate() {
        o.push_str(&format!(
            " <a href=\"#{}\">{}. {}</a>",
            target_anchor(i),
            i + 1,
            esc(&s.name)
        ));
    }
    o.push_str("</nav>\n");
    o
}

/// One target's IOPS, bandwidth and p99 charts over the history window, and its soak over
/// time, in one `<details>` block (open; the page's index links to it), numbered as the index.
fn target_charts(
    h: &mut String,
    i: usize,
    s: &TargetSnapshot,
    history: &History,
    now: f64,
    span_min: f64,
) {
    let ago = |t: f64| (t - now) / 60.0;
    let q: Vec<TargetSample> = history
        .target(&s.name)
        .map(|q| q.iter().copied().collect())
        .unwrap_or_default();
    let win = window_minutes(q.first().map_or(0.0, |x| now - x.t), span_min);
    let gap_min = history.gap_secs() / 60.0;
    h.push_str(&format!(
        "<details class=\"target-charts\" id=\"{}\" open><summary><h3>{}. {} — last {}</h3></summary>\n<div class=\"charts\">",
        target_anchor(i),
        i + 1,
        esc(&s.name),
        if win == 1.0 {
            "minute".to_string()
        } else {
            format!("{win:.0} minutes")
        }
    ));
    let spec = |title: &'static str, y_desc: &'static str, y_unit: Unit| Spark {
        title,
        y_desc,
        name: &s.name,
        y_unit,
        span_min: win,
        gap_min,
        reference: None,
    };
    let titles = [
        format!("{}: IOPS", s.name),
        format!("{}: bandwidth", s.name),
        format!("{}: p99 latency", s.name),
    ];
    h.push_str(&spark(
        Spark {
            title: &titles[0],
            ..spec("", "IOPS", Unit::Si)
        },
        q.iter().map(|x| (ago(x.t), x.iops)).collect(),
    ));
    h.push_str(&spark(
        Spark {
            title: &titles[1],
            ..spec("", "bandwidth", Unit::BytesPerSec)
        },
        q.iter().map(|x| (ago(x.t), x.bytes_per_sec)).collect(),
    ));
    h.push_str(&spark(
        Spark {
            title: &titles[2],
            reference: Some(RefLine {
                y: 1000.0,
                label: "1 ms".into(),
            }),
            ..spec("", "p99 latency", Unit::LatencyUs)
        },
        q.iter()
            .filter_map(|x| x.p99_secs.map(|p| (ago(x.t), p * 1e6)))
            .collect(),
    ));
    h.push_str("</div>\n");
    h.push_str(&super::soakchart::status_html(s));
    h.push_str("</details>\n");
}

/// The drives' table and temperature charts, or why there are none.
fn drive_section(
    h: &mut String,
    drives: &[DriveStatus],
    history: &History,
    now: f64,
    span_min: f64,
    no_drives: &str,
) {
    let ago = |t: f64| (t - now) / 60.0;
    h.push_str("<h2>Drives</h2>\n");
    if drives.is_empty() {
        h.push_str(&format!(
            "<p class=\"muted no-drives\">{}</p>\n",
            esc(no_drives)
        ));
    } else {
        h.push_str(&drive_rows(drives));
        h.push_str("<div class=\"charts\">");
        for d in drives {
            let q = history.device(&d.device);
            let oldest = q.and_then(|q| q.front()).map_or(0.0, |x| now - x.t);
            let win = window_minutes(oldest, span_min);
            let pts: Vec<(f64, f64)> = q
                .map(|q| q.iter().map(|x| (ago(x.t), x.temperature_c)).collect())
                .unwrap_or_default();
            let title = format!("{}: temperature (°C)", d.device);
            h.push_str(&spark(
                Spark {
                    title: &title,
                    y_desc: "°C",
                    name: &d.device,
                    y_unit: Unit::Plain,
                    span_min: win,
                    gap_min: history.gap_secs() / 60.0,
                    reference: d.warning_temp_c.map(|w| RefLine {
                        y: w,
                        label: format!("warning {w:.0} °C"),
                    }),
                },
                pts,
            ));
        }
        h.push_str("</div>\n");
    }
}

/// The phase a target is at, "phase 2 (soak)" (numbered from 1, as the log, `check-config`,
/// `state show` and the results file number it); "finished" once its plan ran to its end (the
/// runner then points past the last phase, so the last phase's name would be a wrong n+1).
fn phase_cell(s: &TargetSnapshot) -> String {
    if s.up && !s.running && s.stop_reason.is_none() {
        "finished".into()
    } else {
        format!("phase {} ({})", s.phase_index + 1, s.phase)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::scheduler::JobStats;
    use std::time::Duration;

    #[test]
    fn a_spanning_target_lists_its_members_and_others_add_no_table() {
        let plain = TargetSnapshot {
            name: "one".into(),
            path: "/dev/shm/x".into(),
            ..Default::default()
        };
        assert_eq!(member_rows(std::slice::from_ref(&plain)), "");
        let member = |path: &str, dev: &str, ctrl: &str, written: u64, errors: u64| {
            crate::model::results::MemberFigures {
                path: path.into(),
                device: dev.into(),
                controller: Some(ctrl.into()),
                write_bytes: written,
                errors,
                ..Default::default()
            }
        };
        let span = TargetSnapshot {
            name: "card".into(),
            path: "/dev/nvme0n1".into(),
            members: vec![
                member("/dev/nvme0n1", "nvme0n1", "nvme0", 1_000_000_000, 0),
                member("/dev/nvme1n1", "nvme1n1", "nvme1", 2_000_000_000, 3),
            ],
            member_rates: vec![[1000.0, 500.0, 0.0, 0.0], [2000.0, 700.0, 0.0, 0.0]],
            ..Default::default()
        };
        let t = member_rows(&[plain, span]);
        assert_eq!(t.matches("<tr><td>card</td>").count(), 2, "{t}");
        assert!(!t.contains("<td>one</td>"), "{t}");
        for want in [
            "<td>/dev/nvme1n1</td><td>nvme1n1</td><td>nvme1</td>",
            "2,000 / 700",
            "1.86 GiB",
            "class=\"bad\">3<",
        ] {
            assert!(t.contains(want), "{want} in {t}");
        }
    }

    #[test]
    fn page_shows_targets_drives_and_one_chart_series_each() {
        let mut s = TargetSnapshot {
            name: "t<1>".into(),
            path: "/dev/shm/x".into(),
            phase: "soak".into(),
            profile: "4k-random-read".into(),
            running: true,
            up: true,
            iops: 1234.0,
            ..Default::default()
        };
        s.jobs.insert(
            "4k-random-read".into(),
            JobStats {
                read_iops: 1234.0,
                read_bw: 1234.0 * 4096.0,
                read_q: Some([80e-6, 900e-6, 1e-3, 2e-3]),
                ..Default::default()
            },
        );
        let mut h = History::new(60, Duration::from_secs(1));
        for i in 0..30 {
            h.push(100.0 + i as f64, std::slice::from_ref(&s));
            h.push_device(100.0 + i as f64, "nvme0", 40.0 + i as f64);
        }
        let d = DriveStatus {
            device: "nvme0".into(),
            model: "QEMU NVMe Ctrl".into(),
            up: true,
            temperature_c: Some(69.0),
            warning_temp_c: Some(70.0),
            critical_temp_c: Some(80.0),
            media_errors: Some(2),
            ..Default::default()
        };
        let page = render_status(&[s], &[d], &h);
        assert!(page.contains("t&lt;1&gt;"));
        assert!(!page.contains("t<1>"));
        assert!(page.contains("1,234"));
        assert!(page.contains("80.0 µs / 900 µs"));
        assert!(page.contains("69 °C (warning 70, critical 80)"));
        assert!(page.contains("href=\"/metrics\""));
        // 3 target charts + 1 temperature chart, one series each.
        assert_eq!(page.matches("<svg class=\"chart\"").count(), 4);
        assert_eq!(page.matches("class=\"series\"").count(), 4);
        assert_eq!(page.matches("<td class=\"bad\">2</td>").count(), 1);
        assert!(!page.contains("<script"));
    }

    fn running(name: &str, iops: f64, p99_secs: f64) -> TargetSnapshot {
        let mut s = TargetSnapshot {
            name: name.into(),
            phase: "soak".into(),
            profile: "4k-random-read".into(),
            running: true,
            up: true,
            iops,
            ..Default::default()
        };
        s.jobs.insert(
            "4k-random-read".into(),
            JobStats {
                read_iops: iops,
                read_bw: 200e6,
                read_q: Some([80e-6, p99_secs, 1e-3, 2e-3]),
                ..Default::default()
            },
        );
        s
    }

    /// The page names its host, lists the targets' chart blocks in an index and gives each
    /// its own numbered `<details>`; a gap in the samples (a restart) breaks the lines; the
    /// p99 axis reads in ms and the bandwidth axis in MB/s.
    #[test]
    fn the_page_names_the_host_indexes_targets_and_breaks_lines_at_gaps() {
        let (a, b) = (running("a", 1000.0, 0.6), running("b", 2000.0, 0.6));
        let mut h = History::new(600, Duration::from_secs(1));
        // 30 s of samples, 60 s down (no samples), 30 s more.
        for i in (0..30).chain(90..120) {
            h.push(1000.0 + f64::from(i), &[a.clone(), b.clone()]);
        }
        let page = render_status(&[a, b], &[], &h);
        let host = crate::util::host::hostname();
        assert!(
            page.contains(&format!("<span class=\"host\">{}</span>", esc(&host))),
            "{page}"
        );
        assert!(page.contains("<nav class=\"target-index\">"), "{page}");
        assert!(page.contains("<a href=\"#target-1\">1. a</a>"), "{page}");
        assert!(page.contains("<a href=\"#target-2\">2. b</a>"), "{page}");
        assert_eq!(
            page.matches("<details class=\"target-charts\"").count(),
            2,
            "{page}"
        );
        assert!(
            page.contains("id=\"target-2\" open><summary><h3>2. b"),
            "{page}"
        );
        // 3 charts per target, each broken once at the 60 s hole.
        assert_eq!(page.matches("<polyline class=\"series\"").count(), 6);
        assert_eq!(
            page.matches("<polyline class=\"series series-continued\"")
                .count(),
            6,
            "{page}"
        );
        let labels: Vec<&str> = page.lines().map(str::trim).collect();
        assert!(labels.contains(&"600 ms"), "p99 ticks in ms");
        assert!(labels.contains(&"200 MB/s"), "bandwidth ticks in MB/s");
        assert!(
            !labels
                .iter()
                .any(|l| l.ends_with("00k") || l.ends_with('M')),
            "{page}"
        );
    }

    #[test]
    fn a_finished_plan_is_finished_not_a_phase_past_the_end() {
        let done = TargetSnapshot {
            name: "t".into(),
            phase: "soak".into(),
            phase_index: 1,
            running: false,
            up: true,
            ..Default::default()
        };
        let running = TargetSnapshot {
            running: true,
            phase_index: 0,
            ..done.clone()
        };
        let page = render_status(&[done, running], &[], &History::default());
        assert!(!page.contains("phase 2 (soak)"), "{page}");
        assert!(page.contains("<td>finished</td>"), "{page}");
        assert!(page.contains("<td>phase 1 (soak)</td>"), "{page}");
    }

    #[test]
    fn chart_window_grows_with_the_history() {
        assert_eq!(window_minutes(5.0, 60.0), 1.0);
        assert_eq!(window_minutes(61.0, 60.0), 2.0);
        assert_eq!(window_minutes(700.0, 60.0), 15.0);
        assert_eq!(window_minutes(3000.0, 60.0), 60.0);
        // A 10-minute history never shows more than 10 minutes.
        assert_eq!(window_minutes(3000.0, 10.0), 10.0);
    }

    #[test]
    fn page_without_drives_says_why() {
        let page = render_status(&[], &[], &History::default());
        assert!(page.contains("No drive health"));
        assert!(page.contains("No targets configured"));
    }
}
