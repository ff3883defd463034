//! The SAT `ATA PASS-THROUGH (16)` CDB (opcode 85h) and the ATA registers it returns in sense
//! data. Pure functions: bytes in, bytes or structs out.
//!
//! CDB layout (SAT-3 12.2.2): byte 1 = PROTOCOL (4:1) | EXTEND (0); byte 2 = CK_COND (5) |
//! T_TYPE (4) | T_DIR (3) | BYT_BLOK (2) | T_LENGTH (1:0); bytes 3-12 the features, count and
//! LBA registers, high byte first for each pair (FEATURES 15:8, 7:0; COUNT 15:8, 7:0; LBA 31:24,
//! 7:0; LBA 39:32, 15:8; LBA 47:40, 23:16); byte 13 DEVICE, 14 COMMAND, 15 CONTROL.
//!
//! Every command is sent with CK_COND=1, so the translator returns the registers as sense data
//! even on success: descriptor format (response code 72h/73h, ATA Status Return descriptor 09h)
//! or fixed format (70h/71h: ERROR, STATUS, DEVICE, COUNT 7:0 in INFORMATION, bytes 3-6; EXTEND
//! and the "upper bytes nonzero" flags in byte 8; LBA 7:0, 15:8, 23:16 in bytes 9-11).

use super::{AtaCmd, AtaRegs, ParseError, Protocol, RegSource, STATUS_BSY};

pub const OPCODE: u8 = 0x85;
pub const CDB_LEN: usize = 16;

pub const PROTOCOL_NON_DATA: u8 = 3;
pub const PROTOCOL_PIO_IN: u8 = 4;

/// Byte 2 bits.
pub const CK_COND: u8 = 0x20;
pub const T_DIR_IN: u8 = 0x08;
pub const BYT_BLOK: u8 = 0x04;
/// T_LENGTH = 2: the transfer length is in the COUNT field.
pub const T_LENGTH_COUNT: u8 = 0x02;

/// SCSI status CHECK CONDITION (sense data follows).
pub const CHECK_CONDITION: u8 = 0x02;
/// ASC/ASCQ 00h/1Dh: ATA PASS-THROUGH INFORMATION AVAILABLE.
pub const ASCQ_ATA_INFO: u8 = 0x1d;
/// The ATA Status Return sense descriptor.
pub const DESC_ATA_STATUS: u8 = 0x09;

/// The 16-byte CDB for `cmd`: PIO data-in in 512-byte blocks counted by COUNT, or non-data;
/// CK_COND=1 always.
pub fn build(cmd: &AtaCmd) -> [u8; CDB_LEN] {
    let mut c = [0u8; CDB_LEN];
    c[0] = OPCODE;
    let (protocol, byte2) = match cmd.protocol {
        Protocol::NonData => (PROTOCOL_NON_DATA, CK_COND),
        Protocol::PioIn => (
            PROTOCOL_PIO_IN,
            CK_COND | T_DIR_IN | BYT_BLOK | T_LENGTH_COUNT,
        ),
    };
    c[1] = (protocol << 1) | u8::from(cmd.ext);
    c[2] = byte2;
    let lba = cmd.lba;
    let mut device = cmd.device;
    if cmd.ext {
        c[3] = (cmd.features >> 8) as u8;
        c[5] = (cmd.count >> 8) as u8;
        c[7] = (lba >> 24) as u8;
        c[9] = (lba >> 32) as u8;
        c[11] = (lba >> 40) as u8;
    } else {
        // A 28-bit command carries LBA 27:24 in DEVICE 3:0.
        device |= ((lba >> 24) & 0x0f) as u8;
    }
    c[4] = cmd.features as u8;
    c[6] = cmd.count as u8;
    c[8] = lba as u8;
    c[10] = (lba >> 8) as u8;
    c[12] = (lba >> 16) as u8;
    c[13] = device;
    c[14] = cmd.command;
    c
}

/// Sense data, as far as nvsoak reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sense {
    pub response_code: u8,
    pub key: u8,
    pub asc: u8,
    pub ascq: u8,
    /// The ATA registers, when the sense data carries them.
    pub regs: Option<AtaRegs>,
}

/// Parse descriptor- or fixed-format sense data.
pub fn parse_sense(b: &[u8]) -> Result<Sense, ParseError> {
    need_sense(b, 1)?;
    let code = b[0] & 0x7f;
    match code {
        0x72 | 0x73 => parse_descriptor(b, code),
        0x70 | 0x71 => parse_fixed(b, code),
        _ => Err(ParseError::Invalid {
            what: "sense data",
            detail: format!("response code {code:#04x} is neither fixed nor descriptor format"),
        }),
    }
}

