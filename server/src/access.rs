//! Who may ask, checked on every request before any route sees it (the [`guard`] middleware),
//! in this order:
//!
//! 1. **Head size**: the request line and headers together at most [`MAX_HEAD_BYTES`] (`431`).
//!    hyper's parser holds the hard ceiling below that (see `listen`).
//! 2. **Host**: the `Host` header must name this server (`421` otherwise, `400` when there is
//!    none): `localhost` or an IP address literal with the port the server is bound to, or a
//!    `--public-host` entry. A DNS-rebinding page reaches the server under its own name, which
//!    is none of these; a browser never sends an IP literal for a name it resolved.
//! 3. **Origin**: when present, it must be this server's own origin (`http` or `https` with the
//!    request's own host and port) or an `--allow-origin` entry (`403` otherwise; `null` is
//!    refused too). Browsers send `Origin` on every cross-origin request that could change
//!    anything, so a page elsewhere cannot drive the server.
//! 4. **Token** (only when the server has one, which it must when bound beyond loopback): every
//!    `/api/` route needs `Authorization: Bearer <token>` (`401`). The server keeps only the
//!    token's SHA-256 and compares digests in constant time, so neither the bytes nor the length
//!    of the token leak through timing.
//!
//! Executing and state-changing routes then require `Content-Type: application/json` (`415`,
//! `body::JsonBody`), which a page elsewhere cannot send without a CORS preflight the server
//! never approves (no CORS headers are sent unless `--allow-origin` names origins).
//! `POST /api/packs/reload` is an operator action ([`reload_allowed`]).

use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use tower_http::cors::{AllowOrigin, CorsLayer};

use crate::AppState;
use crate::error::ApiError;

/// The header the Packages page sends with a reload (`X-Nodetool-Reload: 1`); from a loopback
/// address it stands in for the token on a server that has none.
pub const RELOAD_HEADER: &str = "x-nodetool-reload";

/// The environment variable that names the token file when `--token-file` is not given.
pub const TOKEN_FILE_ENV: &str = "NODETOOL_TOKEN_FILE";

/// The shortest token accepted, in characters.
pub const MIN_TOKEN_CHARS: usize = 16;

/// The largest request line plus headers accepted (`431` beyond): 16 KiB, twice what common
/// proxies allow by default.
pub const MAX_HEAD_BYTES: usize = 16 * 1024;

/// How to make a token, as the refusal to start says it.
pub const TOKEN_HOWTO: &str = "make one and pass it:\n  umask 077; mkdir -p ~/.config/nodetool\n  head -c 32 /dev/urandom | base64 > ~/.config/nodetool/server-token\n  nodetool-server --host 0.0.0.0 --token-file ~/.config/nodetool/server-token\n(or set NODETOOL_TOKEN_FILE to the file); clients then send `Authorization: Bearer <the file's content>`, and the Packages page asks for it once per tab";

/// The bearer token, kept as its SHA-256 only. `Debug` never shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct Token(Arc<[u8; 32]>);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(<redacted>)")
    }
}

impl Token {
    /// A token from its text: at least [`MIN_TOKEN_CHARS`] visible ASCII characters (what a
    /// header value can carry unquoted).
    pub fn new(secret: &str) -> Result<Token, String> {
        if secret.len() < MIN_TOKEN_CHARS {
            return Err(format!(
                "the token is shorter than {MIN_TOKEN_CHARS} characters"
            ));
        }
        if !secret.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(
                "the token must be visible ASCII characters only (no spaces or control characters)"
                    .into(),
            );
        }
        Ok(Token(Arc::new(Sha256::digest(secret.as_bytes()).into())))
    }

    /// Reads the token from `path` (surrounding whitespace, such as the final newline, is not
    /// part of it).
    pub fn read(path: &Path) -> Result<Token, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read the token file {}: {e}", path.display()))?;
        Token::new(text.trim()).map_err(|why| format!("{}: {why}", path.display()))
    }

    /// Whether `presented` is the token, compared in constant time.
    pub fn matches(&self, presented: &[u8]) -> bool {
        let digest: [u8; 32] = Sha256::digest(presented).into();
        digest.ct_eq(self.0.as_ref()).into()
    }
}

