//! `nvsoak health` for SATA disks: which disks the arguments name, one poll each, and the
//! output: IDENTIFY, the SMART attributes and status, Device Statistics. `--json` uses `smartctl -j -a` keys (`model_name`, `serial_number`,
//! `firmware_version`, `wwn`, `smart_status.passed`, `ata_smart_attributes.table[]`,
//! `ata_device_statistics.pages[]`), so the output diffs field by field against smartctl.

use std::io::Write;
use std::path::Path;

use anyhow::{Result, bail};
use serde_json::{Map, Value, json};

use super::{Drive, Polled, kv, n128, write_endurance};
use crate::health::collect::{PolledDrive, RatingContext};

use crate::ata::devstat::DeviceStats;
use crate::ata::discover::{self, AtaDisk};
use crate::ata::{AtaError, AtaTransport};
use crate::health::collect::ata::{AtaHealth, feature};

/// Opens a transport for a disk (tests: the replay transport).
pub type AtaOpenFn<'a> = &'a dyn Fn(&AtaDisk) -> Result<Box<dyn AtaTransport>, AtaError>;

/// Whether a command-line name means a SATA disk: `sda`, `/dev/sdb`.
pub(super) fn names_ata(d: &str) -> bool {
    let base = d.rsplit('/').next().unwrap_or(d);
    base.strip_prefix("sd")
        .is_some_and(|r| !r.is_empty() && r.bytes().all(|b| b.is_ascii_lowercase()))
}

/// The ATA disks `devices` names (those [`names_ata`] accepts), or every one sysfs lists when
/// `all`. A `/dev/sdX` that sysfs does not list as ATA (a USB bridge, a SAS HBA) is tried
/// directly.
pub(super) fn select(sysfs_root: &Path, devices: &[String], all: bool) -> Result<Vec<AtaDisk>> {
    let found = discover::discover(sysfs_root).unwrap_or_default();
    if all {
        return Ok(found);
    }
    let mut out: Vec<AtaDisk> = Vec::new();
    for d in devices.iter().filter(|d| names_ata(d)) {
        let base = d.rsplit('/').next().unwrap_or(d);
        let hit = found
            .iter()
            .find(|a| a.name == base)
            .cloned()
            .or_else(|| discover::direct(d));
        match hit {
            Some(a) if !out.iter().any(|o| o.name == a.name) => out.push(a),
            Some(_) => {}
            None => bail!(
                "{d}: no such SATA disk (none listed as ATA under {})",
                sysfs_root.join("block").display()
            ),
        }
    }
    Ok(out)
}

/// One poll of each disk into `polled`.
pub(super) fn poll(
    polled: &mut Polled,
    disks: &[AtaDisk],
    open: AtaOpenFn<'_>,
    ratings: &RatingContext,
) {
    for disk in disks {
        match open(disk) {
            Ok(t) => {
                let d = crate::health::collect::ata::poll_once(
                    t.as_ref(),
                    disk,
                    ratings,
                    &crate::health::NoHostIo,
                );
                let e = d.last_error.clone();
                polled.add(Drive::Ata(Box::new(d)), e.as_ref(), || {
                    format!(
                        "{}: the SMART data could not be read",
                        disk.dev_path.display()
                    )
                });
            }
            Err(e) => polled.failures.push(e.to_string()),
        }
    }
}

fn devstat_page(number: u8, name: &str, entries: Vec<(u32, &str, Option<u64>)>) -> Value {
    let table: Vec<Value> = entries
        .into_iter()
        .filter_map(|(offset, name, v)| {
            v.map(|v| json!({"offset": offset, "name": name, "value": v}))
        })
        .collect();
    json!({"number": number, "name": name, "table": table})
}

