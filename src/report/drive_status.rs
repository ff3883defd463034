//! The status page's view of one drive, [`DriveStatus`]: the same flat, protocol-neutral row
//! for every drive the health poller knows, so the page's drive table (`status.rs`) reads one
//! shape whatever the protocol. Every row is built by [`row`] from the drive sample
//! (`health::collect::sample`): its names, the derivations and the shared figures each
//! collector reads from its own pages. The one cell only some protocols fill, "SMART status
//! / reallocated" (SATA disks), is [`smart_cell`]; `status::drives_from_health` lists them all.

use super::charts::esc;
use crate::health::collect::PolledDrive;

/// One drive as the status page shows it. `None` fields are shown as "-".
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DriveStatus {
    /// Controller name, e.g. `nvme0`.
    pub device: String,
    pub model: String,
    pub serial: String,
    /// The last poll succeeded.
    pub up: bool,
    pub temperature_c: Option<f64>,
    pub warning_temp_c: Option<f64>,
    pub critical_temp_c: Option<f64>,
    /// Percentage used as a ratio (1.0 = 100 %, may exceed 1).
    pub percentage_used: Option<f64>,
    pub available_spare: Option<f64>,
    pub data_written_bytes: Option<f64>,
    pub rated_endurance_bytes: Option<f64>,
    pub throttling: Option<bool>,
    pub throttle_events: Option<u64>,
    pub media_errors: Option<u64>,
    pub error_log_entries: Option<u64>,
    pub critical_warning: Option<u8>,
    /// SATA disks: SMART RETURN STATUS passed, and attribute 5 (reallocated sectors).
    pub smart_passed: Option<bool>,
    pub reallocated_sectors: Option<u64>,
}

impl DriveStatus {
    /// The row with every figure that is not finite (from a broken device or poll) as `None`,
    /// shown as "-" and never as `NaN` or `inf`.
    pub fn finite(mut self) -> DriveStatus {
        for v in [
            &mut self.temperature_c,
            &mut self.warning_temp_c,
            &mut self.critical_temp_c,
            &mut self.percentage_used,
            &mut self.available_spare,
            &mut self.data_written_bytes,
            &mut self.rated_endurance_bytes,
        ] {
            *v = v.filter(|x| x.is_finite());
        }
        self
    }
}

/// One drive as the status page shows it: its names, whether its last poll succeeded, the
/// poller's endurance and throttling derivations (the same for every protocol) and its latest
/// shared figures. What the drive does not report, or reports as no finite number, stays
/// `None` ("-").
pub fn row(d: &PolledDrive<'_>) -> DriveStatus {
    let derived = d.derived();
    let f = d.figures();
    DriveStatus {
        device: d.name().to_string(),
        model: d.model().to_string(),
        serial: d.serial().to_string(),
        up: d.up(),
        temperature_c: f.temperature_c,
        warning_temp_c: f.warning_temp_c,
        critical_temp_c: f.critical_temp_c,
        percentage_used: f.percentage_used,
        available_spare: f.available_spare,
        data_written_bytes: f.data_written_bytes,
        rated_endurance_bytes: derived.rated.as_ref().and_then(|r| r.bytes),
        throttling: Some(derived.throttle.throttling),
        throttle_events: Some(derived.throttle.events),
        media_errors: f.media_errors,
        error_log_entries: f.error_log_entries,
        critical_warning: f.critical_warning,
        smart_passed: f.smart_passed,
        reallocated_sectors: f.reallocated_sectors,
    }
    .finite()
}

