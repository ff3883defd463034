//! A target a SIGHUP reload cannot start (issue 28: it vanished from `/metrics`, so the
//! stopped-target alert could not fire). It stays in `/metrics` as `nvsoak_target_up 0` with
//! `nvsoak_target_refused_info` naming the reason, while the other targets run on; its file is
//! not touched; a reload that drops it from the config drops it from `/metrics`.

use std::time::Duration;

use crate::common::{Daemon, find};
use crate::faults::{LogTail, sighup};

const HEAD: &str = r#"
[state]
dir = "{dir}/state"
checkpoint_interval = "1h"
[health]
enabled = false
"#;

fn target(name: &str) -> String {
    format!(
        r#"
[[target]]
name = "{name}"
path = "{{dir}}/{name}.dat"
size = "4MiB"
engine = "psync"
direct = false
[[target.phase]]
kind = "soak"
profile = "4k-random-write"
iodepth = 1
rate = "500iops"
duration = "10m"
[target.gates]
verify_errors = false
"#
    )
}

fn rewrite(d: &Daemon, text: &str) {
    let t = text.replace("{dir}", &d.dir.path().display().to_string());
    std::fs::write(d.dir.path().join("nvsoak.toml"), t).expect("rewriting the config");
}

#[test]
fn a_target_refused_at_reload_stays_in_metrics_as_down_with_its_reason() {
    let one = format!("{HEAD}{}", target("keep"));
    let mut d = Daemon::start(&one);
    let log = LogTail::attach(&mut d);
    // Someone else's file where the new target would go.
    let foreign = d.dir.path().join("other.dat");
    let precious = vec![0xa5u8; 1 << 20];
    std::fs::write(&foreign, &precious).expect("someone else's file");
    rewrite(&d, &format!("{one}{}", target("other")));
    sighup(&d);
    log.wait_for("SIGHUP: config reloaded", Duration::from_secs(20));
    let s = d.scrape();
    let up = |name: &str| {
        find(&s, "nvsoak_target_up", &[("target", name)])
            .first()
            .map(|x| x.value)
    };
    assert_eq!(
        up("other"),
        Some(0.0),
        "the refused target is not down in /metrics"
    );
    assert_eq!(up("keep"), Some(1.0), "the running target went down");
    let info = find(&s, "nvsoak_target_refused_info", &[("target", "other")]);
    assert_eq!(info.len(), 1, "no refusal reason in /metrics");
    assert!(
        info[0].labels["reason"].contains("nvsoak did not create it"),
        "{:?}",
        info[0].labels
    );
    assert_eq!(
        std::fs::read(&foreign).expect("read"),
        precious,
        "the file was written"
    );
    // Dropped from the config, it is gone from /metrics.
    rewrite(&d, &one);
    sighup(&d);
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let s = d.scrape();
        let gone = find(&s, "nvsoak_target_up", &[("target", "other")]).is_empty()
            && find(&s, "nvsoak_target_refused_info", &[]).is_empty();
        if gone {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "still in /metrics");
        std::thread::sleep(Duration::from_millis(100));
    }
    let (status, _, err) = d.terminate();
    assert!(status.success(), "{err}");
}

/// A reload whose plan needs more verification memory than `state.max_verify_memory` is
/// refused whole, naming the key and the figures, as `run` refuses it at start: the new
/// target is never opened (its file never created) and the running one goes on. Raising the
/// budget in the same file lets the next reload through.
#[test]
fn a_reload_over_the_verification_budget_is_refused_and_the_plan_keeps_running() {
    let head = |budget: &str| {
        format!(
            r#"
[state]
dir = "{{dir}}/state"
checkpoint_interval = "1h"
max_verify_memory = "{budget}"
[health]
enabled = false
"#
        )
    };
    let verified = |name: &str, size: &str, skew: &str| {
        format!(
            r#"
[[target]]
name = "{name}"
path = "{{dir}}/{name}.dat"
size = "{size}"
engine = "psync"
direct = false
verify = "inline"
[[target.phase]]
kind = "soak"
job = {{ name = "w", read = 50, bs = "4k", access = "random", skew = "{skew}", iodepth = 1, rate = "200iops" }}
duration = "10m"
"#
        )
    };
    let one = format!("{}{}", head("1MiB"), verified("keep", "4MiB", "uniform"));
    let mut d = Daemon::start(&one);
    let log = LogTail::attach(&mut d);
    // A zipf soak keeps the stored map: 2 GiB of region is 1.06 MiB of state.
    let big = verified("big", "2GiB", "zipf:1.2");
    rewrite(&d, &format!("{one}{big}"));
    sighup(&d);
    let text = log.wait_for("SIGHUP: config rejected", Duration::from_secs(20));
    let line = text
        .lines()
        .find(|l| l.contains("SIGHUP: config rejected"))
        .unwrap_or_default();
    assert!(line.contains("state.max_verify_memory"), "{line}");
    assert!(
        line.contains("big"),
        "the target over the budget is not named: {line}"
    );
    let s = d.scrape();
    assert!(
        find(&s, "nvsoak_target_up", &[("target", "big")]).is_empty(),
        "the refused plan's target appeared"
    );
    assert_eq!(
        find(&s, "nvsoak_target_up", &[("target", "keep")])
            .first()
            .map(|x| x.value),
        Some(1.0),
        "the running target went down"
    );
    assert!(
        !d.dir.path().join("big.dat").exists(),
        "the refused target's file was created"
    );
    // The same plan with room for it goes through.
    rewrite(
        &d,
        &format!(
            "{}{}{big}",
            head("64MiB"),
            verified("keep", "4MiB", "uniform")
        ),
    );
    sighup(&d);
    log.wait_for("SIGHUP: config reloaded", Duration::from_secs(60));
    let s = d.scrape_until(Duration::from_secs(60), |s| {
        find(s, "nvsoak_target_up", &[("target", "big")])
            .first()
            .is_some_and(|x| x.value == 1.0)
    });
    assert_eq!(
        find(&s, "nvsoak_target_up", &[("target", "big")])
            .first()
            .map(|x| x.value),
        Some(1.0),
        "the reload with room for it did not start it"
    );
    let (status, _, err) = d.terminate();
    assert!(status.success(), "{err}");
}
