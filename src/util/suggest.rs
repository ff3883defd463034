//! "Did you mean" suggestions by edit distance, for profile names, keys and enum values.

/// Levenshtein distance between `a` and `b` (by chars, case-insensitive).
pub fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.to_lowercase().chars().collect();
    let b: Vec<char> = b.to_lowercase().chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for (i, ca) in a.iter().enumerate() {
        cur[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != cb);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

/// The candidate closest to `word`, if it is close enough to be a plausible typo: within a
/// third of the word's length (at least 2, at most 4 edits), or one contains the other.
pub fn closest<'a, I>(word: &str, candidates: I) -> Option<&'a str>
where
    I: IntoIterator<Item = &'a str>,
{
    let limit = (word.chars().count() / 3).clamp(2, 4);
    let lw = word.to_lowercase();
    let mut best: Option<(usize, &'a str)> = None;
    for c in candidates {
        let d = edit_distance(word, c);
        let lc = c.to_lowercase();
        let contains = lw.len() >= 3 && (lc.contains(&lw) || lw.contains(&lc));
        if (d <= limit || contains) && best.is_none_or(|(bd, _)| d < bd) {
            best = Some((d, c));
        }
    }
    best.map(|b| b.1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distances() {
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("same", "SAME"), 0);
    }

    #[test]
    fn suggestions() {
        let names = ["4k-random-read", "4k-random-write", "64k-seq-read"];
        assert_eq!(closest("4k-randread", names), Some("4k-random-read"));
        assert_eq!(closest("4k-random-writ", names), Some("4k-random-write"));
        assert_eq!(
            closest("profle", ["profile", "profiles", "kind"]),
            Some("profile")
        );
        assert_eq!(closest("zzzzzzzz", names), None);
    }
}
