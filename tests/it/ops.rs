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
}

/// A running server; dropping it stops the server.
struct Running {
    addr: SocketAddr,
    app: Arc<TestApp>,
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
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(server.run(async move {
        let _ = rx.await;
    }));
    Running {
        addr,
        app,
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
