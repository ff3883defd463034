//! Targets that span several block devices (`paths`), on loop devices this test creates: workers
//! spread over the members, each member written, per-member figures (metrics, results file)
//! summing to the target's; every member checked on its own (a signature on one, an alias, a
//! member `allow_destroy` does not name, a name that names no member) refuses the whole target
//! and leaves every member byte-identical; config errors name the key. Needs root and losetup
//! for the devices; skips with a printed reason otherwise.

use std::fs;
use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use crate::common::{Daemon, bin, find, free_port, shm_dir, sum};
use crate::safety::{Scratch, p, sh};

fn nvsoak(args: &[&str]) -> Output {
    let mut c = Command::new(bin());
    c.args(args);
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("NVSOAK_") {
            c.env_remove(k);
        }
    }
    c.env("RUST_LOG", "info");
    c.output().expect("running nvsoak")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `toml` written to `dir` and checked: rejected, naming `key` and saying `reason`.
#[track_caller]
fn rejects(dir: &Path, toml: &str, key: &str, reason: &str) {
    let path = dir.join("check.toml");
    fs::write(&path, toml.replace("{dir}", &dir.display().to_string())).expect("config");
    let o = nvsoak(&["check-config", p(&path)]);
    let err = stderr(&o);
    assert!(!o.status.success(), "check-config passed:\n{err}");
    assert!(!err.contains("panicked"), "nvsoak panicked:\n{err}");
    assert!(
        err.contains(&format!("{key}:")),
        "should name `{key}`:\n{err}"
    );
    assert!(err.contains(reason), "should say `{reason}`:\n{err}");
}

/// A plan over `paths` with `allow_destroy` (TOML values as written) and `phases`.
fn plan(state: &Path, paths: &[&Path], allow: &[&str], phases: &str) -> String {
    let list = |v: Vec<String>| v.join(", ");
    format!(
        r#"
[state]
dir = "{state}"
[health]
enabled = false
[[target]]
name = "card"
paths = [{paths}]
allow_destroy = [{allow}]
engine = "psync"
{phases}
"#,
        state = state.display(),
        paths = list(
            paths
                .iter()
                .map(|d| format!("\"{}\"", d.display()))
                .collect()
        ),
        allow = list(allow.iter().map(|a| format!("\"{a}\"")).collect()),
    )
}

const SOAK: &str = r#"
[[target.phase]]
kind = "soak"
job = { name = "w", read = 0, bs = "4k", access = "random", iodepth = 1, workers = 2 }
duration = "10m"
"#;

/// `nvsoak run` on `cfg` until it exits (it must: the target is refused); its stderr.
fn run_refused(dir: &Path, cfg: &str) -> String {
    let path = dir.join("run.toml");
    fs::write(&path, cfg).expect("config");
    let addr = format!("127.0.0.1:{}", free_port());
    let o = nvsoak(&["run", "--config", p(&path), "--web.listen-address", &addr]);
    let err = stderr(&o);
    assert!(!o.status.success(), "nvsoak run did not refuse:\n{err}");
    assert!(!err.contains("panicked"), "nvsoak panicked:\n{err}");
    err
}

fn contents(dev: &Path) -> Vec<u8> {
    fs::read(dev).expect("reading the device back")
}

