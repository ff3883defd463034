//! The health poller: runs the collectors (`health::collect`: NVMe controllers and SATA
//! disks) and the PCIe scan in one pass, keeps their drives, and publishes an immutable
//! [`HealthSnapshot`].
//!
//! [`Poller`] is synchronous (one poll = a few commands per drive); [`spawn`] runs it on tokio
//! with the ioctls in `spawn_blocking`.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use super::HostIoSource;
use super::collect::ata::{self, AtaCollector, AtaHealth};
use super::collect::nvme::{DeviceHealth, NvmeCollector};
use super::collect::{Collector, RatingContext};
use crate::config::HealthSettings;
use crate::nvme::discover::Filter;
use crate::nvme::ratings::RatingsTable;

pub use super::collect::nvme::{Opener, ioctl_opener};

/// Everything the poller knows, as of its last poll.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct HealthSnapshot {
    pub devices: Vec<DeviceHealth>,
    /// SATA disks (`ata_*` metrics), polled in the same pass.
    pub ata: Vec<AtaHealth>,
    /// Unix time at the end of the last poll.
    pub poll_timestamp_seconds: Option<f64>,
    pub poll_duration_seconds: Option<f64>,
    pub polls: u64,
    /// Why discovery or setup failed, if it did (bad regex, unreadable sysfs or ratings).
    pub setup_error: Option<String>,
    /// PCIe topology, link figures and AER counters of the controllers (`pcie::scan`).
    pub pcie: crate::pcie::PcieSnapshot,
}

impl HealthSnapshot {
    /// The drives to remember for the next run: every controller known now.
    pub fn known(&self) -> Vec<super::known::KnownDrive> {
        self.devices
            .iter()
            .map(|d| super::known::KnownDrive {
                name: d.name.clone(),
                serial: d.serial.clone(),
                model: d.model.clone(),
                firmware: d.firmware.clone(),
            })
            .collect()
    }
}

pub use crate::util::unix_now;

/// The synchronous poller: discovery, rescans, the collectors' drives.
pub struct Poller {
    settings: HealthSettings,
    sysfs_root: PathBuf,
    filter: Option<Filter>,
    ratings: Arc<RatingContext>,
    nvme: NvmeCollector,
    ata: AtaCollector,
    last_rescan: Option<Instant>,
    polls: u64,
    last_timestamp: Option<f64>,
    last_duration: Option<f64>,
    setup_error: Option<String>,
    pcie: crate::pcie::PcieSnapshot,
}

impl Poller {
    /// Setup errors (a bad regex, an unreadable ratings file) are kept and exported in the
    /// snapshot rather than stopping the daemon; a bad filter polls nothing.
    pub fn new(settings: HealthSettings, sysfs_root: &Path, opener: Opener) -> Self {
        let mut setup_error = None;
        let filter = match Filter::new(&settings.include, &settings.exclude) {
            Ok(f) => Some(f),
            Err(e) => {
                setup_error = Some(e.to_string());
                None
            }
        };
        let table = match RatingsTable::load(settings.ratings_file.as_deref()) {
            Ok(t) => t,
            Err(e) => {
                setup_error.get_or_insert(format!("{e}; using the built-in table"));
                RatingsTable::builtin()
            }
        };
        if setup_error.is_none() {
            setup_error = crate::pcie::unknown_card_rating(&settings.cards, &table);
        }
        if let Some(e) = &setup_error {
            tracing::error!("health: {e}");
        }
        Poller {
            ratings: Arc::new(RatingContext {
                table,
                overrides: settings.devices.clone(),
                latency_monitor: settings.latency_monitor,
            }),
            settings,
            sysfs_root: sysfs_root.to_path_buf(),
            filter,
            nvme: NvmeCollector::new(opener),
            ata: AtaCollector::new(ata::sgio_opener()),
            last_rescan: None,
            polls: 0,
            last_timestamp: None,
            last_duration: None,
            setup_error,
            pcie: Default::default(),
        }
    }

    /// Reach ATA disks through `opener` instead of `SG_IO` (tests use the replay transport).
    pub fn with_ata_opener(mut self, opener: ata::AtaOpener) -> Self {
        self.ata = AtaCollector::new(opener);
        self
    }

