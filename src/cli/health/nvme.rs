//! `nvsoak health` for NVMe controllers: which controllers the arguments name, one poll each,
//! and the output: Identify, the SMART log (02h) and the OCP SMART extended log (C0h); `--json`
//! with nvme-cli's keys.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Result, bail};
use serde_json::{Map, Value, json};

use super::{Drive, Polled, kv, n128, write_endurance};
use crate::health::collect::nvme::{DeviceHealth, poll_once};
use crate::health::collect::{PolledDrive, RatingContext};
use crate::model::fmt::{fmt_bytes, fmt_capacity};
use crate::nvme::discover::{self, Controller, Filter};
use crate::nvme::log::smart::{CRITICAL_WARNING_BITS, SmartLog};
use crate::nvme::{AdminTransport, NvmeError};

/// Opens a transport for a controller (tests: the replay transport).
pub type OpenFn<'a> = &'a dyn Fn(&Controller) -> Result<Box<dyn AdminTransport>, NvmeError>;

/// The controllers to poll: those `devices` names that are not SATA disks, or every one sysfs
/// lists when `devices` is empty (then none found is an error only when there are no SATA
/// disks either, `any_disks`).
pub(super) fn select_named(
    sysfs_root: &Path,
    devices: &[String],
    any_disks: bool,
) -> Result<Vec<Controller>> {
    let names: Vec<String> = devices
        .iter()
        .filter(|d| !super::ata::names_ata(d))
        .cloned()
        .collect();
    if devices.is_empty() && any_disks {
        Ok(discover::discover(sysfs_root)?)
    } else if devices.is_empty() || !names.is_empty() {
        select(sysfs_root, &names)
    } else {
        Ok(Vec::new())
    }
}

/// One poll of each controller into `polled`.
pub(super) fn poll(
    polled: &mut Polled,
    ctrls: &[Controller],
    open: OpenFn<'_>,
    ratings: &RatingContext,
) {
    for c in ctrls {
        match open(c) {
            Ok(t) => {
                let d = poll_once(t.as_ref(), c, ratings, &crate::health::NoHostIo);
                let e = d.last_error.clone();
                polled.add(Drive::Nvme(Box::new(d)), e.as_ref(), || {
                    format!("{}: the SMART log could not be read", c.dev_path.display())
                });
            }
            Err(e) => polled.failures.push(e.to_string()),
        }
    }
}

/// Which controllers `devices` names: all discovered when empty. A `/dev/nvmeX` path that
/// sysfs does not list is still tried directly.
pub fn select(sysfs_root: &Path, devices: &[String]) -> Result<Vec<Controller>> {
    let found = discover::discover(sysfs_root)?;
    if devices.is_empty() {
        if found.is_empty() {
            bail!(
                "no NVMe controllers found under {} (this machine has no NVMe drive, or the nvme driver is not loaded)",
                sysfs_root.join("class/nvme").display()
            );
        }
        return Ok(found);
    }
    let mut out: Vec<Controller> = Vec::new();
    for d in devices {
        let f = Filter::new(std::slice::from_ref(d), &[])?;
        let mut hit: Vec<Controller> = found.iter().filter(|c| f.allows(c)).cloned().collect();
        if hit.is_empty()
            && let Some(c) = direct_controller(d)
        {
            hit.push(c);
        }
        if hit.is_empty() {
            let names: Vec<&str> = found.iter().map(|c| c.name.as_str()).collect();
            if names.is_empty() {
                bail!(
                    "{d}: no such NVMe controller (none found under {}; this machine has no NVMe drive, or the nvme driver is not loaded)",
                    sysfs_root.join("class/nvme").display()
                );
            }
            bail!(
                "{d}: no such NVMe controller (found: {}); name one like /dev/nvme0, a serial, or re:REGEX",
                names.join(", ")
            );
        }
        for c in hit {
            if !out.iter().any(|o| o.name == c.name) {
                out.push(c);
            }
        }
    }
    Ok(out)
}

/// `/dev/nvme0` (or `/dev/nvme0n1`) that exists but that sysfs did not list.
fn direct_controller(d: &str) -> Option<Controller> {
    let p = PathBuf::from(d);
    let name = p.file_name()?.to_str()?.to_string();
    let rest = name.strip_prefix("nvme")?;
    let (ctrl, nsid) = match rest.split_once('n') {
        Some((c, n)) => (c, n.parse::<u32>().ok()),
        None => (rest, None),
    };
    ctrl.parse::<u32>().ok()?;
    let dev_path = p.parent()?.join(format!("nvme{ctrl}"));
    if !dev_path.exists() {
        return None;
    }
    Some(Controller {
        name: format!("nvme{ctrl}"),
        dev_path,
        serial: String::new(),
        model: String::new(),
        firmware: String::new(),
        namespaces: nsid
            .map(|n| discover::Namespace {
                name: name.clone(),
                nsid: n,
                dev_path: p.clone(),
            })
            .into_iter()
            .collect(),
    })
}

