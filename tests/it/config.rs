//! Config validation through the real binary, `nvsoak check-config PATH`: one bad config per
//! rule (non-zero exit, no panic, the message names the key and the reason), every shipped
//! example passes, environment overrides reach the plan, and `nvsoak profiles` lists the
//! built-in profiles.

use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::common::{bin, shm_dir};

/// Run `nvsoak ARGS` with no `NVSOAK_*` variables from the test's environment, plus `env`.
fn nvsoak(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(bin());
    c.args(args);
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("NVSOAK_") {
            c.env_remove(k);
        }
    }
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("running nvsoak")
}

/// Write `toml` (with `{dir}` replaced by a scratch directory) and check it.
fn check_in(dir: &Path, toml: &str, env: &[(&str, &str)]) -> Output {
    let path = dir.join("nvsoak.toml");
    std::fs::write(&path, toml.replace("{dir}", &dir.display().to_string()))
        .expect("writing config");
    nvsoak(&["check-config", path.to_str().expect("utf-8 path")], env)
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Assert that `toml` is rejected with a message naming `key` and containing `reason`.
#[track_caller]
fn rejects(toml: &str, key: &str, reason: &str) {
    let d = shm_dir();
    rejects_in(d.path(), toml, key, reason, &[]);
}

#[track_caller]
fn rejects_in(dir: &Path, toml: &str, key: &str, reason: &str, env: &[(&str, &str)]) {
    let o = check_in(dir, toml, env);
    let err = stderr(&o);
    assert!(
        !o.status.success(),
        "expected a rejection naming {key}, but check-config passed:\n{}",
        stdout(&o)
    );
    assert!(!err.contains("panicked"), "nvsoak panicked:\n{err}");
    assert!(
        err.contains(&format!("{key}:")),
        "the message should name the key `{key}`:\n{err}"
    );
    assert!(
        err.contains(reason),
        "the message should say `{reason}`:\n{err}"
    );
    assert!(err.starts_with("nvsoak: "), "message format:\n{err}");
    assert!(!err.trim_end().ends_with('.'), "no trailing period:\n{err}");
}

#[track_caller]
fn accepts(toml: &str) -> String {
    let d = shm_dir();
    let o = check_in(d.path(), toml, &[]);
    assert!(o.status.success(), "rejected:\n{}", stderr(&o));
    stdout(&o)
}

/// One file target with the given phases.
fn one(target_extra: &str, phases: &str) -> String {
    format!(
        "[[target]]\nname = \"t0\"\npath = \"{{dir}}/t0.dat\"\nsize = \"64MiB\"\n{target_extra}\n{phases}"
    )
}

fn soak(extra: &str) -> String {
    format!("[[target.phase]]\nkind = \"soak\"\nprofile = \"4k-random-read\"\n{extra}\n")
}

// --- unknown keys and names ------------------------------------------------------------------

#[test]
fn unknown_key_in_phase_is_named() {
    rejects(
        &one(
            "",
            "[[target.phase]]\nkind = \"soak\"\nprofle = \"4k-random-read\"\n",
        ),
        "target[0].phase[0].profle",
        "unknown key \"profle\" (did you mean \"profile\"?)",
    );
}

#[test]
fn unknown_keys_elsewhere_are_named() {
    rejects(
        "[exportr]\nlisten = \"127.0.0.1:1\"\n",
        "exportr",
        "unknown key",
    );
    rejects(
        "[exporter]\nlisen = \"127.0.0.1:1\"\n",
        "exporter.lisen",
        "did you mean \"listen\"",
    );
    rejects(
        &one("colour = \"red\"", &soak("")),
        "target[0].colour",
        "unknown key",
    );
    rejects(
        &one(
            "",
            "[[target.phase]]\nkind = \"soak\"\njob = { read = 70, bs = \"4k\", acess = \"random\" }\n",
        ),
        "target[0].phase[0].job.acess",
        "did you mean \"access\"",
    );
    rejects(
        "[[health.device]]\nmatch = \"S1\"\nrated_tbw = \"1e15\"\nrated_tbww = 1\n",
        "health.device[0].rated_tbww",
        "unknown key",
    );
}

#[test]
fn unknown_profile_suggests_the_closest() {
    rejects(
        &one(
            "",
            &format!(
                "{}[[target.phase]]\nkind = \"soak\"\nprofile = \"4k-randread\"\n",
                soak("duration = \"10s\"")
            ),
        ),
        "target[0].phase[1].profile",
        "unknown profile \"4k-randread\" (did you mean \"4k-random-read\"?)",
    );
    rejects(
        &one(
            "",
            &soak("profiles = [\"sql\", \"oracle\"]\nrotate = \"1h\""),
        ),
        "target[0].phase[0].profiles",
        "not several",
    );
    rejects(
        &one(
            "",
            "[[target.phase]]\nkind = \"soak\"\nprofiles = [\"sql\", \"orcale\"]\nrotate = \"1h\"\n",
        ),
        "target[0].phase[0].profiles[1]",
        "did you mean \"oracle\"",
    );
}

#[test]
fn wrong_types_are_named() {
    rejects(
        &one("direct = \"maybe\"", &soak("")),
        "target[0].direct",
        "expected a boolean",
    );
    rejects(
        &one("", "[[target.phase]]\nkind = \"soak\"\njob = 5\n"),
        "target[0].phase[0].job",
        "expected a table",
    );
    rejects(
        "[health]\ninclude = \"nvme0\"\n",
        "health.include",
        "expected a list",
    );
    rejects(
        "[exporter]\nlisten = 9757\n",
        "exporter.listen",
        "not an address",
    );
}

// --- values ----------------------------------------------------------------------------------

#[test]
fn bad_sizes_and_durations() {
    rejects(
        &one("", &soak("")).replace("64MiB", "64XB"),
        "target[0].size",
        "unknown size unit",
    );
    rejects(
        &one("", &soak("")).replace("64MiB", "1000"),
        "target[0].size",
        "not a multiple of 512",
    );
    rejects(
        &one("", &soak("duration = \"10 parsecs\"")),
        "target[0].phase[0].duration",
        "unknown duration unit",
    );
    rejects(
        &one("", &soak("duration = \"0s\"")),
        "target[0].phase[0].duration",
        "too short",
    );
    rejects(
        "[stats]\ninterval = \"0s\"\n",
        "stats.interval",
        "too short",
    );
    rejects(
        "[state]\ncheckpoint_interval = \"soon\"\n",
        "state.checkpoint_interval",
        "not a valid duration",
    );
}

/// Issue 34: `block_size = "128KB"` meant 128,000 bytes without a word, `"4KB"` failed with
/// "4000 must be a multiple of 512", and `duration = 4` ran a 4 s soak. Each is refused now,
/// naming the key and the fix, and the fix goes in.
#[test]
fn ambiguous_sizes_and_bare_durations_are_refused_with_the_fix() {
    let pre = |bs: &str| {
        format!(
            "[[target.phase]]\nkind = \"precondition\"\npasses = 1\nblock_size = {bs}\n{}",
            soak("duration = \"1m\"")
        )
    };
    rejects(
        &one("", &pre("\"128KB\"")),
        "target[0].phase[0].block_size",
        "\"128KB\" is ambiguous: fio reads KB as KiB, drive datasheets as decimal; write \
         \"128KiB\" for 131072 bytes (binary, as fio reads it) or \"128000\" for 128000 bytes",
    );
    rejects(
        &one("", &pre("\"4KB\"")),
        "target[0].phase[0].block_size",
        "write \"4KiB\" for 4096 bytes",
    );
    rejects(
        &one("", &soak("")).replace(
            "profile = \"4k-random-read\"",
            "job = { read = 100, bs = \"4kB\" }",
        ),
        "target[0].phase[0].job.bs",
        "is ambiguous",
    );
    rejects(
        &one("", &soak("")).replace("\"64MiB\"", "\"64MB\""),
        "target[0].size",
        "write \"64MiB\" for 67108864 bytes",
    );
    rejects(
        &one("", &soak("rate = \"200MB/s\"")),
        "target[0].phase[0].rate",
        "write \"200MiB/s\" for 209715200 bytes/s (binary, as fio reads it) or \"200e6/s\"",
    );
    let out = accepts(&one("", &pre("\"128KiB\"")));
    assert!(out.contains("sequential 128k writes"), "{out}");
    for v in ["4", "\"4\"", "4.5"] {
        rejects(
            &one("", &soak(&format!("duration = {v}"))),
            "target[0].phase[0].duration",
            "has no unit; write \"4",
        );
    }
    rejects(
        &one("", &soak("duration = 4")),
        "target[0].phase[0].duration",
        "4 has no unit; write \"4s\" or \"4m\"",
    );
    let d = shm_dir();
    rejects_in(
        d.path(),
        &one("", &soak("")),
        "state.checkpoint_interval",
        "30 has no unit; write \"30s\" or \"30m\"",
        &[("NVSOAK_STATE__CHECKPOINT_INTERVAL", "30")],
    );
}

#[test]
fn region_out_of_range() {
    rejects(
        &one("region = \"0%\"", &soak("")),
        "target[0].region",
        "out of range",
    );
    rejects(
        &one("region = \"150%\"", &soak("")),
        "target[0].region",
        "out of range",
    );
    rejects(
        &one("region = \"half\"", &soak("")),
        "target[0].region",
        "not a percentage",
    );
    // 0.001% of 64 MiB is smaller than one 4k block.
    rejects(
        &one("region = \"0.001%\"", &soak("")),
        "target[0].region",
        "smaller than the 4k blocks",
    );
}

#[test]
fn inline_job_values() {
    let job = |j: &str| {
        one(
            "",
            &format!("[[target.phase]]\nkind = \"soak\"\njob = {{ {j} }}\n"),
        )
    };
    rejects(
        &job("read = 101, bs = \"4k\""),
        "target[0].phase[0].job.read",
        "not a read percentage",
    );
    rejects(
        &job("bs = \"4k\""),
        "target[0].phase[0].job.read",
        "missing",
    );
    rejects(&job("read = 50"), "target[0].phase[0].job.bs", "missing");
    rejects(
        &job("read = 50, bs = \"1000\""),
        "target[0].phase[0].job.bs",
        "not a multiple of 512",
    );
    rejects(
        &job("read = 50, bs = \"4k:60,8k:x\""),
        "target[0].phase[0].job.bs",
        "not a positive whole number",
    );
    rejects(
        &job("read = 50, bs = \"4k:60,4k:40\""),
        "target[0].phase[0].job.bs",
        "listed twice",
    );
    rejects(
        &job("read = 50, bs = \"32M\""),
        "target[0].phase[0].job.bs",
        "larger than the maximum",
    );
    rejects(
        &job("read = 50, bs = \"4k\", iodepth = 0"),
        "target[0].phase[0].job.iodepth",
        "out of range",
    );
    rejects(
        &job("read = 50, bs = \"4k\", iodepth = 5000"),
        "target[0].phase[0].job.iodepth",
        "out of range",
    );
    rejects(
        &job("read = 50, bs = \"4k\", workers = 0"),
        "target[0].phase[0].job.workers",
        "out of range",
    );
    rejects(
        &job("read = 50, bs = \"4k\", workers = 300"),
        "target[0].phase[0].job.workers",
        "out of range",
    );
    rejects(
        &job("read = 50, bs = \"4k\", access = \"sequential\", skew = \"zipf:1.2\""),
        "target[0].phase[0].job.skew",
        "only applies to random access",
    );
    rejects(
        &job("read = 50, bs = \"4k\", skew = \"zipf:-1\""),
        "target[0].phase[0].job.skew",
        "must be a number above 0",
    );
    rejects(
        &job("read = 50, bs = \"4k\", skew = \"hotband:0%:90%\""),
        "target[0].phase[0].job.skew",
        "hot band size",
    );
    rejects(
        &job("read = 50, bs = \"4k\", skew = \"zpif:1.2\""),
        "target[0].phase[0].job.skew",
        "did you mean \"zipf\"",
    );
    rejects(
        &job("read = 50, bs = \"4k\", access = \"randomly\""),
        "target[0].phase[0].job.access",
        "did you mean \"random\"",
    );
    rejects(
        &job("read = 50, bs = \"4k\", rate = 5000"),
        "target[0].phase[0].job.rate",
        "has no unit",
    );
    rejects(
        &job("read = 50, bs = \"4k\", rate = \"fast\""),
        "target[0].phase[0].job.rate",
        "not a rate",
    );
    rejects(
        &job("name = \"sql\", read = 50, bs = \"4k\""),
        "target[0].phase[0].job.name",
        "is a built-in profile",
    );
    rejects(
        &job("name = \"my job\", read = 50, bs = \"4k\""),
        "target[0].phase[0].job.name",
        "contains ' '",
    );
}

#[test]
fn phase_overrides_are_checked() {
    rejects(
        &one("", &soak("iodepth = 0")),
        "target[0].phase[0].iodepth",
        "out of range",
    );
    rejects(
        &one("", &soak("workers = 257")),
        "target[0].phase[0].workers",
        "out of range",
    );
    rejects(
        &one("", &soak("rate = \"0%\"")),
        "target[0].phase[0].rate",
        "out of range",
    );
}

// --- targets ---------------------------------------------------------------------------------

#[test]
fn duplicate_names_and_paths() {
    let t = |name: &str, file: &str| {
        format!(
            "[[target]]\nname = \"{name}\"\npath = \"{{dir}}/{file}\"\nsize = \"1M\"\n{}",
            soak("")
        )
    };
    rejects(
        &format!("{}{}", t("a", "a.dat"), t("a", "b.dat")),
        "target[1].name",
        "already the name of target[0]",
    );
    rejects(
        &format!("{}{}", t("a", "a.dat"), t("b", "./a.dat")),
        "target[1].path",
        "already the path of target[0]",
    );
}

/// A block device node to point a target at: one we create in the scratch dir (as root), or
/// the first one under /dev. check-config only stats it.
fn block_device(dir: &Path) -> Option<PathBuf> {
    use nix::sys::stat::{Mode, SFlag, makedev, mknod};
    let p = dir.join("blk");
    if mknod(
        &p,
        SFlag::S_IFBLK,
        Mode::from_bits_truncate(0o600),
        makedev(7, 250),
    )
    .is_ok()
    {
        return Some(p);
    }
    std::fs::read_dir("/dev")
        .ok()?
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            std::fs::metadata(p)
                .map(|m| m.file_type().is_block_device())
                .unwrap_or(false)
        })
}