#[test]
fn a_spanning_target_writes_every_member_and_its_members_sum_to_it() {
    let Some(mut s) = Scratch::new("spanning target") else {
        return;
    };
    let a = s.loop_dev(16, false);
    let b = s.loop_dev(16, false);
    let dir = shm_dir();
    let phases = r#"
[[target.phase]]
kind = "precondition"
passes = 1
block_size = "128k"
workers = 4
[[target.phase]]
kind = "sweep"
job = { name = "mix", read = 50, bs = "4k", access = "random", iodepth = 2, workers = 2 }
max_duration = "1s"
point_duration = "1s"
points = [50]
"#;
    let cfg = plan(
        &s.dir.path().join("state"),
        &[&a, &b],
        &[p(&a), p(&b)],
        phases,
    );
    // check-config lists every member and passes.
    let cpath = s.dir.path().join("check.toml");
    fs::write(&cpath, &cfg).expect("config");
    let o = nvsoak(&["check-config", p(&cpath)]);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(o.status.success(), "check-config: {}", stderr(&o));
    assert!(
        out.contains(&format!("{:<26} {}", "paths[0]", a.display()))
            && out.contains(&format!("{:<26} {}", "paths[1]", b.display())),
        "check-config does not list the members:\n{out}"
    );

    let d = Daemon::start_in(dir, &cfg, &[]);
    let m = d.scrape_until(Duration::from_secs(120), |s| {
        sum(s, "nvsoak_phase_running", &[("target", "card")]) == 0.0
    });
    assert_eq!(
        sum(&m, "nvsoak_phase_running", &[("target", "card")]),
        0.0,
        "the plan did not finish"
    );
    assert_eq!(sum(&m, "nvsoak_target_up", &[("target", "card")]), 1.0);
    // The status page lists each member under the target.
    let (code, page) = crate::common::http_get(d.addr, "/").expect("status page");
    assert_eq!(code, 200, "{page}");
    assert!(page.contains("<table id=\"members\">"), "{page}");
    for dev in [&a, &b] {
        let row = format!("<tr><td>card</td><td>{}</td>", dev.display());
        assert!(page.contains(&row), "{row} in {page}");
    }
    // Per-member figures sum to the target's, for each op.
    for op in ["read", "write"] {
        let t = [("target", "card"), ("op", op)];
        for (member, total) in [
            (
                "nvsoak_target_member_ops_total",
                format!("nvsoak_{op}_ops_total"),
            ),
            (
                "nvsoak_target_member_bytes_total",
                format!("nvsoak_{op}_bytes_total"),
            ),
        ] {
            let parts = find(&m, member, &t);
            assert_eq!(parts.len(), 2, "{member}{{op={op}}}: one series per member");
            let whole = sum(&m, &total, &[("target", "card")]);
            assert!(whole > 0.0, "no {op}s at all");
            assert_eq!(
                sum(&m, member, &t),
                whole,
                "{member} does not sum to {total}"
            );
        }
    }
    // Each member: its whole region preconditioned (16 MiB in 128k writes) plus its share of
    // the sweep's writes, and some of its reads.
    for dev in [&a, &b] {
        let name = dev.file_name().and_then(|n| n.to_str()).expect("name");
        let l = [("target", "card"), ("device", name), ("op", "write")];
        let w = sum(&m, "nvsoak_target_member_bytes_total", &l);
        assert!(w > (16 << 20) as f64, "{name}: {w} bytes written");
        let l = [("target", "card"), ("device", name), ("op", "read")];
        assert!(
            sum(&m, "nvsoak_target_member_ops_total", &l) > 0.0,
            "{name}: no reads"
        );
        assert_eq!(
            find(
                &m,
                "nvsoak_target_member_info",
                &[("target", "card"), ("device", name), ("path", p(dev))]
            )
            .len(),
            1
        );
    }
    promtool_clean(&d.scrape_text());
    let results = s.dir.path().join("state/results/card.json");
    let (status, _, err) = d.terminate();
    assert!(status.success(), "{err}");
    // Every 4 KiB block of each member was written.
    for dev in [&a, &b] {
        let data = contents(dev);
        assert_eq!(data.len(), 16 << 20);
        for (i, blk) in data.chunks(4096).enumerate() {
            assert!(
                blk.iter().any(|x| *x != 0),
                "{}: block {i} was never written",
                dev.display()
            );
        }
    }
    // The results file keeps each member's figures (the whole plan's), summing to the target's
    // whole-plan totals (`soak.plan`; `soak` itself covers soak phases only), and each sweep
    // point's per-member IOPS, summing to the point's.
    let text = fs::read_to_string(&results).expect("results file");
    let v: serde_json::Value = serde_json::from_str(&text).expect("results JSON");
    let members = v["members"].as_array().expect("members");
    assert_eq!(members.len(), 2, "{text}");
    assert_eq!(members[0]["path"], p(&a));
    assert_eq!(members[1]["path"], p(&b));
    for (field, total) in [
        ("write_bytes", "written_bytes"),
        ("read_bytes", "read_bytes"),
        ("write_ops", "write_ops"),
        ("read_ops", "read_ops"),
    ] {
        let parts: u64 = members.iter().filter_map(|m| m[field].as_u64()).sum();
        assert_eq!(
            Some(parts),
            v["soak"]["plan"][total].as_u64(),
            "{field}: {text}"
        );
    }
    let points = v["sweeps"][0]["points"].as_array().expect("sweep points");
    assert_eq!(points.len(), 2, "{text}");
    for pt in points {
        let per: Vec<f64> = pt["member_iops"]
            .as_array()
            .expect("member_iops")
            .iter()
            .filter_map(|x| x.as_f64())
            .collect();
        assert_eq!(per.len(), 2);
        assert!(per.iter().all(|x| *x > 0.0), "a member idle: {pt}");
        let iops = pt["iops"].as_f64().expect("iops");
        assert!(
            (per.iter().sum::<f64>() - iops).abs() <= iops * 1e-9,
            "members {per:?} do not sum to {iops}"
        );
    }
}