/// nvme-cli's `smart-log -o json` object for a SMART log.
pub fn smart_json(s: &SmartLog) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("critical_warning".into(), json!(s.critical_warning));
    m.insert("temperature".into(), json!(s.temperature));
    m.insert("avail_spare".into(), json!(s.avail_spare));
    m.insert("spare_thresh".into(), json!(s.spare_thresh));
    m.insert("percent_used".into(), json!(s.percent_used));
    m.insert(
        "endurance_grp_critical_warning_summary".into(),
        json!(s.endurance_grp_critical_warning_summary),
    );
    m.insert("data_units_read".into(), n128(s.data_units_read));
    m.insert("data_units_written".into(), n128(s.data_units_written));
    m.insert("host_read_commands".into(), n128(s.host_read_commands));
    m.insert("host_write_commands".into(), n128(s.host_write_commands));
    m.insert("controller_busy_time".into(), n128(s.controller_busy_time));
    m.insert("power_cycles".into(), n128(s.power_cycles));
    m.insert("power_on_hours".into(), n128(s.power_on_hours));
    m.insert("unsafe_shutdowns".into(), n128(s.unsafe_shutdowns));
    m.insert("media_errors".into(), n128(s.media_errors));
    m.insert("num_err_log_entries".into(), n128(s.num_err_log_entries));
    m.insert("warning_temp_time".into(), json!(s.warning_temp_time));
    m.insert("critical_comp_time".into(), json!(s.critical_comp_time));
    for (i, k) in s.sensors() {
        m.insert(format!("temperature_sensor_{i}"), json!(k));
    }
    m.insert(
        "thm_temp1_trans_count".into(),
        json!(s.thm_temp1_trans_count),
    );
    m.insert(
        "thm_temp2_trans_count".into(),
        json!(s.thm_temp2_trans_count),
    );
    m.insert("thm_temp1_total_time".into(), json!(s.thm_temp1_total_time));
    m.insert("thm_temp2_total_time".into(), json!(s.thm_temp2_total_time));
    m
}

/// One controller's JSON object: identity, the SMART keys, and `derived`.
pub fn to_json(d: &DeviceHealth) -> Value {
    let mut m = Map::new();
    m.insert("device".into(), json!(d.name));
    m.insert("path".into(), json!(d.dev_path.display().to_string()));
    m.insert("sn".into(), json!(d.serial));
    m.insert("mn".into(), json!(d.model));
    m.insert("fr".into(), json!(d.firmware));
    if let Some(id) = &d.id {
        m.insert("vid".into(), json!(id.vid));
        m.insert("ssvid".into(), json!(id.ssvid));
        m.insert("cntlid".into(), json!(id.cntlid));
        m.insert("elpe".into(), json!(id.elpe));
        m.insert("wctemp".into(), json!(id.wctemp));
        m.insert("cctemp".into(), json!(id.cctemp));
        m.insert("tnvmcap".into(), n128(id.tnvmcap));
    }
    if let Some(s) = &d.smart {
        m.extend(smart_json(s));
    }
    let ns: Vec<Value> = d
        .namespaces
        .iter()
        .map(|n| {
            json!({
                "name": n.name,
                "nsid": n.nsid,
                "nsze": n.id.as_ref().map(|i| i.nsze),
                "lba_size": n.id.as_ref().map(|i| i.lba_size()),
                "size_bytes": n.id.as_ref().map(|i| n128(i.size_bytes())),
            })
        })
        .collect();
    m.insert("namespaces".into(), Value::Array(ns));
    let x = &d.derived;
    let mut dv = super::derived_json(&PolledDrive::Nvme(d));
    dv.insert(
        "data_written_bytes".into(),
        d.smart
            .as_ref()
            .map(|s| n128(s.data_written_bytes()))
            .unwrap_or(Value::Null),
    );
    dv.insert(
        "data_read_bytes".into(),
        d.smart
            .as_ref()
            .map(|s| n128(s.data_read_bytes()))
            .unwrap_or(Value::Null),
    );
    dv.insert(
        "rated_performance".into(),
        x.rated
            .as_ref()
            .and_then(|r| r.perf.as_ref())
            .and_then(|p| serde_json::to_value(p).ok())
            .unwrap_or(Value::Null),
    );
    dv.insert("thermal_throttling".into(), json!(x.throttle.throttling));
    m.insert("derived".into(), Value::Object(dv));
    if let Some(e) = &d.last_error {
        m.insert("error".into(), json!(e));
    }
    Value::Object(m)
}