/// smartctl's `ata_device_statistics`: the entries nvsoak reads, in the drive's own units
/// (sectors, hours, minutes), under smartctl's page and entry names.
pub fn devstat_json(s: &DeviceStats, logical_sector_size: u32) -> Value {
    let lss = u64::from(logical_sector_size.max(1));
    let t = |v: Option<i8>| v.map(|x| x as i64 as u64);
    let mut pages = Vec::new();
    for p in &s.pages {
        let page = match p {
            1 => devstat_page(
                1,
                "General Statistics",
                vec![
                    (8, "Lifetime Power-On Resets", s.power_on_resets),
                    (16, "Power-on Hours", s.power_on_seconds.map(|x| x / 3600)),
                    (
                        24,
                        "Logical Sectors Written",
                        s.bytes_written.map(|b| b / lss),
                    ),
                    (40, "Logical Sectors Read", s.bytes_read.map(|b| b / lss)),
                ],
            ),
            4 => devstat_page(
                4,
                "General Errors Statistics",
                vec![(
                    8,
                    "Number of Reported Uncorrectable Errors",
                    s.reported_uncorrectable,
                )],
            ),
            5 => devstat_page(
                5,
                "Temperature Statistics",
                vec![
                    (8, "Current Temperature", t(s.temperature_current)),
                    (32, "Lifetime Max Temperature", t(s.temperature_highest)),
                    (40, "Lifetime Min Temperature", t(s.temperature_lowest)),
                    (
                        80,
                        "Time in Over-Temperature",
                        s.time_over_temperature_seconds.map(|x| x / 60),
                    ),
                    (
                        88,
                        "Specified Max Operating Temperature",
                        t(s.specified_max_temperature),
                    ),
                ],
            ),
            6 => devstat_page(
                6,
                "Transport Statistics",
                vec![(24, "Number of Interface CRC Errors", s.interface_crc_errors)],
            ),
            7 => devstat_page(
                7,
                "Solid State Device Statistics",
                vec![(
                    8,
                    "Percentage Used Endurance Indicator",
                    s.percentage_used.map(u64::from),
                )],
            ),
            _ => continue,
        };
        pages.push(page);
    }
    json!({"pages": pages})
}

/// One disk's JSON object with smartctl's keys, plus nvsoak's `derived`.
pub(super) fn to_json(d: &AtaHealth) -> Value {
    let mut m = Map::new();
    m.insert("device".into(), json!(d.name));
    m.insert("path".into(), json!(d.dev_path.display().to_string()));
    m.insert("model_name".into(), json!(d.model));
    m.insert("serial_number".into(), json!(d.serial));
    m.insert("firmware_version".into(), json!(d.firmware));
    if let Some(id) = &d.identify {
        if id.wwn != 0 {
            m.insert(
                "wwn".into(),
                json!({"naa": id.wwn_naa(), "oui": id.wwn_oui(), "id": id.wwn_id()}),
            );
        }
        m.insert(
            "user_capacity".into(),
            json!({"blocks": id.sectors, "bytes": n128(id.capacity_bytes())}),
        );
        m.insert("logical_block_size".into(), json!(id.logical_sector_size));
        m.insert("physical_block_size".into(), json!(id.physical_sector_size));
        m.insert("trim".into(), json!({"supported": id.trim_supported}));
    }
    if let Some(s) = d.smart_status {
        m.insert("smart_status".into(), json!({"passed": s.passed()}));
    }
    if let Some(t) = &d.attributes {
        let table: Vec<Value> = t
            .iter()
            .map(|a| {
                json!({
                    "id": a.id,
                    "name": a.name,
                    "value": a.value,
                    "worst": a.worst,
                    "thresh": a.thresh,
                    "flags": {"value": a.flags, "prefailure": a.prefailure(), "updated_online": a.updated_online()},
                    "raw": {"value": a.raw},
                })
            })
            .collect();
        m.insert("ata_smart_attributes".into(), json!({"table": table}));
    }
    if let Some(s) = &d.devstat {
        m.insert(
            "ata_device_statistics".into(),
            devstat_json(s, d.logical_sector_size()),
        );
    }
    let unsupported: Map<String, Value> = d
        .unsupported
        .iter()
        .map(|(k, v)| ((*k).to_string(), json!(v)))
        .collect();
    let mut dv = super::derived_json(&PolledDrive::Ata(d));
    dv.insert(
        "lifetime_written_bytes".into(),
        json!(d.lifetime_written.map(|(b, _)| n128(b))),
    );
    dv.insert(
        "lifetime_written_source".into(),
        json!(d.lifetime_written.map(|(_, s)| s.label())),
    );
    dv.insert("unsupported".into(), Value::Object(unsupported));
    m.insert("derived".into(), Value::Object(dv));
    if let Some(e) = &d.last_error {
        m.insert("error".into(), json!(e));
    }
    Value::Object(m)
}

