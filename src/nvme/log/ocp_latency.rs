//! OCP Datacenter NVMe SSD "Latency Monitor" log (log page C3h, 512 bytes, OCP 2.0), and the
//! data of its feature (Set Features C5h). Used only when bytes 496..511 hold the page's GUID.
//! Pure: bytes in, structs out (and the feature's bytes out).
//!
//! Layout (little-endian): feature status @0, active bucket timer @2 and its threshold @4
//! (u16, units of 5 minutes), active thresholds A..D @6..9 (units of 5 ms), active latency
//! configuration @10 (u16), active latency minimum window @12 (units of 100 ms); then the
//! active set: bucket counters @32 (4 buckets x 16 bytes), latency timestamps @96 (4 x 3 x u64),
//! measured latencies @192 (4 x 3 x u16, ms), stamp units @216; the static set the same shape
//! at @240, @304, @400 and @424; version @494, GUID @496.
//!
//! The spec's tables list each field from its high bits down: within a bucket counter, bytes
//! 0..3 are reserved, 4..7 deallocate, 8..11 write and 12..15 read; the timestamp and measured
//! latency arrays start with bucket 3 and, within a bucket, deallocate, write, read (nvme-cli's
//! `ocp latency-monitor-log` reads them the same way).

use crate::nvme::{ParseError, le, need};

pub const LID: u8 = 0xc3;
pub const LEN: usize = 512;
/// The Latency Monitor feature identifier.
pub const FID: u8 = 0xc5;
/// The Set Features data buffer for C5h.
pub const FEATURE_LEN: usize = 4096;
/// Number of latency buckets.
pub const BUCKETS: usize = 4;

/// Bytes 496..511: the GUID 85D45E58D4E643709C6C84D08CC07A92h, stored little-endian.
pub const GUID: [u8; 16] = [
    0x92, 0x7a, 0xc0, 0x8c, 0xd0, 0x84, 0x6c, 0x9c, 0x70, 0x43, 0xe6, 0xd4, 0x58, 0x5e, 0xd4, 0x85,
];

const WHAT: &str = "OCP latency monitor log C3h";

/// A timestamp the drive has not set (all ones).
pub const NO_TIMESTAMP: u64 = u64::MAX;

/// One figure per operation kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct PerOp<T> {
    pub read: T,
    pub write: T,
    pub deallocate: T,
}

