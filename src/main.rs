//! Thin entry point: parse the command line, build everything, run, print errors as
//! `nvsoak: {:#}`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "nvsoak",
    version,
    about = "Burn-in daemon for NVMe and SATA SSDs: steady-state I/O soaks, drive health, pass/fail \
             verdicts, Prometheus metrics"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run the soak plan and serve /metrics. Without --config, soaks a 1 GiB file in
    /// ./nvsoak-state (NVSOAK_STATE__DIR moves it).
    Run {
        /// Config file (TOML) with the targets and their plans; NVSOAK_SECTION__KEY variables
        /// override its keys. Without it, the built-in default soak.
        #[arg(long, short = 'c', value_name = "PATH")]
        config: Option<PathBuf>,
        /// Address to serve /metrics on (overrides exporter.listen).
        #[arg(long = "web.listen-address", value_name = "ADDR")]
        listen: Option<String>,
        /// exporter-toolkit web config file (TLS, basic auth); overrides exporter.web_config_file.
        #[arg(long = "web.config.file", value_name = "FILE")]
        web_config: Option<PathBuf>,
        /// Exit once every target's plan has finished (default: keep serving /metrics until
        /// SIGTERM), with the verdict as the exit status: 0 every target PASSed, 2 a target
        /// FAILed a gate, 3 a target stopped before the end of its plan with no gate failed
        /// (INCOMPLETE), 1 nvsoak itself failed (config, start-up).
        #[arg(long)]
        exit_when_done: bool,
    },
    /// Validate a config file (and its web config), run every safety check `run` would (none
    /// writes), and print the resolved plan.
    CheckConfig {
        /// Config file (TOML) to check, with the NVSOAK_* environment overrides applied.
        #[arg(value_name = "PATH")]
        path: PathBuf,
        /// exporter-toolkit web config file to validate in place of exporter.web_config_file.
        #[arg(long = "web.config.file", value_name = "FILE")]
        web_config: Option<PathBuf>,
    },
    /// List the built-in workload profiles with their definitions.
    Profiles,
    /// Poll NVMe controllers and SATA disks once (all of them when none is named) and print
    /// each one's identity, health log (SMART) and endurance.
    Health {
        /// Output JSON: nvme-cli's smart-log keys for NVMe controllers, smartctl's for SATA
        /// disks, plus derived endurance figures; `[]` when the machine has no drive.
        #[arg(long)]
        json: bool,
        /// Drives to poll: NVMe controllers (nvme0, /dev/nvme0, a serial, or re:REGEX on the
        /// model) or SATA disks (sda, /dev/sda). None: every drive found.
        #[arg(value_name = "DEVICE")]
        devices: Vec<String>,
    },
    /// The metric families nvsoak exports.
    Metrics {
        /// Print every metric family (name, type, labels, help) as a Markdown table.
        #[arg(long)]
        list: bool,
    },
    /// Show or reset the state directory's checkpoint (and, on reset, its records).
    State {
        #[command(subcommand)]
        cmd: StateCmd,
        /// Config file (TOML) whose state.dir to use; show also names each target's phase
        /// from it.
        #[arg(long, short = 'c', global = true, value_name = "PATH")]
        config: Option<PathBuf>,
        /// State directory (overrides the config's state.dir).
        #[arg(long, global = true, value_name = "DIR")]
        state: Option<PathBuf>,
    },
    /// Build a qualification report from sweep results and soak history.
    Report {
        /// State directory to read results from (default: --config's state.dir, else
        /// NVSOAK_STATE__DIR, else ./nvsoak-state when it exists, else the service's).
        #[arg(long, conflicts_with = "from", value_name = "DIR")]
        state: Option<PathBuf>,
        /// Config file (TOML) whose state.dir (and health.ratings_file) to use.
        #[arg(long, short = 'c', value_name = "PATH")]
        config: Option<PathBuf>,
        /// Results files (results/<target>.json), possibly from several hosts.
        #[arg(long, num_args = 1.., value_name = "FILE")]
        from: Vec<PathBuf>,
        /// Also include the archived runs in the state directory (results files moved aside
        /// when a plan started over), each labelled with when it was moved aside.
        #[arg(long, conflicts_with = "from")]
        archived: bool,
        /// Report format: html (one self-contained file), md (Markdown; with --out, its SVG
        /// charts are written beside it) or json.
        #[arg(long, default_value = "html", value_name = "html|md|json")]
        format: String,
        /// File to write the report to (default: stdout).
        #[arg(long, value_name = "PATH")]
        out: Option<PathBuf>,
        /// Drive ratings table (the format of config/drives.toml) to use instead of the
        /// built-in one.
        #[arg(long, value_name = "FILE")]
        ratings: Option<PathBuf>,
    },
}

