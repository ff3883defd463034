//! `nvsoak report` on the recorded fixtures (hand-computed figures) and on a real sweep of a
//! /dev/shm file, plus the HTML report and the daemon's status page in headless Chromium
//! (`#[ignore]`d: `scripts/test-browser` runs them, since they need the `chromium` package).

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::{Daemon, bin, free_port, http_get, shm_dir, sum, wait_exit};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/report")
        .join(name)
}

fn report(args: &[&str]) -> Output {
    Command::new(bin())
        .arg("report")
        .args(args)
        .output()
        .expect("running nvsoak report")
}

fn fixture_args() -> Vec<String> {
    vec![
        "--from".into(),
        fixture("drive-a.json").display().to_string(),
        fixture("drive-b.json").display().to_string(),
    ]
}

fn args_with<'a>(base: &'a [String], extra: &[&'a str]) -> Vec<&'a str> {
    base.iter()
        .map(String::as_str)
        .chain(extra.iter().copied())
        .collect()
}

/// `data-series-count` of every chart, in document order.
fn declared_series(html: &str) -> Vec<usize> {
    html.split("<svg class=\"chart\"")
        .skip(1)
        .map(|rest| {
            rest.split("data-series-count=\"")
                .nth(1)
                .and_then(|r| r.split('"').next())
                .and_then(|n| n.parse().ok())
                .unwrap_or(usize::MAX)
        })
        .collect()
}

/// Tagged series polylines per chart, in document order.
fn drawn_series(html: &str) -> Vec<usize> {
    html.split("<svg class=\"chart\"")
        .skip(1)
        .map(|rest| {
            let body = rest.split("</svg>").next().unwrap_or("");
            body.matches("<polyline class=\"series\"").count()
        })
        .collect()
}

/// Every `http(s)://` reference except the SVG namespace name (which is never fetched).
fn external_refs(html: &str) -> Vec<String> {
    let cleaned = html.replace("xmlns=\"http://www.w3.org/2000/svg\"", "");
    let mut found = Vec::new();
    for scheme in ["http://", "https://", "//"] {
        for (i, _) in cleaned.match_indices(scheme) {
            let ctx: String = cleaned[i.saturating_sub(20)..(i + 40).min(cleaned.len())].into();
            // "//" also matches inside "http://"; report the attribute uses only.
            if scheme == "//" && !(ctx.contains("src=\"//") || ctx.contains("href=\"//")) {
                continue;
            }
            found.push(ctx);
        }
    }
    found
}

#[test]
fn fixture_report_json_has_the_hand_computed_figures() {
    let base = fixture_args();
    let out = report(&args_with(&base, &["--format", "json"]));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("JSON report parses");
    let a = &v["drives"][0];
    let b = &v["drives"][1];
    assert_eq!(a["label"], "HUAWEI ES3600P V5 A1B2C3");
    let a_rr = &a["sweeps"][0];
    assert_eq!(a_rr["profile"], "4k-random-read");
    // Peak: the uncontrolled run, 100 000 IOPS at 1 280 µs (see src/report/compute.rs tests).
    assert_eq!(a_rr["peak"]["iops"], 100_000.0);
    assert_eq!(a_rr["peak"]["lat_avg_us"], 1280.0);
    assert_eq!(a_rr["peak"]["uncontrolled"], true);
    // Sub-1 ms: 79 950 IOPS at 640 µs (80 %); p99 frontier 49 990 IOPS.
    assert_eq!(a_rr["sub_ms"]["iops"], 79_950.0);
    assert_eq!(a_rr["sub_ms"]["lat_avg_us"], 640.0);
    assert_eq!(a_rr["sub_ms_p99"]["iops"], 49_990.0);
    assert_eq!(a_rr["crossed_1ms"], true);
    // The first point in sweep order at 1 ms or more: 90 %, 89 900 IOPS at 1 050 µs.
    assert_eq!(a_rr["first_over_1ms"]["pct"], 90);
    assert_eq!(a_rr["first_over_1ms"]["iops"], 89_900.0);
    // Rated figures from the built-in ratings table (ES3600P V5 3.2 TB: 825K random read IOPS,
    // 3.5 GB/s sequential read): 100 000 / 825 000 = 12.12 %, 3 276 800 000 / 3.5e9 = 93.62 %.
    assert_eq!(a["rated"]["random_read_iops"], 825_000.0);
    let ratio = |s: &Value| s["rated_share"]["ratio"].as_f64().unwrap_or(f64::NAN);
    assert!((ratio(a_rr) - 100_000.0 / 825_000.0).abs() < 1e-12);
    assert!((ratio(&a["sweeps"][1]) - 3_276_800_000.0 / 3.5e9).abs() < 1e-12);
    // The 60 % point completed no I/O and is not on the curve: 7 points in the file, 6 drawn.
    assert_eq!(a_rr["curve"].as_array().map(|c| c.len()), Some(6));
    let b_rr = &b["sweeps"][0];
    assert_eq!(b_rr["peak"]["iops"], 121_500.0);
    assert_eq!(b_rr["peak"]["lat_avg_us"], 880.0);
    assert_eq!(b_rr["peak"]["pct"], 100);
    assert_eq!(b_rr["sub_ms"]["iops"], 121_500.0);
    assert_eq!(b_rr["crossed_1ms"], false);
    assert!(b_rr["first_over_1ms"].is_null());
    // Ranking across the two hosts' drives.
    let cmp = &v["comparisons"][0];
    assert_eq!(cmp["profile"], "4k-random-read");
    assert_eq!(cmp["ranking"][0]["drive"], "Test Drive B B9Y8X7");
    assert_eq!(
        cmp["ranking"][0]["summary"],
        "first place with 121,500 IOPS at 880 µs"
    );
    assert_eq!(
        cmp["ranking"][1]["summary"],
        "second place with 100,000 IOPS at 1.28 ms"
    );
    // 64k-seq-read ran on drive A only: nothing to rank.
    assert_eq!(v["comparisons"].as_array().map(Vec::len), Some(1));
    // Steady state and soak of drive B.
    assert_eq!(b["steady"][0]["round"], 4);
    assert_eq!(b["soak"]["accounting_ratio"], 1.03125);
    assert_eq!(b["soak"]["observed_dwpd"], 1.0);
    let cost = b["soak"]["throttle_iops_cost_ratio"]
        .as_f64()
        .unwrap_or(-1.0);
    assert!((cost - 0.2).abs() < 1e-12, "{cost}");
}

#[test]
fn fixture_report_html_is_self_contained_with_every_chart() {
    let dir = shm_dir();
    let out_path = dir.path().join("report.html");
    let base = fixture_args();
    let out_s = out_path.display().to_string();
    let out = report(&args_with(&base, &["--format", "html", "--out", &out_s]));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let html = std::fs::read_to_string(&out_path).expect("report written");
    // Charts: 1 comparison (4k: both drives; 64k ran on drive A only, so it is not ranked),
    // then per drive and sweep the average and p99 charts (A: 4k + 64k, B: 4k), one series each.
    assert_eq!(html.matches("<svg").count(), 7);
    assert_eq!(declared_series(&html), vec![2, 1, 1, 1, 1, 1, 1]);
    assert_eq!(drawn_series(&html), vec![2, 1, 1, 1, 1, 1, 1]);
    assert!(html.contains("first place with 121,500 IOPS at 880 µs"));
    assert!(html.contains(
        "highest rate below 1 ms average: 79,950 IOPS at 640 µs (the 80 % load); \
         first point over 1 ms: 89,900 IOPS at 1.05 ms (the 90 % load)."
    ));
    assert!(html.contains("12.1 % of rated random read IOPS (825,000)"));
    assert!(html.contains("93.6 % of rated sequential read bandwidth (3.50 GB/s)"));
    assert!(html.contains("<style>"));
    for tag in ["<script", "<link", "<img", "src=", "@import", "url("] {
        assert!(!html.contains(tag), "report contains {tag}");
    }
    assert!(
        external_refs(&html).is_empty(),
        "{:?}",
        external_refs(&html)
    );
}

#[test]
fn fixture_report_markdown_links_its_svgs() {
    let dir = shm_dir();
    let md_path = dir.path().join("qual.md");
    let base = fixture_args();
    let md_s = md_path.display().to_string();
    let out = report(&args_with(&base, &["--format", "md", "--out", &md_s]));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let md = std::fs::read_to_string(&md_path).expect("markdown written");
    let links: Vec<&str> = md
        .split("](")
        .skip(1)
        .filter_map(|r| r.split(')').next())
        .filter(|l| l.ends_with(".svg"))
        .collect();
    assert_eq!(links.len(), 7, "{md}");
    let mut series = Vec::new();
    for l in &links {
        assert!(!l.contains('/'), "link {l} is not next to the report");
        let svg = std::fs::read_to_string(dir.path().join(l)).expect("linked SVG exists");
        assert!(svg.starts_with("<svg class=\"chart\""), "{l}");
        series.extend(drawn_series(&svg));
    }
    assert_eq!(series, vec![2, 1, 1, 1, 1, 1, 1]);
    assert!(md.contains("| 1 | Test Drive B B9Y8X7 | 121,500 | 880 µs | 1.80 ms | 121,500 |"));
    assert!(md.contains("- HUAWEI ES3600P V5 A1B2C3: second place with 100,000 IOPS at 1.28 ms"));
}

#[test]
fn report_errors_name_the_problem() {
    let base = fixture_args();
    let out = report(&args_with(&base, &["--format", "pdf"]));
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("unknown report format \"pdf\" (use html, md or json)"),
        "{err}"
    );

    // Markdown without --out goes to stdout (issue 34: it needed --out and exited 1).
    let out = report(&args_with(&base, &["--format", "md"]));
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("# nvsoak qualification report"));

    let dir = shm_dir();
    let ds = dir.path().display().to_string();
    let out = report(&["--state", &ds]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no results in") && err.contains(&ds), "{err}");

    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, "[1, 2]").expect("write");
    let out = report(&["--from", &bad.display().to_string()]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad.json is not a results file"), "{err}");
}

