//! Who gets a connection slot when the cap is reached, and who may start a TLS handshake.
//!
//! Prometheus must keep getting answers while strangers flood the port. Three rules, each a
//! pure decision tested here without sockets:
//! - **Connections waiting for a password check are shed first.** A connection whose request
//!   waits for bcrypt (behind the one permit, or its address's turn) is doing no work for
//!   anyone; at the cap it is the first victim, so a queue of guessed passwords cannot fill the
//!   cap and turn every newcomer away.
//! - **Trusted addresses keep a reserved share.** An address that authenticated recently (see
//!   [`super::auth::AuthGuard::is_trusted`]) is trusted. Untrusted connections may hold at most
//!   the cap minus [`reserved_share`]; an untrusted newcomer only ever evicts another untrusted
//!   connection, never one from a trusted address, and never a connection that has been allowed
//!   a request (proven). A trusted newcomer may evict any connection that is not serving a
//!   request.
//! - **TLS handshakes are rate-limited per address and, for untrusted addresses, in total**
//!   ([`HandshakeLimiter`]), so a reconnect storm costs accept-and-close, not a handshake each,
//!   and the runtime keeps its time for Prometheus's handshakes. Trusted addresses are exempt.

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::Instant;

/// What the policy needs to know about a live connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot {
    /// Opened by an address trusted when it was admitted.
    pub trusted: bool,
    /// A request on it was allowed (authenticated).
    pub proven: bool,
    /// Requests being served (counted from arrival until the response is written).
    pub busy: bool,
    /// A request on it waits for a password check.
    pub waiting: bool,
}

/// The connection slots kept for trusted addresses out of a cap: a quarter, at least one when
/// the cap has room for two.
pub fn reserved_share(cap: usize) -> usize {
    if cap < 2 { 0 } else { (cap / 4).max(1) }
}

/// The decision for a newcomer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Room without evicting anyone.
    Admit,
    /// Room once the connection with this id is closed.
    Evict(u64),
    /// No room: close the newcomer.
    Reject,
}

/// Decides whether a newcomer (`trusted` or not) gets a slot among `live` (id, slot; lower ids
/// are older) under `cap`, of which `reserved` slots untrusted connections may not hold (the
/// server passes [`reserved_share`] when basic auth is on, 0 when nobody can be trusted).
pub fn admit(live: &[(u64, Slot)], cap: usize, reserved: usize, trusted: bool) -> Admission {
    let untrusted_live = live.iter().filter(|(_, s)| !s.trusted).count();
    let untrusted_cap = cap.saturating_sub(reserved);
    let full = live.len() >= cap;
    let over_share = !trusted && untrusted_live >= untrusted_cap;
    if !full && !over_share {
        return Admission::Admit;
    }
    match victim(live, trusted) {
        Some(id) => Admission::Evict(id),
        None => Admission::Reject,
    }
}

/// The connection to close for a newcomer, in order of preference: untrusted connections
/// waiting for a password check, trusted ones waiting (trusted newcomers only), then the
/// oldest idle untrusted connection, then (trusted newcomers only) the oldest idle trusted
/// one that is not proven, then the oldest idle proven one. Never a connection serving a
/// request that is not waiting for a password check.
fn victim(live: &[(u64, Slot)], trusted: bool) -> Option<u64> {
    let pick = |f: &dyn Fn(&Slot) -> bool| live.iter().find(|(_, s)| f(s)).map(|(id, _)| *id);
    pick(&|s| s.waiting && !s.trusted && !s.proven)
        .or_else(|| pick(&|s| !s.busy && !s.trusted && !s.proven))
        .or_else(|| {
            if !trusted {
                return None;
            }
            pick(&|s| s.waiting)
                .or_else(|| pick(&|s| !s.busy && !s.proven))
                .or_else(|| pick(&|s| !s.busy))
        })
}

/// TLS handshakes one address may start per second, and its burst.
pub const HANDSHAKES_PER_ADDR: f64 = 10.0;
pub const HANDSHAKE_BURST_PER_ADDR: f64 = 20.0;
/// TLS handshakes all untrusted addresses together may start per second, and their burst: at
/// about 1.5 ms of CPU for an RSA-2048 handshake, a tenth of one core.
pub const HANDSHAKES_UNTRUSTED: f64 = 60.0;
pub const HANDSHAKE_BURST_UNTRUSTED: f64 = 120.0;
/// Addresses whose buckets are remembered; past it, full buckets are forgotten first.
pub const TRACKED_ADDRS: usize = 4096;

