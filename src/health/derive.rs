//! Endurance and thermal derivations. Pure: they see numbers and times, never a device.

use std::collections::VecDeque;

use crate::config::DeviceRatingOverride;
use crate::nvme::ratings::{Performance, RatingsTable, tbw_from_dwpd};

pub const DATA_UNIT_BYTES: f64 = 512_000.0;
pub const DAY_SECONDS: f64 = 86_400.0;
pub const YEAR_SECONDS: f64 = 365.0 * DAY_SECONDS;

/// Where the rated endurance came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RatingSource {
    Config,
    Table,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct RatedEndurance {
    /// Rated bytes written over the warranty (None when the sheet gives neither TBW nor a
    /// warranty period).
    pub bytes: Option<f64>,
    pub dwpd: Option<f64>,
    pub warranty_years: Option<f64>,
    /// The capacity the DWPD refers to (rated, else the drive's own).
    pub capacity_bytes: Option<f64>,
    pub source: RatingSource,
    /// "Vendor series" when the table matched.
    pub series: Option<String>,
    pub perf: Option<Performance>,
}

fn override_matches(m: &str, name: &str, serial: &str, model: &str) -> bool {
    match m.strip_prefix("re:") {
        Some(p) => regex::Regex::new(p).is_ok_and(|r| r.is_match(model)),
        None => m == name || (!serial.is_empty() && m == serial) || m == model,
    }
}

/// Rated endurance: the first matching config override (rated TBW, or DWPD x warranty years x
/// capacity x 365), its gaps filled from the ratings table; else the table alone. `None` when
/// neither knows the drive.
pub fn rated_endurance(
    overrides: &[DeviceRatingOverride],
    table: &RatingsTable,
    name: &str,
    serial: &str,
    model: &str,
    drive_capacity_bytes: u64,
) -> Option<RatedEndurance> {
    let row = table.lookup(model, drive_capacity_bytes);
    let series = row.as_ref().map(|r| format!("{} {}", r.vendor, r.series));
    let perf = row.as_ref().map(|r| r.perf.clone());
    let drive_cap = (drive_capacity_bytes > 0).then_some(drive_capacity_bytes);
    let o = overrides
        .iter()
        .find(|o| override_matches(&o.matcher, name, serial, model));
    if o.is_none() && row.is_none() {
        return None;
    }
    let dwpd = o
        .and_then(|o| o.rated_dwpd)
        .or(row.as_ref().and_then(|r| r.dwpd));
    let years = o
        .and_then(|o| o.warranty_years)
        .or(row.as_ref().and_then(|r| r.warranty_years));
    let capacity = o
        .and_then(|o| o.capacity_bytes)
        .or(row.as_ref().and_then(|r| r.capacity_bytes))
        .or(drive_cap)
        .map(|c| c as f64);
    let computed = match (dwpd, years, capacity) {
        (Some(w), Some(y), Some(c)) => Some(tbw_from_dwpd(w, c, y)),
        _ => None,
    };
    let bytes = match o {
        // An override's own TBW, else its DWPD (or the table's) over the warranty.
        Some(o) => o
            .rated_tbw_bytes
            .map(|b| b as f64)
            .or(if o.rated_dwpd.is_some() {
                computed
            } else {
                None
            })
            .or(row.as_ref().and_then(|r| r.tbw_bytes))
            .or(computed),
        None => row.as_ref().and_then(|r| r.tbw_bytes),
    };
    let dwpd = dwpd.or(match (bytes, years, capacity) {
        (Some(b), Some(y), Some(c)) if y > 0.0 && c > 0.0 => Some(b / (c * 365.0 * y)),
        _ => None,
    });
    Some(RatedEndurance {
        bytes,
        dwpd,
        warranty_years: years,
        capacity_bytes: capacity,
        source: if o.is_some() {
            RatingSource::Config
        } else {
            RatingSource::Table
        },
        series,
        perf,
    })
}

/// At most this many (time, data units written) samples are kept; past it, every other old
/// sample is dropped.
pub const HISTORY_CAP: usize = 4096;

