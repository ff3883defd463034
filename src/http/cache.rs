//! The `/metrics` body, rendered at most about once per max age and served from memory in
//! between, with the rendering moved off the request path while scrapes come often.
//!
//! Why (issue 37, figures in docs/benchmarks.md): under a full I/O load the render is the
//! scrape's largest cost, and it is paid on a CPU the I/O workers are using. Serving a body
//! rendered less than one stats interval ago shows the same figures (the workers publish once
//! per interval) for the price of a reference count, so frequent scrapes cost the soak almost
//! nothing and their latency no longer includes a render.
//!
//! The rule a served body keeps: it was rendered from snapshots taken less than `max_age`
//! before it is served (its age counts from the moment the render started). A body past half
//! its max age is still served, and one background render is started so that a scraper every
//! few hundred milliseconds always finds a fresh body; a body past its max age is never served
//! and the scrape renders (one render at a time: a second scrape waits for it and takes its
//! body). [`MetricsCache::invalidate`] drops the body at once (the daemon calls it when a
//! reload changes the targets).

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::App;

/// A rendered `/metrics` body and when its render started.
struct Rendered {
    at: Instant,
    generation: u64,
    body: Bytes,
}

/// See the module docs. An [`App`] that returns one from [`App::metrics_cache`] gets its
/// `/metrics` served through it.
pub struct MetricsCache {
    /// Nanoseconds (an atomic, so a reload can change it).
    max_age_ns: AtomicU64,
    generation: AtomicU64,
    slot: Mutex<Slot>,
    /// Held while rendering, so that scrapes that find no fresh body render once between them.
    render: Mutex<()>,
}

#[derive(Default)]
struct Slot {
    body: Option<Rendered>,
    refreshing: bool,
}

