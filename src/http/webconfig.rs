//! The web config file, in Prometheus exporter-toolkit's YAML format (`--web.config.file`):
//! `tls_server_config` (TLS and client certificates), `basic_auth_users` (bcrypt hashes) and
//! `http_server_config.headers` (extra response headers).
//!
//! Loading validates everything up front: certificates and keys are parsed, bcrypt hashes are
//! checked for shape, and each error names the file and the key. Relative paths are resolved
//! against the directory of the web config file, as exporter-toolkit does.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::server::WebPkiClientVerifier;
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{DigitallySignedStruct, DistinguishedName, RootCertStore, SignatureScheme};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, UnixTime};
use serde::Deserialize;
use thiserror::Error;

use super::HttpError;
use super::auth::BasicAuth;
use crate::util::bounded;

/// The validated web config: what the server needs, ready to use.
#[derive(Clone, Default)]
pub struct WebConfig {
    /// TLS server config; `None` serves plain HTTP.
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// Basic auth users; `None` serves without authentication.
    pub auth: Option<Arc<BasicAuth>>,
    /// Extra headers added to every response (`http_server_config.headers`).
    pub headers: Vec<(hyper::header::HeaderName, hyper::header::HeaderValue)>,
    /// The files this config was built from (itself, certificates, keys, CAs), watched for
    /// changes by the server.
    pub files: Vec<PathBuf>,
}

impl std::fmt::Debug for WebConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebConfig")
            .field("tls", &self.tls.is_some())
            .field("auth_users", &self.auth.as_ref().map(|a| a.user_count()))
            .field("headers", &self.headers)
            .field("files", &self.files)
            .finish()
    }
}

#[derive(Debug, Default, Deserialize)]
struct RawWebConfig {
    tls_server_config: Option<RawTls>,
    http_server_config: Option<RawHttp>,
    basic_auth_users: Option<BTreeMap<String, String>>,
    #[serde(flatten)]
    other: BTreeMap<String, yaml_serde::Value>,
}

#[derive(Debug, Default, Deserialize)]
struct RawTls {
    cert_file: Option<String>,
    key_file: Option<String>,
    client_auth_type: Option<String>,
    client_ca_file: Option<String>,
    min_version: Option<String>,
    max_version: Option<String>,
    #[serde(flatten)]
    other: BTreeMap<String, yaml_serde::Value>,
}

#[derive(Debug, Default, Deserialize)]
struct RawHttp {
    headers: Option<BTreeMap<String, String>>,
    http2: Option<bool>,
    #[serde(flatten)]
    other: BTreeMap<String, yaml_serde::Value>,
}

/// exporter-toolkit's `client_auth_type` values (Go's `tls.ClientAuthType` names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientAuthType {
    NoClientCert,
    RequestClientCert,
    RequireAnyClientCert,
    VerifyClientCertIfGiven,
    RequireAndVerifyClientCert,
}

impl ClientAuthType {
    fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "NoClientCert" | "" => ClientAuthType::NoClientCert,
            "RequestClientCert" => ClientAuthType::RequestClientCert,
            "RequireAnyClientCert" => ClientAuthType::RequireAnyClientCert,
            "VerifyClientCertIfGiven" => ClientAuthType::VerifyClientCertIfGiven,
            "RequireAndVerifyClientCert" => ClientAuthType::RequireAndVerifyClientCert,
            _ => return None,
        })
    }
}

struct Ctx<'a> {
    file: &'a Path,
    dir: PathBuf,
}

impl Ctx<'_> {
    fn err(&self, key: &str, reason: impl Into<String>) -> HttpError {
        HttpError::WebConfig {
            file: self.file.display().to_string(),
            key: key.to_string(),
            reason: reason.into(),
        }
    }

    fn resolve(&self, p: &str) -> PathBuf {
        let p = Path::new(p);
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            self.dir.join(p)
        }
    }
}

