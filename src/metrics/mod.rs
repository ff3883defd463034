//! Every metric name, help text and unit lives under this module: it maps typed snapshots to
//! Prometheus metric families on each scrape (node_exporter's collector shape).
//! `workload` covers the soak and the daemon, `health` the drives, `state` the checkpoint saves.
//!
//! Architecture Invariant: no other module knows a metric name.

mod ata;
mod derived;
mod family;
pub mod health;
mod nvme;
mod ocp;
pub(crate) mod pcie;
#[cfg(test)]
pub(crate) mod promtool;
pub mod state;
pub mod verdict;
pub mod workload;

use prometheus::proto::{
    Bucket, Counter, Gauge, Histogram, LabelPair, Metric, MetricFamily, MetricType, Quantile,
    Summary,
};

/// Builds one metric family.
pub struct Family {
    mf: MetricFamily,
}

fn labels(pairs: &[(&str, &str)]) -> Vec<LabelPair> {
    pairs
        .iter()
        .map(|(k, v)| {
            let mut l = LabelPair::default();
            l.set_name((*k).to_string());
            l.set_value((*v).to_string());
            l
        })
        .collect()
}

impl Family {
    fn new(name: &str, help: &str, t: MetricType) -> Self {
        let mut mf = MetricFamily::default();
        mf.set_name(name.to_string());
        mf.set_help(help.to_string());
        mf.set_field_type(t);
        Family { mf }
    }
    pub fn gauge(name: &str, help: &str) -> Self {
        Self::new(name, help, MetricType::GAUGE)
    }
    /// `name` must end in `_total`.
    pub fn counter(name: &str, help: &str) -> Self {
        debug_assert!(
            name.ends_with("_total"),
            "counter {name} must end in _total"
        );
        Self::new(name, help, MetricType::COUNTER)
    }
    pub fn histogram(name: &str, help: &str) -> Self {
        Self::new(name, help, MetricType::HISTOGRAM)
    }

    /// Add a sample; for counters the value is the cumulative count.
    pub fn add(&mut self, label_pairs: &[(&str, &str)], value: f64) -> &mut Self {
        let mut m = Metric::default();
        m.set_label(labels(label_pairs));
        match self.mf.get_field_type() {
            MetricType::COUNTER => {
                let mut c = Counter::default();
                c.set_value(value);
                m.set_counter(c);
            }
            _ => {
                let mut g = Gauge::default();
                g.set_value(value);
                m.set_gauge(g);
            }
        }
        self.mf.mut_metric().push(m);
        self
    }

    /// Add a histogram sample from non-cumulative bucket counts (`counts.len() ==
    /// bounds.len() + 1`, the last being +Inf) and the sum of observations.
    pub fn add_histogram(
        &mut self,
        label_pairs: &[(&str, &str)],
        bounds: &[f64],
        counts: &[u64],
        sum: f64,
    ) -> &mut Self {
        let mut h = Histogram::default();
        let mut cum = 0u64;
        let mut buckets = Vec::with_capacity(bounds.len());
        for (b, c) in bounds.iter().zip(counts.iter()) {
            cum += c;
            let mut bk = Bucket::default();
            bk.set_upper_bound(*b);
            bk.set_cumulative_count(cum);
            buckets.push(bk);
        }
        let total: u64 = counts.iter().sum();
        h.set_bucket(buckets);
        h.set_sample_count(total);
        h.set_sample_sum(sum);
        let mut m = Metric::default();
        m.set_label(labels(label_pairs));
        m.set_histogram(h);
        self.mf.mut_metric().push(m);
        self
    }

    pub fn summary(name: &str, help: &str) -> Self {
        Self::new(name, help, MetricType::SUMMARY)
    }

    /// Add a summary sample: `(quantile, value)` pairs plus the cumulative count and sum.
    pub fn add_summary(
        &mut self,
        label_pairs: &[(&str, &str)],
        quantiles: &[(f64, f64)],
        count: u64,
        sum: f64,
    ) -> &mut Self {
        let mut sm = Summary::default();
        let qs: Vec<Quantile> = quantiles
            .iter()
            .map(|(q, v)| {
                let mut x = Quantile::default();
                x.set_quantile(*q);
                x.set_value(*v);
                x
            })
            .collect();
        sm.set_quantile(qs);
        sm.set_sample_count(count);
        sm.set_sample_sum(sum);
        let mut m = Metric::default();
        m.set_label(labels(label_pairs));
        m.set_summary(sm);
        self.mf.mut_metric().push(m);
        self
    }

