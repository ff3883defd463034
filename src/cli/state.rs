//! `nvsoak state show|reset`: inspect or move aside the checkpoint (and, on reset, the results
//! files) in the state directory
//! (`--state DIR`, else the config's `state.dir`, else the default). `show` only reads, so it
//! is safe while a daemon runs.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};

use crate::config::Settings;
use crate::model::checkpoint::{Checkpoint, TargetState};
use crate::model::totals::Totals;
use crate::state;

fn resolve(config: Option<&Path>, dir: Option<&Path>) -> Result<(PathBuf, Option<Settings>)> {
    let settings = match config {
        Some(c) => {
            Some(crate::config::load(Some(c)).with_context(|| format!("loading {}", c.display()))?)
        }
        None => None,
    };
    let dir = match (dir, &settings) {
        (Some(d), _) => d.to_path_buf(),
        (None, Some(s)) => s.state.dir.clone(),
        (None, None) => crate::config::state_dir_to_read(),
    };
    Ok((dir, settings))
}

/// Unix seconds as `2026-12-01 07:15:00 UTC`.
pub fn format_unix(t: f64) -> String {
    let secs = t.max(0.0) as i64;
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + if m <= 2 { 1 } else { 0 };
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// `1d 2h 3m 4s`-style, largest two units.
pub fn format_secs(s: f64) -> String {
    let s = s.max(0.0) as u64;
    let parts = [
        (s / 86_400, "d"),
        (s % 86_400 / 3600, "h"),
        (s % 3600 / 60, "m"),
        (s % 60, "s"),
    ];
    let out: Vec<String> = parts
        .iter()
        .skip_while(|(v, _)| *v == 0)
        .take(2)
        .map(|(v, u)| format!("{v}{u}"))
        .collect();
    if out.is_empty() {
        "0s".into()
    } else {
        out.join(" ")
    }
}

fn phase_name(settings: Option<&Settings>, t: &TargetState) -> String {
    let Some(spec) = settings.and_then(|s| s.targets.iter().find(|spec| spec.name == t.name))
    else {
        return String::new();
    };
    match spec.phases.get(t.phase_index) {
        Some(p) => format!(" ({})", p.kind()),
        None => " (plan finished)".to_string(),
    }
}

/// Number of points of the sweep at the target's phase, when the config is known.
fn sweep_points(settings: Option<&Settings>, t: &TargetState) -> Option<usize> {
    let spec = settings?.targets.iter().find(|spec| spec.name == t.name)?;
    match spec.phases.get(t.phase_index)? {
        crate::model::spec::PhaseSpec::Sweep { points, .. } => Some(points.len()),
        _ => None,
    }
}

/// Whether a daemon holds the state directory's lock now (it holds it for its whole life).
/// Probed with a shared, non-blocking lock, released at once; no lock file means none ran.
pub fn daemon_running(dir: &Path) -> bool {
    state::holder(dir).is_some()
}

/// The human-readable rendering of a checkpoint; `running`: whether a daemon has the state
/// directory now (else the soak is shown as stopped, with or without the config).
pub fn render(dir: &Path, cp: &Checkpoint, settings: Option<&Settings>, running: bool) -> String {
    use std::fmt::Write;
    let mut o = String::new();
    let now = state::now_unix();
    let _ = writeln!(
        o,
        "checkpoint {} (format {}), saved {} ({} ago)",
        dir.join(state::CHECKPOINT_FILE).display(),
        cp.version,
        format_unix(cp.saved_at),
        format_secs(now - cp.saved_at)
    );
    render_plan(&mut o, cp, settings);
    for t in &cp.targets {
        render_target(&mut o, dir, t, settings, running);
    }
    o
}

/// The plan hash, and whether the config's plan matches it.
fn render_plan(o: &mut String, cp: &Checkpoint, settings: Option<&Settings>) {
    use std::fmt::Write;
    match settings {
        Some(s) => {
            let same = state::plan_hash(&s.targets) == cp.plan_hash;
            let _ = writeln!(
                o,
                "plan {}: {}",
                &cp.plan_hash[..cp.plan_hash.len().min(16)],
                if same {
                    "matches the config; the next run resumes from here"
                } else {
                    "differs from the config; the next run moves this checkpoint aside and starts over"
                }
            );
        }
        None => {
            let _ = writeln!(o, "plan {}", &cp.plan_hash[..cp.plan_hash.len().min(16)]);
        }
    }
}

/// One target's section: where it is in the plan, its progress, totals and saved state.
fn render_target(
    o: &mut String,
    dir: &Path,
    t: &TargetState,
    settings: Option<&Settings>,
    running: bool,
) {
    use std::fmt::Write;
    let _ = writeln!(
        o,
        "\ntarget {} ({}{})",
        t.name,
        t.path,
        t.identity
            .as_deref()
            .map(|i| format!(", device {i}"))
            .unwrap_or_default()
    );
    let _ = writeln!(
        o,
        "  position     phase {}{}, {} into it, loop {}",
        t.phase_index + 1,
        phase_name(settings, t),
        format_secs(t.phase_elapsed_secs),
        t.loop_count
    );
    render_progress(o, t, settings, running);
    // The soak's own figures; a checkpoint from before soak-only totals has only the plan's.
    render_totals(o, soak_totals(t));
    if t.soak.is_some() {
        let p = &t.totals;
        let _ = writeln!(
            o,
            "  whole plan   read {}, wrote {}, {} I/O errors, over {} (every phase)",
            crate::model::fmt::fmt_bytes(p.read_bytes as f64),
            crate::model::fmt::fmt_bytes(p.write_bytes as f64),
            p.errors,
            format_secs(p.soak_elapsed_secs)
        );
    }
    if !t.steady_history.is_empty() {
        let last = t.steady_history.last().copied().unwrap_or(0.0);
        let _ = writeln!(
            o,
            "  steady state {}, last {:.0} IOPS",
            crate::model::fmt::count_of(t.steady_history.len() as u64, "round"),
            last
        );
    }
    let _ = writeln!(
        o,
        "  SMART        {}",
        if t.smart_at_soak_start.is_some() || t.ata_at_soak_start.is_some() {
            "snapshot from soak start kept"
        } else {
            "no snapshot"
        }
    );
    if let Some(g) = &t.genmap {
        let status = match state::read_genmap(dir, g) {
            Ok(_) => "intact".to_string(),
            Err(e) => format!("UNUSABLE: {e}"),
        };
        let _ = writeln!(
            o,
            "  verify map   {} of {} 4K units written, {} ({}, {status})",
            g.written_units,
            g.units,
            g.file,
            crate::model::fmt::fmt_bytes(g.len as f64)
        );
    }
}

/// Precondition, sweep and soak progress of a target.
fn render_progress(o: &mut String, t: &TargetState, settings: Option<&Settings>, running: bool) {
    use std::fmt::Write;
    if let Some(p) = &t.precondition {
        let offsets: Vec<String> = p.worker_offsets().iter().map(|o| o.to_string()).collect();
        let _ = writeln!(
            o,
            "  precondition {}; worker offsets {}",
            p.describe(),
            offsets.join(", ")
        );
    }
    if let Some(sw) = &t.sweep {
        let done = sw.points.len().saturating_sub(1);
        let of = sweep_points(settings, t)
            .map(|n| format!(" of {n}"))
            .unwrap_or_default();
        let _ = writeln!(
            o,
            "  sweep        {}: {done}{of} points done, max {:.0} IOPS{}",
            sw.profile,
            sw.max_iops,
            if sw.finished.is_some() {
                ", finished"
            } else {
                ""
            }
        );
    }
    match t.soak_started {
        Some(s) => {
            let (verb, after) = if running {
                ("running for", "")
            } else {
                ("ran for", ", stopped (no nvsoak has this state directory)")
            };
            let _ = writeln!(
                o,
                "  soak         started {}, {verb} {}{after}",
                format_unix(s),
                format_secs(soak_totals(t).soak_elapsed_secs)
            );
        }
        None => {
            let _ = writeln!(o, "  soak         not started");
        }
    }
}

/// The soak phases' totals of a target: the checkpoint's `soak`, or in a checkpoint from
/// before it existed, `totals` (which then stood for the soak).
fn soak_totals(t: &TargetState) -> &Totals {
    t.soak.as_ref().unwrap_or(&t.totals)
}

/// Bytes, ops and errors of a target.
fn render_totals(o: &mut String, tt: &Totals) {
    use std::fmt::Write;
    let _ = writeln!(
        o,
        "  read         {} in {} ops",
        crate::model::fmt::fmt_bytes(tt.read_bytes as f64),
        tt.read_ops
    );
    let _ = writeln!(
        o,
        "  written      {} in {} ops",
        crate::model::fmt::fmt_bytes(tt.write_bytes as f64),
        tt.write_ops
    );
    let by_kind: Vec<String> = tt
        .verify_errors_by_kind
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(k, n)| format!("{k} {n}"))
        .collect();
    let _ = writeln!(
        o,
        "  errors       {} I/O, {} verify{}",
        tt.errors,
        tt.verify_errors,
        if by_kind.is_empty() {
            String::new()
        } else {
            format!(" ({})", by_kind.join(", "))
        }
    );
}

