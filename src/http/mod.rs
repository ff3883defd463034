//! HTTP server: `/metrics`, `/` (status page), `/healthz`, over plain HTTP or TLS, with
//! optional basic auth, configured by an exporter-toolkit web config file ([`webconfig`]).
//!
//! Limits that keep a scrape working while slow, idle or garbage clients hold connections:
//! - request headers: at most [`MAX_HEADER_BYTES`], else 431;
//! - the whole request head must arrive within [`HEADER_READ_TIMEOUT`] (also the idle keep-alive
//!   timeout), and a TLS handshake within [`HANDSHAKE_TIMEOUT`];
//! - at most `max_connections` connections. A new connection over the cap makes room as
//!   [`admission`] decides: connections waiting for a password check first, then the oldest
//!   idle, slow or still handshaking ones, so a flood of idle sockets or queued guesses cannot
//!   lock out Prometheus; with basic auth, addresses that authenticated recently keep a
//!   reserved share. Only when every candidate is mid-request is the new one closed at once.
//!
//! Basic auth failures are throttled per client address ([`auth::AuthGuard`]): repeated
//! failures get delayed answers, and addresses that have not authenticated share a small
//! bcrypt budget, so a flood from one address or many cannot monopolise bcrypt or the
//! runtime. With TLS and basic auth, handshakes are rate-limited per untrusted address.
//!
//! The web config and the files it names are watched: new connections trigger a check (on a
//! blocking thread, so no file can stall the accept loop) and later ones get the reloaded config
//! (a broken edit is logged and the last good config stays), so certificates and users rotate
//! without restarting a multi-day soak. Paths other than the three built-in ones go to
//! [`App::page`] (the status page links to `/report`).
//!
//! Architecture Invariant: this module knows nothing about metrics or drives; it serves what an
//! [`App`] returns.

pub mod admission;
pub mod auth;
pub mod cache;
mod reload;
pub mod webconfig;

pub use reload::RELOAD_CHECK_INTERVAL;
use reload::{Reloader, stamps};

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use thiserror::Error;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, watch};

pub use webconfig::WebConfig;

/// Largest accepted request head (request line plus headers).
pub const MAX_HEADER_BYTES: usize = 16 * 1024;
/// Time a client has to send a complete request head, and to start the next one on keep-alive.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Time a client has to complete the TLS handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Time a connection asked to close (eviction, shutdown) gets to finish its response.
pub const CLOSE_GRACE: Duration = Duration::from_secs(5);
/// Default connection cap.
pub const DEFAULT_MAX_CONNECTIONS: usize = 64;

/// Content type of the Prometheus text exposition format.
pub const METRICS_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// What the server serves. Implemented by the daemon; the methods are synchronous and cheap and
/// run on a blocking thread.
pub trait App: Send + Sync + 'static {
    /// Prometheus text exposition for `/metrics`.
    fn metrics(&self) -> String;
    /// HTML for `/`.
    fn status_page(&self) -> String;
    /// `/healthz`: 200 "ok" when true, 503 otherwise.
    fn healthz(&self) -> bool {
        true
    }
    /// Any other path (`/report`, for example): `Some` serves it with 200, `None` is a 404.
    /// `path` comes from the client: treat it as untrusted.
    fn page(&self, path: &str) -> Option<Page> {
        let _ = path;
        None
    }
    /// A cache `/metrics` is served through ([`cache`]); `None` renders every scrape.
    fn metrics_cache(&self) -> Option<&cache::MetricsCache> {
        None
    }
    /// A cache the status page is served through ([`cache`]); `None` renders every request.
    fn status_cache(&self) -> Option<&cache::MetricsCache> {
        None
    }
}

/// An extra page an [`App`] serves.
#[derive(Debug, Clone)]
pub struct Page {
    pub content_type: &'static str,
    pub body: String,
}

/// Where and how to serve.
#[derive(Debug, Clone)]
pub struct ServerOptions {
    pub listen: SocketAddr,
    /// exporter-toolkit web config file (TLS, basic auth); `None` serves plain HTTP, no auth.
    pub web_config: Option<PathBuf>,
    /// Connection cap (0 means [`DEFAULT_MAX_CONNECTIONS`]).
    pub max_connections: usize,
}