#[test]
fn a_signature_on_one_member_refuses_the_whole_target_and_writes_neither() {
    let Some(mut s) = Scratch::new("spanning target, signature") else {
        return;
    };
    let a = s.loop_dev(16, false);
    let b = s.loop_dev(16, false);
    sh("mkfs.ext4", &["-q", "-F", p(&b)]);
    let before = (contents(&a), contents(&b));
    let state = s.dir.path().join("state");
    let cfg = plan(&state, &[&a, &b], &[p(&a), p(&b)], SOAK);
    let err = run_refused(s.dir.path(), &cfg);
    assert!(
        err.contains("paths[1]") && err.contains("ext4") && err.contains(p(&b)),
        "the refusal should name the member and its signature:\n{err}"
    );
    // check-config refuses it the same way.
    let cpath = s.dir.path().join("check.toml");
    fs::write(&cpath, &cfg).expect("config");
    let o = nvsoak(&["check-config", p(&cpath)]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("paths[1]") && stderr(&o).contains("ext4"));
    assert!(before.0 == contents(&a), "the blank member was written");
    assert!(before.1 == contents(&b), "the member with ext4 was written");
}

#[test]
fn allow_destroy_must_name_every_member_and_only_members() {
    let Some(mut s) = Scratch::new("spanning target, allow_destroy") else {
        return;
    };
    let a = s.loop_dev(16, false);
    let b = s.loop_dev(16, false);
    let c = s.loop_dev(16, false);
    let before = (contents(&a), contents(&b));
    let state = s.dir.path().join("state");
    // One member not named.
    let err = run_refused(s.dir.path(), &plan(&state, &[&a, &b], &[p(&a)], SOAK));
    assert!(
        err.contains("paths[1]") && err.contains("no name in allow_destroy"),
        "{err}"
    );
    // A name that names no member (a typo, or a device left out of paths).
    let err = run_refused(
        s.dir.path(),
        &plan(&state, &[&a, &b], &[p(&a), p(&b), p(&c)], SOAK),
    );
    assert!(
        err.contains("allow_destroy[2]") && err.contains("names none of the target's paths"),
        "{err}"
    );
    assert!(before.0 == contents(&a), "{} was written", a.display());
    assert!(before.1 == contents(&b), "{} was written", b.display());
}

