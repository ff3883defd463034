//! Pure readers of the PCI sysfs attributes nvsoak uses: link speed and width, AER counters,
//! PCI addresses. No I/O beyond reading the files named; every parser takes text.

use std::path::Path;

/// A PCI address `DDDD:BB:DD.F`, as sysfs names devices.
pub fn is_pci_address(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 12
        && b[4] == b':'
        && b[7] == b':'
        && b[10] == b'.'
        && b.iter()
            .enumerate()
            .all(|(i, c)| matches!(i, 4 | 7 | 10) || c.is_ascii_hexdigit())
}

/// The slot form of an address (`DDDD:BB:DD`, function dropped), as `slots/*/address` holds.
pub fn slot_form(address: &str) -> &str {
    address.rsplit_once('.').map_or(address, |(h, _)| h)
}

/// The number at the start of a link speed string, in GT/s: `8.0 GT/s PCIe` → 8.0,
/// `2.5 GT/s` → 2.5. `Unknown`, an empty string or a zero give `None` (the format varies
/// between kernels, so only the number is read).
pub fn parse_speed_gts(s: &str) -> Option<f64> {
    let t = s.trim();
    let end = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let v: f64 = t[..end].parse().ok()?;
    (v.is_finite() && v > 0.0).then_some(v)
}

/// A link width in lanes (`4`); `0` (sysfs's "unknown") or anything unparsable give `None`.
pub fn parse_width(s: &str) -> Option<u32> {
    let v: u32 = s.trim().trim_start_matches('x').parse().ok()?;
    (v > 0).then_some(v)
}

/// One AER counter file (`aer_dev_correctable`, `aer_dev_nonfatal`, `aer_dev_fatal`): lines of
/// `NAME COUNT`. The kernel's `TOTAL_ERR_*` sum lines are left out (sum the names instead);
/// lines that do not parse are skipped.
pub fn parse_aer(text: &str) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    for line in text.lines() {
        let mut it = line.split_whitespace();
        let (Some(name), Some(count), None) = (it.next(), it.next(), it.next()) else {
            continue;
        };
        if name.starts_with("TOTAL_") {
            continue;
        }
        if let Ok(n) = count.parse::<u64>() {
            out.push((name.to_string(), n));
        }
    }
    out
}

/// Current and maximum link figures of one PCI function, as sysfs shows them.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LinkFigures {
    /// GT/s.
    pub speed_gts: Option<f64>,
    pub max_speed_gts: Option<f64>,
    pub width: Option<u32>,
    pub max_width: Option<u32>,
}

impl LinkFigures {
    pub fn read(dir: &Path) -> Self {
        let attr = |n: &str| std::fs::read_to_string(dir.join(n)).ok();
        LinkFigures {
            speed_gts: attr("current_link_speed").and_then(|s| parse_speed_gts(&s)),
            max_speed_gts: attr("max_link_speed").and_then(|s| parse_speed_gts(&s)),
            width: attr("current_link_width").and_then(|s| parse_width(&s)),
            max_width: attr("max_link_width").and_then(|s| parse_width(&s)),
        }
    }
}

/// AER counters of one PCI function by severity, each `(error name, count)`.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct AerCounts {
    pub correctable: Vec<(String, u64)>,
    pub nonfatal: Vec<(String, u64)>,
    pub fatal: Vec<(String, u64)>,
}

impl AerCounts {
    /// `None` when the function has no AER attributes (no AER capability, or no kernel support).
    pub fn read(dir: &Path) -> Option<Self> {
        let f = |n: &str| std::fs::read_to_string(dir.join(n)).ok();
        let (c, n, fa) = (
            f("aer_dev_correctable"),
            f("aer_dev_nonfatal"),
            f("aer_dev_fatal"),
        );
        if c.is_none() && n.is_none() && fa.is_none() {
            return None;
        }
        Some(AerCounts {
            correctable: c.as_deref().map(parse_aer).unwrap_or_default(),
            nonfatal: n.as_deref().map(parse_aer).unwrap_or_default(),
            fatal: fa.as_deref().map(parse_aer).unwrap_or_default(),
        })
    }

