//! HTTP basic auth against bcrypt hashes, with a bounded cache of verified credentials so a
//! scrape every few seconds does not pay bcrypt's cost (tens of milliseconds) each time.
//!
//! Both caches (recent successes, recent failures) are keyed by SHA-256 of user, password and
//! stored hash, so a changed hash invalidates the entry. A repeated wrong password is answered
//! from the failure cache; new ones wait for one of a fixed number of bcrypt permits, so a flood
//! of wrong passwords cannot take more than that much CPU from the soak. Unknown users are
//! checked against a dummy hash of the configured users' highest cost, through the same caches
//! and permits, so timing does not reveal which users exist.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use base64::Engine as _;
use sha2::{Digest, Sha256};

/// At most this many verified credentials are cached; the cache is cleared when full. The cache
/// of recently failed attempts has the same bound.
pub const CACHE_CAPACITY: usize = 1024;

/// At most this many bcrypt verifications run at once (per web config). Requests beyond it wait
/// for a permit, so a flood of wrong passwords costs at most this many cores, never the I/O
/// workers' share of a 2-core machine.
pub const MAX_CONCURRENT_VERIFICATIONS: usize = 1;

/// A bcrypt hash of a random password at cost 10, the fallback dummy when no user is configured.
const DUMMY_HASH: &str = "$2y$10$QOauhQNbBCuQDKes6eFzPeMqBSjb7Mr5DUmpZ/VcEd00UAV/LDeSi";

/// Basic auth users (name → bcrypt hash), the verified and failed credential caches, and the
/// bound on concurrent bcrypt work.
pub struct BasicAuth {
    users: HashMap<String, String>,
    /// Checked for unknown users: same cost as the costliest configured user, so the response
    /// time does not tell whether a user exists.
    dummy: String,
    cache: Mutex<HashSet<[u8; 32]>>,
    failed: Mutex<HashSet<[u8; 32]>>,
    permits: tokio::sync::Semaphore,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
    verifications: AtomicU64,
    failed_cache_hits: AtomicU64,
}

/// The outcome of checking an `Authorization` header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Allowed,
    /// Missing, malformed, unknown user or wrong password.
    Denied,
}

/// Counters of the bcrypt work done, for metrics and tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AuthStats {
    /// bcrypt verifications performed (known and unknown users alike).
    pub verifications: u64,
    /// Verifications running now.
    pub in_flight: usize,
    /// The most verifications ever seen running at once.
    pub max_in_flight: usize,
    /// Failed attempts answered from the cache of recent failures, without bcrypt.
    pub failed_cache_hits: u64,
}

fn cost_of(hash: &str) -> Option<u32> {
    hash.parse::<bcrypt::HashParts>().ok().map(|p| p.get_cost())
}

impl BasicAuth {
    pub fn new(users: impl IntoIterator<Item = (String, String)>) -> Self {
        let users: HashMap<String, String> = users.into_iter().collect();
        let cost = users.values().filter_map(|h| cost_of(h)).max();
        let dummy = match cost {
            Some(c) if c != 10 => {
                bcrypt::hash("nvsoak-unknown-user", c).unwrap_or_else(|_| DUMMY_HASH.to_string())
            }
            _ => DUMMY_HASH.to_string(),
        };
        BasicAuth {
            users,
            dummy,
            cache: Mutex::new(HashSet::new()),
            failed: Mutex::new(HashSet::new()),
            permits: tokio::sync::Semaphore::new(MAX_CONCURRENT_VERIFICATIONS),
            in_flight: AtomicUsize::new(0),
            max_in_flight: AtomicUsize::new(0),
            verifications: AtomicU64::new(0),
            failed_cache_hits: AtomicU64::new(0),
        }
    }

    pub fn user_count(&self) -> usize {
        self.users.len()
    }

    /// The bcrypt cost of the hash a user's password is checked against (the dummy's for an
    /// unknown user).
    pub fn cost_for(&self, user: &str) -> Option<u32> {
        cost_of(self.hash_for(user))
    }

    fn hash_for(&self, user: &str) -> &str {
        self.users
            .get(user)
            .map(String::as_str)
            .unwrap_or(&self.dummy)
    }

    /// Number of cached verified credentials.
    pub fn cached(&self) -> usize {
        self.cache.lock().map(|c| c.len()).unwrap_or(0)
    }

