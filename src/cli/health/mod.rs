//! `nvsoak health [--json] [DEVICE...]`: one poll of each drive the arguments name (every
//! NVMe controller and SATA disk when none), then its identity, health pages and endurance.
//! `--json` uses each protocol's own tool's keys so the output diffs field by field: nvme-cli's
//! `smart-log -o json` (and `sn`, `mn`, `fr` from `id-ctrl -o json`) for NVMe controllers
//! ([`nvme`]), `smartctl -j -a`'s for SATA disks (`sdX`, [`ata`]).
//!
//! This module owns what is the same for every protocol: choosing and polling the drives,
//! the order and separation of the output, the exit status, the `Endurance` section and the
//! `derived` figures' JSON keys. What a protocol's pages say is its submodule's.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use serde_json::{Map, Value, json};

use crate::health::collect::ata::AtaHealth;
use crate::health::collect::nvme::DeviceHealth;
use crate::health::collect::{Derived, PolledDrive, RatingContext};
use crate::nvme::AdminTransport;
use crate::nvme::ioctl::IoctlTransport;
use crate::nvme::ratings::RatingsTable;

mod ata;
mod nvme;

pub use ata::AtaOpenFn;
pub use nvme::{OpenFn, select, smart_json, to_json};

/// `NVSOAK_SYSFS_ROOT` replaces `/sys` (a test hook: integration tests point it at a fake
/// tree).
pub fn main(json: bool, devices: &[String]) -> Result<ExitCode> {
    let root = std::env::var_os("NVSOAK_SYSFS_ROOT")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/sys"));
    run_with(
        json,
        devices,
        &root,
        &mut std::io::stdout().lock(),
        &|c| IoctlTransport::open(&c.dev_path).map(|t| Box::new(t) as Box<dyn AdminTransport>),
        &sg_io,
    )
}

fn sg_io(
    d: &crate::ata::discover::AtaDisk,
) -> Result<Box<dyn crate::ata::AtaTransport>, crate::ata::AtaError> {
    crate::ata::transport::SgIo::open(&d.dev_path)
        .map(|t| Box::new(t) as Box<dyn crate::ata::AtaTransport>)
}

/// The command with its inputs injectable (tests use a fake sysfs and the replay transport);
/// SATA disks are opened with `SG_IO`.
pub fn run(
    json: bool,
    devices: &[String],
    sysfs_root: &Path,
    out: &mut dyn Write,
    open: OpenFn<'_>,
) -> Result<ExitCode> {
    run_with(json, devices, sysfs_root, out, open, &sg_io)
}

/// One polled drive, of either protocol (boxed: each is kilobytes, and the list is built once).
enum Drive {
    Nvme(Box<DeviceHealth>),
    Ata(Box<AtaHealth>),
}

impl Drive {
    fn up(&self) -> bool {
        match self {
            Drive::Nvme(d) => d.up,
            Drive::Ata(d) => d.up,
        }
    }
    fn to_json(&self) -> Value {
        match self {
            Drive::Nvme(d) => nvme::to_json(d),
            Drive::Ata(d) => ata::to_json(d),
        }
    }
    fn write_text(&self, out: &mut dyn Write) -> Result<()> {
        match self {
            Drive::Nvme(d) => nvme::write_text(out, d),
            Drive::Ata(d) => ata::write_text(out, d),
        }
    }
}

/// The drives polled so far, NVMe controllers first, and what could not be read.
#[derive(Default)]
struct Polled {
    drives: Vec<Drive>,
    failures: Vec<String>,
}

impl Polled {
    /// A drive polled; when it is not up, its last error (else `unread`) is a failure.
    fn add(&mut self, d: Drive, last_error: Option<&String>, unread: impl FnOnce() -> String) {
        if !d.up() {
            self.failures
                .push(last_error.cloned().unwrap_or_else(unread));
        }
        self.drives.push(d);
    }
}

/// [`run`] with the SATA disks' transport injectable too. With no `devices`, every NVMe
/// controller and SATA disk; `sdX` names a SATA disk, anything else an NVMe controller.
pub fn run_with(
    json: bool,
    devices: &[String],
    sysfs_root: &Path,
    out: &mut dyn Write,
    open: OpenFn<'_>,
    ata_open: AtaOpenFn<'_>,
) -> Result<ExitCode> {
    let disks = ata::select(sysfs_root, devices, devices.is_empty())?;
    if devices.is_empty()
        && disks.is_empty()
        && crate::nvme::discover::discover(sysfs_root)?.is_empty()
    {
        let none = format!(
            "no drives found: no NVMe controller under {} and no SATA disk under {} (this \
             machine has none, or their drivers are not loaded)",
            sysfs_root.join("class/nvme").display(),
            sysfs_root.join("block").display()
        );
        if json {
            // No drive is an answer, not a failure: an empty list a script can read.
            writeln!(out, "[]").context("writing to stdout")?;
            eprintln!("nvsoak: {none}");
            return Ok(ExitCode::SUCCESS);
        }
        bail!("{none}");
    }
    let ctrls = nvme::select_named(sysfs_root, devices, !disks.is_empty())?;
    let ratings = ratings()?;
    let mut polled = Polled::default();
    nvme::poll(&mut polled, &ctrls, open, &ratings);
    ata::poll(&mut polled, &disks, ata_open, &ratings);
    if json {
        let single = ctrls.len() + disks.len() == 1;
        write_json(out, &polled.drives, single)?;
    } else {
        for (i, d) in polled.drives.iter().enumerate() {
            if i > 0 {
                writeln!(out)?;
            }
            d.write_text(out)?;
        }
    }
    finish(&polled)
}

