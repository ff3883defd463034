//! The release binary builds with the Rust toolchain alone (issue 12): no dependency runs
//! bindgen (which needs clang) or pkg-config (which needs a `-dev` package), and no `-sys`
//! crate links a system library. libblkid is loaded at run time (`libblkid.so.1`), and the
//! Debian package declares it. `scripts/test-ops` also builds with `PKG_CONFIG=/bin/false`.

use std::path::Path;

/// `-sys` crates that are pure Rust (raw syscall or platform bindings needing no system
/// package at build time).
const PURE_SYS: &[&str] = &["linux-raw-sys", "js-sys", "web-sys", "windows-sys"];

fn lock_packages() -> Vec<String> {
    let lock = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.lock"))
        .expect("Cargo.lock readable");
    lock.lines()
        .filter_map(|l| l.strip_prefix("name = \""))
        .map(|n| n.trim_end_matches('"').to_string())
        .collect()
}

#[test]
fn no_dependency_needs_bindgen_pkg_config_or_a_system_sys_crate() {
    let pkgs = lock_packages();
    assert!(
        pkgs.iter().any(|p| p == "nvsoak"),
        "Cargo.lock parsed: {pkgs:?}"
    );
    let bad: Vec<&String> = pkgs
        .iter()
        .filter(|p| {
            matches!(p.as_str(), "bindgen" | "pkg-config" | "clang-sys" | "cmake")
                || (p.ends_with("-sys") && !PURE_SYS.contains(&p.as_str()))
        })
        .collect();
    assert!(
        bad.is_empty(),
        "dependencies needing build-time system packages: {bad:?}"
    );
}

#[test]
fn debian_package_declares_libblkid() {
    let toml = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml"))
        .expect("Cargo.toml readable");
    let depends = toml
        .lines()
        .find(|l| l.starts_with("depends = "))
        .expect("package.metadata.deb has depends");
    assert!(depends.contains("libblkid1"), "{depends}");
    assert!(
        !toml.contains("libblkid-rs"),
        "libblkid must be bound at run time, not through libblkid-rs"
    );
}

#[test]
fn libblkid_is_found_at_run_time() {
    // The probe loads libblkid.so.1 lazily; a blank file probes clean through it.
    let dir = crate::common::shm_dir();
    let f = dir.path().join("blank.img");
    std::fs::write(&f, vec![0u8; 1 << 20]).expect("write blank image");
    let sigs = nvsoak::safety::probe_signatures(&f).expect("libblkid.so.1 loads and probes");
    assert!(sigs.is_empty(), "{sigs:?}");
}

/// Every dependency says what it is for: a `# ...` comment line right above it in Cargo.toml.
#[test]
fn every_dependency_says_what_it_is_for() {
    let toml = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml"))
        .expect("Cargo.toml readable");
    let mut section = "";
    let mut prev = "";
    let mut deps = 0;
    let mut silent = Vec::new();
    for line in toml.lines() {
        if line.starts_with('[') {
            section = line;
        } else if matches!(section, "[dependencies]" | "[dev-dependencies]")
            && line.contains(" = ")
            && !line.starts_with('#')
        {
            deps += 1;
            if !prev.starts_with("# ") {
                silent.push(format!("{section} {line}"));
            }
        }
        prev = line;
    }
    assert!(deps > 10, "dependencies parsed: {deps}");
    assert!(
        silent.is_empty(),
        "dependencies without a comment: {silent:?}"
    );
}
