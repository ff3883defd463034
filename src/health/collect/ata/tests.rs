//! The ATA collector's polls: identity, attributes, status and Device Statistics, refusals
//! learnt once, failures keeping the last values, accounting, a hung disk, rescans.

use super::testdata::{disk, full_replay, good, status_regs};
use super::*;
use crate::ata::devstat::testdata as ds;
use crate::ata::smart::SmartStatus;
use crate::ata::transport::{Replay, Reply};
use crate::ata::vendor::{Family, WritesSource};
use crate::health::NoHostIo;

#[test]
fn a_poll_reads_identity_attributes_status_and_device_statistics() {
    let t = full_replay("/dev/sda");
    let d = poll_once(&t, &disk("sda"), &RatingContext::default(), &NoHostIo);
    assert!(d.up);
    assert_eq!(d.serial, "IW110SN0000000042");
    assert_eq!(d.model, "ZA3840NM10001 nvsoak handbuilt");
    assert_eq!(d.firmware, "SF1.2.3");
    assert_eq!(d.wwn, "naa.5000c500a1b2c3d4");
    assert_eq!(d.family, Some(Family::IronWolf110));
    let table = d.attributes.as_ref().expect("table");
    let a241 = table.iter().find(|a| a.id == 241).expect("241");
    assert_eq!(a241.name, "Lifetime_Wts_Frm_Hst_GB", "family names");
    assert_eq!(a241.raw, 0xabcd_ef01_2345);
    assert_eq!(
        table.iter().find(|a| a.id == 5).and_then(|a| a.thresh),
        Some(10)
    );
    assert_eq!(d.smart_status, Some(SmartStatus::Passed));
    let s = d.devstat.as_ref().expect("devstat");
    assert_eq!(s.bytes_written, Some(7_000_000_000 * 512));
    assert_eq!(s.percentage_used, Some(104));
    assert_eq!(
        d.lifetime_written,
        Some((7_000_000_000u128 * 512, WritesSource::DeviceStatistics))
    );
    assert!(d.poll_errors.is_empty(), "{:?}", d.poll_errors);
    assert!(d.unsupported.is_empty(), "{:?}", d.unsupported);
    let sent: Vec<(u8, u16)> = t.sent().iter().map(|c| (c.command, c.features)).collect();
    assert_eq!(
        sent[..4],
        [(0xec, 0), (0xb0, 0xd0), (0xb0, 0xd1), (0xb0, 0xda)],
        "IDENTIFY, SMART data, thresholds, status, then the log pages"
    );
    assert_eq!(sent.len(), 4 + 6);
}

/// The IronWolf 110 entry of config/drives.toml matches the model string the drive
/// reports, and its 7,000 TBW rating for 3.84 TB feeds the endurance figures.
#[test]
fn the_ironwolf_110_rating_gives_endurance_and_of_rated() {
    let t = full_replay("/dev/sda");
    let d = poll_once(&t, &disk("sda"), &RatingContext::default(), &NoHostIo);
    let r = d.derived.rated.as_ref().expect("rated");
    assert_eq!(r.series.as_deref(), Some("Seagate IronWolf 110"));
    assert_eq!(r.bytes, Some(7_000e12));
    assert_eq!(r.warranty_years, Some(5.0));
    assert_eq!(r.capacity_bytes, Some(3_840e9));
    let consumed = d.derived.endurance_consumed_ratio.expect("of rated");
    assert!(
        (consumed - 7_000_000_000.0 * 512.0 / 7_000e12).abs() < 1e-12,
        "{consumed}"
    );
    // The bare model numbers other capacities report match too.
    let table = crate::nvme::ratings::RatingsTable::builtin();
    for (m, cap, tbw) in [
        ("ZA240NM10001", 240_057_409_536u64, Some(438e12)),
        ("ZA480NM10011", 480_103_981_056, None),
    ] {
        let row = table.lookup(m, cap).expect(m);
        assert_eq!(row.series, "IronWolf 110", "{m}");
        if let Some(tbw) = tbw {
            assert_eq!(row.tbw_bytes, Some(tbw), "{m}");
        } else {
            assert!(row.tbw_bytes.is_some_and(|b| b > 0.0), "{m}: from 1 DWPD");
        }
    }
}

