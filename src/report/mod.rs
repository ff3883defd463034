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
pub use crate::model::checked;
pub mod compute;
pub mod drive;
pub mod drive_common;
pub mod drive_status;
pub mod history;
pub mod html;
pub mod markdown;
mod mdtext;
pub mod nodrives;
pub mod ocp_phases;
pub mod soakchart;
pub mod status;
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
    #[error("{path}: the figure {figure} is {value}, {rule}: the file is damaged or was edited")]
    Figure {
        path: PathBuf,
        figure: String,
        value: String,
        rule: String,
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

/// The largest results file `nvsoak report` reads: far beyond a month of soak history.
pub use crate::util::bounded::RESULTS_LIMIT;

/// Read one results file (an archived one, by its name, is labelled as such): a regular
/// file only, read without blocking and at most [`RESULTS_LIMIT`] bytes; every
/// figure in it checked ([`checked`]) before anything draws it.
pub fn load_file(path: &Path) -> Result<Loaded, ReportError> {
    let text = crate::util::bounded::read_to_string(path, RESULTS_LIMIT).map_err(|source| {
        ReportError::Read {
            path: path.to_path_buf(),
            source,
        }
    })?;
    parse_loaded(path, &text)
}

/// [`load_file`] of `results/<name>` beneath the state directory `sd` (never through a
/// symlink).
fn load_in(sd: &crate::state::StateDir, name: &str) -> Result<Loaded, ReportError> {
    let rel = format!("{RESULTS_DIR}/{name}");
    let path = sd.display(&rel);
    let text = sd
        .read(&rel, RESULTS_LIMIT)
        .and_then(|b| {
            String::from_utf8(b)
                .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "not UTF-8 text"))
        })
        .map_err(|source| ReportError::Read {
            path: path.clone(),
            source,
        })?;
    parse_loaded(&path, &text)
}

/// The results folder of a state directory.
const RESULTS_DIR: &str = "results";

