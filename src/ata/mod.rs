//! ATA drives (SATA SSDs behind libata, or a SAT bridge) through SCSI `ATA PASS-THROUGH (16)`.
//!
//! - [`AtaTransport`] moves one ATA command: [`transport::SgIo`] through the `SG_IO` ioctl on
//!   `/dev/sdX`, [`transport::Replay`] for tests (canned data and registers, records every
//!   command).
//! - [`cdb`] builds the pass-through CDB and reads the ATA registers back from sense data (both
//!   the descriptor and the fixed format libata uses).
//! - [`cmd`] builds the commands nvsoak sends and runs them through a transport.
//! - [`identify`], [`smart`] and [`devstat`] are pure parsers from bytes to structs;
//!   [`vendor`] the family attribute names and which attributes carry lifetime writes.
//! - [`discover`] lists the ATA disks in sysfs.
//!
//! Architecture Invariant: `ata::identify`, `ata::smart`, `ata::devstat` and `ata::cdb` never
//! perform I/O, and `transport.rs` is the only file here with `unsafe` code.
//!
//! The health poller polls these disks (`health::collect::ata`), `metrics::ata` exports them.

pub mod cdb;
pub mod cmd;
pub mod devstat;
pub mod discover;
pub mod identify;
pub mod smart;
pub mod transport;
pub mod vendor;

pub use transport::AtaTransport;

/// The ATA sector every data command here moves (IDENTIFY, SMART, GP logs).
pub const SECTOR: usize = 512;

/// How the command moves data, as the SAT PROTOCOL field says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Protocol {
    /// No data (PROTOCOL 3): SMART RETURN STATUS.
    NonData,
    /// PIO data-in (PROTOCOL 4): `count` 512-byte sectors from the device.
    PioIn,
}

/// One ATA command, as the task-file registers the drive sees. The data buffer is passed
/// separately and must be `count * 512` bytes for [`Protocol::PioIn`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AtaCmd {
    pub command: u8,
    pub features: u16,
    pub count: u16,
    /// 48-bit LBA field (only the low 28 bits for a 28-bit command).
    pub lba: u64,
    pub device: u8,
    pub protocol: Protocol,
    /// A 48-bit ("EXT") command: the EXTEND bit is set and the high register bytes are sent.
    pub ext: bool,
    /// What the command does, for error messages: "reading SMART data".
    pub what: &'static str,
}

impl AtaCmd {
    /// Bytes this command moves to the host.
    pub fn data_len(&self) -> usize {
        match self.protocol {
            Protocol::NonData => 0,
            Protocol::PioIn => usize::from(self.count) * SECTOR,
        }
    }
}

/// Where a returned register set came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub enum RegSource {
    /// Descriptor-format sense data, ATA Status Return descriptor (09h).
    Descriptor,
    /// Fixed-format sense data (SAT: registers in INFORMATION / COMMAND-SPECIFIC INFORMATION);
    /// the high (HOB) bytes are not carried, only flags saying they were nonzero.
    Fixed,
    /// The translator returned no registers (GOOD status, no sense): a command that needs
    /// them (SMART RETURN STATUS) cannot be answered through this device.
    #[default]
    None,
}

/// ATA Status register bits.
pub const STATUS_ERR: u8 = 0x01;
pub const STATUS_DF: u8 = 0x20;
pub const STATUS_DRDY: u8 = 0x40;
pub const STATUS_BSY: u8 = 0x80;
/// ATA Error register: ABRT (command aborted: unsupported, or a bad parameter).
pub const ERROR_ABRT: u8 = 0x04;

/// The ATA output registers after a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct AtaRegs {
    pub error: u8,
    pub status: u8,
    pub device: u8,
    pub count: u16,
    /// 48-bit LBA: low (7:0), mid (15:8), high (23:16), then the HOB bytes.
    pub lba: u64,
    pub source: RegSource,
}

