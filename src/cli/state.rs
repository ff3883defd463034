//! `nvsoak state show|reset`

use std::path::Path;
use std::process::ExitCode;

use anyhow::Result;

pub fn show(_config: Option<&Path>, _state: Option<&Path>) -> Result<ExitCode> {
    anyhow::bail!("state show is not implemented yet")
}

pub fn reset(_config: Option<&Path>, _state: Option<&Path>) -> Result<ExitCode> {
    anyhow::bail!("state reset is not implemented yet")
}
