//! The docs against the code: `docs/metrics.md`'s table is what `nvsoak metrics --list` prints,
//! README keeps the two commands CI and a newcomer run, every relative link in README.md and
//! docs/ names a file that exists, and the Debian package ships every page of docs/.

use crate::common::*;
use std::path::{Path, PathBuf};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// Lines only in `a` (`-`) and only in `b` (`+`), in order: enough to see what changed in a
/// table of one row per line.
fn line_diff(a: &str, b: &str) -> String {
    let (la, lb): (Vec<&str>, Vec<&str>) = (a.lines().collect(), b.lines().collect());
    let mut out = String::new();
    for l in &la {
        if !lb.contains(l) {
            out.push_str(&format!("- {l}\n"));
        }
    }
    for l in &lb {
        if !la.contains(l) {
            out.push_str(&format!("+ {l}\n"));
        }
    }
    out
}

#[test]
fn docs_metrics_table_is_what_metrics_list_prints() {
    let out = std::process::Command::new(bin())
        .args(["metrics", "--list"])
        .output()
        .expect("running nvsoak metrics --list");
    assert!(out.status.success(), "nvsoak metrics --list: {out:?}");
    let listed = String::from_utf8(out.stdout).expect("utf-8");
    assert!(
        listed.contains("| `nvme_up` | gauge | `device` |")
            && listed.contains("| `nvsoak_read_ops_total` | counter | `target`, `workload` |")
            && listed.contains("| `ata_up` | gauge | `device` |")
            && listed.contains("| `nvsoak_qualification_verdict` | gauge |"),
        "the listing lacks families every kind of drive and target has:\n{listed}"
    );
    let doc = read("docs/metrics.md");
    let table = nvsoak::cli::metrics::between_markers(&doc)
        .expect("docs/metrics.md has lost its metrics-list markers");
    assert!(
        table == listed.trim_end_matches('\n'),
        "docs/metrics.md and `nvsoak metrics --list` disagree (- docs, + listed):\n{}\nregenerate with\n  {}",
        line_diff(table, &listed),
        nvsoak::cli::metrics::REGENERATE
    );
}

#[test]
fn metrics_without_list_says_what_to_ask_for() {
    let out = std::process::Command::new(bin())
        .arg("metrics")
        .output()
        .expect("running nvsoak metrics");
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("nvsoak metrics --list"), "{err}");
}

#[test]
fn readme_keeps_the_two_commands() {
    let readme = read("README.md");
    // CI (.ci/run) runs scripts/test; README says so in the words a newcomer types.
    for cmd in ["\nscripts/test\n", "\ncargo run --release -- run\n"] {
        assert!(
            readme.contains(cmd),
            "README.md lost the command {:?} (in a code block of its own)",
            cmd.trim()
        );
    }
    assert!(read(".ci/run").contains("scripts/test"), ".ci/run");
}

/// Every `[text](target)` of a Markdown file whose target is a relative path.
fn relative_links(text: &str) -> Vec<String> {
    let re = regex::Regex::new(r"\]\(([^)\s]+)\)").expect("regex");
    re.captures_iter(text)
        .map(|c| c[1].to_string())
        .filter(|t| !t.starts_with("http") && !t.starts_with('#') && !t.starts_with("mailto:"))
        .collect()
}

#[test]
fn every_relative_link_in_readme_and_docs_resolves() {
    let mut pages: Vec<PathBuf> = vec![root().join("README.md")];
    for e in std::fs::read_dir(root().join("docs")).expect("docs/") {
        let p = e.expect("entry").path();
        if p.extension().is_some_and(|x| x == "md") {
            pages.push(p);
        }
    }
    assert!(pages.len() >= 9, "README and the docs pages: {pages:?}");
    let mut broken = Vec::new();
    let mut checked = 0;
    for page in &pages {
        let text = std::fs::read_to_string(page).expect("read");
        let dir = page.parent().expect("parent");
        for link in relative_links(&text) {
            let file = link.split('#').next().unwrap_or("");
            checked += 1;
            if !dir.join(file).exists() {
                broken.push(format!("{}: {link}", page.display()));
            }
        }
    }
    assert!(checked >= 20, "only {checked} links found");
    assert!(broken.is_empty(), "links to nothing: {broken:#?}");
}

#[test]
fn the_package_ships_every_docs_page() {
    let cargo = read("Cargo.toml");
    assert!(
        cargo.contains(r#"["docs/*.md", "usr/share/doc/nvsoak/", "644"]"#),
        "Cargo.toml's deb assets must ship docs/*.md in usr/share/doc/nvsoak/"
    );
    assert!(
        cargo.contains(r#"["README.md", "usr/share/doc/nvsoak/README.md", "644"]"#),
        "Cargo.toml's deb assets must ship README.md"
    );
}

/// The walkthrough's plan, as README writes it, is a valid config: its block device swapped for
/// a file (the one change a machine without that drive needs), `check-config` accepts every
/// other key and prints its three phases and the gate it changes.
#[test]
fn readme_walkthrough_plan_passes_check_config() {
    let readme = read("README.md");
    let walk = &readme[readme
        .find("## Burn in one drive")
        .expect("the walkthrough")..];
    let start = walk.find("```toml\n").expect("the plan's toml block") + "```toml\n".len();
    let plan = &walk[start..start + walk[start..].find("```").expect("end of block")];
    assert!(
        plan.contains("allow_destroy = ") && plan.contains("path = \"/dev/"),
        "{plan}"
    );
    let dir = shm_dir();
    let file = dir.path().join("disk0.dat");
    let mut text = format!(
        "[state]\ndir = \"{}\"\n",
        dir.path().join("state").display()
    );
    for line in plan.lines() {
        if line.starts_with("path = ") {
            text.push_str(&format!(
                "path = \"{}\"\nsize = \"64MiB\"\n",
                file.display()
            ));
        } else if !line.starts_with("allow_destroy = ") {
            text.push_str(line);
            text.push('\n');
        }
    }
    let cfg = dir.path().join("burn-in.toml");
    std::fs::write(&cfg, &text).expect("write");
    let out = std::process::Command::new(bin())
        .arg("check-config")
        .arg(&cfg)
        .output()
        .expect("check-config");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for want in [
        "phase 1 precondition: 2 passes",
        "phase 2 sweep",
        "phase 3 soak for 7d",
        "verify                     inline",
        "temperature <= 70.00 °C",
    ] {
        assert!(stdout.contains(want), "missing {want:?} in\n{stdout}");
    }
    assert!(!file.exists(), "check-config created the target file");
}
