//! `nvsoak health [--json] [DEVICE...]`

use std::process::ExitCode;

use anyhow::Result;

pub fn main(_json: bool, _devices: &[String]) -> Result<ExitCode> {
    anyhow::bail!("health is not implemented yet")
}
