//! Identify Controller (CNS 01h), Identify Namespace (CNS 00h) and the UUID list (CNS 17h).
//! Pure parsers: bytes in, structs out.

use super::{ParseError, le, need};

pub const ID_LEN: usize = 4096;

/// The Identify Controller fields nvsoak uses.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize)]
pub struct IdCtrl {
    /// PCI vendor ID @0.
    pub vid: u16,
    /// PCI subsystem vendor ID @2.
    pub ssvid: u16,
    /// Serial number @4 (20 bytes).
    pub sn: String,
    /// Model number @24 (40 bytes).
    pub mn: String,
    /// Firmware revision @64 (8 bytes).
    pub fr: String,
    /// IEEE OUI @73 (3 bytes).
    pub ieee: u32,
    /// Maximum data transfer size @77 (2^n minimum pages; 0 = no limit).
    pub mdts: u8,
    /// Controller ID @78.
    pub cntlid: u16,
    /// Version @80.
    pub ver: u32,
    /// Controller attributes @96 (bit 9: UUID list supported).
    pub ctratt: u32,
    /// Log page attributes @261 (bit 0: per-namespace SMART).
    pub lpa: u8,
    /// Error log page entries @262, 0-based.
    pub elpe: u8,
    /// Warning composite temperature threshold @266, kelvin (0 = not reported).
    pub wctemp: u16,
    /// Critical composite temperature threshold @268, kelvin (0 = not reported).
    pub cctemp: u16,
    /// Total NVM capacity @280, bytes (0 = not reported).
    pub tnvmcap: u128,
    /// Unallocated NVM capacity @296, bytes.
    pub unvmcap: u128,
    /// Number of namespaces @516.
    pub nn: u32,
    /// Volatile write cache @525 (bit 0: present).
    pub vwc: u8,
    /// NVM subsystem NQN @768 (256 bytes).
    pub subnqn: String,
}

impl IdCtrl {
    /// CTRATT bit 9: the controller supports Identify UUID list (CNS 17h).
    /// VWC bit 0: the controller has a volatile write cache (whose state Get Features 06h
    /// reads).
    pub fn write_cache_present(&self) -> bool {
        self.vwc & 1 != 0
    }

    pub fn uuid_list_supported(&self) -> bool {
        self.ctratt & (1 << 9) != 0
    }

    /// "major.minor.tertiary", or empty when the controller leaves VER 0.
    pub fn version_string(&self) -> String {
        if self.ver == 0 {
            String::new()
        } else {
            format!(
                "{}.{}.{}",
                self.ver >> 16,
                (self.ver >> 8) & 0xff,
                self.ver & 0xff
            )
        }
    }
}

pub fn parse_ctrl(b: &[u8]) -> Result<IdCtrl, ParseError> {
    need("Identify Controller data", b, 1024)?;
    Ok(IdCtrl {
        vid: le::u16(b, 0),
        ssvid: le::u16(b, 2),
        sn: le::ascii(b, 4, 20),
        mn: le::ascii(b, 24, 40),
        fr: le::ascii(b, 64, 8),
        ieee: le::uint(b, 73, 3) as u32,
        mdts: b[77],
        cntlid: le::u16(b, 78),
        ver: le::u32(b, 80),
        ctratt: le::u32(b, 96),
        lpa: b[261],
        elpe: b[262],
        wctemp: le::u16(b, 266),
        cctemp: le::u16(b, 268),
        tnvmcap: le::u128(b, 280),
        unvmcap: le::u128(b, 296),
        nn: le::u32(b, 516),
        vwc: b[525],
        subnqn: le::ascii(b, 768, 256),
    })
}

/// One LBA format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct LbaFormat {
    /// Metadata bytes per block.
    pub ms: u16,
    /// Block size = 2^lbads.
    pub lbads: u8,
    /// Relative performance, 0 best.
    pub rp: u8,
}