#[test]
fn block_device_with_size_is_rejected_and_without_accepted() {
    let d = shm_dir();
    let Some(dev) = block_device(d.path()) else {
        panic!("no block device node available (not root and none under /dev)");
    };
    let cfg = |size: &str| {
        format!(
            "[[target]]\nname = \"b\"\npath = \"{}\"\n{size}\n{}",
            dev.display(),
            soak("")
        )
    };
    rejects_in(
        d.path(),
        &cfg("size = \"1G\""),
        "target[0].size",
        "is a block device",
        &[],
    );
    let o = check_in(d.path(), &cfg(""), &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("(block device)"), "{}", stdout(&o));
}

#[test]
fn file_without_size_and_other_path_errors() {
    rejects(
        &one("", &soak("")).replace("size = \"64MiB\"\n", ""),
        "target[0].size",
        "missing",
    );
    rejects(
        &format!(
            "[[target]]\nname = \"d\"\npath = \"{{dir}}\"\nsize = \"1M\"\n{}",
            soak("")
        ),
        "target[0].path",
        "is a directory",
    );
    rejects(
        &format!(
            "[[target]]\nname = \"n\"\npath = \"/dev/nvsoak-no-such-device\"\n{}",
            soak("")
        ),
        "target[0].path",
        "does not exist",
    );
    rejects(
        &format!(
            "[[target]]\npath = \"{{dir}}/x\"\nsize = \"1M\"\n{}",
            soak("")
        ),
        "target[0].name",
        "missing",
    );
    rejects(
        &format!("[[target]]\nname = \"x\"\nsize = \"1M\"\n{}", soak("")),
        "target[0].path",
        "missing",
    );
}

