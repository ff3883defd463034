//! Admin commands for the drive's own view beyond SMART: the OCP Error Recovery (C1h) and
//! Latency Monitor (C3h) logs, the Latency Monitor feature (Set Features C5h) and the
//! Telemetry Controller-Initiated log header (08h). Every Get Log Page goes through
//! [`cmd::get_log_page`], so RAE=1 like every other page nvsoak reads.

use super::cmd::{self, parsed};
use super::log::{
    self, NSID_ALL, ocp_latency::LatencyMonitorConfig, ocp_latency::LatencyMonitorLog,
    ocp_recovery::ErrorRecoveryLog, telemetry::TelemetryHeader,
};
use super::{AdminCmd, AdminTransport, NvmeError};

pub const OPC_SET_FEATURES: u8 = 0x09;

pub const WHAT_OCP_RECOVERY: &str = "reading OCP error recovery log C1h";
pub const WHAT_OCP_LATENCY: &str = "reading OCP latency monitor log C3h";
pub const WHAT_SET_LATENCY: &str = "enabling the OCP latency monitor (Set Features C5h)";
pub const WHAT_TELEMETRY: &str = "reading the telemetry controller-initiated log 08h header";

pub fn recovery_cmd(uuid_index: u8) -> AdminCmd {
    cmd::get_log_page(
        log::ocp_recovery::LID,
        NSID_ALL,
        log::ocp_recovery::LEN,
        0,
        uuid_index,
        WHAT_OCP_RECOVERY,
    )
}

/// The C1h page; `Ok(None)` when it lacks the page's GUID (the drive has no such page).
pub fn read_recovery(
    t: &dyn AdminTransport,
    uuid_index: u8,
) -> Result<Option<ErrorRecoveryLog>, NvmeError> {
    let mut buf = vec![0u8; log::ocp_recovery::LEN];
    t.admin(&recovery_cmd(uuid_index), &mut buf)?;
    if !log::ocp_recovery::guid_matches(&buf) {
        return Ok(None);
    }
    parsed(t, WHAT_OCP_RECOVERY, log::ocp_recovery::parse(&buf)).map(Some)
}

pub fn latency_cmd(uuid_index: u8) -> AdminCmd {
    cmd::get_log_page(
        log::ocp_latency::LID,
        NSID_ALL,
        log::ocp_latency::LEN,
        0,
        uuid_index,
        WHAT_OCP_LATENCY,
    )
}

/// The C3h page; `Ok(None)` when it lacks the page's GUID.
pub fn read_latency(
    t: &dyn AdminTransport,
    uuid_index: u8,
) -> Result<Option<LatencyMonitorLog>, NvmeError> {
    let mut buf = vec![0u8; log::ocp_latency::LEN];
    t.admin(&latency_cmd(uuid_index), &mut buf)?;
    if !log::ocp_latency::guid_matches(&buf) {
        return Ok(None);
    }
    parsed(t, WHAT_OCP_LATENCY, log::ocp_latency::parse(&buf)).map(Some)
}

/// Set Features C5h, not saved across power cycles (SV=0), with the feature's data buffer
/// (host to controller: the opcode's direction bits say so).
pub fn set_latency_cmd(uuid_index: u8) -> AdminCmd {
    AdminCmd {
        cdw10: u32::from(log::ocp_latency::FID),
        cdw14: u32::from(uuid_index & 0x7f),
        ..AdminCmd::new(OPC_SET_FEATURES, WHAT_SET_LATENCY)
    }
}

/// Enable the Latency Monitor with `c`. This changes the drive's state: the caller asks first.
pub fn set_latency_monitor(
    t: &dyn AdminTransport,
    uuid_index: u8,
    c: &LatencyMonitorConfig,
) -> Result<(), NvmeError> {
    let mut data = log::ocp_latency::feature_data(c);
    t.admin(&set_latency_cmd(uuid_index), &mut data)?;
    Ok(())
}