/// The write history of one drive over the soak: the first sample, and the samples of the
/// last 24 h (plus the one just before, so the window is covered). Kept in bytes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WriteHistory {
    first: Option<(f64, u128)>,
    recent: VecDeque<(f64, u128)>,
    pu_first: Option<(f64, u8)>,
}

impl WriteHistory {
    /// An NVMe sample: data units written (of 512 000 bytes) and percentage used.
    pub fn push(&mut self, t: f64, data_units_written: u128, percent_used: u8) {
        self.push_bytes(
            t,
            data_units_written.saturating_mul(DATA_UNIT_BYTES as u128),
            percent_used,
        );
    }

    /// A sample in bytes written (ATA: Device Statistics or a vendor attribute).
    pub fn push_bytes(&mut self, t: f64, bytes_written: u128, percent_used: u8) {
        if self.first.is_none() {
            self.first = Some((t, bytes_written));
        }
        if self.pu_first.is_none() {
            self.pu_first = Some((t, percent_used));
        }
        self.recent.push_back((t, bytes_written));
        // Keep one sample at or before t - 24h, drop older ones.
        while self.recent.len() >= 2 && self.recent[1].0 <= t - DAY_SECONDS {
            self.recent.pop_front();
        }
        if self.recent.len() > HISTORY_CAP {
            // Thin the older half, keeping the oldest and the newest samples.
            let half = self.recent.len() / 2;
            let mut kept = VecDeque::with_capacity(self.recent.len());
            for (j, s) in self.recent.iter().enumerate() {
                if j == 0 || j >= half || j % 2 == 0 {
                    kept.push_back(*s);
                }
            }
            self.recent = kept;
        }
    }

    pub fn len(&self) -> usize {
        self.recent.len()
    }

    pub fn is_empty(&self) -> bool {
        self.recent.is_empty()
    }

    fn latest(&self) -> Option<(f64, u128)> {
        self.recent.back().copied()
    }

    /// Drive writes per day between two samples: (bytes / capacity) / days. None until two
    /// samples at different times exist.
    fn dwpd_between(a: (f64, u128), b: (f64, u128), capacity_bytes: f64) -> Option<f64> {
        let dt = b.0 - a.0;
        if dt <= 0.0 || capacity_bytes <= 0.0 {
            return None;
        }
        let bytes = b.1.saturating_sub(a.1) as f64;
        Some(bytes / capacity_bytes / (dt / DAY_SECONDS))
    }

    /// Observed DWPD since the first sample.
    pub fn dwpd_soak(&self, capacity_bytes: f64) -> Option<f64> {
        Self::dwpd_between(self.first?, self.latest()?, capacity_bytes)
    }

    /// Observed DWPD over the last 24 h (or the whole history if shorter).
    pub fn dwpd_24h(&self, capacity_bytes: f64) -> Option<f64> {
        Self::dwpd_between(*self.recent.front()?, self.latest()?, capacity_bytes)
    }

    /// Bytes written per day over the last 24 h window.
    pub fn bytes_per_day_24h(&self) -> Option<f64> {
        let a = *self.recent.front()?;
        let b = self.latest()?;
        let dt = b.0 - a.0;
        (dt > 0.0).then(|| b.1.saturating_sub(a.1) as f64 / (dt / DAY_SECONDS))
    }

    /// Days until percentage used reaches 100 at its slope since the first sample
    /// ((now - first) / (pu_now - pu_first) per percent), once it has risen at all.
    pub fn days_to_percentage_used(&self, t: f64, percent_used: u8) -> Option<f64> {
        let (t0, p0) = self.pu_first?;
        if percent_used >= 100 {
            return Some(0.0);
        }
        if percent_used <= p0 || t <= t0 {
            return None;
        }
        let per_day = f64::from(percent_used - p0) / ((t - t0) / DAY_SECONDS);
        Some(f64::from(100 - percent_used) / per_day)
    }
}