#[derive(Debug, Error)]
pub enum HttpError {
    #[error(
        "cannot listen on {addr}: {error}; pick a free address with --web.listen-address or exporter.listen"
    )]
    Bind {
        addr: SocketAddr,
        // Not `#[source]`: the message already says it, and `{:#}` would print it twice.
        error: std::io::Error,
    },
    #[error("web config {file}: {key}: {reason}")]
    WebConfig {
        file: String,
        key: String,
        reason: String,
    },
    #[error("accepting connections on {addr}: {source}")]
    Accept {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
}

/// A bound server, ready to [`run`](Server::run).
pub struct Server {
    listener: TcpListener,
    local_addr: SocketAddr,
    shared: Arc<Shared>,
}

struct Shared {
    app: Arc<dyn App>,
    /// The web config in force; connections take a snapshot when accepted.
    state: std::sync::RwLock<Arc<WebState>>,
    reloader: Option<Mutex<Reloader>>,
    /// A reload check is queued or running on a blocking thread.
    reload_pending: std::sync::atomic::AtomicBool,
    stats: Arc<ServerStats>,
    /// Per-client throttling of failed logins and the auth counters, across reloads.
    guard: Arc<auth::AuthGuard>,
    max_connections: usize,
    conns: Mutex<Tracker>,
    /// TLS handshake budgets per address and for untrusted addresses together.
    handshakes: Mutex<admission::HandshakeLimiter>,
}

/// A loaded web config with its TLS acceptor.
struct WebState {
    web: WebConfig,
    tls: Option<tokio_rustls::TlsAcceptor>,
}

impl WebState {
    fn new(web: WebConfig) -> Self {
        let tls = web.tls.clone().map(tokio_rustls::TlsAcceptor::from);
        WebState { web, tls }
    }
}

/// Counters about the server, for tests and logs.
#[derive(Debug, Default)]
pub struct ServerStats {
    /// Web config reloads that took effect.
    pub reloads: std::sync::atomic::AtomicU64,
    /// Web config reloads that failed (the previous config stays in force).
    pub reload_errors: std::sync::atomic::AtomicU64,
    /// Idle connections closed to make room at the connection cap.
    pub evicted: std::sync::atomic::AtomicU64,
    /// Connections closed at once because every connection was mid-request.
    pub rejected: std::sync::atomic::AtomicU64,
}

#[derive(Default)]
struct Tracker {
    next_id: u64,
    /// Live connections by id; lower ids are older.
    live: BTreeMap<u64, ConnHandle>,
}

#[derive(Clone)]
struct ConnHandle {
    /// Requests in flight on this connection, counted until the response body has been written.
    busy: Arc<AtomicUsize>,
    /// Requests on it waiting for a password check (bcrypt or its turn for it).
    waiting: Arc<AtomicUsize>,
    /// A request on it was allowed by basic auth.
    proven: Arc<AtomicBool>,
    /// Its address was trusted (authenticated recently) when it was accepted.
    trusted: bool,
    close: Arc<Notify>,
}

impl ConnHandle {
    fn slot(&self) -> admission::Slot {
        admission::Slot {
            trusted: self.trusted,
            proven: self.proven.load(Ordering::Acquire),
            busy: self.busy.load(Ordering::Acquire) > 0,
            waiting: self.waiting.load(Ordering::Acquire) > 0,
        }
    }
}

/// A listener bound and a web config loaded, before the daemon starts anything else: a busy
/// port or a bad certificate stops the daemon before any target file is created.
pub struct Prepared {
    listener: std::net::TcpListener,
    local_addr: SocketAddr,
    web: WebConfig,
    opts: ServerOptions,
    guard: Arc<auth::AuthGuard>,
}