impl AtaRegs {
    pub fn lba_mid(&self) -> u8 {
        (self.lba >> 8) as u8
    }
    pub fn lba_high(&self) -> u8 {
        (self.lba >> 16) as u8
    }
    /// The drive reports an error (ERR or DF in the status register).
    pub fn failed(&self) -> bool {
        self.status & (STATUS_ERR | STATUS_DF) != 0
    }
    /// The drive aborted the command (ERR with ABRT): not supported, or not in this state.
    pub fn aborted(&self) -> bool {
        self.status & STATUS_ERR != 0 && self.error & ERROR_ABRT != 0
    }
}

/// A malformed page or sense buffer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("{what} is {got} bytes, need at least {need}")]
    Short {
        what: &'static str,
        need: usize,
        got: usize,
    },
    #[error("{what}: checksum byte {got:#04x} leaves a sum of {sum:#04x}, not 0")]
    Checksum {
        what: &'static str,
        got: u8,
        sum: u8,
    },
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

/// The byte that makes a 512-byte structure sum to zero is its last byte (IDENTIFY word 255,
/// SMART data and thresholds). Returns the sum of all 512 bytes, 0 when the checksum holds.
pub(crate) fn sector_sum(b: &[u8]) -> u8 {
    b.iter().take(SECTOR).fold(0u8, |a, x| a.wrapping_add(*x))
}

/// A failed ATA command, or an unusable answer.
#[derive(Debug, thiserror::Error)]
pub enum AtaError {
    #[error(
        "{device}: cannot open the disk: {source} (check the device exists and is a SCSI disk)"
    )]
    Open {
        device: String,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "{device}: opening the disk was refused (permission denied); ATA health polling needs read access to the device node and CAP_SYS_RAWIO"
    )]
    OpenDenied { device: String },
    #[error(
        "{device}: {what} needs CAP_SYS_RAWIO (ATA PASS-THROUGH; run as root or grant the capability)"
    )]
    PermissionDenied { device: String, what: &'static str },
    /// The drive aborted the command (ABRT): the drive does not support it. Not an error to
    /// repeat on every poll: the caller marks the feature unsupported for this drive.
    #[error("{device}: {what}: not supported by the drive (command aborted, error {error:#04x})", error = regs.error)]
    NotSupported {
        device: String,
        what: &'static str,
        regs: AtaRegs,
    },
    /// The drive reported an error other than a plain abort.
    #[error("{device}: {what}: the drive reported an error (status {status:#04x}, error {error:#04x})", status = regs.status, error = regs.error)]
    Device {
        device: String,
        what: &'static str,
        regs: AtaRegs,
    },
    /// The SCSI layer (the SAT translator) rejected the command without ATA registers, e.g. a
    /// USB bridge or SAS HBA that does not translate ATA PASS-THROUGH.
    #[error("{device}: {what}: rejected by the SCSI layer (sense key {key:#x}, ASC/ASCQ {asc:#04x}/{ascq:#04x}){hint}", hint = if *key == 0x5 { "; this device does not pass ATA commands through" } else { "" })]
    Sense {
        device: String,
        what: &'static str,
        key: u8,
        asc: u8,
        ascq: u8,
    },
    /// SG_IO reported a host adapter or driver failure.
    #[error(
        "{device}: {what}: SG_IO failed (SCSI status {status:#04x}, host status {host:#06x}, driver status {driver:#06x})"
    )]
    Transport {
        device: String,
        what: &'static str,
        status: u8,
        host: u16,
        driver: u16,
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

impl AtaError {
    /// True when the failure is a missing capability or access right.
    pub fn is_permission(&self) -> bool {
        matches!(
            self,
            AtaError::PermissionDenied { .. } | AtaError::OpenDenied { .. }
        )
    }
    /// True when the drive (or the translator) says it does not support the command.
    pub fn is_not_supported(&self) -> bool {
        match self {
            AtaError::NotSupported { .. } => true,
            // ILLEGAL REQUEST / INVALID FIELD IN CDB or INVALID COMMAND OPERATION CODE.
            AtaError::Sense { key, asc, .. } => *key == 0x5 && (*asc == 0x24 || *asc == 0x20),
            _ => false,
        }
    }
}
