//! Human units: sizes (`4k`, `1GiB`, `512`, `3.84e12`) and durations (`30s`, `2h`, `1h30m`).
//!
//! Sizes: `k`, `M`, `G`, `T`, `P` and `KiB`, `MiB`.. are binary (1024), as fio reads them. `KB`,
//! `MB`, `GB`, `TB`, `PB` are refused: fio reads them as binary too, drive datasheets as
//! decimal, so either reading would surprise someone (`"4KB"` would be 4096 bytes to a fio user
//! and 4000 to the datasheet). The refusal gives both unambiguous spellings: the binary unit
//! (`"128KiB"`) and the decimal figure as a plain number (`"128000"`, or `"17.52e15"` with an
//! exponent). Plain numbers are bytes.
//!
//! Durations always carry a unit: a bare `4` is refused (is it seconds or minutes?).

use std::time::Duration;

use thiserror::Error;

/// Why a size or a duration could not be read. The text is the reason a config error shows
/// after the key, so it quotes what was written and says what would be accepted.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum UnitError {
    #[error("empty size")]
    EmptySize,
    #[error("empty duration")]
    EmptyDuration,
    #[error("\"{0}\" does not start with a number")]
    NoNumber(String),
    #[error("\"{0}\" is not a number")]
    NotANumber(String),
    #[error(
        "unknown size unit \"{0}\" (use k, M, G, T, P or KiB, MiB, GiB, TiB, PiB, all binary; or a plain number of bytes like 4096 or 3.84e12)"
    )]
    UnknownSizeUnit(String),
    /// `KB`, `MB`, `GB`, `TB`, `PB`: 1024 to fio, 1000 to a datasheet.
    #[error("{}", .0.message(""))]
    AmbiguousSizeUnit(Box<Ambiguous>),
    #[error("\"{0}\" is too large")]
    TooLarge(String),
    #[error("\"{0}\" is not a whole number of bytes")]
    NotWholeBytes(String),
    #[error("\"{0}\" is not a valid duration")]
    InvalidDuration(String),
    #[error("\"{0}\" is not a valid duration (expected e.g. 30s, 5m, 2h)")]
    NoDurationNumber(String),
    #[error("{n} has no unit; write \"{n}s\" or \"{n}m\" (units: ms, s, m, h, d)")]
    BareDuration { n: String },
    #[error("\"{input}\" needs a unit after {n} (ms, s, m, h, d)")]
    MissingDurationUnit { input: String, n: f64 },
    #[error("unknown duration unit \"{0}\" (use ms, s, m, h, d)")]
    UnknownDurationUnit(String),
    #[error("\"{0}\" is too long")]
    TooLong(String),
}

/// A size written with `KB`, `MB`, `GB`, `TB` or `PB`, and its two unambiguous spellings.
#[derive(Debug, Clone, PartialEq)]
pub struct Ambiguous {
    /// What was written, trimmed: `128KB`.
    pub input: String,
    /// The unit as written: `KB`.
    pub unit: String,
    /// The binary reading (fio's), when a whole number of bytes: (`128KiB`, 131072).
    pub binary: Option<(String, u64)>,
    /// The decimal reading (a datasheet's), when a whole number of bytes: (`128000`, 128000).
    pub decimal: Option<(String, u64)>,
}

impl Ambiguous {
    /// The refusal with its fix; `suffix` follows each spelling (`/s` in a rate).
    pub fn message(&self, suffix: &str) -> String {
        let binary_unit = binary_spelling(&self.unit);
        let mut fixes = Vec::new();
        if let Some((s, b)) = &self.binary {
            fixes.push(format!(
                "\"{s}{suffix}\" for {b} bytes{suffix} (binary, as fio reads it)"
            ));
        }
        if let Some((s, b)) = &self.decimal {
            fixes.push(format!(
                "\"{s}{suffix}\" for {b} bytes{suffix} (decimal, as a datasheet reads it)"
            ));
        }
        let fix = if fixes.is_empty() {
            format!("use {binary_unit} or a plain number of bytes")
        } else {
            format!("write {}", fixes.join(" or "))
        };
        format!(
            "\"{}{suffix}\" is ambiguous: fio reads {} as {binary_unit}, drive datasheets as \
             decimal; {fix}",
            self.input, self.unit
        )
    }
}