/// Loads and validates the web config and binds the listener (port 0 picks a free port),
/// synchronously: call it before the runtime runs anything that a blocked read could stall (the
/// files are opened non-blocking and must be regular files, so a FIFO cannot block it).
pub fn prepare(opts: ServerOptions) -> Result<Prepared, HttpError> {
    let web = match &opts.web_config {
        Some(p) => webconfig::load(p)?,
        None => WebConfig::default(),
    };
    let bind_err = |error| HttpError::Bind {
        addr: opts.listen,
        error,
    };
    let listener = std::net::TcpListener::bind(opts.listen).map_err(bind_err)?;
    listener.set_nonblocking(true).map_err(bind_err)?;
    let local_addr = listener.local_addr().map_err(bind_err)?;
    Ok(Prepared {
        listener,
        local_addr,
        web,
        opts,
        guard: Arc::new(auth::AuthGuard::new()),
    })
}

impl Prepared {
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The server's authentication counters (failures, bcrypt checks, cache hits), for metrics.
    pub fn auth_guard(&self) -> Arc<auth::AuthGuard> {
        self.guard.clone()
    }

    /// Hands the listener to tokio (call inside the runtime) with the app it serves.
    pub fn attach(self, app: Arc<dyn App>) -> Result<Server, HttpError> {
        let Prepared {
            listener,
            local_addr,
            web,
            opts,
            guard,
        } = self;
        let listener = TcpListener::from_std(listener).map_err(|error| HttpError::Bind {
            addr: opts.listen,
            error,
        })?;
        let reloader = opts.web_config.as_ref().map(|p| {
            Mutex::new(Reloader {
                path: p.clone(),
                stamps: stamps(&web.files),
                last_check: std::time::Instant::now(),
            })
        });
        let max_connections = if opts.max_connections == 0 {
            DEFAULT_MAX_CONNECTIONS
        } else {
            opts.max_connections
        };
        Ok(Server {
            listener,
            local_addr,
            shared: Arc::new(Shared {
                app,
                state: std::sync::RwLock::new(Arc::new(WebState::new(web))),
                reloader,
                reload_pending: std::sync::atomic::AtomicBool::new(false),
                stats: Arc::new(ServerStats::default()),
                guard,
                max_connections,
                conns: Mutex::new(Tracker::default()),
                handshakes: Mutex::new(admission::HandshakeLimiter::new(std::time::Instant::now())),
            }),
        })
    }
}

/// Binds the listener now (port 0 picks a free port) and loads and validates the web config.
pub async fn bind(opts: ServerOptions, app: Arc<dyn App>) -> Result<Server, HttpError> {
    prepare(opts)?.attach(app)
}

impl Server {
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Live counters: reloads, evictions, rejections.
    pub fn stats(&self) -> Arc<ServerStats> {
        self.shared.stats.clone()
    }

    /// The authentication counters and per-client throttle.
    pub fn auth_guard(&self) -> Arc<auth::AuthGuard> {
        self.shared.guard.clone()
    }

    /// Serves until `shutdown` completes, then asks every connection to close and waits up to
    /// [`CLOSE_GRACE`] for them.
    pub async fn run(self, shutdown: impl Future<Output = ()> + Send) -> Result<(), HttpError> {
        let (stop_tx, stop_rx) = watch::channel(false);
        let mut tasks = tokio::task::JoinSet::new();
        tokio::pin!(shutdown);
        loop {
            tokio::select! {
                _ = &mut shutdown => break,
                accepted = self.listener.accept() => {
                    let (stream, peer) = match accepted {
                        Ok(x) => x,
                        Err(e) if is_transient_accept_error(&e) => {
                            tracing::warn!(error = %e, "accept failed; retrying");
                            tokio::time::sleep(Duration::from_millis(50)).await;
                            continue;
                        }
                        Err(source) => return Err(HttpError::Accept { addr: self.local_addr, source }),
                    };
                    let state = self.shared.current();
                    let trusted = self.shared.guard.is_trusted(peer.ip());
                    // The handshake rate needs trust to exempt Prometheus, and trust needs basic
                    // auth: without it the rate would fall on every client alike.
                    let limited = state.tls.is_some() && state.web.auth.is_some();
                    if limited && !self.shared.handshake_allowed(peer, trusted) {
                        drop(stream);
                        continue;
                    }
                    let reserved = if state.web.auth.is_some() {
                        admission::reserved_share(self.shared.max_connections)
                    } else {
                        0
                    };
                    let Some((id, handle)) = self.shared.admit(trusted, reserved) else {
                        tracing::debug!(%peer, "connection cap reached and every connection is busy; closing");
                        drop(stream);
                        continue;
                    };
                    let shared = self.shared.clone();
                    let stop = stop_rx.clone();
                    tasks.spawn(async move {
                        shared.clone().serve_conn(stream, peer, handle, stop, state).await;
                        shared.release(id);
                    });
                }
                Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
            }
        }
        drop(self.listener);
        let _ = stop_tx.send(true);
        let drain = async { while tasks.join_next().await.is_some() {} };
        if tokio::time::timeout(CLOSE_GRACE + Duration::from_secs(1), drain)
            .await
            .is_err()
        {
            tasks.abort_all();
        }
        Ok(())
    }
}

