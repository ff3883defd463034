//! `nvsoak report [--state DIR | --from FILE...] [--archived] [--format html|md|json]
//! [--out PATH] [--ratings FILE]`
//!
//! Reads `DIR/results/*.json` (default: the default state directory; with `--archived` also
//! the runs moved aside, `<target>.json.<why>-<time>`, each labelled as archived) or the given
//! results files, and writes the report to `--out` or, for html and json, to stdout. The Markdown
//! report needs `--out`: its SVG charts are written next to it. `--ratings` replaces the
//! built-in drive ratings table; a bad file is an error naming it.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};

use crate::report::{self, Format, ReportError};

pub fn main(
    state: Option<&Path>,
    from: &[PathBuf],
    archived: bool,
    format: &str,
    out: Option<&Path>,
    ratings: Option<&Path>,
) -> Result<ExitCode> {
    let format: Format = format.parse()?;
    // Before reading any results: a bad table fails fast, whatever else is wrong.
    let table = ratings.map(report::load_ratings).transpose()?;
    let inputs = if from.is_empty() {
        let dir = state
            .map(Path::to_path_buf)
            .unwrap_or_else(crate::config::state_dir_to_read);
        let (inputs, skipped) = report::load_state_dir_with(&dir, archived)?;
        for s in skipped {
            eprintln!("nvsoak: skipping an archived results file: {s}");
        }
        inputs
    } else {
        report::load_files(from)?
    };
    let rep = match &table {
        Some(t) => report::build_with_table(&inputs, t),
        None => report::build(&inputs),
    };
    let text = match format {
        Format::Markdown => {
            let out = out.ok_or(ReportError::MarkdownNeedsOut)?;
            let written = report::markdown::write(&rep, out)?;
            eprintln!(
                "nvsoak: wrote {} ({} charts)",
                out.display(),
                written.len().saturating_sub(1)
            );
            return Ok(ExitCode::SUCCESS);
        }
        Format::Html => report::html::render(&rep)?,
        Format::Json => report::render_json(&rep)?,
    };
    match out {
        Some(p) => {
            crate::util::write_atomic(p, text.as_bytes()).map_err(|source| ReportError::Write {
                path: p.to_path_buf(),
                source,
            })?;
            eprintln!(
                "nvsoak: wrote {} ({}, {} compared)",
                p.display(),
                crate::model::fmt::count_of(rep.drives.len() as u64, "drive"),
                crate::model::fmt::count_of(rep.comparisons.len() as u64, "profile")
            );
        }
        None => {
            let mut so = std::io::stdout().lock();
            so.write_all(text.as_bytes())
                .and_then(|_| so.flush())
                .context("writing the report to stdout")?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
