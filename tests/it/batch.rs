//! `nvsoak report --from` over a floor's worth of results files: 300 files from 100 hosts, two
//! models, a few drives that failed in different ways. The batch view must group them by model
//! and capacity, put the failing drives first with their host, target and serial, and the
//! whole report must come out in seconds.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::bin;

fn fixture(name: &str) -> Value {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/report")
        .join(name);
    serde_json::from_str(&std::fs::read_to_string(&p).expect("fixture")).expect("fixture JSON")
}

const FILES: usize = 300;

/// Drive `i`: its host, target and serial, and what is wrong with it, if anything.
fn results(i: usize, a: &Value, b: &Value) -> Value {
    let mut r = if i.is_multiple_of(3) {
        b.clone()
    } else {
        a.clone()
    };
    r["host"] = json!(format!("rack{:02}-host{:02}", i / 3 / 10, i / 3 % 10));
    r["target"] = json!(format!("bay{}", i % 3));
    r["path"] = json!(format!("/dev/disk/by-id/nvme-BAY{}", i % 3));
    r["device"]["serial"] = json!(format!("SN{i:05}"));
    r["soak"] = json!({
        "started": 1.7e9, "elapsed_secs": 86400.0, "read_bytes": 1u64 << 40,
        "written_bytes": 1u64 << 40, "read_ops": 1000, "write_ops": 1000,
        "errors": if i == 17 { 5 } else { 0 },
        "verify_errors": if i == 203 { 2 } else { 0 },
    });
    if i == 118 {
        // A slow drive: every sweep point at half its model's figures.
        for s in r["sweeps"].as_array_mut().expect("sweeps") {
            for p in s["points"].as_array_mut().expect("points") {
                for k in ["iops", "achieved_iops", "bytes_per_sec"] {
                    if let Some(v) = p[k].as_f64() {
                        p[k] = json!(v / 2.0);
                    }
                }
            }
            if let Some(m) = s["max_iops"].as_f64() {
                s["max_iops"] = json!(m / 2.0);
            }
        }
    }
    r
}

fn write_files(dir: &Path) -> Vec<PathBuf> {
    let (a, b) = (fixture("drive-a.json"), fixture("drive-b.json"));
    (0..FILES)
        .map(|i| {
            let host = format!("host{:03}", i / 3);
            let d = dir.join(host);
            std::fs::create_dir_all(&d).expect("mkdir");
            let p = d.join(format!("bay{}.json", i % 3));
            std::fs::write(&p, results(i, &a, &b).to_string()).expect("write");
            p
        })
        .collect()
}

fn run_report(files: &[PathBuf], format: &str, out: &Path) -> Duration {
    let t = Instant::now();
    let o = Command::new(bin())
        .arg("report")
        .arg("--format")
        .arg(format)
        .arg("--out")
        .arg(out)
        .arg("--from")
        .args(files)
        .output()
        .expect("nvsoak report");
    let took = t.elapsed();
    assert!(
        o.status.success(),
        "report --format {format}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    took
}

#[test]
fn a_report_over_hundreds_of_hosts_groups_drives_and_finds_the_failing_ones() {
    let dir = tempfile::tempdir().expect("tempdir");
    let files = write_files(dir.path());
    let json_out = dir.path().join("report.json");
    let html_out = dir.path().join("report.html");
    let took_json = run_report(&files, "json", &json_out);
    let took_html = run_report(&files, "html", &html_out);
    println!(
        "report over {FILES} files: json {:.2} s, html {:.2} s ({} bytes)",
        took_json.as_secs_f64(),
        took_html.as_secs_f64(),
        std::fs::metadata(&html_out).map(|m| m.len()).unwrap_or(0)
    );
    // "In seconds": a generous bound for a loaded 2-core machine; the figure is printed.
    assert!(
        took_html < Duration::from_secs(30),
        "html took {took_html:?}"
    );

    let rep: Value =
        serde_json::from_str(&std::fs::read_to_string(&json_out).expect("json")).expect("parse");
    let batch = &rep["batch"];
    assert_eq!(batch["drives"], FILES);
    assert_eq!(batch["hosts"], FILES / 3);
    assert_eq!(batch["flagged"], 3, "{}", batch["groups"]);
    let groups = batch["groups"].as_array().expect("groups");
    assert_eq!(groups.len(), 2, "two models: {groups:?}");
    let total: usize = groups
        .iter()
        .map(|g| g["rows"].as_array().map_or(0, Vec::len))
        .sum();
    assert_eq!(total, FILES, "every drive in one group");
    // Each failing drive leads its group's table, with what finds it on the floor.
    let want = [
        (17usize, "rack00-host05", "bay2", "5 I/O errors"),
        (118, "rack03-host09", "bay1", "% of the group's median"),
        (203, "rack06-host07", "bay2", "2 verify errors"),
    ];
    for (i, host, target, flag) in want {
        let serial = format!("SN{i:05}");
        let (g, pos, row) = groups
            .iter()
            .find_map(|g| {
                let rows = g["rows"].as_array()?;
                let pos = rows.iter().position(|r| r["serial"] == serial.as_str())?;
                Some((g, pos, &rows[pos]))
            })
            .unwrap_or_else(|| panic!("{serial} in no group"));
        assert_eq!(row["host"], host, "{row}");
        assert_eq!(row["target"], target, "{row}");
        let flags = row["flags"].to_string();
        assert!(flags.contains(flag), "{serial}: flags {flags}");
        let flagged_before = g["rows"].as_array().expect("rows")[..pos]
            .iter()
            .all(|r| r["flags"].as_array().is_some_and(|f| !f.is_empty()));
        assert!(flagged_before, "{serial} is not among the first rows");
    }
    let clean = groups
        .iter()
        .flat_map(|g| g["rows"].as_array().into_iter().flatten())
        .filter(|r| r["flags"].as_array().is_some_and(Vec::is_empty))
        .count();
    assert_eq!(clean, FILES - 3);

    // The HTML: the batch section before the drives, each failing drive's row naming its host
    // and linking to its section, and no 300-curve comparison chart.
    let html = std::fs::read_to_string(&html_out).expect("html");
    let batch_at = html.find("id=\"batch\"").expect("batch section");
    let first_drive = html.find("id=\"drive1\"").expect("drive sections");
    assert!(batch_at < first_drive);
    assert!(html.contains(
        "300 drives from 100 hosts, in 2 groups of model and capacity; 3 drives flagged."
    ));
    for (i, host, _, _) in want {
        let serial = format!("SN{i:05}");
        let row = html[batch_at..first_drive]
            .split("<tr")
            .find(|r| r.contains(&serial))
            .unwrap_or_else(|| panic!("no batch row for {serial}"));
        assert!(row.starts_with(" class=\"flagged\""), "{row}");
        assert!(row.contains(host), "{row}");
        assert!(row.contains("href=\"#drive"), "{row}");
    }
    assert!(html.contains("No comparison chart for 300 drives"));

    // Markdown carries the same tables.
    let md_out = dir.path().join("report.md");
    run_report(&files, "md", &md_out);
    let md = std::fs::read_to_string(&md_out).expect("md");
    assert!(md.contains("## Batch"));
    assert!(
        md.contains("| SN00017 |") || md.contains("SN00017"),
        "md batch rows"
    );
}
