//! Deployment: the HTTP endpoint with its web config (TLS with certificates made at test time,
//! client certificates, basic auth), its limits (idle connection floods, oversized headers),
//! driven against `nvsoak::http::bind` with a tiny test `App` and real TLS clients.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::{HeaderMap, Request, StatusCode};
use hyper_util::rt::TokioIo;
use nvsoak::http::{self, App, HttpError, ServerOptions};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const METRIC_LINE: &str = "test_scrapes_total 42";

struct TestApp {
    healthy: AtomicBool,
}

impl App for TestApp {
    fn metrics(&self) -> String {
        format!(
            "# HELP test_scrapes_total Test.\n# TYPE test_scrapes_total counter\n{METRIC_LINE}\n"
        )
    }
    fn status_page(&self) -> String {
        "<!doctype html><title>nvsoak</title><p>status</p>".into()
    }
    fn healthz(&self) -> bool {
        self.healthy.load(Ordering::Relaxed)
    }
    fn page(&self, path: &str) -> Option<http::Page> {
        (path == "/report").then(|| http::Page {
            content_type: "text/html; charset=utf-8",
            body: "<!doctype html><h1>report</h1>".into(),
        })
    }
}

/// A running server; dropping it stops the server.
struct Running {
    addr: SocketAddr,
    app: Arc<TestApp>,
    stats: Arc<http::ServerStats>,
    guard: Arc<http::auth::AuthGuard>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<Result<(), HttpError>>>,
}

impl Running {
    async fn stop(mut self) -> Duration {
        let t = Instant::now();
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(task) = self.task.take() {
            task.await.expect("server task").expect("server run");
        }
        t.elapsed()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
    }
}

async fn start(web_config: Option<PathBuf>, max_connections: usize) -> Running {
    let app = Arc::new(TestApp {
        healthy: AtomicBool::new(true),
    });
    let server = http::bind(
        ServerOptions {
            listen: "127.0.0.1:0".parse().expect("addr"),
            web_config,
            max_connections,
        },
        app.clone(),
    )
    .await
    .expect("bind");
    let addr = server.local_addr();
    let stats = server.stats();
    let guard = server.auth_guard();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(server.run(async move {
        let _ = rx.await;
    }));
    Running {
        addr,
        app,
        stats,
        guard,
        stop: Some(tx),
        task: Some(task),
    }
}

/// CA, server certificate (127.0.0.1, localhost), a client certificate from the CA and a
/// self-signed "rogue" client certificate, written as PEM files in a scratch directory.
struct Pki {
    dir: tempfile::TempDir,
    ca_der: CertificateDer<'static>,
    client: (Vec<CertificateDer<'static>>, Vec<u8>),
    rogue: (Vec<CertificateDer<'static>>, Vec<u8>),
}

impl Pki {
    fn new() -> Pki {
        use rcgen::{
            BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose,
            IsCa, KeyPair, KeyUsagePurpose,
        };
        let dir = crate::common::shm_dir();
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("ca params");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "nvsoak test CA");
        ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().expect("ca key"))
            .expect("ca cert");

        let server_key = KeyPair::generate().expect("server key");
        let mut sp = CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()])
            .expect("server params");
        sp.distinguished_name
            .push(DnType::CommonName, "nvsoak test server");
        sp.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let server_cert = sp.signed_by(&server_key, &ca).expect("server cert");

        let client_key = KeyPair::generate().expect("client key");
        let mut cp = CertificateParams::new(Vec::<String>::new()).expect("client params");
        cp.distinguished_name.push(DnType::CommonName, "prometheus");
        cp.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let client_cert = cp.signed_by(&client_key, &ca).expect("client cert");

        let rogue_key = KeyPair::generate().expect("rogue key");
        let mut rp = CertificateParams::new(Vec::<String>::new()).expect("rogue params");
        rp.distinguished_name.push(DnType::CommonName, "rogue");
        rp.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let rogue_cert = rp.self_signed(&rogue_key).expect("rogue cert");

        let w = |name: &str, text: String| {
            std::fs::write(dir.path().join(name), text).expect("write pem")
        };
        w("ca.pem", ca.pem());
        w("server.pem", server_cert.pem());
        w("server.key", server_key.serialize_pem());
        w("client.pem", client_cert.pem());
        w("client.key", client_key.serialize_pem());
        Pki {
            ca_der: ca.der().clone(),
            client: (vec![client_cert.der().clone()], client_key.serialize_der()),
            rogue: (vec![rogue_cert.der().clone()], rogue_key.serialize_der()),
            dir,
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Writes a web config next to the PEM files (relative paths resolve against it).
    fn web_config(&self, name: &str, text: &str) -> PathBuf {
        let p = self.path(name);
        std::fs::write(&p, text).expect("write web config");
        p
    }
}

#[derive(Clone, Copy)]
enum ClientCert {
    None,
    Good,
    Rogue,
}

fn client_config(
    pki: &Pki,
    cert: ClientCert,
    versions: &[&'static rustls::SupportedProtocolVersion],
) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(pki.ca_der.clone()).expect("add CA");
    let b = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_protocol_versions(versions)
    .expect("versions")
    .with_root_certificates(roots);
    let key = |k: &Vec<u8>| PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(k.clone()));
    let cfg = match cert {
        ClientCert::None => b.with_no_client_auth(),
        ClientCert::Good => b
            .with_client_auth_cert(pki.client.0.clone(), key(&pki.client.1))
            .expect("client cert"),
        ClientCert::Rogue => b
            .with_client_auth_cert(pki.rogue.0.clone(), key(&pki.rogue.1))
            .expect("rogue cert"),
    };
    Arc::new(cfg)
}

struct Reply {
    status: StatusCode,
    headers: HeaderMap,
    body: String,
}

