//! Device Self-test log (log page 06h, 564 bytes). Pure parser.
//!
//! Header: the operation in progress (byte 0, bits 3:0: 0 none, 1 short, 2 extended, Eh vendor)
//! and its completion (byte 1, bits 6:0, percent). Then 20 result descriptors of 28 bytes at
//! byte 4, newest first.

use crate::nvme::{ParseError, le, need};

pub const LID: u8 = 0x06;
pub const LEN: usize = 564;
const DESC_AT: usize = 4;
const DESC_LEN: usize = 28;
const DESCS: usize = 20;

/// One result descriptor.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct SelfTestResult {
    /// Self-test code (byte 0, bits 7:4): 1 short, 2 extended, Eh vendor specific.
    pub code: u8,
    /// Result (byte 0, bits 3:0): 0 no error ... 7 failed segments, Fh unused entry.
    pub result: u8,
    /// The first failing segment (byte 1), when `result` is 7.
    #[serde(default)]
    pub segment: Option<u8>,
    /// Power-on hours when the test completed (bytes 4..11).
    pub power_on_hours: u64,
    /// Namespace the failure concerns (bytes 12..15), when NSIDV is set.
    #[serde(default)]
    pub nsid: Option<u32>,
    /// First failing LBA (bytes 16..23), when FLBAV is set.
    #[serde(default)]
    pub failing_lba: Option<u64>,
    /// Status code type (byte 24, bits 2:0), when SCTV is set.
    #[serde(default)]
    pub status_code_type: Option<u8>,
    /// Status code (byte 25), when SCV is set.
    #[serde(default)]
    pub status_code: Option<u8>,
}

impl SelfTestResult {
    /// Whether the test ran to its end without a failure.
    pub fn passed(&self) -> bool {
        self.result == 0
    }
    /// Whether the test ended by an abort rather than finishing (codes 1..4, 8, 9).
    pub fn aborted(&self) -> bool {
        matches!(self.result, 1..=4 | 8 | 9)
    }
    pub fn result_text(&self) -> &'static str {
        result_text(self.result)
    }
}

