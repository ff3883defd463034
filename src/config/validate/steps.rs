//! The qualification step phases: `purge` (`method`, `timeout`) and `self-test` (`test`,
//! `timeout`), and what they need of their target (an NVMe namespace; `allow_destroy` for a
//! purge; with `verify` on, a purge before any write and no `loop`).

use std::time::Duration;

use super::super::raw::RawPhase;
use super::scalar::{duration_in, one_of};
use super::{R, bad, join};
use crate::model::spec::{PhaseSpec, VerifyMode};
use crate::nvme::steps::{PurgeMethod, SelfTestKind};

/// The longest wait a step may be given (the ioctl timeout is a u32 of milliseconds).
const MAX_WAIT: Duration = Duration::from_secs(30 * 86400);

/// A purge's wait when `timeout` is not set: an overwrite rewrites the whole drive.
pub fn default_purge_timeout(m: PurgeMethod) -> Duration {
    match m {
        PurgeMethod::SanitizeOverwrite => Duration::from_secs(48 * 3600),
        _ => Duration::from_secs(2 * 3600),
    }
}

pub(super) fn purge(key: &str, p: &RawPhase) -> R<PhaseSpec> {
    let k = join(key, "method");
    let method = match p.method.as_deref() {
        Some(m) => one_of(&k, m.trim(), &PurgeMethod::ALL)?,
        None => {
            return bad(
                k,
                "missing: how to erase: \"format-user-data\", \"format-crypto\", \"sanitize-block\", \"sanitize-crypto\" or \"sanitize-overwrite\"",
            );
        }
    };
    let timeout = match &p.timeout {
        Some(v) => duration_in(&join(key, "timeout"), v, Duration::from_secs(1), MAX_WAIT)?,
        None => default_purge_timeout(method),
    };
    Ok(PhaseSpec::Purge { method, timeout })
}

pub(super) fn self_test(key: &str, p: &RawPhase) -> R<PhaseSpec> {
    let test = match p.test.as_deref() {
        Some(t) => one_of(
            &join(key, "test"),
            t.trim(),
            &[
                ("short", SelfTestKind::Short),
                ("extended", SelfTestKind::Extended),
            ],
        )?,
        None => SelfTestKind::Short,
    };
    let timeout = match &p.timeout {
        Some(v) => Some(duration_in(
            &join(key, "timeout"),
            v,
            Duration::from_secs(1),
            MAX_WAIT,
        )?),
        None => None,
    };
    Ok(PhaseSpec::SelfTest { test, timeout })
}

