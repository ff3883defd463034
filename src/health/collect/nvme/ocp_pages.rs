//! The drive's own view beyond SMART, polled with the other pages: the OCP Error Recovery
//! (C1h) and Latency Monitor (C3h) logs and the Telemetry Controller-Initiated log header (08h).
//!
//! Detection follows C0h's: the OCP pages are asked for only on a drive whose C0h page carries
//! the OCP GUID (with C0h's UUID index); the telemetry header only when Identify Controller's
//! LPA bit 3 says the controller has the telemetry pages. A page the controller refuses (an NVMe
//! status) or that lacks its GUID is remembered as absent for that drive and not asked for
//! again; that is logged once per drive, never counted as a poll error. Every read is RAE=1.
//!
//! Changes the drive reports during the run are drive events (`model::events::DriveEvent`): a new panic
//! (C1h panic ID or panic count) and a new controller-initiated telemetry capture (08h data
//! generation number). The first reading is the baseline, never an event.

use super::pages::{DrivePages, Support, page};
use super::record::{DeviceHealth, OcpSupport};
use crate::model::events::kind;
use crate::nvme::log::ocp_latency::LatencyMonitorConfig;
use crate::nvme::log::ocp_recovery::ErrorRecoveryLog;
use crate::nvme::{AdminTransport, NvmeError, ocp_cmd};

/// How one probe of a page ended.
enum Probe<T> {
    Got(T),
    /// Refused with an NVMe status (kept), or no GUID: the drive has no such page, if it was
    /// not known yet; a page known present keeps its last values (a refusal is counted).
    Absent(Option<NvmeError>),
    /// Anything else (an I/O error, EACCES, a malformed page): counted, tried again.
    Failed(NvmeError),
}

fn probe<T>(r: Result<Option<T>, NvmeError>) -> Probe<T> {
    match r {
        Ok(Some(v)) => Probe::Got(v),
        Ok(None) => Probe::Absent(None),
        Err(e) if e.status().is_some() => Probe::Absent(Some(e)),
        Err(e) => Probe::Failed(e),
    }
}

/// A refused page: learnt as absent when its support was unknown (`what` is reported once),
/// else, for a page known present, a refusal is a poll error and the last values stay.
fn refused(
    d: &mut DeviceHealth,
    which: fn(&mut DrivePages) -> &mut Support,
    e: Option<NvmeError>,
    page: &'static str,
    what: &'static str,
    absent: &mut Vec<&'static str>,
) {
    match *which(&mut d.pages) {
        Support::Unknown => {
            absent.push(what);
            *which(&mut d.pages) = Support::Absent;
        }
        _ => {
            if let Some(e) = e {
                d.fail(page, &e);
            }
        }
    }
}

/// Poll these pages of `d` through `t` at Unix time `now`. `latency_monitor` is the config's
/// Latency Monitor setting: when given, the feature is enabled once per drive (logged) before
/// the C3h page is first read.
pub fn poll(
    t: &dyn AdminTransport,
    d: &mut DeviceHealth,
    now: f64,
    latency_monitor: Option<&LatencyMonitorConfig>,
) {
    let mut absent: Vec<&'static str> = Vec::new();
    match d.ocp_support {
        OcpSupport::Unknown => {} // C0h not learnt yet: wait for it
        OcpSupport::Absent => {
            // Not an OCP drive: its vendor log IDs are never asked for.
            if d.pages.recovery_support == Support::Unknown {
                absent.push("OCP error recovery log C1h");
                d.pages.recovery_support = Support::Absent;
            }
            if d.pages.latency_support == Support::Unknown {
                absent.push("OCP latency monitor log C3h");
                d.pages.latency_support = Support::Absent;
            }
        }
        OcpSupport::Present { uuid_index } => {
            poll_recovery(t, d, now, uuid_index, &mut absent);
            if let Some(c) = latency_monitor
                && d.pages.latency_monitor_set.is_none()
                && d.pages.latency_support != Support::Absent
            {
                set_latency_monitor(t, d, uuid_index, c);
            }
            poll_latency(t, d, uuid_index, &mut absent);
        }
    }
    poll_telemetry(t, d, now, &mut absent);
    if !absent.is_empty() {
        tracing::info!(
            "health: {}: not supported by the drive, not asked for again: {}",
            d.name,
            absent.join(", ")
        );
    }
}

