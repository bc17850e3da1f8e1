//! Outbound HTTP(S) for a run: the request the guest's `fetch` describes is checked here
//! (scheme, the allowed hosts, methods, the headers that route or frame a request, a body on
//! GET or HEAD), performed by the host's [`FetchTransport`] (which never follows a redirect and
//! stops reading at the size cap), and its final URL checked again.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::budget::{Budget, Charge, SlotKind};
use crate::quoted;

/// Outbound HTTP(S) for one run.
#[derive(Clone)]
pub struct FetchGrant {
    /// Hosts the guest may reach, compared exactly after normalization (case-insensitive;
    /// IDNA and IP forms as the URL parser writes them). Any port of an allowed host is
    /// allowed.
    pub allowed_hosts: Vec<String>,
    /// The largest response body the guest accepts.
    pub max_response_bytes: usize,
    /// Who makes the requests.
    pub transport: Arc<dyn FetchTransport>,
}

impl fmt::Debug for FetchGrant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FetchGrant")
            .field("allowed_hosts", &self.allowed_hosts)
            .field("max_response_bytes", &self.max_response_bytes)
            .finish_non_exhaustive()
    }
}

/// A request as the guest's `fetch(url, init)` gave it (its values already read as text).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FetchRequest {
    /// The URL as given.
    pub url: String,
    /// `init.method` as given (`None`: GET).
    pub method: Option<String>,
    /// `init.headers` as given, names as written.
    pub headers: Vec<(String, String)>,
    /// `init.body`'s bytes.
    pub body: Option<Vec<u8>>,
}

/// A checked request, as the transport performs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboundRequest {
    /// Absolute `http:` or `https:` URL (normalized, no fragment) on an allowed host.
    pub url: String,
    /// Upper-case for the standard methods (`GET`, `POST`, ...), as given otherwise.
    pub method: String,
    /// Lower-case names, repeats joined with `, `; values without CR, LF or NUL.
    pub headers: Vec<(String, String)>,
    /// The request body (never for `GET` or `HEAD`).
    pub body: Option<Vec<u8>>,
}

/// A response.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FetchResponse {
    /// HTTP status code.
    pub status: u16,
    /// The status line's reason phrase (may be empty).
    pub status_text: String,
    /// The URL the body came from (the transport may leave it empty: the request's URL).
    pub url: String,
    /// Response headers as received.
    pub headers: Vec<(String, String)>,
    /// The whole body.
    pub body: Vec<u8>,
}

/// What a transport was handed to read a body with: the cap, and the run's budget charged as
/// the bytes arrive.
#[derive(Debug)]
pub struct BodyReader {
    /// The largest body accepted; the transport reads at most one byte more.
    pub max_bytes: usize,
    /// Grown by every chunk read ([`Charge::grow`]); a refusal ends the read with its message.
    pub charge: Charge,
}

/// What a transport delivers: the response and the charge for its body.
#[derive(Debug)]
pub struct Received {
    /// The response.
    pub response: FetchResponse,
    /// What its body holds of the run's budget.
    pub charge: Charge,
}

/// What a [`FetchTransport`] call resolves to; `Err` is a message the guest sees in its `Error`.
pub type TransportFuture = Pin<Box<dyn Future<Output = Result<Received, String>> + Send>>;

/// The host side of `fetch`: performs a checked request.
///
/// Contract: `perform` returns promptly (the work happens in the future); the transport must
/// charge every body chunk to `reader.charge` before keeping it and stop at
/// `reader.max_bytes + 1` bytes; and it must not follow redirects (the guest sees the 3xx).
pub trait FetchTransport: Send + Sync {
    /// Starts one request.
    fn perform(&self, request: OutboundRequest, reader: BodyReader) -> TransportFuture;
}

/// A fetch grant as a run uses it: hosts normalized once.
pub(crate) struct Fetcher {
    allowed: Vec<String>,
    max_response_bytes: usize,
    transport: Arc<dyn FetchTransport>,
}

impl Fetcher {
    pub(crate) fn new(grant: FetchGrant) -> Fetcher {
        let allowed = grant
            .allowed_hosts
            .iter()
            .map(|h| normalize_host(h.trim()))
            .collect();
        Fetcher {
            allowed,
            max_response_bytes: grant.max_response_bytes,
            transport: grant.transport,
        }
    }

    fn allows(&self, host: &str) -> bool {
        let host = host.to_ascii_lowercase();
        self.allowed.contains(&host)
    }

