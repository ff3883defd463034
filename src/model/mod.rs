//! The ground floor of records: plain data with serde that every other folder shares, and no
//! I/O. The plan spec (`spec`, with its vocabulary `op` and human `units`), the results
//! schema, the checkpoint schema, the gate settings and the verdict types, the drive events,
//! the latency counts, the verifier's generation map (`genmap`) and what verification costs
//! in memory (`verify_cost`) live here, beside the small pure methods on them; whoever writes
//! or reads a record imports it from here, never from the module that fills it in.
//!
//! `model` imports nothing of the crate but `util` and the parsed drive pages of `nvme`
//! (themselves pure data from bytes); `tests/it/boundaries.rs` keeps it so.

pub mod checked;
pub mod checkpoint;
pub mod curve;
pub mod drive;
pub mod events;
pub mod fmt;
pub mod genmap;
pub mod ocp_phases;
pub mod op;
pub mod profiles;
pub mod results;
pub mod soakhist;
pub mod spec;
pub mod steps;
pub mod totals;
pub mod units;
pub mod verdict;
pub mod verify_cost;
pub mod walk;
