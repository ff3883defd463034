//! The Identify fields the qualification steps (`purge`, `self-test`) decide on: what the
//! controller supports (OACS, FNA, SANICAP), its extended self-test estimate (EDSTT), and the
//! namespace's current format (FLBAS, DPS), which a Format NVM keeps. Pure: bytes in, structs out.

use crate::nvme::{ParseError, le, need};

/// OACS bit 1: Format NVM supported.
pub const OACS_FORMAT: u16 = 1 << 1;
/// OACS bit 4: Device Self-test supported.
pub const OACS_SELF_TEST: u16 = 1 << 4;

/// What Identify Controller says about erasing and self-testing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct StepCaps {
    /// Optional Admin Command Support @256..257.
    pub oacs: u16,
    /// Extended Device Self-test Time @316..317, in minutes (0 = not reported).
    pub edstt_minutes: u16,
    /// Device Self-test Options @318: bit 0 = one self-test at a time for the whole subsystem.
    pub dsto: u8,
    /// Sanitize Capabilities @328..331: bit 0 crypto erase, bit 1 block erase, bit 2 overwrite.
    pub sanicap: u32,
    /// Format NVM Attributes @524: bit 0 a format applies to every namespace, bit 1 a secure
    /// erase applies to every namespace, bit 2 cryptographic erase supported.
    pub fna: u8,
}

impl StepCaps {
    pub fn format_supported(&self) -> bool {
        self.oacs & OACS_FORMAT != 0
    }
    pub fn self_test_supported(&self) -> bool {
        self.oacs & OACS_SELF_TEST != 0
    }
    pub fn crypto_format_supported(&self) -> bool {
        self.fna & 0x04 != 0
    }
    /// A Format NVM of one namespace formats all of them (FNA bit 0).
    pub fn format_all_namespaces(&self) -> bool {
        self.fna & 0x01 != 0
    }
    /// A secure erase of one namespace erases all of them (FNA bit 1).
    pub fn secure_erase_all_namespaces(&self) -> bool {
        self.fna & 0x02 != 0
    }
    pub fn sanitize_crypto(&self) -> bool {
        self.sanicap & 0x1 != 0
    }
    pub fn sanitize_block(&self) -> bool {
        self.sanicap & 0x2 != 0
    }
    pub fn sanitize_overwrite(&self) -> bool {
        self.sanicap & 0x4 != 0
    }
    pub fn sanitize_supported(&self) -> bool {
        self.sanicap & 0x7 != 0
    }
}

pub fn parse_ctrl_caps(b: &[u8]) -> Result<StepCaps, ParseError> {
    need("Identify Controller data", b, 1024)?;
    Ok(StepCaps {
        oacs: le::u16(b, 256),
        edstt_minutes: le::u16(b, 316),
        dsto: b[318],
        sanicap: le::u32(b, 328),
        fna: b[524],
    })
}

/// A namespace's current format, as Format NVM's CDW10 needs it to keep the format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct NsFormat {
    /// The LBA format index in use (FLBAS bits 3:0, with bits 6:5 as bits 5:4).
    pub lbaf: u8,
    /// Metadata transferred at the end of the LBA (FLBAS bit 4) → MSET.
    pub mset: bool,
    /// Protection information type (DPS bits 2:0) → PI.
    pub pi: u8,
    /// Protection information first in the metadata (DPS bit 3) → PIL.
    pub pil: bool,
}

pub fn parse_ns_format(b: &[u8]) -> Result<NsFormat, ParseError> {
    need("Identify Namespace data", b, 30)?;
    let flbas = b[26];
    let dps = b[29];
    Ok(NsFormat {
        lbaf: (flbas & 0x0f) | ((flbas >> 5) & 0x03) << 4,
        mset: flbas & 0x10 != 0,
        pi: dps & 0x07,
        pil: dps & 0x08 != 0,
    })
}

#[cfg(test)]
pub(crate) mod testdata {
    /// Identify Controller with every step field distinct: OACS Format + Self-test + NS mgmt
    /// (0x001a), EDSTT 37 min, DSTO 1, SANICAP crypto + overwrite (0x5), FNA crypto + secure
    /// erase applies to all (0x06).
    pub fn id_ctrl_steps() -> Vec<u8> {
        let mut b = crate::nvme::identify::testdata::id_ctrl();
        b[256..258].copy_from_slice(&0x001au16.to_le_bytes());
        b[316..318].copy_from_slice(&37u16.to_le_bytes());
        b[318] = 1;
        b[328..332].copy_from_slice(&0x6000_0005u32.to_le_bytes());
        b[524] = 0x06;
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controller_step_fields() {
        const HANDBUILT: &[u8] =
            include_bytes!("../../tests/fixtures/nvme/handbuilt/id-ctrl-steps.bin");
        assert_eq!(
            HANDBUILT,
            testdata::id_ctrl_steps().as_slice(),
            "fixture drifted"
        );
        let c = parse_ctrl_caps(HANDBUILT).expect("parse");
        assert_eq!(c.oacs, 0x001a);
        assert_eq!(c.edstt_minutes, 37);
        assert_eq!(c.dsto, 1);
        assert_eq!(c.sanicap, 0x6000_0005);
        assert_eq!(c.fna, 0x06);
        assert!(c.format_supported() && c.self_test_supported());
        assert!(c.sanitize_crypto() && !c.sanitize_block() && c.sanitize_overwrite());
        assert!(c.crypto_format_supported());
        assert!(!c.format_all_namespaces() && c.secure_erase_all_namespaces());
        // The hand-built controller without these fields supports none of it.
        let plain = parse_ctrl_caps(&crate::nvme::identify::testdata::id_ctrl()).expect("parse");
        assert!(!plain.self_test_supported() && !plain.format_supported());
        assert!(!plain.sanitize_supported());
        assert!(parse_ctrl_caps(&[0u8; 600]).is_err());
    }

    #[test]
    fn qemu_controller_formats_and_has_no_self_test() {
        let c = parse_ctrl_caps(include_bytes!(
            "../../tests/fixtures/nvme/qemu-7.2/id-ctrl.bin"
        ))
        .expect("parse");
        assert!(c.format_supported(), "{c:?}");
        assert!(!c.self_test_supported(), "{c:?}");
    }

    #[test]
    fn namespace_format_fields() {
        let mut b = vec![0u8; 4096];
        // FLBAS: index low 3, metadata at end, index high bits 6:5 = 1 → index 0x13.
        b[26] = 0x03 | 0x10 | (1 << 5);
        b[29] = 0x02 | 0x08; // PI type 2, PI first
        let f = parse_ns_format(&b).expect("parse");
        assert_eq!(
            f,
            NsFormat {
                lbaf: 0x13,
                mset: true,
                pi: 2,
                pil: true
            }
        );
        let h = parse_ns_format(&crate::nvme::identify::testdata::id_ns()).expect("parse");
        assert_eq!(
            h,
            NsFormat {
                lbaf: 1,
                ..Default::default()
            }
        );
        assert!(parse_ns_format(&[0u8; 10]).is_err());
    }
}