/// C1h, with a drive event when the panic ID or count changed.
fn poll_recovery(
    t: &dyn AdminTransport,
    d: &mut DeviceHealth,
    now: f64,
    uuid_index: u8,
    absent: &mut Vec<&'static str>,
) {
    if d.pages.recovery_support == Support::Absent {
        return;
    }
    match probe(ocp_cmd::read_recovery(t, uuid_index)) {
        Probe::Got(r) => {
            recovery_events(d, &r, now);
            d.pages.recovery = Some(r);
            d.pages.recovery_support = Support::Present;
        }
        Probe::Absent(e) => refused(
            d,
            |p| &mut p.recovery_support,
            e,
            page::OCP_RECOVERY,
            "OCP error recovery log C1h",
            absent,
        ),
        Probe::Failed(e) => d.fail(page::OCP_RECOVERY, &e),
    }
}

/// Set Features C5h with the config's Latency Monitor settings, once per drive.
fn set_latency_monitor(
    t: &dyn AdminTransport,
    d: &mut DeviceHealth,
    uuid_index: u8,
    c: &LatencyMonitorConfig,
) {
    match ocp_cmd::set_latency_monitor(t, uuid_index, c) {
        Ok(()) => {
            tracing::info!(
                "health: {}: enabled the OCP latency monitor (Set Features C5h, not saved): thresholds A..D {:?} x 5 ms, bucket timer threshold {} x 5 min, minimum window {} x 100 ms, active latency configuration {:#x}",
                d.name,
                c.thresholds,
                c.active_bucket_timer_threshold,
                c.active_latency_min_window,
                c.active_latency_config
            );
            d.pages.latency_monitor_set = Some(true);
        }
        Err(e) => {
            d.pages.latency_monitor_set = Some(false);
            d.fail(page::OCP_LATENCY_FEATURE, &e);
        }
    }
}

/// C3h.
fn poll_latency(
    t: &dyn AdminTransport,
    d: &mut DeviceHealth,
    uuid_index: u8,
    absent: &mut Vec<&'static str>,
) {
    if d.pages.latency_support == Support::Absent {
        return;
    }
    match probe(ocp_cmd::read_latency(t, uuid_index)) {
        Probe::Got(l) => {
            d.pages.latency = Some(l);
            d.pages.latency_support = Support::Present;
        }
        Probe::Absent(e) => refused(
            d,
            |p| &mut p.latency_support,
            e,
            page::OCP_LATENCY,
            "OCP latency monitor log C3h",
            absent,
        ),
        Probe::Failed(e) => d.fail(page::OCP_LATENCY, &e),
    }
}

/// The telemetry controller-initiated header (08h), when Identify's LPA bit 3 says the
/// controller has it, with a drive event when its data generation number changed.
fn poll_telemetry(
    t: &dyn AdminTransport,
    d: &mut DeviceHealth,
    now: f64,
    absent: &mut Vec<&'static str>,
) {
    if d.pages.telemetry_support == Support::Absent {
        return;
    }
    let Some(lpa) = d.id.as_ref().map(|i| i.lpa) else {
        return;
    };
    let r = if lpa & (1 << 3) == 0 {
        Probe::Absent(None) // LPA bit 3: no telemetry pages
    } else {
        probe(ocp_cmd::read_telemetry_header(t).map(Some))
    };
    match r {
        Probe::Got(h) => {
            if let Some(prev) = &d.pages.telemetry
                && prev.ctrl_generation != h.ctrl_generation
            {
                let detail = format!(
                    "telemetry controller-initiated data generation {} -> {} (data available {})",
                    prev.ctrl_generation, h.ctrl_generation, h.ctrl_data_available
                );
                let name = d.name.clone();
                d.pages
                    .event(now, kind::TELEMETRY_GENERATION, detail, &name);
            }
            d.pages.telemetry = Some(h);
            d.pages.telemetry_support = Support::Present;
        }
        Probe::Absent(e) => refused(
            d,
            |p| &mut p.telemetry_support,
            e,
            page::TELEMETRY,
            "telemetry controller-initiated log 08h",
            absent,
        ),
        Probe::Failed(e) => d.fail(page::TELEMETRY, &e),
    }
}