/// The Identify Namespace fields nvsoak uses.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize)]
pub struct IdNs {
    /// Namespace size @0, logical blocks.
    pub nsze: u64,
    /// Namespace capacity @8, logical blocks.
    pub ncap: u64,
    /// Namespace utilization @16, logical blocks.
    pub nuse: u64,
    /// Number of LBA formats @25, 0-based.
    pub nlbaf: u8,
    /// Formatted LBA size @26.
    pub flbas: u8,
    /// The LBA formats @128, `nlbaf + 1` of them (at most 64).
    pub lbaf: Vec<LbaFormat>,
}

impl IdNs {
    /// The index of the format in use: FLBAS bits 3:0, with bits 6:5 as the high bits.
    pub fn format_index(&self) -> usize {
        usize::from((self.flbas & 0xf) | (((self.flbas >> 5) & 3) << 4))
    }

    /// Logical block size in bytes (0 if the format index is out of range).
    pub fn lba_size(&self) -> u64 {
        self.lbaf
            .get(self.format_index())
            .filter(|f| f.lbads >= 9 && f.lbads < 32)
            .map(|f| 1u64 << f.lbads)
            .unwrap_or(0)
    }

    pub fn size_bytes(&self) -> u128 {
        u128::from(self.nsze) * u128::from(self.lba_size())
    }
}

pub fn parse_ns(b: &[u8]) -> Result<IdNs, ParseError> {
    need("Identify Namespace data", b, 384)?;
    let nlbaf = b[25];
    let count = (usize::from(nlbaf) + 1).min(64);
    need("Identify Namespace data", b, 128 + 4 * count)?;
    let lbaf = (0..count)
        .map(|i| {
            let o = 128 + 4 * i;
            LbaFormat {
                ms: le::u16(b, o),
                lbads: b[o + 2],
                rp: b[o + 3] & 0x3,
            }
        })
        .collect();
    Ok(IdNs {
        nsze: le::u64(b, 0),
        ncap: le::u64(b, 8),
        nuse: le::u64(b, 16),
        nlbaf,
        flbas: b[26],
        lbaf,
    })
}

/// The OCP UUID (nvme-cli `plugins/ocp/ocp-utils.c`): its index in the UUID list goes in
/// CDW14 of Get Log Page C0h.
pub const OCP_UUID: [u8; 16] = [
    0xc1, 0x94, 0xd5, 0x5b, 0xe0, 0x94, 0x47, 0x94, 0xa2, 0x1d, 0x29, 0x99, 0x8f, 0x56, 0xbe, 0x6f,
];

/// The UUIDs in an Identify UUID list (CNS 17h): 32 reserved bytes, then up to 128 entries of
/// 32 bytes (header, 15 reserved, the UUID). The list ends at the first all-zero UUID.
pub fn parse_uuid_list(b: &[u8]) -> Result<Vec<[u8; 16]>, ParseError> {
    need("Identify UUID list", b, 32)?;
    let mut out = Vec::new();
    for i in 0..128 {
        let o = 32 + 32 * i + 16;
        if o + 16 > b.len() {
            break;
        }
        let mut u = [0u8; 16];
        u.copy_from_slice(&b[o..o + 16]);
        if u == [0u8; 16] {
            break;
        }
        out.push(u);
    }
    Ok(out)
}

/// The 1-based UUID index of `uuid` in the list, as CDW14 wants it; 0 when absent.
pub fn uuid_index(list: &[[u8; 16]], uuid: &[u8; 16]) -> u8 {
    list.iter()
        .position(|u| u == uuid)
        .map(|i| (i + 1) as u8)
        .unwrap_or(0)
}