    /// Drives an earlier run knew (`health::known`): each not known yet is kept as vanished
    /// (`present = false`, exported `nvme_up 0`) until a rescan finds it again.
    pub fn remember(&mut self, drives: &[super::known::KnownDrive]) {
        self.nvme.remember(drives);
    }

    /// Walk sysfs: new drives are added, vanished ones stay with `present = false`.
    pub fn rescan(&mut self) {
        self.last_rescan = Some(Instant::now());
        let Some(filter) = self.filter.as_ref() else {
            return; // a bad include/exclude rule polls nothing (see setup_error)
        };
        let collectors: [&mut dyn Collector; 2] = [&mut self.nvme, &mut self.ata];
        for c in collectors {
            c.rescan(&self.sysfs_root, filter);
        }
    }

    fn rescan_due(&self) -> bool {
        self.last_rescan
            .is_none_or(|t| t.elapsed() >= self.settings.rescan_interval)
    }

    /// One poll of every present drive (rescanning first when due), at Unix time `now`.
    /// Drives are polled concurrently, each on its own thread; one that has not answered
    /// within half the poll interval is left running and reported (`health::inflight`).
    pub fn poll_at(&mut self, now: f64, host: Arc<dyn HostIoSource>) {
        let start = Instant::now();
        if self.rescan_due() {
            self.rescan();
        }
        let deadline = start + super::inflight::deadline_for(self.settings.poll_interval);
        let collectors: [&mut dyn Collector; 2] = [&mut self.nvme, &mut self.ata];
        for c in collectors {
            c.poll(now, &host, &self.ratings, deadline);
        }
        self.scan_pcie(now);
        self.polls += 1;
        self.last_duration = Some(start.elapsed().as_secs_f64());
        self.last_timestamp = Some(unix_now());
    }

    /// Topology, link figures and AER counters of the present controllers, read on every poll
    /// (sysfs only: no ioctl, so a hung controller does not hold it up).
    fn scan_pcie(&mut self, now: f64) {
        let present = self.nvme.present();
        let names: Vec<String> = present.iter().map(|(n, _)| n.clone()).collect();
        let mut snap = crate::pcie::scan(&self.sysfs_root, &names, Some(&self.pcie), now);
        crate::pcie::rate_cards(
            &mut snap,
            &self.settings.cards,
            &self.ratings.table,
            &present,
        );
        self.pcie = snap;
    }

    pub fn poll(&mut self, host: Arc<dyn HostIoSource>) {
        self.poll_at(unix_now(), host);
    }

    /// Whether controller `name` has a poll still running past its deadline.
    pub fn is_polling(&self, name: &str) -> bool {
        self.nvme.is_polling(name)
    }

    pub fn snapshot(&self) -> HealthSnapshot {
        HealthSnapshot {
            devices: self.nvme.snapshot(),
            ata: self.ata.snapshot(),
            poll_timestamp_seconds: self.last_timestamp,
            poll_duration_seconds: self.last_duration,
            polls: self.polls,
            setup_error: self.setup_error.clone(),
            pcie: self.pcie.clone(),
        }
    }

    pub fn device(&self, name: &str) -> Option<&DeviceHealth> {
        self.nvme.device(name)
    }

    pub fn ata_disk(&self, name: &str) -> Option<&AtaHealth> {
        self.ata.disk(name)
    }
}

/// The daemon's view of the background poller. Cheap to clone.
#[derive(Clone)]
pub struct HealthHandle {
    snap: Arc<RwLock<Arc<HealthSnapshot>>>,
    kick: Arc<tokio::sync::Notify>,
}

impl HealthHandle {
    /// The latest poll's snapshot (empty before the first poll completes).
    pub fn snapshot(&self) -> Arc<HealthSnapshot> {
        self.snap
            .read()
            .map(|g| Arc::clone(&g))
            .unwrap_or_else(|p| Arc::clone(&p.into_inner()))
    }

    /// Ask for a poll now instead of at the next interval.
    pub fn poll_now(&self) {
        self.kick.notify_one();
    }