#[test]
fn target_options() {
    rejects(
        &one("engine = \"uring\"", &soak("")),
        "target[0].engine",
        "did you mean \"io_uring\"",
    );
    rejects(
        &one("verify = \"sometimes\"", &soak("")),
        "target[0].verify",
        "expected one of: off, inline, pass",
    );
    rejects(
        &one("verify_fatal = true", &soak("")),
        "target[0].verify_fatal",
        "no effect with verify = \"off\"",
    );
    rejects(
        &one("force_overwrite_signatures = true", &soak("")),
        "target[0].force_overwrite_signatures",
        "allow_destroy",
    );
    rejects(
        &one("max_errors = 0", &soak("")),
        "target[0].max_errors",
        "out of range",
    );
}

// --- phases ----------------------------------------------------------------------------------

#[test]
fn phase_structure() {
    rejects(&one("", ""), "target[0].phase", "no phases");
    rejects(
        &one("", "[[target.phase]]\nprofile = \"sql\"\n"),
        "target[0].phase[0].kind",
        "missing",
    );
    rejects(
        &one("", "[[target.phase]]\nkind = \"soka\"\nprofile = \"sql\"\n"),
        "target[0].phase[0].kind",
        "did you mean \"soak\"",
    );
    rejects(
        &one("", "[[target.phase]]\nkind = \"soak\"\n"),
        "target[0].phase[0].profile",
        "missing",
    );
    rejects(
        &one(
            "",
            "[[target.phase]]\nkind = \"soak\"\nprofile = \"sql\"\njob = { read = 1, bs = \"4k\" }\n",
        ),
        "target[0].phase[0].job",
        "not both",
    );
    // A soak without duration runs forever: nothing may follow it.
    rejects(
        &one("", &format!("{}{}", soak(""), soak("duration = \"1m\""))),
        "target[0].phase[0].duration",
        "phase[1] would never run",
    );
    rejects(
        &one("loop = true", &soak("")),
        "target[0].loop",
        "never loops",
    );
}

