//! A sweep's curve and what is read off it: the peak, the sub-1 ms frontier and the share of
//! the drive's rated figures (from the ratings table). Pure; the verdict and the report both
//! read a sweep through these.

use serde::{Deserialize, Serialize};

use crate::model::results::{DeviceIdentity, SweepResult};

/// The latency limit of the frontier, microseconds.
pub const SUB_MS_LIMIT_US: f64 = 1000.0;

/// One measured point of a sweep, as the report uses it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CurvePoint {
    /// Percent of the measured maximum this point targeted; 0 for the uncontrolled run.
    pub pct: u32,
    pub uncontrolled: bool,
    pub target_iops: f64,
    pub iops: f64,
    pub bytes_per_sec: f64,
    pub lat_avg_us: f64,
    pub lat_p99_us: f64,
    pub errors: u64,
}

/// The sweep's points in order of offered load (see the module docs), without points that
/// completed no I/O or carry non-finite figures.
pub fn curve(s: &SweepResult) -> Vec<CurvePoint> {
    let mut pts: Vec<CurvePoint> = s
        .points
        .iter()
        .filter(|p| {
            p.iops > 0.0
                && p.iops.is_finite()
                && p.lat_avg_us.is_finite()
                && p.lat_p99_us.is_finite()
                && p.bytes_per_sec.is_finite()
        })
        .map(|p| CurvePoint {
            pct: p.pct,
            uncontrolled: p.pct == 0,
            target_iops: p.target_iops,
            iops: p.iops,
            bytes_per_sec: p.bytes_per_sec,
            lat_avg_us: p.lat_avg_us,
            lat_p99_us: p.lat_p99_us,
            errors: p.errors,
        })
        .collect();
    // Stable: equal keys keep the file's order.
    pts.sort_by_key(|p| {
        if p.uncontrolled {
            u64::MAX
        } else {
            p.pct as u64
        }
    });
    pts
}

/// A paced point counts as short of its target when it got less than this share below it.
pub const SHORT_OF_TARGET: f64 = 0.10;

/// How far a paced point fell short of its target rate (0.57 = 57 % below), when by more than
/// [`SHORT_OF_TARGET`]; `None` for the uncontrolled run, a point without a target, or one that
/// came within 10 % of it.
pub fn shortfall(p: &CurvePoint) -> Option<f64> {
    if p.uncontrolled || !p.target_iops.is_finite() || p.target_iops <= 0.0 {
        return None;
    }
    let short = 1.0 - p.iops / p.target_iops;
    (short > SHORT_OF_TARGET).then_some(short)
}

/// The highest-IOPS point; ties go to the lower average latency.
pub fn peak(curve: &[CurvePoint]) -> Option<&CurvePoint> {
    curve
        .iter()
        .fold(None, |best: Option<&CurvePoint>, p| match best {
            None => Some(p),
            Some(b) if p.iops > b.iops || (p.iops == b.iops && p.lat_avg_us < b.lat_avg_us) => {
                Some(p)
            }
            Some(b) => Some(b),
        })
}

/// Which latency a frontier is measured on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LatencyBasis {
    Average,
    P99,
}

/// The highest-IOPS measured point whose latency (on `basis`) is below `limit_us`; `None` when
/// no point is.
pub fn frontier(curve: &[CurvePoint], basis: LatencyBasis, limit_us: f64) -> Option<&CurvePoint> {
    let below: Vec<CurvePoint> = curve
        .iter()
        .filter(|p| {
            let l = match basis {
                LatencyBasis::Average => p.lat_avg_us,
                LatencyBasis::P99 => p.lat_p99_us,
            };
            l < limit_us
        })
        .cloned()
        .collect();
    let best = peak(&below)?;
    curve.iter().find(|p| *p == best)
}

/// The first point in sweep order (by offered load, the uncontrolled run last) whose latency
/// (on `basis`) is `limit_us` or more; `None` when every point stayed below. It can lie below
/// the [`frontier`] in IOPS: a paced point may cross the limit while the uncontrolled run,
/// at a higher rate, does not.
pub fn first_over(curve: &[CurvePoint], basis: LatencyBasis, limit_us: f64) -> Option<&CurvePoint> {
    curve.iter().find(|p| {
        let l = match basis {
            LatencyBasis::Average => p.lat_avg_us,
            LatencyBasis::P99 => p.lat_p99_us,
        };
        l >= limit_us
    })
}

/// Which rated figure a workload is compared with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RatedBasis {
    RandomReadIops,
    RandomWriteIops,
    SeqReadBandwidth,
    SeqWriteBandwidth,
}