/// The text report of one controller.
pub(super) fn write_text(out: &mut dyn Write, d: &DeviceHealth) -> Result<()> {
    write_identity(out, d)?;
    let Some(s) = &d.smart else {
        if let Some(e) = &d.last_error {
            writeln!(out, "  SMART log unavailable: {e}")?;
        }
        return Ok(());
    };
    write_smart(out, s)?;
    write_endurance(out, &d.derived)?;
    if let Some(o) = &d.ocp {
        write_ocp(out, o)?;
    }
    if let Some(e) = &d.last_error {
        writeln!(out, "  (some pages failed; last: {e})")?;
    }
    Ok(())
}

/// Name, Identify Controller and the namespaces.
fn write_identity(out: &mut dyn Write, d: &DeviceHealth) -> Result<()> {
    super::write_header(
        out,
        &d.name,
        &d.dev_path,
        [&d.model, &d.serial, &d.firmware],
    )?;
    if let Some(id) = &d.id {
        if id.tnvmcap > 0 {
            writeln!(
                out,
                "  capacity     {} ({} bytes, TNVMCAP)",
                fmt_capacity(id.tnvmcap as f64),
                id.tnvmcap
            )?;
        }
        if id.wctemp > 0 || id.cctemp > 0 {
            writeln!(
                out,
                "  thresholds   warning {:.0} °C, critical {:.0} °C",
                SmartLog::kelvin_to_celsius(id.wctemp),
                SmartLog::kelvin_to_celsius(id.cctemp)
            )?;
        }
        if !id.version_string().is_empty() {
            writeln!(out, "  nvme version {}", id.version_string())?;
        }
    }
    for n in &d.namespaces {
        match &n.id {
            Some(i) => writeln!(
                out,
                "  namespace    {} (nsid {}): {} blocks of {} bytes = {}",
                n.name,
                n.nsid,
                i.nsze,
                i.lba_size(),
                fmt_capacity(i.size_bytes() as f64)
            )?,
            None => writeln!(out, "  namespace    {} (nsid {})", n.name, n.nsid)?,
        }
    }
    Ok(())
}

/// The SMART / Health Information log, nvme-cli's keys.
fn write_smart(out: &mut dyn Write, s: &SmartLog) -> Result<()> {
    writeln!(out, "SMART/Health Information (log 02h)")?;
    let active: Vec<&str> = CRITICAL_WARNING_BITS
        .iter()
        .filter(|(b, _)| s.critical_warning & (1 << b) != 0)
        .map(|(_, n)| *n)
        .collect();
    kv(
        out,
        "critical_warning",
        if active.is_empty() {
            format!("{:#x}", s.critical_warning)
        } else {
            format!("{:#x} ({})", s.critical_warning, active.join(", "))
        },
    )?;
    kv(
        out,
        "temperature",
        format!(
            "{:.0} °C ({} K)",
            SmartLog::kelvin_to_celsius(s.temperature),
            s.temperature
        ),
    )?;
    kv(out, "avail_spare", format!("{}%", s.avail_spare))?;
    kv(out, "spare_thresh", format!("{}%", s.spare_thresh))?;
    kv(out, "percent_used", format!("{}%", s.percent_used))?;
    kv(
        out,
        "endurance_grp_critical_warning_summary",
        format!("{:#x}", s.endurance_grp_critical_warning_summary),
    )?;
    kv(
        out,
        "data_units_read",
        format!(
            "{} ({})",
            s.data_units_read,
            fmt_bytes(s.data_read_bytes() as f64)
        ),
    )?;
    kv(
        out,
        "data_units_written",
        format!(
            "{} ({} bytes)",
            s.data_units_written,
            s.data_written_bytes()
        ),
    )?;
    write_smart_counters(out, s)
}

