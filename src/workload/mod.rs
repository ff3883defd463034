//! The workload model: validated specs, built-in profiles, the per-target scheduler that runs
//! phases (precondition, sweep, soak), steady-state detection, and the worker hot loop.

pub mod drive;
pub mod drive_ocp;
pub mod hooks;
pub mod odirect;
pub mod pattern;
pub mod scheduler;
pub mod steady;
pub mod targets;
pub mod verify_log;
pub mod walk_hook;
pub mod worker;