/// `KB` → `KiB`, `tb` → `TiB`.
fn binary_spelling(unit: &str) -> String {
    let first = unit
        .chars()
        .next()
        .map(|c| c.to_ascii_uppercase())
        .unwrap_or('K');
    format!("{first}iB")
}

/// The power of 1000 (and of 1024) an ambiguous unit stands for: `KB` → 1, `pb` → 5.
fn ambiguous_power(unit: &str) -> Option<u32> {
    match unit.to_ascii_lowercase().as_str() {
        "kb" => Some(1),
        "mb" => Some(2),
        "gb" => Some(3),
        "tb" => Some(4),
        "pb" => Some(5),
        _ => None,
    }
}

/// Parse a size. `4k` = `4K` = `4KiB` = 4096; plain digits are bytes, with an optional
/// exponent (`3.84e12`); `4KB` and the other decimal-looking units are refused
/// ([`UnitError::AmbiguousSizeUnit`]).
pub fn parse_size(s: &str) -> Result<u64, UnitError> {
    let t = s.trim();
    if t.is_empty() {
        return Err(UnitError::EmptySize);
    }
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, rest) = t.split_at(split);
    if num.is_empty() {
        return Err(UnitError::NoNumber(s.to_string()));
    }
    num.parse::<f64>()
        .map_err(|_| UnitError::NotANumber(num.to_string()))?;
    // A decimal exponent: `3.84e12` bytes (exact, never through a float).
    let (exp, unit) = match rest.strip_prefix(['e', 'E']) {
        Some(e) if !e.is_empty() && e.bytes().all(|b| b.is_ascii_digit()) => {
            let exp: u32 = e
                .parse()
                .ok()
                .filter(|x| *x <= 30)
                .ok_or_else(|| UnitError::TooLarge(s.to_string()))?;
            (exp, "")
        }
        _ => (0, rest),
    };
    let unit = unit.trim();
    if let Some(power) = ambiguous_power(unit) {
        let binary = exact_bytes(num, 0, 1u128 << (10 * power))
            .ok()
            .map(|b| (format!("{num}{}", binary_spelling(unit)), b));
        let decimal = exact_bytes(num, 3 * power, 1)
            .ok()
            .map(|b| (decimal_spelling(num, 3 * power, b), b));
        return Err(UnitError::AmbiguousSizeUnit(Box::new(Ambiguous {
            input: t.to_string(),
            unit: unit.to_string(),
            binary,
            decimal,
        })));
    }
    let mult: u128 = match unit {
        "" | "b" | "B" => 1,
        "k" | "K" | "KiB" | "kiB" | "Ki" => 1 << 10,
        "m" | "M" | "MiB" | "Mi" => 1 << 20,
        "g" | "G" | "GiB" | "Gi" => 1 << 30,
        "t" | "T" | "TiB" | "Ti" => 1 << 40,
        "p" | "P" | "PiB" | "Pi" => 1 << 50,
        u => {
            return Err(UnitError::UnknownSizeUnit(u.to_string()));
        }
    };
    exact_bytes(num, exp, mult).map_err(|e| match e {
        Exact::NotWhole => UnitError::NotWholeBytes(s.to_string()),
        Exact::TooLarge => UnitError::TooLarge(s.to_string()),
        Exact::NotANumber => UnitError::NotANumber(num.to_string()),
    })
}

/// Why [`exact_bytes`] found no whole number of bytes.
enum Exact {
    NotWhole,
    TooLarge,
    NotANumber,
}

/// `num` (digits, at most one `.`) × 10^`exp` × `mult`, in exact decimal arithmetic:
/// "17.52e15" is 17520000000000000 bytes, not a float near it.
fn exact_bytes(num: &str, exp: u32, mult: u128) -> Result<u64, Exact> {
    let (ip, fp) = num.split_once('.').unwrap_or((num, ""));
    if ip.len() + fp.len() > 36 {
        return Err(Exact::TooLarge);
    }
    let scale = 10u128.pow(fp.len() as u32);
    let digits: u128 = format!("{ip}{fp}").parse().map_err(|_| Exact::NotANumber)?;
    let scaled = digits
        .checked_mul(mult)
        .and_then(|d| d.checked_mul(10u128.checked_pow(exp)?))
        .ok_or(Exact::TooLarge)?;
    if scaled % scale != 0 {
        return Err(Exact::NotWhole);
    }
    u64::try_from(scaled / scale).map_err(|_| Exact::TooLarge)
}