fn unsupported(
    ctx: &Ctx<'_>,
    prefix: &str,
    other: &BTreeMap<String, yaml_serde::Value>,
) -> Result<(), HttpError> {
    if let Some(key) = other.keys().next() {
        let full = format!("{prefix}{key}");
        let reason = match key.as_str() {
            "cipher_suites" | "curve_preferences" | "prefer_server_cipher_suites" => {
                "not supported: rustls chooses its own safe cipher suites and curves; remove the key"
            }
            "cert" | "key" | "client_ca" => {
                "inline PEM is not supported; put it in a file and use the *_file key"
            }
            _ => {
                "unknown key; see exporter-toolkit's web-configuration.md for the keys nvsoak accepts"
            }
        };
        return Err(ctx.err(&full, reason));
    }
    Ok(())
}

/// The crypto provider the server uses (ring).
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Loads and validates a web config file.
pub fn load(file: &Path) -> Result<WebConfig, HttpError> {
    let bytes = read_regular(file, "web config file").map_err(|reason| HttpError::WebConfig {
        file: file.display().to_string(),
        key: "(file)".into(),
        reason: format!("{reason}; check --web.config.file / exporter.web_config_file"),
    })?;
    let text = String::from_utf8(bytes).map_err(|e| HttpError::WebConfig {
        file: file.display().to_string(),
        key: "(file)".into(),
        reason: format!("not UTF-8 text: {e}"),
    })?;
    parse(file, &text)
}

