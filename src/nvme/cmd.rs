//! Admin commands: the dwords for each, and typed readers that run them through a transport
//! and parse the result.

use super::features::{self, TempThresholds};
use super::identify::{self, IdCtrl, IdNs};
use super::log::{
    self, NSID_ALL, error::ErrorEntry, fwslot::FwSlotLog, ocp::OcpSmartLog, smart::SmartLog,
};
use super::{AdminCmd, AdminTransport, NvmeError, ParseError};

pub const OPC_GET_LOG_PAGE: u8 = 0x02;
pub const OPC_IDENTIFY: u8 = 0x06;
pub const OPC_GET_FEATURES: u8 = 0x0a;

pub const CNS_NAMESPACE: u8 = 0x00;
pub const CNS_CONTROLLER: u8 = 0x01;
pub const CNS_UUID_LIST: u8 = 0x17;

/// Retain Asynchronous Event on every Get Log Page nvsoak sends.
///
/// nvsoak is an observer: with RAE=0, reading the SMART log would clear a pending SMART/health
/// asynchronous event (QEMU clears its queued SMART events that way), so the host's own event
/// handling (the kernel's uevent, smartd, an operator's nvme-cli) would lose it. The condition
/// itself stays visible to nvsoak in the page's critical warning byte, which RAE does not affect.
pub const RAE: bool = true;

pub fn identify(cns: u8, nsid: u32, what: &'static str) -> AdminCmd {
    AdminCmd {
        nsid,
        cdw10: u32::from(cns),
        ..AdminCmd::new(OPC_IDENTIFY, what)
    }
}

/// Get Log Page: CDW10 = LID | LSP << 8 | RAE << 15 | NUMDL << 16, CDW11 = NUMDU,
/// CDW12/13 = byte offset, CDW14 = UUID index. `len` is a multiple of 4.
pub fn get_log_page(
    lid: u8,
    nsid: u32,
    len: usize,
    offset: u64,
    uuid_index: u8,
    what: &'static str,
) -> AdminCmd {
    debug_assert!(len >= 4 && len.is_multiple_of(4));
    let numd = (len / 4 - 1) as u32;
    AdminCmd {
        nsid,
        cdw10: u32::from(lid) | (u32::from(RAE) << 15) | ((numd & 0xffff) << 16),
        cdw11: numd >> 16,
        cdw12: offset as u32,
        cdw13: (offset >> 32) as u32,
        cdw14: u32::from(uuid_index & 0x7f),
        ..AdminCmd::new(OPC_GET_LOG_PAGE, what)
    }
}

/// Get Features, current value (SEL 0).
pub fn get_features(fid: u8, cdw11: u32, what: &'static str) -> AdminCmd {
    AdminCmd {
        cdw10: u32::from(fid),
        cdw11,
        ..AdminCmd::new(OPC_GET_FEATURES, what)
    }
}

/// Temperature Threshold for the composite sensor: TMPSEL [19:16] = 0, THSEL [21:20]
/// 0 = over, 1 = under.
pub fn temp_threshold(under: bool) -> AdminCmd {
    get_features(
        features::FID_TEMP_THRESHOLD,
        u32::from(under) << 20,
        if under {
            "reading the under-temperature threshold"
        } else {
            "reading the over-temperature threshold"
        },
    )
}

pub const WHAT_ID_CTRL: &str = "identifying the controller";
pub const WHAT_ID_NS: &str = "identifying the namespace";
pub const WHAT_UUID_LIST: &str = "reading the UUID list";
pub const WHAT_SMART: &str = "reading SMART log";
pub const WHAT_ERROR: &str = "reading error log";
pub const WHAT_FWSLOT: &str = "reading firmware slot log";
pub const WHAT_OCP: &str = "reading OCP SMART extended log";

pub(crate) fn parsed<T>(
    t: &dyn AdminTransport,
    what: &'static str,
    r: Result<T, ParseError>,
) -> Result<T, NvmeError> {
    r.map_err(|source| NvmeError::Parse {
        device: t.device(),
        what,
        source,
    })
}

