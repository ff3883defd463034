//! Human units: sizes (`4k`, `1GiB`, `512`) and durations (`30s`, `2h`, `1h30m`).
//! Sizes use binary multiples for both `k` and `KiB` spellings, as fio does, and `KB`/`MB`/`GB`
//! with a capital B and no `i` are decimal, as drive specifications are.

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
    #[error("unknown size unit \"{0}\" (use k, M, G, T, KiB.., or KB.. for decimal)")]
    UnknownSizeUnit(String),
    #[error("\"{0}\" is too large")]
    TooLarge(String),
    #[error("\"{0}\" is not a whole number of bytes")]
    NotWholeBytes(String),
    #[error("\"{0}\" is not a valid duration")]
    InvalidDuration(String),
    #[error("\"{0}\" is not a valid duration (expected e.g. 30s, 5m, 2h)")]
    NoDurationNumber(String),
    #[error("\"{input}\" needs a unit after {n} (ms, s, m, h, d)")]
    MissingDurationUnit { input: String, n: f64 },
    #[error("unknown duration unit \"{0}\" (use ms, s, m, h, d)")]
    UnknownDurationUnit(String),
    #[error("\"{0}\" is too long")]
    TooLong(String),
}

/// Parse a size. `4k` = `4K` = `4KiB` = 4096; `4KB` = 4000; plain digits are bytes.
pub fn parse_size(s: &str) -> Result<u64, UnitError> {
    let t = s.trim();
    if t.is_empty() {
        return Err(UnitError::EmptySize);
    }
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    if num.is_empty() {
        return Err(UnitError::NoNumber(s.to_string()));
    }
    num.parse::<f64>()
        .map_err(|_| UnitError::NotANumber(num.to_string()))?;
    let mult: u64 = match unit.trim() {
        "" | "b" | "B" => 1,
        "k" | "K" | "KiB" | "kiB" | "Ki" => 1 << 10,
        "m" | "M" | "MiB" | "Mi" => 1 << 20,
        "g" | "G" | "GiB" | "Gi" => 1 << 30,
        "t" | "T" | "TiB" | "Ti" => 1 << 40,
        "p" | "P" | "PiB" | "Pi" => 1 << 50,
        "kB" | "KB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        "TB" => 1_000_000_000_000,
        "PB" => 1_000_000_000_000_000,
        u => {
            return Err(UnitError::UnknownSizeUnit(u.to_string()));
        }
    };
    // Exact decimal arithmetic: "17.52PB" is 17520000000000000 bytes, not a float near it.
    let (ip, fp) = num.split_once('.').unwrap_or((num, ""));
    if ip.len() + fp.len() > 36 {
        return Err(UnitError::TooLarge(s.to_string()));
    }
    let scale = 10u128.pow(fp.len() as u32);
    let digits: u128 = format!("{ip}{fp}")
        .parse()
        .map_err(|_| UnitError::NotANumber(num.to_string()))?;
    let scaled = digits
        .checked_mul(mult as u128)
        .ok_or_else(|| UnitError::TooLarge(s.to_string()))?;
    if scaled % scale != 0 {
        return Err(UnitError::NotWholeBytes(s.to_string()));
    }
    u64::try_from(scaled / scale).map_err(|_| UnitError::TooLarge(s.to_string()))
}

/// Parse a duration: `500ms`, `30s`, `5m`, `2h`, `3d`, combinations like `1h30m`; plain digits
/// are seconds.
pub fn parse_duration(s: &str) -> Result<Duration, UnitError> {
    let t = s.trim();
    if t.is_empty() {
        return Err(UnitError::EmptyDuration);
    }
    if let Ok(secs) = t.parse::<f64>() {
        if secs < 0.0 || !secs.is_finite() {
            return Err(UnitError::InvalidDuration(s.to_string()));
        }
        return Duration::try_from_secs_f64(secs).map_err(|_| UnitError::TooLong(s.to_string()));
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

/// Bytes as `1.50 GiB`.
pub fn format_bytes(b: u64) -> String {
    const U: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = b as f64;
    let mut i = 0;
    while v >= 1024.0 && i + 1 < U.len() {
        v /= 1024.0;
        i += 1;
    }
    if i == 0 {
        format!("{b} B")
    } else {
        format!("{v:.2} {}", U[i])
    }
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
        assert_eq!(parse_size("3.2TB"), Ok(3_200_000_000_000));
        assert_eq!(parse_size("1.5k"), Ok(1536));
        assert!(parse_size("4x").is_err());
        assert!(parse_size("k").is_err());
        assert!(parse_size("").is_err());
        assert_eq!(parse_size("17.52PB"), Ok(17_520_000_000_000_000));
        assert_eq!(parse_size("0.5k"), Ok(512));
        assert!(parse_size("0.3k").is_err());
        assert!(parse_size("1.2.3k").is_err());
        assert!(parse_size("99999999999999P").is_err());
        assert_eq!(format_size(65536), "64k");
        assert_eq!(format_size(1 << 30), "1G");
        assert_eq!(format_size(1000), "1000");
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("2h"), Ok(Duration::from_secs(7200)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("10"), Ok(Duration::from_secs(10)));
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
            "unknown size unit \"x\" (use k, M, G, T, KiB.., or KB.. for decimal)"
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
        assert_eq!(dur("1e300"), "\"1e300\" is too long");
        assert_eq!(dur("1.2.3s"), "\"1.2.3s\" is not a valid duration");
    }
}