    pub fn is_empty(&self) -> bool {
        self.mf.get_metric().is_empty()
    }

    pub fn finish(self) -> MetricFamily {
        self.mf
    }
}

/// Push the family into `out` unless it has no samples (an empty family is noise in the
/// exposition and trips `promtool check metrics` on some versions).
pub fn push(out: &mut Vec<MetricFamily>, f: Family) {
    if !f.is_empty() {
        out.push(f.finish());
    }
}

/// Render families in the Prometheus text format (version 0.0.4), byte for byte what
/// `prometheus::TextEncoder` writes (a test compares the two), without its allocation per
/// sample: each value and label is written straight into one buffer, sized from the previous
/// render's length.
///
/// Why (issue 35): at 200 targets (26k series, 2.2 MB) the encoder's own allocations and the
/// buffer's regrowth were half of a render's CPU.
pub fn encode_text(families: &[MetricFamily]) -> Result<String, prometheus::Error> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static LAST_LEN: AtomicUsize = AtomicUsize::new(0);
    let mut out = String::with_capacity(LAST_LEN.load(Ordering::Relaxed) * 9 / 8 + 1024);
    for mf in families {
        encode_family(mf, &mut out)?;
    }
    LAST_LEN.store(out.len(), Ordering::Relaxed);
    Ok(out)
}

fn encode_family(mf: &MetricFamily, out: &mut String) -> Result<(), prometheus::Error> {
    use std::fmt::Write;
    let name = mf.name();
    if name.is_empty() {
        return Err(prometheus::Error::Msg("a metric family has no name".into()));
    }
    if mf.get_metric().is_empty() {
        return Err(prometheus::Error::Msg(format!(
            "metric family {name} has no metrics"
        )));
    }
    let help = mf.help();
    if !help.is_empty() {
        out.push_str("# HELP ");
        out.push_str(name);
        out.push(' ');
        escape_into(out, help, false);
        out.push('\n');
    }
    let t = mf.get_field_type();
    let type_name = match t {
        MetricType::COUNTER => "counter",
        MetricType::GAUGE => "gauge",
        MetricType::HISTOGRAM => "histogram",
        MetricType::SUMMARY => "summary",
        MetricType::UNTYPED => "untyped",
    };
    let _ = writeln!(out, "# TYPE {name} {type_name}");
    for m in mf.get_metric() {
        let labels = m.get_label();
        match t {
            MetricType::COUNTER => sample(out, name, "", labels, None, m.get_counter().get_value()),
            MetricType::GAUGE => sample(out, name, "", labels, None, m.get_gauge().get_value()),
            MetricType::HISTOGRAM => {
                let h = m.get_histogram();
                let mut inf_seen = false;
                let mut le = String::new();
                for b in h.get_bucket() {
                    let ub = b.upper_bound();
                    le.clear();
                    let _ = write!(le, "{ub}");
                    sample(
                        out,
                        name,
                        "_bucket",
                        labels,
                        Some(("le", &le)),
                        b.cumulative_count() as f64,
                    );
                    inf_seen |= ub.is_sign_positive() && ub.is_infinite();
                }
                if !inf_seen {
                    sample(
                        out,
                        name,
                        "_bucket",
                        labels,
                        Some(("le", "+Inf")),
                        h.get_sample_count() as f64,
                    );
                }
                sample(out, name, "_sum", labels, None, h.get_sample_sum());
                sample(
                    out,
                    name,
                    "_count",
                    labels,
                    None,
                    h.get_sample_count() as f64,
                );
            }
            MetricType::SUMMARY => {
                let sm = m.get_summary();
                let mut q = String::new();
                for x in sm.get_quantile() {
                    q.clear();
                    let _ = write!(q, "{}", x.quantile());
                    sample(out, name, "", labels, Some(("quantile", &q)), x.value());
                }
                sample(out, name, "_sum", labels, None, sm.sample_sum());
                sample(out, name, "_count", labels, None, sm.sample_count() as f64);
            }
            MetricType::UNTYPED => {
                return Err(prometheus::Error::Msg(format!(
                    "metric family {name} is untyped"
                )));
            }
        }
        if m.timestamp_ms() != 0 {
            // Never set by nvsoak; kept as the reference encoder writes it.
            out.pop();
            let _ = writeln!(out, " {}", m.timestamp_ms());
        }
    }
    Ok(())
}

