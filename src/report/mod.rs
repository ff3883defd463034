//! Qualification reports and the daemon's live status page.
//!
//! - [`load_state_dir`] / [`load_files`] read `results/<target>.json` files (the format of
//!   [`crate::model::results`]), from one host or many.
//! - [`build`] turns them into a [`Report`]: per drive its identity and rated figures, per swept
//!   profile the load curve, peak, sub-1 ms frontier and share of the rated figure
//!   ([`compute`] holds those pure functions and their choices), the steady-state outcomes and
//!   the soak figures; across drives one comparison per profile with a ranking.
//! - [`html`] renders one self-contained HTML file (inline SVG and CSS), [`markdown`] a Markdown
//!   file with SVG files next to it, and the JSON output is the [`Report`] itself.
//! - [`history`] and [`status`] are the daemon's `/` page: a bounded in-memory history and the
//!   server-rendered page.
//!
//! Architecture Invariant: everything here except the `load_*` functions and
//! [`markdown::write`] is pure (no I/O), so the same code serves `nvsoak report` and the daemon.

pub mod batch;
pub mod charts;
pub mod compute;
pub mod drive_ata;
pub mod history;
pub mod html;
pub mod markdown;
pub mod nodrives;
pub mod ocp_phases;
pub mod soakchart;
pub mod status;
pub mod status_ata;
pub mod verdict;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::model::curve::{
    CurvePoint, LatencyBasis, RatedFigures, RatedShare, SUB_MS_LIMIT_US, rated_figures,
    rated_from_table,
};
use crate::model::results::{DeviceIdentity, SteadyOutcome, TargetResults};
use compute::{RankEntry, SoakFigures};

#[derive(Debug, Error)]
pub enum ReportError {
    #[error("reading {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "{path} is not a results file: {source} (pass results/<target>.json files written by nvsoak run)"
    )]
    Parse {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error(
        "no results in {dir} (run a plan with a sweep or soak phase first, or pass --from FILE)"
    )]
    NoResults { dir: PathBuf },
    #[error("writing {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("unknown report format {0:?} (use html, md or json)")]
    Format(String),
    #[error("the markdown report needs --out PATH (its SVG charts are written next to it)")]
    MarkdownNeedsOut,
    #[error(
        "ratings table {path}: {reason} (pass a file in the format of config/drives.toml, or leave out --ratings for the built-in table)"
    )]
    Ratings { path: PathBuf, reason: String },
    #[error(transparent)]
    Chart(#[from] charts::ChartError),
    #[error("encoding the JSON report: {0}")]
    Json(#[source] serde_json::Error),
}

/// One results file as read.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub source: PathBuf,
    pub results: TargetResults,
    /// Set when the file is an archived run (moved aside, `<target>.json.<why>-<time>`).
    pub archived: Option<Archived>,
}

/// An archived run: a results file moved aside when its target's plan started over.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Archived {
    /// The suffix it was moved aside with (`stale`, `reset`, `restart`, `corrupt`, ...).
    pub reason: String,
    /// What that means (`the plan changed`, ...).
    pub reason_text: String,
    /// Unix time it was moved aside.
    pub moved_at: f64,
}

impl Archived {
    /// From a moved-aside file name, `None` for a current results file.
    pub fn from_path(path: &Path) -> Option<Archived> {
        let name = path.file_name()?.to_str()?;
        let (base, why, ts) = crate::state::parse_aside_name(name)?;
        base.ends_with(".json").then(|| Archived {
            reason: why.to_string(),
            reason_text: crate::state::results::archive_reason_text(why).to_string(),
            moved_at: ts as f64,
        })
    }

    /// `archived, moved aside 2026-12-01 07:15:00 UTC: the plan changed`.
    pub fn describe(&self) -> String {
        format!(
            "archived, moved aside {}: {}",
            crate::model::fmt::fmt_time(self.moved_at),
            self.reason_text
        )
    }
}

