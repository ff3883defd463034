//! `nvsoak profiles`: the built-in workload profiles with their full definitions.

use std::process::ExitCode;

use anyhow::Result;

pub fn main() -> Result<ExitCode> {
    super::out(&render())?;
    Ok(ExitCode::SUCCESS)
}

/// The listing `nvsoak profiles` prints.
pub fn render() -> String {
    let mut out = String::from(
        "Built-in profiles (use as profile = \"NAME\" in a [[target.phase]]; iodepth, workers and rate can be overridden there)\n\n",
    );
    for j in crate::model::profiles::builtin() {
        crate::config::describe::job(&mut out, "", &j);
        out.push('\n');
    }
    out
}