pub fn telemetry_cmd() -> AdminCmd {
    cmd::get_log_page(
        log::telemetry::LID_CTRL,
        NSID_ALL,
        log::telemetry::HEADER_LEN,
        0,
        0,
        WHAT_TELEMETRY,
    )
}

/// The first 512 bytes of the controller-initiated telemetry log.
pub fn read_telemetry_header(t: &dyn AdminTransport) -> Result<TelemetryHeader, NvmeError> {
    let mut buf = vec![0u8; log::telemetry::HEADER_LEN];
    t.admin(&telemetry_cmd(), &mut buf)?;
    parsed(t, WHAT_TELEMETRY, log::telemetry::parse(&buf))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nvme::cmd::OPC_GET_LOG_PAGE;
    use crate::nvme::replay::{ReplayTransport, Reply};

    #[test]
    fn log_pages_use_rae_and_the_uuid_index() {
        let t = ReplayTransport::new("/dev/nvme9");
        t.on_loose(
            OPC_GET_LOG_PAGE,
            0xc1,
            Reply::Data(log::ocp_recovery::testdata::recovery(), 0),
        );
        t.on_loose(
            OPC_GET_LOG_PAGE,
            0xc3,
            Reply::Data(log::ocp_latency::testdata::latency(), 0),
        );
        t.on_loose(
            OPC_GET_LOG_PAGE,
            0x08,
            Reply::Data(log::telemetry::testdata::header(9), 0),
        );
        let r = read_recovery(&t, 2).expect("c1").expect("guid");
        assert_eq!(r.panic_count, 7);
        let l = read_latency(&t, 2).expect("c3").expect("guid");
        assert_eq!(l.active.counters[1].write, 1012);
        let h = read_telemetry_header(&t).expect("08");
        assert_eq!(h.ctrl_generation, 9);
        let s = t.sent();
        // LID, RAE (bit 15), NUMDL 127 (512 bytes); UUID index in CDW14.
        assert_eq!(
            (s[0].nsid, s[0].cdw10, s[0].cdw14),
            (NSID_ALL, 0x007f_80c1, 2)
        );
        assert_eq!((s[1].cdw10, s[1].cdw14), (0x007f_80c3, 2));
        assert_eq!((s[2].cdw10, s[2].cdw14), (0x007f_8008, 0));
        // A page without the GUID is "no such page", not an error.
        let t2 = ReplayTransport::new("/dev/nvme9");
        t2.on_loose(OPC_GET_LOG_PAGE, 0xc1, Reply::Data(vec![0x5a; 512], 0));
        t2.on_loose(OPC_GET_LOG_PAGE, 0xc3, Reply::Data(vec![0x5a; 512], 0));
        assert_eq!(read_recovery(&t2, 0).expect("no error"), None);
        assert_eq!(read_latency(&t2, 0).expect("no error"), None);
    }

    #[test]
    fn set_latency_sends_the_feature_data() {
        let t = ReplayTransport::new("/dev/nvme9");
        t.on_loose(OPC_SET_FEATURES, 0xc5, Reply::Data(Vec::new(), 0));
        let c = LatencyMonitorConfig {
            active_bucket_timer_threshold: 12,
            thresholds: [1, 2, 4, 8],
            active_latency_config: 0,
            active_latency_min_window: 10,
        };
        set_latency_monitor(&t, 3, &c).expect("set");
        let s = t.sent();
        assert_eq!(s.len(), 1);
        assert_eq!((s[0].opcode, s[0].cdw10, s[0].cdw14), (0x09, 0xc5, 3));
        let data = t.sent_data();
        assert_eq!(data[0].len(), log::ocp_latency::FEATURE_LEN);
        assert_eq!(&data[0][..13], &[12, 0, 1, 2, 4, 8, 0, 0, 10, 0, 0, 0, 1]);
    }
}