#[test]
fn a_member_named_twice_is_refused_by_device_number() {
    let Some(mut s) = Scratch::new("spanning target, aliases") else {
        return;
    };
    let a = s.loop_dev(16, false);
    let b = s.loop_dev(16, false);
    let before = (contents(&a), contents(&b));
    let state = s.dir.path().join("state");
    // A symlink to a member.
    let link = s.dir.path().join("a-link");
    std::os::unix::fs::symlink(&a, &link).expect("symlink");
    rejects(
        s.dir.path(),
        &plan(&state, &[&a, &link], &[p(&a)], SOAK),
        "target[0].paths[1]",
        "is the same device as paths[0]",
    );
    // Another device node with the member's numbers (mknod): caught by device number.
    use std::os::unix::fs::MetadataExt;
    let rdev = fs::metadata(&a).expect("stat").rdev();
    let node = s.dir.path().join("a-node");
    sh(
        "mknod",
        &[
            p(&node),
            "b",
            &libc::major(rdev).to_string(),
            &libc::minor(rdev).to_string(),
        ],
    );
    rejects(
        s.dir.path(),
        &plan(&state, &[&a, &node], &[p(&a), p(&b)], SOAK),
        "target[0].paths[1]",
        "is the same device as paths[0]",
    );
    // A member that is another target's device, under another name: refused at run.
    let cfg = format!(
        "{}\n[[target]]\nname = \"single\"\npath = \"{}\"\nallow_destroy = \"{}\"\nengine = \"psync\"\n{SOAK}",
        plan(&state, &[&a, &b], &[p(&a), p(&b)], SOAK),
        node.display(),
        p(&a)
    );
    let err = run_refused(s.dir.path(), &cfg);
    assert!(
        err.contains("targets card and single are the same"),
        "{err}"
    );
    assert!(before.0 == contents(&a), "{} was written", a.display());
    assert!(before.1 == contents(&b), "{} was written", b.display());
}

#[test]
fn spanning_config_errors_name_the_key() {
    let d = shm_dir();
    let dir = d.path();
    let file = dir.join("f.dat");
    fs::write(&file, b"x").expect("file");
    let head = "[state]\ndir = \"{dir}/state\"\n[[target]]\nname = \"t\"\n";
    let soak =
        "[[target.phase]]\nkind = \"soak\"\nprofile = \"4k-random-read\"\nduration = \"1m\"\n";
    rejects(
        dir,
        &format!(
            "{head}paths = [\"{}\", \"{}\"]\n{soak}",
            file.display(),
            file.display()
        ),
        "target[0].paths[0]",
        "is not a block device",
    );
    rejects(
        dir,
        &format!(
            "{head}paths = [\"{dir}/missing\", \"{dir}/f.dat\"]\n{soak}",
            dir = dir.display()
        ),
        "target[0].paths[0]",
        "every member of paths must be a block device that exists",
    );
    rejects(
        dir,
        &format!("{head}paths = [\"{}\"]\n{soak}", file.display()),
        "target[0].paths",
        "spans at least two block devices",
    );
    rejects(
        dir,
        &format!(
            "{head}path = \"{}\"\npaths = [\"a\", \"b\"]\n{soak}",
            file.display()
        ),
        "target[0].paths",
        "not both",
    );
    rejects(
        dir,
        &format!(
            "{head}path = \"{}\"\nsize = \"1MiB\"\nallow_destroy = [\"A\", \"B\"]\n{soak}",
            dir.join("new.dat").display()
        ),
        "target[0].allow_destroy",
        "a list is for a target with paths",
    );
    rejects(
        dir,
        &format!(
            "{head}path = \"{}\"\nsize = \"1MiB\"\nallow_destroy = [\"A\", \" \"]\n{soak}",
            dir.join("new.dat").display()
        ),
        "target[0].allow_destroy[1]",
        "empty",
    );
    // What needs real block devices.
    let Some(mut s) = Scratch::new("spanning config errors") else {
        return;
    };
    let a = s.loop_dev(16, false);
    let b = s.loop_dev(16, false);
    let both = format!("paths = [\"{}\", \"{}\"]\n", a.display(), b.display());
    rejects(
        dir,
        &format!("{head}{both}verify = \"inline\"\n{soak}"),
        "target[0].verify",
        "not supported on a target with paths",
    );
    rejects(
        dir,
        &format!(
            "{head}{both}allow_destroy = [\"{}\", \"{}\"]\n[[target.phase]]\nkind = \"purge\"\nmethod = \"format-user-data\"\n",
            a.display(),
            b.display()
        ),
        "target[0].phase[0].kind",
        "not supported on a target with paths",
    );
    rejects(
        dir,
        &format!("{head}{both}size = \"1MiB\"\n{soak}"),
        "target[0].size",
        "block device",
    );
}

/// `promtool check metrics` finds nothing in `text` (the member families included).
fn promtool_clean(text: &str) {
    assert!(text.contains("nvsoak_target_member_ops_total"), "{text}");
    crate::common::assert_promtool_clean(text);
}