fn parse_loaded(path: &Path, text: &str) -> Result<Loaded, ReportError> {
    let parse = |source| ReportError::Parse {
        path: path.to_path_buf(),
        source,
    };
    let value: serde_json::Value = serde_json::from_str(text).map_err(parse)?;
    if let Some(o) = checked::first_out_of_range(&value) {
        return Err(ReportError::Figure {
            path: path.to_path_buf(),
            figure: o.figure,
            value: o.value,
            rule: o.rule,
        });
    }
    let results = serde_json::from_value(value).map_err(parse)?;
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
    let rdir = dir.join(RESULTS_DIR);
    let (sd, entries) = list_results(dir)?;
    let mut old: Vec<(String, Archived)> = entries
        .into_iter()
        .filter_map(|n| Archived::from_path(Path::new(&n)).map(|a| (n, a)))
        .collect();
    old.sort_by(|a, b| a.1.moved_at.total_cmp(&b.1.moved_at).then(a.0.cmp(&b.0)));
    for (n, _) in old {
        match load_in(&sd, &n) {
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

/// The state directory and the names in its results folder (sorted), reached beneath its
/// descriptor: a symlink at `results` is refused, never followed.
fn list_results(dir: &Path) -> Result<(crate::state::StateDir, Vec<String>), ReportError> {
    let rdir = dir.join(RESULTS_DIR);
    let listed = crate::state::StateDir::open(dir).and_then(|sd| Ok((sd.list(RESULTS_DIR)?, sd)));
    match listed {
        Ok((entries, sd)) => Ok((sd, entries.into_iter().map(|e| e.name).collect())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Err(ReportError::NoResults { dir: rdir })
        }
        Err(source) => Err(ReportError::Read { path: rdir, source }),
    }
}

fn load_current(dir: &Path) -> Result<Vec<Loaded>, ReportError> {
    let rdir = dir.join(RESULTS_DIR);
    let (sd, names) = list_results(dir)?;
    let names: Vec<String> = names.into_iter().filter(|n| n.ends_with(".json")).collect();
    if names.is_empty() {
        return Err(ReportError::NoResults { dir: rdir });
    }
    names.iter().map(|n| load_in(&sd, n)).collect()
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

/// What a target without NVMe identity is, from its path: a block device (a loop or SATA
/// disk, under /dev but not /dev/shm) or a file. The report may be made on another host, so the path is all
/// there is to go by.
pub fn target_kind(path: &str) -> &'static str {
    if path.starts_with("/dev/") && !path.starts_with("/dev/shm/") {
        "a block device (not an NVMe namespace)"
    } else {
        "a file (not an NVMe namespace)"
    }
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
    /// The first point in sweep order whose average latency reached 1 ms (it may lie below
    /// `sub_ms` in IOPS).
    #[serde(default)]
    pub first_over_1ms: Option<CurvePoint>,
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
    let text = crate::util::bounded::read_to_string(path, crate::util::bounded::CONFIG_LIMIT)
        .map_err(|e| ReportError::Ratings {
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

impl Report {
    /// How many distinct drives the report covers: a drive is its model and serial when the
    /// results know them, else its host, target and path; an archived run of a drive that also
    /// has a current run is the same drive, not another.
    pub fn drive_count(&self) -> usize {
        let ids: std::collections::BTreeSet<String> =
            self.drives.iter().map(DriveReport::identity).collect();
        ids.len()
    }

    /// The runs moved aside (`--archived`) among the report's.
    pub fn archived_runs(&self) -> usize {
        self.drives.iter().filter(|d| d.archived.is_some()).count()
    }

    /// "1 drive", "1 drive, 1 archived run", "3 drives, 2 archived runs".
    pub fn drives_text(&self) -> String {
        let drives = crate::model::fmt::count_of(self.drive_count() as u64, "drive");
        match self.archived_runs() {
            0 => drives,
            n => format!(
                "{drives}, {}",
                crate::model::fmt::count_of(n as u64, "archived run")
            ),
        }
    }
}

impl DriveReport {
    /// What tells this drive apart from another, whichever run of it this is.
    fn identity(&self) -> String {
        match &self.device {
            Some(d) if !d.serial.trim().is_empty() => {
                format!("drive\0{}\0{}", d.model.trim(), d.serial.trim())
            }
            _ => format!("target\0{}\0{}\0{}", self.host, self.target, self.path),
        }
    }
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
                first_over_1ms: crate::model::curve::first_over(
                    &curve,
                    LatencyBasis::Average,
                    SUB_MS_LIMIT_US,
                )
                .cloned(),
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

/// The running targets' in-memory figures over the results files read from disk, so the
/// daemon's `/report` reads as its status page does (the file is written only every so often):
/// the soak over time (the closed points and the one being built, as the status page draws
/// them), the soak's and the whole plan's totals and clocks, and the running soak phase's
/// time so far (marked running, not stopped). A file of a target that is not running, and an
/// archived run, are left as read.
pub fn overlay_live(inputs: &mut [Loaded], live: &[crate::workload::scheduler::TargetSnapshot]) {
    for s in live {
        let Some(l) = inputs
            .iter_mut()
            .find(|l| l.archived.is_none() && l.results.target == s.name)
        else {
            continue;
        };
        if s.soak_started.is_none() {
            continue;
        }
        let soak = l.results.soak.get_or_insert_with(Default::default);
        let t = s.soak_totals();
        soak.elapsed_secs = t.soak_elapsed_secs;
        soak.read_bytes = t.read_bytes;
        soak.written_bytes = t.write_bytes;
        soak.read_ops = t.read_ops;
        soak.write_ops = t.write_ops;
        soak.errors = t.errors;
        soak.plan = Some(crate::model::results::PlanTotals::of(&s.plan_totals()));
        if let Some(h) = &s.soak_history {
            let mut h = (**h).clone();
            if let Some(p) = s.soak_partial.filter(|p| p.secs > 0.0) {
                h.points.push(p);
            }
            soak.history = Some(h);
        }
        let running_soak = s.up && s.running && s.phase == "soak";
        if let Some(e) = soak
            .phases
            .last_mut()
            .filter(|e| running_soak && e.phase == s.phase_index + 1)
        {
            e.elapsed_secs = if s.phase_paused {
                s.phase_elapsed_base
            } else {
                let now = crate::util::unix_now();
                s.phase_elapsed_base + (now - s.phase_started_unix).max(0.0)
            };
            e.running = true;
            e.stopped = false;
        }
    }
}

/// [`report_page_html`] for the daemon, with its running targets' figures (see
/// [`overlay_live`]).
pub fn report_page_html_live(
    state_dir: &Path,
    live: &[crate::workload::scheduler::TargetSnapshot],
) -> String {
    let page = load_state_dir(state_dir).and_then(|mut inputs| {
        overlay_live(&mut inputs, live);
        html::render(&build(&inputs))
    });
    report_page_or_why(page)
}

/// `/report` on the daemon: the HTML report of `state_dir`, or, when it cannot be built (no
/// sweep has finished a point yet, an unreadable file), a small page saying why. Never fails.
pub fn report_page_html(state_dir: &Path) -> String {
    report_page_or_why(render_report_html(state_dir))
}

fn report_page_or_why(page: Result<String, ReportError>) -> String {
    match page {
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
mod fuzz;
#[cfg(test)]
mod tests;