#[test]
fn keys_that_do_not_apply_to_the_kind() {
    rejects(
        &one(
            "",
            "[[target.phase]]\nkind = \"precondition\"\nprofile = \"sql\"\n",
        ),
        "target[0].phase[0].profile",
        "only applies to sweep and soak phases",
    );
    rejects(
        &one(
            "",
            "[[target.phase]]\nkind = \"precondition\"\nduration = \"1m\"\n",
        ),
        "target[0].phase[0].duration",
        "only applies to soak phases",
    );
    rejects(
        &one("", &soak("passes = 2")),
        "target[0].phase[0].passes",
        "only applies to precondition phases",
    );
    rejects(
        &one(
            "",
            "[[target.phase]]\nkind = \"sweep\"\nprofile = \"sql\"\nrate = \"50%\"\n",
        ),
        "target[0].phase[0].rate",
        "a sweep sets its own rates",
    );
    rejects(
        &one("", &soak("points = [10]")),
        "target[0].phase[0].points",
        "only applies to sweep phases",
    );
}

#[test]
fn precondition_and_sweep_values() {
    rejects(
        &one(
            "",
            "[[target.phase]]\nkind = \"precondition\"\npasses = 0\n",
        ),
        "target[0].phase[0].passes",
        "out of range",
    );
    rejects(
        &one(
            "",
            "[[target.phase]]\nkind = \"precondition\"\nblock_size = \"1000\"\n",
        ),
        "target[0].phase[0].block_size",
        "multiple of 512",
    );
    let sweep = |extra: &str| {
        one(
            "",
            &format!("[[target.phase]]\nkind = \"sweep\"\nprofile = \"4k-random-read\"\n{extra}\n"),
        )
    };
    rejects(
        &sweep("points = [10, 0]"),
        "target[0].phase[0].points[1]",
        "out of range",
    );
    rejects(&sweep("points = []"), "target[0].phase[0].points", "empty");
    rejects(
        &sweep("points = [50, 50]"),
        "target[0].phase[0].points[1]",
        "listed twice",
    );
    rejects(
        &sweep("point_duration = \"1ms\""),
        "target[0].phase[0].point_duration",
        "too short",
    );
    rejects(
        &one(
            "",
            "[[target.phase]]\nkind = \"sweep\"\njob = { name = \"j\", read = 100, bs = \"4k\", rate = \"100iops\" }\n",
        ),
        "target[0].phase[0].job.rate",
        "a sweep sets its own rates",
    );
}

#[test]
fn rotation_and_steady_state() {
    rejects(
        &one(
            "",
            "[[target.phase]]\nkind = \"soak\"\nprofiles = [\"sql\", \"oracle\"]\n",
        ),
        "target[0].phase[0].rotate",
        "missing",
    );
    rejects(
        &one("", &soak("rotate = \"1h\"")),
        "target[0].phase[0].rotate",
        "at least two entries",
    );
    rejects(
        &one(
            "",
            "[[target.phase]]\nkind = \"soak\"\nprofiles = [\"sql\", \"sql\"]\nrotate = \"1h\"\n",
        ),
        "target[0].phase[0].profiles[1]",
        "listed twice",
    );
    rejects(
        &one("", &soak("steady_window = 1")),
        "target[0].phase[0].steady_window",
        "out of range",
    );
    rejects(
        &one("", &soak("steady_criterion = \"iops\"")),
        "target[0].phase[0].steady_criterion",
        "needs a limit",
    );
    rejects(
        &one("", &soak("steady_criterion = \"snai\"")),
        "target[0].phase[0].steady_criterion",
        "did you mean \"snia\"",
    );
    rejects(
        &one("", &soak("steady_criterion = \"iops_slope:0%\"")),
        "target[0].phase[0].steady_criterion",
        "above 0%",
    );
    rejects(
        &format!(
            "[stats]\ninterval = \"2s\"\n{}",
            one("", &soak("steady_round = \"1s\""))
        ),
        "target[0].phase[0].steady_round",
        "shorter than stats.interval",
    );
}

// --- other sections --------------------------------------------------------------------------

#[test]
fn exporter_health_and_log() {
    rejects(
        "[exporter]\nlisten = \"localhost:port\"\n",
        "exporter.listen",
        "not an address",
    );
    rejects(
        "[exporter]\nmax_connections = 0\n",
        "exporter.max_connections",
        "out of range",
    );
    rejects(
        "[exporter]\nweb_config_file = \"/nonexistent/web.yml\"\n",
        "exporter.web_config_file",
        "No such file",
    );
    rejects(
        "[health]\ninclude = [\"nvme0\", \"re:(unclosed\"]\n",
        "health.include[1]",
        "bad regular expression",
    );
    rejects(
        "[health]\npoll_interval = \"0s\"\n",
        "health.poll_interval",
        "too short",
    );
    rejects(
        "[[health.device]]\nmatch = \"S1\"\nrated_dwpd = 3\n",
        "health.device[0].warranty_years",
        "go together",
    );
    rejects(
        "[[health.device]]\nrated_tbw = \"1e15\"\n",
        "health.device[0].match",
        "missing",
    );
    rejects(
        "[[health.device]]\nmatch = \"S1\"\n",
        "health.device[0].rated_tbw",
        "missing",
    );
    rejects(
        "[[health.device]]\nmatch = \"S1\"\nrated_tbw = \"lots\"\n",
        "health.device[0].rated_tbw",
        "does not start with a number",
    );
    rejects(
        "[log]\nlevel = \"nvsoak=loud\"\n",
        "log.level",
        "not a log filter",
    );
}

#[test]
fn files_that_cannot_be_read_or_parsed() {
    let o = nvsoak(&["check-config", "/nonexistent/nvsoak.toml"], &[]);
    assert!(!o.status.success());
    let e = stderr(&o);
    assert!(
        e.contains("/nonexistent/nvsoak.toml") && e.contains("No such file"),
        "{e}"
    );
    assert!(!e.contains("panicked"));

    let d = shm_dir();
    let o = check_in(d.path(), "[[target]\nname = ", &[]);
    assert!(!o.status.success());
    let e = stderr(&o);
    assert!(
        e.contains("nvsoak.toml") && e.contains("not valid TOML"),
        "{e}"
    );
    assert!(
        e.contains("line 1"),
        "the TOML error should give the position: {e}"
    );

    // Binary garbage is an error, not a panic.
    std::fs::write(d.path().join("nvsoak.toml"), [0xff, 0xfe, 0x00, 0x80]).unwrap();
    let o = nvsoak(
        &[
            "check-config",
            d.path().join("nvsoak.toml").to_str().unwrap(),
        ],
        &[],
    );
    assert!(!o.status.success());
    assert!(!stderr(&o).contains("panicked"), "{}", stderr(&o));
}

