//! Every metric name, help text and unit: maps typed snapshots to Prometheus families.