/// One request over an established stream, with a real HTTP/1.1 client (hyper).
async fn request_over<S>(
    io: S,
    method: &str,
    path: &str,
    auth: Option<(&str, &str)>,
) -> Result<Reply, String>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(io))
        .await
        .map_err(|e| format!("handshake: {e}"))?;
    tokio::spawn(conn);
    let mut req = Request::builder()
        .method(method)
        .uri(path)
        .header(hyper::header::HOST, "localhost");
    if let Some((u, p)) = auth {
        use base64::Engine as _;
        let v = base64::engine::general_purpose::STANDARD.encode(format!("{u}:{p}"));
        req = req.header(hyper::header::AUTHORIZATION, format!("Basic {v}"));
    }
    let req = req.body(Empty::<Bytes>::new()).map_err(|e| e.to_string())?;
    let resp = sender
        .send_request(req)
        .await
        .map_err(|e| format!("request: {e}"))?;
    let status = resp.status();
    let headers = resp.headers().clone();
    let body = resp
        .into_body()
        .collect()
        .await
        .map_err(|e| format!("body: {e}"))?
        .to_bytes();
    Ok(Reply {
        status,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}

async fn plain(addr: SocketAddr, method: &str, path: &str) -> Result<Reply, String> {
    let s = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
    request_over(s, method, path, None).await
}

async fn tls(
    addr: SocketAddr,
    cfg: Arc<rustls::ClientConfig>,
    path: &str,
    auth: Option<(&str, &str)>,
) -> Result<Reply, String> {
    let s = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
    let name = ServerName::try_from("localhost").map_err(|e| e.to_string())?;
    let s = tokio_rustls::TlsConnector::from(cfg)
        .connect(name, s)
        .await
        .map_err(|e| format!("TLS: {e}"))?;
    request_over(s, "GET", path, auth).await
}

/// Sends raw bytes and reads until the server closes (or `limit` passes).
async fn raw_exchange(addr: SocketAddr, bytes: &[u8], limit: Duration) -> String {
    let mut s = TcpStream::connect(addr).await.expect("connect");
    s.write_all(bytes).await.expect("write");
    let mut out = Vec::new();
    let _ = tokio::time::timeout(limit, s.read_to_end(&mut out)).await;
    String::from_utf8_lossy(&out).into_owned()
}

const V12_13: &[&rustls::SupportedProtocolVersion] =
    &[&rustls::version::TLS13, &rustls::version::TLS12];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_http_routes_methods_and_health() {
    let srv = start(None, 0).await;
    let r = plain(srv.addr, "GET", "/metrics").await.expect("scrape");
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(
        r.headers[hyper::header::CONTENT_TYPE],
        http::METRICS_CONTENT_TYPE
    );
    assert!(r.body.contains(METRIC_LINE), "{}", r.body);

    let r = plain(srv.addr, "GET", "/").await.expect("status page");
    assert_eq!(r.status, StatusCode::OK);
    assert!(
        r.headers[hyper::header::CONTENT_TYPE]
            .to_str()
            .expect("ct")
            .starts_with("text/html")
    );
    assert!(r.body.contains("<p>status</p>"));

    let r = plain(srv.addr, "GET", "/healthz").await.expect("healthz");
    assert_eq!((r.status, r.body.trim()), (StatusCode::OK, "ok"));
    srv.app.healthy.store(false, Ordering::Relaxed);
    let r = plain(srv.addr, "GET", "/healthz").await.expect("healthz");
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE);

    let r = plain(srv.addr, "GET", "/nope").await.expect("404");
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    // An App's extra page (the status page links to /report).
    let r = plain(srv.addr, "GET", "/report").await.expect("extra page");
    assert_eq!(r.status, StatusCode::OK);
    assert!(r.body.contains("<h1>report</h1>"));
    let r = plain(srv.addr, "POST", "/report").await.expect("405");
    assert_eq!(r.status, StatusCode::METHOD_NOT_ALLOWED);
    let r = plain(srv.addr, "POST", "/metrics").await.expect("405");
    assert_eq!(r.status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(r.headers[hyper::header::ALLOW], "GET, HEAD");
    assert!(!r.body.contains(METRIC_LINE));
    let r = plain(srv.addr, "HEAD", "/metrics").await.expect("HEAD");
    assert_eq!(r.status, StatusCode::OK);
    assert!(
        r.body.is_empty(),
        "HEAD must not carry a body: {:?}",
        r.body
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_with_basic_auth() {
    let pki = Pki::new();
    let hash = bcrypt::hash("s3cret", 4).expect("bcrypt");
    let cfg = pki.web_config(
        "web.yml",
        &format!(
            "tls_server_config:\n  cert_file: server.pem\n  key_file: server.key\nbasic_auth_users:\n  prometheus: {hash}\nhttp_server_config:\n  headers:\n    X-Content-Type-Options: nosniff\n"
        ),
    );
    let srv = start(Some(cfg), 0).await;
    let cc = client_config(&pki, ClientCert::None, V12_13);

    for _ in 0..2 {
        // The second request is answered from the verified-credentials cache.
        let r = tls(
            srv.addr,
            cc.clone(),
            "/metrics",
            Some(("prometheus", "s3cret")),
        )
        .await
        .expect("scrape");
        assert_eq!(r.status, StatusCode::OK);
        assert!(r.body.contains(METRIC_LINE));
        assert_eq!(r.headers["x-content-type-options"], "nosniff");
    }
    for (what, auth) in [
        ("wrong password", Some(("prometheus", "guess"))),
        ("unknown user", Some(("root", "s3cret"))),
        ("missing", None),
    ] {
        let r = tls(srv.addr, cc.clone(), "/metrics", auth)
            .await
            .expect(what);
        assert_eq!(r.status, StatusCode::UNAUTHORIZED, "{what}");
        let www = r.headers[hyper::header::WWW_AUTHENTICATE]
            .to_str()
            .expect("header");
        assert!(www.starts_with("Basic"), "{what}: {www}");
        assert!(
            !r.body.contains("test_scrapes_total"),
            "{what}: metric data leaked"
        );
    }
    // The status page and health check sit behind the same auth.
    let r = tls(srv.addr, cc.clone(), "/", None)
        .await
        .expect("status page");
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    let r = tls(srv.addr, cc.clone(), "/", Some(("prometheus", "s3cret")))
        .await
        .expect("status page");
    assert_eq!(r.status, StatusCode::OK);
    assert!(srv.stop().await < Duration::from_secs(3));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_certificate_required() {
    let pki = Pki::new();
    let cfg = pki.web_config(
        "web.yml",
        "tls_server_config:\n  cert_file: server.pem\n  key_file: server.key\n  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.pem\n",
    );
    let srv = start(Some(cfg), 0).await;
    let r = tls(
        srv.addr,
        client_config(&pki, ClientCert::Good, V12_13),
        "/metrics",
        None,
    )
    .await
    .expect("client with a CA-signed certificate");
    assert_eq!(r.status, StatusCode::OK);
    assert!(r.body.contains(METRIC_LINE));
    for (what, c) in [
        ("no certificate", ClientCert::None),
        ("untrusted certificate", ClientCert::Rogue),
    ] {
        for versions in [
            &[&rustls::version::TLS13][..],
            &[&rustls::version::TLS12][..],
        ] {
            let r = tls(srv.addr, client_config(&pki, c, versions), "/metrics", None).await;
            assert!(
                r.is_err(),
                "{what} must be refused, got status {:?}",
                r.as_ref().map(|r| r.status)
            );
        }
    }
    // Still serving after the refusals.
    let r = tls(
        srv.addr,
        client_config(&pki, ClientCert::Good, V12_13),
        "/metrics",
        None,
    )
    .await
    .expect("after refusals");
    assert_eq!(r.status, StatusCode::OK);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn optional_and_unverified_client_certificates() {
    let pki = Pki::new();
    let cfg = pki.web_config(
        "web.yml",
        "tls_server_config:\n  cert_file: server.pem\n  key_file: server.key\n  client_auth_type: VerifyClientCertIfGiven\n  client_ca_file: ca.pem\n",
    );
    let srv = start(Some(cfg), 0).await;
    for (c, ok) in [
        (ClientCert::None, true),
        (ClientCert::Good, true),
        (ClientCert::Rogue, false),
    ] {
        let r = tls(srv.addr, client_config(&pki, c, V12_13), "/metrics", None).await;
        assert_eq!(r.is_ok(), ok, "VerifyClientCertIfGiven");
    }
    drop(srv);

    let cfg = pki.web_config(
        "any.yml",
        "tls_server_config:\n  cert_file: server.pem\n  key_file: server.key\n  client_auth_type: RequireAnyClientCert\n",
    );
    let srv = start(Some(cfg), 0).await;
    for (c, ok) in [
        (ClientCert::None, false),
        (ClientCert::Good, true),
        (ClientCert::Rogue, true),
    ] {
        let r = tls(srv.addr, client_config(&pki, c, V12_13), "/metrics", None).await;
        assert_eq!(r.is_ok(), ok, "RequireAnyClientCert");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn min_version_tls13_refuses_tls12() {
    let pki = Pki::new();
    let cfg = pki.web_config(
        "web.yml",
        "tls_server_config:\n  cert_file: server.pem\n  key_file: server.key\n  min_version: TLS13\n",
    );
    let srv = start(Some(cfg), 0).await;
    let v12 = client_config(&pki, ClientCert::None, &[&rustls::version::TLS12]);
    assert!(tls(srv.addr, v12, "/metrics", None).await.is_err());
    let v13 = client_config(&pki, ClientCert::None, &[&rustls::version::TLS13]);
    let r = tls(srv.addr, v13, "/metrics", None).await.expect("TLS 1.3");
    assert_eq!(r.status, StatusCode::OK);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_http_and_garbage_to_the_tls_port() {
    let pki = Pki::new();
    let cfg = pki.web_config(
        "web.yml",
        "tls_server_config:\n  cert_file: server.pem\n  key_file: server.key\n",
    );
    let srv = start(Some(cfg), 0).await;
    let out = raw_exchange(
        srv.addr,
        b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n",
        Duration::from_secs(5),
    )
    .await;
    assert!(out.starts_with("HTTP/1.0 400 "), "{out:?}");
    assert!(
        out.contains("HTTPS server") && !out.contains("test_scrapes_total"),
        "{out:?}"
    );
    // A TLS record header followed by junk: the handshake fails and the connection closes.
    let out = raw_exchange(
        srv.addr,
        b"\x16\x03\x01\x00\x05hello-garbage",
        Duration::from_secs(5),
    )
    .await;
    assert!(!out.contains("test_scrapes_total"));
    let r = tls(
        srv.addr,
        client_config(&pki, ClientCert::None, V12_13),
        "/metrics",
        None,
    )
    .await
    .expect("TLS after plain and garbage");
    assert_eq!(r.status, StatusCode::OK);
}

/// Polls `f` until it returns true or `limit` passes.
async fn eventually(limit: Duration, mut f: impl AsyncFnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if f().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn web_config_reloads_users_and_keeps_the_last_good_config() {
    let pki = Pki::new();
    let users = |pw: &str| {
        let hash = bcrypt::hash(pw, 4).expect("bcrypt");
        format!(
            "tls_server_config:\n  cert_file: server.pem\n  key_file: server.key\nbasic_auth_users:\n  prometheus: {hash}\n"
        )
    };
    let cfg = pki.web_config("web.yml", &users("first"));
    let srv = start(Some(cfg.clone()), 0).await;
    let cc = client_config(&pki, ClientCert::None, V12_13);
    let status = async |pw: &str| {
        tls(srv.addr, cc.clone(), "/metrics", Some(("prometheus", pw)))
            .await
            .map(|r| r.status)
    };
    assert_eq!(status("first").await, Ok(StatusCode::OK));

    std::fs::write(&cfg, users("second")).expect("rewrite web config");
    assert!(
        eventually(Duration::from_secs(10), async || status("second").await
            == Ok(StatusCode::OK))
        .await,
        "the new password never worked"
    );
    assert_eq!(status("first").await, Ok(StatusCode::UNAUTHORIZED));
    assert!(srv.stats.reloads.load(Ordering::Relaxed) >= 1);

    // A broken edit is refused and the last good config stays in force.
    std::fs::write(&cfg, "basic_auth_users:\n  prometheus: not-a-hash\n")
        .expect("break web config");
    assert!(
        eventually(Duration::from_secs(10), async || {
            let _ = status("second").await;
            srv.stats.reload_errors.load(Ordering::Relaxed) >= 1
        })
        .await,
        "the broken config was never checked"
    );
    assert_eq!(status("second").await, Ok(StatusCode::OK));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotated_server_certificate_is_picked_up() {
    let old = Pki::new();
    let new = Pki::new();
    let cfg = old.web_config(
        "web.yml",
        "tls_server_config:\n  cert_file: server.pem\n  key_file: server.key\n",
    );
    let srv = start(Some(cfg), 0).await;
    let trusts_old = client_config(&old, ClientCert::None, V12_13);
    let trusts_new = client_config(&new, ClientCert::None, V12_13);
    assert!(
        tls(srv.addr, trusts_old.clone(), "/metrics", None)
            .await
            .is_ok()
    );
    assert!(
        tls(srv.addr, trusts_new.clone(), "/metrics", None)
            .await
            .is_err()
    );
    // Rotate in place, key first, as a certificate manager would.
    for f in ["server.key", "server.pem"] {
        std::fs::copy(new.path(f), old.path(f)).expect("rotate");
    }
    assert!(
        eventually(Duration::from_secs(10), async || {
            tls(srv.addr, trusts_new.clone(), "/metrics", None)
                .await
                .is_ok()
        })
        .await,
        "the rotated certificate was never served"
    );
    assert!(tls(srv.addr, trusts_old, "/metrics", None).await.is_err());
}

/// Many idle connections (bare TCP, and half-sent request heads or TLS records) held open beyond
/// the connection cap: a normal scrape still succeeds at once, because the oldest idle ones are
/// evicted.
async fn idle_flood(
    web_config: Option<PathBuf>,
    partial: &[u8],
    scrape: impl AsyncFn(SocketAddr) -> Result<Reply, String>,
) {
    let cap = 8;
    let srv = start(web_config, cap).await;
    let mut idle = Vec::new();
    for i in 0..48 {
        let mut s = TcpStream::connect(srv.addr).await.expect("idle connect");
        if i % 2 == 1 {
            s.write_all(partial).await.expect("partial head");
        }
        idle.push(s);
    }
    for round in 0..3 {
        let t = Instant::now();
        let r = tokio::time::timeout(Duration::from_secs(5), scrape(srv.addr))
            .await
            .unwrap_or_else(|_| panic!("round {round}: scrape stalled behind idle connections"))
            .expect("scrape");
        assert_eq!(r.status, StatusCode::OK);
        assert!(r.body.contains(METRIC_LINE));
        // Well under the 10 s header timeout: eviction, not a timeout, made room.
        assert!(
            t.elapsed() < http::HEADER_READ_TIMEOUT / 2,
            "round {round} took {:?}",
            t.elapsed()
        );
    }
    // The oldest idle connection was closed by the server (EOF), the newest is still open.
    let mut buf = [0u8; 64];
    let n = tokio::time::timeout(Duration::from_secs(5), idle[0].read(&mut buf))
        .await
        .expect("oldest idle connection closed by the server");
    assert!(matches!(n, Ok(0) | Err(_)), "{n:?}");
    let last = idle.last_mut().expect("idle");
    assert!(
        tokio::time::timeout(Duration::from_millis(200), last.read(&mut buf))
            .await
            .is_err(),
        "the newest idle connection should still be open"
    );
    assert!(srv.stats.evicted.load(Ordering::Relaxed) >= 40);
    assert!(
        srv.stop().await < Duration::from_secs(3),
        "shutdown with idle connections"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_do_not_block_a_scrape() {
    idle_flood(None, b"GET /metrics HTTP/1.1\r\nHost: sl", async |addr| {
        plain(addr, "GET", "/metrics").await
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_do_not_block_a_tls_scrape() {
    let pki = Pki::new();
    let cfg = pki.web_config(
        "web.yml",
        "tls_server_config:\n  cert_file: server.pem\n  key_file: server.key\n",
    );
    let cc = client_config(&pki, ClientCert::None, V12_13);
    // A TLS record header announcing a ClientHello that never comes.
    idle_flood(Some(cfg), b"\x16\x03\x01\x02\x00\x01", async move |addr| {
        tls(addr, cc.clone(), "/metrics", None).await
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_gets_400_and_the_server_keeps_serving() {
    let srv = start(None, 4).await;
    for junk in [
        &b"\x00\x01\x02\xff\xfe garbage\r\n\r\n"[..],
        b"GET /metrics HTTP/9.9\r\n\r\n",
        b"GET /metrics HTTP/1.1\r\nHost x\r\n\r\n",
    ] {
        let out = raw_exchange(srv.addr, junk, Duration::from_secs(5)).await;
        assert!(out.starts_with("HTTP/1.1 400 "), "{junk:?}: {out:?}");
        assert!(!out.contains("test_scrapes_total"));
    }
    let r = plain(srv.addr, "GET", "/metrics")
        .await
        .expect("scrape after garbage");
    assert_eq!(r.status, StatusCode::OK);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_headers_are_rejected() {
    let srv = start(None, 0).await;
    let big = "x".repeat(http::MAX_HEADER_BYTES + 1024);
    let req = format!("GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: {big}\r\n\r\n");
    let out = raw_exchange(srv.addr, req.as_bytes(), Duration::from_secs(5)).await;
    assert!(
        out.starts_with("HTTP/1.1 431"),
        "{:?}",
        &out[..out.len().min(200)]
    );
    assert!(!out.contains("test_scrapes_total"));
    // Just under the limit is fine.
    let ok = "y".repeat(http::MAX_HEADER_BYTES / 2);
    let req =
        format!("GET /metrics HTTP/1.1\r\nHost: x\r\nX-Ok: {ok}\r\nConnection: close\r\n\r\n");
    let out = raw_exchange(srv.addr, req.as_bytes(), Duration::from_secs(5)).await;
    assert!(
        out.starts_with("HTTP/1.1 200"),
        "{:?}",
        &out[..out.len().min(200)]
    );
    assert!(out.contains(METRIC_LINE));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn web_config_errors_name_file_and_key() {
    let pki = Pki::new();
    let app: Arc<dyn App> = Arc::new(TestApp {
        healthy: AtomicBool::new(true),
    });
    let cases: &[(&str, &str)] = &[
        (
            "tls_server_config:\n  cert_file: missing.pem\n  key_file: server.key\n",
            "tls_server_config.cert_file",
        ),
        (
            "tls_server_config:\n  cert_file: server.pem\n  key_file: client.key\n",
            "tls_server_config.key_file",
        ),
        (
            "tls_server_config:\n  cert_file: server.pem\n  key_file: server.key\n  client_auth_type: RequireAndVerifyClientCert\n",
            "tls_server_config.client_ca_file",
        ),
        (
            "tls_server_config:\n  cert_file: server.pem\n  key_file: server.key\n  client_auth_type: Sometimes\n",
            "tls_server_config.client_auth_type",
        ),
        (
            "tls_server_config:\n  cert_file: server.pem\n  key_file: server.key\n  min_version: TLS11\n",
            "tls_server_config.min_version",
        ),
        (
            "basic_auth_users:\n  alice: plaintext\n",
            "basic_auth_users.alice",
        ),
    ];
    for (i, (text, key)) in cases.iter().enumerate() {
        let file = pki.web_config(&format!("bad{i}.yml"), text);
        let opts = ServerOptions {
            listen: "127.0.0.1:0".parse().expect("addr"),
            web_config: Some(file.clone()),
            max_connections: 0,
        };
        let err = match http::bind(opts, app.clone()).await {
            Ok(_) => panic!("case {i} ({key}) should fail"),
            Err(e) => e.to_string(),
        };
        assert!(
            err.contains(key) && err.contains(&file.display().to_string()),
            "case {i}: {err}"
        );
        assert!(!err.ends_with('.'), "{err}");
    }
    let missing = Path::new("/nonexistent/web.yml").to_path_buf();
    let err = http::bind(
        ServerOptions {
            listen: "127.0.0.1:0".parse().expect("addr"),
            web_config: Some(missing),
            max_connections: 0,
        },
        app.clone(),
    )
    .await
    .err()
    .expect("missing file fails");
    assert!(err.to_string().contains("/nonexistent/web.yml"), "{err}");
}

// ---------------------------------------------------------------------------------------------
// Dashboards and rules against the metric names nvsoak exports, and against a real Prometheus.

/// Every metric name the team agreed on (DESIGN.md, issue 3's table, the derived series).
/// Histograms are listed by family name.
const AGREED_WORKLOAD: &[&str] = &[
    "nvsoak_workload_cpu_seconds_total",
    "nvsoak_workload_cpu_per_io_seconds",
    "nvsoak_workload_workers",
    "nvsoak_read_ops_total",
    "nvsoak_write_ops_total",
    "nvsoak_read_bytes_total",
    "nvsoak_write_bytes_total",
    "nvsoak_io_errors_total",
    "nvsoak_read_latency_seconds",
    "nvsoak_write_latency_seconds",
    "nvsoak_read_latency_quantile_seconds",
    "nvsoak_write_latency_quantile_seconds",
    "nvsoak_read_iops",
    "nvsoak_write_iops",
    "nvsoak_read_bandwidth_bytes_per_second",
    "nvsoak_write_bandwidth_bytes_per_second",
    "nvsoak_phase_info",
    "nvsoak_phase_running",
    "nvsoak_target_up",
    "nvsoak_steady_state_reached",
    "nvsoak_steady_state_since_timestamp_seconds",
    "nvsoak_steady_state_rounds",
    "nvsoak_steady_state_window_average_iops",
    "nvsoak_steady_state_range_ratio",
    "nvsoak_steady_state_slope_excursion_ratio",
    "nvsoak_sweep_max_iops",
    "nvsoak_sweep_point_iops",
    "nvsoak_sweep_point_target_iops",
    "nvsoak_sweep_point_latency_average_seconds",
    "nvsoak_sweep_point_latency_p99_seconds",
    "nvsoak_build_info",
    "nvsoak_uptime_seconds",
    "nvsoak_engine_info",
    "nvsoak_target_info",
    "nvsoak_verify_errors_total",
    "nvsoak_soak_read_bytes",
    "nvsoak_soak_written_bytes",
    "nvsoak_soak_errors",
    "nvsoak_soak_elapsed_seconds",
    "nvsoak_checkpoint_saves_total",
    "nvsoak_checkpoint_save_failures_total",
    "nvsoak_checkpoint_skipped_ticks_total",
    "nvsoak_checkpoint_save_in_progress",
    "nvsoak_checkpoint_last_save_timestamp_seconds",
    "nvsoak_checkpoint_save_duration_seconds",
    "nvsoak_http_auth_failures_total",
    "nvsoak_http_auth_bcrypt_checks_total",
    "nvsoak_http_auth_cache_hits_total",
    "nvsoak_http_auth_delayed_total",
    "nvsoak_http_auth_shed_total",
    "nvsoak_qualification_passed",
    "nvsoak_qualification_finished",
    "nvsoak_qualification_evaluated_timestamp_seconds",
    "nvsoak_qualification_gate_state",
    "nvsoak_qualification_verdict",
    "nvsoak_qualification_gate_value",
    "nvsoak_qualification_gate_limit",
];

/// Series that need an NVMe controller (health log pages and what is derived from them); the VM
/// harness covers them. A query naming only these may return no data on a file target.
const NVME_ONLY: &[&str] = &[
    "nvme_info",
    "nvme_up",
    "nvme_critical_warning",
    "nvme_critical_warning_active",
    "nvme_temperature_celsius",
    "nvme_temperature_sensor_celsius",
    "nvme_warning_temperature_threshold_celsius",
    "nvme_critical_temperature_threshold_celsius",
    "nvme_available_spare_ratio",
    "nvme_available_spare_threshold_ratio",
    "nvme_percentage_used_ratio",
    "nvme_data_read_bytes_total",
    "nvme_data_written_bytes_total",
    "nvme_host_read_commands_total",
    "nvme_host_write_commands_total",
    "nvme_controller_busy_seconds_total",
    "nvme_power_on_seconds_total",
    "nvme_power_cycles_total",
    "nvme_unsafe_shutdowns_total",
    "nvme_media_errors_total",
    "nvme_error_log_entries_total",
    "nvme_warning_temperature_seconds_total",
    "nvme_critical_temperature_seconds_total",
    "nvme_thermal_transitions_total",
    "nvme_thermal_management_seconds_total",
    "nvme_error_log_status_total",
    "nvme_namespace_size_bytes",
    "nvme_namespace_lba_size_bytes",
    "nvme_total_capacity_bytes",
    "nvme_ocp_physical_media_written_bytes_total",
    "nvme_ocp_physical_media_read_bytes_total",
    "nvme_ocp_bad_user_nand_blocks",
    "nvme_ocp_bad_system_nand_blocks",
    "nvme_ocp_xor_recovery_total",
    "nvme_ocp_uncorrectable_read_errors_total",
    "nvme_ocp_thermal_throttling_events_total",
    "nvme_ocp_thermal_throttling_status",
    "nvme_ocp_pcie_correctable_errors_total",
    "nvme_ocp_endurance_estimate_bytes",
    "nvsoak_health_poll_timestamp_seconds",
    "nvsoak_health_poll_duration_seconds",
    "nvsoak_health_poll_errors_total",
    "nvsoak_rated_endurance_bytes",
    "nvsoak_rated_dwpd",
    "nvsoak_rated_info",
    "nvsoak_rated_warranty_seconds",
    "nvsoak_endurance_consumed_ratio",
    "nvsoak_observed_dwpd",
    "nvsoak_projected_wearout_seconds",
    "nvsoak_write_amplification_ratio",
    "nvsoak_accounting_host_written_bytes",
    "nvsoak_accounting_drive_written_bytes",
    "nvsoak_accounting_ratio",
    "nvsoak_thermal_throttling",
    "nvsoak_thermal_throttle_events_total",
    "nvsoak_throttled_iops",
    "nvsoak_unthrottled_iops",
];

/// Recording rules with data only for targets on an NVMe namespace (`nvsoak_target_info` with a
/// non-empty `device`): the fleet overview's drive rows. A query built on one counts as
/// NVMe-only; the replayed-health test serves such a target and requires them.
const NAMESPACE_ONLY: &[&str] = &["nvme:target:info"];

/// Workload series that appear only once they count something (no I/O error: no series). Their
/// panels fall back to 0 through `or ... nvsoak_target_up * 0`. (`nvsoak_verify_errors_total` is
/// exported at 0 for every kind as soon as a target has verify on, and is required below.)
const CONDITIONAL: &[&str] = &["nvsoak_io_errors_total"];

/// Whether a query needs an NVMe controller to return data: it names an NVMe-only series or a
/// namespace-only recording rule, directly or through the recording rules it uses.
fn needs_nvme(expr: &str, rule_exprs: &std::collections::BTreeMap<String, String>) -> bool {
    // A namespace-only rule's own expression.
    if NAMESPACE_ONLY
        .iter()
        .any(|n| rule_exprs.get(*n).is_some_and(|e| e == expr))
    {
        return true;
    }
    let mut stack = metric_names(expr);
    let mut seen = std::collections::BTreeSet::new();
    while let Some(n) = stack.pop() {
        if !seen.insert(n.clone()) {
            continue;
        }
        if NVME_ONLY.contains(&family(&n)) || NAMESPACE_ONLY.contains(&n.as_str()) {
            return true;
        }
        if let Some(e) = rule_exprs.get(&n) {
            stack.extend(metric_names(e));
        }
    }
    false
}

/// Whether a query needs a SATA drive to return data (it names an `ata_*` series).
fn needs_ata(expr: &str) -> bool {
    metric_names(expr)
        .iter()
        .any(|n| ATA_ONLY.contains(&family(n)))
}

/// Names Prometheus itself provides.
/// What SATA drives export (`metrics::ata`), beside the derived `nvsoak_*` names they share.
const ATA_ONLY: &[&str] = &[
    "ata_info",
    "ata_up",
    "ata_feature_supported",
    "ata_capacity_bytes",
    "ata_smart_status_passed",
    "ata_smart_attribute_value",
    "ata_smart_attribute_worst",
    "ata_smart_attribute_threshold",
    "ata_smart_attribute_raw",
    "ata_written_bytes_total",
    "ata_read_bytes_total",
    "ata_power_on_seconds_total",
    "ata_power_on_resets_total",
    "ata_reported_uncorrectable_errors_total",
    "ata_interface_crc_errors_total",
    "ata_over_temperature_seconds_total",
    "ata_temperature_celsius",
    "ata_percentage_used_ratio",
    "nvsoak_drive_lifetime_written_bytes_total",
];

/// PCIe topology, links and AER (`metrics::pcie`): only for controllers on a PCI bus in sysfs,
/// which the replayed-health test's fake tree has none of (the VM test `topo` checks them).
const PCIE_ONLY: &[&str] = &[
    "nvme_pcie_path_info",
    "nvme_pcie_link_speed_transfers_per_second",
    "nvme_pcie_link_max_speed_transfers_per_second",
    "nvme_pcie_link_width_lanes",
    "nvme_pcie_link_max_width_lanes",
    "nvme_pcie_link_degraded",
    "nvme_pcie_aer_errors_total",
    "nvsoak_drive_info",
    "nvsoak_drive_written_bytes_total",
    "nvsoak_drive_soak_written_bytes",
    "nvsoak_drive_endurance_consumed_ratio",
    "nvsoak_drive_accounting_ratio",
    "nvsoak_card_info",
    "nvsoak_card_written_bytes_total",
    "nvsoak_card_soak_written_bytes",
    "nvsoak_card_endurance_consumed_ratio",
    "nvsoak_card_rated_endurance_bytes",
    "nvsoak_card_rated_iops",
    "nvsoak_card_rated_bytes_per_second",
];

/// Whether a query needs PCI functions in sysfs to return data.
fn needs_pcie(expr: &str) -> bool {
    metric_names(expr)
        .iter()
        .any(|n| PCIE_ONLY.contains(&family(n)))
}

const PROMETHEUS_BUILTIN: &[&str] = &["up"];

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A query from a dashboard panel or a rule, with where it came from.
struct Query {
    origin: String,
    expr: String,
}

/// Grafana's variables, substituted the way "All" and a 1 s scrape interval would.
fn substitute(expr: &str) -> String {
    expr.replace("$__rate_interval", "10s")
        .replace("$__interval", "2s")
        .replace("$__range", "1m")
        .replace("$instance", ".*")
        .replace("$device", ".*")
        .replace("$target", ".*")
}

fn dashboard_queries() -> Vec<Query> {
    let mut out = Vec::new();
    let dir = repo().join("dashboards/grafana");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("dashboards/grafana")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    assert!(
        files.len() >= 2,
        "expected the device and fleet dashboards in {dir:?}"
    );
    for f in files {
        let text = std::fs::read_to_string(&f).expect("dashboard JSON");
        let d: serde_json::Value = serde_json::from_str(&text).expect("dashboard is JSON");
        let vars: Vec<&str> = d["templating"]["list"]
            .as_array()
            .expect("templating.list")
            .iter()
            .filter_map(|v| v["name"].as_str())
            .collect();
        for v in ["datasource", "instance"] {
            assert!(vars.contains(&v), "{f:?}: no ${v} variable");
        }
        let name = f
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("?")
            .to_string();
        for p in d["panels"].as_array().expect("panels") {
            for t in p["targets"].as_array().into_iter().flatten() {
                let expr = t["expr"].as_str().expect("expr").to_string();
                out.push(Query {
                    origin: format!(
                        "{name}: panel {:?} ref {}",
                        p["title"].as_str().unwrap_or(""),
                        t["refId"].as_str().unwrap_or("")
                    ),
                    expr: substitute(&expr),
                });
            }
        }
    }
    out
}

/// (record or alert name, expr) of every rule in a rules file.
fn rules(file: &str) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(repo().join(file)).expect("rules file");
    let doc: yaml_serde::Value = yaml_serde::from_str(&text).expect("rules YAML");
    let mut out = Vec::new();
    for g in doc["groups"].as_sequence().expect("groups") {
        for r in g["rules"].as_sequence().expect("rules") {
            let name = r["record"]
                .as_str()
                .or(r["alert"].as_str())
                .expect("record or alert");
            out.push((
                name.to_string(),
                r["expr"].as_str().expect("expr").to_string(),
            ));
        }
    }
    out
}

/// Every shipped rules file (`dashboards/rules/*.yml`), relative to the repository, sorted.
fn rule_files() -> Vec<String> {
    let mut files: Vec<String> = std::fs::read_dir(repo().join("dashboards/rules"))
        .expect("dashboards/rules")
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| n.ends_with(".yml"))
        .map(|n| format!("dashboards/rules/{n}"))
        .collect();
    files.sort();
    files
}

/// Where every alert's `runbook_url` points: docs/runbook.md on the project's main branch.
const RUNBOOK_URL: &str = "https://github.com/nvsoak/nvsoak/blob/main/docs/runbook.md#";

/// The anchor GitHub gives a Markdown heading: lower case, punctuation other than `-` and `_`
/// dropped, spaces turned into `-`.
fn heading_anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

#[test]
fn heading_anchors_follow_github() {
    assert_eq!(
        heading_anchor("NvsoakQualificationFailed"),
        "nvsoakqualificationfailed"
    );
    assert_eq!(
        heading_anchor("NVMe health (nvsoak-alerts.yml)"),
        "nvme-health-nvsoak-alertsyml"
    );
}

/// Every alert in every shipped rules file has a `runbook_url` into docs/runbook.md whose anchor
/// is a heading there, and that section says what the alert means, how to confirm it and what
/// to do with the drive; every alert-named heading of the runbook is a shipped alert (no stale
/// sections). The deb package ships the runbook.
#[test]
fn every_alert_has_a_runbook_section() {
    let runbook = std::fs::read_to_string(repo().join("docs/runbook.md")).expect("docs/runbook.md");
    // Sections by anchor: the text from a heading to the next heading of any level.
    let mut sections: std::collections::BTreeMap<String, (String, String)> = Default::default();
    let mut current: Option<String> = None;
    for line in runbook.lines() {
        if let Some(h) = line.strip_prefix('#') {
            let title = h.trim_start_matches('#').trim().to_string();
            let a = heading_anchor(&title);
            assert!(
                !sections.contains_key(&a),
                "docs/runbook.md: heading {title:?} repeats the anchor #{a}"
            );
            sections.insert(a.clone(), (title, String::new()));
            current = Some(a);
        } else if let Some(a) = &current
            && let Some((_, body)) = sections.get_mut(a)
        {
            body.push_str(line);
            body.push('\n');
        }
    }
    let mut alerts = Vec::new();
    let mut problems = Vec::new();
    for f in rule_files() {
        let text = std::fs::read_to_string(repo().join(&f)).expect("rules file");
        let doc: yaml_serde::Value = yaml_serde::from_str(&text).expect("rules YAML");
        for g in doc["groups"].as_sequence().expect("groups") {
            for r in g["rules"].as_sequence().expect("rules") {
                let Some(name) = r["alert"].as_str() else {
                    continue;
                };
                alerts.push(name.to_string());
                let Some(url) = r["annotations"]["runbook_url"].as_str() else {
                    problems.push(format!("{f}: {name}: no runbook_url annotation"));
                    continue;
                };
                let Some(anchor) = url.strip_prefix(RUNBOOK_URL) else {
                    problems.push(format!(
                        "{f}: {name}: runbook_url {url} is not {RUNBOOK_URL}<anchor>"
                    ));
                    continue;
                };
                match sections.get(anchor) {
                    None => problems.push(format!(
                        "{f}: {name}: runbook_url anchor #{anchor} is no heading of docs/runbook.md"
                    )),
                    Some((title, body)) => {
                        if title != name {
                            problems.push(format!(
                                "{f}: {name}: runbook_url points at the section {title:?}"
                            ));
                        }
                        for part in [
                            "**What it means.**",
                            "**Confirm.**",
                            "**What to do with the drive.**",
                        ] {
                            if !body.contains(part) {
                                problems.push(format!("docs/runbook.md#{anchor}: no {part}"));
                            }
                        }
                    }
                }
            }
        }
    }
    assert!(
        alerts.len() >= 36,
        "only {} alerts found: {alerts:?}",
        alerts.len()
    );
    // A heading that is one CamelCase word is an alert's section: it must be a shipped alert.
    for (a, (title, _)) in &sections {
        let alert_like =
            !title.contains(' ') && title.chars().next().is_some_and(|c| c.is_ascii_uppercase());
        if alert_like && !alerts.iter().any(|n| n == title) {
            problems.push(format!(
                "docs/runbook.md#{a}: {title} is not a shipped alert"
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    let cargo = std::fs::read_to_string(repo().join("Cargo.toml")).expect("Cargo.toml");
    assert!(
        // Named alone, or with every page of docs/ (the reference ships whole).
        cargo.contains(r#"["docs/runbook.md", "usr/share/doc/nvsoak/runbook.md", "644"]"#)
            || cargo.contains(r#"["docs/*.md", "usr/share/doc/nvsoak/", "644"]"#),
        "Cargo.toml's deb assets do not ship docs/runbook.md"
    );
}

/// Metric names a PromQL expression selects (functions, keywords, label names, grouping
/// labels, strings, durations and numbers stripped).
fn metric_names(expr: &str) -> Vec<String> {
    let mut names = metric_names_in_order(expr);
    names.sort();
    names.dedup();
    names
}

/// The metric names of a PromQL expression in the order they are written, repeats kept.
fn metric_names_in_order(expr: &str) -> Vec<String> {
    let strip = |s: &str, re: &str| {
        regex::Regex::new(re)
            .expect("regex")
            .replace_all(s, " ")
            .into_owned()
    };
    let mut e = strip(expr, r#""(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'"#);
    e = strip(&e, r"\{[^}]*\}");
    e = strip(&e, r"\[[^\]]*\]");
    e = strip(
        &e,
        r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)",
    );
    let ident = regex::Regex::new(r"[A-Za-z_:][A-Za-z0-9_:]*").expect("regex");
    let keywords = [
        "by",
        "without",
        "on",
        "ignoring",
        "group_left",
        "group_right",
        "bool",
        "and",
        "or",
        "unless",
        "offset",
        "inf",
        "nan",
        "Inf",
        "NaN",
    ];
    let mut names = Vec::new();
    for m in ident.find_iter(&e) {
        let before = e[..m.start()].chars().next_back();
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '.') {
            continue; // the exponent of a number such as 1e15
        }
        let after = e[m.end()..].trim_start();
        if after.starts_with('(') || keywords.contains(&m.as_str()) {
            continue;
        }
        names.push(m.as_str().to_string());
    }
    names
}

fn family(name: &str) -> &str {
    for suffix in ["_bucket", "_count", "_sum"] {
        if let Some(base) = name.strip_suffix(suffix)
            && base.ends_with("_seconds")
        {
            return base;
        }
    }
    name
}

#[test]
fn metric_name_extraction() {
    assert_eq!(
        metric_names(
            r#"histogram_quantile(0.99, sum by (instance, le) (rate(nvsoak_read_latency_seconds_bucket{target=~".*"}[1m]))) / 1e15"#
        ),
        vec!["nvsoak_read_latency_seconds_bucket"]
    );
    assert_eq!(
        metric_names(
            "(a_ratio >= 0.8) * on (instance, device) group_left (serial, model) nvme_info or on (x) b == bool 0"
        ),
        vec!["a_ratio", "b", "nvme_info"]
    );
    assert_eq!(
        metric_names("count(nvme:drive_badness:score > 0) or vector(0)"),
        vec!["nvme:drive_badness:score"]
    );
}

/// Static check, no Prometheus needed: every dashboard and rule query parses (promtool) and names
/// only agreed metric names or recording rules.
#[test]
fn dashboards_and_rules_name_only_agreed_metrics() {
    let recorded: Vec<String> = rules("dashboards/rules/nvsoak-recording.yml")
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    let mut queries = dashboard_queries();
    let files = rule_files();
    assert!(files.len() >= 5, "rules files: {files:?}");
    for f in &files {
        for (name, expr) in rules(f) {
            queries.push(Query {
                origin: format!("{f}: {name}"),
                expr,
            });
        }
    }
    assert!(queries.len() > 100, "only {} queries found", queries.len());
    // nvsoak's workload label is `workload`; nothing may still expect Prometheus' rewrite of a
    // `job` label it exported (`exported_job`).
    for q in &queries {
        assert!(!q.expr.contains("exported_job"), "{}: {}", q.origin, q.expr);
    }
    let mut unknown = Vec::new();
    for q in &queries {
        let names = metric_names(&q.expr);
        assert!(!names.is_empty(), "{}: no metric in {:?}", q.origin, q.expr);
        for n in names {
            let f = family(&n);
            let known = AGREED_WORKLOAD.contains(&f)
                || NVME_ONLY.contains(&f)
                || ATA_ONLY.contains(&f)
                || PCIE_ONLY.contains(&f)
                || PROMETHEUS_BUILTIN.contains(&f)
                || recorded.iter().any(|r| r == f);
            if !known {
                unknown.push(format!("{}: {n}", q.origin));
            }
        }
    }
    assert!(
        unknown.is_empty(),
        "queries name metrics nobody agreed on:\n{}",
        unknown.join("\n")
    );

    // promtool parses every dashboard query (as a recording rule of its own).
    let dir = crate::common::shm_dir();
    let mut yaml = String::from("groups:\n  - name: dashboard-queries\n    rules:\n");
    for (i, q) in queries.iter().enumerate() {
        yaml.push_str(&format!(
            "      - record: q{i}\n        expr: {}\n",
            serde_json::to_string(&q.expr).expect("json")
        ));
    }
    let path = dir.path().join("queries.yml");
    std::fs::write(&path, yaml).expect("write queries");
    let out = std::process::Command::new("promtool")
        .args(["check", "rules"])
        .arg(&path)
        .output()
        .expect("promtool missing: apt-get install -y prometheus");
    assert!(
        out.status.success(),
        "promtool rejected a query:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Per-controller drive series: a dual-port drive's two controllers (`device`) both carry the
/// drive's figures, so a sum (or count) across controllers counts the drive twice. Deduplicate
/// per drive first (`max by (instance, serial)`, or the drive-level series: `nvsoak_drive_*`,
/// `nvme:drive_data_written_bytes:rate1h`).
const PER_CONTROLLER_DRIVE: &[&str] = &[
    "nvme_info",
    "nvme_critical_warning",
    "nvme_data_written_bytes_total",
    "nvme_data_read_bytes_total",
    "nvme_host_write_commands_total",
    "nvme_host_read_commands_total",
    "nvsoak_accounting_host_written_bytes",
    "nvsoak_accounting_drive_written_bytes",
    "nvme:data_written_bytes:rate1h",
];

/// The index just past the parenthesis that closes the one opened at `open`.
fn closing_paren(s: &str, open: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (i, c) in s[open..].char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return Some(open + i + 1);
                }
            }
            _ => {}
        }
    }
    None
}

/// An aggregation in a PromQL expression: its operator, grouping (`by`/`without` and the
/// labels, empty for none) and argument (without the outer parentheses), in text order.
struct Aggregation {
    op: String,
    grouping: Option<(String, Vec<String>)>,
    arg: String,
}

fn aggregations(expr: &str) -> Vec<Aggregation> {
    let head = regex::Regex::new(
        r"\b(sum|count|max|min|avg|group)\s*(?:(by|without)\s*\(([^)]*)\)\s*)?\(",
    )
    .expect("regex");
    let tail = regex::Regex::new(r"^\s*(by|without)\s*\(([^)]*)\)").expect("regex");
    let labels = |l: &str| -> Vec<String> {
        l.split(',')
            .map(|x| x.trim().to_string())
            .filter(|x| !x.is_empty())
            .collect()
    };
    let mut out = Vec::new();
    for c in head.captures_iter(expr) {
        let whole = c.get(0).expect("match");
        let open = whole.end() - 1;
        let Some(close) = closing_paren(expr, open) else {
            continue;
        };
        let mut grouping = c.get(2).map(|k| (k.as_str().to_string(), labels(&c[3])));
        if grouping.is_none()
            && let Some(t) = tail.captures(&expr[close..])
        {
            grouping = Some((t[1].to_string(), labels(&t[2])));
        }
        out.push(Aggregation {
            op: c[1].to_string(),
            grouping,
            arg: expr[open + 1..close - 1].to_string(),
        });
    }
    out
}

/// The aggregations of `expr` that sum or count a per-controller drive series across
/// controllers without first deduplicating it per drive, as text for a failure message.
fn sums_of_per_controller_series(expr: &str) -> Vec<String> {
    // Strings could hold anything that looks like PromQL; label matchers are not grouping.
    let strings = regex::Regex::new(r#""(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'"#).expect("regex");
    let e = strings.replace_all(expr, "\"\"").into_owned();
    let mut bad = Vec::new();
    for a in aggregations(&e) {
        if a.op != "sum" && a.op != "count" {
            continue;
        }
        let keeps_controllers = match &a.grouping {
            Some((k, l)) if k == "by" => l.iter().any(|x| x == "device"),
            Some((_, l)) => !l.iter().any(|x| x == "device"),
            None => false,
        };
        let per_drive = |g: &Option<(String, Vec<String>)>| {
            g.as_ref().is_some_and(|(k, l)| {
                k == "by"
                    && l.iter().any(|x| x == "serial" || x == "drive")
                    && !l.iter().any(|x| x == "device")
            })
        };
        // A count by the serial counts each drive's controllers: the first step of counting
        // drives, not a double count.
        if keeps_controllers || (a.op == "count" && per_drive(&a.grouping)) {
            continue;
        }
        // Blank out what deduplicates per drive: max, min, avg or group by the serial or the
        // drive (and, under a count, a count by them), grouping the controllers away.
        let mut rest = a.arg.clone();
        for inner in aggregations(&a.arg) {
            let dedup_op = matches!(inner.op.as_str(), "max" | "min" | "avg" | "group")
                || (a.op == "count" && inner.op == "count");
            if per_drive(&inner.grouping) && dedup_op {
                rest = rest.replace(&inner.arg, " ");
            }
        }
        let names = metric_names(&rest);
        let hits: Vec<&String> = names
            .iter()
            .filter(|n| PER_CONTROLLER_DRIVE.contains(&n.as_str()))
            .collect();
        if !hits.is_empty() {
            bad.push(format!(
                "{}({}) over {hits:?}",
                a.op,
                a.arg.chars().take(120).collect::<String>()
            ));
        }
    }
    bad
}

#[test]
fn the_per_controller_checker_catches_a_double_counting_sum() {
    for bad in [
        "sum(rate(nvme_data_written_bytes_total[1h]))",
        "sum by (instance) (nvme:data_written_bytes:rate1h)",
        "sum by (serial) (nvsoak_accounting_host_written_bytes * on (instance, device) group_left (serial) nvme_info)",
        "sum(nvme_data_written_bytes_total) by (instance)",
        "count(nvme_info)",
        "count(nvme_critical_warning > 0)",
        "sum(sum by (instance, device) (rate(nvme_data_read_bytes_total[5m])))",
        "sum by (instance) (count by (instance, serial) (nvme_info))",
    ] {
        assert!(
            !sums_of_per_controller_series(bad).is_empty(),
            "the checker let through {bad}"
        );
    }
    for good in [
        "sum(nvme:drive_data_written_bytes:rate1h)",
        "sum(max by (instance, serial) (rate(nvme_data_written_bytes_total[1h]) * on (instance, device) group_left (serial) nvme_info))",
        "sum by (instance, device) (rate(nvme_data_written_bytes_total[1h]))",
        "sum without (sensor) (nvme_data_written_bytes_total)",
        "count(count by (instance, serial) (nvme_info))",
        "sum(nvsoak_drive_written_bytes_total)",
        r#"max by (instance, device) (nvme_info{model="sum(nvme_info)"})"#,
        "max(nvme_data_written_bytes_total)",
    ] {
        assert_eq!(
            sums_of_per_controller_series(good),
            Vec::<String>::new(),
            "the checker refused {good}"
        );
    }
}

/// No dashboard query and no rule sums (or counts) a per-controller drive series across
/// controllers without deduplicating per drive first: a dual-port drive would count twice
/// (docs/fleet.md, "Summing drives: dual-port drives").
#[test]
fn no_query_sums_a_per_controller_drive_series() {
    let mut queries = dashboard_queries();
    for f in rule_files() {
        for (name, expr) in rules(&f) {
            queries.push(Query {
                origin: format!("{f}: {name}"),
                expr,
            });
        }
    }
    assert!(queries.len() > 100, "only {} queries found", queries.len());
    let checked = queries
        .iter()
        .filter(|q| {
            metric_names(&q.expr)
                .iter()
                .any(|n| PER_CONTROLLER_DRIVE.contains(&n.as_str()))
        })
        .count();
    assert!(
        checked >= 10,
        "only {checked} queries name a per-controller series"
    );
    let bad: Vec<String> = queries
        .iter()
        .flat_map(|q| {
            sums_of_per_controller_series(&q.expr)
                .into_iter()
                .map(move |b| format!("{}: {b}", q.origin))
        })
        .collect();
    assert!(
        bad.is_empty(),
        "sums of a per-controller drive series (a dual-port drive counts twice; use \
         max by (instance, serial) or nvme:drive_data_written_bytes:rate1h):\n{}",
        bad.join("\n")
    );
}

/// The kind of quantity a panel query gives, from its first metric name's unit suffix (the
/// name's `_`/`:` parts) and whether it is taken as a rate: `temperature`, `ratio` (a rate
/// of a `_seconds_total` is a time fraction), `time`, `bytes`, `bytes/s`, `iops`, `count`
/// (a `_total` counter or an increase) or `value` (anything else: states, levels, scores).
fn quantity(expr: &str) -> &'static str {
    let Some(name) = metric_names_in_order(expr).into_iter().next() else {
        return "value";
    };
    let parts: Vec<&str> = name.split(['_', ':']).collect();
    let has = |p: &str| parts.contains(&p);
    let last = parts.last().copied().unwrap_or("");
    let rated = regex::Regex::new(&format!(
        r"\b(?:rate|irate|deriv)\s*\(\s*{}\b",
        regex::escape(&name)
    ))
    .expect("regex")
    .is_match(expr);
    // A recording rule's `rate1m`, `rate1h` (not `rated`).
    let recorded_rate = parts.iter().any(|p| {
        p.strip_prefix("rate").is_some_and(|d| {
            d.len() > 1
                && d.ends_with(['s', 'm', 'h', 'd'])
                && d[..d.len() - 1].bytes().all(|b| b.is_ascii_digit())
        })
    });
    if has("celsius") {
        "temperature"
    } else if has("ratio") {
        "ratio"
    } else if has("seconds") {
        if rated && last == "total" {
            "ratio"
        } else {
            "time"
        }
    } else if has("bytes") {
        if rated || recorded_rate || name.ends_with("_per_second") {
            "bytes/s"
        } else {
            "bytes"
        }
    } else if has("iops") || (rated && (has("ops") || has("commands"))) {
        "iops"
    } else if last == "total" || last.starts_with("increase") {
        "count"
    } else {
        "value"
    }
}

/// Whether a Grafana unit id fits a kind of quantity.
fn unit_fits(kind: &str, unit: &str) -> bool {
    let allowed: &[&str] = match kind {
        "temperature" => &["celsius"],
        "ratio" => &["percentunit", "percent", "none"],
        "time" => &[
            "s",
            "ms",
            "µs",
            "ns",
            "dtdurations",
            "dateTimeFromNow",
            "dateTimeAsIso",
        ],
        "bytes" => &["bytes", "decbytes"],
        "bytes/s" => &["Bps", "binBps"],
        "iops" => &["iops"],
        "count" => &["none", "short"],
        _ => return !unit.is_empty(),
    };
    allowed.contains(&unit)
}

/// What is wrong with one Grafana panel: no description, no unit, targets that mix kinds of
/// quantity (a time series, stat or gauge shows one kind), a unit that does not fit the kind,
/// and, in a table or an x-y chart, a column whose unit does not fit its query.
fn panel_problems(p: &serde_json::Value) -> Vec<String> {
    let title = p["title"].as_str().unwrap_or("?");
    let kind = p["type"].as_str().unwrap_or("");
    let mut out = Vec::new();
    if kind == "row" {
        return out;
    }
    if p["description"]
        .as_str()
        .is_none_or(|d| d.trim().is_empty())
    {
        out.push(format!("panel {title:?}: no description"));
    }
    let defaults = &p["fieldConfig"]["defaults"];
    let unit = if kind == "heatmap" {
        p["options"]["yAxis"]["unit"].as_str()
    } else {
        defaults["unit"].as_str()
    }
    .unwrap_or("");
    if unit.is_empty() {
        out.push(format!("panel {title:?}: no unit"));
    }
    let targets: Vec<(&str, &str)> = p["targets"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| {
            (
                t["refId"].as_str().unwrap_or(""),
                t["expr"].as_str().unwrap_or(""),
            )
        })
        .collect();
    if matches!(kind, "table" | "xychart") {
        // One column per query: "Value" alone, else "Value #<ref>", renamed by the organize
        // transformation; a column's unit is its override, else the panel's.
        let organize = p["transformations"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|t| t["id"] == "organize")
            .map(|t| t["options"].clone())
            .unwrap_or_default();
        for (r, expr) in &targets {
            let col = if targets.len() == 1 {
                "Value".to_string()
            } else {
                format!("Value #{r}")
            };
            if organize["excludeByName"][&col] == true {
                continue;
            }
            let shown = organize["renameByName"][&col]
                .as_str()
                .map(str::to_string)
                .unwrap_or(col);
            let col_unit = p["fieldConfig"]["overrides"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|o| o["matcher"]["options"] == shown.as_str())
                .flat_map(|o| o["properties"].as_array().into_iter().flatten())
                .find(|x| x["id"] == "unit")
                .and_then(|x| x["value"].as_str())
                .unwrap_or(unit);
            let q = quantity(expr);
            if !unit_fits(q, col_unit) {
                out.push(format!(
                    "panel {title:?}: column {shown:?} shows {q} in unit {col_unit:?}"
                ));
            }
        }
        return out;
    }
    let kinds: std::collections::BTreeSet<&str> =
        targets.iter().map(|(_, e)| quantity(e)).collect();
    if kinds.len() > 1 {
        out.push(format!(
            "panel {title:?}: its queries mix {kinds:?} (split the panel)"
        ));
    } else if let Some(q) = kinds.first()
        && !unit.is_empty()
        && !unit_fits(q, unit)
    {
        out.push(format!("panel {title:?}: shows {q} in unit {unit:?}"));
    }
    out
}

/// Every panel of every dashboard, with its dashboard's file name.
fn dashboard_panels() -> Vec<(String, serde_json::Value)> {
    let dir = repo().join("dashboards/grafana");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("dashboards/grafana")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    let mut out = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).expect("dashboard JSON");
        let d: serde_json::Value = serde_json::from_str(&text).expect("dashboard is JSON");
        let name = f
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("?")
            .to_string();
        for p in d["panels"].as_array().expect("panels") {
            out.push((name.clone(), p.clone()));
        }
    }
    out
}

#[test]
fn the_panel_checker_catches_mixed_units_and_missing_descriptions() {
    use serde_json::json;
    let ts = |unit: &str, desc: &str, exprs: &[&str]| {
        json!({"type": "timeseries", "title": "t", "description": desc,
               "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
               "targets": exprs.iter().enumerate()
                   .map(|(i, e)| json!({"refId": format!("{i}"), "expr": e})).collect::<Vec<_>>()})
    };
    assert_eq!(
        quantity("rate(nvme_data_written_bytes_total[5m])"),
        "bytes/s"
    );
    assert_eq!(quantity("nvme_data_written_bytes_total"), "bytes");
    assert_eq!(quantity("nvme:temperature_max:celsius"), "temperature");
    assert_eq!(
        quantity("rate(nvme_controller_busy_seconds_total[5m])"),
        "ratio"
    );
    assert_eq!(quantity("increase(nvme_media_errors_total[5m])"), "count");
    assert_eq!(quantity("nvsoak:iops:rate1m"), "iops");
    assert_eq!(quantity("nvme:data_written_bytes:rate1h"), "bytes/s");
    assert_eq!(quantity("nvsoak_rated_endurance_bytes"), "bytes");
    // A status, event counts and bytes in one panel, as the OCP panel once was.
    let mixed = ts(
        "short",
        "d",
        &[
            "nvme_ocp_thermal_throttling_status",
            "increase(nvme_ocp_thermal_throttling_events_total[5m])",
            "nvme_ocp_endurance_estimate_bytes / 1e15",
        ],
    );
    assert!(
        panel_problems(&mixed).iter().any(|p| p.contains("mix")),
        "{:?}",
        panel_problems(&mixed)
    );
    // IOPS and bandwidth under `iops`.
    let iops_bw = ts(
        "iops",
        "d",
        &["nvsoak_read_iops", "nvsoak_read_bandwidth_bytes_per_second"],
    );
    assert!(panel_problems(&iops_bw).iter().any(|p| p.contains("mix")));
    let wrong_unit = ts("iops", "d", &["rate(nvsoak_read_bytes_total[1m])"]);
    assert!(
        panel_problems(&wrong_unit)
            .iter()
            .any(|p| p.contains("unit \"iops\""))
    );
    let no_desc = ts("Bps", " ", &["rate(nvsoak_read_bytes_total[1m])"]);
    assert!(
        panel_problems(&no_desc)
            .iter()
            .any(|p| p.contains("no description"))
    );
    let no_unit = ts("", "d", &["nvsoak_read_iops"]);
    assert!(
        panel_problems(&no_unit)
            .iter()
            .any(|p| p.contains("no unit"))
    );
    let table = json!({"type": "table", "title": "t", "description": "d",
        "fieldConfig": {"defaults": {"unit": "none"}, "overrides": [
            {"matcher": {"id": "byName", "options": "p99"}, "properties": [{"id": "unit", "value": "s"}]}]},
        "transformations": [{"id": "organize", "options": {
            "excludeByName": {"Value #A": true}, "renameByName": {"Value #B": "p99", "Value #C": "written"}}}],
        "targets": [{"refId": "A", "expr": "nvme_info"},
                    {"refId": "B", "expr": "nvsoak:read_latency_seconds:p99_1m"},
                    {"refId": "C", "expr": "nvsoak_drive_written_bytes_total"}]});
    assert_eq!(
        panel_problems(&table),
        vec!["panel \"t\": column \"written\" shows bytes in unit \"none\"".to_string()]
    );
    let good = ts(
        "Bps",
        "Bytes read per second.",
        &[
            "rate(nvsoak_read_bytes_total[1m])",
            "rate(nvsoak_write_bytes_total[1m])",
        ],
    );
    assert_eq!(panel_problems(&good), Vec::<String>::new());
}

/// Every Grafana panel has a one-line description and a unit that fits what it shows, and a
/// time series, stat or gauge shows one kind of quantity (by the metric names' unit suffixes);
/// every table column with a unit of its own (bytes, seconds, °C, IOPS, ratios) has it set.
#[test]
fn every_panel_has_a_description_and_one_fitting_unit() {
    let panels = dashboard_panels();
    let checked = panels.iter().filter(|(_, p)| p["type"] != "row").count();
    assert!(checked >= 80, "only {checked} panels found");
    let problems: Vec<String> = panels
        .iter()
        .flat_map(|(f, p)| {
            panel_problems(p)
                .into_iter()
                .map(move |x| format!("{f}: {x}"))
        })
        .collect();
    assert!(
        problems.is_empty(),
        "panels (edit dashboards/generate.py and regenerate):\n{}",
        problems.join("\n")
    );
}

/// A `prometheus` server on 127.0.0.1 with its TSDB in a scratch directory, killed on drop.
struct Prometheus {
    child: std::process::Child,
    addr: SocketAddr,
    _dir: tempfile::TempDir,
}

impl Prometheus {
    fn start(scrape: SocketAddr) -> Prometheus {
        let dir = crate::common::shm_dir();
        let rules_dir = dir.path().join("rules");
        std::fs::create_dir_all(&rules_dir).expect("rules dir");
        for f in [
            "nvsoak-recording.yml",
            "nvsoak-alerts.yml",
            "nvsoak-verdict-alerts.yml",
        ] {
            // Evaluate every second, like the 1 s scrape, so the test needs seconds, not minutes.
            let text =
                std::fs::read_to_string(repo().join("dashboards/rules").join(f)).expect("rules");
            std::fs::write(
                rules_dir.join(f),
                text.replace("interval: 15s", "interval: 1s"),
            )
            .expect("write rules");
        }
        let port = crate::common::free_port();
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().expect("addr");
        let cfg = format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\nrule_files:\n  - {}/*.yml\nscrape_configs:\n  - job_name: nvsoak\n    static_configs:\n      - targets: [\"{scrape}\"]\n",
            rules_dir.display()
        );
        let cfg_path = dir.path().join("prometheus.yml");
        std::fs::write(&cfg_path, cfg).expect("write prometheus.yml");
        let log = std::fs::File::create(dir.path().join("prometheus.log")).expect("log file");
        let child = std::process::Command::new("prometheus")
            .arg(format!("--config.file={}", cfg_path.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address={addr}"))
            .arg("--storage.tsdb.retention.time=1h")
            .stdout(std::process::Stdio::null())
            .stderr(log)
            .spawn()
            .expect("prometheus missing: apt-get install -y prometheus");
        let p = Prometheus {
            child,
            addr,
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while !matches!(crate::common::http_get(p.addr, "/-/ready"), Ok((200, _))) {
            assert!(
                Instant::now() < deadline,
                "prometheus not ready: {}",
                p.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        p
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self._dir.path().join("prometheus.log")).unwrap_or_default()
    }

    /// Instant query; Err on an API error, Ok(number of series) otherwise.
    fn query(&self, expr: &str) -> Result<Vec<serde_json::Value>, String> {
        let path = format!("/api/v1/query?query={}", percent_encode(expr));
        let (code, body) = crate::common::http_get(self.addr, &path).map_err(|e| e.to_string())?;
        let v: serde_json::Value =
            serde_json::from_str(&body).map_err(|e| format!("HTTP {code}: {e}: {body}"))?;
        if v["status"] != "success" {
            return Err(format!("HTTP {code}: {}", v["error"]));
        }
        Ok(v["data"]["result"].as_array().cloned().unwrap_or_default())
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len() * 3);
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A real Prometheus scrapes a real nvsoak (sweep, then a mixed soak with steady-state rounds and
/// inline verify on a /dev/shm file) and evaluates every dashboard panel query and every
/// recording rule through its HTTP API. Each returns data, except queries that need an NVMe
/// controller (NVME_ONLY); a query naming a metric the daemon does not export fails.
#[test]
fn prometheus_evaluates_every_dashboard_query_and_recording_rule() {
    let d = crate::common::Daemon::start(
        r#"
[state]
dir = "{dir}/state"
[stats]
interval = "1s"
[health]
enabled = false
[[target]]
name = "t0"
path = "{dir}/t0.dat"
size = "64MiB"
verify = "inline"
[[target.phase]]
kind = "sweep"
profile = "4k-random-read"
iodepth = 8
max_duration = "2s"
point_duration = "1s"
points = [50, 100]
[[target.phase]]
kind = "soak"
job = { name = "mixed", read = 70, bs = "4k", access = "random", iodepth = 4 }
duration = "300s"
steady_round = "1s"
steady_window = 3
# t1 FAILs once its sweep ends (no sweep of a file reaches 10^9 IOPS below 1 ms), so the verdict
# panels for failing drives and the verdict alerts have a target to show.
[[target]]
name = "t1"
path = "{dir}/t1.dat"
size = "16MiB"
[target.gates]
min_sub_1ms_iops = 1000000000
[[target.phase]]
kind = "sweep"
profile = "4k-random-read"
iodepth = 1
max_duration = "2s"
point_duration = "1s"
points = [50]
"#,
    );
    let prom = Prometheus::start(d.addr);

    let recorded: Vec<String> = rules("dashboards/rules/nvsoak-recording.yml")
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    let mut queries = dashboard_queries();
    for (name, expr) in rules("dashboards/rules/nvsoak-recording.yml") {
        queries.push(Query {
            origin: format!("recording rule {name} (expr)"),
            expr: expr.clone(),
        });
        queries.push(Query {
            origin: format!("recording rule {name} (series)"),
            expr: name,
        });
    }

    // A query is NVMe-only when it names an NVMe-only series, directly or through a recording
    // rule built on one.
    let rule_exprs: std::collections::BTreeMap<String, String> =
        rules("dashboards/rules/nvsoak-recording.yml")
            .into_iter()
            .collect();
    // No SATA drive here either: queries on ata_* series return nothing.
    let nvme_only =
        |expr: &str| needs_nvme(expr, &rule_exprs) || needs_ata(expr) || needs_pcie(expr);

    // Wait (bounded) until every query that must return data does: the sweep has to finish,
    // the soak to run steady-state rounds, and rate() windows to fill.
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut pending: Vec<&Query> = queries.iter().filter(|q| !nvme_only(&q.expr)).collect();
    let must = pending.len();
    let mut errors = Vec::new();
    while !pending.is_empty() && Instant::now() < deadline {
        let mut still = Vec::new();
        for q in pending {
            match prom.query(&q.expr) {
                Ok(r) if !r.is_empty() => {}
                Ok(_) => still.push(q),
                Err(e) => errors.push(format!("{}: {e}\n  {}", q.origin, q.expr)),
            }
        }
        assert!(errors.is_empty(), "queries failed:\n{}", errors.join("\n"));
        pending = still;
        if !pending.is_empty() {
            std::thread::sleep(Duration::from_millis(500));
        }
    }
    // Every name a query selects is exported by nvsoak (seen by Prometheus during this run),
    // NVMe-only, counted only once it is non-zero (CONDITIONAL), or a recording rule.
    let exported: std::collections::BTreeSet<String> = {
        let (code, body) =
            crate::common::http_get(prom.addr, "/api/v1/label/__name__/values").expect("names");
        let v: serde_json::Value =
            serde_json::from_str(&body).unwrap_or_else(|e| panic!("HTTP {code}: {e}"));
        v["data"]
            .as_array()
            .expect("names")
            .iter()
            .filter_map(|n| n.as_str())
            .map(|n| family(n).to_string())
            .collect()
    };
    let mut problems = Vec::new();
    for q in &queries {
        for n in metric_names(&q.expr) {
            let f = family(&n);
            if !(exported.contains(f)
                || NVME_ONLY.contains(&f)
                || ATA_ONLY.contains(&f)
                || PCIE_ONLY.contains(&f)
                || CONDITIONAL.contains(&f)
                || recorded.iter().any(|r| r == f))
            {
                problems.push(format!(
                    "{}: names {n}, which nvsoak does not export",
                    q.origin
                ));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "{}\nexported: {exported:?}",
        problems.join("\n")
    );
    for c in CONDITIONAL {
        assert!(AGREED_WORKLOAD.contains(c), "{c}");
    }
    assert!(
        pending.is_empty(),
        "{} of {must} queries returned no data within 90 s:\n{}\nprometheus log:\n{}",
        pending.len(),
        pending
            .iter()
            .map(|q| format!("{}: {}", q.origin, q.expr))
            .collect::<Vec<_>>()
            .join("\n"),
        prom.log()
            .lines()
            .rev()
            .take(20)
            .collect::<Vec<_>>()
            .join("\n")
    );
    // NVMe-only queries must still be valid PromQL against this server.
    for q in queries.iter().filter(|q| nvme_only(&q.expr)) {
        if let Err(e) = prom.query(&q.expr) {
            panic!("{}: {e}", q.origin);
        }
    }
    // nvsoak's `workload` label arrives unchanged (a label Prometheus sets itself, such as
    // `job`, would be rewritten to `exported_<name>`): the dashboards group by it.
    let r = prom
        .query("count by (workload) (nvsoak_read_ops_total)")
        .expect("query");
    assert!(
        r.iter().any(|s| s["metric"]["workload"] == "mixed"),
        "no workload=\"mixed\": {r:?}"
    );
    let r = prom
        .query(r#"{__name__=~"nvsoak_.*", exported_job=~".+"}"#)
        .expect("query");
    assert!(r.is_empty(), "nvsoak series with exported_job: {r:?}");
    let r = prom
        .query(r#"count by (job) ({__name__=~"nvsoak_.*"})"#)
        .expect("query");
    assert!(
        r.len() == 1 && r[0]["metric"]["job"] == "nvsoak",
        "nvsoak series must carry only the scrape job: {r:?}"
    );
    // verify = "inline": every kind is exported from the start, at 0 on a healthy file.
    let r = prom
        .query(r#"nvsoak_verify_errors_total{target="t0"}"#)
        .expect("query");
    let mut kinds: Vec<&str> = r
        .iter()
        .filter_map(|s| s["metric"]["kind"].as_str())
        .collect();
    kinds.sort();
    assert_eq!(
        kinds,
        [
            "bad_checksum",
            "stale_generation",
            "unreadable",
            "wrong_offset"
        ],
        "{r:?}"
    );
    assert!(
        r.iter().all(|s| s["value"][1] == "0"),
        "verify errors on a healthy file: {r:?}"
    );
    // A file target: nvsoak_target_info with its path and no controller, so it is listed with
    // the file targets and joins no drive row.
    let r = prom
        .query(r#"nvsoak_target_info{target="t0"}"#)
        .expect("query");
    assert!(
        r.len() == 1
            && r[0]["metric"]["path"]
                .as_str()
                .is_some_and(|p| p.ends_with("/t0.dat"))
            && r[0]["metric"]["device"].as_str().unwrap_or("").is_empty(),
        "{r:?}"
    );
    assert!(
        prom.query("nvme:target:info").expect("query").is_empty(),
        "a file target joined a drive"
    );
    // The qualification report page is served next to /metrics.
    let (code, body) = crate::common::http_get(d.addr, "/report").expect("/report");
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("nvsoak qualification report"), "{body}");
    // The verdict alerts: t1 FAILed sub_1ms_iops, and both alerts name its host (and the drive's
    // serial and model, empty for a file); t0 runs, and a running plan raises no verdict alert.
    let deadline = Instant::now() + Duration::from_secs(30);
    let firing = |q: &str| {
        prom.query(q)
            .unwrap_or_else(|e| panic!("{q}: {e}"))
            .into_iter()
            .filter(|a| a["metric"]["alertstate"] == "firing")
            .collect::<Vec<_>>()
    };
    let (failed, gate) = loop {
        let failed = firing(r#"ALERTS{alertname="NvsoakQualificationFailed", target="t1"}"#);
        let gate = firing(
            r#"ALERTS{alertname="NvsoakQualificationGateFailed", target="t1", gate="sub_1ms_iops"}"#,
        );
        if (!failed.is_empty() && !gate.is_empty()) || Instant::now() > deadline {
            break (failed, gate);
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    for (name, alerts) in [
        ("NvsoakQualificationFailed", &failed),
        ("GateFailed", &gate),
    ] {
        assert!(
            alerts.len() == 1
                && alerts[0]["metric"]["host"]
                    .as_str()
                    .is_some_and(|h| !h.is_empty())
                && alerts[0]["metric"]["severity"].is_string(),
            "{name} for t1 not firing with its host: {alerts:?}\nprometheus log:\n{}",
            prom.log()
        );
    }
    let quiet = prom
        .query(r#"ALERTS{alertname=~"NvsoakQualification.*", target="t0"}"#)
        .expect("ALERTS");
    assert!(
        quiet.is_empty(),
        "a running plan raised a verdict alert: {quiet:?}"
    );
    // The exporter-down alert is quiet while the scrape works.
    let up = prom.query("up{job=\"nvsoak\"}").expect("query");
    assert_eq!(
        up.first().map(|s| s["value"][1].clone()),
        Some(serde_json::json!("1"))
    );
    let exempt = queries.iter().filter(|q| nvme_only(&q.expr)).count();
    eprintln!("{must} queries returned data; {exempt} NVMe-only queries parsed and evaluated");
    assert!(must > 50, "only {must} queries had to return data");
}

/// Health series from the replay transport (the hand-built SMART, error, firmware and OCP C0h
/// fixtures on a fake sysfs tree), served through `http::bind` and scraped by a real
/// Prometheus: the NVMe-only dashboard queries and recording rules must return data too, and
/// the drive alerts must carry the serial, so a wrong health label or name fails here rather
/// than only in the VM harness.
mod replayed_health {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::time::{Duration, Instant};

    use nvsoak::health::poller::Opener;
    use nvsoak::health::{HealthHandle, HostIo, HostIoSource, spawn_with};
    use nvsoak::http::{self, App, ServerOptions};
    use nvsoak::nvme::AdminTransport;
    use nvsoak::nvme::discover::Controller;

    use super::{Prometheus, Query, dashboard_queries, needs_ata, needs_nvme, needs_pcie, rules};

    /// Queries that cannot return data from these fixtures, and why.
    const NOT_IN_FIXTURES: &[(&str, &str)] = &[(
        "nvsoak-device.json: panel \"IOPS while throttled and not\" ref B",
        "the OCP fixture throttles from the first poll, so no unthrottled IOPS is ever measured",
    )];

    /// A workload that writes 64 MiB between polls.
    struct Writes(AtomicU64);
    impl HostIoSource for Writes {
        fn host_io(&self) -> Vec<HostIo> {
            let w = self.0.fetch_add(64 << 20, Ordering::Relaxed);
            vec![HostIo {
                path: "/dev/nvme0n1".into(),
                written_bytes: w,
                write_ops: w / 4096,
                iops: 1234.0,
                ..Default::default()
            }]
        }
    }

    struct HealthApp(HealthHandle);
    impl App for HealthApp {
        fn metrics(&self) -> String {
            let mut families = nvsoak::metrics::health::families(&self.0.snapshot());
            families.extend(nvsoak::metrics::workload::families(
                &[namespace_target()],
                &[],
                &nvsoak::metrics::workload::DaemonInfo {
                    version: "test",
                    revision: "test",
                    uptime_secs: 1.0,
                    auth: None,
                    refused: Vec::new(),
                },
            ));
            nvsoak::metrics::encode_text(&families).unwrap_or_default()
        }
        fn status_page(&self) -> String {
            String::new()
        }
    }

    /// A soak target on the replayed controller's namespace, so the fleet overview's drive rows
    /// (target-side series joined through nvsoak_target_info) have something to join.
    fn namespace_target() -> nvsoak::workload::scheduler::TargetSnapshot {
        let job = nvsoak::workload::scheduler::JobStats {
            steady: Some(Default::default()),
            active: true,
            ..Default::default()
        };
        nvsoak::workload::scheduler::TargetSnapshot {
            name: "ns0".into(),
            path: "/dev/nvme0n1".into(),
            is_block: true,
            phase: "soak".into(),
            profile: "4k-random-read".into(),
            running: true,
            up: true,
            jobs: [("4k-random-read".to_string(), job)].into_iter().collect(),
            ..Default::default()
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn prometheus_evaluates_nvme_queries_on_replayed_health() {
        let root = tempfile::tempdir().expect("tempdir");
        let dir = root.path().join("class/nvme/nvme0");
        std::fs::create_dir_all(dir.join("nvme0n1")).expect("mkdir");
        for (f, v) in [
            ("serial", "SN-HANDBUILT-0001"),
            ("model", "HWE62P43032M000N nvsoak handbuilt model"),
            ("firmware_rev", "FW1.2.3"),
            ("nvme0n1/nsid", "1"),
        ] {
            std::fs::write(dir.join(f), format!("{v}\n")).expect("sysfs");
        }
        let t = crate::common::handbuilt_replay();
        let opener: Opener = {
            let t = Arc::clone(&t);
            Arc::new(move |_c: &Controller| Ok(Box::new(Arc::clone(&t)) as Box<dyn AdminTransport>))
        };
        let mut settings = nvsoak::config::builtin_default().health;
        settings.poll_interval = Duration::from_secs(1);
        settings.rescan_interval = Duration::ZERO;
        // Rated figures so the endurance derivations have something to work with.
        settings.devices = vec![nvsoak::config::DeviceRatingOverride {
            matcher: "nvme0".into(),
            rated_tbw_bytes: Some(7_000_000_000_000_000),
            rated_dwpd: None,
            warranty_years: Some(5.0),
            capacity_bytes: None,
        }];
        let (_stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let h = spawn_with(
            settings,
            Arc::new(Writes(AtomicU64::new(0))),
            stop_rx,
            root.path().to_path_buf(),
            opener,
        );
        h.wait_for_polls(2, Duration::from_secs(20))
            .await
            .expect("two polls");

        let server = http::bind(
            ServerOptions {
                listen: "127.0.0.1:0".parse().expect("addr"),
                web_config: None,
                max_connections: 0,
            },
            Arc::new(HealthApp(h.clone())),
        )
        .await
        .expect("bind");
        let addr = server.local_addr();
        let (stop, rx) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(server.run(async move {
            let _ = rx.await;
        }));

        let prom = tokio::task::spawn_blocking(move || Prometheus::start(addr))
            .await
            .expect("prometheus");
        let rule_exprs: std::collections::BTreeMap<String, String> =
            rules("dashboards/rules/nvsoak-recording.yml")
                .into_iter()
                .collect();
        // Queries that also need a SATA drive return nothing here (no ATA disk is replayed).
        let nvme_only =
            |expr: &str| needs_nvme(expr, &rule_exprs) && !needs_ata(expr) && !needs_pcie(expr);
        let mut queries: Vec<Query> = dashboard_queries()
            .into_iter()
            .filter(|q| nvme_only(&q.expr))
            .collect();
        for (name, expr) in &rule_exprs {
            if nvme_only(expr) {
                queries.push(Query {
                    origin: format!("recording rule {name}"),
                    expr: name.clone(),
                });
            }
        }
        let must: Vec<Query> = queries
            .into_iter()
            .filter(|q| !NOT_IN_FIXTURES.iter().any(|(o, _)| q.origin == *o))
            .collect();
        let total = must.len();
        let pending = tokio::task::spawn_blocking(move || {
            // Observed DWPD needs about a minute of write history; the rest is there in seconds.
            let deadline = Instant::now() + Duration::from_secs(150);
            let mut pending = must;
            while !pending.is_empty() && Instant::now() < deadline {
                let mut still = Vec::new();
                for q in pending {
                    match prom.query(&q.expr) {
                        Ok(r) if !r.is_empty() => {}
                        Ok(_) => still.push(q),
                        Err(e) => panic!("{}: {e}\n  {}", q.origin, q.expr),
                    }
                }
                pending = still;
                if !pending.is_empty() {
                    std::thread::sleep(Duration::from_millis(500));
                }
            }
            // The fixture's critical warning (spare, reliability, PMR bits) raises the alert,
            // with the serial and model joined from nvme_info (pending: its `for:` is 1m).
            let alerts = prom
                .query(r#"ALERTS{alertname="NvmeCriticalWarning", condition="spare"}"#)
                .expect("ALERTS");
            assert!(
                alerts
                    .iter()
                    .any(|a| a["metric"]["serial"] == "SN-HANDBUILT-0001"
                        && a["metric"]["device"] == "nvme0"
                        && a["metric"]["severity"] == "critical"),
                "NvmeCriticalWarning not raised with serial and device: {alerts:?}"
            );
            pending
                .into_iter()
                .map(|q| format!("{}: {}", q.origin, q.expr))
                .collect::<Vec<_>>()
        })
        .await
        .expect("queries");
        let _ = stop.send(());
        let _ = task.await;
        assert!(
            pending.is_empty(),
            "{} of {total} NVMe queries returned no data within 150 s:\n{}",
            pending.len(),
            pending.join("\n")
        );
        eprintln!("{total} NVMe-only queries returned data from replayed health");
        assert!(total > 50, "only {total} NVMe queries");
    }
}

/// One attacker of the reconnect storm: from `src`, connect, handshake TLS, send a new wrong
/// password, and start over, until `stop`.
async fn storm_attacker(
    src: std::net::Ipv4Addr,
    addr: SocketAddr,
    cc: Arc<rustls::ClientConfig>,
    stop: Arc<AtomicBool>,
) {
    let mut k = 0u64;
    while !stop.load(Ordering::Relaxed) {
        k += 1;
        let attempt = async {
            let sock = tokio::net::TcpSocket::new_v4().map_err(|e| e.to_string())?;
            sock.bind(SocketAddr::from((src, 0)))
                .map_err(|e| e.to_string())?;
            let s = sock.connect(addr).await.map_err(|e| e.to_string())?;
            let name = ServerName::try_from("localhost").map_err(|e| e.to_string())?;
            let s = tokio_rustls::TlsConnector::from(cc.clone())
                .connect(name, s)
                .await
                .map_err(|e| e.to_string())?;
            let pw = format!("guess-{src}-{k}");
            request_over(s, "GET", "/metrics", Some(("prometheus", &pw))).await
        };
        if tokio::time::timeout(Duration::from_secs(5), attempt)
            .await
            .is_err()
        {
            continue;
        }
    }
}

/// Issue 28, break 4, the reconnect storm: 98 attackers from 49 addresses (127.0.0.2 to .50),
/// on their own runtime, reconnect over TLS as fast as they can, each time with a new wrong
/// password. The handshake rate (per address, and for strangers together) turns most of them
/// away before their handshake, and Prometheus on 127.0.0.1, which authenticated before and
/// opens a new TLS connection for every scrape, gets 200 on at least 19 of 20 scrapes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tls_reconnect_storm_from_many_addresses_leaves_prometheus_through() {
    let pki = Pki::new();
    let hash = bcrypt::hash("right", 10).expect("bcrypt");
    let cfg = pki.web_config(
        "web.yml",
        &format!(
            "tls_server_config:\n  cert_file: server.pem\n  key_file: server.key\nbasic_auth_users:\n  prometheus: {hash}\n"
        ),
    );
    let srv = start(Some(cfg), 0).await;
    let cc = client_config(&pki, ClientCert::None, V12_13);
    let scrape = async || {
        tokio::time::timeout(
            Duration::from_secs(10),
            tls(
                srv.addr,
                cc.clone(),
                "/metrics",
                Some(("prometheus", "right")),
            ),
        )
        .await
        .unwrap_or_else(|_| Err("timed out".into()))
    };
    let r = scrape().await.expect("first scrape");
    assert_eq!(r.status, StatusCode::OK);

    let stop = Arc::new(AtomicBool::new(false));
    let storm: Vec<_> = (0..2)
        .map(|_| {
            let (stop, cc, addr) = (stop.clone(), cc.clone(), srv.addr);
            std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("attackers' runtime");
                rt.block_on(async move {
                    let mut set = tokio::task::JoinSet::new();
                    for i in 0..49u8 {
                        let src = std::net::Ipv4Addr::new(127, 0, 0, 2 + i);
                        set.spawn(storm_attacker(src, addr, cc.clone(), stop.clone()));
                    }
                    while set.join_next().await.is_some() {}
                });
            })
        })
        .collect();
    let guard = srv.guard.clone();
    assert!(
        eventually(Duration::from_secs(60), async || guard
            .stats()
            .handshakes_limited
            >= 100)
        .await,
        "the storm was never rate-limited: {:?}",
        guard.stats()
    );
    let mut ok = 0;
    let mut failed = Vec::new();
    for round in 0..20 {
        match scrape().await {
            Ok(r) if r.status == StatusCode::OK => ok += 1,
            other => failed.push(format!("round {round}: {:?}", other.map(|r| r.status))),
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    stop.store(true, Ordering::Relaxed);
    for t in storm {
        t.join().expect("storm thread");
    }
    assert!(
        ok >= 19,
        "the right password got through on {ok} of 20 scrapes in the storm: {failed:?}"
    );
    let st = guard.stats();
    assert!(st.failures >= 1, "the storm never got a denial: {st:?}");
    assert!(srv.stop().await < Duration::from_secs(5));
}
