//! The ATA commands nvsoak sends, and typed readers that run them through a transport and
//! parse the result.

use super::devstat::{self, DeviceStats, LogDirectory};
use super::identify::{self, Identify};
use super::smart::{self, Attribute, SmartData, SmartStatus, Thresholds};
use super::{AtaCmd, AtaError, AtaTransport, ParseError, Protocol, SECTOR};

pub const IDENTIFY_DEVICE: u8 = 0xec;
pub const SMART: u8 = 0xb0;
pub const READ_LOG_EXT: u8 = 0x2f;

pub const SMART_READ_DATA: u16 = 0xd0;
pub const SMART_READ_THRESHOLDS: u16 = 0xd1;
pub const SMART_RETURN_STATUS: u16 = 0xda;
/// SMART commands carry C2h/4Fh in LBA high/mid.
const SMART_SIGNATURE: u64 = 0xc2_4f00;

pub fn identify() -> AtaCmd {
    AtaCmd {
        command: IDENTIFY_DEVICE,
        features: 0,
        count: 1,
        lba: 0,
        device: 0,
        protocol: Protocol::PioIn,
        ext: false,
        what: "identifying the drive",
    }
}

fn smart_cmd(features: u16, lba_low: u8, protocol: Protocol, what: &'static str) -> AtaCmd {
    AtaCmd {
        command: SMART,
        features,
        count: u16::from(protocol == Protocol::PioIn),
        lba: SMART_SIGNATURE | u64::from(lba_low),
        device: 0,
        protocol,
        ext: false,
        what,
    }
}

pub fn smart_read_data() -> AtaCmd {
    smart_cmd(SMART_READ_DATA, 0, Protocol::PioIn, "reading SMART data")
}

/// LBA low 1, as smartmontools sends it (the command is obsolete since ATA-5 but answered).
pub fn smart_read_thresholds() -> AtaCmd {
    smart_cmd(
        SMART_READ_THRESHOLDS,
        1,
        Protocol::PioIn,
        "reading SMART thresholds",
    )
}

pub fn smart_return_status() -> AtaCmd {
    smart_cmd(
        SMART_RETURN_STATUS,
        0,
        Protocol::NonData,
        "reading SMART status",
    )
}

/// READ LOG EXT: LBA 7:0 = log address, 15:8 = page 7:0, 39:32 = page 15:8; COUNT = pages.
pub fn read_log_ext(log: u8, page: u16, count: u16, what: &'static str) -> AtaCmd {
    AtaCmd {
        command: READ_LOG_EXT,
        features: 0,
        count,
        lba: u64::from(log) | u64::from(page & 0xff) << 8 | u64::from(page >> 8) << 32,
        device: 0,
        protocol: Protocol::PioIn,
        ext: true,
        what,
    }
}

pub fn read_devstat_page(page: u8) -> AtaCmd {
    read_log_ext(
        devstat::LOG_DEVICE_STATISTICS,
        u16::from(page),
        1,
        "reading the Device Statistics log",
    )
}

fn parse_err(t: &dyn AtaTransport, what: &'static str, source: ParseError) -> AtaError {
    AtaError::Parse {
        device: t.device(),
        what,
        source,
    }
}

/// Run a one-sector data-in command and parse the sector.
fn read_sector<T>(
    t: &dyn AtaTransport,
    cmd: &AtaCmd,
    parse: impl FnOnce(&[u8]) -> Result<T, ParseError>,
) -> Result<T, AtaError> {
    let mut buf = vec![0u8; SECTOR];
    t.ata(cmd, &mut buf)?;
    parse(&buf).map_err(|e| parse_err(t, cmd.what, e))
}

pub fn read_identify(t: &dyn AtaTransport) -> Result<Identify, AtaError> {
    read_sector(t, &identify(), identify::parse)
}

pub fn read_smart_data(t: &dyn AtaTransport) -> Result<SmartData, AtaError> {
    read_sector(t, &smart_read_data(), smart::parse_data)
}