/// A `--public-host` entry: a name (or address) the server also answers to, with or without a
/// port. Without one it matches any port (behind a proxy the port the client used is the
/// proxy's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicHost {
    name: String,
    port: Option<u16>,
}

impl FromStr for PublicHost {
    type Err = String;

    fn from_str(text: &str) -> Result<PublicHost, String> {
        let (name, port) = split_host(text).ok_or_else(|| {
            format!("{text:?} is not a host name, optionally with :PORT (e.g. nodetool.example.com or nodetool.example.com:8443)")
        })?;
        Ok(PublicHost { name, port })
    }
}

impl std::fmt::Display for PublicHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.port {
            Some(port) => write!(f, "{}:{port}", self.name),
            None => f.write_str(&self.name),
        }
    }
}

/// `host[:port]` as a lowercase host and its port; `None` when it is not one (user info, a
/// path, an empty or malformed name).
fn split_host(text: &str) -> Option<(String, Option<u16>)> {
    if text.is_empty() || text.contains(['@', '/', '?', '#']) {
        return None;
    }
    let authority = axum::http::uri::Authority::from_str(text).ok()?;
    let host = authority.host();
    if host.is_empty() {
        return None;
    }
    let port = match authority.as_str().rsplit_once(':') {
        // A bracketed IPv6 address without a port ends in `]`.
        Some((_, digits)) if !digits.ends_with(']') => Some(digits.parse::<u16>().ok()?),
        _ => None,
    };
    Some((host.to_ascii_lowercase(), port))
}

fn is_ip_literal(host: &str) -> bool {
    let bare = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    bare.parse::<IpAddr>().is_ok()
}

/// What every request is checked against. No `Default`: [`Access::loopback`] is the safe set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Access {
    /// The port the server is bound to (loopback names and IP literals must carry it).
    pub port: u16,
    /// `--public-host` entries.
    pub public_hosts: Vec<PublicHost>,
    /// `--allow-origin` entries (`https://app.example`), exactly as browsers send them; with
    /// none the server sends no CORS header at all.
    pub allow_origins: Vec<String>,
    /// The bearer token every `/api/` route needs, when the server has one.
    pub token: Option<Token>,
}

impl Access {
    /// Loopback names and IP literals on `port`, no other origin, no token.
    pub fn loopback(port: u16) -> Access {
        Access {
            port,
            public_hosts: Vec::new(),
            allow_origins: Vec::new(),
            token: None,
        }
    }

    /// Whether `host` (a `Host` header's host, lowercase) with `port` names this server.
    fn host_accepted(&self, host: &str, port: Option<u16>) -> bool {
        if port.unwrap_or(80) == self.port && (host == "localhost" || is_ip_literal(host)) {
            return true;
        }
        self.public_hosts
            .iter()
            .any(|p| p.name == host && p.port.is_none_or(|want| port == Some(want)))
    }

    /// The hosts this server answers to, as the 421 names them.
    fn accepted_hosts(&self) -> String {
        let mut names = vec![
            format!("localhost:{}", self.port),
            format!("127.0.0.1:{}", self.port),
            format!("[::1]:{}", self.port),
            format!("any IP address with port {}", self.port),
        ];
        names.extend(self.public_hosts.iter().map(PublicHost::to_string));
        names.join(", ")
    }

    /// Whether `origin` is this request's own origin (its host `host` and `port`) or allowed.
    fn origin_allowed(&self, origin: &str, host: &str, port: Option<u16>) -> bool {
        if self.allow_origins.iter().any(|o| o == origin) {
            return true;
        }
        let Some((scheme, rest)) = origin.split_once("://") else {
            return false;
        };
        let default = match scheme.to_ascii_lowercase().as_str() {
            "http" => 80,
            "https" => 443,
            _ => return false,
        };
        let Some((origin_host, origin_port)) = split_host(rest) else {
            return false;
        };
        let origin_port = origin_port.unwrap_or(default);
        origin_host == host && port.unwrap_or(default) == origin_port
    }

