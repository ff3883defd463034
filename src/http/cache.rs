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
//!
//! **Rendering ahead of a regular scraper** (issue 35). Prometheus scrapes at a fixed interval
//! (15 s by default), far longer than a body's max age, so every scrape found a stale body and
//! waited for a render: at 200 targets about 20 ms of CPU, stretched to 60-120 ms on a machine
//! whose every core runs I/O workers. The cache remembers when the last three requests came
//! and expects the next one at `t1 + (t0 - t2)` (newest first): one period after the latest
//! for a single scraper, and the right one of two interleaved scrapers (a Prometheus pair)
//! too. Three quarters of a max age before that moment (as early as a body may be rendered
//! and still be young when the scrape comes) one background render runs, and the scrape finds
//! a fresh body. A scrape that comes early or late renders as
//! before. Each request plans at most one render ahead and a newer plan replaces an older one,
//! so rendering ahead costs at most one render per request, and nothing once requests stop.
//!
//! The same cache serves the status page (its own instance: a browser reloads it every 10 s).

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

/// Which body a cache holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Body {
    /// `/metrics` ([`App::metrics`]).
    Metrics,
    /// The status page, `/` ([`App::status_page`]).
    Status,
}

/// See the module docs. An [`App`] that returns one from [`App::metrics_cache`] (or
/// [`App::status_cache`]) gets its `/metrics` (or status page) served through it.
pub struct MetricsCache {
    body: Body,
    /// Nanoseconds (an atomic, so a reload can change it).
    max_age_ns: AtomicU64,
    generation: AtomicU64,
    slot: Mutex<Slot>,
    /// Held while rendering, so that scrapes that find no fresh body render once between them.
    render: Mutex<()>,
    asks: Mutex<Asks>,
}

/// When the last requests came, and the render planned ahead of the next.
#[derive(Default)]
struct Asks {
    /// Newest first.
    at: [Option<Instant>; 3],
    /// Bumped by every plan; a planned render runs only if no newer plan replaced it.
    plan: u64,
}

/// The request expected next after requests at `at` (newest first): `t1 + (t0 - t2)`, when
/// that lies after `t0` and the requests came at least `min_gap` apart and at most
/// [`MAX_PERIOD`] (a request pattern, not a one-off).
fn expected_next(at: &[Option<Instant>; 3], min_gap: Duration) -> Option<Instant> {
    let [Some(t0), Some(t1), Some(t2)] = *at else {
        return None;
    };
    let span = t0.checked_duration_since(t2)?;
    let gap = t0.checked_duration_since(t1)?;
    if span > MAX_PERIOD * 2 || gap < min_gap {
        return None;
    }
    let next = t1 + span;
    (next > t0 + min_gap).then_some(next)
}