pub fn read_smart_thresholds(t: &dyn AtaTransport) -> Result<Thresholds, AtaError> {
    read_sector(t, &smart_read_thresholds(), smart::parse_thresholds)
}

/// The attribute table with thresholds; a drive that aborts READ THRESHOLDS (obsolete) still
/// gets its table, without thresholds.
pub fn read_smart_attributes(t: &dyn AtaTransport) -> Result<Vec<Attribute>, AtaError> {
    let data = read_smart_data(t)?;
    let thresholds = match read_smart_thresholds(t) {
        Ok(th) => Some(th),
        Err(e) if e.is_not_supported() => None,
        Err(e) => return Err(e),
    };
    Ok(smart::merge(&data, thresholds.as_ref()))
}

pub fn read_smart_status(t: &dyn AtaTransport) -> Result<SmartStatus, AtaError> {
    let cmd = smart_return_status();
    let regs = t.ata(&cmd, &mut [])?;
    smart::parse_status(&regs).map_err(|e| parse_err(t, cmd.what, e))
}

pub fn read_log_directory(t: &dyn AtaTransport) -> Result<LogDirectory, AtaError> {
    let cmd = read_log_ext(devstat::LOG_DIRECTORY, 0, 1, "reading the GP log directory");
    read_sector(t, &cmd, devstat::parse_log_directory)
}