/// The ratings table and overrides of the built-in configuration.
fn ratings() -> Result<RatingContext> {
    let settings = crate::config::builtin_default().health;
    Ok(RatingContext {
        table: RatingsTable::load(settings.ratings_file.as_deref())?,
        overrides: settings.devices.clone(),
        // `nvsoak health` only reads: it never enables the latency monitor.
        latency_monitor: None,
    })
}

/// One object when one drive was asked for and answered, else an array.
fn write_json(out: &mut dyn Write, drives: &[Drive], single: bool) -> Result<()> {
    let objs: Vec<Value> = drives.iter().map(Drive::to_json).collect();
    let v = if objs.len() == 1 && single {
        objs.into_iter().next().unwrap_or(Value::Null)
    } else {
        Value::Array(objs)
    };
    writeln!(out, "{}", serde_json::to_string_pretty(&v)?).context("writing to stdout")?;
    Ok(())
}

/// Success when every drive was read; an error when none was (nothing useful printed);
/// else the failures on stderr and exit status 1.
fn finish(polled: &Polled) -> Result<ExitCode> {
    if polled.failures.is_empty() {
        return Ok(ExitCode::SUCCESS);
    }
    if polled.drives.iter().all(|d| !d.up()) {
        // Nothing useful printed: make the one plain message the error.
        bail!("{}", polled.failures.join("\nnvsoak: "));
    }
    for f in &polled.failures {
        eprintln!("nvsoak: {f}");
    }
    Ok(ExitCode::FAILURE)
}

/// 128-bit counters as JSON numbers when they fit in u64, else as decimal strings (nvme-cli
/// 2.x prints both forms, depending on its version).
pub(crate) fn n128(v: u128) -> Value {
    match u64::try_from(v) {
        Ok(x) => json!(x),
        Err(_) => json!(v.to_string()),
    }
}

fn opt(v: Option<f64>) -> Value {
    v.filter(|x| x.is_finite())
        .map(Value::from)
        .unwrap_or(Value::Null)
}

/// The `derived` keys every protocol has, from the drive sample (`health::collect::sample`):
/// the rating, endurance consumed, percentage used (the shared figure each collector reads
/// from its own page) and write amplification.
fn derived_json(d: &PolledDrive<'_>) -> Map<String, Value> {
    let x = d.derived();
    let percentage_used = d.figures().percentage_used;
    let r = x.rated.as_ref();
    let mut dv = Map::new();
    dv.insert(
        "rated_series".into(),
        json!(r.and_then(|r| r.series.clone())),
    );
    dv.insert("rated_source".into(), json!(r.map(|r| r.source)));
    dv.insert("rated_endurance_bytes".into(), opt(r.and_then(|r| r.bytes)));
    dv.insert("rated_dwpd".into(), opt(r.and_then(|r| r.dwpd)));
    dv.insert(
        "rated_warranty_years".into(),
        opt(r.and_then(|r| r.warranty_years)),
    );
    dv.insert(
        "endurance_consumed_ratio".into(),
        opt(x.endurance_consumed_ratio),
    );
    dv.insert("percentage_used_ratio".into(), opt(percentage_used));
    dv.insert(
        "write_amplification_ratio".into(),
        opt(x.write_amplification),
    );
    dv
}

/// `  key<padded to 40> value`, the line every section uses.
fn kv(out: &mut dyn Write, k: &str, v: String) -> std::io::Result<()> {
    writeln!(out, "  {k:<40} {v}")
}

/// The first lines of every drive: name, path, model, serial, firmware.
fn write_header(
    out: &mut dyn Write,
    name: &str,
    path: &Path,
    ids: [&str; 3],
) -> std::io::Result<()> {
    let [model, serial, firmware] = ids;
    writeln!(out, "{name} ({})", path.display())?;
    writeln!(out, "  model        {model}")?;
    writeln!(out, "  serial       {serial}")?;
    writeln!(out, "  firmware     {firmware}")
}

/// The rated endurance and how much of it is consumed (NVMe and ATA drives alike).
fn write_endurance(out: &mut dyn Write, x: &Derived) -> Result<()> {
    writeln!(out, "Endurance")?;
    match &x.rated {
        Some(r) => {
            kv(
                out,
                "rated",
                format!(
                    "{}{}{} ({})",
                    r.bytes
                        .map(|b| {
                            format!("{} written", crate::model::fmt::fmt_datasheet_bytes(b))
                        })
                        .unwrap_or_else(|| "bytes unknown".into()),
                    r.dwpd.map(|w| format!(", {w} DWPD")).unwrap_or_default(),
                    r.warranty_years
                        .map(|y| format!(" for {y} years"))
                        .unwrap_or_default(),
                    r.series.clone().unwrap_or_else(|| "from config".into())
                ),
            )?;
            if let Some(c) = x.endurance_consumed_ratio {
                kv(out, "consumed", format!("{:.4}%", c * 100.0))?;
            }
        }
        None => kv(
            out,
            "rated",
            "unknown (add the drive to config/drives.toml or add a [[health.device]] entry to the config)".into(),
        )?,
    }
    Ok(())
}
