//! Per-client throttling of failed logins and the server's authentication counters
//! ([`AuthGuard`]): delays for repeated failures, a turn at bcrypt per client, a bcrypt budget
//! shared by addresses that have not authenticated, and the addresses that have (trusted).

use super::*;

/// Recent failures of a client are those less than this long after its previous failure.
pub const FAILURE_WINDOW: Duration = Duration::from_secs(60);
/// Failures a client may have within the window before its failed attempts are delayed (a
/// browser's first request without credentials is never slowed down).
pub const FREE_FAILURES: u32 = 3;
/// The first delay; each further failure doubles it up to [`MAX_DELAY`].
pub const MIN_DELAY: Duration = Duration::from_millis(25);
/// The longest a failed attempt is delayed.
pub const MAX_DELAY: Duration = Duration::from_secs(1);
/// Attempts of one throttled client that may wait for bcrypt; beyond it an attempt not in the
/// caches is denied (after the delay) without bcrypt.
pub const MAX_QUEUED_PER_CLIENT: usize = 4;
/// bcrypt checks a second, and their burst, for all addresses that have not authenticated
/// recently together. Fifty addresses each guessing a new password defeat the per-client
/// delays; this caps what they cost the soak at about a tenth of a core (a cost-10 check is
/// about 50 ms). Trusted addresses (Prometheus) are exempt, and a right password already in
/// the success cache needs no check at all.
pub const STRANGER_CHECKS_PER_SEC: f64 = 2.0;
pub const STRANGER_CHECKS_BURST: f64 = 10.0;

/// What [`AuthGuard::authorize`] decided, and how long to wait before answering a denial.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    pub verdict: Verdict,
    pub delay: Duration,
}

impl Decision {
    pub(super) fn allowed() -> Self {
        Decision {
            verdict: Verdict::Allowed,
            delay: Duration::ZERO,
        }
    }
}

/// Server-wide authentication counters, for metrics (monotonic across web config reloads).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GuardStats {
    /// Requests denied: missing, malformed or wrong credentials.
    pub failures: u64,
    /// bcrypt verifications run.
    pub bcrypt_checks: u64,
    /// Credentials answered from the caches of recent successes and failures.
    pub cache_hits: u64,
    /// Failed attempts answered after a per-client delay.
    pub delayed: u64,
    /// Attempts denied without bcrypt because the client had too many waiting already, or
    /// untrusted addresses together had spent their bcrypt budget.
    pub shed: u64,
    /// Connections closed at the connection cap while their request waited for a password
    /// check (shed first, so waiting guesses cannot fill the cap).
    pub waiting_shed: u64,
    /// TLS handshakes refused before they started: the address, or untrusted addresses
    /// together, over their handshake rate.
    pub handshakes_limited: u64,
}

#[derive(Debug)]
pub(super) struct Client {
    failures: u32,
    last_failure: Instant,
    /// Waiting for, or holding, `gate`.
    queued: usize,
    /// Held by the client's attempt that runs bcrypt: one at a time per client.
    gate: Arc<tokio::sync::Mutex<()>>,
}

/// Per-client throttling of failed attempts and the server's authentication counters; one per
/// server, used with whichever [`BasicAuth`] the web config in force has.
#[derive(Debug, Default)]
pub struct AuthGuard {
    clients: Mutex<HashMap<IpAddr, Client>>,
    failures: AtomicU64,
    bcrypt_checks: AtomicU64,
    cache_hits: AtomicU64,
    delayed: AtomicU64,
    shed: AtomicU64,
    waiting_shed: AtomicU64,
    handshakes_limited: AtomicU64,
    /// Addresses that authenticated, and when they last did.
    trusted: Mutex<HashMap<IpAddr, Instant>>,
    /// The bcrypt budget of untrusted addresses together (full until first used).
    stranger_checks: Mutex<Option<crate::http::admission::Bucket>>,
}

/// An address that authenticated less than this long ago is trusted: it keeps a reserved share
/// of the connection cap and is exempt from the handshake rate (see `http::admission`).
pub const TRUST_WINDOW: Duration = Duration::from_secs(600);

/// Counts a request as waiting for a password check while it lives.
pub(super) struct Waiting<'a>(&'a AtomicUsize);