fn is_transient_accept_error(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::*;
    matches!(
        e.kind(),
        ConnectionAborted | ConnectionReset | Interrupted | WouldBlock
    ) || matches!(
        e.raw_os_error(),
        Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM)
    )
}

impl Shared {
    /// The web config in force, reloaded first when its files changed (checked at most every
    /// [`RELOAD_CHECK_INTERVAL`]). A config that fails to load is logged and the previous one
    /// stays in force.
    ///
    /// Inside the runtime the check and the reload run on a blocking thread (the connection
    /// gets the config in force now, a reload takes effect for later ones), so reading the
    /// files never stalls the accept loop, whatever they are.
    fn current(self: &Arc<Self>) -> Arc<WebState> {
        self.schedule_reload();
        crate::util::read(&self.state).clone()
    }

    /// Whether `peer` may start a TLS handshake now ([`admission::HandshakeLimiter`]); a
    /// refusal is counted and logged at debug.
    fn handshake_allowed(&self, peer: SocketAddr, trusted: bool) -> bool {
        let now = std::time::Instant::now();
        if crate::util::lock(&self.handshakes).allow(peer.ip(), trusted, now) {
            return true;
        }
        self.guard.count_handshake_limited();
        tracing::debug!(%peer, "TLS handshake rate exceeded; closing");
        false
    }

    /// Registers a new connection from a `trusted` address or not, making room at the cap
    /// (and at the strangers' share, `reserved` slots short of it) as [`admission::admit`]
    /// decides: connections waiting for a password check go first, then idle ones.
    fn admit(&self, trusted: bool, reserved: usize) -> Option<(u64, ConnHandle)> {
        let mut t = crate::util::lock(&self.conns);
        let slots: Vec<(u64, admission::Slot)> =
            t.live.iter().map(|(&id, h)| (id, h.slot())).collect();
        match admission::admit(&slots, self.max_connections, reserved, trusted) {
            admission::Admission::Admit => {}
            admission::Admission::Evict(vid) => {
                if let Some(vh) = t.live.remove(&vid) {
                    if vh.waiting.load(Ordering::Acquire) > 0 {
                        self.guard.count_waiting_shed();
                    }
                    self.stats.evicted.fetch_add(1, Ordering::Relaxed);
                    vh.close.notify_one();
                }
            }
            admission::Admission::Reject => {
                self.stats.rejected.fetch_add(1, Ordering::Relaxed);
                return None;
            }
        }
        let id = t.next_id;
        t.next_id += 1;
        let h = ConnHandle {
            busy: Arc::new(AtomicUsize::new(0)),
            waiting: Arc::new(AtomicUsize::new(0)),
            proven: Arc::new(AtomicBool::new(false)),
            trusted,
            close: Arc::new(Notify::new()),
        };
        t.live.insert(id, h.clone());
        Some((id, h))
    }

    fn release(&self, id: u64) {
        let mut t = crate::util::lock(&self.conns);
        t.live.remove(&id);
    }