/// A web config, certificate or key file that could not be read, or holds no certificate.
#[derive(Debug, Error)]
pub enum ReadError {
    #[error("cannot read the {what} {}: {source}", path.display())]
    Io {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: bad PEM certificate: {reason}", path.display())]
    BadPem { path: PathBuf, reason: String },
    #[error("{}: no PEM certificate found (expected -----BEGIN CERTIFICATE-----)", path.display())]
    NoCertificate { path: PathBuf },
}

/// Reads a file that must be a regular file, through [`bounded`]: opened with `O_NONBLOCK` and
/// checked with `fstat` before any read, so a FIFO, socket or device named by mistake (or
/// swapped in) is refused at once instead of blocking the thread, and never more than
/// [`bounded::WEB_LIMIT`] bytes. Warns when group or others may write it.
pub fn read_regular(path: &Path, what: &'static str) -> Result<Vec<u8>, ReadError> {
    use std::os::unix::fs::PermissionsExt;
    let (buf, meta) =
        bounded::read_with_meta(path, bounded::WEB_LIMIT).map_err(|source| ReadError::Io {
            what,
            path: path.to_path_buf(),
            source,
        })?;
    if meta.permissions().mode() & 0o022 != 0 {
        tracing::warn!(file = %path.display(), mode = format!("{:o}", meta.permissions().mode() & 0o7777),
            "the {what} is writable by group or others; anyone who can write it controls the exporter's TLS and authentication");
    }
    Ok(buf)
}

/// bcrypt costs accepted in `basic_auth_users`: below 4 is not bcrypt; above
/// [`MAX_BCRYPT_COST`] one check ties up a core for seconds (each step doubles it).
pub const MIN_BCRYPT_COST: u32 = 4;
pub const MAX_BCRYPT_COST: u32 = 14;
/// Below this cost a hash is accepted with a warning (exporter-toolkit's docs suggest 10+).
pub const WARN_BCRYPT_COST: u32 = 10;

/// Parses and validates web config text; `file` names it in errors and anchors relative paths.
pub fn parse(file: &Path, text: &str) -> Result<WebConfig, HttpError> {
    let dir = file
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."));
    let ctx = Ctx { file, dir };
    let raw: RawWebConfig = if text.trim().is_empty() {
        RawWebConfig::default()
    } else {
        yaml_serde::from_str(text).map_err(|e| {
            let key = e
                .location()
                .map(|l| format!("(line {}, column {})", l.line(), l.column()))
                .unwrap_or_else(|| "(yaml)".into());
            ctx.err(&key, format!("invalid YAML: {e}"))
        })?
    };
    unsupported(&ctx, "", &raw.other)?;

    let mut cfg = WebConfig {
        files: vec![file.to_path_buf()],
        ..WebConfig::default()
    };
    if let Some(tls) = raw.tls_server_config {
        cfg.tls = Some(Arc::new(build_tls(&ctx, tls, &mut cfg.files)?));
    }
    if let Some(http) = raw.http_server_config {
        unsupported(&ctx, "http_server_config.", &http.other)?;
        if http.http2 == Some(true) {
            // Accepted for compatibility: nvsoak serves HTTP/1.1, which Prometheus uses anyway.
        }
        for (name, value) in http.headers.unwrap_or_default() {
            let key = format!("http_server_config.headers.{name}");
            let n = hyper::header::HeaderName::from_bytes(name.as_bytes())
                .map_err(|e| ctx.err(&key, format!("invalid header name: {e}")))?;
            let v = hyper::header::HeaderValue::from_str(&value)
                .map_err(|e| ctx.err(&key, format!("invalid header value: {e}")))?;
            cfg.headers.push((n, v));
        }
    }
    if let Some(users) = raw.basic_auth_users {
        let mut checked = Vec::with_capacity(users.len());
        for (user, hash) in users {
            let key = format!("basic_auth_users.{user}");
            if user.contains(':') {
                return Err(ctx.err(&key, "a user name cannot contain ':'"));
            }
            let Ok(parts) = hash.parse::<bcrypt::HashParts>() else {
                return Err(ctx.err(
                    &key,
                    "not a bcrypt hash; generate one with `htpasswd -nBC 10 USER` and paste the part after ':'",
                ));
            };
            let cost = parts.get_cost();
            if !(MIN_BCRYPT_COST..=MAX_BCRYPT_COST).contains(&cost) {
                return Err(ctx.err(
                    &key,
                    format!(
                        "bcrypt cost {cost} is outside {MIN_BCRYPT_COST}..={MAX_BCRYPT_COST} (below {MIN_BCRYPT_COST} is not bcrypt; above {MAX_BCRYPT_COST} one check takes seconds of CPU); generate one with `htpasswd -nBC 10 USER`"
                    ),
                ));
            }
            if cost < WARN_BCRYPT_COST {
                tracing::warn!(file = %file.display(), key = %key, cost,
                    "bcrypt cost below {WARN_BCRYPT_COST}: cheap to brute-force; consider `htpasswd -nBC 10 USER`");
            }
            checked.push((user, hash));
        }
        if !checked.is_empty() {
            cfg.auth = Some(Arc::new(BasicAuth::new(checked)));
        }
    }
    Ok(cfg)
}

fn tls_version(
    ctx: &Ctx<'_>,
    key: &str,
    v: &str,
) -> Result<&'static rustls::SupportedProtocolVersion, HttpError> {
    match v {
        "TLS12" => Ok(&rustls::version::TLS12),
        "TLS13" => Ok(&rustls::version::TLS13),
        "TLS10" | "TLS11" => Err(ctx.err(
            key,
            format!("{v} is not supported (rustls implements TLS12 and TLS13); use TLS12"),
        )),
        _ => Err(ctx.err(
            key,
            format!("unknown TLS version {v:?}; use TLS12 or TLS13"),
        )),
    }
}

fn build_tls(
    ctx: &Ctx<'_>,
    raw: RawTls,
    files: &mut Vec<PathBuf>,
) -> Result<rustls::ServerConfig, HttpError> {
    unsupported(ctx, "tls_server_config.", &raw.other)?;
    let key_key = "tls_server_config.key_file";
    let (certs, key) = cert_and_key(ctx, &raw, files)?;
    let (auth_type, roots) = client_auth(ctx, &raw, files)?;
    let provider = provider();
    let verifier = client_verifier(ctx, auth_type, roots, &provider)?;
    let versions = protocol_versions(ctx, &raw)?;

    let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&versions)
        .map_err(|e| ctx.err("tls_server_config.min_version", format!("{e}")))?
        .with_client_cert_verifier(verifier)
        .with_single_cert(certs, key)
        .map_err(|e| {
            ctx.err(
                key_key,
                format!("the key does not match the certificate, or is unusable: {e}"),
            )
        })?;
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(cfg)
}