    /// Wait until a snapshot with at least `polls` polls is published, or `timeout` passes.
    pub async fn wait_for_polls(
        &self,
        polls: u64,
        timeout: Duration,
    ) -> Option<Arc<HealthSnapshot>> {
        let deadline = Instant::now() + timeout;
        loop {
            let s = self.snapshot();
            if s.polls >= polls {
                return Some(s);
            }
            if Instant::now() >= deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// Start the background poller on the current tokio runtime; it stops when `stop` turns true
/// or its sender is dropped. With `settings.enabled` false it publishes an empty snapshot and
/// never polls.
pub fn spawn(
    settings: HealthSettings,
    host: Arc<dyn HostIoSource>,
    stop: tokio::sync::watch::Receiver<bool>,
) -> HealthHandle {
    spawn_with(settings, host, stop, PathBuf::from("/sys"), ioctl_opener())
}

/// [`spawn`] with the sysfs root and the transport opener chosen by the caller (tests use a
/// fake sysfs tree and the replay transport).
pub fn spawn_with(
    settings: HealthSettings,
    host: Arc<dyn HostIoSource>,
    stop: tokio::sync::watch::Receiver<bool>,
    sysfs_root: PathBuf,
    opener: Opener,
) -> HealthHandle {
    if !settings.enabled {
        return HealthHandle {
            snap: Arc::new(RwLock::new(Arc::new(HealthSnapshot::default()))),
            kick: Arc::new(tokio::sync::Notify::new()),
        };
    }
    spawn_prepared(Poller::new(settings, &sysfs_root, opener), host, stop)
}

/// [`spawn_with`] for a poller built (and maybe polled) by the caller: the daemon polls once
/// before its targets start, for a soak-start baseline taken before the first write. Its
/// snapshot is published at once; the background loop polls again right away.
pub fn spawn_prepared(
    poller: Poller,
    host: Arc<dyn HostIoSource>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) -> HealthHandle {
    let handle = HealthHandle {
        snap: Arc::new(RwLock::new(Arc::new(poller.snapshot()))),
        kick: Arc::new(tokio::sync::Notify::new()),
    };
    if !poller.settings.enabled {
        return handle;
    }
    let h = handle.clone();
    let interval = poller.settings.poll_interval.max(Duration::from_millis(10));
    tokio::spawn(async move {
        let mut poller = Some(poller);
        loop {
            if *stop.borrow() {
                break;
            }
            let Some(mut p) = poller.take() else { break };
            let src = host.clone();
            let began = Instant::now();
            let joined = tokio::task::spawn_blocking(move || {
                p.poll(src);
                let snap = p.snapshot();
                (p, snap)
            })
            .await;
            match joined {
                Ok((p, snap)) => {
                    poller = Some(p);
                    if let Ok(mut g) = h.snap.write() {
                        *g = Arc::new(snap);
                    }
                }
                Err(e) => {
                    tracing::error!("health: the poll task failed: {e}; health polling stops");
                    break;
                }
            }
            // Polls start an interval apart, however long this one took.
            let rest = interval.saturating_sub(began.elapsed());
            tokio::select! {
                _ = tokio::time::sleep(rest) => {}
                _ = h.kick.notified() => {}
                r = stop.changed() => { if r.is_err() { break; } }
            }
        }
    });
    handle
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::health::NoHostIo;
    use crate::health::collect::nvme::page;
    use crate::health::collect::nvme::tests::full_replay;
    use crate::nvme::discover::{Controller, fake};
    use crate::nvme::replay::ReplayTransport;
    use crate::nvme::{AdminTransport, NvmeError};

    /// A poller over the fake sysfs tree at `root`, rescanning at every poll, every controller
    /// answered by the same replayed drive.
    fn replay_poller(root: &Path) -> Poller {
        let t: Arc<ReplayTransport> = Arc::new(full_replay("/dev/nvme0"));
        let opener: Opener =
            Arc::new(
                move |_c: &Controller| Ok(Box::new(Arc::clone(&t)) as Box<dyn AdminTransport>),
            );
        let mut s = crate::config::builtin_default().health;
        s.rescan_interval = Duration::ZERO;
        Poller::new(s, root, opener)
    }

    /// A controller whose admin commands block until the test opens the gate: a hung ioctl.
    struct Hung {
        inner: Arc<ReplayTransport>,
        open: Arc<(std::sync::Mutex<bool>, std::sync::Condvar)>,
    }

    impl AdminTransport for Hung {
        fn device(&self) -> String {
            self.inner.device()
        }
        fn admin(&self, cmd: &crate::nvme::AdminCmd, data: &mut [u8]) -> Result<u32, NvmeError> {
            let (lock, cv) = &*self.open;
            let mut open = lock.lock().unwrap_or_else(|e| e.into_inner());
            while !*open {
                open = cv.wait(open).unwrap_or_else(|e| e.into_inner());
            }
            drop(open);
            self.inner.admin(cmd, data)
        }
    }

    /// One hung controller among several: the others are polled at every poll, the hung one is
    /// reported (down, `timeout` errors, a growing poll duration) and not polled twice at once,
    /// and its late answer is taken once it comes.
    #[test]
    fn a_hung_controller_does_not_hold_up_the_others() {
        let root = tempfile::tempdir().expect("tempdir");
        for i in 0..6 {
            fake::add_ctrl(
                root.path(),
                &format!("nvme{i}"),
                &format!("S{i}"),
                "M",
                &[1],
            );
        }
        let good: Arc<ReplayTransport> = Arc::new(full_replay("/dev/nvme0"));
        let open = Arc::new((std::sync::Mutex::new(false), std::sync::Condvar::new()));
        let opened_hung = Arc::new(std::sync::atomic::AtomicU32::new(0));
        let (g, o, n) = (good.clone(), open.clone(), opened_hung.clone());
        let opener: Opener = Arc::new(move |c: &Controller| {
            if c.name == "nvme3" {
                n.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let inner = Arc::new(full_replay("/dev/nvme3"));
                let open = o.clone();
                return Ok(Box::new(Hung { inner, open }) as Box<dyn AdminTransport>);
            }
            Ok(Box::new(Arc::clone(&g)) as Box<dyn AdminTransport>)
        });
        let mut s = crate::config::builtin_default().health;
        s.poll_interval = Duration::from_millis(400); // deadline 200 ms
        let mut p = Poller::new(s, root.path(), opener);
        for round in 1..=3u64 {
            p.poll_at(round as f64, Arc::new(NoHostIo));
            for i in [0, 1, 2, 4, 5] {
                let d = p.device(&format!("nvme{i}")).expect("listed");
                assert_eq!(d.polls, round, "nvme{i} polled every round");
                assert!(d.up, "nvme{i} up");
                assert_eq!(d.poll_errors.get(page::TIMEOUT), None);
            }
            let h = p.device("nvme3").expect("listed");
            assert!(!h.up, "the hung controller is down");
            assert_eq!(h.polls, 0);
            assert_eq!(h.poll_errors.get(page::TIMEOUT).copied(), Some(round));
            assert!(h.poll_duration_seconds.unwrap_or(0.0) > 0.0);
            assert!(p.is_polling("nvme3"));
        }
        assert_eq!(
            opened_hung.load(std::sync::atomic::Ordering::SeqCst),
            1,
            "no second poll piles up behind the hung one"
        );
        let stuck_for = p.device("nvme3").and_then(|d| d.poll_duration_seconds);
        // Release it: its thread finishes, and the next poll takes the answer first.
        {
            let (lock, cv) = &*open;
            *lock.lock().unwrap_or_else(|e| e.into_inner()) = true;
            cv.notify_all();
        }
        let mut rounds = 0;
        while p.is_polling("nvme3") || p.device("nvme3").is_some_and(|d| d.polls < 2) {
            rounds += 1;
            assert!(
                rounds < 200,
                "the released controller's answer never arrived"
            );
            p.poll_at(10.0 + rounds as f64, Arc::new(NoHostIo));
        }
        let h = p.device("nvme3").expect("listed");
        assert!(h.up, "answered once released");
        assert_eq!(h.serial, "SN-HANDBUILT-0001");
        assert!(
            h.poll_errors.get(page::TIMEOUT).copied().unwrap_or(0) >= 3,
            "timeouts kept"
        );
        assert!(
            h.poll_duration_seconds < stuck_for,
            "a normal poll's duration again"
        );
        let snap = p.snapshot();
        let text =
            crate::metrics::encode_text(&crate::metrics::health::families(&snap)).expect("encode");
        assert!(
            text.contains("nvsoak_health_poll_errors_total{device=\"nvme3\",log=\"timeout\"}"),
            "{text}"
        );
        assert!(text.contains("nvsoak_health_device_poll_duration_seconds{device=\"nvme0\"}"));
    }

    #[test]
    fn vanished_drive_stays_with_up_zero_and_returns() {
        let root = tempfile::tempdir().expect("tempdir");
        fake::add_ctrl(root.path(), "nvme0", "SN-HANDBUILT-0001", "M", &[1]);
        let mut p = replay_poller(root.path());
        p.poll_at(0.0, Arc::new(NoHostIo));
        assert!(p.device("nvme0").expect("found").up);
        std::fs::remove_dir_all(root.path().join("class/nvme/nvme0")).expect("unplug");
        p.poll_at(30.0, Arc::new(NoHostIo));
        let d = p.device("nvme0").expect("still listed");
        assert!(!d.present);
        assert!(!d.up);
        assert!(d.smart.is_some(), "last values kept");
        fake::add_ctrl(root.path(), "nvme0", "SN-HANDBUILT-0001", "M", &[1]);
        fake::add_ctrl(root.path(), "nvme1", "S2", "M", &[1]);
        p.poll_at(60.0, Arc::new(NoHostIo));
        assert!(p.device("nvme0").expect("back").up);
        assert!(p.device("nvme1").is_some(), "hot-added drive appears");
        assert_eq!(p.snapshot().polls, 3);
    }

    #[test]
    fn drive_returning_under_a_new_name_carries_over_and_drops_the_old_name() {
        let root = tempfile::tempdir().expect("tempdir");
        fake::add_ctrl(root.path(), "nvme0", "SN-HANDBUILT-0001", "M", &[1]);
        fake::add_ctrl(root.path(), "nvme1", "SN-OTHER", "M", &[1]);
        let mut p = replay_poller(root.path());
        p.poll_at(0.0, Arc::new(NoHostIo));
        let serial = p.device("nvme0").expect("found").serial.clone();
        std::fs::remove_dir_all(root.path().join("class/nvme/nvme0")).expect("unplug");
        p.poll_at(30.0, Arc::new(NoHostIo));
        assert!(!p.device("nvme0").expect("still listed").present);
        // Back as nvme2 (nvme1 is another drive, present all along).
        fake::add_ctrl(root.path(), "nvme2", &serial, "M", &[1]);
        p.poll_at(60.0, Arc::new(NoHostIo));
        assert!(p.device("nvme0").is_none(), "the old name's entry is gone");
        let d = p.device("nvme2").expect("returned");
        assert!(d.present && d.up);
        assert_eq!(d.name, "nvme2");
        assert_eq!(d.namespaces[0].name, "nvme2n1");
        assert_eq!(
            d.history.len(),
            2,
            "the write history carried over (a fresh entry would have one sample)"
        );
        assert!(p.device("nvme1").is_some_and(|d| d.present));
        assert_eq!(p.snapshot().devices.len(), 2);
    }

    #[test]
    fn drives_an_earlier_run_knew_are_exported_down_until_found() {
        let root = tempfile::tempdir().expect("tempdir");
        fake::add_ctrl(root.path(), "nvme0", "SN-HANDBUILT-0001", "M", &[1]);
        let mut first = replay_poller(root.path());
        first.poll_at(0.0, Arc::new(NoHostIo));
        let mut known = first.snapshot().known();
        known.push(super::super::known::KnownDrive {
            name: "nvme7".into(),
            serial: "GONE7".into(),
            model: "OLD MODEL".into(),
            firmware: "F7".into(),
        });
        // The next run: nvme7 is not in sysfs any more.
        let mut p = replay_poller(root.path());
        p.remember(&known);
        p.poll_at(30.0, Arc::new(NoHostIo));
        let gone = p.device("nvme7").expect("remembered");
        assert!(!gone.present && !gone.up);
        assert!(p.device("nvme0").expect("found").up);
        let text = crate::metrics::encode_text(&crate::metrics::health::families(&p.snapshot()))
            .expect("encode");
        assert!(text.contains("nvme_up{device=\"nvme7\"} 0"), "{text}");
        assert!(
            text.lines()
                .any(|l| l.starts_with("nvme_info{") && l.contains("GONE7") && l.contains("nvme7")),
            "{text}"
        );
        // It comes back: up again, under its name.
        fake::add_ctrl(root.path(), "nvme7", "GONE7", "OLD MODEL", &[1]);
        p.poll_at(60.0, Arc::new(NoHostIo));
        assert!(p.device("nvme7").expect("back").up);
    }
}
