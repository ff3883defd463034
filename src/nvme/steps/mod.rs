//! The qualification steps' admin commands: Format NVM (80h) with a secure erase, Sanitize (84h),
//! Device Self-test (14h), and the flows that run them to an outcome over any
//! [`AdminTransport`]: capability checks against Identify, progress from the Self-test log (06h)
//! or the Sanitize Status log (81h), a bounded wait, and the self-test's abort on stop.
//!
//! The flows poll; they take the poll interval, the deadline and the stop check from the caller,
//! so the replay tests run them with no waiting at all.
//!
//! This file holds the commands and the log reads; `flow.rs` the waits and the two flows.

use std::time::Duration;

use super::caps::{NsFormat, StepCaps};
use super::cmd::get_log_page;
use super::log::sanitize::{self, SanitizeStatus};
use super::log::selftest::{self, SelfTestLog};
use super::{AdminCmd, AdminTransport, NvmeError};

pub const OPC_DEVICE_SELF_TEST: u8 = 0x14;
pub const OPC_FORMAT_NVM: u8 = 0x80;
pub const OPC_SANITIZE: u8 = 0x84;

pub const WHAT_SELF_TEST_LOG: &str = "reading the Device Self-test log";
pub const WHAT_SANITIZE_LOG: &str = "reading the Sanitize Status log";
pub const WHAT_START_SELF_TEST: &str = "starting a device self-test";
pub const WHAT_ABORT_SELF_TEST: &str = "aborting the device self-test";
pub const WHAT_FORMAT: &str = "formatting the namespace (Format NVM)";
pub const WHAT_SANITIZE: &str = "starting a sanitize";

/// Short or extended device self-test (the STC values 1h and 2h).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SelfTestKind {
    Short,
    Extended,
}

impl SelfTestKind {
    pub fn stc(self) -> u8 {
        match self {
            SelfTestKind::Short => 1,
            SelfTestKind::Extended => 2,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            SelfTestKind::Short => "short",
            SelfTestKind::Extended => "extended",
        }
    }
    /// How long the controller may take: 2 minutes for a short test (the spec's limit), the
    /// controller's EDSTT for an extended one (`None` when it reports none).
    pub fn expected(self, caps: &StepCaps) -> Option<Duration> {
        match self {
            SelfTestKind::Short => Some(Duration::from_secs(120)),
            SelfTestKind::Extended if caps.edstt_minutes > 0 => {
                Some(Duration::from_secs(u64::from(caps.edstt_minutes) * 60))
            }
            SelfTestKind::Extended => None,
        }
    }
}

/// How a purge erases.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PurgeMethod {
    /// Format NVM, SES 1: user data erase.
    FormatUserData,
    /// Format NVM, SES 2: cryptographic erase.
    FormatCrypto,
    /// Sanitize, SANACT 2: block erase.
    SanitizeBlock,
    /// Sanitize, SANACT 4: crypto erase.
    SanitizeCrypto,
    /// Sanitize, SANACT 3: overwrite (one pass of zeroes).
    SanitizeOverwrite,
}

impl PurgeMethod {
    pub const ALL: [(&'static str, PurgeMethod); 5] = [
        ("format-user-data", PurgeMethod::FormatUserData),
        ("format-crypto", PurgeMethod::FormatCrypto),
        ("sanitize-block", PurgeMethod::SanitizeBlock),
        ("sanitize-crypto", PurgeMethod::SanitizeCrypto),
        ("sanitize-overwrite", PurgeMethod::SanitizeOverwrite),
    ];
    pub fn name(self) -> &'static str {
        PurgeMethod::ALL
            .iter()
            .find(|(_, m)| *m == self)
            .map_or("?", |(n, _)| n)
    }
    pub fn is_sanitize(self) -> bool {
        matches!(
            self,
            PurgeMethod::SanitizeBlock
                | PurgeMethod::SanitizeCrypto
                | PurgeMethod::SanitizeOverwrite
        )
    }
    /// Why the controller cannot do this, from Identify; `None` when it can.
    pub fn unsupported(self, caps: &StepCaps) -> Option<String> {
        let why = match self {
            PurgeMethod::FormatUserData | PurgeMethod::FormatCrypto if !caps.format_supported() => {
                format!(
                    "the controller does not support Format NVM (OACS {:#06x}, bit 1 clear)",
                    caps.oacs
                )
            }
            PurgeMethod::FormatCrypto if !caps.crypto_format_supported() => format!(
                "the controller does not support a cryptographic erase by Format NVM (FNA {:#04x}, bit 2 clear)",
                caps.fna
            ),
            PurgeMethod::SanitizeBlock if !caps.sanitize_block() => format!(
                "the controller does not support a sanitize block erase (SANICAP {:#010x}, bit 1 clear)",
                caps.sanicap
            ),
            PurgeMethod::SanitizeCrypto if !caps.sanitize_crypto() => format!(
                "the controller does not support a sanitize crypto erase (SANICAP {:#010x}, bit 0 clear)",
                caps.sanicap
            ),
            PurgeMethod::SanitizeOverwrite if !caps.sanitize_overwrite() => format!(
                "the controller does not support a sanitize overwrite (SANICAP {:#010x}, bit 2 clear)",
                caps.sanicap
            ),
            _ => return None,
        };
        Some(why)
    }
    /// Whether the erase reaches every namespace of the controller (a sanitize always does:
    /// it acts on the whole NVM subsystem; a format when FNA says so).
    pub fn erases_every_namespace(self, caps: &StepCaps) -> bool {
        match self {
            PurgeMethod::FormatUserData | PurgeMethod::FormatCrypto => {
                caps.format_all_namespaces() || caps.secure_erase_all_namespaces()
            }
            _ => true,
        }
    }
}