#[test]
fn devstat_refused_is_unsupported_once_and_polling_continues() {
    // QEMU aborts READ LOG EXT of log 04h.
    let t = full_replay("/dev/sda");
    t.on(&cmd::read_devstat_page(0), Reply::Abort);
    let mut d = AtaHealth::new(&disk("sda"));
    let mut warned = false;
    let ctx = RatingContext::default();
    poll_disk(&t, &mut d, 0.0, &NoHostIo, &ctx, &mut warned);
    assert!(d.up);
    assert!(!d.supports(feature::DEVSTAT));
    assert!(
        d.unsupported[feature::DEVSTAT].contains("not supported by the drive"),
        "{:?}",
        d.unsupported
    );
    assert!(
        d.poll_errors.is_empty(),
        "not a poll error: {:?}",
        d.poll_errors
    );
    let first = t.sent().len();
    poll_disk(&t, &mut d, 30.0, &NoHostIo, &ctx, &mut warned);
    let again: Vec<u8> = t.sent()[first..].iter().map(|c| c.command).collect();
    assert_eq!(again, [0xb0, 0xb0, 0xb0], "SMART only: no IDENTIFY, no log");
    assert!(d.up && d.devstat.is_none());
    // Without Device Statistics, lifetime writes come from attribute 241 (GiB).
    assert_eq!(
        d.lifetime_written,
        Some((0xabcd_ef01_2345u128 << 30, WritesSource::Attribute241))
    );
    assert_eq!(
        d.derived.write_amplification,
        Some(0x1_2345_6789u64 as f64 / 0xabcd_ef01_2345u64 as f64),
        "233 / 241"
    );
}

#[test]
fn a_failing_drive_and_a_failed_read_keep_their_last_values() {
    let t = full_replay("/dev/sda");
    t.on(
        &cmd::smart_return_status(),
        Reply::Regs(Vec::new(), status_regs(false)),
    );
    let mut d = AtaHealth::new(&disk("sda"));
    let mut warned = false;
    let ctx = RatingContext::default();
    poll_disk(&t, &mut d, 0.0, &NoHostIo, &ctx, &mut warned);
    assert_eq!(d.smart_status, Some(SmartStatus::ThresholdExceeded));
    t.on(&cmd::smart_read_data(), Reply::Errno(libc::EIO));
    poll_disk(&t, &mut d, 30.0, &NoHostIo, &ctx, &mut warned);
    assert!(!d.up, "ata_up follows SMART READ DATA");
    assert!(d.attributes.is_some(), "last table kept");
    assert_eq!(d.poll_errors.get(page::SMART), Some(&1));
    assert!(d.supports(feature::SMART), "an I/O error is not a refusal");
}

#[test]
fn without_cap_sys_rawio_every_disk_fails_with_one_message() {
    let t = Replay::new("/dev/sda");
    t.on(&cmd::identify(), Reply::Errno(libc::EPERM));
    t.on(&cmd::smart_read_data(), Reply::Errno(libc::EPERM));
    let ctx = RatingContext::default();
    let mut warned = false;
    let mut a = AtaHealth::new(&disk("sda"));
    let mut b = AtaHealth::new(&disk("sdb"));
    poll_disk(&t, &mut a, 0.0, &NoHostIo, &ctx, &mut warned);
    assert!(warned, "logged");
    poll_disk(&t, &mut b, 0.0, &NoHostIo, &ctx, &mut warned);
    for d in [&a, &b] {
        assert!(!d.up);
        assert_eq!(d.poll_errors.get(page::IDENTIFY), Some(&1));
        assert!(
            d.last_error
                .as_deref()
                .is_some_and(|m| m.contains("CAP_SYS_RAWIO")),
            "{:?}",
            d.last_error
        );
    }
}

#[test]
fn accounting_and_throttling_come_from_the_drive_figures() {
    let t = full_replay("/dev/sda");
    let mut d = AtaHealth::new(&disk("sda"));
    let mut warned = false;
    let ctx = RatingContext::default();
    let host = |w: u64| {
        vec![
            HostIo {
                path: "/dev/sda1".into(),
                written_bytes: w,
                iops: 50.0,
                ..Default::default()
            },
            HostIo {
                path: "/dev/sdb".into(),
                written_bytes: 999,
                ..Default::default()
            },
        ]
    };
    poll_disk(&t, &mut d, 0.0, &host(0), &ctx, &mut warned);
    let mut page = ds::general();
    let sectors = 7_000_000_000u64 + 2_000;
    page[24..32].copy_from_slice(&(ds::OK | sectors).to_le_bytes());
    t.on(&cmd::read_devstat_page(1), Reply::Regs(page, good()));
    poll_disk(&t, &mut d, 86_400.0, &host(1_024_000), &ctx, &mut warned);
    let a = d.derived.accounting.expect("accounting");
    assert_eq!(a.host_written_bytes, 1_024_000.0);
    assert_eq!(a.drive_written_bytes, 1_024_000.0, "2000 sectors of 512");
    assert_eq!(a.ratio, Some(1.0));
    let dwpd = d.derived.observed_dwpd_soak.expect("dwpd");
    assert!((dwpd - 1_024_000.0 / 3_840e9).abs() < 1e-12, "{dwpd}");
    // 41 °C, no valid specified maximum (80h), time over temperature unchanged.
    assert!(!d.derived.throttle.throttling);
    assert_eq!(d.derived.throttle.unthrottled_iops, Some(50.0));
}

/// A disk whose commands block until the gate opens: a hung SG_IO.
struct Hung {
    inner: Replay,
    open: Arc<(std::sync::Mutex<bool>, std::sync::Condvar)>,
}