/// A token bucket: `rate` tokens a second up to `burst`, one taken per event allowed.
#[derive(Debug, Clone, Copy)]
pub struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Bucket {
    /// A bucket holding `burst` tokens at `now`.
    pub fn full(burst: f64, now: Instant) -> Self {
        Bucket {
            tokens: burst,
            at: now,
        }
    }

    /// Refills at `rate` up to `burst` and takes a token if there is one.
    pub fn take(&mut self, rate: f64, burst: f64, now: Instant) -> bool {
        let dt = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + dt * rate).min(burst);
        self.at = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// Token buckets for TLS handshakes: one per address and one shared by untrusted addresses.
#[derive(Debug)]
pub struct HandshakeLimiter {
    per_addr: HashMap<IpAddr, Bucket>,
    untrusted: Bucket,
}

impl HandshakeLimiter {
    pub fn new(now: Instant) -> Self {
        HandshakeLimiter {
            per_addr: HashMap::new(),
            untrusted: Bucket::full(HANDSHAKE_BURST_UNTRUSTED, now),
        }
    }

    /// Whether `addr` may start a handshake now. Trusted addresses always may.
    pub fn allow(&mut self, addr: IpAddr, trusted: bool, now: Instant) -> bool {
        if trusted {
            return true;
        }
        if self.per_addr.len() >= TRACKED_ADDRS && !self.per_addr.contains_key(&addr) {
            self.forget_full(now);
        }
        let b = self
            .per_addr
            .entry(addr)
            .or_insert_with(|| Bucket::full(HANDSHAKE_BURST_PER_ADDR, now));
        if !b.take(HANDSHAKES_PER_ADDR, HANDSHAKE_BURST_PER_ADDR, now) {
            return false;
        }
        if self
            .untrusted
            .take(HANDSHAKES_UNTRUSTED, HANDSHAKE_BURST_UNTRUSTED, now)
        {
            return true;
        }
        // The shared bucket said no: give the address its token back.
        b.tokens += 1.0;
        false
    }

    /// Forgets addresses whose buckets have refilled (they lose nothing by it); if none has,
    /// forgets them all, which only ever lets a handshake through, never refuses one.
    fn forget_full(&mut self, now: Instant) {
        self.per_addr.retain(|_, b| {
            let dt = now.saturating_duration_since(b.at).as_secs_f64();
            b.tokens + dt * HANDSHAKES_PER_ADDR < HANDSHAKE_BURST_PER_ADDR
        });
        if self.per_addr.len() >= TRACKED_ADDRS {
            self.per_addr.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const WAIT: Slot = Slot {
        trusted: false,
        proven: false,
        busy: true,
        waiting: true,
    };
    const IDLE: Slot = Slot {
        trusted: false,
        proven: false,
        busy: false,
        waiting: false,
    };
    const BUSY: Slot = Slot {
        trusted: false,
        proven: false,
        busy: true,
        waiting: false,
    };
    const PROM_IDLE: Slot = Slot {
        trusted: true,
        proven: true,
        busy: false,
        waiting: false,
    };

    fn slots(s: &[Slot]) -> Vec<(u64, Slot)> {
        s.iter().enumerate().map(|(i, s)| (i as u64, *s)).collect()
    }

    #[test]
    fn below_the_cap_and_the_share_everyone_is_admitted() {
        let live = slots(&[IDLE, BUSY]);
        assert_eq!(admit(&live, 8, reserved_share(8), false), Admission::Admit);
        assert_eq!(admit(&live, 8, reserved_share(8), true), Admission::Admit);
    }

    #[test]
    fn a_connection_waiting_for_bcrypt_is_shed_before_an_older_idle_one() {
        // Break 4: a cap full of connections waiting for a password check turned every
        // newcomer away; now the first waiting one goes.
        let live = slots(&[IDLE, BUSY, WAIT, WAIT]);
        assert_eq!(
            admit(&live, 4, reserved_share(4), false),
            Admission::Evict(2)
        );
        let all_waiting = slots(&[WAIT; 4]);
        assert_eq!(
            admit(&all_waiting, 4, reserved_share(4), false),
            Admission::Evict(0)
        );
    }

    #[test]
    fn a_stranger_never_evicts_a_trusted_or_proven_connection() {
        let mut s = vec![PROM_IDLE; 2];
        s.extend([BUSY; 6]);
        assert_eq!(
            admit(&slots(&s), 8, reserved_share(8), false),
            Admission::Reject
        );
        // The same cap, a trusted newcomer: the oldest idle proven connection makes room.
        assert_eq!(
            admit(&slots(&s), 8, reserved_share(8), true),
            Admission::Evict(0)
        );
    }

    #[test]
    fn strangers_cannot_take_the_reserved_share() {
        // Cap 8, reserve 2: six untrusted connections fill the strangers' share even though
        // two slots are free; a seventh stranger evicts one of them, a trusted one just enters.
        let live = slots(&[IDLE; 6]);
        assert_eq!(reserved_share(8), 2);
        assert_eq!(
            admit(&live, 8, reserved_share(8), false),
            Admission::Evict(0)
        );
        assert_eq!(admit(&live, 8, reserved_share(8), true), Admission::Admit);
        let busy = slots(&[BUSY; 6]);
        assert_eq!(admit(&busy, 8, reserved_share(8), false), Admission::Reject);
        assert_eq!(admit(&busy, 8, reserved_share(8), true), Admission::Admit);
    }

    #[test]
    fn a_cap_of_every_connection_serving_rejects_the_newcomer() {
        let live = slots(&[BUSY; 4]);
        assert_eq!(admit(&live, 4, reserved_share(4), true), Admission::Reject);
        assert_eq!(admit(&live, 4, reserved_share(4), false), Admission::Reject);
    }

    #[test]
    fn without_a_reserve_strangers_may_fill_the_cap() {
        // No basic auth: nobody can be trusted, so the whole cap is everyone's.
        let live = slots(&[IDLE; 6]);
        assert_eq!(admit(&live, 8, 0, false), Admission::Admit);
        assert_eq!(admit(&slots(&[IDLE; 8]), 8, 0, false), Admission::Evict(0));
    }

    #[test]
    fn tiny_caps_keep_working() {
        assert_eq!(reserved_share(0), 0);
        assert_eq!(reserved_share(1), 0);
        assert_eq!(admit(&[], 1, reserved_share(1), false), Admission::Admit);
        assert_eq!(
            admit(&slots(&[IDLE]), 1, reserved_share(1), false),
            Admission::Evict(0)
        );
    }

    #[test]
    fn one_address_gets_its_burst_then_its_rate() {
        let t0 = Instant::now();
        let mut l = HandshakeLimiter::new(t0);
        let a: IpAddr = "127.0.0.2".parse().expect("addr");
        let took = (0..100).filter(|_| l.allow(a, false, t0)).count();
        assert_eq!(took, HANDSHAKE_BURST_PER_ADDR as usize);
        // A second later it has earned its rate again, no more.
        let t1 = t0 + Duration::from_secs(1);
        let took = (0..100).filter(|_| l.allow(a, false, t1)).count();
        assert_eq!(took, HANDSHAKES_PER_ADDR as usize);
        // A trusted address is never limited.
        let p: IpAddr = "127.0.0.1".parse().expect("addr");
        assert!((0..1000).all(|_| l.allow(p, true, t1)));
    }

    #[test]
    fn many_addresses_share_the_untrusted_budget() {
        let t0 = Instant::now();
        let mut l = HandshakeLimiter::new(t0);
        let took = (0..1000u32)
            .filter(|i| {
                let a = IpAddr::from([10, 0, (i / 256) as u8, (i % 256) as u8]);
                l.allow(a, false, t0)
            })
            .count();
        assert_eq!(took, HANDSHAKE_BURST_UNTRUSTED as usize);
    }

    #[test]
    fn the_address_table_stays_bounded() {
        let t0 = Instant::now();
        let mut l = HandshakeLimiter::new(t0);
        for i in 0..(3 * TRACKED_ADDRS as u32) {
            let a = IpAddr::from(i.to_be_bytes());
            let _ = l.allow(a, false, t0 + Duration::from_secs(u64::from(i)));
            assert!(l.per_addr.len() <= TRACKED_ADDRS);
        }
    }
}
