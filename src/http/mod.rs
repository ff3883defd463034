//! HTTP server: /metrics, / (status page), /healthz.