fn need_sense(b: &[u8], n: usize) -> Result<(), ParseError> {
    super::need("sense data", b, n)
}

fn parse_descriptor(b: &[u8], code: u8) -> Result<Sense, ParseError> {
    need_sense(b, 8)?;
    let end = (8 + usize::from(b[7])).min(b.len());
    let mut regs = None;
    let mut o = 8;
    while o + 2 <= end {
        let len = 2 + usize::from(b[o + 1]);
        if b[o] == DESC_ATA_STATUS && len >= 14 && o + 14 <= end {
            regs = Some(ata_status_descriptor(&b[o..o + 14]));
            break;
        }
        o += len;
    }
    Ok(Sense {
        response_code: code,
        key: b[1] & 0x0f,
        asc: b[2],
        ascq: b[3],
        regs,
    })
}

/// The 14-byte ATA Status Return descriptor: EXTEND in byte 2 bit 0, then ERROR, COUNT 15:8,
/// COUNT 7:0, LBA 31:24, 7:0, 39:32, 15:8, 47:40, 23:16, DEVICE, STATUS.
fn ata_status_descriptor(d: &[u8]) -> AtaRegs {
    let extend = d[2] & 1 != 0;
    let mut count = u16::from(d[5]);
    let mut lba = u64::from(d[7]) | u64::from(d[9]) << 8 | u64::from(d[11]) << 16;
    if extend {
        count |= u16::from(d[4]) << 8;
        lba |= u64::from(d[6]) << 24 | u64::from(d[8]) << 32 | u64::from(d[10]) << 40;
    }
    AtaRegs {
        error: d[3],
        count,
        lba,
        device: d[12],
        status: d[13],
        source: RegSource::Descriptor,
    }
}

fn parse_fixed(b: &[u8], code: u8) -> Result<Sense, ParseError> {
    need_sense(b, 8)?;
    let len = (8 + usize::from(b[7])).min(b.len());
    let key = b[2] & 0x0f;
    let (asc, ascq) = if len >= 14 { (b[12], b[13]) } else { (0, 0) };
    // The registers are there when the translator says so (00h/1Dh), or when it reports the
    // drive's own error with a nonzero STATUS byte (libata: ABORTED COMMAND with the registers
    // of the failed command). A SCSI-level rejection (ILLEGAL REQUEST with an ASC) has none.
    let ata_info = asc == 0 && ascq == ASCQ_ATA_INFO;
    let scsi_reject = key == 0x5 && asc != 0;
    let regs = (len >= 12 && b[4] != 0 && (ata_info || !scsi_reject)).then(|| AtaRegs {
        error: b[3],
        status: b[4],
        device: b[5],
        count: u16::from(b[6]),
        lba: u64::from(b[9]) | u64::from(b[10]) << 8 | u64::from(b[11]) << 16,
        source: RegSource::Fixed,
    });
    Ok(Sense {
        response_code: code,
        key,
        asc,
        ascq,
        regs,
    })
}

/// What a pass-through command came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The drive completed the command; its registers (source `None` when none came back).
    Done(AtaRegs),
    /// The drive aborted it (ERR with ABRT): not supported.
    Aborted(AtaRegs),
    /// The drive failed it otherwise (ERR or DF).
    Failed(AtaRegs),
    /// The translator rejected it without ATA registers.
    Rejected { key: u8, asc: u8, ascq: u8 },
}

/// Classify a completed SG_IO: the SCSI status and the sense bytes the kernel wrote.
///
/// With ATA registers present, the ATA status decides (like smartmontools, a success status
/// overrides a bogus sense key). Without them, NO SENSE and RECOVERED ERROR are success and
/// any other sense key is a rejection.
pub fn interpret(scsi_status: u8, sense: &[u8]) -> Result<Outcome, ParseError> {
    if sense.is_empty() {
        return if scsi_status == 0 {
            Ok(Outcome::Done(AtaRegs::default()))
        } else {
            Err(ParseError::Invalid {
                what: "sense data",
                detail: format!("SCSI status {scsi_status:#04x} without sense data"),
            })
        };
    }
    let s = parse_sense(sense)?;
    Ok(match s.regs {
        Some(r) if r.status & STATUS_BSY != 0 => Outcome::Failed(r),
        Some(r) if r.aborted() => Outcome::Aborted(r),
        Some(r) if r.failed() => Outcome::Failed(r),
        Some(r) => Outcome::Done(r),
        None if s.key <= 1 => Outcome::Done(AtaRegs::default()),
        None => Outcome::Rejected {
            key: s.key,
            asc: s.asc,
            ascq: s.ascq,
        },
    })
}