/// One sample line: `name{labels,extra} value`.
fn sample(
    out: &mut String,
    name: &str,
    suffix: &str,
    labels: &[LabelPair],
    extra: Option<(&str, &str)>,
    value: f64,
) {
    use std::fmt::Write;
    out.push_str(name);
    out.push_str(suffix);
    if !labels.is_empty() || extra.is_some() {
        let mut sep = '{';
        for (k, v) in labels.iter().map(|l| (l.name(), l.value())).chain(extra) {
            out.push(sep);
            out.push_str(k);
            out.push_str("=\"");
            escape_into(out, v, true);
            out.push('"');
            sep = ',';
        }
        out.push('}');
    }
    let _ = writeln!(out, " {value}");
}

/// `v` with backslashes and newlines (and, in label values, double quotes) escaped.
fn escape_into(out: &mut String, v: &str, quotes: bool) {
    if !(v.contains(['\\', '\n']) || quotes && v.contains('"')) {
        out.push_str(v);
        return;
    }
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '"' if quotes => out.push_str("\\\""),
            c => out.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The crate's reference encoder, which [`encode_text`] replaces.
    fn reference(families: &[MetricFamily]) -> String {
        use prometheus::Encoder;
        let mut buf = Vec::new();
        prometheus::TextEncoder::new()
            .encode(families, &mut buf)
            .expect("reference encode");
        String::from_utf8(buf).expect("utf-8")
    }

    #[test]
    fn the_text_is_byte_for_byte_the_reference_encoders() {
        let mut out = Vec::new();
        let mut c = Family::counter("x_ops_total", "Ops, with a \\ backslash\nand a newline.");
        c.add(&[("target", "t0"), ("path", "/dev/\"odd\"\\name\n")], 5.0);
        c.add(&[("target", "é ünïcode")], 1e21);
        c.add(&[], 0.1 + 0.2);
        push(&mut out, c);
        let mut g = Family::gauge("x_up", "");
        for v in [
            1.0,
            -0.0,
            1e-7,
            123456789.125,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
        ] {
            g.add(&[("v", &format!("{v:?}"))], v);
        }
        push(&mut out, g);
        let mut h = Family::histogram("x_latency_seconds", "Latency.");
        h.add_histogram(&[("op", "read")], &[0.0001, 0.5, 1.0], &[1, 2, 3, 4], 7.5);
        h.add_histogram(&[], &[f64::INFINITY], &[2, 0], 0.25);
        push(&mut out, h);
        let mut s = Family::summary("x_q_seconds", "Quantiles.");
        s.add_summary(
            &[("t", "a")],
            &[(0.5, 0.001), (0.99, 0.02), (0.999, f64::NAN)],
            9,
            0.5,
        );
        push(&mut out, s);
        let text = encode_text(&out).expect("encode");
        assert_eq!(text, reference(&out));
        // Twice: the second render starts from the first one's length.
        assert_eq!(encode_text(&out).expect("encode"), text);
    }

    #[test]
    fn renders_counter_gauge_histogram() {
        let mut out = Vec::new();
        let mut c = Family::counter("x_ops_total", "Ops.");
        c.add(&[("target", "t0")], 5.0);
        push(&mut out, c);
        let mut g = Family::gauge("x_up", "Up.");
        g.add(&[], 1.0);
        push(&mut out, g);
        let mut h = Family::histogram("x_latency_seconds", "Latency.");
        h.add_histogram(&[("op", "read")], &[0.1, 1.0], &[1, 2, 3], 7.5);
        push(&mut out, h);
        push(&mut out, Family::gauge("x_empty", "Empty."));
        let text = encode_text(&out).expect("encode");
        assert!(text.contains("x_ops_total{target=\"t0\"} 5"), "{text}");
        assert!(text.contains("x_up 1"), "{text}");
        assert!(
            text.contains("x_latency_seconds_bucket{op=\"read\",le=\"1\"} 3"),
            "{text}"
        );
        assert!(
            text.contains("x_latency_seconds_bucket{op=\"read\",le=\"+Inf\"} 6"),
            "{text}"
        );
        assert!(
            text.contains("x_latency_seconds_count{op=\"read\"} 6"),
            "{text}"
        );
        assert!(!text.contains("x_empty"), "{text}");
    }
}
