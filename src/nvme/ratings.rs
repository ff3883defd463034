//! The drive ratings table (`config/drives.toml`): rated endurance and performance per drive
//! series and capacity, matched on the model string. A copy is built into the binary;
//! `health.ratings_file` overrides it.

use std::path::{Path, PathBuf};

use serde::Deserialize;

/// The built-in table.
pub const BUILTIN: &str = include_str!("../../config/drives.toml");

#[derive(Debug, thiserror::Error)]
pub enum RatingsError {
    #[error("{path}: cannot read the drive ratings table: {source} (check health.ratings_file)")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{origin}: invalid drive ratings table: {source}")]
    Toml {
        origin: String,
        #[source]
        source: toml::de::Error,
    },
    #[error("{origin}: drive `{series}`: `{pattern}` is not a valid regular expression: {source}")]
    BadRegex {
        origin: String,
        series: String,
        pattern: String,
        #[source]
        source: regex::Error,
    },
}

/// Rated performance, any part of which a spec sheet may leave out.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct Performance {
    pub seq_read_bytes_per_second: Option<f64>,
    pub seq_write_bytes_per_second: Option<f64>,
    pub random_read_iops: Option<f64>,
    pub random_write_iops: Option<f64>,
    /// Typical read latency (the sheet's figure, usually 4K random, QD1).
    pub read_latency_seconds: Option<f64>,
    pub write_latency_seconds: Option<f64>,
}

impl Performance {
    /// Fields of `self`, falling back to `base` where `self` has none.
    fn or(&self, base: &Performance) -> Performance {
        Performance {
            seq_read_bytes_per_second: self
                .seq_read_bytes_per_second
                .or(base.seq_read_bytes_per_second),
            seq_write_bytes_per_second: self
                .seq_write_bytes_per_second
                .or(base.seq_write_bytes_per_second),
            random_read_iops: self.random_read_iops.or(base.random_read_iops),
            random_write_iops: self.random_write_iops.or(base.random_write_iops),
            read_latency_seconds: self.read_latency_seconds.or(base.read_latency_seconds),
            write_latency_seconds: self.write_latency_seconds.or(base.write_latency_seconds),
        }
    }
}

/// One capacity point of a series.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CapacityRating {
    pub capacity_bytes: u64,
    pub dwpd: Option<f64>,
    pub tbw_bytes: Option<u64>,
    pub warranty_years: Option<f64>,
    #[serde(flatten)]
    pub perf: Performance,
}

/// One drive series.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DriveSeries {
    pub vendor: String,
    pub series: String,
    /// Matched against the Identify model string: exact (case-insensitive substring) or
    /// `re:REGEX`.
    #[serde(rename = "match")]
    pub matchers: Vec<String>,
    #[serde(default)]
    pub form_factor: Option<String>,
    #[serde(default)]
    pub interface: Option<String>,
    #[serde(default)]
    pub source: Option<String>,
    pub dwpd: Option<f64>,
    pub warranty_years: Option<f64>,
    #[serde(flatten)]
    pub perf: Performance,
    #[serde(default)]
    pub capacity: Vec<CapacityRating>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    drive: Vec<DriveSeries>,
}

/// A resolved rating for one drive.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Rating {
    pub vendor: String,
    pub series: String,
    /// The rated capacity point used (bytes), when the table has one near the drive's capacity.
    pub capacity_bytes: Option<u64>,
    pub dwpd: Option<f64>,
    pub warranty_years: Option<f64>,
    pub tbw_bytes: Option<f64>,
    pub perf: Performance,
}

#[derive(Debug, Clone)]
pub struct RatingsTable {
    series: Vec<(DriveSeries, Vec<Matcher>)>,
}

#[derive(Debug, Clone)]
enum Matcher {
    Substring(String),
    Re(regex::Regex),
}

/// Rated endurance from DWPD: dwpd x capacity x 365 x years.
pub fn tbw_from_dwpd(dwpd: f64, capacity_bytes: f64, warranty_years: f64) -> f64 {
    dwpd * capacity_bytes * 365.0 * warranty_years
}

impl RatingsTable {
    pub fn parse(text: &str, origin: &str) -> Result<Self, RatingsError> {
        let f: File = toml::from_str(text).map_err(|source| RatingsError::Toml {
            origin: origin.to_string(),
            source,
        })?;
        let mut series = Vec::new();
        for d in f.drive {
            let mut ms = Vec::new();
            for m in &d.matchers {
                ms.push(match m.strip_prefix("re:") {
                    Some(p) => Matcher::Re(regex::Regex::new(p).map_err(|source| {
                        RatingsError::BadRegex {
                            origin: origin.to_string(),
                            series: d.series.clone(),
                            pattern: p.to_string(),
                            source,
                        }
                    })?),
                    None => Matcher::Substring(m.to_lowercase()),
                });
            }
            series.push((d, ms));
        }
        Ok(RatingsTable { series })
    }

    pub fn builtin() -> Self {
        // The built-in copy is tested to parse, so this cannot fail at run time.
        Self::parse(BUILTIN, "built-in config/drives.toml")
            .unwrap_or(RatingsTable { series: Vec::new() })
    }