/// Descriptor-format sense (72h) with an ATA Status Return descriptor for `r`, as libata
/// builds it (the replay transport answers with it; tests build fixtures with it).
pub fn descriptor_sense(key: u8, asc: u8, ascq: u8, r: &AtaRegs, extend: bool) -> Vec<u8> {
    let mut b = vec![0x72, key, asc, ascq, 0, 0, 0, 14];
    b.extend_from_slice(&[
        DESC_ATA_STATUS,
        0x0c,
        u8::from(extend),
        r.error,
        (r.count >> 8) as u8,
        r.count as u8,
        (r.lba >> 24) as u8,
        r.lba as u8,
        (r.lba >> 32) as u8,
        (r.lba >> 8) as u8,
        (r.lba >> 40) as u8,
        (r.lba >> 16) as u8,
        r.device,
        r.status,
    ]);
    b
}

/// Fixed-format sense (70h) carrying `r` as SAT-3 places it; `flags` is byte 8 (EXTEND 80h,
/// COUNT UPPER NONZERO 40h, LBA UPPER NONZERO 20h).
pub fn fixed_sense(key: u8, asc: u8, ascq: u8, r: &AtaRegs, flags: u8) -> Vec<u8> {
    let mut b = vec![0u8; 18];
    b[0] = 0x70;
    b[2] = key;
    b[3] = r.error;
    b[4] = r.status;
    b[5] = r.device;
    b[6] = r.count as u8;
    b[7] = 10;
    b[8] = flags;
    b[9] = r.lba as u8;
    b[10] = (r.lba >> 8) as u8;
    b[11] = (r.lba >> 16) as u8;
    b[12] = asc;
    b[13] = ascq;
    b
}