/// Pages 01h, 04h, 05h, 06h and 07h, those the drive lists in page 00h. A drive without the
/// log answers [`AtaError::NotSupported`] (or a SCSI rejection) on page 00h: the caller marks
/// devstat unsupported for that drive and stops asking.
pub fn read_device_statistics(
    t: &dyn AtaTransport,
    logical_sector_size: u32,
) -> Result<DeviceStats, AtaError> {
    let listed = read_sector(
        t,
        &read_devstat_page(devstat::PAGE_SUPPORTED),
        devstat::parse_supported,
    )?;
    let mut stats = DeviceStats::default();
    for page in devstat::PAGES.into_iter().filter(|p| listed.contains(p)) {
        let cmd = read_devstat_page(page);
        let mut buf = vec![0u8; SECTOR];
        t.ata(&cmd, &mut buf)?;
        stats
            .apply(page, &buf, logical_sector_size)
            .map_err(|e| parse_err(t, cmd.what, e))?;
    }
    Ok(stats)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ata::transport::{Replay, Reply};
    use crate::ata::{AtaRegs, RegSource, cdb, devstat::testdata as ds, smart::testdata as st};

    fn good() -> AtaRegs {
        AtaRegs {
            status: 0x50,
            source: RegSource::Descriptor,
            ..AtaRegs::default()
        }
    }

    #[test]
    fn replay_round_trip_identify_smart_and_status() {
        let t = Replay::new("/dev/sdz");
        let id_page = crate::ata::identify::testdata::identify(true);
        // IDENTIFY answered through raw fixed-format sense, as libata's default.
        let fixed = cdb::fixed_sense(0x01, 0, cdb::ASCQ_ATA_INFO, &good(), 0);
        t.on(&identify(), Reply::Sense(id_page, fixed));
        t.on(&smart_read_data(), Reply::Regs(st::data(), good()));
        t.on(
            &smart_read_thresholds(),
            Reply::Regs(st::thresholds(), good()),
        );
        let passed = AtaRegs {
            lba: 0xc2_4f00,
            ..good()
        };
        t.on(&smart_return_status(), Reply::Regs(Vec::new(), passed));

        let id = read_identify(&t).expect("identify");
        assert_eq!(id.model, "ZA3840NM10001 nvsoak handbuilt");
        let table = read_smart_attributes(&t).expect("attributes");
        assert_eq!(table.len(), 5);
        assert_eq!(table[4].raw, 0xabcd_ef01_2345);
        assert_eq!(table[3].thresh, Some(96));
        assert_eq!(read_smart_status(&t).expect("status"), SmartStatus::Passed);

        let sent: Vec<_> = t.sent().iter().map(|c| (c.command, c.features)).collect();
        assert_eq!(sent, [(0xec, 0), (0xb0, 0xd0), (0xb0, 0xd1), (0xb0, 0xda)]);
    }

    #[test]
    fn a_failing_drive_reports_threshold_exceeded() {
        let t = Replay::new("/dev/sdz");
        let failed = AtaRegs {
            lba: 0x2c_f400,
            ..good()
        };
        // Through the fixed-format sense path too.
        let sense = cdb::fixed_sense(0x01, 0, cdb::ASCQ_ATA_INFO, &failed, 0);
        t.on(&smart_return_status(), Reply::Sense(Vec::new(), sense));
        assert_eq!(
            read_smart_status(&t).expect("status"),
            SmartStatus::ThresholdExceeded
        );
    }

    #[test]
    fn thresholds_aborted_still_gives_the_table() {
        let t = Replay::new("/dev/sdz");
        t.on(&smart_read_data(), Reply::Regs(st::data(), good()));
        t.on(&smart_read_thresholds(), Reply::Abort);
        let table = read_smart_attributes(&t).expect("attributes");
        assert!(table.iter().all(|a| a.thresh.is_none()));
    }

    #[test]
    fn device_statistics_read_the_listed_pages() {
        let t = Replay::new("/dev/sdz");
        t.on(&read_devstat_page(0), Reply::Regs(ds::supported(), good()));
        t.on(&read_devstat_page(1), Reply::Regs(ds::general(), good()));
        t.on(
            &read_devstat_page(4),
            Reply::Regs(ds::general_errors(), good()),
        );
        t.on(
            &read_devstat_page(5),
            Reply::Regs(ds::temperature(), good()),
        );
        t.on(&read_devstat_page(6), Reply::Regs(ds::transport(), good()));
        t.on(&read_devstat_page(7), Reply::Regs(ds::ssd(), good()));
        let s = read_device_statistics(&t, 512).expect("devstat");
        assert_eq!(s.pages, devstat::PAGES.to_vec());
        assert_eq!(s.percentage_used, Some(104));
        assert_eq!(t.sent().len(), 6);
    }

    #[test]
    fn devstat_refused_is_not_supported_once() {
        // QEMU aborts READ LOG EXT of log 04h.
        let t = Replay::new("/dev/sdz");
        t.on(&read_devstat_page(0), Reply::Abort);
        let e = read_device_statistics(&t, 512).unwrap_err();
        assert!(e.is_not_supported(), "{e}");
        assert!(e.to_string().contains("not supported by the drive"), "{e}");
        assert_eq!(t.sent().len(), 1, "no further pages asked for");
    }

    #[test]
    fn permission_and_missing_replies_are_typed() {
        let t = Replay::new("/dev/sdz");
        t.on(&identify(), Reply::Errno(libc::EPERM));
        let e = read_identify(&t).unwrap_err();
        assert!(e.is_permission());
        assert!(e.to_string().contains("CAP_SYS_RAWIO"), "{e}");
        let e = read_smart_data(&t).unwrap_err();
        assert!(matches!(e, AtaError::NoReplay { .. }), "{e}");
        // A wrong-sized buffer never reaches the drive.
        let e = t.ata(&smart_read_data(), &mut [0u8; 10]).unwrap_err();
        assert!(matches!(e, AtaError::Io { .. }), "{e}");
    }

    #[test]
    fn a_drive_error_other_than_abort_is_a_device_error() {
        let t = Replay::new("/dev/sdz");
        let unc = AtaRegs {
            error: 0x40,
            status: 0x51,
            ..good()
        };
        t.on(&smart_read_data(), Reply::Regs(Vec::new(), unc));
        let e = read_smart_data(&t).unwrap_err();
        assert!(matches!(e, AtaError::Device { .. }), "{e}");
        assert!(!e.is_not_supported());
    }
}