impl<'a> Waiting<'a> {
    pub(super) fn new(c: &'a AtomicUsize) -> Self {
        c.fetch_add(1, Ordering::AcqRel);
        Waiting(c)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A client's gate and the delay its turn waits.
pub(super) type Gate = (Arc<tokio::sync::Mutex<()>>, Duration);

/// A throttled client's place at its gate; leaves the queue when dropped.
pub(super) struct Turn<'a> {
    guard: &'a AuthGuard,
    client: IpAddr,
    /// The client's gate, once its turn came.
    #[allow(dead_code)]
    held: Option<tokio::sync::OwnedMutexGuard<()>>,
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        self.guard.leave(self.client);
    }
}

/// The delay before answering a client's failed attempt, given its recent failures (this one
/// included).
pub fn delay_for(failures: u32) -> Duration {
    if failures <= FREE_FAILURES {
        return Duration::ZERO;
    }
    let doublings = (failures - FREE_FAILURES - 1).min(16);
    (MIN_DELAY * (1u32 << doublings)).min(MAX_DELAY)
}

impl AuthGuard {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn stats(&self) -> GuardStats {
        GuardStats {
            failures: self.failures.load(Ordering::Relaxed),
            bcrypt_checks: self.bcrypt_checks.load(Ordering::Relaxed),
            cache_hits: self.cache_hits.load(Ordering::Relaxed),
            delayed: self.delayed.load(Ordering::Relaxed),
            shed: self.shed.load(Ordering::Relaxed),
            waiting_shed: self.waiting_shed.load(Ordering::Relaxed),
            handshakes_limited: self.handshakes_limited.load(Ordering::Relaxed),
        }
    }

    /// Whether `client` authenticated within [`TRUST_WINDOW`].
    pub fn is_trusted(&self, client: IpAddr) -> bool {
        crate::util::lock(&self.trusted)
            .get(&client)
            .is_some_and(|t| t.elapsed() < TRUST_WINDOW)
    }

    /// Records that `client` authenticated now. The table is bounded: past
    /// [`CACHE_CAPACITY`] addresses, expired ones go, then all (trust is only a priority,
    /// so forgetting it loses no request).
    pub(super) fn trust(&self, client: IpAddr) {
        let mut t = crate::util::lock(&self.trusted);
        if t.len() >= CACHE_CAPACITY && !t.contains_key(&client) {
            t.retain(|_, at| at.elapsed() < TRUST_WINDOW);
            if t.len() >= CACHE_CAPACITY {
                t.clear();
            }
        }
        t.insert(client, Instant::now());
    }

    /// Whether `client` may run a bcrypt check now: always when trusted, else when untrusted
    /// addresses together have budget left ([`STRANGER_CHECKS_PER_SEC`]).
    pub(super) fn may_check(&self, client: IpAddr) -> bool {
        if self.is_trusted(client) {
            return true;
        }
        let now = Instant::now();
        let mut b = crate::util::lock(&self.stranger_checks);
        b.get_or_insert_with(|| crate::http::admission::Bucket::full(STRANGER_CHECKS_BURST, now))
            .take(STRANGER_CHECKS_PER_SEC, STRANGER_CHECKS_BURST, now)
    }