/// What the steps need of their target.
pub(super) fn check_target(
    key: &str,
    is_block: bool,
    allow_destroy: bool,
    verify: VerifyMode,
    loop_phases: bool,
    phases: &[PhaseSpec],
) -> R<()> {
    let mut wrote_before = false;
    for (j, p) in phases.iter().enumerate() {
        let pk = format!("{key}.phase[{j}]");
        match p {
            PhaseSpec::Purge { .. } | PhaseSpec::SelfTest { .. } if !is_block => {
                return bad(
                    join(&pk, "kind"),
                    format!(
                        "a {} runs on an NVMe namespace (a block device such as /dev/nvme0n1), and this target is a file",
                        p.kind()
                    ),
                );
            }
            PhaseSpec::Purge { .. } if !allow_destroy => {
                return bad(
                    join(&pk, "kind"),
                    "a purge erases the whole namespace: set the target's allow_destroy to the drive's serial or WWN",
                );
            }
            PhaseSpec::Purge { .. }
                if verify != VerifyMode::Off && (wrote_before || loop_phases) =>
            {
                return bad(
                    join(&pk, "kind"),
                    "with verify on, a purge must come before every phase that writes and the plan must not loop: the erase would leave the verified blocks' stamps behind",
                );
            }
            PhaseSpec::Precondition { .. } => wrote_before = true,
            PhaseSpec::Sweep { job, .. } => wrote_before |= job.read_pct < 100,
            PhaseSpec::Soak { jobs, .. } => wrote_before |= jobs.iter().any(|j| j.read_pct < 100),
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::config::load_str;
    use crate::model::spec::PhaseSpec;
    use crate::nvme::steps::{PurgeMethod, SelfTestKind};
    use std::time::Duration;

    /// A loop device over a file of our own, detached on drop (the config only stats it).
    struct Loop(String, #[allow(dead_code)] tempfile::TempDir);
    impl Loop {
        fn new() -> Option<Loop> {
            let dir = tempfile::tempdir().ok()?;
            let img = dir.path().join("img");
            std::fs::write(&img, vec![0u8; 1 << 20]).ok()?;
            let out = std::process::Command::new("losetup")
                .args(["-f", "--show"])
                .arg(&img)
                .output()
                .ok()
                .filter(|o| o.status.success())?;
            Some(Loop(
                String::from_utf8_lossy(&out.stdout).trim().to_string(),
                dir,
            ))
        }
    }
    impl Drop for Loop {
        fn drop(&mut self) {
            let _ = std::process::Command::new("losetup")
                .args(["-d", &self.0])
                .status();
        }
    }

    fn load(path: &str, target_extra: &str, phases: &str) -> Result<Vec<PhaseSpec>, String> {
        let t = format!("[[target]]\nname = \"t\"\npath = \"{path}\"\n{target_extra}\n{phases}\n");
        load_str(&t, "test.toml", vec![])
            .map(|s| s.targets[0].phases.clone())
            .map_err(|e| e.to_string())
    }

    /// A loop device and its `allow_destroy` line, or `None` (the test is skipped) without one.
    fn allowed_loop() -> Option<(Loop, String)> {
        let Some(l) = Loop::new() else {
            eprintln!("skipping: no loop device (needs root and losetup)");
            return None;
        };
        let allowed = format!("allow_destroy = \"{}\"", l.0);
        Some((l, allowed))
    }

    /// `load` must fail with an error naming every one of `parts`.
    fn refused(l: &Loop, extra: &str, phases: &str, parts: &[&str]) {
        let e = load(&l.0, extra, phases).expect_err("must be refused");
        for part in parts {
            assert!(e.contains(part), "{part:?} missing from: {e}");
        }
    }

    #[test]
    fn purge_and_self_test_keys() {
        let Some((l, allowed)) = allowed_loop() else {
            return;
        };
        let p = load(
            &l.0,
            &allowed,
            "[[target.phase]]\nkind = \"purge\"\nmethod = \"sanitize-crypto\"\ntimeout = \"30m\"\n\
             [[target.phase]]\nkind = \"self-test\"\ntest = \"extended\"\n\
             [[target.phase]]\nkind = \"self-test\"\ntimeout = \"9m\"\n",
        )
        .expect("valid");
        assert_eq!(
            p[0],
            PhaseSpec::Purge {
                method: PurgeMethod::SanitizeCrypto,
                timeout: Duration::from_secs(1800)
            }
        );
        assert_eq!(
            p[1],
            PhaseSpec::SelfTest {
                test: SelfTestKind::Extended,
                timeout: None
            }
        );
        assert_eq!(
            p[2],
            PhaseSpec::SelfTest {
                test: SelfTestKind::Short,
                timeout: Some(Duration::from_secs(540))
            }
        );
        // Defaults: 2 h for a format, 48 h for an overwrite.
        let p = load(
            &l.0,
            &allowed,
            "[[target.phase]]\nkind = \"purge\"\nmethod = \"sanitize-overwrite\"\n",
        )
        .expect("valid");
        assert_eq!(
            p[0],
            PhaseSpec::Purge {
                method: PurgeMethod::SanitizeOverwrite,
                timeout: Duration::from_secs(48 * 3600)
            }
        );
    }

    #[test]
    fn purge_and_self_test_errors_name_the_key_and_the_reason() {
        let Some((l, allowed)) = allowed_loop() else {
            return;
        };
        let purge = "[[target.phase]]\nkind = \"purge\"\n";
        refused(
            &l,
            &allowed,
            purge,
            &["target[0].phase[0].method", "missing"],
        );
        refused(
            &l,
            &allowed,
            &format!("{purge}method = \"shred\"\n"),
            &["target[0].phase[0].method", "format-user-data"],
        );
        let self_test = "[[target.phase]]\nkind = \"self-test\"\n";
        refused(
            &l,
            &allowed,
            &format!("{self_test}test = \"long\"\n"),
            &["target[0].phase[0].test"],
        );
        refused(
            &l,
            &allowed,
            &format!("{self_test}method = \"format-crypto\"\n"),
            &["target[0].phase[0].method", "only applies to purge"],
        );
        refused(
            &l,
            &allowed,
            "[[target.phase]]\nkind = \"soak\"\nprofile = \"sql\"\nduration = \"1s\"\ntimeout = \"1m\"\n",
            &["target[0].phase[0].timeout"],
        );
    }

    #[test]
    fn a_purge_needs_allow_destroy_and_comes_before_verified_writes() {
        let Some((l, allowed)) = allowed_loop() else {
            return;
        };
        let purge = "[[target.phase]]\nkind = \"purge\"\nmethod = \"format-user-data\"\n";
        let precondition = "[[target.phase]]\nkind = \"precondition\"\npasses = 1\n";
        refused(&l, "", purge, &["target[0].phase[0].kind", "allow_destroy"]);
        // With verify on, a purge after a write (or in a loop) is refused.
        let verified = format!("{allowed}\nverify = \"inline\"");
        refused(
            &l,
            &verified,
            &format!("{precondition}{purge}"),
            &["target[0].phase[1].kind", "verify"],
        );
        load(&l.0, &verified, &format!("{purge}{precondition}"))
            .expect("a purge first is fine with verify");
    }

    #[test]
    fn steps_need_a_block_device() {
        let dir = tempfile::tempdir().expect("tempdir");
        let f = dir.path().join("t.dat");
        let e = load(
            &f.display().to_string(),
            "size = \"1M\"",
            "[[target.phase]]\nkind = \"self-test\"\n",
        )
        .unwrap_err();
        assert!(
            e.contains("target[0].phase[0].kind") && e.contains("NVMe namespace"),
            "{e}"
        );
    }
}