/// A results file is outside input: a figure beyond anything nvsoak measures (an average
/// latency of `f64::MAX`) is refused naming the figure, and a FIFO, a character device or a
/// directory given as `--from` is refused at once instead of blocking or reading forever.
#[test]
fn report_refuses_hostile_results_files() {
    let dir = shm_dir();
    let text = std::fs::read_to_string(fixture("drive-a.json")).expect("fixture");
    let mut v: Value = serde_json::from_str(&text).expect("fixture json");
    let point = v
        .pointer_mut("/sweeps/0/points/0/lat_avg_us")
        .expect("fixture has a sweep point with lat_avg_us");
    *point = json!(f64::MAX);
    let forged = dir.path().join("forged.json");
    std::fs::write(&forged, serde_json::to_string(&v).expect("json")).expect("write");
    let out = report(&["--from", &forged.display().to_string()]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("forged.json") && err.contains("sweeps[0].points[0].lat_avg_us"),
        "{err}"
    );

    let fifo = dir.path().join("results.fifo");
    let status = Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
    assert!(status.success());
    for path in [fifo.as_path(), Path::new("/dev/zero"), dir.path()] {
        let mut child = Command::new(bin())
            .args(["report", "--from"])
            .arg(path)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn report");
        let (status, err) = wait_exit(
            &mut child,
            Duration::from_secs(30),
            &format!("report --from {} did not return", path.display()),
        );
        assert!(!status.success(), "{}", path.display());
        assert!(
            err.contains("not a regular file"),
            "{}: {err}",
            path.display()
        );
    }
}

