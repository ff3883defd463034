//! Figures read from a results file are checked before a chart, a table or an aggregation
//! sees them, by both readers of results files (`report::load_file` and
//! `state::results::load`, which moves a file that fails aside as corrupt):
//!
//! - every number must be finite (JSON cannot say otherwise) and no larger in magnitude than
//!   any figure nvsoak writes. A byte count fits in 64 bits (below 1.9e19), and latencies,
//!   rates and times are far smaller, so 1e20 bounds them all; a number beyond it
//!   (`1.7976931348623157e308` as an average latency) is a damaged or forged file.
//! - a figure whose unit has no negative values (a latency, a duration, a time, a rate, a
//!   size; named by its key, [`never_negative`]) must not be below zero. `-0` is zero.
//! - no string is longer than [`STRING_LIMIT`] bytes (nvsoak writes names, paths and short
//!   reasons).
//!
//! The first value that breaks a rule is refused, naming it and the rule, never drawn.

/// The largest magnitude a figure in a results file may have.
pub const LIMIT: f64 = 1e20;

/// The longest string a results file may hold, in bytes.
pub const STRING_LIMIT: usize = 64 * 1024;

/// A value of a results file that breaks a rule of this module.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("the figure {figure} is {value}, {rule}")]
pub struct OutOfRange {
    /// Its JSON path: `soak.history.points[3].lat_avg_us`.
    pub figure: String,
    /// What it is: `1.7976931348623157e308`, `-5e0`, `a string of 70000 bytes`.
    pub value: String,
    /// The rule it breaks, in words.
    pub rule: String,
}

/// Whether a figure named `key` (its field name) is in a unit without negative values:
/// latencies (`_us`), durations (`_secs`, `secs`), sizes and rates (`_bytes`, `iops`,
/// `_per_sec`, `_per_second`, `block_size`, `dwpd`) and Unix times (`t`, `started`, ...).
pub fn never_negative(key: &str) -> bool {
    const SUFFIXES: [&str; 7] = [
        "_us",
        "_secs",
        "_bytes",
        "iops",
        "_per_sec",
        "_per_second",
        "dwpd",
    ];
    const NAMES: [&str; 17] = [
        "t",
        "secs",
        "time",
        "start",
        "end",
        "started",
        "ended",
        "finished",
        "since",
        "saved_at",
        "evaluated_at",
        "moved_at",
        "soak_started",
        "start_time",
        "latest_time",
        "block_size",
        "capacity_bytes",
    ];
    SUFFIXES.iter().any(|s| key.ends_with(s)) || NAMES.contains(&key)
}

/// The first value of `v` that breaks a rule, if any.
pub fn first_out_of_range(v: &serde_json::Value) -> Option<OutOfRange> {
    let mut path = String::new();
    walk(v, "", &mut path)
}

/// `v`, found under the field `key` (an array's elements under the array's key).
fn walk(v: &serde_json::Value, key: &str, path: &mut String) -> Option<OutOfRange> {
    use serde_json::Value as V;
    let refuse = |value: String, rule: String| {
        Some(OutOfRange {
            figure: path.clone(),
            value,
            rule,
        })
    };
    match v {
        V::Number(n) => {
            // An integer beyond 64 bits parses as a float too (arbitrary precision is off).
            let x = n.as_f64().unwrap_or(f64::INFINITY);
            if !x.is_finite() || x.abs() > LIMIT {
                refuse(
                    format!("{x:e}"),
                    format!("beyond anything nvsoak measures (at most {LIMIT:e} in magnitude)"),
                )
            } else if x < 0.0 && never_negative(key) {
                refuse(
                    format!("{x:e}"),
                    "below zero, which its unit cannot be".to_string(),
                )
            } else {
                None
            }
        }
        V::String(s) if s.len() > STRING_LIMIT => refuse(
            format!("a string of {} bytes", s.len()),
            format!("longer than any nvsoak writes (at most {STRING_LIMIT} bytes)"),
        ),
        V::Array(a) => a.iter().enumerate().find_map(|(i, e)| {
            let len = path.len();
            path.push_str(&format!("[{i}]"));
            let r = walk(e, key, path);
            path.truncate(len);
            r
        }),
        V::Object(m) => m.iter().find_map(|(k, e)| {
            let len = path.len();
            if !path.is_empty() {
                path.push('.');
            }
            path.push_str(k);
            let r = walk(e, k, path);
            path.truncate(len);
            r
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json(s: &str) -> serde_json::Value {
        serde_json::from_str(s).expect("json")
    }

    #[test]
    fn the_first_figure_out_of_range_is_named() {
        let v = json(
            r#"{"soak":{"history":{"points":[{"lat_avg_us":100.5},{"lat_avg_us":1.7976931348623157e308}]}},"written_bytes":18446744073709551615}"#,
        );
        let o = first_out_of_range(&v).expect("out of range");
        assert_eq!(o.figure, "soak.history.points[1].lat_avg_us");
        assert_eq!(o.value, "1.7976931348623157e308");
        assert!(
            o.rule.starts_with("beyond anything nvsoak measures"),
            "{o:?}"
        );
        let ok = json(r#"{"a":[1e19,-1e20,0.0],"b":"1e308","c":18446744073709551615}"#);
        assert_eq!(first_out_of_range(&ok), None);
    }

    #[test]
    fn a_figure_below_zero_is_refused_where_its_unit_has_none() {
        let v = json(r#"{"sweeps":[{"points":[{"iops":5.0},{"iops":-5.0}]}]}"#);
        let o = first_out_of_range(&v).expect("negative iops");
        assert_eq!(o.figure, "sweeps[0].points[1].iops");
        assert_eq!(o.value, "-5e0");
        assert_eq!(o.rule, "below zero, which its unit cannot be");
        for (k, bad) in [
            ("lat_p99_us", true),
            ("elapsed_secs", true),
            ("t", true),
            ("read_bytes", true),
            ("bytes_per_sec", true),
            ("started", true),
            ("celsius", false),
            ("value", false),
            ("slope_excursion_ratio", false),
        ] {
            let v = json(&format!(r#"{{"{k}":-1.0}}"#));
            assert_eq!(first_out_of_range(&v).is_some(), bad, "{k}");
        }
        // Minus zero is zero; arrays of a never-negative figure are checked element by element.
        assert_eq!(first_out_of_range(&json(r#"{"t":-0.0}"#)), None);
        let arr = json(r#"{"since":[1.0,-2.0]}"#);
        assert_eq!(
            first_out_of_range(&arr).map(|o| o.figure),
            Some("since[1]".into())
        );
    }

    #[test]
    fn a_string_longer_than_nvsoak_writes_is_refused() {
        let long = "x".repeat(STRING_LIMIT + 1);
        let v = serde_json::json!({"target": "t0", "stop_reason": long});
        let o = first_out_of_range(&v).expect("long string");
        assert_eq!(o.figure, "stop_reason");
        assert_eq!(o.value, format!("a string of {} bytes", STRING_LIMIT + 1));
        let fits = serde_json::json!({"stop_reason": "x".repeat(STRING_LIMIT)});
        assert_eq!(first_out_of_range(&fits), None);
    }
}
