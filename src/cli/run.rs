//! `nvsoak run` and `nvsoak check-config`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Result;

pub fn main(
    config: Option<PathBuf>,
    listen: Option<String>,
    web: Option<PathBuf>,
    exit_when_done: bool,
) -> Result<ExitCode> {
    let mut settings = crate::config::load(config.as_deref())?;
    let listen = match listen {
        Some(l) => Some(l.parse().map_err(|e| {
            anyhow::anyhow!(
                "--web.listen-address: \"{l}\" is not an address like 127.0.0.1:9757 ({e})"
            )
        })?),
        None => None,
    };
    // Applied again over the file after each SIGHUP reload.
    let overrides = crate::reload::Overrides {
        listen,
        web_config_file: web,
    };
    overrides.apply(&mut settings);
    init_tracing(&settings.log.level);
    // Before the port, the state directory or any target: a plan whose verification state
    // does not fit the budget is refused as check-config refuses it.
    verify_memory(&settings)?;
    if config.is_none() {
        // Said on stderr whatever the log level: the default writes 1 GiB, and where it goes is
        // the first thing to know.
        eprintln!(
            "nvsoak: no --config: running the built-in default, a 4k-random-read soak on a 1 GiB \
             file in the state directory {} (set NVSOAK_STATE__DIR to put it elsewhere)",
            settings.state.dir.display()
        );
    }
    let outcome = crate::daemon::run(
        settings,
        crate::daemon::RunFlags {
            exit_when_done,
            config_path: config,
            overrides,
        },
    )?;
    // --exit-when-done: 0 PASS, 2 FAIL, 3 INCOMPLETE (1 stays nvsoak's own errors).
    if let Some(m) = outcome.message() {
        eprintln!("nvsoak: {m}");
    }
    Ok(ExitCode::from(outcome.code()))
}

/// Logs go to stderr (the journal under systemd), coloured only on a terminal. `RUST_LOG` wins
/// over `log.level`.
pub fn init_tracing(level: &str) {
    use std::io::IsTerminal;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .or_else(|_| tracing_subscriber::EnvFilter::try_new(level))
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .try_init();
}

/// `nvsoak check-config PATH`: validate, then print the resolved plan (every job fully
/// expanded). Errors go back to `main`, which prints them and exits non-zero.
pub fn check_config(path: &Path) -> Result<ExitCode> {
    check_config_with(path, None)
}

/// [`check_config`] with `--web.config.file`, which overrides exporter.web_config_file.
pub fn check_config_with(path: &Path, web: Option<&Path>) -> Result<ExitCode> {
    let settings = crate::config::load(Some(path))?;
    check_web_config(&settings, web)?;
    crate::state::check_dir(&settings.state.dir)?;
    let notes = check_write_safety(&settings)?;
    check_direct_io(&settings)?;
    let verification = verify_memory(&settings)?;
    let mut text = format!(
        "{}: valid\n{}{verification}",
        path.display(),
        crate::config::describe::plan(&settings)
    );
    for n in notes {
        text.push_str(&format!("note: {n}\n"));
    }
    super::out(&text)?;
    Ok(ExitCode::SUCCESS)
}

/// The verification state every verified target will keep, in words (`check-config`'s
/// "verification memory" section), refused when the total is over `state.max_verify_memory`.
/// A block device whose size cannot be known without opening it is named as such and not
/// counted.
fn verify_memory(settings: &crate::config::Settings) -> Result<String> {
    use crate::model::fmt::fmt_bytes;
    use std::fmt::Write;
    let planned: Vec<_> = settings
        .targets
        .iter()
        .filter_map(|t| Some((t, crate::workload::scheduler::planned_verify(t)?)))
        .collect();
    if planned.is_empty() {
        return Ok(String::new());
    }
    let mut text = "verification memory\n".to_string();
    let mut each = Vec::new();
    let mut unknown = 0;
    for (t, p) in &planned {
        let what = format!("{}, {}", p.scheme.label(), p.scheme.cost_in_words());
        match &p.region_len {
            Ok(region) => {
                let bytes = p.scheme.state_bytes(*region);
                each.push((t.name.clone(), bytes));
                let _ = writeln!(
                    text,
                    "  target {}: verification state: {} ({what}, of a region of {})",
                    t.name,
                    fmt_bytes(bytes as f64),
                    fmt_bytes(*region as f64)
                );
            }
            Err(why) => {
                unknown += 1;
                let _ = writeln!(
                    text,
                    "  target {}: verification state: not known before the target is opened ({what}): {why}",
                    t.name
                );
            }
        }
    }
    let total: u64 = each.iter().map(|(_, b)| b).sum();
    let host = crate::util::host::mem_total();
    let budget = settings.state.max_verify_memory;
    let _ = writeln!(
        text,
        "  total: {}{} of a budget of {} ({})",
        if unknown > 0 { "at least " } else { "" },
        fmt_bytes(total as f64),
        budget.describe(host),
        crate::model::verify_cost::BUDGET_KEY
    );
    crate::workload::scheduler::check_plan_budget(&settings.targets, budget, host)?;
    Ok(text)
}

/// Every read-only write-safety check `run` makes before it opens a target (aliases, then
/// each target in order), refusing what `run` would refuse with the same message. Returns
/// notes on checks that could not run without root.
fn check_write_safety(settings: &crate::config::Settings) -> Result<Vec<String>> {
    use crate::workload::scheduler;
    scheduler::check_aliases(&settings.targets)?;
    let mut notes = Vec::new();
    for t in &settings.targets {
        if let Some(n) = scheduler::preflight(t)? {
            notes.push(n);
        }
    }
    Ok(notes)
}

/// File targets with `direct = true` on tmpfs that this kernel cannot open with O_DIRECT: the
/// refusal `run` would give at start, with the same message.
fn check_direct_io(settings: &crate::config::Settings) -> Result<()> {
    for t in settings.targets.iter().filter(|t| t.direct) {
        // Device nodes (a passthrough target may be a namespace's generic device, on devtmpfs)
        // are not files on tmpfs.
        if crate::safety::is_block_device(&t.path) || t.engine.is_passthru() {
            continue;
        }
        if let Some(reason) = crate::workload::odirect::predicted_refusal(&t.path) {
            return Err(crate::workload::scheduler::TargetError::Refused {
                target: t.name.clone(),
                reason,
            }
            .into());
        }
    }
    Ok(())
}

/// The web config named by `--web.config.file`, else by exporter.web_config_file, loads: TLS
/// files parse, bcrypt hashes are sane, every file is a regular file.
fn check_web_config(settings: &crate::config::Settings, web: Option<&Path>) -> Result<()> {
    if let Some(web) = web.or(settings.exporter.web_config_file.as_deref()) {
        crate::http::webconfig::load(web)?;
    }
    Ok(())
}