/// The server certificate chain and private key (`cert_file`, `key_file`), both required.
fn cert_and_key(
    ctx: &Ctx<'_>,
    raw: &RawTls,
    files: &mut Vec<PathBuf>,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), HttpError> {
    let cert_key = "tls_server_config.cert_file";
    let key_key = "tls_server_config.key_file";
    let cert_file = raw
        .cert_file
        .clone()
        .filter(|s| !s.is_empty())
        .ok_or_else(|| ctx.err(cert_key, "missing: TLS needs a certificate file (PEM)"))?;
    let key_file = raw
        .key_file
        .clone()
        .filter(|s| !s.is_empty())
        .ok_or_else(|| ctx.err(key_key, "missing: TLS needs a private key file (PEM)"))?;

    let cert_path = ctx.resolve(&cert_file);
    files.push(cert_path.clone());
    let certs = load_certs(&cert_path).map_err(|r| ctx.err(cert_key, r.to_string()))?;
    let key_path = ctx.resolve(&key_file);
    files.push(key_path.clone());
    let key_pem =
        read_regular(&key_path, "TLS key file").map_err(|r| ctx.err(key_key, r.to_string()))?;
    let key = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| {
        ctx.err(
            key_key,
            format!(
                "cannot load a private key from {}: {e}; expected a PEM PKCS#8, PKCS#1 or SEC1 key",
                key_path.display()
            ),
        )
    })?;
    Ok((certs, key))
}

/// `client_auth_type` and the client CAs of `client_ca_file`.
fn client_auth(
    ctx: &Ctx<'_>,
    raw: &RawTls,
    files: &mut Vec<PathBuf>,
) -> Result<(ClientAuthType, Option<Arc<RootCertStore>>), HttpError> {
    let auth_type_key = "tls_server_config.client_auth_type";
    let auth_type = match raw.client_auth_type.as_deref() {
        None => ClientAuthType::NoClientCert,
        Some(s) => ClientAuthType::parse(s).ok_or_else(|| {
            ctx.err(
                auth_type_key,
                format!("unknown value {s:?}; use NoClientCert, RequestClientCert, RequireAnyClientCert, VerifyClientCertIfGiven or RequireAndVerifyClientCert"),
            )
        })?,
    };
    let ca_key = "tls_server_config.client_ca_file";
    let roots = match raw.client_ca_file.as_deref().filter(|s| !s.is_empty()) {
        None => None,
        Some(f) => {
            let p = ctx.resolve(f);
            files.push(p.clone());
            let mut roots = RootCertStore::empty();
            for c in load_certs(&p).map_err(|r| ctx.err(ca_key, r.to_string()))? {
                roots.add(c).map_err(|e| {
                    ctx.err(
                        ca_key,
                        format!("{}: not a usable CA certificate: {e}", p.display()),
                    )
                })?;
            }
            Some(Arc::new(roots))
        }
    };
    Ok((auth_type, roots))
}

/// The client certificate verifier for `auth_type`, refusing CAs without verification and
/// verification without CAs.
fn client_verifier(
    ctx: &Ctx<'_>,
    auth_type: ClientAuthType,
    roots: Option<Arc<RootCertStore>>,
    provider: &Arc<CryptoProvider>,
) -> Result<Arc<dyn ClientCertVerifier>, HttpError> {
    let ca_key = "tls_server_config.client_ca_file";
    let verifier: Arc<dyn ClientCertVerifier> = match (auth_type, roots) {
        (ClientAuthType::NoClientCert, Some(_)) => {
            return Err(ctx.err(
                ca_key,
                "client CAs are configured but client_auth_type is NoClientCert; set client_auth_type to RequireAndVerifyClientCert or VerifyClientCertIfGiven",
            ));
        }
        (ClientAuthType::NoClientCert, None) => Arc::new(rustls::server::NoClientAuth),
        (ClientAuthType::RequestClientCert, _) => Arc::new(AnyClientCert::new(provider, false)),
        (ClientAuthType::RequireAnyClientCert, _) => Arc::new(AnyClientCert::new(provider, true)),
        (
            ClientAuthType::VerifyClientCertIfGiven | ClientAuthType::RequireAndVerifyClientCert,
            None,
        ) => {
            return Err(ctx.err(ca_key, "missing: client_auth_type verifies client certificates, so it needs client_ca_file"));
        }
        (t, Some(roots)) => {
            let b = WebPkiClientVerifier::builder_with_provider(roots, provider.clone());
            let b = if t == ClientAuthType::VerifyClientCertIfGiven {
                b.allow_unauthenticated()
            } else {
                b
            };
            b.build().map_err(|e| {
                ctx.err(
                    ca_key,
                    format!("cannot build the client certificate verifier: {e}"),
                )
            })?
        }
    };
    Ok(verifier)
}

