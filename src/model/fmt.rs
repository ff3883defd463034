//! Figures in words, one way everywhere: counts, rates, bytes, ratios, latencies, spans of
//! time and instants, as the verdict, the report, the status page, `nvsoak state show`, the
//! CLI and the journal write them.
//!
//! The units convention: sizes in IEC units (KiB, MiB, GiB, TiB: `fmt_bytes`), rates and
//! throughput in SI units (MB/s, GB/s: `fmt_rate`), as drive makers rate them. A drive's
//! capacity is given both ways (`fmt_capacity`: "2.91 TiB (3.20 TB)"), and a datasheet's own
//! figure may stay decimal where the text says it is one (`fmt_datasheet_bytes`).

/// A rounded count with thousands separators: 121500.4 -> "121,500".
pub fn fmt_count(v: f64) -> String {
    if !v.is_finite() {
        return "-".into();
    }
    let n = v.round().abs() as u64;
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    if v.round() < 0.0 {
        format!("-{out}")
    } else {
        out
    }
}

/// Latency from microseconds: "880 µs", "12.5 µs", "1.28 ms".
pub fn fmt_latency_us(us: f64) -> String {
    if !us.is_finite() {
        "-".into()
    } else if us >= 1000.0 {
        format!("{:.2} ms", us / 1000.0)
    } else if us >= 100.0 {
        format!("{us:.0} µs")
    } else {
        format!("{us:.1} µs")
    }
}

/// A CPU cost in nanoseconds: "85 ns", "1.24 µs", "2.10 ms"; "-" when not finite.
pub fn fmt_cpu_ns(ns: f64) -> String {
    if !ns.is_finite() || ns < 0.0 {
        "-".into()
    } else if ns < 1000.0 {
        format!("{ns:.0} ns")
    } else if ns < 1e6 {
        format!("{:.2} µs", ns / 1e3)
    } else {
        format!("{:.2} ms", ns / 1e6)
    }
}

/// Rates and throughput in SI units, as drive makers rate them: "3.28 GB/s", "406 MB/s".
pub fn fmt_rate(bps: f64) -> String {
    if !bps.is_finite() {
        return "-".into();
    }
    format!("{}/s", fmt_decimal_bytes(bps))
}

/// Sizes in IEC (binary) units, as the journal, `nvsoak state show`, the CLI and the reports
/// write them: "512 B", "4.00 KiB", "1.50 GiB", "2.91 TiB"; "-" when not finite.
pub fn fmt_bytes(b: f64) -> String {
    if !b.is_finite() {
        return "-".into();
    }
    match iec_scale(b) {
        (_, "B") => format!("{b:.0} B"),
        (v, unit) => format!("{v:.2} {unit}"),
    }
}

/// `b` bytes in the largest IEC unit that leaves at least 1 of it: (1.5, "GiB"). The one
/// scaling of sizes, for every text and chart tick.
pub fn iec_scale(b: f64) -> (f64, &'static str) {
    const UNITS: [&str; 7] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    let mut v = b;
    let mut i = 0;
    while v.abs() >= 1024.0 && i + 1 < UNITS.len() {
        v /= 1024.0;
        i += 1;
    }
    (v, UNITS[i])
}

/// A drive's capacity: its size in IEC units, then in brackets the decimal figure its
/// datasheet and label give: "2.91 TiB (3.20 TB)".
pub fn fmt_capacity(b: f64) -> String {
    if !b.is_finite() {
        return "-".into();
    }
    format!("{} ({})", fmt_bytes(b), fmt_decimal_bytes(b))
}

/// A datasheet's figure in its own decimal units, for text that says it is one (a rated
/// endurance, a ratings-table entry's capacity): "3.20 TB", "17.5 PB"; "-" when not finite.
pub fn fmt_datasheet_bytes(b: f64) -> String {
    if !b.is_finite() {
        return "-".into();
    }
    fmt_decimal_bytes(b)
}

fn fmt_decimal_bytes(b: f64) -> String {
    const UNITS: [(&str, f64); 6] = [
        ("EB", 1e18),
        ("PB", 1e15),
        ("TB", 1e12),
        ("GB", 1e9),
        ("MB", 1e6),
        ("kB", 1e3),
    ];
    for (u, f) in UNITS {
        if b.abs() >= f {
            let v = b / f;
            return if v.abs() >= 100.0 {
                format!("{v:.0} {u}")
            } else {
                format!("{v:.2} {u}")
            };
        }
    }
    format!("{b:.0} B")
}