/// The sense a libata-like translator returns for registers `r` with CK_COND=1: RECOVERED
/// ERROR / ATA PASS-THROUGH INFORMATION AVAILABLE on success, ABORTED COMMAND on an error.
pub fn sense_for(r: &AtaRegs) -> Vec<u8> {
    if r.failed() {
        descriptor_sense(0x0b, 0, 0, r, true)
    } else {
        descriptor_sense(0x01, 0, ASCQ_ATA_INFO, r, true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ata::cmd;

    #[test]
    fn pio_in_cdb_for_smart_read_data() {
        let c = build(&cmd::smart_read_data());
        assert_eq!(
            c,
            [
                0x85, 0x08, 0x2e, 0x00, 0xd0, 0x00, 0x01, 0x00, 0x00, 0x00, 0x4f, 0x00, 0xc2, 0x00,
                0xb0, 0x00
            ]
        );
    }

    #[test]
    fn non_data_cdb_for_smart_return_status() {
        let c = build(&cmd::smart_return_status());
        assert_eq!(c[1], PROTOCOL_NON_DATA << 1, "28-bit, no EXTEND");
        assert_eq!(c[2], CK_COND, "no transfer, registers back");
        assert_eq!((c[4], c[10], c[12], c[14]), (0xda, 0x4f, 0xc2, 0xb0));
    }

    #[test]
    fn ext_cdb_places_every_register_byte() {
        let c = build(&AtaCmd {
            command: 0x2f,
            features: 0x1234,
            count: 0x5678,
            lba: 0x0a0b_0c0d_0e0f,
            device: 0x40,
            protocol: Protocol::PioIn,
            ext: true,
            what: "test",
        });
        assert_eq!(c[1], (PROTOCOL_PIO_IN << 1) | 1);
        assert_eq!(
            &c[3..15],
            &[
                0x12, 0x34, 0x56, 0x78, 0x0c, 0x0f, 0x0b, 0x0e, 0x0a, 0x0d, 0x40, 0x2f
            ]
        );
    }

    #[test]
    fn read_log_ext_puts_the_page_number_where_acs_says() {
        // LBA 7:0 log address, 15:8 page 7:0, 39:32 page 15:8.
        let c = build(&cmd::read_log_ext(0x04, 0x0107, 1, "test"));
        assert_eq!((c[8], c[10], c[9]), (0x04, 0x07, 0x01));
        assert_eq!((c[5], c[6]), (0, 1));
        assert_eq!(c[14], 0x2f);
    }

    fn regs() -> AtaRegs {
        AtaRegs {
            error: 0x00,
            status: 0x50,
            device: 0xa0,
            count: 0x0201,
            lba: 0x0605_04c2_4f03,
            source: RegSource::Descriptor,
        }
    }

    #[test]
    fn descriptor_sense_carries_all_registers() {
        let r = regs();
        let s = parse_sense(&descriptor_sense(0x01, 0x00, 0x1d, &r, true)).expect("parse");
        assert_eq!((s.response_code, s.key, s.asc, s.ascq), (0x72, 1, 0, 0x1d));
        let got = s.regs.expect("registers");
        assert_eq!(got, r);
        assert_eq!((got.lba_mid(), got.lba_high()), (0x4f, 0xc2));
        // Without EXTEND, the high bytes are not taken.
        let s = parse_sense(&descriptor_sense(0x01, 0x00, 0x1d, &r, false)).expect("parse");
        let got = s.regs.expect("registers");
        assert_eq!((got.count, got.lba), (0x01, 0xc2_4f03));
    }

    #[test]
    fn descriptor_sense_skips_other_descriptors() {
        let r = regs();
        let d = descriptor_sense(0x01, 0x00, 0x1d, &r, true);
        // An information descriptor (00h, 10 bytes) first.
        let mut b = d[..8].to_vec();
        b[7] = 12 + 14;
        b.extend_from_slice(&[0x00, 0x0a, 0x80, 0, 1, 2, 3, 4, 5, 6, 7, 8]);
        b.extend_from_slice(&d[8..]);
        assert_eq!(parse_sense(&b).expect("parse").regs, Some(r));
    }

    #[test]
    fn fixed_sense_carries_the_low_registers() {
        let r = AtaRegs {
            source: RegSource::Fixed,
            count: 0x01,
            lba: 0xc2_4f03,
            ..regs()
        };
        let s = parse_sense(&fixed_sense(0x01, 0x00, 0x1d, &r, 0x80)).expect("parse");
        assert_eq!((s.response_code, s.key, s.asc, s.ascq), (0x70, 1, 0, 0x1d));
        assert_eq!(s.regs, Some(r));
    }

    #[test]
    fn abrt_is_aborted_in_both_formats() {
        let r = AtaRegs {
            error: 0x04,
            status: 0x51,
            ..regs()
        };
        let d = descriptor_sense(0x0b, 0x00, 0x00, &r, false);
        assert!(matches!(
            interpret(CHECK_CONDITION, &d),
            Ok(Outcome::Aborted(x)) if x.error == 0x04
        ));
        let f = fixed_sense(0x0b, 0x00, 0x00, &r, 0);
        assert!(matches!(
            interpret(CHECK_CONDITION, &f),
            Ok(Outcome::Aborted(x)) if x.status == 0x51 && x.source == RegSource::Fixed
        ));
    }

    #[test]
    fn other_drive_errors_are_failures_and_success_overrides_a_bogus_key() {
        let unc = AtaRegs {
            error: 0x40,
            status: 0x51,
            ..regs()
        };
        let d = descriptor_sense(0x03, 0x11, 0x04, &unc, false);
        assert!(matches!(
            interpret(CHECK_CONDITION, &d),
            Ok(Outcome::Failed(_))
        ));
        let ok = descriptor_sense(0x0b, 0x00, 0x00, &regs(), false);
        assert!(matches!(
            interpret(CHECK_CONDITION, &ok),
            Ok(Outcome::Done(_))
        ));
    }

    #[test]
    fn scsi_rejection_without_registers() {
        // ILLEGAL REQUEST, INVALID FIELD IN CDB, fixed format, no INFORMATION.
        let mut b = vec![0u8; 18];
        b[0] = 0x70;
        b[2] = 0x05;
        b[7] = 10;
        b[12] = 0x24;
        assert_eq!(
            interpret(CHECK_CONDITION, &b).expect("parse"),
            Outcome::Rejected {
                key: 5,
                asc: 0x24,
                ascq: 0
            }
        );
    }

    #[test]
    fn good_status_without_sense_has_no_registers() {
        match interpret(0, &[]).expect("ok") {
            Outcome::Done(r) => assert_eq!(r.source, RegSource::None),
            other => panic!("unexpected {other:?}"),
        }
        assert!(interpret(CHECK_CONDITION, &[]).is_err());
        assert!(parse_sense(&[0x7f, 0, 0]).is_err());
        assert!(matches!(
            parse_sense(&[0x72, 1, 0]),
            Err(ParseError::Short { need: 8, .. })
        ));
    }
}
