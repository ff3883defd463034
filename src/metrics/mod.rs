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

/// Render families in the Prometheus text format.
pub fn encode_text(families: &[MetricFamily]) -> Result<String, prometheus::Error> {
    use prometheus::Encoder;
    let mut buf = Vec::new();
    prometheus::TextEncoder::new().encode(families, &mut buf)?;
    String::from_utf8(buf).map_err(|e| prometheus::Error::Msg(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

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