/// `--ratings FILE`: the operator's table replaces the built-in one (drive B is in it, drive A
/// is not); a bad table is a clear error naming the file and the reason, and exits non-zero.
#[test]
fn report_ratings_file_replaces_the_built_in_table() {
    let dir = shm_dir();
    let good = dir.path().join("drives.toml");
    std::fs::write(
        &good,
        r#"
[[drive]]
vendor = "Acme"
series = "Test B"
match = ["Test Drive B"]
dwpd = 7.0
warranty_years = 5.0
[[drive.capacity]]
capacity_bytes = 3_200_000_000_000
tbw_bytes = 40_880_000_000_000_000
random_read_iops = 243_000
"#,
    )
    .expect("write");
    let base = fixture_args();
    let out = report(&args_with(
        &base,
        &["--format", "json", "--ratings", &good.display().to_string()],
    ));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("json");
    let b = &v["drives"][1];
    assert_eq!(b["label"], "Test Drive B B9Y8X7");
    assert_eq!(b["rated"]["source"], "ratings table: Acme Test B 3.20 TB");
    assert_eq!(b["rated"]["tbw_bytes"], json!(40_880_000_000_000_000.0));
    assert_eq!(b["soak"]["rated_dwpd"], json!(7.0));
    // 121 500 of 243 000 rated IOPS.
    assert_eq!(b["sweeps"][0]["rated_share"]["ratio"], json!(0.5));
    assert_eq!(
        v["drives"][0]["rated"],
        Value::Null,
        "drive A is not in this table"
    );
    // The built-in table (no --ratings) knows drive A and not B.
    let out = report(&args_with(&base, &["--format", "json"]));
    let v: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["drives"][1]["rated"], Value::Null);
    assert!(
        v["drives"][0]["rated"]["source"]
            .as_str()
            .is_some_and(|s| s.contains("ES3600P V5"))
    );

    let bad_toml = dir.path().join("broken.toml");
    std::fs::write(&bad_toml, "[[drive]]\nvendor = \"Acme\"\nseries = 7\n").expect("write");
    let bad_re = dir.path().join("bad-regex.toml");
    std::fs::write(
        &bad_re,
        "[[drive]]\nvendor = \"Acme\"\nseries = \"X\"\nmatch = [\"re:([\"]\n",
    )
    .expect("write");
    let missing = dir.path().join("missing.toml");
    for (path, reason) in [
        (&bad_toml, "not a valid drive ratings table"),
        (&bad_re, "drive `X`: `([` is not a valid regular expression"),
        (&missing, "cannot read it: No such file or directory"),
    ] {
        let p = path.display().to_string();
        let out = report(&args_with(&base, &["--format", "json", "--ratings", &p]));
        assert_eq!(out.status.code(), Some(1), "{p}");
        assert!(out.stdout.is_empty(), "no report on a bad table");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.starts_with(&format!("nvsoak: ratings table {p}: {reason}")),
            "{err}"
        );
        assert!(err.contains("config/drives.toml"), "{err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}

/// Run `nvsoak run --exit-when-done` with `config` and wait for it to exit. These plans measure
/// figures and do not verify data, so the verify gate is turned off (else the verdict is
/// INCOMPLETE, exit 3).
/// `nvsoak report --state STATE --format md --out DIR/r.md`, which must succeed; the markdown.
fn markdown_report(dir: &std::path::Path, state: &str) -> String {
    let md_path = dir.join("r.md");
    let ms = md_path.display().to_string();
    let out = report(&["--state", state, "--format", "md", "--out", &ms]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::read_to_string(&md_path).expect("markdown report")
}

fn run_to_completion(config: &str, timeout: Duration) -> tempfile::TempDir {
    let dir = shm_dir();
    let cfg = format!("{config}\n[gates]\nverify_errors = false\n")
        .replace("{dir}", &dir.path().display().to_string());
    let cfg_path = dir.path().join("nvsoak.toml");
    std::fs::write(&cfg_path, cfg).expect("writing config");
    let mut child = Command::new(bin())
        .arg("run")
        .arg("--config")
        .arg(&cfg_path)
        .arg("--web.listen-address")
        .arg(format!("127.0.0.1:{}", free_port()))
        .arg("--exit-when-done")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting nvsoak run");
    let (status, err) = wait_exit(
        &mut child,
        timeout,
        &format!("nvsoak run did not finish its plan within {timeout:?}"),
    );
    assert!(status.success(), "nvsoak run failed: {err}");
    dir
}

const SWEEP_CONFIG: &str = r#"
[state]
dir = "{dir}/state"
[health]
enabled = false
[[target]]
name = "shm"
path = "{dir}/shm.dat"
size = "32MiB"
engine = "psync"
[[target.phase]]
kind = "sweep"
profile = "4k-random-read"
iodepth = 2
max_duration = "1s"
point_duration = "1s"
points = [25, 50, 100]
"#;

#[test]
fn report_from_a_real_sweep_matches_the_results_file() {
    let dir = run_to_completion(SWEEP_CONFIG, Duration::from_secs(60));
    let state = dir.path().join("state");
    let results: Value = serde_json::from_str(
        &std::fs::read_to_string(state.join("results/shm.json")).expect("results file"),
    )
    .expect("results JSON");
    let points = results["sweeps"][0]["points"]
        .as_array()
        .expect("points")
        .clone();
    assert_eq!(points.len(), 4, "uncontrolled + 3 points: {results}");
    // The figures, computed here straight from the results file.
    let f = |p: &Value, k: &str| p[k].as_f64().unwrap_or(f64::NAN);
    let peak = points
        .iter()
        .max_by(|a, b| f(a, "iops").total_cmp(&f(b, "iops")))
        .expect("peak");
    let below: Vec<&Value> = points
        .iter()
        .filter(|p| f(p, "lat_avg_us") < 1000.0)
        .collect();
    let frontier = below
        .iter()
        .max_by(|a, b| f(a, "iops").total_cmp(&f(b, "iops")));

    let ss = state.display().to_string();
    let out = report(&["--state", &ss, "--format", "json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("JSON report");
    let s = &v["drives"][0]["sweeps"][0];
    assert_eq!(v["drives"][0]["target"], "shm");
    assert_eq!(s["profile"], "4k-random-read");
    assert_eq!(s["complete"], true);
    assert!(f(peak, "iops") > 0.0);
    assert_eq!(f(&s["peak"], "iops"), f(peak, "iops"));
    assert_eq!(f(&s["peak"], "lat_avg_us"), f(peak, "lat_avg_us"));
    assert_eq!(f(&s["peak"], "lat_p99_us"), f(peak, "lat_p99_us"));
    match frontier {
        Some(fr) => assert_eq!(f(&s["sub_ms"], "iops"), f(fr, "iops")),
        None => assert!(s["sub_ms"].is_null()),
    }
    // Curve: the paced points by load, then the uncontrolled run.
    let pcts: Vec<u64> = s["curve"]
        .as_array()
        .expect("curve")
        .iter()
        .filter_map(|p| p["pct"].as_u64())
        .collect();
    assert_eq!(pcts, vec![25, 50, 100, 0]);
    // The paced 25 % point ran near its target, so the curve has a real spread.
    let c25 = &s["curve"][0];
    assert!(
        f(c25, "iops") < f(c25, "target_iops") * 1.3 + 5.0,
        "25 % point ran at {} IOPS for {}",
        f(c25, "iops"),
        f(c25, "target_iops")
    );
    // One drive: no ranking, no comparison (issue 14).
    assert_eq!(v["comparisons"], serde_json::json!([]), "{v}");

    // The HTML report of the same state directory: the per-drive charts, no comparison.
    let html_path = dir.path().join("r.html");
    let hs = html_path.display().to_string();
    let out = report(&["--state", &ss, "--out", &hs]);
    assert!(out.status.success());
    let html = std::fs::read_to_string(&html_path).expect("html");
    assert_eq!(drawn_series(&html), vec![1, 1]);
}

/// The soak's worker CPU reaches the results file and every report format: seconds split into
/// nvsoak's own (user) and the kernel's (system), and nanoseconds per soak I/O that are those
/// seconds over the soak's I/Os. (That a precondition's CPU is left out is the unit test
/// `snapshot::cpu_tests`; here the precondition only runs first.)
#[test]
fn the_soaks_worker_cpu_is_in_the_results_and_the_report() {
    let cfg = r#"
[state]
dir = "{dir}/state"
[health]
enabled = false
[[target]]
name = "c"
path = "{dir}/c.dat"
size = "16MiB"
engine = "io_uring"
[[target.phase]]
kind = "precondition"
passes = 2
[[target.phase]]
kind = "soak"
job = { name = "mix", read = 70, bs = "4k", access = "random", iodepth = 8 }
duration = "3s"
"#;
    let dir = run_to_completion(cfg, Duration::from_secs(120));
    let state = dir.path().join("state");
    let results: Value = serde_json::from_str(
        &std::fs::read_to_string(state.join("results/c.json")).expect("results file"),
    )
    .expect("results JSON");
    let soak = &results["soak"];
    let (u, k) = (
        soak["cpu_user_secs"].as_f64().expect("cpu_user_secs"),
        soak["cpu_system_secs"].as_f64().expect("cpu_system_secs"),
    );
    let ops = soak["read_ops"].as_u64().unwrap_or(0) + soak["write_ops"].as_u64().unwrap_or(0);
    assert!(ops > 1000, "{soak}");
    // A 3 s soak on one worker: some CPU, and at most its wall time (plus one stats interval
    // of sampling lag either side).
    assert!(
        u + k > 0.0 && u + k < 3.0 + 2.5,
        "user {u} s, system {k} s: {soak}"
    );
    let per_io_ns = (u + k) * 1e9 / ops as f64;
    assert!(per_io_ns > 100.0, "{per_io_ns} ns per I/O");

    let ss = state.display().to_string();
    let out = report(&["--state", &ss, "--format", "json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("JSON report");
    let figs = &v["drives"][0]["soak"];
    let cpu = figs["cpu_per_io_ns"].as_array().expect("cpu_per_io_ns");
    let (pu, pk) = (
        cpu[0].as_f64().unwrap_or(f64::NAN),
        cpu[1].as_f64().unwrap_or(f64::NAN),
    );
    assert!(((pu + pk) - per_io_ns).abs() < 1e-6 * per_io_ns, "{figs}");
    assert!(
        (pu - u * 1e9 / ops as f64).abs() < 1e-6 * per_io_ns,
        "{figs}"
    );
    let md = markdown_report(dir.path(), &ss);
    assert!(md.contains("Worker CPU, soak phases: "), "{md}");
    assert!(md.contains("per I/O, of which nvsoak's own code"), "{md}");
    let html_path = dir.path().join("r.html");
    let hs = html_path.display().to_string();
    assert!(report(&["--state", &ss, "--out", &hs]).status.success());
    let html = std::fs::read_to_string(&html_path).expect("html");
    assert!(
        html.contains("Worker CPU, soak phases"),
        "the HTML report shows the CPU"
    );
}

// ---------------------------------------------------------------------------------------------
// Headless Chromium, through the DevTools protocol on 127.0.0.1.

const CHROMIUM: &str = "/usr/bin/chromium";

struct Browser {
    child: Child,
    port: u16,
    _profile: tempfile::TempDir,
}

impl Browser {
    fn start() -> Browser {
        assert!(
            Path::new(CHROMIUM).exists(),
            "{CHROMIUM} is missing (apt-get install -y chromium, or run scripts/setup-test-deps as root)"
        );
        let profile = tempfile::tempdir().expect("profile dir");
        let mut child = Command::new(CHROMIUM)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
                "--no-default-browser-check",
                "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
                "--remote-debugging-address=127.0.0.1",
                "--remote-debugging-port=0",
                "--window-size=1280,2000",
                "--hide-scrollbars",
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg("about:blank")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("starting chromium");
        let stderr = child.stderr.take().expect("stderr");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(rest) = line.split("DevTools listening on ws://127.0.0.1:").nth(1) {
                    let port: u16 = rest
                        .split('/')
                        .next()
                        .and_then(|p| p.parse().ok())
                        .unwrap_or(0);
                    let _ = tx.send(port);
                }
            }
        });
        let port = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("chromium did not print its DevTools endpoint within 30 s");
        Browser {
            child,
            port,
            _profile: profile,
        }
    }

    /// A DevTools session on the browser's page.
    fn page(&self) -> Cdp {
        let addr: SocketAddr = format!("127.0.0.1:{}", self.port).parse().expect("addr");
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let body = devtools_get(addr, "/json/list");
            let list: Value = serde_json::from_str(&body).expect("target list");
            let ws = list.as_array().and_then(|a| {
                a.iter()
                    .find(|t| t["type"] == "page")
                    .and_then(|t| t["webSocketDebuggerUrl"].as_str().map(String::from))
            });
            if let Some(ws) = ws {
                return Cdp::connect(&ws);
            }
            assert!(Instant::now() < deadline, "no page target: {body}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// GET from the DevTools HTTP endpoint, which keeps the connection open: read exactly
/// Content-Length bytes.
fn devtools_get(addr: SocketAddr, path: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(5))
        .expect("connecting to DevTools");
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("read timeout");
    write!(s, "GET {path} HTTP/1.1\r\nHost: {addr}\r\n\r\n").expect("request");
    let mut r = BufReader::new(s);
    let mut len = 0usize;
    let mut status = String::new();
    r.read_line(&mut status).expect("status line");
    assert!(status.contains(" 200 "), "DevTools {path}: {status}");
    loop {
        let mut line = String::new();
        r.read_line(&mut line).expect("header");
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        if let Some(v) = l.to_ascii_lowercase().strip_prefix("content-length:") {
            len = v.trim().parse().expect("content length");
        }
    }
    let mut body = vec![0u8; len];
    r.read_exact(&mut body).expect("body");
    String::from_utf8_lossy(&body).to_string()
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct Cdp {
    ws: tungstenite::WebSocket<tungstenite::stream::MaybeTlsStream<std::net::TcpStream>>,
    next_id: u64,
    /// Events seen while waiting for responses.
    events: Vec<Value>,
}

impl Cdp {
    fn connect(url: &str) -> Cdp {
        let (ws, _) = tungstenite::connect(url).expect("connecting to DevTools");
        if let tungstenite::stream::MaybeTlsStream::Plain(s) = ws.get_ref() {
            s.set_read_timeout(Some(Duration::from_millis(500)))
                .expect("read timeout");
        }
        Cdp {
            ws,
            next_id: 1,
            events: Vec::new(),
        }
    }

    fn recv(&mut self, deadline: Instant) -> Option<Value> {
        while Instant::now() < deadline {
            match self.ws.read() {
                Ok(tungstenite::Message::Text(t)) => {
                    return serde_json::from_str(t.as_str()).ok();
                }
                Ok(_) => {}
                Err(tungstenite::Error::Io(e))
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) => {}
                Err(e) => panic!("DevTools connection failed: {e}"),
            }
        }
        None
    }

    fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        let msg = json!({"id": id, "method": method, "params": params});
        self.ws
            .send(tungstenite::Message::Text(msg.to_string().into()))
            .expect("sending a DevTools command");
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let m = self
                .recv(deadline)
                .unwrap_or_else(|| panic!("no answer to {method} within 30 s"));
            if m["id"] == id {
                assert!(m["error"].is_null(), "{method} failed: {m}");
                return m["result"].clone();
            }
            self.events.push(m);
        }
    }

    /// Wait for an event named `method` (already seen or arriving).
    fn wait_event(&mut self, method: &str, timeout: Duration) {
        if self.events.iter().any(|e| e["method"] == method) {
            return;
        }
        let deadline = Instant::now() + timeout;
        while let Some(m) = self.recv(deadline) {
            let hit = m["method"] == method;
            self.events.push(m);
            if hit {
                return;
            }
        }
        panic!("no {method} within {timeout:?}");
    }

    /// Navigate, wait for the load event, return every URL the page requested.
    fn load(&mut self, url: &str) -> Vec<String> {
        self.call("Network.enable", json!({}));
        self.call("Page.enable", json!({}));
        self.events.clear();
        self.call("Page.navigate", json!({"url": url}));
        self.wait_event("Page.loadEventFired", Duration::from_secs(30));
        // Let late subresource requests (there should be none) show up.
        let settle = Instant::now() + Duration::from_millis(300);
        while let Some(m) = self.recv(settle) {
            self.events.push(m);
        }
        self.events
            .iter()
            .filter(|e| e["method"] == "Network.requestWillBeSent")
            .filter_map(|e| e["params"]["request"]["url"].as_str().map(String::from))
            .collect()
    }

    fn eval(&mut self, expr: &str) -> Value {
        let r = self.call(
            "Runtime.evaluate",
            json!({"expression": expr, "returnByValue": true}),
        );
        assert!(r["exceptionDetails"].is_null(), "{expr}: {r}");
        r["result"]["value"].clone()
    }

    /// Screenshots of the whole page, 2000 px per file: `<stem>.png`, `<stem>-2.png`, ...
    fn screenshot(&mut self, path: &Path) {
        use base64::Engine;
        let height = self
            .eval("document.documentElement.scrollHeight")
            .as_f64()
            .unwrap_or(2000.0);
        let stem = path.with_extension("");
        let mut y = 0.0;
        let mut n = 1;
        while y < height && n <= 5 {
            let h = (height - y).min(2000.0);
            let r = self.call(
                "Page.captureScreenshot",
                json!({"format": "png", "captureBeyondViewport": true,
                       "clip": {"x": 0, "y": y, "width": 1280, "height": h, "scale": 1}}),
            );
            let data = base64::engine::general_purpose::STANDARD
                .decode(r["data"].as_str().expect("screenshot data"))
                .expect("screenshot base64");
            assert!(data.starts_with(b"\x89PNG"), "not a PNG");
            if let Some(d) = path.parent() {
                std::fs::create_dir_all(d).expect("screenshot dir");
            }
            let file = if n == 1 {
                path.to_path_buf()
            } else {
                PathBuf::from(format!("{}-{n}.png", stem.display()))
            };
            std::fs::write(&file, &data).expect("writing the screenshot");
            y += h;
            n += 1;
        }
    }
}

/// Per chart: rendered width and height, series polylines, their rendered lengths, and the
/// declared series count.
const CHART_PROBE: &str = r#"JSON.stringify(Array.from(document.querySelectorAll('svg.chart')).map(s => {
  const r = s.getBoundingClientRect();
  const lines = Array.from(s.querySelectorAll('polyline.series'));
  const box = e => { const b = e.getBoundingClientRect(); return {l: b.left, r: b.right, t: b.top, b: b.bottom}; };
  const hit = (a, b) => a.l < b.r && b.l < a.r && a.t < b.b && b.t < a.b;
  const plots = Array.from(s.querySelectorAll('rect.plot-area')).map(box);
  const legend = Array.from(s.querySelectorAll('g.legend > *')).map(box);
  const chart = box(s);
  return {w: r.width, h: r.height, declared: Number(s.dataset.seriesCount),
          legend: legend.length,
          legend_over_plot: legend.filter(a => plots.some(p => hit(a, p))).length,
          legend_outside: legend.filter(a => a.l < chart.l - 1 || a.r > chart.r + 1 || a.b > chart.b + 1).length,
          series: lines.length,
          drawn: lines.filter(l => { const b = l.getBoundingClientRect(); return b.width > 0 || b.height > 0; }).length};
}))"#;

