//! The host's name, as records and IDs carry it, and the running kernel's release.

/// The host's name for records and IDs: the kernel's hostname; on a host that has none (the
/// kernel says `(none)`, or nothing), `host-` and the first 12 characters of its machine ID
/// (`/etc/machine-id`), else `localhost`.
pub fn hostname() -> String {
    let read = |p: &str| std::fs::read_to_string(p).ok();
    pick_hostname(
        read("/proc/sys/kernel/hostname").as_deref(),
        read("/etc/machine-id").as_deref(),
    )
}

/// `name` trimmed, when it is a hostname: not empty, not the kernel's `(none)` (no hostname
/// set), printable ASCII without spaces.
pub fn usable_hostname(name: &str) -> Option<&str> {
    let h = name.trim();
    (!h.is_empty() && h != "(none)" && h.chars().all(|c| c.is_ascii_graphic())).then_some(h)
}

/// [`hostname`] from the two files' contents. Pure.
pub fn pick_hostname(kernel: Option<&str>, machine_id: Option<&str>) -> String {
    if let Some(h) = kernel.and_then(usable_hostname) {
        return h.to_string();
    }
    match machine_id.map(str::trim) {
        Some(id) if id.len() >= 12 && id.chars().all(|c| c.is_ascii_hexdigit()) => {
            format!("host-{}", &id[..12])
        }
        _ => "localhost".into(),
    }
}

/// The running kernel's release (`6.1.0-57-cloud-amd64`), from `/proc/sys/kernel/osrelease`.
pub fn kernel_release() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .ok()
        .map(|s| s.trim().to_string())
}

/// The kernel's boot id (`/proc/sys/kernel/random/boot_id`, new at every boot), through
/// [`crate::util::bounded`]; `None` when it cannot be read. A record left by a run under
/// another boot id was left by a boot that ended (a power loss, a reset).
pub fn boot_id() -> Option<String> {
    crate::util::bounded::read_to_string(
        std::path::Path::new("/proc/sys/kernel/random/boot_id"),
        4096,
    )
    .ok()
    .map(|s| s.trim().to_string())
    .filter(|s| !s.is_empty())
}

/// The host's memory in bytes (`MemTotal` of `/proc/meminfo`, read through
/// [`crate::util::bounded`]); `None` when it cannot be read.
pub fn mem_total() -> Option<u64> {
    crate::util::bounded::read_to_string(std::path::Path::new("/proc/meminfo"), 1 << 20)
        .ok()
        .as_deref()
        .and_then(parse_mem_total)
}

/// `MemTotal:  8028812 kB` of a `/proc/meminfo` text, in bytes. Pure.
pub fn parse_mem_total(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let mut parts = line["MemTotal:".len()..].split_whitespace();
    let n: u64 = parts.next()?.parse().ok()?;
    match parts.next() {
        Some("kB") => n.checked_mul(1024),
        None => Some(n),
        Some(_) => None,
    }
}

/// `(major, minor)` of a kernel release string such as `6.1.0-27-cloud-amd64`.
pub fn parse_release(release: &str) -> Option<(u32, u32)> {
    let mut parts = release.trim().split(|c: char| !c.is_ascii_digit());
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mem_total_parses_from_meminfo() {
        let m = "MemTotal:        8028812 kB\nMemFree:          123456 kB\n";
        assert_eq!(parse_mem_total(m), Some(8028812 * 1024));
        assert_eq!(parse_mem_total("MemFree: 1 kB\n"), None);
        assert_eq!(parse_mem_total("MemTotal: lots kB\n"), None);
        assert_eq!(parse_mem_total("MemTotal: 5 MB\n"), None);
        // The host's own, when there is one.
        if std::path::Path::new("/proc/meminfo").exists() {
            assert!(mem_total().is_some_and(|b| b > 0));
        }
    }

    #[test]
    fn kernel_releases_parse() {
        assert_eq!(parse_release("6.1.0-27-cloud-amd64"), Some((6, 1)));
        assert_eq!(parse_release("6.18.44-fc-v973\n"), Some((6, 18)));
        assert_eq!(parse_release("6.12.95+deb12-cloud-amd64"), Some((6, 12)));
        assert_eq!(parse_release("5.10"), Some((5, 10)));
        assert_eq!(parse_release("garbage"), None);
    }
}
