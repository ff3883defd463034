//! Config reload on SIGHUP: the pure part. Given the running settings and a newly loaded (and
//! validated) file, decide which targets keep running, which stop and which start, and which
//! changed settings only take effect after a restart. [`apply`] applies the result.
//!
//! Architecture Invariant: this file performs no I/O and starts nothing; `apply.rs` stops and
//! starts the targets the daemon owns.

pub(crate) mod apply;

use std::net::SocketAddr;
use std::path::PathBuf;

use crate::config::Settings;
use crate::model::spec::TargetSpec;

/// Settings given on the command line, which win over the config file at start and after every
/// reload.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Overrides {
    /// `--web.listen-address`.
    pub listen: Option<SocketAddr>,
    /// `--web.config.file`.
    pub web_config_file: Option<PathBuf>,
}

impl Overrides {
    pub fn apply(&self, s: &mut Settings) {
        if let Some(l) = self.listen {
            s.exporter.listen = l;
        }
        if let Some(w) = &self.web_config_file {
            s.exporter.web_config_file = Some(w.clone());
        }
    }
}

/// What a reload does to the targets.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TargetDiff {
    /// Names whose `TargetSpec` is identical: they keep running untouched.
    pub unchanged: Vec<String>,
    /// Targets whose plan is identical but whose gates changed: they keep running (their soak
    /// clock and totals carry on) and are judged again with the new gates. Gates are
    /// judgement, not plan.
    pub rejudged: Vec<TargetSpec>,
    /// Names in the running config only: stopped.
    pub removed: Vec<String>,
    /// Names whose spec differs: stopped, then started with the new spec (from the start of
    /// its plan).
    pub changed: Vec<TargetSpec>,
    /// Names in the new config only: started.
    pub added: Vec<TargetSpec>,
}

impl TargetDiff {
    /// Targets to stop: removed and changed, by name.
    pub fn to_stop(&self) -> Vec<String> {
        self.removed
            .iter()
            .cloned()
            .chain(self.changed.iter().map(|t| t.name.clone()))
            .collect()
    }

    /// Targets to start: changed and added.
    pub fn to_start(&self) -> Vec<TargetSpec> {
        self.changed
            .iter()
            .chain(self.added.iter())
            .cloned()
            .collect()
    }

    pub fn is_empty(&self) -> bool {
        self.removed.is_empty()
            && self.changed.is_empty()
            && self.added.is_empty()
            && self.rejudged.is_empty()
    }
}

/// Compare targets by name. Order does not matter: a reordered but otherwise identical target
/// list changes nothing.
pub fn diff_targets(old: &[TargetSpec], new: &[TargetSpec]) -> TargetDiff {
    let mut d = TargetDiff::default();
    for n in new {
        match old.iter().find(|o| o.name == n.name) {
            Some(o) if o == n => d.unchanged.push(n.name.clone()),
            Some(o) if same_plan(o, n) => d.rejudged.push(n.clone()),
            Some(_) => d.changed.push(n.clone()),
            None => d.added.push(n.clone()),
        }
    }
    for o in old {
        if !new.iter().any(|n| n.name == o.name) {
            d.removed.push(o.name.clone());
        }
    }
    d
}

/// Whether two specs differ in their gates at most.
fn same_plan(a: &TargetSpec, b: &TargetSpec) -> bool {
    let mut b = b.clone();
    b.gates = a.gates.clone();
    *a == b
}

/// Keys whose new value differs from the running one but cannot change while the daemon runs
/// (the listener, the state directory, the poller, logging, the stats interval). The daemon keeps
/// the running value and logs that a restart applies it. `state.checkpoint_interval` and the
/// targets change live, so they are not listed.
pub fn needs_restart(old: &Settings, new: &Settings) -> Vec<&'static str> {
    let mut keys = Vec::new();
    let checks: [(&'static str, bool); 8] = [
        (
            "exporter.listen",
            old.exporter.listen != new.exporter.listen,
        ),
        (
            "exporter.web_config_file",
            old.exporter.web_config_file != new.exporter.web_config_file,
        ),
        (
            "exporter.max_connections",
            old.exporter.max_connections != new.exporter.max_connections,
        ),
        ("state.dir", old.state.dir != new.state.dir),
        ("stats.interval", old.stats.interval != new.stats.interval),
        ("health", old.health != new.health),
        ("log.level", old.log.level != new.log.level),
        (
            "log.progress_interval",
            old.log.progress_interval != new.log.progress_interval,
        ),
    ];
    for (k, differs) in checks {
        if differs {
            keys.push(k);
        }
    }
    keys
}