/// The protocol versions from `min_version` to `max_version` (default TLS12 to TLS13).
fn protocol_versions(
    ctx: &Ctx<'_>,
    raw: &RawTls,
) -> Result<Vec<&'static rustls::SupportedProtocolVersion>, HttpError> {
    let min = match raw.min_version.as_deref() {
        None | Some("") => &rustls::version::TLS12,
        Some(v) => tls_version(ctx, "tls_server_config.min_version", v)?,
    };
    let max = match raw.max_version.as_deref() {
        None | Some("") => &rustls::version::TLS13,
        Some(v) => tls_version(ctx, "tls_server_config.max_version", v)?,
    };
    let mut versions: Vec<&'static rustls::SupportedProtocolVersion> = Vec::new();
    for v in [&rustls::version::TLS12, &rustls::version::TLS13] {
        let rank = |x: &rustls::SupportedProtocolVersion| {
            if x.version == rustls::ProtocolVersion::TLSv1_2 {
                12
            } else {
                13
            }
        };
        if rank(v) >= rank(min) && rank(v) <= rank(max) {
            versions.push(v);
        }
    }
    if versions.is_empty() {
        return Err(ctx.err(
            "tls_server_config.min_version",
            "min_version is above max_version; lower min_version or raise max_version",
        ));
    }
    Ok(versions)
}