    /// The CORS layer for `--allow-origin`, or `None` (then no CORS header is ever sent).
    pub(crate) fn cors(&self) -> Option<CorsLayer> {
        if self.allow_origins.is_empty() {
            return None;
        }
        let origins: Vec<HeaderValue> = self
            .allow_origins
            .iter()
            .filter_map(|o| HeaderValue::from_str(o).ok())
            .collect();
        let exposed = [
            header::ETAG,
            header::RETRY_AFTER,
            HeaderName::from_static(crate::CONTENT_DIGEST),
            HeaderName::from_static(crate::CONTENT_SHA256),
            HeaderName::from_static(crate::DEPENDENCIES),
            HeaderName::from_static(crate::PACK),
            HeaderName::from_static(crate::PACK_VERSION),
            HeaderName::from_static(crate::FILE_ID),
            HeaderName::from_static(crate::INTERNAL),
            HeaderName::from_static(crate::WASM_CONTRACT),
            HeaderName::from_static(crate::HOST_MODULE),
        ];
        Some(
            CorsLayer::new()
                .allow_origin(AllowOrigin::list(origins))
                .allow_methods([Method::GET, Method::POST])
                .allow_headers([
                    header::CONTENT_TYPE,
                    header::AUTHORIZATION,
                    header::IF_NONE_MATCH,
                    HeaderName::from_static(RELOAD_HEADER),
                ])
                .expose_headers(exposed)
                .max_age(Duration::from_secs(600)),
        )
    }
}

/// Checks an `--allow-origin` entry: `scheme://host[:port]`, as a browser sends `Origin`.
pub fn validate_origin(origin: &str) -> Result<(), String> {
    let ok = origin.split_once("://").is_some_and(|(scheme, rest)| {
        matches!(scheme, "http" | "https") && split_host(rest).is_some()
    });
    if ok && HeaderValue::from_str(origin).is_ok() {
        Ok(())
    } else {
        Err(format!(
            "{origin:?} is not an origin: write it as the browser sends it, scheme://host[:port] (e.g. https://app.example)"
        ))
    }
}

/// The size of the request line and headers, as they arrived (give or take the separators).
fn head_bytes(request: &Request) -> usize {
    let uri = request.uri();
    let line = request.method().as_str().len()
        + uri.authority().map_or(0, |a| a.as_str().len())
        + uri.path_and_query().map_or(1, |p| p.as_str().len())
        + 12;
    request.headers().iter().fold(line, |sum, (name, value)| {
        sum + name.as_str().len() + value.len() + 4
    })
}

/// The request's host and port: the `Host` header, else an absolute URI's authority.
fn request_host(request: &Request) -> Result<(String, Option<u16>), ApiError> {
    let text = match request.headers().get(header::HOST) {
        Some(value) => value.to_str().map_err(|_| ApiError::NoHost)?.to_string(),
        None => request
            .uri()
            .authority()
            .map(|a| a.as_str().to_string())
            .ok_or(ApiError::NoHost)?,
    };
    split_host(&text).ok_or(ApiError::NoHost)
}

fn bearer(headers: &HeaderMap) -> Option<&[u8]> {
    let value = headers.get(header::AUTHORIZATION)?.as_bytes();
    let (scheme, token) = value.split_at_checked(7)?;
    scheme
        .eq_ignore_ascii_case(b"bearer ")
        .then(|| token.trim_ascii())
}

fn is_preflight(request: &Request) -> bool {
    request.method() == Method::OPTIONS
        && request
            .headers()
            .contains_key(header::ACCESS_CONTROL_REQUEST_METHOD)
}

/// The checks of the module documentation, in its order, before any route runs.
pub(crate) async fn guard(State(state): State<AppState>, request: Request, next: Next) -> Response {
    match check(&state, &request) {
        Ok(()) => next.run(request).await,
        Err(refusal) => {
            state.metrics().refused(refusal.rule().unwrap_or("other"));
            refusal.into_response()
        }
    }
}

fn check(state: &AppState, request: &Request) -> Result<(), ApiError> {
    if head_bytes(request) > MAX_HEAD_BYTES {
        return Err(ApiError::HeadTooLarge(MAX_HEAD_BYTES));
    }
    let access = &state.config().access;
    let (host, port) = request_host(request)?;
    if !access.host_accepted(&host, port) {
        return Err(ApiError::MisdirectedHost(access.accepted_hosts()));
    }
    if let Some(origin) = request.headers().get(header::ORIGIN) {
        let allowed = origin
            .to_str()
            .is_ok_and(|o| access.origin_allowed(o, &host, port));
        if !allowed {
            return Err(ApiError::CrossOrigin);
        }
    }
    if let Some(token) = &access.token
        && request.uri().path().starts_with("/api/")
        && !is_preflight(request)
        && !bearer(request.headers()).is_some_and(|t| token.matches(t))
    {
        return Err(ApiError::Unauthorized);
    }
    Ok(())
}