/// Device Self-test: CDW10 STC [3:0].
pub fn self_test_cmd(stc: u8, nsid: u32) -> AdminCmd {
    AdminCmd {
        nsid,
        cdw10: u32::from(stc & 0x0f),
        ..AdminCmd::new(
            OPC_DEVICE_SELF_TEST,
            if stc == 0x0f {
                WHAT_ABORT_SELF_TEST
            } else {
                WHAT_START_SELF_TEST
            },
        )
    }
}

pub fn self_test_log_cmd() -> AdminCmd {
    get_log_page(
        selftest::LID,
        super::log::NSID_ALL,
        selftest::LEN,
        0,
        0,
        WHAT_SELF_TEST_LOG,
    )
}

pub fn sanitize_log_cmd() -> AdminCmd {
    get_log_page(
        sanitize::LID,
        super::log::NSID_ALL,
        sanitize::LEN,
        0,
        0,
        WHAT_SANITIZE_LOG,
    )
}

/// Format NVM of `nsid`, keeping its format: CDW10 LBAF [3:0], MSET [4], PI [7:5], PIL [8],
/// SES [11:9], LBAFU [13:12].
pub fn format_cmd(nsid: u32, f: &NsFormat, ses: u8) -> AdminCmd {
    let cdw10 = u32::from(f.lbaf & 0x0f)
        | (u32::from(f.mset) << 4)
        | (u32::from(f.pi & 0x7) << 5)
        | (u32::from(f.pil) << 8)
        | (u32::from(ses & 0x7) << 9)
        | (u32::from((f.lbaf >> 4) & 0x3) << 12);
    AdminCmd {
        nsid,
        cdw10,
        ..AdminCmd::new(OPC_FORMAT_NVM, WHAT_FORMAT)
    }
}

/// Sanitize: CDW10 SANACT [2:0], AUSE [3] = 0, OWPASS [7:4] = 1 for an overwrite; CDW11 the
/// overwrite pattern (zeroes).
pub fn sanitize_cmd(method: PurgeMethod) -> AdminCmd {
    let cdw10 = match method {
        PurgeMethod::SanitizeBlock => 2,
        PurgeMethod::SanitizeOverwrite => 3 | (1 << 4),
        _ => 4,
    };
    AdminCmd {
        cdw10,
        ..AdminCmd::new(OPC_SANITIZE, WHAT_SANITIZE)
    }
}

fn parsed<T>(
    t: &dyn AdminTransport,
    what: &'static str,
    r: Result<T, super::ParseError>,
) -> Result<T, NvmeError> {
    r.map_err(|source| NvmeError::Parse {
        device: t.device(),
        what,
        source,
    })
}

pub fn read_self_test_log(t: &dyn AdminTransport) -> Result<SelfTestLog, NvmeError> {
    let mut buf = vec![0u8; selftest::LEN];
    t.admin(&self_test_log_cmd(), &mut buf)?;
    parsed(t, WHAT_SELF_TEST_LOG, selftest::parse(&buf))
}

pub fn read_sanitize_status(t: &dyn AdminTransport) -> Result<SanitizeStatus, NvmeError> {
    let mut buf = vec![0u8; sanitize::LEN];
    t.admin(&sanitize_log_cmd(), &mut buf)?;
    parsed(t, WHAT_SANITIZE_LOG, sanitize::parse(&buf))
}

mod flow;
#[cfg(test)]
mod tests;

pub use flow::{PurgeEnd, SelfTestEnd, Waiting, run_purge, run_self_test};