impl RatedBasis {
    pub fn describe(self) -> &'static str {
        match self {
            RatedBasis::RandomReadIops => "rated random read IOPS",
            RatedBasis::RandomWriteIops => "rated random write IOPS",
            RatedBasis::SeqReadBandwidth => "rated sequential read bandwidth",
            RatedBasis::SeqWriteBandwidth => "rated sequential write bandwidth",
        }
    }
}

/// The rated figure a workload is comparable with: pure reads or pure writes only (mixed
/// workloads have no rated figure). `sequential` comes from the built-in profile's access
/// pattern, or for inline jobs from the block size (64 KiB and larger count as sequential).
pub fn rated_basis(read_pct: u8, sequential: bool) -> Option<RatedBasis> {
    match (read_pct, sequential) {
        (100, false) => Some(RatedBasis::RandomReadIops),
        (0, false) => Some(RatedBasis::RandomWriteIops),
        (100, true) => Some(RatedBasis::SeqReadBandwidth),
        (0, true) => Some(RatedBasis::SeqWriteBandwidth),
        _ => None,
    }
}

/// Whether a swept job is sequential: the built-in profile's access pattern when the name is a
/// built-in profile, else a block size of at least 64 KiB.
pub fn is_sequential(profile: &str, block_size: f64) -> bool {
    match crate::model::profiles::lookup(profile) {
        Some(j) => matches!(j.access, crate::model::spec::Access::Sequential),
        None => block_size >= 65536.0,
    }
}

/// The rated figures of a drive the report compares with (from the ratings table).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RatedFigures {
    /// Where the figures come from, e.g. "ratings table: Huawei ES3600P V5 3.2 TB".
    pub source: String,
    pub random_read_iops: Option<f64>,
    pub random_write_iops: Option<f64>,
    pub seq_read_bytes_per_sec: Option<f64>,
    pub seq_write_bytes_per_sec: Option<f64>,
    pub tbw_bytes: Option<f64>,
    pub dwpd: Option<f64>,
    pub warranty_years: Option<f64>,
}

/// Measured against rated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RatedShare {
    pub basis: RatedBasis,
    pub rated: f64,
    /// Peak IOPS for the random bases; the highest bandwidth of the curve for the sequential ones.
    pub measured: f64,
    /// `measured / rated` (0.5 = 50 %).
    pub ratio: f64,
}

pub fn rated_share(
    curve: &[CurvePoint],
    basis: RatedBasis,
    rated: &RatedFigures,
) -> Option<RatedShare> {
    let (rated_v, measured) = match basis {
        RatedBasis::RandomReadIops => (rated.random_read_iops?, peak(curve)?.iops),
        RatedBasis::RandomWriteIops => (rated.random_write_iops?, peak(curve)?.iops),
        RatedBasis::SeqReadBandwidth => (rated.seq_read_bytes_per_sec?, max_bandwidth(curve)?),
        RatedBasis::SeqWriteBandwidth => (rated.seq_write_bytes_per_sec?, max_bandwidth(curve)?),
    };
    if rated_v <= 0.0 || !rated_v.is_finite() {
        return None;
    }
    Some(RatedShare {
        basis,
        rated: rated_v,
        measured,
        ratio: measured / rated_v,
    })
}

fn max_bandwidth(curve: &[CurvePoint]) -> Option<f64> {
    curve.iter().map(|p| p.bytes_per_sec).reduce(f64::max)
}

/// The rated figures for a drive from the built-in drive ratings table
/// (`config/drives.toml`, matched on the model string and the nearest capacity point).
pub fn rated_figures(device: &DeviceIdentity) -> Option<RatedFigures> {
    static TABLE: std::sync::OnceLock<crate::nvme::ratings::RatingsTable> =
        std::sync::OnceLock::new();
    let table = TABLE.get_or_init(crate::nvme::ratings::RatingsTable::builtin);
    rated_from_table(table, device)
}

/// The rated figures for a drive from `table`.
pub fn rated_from_table(
    table: &crate::nvme::ratings::RatingsTable,
    device: &DeviceIdentity,
) -> Option<RatedFigures> {
    let r = table.lookup(&device.model, device.capacity_bytes)?;
    let cap = r
        .capacity_bytes
        .map(|c| format!(" {}", crate::model::fmt::fmt_datasheet_bytes(c as f64)))
        .unwrap_or_default();
    Some(RatedFigures {
        source: format!("ratings table: {} {}{cap}", r.vendor, r.series),
        random_read_iops: r.perf.random_read_iops,
        random_write_iops: r.perf.random_write_iops,
        seq_read_bytes_per_sec: r.perf.seq_read_bytes_per_second,
        seq_write_bytes_per_sec: r.perf.seq_write_bytes_per_second,
        tbw_bytes: r.tbw_bytes,
        dwpd: r.dwpd,
        warranty_years: r.warranty_years,
    })
}