/// The "SMART status / reallocated" cell: "-" for NVMe drives (their critical warning says
/// it), "passed, 0" or a red "FAILED" / nonzero count for SATA disks.
pub fn smart_cell(d: &DriveStatus) -> String {
    if d.smart_passed.is_none() && d.reallocated_sectors.is_none() {
        return "<td class=\"num\">-</td>".into();
    }
    let status = match d.smart_passed {
        Some(true) => "passed",
        Some(false) => "FAILED",
        None => "-",
    };
    let re = d
        .reallocated_sectors
        .map(|n| n.to_string())
        .unwrap_or_else(|| "-".into());
    let bad = d.smart_passed == Some(false) || d.reallocated_sectors.is_some_and(|n| n > 0);
    let class = if bad { "bad" } else { "ok" };
    format!(
        "<td class=\"{class}\">{}</td>",
        esc(&format!("{status}, {re} reallocated"))
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ata::cmd;
    use crate::ata::transport::Reply;
    use crate::health::NoHostIo;
    use crate::health::collect::PolledDrive;
    use crate::health::collect::RatingContext;
    use crate::health::collect::ata::poll_once;
    use crate::health::collect::ata::testdata::{disk, full_replay, status_regs};
    use crate::report::history::History;
    use crate::report::status::render_status;

    #[test]
    fn a_sata_disk_is_listed_beside_nvme_drives() {
        let t = full_replay("/dev/sdb");
        // A drive that fails SMART status.
        t.on(
            &cmd::smart_return_status(),
            Reply::Regs(Vec::new(), status_regs(false)),
        );
        let d = poll_once(&t, &disk("sdb"), &RatingContext::default(), &NoHostIo);
        let s = row(&PolledDrive::Ata(&d));
        assert_eq!(s.device, "sdb");
        assert_eq!(s.serial, "IW110SN0000000042");
        assert!(s.up);
        assert_eq!(s.temperature_c, Some(41.0), "Device Statistics 05h");
        assert_eq!(s.percentage_used, Some(1.04));
        assert_eq!(s.data_written_bytes, Some(7_000_000_000.0 * 512.0));
        assert_eq!(
            s.rated_endurance_bytes,
            Some(7_000e12),
            "IronWolf 110 3.84 TB"
        );
        assert_eq!(s.media_errors, Some(3), "reported uncorrectable");
        assert_eq!(
            (s.smart_passed, s.reallocated_sectors),
            (Some(false), Some(7))
        );
        assert_eq!(s.available_spare, None);
        let nvme = DriveStatus {
            device: "nvme0".into(),
            model: "NVMe model".into(),
            up: true,
            critical_warning: Some(0),
            ..Default::default()
        };
        let page = render_status(&[], &[nvme, s.clone()], &History::default());
        let table = page
            .split("<table id=\"drives\">")
            .nth(1)
            .and_then(|t| t.split("</table>").next())
            .expect("drives table");
        assert!(
            table.contains("<th>SMART status / reallocated</th>"),
            "{table}"
        );
        let sata = table
            .split("<tr>")
            .find(|r| r.contains("<td>sdb</td>"))
            .expect("the SATA row");
        assert!(sata.contains("ZA3840NM10001 nvsoak handbuilt"), "{sata}");
        assert!(
            sata.contains("<td class=\"bad\">FAILED, 7 reallocated</td>"),
            "{sata}"
        );
        assert!(sata.contains("104.0 %") || sata.contains("104 %"), "{sata}");
        let nvme_row = table
            .split("<tr>")
            .find(|r| r.contains("<td>nvme0</td>"))
            .expect("the NVMe row");
        assert!(
            nvme_row.ends_with("<td class=\"num\">-</td></tr>\n"),
            "{nvme_row}"
        );
        // Every row has as many cells as the header.
        let cells = |r: &str| r.matches("<td").count();
        let header = table.matches("<th>").count();
        assert_eq!((cells(sata), cells(nvme_row)), (header, header));
        // A healthy disk: passed, in green.
        let ok = DriveStatus {
            smart_passed: Some(true),
            reallocated_sectors: Some(0),
            ..Default::default()
        };
        assert_eq!(
            smart_cell(&ok),
            "<td class=\"ok\">passed, 0 reallocated</td>"
        );
    }
}
