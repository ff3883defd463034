//! Log-page parsers. Pure: bytes in, structs out.
//!
//! Architecture Invariant: nothing under `nvme::log` performs I/O.

pub mod error;
pub mod fwslot;
pub mod ocp;
pub mod ocp_latency;
pub mod ocp_recovery;
pub mod sanitize;
pub mod selftest;
pub mod smart;
pub mod telemetry;

/// The NSID for controller-wide log pages.
pub const NSID_ALL: u32 = 0xffff_ffff;
