//! Human units: sizes (`4k`, `1GiB`, `512`) and durations (`30s`, `2h`, `1h30m`).
//! Sizes use binary multiples for both `k` and `KiB` spellings, as fio does, and `KB`/`MB`/`GB`
//! with a capital B and no `i` are decimal, as drive specifications are.

use std::time::Duration;

/// Parse a size. `4k` = `4K` = `4KiB` = 4096; `4KB` = 4000; plain digits are bytes.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    if t.is_empty() {
        return Err("empty size".into());
    }
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    if num.is_empty() {
        return Err(format!("\"{s}\" does not start with a number"));
    }
    num.parse::<f64>()
        .map_err(|_| format!("\"{num}\" is not a number"))?;
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
            return Err(format!(
                "unknown size unit \"{u}\" (use k, M, G, T, KiB.., or KB.. for decimal)"
            ));
        }
    };
    // Exact decimal arithmetic: "17.52PB" is 17520000000000000 bytes, not a float near it.
    let (ip, fp) = num.split_once('.').unwrap_or((num, ""));
    if ip.len() + fp.len() > 36 {
        return Err(format!("\"{s}\" is too large"));
    }
    let scale = 10u128.pow(fp.len() as u32);
    let digits: u128 = format!("{ip}{fp}")
        .parse()
        .map_err(|_| format!("\"{num}\" is not a number"))?;
    let scaled = digits
        .checked_mul(mult as u128)
        .ok_or_else(|| format!("\"{s}\" is too large"))?;
    if scaled % scale != 0 {
        return Err(format!("\"{s}\" is not a whole number of bytes"));
    }
    u64::try_from(scaled / scale).map_err(|_| format!("\"{s}\" is too large"))
}

/// Parse a duration: `500ms`, `30s`, `5m`, `2h`, `3d`, combinations like `1h30m`; plain digits
/// are seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    if t.is_empty() {
        return Err("empty duration".into());
    }
    if let Ok(secs) = t.parse::<f64>() {
        if secs < 0.0 || !secs.is_finite() {
            return Err(format!("\"{s}\" is not a valid duration"));
        }
        return Duration::try_from_secs_f64(secs).map_err(|_| format!("\"{s}\" is too long"));
    }
    let mut total = 0f64;
    let mut rest = t;
    while !rest.is_empty() {
        let split = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if split == 0 {
            return Err(format!(
                "\"{s}\" is not a valid duration (expected e.g. 30s, 5m, 2h)"
            ));
        }
        let n: f64 = rest[..split]
            .parse()
            .map_err(|_| format!("\"{s}\" is not a valid duration"))?;
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
            "" => return Err(format!("\"{s}\" needs a unit after {n} (ms, s, m, h, d)")),
            u => {
                return Err(format!(
                    "unknown duration unit \"{u}\" (use ms, s, m, h, d)"
                ));
            }
        };
        total += n * m;
    }
    Duration::try_from_secs_f64(total).map_err(|_| format!("\"{s}\" is too long"))
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
}