/// The SMART log's counters and thermal times (bytes 64..231).
fn write_smart_counters(out: &mut dyn Write, s: &SmartLog) -> Result<()> {
    kv(out, "host_read_commands", s.host_read_commands.to_string())?;
    kv(
        out,
        "host_write_commands",
        s.host_write_commands.to_string(),
    )?;
    kv(
        out,
        "controller_busy_time",
        format!("{} min", s.controller_busy_time),
    )?;
    kv(out, "power_cycles", s.power_cycles.to_string())?;
    kv(out, "power_on_hours", s.power_on_hours.to_string())?;
    kv(out, "unsafe_shutdowns", s.unsafe_shutdowns.to_string())?;
    kv(out, "media_errors", s.media_errors.to_string())?;
    kv(
        out,
        "num_err_log_entries",
        s.num_err_log_entries.to_string(),
    )?;
    kv(
        out,
        "warning_temp_time",
        format!("{} min", s.warning_temp_time),
    )?;
    kv(
        out,
        "critical_comp_time",
        format!("{} min", s.critical_comp_time),
    )?;
    for (i, k) in s.sensors() {
        kv(
            out,
            &format!("temperature_sensor_{i}"),
            format!("{:.0} °C ({k} K)", SmartLog::kelvin_to_celsius(k)),
        )?;
    }
    kv(
        out,
        "thm_temp1_trans_count",
        s.thm_temp1_trans_count.to_string(),
    )?;
    kv(
        out,
        "thm_temp2_trans_count",
        s.thm_temp2_trans_count.to_string(),
    )?;
    kv(
        out,
        "thm_temp1_total_time",
        format!("{} s", s.thm_temp1_total_time),
    )?;
    kv(
        out,
        "thm_temp2_total_time",
        format!("{} s", s.thm_temp2_total_time),
    )?;
    Ok(())
}

