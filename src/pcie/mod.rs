//! PCIe topology, link health and AER of the NVMe controllers, read from sysfs.
//!
//! Everything here is a pure function of a sysfs root given as a parameter (`/sys` in the
//! daemon, a fixture tree in tests). The health poller calls [`scan`] on every poll, so a link
//! that retrains down or a burst of AER errors shows within one poll.

pub mod endurance;
pub mod sysfs;
pub mod topology;

pub use topology::{Card, CtrlTopology, Drive, PciFunction, PcieSnapshot, Role, scan};

use crate::config::CardRating;
use crate::nvme::ratings::RatingsTable;

/// Whether `m` (a `[[health.card]]` match) names `card`: its id, `slot:NAME`, or a controller
/// (name or serial, from `serials`: controller name → serial) on it.
fn card_matches(m: &str, card: &Card, serials: &[(String, String)]) -> bool {
    m == card.id
        || card
            .slot
            .as_deref()
            .is_some_and(|s| m.strip_prefix("slot:") == Some(s))
        || card.controllers.iter().any(|c| {
            m == c
                || serials
                    .iter()
                    .any(|(n, s)| n == c && !s.is_empty() && s == m)
        })
}

/// Give each card the rating its `[[health.card]]` names (the first that matches).
pub fn rate_cards(
    snap: &mut PcieSnapshot,
    cards: &[CardRating],
    table: &RatingsTable,
    serials: &[(String, String)],
) {
    for card in snap.cards.iter_mut() {
        card.rating = cards
            .iter()
            .find(|c| card_matches(&c.matcher, card, serials))
            .and_then(|c| table.lookup(&c.rating, 0));
    }
}

/// A setup error for a `[[health.card]]` whose rating the table does not know.
pub fn unknown_card_rating(cards: &[CardRating], table: &RatingsTable) -> Option<String> {
    cards
        .iter()
        .enumerate()
        .find(|(_, c)| table.lookup(&c.rating, 0).is_none())
        .map(|(i, c)| {
            format!(
                "health.card[{i}].rating: \"{}\" matches no series of the ratings table",
                c.rating
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn card() -> Card {
        Card {
            id: "0000:02:00.0".into(),
            upstream_port: Some("0000:02:00.0".into()),
            slot: Some("2".into()),
            controllers: vec!["nvme0".into(), "nvme1".into()],
            drives: vec!["a".into(), "b".into()],
            rating: None,
        }
    }

    #[test]
    fn cards_are_rated_by_id_slot_controller_or_serial() {
        let table = RatingsTable::builtin();
        let serials = vec![("nvme1".to_string(), "CARD-M2-1".to_string())];
        for m in ["0000:02:00.0", "slot:2", "nvme0", "CARD-M2-1"] {
            let mut snap = PcieSnapshot {
                cards: vec![card()],
                ..Default::default()
            };
            let rule = CardRating {
                matcher: m.into(),
                rating: "Liqid Element AIC".into(),
            };
            rate_cards(&mut snap, &[rule], &table, &serials);
            let r = snap.cards[0]
                .rating
                .as_ref()
                .unwrap_or_else(|| panic!("{m}"));
            assert_eq!(
                (r.vendor.as_str(), r.series.as_str()),
                ("Liqid", "Element AIC")
            );
        }
        for m in ["0000:03:00.0", "slot:3", "2", "nvme2", ""] {
            let mut snap = PcieSnapshot {
                cards: vec![card()],
                ..Default::default()
            };
            let rule = CardRating {
                matcher: m.into(),
                rating: "Liqid Element AIC".into(),
            };
            rate_cards(&mut snap, &[rule], &table, &serials);
            assert!(snap.cards[0].rating.is_none(), "{m}");
        }
        let bad = [CardRating {
            matcher: "slot:2".into(),
            rating: "Nonesuch 9000".into(),
        }];
        let e = unknown_card_rating(&bad, &table).expect("error");
        assert!(
            e.contains("health.card[0].rating") && e.contains("Nonesuch 9000"),
            "{e}"
        );
        assert_eq!(unknown_card_rating(&[], &table), None);
    }
}
