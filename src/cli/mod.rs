//! Subcommand implementations. `main.rs` parses arguments and calls into here.

pub mod health;
pub mod profiles;
pub mod report;
pub mod run;
pub mod state;
