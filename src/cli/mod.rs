//! Subcommand implementations. `main.rs` parses arguments and calls into here.

pub mod health;
pub mod metrics;
pub mod profiles;
pub mod report;
pub mod run;
pub mod state;

/// Write `text` to standard output. A closed stdout (`nvsoak check-config plan.toml | head -1`)
/// comes back as an error whose cause is `BrokenPipe`, which `main` ends quietly on
/// ([`is_broken_pipe`]); nothing here panics on it the way `print!` does.
pub fn out(text: &str) -> anyhow::Result<()> {
    use std::io::Write;
    let mut o = std::io::stdout().lock();
    o.write_all(text.as_bytes())
        .and_then(|()| o.flush())
        .map_err(|e| anyhow::Error::new(e).context("writing to stdout"))
}

/// Whether an error was caused by writing to a closed pipe: the reader stopped early, which is
/// not an error of nvsoak's.
pub fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}