/// Read one results file (an archived one, by its name, is labelled as such).
pub fn load_file(path: &Path) -> Result<Loaded, ReportError> {
    let text = std::fs::read_to_string(path).map_err(|source| ReportError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let results = serde_json::from_str(&text).map_err(|source| ReportError::Parse {
        path: path.to_path_buf(),
        source,
    })?;
    Ok(Loaded {
        source: path.to_path_buf(),
        results,
        archived: Archived::from_path(path),
    })
}

pub fn load_files(paths: &[PathBuf]) -> Result<Vec<Loaded>, ReportError> {
    paths.iter().map(|p| load_file(p)).collect()
}

/// Every `DIR/results/*.json`, sorted by file name.
pub fn load_state_dir(dir: &Path) -> Result<Vec<Loaded>, ReportError> {
    Ok(load_state_dir_with(dir, false)?.0)
}

/// [`load_state_dir`], and with `archived` also the runs moved aside
/// (`<target>.json.<why>-<time>`), each after the current file of its target, oldest first.
/// An archived file that does not parse (one moved aside as corrupt) is skipped: the second
/// list says which and why.
pub fn load_state_dir_with(
    dir: &Path,
    archived: bool,
) -> Result<(Vec<Loaded>, Vec<String>), ReportError> {
    let mut current = match load_current(dir) {
        Ok(c) => c,
        Err(ReportError::NoResults { .. }) if archived => Vec::new(),
        Err(e) => return Err(e),
    };
    let mut skipped = Vec::new();
    if !archived {
        return Ok((current, skipped));
    }
    let rdir = dir.join("results");
    let mut old: Vec<(PathBuf, Archived)> = std::fs::read_dir(&rdir)
        .map_err(|source| ReportError::Read {
            path: rdir.clone(),
            source,
        })?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter_map(|p| Archived::from_path(&p).map(|a| (p, a)))
        .collect();
    old.sort_by(|a, b| a.1.moved_at.total_cmp(&b.1.moved_at).then(a.0.cmp(&b.0)));
    for (p, _) in old {
        match load_file(&p) {
            Ok(l) => current.push(l),
            Err(e) => skipped.push(e.to_string()),
        }
    }
    if current.is_empty() {
        return Err(ReportError::NoResults { dir: rdir });
    }
    // Each target's current run first, then its archived ones.
    current.sort_by(|a, b| {
        a.results
            .target
            .cmp(&b.results.target)
            .then(a.archived.is_some().cmp(&b.archived.is_some()))
    });
    Ok((current, skipped))
}

fn load_current(dir: &Path) -> Result<Vec<Loaded>, ReportError> {
    let rdir = dir.join("results");
    let rd = match std::fs::read_dir(&rdir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(ReportError::NoResults { dir: rdir });
        }
        Err(source) => return Err(ReportError::Read { path: rdir, source }),
    };
    let mut paths: Vec<PathBuf> = rd
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    paths.sort();
    if paths.is_empty() {
        return Err(ReportError::NoResults { dir: rdir });
    }
    load_files(&paths)
}

