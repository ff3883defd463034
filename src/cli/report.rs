//! `nvsoak report [--state DIR | --config PATH | --from FILE...] [--archived]
//! [--format html|md|json] [--out PATH] [--ratings FILE]`
//!
//! Reads `DIR/results/*.json` (`--state`, else the `--config`'s `state.dir`, else the directory
//! [`crate::config::state_dir_to_read`] names; with `--archived` also the runs moved aside,
//! `<target>.json.<why>-<time>`, each labelled as archived) or the given results files, and
//! writes the report to `--out` or to stdout. The Markdown report written to `--out` has its
//! SVG charts beside it; on stdout each chart's place names it. `--ratings` (else the config's
//! `health.ratings_file`) replaces the built-in drive ratings table; a bad file is an error
//! naming it.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};

use crate::report::{self, Format, ReportError};

/// What `nvsoak report` was asked for.
pub struct Args<'a> {
    pub state: Option<&'a Path>,
    pub config: Option<&'a Path>,
    pub from: &'a [PathBuf],
    pub archived: bool,
    pub format: &'a str,
    pub out: Option<&'a Path>,
    pub ratings: Option<&'a Path>,
}

pub fn main(a: Args<'_>) -> Result<ExitCode> {
    let Args {
        state,
        config,
        from,
        archived,
        format,
        out,
        ratings,
    } = a;
    let format: Format = format.parse()?;
    let settings = config
        .map(|c| crate::config::load(Some(c)).with_context(|| format!("loading {}", c.display())))
        .transpose()?;
    let ratings = ratings.or_else(|| settings.as_ref()?.health.ratings_file.as_deref());
    // Before reading any results: a bad table fails fast, whatever else is wrong.
    let table = ratings.map(report::load_ratings).transpose()?;
    let inputs = if from.is_empty() {
        let dir = match (state, &settings) {
            (Some(d), _) => d.to_path_buf(),
            (None, Some(s)) => s.state.dir.clone(),
            (None, None) => crate::config::state_dir_to_read(),
        };
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
        Format::Markdown => match out {
            Some(out) => {
                let written = report::markdown::write(&rep, out)?;
                eprintln!(
                    "nvsoak: wrote {} ({}, {})",
                    out.display(),
                    rep.drives_text(),
                    crate::model::fmt::count_of(written.len().saturating_sub(1) as u64, "chart")
                );
                return Ok(ExitCode::SUCCESS);
            }
            None => report::markdown::render_standalone(&rep)?,
        },
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
                rep.drives_text(),
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