pub fn show(config: Option<&Path>, state_dir: Option<&Path>) -> Result<ExitCode> {
    let (dir, settings) = resolve(config, state_dir)?;
    match state::read(&dir)? {
        None => {
            super::out(&format!(
                "no checkpoint in {}; the next run starts from the beginning\n",
                dir.display()
            ))?;
            Ok(ExitCode::SUCCESS)
        }
        Some(cp) => {
            let running = daemon_running(&dir);
            super::out(&render(&dir, &cp, settings.as_ref(), running))?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

pub fn reset(config: Option<&Path>, state_dir: Option<&Path>) -> Result<ExitCode> {
    let (dir, _) = resolve(config, state_dir)?;
    // Held for the whole reset: a daemon that holds the state would save its checkpoint again
    // a moment later, and one starting meanwhile must wait for the reset to finish.
    let _held = match dir.is_dir().then(|| state::lock(&dir)) {
        Some(Err(state::StateError::Locked { owner, .. })) => anyhow::bail!(
            "state directory {} is held by a running nvsoak (pid {owner}); stop it first (`systemctl stop nvsoak`), then reset",
            dir.display()
        ),
        r => r.transpose()?,
    };
    let moved = state::reset(&dir)?;
    match &moved.checkpoint {
        None => super::out(&format!(
            "no checkpoint in {}; nothing to reset\n",
            dir.display()
        ))?,
        Some(to) => super::out(&format!(
            "moved the checkpoint to {}; the next run starts over\n",
            to.display()
        ))?,
    }
    for (from, to) in &moved.sidecars {
        super::out(&format!(
            "moved the generation map {} to {}\n",
            from.display(),
            to.display()
        ))?;
    }
    // The results of the runs so far are kept, aside: the next run starts new files.
    for (from, to) in crate::state::results::archive_all(&dir, "reset")? {
        super::out(&format!(
            "moved the results file {} to {} (`nvsoak report --archived` includes it)\n",
            from.display(),
            to.display()
        ))?;
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_soak_no_daemon_holds_is_stopped() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert!(!daemon_running(dir.path()), "no lock file");
        let mut t = TargetState::new("t0", "/dev/shm/t0.dat");
        t.soak_started = Some(1_764_573_300.0);
        t.totals.soak_elapsed_secs = 61.0;
        let cp = Checkpoint::new("h".into(), vec![t]);
        let stopped = render(dir.path(), &cp, None, daemon_running(dir.path()));
        assert!(stopped.contains("ran for 1m 1s, stopped"), "{stopped}");
        assert!(!stopped.contains("running for"), "{stopped}");
        {
            let _held = state::lock(dir.path()).expect("lock");
            assert!(daemon_running(dir.path()));
            let live = render(dir.path(), &cp, None, daemon_running(dir.path()));
            assert!(live.contains("running for 1m 1s\n"), "{live}");
        }
        assert!(!daemon_running(dir.path()), "the lock file stays, unlocked");
    }

    #[test]
    fn formats() {
        assert_eq!(format_unix(0.0), "1970-01-01 00:00:00 UTC");
        assert_eq!(format_unix(1_764_573_300.0), "2025-12-01 07:15:00 UTC");
        assert_eq!(format_unix(951_782_400.0), "2000-02-29 00:00:00 UTC");
        assert_eq!(format_secs(0.4), "0s");
        assert_eq!(format_secs(93_784.0), "1d 2h");
        assert_eq!(format_secs(61.0), "1m 1s");
        assert_eq!(crate::model::fmt::fmt_bytes(512.0), "512 B");
        assert_eq!(
            crate::model::fmt::fmt_bytes(1.5 * 1024.0 * 1024.0 * 1024.0),
            "1.50 GiB"
        );
    }
}