    /// Checks and performs one request; resolves to the response or the guest's message.
    pub(crate) fn fetch(
        &self,
        request: FetchRequest,
        budget: &Budget,
    ) -> Result<impl Future<Output = Result<Received, String>> + Send + 'static, String> {
        let slot = budget
            .slot(SlotKind::Fetch)
            .map_err(|e| format!("fetch: {e}"))?;
        let (outbound, host) = self.check(request)?;
        let body_charge = budget
            .charge(outbound.body.as_ref().map_or(0, Vec::len))
            .map_err(|e| format!("fetch: {e}"))?;
        let reader = BodyReader {
            max_bytes: self.max_response_bytes,
            charge: budget.charge(0).map_err(|e| format!("fetch: {e}"))?,
        };
        let requested_url = outbound.url.clone();
        let future = self.transport.perform(outbound, reader);
        let max = self.max_response_bytes;
        let allowed = self.allowed.clone();
        Ok(async move {
            let received = future.await;
            // The request body is sent (or abandoned) once the transport answers.
            drop(body_charge);
            drop(slot);
            let mut received =
                received.map_err(|m| format!("fetch: the request to {host} failed: {m}"))?;
            if received.response.body.len() > max {
                return Err(format!(
                    "fetch: the response from {host} exceeds the {max} byte limit"
                ));
            }
            if received.response.url.is_empty() {
                received.response.url = requested_url;
            }
            let final_host = url::Url::parse(&received.response.url)
                .ok()
                .filter(|u| matches!(u.scheme(), "http" | "https"))
                .and_then(|u| u.host_str().map(str::to_ascii_lowercase));
            match final_host {
                Some(h) if allowed.contains(&h) => Ok(received),
                Some(h) => Err(format!(
                    "fetch: the response from {host} came from \"{h}\", which is not an allowed host for this run"
                )),
                None => Err(format!(
                    "fetch: the response from {host} has no valid http(s) URL"
                )),
            }
        })
    }

    /// The request as the transport performs it, and the host it goes to; or the refusal.
    fn check(&self, request: FetchRequest) -> Result<(OutboundRequest, String), String> {
        let shown = quoted(&request.url);
        let mut parsed = url::Url::parse(&request.url)
            .map_err(|e| format!("fetch: {shown} is not a valid URL ({e})"))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(format!(
                "fetch: {shown} uses the \"{}:\" scheme; only http and https are allowed",
                parsed.scheme()
            ));
        }
        let Some(host) = parsed.host_str().map(str::to_ascii_lowercase) else {
            return Err(format!("fetch: {shown} has no host"));
        };
        if !self.allows(&host) {
            return Err(format!(
                "fetch: \"{host}\" is not an allowed host for this run"
            ));
        }
        parsed.set_fragment(None);

        let method = match request.method {
            None => "GET".to_string(),
            Some(text) => {
                if !is_token(&text) {
                    return Err(format!(
                        "fetch: {} is not a valid HTTP method",
                        quoted(&text)
                    ));
                }
                let upper = text.to_ascii_uppercase();
                if FORBIDDEN_METHODS.contains(&upper.as_str()) {
                    return Err(format!("fetch: the {upper} method is not allowed"));
                }
                if STANDARD_METHODS.contains(&upper.as_str()) {
                    upper
                } else {
                    text
                }
            }
        };
        if request.headers.len() > MAX_REQUEST_HEADERS {
            return Err(format!(
                "fetch: a request may have at most {MAX_REQUEST_HEADERS} headers"
            ));
        }
        let total: usize = request
            .headers
            .iter()
            .map(|(n, v)| n.len().saturating_add(v.len()))
            .fold(0, usize::saturating_add);
        if total > MAX_REQUEST_HEADER_BYTES {
            return Err(format!(
                "fetch: the request's headers are {total} bytes, over the {MAX_REQUEST_HEADER_BYTES}-byte limit"
            ));
        }
        let mut headers: Vec<(String, String)> = Vec::new();
        // Where each lower-case name is in `headers`, so repeats merge in linear time.
        let mut seen: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
        for (name, text) in request.headers {
            let lower = name.to_ascii_lowercase();
            if !is_token(&name) {
                return Err(format!(
                    "fetch: {} is not a valid header name",
                    quoted(&name)
                ));
            }
            if FORBIDDEN_HEADERS.contains(&lower.as_str()) || lower.starts_with("proxy-") {
                return Err(format!(
                    "fetch: the \"{lower}\" header is set by the host and cannot be given"
                ));
            }
            if text.contains(['\r', '\n', '\0']) {
                return Err(format!(
                    "fetch: the \"{lower}\" header has a line break or NUL in its value"
                ));
            }
            match seen.get(&lower).and_then(|i| headers.get_mut(*i)) {
                Some((_, existing)) => {
                    existing.push_str(", ");
                    existing.push_str(&text);
                }
                None => {
                    seen.insert(lower.clone(), headers.len());
                    headers.push((lower, text));
                }
            }
        }
        if request.body.is_some() && (method == "GET" || method == "HEAD") {
            return Err(format!("fetch: a {method} request cannot have a body"));
        }
        Ok((
            OutboundRequest {
                url: parsed.to_string(),
                method,
                headers,
                body: request.body,
            },
            host,
        ))
    }
}

fn normalize_host(host: &str) -> String {
    match url::Host::parse(host) {
        Ok(parsed) => parsed.to_string().to_ascii_lowercase(),
        Err(_) => host.to_ascii_lowercase(),
    }
}

/// The most headers one request may give.
pub const MAX_REQUEST_HEADERS: usize = 256;

/// The most bytes one request's header names and values may add up to.
pub const MAX_REQUEST_HEADER_BYTES: usize = 64 * 1024;

const STANDARD_METHODS: [&str; 7] = ["DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT"];
const FORBIDDEN_METHODS: [&str; 3] = ["CONNECT", "TRACE", "TRACK"];
/// Headers that would change where or how the request is routed or framed; the transport sets
/// them itself.
const FORBIDDEN_HEADERS: [&str; 9] = [
    "connection",
    "content-length",
    "expect",
    "host",
    "keep-alive",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

fn is_token(text: &str) -> bool {
    !text.is_empty()
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}
