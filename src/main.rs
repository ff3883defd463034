//! Thin entry point: parse the command line, build everything, run, print errors as
//! `nvsoak: {:#}`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "nvsoak",
    version,
    about = "Burn-in daemon for NVMe SSDs: steady-state I/O soaks, drive health, Prometheus metrics"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run the soak plan and serve /metrics. Without --config, soaks a 1 GiB file under the
    /// state directory.
    Run {
        #[arg(long, short = 'c')]
        config: Option<PathBuf>,
        /// Address to serve /metrics on (overrides exporter.listen).
        #[arg(long = "web.listen-address")]
        listen: Option<String>,
        /// exporter-toolkit web config file (TLS, basic auth); overrides exporter.web_config_file.
        #[arg(long = "web.config.file")]
        web_config: Option<PathBuf>,
    },
    /// Validate a config file and print the resolved plan.
    CheckConfig { path: PathBuf },
    /// List the built-in workload profiles with their definitions.
    Profiles,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let res = match cli.cmd {
        Cmd::Run {
            config,
            listen,
            web_config,
        } => nvsoak::cli::run::main(config, listen, web_config),
        Cmd::CheckConfig { path } => nvsoak::cli::run::check_config(&path),
        Cmd::Profiles => nvsoak::cli::profiles::main(),
    };
    match res {
        Ok(code) => code,
        Err(e) => {
            eprintln!("nvsoak: {e:#}");
            ExitCode::FAILURE
        }
    }
}
