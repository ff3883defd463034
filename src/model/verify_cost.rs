//! What data verification costs in memory, in one place: the scheme a target's verification
//! uses, the bytes of state that scheme keeps for a region, and the budget all verified
//! targets of a host share (`state.max_verify_memory`). `check-config` prints these figures,
//! `run` refuses a plan over the budget before any target opens, and the results file and
//! `/metrics` carry the figure of each running target. Pure: the host's memory and the
//! targets' sizes are handed in.
//!
//! Two schemes: the computed state ([`crate::model::walk`]), a few hundred bytes per run
//! segment whatever the region's size, for every plan whose writing jobs it can follow; and
//! the stored generation map ([`crate::model::genmap`]) for the rest: 2 bytes per 4 KiB unit
//! plus one recovered bit, i.e. 2.125 bytes per 4 KiB (544 MiB per TiB).

use serde::{Deserialize, Serialize};

use crate::model::fmt::fmt_bytes;
use crate::model::genmap::VERIFY_UNIT;
use crate::model::spec::VerifyMode;

/// How a target's verification knows what each unit should hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VerifyScheme {
    /// The stored generation map: a `u16` per 4 KiB unit and one recovered bit.
    StoredMap,
    /// The computed state (`model::walk`): counters per run segment.
    Computed,
}

/// What check-config and the budget count for the computed state: its legs and a margin of
/// exceptions (failed writes, units learnt after a restart), far above what a plan uses.
pub const COMPUTED_ESTIMATE: u64 = 64 * 1024;

impl VerifyScheme {
    /// The scheme a target uses; `None` when verify is off. The daemon makes the same choice
    /// (`NVSOAK_VERIFY_STATE=stored`, a test knob, aside; so does a checkpoint that holds a
    /// generation map, which keeps resuming with it).
    pub fn for_target(spec: &crate::model::spec::TargetSpec) -> Option<VerifyScheme> {
        match spec.verify {
            VerifyMode::Off => None,
            VerifyMode::Inline | VerifyMode::Pass if crate::model::walk::plan_fits(spec) => {
                Some(VerifyScheme::Computed)
            }
            VerifyMode::Inline | VerifyMode::Pass => Some(VerifyScheme::StoredMap),
        }
    }

    /// Bytes of memory the scheme keeps for a region of `region_len` bytes (a trailing
    /// partial unit is not covered, as the map does not cover it).
    pub fn state_bytes(self, region_len: u64) -> u64 {
        match self {
            VerifyScheme::StoredMap => {
                let units = region_len / VERIFY_UNIT as u64;
                // A u16 per unit, and the recovered bits in whole u64 words.
                units * 2 + units.div_ceil(64) * 8
            }
            VerifyScheme::Computed => COMPUTED_ESTIMATE,
        }
    }

    /// The scheme in words, as `check-config` and the results file name it.
    pub fn label(self) -> &'static str {
        match self {
            VerifyScheme::StoredMap => "stored map",
            VerifyScheme::Computed => "computed walk",
        }
    }

    /// The scheme as a metric label and in the results file: `stored_map`.
    pub fn as_str(self) -> &'static str {
        match self {
            VerifyScheme::StoredMap => "stored_map",
            VerifyScheme::Computed => "computed",
        }
    }

    /// What the scheme's cost grows with, in words.
    pub fn cost_in_words(self) -> &'static str {
        match self {
            VerifyScheme::StoredMap => "2.125 bytes per 4 KiB",
            VerifyScheme::Computed => "at most 64 KiB whatever the size",
        }
    }
}

/// The bytes of verification state a target keeps for a region of `region_len` bytes, and
/// its scheme: `(0, None)` when verify is off.
pub fn state_bytes(
    spec: &crate::model::spec::TargetSpec,
    region_len: u64,
) -> (u64, Option<VerifyScheme>) {
    match VerifyScheme::for_target(spec) {
        Some(s) => (s.state_bytes(region_len), Some(s)),
        None => (0, None),
    }
}

/// The verification state of a running target, as its results file records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VerifyState {
    /// The scheme (`stored_map`).
    pub scheme: VerifyScheme,
    /// Bytes of memory the state keeps.
    pub state_bytes: u64,
}

/// The config key of the budget, as refusals name it.
pub const BUDGET_KEY: &str = "state.max_verify_memory";

/// A plan whose verified targets need more verification state together than the budget.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{BUDGET_KEY}: the verified targets need {} of verification state together ({targets}), more than the budget of {budget_words}; raise {BUDGET_KEY} (a size such as \"{}\" or a larger share of the host's memory such as \"75%\"), lower the targets' region, or verify fewer targets at once",
    fmt_bytes(*total as f64),
    crate::model::units::format_size(total.next_multiple_of(1 << 30))
)]
pub struct OverBudget {
    /// Bytes the targets need together.
    pub total: u64,
    /// The budget, in bytes.
    pub budget: u64,
    /// The budget in words ([`VerifyBudget::describe`]).
    pub budget_words: String,
    /// Each target's figure: `a 8.50 GiB, b 4.25 GiB`.
    pub targets: String,
}

/// Whether `total` bytes of verification state (of the targets `each` names with their
/// figures) fit `budget` on a host with `host_memory` bytes (`None`: unknown, and a share of it
/// is then not checked).
pub fn check_budget(
    total: u64,
    each: &[(String, u64)],
    budget: VerifyBudget,
    host_memory: Option<u64>,
) -> Result<(), OverBudget> {
    match budget.bytes(host_memory) {
        Some(b) if total > b => Err(OverBudget {
            total,
            budget: b,
            budget_words: budget.describe(host_memory),
            targets: each
                .iter()
                .map(|(name, n)| format!("{name} {}", fmt_bytes(*n as f64)))
                .collect::<Vec<_>>()
                .join(", "),
        }),
        _ => Ok(()),
    }
}