/// Days until `lifetime_bytes` reaches `rated_bytes` at `bytes_per_day`; 0 once past it.
pub fn days_to_rated(rated_bytes: f64, lifetime_bytes: f64, bytes_per_day: f64) -> Option<f64> {
    if lifetime_bytes >= rated_bytes {
        return Some(0.0);
    }
    (bytes_per_day > 0.0).then(|| (rated_bytes - lifetime_bytes) / bytes_per_day)
}

/// nvsoak's own writes against the drive's data-units-written delta since the first poll
/// that saw both.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct Accounting {
    pub host_written_bytes: f64,
    pub drive_written_bytes: f64,
    /// drive / host, once the host has written something.
    pub ratio: Option<f64>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct AccountingTracker {
    base: Option<(u64, u128)>,
}

impl AccountingTracker {
    /// An NVMe sample: the drive's figure in data units of 512 000 bytes.
    pub fn update(&mut self, host_written: u64, data_units_written: u128) -> Accounting {
        self.update_bytes(
            host_written,
            data_units_written.saturating_mul(DATA_UNIT_BYTES as u128),
        )
    }

    /// The drive's lifetime bytes written (ATA), against nvsoak's own.
    pub fn update_bytes(&mut self, host_written: u64, drive_bytes_written: u128) -> Accounting {
        let (h0, d0) = match self.base {
            Some(b) if host_written >= b.0 && drive_bytes_written >= b.1 => b,
            _ => {
                // First sample, or a counter went backwards (drive reset): start again.
                self.base = Some((host_written, drive_bytes_written));
                (host_written, drive_bytes_written)
            }
        };
        let host = (host_written - h0) as f64;
        let drive = (drive_bytes_written - d0) as f64;
        Accounting {
            host_written_bytes: host,
            drive_written_bytes: drive,
            ratio: (host > 0.0).then(|| drive / host),
        }
    }
}

/// Counts Error Information log entries by status across polls, each entry once.
///
/// The log holds only the newest entries and a poll reads at most 64, so counting what one read
/// returns would fall as entries roll off. Entries carry a unique, increasing Error Count
/// (bytes 0..7): an entry is new when its count is above the highest seen so far. The first read
/// counts every entry it returns. A highest count that goes backwards (a controller that
/// restarted its numbering) sets a new baseline without recounting.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ErrorLogTracker {
    highest: Option<u64>,
    by_status: std::collections::BTreeMap<String, u64>,
}

impl ErrorLogTracker {
    pub fn update(&mut self, entries: &[crate::nvme::log::error::ErrorEntry]) {
        let max = entries.iter().map(|e| e.error_count).max();
        let floor = match (self.highest, max) {
            (Some(h), Some(m)) if m < h => {
                self.highest = Some(m);
                return;
            }
            (Some(h), _) => h,
            (None, _) => 0,
        };
        for e in entries.iter().filter(|e| e.error_count > floor) {
            *self.by_status.entry(e.status_label()).or_insert(0) += 1;
        }
        if let Some(m) = max {
            self.highest = Some(self.highest.map_or(m, |h| h.max(m)));
        } else if self.highest.is_none() {
            self.highest = Some(0);
        }
    }

    /// Entries counted so far by status label (`0x281`).
    pub fn by_status(&self) -> &std::collections::BTreeMap<String, u64> {
        &self.by_status
    }
}

/// What a poll tells the throttling detector.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ThermalSample {
    /// Thermal management temperature 1 and 2 transition counts (SMART @216, @220).
    pub transitions: [u32; 2],
    /// Total time in thermal management 1 and 2 (SMART @224, @228).
    pub seconds: [u32; 2],
    /// Composite temperature, kelvin.
    pub temperature_k: u16,
    /// WCTEMP, kelvin (0 = not reported).
    pub wctemp_k: u16,
    /// OCP current throttling status (C0h @97), when the page is present.
    pub ocp_status: Option<u8>,
    /// The workload's IOPS on this device at this poll, when there is a workload.
    pub iops: Option<f64>,
}