    pub fn stats(&self) -> AuthStats {
        AuthStats {
            verifications: self.verifications.load(Ordering::Relaxed),
            in_flight: self.in_flight.load(Ordering::Relaxed),
            max_in_flight: self.max_in_flight.load(Ordering::Relaxed),
            failed_cache_hits: self.failed_cache_hits.load(Ordering::Relaxed),
        }
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

    /// Checks credentials from the caches only (recent successes and recent failures, known and
    /// unknown users alike); `None` means bcrypt must decide.
    pub fn check_cached(&self, user: &str, password: &str) -> Option<Verdict> {
        let key = Self::key(user, password, self.hash_for(user));
        if self.cache.lock().map(|c| c.contains(&key)).unwrap_or(false) {
            return Some(Verdict::Allowed);
        }
        if self
            .failed
            .lock()
            .map(|c| c.contains(&key))
            .unwrap_or(false)
        {
            self.failed_cache_hits.fetch_add(1, Ordering::Relaxed);
            return Some(Verdict::Denied);
        }
        None
    }

    /// Checks credentials from an async task: the caches first, then bcrypt on a blocking
    /// thread once one of [`MAX_CONCURRENT_VERIFICATIONS`] permits is free (the caches are
    /// consulted again after the wait: a flood of one wrong password costs one bcrypt).
    pub async fn check_async(
        self: std::sync::Arc<Self>,
        user: String,
        password: String,
    ) -> Verdict {
        if let Some(v) = self.check_cached(&user, &password) {
            return v;
        }
        let Ok(permit) = self.permits.acquire().await else {
            return Verdict::Denied;
        };
        let me = self.clone();
        let v = tokio::task::spawn_blocking(move || me.check(&user, &password))
            .await
            .unwrap_or(Verdict::Denied);
        drop(permit);
        v
    }

    /// Checks credentials, using the caches and bcrypt (slow: call from a blocking thread).
    pub fn check(&self, user: &str, password: &str) -> Verdict {
        if let Some(v) = self.check_cached(user, password) {
            return v;
        }
        let known = self.users.contains_key(user);
        let hash = self.hash_for(user);
        let n = self.in_flight.fetch_add(1, Ordering::AcqRel) + 1;
        self.max_in_flight.fetch_max(n, Ordering::AcqRel);
        self.verifications.fetch_add(1, Ordering::Relaxed);
        let ok = bcrypt::verify(password, hash).unwrap_or(false) && known;
        self.in_flight.fetch_sub(1, Ordering::AcqRel);
        let key = Self::key(user, password, hash);
        let cache = if ok { &self.cache } else { &self.failed };
        if let Ok(mut c) = cache.lock() {
            if c.len() >= CACHE_CAPACITY {
                c.clear();
            }
            c.insert(key);
        }
        if ok {
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
        // A repeated wrong password comes from the failure cache, not bcrypt.
        assert_eq!(auth.check_cached("alice", "wrong"), Some(Verdict::Denied));
        assert_eq!(auth.check("bob", "secret"), Verdict::Denied);
        assert_eq!(auth.check("alice", "secret"), Verdict::Allowed);
        assert_eq!(auth.cached(), 1);
        assert_eq!(auth.check_cached("alice", "secret"), Some(Verdict::Allowed));
        assert_eq!(auth.check_cached("alice", "secre"), None);
    }

    #[test]
    fn unknown_users_take_the_known_users_path_and_cost() {
        let hash = bcrypt::hash("secret", 5).expect("hashing");
        let auth = BasicAuth::new([("alice".to_string(), hash)]);
        assert_eq!(auth.cost_for("alice"), Some(5));
        assert_eq!(auth.cost_for("nobody"), Some(5));
        assert_eq!(auth.check("alice", "wrong"), Verdict::Denied);
        assert_eq!(auth.stats().verifications, 1);
        assert_eq!(auth.check("nobody", "wrong"), Verdict::Denied);
        assert_eq!(auth.stats().verifications, 2);
        // Both repeated failures are answered from the cache.
        assert_eq!(auth.check("alice", "wrong"), Verdict::Denied);
        assert_eq!(auth.check("nobody", "wrong"), Verdict::Denied);
        assert_eq!(auth.stats().verifications, 2);
        assert_eq!(auth.stats().failed_cache_hits, 2);
        // The dummy's password never lets an unknown user in.
        assert_eq!(auth.check("nobody", "nvsoak-unknown-user"), Verdict::Denied);
    }

    #[test]
    fn a_flood_never_runs_more_than_the_permits() {
        let hash = bcrypt::hash("secret", 4).expect("hashing");
        let auth = std::sync::Arc::new(BasicAuth::new([("alice".to_string(), hash)]));
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        let verdicts = rt.block_on(async {
            let mut tasks = Vec::new();
            for i in 0..16 {
                let a = auth.clone();
                tasks.push(tokio::spawn(
                    a.check_async("alice".into(), format!("wrong{i}")),
                ));
            }
            let a = auth.clone();
            tasks.push(tokio::spawn(a.check_async("alice".into(), "secret".into())));
            let mut out = Vec::new();
            for t in tasks {
                out.push(t.await.expect("task"));
            }
            out
        });
        assert_eq!(verdicts.last(), Some(&Verdict::Allowed));
        assert_eq!(
            verdicts.iter().filter(|v| **v == Verdict::Denied).count(),
            16
        );
        let st = auth.stats();
        assert_eq!(st.verifications, 17);
        assert_eq!(st.in_flight, 0);
        assert!(st.max_in_flight <= MAX_CONCURRENT_VERIFICATIONS, "{st:?}");
    }

    #[test]
    fn dummy_hash_is_valid_bcrypt() {
        assert!(DUMMY_HASH.parse::<bcrypt::HashParts>().is_ok());
    }
}