pub fn read_id_ctrl(t: &dyn AdminTransport) -> Result<IdCtrl, NvmeError> {
    let mut buf = vec![0u8; identify::ID_LEN];
    t.admin(&identify(CNS_CONTROLLER, 0, WHAT_ID_CTRL), &mut buf)?;
    parsed(t, WHAT_ID_CTRL, identify::parse_ctrl(&buf))
}

pub fn read_id_ns(t: &dyn AdminTransport, nsid: u32) -> Result<IdNs, NvmeError> {
    let mut buf = vec![0u8; identify::ID_LEN];
    t.admin(&identify(CNS_NAMESPACE, nsid, WHAT_ID_NS), &mut buf)?;
    parsed(t, WHAT_ID_NS, identify::parse_ns(&buf))
}

pub fn read_uuid_list(t: &dyn AdminTransport) -> Result<Vec<[u8; 16]>, NvmeError> {
    let mut buf = vec![0u8; identify::ID_LEN];
    t.admin(&identify(CNS_UUID_LIST, 0, WHAT_UUID_LIST), &mut buf)?;
    parsed(t, WHAT_UUID_LIST, identify::parse_uuid_list(&buf))
}

pub fn smart_cmd() -> AdminCmd {
    get_log_page(log::smart::LID, NSID_ALL, log::smart::LEN, 0, 0, WHAT_SMART)
}

pub fn read_smart(t: &dyn AdminTransport) -> Result<SmartLog, NvmeError> {
    let mut buf = vec![0u8; log::smart::LEN];
    t.admin(&smart_cmd(), &mut buf)?;
    parsed(t, WHAT_SMART, log::smart::parse(&buf))
}

pub fn error_cmd(elpe: u8) -> AdminCmd {
    let len = log::error::entries_to_read(elpe) * log::error::ENTRY_LEN;
    get_log_page(log::error::LID, NSID_ALL, len, 0, 0, WHAT_ERROR)
}

/// The newest error entries (at most ELPE + 1, at most 64).
pub fn read_error_log(t: &dyn AdminTransport, elpe: u8) -> Result<Vec<ErrorEntry>, NvmeError> {
    let cmd = error_cmd(elpe);
    let mut buf = vec![0u8; log::error::entries_to_read(elpe) * log::error::ENTRY_LEN];
    t.admin(&cmd, &mut buf)?;
    parsed(t, WHAT_ERROR, log::error::parse(&buf))
}

pub fn fwslot_cmd() -> AdminCmd {
    get_log_page(
        log::fwslot::LID,
        NSID_ALL,
        log::fwslot::LEN,
        0,
        0,
        WHAT_FWSLOT,
    )
}

pub fn read_fwslot(t: &dyn AdminTransport) -> Result<FwSlotLog, NvmeError> {
    let mut buf = vec![0u8; log::fwslot::LEN];
    t.admin(&fwslot_cmd(), &mut buf)?;
    parsed(t, WHAT_FWSLOT, log::fwslot::parse(&buf))
}

pub fn ocp_cmd(uuid_index: u8) -> AdminCmd {
    get_log_page(
        log::ocp::LID,
        NSID_ALL,
        log::ocp::LEN,
        0,
        uuid_index,
        WHAT_OCP,
    )
}

/// The OCP UUID index for CDW14: looked up in the UUID list when the controller has one,
/// else 0.
pub fn ocp_uuid_index(t: &dyn AdminTransport, id: &IdCtrl) -> u8 {
    if !id.uuid_list_supported() {
        return 0;
    }
    match read_uuid_list(t) {
        Ok(list) => identify::uuid_index(&list, &identify::OCP_UUID),
        Err(_) => 0,
    }
}

/// The OCP C0h page; `Ok(None)` when the page lacks the OCP GUID (not an OCP drive).
pub fn read_ocp(t: &dyn AdminTransport, uuid_index: u8) -> Result<Option<OcpSmartLog>, NvmeError> {
    let mut buf = vec![0u8; log::ocp::LEN];
    t.admin(&ocp_cmd(uuid_index), &mut buf)?;
    if !log::ocp::guid_matches(&buf) {
        return Ok(None);
    }
    parsed(t, WHAT_OCP, log::ocp::parse(&buf)).map(Some)
}