fn recovery_events(d: &mut DeviceHealth, r: &ErrorRecoveryLog, now: f64) {
    let Some(prev) = &d.pages.recovery else {
        return; // the baseline
    };
    let id_changed = prev.panic_id != r.panic_id && r.panic_id != 0;
    let count_changed = prev.panic_count != r.panic_count;
    if id_changed || count_changed {
        let detail = format!(
            "OCP panic: panic ID {:#x} -> {:#x}, panic count {} -> {}",
            prev.panic_id, r.panic_id, prev.panic_count, r.panic_count
        );
        let name = d.name.clone();
        d.pages.event(now, kind::OCP_PANIC, detail, &name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::health::NoHostIo;
    use crate::health::collect::RatingContext;
    use crate::health::collect::nvme::{page as base_page, poll_device};
    use crate::nvme::cmd::{OPC_GET_FEATURES, OPC_GET_LOG_PAGE, OPC_IDENTIFY};
    use crate::nvme::discover::{Controller, Namespace};
    use crate::nvme::identify::{OCP_UUID, testdata as idt};
    use crate::nvme::log::{
        error::testdata as errt, fwslot::testdata as fwt, ocp::testdata as c0,
        ocp_latency::testdata as c3, ocp_recovery::testdata as c1, smart::testdata as smt,
        telemetry::testdata as tel,
    };
    use crate::nvme::ocp_cmd::OPC_SET_FEATURES;
    use crate::nvme::replay::{ReplayTransport, Reply};

    const INVALID_LOG_PAGE: u16 = 0x4109;

    fn ctrl() -> Controller {
        Controller {
            name: "nvme0".into(),
            dev_path: "/dev/nvme0".into(),
            serial: "S".into(),
            model: "M".into(),
            firmware: "F".into(),
            namespaces: vec![Namespace {
                name: "nvme0n1".into(),
                nsid: 1,
                dev_path: "/dev/nvme0n1".into(),
            }],
        }
    }

    /// Identify Controller with the UUID list (CTRATT bit 9) and LPA `lpa`.
    fn id_ctrl(lpa: u8) -> Vec<u8> {
        let mut b = idt::id_ctrl();
        b[261] = lpa;
        b[96..100].copy_from_slice(&(1u32 << 9).to_le_bytes());
        b
    }

    /// An OCP drive: C0h with its GUID, the OCP UUID at index 1, telemetry in LPA.
    fn ocp_drive() -> ReplayTransport {
        let t = ReplayTransport::new("/dev/nvme0");
        t.on_loose(OPC_IDENTIFY, 0x01, Reply::Data(id_ctrl(0x0f), 0));
        t.on_loose(OPC_IDENTIFY, 0x00, Reply::Data(idt::id_ns(), 0));
        let mut list = vec![0u8; 4096];
        list[48..64].copy_from_slice(&OCP_UUID); // the first entry: index 1
        t.on_loose(OPC_IDENTIFY, 0x17, Reply::Data(list, 0));
        t.on_loose(OPC_GET_LOG_PAGE, 0x02, Reply::Data(smt::smart(), 0));
        t.on_loose(OPC_GET_LOG_PAGE, 0x01, Reply::Data(errt::error_log(), 0));
        t.on_loose(OPC_GET_LOG_PAGE, 0x03, Reply::Data(fwt::fw_slot(), 0));
        t.on_loose(OPC_GET_LOG_PAGE, 0xc0, Reply::Data(c0::ocp(), 0));
        t.on_loose(OPC_GET_LOG_PAGE, 0xc1, Reply::Data(c1::with_panic(0, 0), 0));
        t.on_loose(OPC_GET_LOG_PAGE, 0xc3, Reply::Data(c3::latency(), 0));
        t.on_loose(OPC_GET_LOG_PAGE, 0x08, Reply::Data(tel::header(4), 0));
        t.on_loose(OPC_GET_FEATURES, 0x04, Reply::Data(vec![], 343));
        t
    }

    fn lids(t: &ReplayTransport) -> Vec<u8> {
        t.sent()
            .iter()
            .filter(|c| c.opcode == OPC_GET_LOG_PAGE)
            .map(|c| (c.cdw10 & 0xff) as u8)
            .collect()
    }

    #[test]
    fn ocp_pages_are_read_with_rae_and_the_ocp_uuid_index() {
        let t = ocp_drive();
        let mut d = DeviceHealth::new(&ctrl());
        poll_device(&t, &mut d, 100.0, &NoHostIo, &RatingContext::default());
        let p = &d.pages;
        assert_eq!(p.recovery_support, Support::Present);
        assert_eq!(p.latency_support, Support::Present);
        assert_eq!(p.telemetry_support, Support::Present);
        assert_eq!(
            p.recovery.as_ref().map(|r| r.panic_reset_wait_ms),
            Some(0x0102)
        );
        assert_eq!(
            p.latency.as_ref().map(|l| l.statics.counters[3].deallocate),
            Some(2033)
        );
        assert_eq!(p.telemetry.as_ref().map(|h| h.ctrl_generation), Some(4));
        assert!(p.events.is_empty(), "the first reading is the baseline");
        assert_eq!(
            p.latency_monitor_set, None,
            "config off: the feature is left alone"
        );
        assert!(t.sent().iter().all(|c| c.opcode != OPC_SET_FEATURES));
        for c in t.sent().iter().filter(|c| c.opcode == OPC_GET_LOG_PAGE) {
            assert_ne!(c.cdw10 & (1 << 15), 0, "RAE=1 on {:#x}", c.cdw10 & 0xff);
            let lid = c.cdw10 & 0xff;
            if lid >= 0xc0 {
                assert_eq!(c.cdw14, 1, "OCP UUID index on {lid:#x}");
            }
        }
        assert!(d.poll_errors.is_empty(), "{:?}", d.poll_errors);
    }

    #[test]
    fn refused_pages_are_remembered_and_not_asked_again() {
        let t = ocp_drive();
        t.on_loose(OPC_GET_LOG_PAGE, 0xc1, Reply::Status(INVALID_LOG_PAGE));
        t.on_loose(OPC_GET_LOG_PAGE, 0xc3, Reply::Data(vec![0x11; 512], 0)); // no GUID
        t.on_loose(OPC_GET_LOG_PAGE, 0x08, Reply::Status(INVALID_LOG_PAGE));
        let mut d = DeviceHealth::new(&ctrl());
        let ctx = RatingContext::default();
        poll_device(&t, &mut d, 100.0, &NoHostIo, &ctx);
        assert_eq!(d.pages.recovery_support, Support::Absent);
        assert_eq!(d.pages.latency_support, Support::Absent);
        assert_eq!(d.pages.telemetry_support, Support::Absent);
        assert!(
            d.poll_errors.is_empty(),
            "a refusal is not an error: {:?}",
            d.poll_errors
        );
        t.clear_sent();
        poll_device(&t, &mut d, 130.0, &NoHostIo, &ctx);
        let asked = lids(&t);
        assert!(asked.contains(&0x02) && asked.contains(&0xc0), "{asked:x?}");
        for lid in [0xc1, 0xc3, 0x08] {
            assert!(!asked.contains(&lid), "{lid:#x} asked again: {asked:x?}");
        }
        assert!(d.up);
    }

    #[test]
    fn a_drive_without_c0h_or_telemetry_is_never_asked() {
        let t = ocp_drive();
        t.on_loose(OPC_GET_LOG_PAGE, 0xc0, Reply::Status(INVALID_LOG_PAGE));
        t.on_loose(OPC_IDENTIFY, 0x01, Reply::Data(id_ctrl(0x07), 0)); // LPA bit 3 clear
        let mut d = DeviceHealth::new(&ctrl());
        let ctx = RatingContext {
            latency_monitor: Some(Default::default()),
            ..Default::default()
        };
        poll_device(&t, &mut d, 100.0, &NoHostIo, &ctx);
        poll_device(&t, &mut d, 130.0, &NoHostIo, &ctx);
        let asked = lids(&t);
        assert_eq!(
            asked.iter().filter(|l| **l == 0xc0).count(),
            1,
            "{asked:x?}"
        );
        for lid in [0xc1, 0xc3, 0x08] {
            assert!(!asked.contains(&lid), "{lid:#x} asked: {asked:x?}");
        }
        assert!(t.sent().iter().all(|c| c.opcode != OPC_SET_FEATURES));
        assert_eq!(
            (
                d.pages.recovery_support,
                d.pages.latency_support,
                d.pages.telemetry_support
            ),
            (Support::Absent, Support::Absent, Support::Absent)
        );
    }

    #[test]
    fn a_transient_failure_counts_an_error_and_is_retried() {
        let t = ocp_drive();
        t.on_loose(OPC_GET_LOG_PAGE, 0xc1, Reply::Errno(libc::EIO));
        let mut d = DeviceHealth::new(&ctrl());
        let ctx = RatingContext::default();
        poll_device(&t, &mut d, 100.0, &NoHostIo, &ctx);
        assert_eq!(d.pages.recovery_support, Support::Unknown);
        assert_eq!(d.poll_errors.get(page::OCP_RECOVERY), Some(&1));
        t.on_loose(OPC_GET_LOG_PAGE, 0xc1, Reply::Data(c1::recovery(), 0));
        poll_device(&t, &mut d, 130.0, &NoHostIo, &ctx);
        assert_eq!(d.pages.recovery_support, Support::Present);
        assert_eq!(d.pages.recovery.as_ref().map(|r| r.panic_count), Some(7));
        assert_eq!(d.poll_errors.get(base_page::SMART), None);
    }

    #[test]
    fn a_panic_id_change_is_a_drive_event() {
        let t = ocp_drive();
        let mut d = DeviceHealth::new(&ctrl());
        let ctx = RatingContext::default();
        // A panic before the run is the baseline, not an event.
        t.on_loose(
            OPC_GET_LOG_PAGE,
            0xc1,
            Reply::Data(c1::with_panic(0x51, 2), 0),
        );
        poll_device(&t, &mut d, 100.0, &NoHostIo, &ctx);
        poll_device(&t, &mut d, 130.0, &NoHostIo, &ctx);
        assert!(d.pages.events.is_empty());
        assert_eq!(d.pages.changed_since(kind::OCP_PANIC, 0.0), Some(false));
        t.on_loose(
            OPC_GET_LOG_PAGE,
            0xc1,
            Reply::Data(c1::with_panic(0x9f, 2), 0),
        );
        poll_device(&t, &mut d, 160.0, &NoHostIo, &ctx);
        assert_eq!(d.pages.events.len(), 1);
        let e = &d.pages.events[0];
        assert_eq!((e.time, e.kind.as_str()), (160.0, kind::OCP_PANIC));
        assert!(e.detail.contains("0x51 -> 0x9f"), "{}", e.detail);
        assert_eq!(d.pages.changed_since(kind::OCP_PANIC, 100.0), Some(true));
        assert_eq!(d.pages.changed_since(kind::OCP_PANIC, 161.0), Some(false));
        // The count alone moving is one too; an unchanged page is not.
        t.on_loose(
            OPC_GET_LOG_PAGE,
            0xc1,
            Reply::Data(c1::with_panic(0x9f, 3), 0),
        );
        poll_device(&t, &mut d, 190.0, &NoHostIo, &ctx);
        poll_device(&t, &mut d, 220.0, &NoHostIo, &ctx);
        assert_eq!(d.pages.event_counts.get(kind::OCP_PANIC), Some(&2));
        assert_eq!(d.pages.events_since(170.0).len(), 1);
        assert_eq!(
            d.pages.changed_since(kind::TELEMETRY_GENERATION, 0.0),
            Some(false)
        );
    }

    #[test]
    fn a_telemetry_generation_change_is_a_drive_event() {
        let t = ocp_drive();
        let mut d = DeviceHealth::new(&ctrl());
        let ctx = RatingContext::default();
        poll_device(&t, &mut d, 100.0, &NoHostIo, &ctx);
        t.on_loose(OPC_GET_LOG_PAGE, 0x08, Reply::Data(tel::header(5), 0));
        poll_device(&t, &mut d, 130.0, &NoHostIo, &ctx);
        poll_device(&t, &mut d, 160.0, &NoHostIo, &ctx);
        assert_eq!(d.pages.events.len(), 1, "{:?}", d.pages.events);
        let e = &d.pages.events[0];
        assert_eq!(
            (e.time, e.kind.as_str()),
            (130.0, kind::TELEMETRY_GENERATION)
        );
        assert!(e.detail.contains("4 -> 5"), "{}", e.detail);
        assert_eq!(
            d.pages.changed_since(kind::TELEMETRY_GENERATION, 0.0),
            Some(true)
        );
        assert_eq!(d.pages.changed_since(kind::OCP_PANIC, 0.0), Some(false));
    }

    #[test]
    fn the_latency_monitor_is_enabled_once_when_the_config_asks() {
        let t = ocp_drive();
        t.on_loose(OPC_SET_FEATURES, 0xc5, Reply::Data(Vec::new(), 0));
        let mut d = DeviceHealth::new(&ctrl());
        let cfg = crate::nvme::log::ocp_latency::LatencyMonitorConfig {
            active_bucket_timer_threshold: 2016,
            thresholds: [5, 19, 30, 46],
            active_latency_config: 0x0fff,
            active_latency_min_window: 10,
        };
        let ctx = RatingContext {
            latency_monitor: Some(cfg),
            ..Default::default()
        };
        poll_device(&t, &mut d, 100.0, &NoHostIo, &ctx);
        poll_device(&t, &mut d, 130.0, &NoHostIo, &ctx);
        let sent = t.sent();
        let data = t.sent_data();
        let sets: Vec<usize> = (0..sent.len())
            .filter(|i| sent[*i].opcode == OPC_SET_FEATURES)
            .collect();
        assert_eq!(sets.len(), 1, "once per drive");
        let i = sets[0];
        assert_eq!(
            (sent[i].cdw10, sent[i].cdw14),
            (0xc5, 1),
            "FID C5h, SV=0, UUID index"
        );
        assert_eq!(
            &data[i][..13],
            &[0xe0, 0x07, 5, 19, 30, 46, 0xff, 0x0f, 10, 0, 0, 0, 1]
        );
        let first_c3 = sent
            .iter()
            .position(|c| c.opcode == OPC_GET_LOG_PAGE && c.cdw10 & 0xff == 0xc3)
            .expect("C3h read");
        assert!(i < first_c3, "enabled before the first C3h read");
        assert_eq!(d.pages.latency_monitor_set, Some(true));
        // A drive that refuses it: remembered, counted once, the page still read.
        let t2 = ocp_drive();
        t2.on_loose(OPC_SET_FEATURES, 0xc5, Reply::Status(0x0002));
        let mut d2 = DeviceHealth::new(&ctrl());
        poll_device(&t2, &mut d2, 100.0, &NoHostIo, &ctx);
        poll_device(&t2, &mut d2, 130.0, &NoHostIo, &ctx);
        assert_eq!(d2.pages.latency_monitor_set, Some(false));
        assert_eq!(d2.poll_errors.get(page::OCP_LATENCY_FEATURE), Some(&1));
        assert_eq!(d2.pages.latency_support, Support::Present);
    }

    #[test]
    fn a_known_page_refused_later_keeps_its_values_and_counts_an_error() {
        let t = ocp_drive();
        let mut d = DeviceHealth::new(&ctrl());
        let ctx = RatingContext::default();
        poll_device(&t, &mut d, 100.0, &NoHostIo, &ctx);
        t.on_loose(OPC_GET_LOG_PAGE, 0xc3, Reply::Status(INVALID_LOG_PAGE));
        poll_device(&t, &mut d, 130.0, &NoHostIo, &ctx);
        assert_eq!(d.pages.latency_support, Support::Present);
        assert!(d.pages.latency.is_some(), "last values kept");
        assert_eq!(d.poll_errors.get(page::OCP_LATENCY), Some(&1));
        t.clear_sent();
        poll_device(&t, &mut d, 160.0, &NoHostIo, &ctx);
        assert!(lids(&t).contains(&0xc3), "still asked for");
    }
}