    async fn serve_conn(
        self: Arc<Self>,
        stream: TcpStream,
        peer: SocketAddr,
        handle: ConnHandle,
        mut stop: watch::Receiver<bool>,
        state: Arc<WebState>,
    ) {
        let _ = stream.set_nodelay(true);
        let closing = async {
            tokio::select! {
                _ = handle.close.notified() => {}
                _ = stop.wait_for(|s| *s) => {}
            }
        };
        tokio::pin!(closing);
        match state.tls.clone() {
            None => {
                self.serve_http(TokioIo::new(stream), peer, handle.clone(), closing, state)
                    .await
            }
            Some(acceptor) => {
                let setup = async {
                    let mut first = [0u8; 1];
                    match stream.peek(&mut first).await {
                        Ok(0) | Err(_) => return None,
                        Ok(_) => {}
                    }
                    if first[0] != 0x16 {
                        // Not a TLS handshake record: most likely plain HTTP. Answer in plain
                        // text, as Go's TLS server does, and close.
                        let mut s = stream;
                        let _ = s
                            .write_all(b"HTTP/1.0 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\nClient sent an HTTP request to an HTTPS server.\n")
                            .await;
                        let _ = s.shutdown().await;
                        return None;
                    }
                    match acceptor.accept(stream).await {
                        Ok(s) => Some(s),
                        Err(e) => {
                            tracing::debug!(%peer, error = %e, "TLS handshake failed");
                            None
                        }
                    }
                };
                let tls = tokio::select! {
                    r = tokio::time::timeout(HANDSHAKE_TIMEOUT, setup) => r.ok().flatten(),
                    _ = &mut closing => None,
                };
                if let Some(s) = tls {
                    self.serve_http(TokioIo::new(s), peer, handle.clone(), closing, state)
                        .await;
                }
            }
        }
    }

    async fn serve_http<I>(
        self: &Arc<Self>,
        io: I,
        peer: SocketAddr,
        handle: ConnHandle,
        mut closing: std::pin::Pin<&mut impl Future<Output = ()>>,
        state: Arc<WebState>,
    ) where
        I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
    {
        let shared = self.clone();
        let conn_handle = handle.clone();
        let svc = hyper::service::service_fn(move |req| {
            let shared = shared.clone();
            let state = state.clone();
            let guard = BusyGuard::new(conn_handle.busy.clone());
            let h = conn_handle.clone();
            async move {
                let resp = shared.handle(req, peer, &h, &state).await;
                Ok::<_, Infallible>(resp.map(|body| TrackedBody {
                    body,
                    _guard: guard,
                }))
            }
        });
        let mut builder = hyper::server::conn::http1::Builder::new();
        builder
            .timer(TokioTimer::new())
            .header_read_timeout(HEADER_READ_TIMEOUT)
            .max_buf_size(2 * MAX_HEADER_BYTES)
            .max_header_size(MAX_HEADER_BYTES)
            .keep_alive(true);
        let conn = builder.serve_connection(io, svc);
        tokio::pin!(conn);
        tokio::select! {
            r = conn.as_mut() => {
                if let Err(e) = r {
                    tracing::debug!(%peer, error = %e, "HTTP connection ended with an error");
                }
                return;
            }
            _ = closing.as_mut() => {}
        }
        if handle.busy.load(Ordering::Acquire) == 0 || handle.waiting.load(Ordering::Acquire) > 0 {
            // Idle, still sending its request head, or waiting for a password check (shed at
            // the cap): nothing to finish, close now. Dropping the request drops its place in
            // the bcrypt queue; a check already running keeps its permit until it ends.
            return;
        }
        conn.as_mut().graceful_shutdown();
        let _ = tokio::time::timeout(CLOSE_GRACE, conn).await;
    }

    async fn handle(
        &self,
        req: Request<Incoming>,
        peer: SocketAddr,
        conn: &ConnHandle,
        st: &WebState,
    ) -> Response<Full<Bytes>> {
        let mut resp = self.route(req, peer, conn, st).await;
        for (n, v) in &st.web.headers {
            resp.headers_mut().insert(n.clone(), v.clone());
        }
        resp
    }