/// The spec's words for a result code.
pub fn result_text(r: u8) -> &'static str {
    match r {
        0 => "completed without error",
        1 => "aborted by a Device Self-test command",
        2 => "aborted by a controller level reset",
        3 => "aborted by a namespace removal",
        4 => "aborted by a Format NVM command",
        5 => "a fatal or unknown test error",
        6 => "completed with a failed segment (which is unknown)",
        7 => "completed with one or more failed segments",
        8 => "aborted for an unknown reason",
        9 => "aborted by a sanitize operation",
        0xf => "unused entry",
        _ => "reserved result code",
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SelfTestLog {
    /// The self-test in progress (0 = none).
    pub current: u8,
    /// Its completion, percent.
    pub completion_pct: u8,
    /// The used result descriptors, newest first.
    pub results: Vec<SelfTestResult>,
}

impl SelfTestLog {
    pub fn in_progress(&self) -> bool {
        self.current != 0
    }
    pub fn newest(&self) -> Option<&SelfTestResult> {
        self.results.first()
    }
}

pub fn parse(b: &[u8]) -> Result<SelfTestLog, ParseError> {
    need("Device Self-test log 06h", b, LEN)?;
    let mut results = Vec::new();
    for i in 0..DESCS {
        let d = &b[DESC_AT + i * DESC_LEN..DESC_AT + (i + 1) * DESC_LEN];
        let result = d[0] & 0x0f;
        if result == 0x0f {
            continue;
        }
        let valid = d[2];
        results.push(SelfTestResult {
            code: d[0] >> 4,
            result,
            segment: (result == 7).then_some(d[1]),
            power_on_hours: le::u64(d, 4),
            nsid: (valid & 0x1 != 0).then(|| le::u32(d, 12)),
            failing_lba: (valid & 0x2 != 0).then(|| le::u64(d, 16)),
            status_code_type: (valid & 0x4 != 0).then_some(d[24] & 0x07),
            status_code: (valid & 0x8 != 0).then_some(d[25]),
        });
    }
    Ok(SelfTestLog {
        current: b[0] & 0x0f,
        completion_pct: b[1] & 0x7f,
        results,
    })
}

#[cfg(test)]
pub(crate) mod testdata {
    /// One descriptor's bytes.
    #[allow(clippy::too_many_arguments)]
    pub fn desc(
        code: u8,
        result: u8,
        segment: u8,
        valid: u8,
        poh: u64,
        nsid: u32,
        lba: u64,
        sct: u8,
        sc: u8,
    ) -> [u8; 28] {
        let mut d = [0u8; 28];
        d[0] = (code << 4) | result;
        d[1] = segment;
        d[2] = valid;
        d[4..12].copy_from_slice(&poh.to_le_bytes());
        d[12..16].copy_from_slice(&nsid.to_le_bytes());
        d[16..24].copy_from_slice(&lba.to_le_bytes());
        d[24] = sct;
        d[25] = sc;
        d
    }

    /// A page: `current` test at `pct`, then the given descriptors, the rest unused (Fh).
    pub fn page(current: u8, pct: u8, descs: &[[u8; 28]]) -> Vec<u8> {
        let mut b = vec![0u8; super::LEN];
        b[0] = current;
        b[1] = pct;
        for i in 0..super::DESCS {
            let at = super::DESC_AT + i * super::DESC_LEN;
            match descs.get(i) {
                Some(d) => b[at..at + 28].copy_from_slice(d),
                None => b[at] = 0x0f,
            }
        }
        b
    }

    /// An extended test failed in segment 3 at LBA 0x1234_5678_9a, NSID 5, SCT 2 / SC 81h
    /// (every valid bit set), after an older short test that passed.
    pub fn failed_extended() -> Vec<u8> {
        page(
            0,
            0,
            &[
                desc(2, 7, 3, 0x0f, 0x0102_0304, 5, 0x12_3456_789a, 0xfa, 0x81),
                desc(1, 0, 9, 0x00, 4242, 77, 99, 1, 2),
            ],
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_failed_extended_test_with_every_field() {
        const HANDBUILT: &[u8] =
            include_bytes!("../../../tests/fixtures/nvme/handbuilt/self-test.bin");
        assert_eq!(
            HANDBUILT,
            testdata::failed_extended().as_slice(),
            "fixture drifted"
        );
        let l = parse(HANDBUILT).expect("parse");
        assert!(!l.in_progress());
        assert_eq!(l.results.len(), 2);
        let n = l.newest().expect("newest");
        assert_eq!(
            *n,
            SelfTestResult {
                code: 2,
                result: 7,
                segment: Some(3),
                power_on_hours: 0x0102_0304,
                nsid: Some(5),
                failing_lba: Some(0x12_3456_789a),
                // SCT is 3 bits: 0xfa & 7.
                status_code_type: Some(2),
                status_code: Some(0x81),
            }
        );
        assert!(!n.passed() && !n.aborted());
        assert_eq!(
            n.result_text(),
            "completed with one or more failed segments"
        );
        // No valid bits: the diagnostic fields are absent, whatever the bytes hold; the
        // segment is only meaningful for result 7.
        let old = &l.results[1];
        assert_eq!((old.code, old.result, old.power_on_hours), (1, 0, 4242));
        assert_eq!(
            (
                old.segment,
                old.nsid,
                old.failing_lba,
                old.status_code_type,
                old.status_code
            ),
            (None, None, None, None, None)
        );
        assert!(old.passed());
    }

    #[test]
    fn header_progress_and_partial_valid_bits() {
        let d = testdata::desc(1, 1, 0, 0x02 | 0x08, 10, 3, 0x4000, 5, 0x11);
        let l = parse(&testdata::page(0x82, 0x80 | 45, &[d])).expect("parse");
        assert_eq!((l.current, l.completion_pct), (2, 45));
        assert!(l.in_progress());
        let r = &l.results[0];
        assert!(r.aborted());
        assert_eq!(r.nsid, None);
        assert_eq!(r.failing_lba, Some(0x4000));
        assert_eq!(r.status_code_type, None);
        assert_eq!(r.status_code, Some(0x11));
        assert!(parse(&[0u8; 100]).is_err());
    }
}