    /// The three severities with their metric label.
    pub fn by_severity(&self) -> [(&'static str, &[(String, u64)]); 3] {
        [
            ("correctable", &self.correctable),
            ("nonfatal", &self.nonfatal),
            ("fatal", &self.fatal),
        ]
    }
}

/// Whether the link between `upper` (a root or switch downstream port) and `lower` (the
/// device below it) runs below what both ends support: a current speed or width under the
/// smaller of the two maxima. An end reporting no maximum (`Unknown`, width 0) is left out;
/// `None` when neither end says what it supports or the current figures are unknown (link
/// down).
pub fn degraded(upper: &LinkFigures, lower: &LinkFigures) -> Option<bool> {
    fn min_known<T: PartialOrd + Copy>(a: Option<T>, b: Option<T>) -> Option<T> {
        match (a, b) {
            (Some(x), Some(y)) => Some(if y < x { y } else { x }),
            (x, None) => x,
            (None, y) => y,
        }
    }
    let cap_speed = min_known(upper.max_speed_gts, lower.max_speed_gts);
    let cap_width = min_known(upper.max_width, lower.max_width);
    let speed = lower.speed_gts.or(upper.speed_gts);
    let width = lower.width.or(upper.width);
    let slow = match (speed, cap_speed) {
        // Speeds are decimal strings like 2.5 and 8.0: compare with a margin.
        (Some(s), Some(c)) => Some(s + 0.01 < c),
        _ => None,
    };
    let narrow = match (width, cap_width) {
        (Some(w), Some(c)) => Some(w < c),
        _ => None,
    };
    match (slow, narrow) {
        (None, None) => None,
        (a, b) => Some(a.unwrap_or(false) || b.unwrap_or(false)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn speed_strings_of_several_kernels() {
        assert_eq!(parse_speed_gts("8.0 GT/s PCIe\n"), Some(8.0));
        assert_eq!(parse_speed_gts("2.5 GT/s"), Some(2.5));
        assert_eq!(parse_speed_gts("16 GT/s"), Some(16.0));
        assert_eq!(parse_speed_gts("32.0 GT/s PCIe"), Some(32.0));
        assert_eq!(parse_speed_gts("5.0GT/s"), Some(5.0));
        assert_eq!(parse_speed_gts("Unknown"), None);
        assert_eq!(parse_speed_gts("Unknown speed"), None);
        assert_eq!(parse_speed_gts(""), None);
        assert_eq!(parse_speed_gts("0 GT/s"), None);
        assert_eq!(parse_speed_gts("1.2.3 GT/s"), None);
    }

    #[test]
    fn widths() {
        assert_eq!(parse_width("4\n"), Some(4));
        assert_eq!(parse_width("x16"), Some(16));
        assert_eq!(parse_width("0"), None);
        assert_eq!(parse_width("wide"), None);
    }

    #[test]
    fn aer_lines_skip_totals_and_junk() {
        let text = "RxErr 3\nBadTLP 5\nBadDLLP 7\nRollover 0\nTimeout 11\nNonFatalErr 13\n\
                    CorrIntErr 17\nHeaderOF 19\nTOTAL_ERR_COR 75\ngarbage\nBad x\nA 1 2\n";
        let v = parse_aer(text);
        let want: Vec<(String, u64)> = [
            ("RxErr", 3),
            ("BadTLP", 5),
            ("BadDLLP", 7),
            ("Rollover", 0),
            ("Timeout", 11),
            ("NonFatalErr", 13),
            ("CorrIntErr", 17),
            ("HeaderOF", 19),
        ]
        .iter()
        .map(|(n, c)| (n.to_string(), *c))
        .collect();
        assert_eq!(v, want);
    }

    #[test]
    fn addresses() {
        assert!(is_pci_address("0000:02:00.0"));
        assert!(!is_pci_address("10000:02:00.0"));
        assert!(!is_pci_address("pci0000:00"));
        assert!(!is_pci_address("0000:0g:00.0"));
        assert_eq!(slot_form("0000:02:00.0"), "0000:02:00");
    }

    fn lf(s: f64, ms: Option<f64>, w: u32, mw: Option<u32>) -> LinkFigures {
        LinkFigures {
            speed_gts: Some(s),
            max_speed_gts: ms,
            width: Some(w),
            max_width: mw,
        }
    }

    #[test]
    fn degraded_needs_both_ends_to_support_more() {
        // Gen3 x4 both ends, running Gen3 x4: fine.
        let rp = lf(8.0, Some(8.0), 4, Some(4));
        assert_eq!(degraded(&rp, &lf(8.0, Some(8.0), 4, Some(4))), Some(false));
        // Trained down to x2.
        assert_eq!(degraded(&rp, &lf(8.0, Some(8.0), 2, Some(4))), Some(true));
        // Trained down to 2.5 GT/s.
        assert_eq!(degraded(&rp, &lf(2.5, Some(8.0), 4, Some(4))), Some(true));
        // A Gen4 x16 port with a Gen3 x4 drive at Gen3 x4: what both support, not degraded.
        let wide = lf(8.0, Some(16.0), 4, Some(16));
        assert_eq!(
            degraded(&wide, &lf(8.0, Some(8.0), 4, Some(4))),
            Some(false)
        );
        // An upper end that says nothing (a QEMU switch downstream port): the lower decides.
        let unknown = LinkFigures {
            speed_gts: Some(2.5),
            ..Default::default()
        };
        assert_eq!(
            degraded(&unknown, &lf(2.5, Some(2.5), 1, Some(1))),
            Some(false)
        );
        assert_eq!(
            degraded(&unknown, &lf(2.5, Some(8.0), 1, Some(1))),
            Some(true)
        );
        // Nothing known: no verdict.
        assert_eq!(
            degraded(&LinkFigures::default(), &LinkFigures::default()),
            None
        );
    }
}