/// The text report of one disk.
pub(super) fn write_text(out: &mut dyn Write, d: &AtaHealth) -> Result<()> {
    super::write_header(
        out,
        &d.name,
        &d.dev_path,
        [&d.model, &d.serial, &d.firmware],
    )?;
    if !d.wwn.is_empty() {
        writeln!(out, "  wwn          {}", d.wwn)?;
    }
    if let Some(id) = &d.identify {
        writeln!(
            out,
            "  capacity     {} sectors of {} bytes ({} physical) = {} bytes",
            id.sectors,
            id.logical_sector_size,
            id.physical_sector_size,
            id.capacity_bytes()
        )?;
    }
    let Some(t) = &d.attributes else {
        if let Some(e) = &d.last_error {
            writeln!(out, "  SMART data unavailable: {e}")?;
        }
        return Ok(());
    };
    if let Some(s) = d.smart_status {
        let v = if s.passed() {
            "PASSED"
        } else {
            "FAILED (an attribute is at or below its threshold)"
        };
        writeln!(out, "SMART overall-health self-assessment: {v}")?;
    }
    writeln!(out, "SMART attributes")?;
    writeln!(
        out,
        "  {:>3} {:<24} {:>5} {:>5} {:>6} {:>16}",
        "ID", "NAME", "VALUE", "WORST", "THRESH", "RAW"
    )?;
    for a in t {
        let th = a
            .thresh
            .map(|x| x.to_string())
            .unwrap_or_else(|| "-".into());
        writeln!(
            out,
            "  {:>3} {:<24} {:>5} {:>5} {:>6} {:>16}",
            a.id, a.name, a.value, a.worst, th, a.raw
        )?;
    }
    write_devstat(out, d)?;
    if let Some((b, src)) = d.lifetime_written {
        kv(
            out,
            "lifetime_written",
            format!("{b} bytes (from {})", src.label()),
        )?;
    }
    write_endurance(out, &d.derived)?;
    if let Some(e) = &d.last_error {
        writeln!(out, "  (some commands failed; last: {e})")?;
    }
    Ok(())
}

