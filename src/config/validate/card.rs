//! `[[health.card]]`: which cards a ratings-table series rates as a whole (the Liqid Element
//! AIC's figures belong to the card, not to any one of its controllers).

use super::super::CardRating;
use super::super::raw::RawCard;
use super::{R, bad, join};

pub(super) fn cards(raw: &[RawCard]) -> R<Vec<CardRating>> {
    let mut out: Vec<CardRating> = Vec::new();
    for (i, c) in raw.iter().enumerate() {
        let key = format!("health.card[{i}]");
        let k = |s: &str| join(&key, s);
        let matcher = match c.matcher.as_deref().map(str::trim) {
            Some(m) if !m.is_empty() => m.to_string(),
            Some(_) => return bad(k("match"), "empty: name the card"),
            None => {
                return bad(
                    k("match"),
                    "missing: the card's switch upstream port address (0000:02:00.0), slot:NAME, or a controller name or serial on it",
                );
            }
        };
        if out.iter().any(|o| o.matcher == matcher) {
            return bad(
                k("match"),
                format!("\"{matcher}\" is already matched by an earlier health.card"),
            );
        }
        let rating = match c.rating.as_deref().map(str::trim) {
            Some(r) if !r.is_empty() => r.to_string(),
            _ => {
                return bad(
                    k("rating"),
                    "missing: a series of the ratings table, as a model string (\"Liqid Element AIC\")",
                );
            }
        };
        out.push(CardRating { matcher, rating });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use crate::config::{CardRating, load_str};

    fn err(toml: &str) -> String {
        match load_str(toml, "t.toml", Vec::new()) {
            Ok(_) => panic!("accepted:\n{toml}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn card_ratings_parse_and_bad_ones_name_their_key() {
        let s = load_str(
            "[[health.card]]\nmatch = \"0000:02:00.0\"\nrating = \"Liqid Element AIC\"\n\
             [[health.card]]\nmatch = \"slot:2\"\nrating = \"Element AIC\"\n",
            "t.toml",
            Vec::new(),
        )
        .expect("valid");
        assert_eq!(
            s.health.cards,
            vec![
                CardRating {
                    matcher: "0000:02:00.0".into(),
                    rating: "Liqid Element AIC".into()
                },
                CardRating {
                    matcher: "slot:2".into(),
                    rating: "Element AIC".into()
                },
            ]
        );
        let e = err("[[health.card]]\nrating = \"Liqid Element AIC\"\n");
        assert!(
            e.contains("health.card[0].match") && e.contains("missing"),
            "{e}"
        );
        let e = err("[[health.card]]\nmatch = \" \"\nrating = \"x\"\n");
        assert!(
            e.contains("health.card[0].match") && e.contains("empty"),
            "{e}"
        );
        let e = err("[[health.card]]\nmatch = \"slot:2\"\n");
        assert!(
            e.contains("health.card[0].rating") && e.contains("missing"),
            "{e}"
        );
        let e = err("[[health.card]]\nmatch = \"slot:2\"\nrating = \"a\"\n\
             [[health.card]]\nmatch = \"slot:2\"\nrating = \"b\"\n");
        assert!(
            e.contains("health.card[1].match") && e.contains("already"),
            "{e}"
        );
        let e = err("[[health.card]]\nmatch = \"slot:2\"\nrating = \"a\"\nrated = 1\n");
        assert!(e.contains("rated"), "{e}");
    }
}