#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct Throttle {
    pub throttling: bool,
    pub events: u64,
    /// Mean workload IOPS over throttled polls.
    pub throttled_iops: Option<f64>,
    /// Mean workload IOPS over unthrottled polls.
    pub unthrottled_iops: Option<f64>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct ThrottleTracker {
    prev: Option<ThermalSample>,
    state: Throttle,
    throttled: (f64, u64),
    unthrottled: (f64, u64),
}

impl ThrottleTracker {
    /// Feed one poll; returns the state after it. Throttling while: a thermal management count
    /// or time rose since the previous poll, the OCP status is non-zero, or the composite
    /// temperature is at or above WCTEMP. Each 0 -> 1 change starts an episode.
    pub fn update(&mut self, s: ThermalSample) -> &Throttle {
        let rose = self.prev.is_some_and(|p| {
            (0..2).any(|i| s.transitions[i] > p.transitions[i] || s.seconds[i] > p.seconds[i])
        });
        let hot = s.wctemp_k > 0 && s.temperature_k >= s.wctemp_k;
        let ocp = s.ocp_status.is_some_and(|x| x != 0);
        let now = rose || hot || ocp;
        if now && !self.state.throttling {
            self.state.events += 1;
        }
        self.state.throttling = now;
        if let Some(iops) = s.iops {
            let acc = if now {
                &mut self.throttled
            } else {
                &mut self.unthrottled
            };
            acc.0 += iops;
            acc.1 += 1;
        }
        let mean = |(sum, n): (f64, u64)| (n > 0).then(|| sum / n as f64);
        self.state.throttled_iops = mean(self.throttled);
        self.state.unthrottled_iops = mean(self.unthrottled);
        self.prev = Some(s);
        &self.state
    }