#[derive(Debug)]
struct ChartProbe {
    w: f64,
    h: f64,
    declared: u64,
    series: u64,
    drawn: u64,
    /// Legend elements (swatches and labels), those over the plot area, those cut off.
    legend: u64,
    legend_over_plot: u64,
    legend_outside: u64,
}

fn probe_charts(cdp: &mut Cdp) -> Vec<ChartProbe> {
    let v = cdp.eval(CHART_PROBE);
    let list: Value = serde_json::from_str(v.as_str().expect("probe result")).expect("probe JSON");
    list.as_array()
        .expect("charts")
        .iter()
        .map(|c| ChartProbe {
            w: c["w"].as_f64().unwrap_or(0.0),
            h: c["h"].as_f64().unwrap_or(0.0),
            declared: c["declared"].as_u64().unwrap_or(u64::MAX),
            series: c["series"].as_u64().unwrap_or(0),
            drawn: c["drawn"].as_u64().unwrap_or(0),
            legend: c["legend"].as_u64().unwrap_or(0),
            legend_over_plot: c["legend_over_plot"].as_u64().unwrap_or(u64::MAX),
            legend_outside: c["legend_outside"].as_u64().unwrap_or(u64::MAX),
        })
        .collect()
}

/// Requests that left the machine (anything but file:, data:, about: and 127.0.0.1).
fn outside(urls: &[String]) -> Vec<&String> {
    urls.iter()
        .filter(|u| {
            !(u.starts_with("file://")
                || u.starts_with("data:")
                || u.starts_with("about:")
                || u.starts_with("http://127.0.0.1:")
                || u.starts_with("https://127.0.0.1:"))
        })
        .collect()
}