/// Whether a reload may proceed: with a token, the guard already checked it; without one, the
/// request must come from a loopback address and carry [`RELOAD_HEADER`]` = 1`.
pub(crate) fn reload_allowed(
    access: &Access,
    headers: &HeaderMap,
    peer: Option<&ConnectInfo<SocketAddr>>,
) -> Result<(), ApiError> {
    if access.token.is_some() {
        return Ok(());
    }
    let from_loopback = peer.is_some_and(|ConnectInfo(addr)| addr.ip().is_loopback());
    let header = headers
        .get(RELOAD_HEADER)
        .is_some_and(|v| v.as_bytes() == b"1");
    if from_loopback && header {
        Ok(())
    } else {
        Err(ApiError::OperatorOnly)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_are_split_with_their_ports() {
        assert_eq!(
            split_host("LocalHost:7777"),
            Some(("localhost".into(), Some(7777)))
        );
        assert_eq!(split_host("[::1]:80"), Some(("[::1]".into(), Some(80))));
        assert_eq!(split_host("[::1]"), Some(("[::1]".into(), None)));
        assert_eq!(
            split_host("example.com"),
            Some(("example.com".into(), None))
        );
        for bad in ["", "a@b", "a/b", "host:port", "host:99999"] {
            assert_eq!(split_host(bad), None, "{bad}");
        }
    }

    #[test]
    fn loopback_names_and_ip_literals_need_the_bound_port() {
        let access = Access {
            public_hosts: vec![
                PublicHost::from_str("nodetool.example").unwrap_or_else(|e| panic!("{e}")),
                PublicHost::from_str("pinned.example:8443").unwrap_or_else(|e| panic!("{e}")),
            ],
            ..Access::loopback(7777)
        };
        assert!(access.host_accepted("localhost", Some(7777)));
        assert!(access.host_accepted("127.0.0.1", Some(7777)));
        assert!(access.host_accepted("[::1]", Some(7777)));
        assert!(access.host_accepted("10.1.2.3", Some(7777)));
        assert!(!access.host_accepted("localhost", Some(8080)));
        assert!(!access.host_accepted("localhost", None));
        assert!(!access.host_accepted("attacker.example", Some(7777)));
        assert!(access.host_accepted("nodetool.example", None));
        assert!(access.host_accepted("nodetool.example", Some(443)));
        assert!(access.host_accepted("pinned.example", Some(8443)));
        assert!(!access.host_accepted("pinned.example", None));
    }

    #[test]
    fn an_origin_is_the_requests_own_or_an_allowed_one() {
        let access = Access {
            allow_origins: vec!["https://app.example".into()],
            ..Access::loopback(7777)
        };
        assert!(access.origin_allowed("http://127.0.0.1:7777", "127.0.0.1", Some(7777)));
        assert!(access.origin_allowed("https://n.example", "n.example", None));
        assert!(access.origin_allowed("http://n.example", "n.example", Some(80)));
        assert!(!access.origin_allowed("http://localhost:8080", "localhost", Some(7777)));
        assert!(!access.origin_allowed("http://evil.example", "127.0.0.1", Some(7777)));
        assert!(!access.origin_allowed("null", "127.0.0.1", Some(7777)));
        assert!(access.origin_allowed("https://app.example", "127.0.0.1", Some(7777)));
    }

    #[test]
    fn tokens_match_exactly_and_never_print() {
        let token = Token::new("0123456789abcdef-token").unwrap_or_else(|e| panic!("{e}"));
        assert!(token.matches(b"0123456789abcdef-token"));
        assert!(!token.matches(b"0123456789abcdef-tokeN"));
        assert!(!token.matches(b""));
        assert_eq!(format!("{token:?}"), "Token(<redacted>)");
        assert!(Token::new("short").is_err());
        assert!(Token::new("has a space in it ok").is_err());
    }
}
