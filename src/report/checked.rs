//! Figures read from a results file are checked before a chart, a table or an aggregation
//! sees them: every number must be finite (JSON cannot say otherwise) and no larger in
//! magnitude than any figure nvsoak writes. A byte count fits in 64 bits (below 1.9e19), and
//! latencies, rates and times are far smaller, so 1e20 bounds them all; a number beyond it
//! (`1.7976931348623157e308` as an average latency) is a damaged or forged file, refused
//! naming the figure, never drawn.

/// The largest magnitude a figure in a results file may have.
pub const LIMIT: f64 = 1e20;

/// The JSON path (`soak.history.points[3].lat_avg_us`) and value of the first number out of
/// range, if any.
pub fn first_out_of_range(v: &serde_json::Value) -> Option<(String, f64)> {
    let mut path = String::new();
    walk(v, &mut path)
}

fn walk(v: &serde_json::Value, path: &mut String) -> Option<(String, f64)> {
    use serde_json::Value as V;
    match v {
        V::Number(n) => {
            // An integer beyond 64 bits parses as a float too (arbitrary precision is off).
            let x = n.as_f64().unwrap_or(f64::INFINITY);
            (!x.is_finite() || x.abs() > LIMIT).then(|| (path.clone(), x))
        }
        V::Array(a) => a.iter().enumerate().find_map(|(i, e)| {
            let len = path.len();
            path.push_str(&format!("[{i}]"));
            let r = walk(e, path);
            path.truncate(len);
            r
        }),
        V::Object(m) => m.iter().find_map(|(k, e)| {
            let len = path.len();
            if !path.is_empty() {
                path.push('.');
            }
            path.push_str(k);
            let r = walk(e, path);
            path.truncate(len);
            r
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_figure_out_of_range_is_named() {
        let v: serde_json::Value = serde_json::from_str(
            r#"{"soak":{"history":{"points":[{"lat_avg_us":100.5},{"lat_avg_us":1.7976931348623157e308}]}},"written_bytes":18446744073709551615}"#,
        )
        .expect("json");
        let (path, x) = first_out_of_range(&v).expect("out of range");
        assert_eq!(path, "soak.history.points[1].lat_avg_us");
        assert_eq!(x, f64::MAX);
        let ok: serde_json::Value =
            serde_json::from_str(r#"{"a":[1e19,-1e20,0.0],"b":"1e308","c":18446744073709551615}"#)
                .expect("json");
        assert_eq!(first_out_of_range(&ok), None);
    }
}