/// Hand-built pages with a distinct value in every field, shared by the tests and the fixture
/// generator.
#[cfg(test)]
pub(crate) mod testdata {
    pub fn id_ctrl() -> Vec<u8> {
        let mut b = vec![0u8; super::ID_LEN];
        b[0..2].copy_from_slice(&0x1e0fu16.to_le_bytes());
        b[2..4].copy_from_slice(&0x1b96u16.to_le_bytes());
        b[4..24].copy_from_slice(b"SN-HANDBUILT-0001   ");
        b[24..64].copy_from_slice(b"HWE62P43032M000N nvsoak handbuilt model ");
        b[64..72].copy_from_slice(b"FW1.2.3 ");
        b[73..76].copy_from_slice(&[0x38, 0x4b, 0x5c]);
        b[77] = 9;
        b[78..80].copy_from_slice(&0x0041u16.to_le_bytes());
        b[80..84].copy_from_slice(&0x0001_0400u32.to_le_bytes());
        b[96..100].copy_from_slice(&(1u32 << 9 | 1).to_le_bytes());
        b[261] = 0x0f;
        b[262] = 62;
        b[266..268].copy_from_slice(&343u16.to_le_bytes());
        b[268..270].copy_from_slice(&358u16.to_le_bytes());
        b[280..296].copy_from_slice(&3_200_631_791_616u128.to_le_bytes());
        b[296..312].copy_from_slice(&((1u128 << 64) + 5).to_le_bytes());
        b[516..520].copy_from_slice(&32u32.to_le_bytes());
        let nqn = b"nqn.2026-12.io.nvsoak:handbuilt";
        b[768..768 + nqn.len()].copy_from_slice(nqn);
        b
    }