/// Volatile Write Cache feature (FID 06h), current value.
pub fn write_cache() -> AdminCmd {
    get_features(
        features::FID_VOLATILE_WRITE_CACHE,
        0,
        "reading the volatile write cache feature",
    )
}

/// Whether the volatile write cache is on (Get Features 06h, WCE). Only meaningful when
/// Identify Controller says there is one ([`super::identify::IdCtrl::write_cache_present`]).
pub fn read_write_cache(t: &dyn AdminTransport) -> Result<bool, NvmeError> {
    t.admin(&write_cache(), &mut [])
        .map(features::write_cache_enabled)
}

pub fn read_temp_thresholds(t: &dyn AdminTransport) -> Result<TempThresholds, NvmeError> {
    let over = t.admin(&temp_threshold(false), &mut [])?;
    let under = t.admin(&temp_threshold(true), &mut [])?;
    Ok(TempThresholds {
        over_kelvin: features::temp_threshold_kelvin(over),
        under_kelvin: features::temp_threshold_kelvin(under),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nvme::replay::{ReplayTransport, Reply};

    fn only(t: &ReplayTransport) -> AdminCmd {
        let s = t.sent();
        assert_eq!(s.len(), 1, "{s:?}");
        s[0].clone()
    }

    #[test]
    fn smart_command_dwords() {
        let t = ReplayTransport::new("/dev/nvme9");
        t.on_loose(
            OPC_GET_LOG_PAGE,
            0x02,
            Reply::Data(log::smart::testdata::smart(), 0),
        );
        let s = read_smart(&t).expect("smart");
        assert_eq!(s.temperature, 318);
        let c = only(&t);
        assert_eq!(c.opcode, 0x02);
        assert_eq!(c.nsid, 0xffff_ffff);
        // LID 02h, RAE set (bit 15), NUMDL = 512/4 - 1 = 127
        assert_eq!(c.cdw10, 0x007f_8002);
        assert_eq!(c.cdw11, 0);
        assert_eq!((c.cdw12, c.cdw13, c.cdw14), (0, 0, 0));
    }

    #[test]
    fn long_log_splits_numd_over_numdl_and_numdu() {
        let c = get_log_page(0x0d, 1, 0x40_0000, 0x1_0000_0008, 3, "x");
        let numd = 0x40_0000 / 4 - 1; // 0xfffff
        assert_eq!(c.cdw10 >> 16, numd & 0xffff);
        assert_eq!(c.cdw11, numd >> 16);
        assert_eq!(c.cdw10 & 0xff, 0x0d);
        assert_eq!(c.cdw12, 8);
        assert_eq!(c.cdw13, 1);
        assert_eq!(c.cdw14, 3);
    }

    #[test]
    fn identify_dwords() {
        let t = ReplayTransport::new("/dev/nvme9");
        t.on_loose(
            OPC_IDENTIFY,
            CNS_CONTROLLER,
            Reply::Data(identify::testdata::id_ctrl(), 0),
        );
        t.on_loose(
            OPC_IDENTIFY,
            CNS_NAMESPACE,
            Reply::Data(identify::testdata::id_ns(), 0),
        );
        let id = read_id_ctrl(&t).expect("id");
        assert_eq!(id.sn, "SN-HANDBUILT-0001");
        let c = only(&t);
        assert_eq!((c.opcode, c.nsid, c.cdw10, c.cdw11), (0x06, 0, 0x01, 0));
        t.clear_sent();
        read_id_ns(&t, 3).expect("ns");
        let c = only(&t);
        assert_eq!((c.opcode, c.nsid, c.cdw10), (0x06, 3, 0x00));
    }

    #[test]
    fn error_log_reads_the_newest_entries() {
        let t = ReplayTransport::new("/dev/nvme9");
        t.on_loose(
            OPC_GET_LOG_PAGE,
            0x01,
            Reply::Data(log::error::testdata::error_log(), 0),
        );
        let es = read_error_log(&t, 62).expect("error log");
        assert_eq!(es.len(), 3);
        let c = only(&t);
        assert_eq!(c.nsid, 0xffff_ffff);
        // 63 entries x 64 bytes = 4032 bytes, NUMD 1007 = 0x3ef
        assert_eq!(c.cdw10, 0x03ef_8001);
        t.clear_sent();
        read_error_log(&t, 200).expect("error log");
        assert_eq!(
            only(&t).cdw10 >> 16,
            64 * 64 / 4 - 1,
            "capped at 64 entries"
        );
    }

    #[test]
    fn fwslot_and_features_dwords() {
        let t = ReplayTransport::new("/dev/nvme9");
        t.on_loose(
            OPC_GET_LOG_PAGE,
            0x03,
            Reply::Data(log::fwslot::testdata::fw_slot(), 0),
        );
        t.on(&temp_threshold(false), Reply::Data(vec![], 0x157));
        t.on(&temp_threshold(true), Reply::Data(vec![], 0x110));
        read_fwslot(&t).expect("fw");
        assert_eq!(only(&t).cdw10, 0x007f_8003);
        t.clear_sent();
        let th = read_temp_thresholds(&t).expect("thresholds");
        assert_eq!(th.over_kelvin, 343);
        assert_eq!(th.under_kelvin, 272);
        let s = t.sent();
        assert_eq!((s[0].opcode, s[0].cdw10, s[0].cdw11), (0x0a, 0x04, 0));
        assert_eq!((s[1].opcode, s[1].cdw10, s[1].cdw11), (0x0a, 0x04, 1 << 20));
        t.clear_sent();
        t.on(&write_cache(), Reply::Data(vec![], 0x1));
        assert!(read_write_cache(&t).expect("vwc"));
        let s = t.sent();
        assert_eq!((s[0].opcode, s[0].cdw10, s[0].cdw11), (0x0a, 0x06, 0));
        t.on(&write_cache(), Reply::Data(vec![], 0x0));
        assert!(!read_write_cache(&t).expect("vwc"));
    }

    #[test]
    fn ocp_uses_the_uuid_index_and_checks_the_guid() {
        let t = ReplayTransport::new("/dev/nvme9");
        let mut list = vec![0u8; 4096];
        list[48..64].copy_from_slice(&[9u8; 16]);
        list[80..96].copy_from_slice(&identify::OCP_UUID);
        t.on_loose(OPC_IDENTIFY, CNS_UUID_LIST, Reply::Data(list, 0));
        t.on_loose(
            OPC_GET_LOG_PAGE,
            0xc0,
            Reply::Data(log::ocp::testdata::ocp(), 0),
        );
        let id = identify::parse_ctrl(&identify::testdata::id_ctrl()).expect("id");
        let idx = ocp_uuid_index(&t, &id);
        assert_eq!(idx, 2);
        let o = read_ocp(&t, idx).expect("ocp").expect("guid matches");
        assert_eq!(o.thermal_throttling_status, 1);
        let s = t.sent();
        assert_eq!((s[0].opcode, s[0].cdw10), (0x06, 0x17));
        assert_eq!(s[1].cdw10, 0x007f_80c0);
        assert_eq!(s[1].cdw14, 2);
        // A page without the GUID is "not an OCP drive", not an error.
        let t2 = ReplayTransport::new("/dev/nvme9");
        t2.on_loose(OPC_GET_LOG_PAGE, 0xc0, Reply::Data(vec![0xaa; 512], 0));
        assert_eq!(read_ocp(&t2, 0).expect("no error"), None);
    }

    #[test]
    fn status_and_permission_errors_name_the_page() {
        let t = ReplayTransport::new("/dev/nvme0");
        t.on_loose(OPC_GET_LOG_PAGE, 0x02, Reply::Errno(libc::EACCES));
        let e = read_smart(&t).unwrap_err();
        assert!(e.is_permission());
        assert_eq!(
            e.to_string(),
            "/dev/nvme0: reading SMART log needs CAP_SYS_ADMIN (run as root or grant the capability)"
        );
        t.on_loose(OPC_GET_LOG_PAGE, 0x02, Reply::Status(0x4109));
        let e = read_smart(&t).unwrap_err();
        assert_eq!(e.status(), Some(0x4109));
        assert_eq!(
            e.to_string(),
            "/dev/nvme0: reading SMART log failed with NVMe status 0x4109 (SCT 0x1, SC 0x09: invalid log page, do not retry)"
        );
    }
}
