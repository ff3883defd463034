//! Test helper: `promtool check metrics` over an exposition text (Debian's `prometheus`
//! package, which the test suite installs).

use std::io::Write;
use std::process::{Command, Stdio};

/// What `promtool check metrics` says about `text` (empty when it is clean).
pub(crate) fn findings(text: &str) -> String {
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool missing: apt-get install -y prometheus");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(text.as_bytes())
        .expect("writing to promtool");
    let out = child.wait_with_output().expect("promtool output");
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() || !all.trim().is_empty(),
        "promtool failed without saying why: {}",
        out.status
    );
    all
}

/// Panics with promtool's findings (and the text) unless `text` is clean.
pub(crate) fn assert_clean(text: &str) {
    let all = findings(text);
    assert!(
        all.trim().is_empty(),
        "promtool findings:\n{all}\n---\n{text}"
    );
}
