//! The status page's rows for SATA disks: a [`DriveStatus`] from the ATA poller's state (the
//! same [`AtaCounters`] the soak figures use, so every figure has one source; what every drive
//! has comes from `drive_status::base`), and the "SMART status / reallocated" cell, which NVMe
//! drives leave as "-".

use super::charts::esc;
use super::drive_status::{DriveStatus, base};
use crate::health::collect::ata::AtaHealth;
use crate::health::collect::ata::sample::AtaCounters;

/// One SATA disk as the status page shows it. Figures the drive does not report stay `None`
/// ("-"): a disk without Device Statistics has no percentage used, no spare.
pub fn drive_status(d: &AtaHealth) -> DriveStatus {
    let c = AtaCounters::of(d);
    let ds = d.devstat.as_ref();
    DriveStatus {
        temperature_c: c.temperature_c.map(f64::from),
        // Device Statistics' specified maximum operating temperature.
        warning_temp_c: ds.and_then(|s| s.specified_max_temperature).map(f64::from),
        critical_temp_c: None,
        percentage_used: ds.and_then(|s| s.percentage_used_ratio()),
        available_spare: None,
        data_written_bytes: d.lifetime_written.map(|(b, _)| b as f64),
        // Reported uncorrectable errors stand in the media errors column.
        media_errors: c.uncorrectable,
        error_log_entries: None,
        critical_warning: None,
        smart_passed: c.smart_passed,
        reallocated_sectors: c.reallocated,
        ..base(&d.name, &d.model, &d.serial, d.up, &d.derived)
    }
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
        let s = drive_status(&d);
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
