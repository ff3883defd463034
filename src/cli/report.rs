//! `nvsoak report`

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Result;

pub fn main(
    _state: Option<&Path>,
    _from: &[PathBuf],
    _format: &str,
    _out: Option<&Path>,
) -> Result<ExitCode> {
    anyhow::bail!("report is not implemented yet")
}
