//! HTTP basic auth against bcrypt hashes, with a bounded cache of verified credentials so a
//! scrape every few seconds does not pay bcrypt's cost (tens of milliseconds) each time.
//!
//! The cache holds only successes, keyed by SHA-256 of user, password and stored hash, so a
//! wrong password is always checked by bcrypt and a changed hash invalidates the entry.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use base64::Engine as _;
use sha2::{Digest, Sha256};

/// At most this many verified credentials are cached; the cache is cleared when full.
pub const CACHE_CAPACITY: usize = 1024;

/// A bcrypt hash of a random password, checked for unknown users so that the response time does
/// not tell whether a user exists.
const DUMMY_HASH: &str = "$2y$10$QOauhQNbBCuQDKes6eFzPeMqBSjb7Mr5DUmpZ/VcEd00UAV/LDeSi";

/// Basic auth users (name → bcrypt hash) and the verified-credentials cache.
pub struct BasicAuth {
    users: HashMap<String, String>,
    cache: Mutex<HashSet<[u8; 32]>>,
}

/// The outcome of checking an `Authorization` header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Allowed,
    /// Missing, malformed, unknown user or wrong password.
    Denied,
}

impl BasicAuth {
    pub fn new(users: impl IntoIterator<Item = (String, String)>) -> Self {
        BasicAuth {
            users: users.into_iter().collect(),
            cache: Mutex::new(HashSet::new()),
        }
    }

    pub fn user_count(&self) -> usize {
        self.users.len()
    }

    /// Number of cached verified credentials.
    pub fn cached(&self) -> usize {
        self.cache.lock().map(|c| c.len()).unwrap_or(0)
    }

    fn key(user: &str, password: &str, hash: &str) -> [u8; 32] {
        let mut h = Sha256::new();
        for part in [user, password, hash] {
            h.update((part.len() as u64).to_le_bytes());
            h.update(part.as_bytes());
        }
        h.finalize().into()
    }

    /// Parses `Basic base64(user:password)`.
    pub fn parse_header(value: &[u8]) -> Option<(String, String)> {
        let s = std::str::from_utf8(value).ok()?.trim();
        let (scheme, rest) = s.split_once(' ')?;
        if !scheme.eq_ignore_ascii_case("basic") {
            return None;
        }
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(rest.trim())
            .ok()?;
        let decoded = String::from_utf8(decoded).ok()?;
        let (u, p) = decoded.split_once(':')?;
        Some((u.to_string(), p.to_string()))
    }

    /// Checks credentials from the cache only; `None` means bcrypt must decide.
    pub fn check_cached(&self, user: &str, password: &str) -> Option<Verdict> {
        let hash = self.users.get(user)?;
        let key = Self::key(user, password, hash);
        let hit = self.cache.lock().map(|c| c.contains(&key)).unwrap_or(false);
        hit.then_some(Verdict::Allowed)
    }

    /// Checks credentials, using the cache and bcrypt (slow: call from a blocking thread).
    pub fn check(&self, user: &str, password: &str) -> Verdict {
        if let Some(v) = self.check_cached(user, password) {
            return v;
        }
        let Some(hash) = self.users.get(user) else {
            let _ = bcrypt::verify(password, DUMMY_HASH);
            return Verdict::Denied;
        };
        if bcrypt::verify(password, hash).unwrap_or(false) {
            if let Ok(mut c) = self.cache.lock() {
                if c.len() >= CACHE_CAPACITY {
                    c.clear();
                }
                c.insert(Self::key(user, password, hash));
            }
            Verdict::Allowed
        } else {
            Verdict::Denied
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_basic_header() {
        let v = format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode("alice:pa:ss")
        );
        assert_eq!(
            BasicAuth::parse_header(v.as_bytes()),
            Some(("alice".into(), "pa:ss".into()))
        );
        assert_eq!(BasicAuth::parse_header(b"Bearer abc"), None);
        assert_eq!(BasicAuth::parse_header(b"Basic !!!"), None);
        assert_eq!(BasicAuth::parse_header(b"Basic"), None);
    }

    #[test]
    fn verifies_and_caches_only_successes() {
        let hash = bcrypt::hash("secret", 4).expect("hashing");
        let auth = BasicAuth::new([("alice".to_string(), hash)]);
        assert_eq!(auth.check_cached("alice", "secret"), None);
        assert_eq!(auth.check("alice", "wrong"), Verdict::Denied);
        assert_eq!(auth.cached(), 0);
        assert_eq!(auth.check("bob", "secret"), Verdict::Denied);
        assert_eq!(auth.check("alice", "secret"), Verdict::Allowed);
        assert_eq!(auth.cached(), 1);
        assert_eq!(auth.check_cached("alice", "secret"), Some(Verdict::Allowed));
        assert_eq!(auth.check_cached("alice", "secre"), None);
    }

    #[test]
    fn dummy_hash_is_valid_bcrypt() {
        assert!(DUMMY_HASH.parse::<bcrypt::HashParts>().is_ok());
    }
}