fn write_ocp(out: &mut dyn Write, o: &crate::nvme::log::ocp::OcpSmartLog) -> Result<()> {
    writeln!(out, "OCP SMART extended log (C0h)")?;
    kv(
        out,
        "physical_media_units_written",
        o.physical_media_units_written.to_string(),
    )?;
    kv(
        out,
        "physical_media_units_read",
        o.physical_media_units_read.to_string(),
    )?;
    kv(
        out,
        "thermal_throttling_status",
        o.thermal_throttling_status.to_string(),
    )?;
    kv(out, "endurance_estimate", o.endurance_estimate.to_string())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::run;
    use super::*;
    use crate::nvme::cmd::{OPC_GET_FEATURES, OPC_GET_LOG_PAGE, OPC_IDENTIFY};
    use crate::nvme::discover::fake;
    use crate::nvme::identify::testdata as idt;
    use crate::nvme::log::smart::testdata as smt;
    use crate::nvme::replay::{ReplayTransport, Reply};
    use std::process::ExitCode;

    fn replay(smart: Reply) -> ReplayTransport {
        let t = ReplayTransport::new("/dev/nvme0");
        t.on_loose(OPC_IDENTIFY, 0x01, Reply::Data(idt::id_ctrl(), 0));
        t.on_loose(OPC_IDENTIFY, 0x00, Reply::Data(idt::id_ns(), 0));
        t.on_loose(OPC_IDENTIFY, 0x17, Reply::Data(vec![0; 4096], 0));
        t.on_loose(OPC_GET_LOG_PAGE, 0x02, smart);
        t.on_loose(OPC_GET_LOG_PAGE, 0x01, Reply::Data(vec![0; 64], 0));
        t.on_loose(OPC_GET_LOG_PAGE, 0x03, Reply::Data(vec![0; 512], 0));
        t.on_loose(OPC_GET_LOG_PAGE, 0xc0, Reply::Status(0x4109));
        t.on_loose(OPC_GET_FEATURES, 0x04, Reply::Data(vec![], 343));
        t
    }

    fn tree() -> tempfile::TempDir {
        let d = tempfile::tempdir().expect("tempdir");
        fake::add_ctrl(d.path(), "nvme0", "SN-HANDBUILT-0001", "M", &[1]);
        d
    }

    #[test]
    fn json_uses_nvme_cli_keys() {
        let root = tree();
        let mut out = Vec::new();
        let code = run(true, &["/dev/nvme0".into()], root.path(), &mut out, &|_| {
            Ok(Box::new(replay(Reply::Data(smt::smart(), 0))) as Box<dyn AdminTransport>)
        })
        .expect("run");
        assert_eq!(code, ExitCode::SUCCESS);
        let v: Value = serde_json::from_slice(&out).expect("json");
        assert_eq!(v["sn"], "SN-HANDBUILT-0001");
        assert_eq!(v["fr"], "FW1.2.3");
        assert_eq!(v["temperature"], 318, "kelvin, like nvme-cli");
        assert_eq!(v["critical_warning"], 0b10_0101);
        assert_eq!(v["percent_used"], 104);
        assert_eq!(v["host_read_commands"], 64_000_064u64);
        assert_eq!(
            v["data_units_written"],
            ((3u128 << 64) + 48).to_string(),
            "above u64: string"
        );
        assert_eq!(v["temperature_sensor_4"], 304);
        assert!(
            v.get("temperature_sensor_3").is_none(),
            "unimplemented sensors are left out"
        );
        assert_eq!(v["thm_temp2_total_time"], 228);
        assert_eq!(v["derived"]["percentage_used_ratio"], 1.04);
        for k in [
            "avail_spare",
            "spare_thresh",
            "endurance_grp_critical_warning_summary",
            "data_units_read",
            "host_write_commands",
            "controller_busy_time",
            "power_cycles",
            "power_on_hours",
            "unsafe_shutdowns",
            "media_errors",
            "num_err_log_entries",
            "warning_temp_time",
            "critical_comp_time",
            "thm_temp1_trans_count",
            "thm_temp2_trans_count",
            "thm_temp1_total_time",
            "mn",
        ] {
            assert!(v.get(k).is_some(), "missing {k}");
        }
    }

    #[test]
    fn smart_json_equals_nvme_cli_on_the_qemu_page() {
        // The same raw page nvme-cli 2.3 printed as smart.json in the VM.
        let dir = "tests/fixtures/nvme/qemu-7.2";
        for (bin, js) in [
            (
                &include_bytes!("../../../tests/fixtures/nvme/qemu-7.2/smart.bin")[..],
                include_str!("../../../tests/fixtures/nvme/qemu-7.2/smart.json"),
            ),
            (
                &include_bytes!("../../../tests/fixtures/nvme/qemu-7.2/smart-warn.bin")[..],
                include_str!("../../../tests/fixtures/nvme/qemu-7.2/smart-warn.json"),
            ),
        ] {
            let ours = smart_json(&crate::nvme::log::smart::parse(bin).expect("parse"));
            let cli: Map<String, Value> = serde_json::from_str(js).expect("nvme-cli json");
            let num = |v: &Value| match v {
                Value::String(s) => s.parse::<u128>().ok(),
                other => other.as_u64().map(u128::from),
            };
            let keys: Vec<&String> = cli.keys().collect();
            assert_eq!(
                ours.keys().collect::<Vec<_>>(),
                keys,
                "{dir}: same keys, same order"
            );
            for (k, want) in &cli {
                assert_eq!(num(&ours[k]), num(want), "{dir}: {k}");
            }
        }
    }

    #[test]
    fn permission_denied_is_the_plain_message() {
        let root = tree();
        let mut out = Vec::new();
        let e = run(false, &[], root.path(), &mut out, &|_| {
            Ok(Box::new(replay(Reply::Errno(libc::EACCES))) as Box<dyn AdminTransport>)
        })
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "/dev/nvme0: reading SMART log needs CAP_SYS_ADMIN (run as root or grant the capability)"
        );
    }

    #[test]
    fn no_controllers_says_so() {
        let root = tempfile::tempdir().expect("tempdir");
        let e = select(root.path(), &[]).unwrap_err();
        assert!(
            e.to_string().starts_with("no NVMe controllers found under"),
            "{e}"
        );
        let e = select(root.path(), &["/dev/nvme7".into()]).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("/dev/nvme7: no such NVMe controller"),
            "{e}"
        );
        let t = tree();
        let e = select(t.path(), &["nvme3".into()]).unwrap_err();
        assert!(e.to_string().contains("(found: nvme0)"), "{e}");
    }

    #[test]
    fn text_output_shows_identity_and_smart() {
        let root = tree();
        let mut out = Vec::new();
        run(false, &["nvme0n1".into()], root.path(), &mut out, &|_| {
            Ok(Box::new(replay(Reply::Data(smt::smart(), 0))) as Box<dyn AdminTransport>)
        })
        .expect("run");
        let text = String::from_utf8(out).expect("utf8");
        assert!(text.contains("serial       SN-HANDBUILT-0001"), "{text}");
        assert!(
            text.contains(
                "critical_warning                         0x25 (spare, reliability, pmr_read_only)"
            ),
            "{text}"
        );
        assert!(text.contains("45 °C (318 K)"), "{text}");
        assert!(
            text.contains("blocks of 4096 bytes = 2.91 TiB (3.20 TB)"),
            "{text}"
        );
    }
}
