//! `nvsoak run` and `nvsoak check-config`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Result;

pub fn main(
    config: Option<PathBuf>,
    _listen: Option<String>,
    _web: Option<PathBuf>,
) -> Result<ExitCode> {
    let _settings = crate::config::load(config.as_deref())?;
    anyhow::bail!("run is not implemented yet")
}

pub fn check_config(path: &Path) -> Result<ExitCode> {
    let settings = crate::config::load(Some(path))?;
    println!("{}", serde_json::to_string_pretty(&settings)?);
    Ok(ExitCode::SUCCESS)
}
