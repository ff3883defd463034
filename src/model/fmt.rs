//! Figures in words, one way everywhere: counts, rates, bytes, ratios, latencies, spans of
//! time and instants, as the verdict, the report, the status page and the journal write them.

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

/// Decimal bytes per second, as the drive makers rate them: "3.28 GB/s", "406 MB/s".
pub fn fmt_rate(bps: f64) -> String {
    format!("{}/s", fmt_bytes(bps))
}

/// Decimal bytes: "3.20 TB", "406 MB".
pub fn fmt_bytes(b: f64) -> String {
    if !b.is_finite() {
        return "-".into();
    }
    const UNITS: [(&str, f64); 5] = [
        ("PB", 1e15),
        ("TB", 1e12),
        ("GB", 1e9),
        ("MB", 1e6),
        ("kB", 1e3),
    ];
    for (u, f) in UNITS {
        if b.abs() >= f {
            let v = b / f;
            return if v >= 100.0 {
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