fn screenshot_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("target/browser")
}

#[test]
#[ignore = "needs chromium; run by scripts/test-browser"]
fn browser_renders_the_report_offline() {
    let dir = shm_dir();
    let html_path = dir.path().join("report.html");
    let base = fixture_args();
    let hs = html_path.display().to_string();
    let out = report(&args_with(&base, &["--out", &hs]));
    assert!(out.status.success());

    let browser = Browser::start();
    let mut cdp = browser.page();
    let url = format!("file://{}", html_path.display());
    let urls = cdp.load(&url);
    assert_eq!(
        urls,
        vec![url.clone()],
        "the report requested more than itself"
    );
    assert!(outside(&urls).is_empty());
    let charts = probe_charts(&mut cdp);
    let series: Vec<u64> = charts.iter().map(|c| c.series).collect();
    // One comparison (4k-random-read, both drives; 64k-seq-read has one drive, so no ranking),
    // then each drive's average and p99 charts per sweep.
    assert_eq!(series, vec![2, 1, 1, 1, 1, 1, 1], "{charts:?}");
    for c in &charts {
        assert!(
            c.w > 100.0 && c.h > 50.0,
            "chart rendered at {}x{}",
            c.w,
            c.h
        );
        assert_eq!(c.declared, c.series, "{c:?}");
        assert_eq!(c.drawn, c.series, "a series has no rendered extent: {c:?}");
        // The sweep charts' legend is below the plot: it hides no point and is not cut off.
        assert!(c.legend >= 2 * c.series, "{c:?}");
        assert_eq!(c.legend_over_plot, 0, "the legend covers the plot: {c:?}");
        assert_eq!(c.legend_outside, 0, "the legend is cut off: {c:?}");
    }
    let resources = cdp.eval("performance.getEntriesByType('resource').length");
    assert_eq!(resources, json!(0));
    cdp.screenshot(&screenshot_dir().join("report.png"));
}