/// `state.max_verify_memory`: the most memory the verification state of all targets together
/// may take, a size or a share of the host's memory.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub enum VerifyBudget {
    Bytes(u64),
    /// A fraction (0..=1) of the host's memory (`MemTotal`).
    ShareOfMemory(f64),
}

impl Default for VerifyBudget {
    /// Half of the host's memory.
    fn default() -> Self {
        VerifyBudget::ShareOfMemory(0.5)
    }
}

impl VerifyBudget {
    /// The budget in bytes, given the host's memory (`None` when it could not be read: a share
    /// of it is then no budget at all, and [`VerifyBudget::describe`] says so).
    pub fn bytes(self, host_memory: Option<u64>) -> Option<u64> {
        match self {
            VerifyBudget::Bytes(b) => Some(b),
            VerifyBudget::ShareOfMemory(f) => host_memory.map(|m| (m as f64 * f) as u64),
        }
    }

    /// The budget in words: `4.00 GiB`, `50% of this host's 7.75 GiB of memory`.
    pub fn describe(self, host_memory: Option<u64>) -> String {
        match (self, host_memory) {
            (VerifyBudget::Bytes(b), _) => fmt_bytes(b as f64),
            (VerifyBudget::ShareOfMemory(f), Some(m)) => format!(
                "{} ({}% of this host's {} of memory)",
                fmt_bytes((m as f64 * f).floor()),
                percent(f),
                fmt_bytes(m as f64)
            ),
            (VerifyBudget::ShareOfMemory(f), None) => format!(
                "{}% of this host's memory, which could not be read (/proc/meminfo), so not checked",
                percent(f)
            ),
        }
    }
}

/// `0.5` as `50`, `0.125` as `12.5`.
fn percent(f: f64) -> String {
    let p = f * 100.0;
    if p.fract() == 0.0 {
        format!("{p:.0}")
    } else {
        format!("{p}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::genmap::GenMap;

    #[test]
    fn the_stored_maps_cost_is_what_a_map_of_that_region_takes() {
        for len in [
            0u64,
            4095,
            4096,
            8192,
            64 * 4096,
            65 * 4096,
            (1 << 20) + 12_288,
            1 << 30,
            3 * (1 << 30) + 7 * 4096 + 100,
        ] {
            let m = GenMap::new(0, len, 1);
            assert_eq!(
                VerifyScheme::StoredMap.state_bytes(len),
                m.memory_bytes() as u64,
                "region of {len} bytes"
            );
        }
    }

    #[test]
    fn the_stored_map_costs_544_mib_per_tib_and_nothing_when_verify_is_off() {
        let tib = 1u64 << 40;
        assert_eq!(VerifyScheme::StoredMap.state_bytes(tib), 544 << 20);
        // 16 TB: about 7.9 GiB; 16 TiB: 8.5 GiB.
        assert_eq!(
            fmt_bytes(VerifyScheme::StoredMap.state_bytes(16 * tib) as f64),
            "8.50 GiB"
        );
        assert_eq!(VerifyScheme::StoredMap.label(), "stored map");
        assert_eq!(
            VerifyScheme::StoredMap.cost_in_words(),
            "2.125 bytes per 4 KiB"
        );
    }

    #[test]
    fn a_plan_over_the_budget_is_refused_naming_the_figure_the_budget_and_the_key() {
        let gib = 1u64 << 30;
        let each = vec![("a".to_string(), 3 * gib), ("b".to_string(), 2 * gib)];
        assert!(check_budget(5 * gib, &each, VerifyBudget::Bytes(5 * gib), None).is_ok());
        let e = check_budget(5 * gib, &each, VerifyBudget::Bytes(4 * gib), None).expect_err("over");
        let text = e.to_string();
        assert!(text.starts_with("state.max_verify_memory: "), "{text}");
        assert!(text.contains("need 5.00 GiB"), "{text}");
        assert!(text.contains("(a 3.00 GiB, b 2.00 GiB)"), "{text}");
        assert!(text.contains("budget of 4.00 GiB"), "{text}");
        assert!(text.contains("raise state.max_verify_memory"), "{text}");
        let e = check_budget(5 * gib, &each, VerifyBudget::default(), Some(8 * gib))
            .expect_err("over half of 8 GiB");
        assert!(e.to_string().contains("50% of this host's 8.00 GiB"), "{e}");
        // A share of a memory that could not be read checks nothing.
        assert!(check_budget(5 * gib, &each, VerifyBudget::default(), None).is_ok());
    }

    #[test]
    fn a_budget_is_a_size_or_a_share_of_the_hosts_memory() {
        let gib = 1u64 << 30;
        assert_eq!(VerifyBudget::Bytes(gib).bytes(None), Some(gib));
        assert_eq!(VerifyBudget::default().bytes(Some(8 * gib)), Some(4 * gib));
        assert_eq!(VerifyBudget::default().bytes(None), None);
        assert_eq!(
            VerifyBudget::default().describe(Some(8 * gib)),
            "4.00 GiB (50% of this host's 8.00 GiB of memory)"
        );
        assert!(
            VerifyBudget::ShareOfMemory(0.25)
                .describe(None)
                .contains("25% of this host's memory, which could not be read")
        );
    }
}