    pub fn state(&self) -> &Throttle {
        &self.state
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> RatingsTable {
        RatingsTable::builtin()
    }

    #[test]
    fn es3600p_from_table_is_17_52_pb() {
        let r = rated_endurance(
            &[],
            &table(),
            "nvme0",
            "S1",
            "ES3600P V5",
            3_200_000_000_000,
        )
        .expect("rated");
        assert_eq!(r.source, RatingSource::Table);
        let b = r.bytes.expect("bytes");
        assert!((b - 17.52e15).abs() < 1.0, "{b}");
        assert_eq!(r.dwpd, Some(3.0));
    }

    #[test]
    fn config_override_wins_and_computes_from_dwpd() {
        let o = DeviceRatingOverride {
            matcher: "S1".into(),
            rated_tbw_bytes: None,
            rated_dwpd: Some(3.0),
            warranty_years: Some(5.0),
            capacity_bytes: Some(3_200_000_000_000),
        };
        let r = rated_endurance(
            std::slice::from_ref(&o),
            &table(),
            "nvme0",
            "S1",
            "Unknown",
            0,
        )
        .expect("rated");
        assert_eq!(r.source, RatingSource::Config);
        assert!((r.bytes.expect("bytes") - 17.52e15).abs() < 1.0);
        let o2 = DeviceRatingOverride {
            matcher: "re:^Unk".into(),
            rated_tbw_bytes: Some(1_000_000_000_000_000),
            rated_dwpd: None,
            warranty_years: Some(5.0),
            capacity_bytes: Some(1_000_000_000_000),
        };
        let r = rated_endurance(&[o2], &table(), "nvme0", "S1", "Unknown", 0).expect("rated");
        assert_eq!(r.bytes, Some(1e15));
        let dwpd = r.dwpd.expect("dwpd from tbw");
        assert!((dwpd - 1e15 / (1e12 * 365.0 * 5.0)).abs() < 1e-9);
        // Not matching: falls back to the table (none for this model).
        assert!(rated_endurance(&[o], &table(), "nvme0", "S2", "Unknown", 0).is_none());
    }

    #[test]
    fn table_without_warranty_still_gives_dwpd() {
        let r = rated_endurance(
            &[],
            &table(),
            "nvme0",
            "S",
            "DapuStor H3200",
            3_840_000_000_000,
        )
        .expect("rated");
        assert_eq!(r.dwpd, Some(1.0));
        assert_eq!(r.bytes, None, "no warranty on the sheet: no rated bytes");
        let perf = r.perf.expect("perf");
        assert_eq!(perf.random_read_iops, Some(830_000.0));
        assert_eq!(perf.read_latency_seconds, Some(86e-6));
        // A config override adds the warranty, and the bytes follow from the table's DWPD.
        let o = DeviceRatingOverride {
            matcher: "nvme0".into(),
            rated_tbw_bytes: None,
            rated_dwpd: None,
            warranty_years: Some(5.0),
            capacity_bytes: None,
        };
        let r = rated_endurance(
            &[o],
            &table(),
            "nvme0",
            "S",
            "DapuStor H3200",
            3_840_000_000_000,
        )
        .expect("rated");
        let b = r.bytes.expect("bytes");
        assert!((b - 3.84e12 * 365.0 * 5.0).abs() < 1.0, "{b}");
    }

    #[test]
    fn dwpd_soak_and_24h_windows() {
        let cap = 1e12; // 1 TB
        let mut h = WriteHistory::default();
        // Day 0..2: 1 TB/day (1e12 / 512000 units per day); day 2..3: 3 TB/day.
        let units_per_tb = (1e12 / DATA_UNIT_BYTES) as u128;
        let mut units = 0u128;
        for hour in 0..=72u32 {
            if hour > 0 {
                units += if hour <= 48 {
                    units_per_tb / 24
                } else {
                    3 * units_per_tb / 24
                };
            }
            h.push(f64::from(hour) * 3600.0, units, 0);
        }
        let soak = h.dwpd_soak(cap).expect("soak");
        assert!((soak - 5.0 / 3.0).abs() < 0.01, "{soak}");
        let day = h.dwpd_24h(cap).expect("24h");
        assert!((day - 3.0).abs() < 0.01, "{day}");
        assert!(h.len() <= 26, "bounded to the last day: {}", h.len());
        let bpd = h.bytes_per_day_24h().expect("rate");
        assert_eq!(
            days_to_rated(10e12, 4e12, bpd).map(|d| d.round()),
            Some(2.0)
        );
        assert_eq!(days_to_rated(1e12, 4e12, bpd), Some(0.0));
        assert_eq!(days_to_rated(1e13, 4e12, 0.0), None);
    }

    #[test]
    fn history_stays_bounded() {
        let mut h = WriteHistory::default();
        for i in 0..20_000u32 {
            h.push(f64::from(i), u128::from(i), 0); // one per second: all within 24 h
        }
        assert!(h.len() <= HISTORY_CAP, "{}", h.len());
        let d = h.dwpd_24h(512_000.0 * 86_400.0).expect("rate");
        assert!((d - 1.0).abs() < 1e-6, "{d}");
    }

    #[test]
    fn percentage_used_projection_needs_a_slope() {
        let mut h = WriteHistory::default();
        h.push(0.0, 0, 10);
        assert_eq!(h.days_to_percentage_used(0.0, 10), None);
        assert_eq!(
            h.days_to_percentage_used(86_400.0 * 5.0, 10),
            None,
            "flat: no slope yet"
        );
        // 10 -> 12 in 2 days: 1 %/day, 88 % to go.
        let d = h
            .days_to_percentage_used(86_400.0 * 2.0, 12)
            .expect("slope");
        assert!((d - 88.0).abs() < 1e-9, "{d}");
        assert_eq!(h.days_to_percentage_used(86_400.0 * 9.0, 104), Some(0.0));
    }

    #[test]
    fn accounting_compares_deltas() {
        let mut a = AccountingTracker::default();
        let first = a.update(1_000, 500);
        assert_eq!(first.ratio, None);
        let r = a.update(1_000 + 1_024_000, 502);
        assert_eq!(r.host_written_bytes, 1_024_000.0);
        assert_eq!(r.drive_written_bytes, 1_024_000.0);
        assert_eq!(r.ratio, Some(1.0));
        // A drive that under-counts by half shows ratio 0.5.
        let r = a.update(1_000 + 2 * 1_024_000 + 1_024_000, 503);
        assert!((r.ratio.expect("ratio") - 1_536_000.0 / 3_072_000.0).abs() < 1e-12);
    }

    #[test]
    fn error_log_counts_each_entry_once_as_entries_roll_off() {
        use crate::nvme::log::error::ErrorEntry;
        let e = |count: u64, status: u16| ErrorEntry {
            error_count: count,
            status,
            ..Default::default()
        };
        let mut t = ErrorLogTracker::default();
        t.update(&[e(3, 0x281), e(2, 0x281), e(1, 0x002)]);
        assert_eq!(t.by_status().get("0x281"), Some(&2));
        assert_eq!(t.by_status().get("0x2"), Some(&1));
        // The same entries again: nothing new.
        t.update(&[e(3, 0x281), e(2, 0x281), e(1, 0x002)]);
        assert_eq!(t.by_status().get("0x281"), Some(&2));
        // Two new entries; the oldest rolled off: counts rise, never fall.
        t.update(&[e(5, 0x002), e(4, 0x281), e(3, 0x281)]);
        assert_eq!(t.by_status().get("0x281"), Some(&3));
        assert_eq!(t.by_status().get("0x2"), Some(&2));
        // Numbering restarted: new baseline, nothing recounted.
        t.update(&[e(1, 0x281)]);
        assert_eq!(t.by_status().get("0x281"), Some(&3));
        t.update(&[e(2, 0x004), e(1, 0x281)]);
        assert_eq!(t.by_status().get("0x4"), Some(&1));
        assert_eq!(t.by_status().get("0x281"), Some(&3));
    }

    fn sample(tr: [u32; 2], secs: [u32; 2], temp: u16, iops: f64) -> ThermalSample {
        ThermalSample {
            transitions: tr,
            seconds: secs,
            temperature_k: temp,
            wctemp_k: 343,
            ocp_status: None,
            iops: Some(iops),
        }
    }

    #[test]
    fn throttle_episodes_from_poll_sequences() {
        let mut t = ThrottleTracker::default();
        // Counts already non-zero at the first poll: history, not current throttling.
        assert!(!t.update(sample([5, 0], [100, 0], 320, 1000.0)).throttling);
        assert!(!t.update(sample([5, 0], [100, 0], 320, 1000.0)).throttling);
        // Episode 1: TMT1 time rises for two polls.
        assert!(t.update(sample([6, 0], [110, 0], 330, 400.0)).throttling);
        assert!(t.update(sample([6, 0], [130, 0], 330, 600.0)).throttling);
        assert_eq!(t.state().events, 1);
        assert!(!t.update(sample([6, 0], [130, 0], 325, 1000.0)).throttling);
        // Episode 2: composite at WCTEMP, counters flat.
        assert!(t.update(sample([6, 0], [130, 0], 343, 500.0)).throttling);
        // Still hot, and TMT2 count rises: same episode.
        assert!(t.update(sample([6, 1], [130, 5], 345, 500.0)).throttling);
        assert!(!t.update(sample([6, 1], [130, 5], 330, 1000.0)).throttling);
        // Episode 3: OCP status alone.
        let mut s = sample([6, 1], [130, 5], 320, 700.0);
        s.ocp_status = Some(1);
        assert!(t.update(s).throttling);
        let st = t.state().clone();
        assert_eq!(st.events, 3);
        assert_eq!(
            st.throttled_iops,
            Some((400.0 + 600.0 + 500.0 + 500.0 + 700.0) / 5.0)
        );
        assert_eq!(st.unthrottled_iops, Some(1000.0));
    }

    #[test]
    fn no_wctemp_means_no_temperature_rule() {
        let mut t = ThrottleTracker::default();
        let mut s = sample([0, 0], [0, 0], 400, 1.0);
        s.wctemp_k = 0;
        s.iops = None;
        assert!(!t.update(s).throttling);
        assert_eq!(t.state().throttled_iops, None);
    }
}