#[derive(Subcommand)]
enum StateCmd {
    /// Print the checkpoint: each target's phase, position and soak totals.
    Show,
    /// Move aside the checkpoint, its generation-map sidecars and the results files (each
    /// renamed `.reset-<time>`, never deleted) so the next run starts over; `report --archived`
    /// still reads the results.
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
            config,
            from,
            archived,
            format,
            out,
            ratings,
        } => nvsoak::cli::report::main(nvsoak::cli::report::Args {
            state: state.as_deref(),
            config: config.as_deref(),
            from: &from,
            archived,
            format: &format,
            out: out.as_deref(),
            ratings: ratings.as_deref(),
        }),
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

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// Every command, argument and option has a description (issue 34: `--config`, `<PATH>`,
    /// `[DEVICES]` and `--out` had none), and every subcommand's is walked, so a new one
    /// without text fails here.
    #[test]
    fn every_command_and_argument_has_help_text() {
        fn walk(c: &clap::Command, path: &str, missing: &mut Vec<String>) {
            for a in c.get_arguments() {
                let id = a.get_id().as_str();
                if matches!(id, "help" | "version") {
                    continue;
                }
                if a.get_help().is_none_or(|h| h.to_string().trim().is_empty()) {
                    missing.push(format!("{path} {id}"));
                }
            }
            for s in c.get_subcommands() {
                if s.get_name() == "help" {
                    continue;
                }
                let p = format!("{path} {}", s.get_name());
                if s.get_about()
                    .is_none_or(|h| h.to_string().trim().is_empty())
                {
                    missing.push(p.clone());
                }
                walk(s, &p, missing);
            }
        }
        let mut missing = Vec::new();
        walk(&Cli::command(), "nvsoak", &mut missing);
        assert!(missing.is_empty(), "no help text: {missing:?}");
    }

    /// What the help texts promise, where the issue found them wrong.
    #[test]
    fn help_texts_say_what_the_commands_do() {
        let cli = Cli::command();
        let sub = |name: &str| {
            cli.find_subcommand(name)
                .unwrap_or_else(|| panic!("no {name}"))
                .clone()
        };
        let about = |c: &clap::Command| c.get_about().map(|a| a.to_string()).unwrap_or_default();
        let arg_help = |c: &clap::Command, id: &str| {
            c.get_arguments()
                .find(|a| a.get_id() == id)
                .and_then(|a| a.get_help().map(|h| h.to_string()))
                .unwrap_or_default()
        };
        assert!(about(&sub("health")).contains("SATA disks"));
        assert!(arg_help(&sub("health"), "devices").contains("SATA"));
        let reset = sub("state")
            .find_subcommand("reset")
            .cloned()
            .expect("reset");
        assert!(
            about(&reset).contains("results files") && about(&reset).contains("never deleted"),
            "{}",
            about(&reset)
        );
        assert!(arg_help(&sub("report"), "format").contains("html"));
        assert!(arg_help(&sub("report"), "format").contains("json"));
        assert!(arg_help(&sub("report"), "config").contains("state.dir"));
        assert!(arg_help(&sub("run"), "config").contains("Config file"));
        assert!(about(&cli).contains("SATA"));
    }
}