/// Device Statistics as the text report shows them, or why the drive has none.
fn write_devstat(out: &mut dyn Write, d: &AtaHealth) -> Result<()> {
    match &d.devstat {
        Some(s) => {
            writeln!(out, "Device Statistics (log 04h)")?;
            let rows: [(&str, Option<String>); 8] = [
                ("written", s.bytes_written.map(|b| format!("{b} bytes"))),
                ("read", s.bytes_read.map(|b| format!("{b} bytes"))),
                (
                    "power_on",
                    s.power_on_seconds.map(|x| format!("{} h", x / 3600)),
                ),
                (
                    "reported_uncorrectable",
                    s.reported_uncorrectable.map(|x| x.to_string()),
                ),
                (
                    "temperature",
                    s.temperature_current.map(|x| format!("{x} °C")),
                ),
                (
                    "specified_max_temperature",
                    s.specified_max_temperature.map(|x| format!("{x} °C")),
                ),
                (
                    "interface_crc_errors",
                    s.interface_crc_errors.map(|x| x.to_string()),
                ),
                (
                    "percentage_used",
                    s.percentage_used.map(|x| format!("{x}%")),
                ),
            ];
            for (k, v) in rows {
                if let Some(v) = v {
                    kv(out, k, v)?;
                }
            }
        }
        None => {
            if let Some(why) = d.unsupported.get(feature::DEVSTAT) {
                writeln!(out, "Device Statistics: not supported ({why})")?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ata::cmd;
    use crate::ata::transport::Reply;
    use crate::health::collect::ata::testdata::full_replay;
    use std::process::ExitCode;

    fn tree() -> tempfile::TempDir {
        let d = tempfile::tempdir().expect("tempdir");
        crate::ata::discover::fake::add_disk(
            d.path(),
            "sda",
            "ATA",
            "ZA3840NM10001",
            "naa.5000c500a1b2c3d4",
        );
        d
    }

    fn run(json: bool, devices: &[String], t: crate::ata::transport::Replay) -> String {
        let root = tree();
        let t = std::sync::Arc::new(t);
        let mut out = Vec::new();
        let code = super::super::run_with(
            json,
            devices,
            root.path(),
            &mut out,
            &|_| panic!("no NVMe controller here"),
            &|_| Ok(Box::new(std::sync::Arc::clone(&t)) as Box<dyn AtaTransport>),
        )
        .expect("run");
        assert_eq!(code, ExitCode::SUCCESS);
        String::from_utf8(out).expect("utf8")
    }

    #[test]
    fn json_uses_smartctl_keys() {
        let text = run(true, &[], full_replay("/dev/sda"));
        let v: Value = serde_json::from_str(&text).expect("json");
        assert_eq!(v["model_name"], "ZA3840NM10001 nvsoak handbuilt");
        assert_eq!(v["serial_number"], "IW110SN0000000042");
        assert_eq!(v["firmware_version"], "SF1.2.3");
        assert_eq!(
            v["wwn"],
            json!({"naa": 5, "oui": 0x000c50, "id": 0xa1b2c3d4u64})
        );
        assert_eq!(v["smart_status"]["passed"], true);
        assert_eq!(v["user_capacity"]["bytes"], 7_501_476_528u64 * 512);
        let table = v["ata_smart_attributes"]["table"]
            .as_array()
            .expect("table");
        assert_eq!(table.len(), 5);
        assert_eq!(table[0]["id"], 5);
        assert_eq!(table[0]["name"], "Reallocated_Sector_Ct");
        assert_eq!(
            (&table[0]["value"], &table[0]["worst"], &table[0]["thresh"]),
            (&json!(100), &json!(99), &json!(10))
        );
        assert_eq!(table[0]["raw"]["value"], 7);
        assert_eq!(table[4]["name"], "Lifetime_Wts_Frm_Hst_GB");
        let pages = v["ata_device_statistics"]["pages"]
            .as_array()
            .expect("pages");
        assert_eq!(pages.len(), 5);
        assert_eq!(pages[0]["number"], 1);
        let written = pages[0]["table"]
            .as_array()
            .and_then(|t| t.iter().find(|e| e["name"] == "Logical Sectors Written"))
            .expect("written");
        assert_eq!(written["value"], 7_000_000_000u64, "sectors, as smartctl");
        assert_eq!(v["derived"]["lifetime_written_source"], "device_statistics");
        assert_eq!(v["derived"]["rated_endurance_bytes"], 7e15);
    }

    #[test]
    fn text_says_devstat_is_not_supported_and_names_the_source() {
        let t = full_replay("/dev/sda");
        t.on(&cmd::read_devstat_page(0), Reply::Abort);
        let text = run(false, &["/dev/sda".into()], t);
        assert!(text.starts_with("sda (/dev/sda)\n"), "{text}");
        assert!(
            text.contains("SMART overall-health self-assessment: PASSED"),
            "{text}"
        );
        assert!(
            text.contains("Device Statistics: not supported ("),
            "{text}"
        );
        assert!(text.contains("(from attribute_241)"), "{text}");
        assert!(text.contains("Endurance\n"), "{text}");
        assert!(
            text.contains("    5 Reallocated_Sector_Ct      100    99     10                7"),
            "{text}"
        );
    }

    #[test]
    fn names_pick_sata_disks() {
        assert!(names_ata("/dev/sdb") && names_ata("sdaa"));
        assert!(!names_ata("/dev/sda1") && !names_ata("nvme0") && !names_ata("sd"));
        let root = tree();
        let e = select(root.path(), &["sdq".into()], false).unwrap_err();
        assert!(e.to_string().starts_with("sdq: no such SATA disk"), "{e}");
        let picked =
            select(root.path(), &["/dev/sda".into(), "nvme0".into()], false).expect("select");
        assert_eq!(picked.len(), 1);
    }
}