// --- good configs ----------------------------------------------------------------------------

#[test]
fn the_plan_expands_profiles_and_overrides() {
    let out = accepts(&one(
        "region = \"25%\"\nengine = \"psync\"",
        "[[target.phase]]\nkind = \"precondition\"\n\
         [[target.phase]]\nkind = \"sweep\"\nprofile = \"sql-90-10\"\npoints = [50, 100]\nmax_duration = \"2s\"\npoint_duration = \"1s\"\n\
         [[target.phase]]\nkind = \"soak\"\nprofile = \"4k-random-read\"\niodepth = 32\nrate = \"50%\"\nduration = \"1h\"\nsteady_criterion = \"iops:20%\"\n\
         [[target.phase]]\nkind = \"soak\"\nprofiles = [\"oracle\", \"vdi-lc-boot\"]\nrotate = \"10m\"\n",
    ));
    for needle in [
        "target t0",
        "region                     25% (16M)",
        "engine                     psync",
        "phase 1 precondition: 2 passes of sequential 128k writes",
        "then 50%, 100% for 1s each",
        "job sql-90-10",
        "90% read / 10% write",
        "4k:10,8k:80,64k:10",
        "iodepth      32",
        "50% of the measured maximum",
        "iops: every round within 20%",
        "rotating through 2 profiles every 10m",
        "job vdi-lc-boot",
        "soak until stopped",
    ] {
        assert!(out.contains(needle), "plan lacks {needle:?}:\n{out}");
    }
}

#[test]
fn no_targets_means_the_builtin_default_target() {
    let d = shm_dir();
    let o = check_in(d.path(), "[state]\ndir = \"{dir}/state\"\n", &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(
        out.contains(&format!("{}/state/default-target.dat", d.path().display())),
        "{out}"
    );
    assert!(out.contains("job 4k-random-read"), "{out}");
    // The region is written before it is read (a never-written preallocated file reads back
    // from unwritten extents without device I/O).
    let pre = out
        .find("precondition")
        .expect("the default plan preconditions");
    let soak = out.find("job 4k-random-read").expect("then soaks");
    assert!(pre < soak, "{out}");
}

#[test]
fn env_overrides_change_the_plan() {
    let d = shm_dir();
    let cfg = one("", &soak(""));
    let o = check_in(
        d.path(),
        &cfg,
        &[("NVSOAK_EXPORTER__LISTEN", "127.0.0.1:1234")],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("listen               127.0.0.1:1234"),
        "{}",
        stdout(&o)
    );
    let o = check_in(
        d.path(),
        &cfg,
        &[
            ("NVSOAK_HEALTH__INCLUDE", "nvme0,re:^SAMSUNG"),
            ("NVSOAK_STATS__INTERVAL", "2s"),
            ("NVSOAK_LOG", "not an override, ignored"),
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(
        out.contains("include              nvme0, re:^SAMSUNG"),
        "{out}"
    );
    assert!(out.contains("interval             2s"), "{out}");
    // A bad override is named, with the variable that set it.
    rejects_in(
        d.path(),
        &cfg,
        "exporter.listen",
        "set by the environment variable NVSOAK_EXPORTER__LISTEN",
        &[("NVSOAK_EXPORTER__LISTEN", "garbage")],
    );
    rejects_in(
        d.path(),
        &cfg,
        "exporter.lisen",
        "unknown key",
        &[("NVSOAK_EXPORTER__LISEN", "127.0.0.1:1")],
    );
}

/// config/nvsoak.toml and config/examples/*.toml, as shipped.
fn examples() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("config");
    let mut v = vec![root.join("nvsoak.toml")];
    if let Ok(rd) = std::fs::read_dir(root.join("examples")) {
        let mut ex: Vec<PathBuf> = rd
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "toml"))
            .collect();
        ex.sort();
        v.extend(ex);
    }
    v
}

