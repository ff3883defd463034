//! The integration test crate. Each module tests one area against real parts: files under
//! /dev/shm, loop devices the tests create, the real HTTP endpoint.

/// Shared helpers: the binary's path, scratch directories, a running daemon.
mod common;
/// Config validation through `nvsoak check-config`: one bad config per rule.
mod config;
/// The daemon end to end: `nvsoak run` on files, /metrics scraped and parsed.
mod daemon;
/// Engines on real files: bytes, alignment, region bounds, rate limits.
mod engine;
/// The health poller and `nvsoak health` on the replay transport.
mod health;
/// Deployment: web config (TLS, basic auth), connection limits, systemd unit, promtool.
mod ops;
/// `nvsoak report` on recorded and real sweeps; the report and status page in headless Chromium.
mod report;
/// Write safety on loop devices, data verification, checkpoints.
mod safety;