impl<T: Copy> PerOp<T> {
    /// `(label, value)` in a fixed order: read, write, deallocate.
    pub fn each(&self) -> [(&'static str, T); 3] {
        [
            ("read", self.read),
            ("write", self.write),
            ("deallocate", self.deallocate),
        ]
    }
}

/// One set of buckets (the active set, which restarts with the bucket timer, or the static
/// set, which only a reset of the feature clears).
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct BucketSet {
    /// Commands whose latency fell in each bucket.
    pub counters: [PerOp<u32>; BUCKETS],
    /// When each bucket last counted a command, milliseconds ([`NO_TIMESTAMP`] = never).
    pub timestamps_ms: [PerOp<u64>; BUCKETS],
    /// The latency measured at that timestamp, milliseconds.
    pub measured_latency_ms: [PerOp<u16>; BUCKETS],
    /// Bit per bucket and kind: the timestamp counts from power-on rather than the host's clock.
    pub stamp_units: u16,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct LatencyMonitorLog {
    /// @0: bit 0 the monitor is enabled, bit 1 active latency configuration supported,
    /// bit 2 active measured latency supported.
    pub feature_status: u8,
    /// @2, units of 5 minutes.
    pub active_bucket_timer: u16,
    /// @4, units of 5 minutes.
    pub active_bucket_timer_threshold: u16,
    /// @6..9: thresholds A..D, units of 5 ms.
    pub thresholds: [u8; 4],
    /// @10
    pub active_latency_config: u16,
    /// @12, units of 100 ms.
    pub active_latency_min_window: u8,
    pub active: BucketSet,
    pub statics: BucketSet,
    /// @494
    pub log_page_version: u16,
}

impl LatencyMonitorLog {
    pub fn enabled(&self) -> bool {
        self.feature_status & 1 != 0
    }
}

pub fn guid_matches(b: &[u8]) -> bool {
    b.len() >= LEN && b[496..512] == GUID
}

fn bucket_set(
    b: &[u8],
    counters: usize,
    stamps: usize,
    measured: usize,
    units: usize,
) -> BucketSet {
    let mut s = BucketSet {
        stamp_units: le::u16(b, units),
        ..Default::default()
    };
    for i in 0..BUCKETS {
        let c = counters + i * 16;
        s.counters[i] = PerOp {
            read: le::u32(b, c + 12),
            write: le::u32(b, c + 8),
            deallocate: le::u32(b, c + 4),
        };
        // Bucket 3 first, deallocate before write before read.
        let slot = (BUCKETS - 1 - i) * 3;
        s.timestamps_ms[i] = PerOp {
            read: le::u64(b, stamps + (slot + 2) * 8),
            write: le::u64(b, stamps + (slot + 1) * 8),
            deallocate: le::u64(b, stamps + slot * 8),
        };
        s.measured_latency_ms[i] = PerOp {
            read: le::u16(b, measured + (slot + 2) * 2),
            write: le::u16(b, measured + (slot + 1) * 2),
            deallocate: le::u16(b, measured + slot * 2),
        };
    }
    s
}

pub fn parse(b: &[u8]) -> Result<LatencyMonitorLog, ParseError> {
    need(WHAT, b, LEN)?;
    if !guid_matches(b) {
        return Err(ParseError::BadGuid { what: WHAT });
    }
    Ok(LatencyMonitorLog {
        feature_status: b[0],
        active_bucket_timer: le::u16(b, 2),
        active_bucket_timer_threshold: le::u16(b, 4),
        thresholds: [b[6], b[7], b[8], b[9]],
        active_latency_config: le::u16(b, 10),
        active_latency_min_window: b[12],
        active: bucket_set(b, 32, 96, 192, 216),
        statics: bucket_set(b, 240, 304, 400, 424),
        log_page_version: le::u16(b, 494),
    })
}

/// What nvsoak asks of the Latency Monitor feature (C5h), in the feature's own units.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct LatencyMonitorConfig {
    /// Units of 5 minutes.
    pub active_bucket_timer_threshold: u16,
    /// Thresholds A..D, units of 5 ms.
    pub thresholds: [u8; 4],
    pub active_latency_config: u16,
    /// Units of 100 ms.
    pub active_latency_min_window: u8,
}

/// The Set Features C5h data: bucket timer threshold @0 (u16), thresholds A..D @2..5, active
/// latency configuration @6 (u16), minimum window @8, debug log trigger enable @9 (u16, left 0),
/// discard debug log @11 (0), latency monitor feature enable @12 (1).
pub fn feature_data(c: &LatencyMonitorConfig) -> Vec<u8> {
    let mut b = vec![0u8; FEATURE_LEN];
    b[0..2].copy_from_slice(&c.active_bucket_timer_threshold.to_le_bytes());
    b[2..6].copy_from_slice(&c.thresholds);
    b[6..8].copy_from_slice(&c.active_latency_config.to_le_bytes());
    b[8] = c.active_latency_min_window;
    b[12] = 1;
    b
}

#[cfg(test)]
pub(crate) mod testdata {
    use super::*;

    /// A page with every field distinct: counter (set s, bucket i, kind k) = s*1000 + i*10 + k
    /// (k: 1 read, 2 write, 3 deallocate), and likewise for timestamps and latencies.
    pub fn latency() -> Vec<u8> {
        latency_with(0)
    }

