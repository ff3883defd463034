//! Raw config → validated [`Settings`]. Every check names the key path and the reason.
//!
//! This module owns the shared error plumbing (`R`, `bad`, `join`); each section of the config
//! is validated in its own file: scalar values (`scalar`), workload values such as block-size
//! mixes, rates and skews (`values`), inline jobs and profiles (`job`), phases (`phase`),
//! targets (`target`), the `[health]` section (`health`) and the whole document (`settings`).

mod card;
mod gates;
mod health;
mod job;
mod latency_monitor;
mod phase;
mod scalar;
mod settings;
mod steps;
mod target;
mod values;

pub use settings::settings;
pub use values::{block_sizes, rate, skew};

use super::ConfigError;

type R<T> = Result<T, ConfigError>;

fn bad<T>(key: impl Into<String>, reason: impl Into<String>) -> R<T> {
    Err(ConfigError::invalid(key, reason))
}

fn join(prefix: &str, key: &str) -> String {
    if prefix.is_empty() {
        key.to_string()
    } else {
        format!("{prefix}.{key}")
    }
}

/// Largest block size nvsoak accepts (registered buffers are sized to it).
pub const MAX_BLOCK: u64 = 16 << 20;