/// The whole report; also the JSON output.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Report {
    pub nvsoak_version: String,
    /// Unix time the report was built.
    pub generated: f64,
    /// How the sub-1 ms frontier is chosen (see [`compute`]).
    pub frontier_basis: String,
    pub drives: Vec<DriveReport>,
    /// One per profile swept on any drive, ordered by profile name.
    pub comparisons: Vec<Comparison>,
    /// Drives grouped by model and capacity, for reports over many drives or hosts.
    #[serde(default)]
    pub batch: Option<batch::Batch>,
    /// Drives passed and failed, per model and firmware, and the failing gates ranked.
    #[serde(default, rename = "yield")]
    pub yield_summary: Option<verdict::Yield>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DriveReport {
    /// Unique within the report: the model and serial when known, else the target name; the
    /// host is appended when two drives would share a label; archived runs say so.
    pub label: String,
    /// Set for an archived run (`nvsoak report --archived`).
    #[serde(default)]
    pub archived: Option<Archived>,
    pub host: String,
    pub target: String,
    pub path: String,
    pub source: String,
    pub device: Option<DeviceIdentity>,
    pub rated: Option<RatedFigures>,
    pub sweeps: Vec<SweepReport>,
    pub steady: Vec<SteadyOutcome>,
    pub soak: Option<SoakFigures>,
    /// The pass/fail verdict the results file records (none in files from before verdicts).
    #[serde(default)]
    pub verdict: Option<crate::model::verdict::Verdict>,
    /// The drive's C3h latency-outlier counts per phase (`ocp_phases.rs`).
    #[serde(default)]
    pub ocp_phases: Vec<crate::model::ocp_phases::OcpPhaseCounts>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SweepReport {
    pub profile: String,
    pub block_size: f64,
    pub read_pct: u8,
    pub sequential: bool,
    pub max_iops: f64,
    pub started: f64,
    /// False while the sweep is still running (or was interrupted).
    pub complete: bool,
    /// Earlier sweeps of the same profile in the file (the report shows the newest).
    pub earlier_sweeps: usize,
    pub curve: Vec<CurvePoint>,
    pub peak: Option<CurvePoint>,
    /// Highest-IOPS point with average latency below 1 ms.
    pub sub_ms: Option<CurvePoint>,
    /// Highest-IOPS point with p99 latency below 1 ms.
    pub sub_ms_p99: Option<CurvePoint>,
    /// Some point reached an average latency of 1 ms or more.
    pub crossed_1ms: bool,
    pub rated_share: Option<RatedShare>,
    pub errors: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Comparison {
    pub profile: String,
    pub ranking: Vec<RankEntry>,
}

pub const FRONTIER_BASIS: &str = "highest-IOPS measured sweep point whose average latency is below 1 ms (no interpolation between points); the p99 frontier is given alongside";

/// Read an operator-supplied ratings table for `nvsoak report --ratings`.
pub fn load_ratings(path: &Path) -> Result<crate::nvme::ratings::RatingsTable, ReportError> {
    use crate::nvme::ratings::{RatingsError, RatingsTable};
    let text = std::fs::read_to_string(path).map_err(|e| ReportError::Ratings {
        path: path.to_path_buf(),
        reason: format!("cannot read it: {e}"),
    })?;
    RatingsTable::parse(&text, &path.display().to_string()).map_err(|e| ReportError::Ratings {
        path: path.to_path_buf(),
        reason: match e {
            RatingsError::Toml { source, .. } => {
                format!(
                    "not a valid drive ratings table: {}",
                    source.to_string().trim_end()
                )
            }
            RatingsError::BadRegex {
                series,
                pattern,
                source,
                ..
            } => {
                format!("drive `{series}`: `{pattern}` is not a valid regular expression: {source}")
            }
            RatingsError::Read { source, .. } => format!("cannot read it: {source}"),
        },
    })
}

use crate::util::unix_now as now_unix;

/// The rated figures of the card a spanning target covers (`[[health.card]]`), as recorded.
pub fn card_rated(c: &crate::model::results::SpanCard) -> RatedFigures {
    RatedFigures {
        source: format!("card {}: ratings table: {}", c.card, c.rating),
        random_read_iops: c.random_read_iops,
        random_write_iops: c.random_write_iops,
        seq_read_bytes_per_sec: c.seq_read_bytes_per_second,
        seq_write_bytes_per_sec: c.seq_write_bytes_per_second,
        ..Default::default()
    }
}

/// Build the report; `rated` looks up a drive's rated figures (normally [`rated_figures`]).
pub fn build_with(
    inputs: &[Loaded],
    rated: &dyn Fn(&DeviceIdentity) -> Option<RatedFigures>,
) -> Report {
    build_inner(inputs, rated, false)
}

/// Build the report with an operator-supplied ratings table (`nvsoak report --ratings`): its
/// rated figures replace the built-in table's, and its rated DWPD the one the daemon recorded.
pub fn build_with_table(inputs: &[Loaded], table: &crate::nvme::ratings::RatingsTable) -> Report {
    build_inner(inputs, &|d| rated_from_table(table, d), true)
}

fn build_inner(
    inputs: &[Loaded],
    rated: &dyn Fn(&DeviceIdentity) -> Option<RatedFigures>,
    prefer_rated: bool,
) -> Report {
    let labels = unique_labels(inputs);
    let mut drives = Vec::new();
    for (l, label) in inputs.iter().zip(labels) {
        let r = &l.results;
        // A target spanning a rated card is compared with the card's rating.
        let rated = match &r.card {
            Some(c) => Some(card_rated(c)),
            None => r.device.as_ref().and_then(rated),
        };
        drives.push(DriveReport {
            label,
            archived: l.archived.clone(),
            host: r.host.clone(),
            target: r.target.clone(),
            path: r.path.clone(),
            source: l.source.display().to_string(),
            device: r.device.clone(),
            sweeps: sweep_reports(r, rated.as_ref()),
            steady: r.steady.clone(),
            soak: r.soak.as_ref().map(|s| {
                compute::soak_figures_with(
                    s,
                    r.device
                        .as_ref()
                        .map(|d| d.capacity_bytes)
                        .filter(|c| *c > 0),
                    rated.as_ref(),
                    prefer_rated,
                )
            }),
            rated,
            verdict: r.verdict.clone(),
            ocp_phases: r.ocp_phases.clone(),
        });
    }
    let mut by_profile: BTreeMap<String, Vec<(String, CurvePoint, Option<CurvePoint>)>> =
        BTreeMap::new();
    for d in &drives {
        for s in &d.sweeps {
            if let Some(p) = &s.peak {
                by_profile.entry(s.profile.clone()).or_default().push((
                    d.label.clone(),
                    p.clone(),
                    s.sub_ms.clone(),
                ));
            }
        }
    }
    // A ranking needs two drives: a one-drive report has no "first place" and no comparison.
    // Nor does a profile only one drive ran (its own sweep section shows it).
    if drives.len() < 2 {
        by_profile.clear();
    }
    by_profile.retain(|_, entries| entries.len() >= 2);
    let comparisons = by_profile
        .into_iter()
        .map(|(profile, entries)| Comparison {
            profile,
            ranking: compute::rank(&entries),
        })
        .collect();
    let mut report = Report {
        nvsoak_version: env!("CARGO_PKG_VERSION").to_string(),
        generated: now_unix(),
        frontier_basis: FRONTIER_BASIS.to_string(),
        drives,
        comparisons,
        batch: None,
        yield_summary: None,
    };
    report.batch = batch::batch(&report);
    report.yield_summary = Some(verdict::yield_of(&report));
    report
}

pub fn build(inputs: &[Loaded]) -> Report {
    build_with(inputs, &rated_figures)
}

/// The newest sweep of each profile (by start time), in the order profiles first appear.
fn sweep_reports(r: &TargetResults, rated: Option<&RatedFigures>) -> Vec<SweepReport> {
    let mut order: Vec<&str> = Vec::new();
    for s in &r.sweeps {
        if !order.contains(&s.profile.as_str()) {
            order.push(&s.profile);
        }
    }
    order
        .into_iter()
        .filter_map(|profile| {
            let all: Vec<_> = r.sweeps.iter().filter(|s| s.profile == profile).collect();
            let s = all
                .iter()
                .copied()
                .max_by(|a, b| a.started.total_cmp(&b.started))?;
            let curve = crate::model::curve::curve(s);
            let sequential = crate::model::curve::is_sequential(&s.profile, s.block_size);
            let rated_share = rated.and_then(|rf| {
                crate::model::curve::rated_share(
                    &curve,
                    crate::model::curve::rated_basis(s.read_pct, sequential)?,
                    rf,
                )
            });
            Some(SweepReport {
                profile: s.profile.clone(),
                block_size: s.block_size,
                read_pct: s.read_pct,
                sequential,
                max_iops: s.max_iops,
                started: s.started,
                complete: s.finished.is_some(),
                earlier_sweeps: all.len() - 1,
                peak: crate::model::curve::peak(&curve).cloned(),
                sub_ms: crate::model::curve::frontier(
                    &curve,
                    LatencyBasis::Average,
                    SUB_MS_LIMIT_US,
                )
                .cloned(),
                sub_ms_p99: crate::model::curve::frontier(
                    &curve,
                    LatencyBasis::P99,
                    SUB_MS_LIMIT_US,
                )
                .cloned(),
                crossed_1ms: curve.iter().any(|p| p.lat_avg_us >= SUB_MS_LIMIT_US),
                errors: s.points.iter().map(|p| p.errors).sum(),
                rated_share,
                curve,
            })
        })
        .collect()
}

fn base_label(r: &TargetResults) -> String {
    match &r.device {
        Some(d) if !d.model.is_empty() && !d.serial.is_empty() => {
            format!("{} {}", d.model, d.serial)
        }
        Some(d) if !d.model.is_empty() => format!("{} ({})", d.model, r.target),
        _ => r.target.clone(),
    }
}

fn unique_labels(inputs: &[Loaded]) -> Vec<String> {
    let base: Vec<String> = inputs
        .iter()
        .map(|l| match &l.archived {
            Some(a) => format!(
                "{} (archived {})",
                base_label(&l.results),
                crate::model::fmt::fmt_time(a.moved_at)
            ),
            None => base_label(&l.results),
        })
        .collect();
    let mut labels: Vec<String> = base
        .iter()
        .enumerate()
        .map(|(i, b)| {
            if base.iter().filter(|x| *x == b).count() > 1 && !inputs[i].results.host.is_empty() {
                format!("{b} @{}", inputs[i].results.host)
            } else {
                b.clone()
            }
        })
        .collect();
    // Still equal (same host too): number them.
    for i in 0..labels.len() {
        let dup = labels[..i].iter().filter(|x| **x == labels[i]).count();
        if dup > 0 {
            labels[i] = format!("{} #{}", labels[i], dup + 1);
        }
    }
    labels
}

/// Output format of `nvsoak report`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Html,
    Markdown,
    Json,
}

impl std::str::FromStr for Format {
    type Err = ReportError;
    fn from_str(s: &str) -> Result<Self, ReportError> {
        match s {
            "html" => Ok(Format::Html),
            "md" | "markdown" => Ok(Format::Markdown),
            "json" => Ok(Format::Json),
            other => Err(ReportError::Format(other.to_string())),
        }
    }
}

pub fn render_json(report: &Report) -> Result<String, ReportError> {
    serde_json::to_string_pretty(report).map_err(ReportError::Json)
}

/// The HTML report of a state directory, for the daemon to serve at `/report`.
pub fn render_report_html(state_dir: &Path) -> Result<String, ReportError> {
    let inputs = load_state_dir(state_dir)?;
    html::render(&build(&inputs))
}

/// `/report` on the daemon: the HTML report of `state_dir`, or, when it cannot be built (no
/// sweep has finished a point yet, an unreadable file), a small page saying why. Never fails.
pub fn report_page_html(state_dir: &Path) -> String {
    match render_report_html(state_dir) {
        Ok(h) => h,
        Err(e) => format!(
            "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><link rel=\"icon\" href=\"data:,\">\
             <title>nvsoak qualification report</title><style>{}</style></head><body>\
             <h1>nvsoak qualification report</h1><p class=\"muted\">No report yet: {}.</p>\
             <p><a href=\"/\">status</a> <a href=\"/metrics\">/metrics</a></p></body></html>\n",
            html::CSS,
            charts::esc(&e.to_string())
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixtures() -> Vec<Loaded> {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/report");
        load_files(&[dir.join("drive-a.json"), dir.join("drive-b.json")]).expect("fixtures")
    }

    #[test]
    fn the_soak_section_names_each_soak_phase_with_its_own_totals() {
        let mut f = fixtures();
        let soak = f[0].results.soak.get_or_insert_with(Default::default);
        soak.phases.push(crate::model::results::SoakPhase {
            phase: 2,
            profile: "4k-random-write".into(),
            started: 1_700_000_000.0,
            elapsed_secs: 60.0,
            written_bytes: 1 << 30,
            write_ops: 262_144,
            ..Default::default()
        });
        let r = build(&f);
        let want = "phase 2, 4k-random-write: 00:01:00, wrote 1.07 GB, read 0 B, 262,144 ops, 0 I/O errors";
        let page = html::render(&r).expect("html");
        assert!(page.contains("Soak phases"), "{page}");
        assert!(page.contains(want), "{want} in {page}");
        let (md, _) = markdown::render(&r, "q").expect("markdown");
        assert!(md.contains(&format!("- {want}")), "{md}");
        // The plan-wide figures beside them say they are the whole plan's.
        assert!(page.contains("Whole plan, every phase"), "{page}");
        let phases_at = md.find("Soak phases:").expect("phases");
        let whole_at = md.find("Whole plan (every phase").expect("whole plan");
        assert!(phases_at < whole_at, "{md}");
        // A results file without phases (written before) says nothing of them.
        let plain = html::render(&build(&fixtures())).expect("html");
        assert!(!plain.contains("Soak phases"));
    }

    #[test]
    fn a_target_spanning_a_rated_card_is_compared_with_the_cards_rating() {
        use crate::model::results::{MemberFigures, SpanCard, SweepPoint, SweepResult};
        let mut f = fixtures();
        let r = &mut f[0].results;
        r.device = None;
        r.members = vec![MemberFigures::default(), MemberFigures::default()];
        r.sweeps = vec![SweepResult {
            profile: "4k-random-read".into(),
            block_size: 4096.0,
            read_pct: 100,
            max_iops: 1_000_000.0,
            started: 1.0,
            finished: Some(2.0),
            points: vec![SweepPoint {
                pct: 0,
                iops: 1_000_000.0,
                lat_avg_us: 500.0,
                duration_secs: 10.0,
                member_iops: vec![600_000.0, 400_000.0],
                ..Default::default()
            }],
        }];
        r.card = Some(SpanCard {
            card: "0000:02:00.0".into(),
            rating: "Liqid Element AIC".into(),
            random_read_iops: Some(1_250_000.0),
            random_write_iops: Some(900_000.0),
            ..Default::default()
        });
        let rep = build(&f[..1]);
        let d = &rep.drives[0];
        assert_eq!(
            d.rated.as_ref().map(|r| r.source.as_str()),
            Some("card 0000:02:00.0: ratings table: Liqid Element AIC")
        );
        let share = d.sweeps[0].rated_share.as_ref().expect("of rated");
        assert!((share.ratio - 0.8).abs() < 1e-9, "{share:?}");
        let page = html::render(&rep).expect("html");
        assert!(page.contains(&html::rated_text(&d.sweeps[0])), "{page}");
        // Without the card (a single drive, or a card nobody rated), no card rating.
        f[0].results.card = None;
        assert!(build(&f[..1]).drives[0].rated.is_none());
    }

    #[test]
    fn a_one_drive_report_ranks_nothing_and_compares_nothing() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/report");
        let r = build(&load_files(&[dir.join("drive-a.json")]).expect("fixture"));
        assert_eq!(r.drives.len(), 1);
        assert!(r.comparisons.is_empty(), "{:?}", r.comparisons);
        let page = html::render(&r).expect("html");
        assert!(!page.contains("first place"), "{page}");
        assert!(!page.contains("id=\"comparison\""), "{page}");
        let (md, _) = markdown::render(&r, "q").expect("markdown");
        assert!(!md.contains("## Comparison"), "{md}");
        assert!(!md.contains("first place"), "{md}");
        // Two drives still rank.
        assert!(!build(&fixtures()).comparisons.is_empty());
    }

    #[test]
    fn build_compares_profiles_across_drives() {
        let r = build(&fixtures());
        assert_eq!(r.drives.len(), 2);
        assert_eq!(r.drives[0].label, "HUAWEI ES3600P V5 A1B2C3");
        let profiles: Vec<&str> = r.comparisons.iter().map(|c| c.profile.as_str()).collect();
        // 64k-seq-read: only drive A ran it, so it is not ranked ("first place" of one).
        assert_eq!(profiles, vec!["4k-random-read"]);
        let rr = &r.comparisons[0].ranking;
        assert_eq!(rr[0].drive, "Test Drive B B9Y8X7");
        assert_eq!(rr[0].peak_iops, 121_500.0);
        let a_seq = &r.drives[0].sweeps[1];
        assert!(a_seq.sequential && a_seq.complete);
        // 64k: peak 50 000 @ 1 300 µs (uncontrolled); frontier 25 000 @ 300 µs (the 100 % point
        // is at 1 100 µs).
        assert_eq!(a_seq.peak.as_ref().map(|p| p.iops), Some(50_000.0));
        assert_eq!(a_seq.sub_ms.as_ref().map(|p| p.iops), Some(25_000.0));
        assert!(a_seq.crossed_1ms);
        assert!(!r.drives[1].sweeps[0].crossed_1ms);
    }

    #[test]
    fn rated_figures_feed_the_share() {
        let rated = |d: &DeviceIdentity| {
            (d.serial == "A1B2C3").then(|| RatedFigures {
                source: "test table".into(),
                random_read_iops: Some(825_000.0),
                seq_read_bytes_per_sec: Some(3.5e9),
                ..Default::default()
            })
        };
        let r = build_with(&fixtures(), &rated);
        let share = |i: usize, j: usize| {
            r.drives[i].sweeps[j]
                .rated_share
                .as_ref()
                .map(|s| (s.ratio * 1e4).round() / 1e4)
        };
        assert_eq!(share(0, 0), Some(0.1212));
        assert_eq!(share(0, 1), Some(0.9362));
        assert_eq!(share(1, 0), None);
    }

    #[test]
    fn ratings_table_gives_drive_a_its_rated_figures() {
        let r = build(&fixtures());
        let a = &r.drives[0];
        let rated = a
            .rated
            .as_ref()
            .expect("ES3600P V5 is in the ratings table");
        // Seed 000: ES3600P V5 3.2 TB: 3500 MB/s read, 825K random read IOPS, 17.52 PBW.
        assert_eq!(rated.random_read_iops, Some(825_000.0));
        assert_eq!(rated.seq_read_bytes_per_sec, Some(3.5e9));
        assert_eq!(rated.tbw_bytes, Some(17.52e15));
        assert!(rated.source.contains("ES3600P V5"), "{}", rated.source);
        let share = |j: usize| a.sweeps[j].rated_share.as_ref().map(|s| s.ratio);
        // 100 000 / 825 000 and 3 276 800 000 / 3 500 000 000.
        assert!((share(0).unwrap_or(0.0) - 100_000.0 / 825_000.0).abs() < 1e-12);
        assert!((share(1).unwrap_or(0.0) - 3_276_800_000.0 / 3.5e9).abs() < 1e-12);
        // "Test Drive B" is not in the table.
        assert!(r.drives[1].rated.is_none());
    }

    #[test]
    fn labels_stay_unique_across_hosts() {
        let mut f = fixtures();
        let mut c = f[0].clone();
        c.results.host = "rack9".into();
        f.push(c.clone());
        f.push(c);
        let labels = unique_labels(&f);
        assert_eq!(labels[0], "HUAWEI ES3600P V5 A1B2C3 @rack1");
        assert_eq!(labels[2], "HUAWEI ES3600P V5 A1B2C3 @rack9");
        assert_eq!(labels[3], "HUAWEI ES3600P V5 A1B2C3 @rack9 #2");
    }

    #[test]
    fn a_sweep_in_progress_renders_without_figures() {
        use crate::model::results::{SweepPoint, SweepResult};
        let mut f = fixtures();
        f.truncate(1);
        // A second drive whose sweep has started but measured nothing yet, and one whose only
        // point is the uncontrolled run.
        let mut empty = f[0].clone();
        empty.results.device = None;
        empty.results.target = "fresh".into();
        empty.results.sweeps = vec![SweepResult {
            profile: "4k-random-read".into(),
            block_size: 4096.0,
            read_pct: 100,
            started: 1.0,
            ..Default::default()
        }];
        let mut one = empty.clone();
        one.results.target = "one-point".into();
        one.results.sweeps[0].points.push(SweepPoint {
            pct: 0,
            iops: 5000.0,
            bytes_per_sec: 5000.0 * 4096.0,
            lat_avg_us: 400.0,
            lat_p99_us: 900.0,
            duration_secs: 1.0,
            ..Default::default()
        });
        f.push(empty);
        f.push(one);
        let r = build(&f);
        let fresh = &r.drives[1].sweeps[0];
        assert!(!fresh.complete && fresh.curve.is_empty() && fresh.peak.is_none());
        assert!(fresh.sub_ms.is_none());
        // The comparison ranks only drives with a peak.
        assert_eq!(r.comparisons[0].ranking.len(), 2);
        assert_eq!(r.comparisons[0].ranking[1].drive, "one-point");
        let page = html::render(&r).expect("html");
        assert!(page.contains("4k-random-read (incomplete)"));
        assert!(page.contains("Peak -; no point measured yet."), "{page}");
        assert!(page.contains(
            "Peak 5,000 IOPS at 400 µs (uncontrolled); below 1 ms at every measured load."
        ));
        // 1 comparison chart (4k; 64k has one drive) + drive A 2x2 + fresh 2 + one-point 2.
        assert_eq!(page.matches("<svg class=\"chart\"").count(), 9);
        assert!(page.contains("data-series-count=\"0\""));
    }

    #[test]
    fn report_page_explains_a_missing_report() {
        let dir = tempfile::tempdir().expect("tempdir");
        let page = report_page_html(dir.path());
        assert!(page.contains("No report yet: no results in"), "{page}");
        assert!(!page.contains("<svg"));
        let results = dir.path().join("results");
        std::fs::create_dir_all(&results).expect("mkdir");
        let fixture =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/report/drive-b.json");
        std::fs::copy(fixture, results.join("nvme-b.json")).expect("copy");
        let page = report_page_html(dir.path());
        // One drive, one profile: avg + p99 charts (one drive has no comparison, issue 14).
        assert_eq!(page.matches("<svg class=\"chart\"").count(), 2);
    }

    fn with_drive(mut l: Loaded, d: crate::model::results::DriveSoak) -> Loaded {
        l.results
            .soak
            .get_or_insert_with(Default::default)
            .set_drive(d);
        l
    }

    #[test]
    fn drive_figures_are_shown_and_called_out() {
        use crate::model::results::DriveSoak;
        let f = fixtures();
        let bad = DriveSoak {
            device: "nvme0".into(),
            start_time: 1000.0,
            latest_time: 1000.0 + 86_400.0,
            data_written_bytes: Some(3_300_000_000_000),
            nvsoak_written_bytes: Some(3_200_000_000_000),
            accounting_ratio: Some(1.03125),
            accounting_agrees: Some(false),
            media_errors: Some(4),
            error_log_entries: Some(9),
            throttle_episodes: Some(2),
            tmt1_transitions: Some(3),
            tmt1_secs: Some(600),
            tmt2_transitions: Some(0),
            tmt2_secs: Some(0),
            percentage_used_start: 1,
            percentage_used_latest: 2,
            ..Default::default()
        };
        let good = DriveSoak {
            device: "nvme1".into(),
            data_written_bytes: Some(5_120_000),
            nvsoak_written_bytes: Some(5_120_000 - 4096),
            accounting_ratio: Some(5_120_000.0 / 5_115_904.0),
            accounting_agrees: Some(true),
            media_errors: Some(0),
            throttle_episodes: Some(0),
            tmt1_transitions: Some(0),
            tmt1_secs: Some(0),
            ..Default::default()
        };
        let inputs = vec![
            with_drive(f[0].clone(), good),
            with_drive(f[1].clone(), bad),
        ];
        let r = build(&inputs);
        let a = r.drives[0].soak.as_ref().expect("soak a");
        assert_eq!(
            (a.media_errors_rose, a.accounting_off, a.throttled),
            (Some(false), Some(false), Some(false))
        );
        assert!(a.callouts.is_empty(), "{:?}", a.callouts);
        let b = r.drives[1].soak.as_ref().expect("soak b");
        assert_eq!(
            (b.media_errors_rose, b.accounting_off, b.throttled),
            (Some(true), Some(true), Some(true))
        );
        assert_eq!(b.callouts.len(), 3, "{:?}", b.callouts);
        assert!(b.callouts[0].starts_with("Media errors rose during the soak: +4"));
        assert!(
            b.callouts[1].contains("the drive counted 3.30 TB written while nvsoak wrote 3.20 TB")
        );
        assert!(b.callouts[2].starts_with("The drive throttled: 2 episodes"));
        assert_eq!(b.accounting_ratio, Some(1.03125), "the same-period ratio");

        let page = html::render(&r).expect("html");
        assert_eq!(page.matches("<h3>Drive during the soak</h3>").count(), 2);
        assert!(
            page.contains("<p class=\"ok\">No media errors, accounting agrees, no throttling.</p>")
        );
        assert!(page.contains("<p class=\"bad callout\">Media errors rose during the soak: +4"));
        assert!(page.contains("<h3 id=\"cmp-soak\">Drives during the soak</h3>"));
        assert!(
            page.contains(
                "<td class=\"bad\">media errors rose, accounting disagrees, throttled</td>"
            )
        );
        assert!(
            page.contains("<td class=\"bad\">+4</td>"),
            "media errors row is flagged"
        );

        let (md, _) = markdown::render(&r, "r").expect("md");
        assert_eq!(md.matches("### Drive during the soak").count(), 2);
        assert!(md.contains("**Accounting disagrees: the drive counted 3.30 TB"));
        assert!(
            md.contains("| Accounting ratio (drive / nvsoak) | **1.0312: disagrees** |"),
            "{md}"
        );
        assert!(
            md.contains("| Accounting ratio (drive / nvsoak) | 1.0008: agrees within rounding |"),
            "{md}"
        );
        assert!(md.contains("| Throttle episodes seen by nvsoak | **2** |"));
        assert!(md.contains("### Drives during the soak"));
        assert!(
            md.contains("| **media errors rose, accounting disagrees, throttled** |"),
            "{md}"
        );
        assert!(md.contains(" ok |\n"), "the good drive's verdict");

        let json: serde_json::Value =
            serde_json::from_str(&render_json(&r).expect("json")).expect("parse");
        let jb = &json["drives"][1]["soak"];
        assert_eq!(jb["drive"]["media_errors"], 4);
        assert_eq!(jb["accounting_off"], true);
        assert_eq!(jb["callouts"].as_array().map(|a| a.len()), Some(3));
    }

    #[test]
    fn a_soak_without_drive_figures_says_why() {
        let r = build(&fixtures()[1..]);
        let page = html::render(&r).expect("html");
        assert!(page.contains("No drive-side figures: not an NVMe namespace"));
        assert!(!page.contains("cmp-soak"), "one drive: no soak comparison");
    }

    #[test]
    fn an_explicit_ratings_table_wins_over_the_summary() {
        let table = crate::nvme::ratings::RatingsTable::parse(
            r#"
[[drive]]
vendor = "Acme"
series = "Test B"
match = ["Test Drive B"]
dwpd = 7.0
warranty_years = 5.0
[[drive.capacity]]
capacity_bytes = 3_200_000_000_000
random_read_iops = 243_000
"#,
            "test table",
        )
        .expect("table");
        let r = build_with_table(&fixtures(), &table);
        let b = &r.drives[1];
        let rated = b.rated.as_ref().expect("rated from the operator's table");
        assert!(rated.source.contains("Acme Test B"), "{}", rated.source);
        assert_eq!(b.soak.as_ref().and_then(|s| s.rated_dwpd), Some(7.0));
        // 121 500 of 243 000 rated random read IOPS.
        assert_eq!(b.sweeps[0].rated_share.as_ref().map(|s| s.ratio), Some(0.5));
        // Drive A is not in this table, so it has no rated figures now.
        assert!(r.drives[0].rated.is_none());
        // Without the table, drive B's summary DWPD (3) stands.
        assert_eq!(
            build(&fixtures()).drives[1]
                .soak
                .as_ref()
                .and_then(|s| s.rated_dwpd),
            Some(3.0)
        );
    }

    #[test]
    fn load_errors_name_the_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let e = load_state_dir(dir.path()).expect_err("empty dir");
        assert!(e.to_string().contains("no results in"), "{e}");
        std::fs::create_dir_all(dir.path().join("results")).expect("mkdir");
        let bad = dir.path().join("results/x.json");
        std::fs::write(&bad, "{not json").expect("write");
        let e = load_state_dir(dir.path()).expect_err("bad json");
        assert!(
            e.to_string().contains("x.json is not a results file"),
            "{e}"
        );
    }

    #[test]
    fn archived_runs_are_read_on_request_and_labelled() {
        let dir = tempfile::tempdir().expect("tempdir");
        let rdir = dir.path().join("results");
        std::fs::create_dir_all(&rdir).expect("mkdir");
        let fix = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/report/drive-a.json");
        let text = std::fs::read(&fix).expect("fixture");
        let cur = rdir.join("t0.json");
        std::fs::write(&cur, &text).expect("write");
        std::fs::write(rdir.join("t0.json.stale-1764573300"), &text).expect("write");
        // Moved aside because it did not parse: skipped, with the reason.
        std::fs::write(rdir.join("t0.json.corrupt-1764573000"), "{not json").expect("write");
        assert_eq!(load_state_dir(dir.path()).expect("current").len(), 1);
        let (all, skipped) = load_state_dir_with(dir.path(), true).expect("archived");
        assert_eq!(all.len(), 2);
        assert_eq!(skipped.len(), 1);
        assert!(skipped[0].contains("corrupt-1764573000"), "{skipped:?}");
        assert!(all[0].archived.is_none(), "the current run first");
        let a = all[1].archived.as_ref().expect("archived");
        assert_eq!((a.reason.as_str(), a.moved_at), ("stale", 1_764_573_300.0));
        let r = build(&all);
        assert_eq!(r.drives[0].label, "HUAWEI ES3600P V5 A1B2C3");
        assert_eq!(
            r.drives[1].label,
            "HUAWEI ES3600P V5 A1B2C3 (archived 2025-12-01 07:15:00 UTC)"
        );
        let html = html::render(&r).expect("html");
        assert!(
            html.contains("archived, moved aside 2025-12-01 07:15:00 UTC: the plan changed"),
            "the HTML says which run is archived"
        );
        let json = render_json(&r).expect("json");
        assert!(json.contains("\"reason\": \"stale\""), "{json}");
        let md_path = dir.path().join("report.md");
        markdown::write(&r, &md_path).expect("markdown");
        let md = std::fs::read_to_string(&md_path).expect("read markdown");
        assert!(
            md.contains(
                "| Archived run | archived, moved aside 2025-12-01 07:15:00 UTC: the plan changed |"
            ),
            "{md}"
        );
        // Only archived files left (after state reset): still a report.
        std::fs::remove_file(&cur).expect("rm");
        let (only, _) = load_state_dir_with(dir.path(), true).expect("archived only");
        assert_eq!(only.len(), 1);
        assert!(load_state_dir(dir.path()).is_err());
    }
}