/// The block devices an example names that this host does not have: every quoted `/dev/...`
/// path outside `/dev/shm`, outside comments, that does not exist, in order, each once.
fn missing_devices(text: &str) -> Vec<String> {
    // The lines without their comments (no example puts a `#` inside a string).
    let code: String = text
        .lines()
        .map(|l| l.split('#').next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n");
    let mut out: Vec<String> = Vec::new();
    for (i, part) in code.split('"').enumerate() {
        // Odd parts are inside quotes.
        if i % 2 == 1
            && part.starts_with("/dev/")
            && !part.starts_with("/dev/shm")
            && !Path::new(part).exists()
            && !out.iter().any(|d| d == part)
        {
            out.push(part.to_string());
        }
    }
    out
}

/// Block device nodes of this host, to stand in for an example's devices: the config only
/// stats them (they must be block devices, distinct ones for distinct paths).
fn host_block_devices() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir("/dev")
        .map(|rd| {
            rd.flatten()
                .map(|e| e.path())
                .filter(|p| std::fs::metadata(p).is_ok_and(|m| m.file_type().is_block_device()))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Every shipped config passes. An example over files (or devices this host has) passes
/// `check-config` as it is. An example for real drives (`/dev/disk/by-id/nvme-...`) cannot:
/// the config requires a block device path to exist, and `check-config` goes on to the device
/// itself (its serial against `allow_destroy`, an NVMe namespace for a purge). Those go
/// through the real config loader and validation (`nvsoak::config::load_str`, every rule of
/// `check-config` short of the device's own checks) with each missing device replaced by a
/// distinct block device node of this host; a host with too few nodes checks them up to the
/// device test only, and says so.
#[test]
fn every_shipped_example_passes() {
    let ex = examples();
    assert!(
        ex.len() >= 9,
        "expected config/nvsoak.toml and examples: {ex:?}"
    );
    let names: Vec<String> = ex
        .iter()
        .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .collect();
    for want in [
        "nvme-drive.toml",
        "nvme-rack.toml",
        "sata-drive.toml",
        "liqid-card.toml",
        "smoke-test.toml",
    ] {
        assert!(names.iter().any(|n| n == want), "{want} missing: {names:?}");
    }
    let stand_ins = host_block_devices();
    let mut on_devices = 0;
    for p in ex {
        let text = std::fs::read_to_string(&p).expect("reading the example");
        let devices = missing_devices(&text);
        if devices.is_empty() {
            let o = nvsoak(&["check-config", p.to_str().unwrap()], &[]);
            assert!(
                o.status.success(),
                "{} fails check-config:\n{}",
                p.display(),
                stderr(&o)
            );
            assert!(stdout(&o).contains("targets ("), "{}", stdout(&o));
            continue;
        }
        on_devices += 1;
        let origin = p.display().to_string();
        if stand_ins.len() < devices.len() {
            eprintln!(
                "{origin}: this host has {} block devices for its {} drives; checked up to the \
                 device test only",
                stand_ins.len(),
                devices.len()
            );
            let e = nvsoak::config::load_str(&text, &origin, Vec::new())
                .expect_err("a missing device is refused")
                .to_string();
            assert!(
                e.contains("does not exist") || e.contains("No such file"),
                "{origin}: refused for another reason than its missing devices: {e}"
            );
            continue;
        }
        let mut t = text.clone();
        for (d, s) in devices.iter().zip(&stand_ins) {
            t = t.replace(&format!("\"{d}\""), &format!("\"{}\"", s.display()));
        }
        let settings = nvsoak::config::load_str(&t, &origin, Vec::new())
            .unwrap_or_else(|e| panic!("{origin} is refused: {e}"));
        assert!(!settings.targets.is_empty(), "{origin}: no target");
        for t in &settings.targets {
            assert!(!t.phases.is_empty(), "{origin}: {} has no phase", t.name);
        }
    }
    assert!(on_devices >= 5, "{on_devices} examples for real drives");
}

#[test]
fn profiles_lists_every_builtin_profile() {
    let o = nvsoak(&["profiles"], &[]);
    assert!(o.status.success());
    let out = stdout(&o);
    for (name, depth) in [
        ("4k-random-read", 128),
        ("4k-random-write", 64),
        ("64k-seq-read", 16),
        ("64k-seq-write", 8),
    ] {
        let block = out
            .split("\njob ")
            .find(|b| b.starts_with(&format!("{name}\n")))
            .unwrap_or_else(|| panic!("{name} missing:\n{out}"));
        assert!(
            block.contains(&format!("in flight    {depth}\n")),
            "{name} should have {depth} I/Os in flight:\n{block}"
        );
    }
    for name in [
        "sql",
        "sql-90-10",
        "sql-80-20",
        "oracle",
        "oracle-90-10",
        "oracle-80-20",
        "vdi-fc-boot",
        "vdi-fc-initial-login",
        "vdi-fc-monday-login",
        "vdi-lc-boot",
        "vdi-lc-initial-login",
        "vdi-lc-monday-login",
    ] {
        assert!(out.contains(&format!("job {name}\n")), "{name} missing");
    }
    assert_eq!(out.matches("description").count(), 16);
}

/// A reader that stops early (`nvsoak check-config plan.toml | head -1`) closes the pipe while
/// nvsoak is still writing a plan longer than the pipe holds: nvsoak stops quietly, with no
/// panic (exit 101) and no error message.
#[test]
fn a_closed_stdout_is_not_a_panic() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    let dir = shm_dir();
    let mut toml = String::new();
    for i in 0..400 {
        toml.push_str(&format!(
            "[[target]]\nname = \"t{i}\"\npath = \"{}/t{i}.dat\"\nsize = \"1MiB\"\n\
             [[target.phase]]\nkind = \"soak\"\nprofile = \"4k-random-read\"\nduration = \"1h\"\n",
            dir.path().display()
        ));
    }
    let path = dir.path().join("big.toml");
    std::fs::write(&path, toml).expect("write config");
    let path_s = path.display().to_string();
    for args in [vec!["check-config", path_s.as_str()], vec!["profiles"]] {
        let mut child = Command::new(bin())
            .args(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn nvsoak");
        let mut first = String::new();
        {
            let stdout = child.stdout.take().expect("stdout");
            let mut r = BufReader::new(stdout);
            r.read_line(&mut first).expect("first line");
            // Dropping the reader closes the pipe, as `head -1` does.
        }
        let out = child.wait_with_output().expect("wait");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!first.is_empty(), "{args:?}: no output");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert_ne!(out.status.code(), Some(101), "{args:?}: {err}");
        assert!(out.status.success(), "{args:?}: {:?} {err}", out.status);
    }
}

/// The "no files under /dev" rule is applied to where the file would really be created, not to
/// the path's spelling: `..` out of /dev/shm and a dangling symlink into /dev are refused by
/// check-config and by run alike, and no file appears in /dev.
#[test]
fn paths_are_resolved_before_the_dev_rule() {
    let d = shm_dir();
    let name = format!("nvsoak-test-{}.dat", std::process::id());
    let dotdot = format!("/dev/shm/../{name}");
    let link = d.path().join("dangling");
    std::os::unix::fs::symlink(format!("/dev/{name}"), &link).expect("symlink");
    for path in [dotdot.clone(), link.display().to_string()] {
        let toml = format!(
            "[state]\ndir = \"{{dir}}/state\"\n[[target]]\nname = \"t0\"\npath = \"{path}\"\n\
             size = \"1MiB\"\n{}",
            soak("duration = \"1s\"")
        );
        rejects_in(
            d.path(),
            &toml,
            "target[0].path",
            &format!(
                "(it resolves to /dev/{name}); a block device must be present, and nvsoak does not create files under /dev"
            ),
            &[],
        );
        let cfg = d.path().join("nvsoak.toml");
        let o = nvsoak(
            &[
                "run",
                "--config",
                cfg.to_str().expect("utf-8"),
                "--exit-when-done",
                "--web.listen-address",
                "127.0.0.1:0",
            ],
            &[],
        );
        assert!(!o.status.success(), "run must refuse {path}");
        assert!(
            stderr(&o).contains("nvsoak does not create files under /dev"),
            "{}",
            stderr(&o)
        );
        assert!(
            !Path::new(&format!("/dev/{name}")).exists(),
            "a file was created in /dev through {path}"
        );
    }
}

/// The null engine moves no data, so verify cannot be honest with it.
#[test]
fn verify_with_the_null_engine_is_rejected() {
    for mode in ["inline", "pass"] {
        rejects(
            &one(
                &format!("engine = \"null\"\nverify = \"{mode}\""),
                &soak("duration = \"1s\""),
            ),
            "target[0].verify",
            "cannot be checked with engine = \"null\"",
        );
    }
    accepts(&one("engine = \"null\"", &soak("duration = \"1s\"")));
}

/// Polled completions need O_DIRECT on a device with poll queues: a buffered target is a config
/// error naming `direct`, and a file on tmpfs (no block device) is refused by check-config with
/// the reason and what to use instead, the check the engine makes at start.
#[test]
fn polled_io_needs_direct_io_on_a_polling_device() {
    rejects(
        &one(
            "engine = \"io_uring_poll\"\ndirect = false",
            &soak("duration = \"1s\""),
        ),
        "target[0].direct",
        "must be true with engine = \"io_uring_poll\"",
    );
    let d = shm_dir();
    let o = check_in(
        d.path(),
        &one("engine = \"io_uring_poll\"", &soak("duration = \"1s\"")),
        &[],
    );
    let err = stderr(&o);
    assert!(!o.status.success(), "tmpfs cannot poll: {}", stdout(&o));
    assert!(
        err.contains("polled I/O (engine = \"io_uring_poll\") cannot be used here")
            && err.contains("is not on a block device")
            && err.contains("use engine = \"io_uring\""),
        "{err}"
    );
}

/// The passthrough engines take a character device as the target (an NVMe generic device,
/// resolved to its namespace when the target opens); one that is no namespace's generic
/// device is refused by check-config with that reason. The other engines refuse a character
/// device at validation. `io_uring_cmd_poll` on a file is refused as no namespace.
#[test]
fn passthrough_targets_may_be_generic_devices_but_only_real_ones() {
    let d = shm_dir();
    let cfg = |engine: &str| {
        format!(
            "[[target]]\nname = \"t0\"\npath = \"/dev/null\"\nengine = \"{engine}\"\n{}",
            soak("duration = \"1s\"")
        )
    };
    for engine in ["io_uring_cmd", "io_uring_cmd_poll"] {
        let o = check_in(d.path(), &cfg(engine), &[]);
        let err = stderr(&o);
        assert!(!o.status.success(), "{engine}: /dev/null is no namespace");
        assert!(!err.contains("panicked"), "{err}");
        assert!(
            err.contains(&format!(
                "engine = \"{engine}\" with /dev/null as the target"
            )) && err.contains("is no NVMe namespace's generic device"),
            "{engine}: {err}"
        );
    }
    rejects(
        &cfg("io_uring"),
        "target[0].path",
        "/dev/null is neither a regular file nor a block device",
    );
    let o = check_in(
        d.path(),
        &one("engine = \"io_uring_cmd_poll\"", &soak("duration = \"1s\"")),
        &[],
    );
    let err = stderr(&o);
    assert!(
        !o.status.success(),
        "a file is no namespace: {}",
        stdout(&o)
    );
    assert!(
        err.contains("engine = \"io_uring_cmd_poll\" needs an NVMe namespace as the target"),
        "{err}"
    );
}

/// `nvsoak run` without `--config` in `cwd` with `env` (and no other `NVSOAK_*` variable),
/// stopped with SIGTERM once it serves `/healthz`; its stderr.
fn run_builtin_default(cwd: &Path, env: &[(&str, &str)]) -> String {
    use std::time::{Duration, Instant};
    let port = crate::common::free_port();
    let addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().expect("addr");
    let mut c = Command::new(bin());
    c.arg("run").current_dir(cwd);
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("NVSOAK_") {
            c.env_remove(k);
        }
    }
    c.env("NVSOAK_EXPORTER__LISTEN", addr.to_string())
        .env("RUST_LOG", "warn")
        .envs(env.iter().copied())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    let mut child = c.spawn().expect("starting nvsoak");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !matches!(crate::common::http_get(addr, "/healthz"), Ok((200, _))) {
        if Instant::now() > deadline || child.try_wait().ok().flatten().is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
    let (_, err) = crate::common::wait_exit(
        &mut child,
        Duration::from_secs(20),
        "nvsoak did not stop on SIGTERM",
    );
    err
}

/// Issue 34: `NVSOAK_STATE__DIR=/tmp/x nvsoak run` ignored the variable and wrote 1 GiB into
/// /var/lib/nvsoak; and the README's first command, run as root from a checkout, wrote under
/// /var/lib. The override reaches the built-in default, and without it the state directory is
/// `nvsoak-state` where the command was run, root or not, printed at start.
#[test]
fn the_builtin_default_takes_env_overrides_and_stays_where_it_is_run() {
    // On disk, not tmpfs: the default preallocates 1 GiB.
    let here = tempfile::tempdir().expect("scratch directory");
    let elsewhere = tempfile::tempdir().expect("scratch directory");
    let var_lib = Path::new("/var/lib/nvsoak/default-target.dat");
    let was_there = var_lib.exists();

    let state = elsewhere.path().join("x");
    let err = run_builtin_default(
        here.path(),
        &[("NVSOAK_STATE__DIR", state.to_str().expect("utf-8"))],
    );
    assert!(
        state.join("default-target.dat").exists(),
        "the default target is not in NVSOAK_STATE__DIR:\n{err}"
    );
    assert!(
        !here.path().join("nvsoak-state").exists(),
        "wrote where it stood:\n{err}"
    );
    assert!(
        err.contains(&format!("in the state directory {}", state.display())),
        "{err}"
    );

    let err = run_builtin_default(here.path(), &[]);
    let dir = here.path().join("nvsoak-state");
    assert!(
        dir.join("default-target.dat").exists(),
        "the default target is not under the current directory:\n{err}"
    );
    assert!(
        err.contains(&format!("in the state directory {}", dir.display())),
        "the state directory is not printed:\n{err}"
    );
    assert!(
        was_there || !var_lib.exists(),
        "the built-in default wrote into /var/lib/nvsoak"
    );
    // The readers find it from here too: `state show` names its checkpoint.
    let o = Command::new(bin())
        .args(["state", "show"])
        .current_dir(here.path())
        .env_remove("NVSOAK_STATE__DIR")
        .output()
        .expect("running nvsoak state show");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(text.contains(&dir.display().to_string()), "{text}");
}

// --- verification memory ---------------------------------------------------------------------

/// A soak of zipf-skewed writes, which only the stored map can follow.
fn mixed_soak() -> String {
    "[[target.phase]]\nkind = \"soak\"\njob = { name = \"m\", read = 50, bs = \"4k:1,8k:1\", access = \"random\", skew = \"zipf:1.2\" }\n".to_string()
}

/// A plan the computed state can follow costs a fixed 64 KiB in the figures, whatever the size.
#[test]
fn check_config_prints_the_computed_states_figure_for_a_plan_it_follows() {
    let out = accepts(&one("verify = \"inline\"", &soak("")));
    assert!(
        out.contains("target t0: verification state: 64.00 KiB (computed walk, at most 64 KiB whatever the size, of a region of 64.00 MiB)"),
        "{out}"
    );
}

/// A verified 64 MiB file target keeps 16384 units x 2 bytes + 256 words of recovered bits:
/// 34 KiB; with region = "50%", half of that.
#[test]
fn check_config_prints_each_verified_targets_verification_memory_and_the_total() {
    let out = accepts(&format!(
        "{}[[target]]\nname = \"half\"\npath = \"{{dir}}/half.dat\"\nsize = \"64MiB\"\nregion = \"50%\"\nverify = \"pass\"\n{}[[target]]\nname = \"plain\"\npath = \"{{dir}}/plain.dat\"\nsize = \"64MiB\"\n{}",
        one("verify = \"inline\"", &mixed_soak()),
        mixed_soak(),
        mixed_soak()
    ));
    assert!(
        out.contains(
            "target t0: verification state: 34.00 KiB (stored map, 2.125 bytes per 4 KiB, of a region of 64.00 MiB)"
        ),
        "{out}"
    );
    assert!(
        out.contains("target half: verification state: 17.00 KiB (stored map, 2.125 bytes per 4 KiB, of a region of 32.00 MiB)"),
        "{out}"
    );
    assert!(!out.contains("target plain: verification"), "{out}");
    assert!(
        out.contains("total: 51.00 KiB of a budget of ")
            && out.contains("(state.max_verify_memory)"),
        "{out}"
    );
    assert!(
        out.contains("max_verify_memory    50% of the host's memory"),
        "{out}"
    );
    // Without a verified target there is no section.
    let plain = accepts(&one("", &mixed_soak()));
    assert!(!plain.contains("verification memory"), "{plain}");
}

/// A block device's size comes from sysfs, without opening it.
#[test]
fn check_config_reads_a_block_devices_size_for_its_verification_memory() {
    let d = shm_dir();
    let Some(dev) = block_device(d.path()) else {
        eprintln!("skipped: no block device to stat");
        return;
    };
    let toml = format!(
        "[[target]]\nname = \"b\"\npath = \"{}\"\nverify = \"inline\"\n{}",
        dev.display(),
        mixed_soak()
    );
    let o = check_in(d.path(), &toml, &[]);
    let text = format!("{}{}", stdout(&o), stderr(&o));
    assert!(!text.contains("panicked"), "{text}");
    if o.status.success() {
        assert!(
            text.contains("target b: verification state: ")
                && text.contains("stored map, 2.125 bytes per 4 KiB"),
            "{text}"
        );
    }
}

#[test]
fn a_plan_over_the_verification_budget_is_refused_by_check_config_and_run() {
    let d = shm_dir();
    let toml = format!(
        "[state]\ndir = \"{{dir}}/state\"\nmax_verify_memory = \"16KiB\"\n[health]\nenabled = false\n{}",
        one(
            "verify = \"inline\"",
            &format!("{}duration = \"1s\"\n", mixed_soak())
        )
    );
    rejects_in(
        d.path(),
        &toml,
        "state.max_verify_memory",
        "the verified targets need 34.00 KiB of verification state together (t0 34.00 KiB), more than the budget of 16.00 KiB; raise state.max_verify_memory",
        &[],
    );
    // run refuses it too, before the target file is created or the port bound.
    let cfg = d.path().join("nvsoak.toml");
    let o = nvsoak(
        &[
            "run",
            "--config",
            cfg.to_str().expect("utf-8 path"),
            "--web.listen-address",
            &format!("127.0.0.1:{}", crate::common::free_port()),
            "--exit-when-done",
        ],
        &[],
    );
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(
        err.contains("state.max_verify_memory: the verified targets need 34.00 KiB")
            && err.contains("budget of 16.00 KiB"),
        "{err}"
    );
    assert!(!d.path().join("t0.dat").exists());
    // The environment raises it, as any key.
    let o = check_in(
        d.path(),
        &toml,
        &[("NVSOAK_STATE__MAX_VERIFY_MEMORY", "1MiB")],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("total: 34.00 KiB of a budget of 1.00 MiB"));
}

#[test]
fn bad_verification_budgets_are_named() {
    for (v, why) in [
        ("\"0\"", "0 bytes would refuse every verified target"),
        ("\"150%\"", "150% is out of range"),
        ("\"0%\"", "0% is out of range"),
        (
            "\"lots\"",
            "is neither a size (\"8GiB\") nor a share of the host's memory",
        ),
        ("true", "is neither a size"),
    ] {
        rejects(
            &format!(
                "[state]\nmax_verify_memory = {v}\n{}",
                one("", &mixed_soak())
            ),
            "state.max_verify_memory",
            why,
        );
    }
    let out = accepts(&format!(
        "[state]\nmax_verify_memory = \"12.5%\"\n{}",
        one("", &mixed_soak())
    ));
    assert!(
        out.contains("max_verify_memory    12.5% of the host's memory"),
        "{out}"
    );
    let out = accepts(&format!(
        "[state]\nmax_verify_memory = \"8GiB\"\n{}",
        one("", &mixed_soak())
    ));
    assert!(out.contains("max_verify_memory    8G\n"), "{out}");
}