/// The soak chart's layout as rendered: the legend clear of both plot areas, no two time-axis
/// labels overlapping, every label inside the chart.
const SOAK_LAYOUT: &str = r#"JSON.stringify(Array.from(document.querySelectorAll('svg.soak-chart')).map(s => {
  const box = e => { const b = e.getBoundingClientRect(); return {l: b.left, r: b.right, t: b.top, b: b.bottom}; };
  const plots = Array.from(s.querySelectorAll('rect.plot-area')).map(box);
  const legend = Array.from(s.querySelectorAll('g.legend > *')).map(box);
  const xl = Array.from(s.querySelectorAll('text.x-label')).map(box);
  const hit = (a, b) => a.l < b.r && b.l < a.r && a.t < b.b && b.t < a.b;
  const chart = box(s);
  return {plots: plots.length, legend: legend.length,
          legend_over_plot: legend.filter(a => plots.some(p => hit(a, p))).length,
          labels: xl.length,
          overlapping: xl.filter((a, i) => xl.some((b, j) => i !== j && hit(a, b))).length,
          outside: xl.filter(a => a.l < chart.l - 1 || a.r > chart.r + 1).length,
          events: s.querySelectorAll('g.event').length,
          declared_events: Number(s.dataset.eventCount),
          steady: s.querySelectorAll('rect.steady-window').length};
}))"#;

fn assert_soak_layout(cdp: &mut Cdp) -> Vec<Value> {
    let v = cdp.eval(SOAK_LAYOUT);
    let list: Value = serde_json::from_str(v.as_str().expect("layout")).expect("layout JSON");
    let list = list.as_array().expect("soak charts").clone();
    assert!(!list.is_empty(), "no soak chart rendered");
    for c in &list {
        assert_eq!(c["plots"], 2, "{c}");
        assert!(c["legend"].as_u64().unwrap_or(0) >= 2, "{c}");
        assert_eq!(c["legend_over_plot"], 0, "the legend covers a plot: {c}");
        assert!(c["labels"].as_u64().unwrap_or(0) >= 2, "{c}");
        assert_eq!(c["overlapping"], 0, "time-axis labels overlap: {c}");
        assert_eq!(c["outside"], 0, "a time-axis label is cut off: {c}");
        assert_eq!(c["events"], c["declared_events"], "{c}");
    }
    list
}