    async fn route(
        &self,
        req: Request<Incoming>,
        peer: SocketAddr,
        conn: &ConnHandle,
        st: &WebState,
    ) -> Response<Full<Bytes>> {
        if let Some(auth) = &st.web.auth {
            let creds = req
                .headers()
                .get(header::AUTHORIZATION)
                .and_then(|v| auth::BasicAuth::parse_header(v.as_bytes()));
            let d = self
                .guard
                .authorize(auth, peer.ip(), creds, &conn.waiting)
                .await;
            if !d.delay.is_zero() {
                // A delayed denial is no work in progress: the connection may be evicted at
                // the cap meanwhile, so delayed floods cannot lock Prometheus out.
                let _idle = IdleWhile::new(&conn.busy);
                tokio::time::sleep(d.delay).await;
            }
            if d.verdict == auth::Verdict::Allowed {
                conn.proven.store(true, Ordering::Release);
            } else {
                let mut r = text(StatusCode::UNAUTHORIZED, "Unauthorized\n");
                r.headers_mut().insert(
                    header::WWW_AUTHENTICATE,
                    HeaderValue::from_static("Basic realm=\"nvsoak\", charset=\"UTF-8\""),
                );
                return r;
            }
        }
        let path = req.uri().path().to_string();
        let app = self.app.clone();
        let builtin = matches!(path.as_str(), "/" | "/metrics" | "/healthz");
        let extra = if builtin {
            None
        } else {
            let p = path.clone();
            let a = app.clone();
            match tokio::task::spawn_blocking(move || a.page(&p)).await {
                Ok(Some(page)) => Some(page),
                Ok(None) => return text(StatusCode::NOT_FOUND, "Not Found\n"),
                Err(_) => return text(StatusCode::INTERNAL_SERVER_ERROR, "page failed\n"),
            }
        };
        if req.method() != Method::GET && req.method() != Method::HEAD {
            let mut r = text(StatusCode::METHOD_NOT_ALLOWED, "Method Not Allowed\n");
            r.headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
            return r;
        }
        if let Some(page) = extra {
            return with_type(StatusCode::OK, page.content_type, page.body);
        }
        match path.as_str() {
            "/metrics" => match cache::metrics_body(app).await {
                Some(body) => with_type(StatusCode::OK, METRICS_CONTENT_TYPE, body),
                None => text(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "metrics collection failed\n",
                ),
            },
            "/healthz" => match tokio::task::spawn_blocking(move || app.healthz()).await {
                Ok(true) => text(StatusCode::OK, "ok\n"),
                _ => text(StatusCode::SERVICE_UNAVAILABLE, "unhealthy\n"),
            },
            _ => match cache::cached_body(app, cache::Body::Status).await {
                Some(body) => with_type(StatusCode::OK, "text/html; charset=utf-8", body),
                None => text(StatusCode::INTERNAL_SERVER_ERROR, "status page failed\n"),
            },
        }
    }
}

/// Counts a request as in flight from its arrival until hyper drops its response body (after
/// writing it, or when the connection dies).
struct BusyGuard(Arc<AtomicUsize>);

impl BusyGuard {
    fn new(c: Arc<AtomicUsize>) -> Self {
        c.fetch_add(1, Ordering::AcqRel);
        BusyGuard(c)
    }
}

impl Drop for BusyGuard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Counts a request as not in flight for a while (a delayed denial), then as in flight again.
struct IdleWhile<'a>(&'a AtomicUsize);

impl<'a> IdleWhile<'a> {
    fn new(c: &'a AtomicUsize) -> Self {
        c.fetch_sub(1, Ordering::AcqRel);
        IdleWhile(c)
    }
}

impl Drop for IdleWhile<'_> {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::AcqRel);
    }
}

/// A response body that holds a [`BusyGuard`].
struct TrackedBody {
    body: Full<Bytes>,
    _guard: BusyGuard,
}

impl hyper::body::Body for TrackedBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, Infallible>>> {
        std::pin::Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}

fn with_type(
    status: StatusCode,
    content_type: &'static str,
    body: impl Into<Bytes>,
) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(body.into()));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}

fn text(status: StatusCode, body: &'static str) -> Response<Full<Bytes>> {
    with_type(status, "text/plain; charset=utf-8", body.to_string())
}
