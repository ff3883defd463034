//! nvsoak: burn-in daemon for NVMe SSDs. See ARCHITECTURE.md for the map.

pub mod ata;
pub mod cli;
pub mod config;
pub mod daemon;
pub mod engine;
pub mod health;
pub mod http;
pub mod metrics;
pub mod model;
pub mod nvme;
pub mod pcie;
pub mod reload;
pub mod report;
pub mod safety;
pub mod state;
pub mod stats;
pub mod util;
pub mod verdict;
pub mod workload;