impl AtaTransport for Hung {
    fn device(&self) -> String {
        self.inner.device()
    }
    fn ata(
        &self,
        cmd: &crate::ata::AtaCmd,
        buf: &mut [u8],
    ) -> Result<crate::ata::AtaRegs, AtaError> {
        let (lock, cv) = &*self.open;
        let mut open = lock.lock().unwrap_or_else(|e| e.into_inner());
        while !*open {
            open = cv.wait(open).unwrap_or_else(|e| e.into_inner());
        }
        drop(open);
        self.inner.ata(cmd, buf)
    }
}

/// One hung SATA disk does not hold up the others: they are polled every round, it is
/// down with `timeout` errors and a poll duration, and its late answer is taken.
#[test]
fn a_hung_disk_does_not_hold_up_the_others() {
    let root = tempfile::tempdir().expect("tempdir");
    for n in ["sda", "sdb", "sdc"] {
        crate::ata::discover::fake::add_disk(root.path(), n, "ATA", "ZA3840NM10001", "");
    }
    let good = Arc::new(full_replay("/dev/sda"));
    let open = Arc::new((std::sync::Mutex::new(false), std::sync::Condvar::new()));
    let o = open.clone();
    let opener: AtaOpener = Arc::new(move |d: &AtaDisk| {
        if d.name == "sdb" {
            let inner = full_replay("/dev/sdb");
            return Ok(Box::new(Hung {
                inner,
                open: o.clone(),
            }) as Box<dyn AtaTransport>);
        }
        Ok(Box::new(Arc::clone(&good)) as Box<dyn AtaTransport>)
    });
    let mut s = crate::config::builtin_default().health;
    s.poll_interval = std::time::Duration::from_millis(400);
    let mut p = crate::health::Poller::new(s, root.path(), crate::health::poller::ioctl_opener())
        .with_ata_opener(opener);
    for round in 1..=3u64 {
        p.poll_at(round as f64, Arc::new(NoHostIo));
        for n in ["sda", "sdc"] {
            let d = p.ata_disk(n).expect("listed");
            assert_eq!(d.polls, round, "{n} polled every round");
            assert!(d.up, "{n} up");
        }
        let h = p.ata_disk("sdb").expect("listed");
        assert!(!h.up && h.polls == 0);
        assert_eq!(h.poll_errors.get(page::TIMEOUT).copied(), Some(round));
        assert!(h.poll_duration_seconds.unwrap_or(0.0) > 0.0);
    }
    {
        let (lock, cv) = &*open;
        *lock.lock().unwrap_or_else(|e| e.into_inner()) = true;
        cv.notify_all();
    }
    let mut rounds = 0;
    while p.ata_disk("sdb").is_some_and(|d| d.polls < 2) {
        rounds += 1;
        assert!(rounds < 200, "the released disk's answer never arrived");
        p.poll_at(10.0 + rounds as f64, Arc::new(NoHostIo));
    }
    let h = p.ata_disk("sdb").expect("listed");
    assert!(h.up, "answered once released");
    assert!(h.poll_errors.get(page::TIMEOUT).copied().unwrap_or(0) >= 3);
    let text = crate::metrics::encode_text(&crate::metrics::health::families(&p.snapshot()))
        .expect("encode");
    assert!(
        text.contains("nvsoak_health_poll_errors_total{device=\"sdb\",log=\"timeout\"}"),
        "{text}"
    );
    assert!(text.contains("nvsoak_health_device_poll_duration_seconds{device=\"sda\"}"));
}

#[test]
fn the_poller_finds_ata_disks_in_sysfs_and_follows_them() {
    let root = tempfile::tempdir().expect("tempdir");
    crate::ata::discover::fake::add_disk(
        root.path(),
        "sda",
        "ATA",
        "ZA3840NM10001",
        "naa.5000c500a1b2c3d4",
    );
    crate::ata::discover::fake::add_disk(root.path(), "sdb", "Samsung", "T5", "");
    let t = Arc::new(full_replay("/dev/sda"));
    let opener: AtaOpener =
        Arc::new(move |_d: &AtaDisk| Ok(Box::new(Arc::clone(&t)) as Box<dyn AtaTransport>));
    let mut s = crate::config::builtin_default().health;
    s.rescan_interval = std::time::Duration::ZERO;
    let mut p = crate::health::Poller::new(s, root.path(), crate::health::poller::ioctl_opener())
        .with_ata_opener(opener);
    p.poll_at(0.0, Arc::new(NoHostIo));
    let snap = p.snapshot();
    assert_eq!(snap.ata.len(), 1, "the USB-bridged disk is not listed");
    assert!(snap.ata[0].up);
    assert!(snap.devices.is_empty());
    std::fs::remove_dir_all(root.path().join("block/sda")).expect("unplug");
    p.poll_at(30.0, Arc::new(NoHostIo));
    let d = p.ata_disk("sda").expect("still listed");
    assert!(!d.present && !d.up);
    assert!(d.attributes.is_some(), "last values kept");
}
