//! NVMe admin passthrough, log-page parsers, discovery and the drive ratings table.
//!
//! - [`AdminTransport`] moves bytes: [`ioctl::IoctlTransport`] for real controllers,
//!   [`replay::ReplayTransport`] for tests (canned pages, records every command).
//! - [`cmd`] builds the admin commands (dwords) and runs them through a transport.
//! - [`identify`], [`log`] and [`features`] are pure parsers from bytes to structs.
//! - [`discover`] walks `/sys/class/nvme`; [`ratings`] is the drive ratings table.
//!
//! Architecture Invariant: `nvme::identify` and `nvme::log` never perform I/O, and `ioctl.rs` is
//! the only file here with `unsafe` code.

pub mod caps;
pub mod claimed;
pub mod cmd;
pub mod discover;
pub mod features;
pub mod identify;
pub mod ioctl;
pub mod log;
pub mod ocp_cmd;
pub mod ratings;
pub mod replay;
pub mod steps;

/// One admin command, as the dwords the controller sees. The data buffer is passed separately.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdminCmd {
    pub opcode: u8,
    pub nsid: u32,
    pub cdw10: u32,
    pub cdw11: u32,
    pub cdw12: u32,
    pub cdw13: u32,
    pub cdw14: u32,
    pub cdw15: u32,
    /// What the command does, for error messages: "reading SMART log", "identifying controller".
    pub what: &'static str,
}

impl AdminCmd {
    pub fn new(opcode: u8, what: &'static str) -> Self {
        AdminCmd {
            opcode,
            nsid: 0,
            cdw10: 0,
            cdw11: 0,
            cdw12: 0,
            cdw13: 0,
            cdw14: 0,
            cdw15: 0,
            what,
        }
    }
}

/// Moves admin commands to a controller and their data back.
pub trait AdminTransport: Send + Sync {
    /// The controller's name for messages (e.g. `/dev/nvme0`).
    fn device(&self) -> String;
    /// Run `cmd`; controller-to-host data lands in `data`. Returns completion dword 0.
    fn admin(&self, cmd: &AdminCmd, data: &mut [u8]) -> Result<u32, NvmeError>;
}

/// A shared transport (tests hand one replay transport to every open).
impl<T: AdminTransport + ?Sized> AdminTransport for std::sync::Arc<T> {
    fn device(&self) -> String {
        (**self).device()
    }
    fn admin(&self, cmd: &AdminCmd, data: &mut [u8]) -> Result<u32, NvmeError> {
        (**self).admin(cmd, data)
    }
}

/// A malformed page.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("{what} is {got} bytes, need at least {need}")]
    Short {
        what: &'static str,
        need: usize,
        got: usize,
    },
    #[error(
        "{what} does not carry the expected GUID (not an OCP datacenter drive, or another log page at this ID)"
    )]
    BadGuid { what: &'static str },
    #[error("{what}: {detail}")]
    Invalid { what: &'static str, detail: String },
}

pub(crate) fn need(what: &'static str, b: &[u8], n: usize) -> Result<(), ParseError> {
    if b.len() < n {
        Err(ParseError::Short {
            what,
            need: n,
            got: b.len(),
        })
    } else {
        Ok(())
    }
}

/// Little-endian readers for the parsers; callers check the length first with [`need`].
pub(crate) mod le {
    pub fn u16(b: &[u8], o: usize) -> u16 {
        u16::from_le_bytes([b[o], b[o + 1]])
    }
    pub fn u32(b: &[u8], o: usize) -> u32 {
        u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
    }
    pub fn u64(b: &[u8], o: usize) -> u64 {
        let mut a = [0u8; 8];
        a.copy_from_slice(&b[o..o + 8]);
        u64::from_le_bytes(a)
    }
    pub fn u128(b: &[u8], o: usize) -> u128 {
        let mut a = [0u8; 16];
        a.copy_from_slice(&b[o..o + 16]);
        u128::from_le_bytes(a)
    }
    /// An unsigned little-endian integer of `n` <= 8 bytes.
    pub fn uint(b: &[u8], o: usize, n: usize) -> u64 {
        b[o..o + n]
            .iter()
            .rev()
            .fold(0u64, |acc, &x| (acc << 8) | u64::from(x))
    }
    /// ASCII, space-padded, maybe NUL-padded: trimmed.
    pub fn ascii(b: &[u8], o: usize, n: usize) -> String {
        String::from_utf8_lossy(&b[o..o + n])
            .trim_end_matches(['\0', ' '])
            .trim()
            .to_string()
    }
}

/// A failed admin command or an unusable page.
#[derive(Debug, thiserror::Error)]
pub enum NvmeError {
    #[error(
        "{device}: cannot open the controller: {source} (check the device exists and the nvme driver is loaded)"
    )]
    Open {
        device: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{device}: {what} needs CAP_SYS_ADMIN (run as root or grant the capability)")]
    PermissionDenied { device: String, what: &'static str },
    #[error(
        "{device}: opening the controller was refused (permission denied); health polling needs read access to the device node and CAP_SYS_ADMIN (run as root or grant both)"
    )]
    OpenDenied { device: String },
    #[error("{device}: {what} failed with NVMe status {status:#06x} (SCT {sct:#x}, SC {sc:#04x}: {name}{dnr})", sct = status_sct(*.status), sc = status_sc(*.status), name = status_name(*.status), dnr = if status & 0x4000 != 0 { ", do not retry" } else { "" })]
    Status {
        device: String,
        what: &'static str,
        /// The status field as the kernel returns it: SC [7:0], SCT [10:8], CRD, M, DNR [14].
        status: u16,
    },
    #[error("{device}: {what}: {source}")]
    Io {
        device: String,
        what: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("{device}: {what}: {source}")]
    Parse {
        device: String,
        what: &'static str,
        #[source]
        source: ParseError,
    },
    #[error("{device}: {what}: the replay transport has no canned response for {cmd}")]
    NoReplay {
        device: String,
        what: &'static str,
        cmd: String,
    },
}

