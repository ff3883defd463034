//! Subcommand implementations. `main.rs` parses arguments and calls into here.

pub mod profiles;
pub mod run;