    /// `path` when given, else the built-in table.
    pub fn load(path: Option<&Path>) -> Result<Self, RatingsError> {
        match path {
            None => Ok(Self::builtin()),
            Some(p) => {
                let text =
                    crate::util::bounded::read_to_string(p, crate::util::bounded::CONFIG_LIMIT)
                        .map_err(|source| RatingsError::Read {
                            path: p.to_path_buf(),
                            source,
                        })?;
                Self::parse(&text, &p.display().to_string())
            }
        }
    }

    pub fn series(&self) -> impl Iterator<Item = &DriveSeries> {
        self.series.iter().map(|(d, _)| d)
    }

    /// The rating for a drive with this model string and capacity (bytes, 0 = unknown). The
    /// capacity point nearest to the drive's capacity is used if it lies within 15 %; a
    /// series without one still gives DWPD, warranty and TBW computed from the drive's
    /// capacity.
    pub fn lookup(&self, model: &str, capacity_bytes: u64) -> Option<Rating> {
        let lower = model.to_lowercase();
        let (d, _) = self.series.iter().find(|(_, ms)| {
            ms.iter().any(|m| match m {
                Matcher::Substring(s) => lower.contains(s.as_str()),
                Matcher::Re(r) => r.is_match(model),
            })
        })?;
        let point = if d.capacity.len() == 1 && capacity_bytes == 0 {
            d.capacity.first()
        } else {
            d.capacity
                .iter()
                .filter(|_| capacity_bytes > 0)
                .min_by(|a, b| {
                    let da = (a.capacity_bytes as f64 - capacity_bytes as f64).abs();
                    let db = (b.capacity_bytes as f64 - capacity_bytes as f64).abs();
                    da.total_cmp(&db)
                })
                .filter(|c| {
                    (c.capacity_bytes as f64 - capacity_bytes as f64).abs()
                        <= 0.15 * c.capacity_bytes as f64
                })
        };
        let dwpd = point.and_then(|c| c.dwpd).or(d.dwpd);
        let warranty_years = point.and_then(|c| c.warranty_years).or(d.warranty_years);
        let cap = point
            .map(|c| c.capacity_bytes)
            .or((capacity_bytes > 0).then_some(capacity_bytes));
        let tbw_bytes = point
            .and_then(|c| c.tbw_bytes)
            .map(|t| t as f64)
            .or_else(|| match (dwpd, warranty_years, cap) {
                (Some(w), Some(y), Some(c)) => Some(tbw_from_dwpd(w, c as f64, y)),
                _ => None,
            });
        Some(Rating {
            vendor: d.vendor.clone(),
            series: d.series.clone(),
            capacity_bytes: point.map(|c| c.capacity_bytes),
            dwpd,
            warranty_years,
            tbw_bytes,
            perf: point
                .map(|c| c.perf.or(&d.perf))
                .unwrap_or_else(|| d.perf.clone()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_table_parses_and_has_every_seed_drive() {
        let t = RatingsTable::parse(BUILTIN, "builtin").expect("parse");
        let names: Vec<String> = t
            .series()
            .map(|d| format!("{} {}", d.vendor, d.series))
            .collect();
        for want in [
            "ES3500P V5",
            "ES3600P V5",
            "PBlaze5",
            "H3200",
            "IronWolf 110",
            "Element",
        ] {
            assert!(
                names.iter().any(|n| n.contains(want)),
                "{want} missing from {names:?}"
            );
        }
        for d in t.series() {
            assert!(!d.capacity.is_empty(), "{} has no capacities", d.series);
            for c in &d.capacity {
                assert!(
                    c.dwpd.or(d.dwpd).is_some() || c.tbw_bytes.is_some(),
                    "{} {} has neither DWPD nor TBW",
                    d.series,
                    c.capacity_bytes
                );
            }
        }
    }

    #[test]
    fn es3600p_3_2tb_is_17_52_pb() {
        let t = RatingsTable::builtin();
        let r = t
            .lookup("HUAWEI ES3600P V5 3200GB", 3_200_631_791_616)
            .expect("matched");
        assert_eq!(r.series, "ES3600P V5");
        assert_eq!(r.dwpd, Some(3.0));
        assert_eq!(r.warranty_years, Some(5.0));
        assert_eq!(r.capacity_bytes, Some(3_200_000_000_000));
        let tbw = r.tbw_bytes.expect("tbw");
        assert!((tbw - 17.52e15).abs() < 1e6, "{tbw}");
    }

    #[test]
    fn unknown_model_and_far_capacity() {
        let t = RatingsTable::builtin();
        assert!(t.lookup("QEMU NVMe Ctrl", 1 << 30).is_none());
        let r = t
            .lookup("ES3600P V5", 100_000_000_000)
            .expect("series matches");
        assert_eq!(r.capacity_bytes, None, "no point within 15 %");
        // DWPD from the series, TBW from the drive's own capacity.
        let tbw = r.tbw_bytes.expect("tbw from dwpd");
        assert!((tbw - 3.0 * 1e11 * 365.0 * 5.0).abs() < 1.0);
    }

    #[test]
    fn bad_table_names_the_origin() {
        let e = RatingsTable::parse("[[drive]]\nvendor = 1\n", "/etc/x.toml").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("/etc/x.toml: invalid drive ratings table"),
            "{e}"
        );
        let e = RatingsTable::load(Some(Path::new("/nonexistent/drives.toml"))).unwrap_err();
        assert!(e.to_string().contains("check health.ratings_file"), "{e}");
    }
}