/// The decimal reading of `num` × 10^`exp` as a size nvsoak accepts: plain digits below a
/// million (`4000`), else the number with an exponent (`17.52e15`).
fn decimal_spelling(num: &str, exp: u32, bytes: u64) -> String {
    if bytes < 1_000_000 {
        bytes.to_string()
    } else {
        format!("{num}e{exp}")
    }
}

/// Parse a duration: `500ms`, `30s`, `5m`, `2h`, `3d`, combinations like `1h30m`. A bare
/// number is refused ([`UnitError::BareDuration`]): `4` could be meant as seconds or minutes.
pub fn parse_duration(s: &str) -> Result<Duration, UnitError> {
    let t = s.trim();
    if t.is_empty() {
        return Err(UnitError::EmptyDuration);
    }
    if let Ok(n) = t.parse::<f64>() {
        if n < 0.0 || !n.is_finite() {
            return Err(UnitError::InvalidDuration(s.to_string()));
        }
        return Err(UnitError::BareDuration { n: t.to_string() });
    }
    let mut total = 0f64;
    let mut rest = t;
    while !rest.is_empty() {
        let split = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if split == 0 {
            return Err(UnitError::NoDurationNumber(s.to_string()));
        }
        let n: f64 = rest[..split]
            .parse()
            .map_err(|_| UnitError::InvalidDuration(s.to_string()))?;
        rest = &rest[split..];
        let uend = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit = &rest[..uend];
        rest = &rest[uend..];
        let m = match unit {
            "ms" => 0.001,
            "s" | "sec" => 1.0,
            "m" | "min" => 60.0,
            "h" => 3600.0,
            "d" => 86400.0,
            "" => {
                return Err(UnitError::MissingDurationUnit {
                    input: s.to_string(),
                    n,
                });
            }
            u => return Err(UnitError::UnknownDurationUnit(u.to_string())),
        };
        total += n * m;
    }
    Duration::try_from_secs_f64(total).map_err(|_| UnitError::TooLong(s.to_string()))
}

/// `4096` -> `4k`, `1048576` -> `1M`, otherwise plain bytes.
pub fn format_size(b: u64) -> String {
    const UNITS: [(u64, &str); 5] = [
        (1 << 50, "P"),
        (1 << 40, "T"),
        (1 << 30, "G"),
        (1 << 20, "M"),
        (1 << 10, "k"),
    ];
    for (m, u) in UNITS {
        if b >= m && b.is_multiple_of(m) {
            return format!("{}{}", b / m, u);
        }
    }
    b.to_string()
}

