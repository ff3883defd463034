//! A gate that threads wait at until it opens, or is cancelled, once, for good.

use std::sync::{Arc, Condvar, Mutex};

/// Cloned to every thread that waits; [`Gate::open`] lets all of them (and any later waiter)
/// through, [`Gate::cancel`] sends them all away. The first of the two wins.
#[derive(Clone, Default)]
pub struct Gate {
    inner: Arc<(Mutex<Option<bool>>, Condvar)>,
}

impl Gate {
    pub fn new() -> Self {
        Gate::default()
    }

    /// Open the gate: every waiter goes on, and [`Gate::wait`] no longer blocks.
    pub fn open(&self) {
        self.decide(true);
    }

    /// Cancel the gate: every waiter's [`Gate::wait`] returns `false`.
    pub fn cancel(&self) {
        self.decide(false);
    }

    fn decide(&self, open: bool) {
        let (state, cv) = &*self.inner;
        let mut g = super::lock(state);
        if g.is_none() {
            *g = Some(open);
        }
        cv.notify_all();
    }

    /// Block until the gate is opened (`true`) or cancelled (`false`).
    pub fn wait(&self) -> bool {
        let (state, cv) = &*self.inner;
        let mut g = super::lock(state);
        loop {
            if let Some(open) = *g {
                return open;
            }
            g = cv
                .wait(g)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn waiters_pass_only_once_the_gate_opens_and_later_ones_do_not_block() {
        let gate = Gate::new();
        let passed = Arc::new(AtomicUsize::new(0));
        let (tx, rx) = std::sync::mpsc::channel();
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let (g, p, tx) = (gate.clone(), passed.clone(), tx.clone());
                std::thread::spawn(move || {
                    tx.send(()).ok();
                    if g.wait() {
                        p.fetch_add(1, Ordering::SeqCst);
                    }
                })
            })
            .collect();
        for _ in 0..4 {
            rx.recv().ok();
        }
        // Every thread reached the gate; none is through.
        assert_eq!(passed.load(Ordering::SeqCst), 0);
        gate.open();
        for t in threads {
            t.join().ok();
        }
        assert_eq!(passed.load(Ordering::SeqCst), 4);
        assert!(gate.wait());
        gate.cancel();
        assert!(gate.wait(), "the first decision stands");
    }

    #[test]
    fn a_cancelled_gate_sends_every_waiter_away() {
        let gate = Gate::new();
        let g = gate.clone();
        let t = std::thread::spawn(move || g.wait());
        gate.cancel();
        assert_eq!(t.join().ok(), Some(false));
        gate.open();
        assert!(!gate.wait(), "the first decision stands");
    }
}