#[test]
#[ignore = "needs chromium; run by scripts/test-browser"]
fn browser_renders_the_soak_over_time() {
    let dir = shm_dir();
    let f = dir.path().join("d1.json");
    std::fs::write(&f, crate::soakover::with_history().to_string()).expect("fixture");
    let html_path = dir.path().join("soak.html");
    let (fs, hs) = (f.display().to_string(), html_path.display().to_string());
    let out = report(&["--from", &fs, "--out", &hs]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let browser = Browser::start();
    let mut cdp = browser.page();
    let url = format!("file://{}", html_path.display());
    let urls = cdp.load(&url);
    assert_eq!(urls, vec![url.clone()]);
    let charts = probe_charts(&mut cdp);
    assert_eq!(charts.len(), 1, "{charts:?}");
    let c = &charts[0];
    assert_eq!((c.declared, c.series, c.drawn), (4, 4, 4), "{c:?}");
    assert!(c.w > 900.0, "the soak chart is {} px wide", c.w);
    let layout = assert_soak_layout(&mut cdp);
    assert_eq!(layout[0]["events"], 3, "{layout:?}");
    assert_eq!(layout[0]["steady"], 2, "{layout:?}");
    cdp.screenshot(&screenshot_dir().join("soak.png"));
}

const STATUS_CONFIG: &str = r#"
[state]
dir = "{dir}/state"
[health]
enabled = false
[[target]]
name = "live"
path = "{dir}/live.dat"
size = "16MiB"
engine = "psync"
[[target.phase]]
kind = "soak"
job = { name = "paced-read", read = 100, bs = "4k", access = "random", iodepth = 1, workers = 1, rate = "2000iops" }
duration = "5m"
"#;

#[test]
#[ignore = "needs chromium; run by scripts/test-browser"]
fn browser_renders_the_daemon_status_page() {
    let d = Daemon::start(STATUS_CONFIG);
    // Wait until the workload runs and the history holds a few samples.
    let s = d.scrape_until(Duration::from_secs(20), |s| {
        sum(s, "nvsoak_read_ops_total", &[("target", "live")]) > 2000.0
    });
    assert!(sum(&s, "nvsoak_read_ops_total", &[("target", "live")]) > 2000.0);
    let deadline = Instant::now() + Duration::from_secs(20);
    let page = loop {
        let (code, body) = http_get(d.addr, "/").expect("GET /");
        assert_eq!(code, 200, "{body}");
        assert!(
            body.contains("<svg class=\"chart\""),
            "the daemon's / is not the report::status page yet (wire report::status::render_status into DaemonApp)"
        );
        // Every chart's line has at least 3 samples (one per second), so it has an extent.
        let lines: Vec<usize> = body
            .split("<polyline class=\"series\"")
            .skip(1)
            .map(|l| {
                l.split("points=\"")
                    .nth(1)
                    .and_then(|p| p.split('"').next())
                    .map_or(0, |p| p.split_whitespace().count())
            })
            .collect();
        if (lines.len() >= 3 && lines.iter().all(|n| *n >= 3)) || Instant::now() > deadline {
            break body;
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    assert!(page.contains("href=\"/metrics\""));
    assert!(
        external_refs(&page).is_empty(),
        "{:?}",
        external_refs(&page)
    );

    let browser = Browser::start();
    let mut cdp = browser.page();
    let url = format!("http://{}/", d.addr);
    let urls = cdp.load(&url);
    assert!(
        outside(&urls).is_empty(),
        "requests outside 127.0.0.1: {urls:?}"
    );
    let distinct: BTreeSet<&String> = urls.iter().collect();
    assert_eq!(
        distinct.len(),
        1,
        "the page requested more than itself: {urls:?}"
    );
    let charts = probe_charts(&mut cdp);
    // One target: IOPS, bandwidth and p99 charts, one series each (health is off: no drives),
    // then its soak over time (read IOPS, average and p99 latency).
    assert_eq!(charts.len(), 4, "{charts:?}");
    let soak = &charts[3];
    assert_eq!((soak.declared, soak.series), (3, 3), "{soak:?}");
    assert!(soak.w > 600.0, "the soak chart is {} px wide", soak.w);
    assert_soak_layout(&mut cdp);
    let charts = &charts[..3];
    for c in charts {
        assert!(
            c.w > 100.0 && c.h > 50.0,
            "chart rendered at {}x{}",
            c.w,
            c.h
        );
        assert_eq!((c.series, c.declared, c.drawn), (1, 1, 1), "{c:?}");
    }
    let text = cdp.eval("document.body.innerText");
    let text = text.as_str().unwrap_or("");
    assert!(text.contains("live") && text.contains("running"), "{text}");
    assert!(
        text.contains("No drive health: health polling is off"),
        "{text}"
    );
    // The title names the host; the index links to the target's numbered block, which is
    // open, and collapsing it hides its charts.
    let host = cdp.eval("document.querySelector('h1 .host').textContent");
    assert!(
        host.as_str().is_some_and(|h| !h.is_empty()),
        "no host name: {host}"
    );
    let index =
        cdp.eval("document.querySelector('nav.target-index a[href=\"#target-1\"]').textContent");
    assert_eq!(index.as_str(), Some("1. live"), "{index}");
    let open = cdp.eval("document.querySelector('details#target-1').open");
    assert_eq!(open.as_bool(), Some(true), "{open}");
    let mut shown = |open: bool| {
        cdp.eval(&format!(
            "(() => {{ const d = document.querySelector('details#target-1'); d.open = {open}; \
             return d.querySelector('svg.chart').checkVisibility(); }})()"
        ))
    };
    let collapsed = shown(false);
    assert_eq!(
        collapsed.as_bool(),
        Some(false),
        "charts of a collapsed block: {collapsed}"
    );
    let expanded = shown(true);
    assert_eq!(
        expanded.as_bool(),
        Some(true),
        "charts of an open block: {expanded}"
    );
    cdp.screenshot(&screenshot_dir().join("status.png"));
}

/// Host, target and profile names are the operator's (or a results file's) text: the Markdown
/// report escapes them, as the HTML and SVG do, so markup in a name reads back literally.
#[test]
fn markdown_escapes_names_from_results_files() {
    let dir = shm_dir();
    let text = std::fs::read_to_string(fixture("drive-a.json")).expect("fixture");
    let mut v: serde_json::Value = serde_json::from_str(&text).expect("fixture JSON");
    v["host"] = "<img src=x onerror=alert(1)>".into();
    v["target"] = "t|*bold*_[x](http://e)".into();
    if let Some(sweeps) = v["sweeps"].as_array_mut()
        && let Some(s) = sweeps.first_mut()
    {
        s["profile"] = "`code` # h".into();
    }
    let from = dir.path().join("hostile.json");
    std::fs::write(&from, serde_json::to_string(&v).expect("JSON")).expect("write");
    let md_path = dir.path().join("q.md");
    let from_s = from.display().to_string();
    let md_s = md_path.display().to_string();
    let out = report(&["--from", &from_s, "--format", "md", "--out", &md_s]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let md = std::fs::read_to_string(&md_path).expect("markdown written");
    assert!(md.contains("\\<img src=x onerror=alert(1)\\>"), "{md}");
    // The tag from the name is escaped wherever it appears.
    let unescaped_lt = md
        .match_indices("<img")
        .filter(|(i, _)| *i == 0 || md.as_bytes()[i - 1] != b'\\')
        .count();
    assert_eq!(unescaped_lt, 0, "{md}");
    assert!(md.contains("t\\|\\*bold\\*\\_\\[x\\](http://e)"), "{md}");
    assert!(!md.contains("[x]("), "{md}");
    assert!(md.contains("\\`code\\` \\# h"), "{md}");
}

/// A paced sweep point that got more than 10 % below its target rate is flagged: in the
/// Markdown sweep table, in the HTML points table, and with a ring on the sweep charts.
#[test]
fn sweep_points_short_of_their_target_are_flagged() {
    let dir = shm_dir();
    let text = std::fs::read_to_string(fixture("drive-a.json")).expect("fixture");
    let mut v: serde_json::Value = serde_json::from_str(&text).expect("fixture JSON");
    let points = v["sweeps"][0]["points"]
        .as_array_mut()
        .expect("the fixture's first sweep has points");
    let p80 = points
        .iter_mut()
        .find(|p| p["pct"] == 80)
        .expect("an 80 % point");
    assert_eq!(p80["target_iops"], 80000);
    p80["iops"] = 50000.into();
    let from = dir.path().join("short.json");
    std::fs::write(&from, serde_json::to_string(&v).expect("JSON")).expect("write");
    let from_s = from.display().to_string();
    let b = fixture("drive-b.json").display().to_string();

    let md_path = dir.path().join("q.md");
    let md_s = md_path.display().to_string();
    let out = report(&["--from", &from_s, &b, "--format", "md", "--out", &md_s]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let md = std::fs::read_to_string(&md_path).expect("markdown written");
    assert!(md.contains("| Short of target (>10 %) |"), "{md}");
    assert!(
        md.contains("| 80 %: 50,000 of 80,000 IOPS (short 37.5 %) |"),
        "{md}"
    );
    // Every other point, of both drives, came within 10 % of its target.
    assert_eq!(md.matches("(short ").count(), 1, "{md}");

    let html_path = dir.path().join("q.html");
    let html_s = html_path.display().to_string();
    let out = report(&["--from", &from_s, &b, "--format", "html", "--out", &html_s]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let html = std::fs::read_to_string(&html_path).expect("html written");
    assert_eq!(
        html.matches("<td class=\"num short\">short 37.5 %</td>")
            .count(),
        1,
        "{html}"
    );
    // The average and p99 charts of that sweep, and the comparison chart of its profile, each
    // ring the one short point.
    assert_eq!(
        html.matches("<circle class=\"flagged\"").count(),
        3,
        "{html}"
    );
    assert!(html.contains("short of target rate by more than 10 %"));

    // The unmodified fixture flags nothing.
    let plain_path = dir.path().join("plain.html");
    let plain_s = plain_path.display().to_string();
    let a = fixture("drive-a.json").display().to_string();
    let out = report(&["--from", &a, "--format", "html", "--out", &plain_s]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let plain = std::fs::read_to_string(&plain_path).expect("html written");
    assert!(!plain.contains("class=\"flagged\""));
    assert!(!plain.contains("num short"));
}

const PRECONDITION_SOAK_CONFIG: &str = r#"
[state]
dir = "{dir}/state"
[health]
enabled = false
[[target]]
name = "shm"
path = "{dir}/shm.dat"
size = "16MiB"
engine = "psync"
[[target.phase]]
kind = "precondition"
passes = 1
block_size = "64k"
[[target.phase]]
kind = "soak"
profile = "4k-random-read"
iodepth = 1
rate = "500iops"
duration = "2s"
"#;

/// The results file keeps each soak phase's own totals (the precondition's 16 MiB of writes
/// are not the soak's: a read soak wrote nothing), and the report names the phase with its
/// profile.
#[test]
fn the_soak_phase_is_recorded_apart_from_the_precondition() {
    let dir = run_to_completion(PRECONDITION_SOAK_CONFIG, Duration::from_secs(120));
    let state = dir.path().join("state");
    let results: Value = serde_json::from_str(
        &std::fs::read_to_string(state.join("results/shm.json")).expect("results file"),
    )
    .expect("results JSON");
    let phases = results["soak"]["phases"].as_array().expect("soak phases");
    assert_eq!(phases.len(), 1, "{results}");
    let p = &phases[0];
    assert_eq!(p["phase"], 2);
    assert_eq!(p["profile"], "4k-random-read");
    assert_eq!(p["written_bytes"], 0, "a read soak writes nothing: {p}");
    assert!(p["read_ops"].as_u64().is_some_and(|n| n > 0), "{p}");
    let secs = p["elapsed_secs"].as_f64().unwrap_or(0.0);
    assert!((1.5..60.0).contains(&secs), "{p}");
    let ss = state.display().to_string();
    let md = markdown_report(dir.path(), &ss);
    assert!(md.contains("- phase 2, 4k-random-read: "), "{md}");
}

/// The verdict in headless Chromium: the recorded sweeps of two drives, one with I/O errors,
/// each results file stamped with its verdict. The report opens with the verdict section (the
/// yield first, then one row per drive, the FAIL in the failure colour with its gate and
/// figure, the failing gates ranked), laid out with a real size, before any chart.
#[test]
#[ignore = "needs chromium; run by scripts/test-browser"]
fn browser_shows_the_verdict_table_and_yield_first() {
    let dir = shm_dir();
    let mut from = vec!["--from".to_string()];
    for (name, errors) in [("drive-a.json", 0u64), ("drive-b.json", 5)] {
        let mut r: nvsoak::model::results::TargetResults =
            serde_json::from_slice(&std::fs::read(fixture(name)).expect("fixture"))
                .expect("fixture JSON");
        let soak = r.soak.get_or_insert_with(Default::default);
        soak.errors = errors;
        soak.verify_errors = 0;
        // A verified file target: every gate that applies has its data, so drive-a PASSes.
        r.subject = Some(nvsoak::model::verdict::Subject {
            kind: nvsoak::model::verdict::SubjectKind::File,
            verify: true,
            ..Default::default()
        });
        r.verified_bytes = 1 << 20;
        nvsoak::verdict::stamp(
            &mut r,
            &nvsoak::model::verdict::GateSettings::default(),
            &nvsoak::model::verdict::ExternalInputs::default(),
            nvsoak::model::verdict::PlanState::Finished,
            None,
        );
        let p = dir.path().join(name);
        std::fs::write(&p, serde_json::to_vec(&r).expect("json")).expect("write");
        from.push(p.display().to_string());
    }
    let html_path = dir.path().join("verdict.html");
    let hs = html_path.display().to_string();
    let out = report(&args_with(&from, &["--out", &hs]));
    assert!(out.status.success(), "{out:?}");

    let browser = Browser::start();
    let mut cdp = browser.page();
    let url = format!("file://{}", html_path.display());
    let urls = cdp.load(&url);
    assert_eq!(
        urls,
        vec![url.clone()],
        "the report requested more than itself"
    );
    let probe = cdp.eval(
        r#"(() => {
            const sec = document.querySelector('#verdict');
            const rect = sec.getBoundingClientRect();
            const chart = document.querySelector('svg.chart');
            const rows = [...document.querySelectorAll('table.verdicts tr')].slice(1)
                .map(r => [...r.cells].map(c => c.textContent));
            const gates = [...document.querySelectorAll('table.failing-gates tr')].slice(1)
                .map(r => [...r.cells].map(c => c.textContent));
            const fail = document.querySelector('td.verdict.bad');
            const pass = document.querySelector('td.verdict.ok');
            return JSON.stringify({
                yield: document.querySelector('#yield').textContent,
                rows, gates,
                firstH2InVerdict: document.querySelector('h2').closest('#verdict') !== null,
                height: rect.height, width: rect.width,
                beforeChart: chart === null || rect.bottom <= chart.getBoundingClientRect().top,
                failColor: getComputedStyle(fail).color,
                passColor: getComputedStyle(pass).color,
            });
        })()"#,
    );
    let v: Value = serde_json::from_str(probe.as_str().expect("probe result")).expect("probe JSON");
    assert_eq!(
        v["yield"],
        "Yield: 1 of 2 drives passed (50 % of those decided), 1 failed."
    );
    let rows = v["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 2, "{v}");
    let failed: Vec<&Value> = rows.iter().filter(|r| r[3] == "FAIL").collect();
    assert_eq!(failed.len(), 1, "{v}");
    assert_eq!(failed[0][4], "io_errors: 5 errors (at most 0)");
    assert!(rows.iter().any(|r| r[3] == "PASS"), "{v}");
    assert_eq!(v["gates"], json!([["io_errors", "1"]]));
    assert_eq!(
        v["firstH2InVerdict"], true,
        "the verdict is the first section"
    );
    assert_eq!(v["beforeChart"], true, "{v}");
    assert!(
        v["height"].as_f64().is_some_and(|h| h > 50.0)
            && v["width"].as_f64().is_some_and(|w| w > 200.0),
        "{v}"
    );
    assert_eq!(
        v["failColor"], "rgb(214, 39, 40)",
        "FAIL in the failure colour"
    );
    assert_eq!(v["passColor"], "rgb(44, 160, 44)");
    cdp.screenshot(&screenshot_dir().join("verdict.png"));
}

/// The ratings table and the report's `--out` tried as an attacker would (issue 28, reads with
/// no bound and files followed): `--ratings` naming a FIFO or `/dev/zero` is refused at once,
/// and `--out` naming a symlink to someone else's file replaces the link with the report and
/// leaves that file as it was.
#[test]
fn a_hostile_ratings_table_is_refused_and_out_never_writes_through_a_symlink() {
    let dir = shm_dir();
    let fifo = dir.path().join("ratings.fifo");
    let status = Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
    assert!(status.success());
    let base = fixture_args();
    for path in [fifo.as_path(), Path::new("/dev/zero")] {
        let mut child = Command::new(bin())
            .arg("report")
            .args(args_with(
                &base,
                &["--format", "json", "--ratings", &path.display().to_string()],
            ))
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn report");
        let (status, err) = wait_exit(
            &mut child,
            Duration::from_secs(30),
            &format!("report --ratings {} did not return", path.display()),
        );
        assert!(!status.success(), "{}", path.display());
        assert!(
            err.contains("not a regular file") && err.contains(&path.display().to_string()),
            "{}: {err}",
            path.display()
        );
    }
    let victim = dir.path().join("victim.txt");
    std::fs::write(&victim, b"someone else's").expect("victim");
    let link = dir.path().join("report.html");
    std::os::unix::fs::symlink(&victim, &link).expect("symlink");
    let out = report(&args_with(
        &base,
        &["--format", "html", "--out", &link.display().to_string()],
    ));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read(&victim).expect("victim"),
        b"someone else's",
        "the report was written through the symlink"
    );
    let meta = std::fs::symlink_metadata(&link).expect("report");
    assert!(meta.file_type().is_file(), "the link was not replaced");
    assert!(
        std::fs::read_to_string(&link)
            .expect("report")
            .contains("<html")
    );
}