pub fn format_duration(d: Duration) -> String {
    let s = d.as_secs();
    if d.subsec_millis() != 0 || s == 0 {
        return format!("{}ms", d.as_millis());
    }
    if s.is_multiple_of(86400) {
        format!("{}d", s / 86400)
    } else if s.is_multiple_of(3600) {
        format!("{}h", s / 3600)
    } else if s.is_multiple_of(60) {
        format!("{}m", s / 60)
    } else {
        format!("{s}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4k"), Ok(4096));
        assert_eq!(parse_size("4K"), Ok(4096));
        assert_eq!(parse_size("1GiB"), Ok(1 << 30));
        assert_eq!(parse_size("512"), Ok(512));
        assert_eq!(parse_size("3.2e12"), Ok(3_200_000_000_000));
        assert_eq!(parse_size("3.84E12"), Ok(3_840_000_000_000));
        assert_eq!(parse_size("1.5k"), Ok(1536));
        assert!(parse_size("4x").is_err());
        assert!(parse_size("k").is_err());
        assert!(parse_size("").is_err());
        assert_eq!(parse_size("17.52e15"), Ok(17_520_000_000_000_000));
        assert!(parse_size("1.5e0").is_err());
        assert!(parse_size("1e99").is_err());
        assert!(parse_size("1e").is_err());
        assert_eq!(parse_size("0.5k"), Ok(512));
        assert!(parse_size("0.3k").is_err());
        assert!(parse_size("1.2.3k").is_err());
        assert!(parse_size("99999999999999P").is_err());
        assert_eq!(format_size(65536), "64k");
        assert_eq!(format_size(1 << 30), "1G");
        assert_eq!(format_size(1000), "1000");
    }

    /// `KB` and its kin mean 1024 to fio and 1000 to a datasheet: refused, every one of them in
    /// either case, with both unambiguous spellings, each of which parses to the figure named.
    #[test]
    fn ambiguous_units_are_refused_with_both_spellings() {
        let size = |s: &str| parse_size(s).unwrap_err().to_string();
        assert_eq!(
            size("4KB"),
            "\"4KB\" is ambiguous: fio reads KB as KiB, drive datasheets as decimal; write \
             \"4KiB\" for 4096 bytes (binary, as fio reads it) or \"4000\" for 4000 bytes \
             (decimal, as a datasheet reads it)"
        );
        assert_eq!(
            size("17.52PB"),
            "\"17.52PB\" is ambiguous: fio reads PB as PiB, drive datasheets as decimal; write \
             \"17.52e15\" for 17520000000000000 bytes (decimal, as a datasheet reads it)"
        );
        for unit in [
            "KB", "kB", "kb", "MB", "mb", "GB", "gB", "TB", "tb", "PB", "Pb",
        ] {
            let input = format!("128{unit}");
            let Err(UnitError::AmbiguousSizeUnit(a)) = parse_size(&input) else {
                panic!("{input} is not refused as ambiguous");
            };
            for (spelling, bytes) in a.binary.iter().chain(a.decimal.iter()) {
                assert_eq!(parse_size(spelling), Ok(*bytes), "{input}: {spelling}");
            }
            assert!(a.binary.is_some() && a.decimal.is_some(), "{input}");
        }
        assert_eq!(parse_size("128 KiB"), Ok(128 << 10));
        assert_eq!(parse_size("128k"), Ok(128 << 10));
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("2h"), Ok(Duration::from_secs(7200)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert!(parse_duration("10").is_err());
        assert!(parse_duration("0").is_err());
        assert!(parse_duration("10x").is_err());
        assert!(parse_duration("s").is_err());
        assert!(parse_duration("99999999999999999999999d").is_err());
        assert!(parse_duration("1e300").is_err());
        assert_eq!(format_duration(Duration::from_secs(7200)), "2h");
        assert_eq!(format_duration(Duration::from_secs(90)), "90s");
    }

    /// The reasons config errors show after the key: each quotes what was written.
    #[test]
    fn error_texts() {
        let size = |s: &str| parse_size(s).unwrap_err().to_string();
        let dur = |s: &str| parse_duration(s).unwrap_err().to_string();
        assert_eq!(size(" "), "empty size");
        assert_eq!(size("k"), "\"k\" does not start with a number");
        assert_eq!(size("1.2.3k"), "\"1.2.3\" is not a number");
        assert_eq!(
            size("4x"),
            "unknown size unit \"x\" (use k, M, G, T, P or KiB, MiB, GiB, TiB, PiB, all binary; \
             or a plain number of bytes like 4096 or 3.84e12)"
        );
        assert_eq!(size("99999999999999P"), "\"99999999999999P\" is too large");
        assert_eq!(size("0.3k"), "\"0.3k\" is not a whole number of bytes");
        assert_eq!(dur(""), "empty duration");
        assert_eq!(dur("-5"), "\"-5\" is not a valid duration");
        assert_eq!(
            dur("s"),
            "\"s\" is not a valid duration (expected e.g. 30s, 5m, 2h)"
        );
        assert_eq!(
            dur("1h30"),
            "\"1h30\" needs a unit after 30 (ms, s, m, h, d)"
        );
        assert_eq!(
            dur("10x"),
            "unknown duration unit \"x\" (use ms, s, m, h, d)"
        );
        assert_eq!(
            dur("1e300"),
            "1e300 has no unit; write \"1e300s\" or \"1e300m\" (units: ms, s, m, h, d)"
        );
        assert_eq!(
            dur(" 4 "),
            "4 has no unit; write \"4s\" or \"4m\" (units: ms, s, m, h, d)"
        );
        assert_eq!(
            dur("99999999999999999999999d"),
            "\"99999999999999999999999d\" is too long"
        );
        assert_eq!(dur("1.2.3s"), "\"1.2.3s\" is not a valid duration");
    }
}