/// The settings the daemon runs with after a reload: the new file's targets and live-changeable
/// keys, with the running value of every key in [`needs_restart`].
pub fn merge_live(old: &Settings, new: &Settings) -> Settings {
    let mut s = old.clone();
    s.targets = new.targets.clone();
    s.state.checkpoint_interval = new.state.checkpoint_interval;
    // Checked against the new plan before anything of it starts; it allocates nothing itself.
    s.state.max_verify_memory = new.state.max_verify_memory;
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(toml: &str) -> Settings {
        crate::config::load_str(toml, "test.toml", Vec::new()).expect("valid test config")
    }

    const BASE: &str = r#"
[state]
dir = "/dev/shm/nvsoak-reload-unit"
[[target]]
name = "a"
path = "/dev/shm/nvsoak-reload-unit/a.dat"
size = "16MiB"
[[target.phase]]
kind = "soak"
profile = "4k-random-read"
[[target]]
name = "b"
path = "/dev/shm/nvsoak-reload-unit/b.dat"
size = "16MiB"
[[target.phase]]
kind = "soak"
profile = "4k-random-read"
"#;

    #[test]
    fn identical_config_changes_nothing() {
        let a = settings(BASE);
        let d = diff_targets(&a.targets, &a.targets);
        assert!(d.is_empty());
        assert_eq!(d.unchanged, vec!["a", "b"]);
        assert!(needs_restart(&a, &a).is_empty());
    }

    #[test]
    fn added_removed_and_changed_targets_are_told_apart() {
        let old = settings(BASE);
        // b changes its size, a is removed, c is new.
        let new_text = BASE
            .replacen(
                "name = \"a\"\npath = \"/dev/shm/nvsoak-reload-unit/a.dat\"",
                "name = \"c\"\npath = \"/dev/shm/nvsoak-reload-unit/c.dat\"",
                1,
            )
            .replace("b.dat\"\nsize = \"16MiB\"", "b.dat\"\nsize = \"32MiB\"");
        let new = settings(&new_text);
        let d = diff_targets(&old.targets, &new.targets);
        assert_eq!(d.removed, vec!["a"]);
        assert_eq!(
            d.changed
                .iter()
                .map(|t| t.name.as_str())
                .collect::<Vec<_>>(),
            vec!["b"]
        );
        assert_eq!(d.changed[0].size, Some(32 << 20));
        assert_eq!(
            d.added.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(),
            vec!["c"]
        );
        assert!(d.unchanged.is_empty());
        assert_eq!(d.to_stop(), vec!["a", "b"]);
        assert_eq!(
            d.to_start()
                .iter()
                .map(|t| t.name.as_str())
                .collect::<Vec<_>>(),
            vec!["b", "c"]
        );
    }

    #[test]
    fn a_gate_change_rejudges_and_restarts_nothing() {
        let old = settings(BASE);
        let gates = "[target.gates]\nmax_temperature = \"65C\"\n";
        let new = settings(&format!("{BASE}{gates}"));
        let d = diff_targets(&old.targets, &new.targets);
        assert!(d.changed.is_empty() && d.to_stop().is_empty(), "{d:?}");
        assert_eq!(d.unchanged, vec!["a"]);
        assert_eq!(d.rejudged.len(), 1, "{d:?}");
        assert_eq!(d.rejudged[0].name, "b");
        assert_eq!(d.rejudged[0].gates.max_temperature_celsius, Some(65.0));
        assert!(!d.is_empty(), "a gate change is a change to apply");
        // A plan change with a gate change is still a restart.
        let both = format!("{BASE}{gates}")
            .replace("b.dat\"\nsize = \"16MiB\"", "b.dat\"\nsize = \"32MiB\"");
        let d = diff_targets(&old.targets, &settings(&both).targets);
        assert_eq!(d.changed.len(), 1, "{d:?}");
        assert!(d.rejudged.is_empty(), "{d:?}");
    }

    #[test]
    fn reordering_targets_is_not_a_change() {
        let old = settings(BASE);
        let mut new = old.clone();
        new.targets.reverse();
        let d = diff_targets(&old.targets, &new.targets);
        assert!(d.is_empty());
        assert_eq!(d.unchanged, vec!["b", "a"]);
    }

    #[test]
    fn restart_only_keys_are_named_and_kept() {
        let old = settings(BASE);
        let new = settings(&format!(
            "[exporter]\nlisten = \"127.0.0.1:9999\"\n[log]\nlevel = \"debug\"\n{}",
            BASE.replace("[state]\n", "[state]\ncheckpoint_interval = \"5s\"\n")
        ));
        assert_eq!(
            needs_restart(&old, &new),
            vec!["exporter.listen", "log.level"]
        );
        let m = merge_live(&old, &new);
        assert_eq!(m.exporter.listen, old.exporter.listen);
        assert_eq!(m.log.level, old.log.level);
        assert_eq!(
            m.state.checkpoint_interval,
            std::time::Duration::from_secs(5)
        );
        assert_eq!(m.targets, new.targets);
    }

    #[test]
    fn overrides_win_over_the_file() {
        let mut s = settings(&format!("[exporter]\nlisten = \"127.0.0.1:9999\"\n{BASE}"));
        let o = Overrides {
            listen: Some("127.0.0.1:1234".parse().expect("addr")),
            web_config_file: Some(PathBuf::from("/etc/nvsoak/web.yml")),
        };
        o.apply(&mut s);
        assert_eq!(s.exporter.listen.port(), 1234);
        assert_eq!(
            s.exporter.web_config_file.as_deref(),
            Some(std::path::Path::new("/etc/nvsoak/web.yml"))
        );
        // No overrides: the file's values stay.
        let mut t = settings(BASE);
        let before = t.clone();
        Overrides::default().apply(&mut t);
        assert_eq!(t, before);
    }
}
