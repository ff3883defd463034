//! PCIe topology, link health and AER of the NVMe controllers, read from sysfs.
//!
//! Everything here is a pure function of a sysfs root given as a parameter (`/sys` in the
//! daemon, a fixture tree in tests). The health poller calls [`scan`] on every poll, so a link
//! that retrains down or a burst of AER errors shows within one poll.

pub mod sysfs;
pub mod topology;

pub use topology::{Card, CtrlTopology, Drive, PciFunction, PcieSnapshot, Role, scan};

use crate::config::CardRating;
use crate::model::results::SpanCard;
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

/// Whether a PCIe link on the paths of `controller`'s drive (every controller of its NVMe
/// subsystem) was seen degraded at or after `since` (Unix time): the "link degraded during the
/// plan" figure of a target on that controller. `None` when the controller's path is unknown or
/// sysfs gives no link figures to judge.
pub fn link_degraded_during(p: &PcieSnapshot, controller: &str, since: f64) -> Option<bool> {
    let c = p.controller(controller)?;
    let ctrls = p
        .drive(&c.drive)
        .map(|d| d.controllers.clone())
        .unwrap_or_else(|| vec![controller.to_string()]);
    p.degraded_since(&ctrls, since)
}

/// A spanning target's card (`TargetResults::card`): the rated card whose controllers hold every one of `controllers`, if any.
pub fn span_card(pcie: &PcieSnapshot, controllers: &[Option<String>]) -> Option<SpanCard> {
    let card = pcie.cards.iter().find(|c| {
        !controllers.is_empty()
            && controllers
                .iter()
                .all(|m| m.as_ref().is_some_and(|m| c.controllers.contains(m)))
    })?;
    let r = card.rating.as_ref()?;
    Some(SpanCard {
        card: card.id.clone(),
        rating: format!("{} {}", r.vendor, r.series),
        random_read_iops: r.perf.random_read_iops,
        random_write_iops: r.perf.random_write_iops,
        seq_read_bytes_per_second: r.perf.seq_read_bytes_per_second,
        seq_write_bytes_per_second: r.perf.seq_write_bytes_per_second,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_degraded_during_covers_every_controller_of_the_drive() {
        use topology::fake::*;
        let d = tempfile::tempdir().expect("tempdir");
        let r = d.path();
        // A dual-port drive: nvme0 on a healthy link, nvme1 on one trained down to x2.
        link(
            &controller(r, "nvme0", &["0000:00:04.0", "0000:06:00.0"]),
            "8.0 GT/s",
            "8.0 GT/s",
            4,
            4,
        );
        link(
            &controller(r, "nvme1", &["0000:00:05.0", "0000:07:00.0"]),
            "8.0 GT/s",
            "8.0 GT/s",
            2,
            4,
        );
        link(
            &controller(r, "nvme2", &["0000:00:06.0", "0000:08:00.0"]),
            "8.0 GT/s",
            "8.0 GT/s",
            4,
            4,
        );
        controller(r, "nvme3", &["0000:00:07.0", "0000:09:00.0"]);
        subsystem(r, "nvme-subsys0", "nqn.dual", &["nvme0", "nvme1"]);
        let names: Vec<String> = (0..4).map(|i| format!("nvme{i}")).collect();
        let health = crate::health::HealthSnapshot {
            pcie: scan(r, &names, None, 500.0),
            ..Default::default()
        };
        assert_eq!(
            link_degraded_during(&health.pcie, "nvme0", 400.0),
            Some(true)
        );
        assert_eq!(
            link_degraded_during(&health.pcie, "nvme0", 600.0),
            Some(false)
        );
        assert_eq!(
            link_degraded_during(&health.pcie, "nvme2", 400.0),
            Some(false)
        );
        assert_eq!(
            link_degraded_during(&health.pcie, "nvme3", 400.0),
            None,
            "no link figures"
        );
        assert_eq!(
            link_degraded_during(&health.pcie, "nvme9", 400.0),
            None,
            "unknown"
        );
    }

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

    #[test]
    fn a_span_is_compared_with_the_rated_card_holding_all_its_members() {
        let table = crate::nvme::ratings::RatingsTable::builtin();
        let card = |id: &str, ctrls: &[&str], rated: bool| crate::pcie::Card {
            id: id.into(),
            upstream_port: Some(id.into()),
            slot: None,
            controllers: ctrls.iter().map(|c| c.to_string()).collect(),
            drives: ctrls.iter().map(|c| c.to_string()).collect(),
            rating: rated
                .then(|| table.lookup("Liqid Element AIC", 0))
                .flatten(),
        };
        let pcie = crate::pcie::PcieSnapshot {
            cards: vec![
                card("0000:02:00.0", &["nvme0", "nvme1"], true),
                card("0000:05:00.0", &["nvme2", "nvme3"], false),
            ],
            ..Default::default()
        };
        let some =
            |v: &[&str]| -> Vec<Option<String>> { v.iter().map(|c| Some(c.to_string())).collect() };
        let got = span_card(&pcie, &some(&["nvme1", "nvme0"])).expect("the rated card");
        assert_eq!(got.card, "0000:02:00.0");
        assert_eq!(got.rating, "Liqid Element AIC");
        assert_eq!(got.random_read_iops, Some(1_250_000.0));
        assert_eq!(got.random_write_iops, Some(900_000.0));
        // Members on two cards, a card nobody rated, a member of unknown controller: none.
        assert_eq!(span_card(&pcie, &some(&["nvme0", "nvme2"])), None);
        assert_eq!(span_card(&pcie, &some(&["nvme2", "nvme3"])), None);
        assert_eq!(span_card(&pcie, &[Some("nvme0".into()), None]), None);
        assert_eq!(span_card(&pcie, &[]), None);
    }
}