    /// [`latency`] with `extra` added to every active and static read counter of bucket 2.
    pub fn latency_with(extra: u32) -> Vec<u8> {
        let mut b = vec![0u8; LEN];
        b[0] = 0x07;
        b[1] = 0xee; // reserved
        b[2..4].copy_from_slice(&0x0203u16.to_le_bytes());
        b[4..6].copy_from_slice(&0x0405u16.to_le_bytes());
        b[6..10].copy_from_slice(&[6, 7, 8, 9]);
        b[10..12].copy_from_slice(&0x0a0bu16.to_le_bytes());
        b[12] = 12;
        for (set, (c, t, m, u)) in [(32, 96, 192, 216), (240, 304, 400, 424)]
            .into_iter()
            .enumerate()
        {
            let base = (set as u32 + 1) * 1000;
            for i in 0..BUCKETS {
                let cnt = c + i * 16;
                let v = |k: u32| base + i as u32 * 10 + k;
                b[cnt..cnt + 4].copy_from_slice(&0xdead_beefu32.to_le_bytes()); // reserved
                let read = v(1) + if i == 2 { extra } else { 0 };
                b[cnt + 12..cnt + 16].copy_from_slice(&read.to_le_bytes());
                b[cnt + 8..cnt + 12].copy_from_slice(&v(2).to_le_bytes());
                b[cnt + 4..cnt + 8].copy_from_slice(&v(3).to_le_bytes());
                let slot = (BUCKETS - 1 - i) * 3;
                for (k, off) in [(1u32, 2usize), (2, 1), (3, 0)] {
                    let ts = 1_700_000_000_000u64 + u64::from(v(k));
                    let o = t + (slot + off) * 8;
                    b[o..o + 8].copy_from_slice(&ts.to_le_bytes());
                    let o = m + (slot + off) * 2;
                    b[o..o + 2].copy_from_slice(&(v(k) as u16 + 5000).to_le_bytes());
                }
            }
            b[u..u + 2].copy_from_slice(&(0x0f0u16 + set as u16).to_le_bytes());
        }
        b[494..496].copy_from_slice(&1u16.to_le_bytes());
        b[496..512].copy_from_slice(&GUID);
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_field() {
        let o = parse(&testdata::latency()).expect("parse");
        assert_eq!(o.feature_status, 7);
        assert!(o.enabled());
        assert_eq!(o.active_bucket_timer, 0x0203);
        assert_eq!(o.active_bucket_timer_threshold, 0x0405);
        assert_eq!(o.thresholds, [6, 7, 8, 9]);
        assert_eq!(o.active_latency_config, 0x0a0b);
        assert_eq!(o.active_latency_min_window, 12);
        for (set, s) in [(1000u32, &o.active), (2000, &o.statics)] {
            for i in 0..BUCKETS {
                let v = |k: u32| set + i as u32 * 10 + k;
                assert_eq!(
                    s.counters[i],
                    PerOp {
                        read: v(1),
                        write: v(2),
                        deallocate: v(3)
                    },
                    "set {set} bucket {i}"
                );
                let ts = |k| 1_700_000_000_000u64 + u64::from(v(k));
                assert_eq!(
                    s.timestamps_ms[i],
                    PerOp {
                        read: ts(1),
                        write: ts(2),
                        deallocate: ts(3)
                    }
                );
                let ml = |k| v(k) as u16 + 5000;
                assert_eq!(
                    s.measured_latency_ms[i],
                    PerOp {
                        read: ml(1),
                        write: ml(2),
                        deallocate: ml(3)
                    }
                );
            }
        }
        assert_eq!(o.active.stamp_units, 0x0f0);
        assert_eq!(o.statics.stamp_units, 0x0f1);
        assert_eq!(o.log_page_version, 1);
    }

    /// Raw offsets spelled out once, independent of the fixture builder's arithmetic.
    #[test]
    fn offsets_match_the_spec_table() {
        let mut b = vec![0u8; LEN];
        b[496..512].copy_from_slice(&GUID);
        b[32 + 12] = 0x11; // active bucket 0 read
        b[32 + 3 * 16 + 4] = 0x22; // active bucket 3 deallocate
        b[96] = 0x33; // active timestamps: bucket 3 deallocate comes first
        b[96 + 11 * 8] = 0x44; // ... and bucket 0 read last
        b[192 + 11 * 2] = 0x55; // active measured latency, bucket 0 read
        b[240 + 16 + 8] = 0x66; // static bucket 1 write
        b[400] = 0x77; // static measured latency, bucket 3 deallocate
        let o = parse(&b).expect("parse");
        assert_eq!(o.active.counters[0].read, 0x11);
        assert_eq!(o.active.counters[3].deallocate, 0x22);
        assert_eq!(o.active.timestamps_ms[3].deallocate, 0x33);
        assert_eq!(o.active.timestamps_ms[0].read, 0x44);
        assert_eq!(o.active.measured_latency_ms[0].read, 0x55);
        assert_eq!(o.statics.counters[1].write, 0x66);
        assert_eq!(o.statics.measured_latency_ms[3].deallocate, 0x77);
        assert!(!o.enabled());
    }

    #[test]
    fn guid_is_the_spec_value_and_checked() {
        assert_eq!(
            u128::from_le_bytes(GUID),
            0x85D4_5E58_D4E6_4370_9C6C_84D0_8CC0_7A92
        );
        let mut b = testdata::latency();
        b[511] ^= 1;
        assert!(matches!(parse(&b), Err(ParseError::BadGuid { .. })));
        assert!(matches!(
            parse(&b[..100]),
            Err(ParseError::Short { need: 512, .. })
        ));
    }

    #[test]
    fn feature_data_layout() {
        let b = feature_data(&LatencyMonitorConfig {
            active_bucket_timer_threshold: 0x0102,
            thresholds: [3, 4, 5, 6],
            active_latency_config: 0x0708,
            active_latency_min_window: 9,
        });
        assert_eq!(b.len(), FEATURE_LEN);
        assert_eq!(
            &b[..13],
            &[0x02, 0x01, 3, 4, 5, 6, 0x08, 0x07, 9, 0, 0, 0, 1]
        );
        assert!(b[13..].iter().all(|&x| x == 0));
    }
}