    pub fn id_ns() -> Vec<u8> {
        let mut b = vec![0u8; super::ID_LEN];
        b[0..8].copy_from_slice(&781_404_246u64.to_le_bytes());
        b[8..16].copy_from_slice(&781_404_245u64.to_le_bytes());
        b[16..24].copy_from_slice(&12_345_678u64.to_le_bytes());
        b[25] = 1; // two formats
        b[26] = 0x01; // format 1 in use
        // LBAF0: 512 bytes, no metadata, RP 2; LBAF1: 4096 bytes, 8 bytes metadata, RP 0
        b[128..132].copy_from_slice(&[0, 0, 9, 2]);
        b[132..136].copy_from_slice(&[8, 0, 12, 0]);
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_field_of_handbuilt_id_ctrl() {
        let c = parse_ctrl(include_bytes!(
            "../../tests/fixtures/nvme/handbuilt/id-ctrl.bin"
        ))
        .expect("parse");
        assert_eq!(c.vid, 0x1e0f);
        assert_eq!(c.ssvid, 0x1b96);
        assert_eq!(c.sn, "SN-HANDBUILT-0001");
        assert_eq!(c.mn, "HWE62P43032M000N nvsoak handbuilt model");
        assert_eq!(c.fr, "FW1.2.3");
        assert_eq!(c.ieee, 0x5c4b38);
        assert_eq!(c.mdts, 9);
        assert_eq!(c.cntlid, 0x41);
        assert_eq!(c.version_string(), "1.4.0");
        assert!(c.uuid_list_supported());
        assert_eq!(c.lpa, 0x0f);
        assert_eq!(c.elpe, 62);
        assert_eq!(c.wctemp, 343);
        assert_eq!(c.cctemp, 358);
        assert_eq!(c.tnvmcap, 3_200_631_791_616);
        assert_eq!(c.unvmcap, (1u128 << 64) + 5);
        assert_eq!(c.nn, 32);
        // No volatile write cache (the QEMU fixture below has one).
        assert_eq!(c.vwc, 0);
        assert!(!c.write_cache_present());
        assert_eq!(c.subnqn, "nqn.2026-12.io.nvsoak:handbuilt");
        assert_eq!(
            include_bytes!("../../tests/fixtures/nvme/handbuilt/id-ctrl.bin").as_slice(),
            testdata::id_ctrl().as_slice(),
            "fixture drifted from the generator"
        );
    }

    #[test]
    fn parses_handbuilt_id_ns_with_format_index() {
        let n = parse_ns(include_bytes!(
            "../../tests/fixtures/nvme/handbuilt/id-ns.bin"
        ))
        .expect("parse");
        assert_eq!(n.nsze, 781_404_246);
        assert_eq!(n.ncap, 781_404_245);
        assert_eq!(n.nuse, 12_345_678);
        assert_eq!(n.nlbaf, 1);
        assert_eq!(n.lbaf.len(), 2);
        assert_eq!(n.format_index(), 1);
        assert_eq!(n.lba_size(), 4096);
        assert_eq!(n.lbaf[1].ms, 8);
        assert_eq!(n.lbaf[0].rp, 2);
        assert_eq!(n.size_bytes(), 781_404_246u128 * 4096);
    }

    #[test]
    fn parses_qemu_identify_pages() {
        // Captured from QEMU 7.2 by the VM harness; nvme-cli's reading is in the .json files.
        let c = parse_ctrl(include_bytes!(
            "../../tests/fixtures/nvme/qemu-7.2/id-ctrl.bin"
        ))
        .expect("parse");
        assert_eq!(c.vid, 6966);
        assert_eq!(c.ssvid, 6900);
        assert_eq!(c.sn, "SOAK0001");
        assert_eq!(c.mn, "QEMU NVMe Ctrl");
        assert_eq!(c.fr, "7.2.22");
        assert_eq!(c.ver, 66560);
        assert_eq!(c.ctratt, 32768);
        assert!(!c.uuid_list_supported());
        assert_eq!((c.lpa, c.elpe, c.mdts), (7, 0, 7));
        assert_eq!((c.wctemp, c.cctemp), (343, 373));
        assert_eq!(c.tnvmcap, 0);
        assert_eq!(c.nn, 256);
        // QEMU: a volatile write cache (bit 0), Flush with NSID FFFFFFFFh supported (2:1 = 11b).
        assert_eq!(c.vwc, 0x07);
        assert!(c.write_cache_present());
        assert_eq!(c.subnqn, "nqn.2019-08.org.qemu:SOAK0001");
        let n = parse_ns(include_bytes!(
            "../../tests/fixtures/nvme/qemu-7.2/id-ns.bin"
        ))
        .expect("parse");
        assert_eq!((n.nsze, n.ncap, n.nuse), (524_288, 524_288, 524_288));
        assert_eq!((n.nlbaf, n.flbas), (7, 0));
        assert_eq!(n.lbaf.len(), 8);
        assert_eq!(n.lbaf[3].ms, 64);
        assert_eq!(n.lbaf[4].lbads, 12);
        assert_eq!(n.lba_size(), 512);
        assert_eq!(n.size_bytes(), 256 << 20);
    }

    #[test]
    fn format_index_uses_high_bits() {
        let n = IdNs {
            flbas: 0b0110_0011,
            ..Default::default()
        };
        assert_eq!(n.format_index(), 0x33);
        assert_eq!(
            n.lba_size(),
            0,
            "index beyond the formats gives 0, not a panic"
        );
    }

    #[test]
    fn short_pages_are_errors() {
        assert!(matches!(
            parse_ctrl(&[0u8; 100]),
            Err(ParseError::Short { need: 1024, .. })
        ));
        assert!(parse_ns(&[0u8; 10]).is_err());
    }

    #[test]
    fn finds_ocp_uuid_index() {
        let mut b = vec![0u8; 4096];
        let other = [7u8; 16];
        b[48..64].copy_from_slice(&other);
        b[80..96].copy_from_slice(&OCP_UUID);
        let list = parse_uuid_list(&b).expect("parse");
        assert_eq!(list.len(), 2);
        assert_eq!(uuid_index(&list, &OCP_UUID), 2);
        assert_eq!(uuid_index(&list[..1], &OCP_UUID), 0);
    }
}