fn load_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, ReadError> {
    let pem = read_regular(path, "certificate file")?;
    let certs: Vec<_> = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<_, _>>()
        .map_err(|e| ReadError::BadPem {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
    if certs.is_empty() {
        return Err(ReadError::NoCertificate {
            path: path.to_path_buf(),
        });
    }
    Ok(certs)
}

/// Go's `RequestClientCert` / `RequireAnyClientCert`: asks for a client certificate and checks
/// that the client holds its key (the handshake signature), but does not verify the chain.
#[derive(Debug)]
struct AnyClientCert {
    algorithms: WebPkiSupportedAlgorithms,
    mandatory: bool,
}

impl AnyClientCert {
    fn new(provider: &CryptoProvider, mandatory: bool) -> Self {
        AnyClientCert {
            algorithms: provider.signature_verification_algorithms,
            mandatory,
        }
    }
}

impl ClientCertVerifier for AnyClientCert {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        self.mandatory
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(text: &str) -> Result<WebConfig, HttpError> {
        parse(Path::new("/nonexistent/web.yml"), text)
    }

    fn err(text: &str) -> String {
        match p(text) {
            Ok(_) => panic!("expected an error for {text:?}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn empty_file_means_plain_http_without_auth() {
        let c = p("").expect("empty is valid");
        assert!(c.tls.is_none() && c.auth.is_none() && c.headers.is_empty());
        let c = p("# just a comment\n").expect("comment only is valid");
        assert!(c.tls.is_none());
    }

    #[test]
    fn errors_name_file_and_key() {
        let e = err("basic_auth_users:\n  alice: notahash\n");
        assert!(
            e.contains("/nonexistent/web.yml") && e.contains("basic_auth_users.alice"),
            "{e}"
        );
        let e = err("tls_server_config:\n  key_file: k.pem\n");
        assert!(
            e.contains("tls_server_config.cert_file") && e.contains("missing"),
            "{e}"
        );
        let e = err("tls_server_config:\n  cert_file: c.pem\n  key_file: k.pem\n");
        assert!(
            e.contains("tls_server_config.cert_file") && e.contains("/nonexistent/c.pem"),
            "{e}"
        );
        let e = err(
            "tls_server_config:\n  cert_file: c.pem\n  key_file: k.pem\n  cipher_suites: [x]\n",
        );
        assert!(e.contains("tls_server_config.cipher_suites"), "{e}");
        let e = err("bogus: 1\n");
        assert!(e.contains("bogus") && e.contains("unknown key"), "{e}");
        let e = err("basic_auth_users: [1, 2]\n");
        assert!(e.contains("invalid YAML"), "{e}");
        let e = err("http_server_config:\n  headers:\n    \"bad header\": x\n");
        assert!(e.contains("http_server_config.headers.bad header"), "{e}");
    }

    #[test]
    fn bcrypt_users_and_headers_load() {
        let hash = bcrypt::hash("secret", 4).expect("hashing");
        let c = p(&format!(
            "basic_auth_users:\n  alice: {hash}\nhttp_server_config:\n  headers:\n    X-Frame-Options: deny\n"
        ))
        .expect("valid");
        assert_eq!(c.auth.as_ref().map(|a| a.user_count()), Some(1));
        assert_eq!(c.headers.len(), 1);
        assert_eq!(c.headers[0].0.as_str(), "x-frame-options");
    }

    #[test]
    fn client_auth_type_values() {
        for s in [
            "NoClientCert",
            "RequestClientCert",
            "RequireAnyClientCert",
            "VerifyClientCertIfGiven",
            "RequireAndVerifyClientCert",
        ] {
            assert!(ClientAuthType::parse(s).is_some(), "{s}");
        }
        assert!(ClientAuthType::parse("RequireClientCert").is_none());
    }

    #[test]
    fn bcrypt_costs_outside_the_range_are_refused_naming_the_user() {
        let body = "QOauhQNbBCuQDKes6eFzPeMqBSjb7Mr5DUmpZ/VcEd00UAV/LDeSi";
        for cost in ["03", "15", "31"] {
            let e = err(&format!(
                "basic_auth_users:\n  carol: \"$2y${cost}${body}\"\n"
            ));
            assert!(
                e.contains("/nonexistent/web.yml")
                    && e.contains("basic_auth_users.carol")
                    && e.contains(&format!("bcrypt cost {}", cost.trim_start_matches('0'))),
                "{e}"
            );
        }
        let ok = p(&format!("basic_auth_users:\n  carol: \"$2y$14${body}\"\n"));
        assert!(ok.is_ok());
    }

    #[test]
    fn a_fifo_web_config_is_refused_without_blocking() {
        let dir = tempfile::tempdir_in("/dev/shm").expect("tempdir");
        let fifo = dir.path().join("web.yml");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600))
            .expect("mkfifo");
        // No writer ever opens the FIFO: a blocking open or read would hang this test.
        let e = load(&fifo)
            .expect_err("a FIFO is not a web config")
            .to_string();
        assert!(
            e.contains(&fifo.display().to_string()) && e.contains("a FIFO, not a regular file"),
            "{e}"
        );
        let e = load(dir.path()).expect_err("a directory").to_string();
        assert!(e.contains("a directory"), "{e}");
    }

    #[test]
    fn a_fifo_as_the_tls_key_is_refused_naming_the_key() {
        let dir = tempfile::tempdir_in("/dev/shm").expect("tempdir");
        let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).expect("cert");
        std::fs::write(dir.path().join("c.pem"), cert.cert.pem()).expect("write");
        nix::unistd::mkfifo(
            &dir.path().join("k.pem"),
            nix::sys::stat::Mode::from_bits_truncate(0o600),
        )
        .expect("mkfifo");
        let web = dir.path().join("web.yml");
        std::fs::write(
            &web,
            "tls_server_config:\n  cert_file: c.pem\n  key_file: k.pem\n",
        )
        .expect("write");
        let e = load(&web).expect_err("a FIFO key").to_string();
        assert!(
            e.contains("tls_server_config.key_file") && e.contains("a FIFO"),
            "{e}"
        );
    }
}