impl NvmeError {
    /// True when the failure is a missing capability (the workload keeps running, and the
    /// message says how to fix it).
    pub fn is_permission(&self) -> bool {
        matches!(
            self,
            NvmeError::PermissionDenied { .. } | NvmeError::OpenDenied { .. }
        )
    }
    /// True when the device rejected the command with an NVMe status.
    pub fn status(&self) -> Option<u16> {
        match self {
            NvmeError::Status { status, .. } => Some(*status),
            _ => None,
        }
    }
}

pub fn status_sct(status: u16) -> u16 {
    (status >> 8) & 0x7
}

pub fn status_sc(status: u16) -> u16 {
    status & 0xff
}

/// A short name for the common generic and command-specific status codes.
pub fn status_name(status: u16) -> &'static str {
    match (status_sct(status), status_sc(status)) {
        (0, 0x00) => "successful completion",
        (0, 0x01) => "invalid command opcode",
        (0, 0x02) => "invalid field in command",
        (0, 0x04) => "data transfer error",
        (0, 0x06) => "internal error",
        (0, 0x0b) => "invalid namespace or format",
        (0, 0x80) => "LBA out of range",
        (0, 0x81) => "capacity exceeded",
        (0, 0x82) => "namespace not ready",
        (1, 0x09) => "invalid log page",
        (1, 0x0d) => "feature identifier not saveable",
        (1, 0x0e) => "feature not changeable",
        (2, 0x80) => "write fault",
        (2, 0x81) => "unrecovered read error",
        (2, 0x82) => "end-to-end guard check error",
        (2, 0x86) => "access denied",
        (0, _) => "generic command status",
        (1, _) => "command specific status",
        (2, _) => "media and data integrity error",
        (3, _) => "path related status",
        (7, _) => "vendor specific",
        _ => "reserved status code type",
    }
}

/// The hand-built fixtures under `tests/fixtures/nvme/handbuilt/` come from the generators in
/// the parser modules' `testdata`. `NVSOAK_UPDATE_FIXTURES=1 cargo test --lib fixtures` rewrites
/// them; otherwise this test fails when a generator and its checked-in file disagree.
#[cfg(test)]
mod fixtures {
    use std::path::Path;

    #[test]
    fn handbuilt_fixtures_match_their_generators() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/nvme/handbuilt");
        let pages: [(&str, Vec<u8>); 12] = [
            ("id-ctrl.bin", super::identify::testdata::id_ctrl()),
            ("id-ns.bin", super::identify::testdata::id_ns()),
            ("smart.bin", super::log::smart::testdata::smart()),
            ("error.bin", super::log::error::testdata::error_log()),
            ("fw-slot.bin", super::log::fwslot::testdata::fw_slot()),
            ("ocp-c0.bin", super::log::ocp::testdata::ocp()),
            ("id-ctrl-steps.bin", super::caps::testdata::id_ctrl_steps()),
            (
                "self-test.bin",
                super::log::selftest::testdata::failed_extended(),
            ),
            ("sanitize.bin", super::log::sanitize::testdata::status()),
            ("ocp-c1.bin", super::log::ocp_recovery::testdata::recovery()),
            ("ocp-c3.bin", super::log::ocp_latency::testdata::latency()),
            (
                "telemetry-08.bin",
                super::log::telemetry::testdata::header(4),
            ),
        ];
        let update = std::env::var_os("NVSOAK_UPDATE_FIXTURES").is_some();
        for (name, bytes) in pages {
            let path = dir.join(name);
            if update {
                std::fs::write(&path, &bytes).expect("write fixture");
            }
            let on_disk = std::fs::read(&path).expect("read fixture");
            assert!(
                on_disk == bytes,
                "{name} differs from its generator; rerun with NVSOAK_UPDATE_FIXTURES=1"
            );
        }
    }
}

/// The controller of an NVMe device node by its name: `/dev/nvme0n1` (or `/dev/nvme0n1p2`, `/dev/ng0n1`) → `nvme0`; anything else → `None`.
pub fn controller_of_node(path: &str) -> Option<String> {
    // Only device nodes: a regular file named like a namespace is not on that controller.
    let name = path.strip_prefix("/dev/")?;
    let rest = name
        .strip_prefix("nvme")
        .or_else(|| name.strip_prefix("ng"))?;
    let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
    if digits.is_empty() || !rest[digits.len()..].starts_with('n') {
        return None;
    }
    Some(format!("nvme{digits}"))
}

#[cfg(test)]
mod controller_tests {
    use super::controller_of_node;

    #[test]
    fn controller_of_namespace_paths() {
        assert_eq!(controller_of_node("/dev/nvme0n1").as_deref(), Some("nvme0"));
        assert_eq!(
            controller_of_node("/dev/nvme12n3p1").as_deref(),
            Some("nvme12")
        );
        assert_eq!(controller_of_node("/dev/ng1n1").as_deref(), Some("nvme1"));
        assert_eq!(controller_of_node("/dev/nvme0"), None);
        assert_eq!(controller_of_node("/dev/shm/t0.dat"), None);
        assert_eq!(controller_of_node("/dev/loop3"), None);
        assert_eq!(controller_of_node("/srv/nvme0n1"), None);
    }
}
