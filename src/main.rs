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
        /// Exit once every target's plan has finished (default: keep serving /metrics until
        /// SIGTERM), with the verdict as the exit status: 0 every target PASSed, 2 a target
        /// FAILed a gate, 3 a target stopped before the end of its plan with no gate failed
        /// (INCOMPLETE), 1 nvsoak itself failed (config, start-up).
        #[arg(long)]
        exit_when_done: bool,
    },
    /// Validate a config file (and its web config) and print the resolved plan.
    CheckConfig {
        path: PathBuf,
        /// exporter-toolkit web config file to validate in place of exporter.web_config_file.
        #[arg(long = "web.config.file")]
        web_config: Option<PathBuf>,
    },
    /// List the built-in workload profiles with their definitions.
    Profiles,
    /// Print the identify summary and SMART log of NVMe controllers (all when none named).
    Health {
        /// Output JSON with nvme-cli's smart-log keys plus derived endurance figures.
        #[arg(long)]
        json: bool,
        devices: Vec<String>,
    },
    /// The metric families nvsoak exports.
    Metrics {
        /// Print every metric family (name, type, labels, help) as a Markdown table.
        #[arg(long)]
        list: bool,
    },
    /// Inspect or reset the checkpoint in the state directory.
    State {
        #[command(subcommand)]
        cmd: StateCmd,
        #[arg(long, short = 'c', global = true)]
        config: Option<PathBuf>,
        /// State directory (overrides the config's state.dir).
        #[arg(long, global = true)]
        state: Option<PathBuf>,
    },
    /// Build a qualification report from sweep results and soak history.
    Report {
        /// State directory to read results from.
        #[arg(long, conflicts_with = "from")]
        state: Option<PathBuf>,
        /// Results files (results/<target>.json), possibly from several hosts.
        #[arg(long, num_args = 1..)]
        from: Vec<PathBuf>,
        /// Also include the archived runs in the state directory (results files moved aside
        /// when a plan started over), each labelled with when it was moved aside.
        #[arg(long, conflicts_with = "from")]
        archived: bool,
        #[arg(long, default_value = "html")]
        format: String,
        #[arg(long)]
        out: Option<PathBuf>,
        /// Drive ratings table (the format of config/drives.toml) to use instead of the
        /// built-in one.
        #[arg(long)]
        ratings: Option<PathBuf>,
    },
}

#[derive(Subcommand)]
enum StateCmd {
    /// Print the checkpoint.
    Show,
    /// Move the checkpoint aside so the next run starts over.
    Reset,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let res = match cli.cmd {
        Cmd::Run {
            config,
            listen,
            web_config,
            exit_when_done,
        } => nvsoak::cli::run::main(config, listen, web_config, exit_when_done),
        Cmd::CheckConfig { path, web_config } => {
            nvsoak::cli::run::check_config_with(&path, web_config.as_deref())
        }
        Cmd::Profiles => nvsoak::cli::profiles::main(),
        Cmd::Health { json, devices } => nvsoak::cli::health::main(json, &devices),
        Cmd::Metrics { list } => nvsoak::cli::metrics::main(list),
        Cmd::State { cmd, config, state } => match cmd {
            StateCmd::Show => nvsoak::cli::state::show(config.as_deref(), state.as_deref()),
            StateCmd::Reset => nvsoak::cli::state::reset(config.as_deref(), state.as_deref()),
        },
        Cmd::Report {
            state,
            from,
            archived,
            format,
            out,
            ratings,
        } => nvsoak::cli::report::main(
            state.as_deref(),
            &from,
            archived,
            &format,
            out.as_deref(),
            ratings.as_deref(),
        ),
    };
    match res {
        Ok(code) => code,
        // The reader of our output went away (`| head`): stop quietly, as a pipeline expects.
        Err(e) if nvsoak::cli::is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("nvsoak: {e:#}");
            ExitCode::FAILURE
        }
    }
}
