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
    fn kernel_releases_parse() {
        assert_eq!(parse_release("6.1.0-27-cloud-amd64"), Some((6, 1)));
        assert_eq!(parse_release("6.18.44-fc-v973\n"), Some((6, 18)));
        assert_eq!(parse_release("6.12.95+deb12-cloud-amd64"), Some((6, 12)));
        assert_eq!(parse_release("5.10"), Some((5, 10)));
        assert_eq!(parse_release("garbage"), None);
    }
}
