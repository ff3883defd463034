//! Checkpoint load/save for multi-day runs.