    /// Counts a connection shed at the cap while it waited for a password check.
    pub fn count_waiting_shed(&self) {
        self.waiting_shed.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a TLS handshake refused by the handshake rate.
    pub fn count_handshake_limited(&self) {
        self.handshakes_limited.fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn allow(&self, client: IpAddr) -> Decision {
        self.trust(client);
        Decision::allowed()
    }

    pub(super) fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<IpAddr, Client>> {
        crate::util::lock(&self.clients)
    }

    /// The client's recent failures (0 once its last one is older than [`FAILURE_WINDOW`]).
    pub fn recent_failures(&self, client: IpAddr) -> u32 {
        self.lock()
            .get(&client)
            .filter(|c| c.last_failure.elapsed() < FAILURE_WINDOW)
            .map_or(0, |c| c.failures)
    }

    /// Counts a failure of `client` and returns how long to delay its answer.
    pub(super) fn record_failure(&self, client: IpAddr) -> Duration {
        self.failures.fetch_add(1, Ordering::Relaxed);
        let now = Instant::now();
        let mut m = self.lock();
        if m.len() >= CACHE_CAPACITY && !m.contains_key(&client) {
            m.retain(|_, c| c.queued > 0 || now.duration_since(c.last_failure) < FAILURE_WINDOW);
            if m.len() >= CACHE_CAPACITY {
                m.retain(|_, c| c.queued > 0);
            }
        }
        let c = m.entry(client).or_insert_with(|| Client {
            failures: 0,
            last_failure: now,
            queued: 0,
            gate: Arc::new(tokio::sync::Mutex::new(())),
        });
        if now.duration_since(c.last_failure) >= FAILURE_WINDOW {
            c.failures = 0;
        }
        c.failures = c.failures.saturating_add(1);
        c.last_failure = now;
        delay_for(c.failures)
    }

    /// Counts a failure; the denial is to be answered after the client's delay.
    pub(super) fn fail(&self, client: IpAddr) -> Decision {
        let delay = self.record_failure(client);
        if !delay.is_zero() {
            self.delayed.fetch_add(1, Ordering::Relaxed);
        }
        Decision {
            verdict: Verdict::Denied,
            delay,
        }
    }

    /// A throttled client's turn at bcrypt: its gate (one attempt at a time) and its delay;
    /// `None` when the client is not throttled; `Err` when too many of its attempts wait.
    pub(super) fn enter(&self, client: IpAddr) -> Option<Result<Gate, ()>> {
        let mut m = self.lock();
        let c = m.get_mut(&client)?;
        if c.last_failure.elapsed() >= FAILURE_WINDOW || c.failures < FREE_FAILURES {
            return None;
        }
        if c.queued >= MAX_QUEUED_PER_CLIENT {
            return Some(Err(()));
        }
        c.queued += 1;
        Some(Ok((c.gate.clone(), delay_for(c.failures + 1))))
    }

    pub(super) fn leave(&self, client: IpAddr) {
        if let Some(c) = self.lock().get_mut(&client) {
            c.queued = c.queued.saturating_sub(1);
        }
    }

    /// Decides a request from `client` with the credentials of its `Authorization` header
    /// (`None`: missing or malformed), against `auth`. The caller answers a denial after the
    /// decision's delay (an async sleep; the server counts the request as idle meanwhile, so
    /// delayed connections stay evictable at the connection cap). While the decision needs
    /// bcrypt (waiting for the client's turn or the permit, or running), `waiting` counts it,
    /// so the server may shed the connection first at the cap. An allowed request makes its
    /// address trusted.
    pub async fn authorize(
        &self,
        auth: &Arc<BasicAuth>,
        client: IpAddr,
        creds: Option<(String, String)>,
        waiting: &AtomicUsize,
    ) -> Decision {
        let Some((user, password)) = creds else {
            return self.fail(client);
        };
        if let Some(v) = auth.check_cached(&user, &password) {
            self.cache_hits.fetch_add(1, Ordering::Relaxed);
            return match v {
                Verdict::Allowed => self.allow(client),
                Verdict::Denied => self.fail(client),
            };
        }
        let marked = Waiting::new(waiting);
        let turn = match self.enter(client) {
            None => None,
            Some(Ok((gate, delay))) => {
                // Counted as queued from here, however the wait ends (a closed connection
                // cancels it).
                let mut t = Turn {
                    guard: self,
                    client,
                    held: None,
                };
                t.held = Some(gate.lock_owned().await);
                tokio::time::sleep(delay).await;
                Some(t)
            }
            Some(Err(())) => {
                self.shed.fetch_add(1, Ordering::Relaxed);
                return self.fail(client);
            }
        };
        // After the client's turn, so waiting attempts spend no budget.
        if auth.check_cached(&user, &password).is_none() && !self.may_check(client) {
            drop(turn);
            self.shed.fetch_add(1, Ordering::Relaxed);
            return self.fail(client);
        }
        let (v, bcrypt) = auth.clone().verify_async(user, password).await;
        drop(turn);
        drop(marked);
        let counter = if bcrypt {
            &self.bcrypt_checks
        } else {
            &self.cache_hits
        };
        counter.fetch_add(1, Ordering::Relaxed);
        match v {
            Verdict::Allowed => self.allow(client),
            Verdict::Denied => self.fail(client),
        }
    }
}