/// "50.0 %".
pub fn fmt_pct(ratio: f64) -> String {
    let pct = ratio * 100.0;
    if pct.is_finite() {
        format!("{pct:.1} %")
    } else {
        "-".into()
    }
}

/// "1 round", "3 rounds": a count with its noun, singular for one.
pub fn count_of(n: u64, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {}", plural(noun))
    }
}

/// The plural of an English noun (or of a phrase's last word): "entry" "entries", "pass"
/// "passes", "error" "errors"; "day" keeps its "y".
pub fn plural(noun: &str) -> String {
    let vowel_before_y = |s: &str| {
        s.chars()
            .rev()
            .nth(1)
            .is_some_and(|c| "aeiou".contains(c.to_ascii_lowercase()))
    };
    if let Some(stem) = noun.strip_suffix('y')
        && !stem.is_empty()
        && !vowel_before_y(noun)
    {
        format!("{stem}ies")
    } else if ["s", "x", "z", "ch", "sh"]
        .iter()
        .any(|e| noun.ends_with(e))
    {
        format!("{noun}es")
    } else {
        format!("{noun}s")
    }
}

/// "1 d 02:03:04", "02:03:04".
pub fn fmt_elapsed(secs: f64) -> String {
    if !secs.is_finite() || secs < 0.0 {
        return "-".into();
    }
    let s = secs.round() as u64;
    let (d, h, m, s) = (s / 86400, s / 3600 % 24, s / 60 % 60, s % 60);
    if d > 0 {
        format!("{d} d {h:02}:{m:02}:{s:02}")
    } else {
        format!("{h:02}:{m:02}:{s:02}")
    }
}

/// A Unix time as `YYYY-MM-DD HH:MM:SS UTC`.
pub fn fmt_time(unix: f64) -> String {
    // UTC, without pulling in a date crate: days since the epoch to a civil date.
    let secs = unix.max(0.0) as i64;
    let (days, rem) = (secs.div_euclid(86400), secs.rem_euclid(86400));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_iec() {
        assert_eq!(fmt_bytes(0.0), "0 B");
        assert_eq!(fmt_bytes(512.0), "512 B");
        assert_eq!(fmt_bytes(1023.0), "1023 B");
        assert_eq!(fmt_bytes(4096.0), "4.00 KiB");
        assert_eq!(fmt_bytes((3u64 << 29) as f64), "1.50 GiB");
        assert_eq!(fmt_bytes(3.2e12), "2.91 TiB");
        assert_eq!(fmt_bytes((100u64 << 40) as f64), "100.00 TiB");
        assert_eq!(fmt_bytes(-2048.0), "-2.00 KiB");
        assert_eq!(fmt_bytes(f64::NAN), "-");
        assert_eq!(fmt_bytes(f64::INFINITY), "-");
    }

    #[test]
    fn rates_are_si() {
        assert_eq!(fmt_rate(406e6), "406 MB/s");
        assert_eq!(fmt_rate(3.28e9), "3.28 GB/s");
        assert_eq!(fmt_rate(999.0), "999 B/s");
        assert_eq!(fmt_rate(f64::NAN), "-");
    }

    #[test]
    fn capacities_give_both_and_datasheets_stay_decimal() {
        assert_eq!(fmt_capacity(3.2e12), "2.91 TiB (3.20 TB)");
        assert_eq!(fmt_capacity(3.84e12), "3.49 TiB (3.84 TB)");
        assert_eq!(fmt_capacity(f64::NAN), "-");
        assert_eq!(fmt_datasheet_bytes(3.2e12), "3.20 TB");
        assert_eq!(fmt_datasheet_bytes(17.52e15), "17.52 PB");
        assert_eq!(fmt_datasheet_bytes(f64::NEG_INFINITY), "-");
    }

    /// The convention in one place: no size is written in decimal units and no rate in
    /// binary ones.
    #[test]
    fn no_formatter_mixes_the_conventions() {
        for b in [1.0, 999.0, 1e3, 4096.0, 1e6, 1.5e9, 3.2e12, 1e15, 2e18] {
            let size = fmt_bytes(b);
            assert!(
                size.ends_with(" B") || size.contains("iB"),
                "size {b}: {size}"
            );
            let rate = fmt_rate(b);
            assert!(
                rate.ends_with("B/s") && !rate.contains("iB"),
                "rate {b}: {rate}"
            );
        }
    }
}