/// What a scrape finds.
enum Lookup {
    /// Serve this; `refresh` asks for a background render (the body is past half its age).
    Fresh { body: Bytes, refresh: bool },
    /// Nothing that may be served: render now.
    Stale,
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl MetricsCache {
    /// Bodies are served for less than `max_age` after their render started; zero disables
    /// the cache (every scrape renders).
    pub fn new(max_age: Duration) -> Self {
        MetricsCache {
            max_age_ns: AtomicU64::new(nanos(max_age)),
            generation: AtomicU64::new(0),
            slot: Mutex::new(Slot::default()),
            render: Mutex::new(()),
        }
    }

    pub fn max_age(&self) -> Duration {
        Duration::from_nanos(self.max_age_ns.load(Ordering::Acquire))
    }

    /// A new max age (a reload changed the stats interval); drops the body.
    pub fn set_max_age(&self, max_age: Duration) {
        self.max_age_ns.store(nanos(max_age), Ordering::Release);
        self.invalidate();
    }

    /// Drop the body now: the next scrape renders.
    pub fn invalidate(&self) {
        self.generation.fetch_add(1, Ordering::AcqRel);
    }

    fn lookup(&self, now: Instant) -> Lookup {
        let generation = self.generation.load(Ordering::Acquire);
        let mut slot = lock(&self.slot);
        let Some(r) = &slot.body else {
            return Lookup::Stale;
        };
        let age = now.saturating_duration_since(r.at);
        let max_age = self.max_age();
        if r.generation != generation || age >= max_age {
            return Lookup::Stale;
        }
        let body = r.body.clone();
        let refresh = age >= max_age / 2 && !slot.refreshing;
        if refresh {
            slot.refreshing = true;
        }
        Lookup::Fresh { body, refresh }
    }

    /// Render (blocking) unless another render finished a fresh body meanwhile; store it.
    fn render_now(&self, app: &dyn App, background: bool) -> Bytes {
        let _one = lock(&self.render);
        if !background && let Lookup::Fresh { body, .. } = self.lookup(Instant::now()) {
            return body;
        }
        let generation = self.generation.load(Ordering::Acquire);
        let at = Instant::now();
        let body = Bytes::from(app.metrics());
        let mut slot = lock(&self.slot);
        slot.refreshing = false;
        if slot.body.as_ref().is_none_or(|r| r.at < at) {
            slot.body = Some(Rendered {
                at,
                generation,
                body: body.clone(),
            });
        }
        body
    }
}

/// The `/metrics` body of `app`, through its cache when it has one. `None` when the render
/// panicked.
pub(super) async fn metrics_body(app: Arc<dyn App>) -> Option<Bytes> {
    let Some(cache) = app.metrics_cache().filter(|c| !c.max_age().is_zero()) else {
        return tokio::task::spawn_blocking(move || Bytes::from(app.metrics()))
            .await
            .ok();
    };
    match cache.lookup(Instant::now()) {
        Lookup::Fresh { body, refresh } => {
            if refresh {
                let a = app.clone();
                // Detached: the scrape does not wait for it. The flag is cleared when it
                // stores its body; a render that panics leaves it set until the body is
                // stale, and the next scrape renders in the foreground.
                drop(tokio::task::spawn_blocking(move || {
                    if let Some(c) = a.metrics_cache() {
                        c.render_now(&*a, true);
                    }
                }));
            }
            Some(body)
        }
        Lookup::Stale => tokio::task::spawn_blocking(move || {
            app.metrics_cache().map(|c| c.render_now(&*app, false))
        })
        .await
        .ok()
        .flatten(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    /// An app whose body is the number of renders so far.
    #[derive(Default)]
    struct Counting {
        renders: AtomicUsize,
    }

    impl App for Counting {
        fn metrics(&self) -> String {
            format!("{}", self.renders.fetch_add(1, Ordering::SeqCst) + 1)
        }
        fn status_page(&self) -> String {
            String::new()
        }
    }

    fn fresh(l: Lookup) -> Option<(Bytes, bool)> {
        match l {
            Lookup::Fresh { body, refresh } => Some((body, refresh)),
            Lookup::Stale => None,
        }
    }

    #[test]
    fn a_body_is_served_for_less_than_its_max_age_and_never_after() {
        let app = Counting::default();
        let c = MetricsCache::new(Duration::from_secs(1));
        assert!(fresh(c.lookup(Instant::now())).is_none(), "empty cache");
        let before = Instant::now();
        let body = c.render_now(&app, false);
        assert_eq!(&body[..], b"1");
        let at = lock(&c.slot).body.as_ref().map(|r| r.at).expect("stored");
        assert!(at >= before);
        // Young: served, no refresh.
        let (b, refresh) = fresh(c.lookup(at + Duration::from_millis(100))).expect("fresh");
        assert_eq!(&b[..], b"1");
        assert!(!refresh);
        // Past half its age: served, and exactly one refresh is asked for.
        let (_, refresh) = fresh(c.lookup(at + Duration::from_millis(600))).expect("fresh");
        assert!(refresh);
        let (_, again) = fresh(c.lookup(at + Duration::from_millis(700))).expect("fresh");
        assert!(!again, "a second refresh while one is pending");
        // At its max age and after: never served.
        assert!(fresh(c.lookup(at + Duration::from_secs(1))).is_none());
        assert!(fresh(c.lookup(at + Duration::from_secs(5))).is_none());
    }

    #[test]
    fn a_stale_scrape_renders_once_and_a_refresh_replaces_the_body() {
        let app = Counting::default();
        let c = MetricsCache::new(Duration::from_secs(3600));
        assert_eq!(&c.render_now(&app, false)[..], b"1");
        // Fresh meanwhile: a foreground render takes the stored body, rendering nothing.
        assert_eq!(&c.render_now(&app, false)[..], b"1");
        assert_eq!(app.renders.load(Ordering::SeqCst), 1);
        // A background refresh renders and stores, and clears the pending flag.
        lock(&c.slot).refreshing = true;
        assert_eq!(&c.render_now(&app, true)[..], b"2");
        assert!(!lock(&c.slot).refreshing);
        let (b, _) = fresh(c.lookup(Instant::now())).expect("fresh");
        assert_eq!(&b[..], b"2");
    }

    #[test]
    fn invalidate_and_a_new_max_age_drop_the_body() {
        let app = Counting::default();
        let c = MetricsCache::new(Duration::from_secs(3600));
        c.render_now(&app, false);
        assert!(fresh(c.lookup(Instant::now())).is_some());
        c.invalidate();
        assert!(fresh(c.lookup(Instant::now())).is_none());
        assert_eq!(&c.render_now(&app, false)[..], b"2");
        c.set_max_age(Duration::from_secs(7200));
        assert!(fresh(c.lookup(Instant::now())).is_none());
        assert_eq!(c.max_age(), Duration::from_secs(7200));
    }

    #[test]
    fn zero_max_age_renders_every_scrape() {
        let app: Arc<dyn App> = Arc::new(CountingCached(
            Counting::default(),
            MetricsCache::new(Duration::ZERO),
        ));
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        let a = rt.block_on(metrics_body(app.clone())).expect("body");
        let b = rt.block_on(metrics_body(app)).expect("body");
        assert_eq!((&a[..], &b[..]), (&b"1"[..], &b"2"[..]));
    }

    #[test]
    fn scrapes_through_the_cache_render_once() {
        let app: Arc<dyn App> = Arc::new(CountingCached(
            Counting::default(),
            MetricsCache::new(Duration::from_secs(3600)),
        ));
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        for _ in 0..3 {
            let b = rt.block_on(metrics_body(app.clone())).expect("body");
            assert_eq!(&b[..], b"1");
        }
    }

    struct CountingCached(Counting, MetricsCache);

    impl App for CountingCached {
        fn metrics(&self) -> String {
            self.0.metrics()
        }
        fn status_page(&self) -> String {
            String::new()
        }
        fn metrics_cache(&self) -> Option<&MetricsCache> {
            Some(&self.1)
        }
    }
}