/// Requests further apart than this are not planned for.
const MAX_PERIOD: Duration = Duration::from_secs(600);

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
        Self::of(Body::Metrics, max_age)
    }

    /// A cache of `body`.
    pub fn of(body: Body, max_age: Duration) -> Self {
        MetricsCache {
            body,
            max_age_ns: AtomicU64::new(nanos(max_age)),
            generation: AtomicU64::new(0),
            slot: Mutex::new(Slot::default()),
            render: Mutex::new(()),
            asks: Mutex::new(Asks::default()),
        }
    }

    /// Note a request at `now`; when the requests so far form a pattern, the moment a render
    /// ahead of the next one should start, with the plan's number.
    fn ask(&self, now: Instant) -> Option<(Instant, u64)> {
        let max_age = self.max_age();
        let mut a = lock(&self.asks);
        a.at = [Some(now), a.at[0], a.at[1]];
        let next = expected_next(&a.at, max_age)?;
        // As early as the body may be rendered and still be young when the request comes:
        // a render under a full I/O load takes tens of milliseconds, and varies.
        let start = next.checked_sub(max_age * 3 / 4)?;
        if start <= now {
            return None;
        }
        a.plan += 1;
        Some((start, a.plan))
    }

    /// Whether plan `n` is still the newest.
    fn still_planned(&self, n: u64) -> bool {
        lock(&self.asks).plan == n
    }

    fn render_body(&self, app: &dyn App) -> String {
        match self.body {
            Body::Metrics => app.metrics(),
            Body::Status => app.status_page(),
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
        let body = Bytes::from(self.render_body(app));
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

/// The cache of `body` that `app` has, if any (and if enabled: a zero max age renders every
/// request).
fn cache_of(app: &dyn App, body: Body) -> Option<&MetricsCache> {
    match body {
        Body::Metrics => app.metrics_cache(),
        Body::Status => app.status_cache(),
    }
    .filter(|c| !c.max_age().is_zero())
}

/// The `/metrics` body of `app`, through its cache when it has one. `None` when the render
/// panicked.
pub(super) async fn metrics_body(app: Arc<dyn App>) -> Option<Bytes> {
    cached_body(app, Body::Metrics).await
}

/// `body` of `app`, through its cache when it has one; a request pattern gets a render planned
/// ahead of its next request (module docs). `None` when the render panicked.
pub(super) async fn cached_body(app: Arc<dyn App>, body: Body) -> Option<Bytes> {
    let Some(cache) = cache_of(&*app, body) else {
        return tokio::task::spawn_blocking(move || {
            Bytes::from(match body {
                Body::Metrics => app.metrics(),
                Body::Status => app.status_page(),
            })
        })
        .await
        .ok();
    };
    let now = Instant::now();
    let planned = cache.ask(now);
    if let Some((start, plan)) = planned {
        let a = app.clone();
        // Detached, as a refresh is; it renders only if no newer request replaced its plan.
        drop(tokio::spawn(async move {
            tokio::time::sleep_until(start.into()).await;
            let planned = cache_of(&*a, body).is_some_and(|c| c.still_planned(plan));
            if planned {
                let _ = tokio::task::spawn_blocking(move || {
                    if let Some(c) = cache_of(&*a, body) {
                        c.render_now(&*a, true);
                    }
                })
                .await;
            }
        }));
    }
    match cache.lookup(now) {
        Lookup::Fresh { body: b, refresh } => {
            // A render planned ahead of the next request makes a refresh redundant (and
            // served bodies are past half their age by design then).
            if refresh && planned.is_none() {
                let a = app.clone();
                // Detached: the scrape does not wait for it. The flag is cleared when it
                // stores its body; a render that panics leaves it set until the body is
                // stale, and the next scrape renders in the foreground.
                drop(tokio::task::spawn_blocking(move || {
                    if let Some(c) = cache_of(&*a, body) {
                        c.render_now(&*a, true);
                    }
                }));
            }
            Some(b)
        }
        Lookup::Stale => tokio::task::spawn_blocking(move || {
            cache_of(&*app, body).map(|c| c.render_now(&*app, false))
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

    #[test]
    fn the_next_request_of_one_or_two_regular_scrapers_is_expected() {
        let t = Instant::now();
        let ms = Duration::from_millis;
        let age = ms(250);
        // One scraper every 15 s.
        let one = [Some(t + ms(30_000)), Some(t + ms(15_000)), Some(t)];
        assert_eq!(expected_next(&one, age), Some(t + ms(45_000)));
        // Two interleaved (a Prometheus pair, 4 s apart): the next is the other one's.
        let two = [
            Some(t + ms(19_000)),
            Some(t + ms(15_000)),
            Some(t + ms(4_000)),
        ];
        assert_eq!(expected_next(&two, age), Some(t + ms(30_000)));
        // Too few requests, too close together (the refresh covers those), or too far apart.
        assert_eq!(expected_next(&[Some(t), None, None], age), None);
        let close = [Some(t + ms(200)), Some(t + ms(100)), Some(t)];
        assert_eq!(expected_next(&close, age), None);
        let far = [Some(t + ms(1_300_000)), Some(t + ms(650_000)), Some(t)];
        assert_eq!(expected_next(&far, age), None);
    }

    #[test]
    fn a_regular_requester_gets_one_render_planned_young_enough_for_its_next_request() {
        let c = MetricsCache::new(Duration::from_millis(250));
        let t = Instant::now();
        let s = Duration::from_secs;
        assert!(c.ask(t).is_none());
        assert!(
            c.ask(t + s(15)).is_none(),
            "two requests are no pattern yet"
        );
        let (start, plan) = c.ask(t + s(30)).expect("planned");
        // Three quarters of the max age before the expected request: still young then.
        assert_eq!(
            start,
            t + s(45) - Duration::from_millis(187) - Duration::from_micros(500)
        );
        assert!(c.still_planned(plan));
        // A newer request replaces the plan; the older one no longer renders.
        let (_, newer) = c.ask(t + s(45)).expect("planned");
        assert!(!c.still_planned(plan));
        assert!(c.still_planned(newer));
    }

    #[test]
    fn a_status_cache_renders_the_status_page() {
        let app = Counting::default();
        struct Page;
        impl App for Page {
            fn metrics(&self) -> String {
                "metrics".into()
            }
            fn status_page(&self) -> String {
                "page".into()
            }
        }
        let c = MetricsCache::of(Body::Status, Duration::from_secs(1));
        assert_eq!(&c.render_now(&Page, false)[..], b"page");
        let m = MetricsCache::of(Body::Metrics, Duration::from_secs(1));
        assert_eq!(&m.render_now(&app, false)[..], b"1");
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
