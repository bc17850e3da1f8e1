//! `aws`: AWS Signature Version 4, for a request the guest then sends with its own `fetch`.
//!
//! Nothing here performs I/O: [`sigv4`] turns a request description into the headers that
//! authorize it, [`presign`] into a URL that carries its own authorization. The network call
//! stays in the guest, behind the run's fetch allowlist.
//!
//! The canonical form follows AWS's rules as botocore applies them (the interop test compares
//! every byte with botocore 1.44.8 on generated requests):
//! - **Path.** Amazon S3 signs the path once encoded; every other service signs the encoding of
//!   the path as sent (so `%20` is signed as `%2520`), after removing `.`/`..` and empty
//!   segments. For S3 the path is first re-encoded strictly (RFC 3986: only `A-Z a-z 0-9 - _ .
//!   ~` stay as they are), and the returned URL carries that form, so what is sent is exactly
//!   what was signed: `x(1)` goes out as `x%281%29`, the same object key to S3.
//! - **Query.** Each pair is decoded (`+` is a space, as in a form) and re-encoded strictly, in
//!   its original order on the wire and sorted by key, then value, in the canonical request.
//! - **Headers.** Names are compared without case; repeats join with `,`; values are trimmed and
//!   their runs of whitespace (line folds included) become one space, in the canonical request
//!   *and* in the returned headers. The hop-by-hop and tracing headers a proxy may rewrite
//!   (`user-agent`, `expect`, `connection`, ...; botocore's list) are returned but not signed.
//!   `host` is signed but not returned: the fetch transport sets it from the URL (and refuses
//!   a guest's), and it is the URL's host and non-default port.
//!
//! The signing time is the host clock, or `signingDate` when given (an ISO 8601 UTC time, as
//! `Date.prototype.toJSON` writes it, the `20150830T123600Z` form, or milliseconds since
//! 1970).
//!
//! Secrets: no message and no result carries `secretAccessKey` (a test asserts it), and no
//! message quotes a credential, a URL or a header value.

use std::time::{SystemTime, UNIX_EPOCH};

use hmac::{Hmac, Mac};
use nodetool_protocol::hex::{hex, sha256_hex};
use nodetool_protocol::value::Value;
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, percent_decode_str, percent_encode};
use sha2::Sha256;

use crate::error::HostError;
use crate::limits::{js_string, js_to_number, option, options_of, require_bytes};

/// The largest body [`sigv4`] hashes: 10 MiB (a string's UTF-8 bytes, or bytes).
pub const MAX_SIGNED_BODY_BYTES: usize = 10 * 1024 * 1024;

/// The longest a presigned URL may stay valid: 7 days, AWS's own ceiling.
pub const MAX_EXPIRES_SECS: i64 = 604_800;

/// The most headers [`sigv4`] signs (the fetch bridge's own cap).
pub const MAX_HEADERS: usize = 256;

/// The most bytes of header names and values [`sigv4`] accepts (the fetch bridge's own cap).
pub const MAX_HEADER_BYTES: usize = 64 * 1024;

/// The longest URL signed, in bytes: far past what AWS accepts on a request line (8 KiB), and
/// short enough that sorting its query pairs is quick.
pub const MAX_URL_BYTES: usize = 64 * 1024;

/// The longest credential or session token accepted, in bytes.
const MAX_CREDENTIAL_BYTES: usize = 16 * 1024;

const ALGORITHM: &str = "AWS4-HMAC-SHA256";
const UNSIGNED_PAYLOAD: &str = "UNSIGNED-PAYLOAD";
const EMPTY_SHA256: &str = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

/// Headers returned but never signed: hop-by-hop and tracing headers a proxy or the transport
/// may rewrite (botocore's `SIGNED_HEADERS_BLACKLIST`).
const UNSIGNED_HEADERS: [&str; 14] = [
    "baggage",
    "connection",
    "expect",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "traceparent",
    "tracestate",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "user-agent",
    "x-amzn-trace-id",
];

/// The query parameters a presigned URL sets itself (any the URL already has are replaced).
const PRESIGN_PARAMS: [&str; 7] = [
    "X-Amz-Algorithm",
    "X-Amz-Credential",
    "X-Amz-Date",
    "X-Amz-Expires",
    "X-Amz-SignedHeaders",
    "X-Amz-Security-Token",
    "X-Amz-Signature",
];

/// RFC 3986's unreserved characters stay; everything else is `%XX`.
const STRICT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// `sigv4({ url, method="GET", service="s3", region="us-east-1", accessKeyId,
/// secretAccessKey, sessionToken?, headers?, body?, payloadHash?, signingDate? })` ->
/// `{ url, method, headers }`, ready for `fetch(signed.url, { method, headers, body })`.
/// The body is hashed, never returned.
pub fn sigv4(args: &[Value]) -> Result<Value, HostError> {
    const AT: &str = "aws.sigv4";
    let options = options_of(args.first());
    let mut request = Request::read(AT, options)?;
    let s3 = request.service == "s3";
    let headers = read_headers(AT, option(options, "headers"))?;
    let body_hash = match option(options, "body") {
        None => None,
        Some(Value::String(s)) => {
            if s.len() > MAX_SIGNED_BODY_BYTES {
                return Err(HostError::limit(format!(
                    "{AT}: body exceeds the {MAX_SIGNED_BODY_BYTES} byte signing limit"
                )));
            }
            Some(sha256_hex(s.as_bytes()))
        }
        Some(Value::Bytes(_)) => Some(sha256_hex(require_bytes(
            AT,
            option(options, "body"),
            "body",
        )?)),
        Some(_) => {
            return Err(HostError::invalid(format!(
                "{AT}: body must be a string or a Uint8Array"
            )));
        }
    };
    let given_hash = match option(options, "payloadHash") {
        None => None,
        Some(Value::String(s)) if s.is_empty() => None,
        Some(Value::String(s)) if s.len() <= 128 && s.bytes().all(|b| b.is_ascii_graphic()) => {
            Some(s.clone())
        }
        Some(_) => {
            return Err(HostError::invalid(format!(
                "{AT}: payloadHash must be a hex SHA-256 or \"UNSIGNED-PAYLOAD\""
            )));
        }
    };

    // The guest's headers, minus the ones the signature sets itself.
    let token = request.session_token.is_some();
    let mut user_content_hash = None;
    let mut out: Vec<Header> = Vec::new();
    for header in headers {
        match header.lower.as_str() {
            "host" | "authorization" | "x-amz-date" => continue,
            "x-amz-security-token" if token => continue,
            "x-amz-content-sha256" if s3 => continue,
            // Outside S3 a given content hash is what the service checks the body against,
            // so it is the one signed (as botocore does).
            "x-amz-content-sha256" => user_content_hash = Some(header.value.clone()),
            _ => {}
        }
        out.push(header);
    }
    let payload_hash = given_hash
        .or(user_content_hash)
        .or(body_hash)
        .unwrap_or_else(|| EMPTY_SHA256.to_string());
    let own = |name: &str, value: String| Header {
        name: name.to_string(),
        lower: name.to_string(),
        value,
    };
    out.push(own("x-amz-date", request.stamp.time.clone()));
    if s3 {
        out.push(own("x-amz-content-sha256", payload_hash.clone()));
    }
    if let Some(token) = &request.session_token {
        out.push(own("x-amz-security-token", token.clone()));
    }

    let mut signed: Vec<(&str, &str)> = out
        .iter()
        .filter(|h| !UNSIGNED_HEADERS.contains(&h.lower.as_str()))
        .map(|h| (h.lower.as_str(), h.value.as_str()))
        .collect();
    let host = request.host.clone();
    signed.push(("host", host.as_str()));
    signed.sort_by(|a, b| a.0.cmp(b.0));
    let signed_names = signed.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(";");
    let canonical_headers: String = signed.iter().map(|(n, v)| format!("{n}:{v}\n")).collect();

    let query = request.query_pairs.clone();
    request.set_query(&query);
    let canonical = [
        request.method.as_str(),
        &request.canonical_path,
        &canonical_query(&query),
        &canonical_headers,
        &signed_names,
        &payload_hash,
    ]
    .join("\n");
    let signature = request.signature(&canonical);
    let authorization = format!(
        "{ALGORITHM} Credential={}/{}, SignedHeaders={signed_names}, Signature={signature}",
        request.access_key_id,
        request.scope()
    );

    let mut headers: Vec<(String, Value)> = out
        .into_iter()
        .map(|h| (h.name, Value::String(h.value)))
        .collect();
    headers.push(("Authorization".into(), Value::String(authorization)));
    Ok(Value::Object(vec![
        ("url".into(), Value::String(request.url.to_string())),
        ("method".into(), Value::String(request.method)),
        ("headers".into(), Value::Object(headers)),
    ]))
}

/// `presign({ url, method="GET", service="s3", region="us-east-1", expiresIn=3600,
/// accessKeyId, secretAccessKey, sessionToken?, signingDate? })` -> the URL, its query carrying
/// the signature (`host` is the one signed header). `expiresIn` is floored and clamped to
/// 1..=604800 seconds; a non-finite one is 3600. S3's payload is `UNSIGNED-PAYLOAD` (the holder
/// supplies the body); other services sign the empty payload, as their presigned URLs (RDS
/// tokens, STS) require.
pub fn presign(args: &[Value]) -> Result<Value, HostError> {
    const AT: &str = "aws.presign";
    let options = options_of(args.first());
    let mut request = Request::read(AT, options)?;
    let expires = match option(options, "expiresIn") {
        None => 3600,
        Some(value) => {
            let n = js_to_number(value);
            if n.is_finite() {
                (n.floor() as i64).clamp(1, MAX_EXPIRES_SECS)
            } else {
                3600
            }
        }
    };
    let mut query: Vec<(String, String)> = request
        .query_pairs
        .iter()
        .filter(|(k, _)| !PRESIGN_PARAMS.contains(&k.as_str()))
        .cloned()
        .collect();
    let credential = format!("{}/{}", request.access_key_id, request.scope());
    let mut auth = vec![
        ("X-Amz-Algorithm", ALGORITHM.to_string()),
        ("X-Amz-Credential", credential),
        ("X-Amz-Date", request.stamp.time.clone()),
        ("X-Amz-Expires", expires.to_string()),
        ("X-Amz-SignedHeaders", "host".to_string()),
    ];
    if let Some(token) = &request.session_token {
        auth.push(("X-Amz-Security-Token", token.clone()));
    }
    query.extend(
        auth.into_iter()
            .map(|(k, v)| (k.to_string(), strict(v.as_bytes()))),
    );
    let payload = if request.service == "s3" {
        UNSIGNED_PAYLOAD
    } else {
        EMPTY_SHA256
    };
    let canonical = [
        request.method.as_str(),
        &request.canonical_path,
        &canonical_query(&query),
        &format!("host:{}\n", request.host),
        "host",
        payload,
    ]
    .join("\n");
    let signature = request.signature(&canonical);
    query.push(("X-Amz-Signature".into(), signature));
    request.set_query(&query);
    Ok(Value::String(request.url.to_string()))
}

/// What both exports read: the URL (its canonical path and encoded query pairs), the method,
/// the scope and the credentials.
struct Request {
    url: url::Url,
    /// The URL's host and non-default port, as the transport's `Host` header carries it.
    host: String,
    method: String,
    service: String,
    region: String,
    access_key_id: String,
    secret_access_key: String,
    session_token: Option<String>,
    stamp: Stamp,
    canonical_path: String,
    /// The query's pairs, each strictly re-encoded, in their order.
    query_pairs: Vec<(String, String)>,
}

impl Request {
    fn read(at: &str, options: &[(String, Value)]) -> Result<Request, HostError> {
        let raw = match option(options, "url") {
            Some(Value::String(s)) if s.len() > MAX_URL_BYTES => {
                return Err(HostError::limit(format!(
                    "{at}: url is longer than the {MAX_URL_BYTES} byte limit"
                )));
            }
            Some(Value::String(s)) if !s.is_empty() => s.as_str(),
            Some(Value::String(_)) | None => {
                return Err(HostError::invalid(format!("{at}: url is required")));
            }
            Some(_) => return Err(HostError::invalid(format!("{at}: url must be a string"))),
        };
        let mut url = url::Url::parse(raw)
            .map_err(|_| HostError::invalid(format!("{at}: url is not a valid absolute URL")))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(HostError::invalid(format!(
                "{at}: url must be an http or https URL"
            )));
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(HostError::invalid(format!(
                "{at}: url must not carry a user name or password"
            )));
        }
        let Some(host_name) = url.host_str() else {
            return Err(HostError::invalid(format!("{at}: url has no host")));
        };
        let host = match url.port() {
            Some(port) => format!("{host_name}:{port}"),
            None => host_name.to_string(),
        };
        let method = match option(options, "method") {
            None => "GET".to_string(),
            Some(Value::String(s)) if is_token(s) && s.len() <= 32 => s.to_ascii_uppercase(),
            Some(_) => {
                return Err(HostError::invalid(format!(
                    "{at}: method must be an HTTP method name such as \"GET\" or \"PUT\""
                )));
            }
        };
        let service = scope_part(at, options, "service", "s3")?;
        let region = scope_part(at, options, "region", "us-east-1")?;
        let credential = |name: &str| match option(options, name) {
            Some(Value::String(s)) if !s.is_empty() => Ok(Some(s.as_str())),
            Some(Value::String(_)) | None => Ok(None),
            Some(_) => Err(HostError::invalid(format!("{at}: {name} must be a string"))),
        };
        let (Some(access_key_id), Some(secret_access_key)) =
            (credential("accessKeyId")?, credential("secretAccessKey")?)
        else {
            return Err(HostError::invalid(format!(
                "{at}: accessKeyId and secretAccessKey are required — read them with getSecret(\"AWS_ACCESS_KEY_ID\") and getSecret(\"AWS_SECRET_ACCESS_KEY\")"
            )));
        };
        let session_token = credential("sessionToken")?;
        if access_key_id.len() > 256
            || access_key_id
                .chars()
                .any(|c| c.is_whitespace() || c.is_control() || matches!(c, '/' | ','))
        {
            return Err(HostError::invalid(format!(
                "{at}: accessKeyId must be at most 256 characters, without spaces, '/' or ','"
            )));
        }
        if secret_access_key.len() > MAX_CREDENTIAL_BYTES {
            return Err(HostError::invalid(format!(
                "{at}: secretAccessKey is longer than {MAX_CREDENTIAL_BYTES} bytes"
            )));
        }
        if let Some(token) = session_token
            && (token.len() > MAX_CREDENTIAL_BYTES || token.chars().any(char::is_control))
        {
            return Err(HostError::invalid(format!(
                "{at}: sessionToken must be at most {MAX_CREDENTIAL_BYTES} bytes, without control characters"
            )));
        }
        let stamp = Stamp::read(at, option(options, "signingDate"))?;

        let s3 = service == "s3";
        let wire_path = url.path().to_string();
        let canonical_path = if s3 {
            // One strict encoding of the key, sent as signed.
            let path = wire_path
                .split('/')
                .map(|segment| strict(&percent_decode_str(segment).collect::<Vec<u8>>()))
                .collect::<Vec<_>>()
                .join("/");
            url.set_path(&path);
            path
        } else {
            remove_dot_segments(&wire_path)
                .split('/')
                .map(|segment| strict(segment.as_bytes()))
                .collect::<Vec<_>>()
                .join("/")
        };
        let query_pairs = url.query().map(encoded_pairs).unwrap_or_default();
        Ok(Request {
            url,
            host,
            method,
            service,
            region,
            access_key_id: access_key_id.to_string(),
            secret_access_key: secret_access_key.to_string(),
            session_token: session_token.map(str::to_string),
            stamp,
            canonical_path,
            query_pairs,
        })
    }

    /// `date/region/service/aws4_request`.
    fn scope(&self) -> String {
        format!(
            "{}/{}/{}/aws4_request",
            self.stamp.date, self.region, self.service
        )
    }

    /// The signature of a canonical request.
    fn signature(&self, canonical: &str) -> String {
        let string_to_sign = format!(
            "{ALGORITHM}\n{}\n{}\n{}",
            self.stamp.time,
            self.scope(),
            sha256_hex(canonical.as_bytes())
        );
        let secret = format!("AWS4{}", self.secret_access_key);
        let mut key = hmac(secret.as_bytes(), self.stamp.date.as_bytes());
        for part in [self.region.as_str(), self.service.as_str(), "aws4_request"] {
            key = hmac(&key, part.as_bytes());
        }
        hex(&hmac(&key, string_to_sign.as_bytes()))
    }

    /// Puts `pairs` (already encoded) on the URL as its query, or removes the query.
    fn set_query(&mut self, pairs: &[(String, String)]) {
        if pairs.is_empty() {
            self.url.set_query(None);
        } else {
            let query = pairs
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join("&");
            self.url.set_query(Some(&query));
        }
    }
}

/// A service or region name: letters, digits, `-`, `_` and `.`, at most 64.
fn scope_part(
    at: &str,
    options: &[(String, Value)],
    name: &str,
    default: &str,
) -> Result<String, HostError> {
    match option(options, name) {
        None => Ok(default.to_string()),
        Some(Value::String(s))
            if !s.is_empty()
                && s.len() <= 64
                && s.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.')) =>
        {
            Ok(s.clone())
        }
        Some(_) => Err(HostError::invalid(format!(
            "{at}: {name} must be a name of letters, digits and '-' (such as \"{default}\")"
        ))),
    }
}

/// One header the guest gave, its repeats joined.
struct Header {
    name: String,
    lower: String,
    value: String,
}

/// The `headers` option: names as given (the first spelling of a repeat), values normalized.
fn read_headers(at: &str, value: Option<&Value>) -> Result<Vec<Header>, HostError> {
    let members = options_of(value);
    if members.len() > MAX_HEADERS {
        return Err(HostError::limit(format!(
            "{at}: at most {MAX_HEADERS} headers may be signed"
        )));
    }
    let mut total = 0usize;
    let mut out: Vec<Header> = Vec::new();
    for (name, value) in members {
        let text = match value {
            Value::Undefined | Value::Null => continue,
            Value::String(s) => s.clone(),
            Value::Number(_) | Value::Bool(_) => js_string(value),
            _ => {
                return Err(HostError::invalid(format!(
                    "{at}: header \"{}\" must be a string",
                    shown_name(name)
                )));
            }
        };
        if !is_token(name) {
            return Err(HostError::invalid(format!(
                "{at}: header \"{}\" is not a valid header name",
                shown_name(name)
            )));
        }
        if text.chars().any(|c| c.is_control() && !c.is_whitespace()) {
            return Err(HostError::invalid(format!(
                "{at}: header \"{name}\" has a control character in its value"
            )));
        }
        total = total.saturating_add(name.len() + text.len());
        if total > MAX_HEADER_BYTES {
            return Err(HostError::limit(format!(
                "{at}: the headers pass the {MAX_HEADER_BYTES} byte limit"
            )));
        }
        let value = text.split_whitespace().collect::<Vec<_>>().join(" ");
        let lower = name.to_ascii_lowercase();
        match out.iter_mut().find(|h| h.lower == lower) {
            Some(existing) => {
                existing.value.push(',');
                existing.value.push_str(&value);
            }
            None => out.push(Header {
                name: name.clone(),
                lower,
                value,
            }),
        }
    }
    Ok(out)
}

/// A header name as an error may show it: at most 64 characters, escaped.
fn shown_name(name: &str) -> String {
    name.chars().take(64).flat_map(char::escape_debug).collect()
}

/// An HTTP token (RFC 9110): a method or a header name.
fn is_token(text: &str) -> bool {
    !text.is_empty()
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// A raw query's pairs, each decoded as a form decodes it (`+` a space, `%XX` a byte) and
/// re-encoded strictly; empty pairs (`&&`) are dropped, and a pair without `=` has an empty
/// value. Bytes that are not UTF-8 stay the bytes they were.
fn encoded_pairs(query: &str) -> Vec<(String, String)> {
    query
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            let decode = |s: &str| -> String {
                let spaced = s.replace('+', " ");
                strict(&percent_decode_str(&spaced).collect::<Vec<u8>>())
            };
            (decode(key), decode(value))
        })
        .collect()
}

/// The canonical query string: the encoded pairs sorted by key, then value.
fn canonical_query(pairs: &[(String, String)]) -> String {
    let mut sorted: Vec<&(String, String)> = pairs.iter().collect();
    sorted.sort();
    sorted
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("&")
}

/// RFC 3986 percent-encoding of bytes: unreserved characters stay, the rest are `%XX`.
fn strict(bytes: &[u8]) -> String {
    percent_encode(bytes, STRICT).to_string()
}

/// RFC 3986's dot-segment removal, with empty segments dropped too (AWS's rule for every
/// service but S3): `/a//b/../c/` is `/a/c/`.
fn remove_dot_segments(path: &str) -> String {
    let mut out: Vec<&str> = Vec::new();
    for segment in path.split('/') {
        match segment {
            "" | "." => {}
            ".." => {
                out.pop();
            }
            s => out.push(s),
        }
    }
    let trailing = path.ends_with('/') && !out.is_empty();
    format!("/{}{}", out.join("/"), if trailing { "/" } else { "" })
}

fn hmac(key: &[u8], data: &[u8]) -> Vec<u8> {
    // HMAC takes a key of any length, so this never fails.
    match Hmac::<Sha256>::new_from_slice(key) {
        Ok(mut mac) => {
            mac.update(data);
            mac.finalize().into_bytes().to_vec()
        }
        Err(_) => Vec::new(),
    }
}

/// The signing time: `20150830T123600Z` and its date.
struct Stamp {
    time: String,
    date: String,
}

impl Stamp {
    fn read(at: &str, value: Option<&Value>) -> Result<Stamp, HostError> {
        let bad = || {
            HostError::invalid(format!(
                "{at}: signingDate must be an ISO 8601 UTC time (\"2015-08-30T12:36:00Z\"), \"20150830T123600Z\", or milliseconds since 1970, between 1970 and 9999"
            ))
        };
        let secs = match value {
            None => SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs() as i64),
            Some(Value::Number(ms)) if ms.is_finite() && *ms >= 0.0 => (ms / 1000.0).floor() as i64,
            Some(Value::String(s)) => parse_utc(s).ok_or_else(bad)?,
            Some(_) => return Err(bad()),
        };
        // 9999-12-31T23:59:59Z.
        if !(0..=253_402_300_799).contains(&secs) {
            return Err(bad());
        }
        let (days, rest) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
        let (y, m, d) = civil_from_days(days);
        let date = format!("{y:04}{m:02}{d:02}");
        let time = format!(
            "{date}T{:02}{:02}{:02}Z",
            rest / 3600,
            rest % 3600 / 60,
            rest % 60
        );
        Ok(Stamp { time, date })
    }
}

/// Seconds since 1970 of `YYYY-MM-DDTHH:MM:SS[.fff]Z` or `YYYYMMDDTHHMMSSZ`.
fn parse_utc(text: &str) -> Option<i64> {
    let b = text.as_bytes();
    let num = |range: std::ops::Range<usize>| -> Option<i64> {
        let part = b.get(range)?;
        if part.iter().all(u8::is_ascii_digit) {
            std::str::from_utf8(part).ok()?.parse().ok()
        } else {
            None
        }
    };
    let (y, mo, d, h, mi, s) = if b.len() == 16 && b[8] == b'T' && b[15] == b'Z' {
        (
            num(0..4)?,
            num(4..6)?,
            num(6..8)?,
            num(9..11)?,
            num(11..13)?,
            num(13..15)?,
        )
    } else {
        let rest = b.get(19..)?;
        let fraction_ok = match rest {
            [b'Z'] => true,
            [b'.', digits @ .., b'Z'] => {
                !digits.is_empty() && digits.iter().all(u8::is_ascii_digit)
            }
            _ => false,
        };
        let seps = [(4, b'-'), (7, b'-'), (10, b'T'), (13, b':'), (16, b':')];
        if !fraction_ok || seps.iter().any(|&(i, c)| b.get(i) != Some(&c)) {
            return None;
        }
        (
            num(0..4)?,
            num(5..7)?,
            num(8..10)?,
            num(11..13)?,
            num(14..16)?,
            num(17..19)?,
        )
    };
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let month_days = [
        31,
        if leap { 29 } else { 28 },
        31,
        30,
        31,
        30,
        31,
        31,
        30,
        31,
        30,
        31,
    ];
    if !(1..=12).contains(&mo) || h > 23 || mi > 59 || s > 59 {
        return None;
    }
    if d < 1 || d > month_days[(mo - 1) as usize] {
        return None;
    }
    Some(days_from_civil(y, mo, d) * 86_400 + h * 3600 + mi * 60 + s)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date of a day count since 1970-01-01 (the inverse of [`days_from_civil`]).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::HostErrorCode;

    fn s(v: &str) -> Value {
        Value::String(v.into())
    }

    fn obj(members: &[(&str, Value)]) -> Value {
        Value::Object(
            members
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
        )
    }

    const SECRET: &str = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";

    fn vanilla(extra: &[(&str, Value)]) -> Value {
        let mut members = vec![
            ("url", s("https://example.amazonaws.com/")),
            ("region", s("us-east-1")),
            ("service", s("service")),
            ("accessKeyId", s("AKIDEXAMPLE")),
            ("secretAccessKey", s(SECRET)),
            ("signingDate", s("2015-08-30T12:36:00Z")),
        ];
        for (key, value) in extra {
            match members.iter_mut().find(|(k, _)| k == key) {
                Some(member) => member.1 = value.clone(),
                None => members.push((key, value.clone())),
            }
        }
        obj(&members)
    }

    fn header<'a>(signed: &'a Value, name: &str) -> Option<&'a str> {
        signed.get("headers")?.get(name)?.as_str()
    }

    /// AWS's own SigV4 test suite, `get-vanilla` and `get-vanilla-query-order-key-case`.
    #[test]
    fn reproduces_the_aws_suite() {
        let signed = sigv4(&[vanilla(&[])]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            header(&signed, "Authorization"),
            Some(
                "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, SignedHeaders=host;x-amz-date, Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"
            )
        );
        assert_eq!(header(&signed, "x-amz-date"), Some("20150830T123600Z"));
        assert_eq!(header(&signed, "host"), None);
        let signed = sigv4(&[vanilla(&[(
            "url",
            s("https://example.amazonaws.com/?Param2=value2&Param1=value1"),
        )])])
        .unwrap_or_else(|e| panic!("{e}"));
        assert!(
            header(&signed, "Authorization").is_some_and(|a| a.ends_with(
                "Signature=b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500"
            )),
            "{signed:?}"
        );
    }

    #[test]
    fn s3_signs_the_payload_and_the_token() {
        let signed = sigv4(&[obj(&[
            ("method", s("put")),
            (
                "url",
                s("https://bucket.s3.us-east-1.amazonaws.com/a key(1).txt"),
            ),
            ("accessKeyId", s("AK")),
            ("secretAccessKey", s("SK")),
            ("sessionToken", s("TOKEN")),
            ("body", s("hello")),
        ])])
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(signed.get("method").and_then(Value::as_str), Some("PUT"));
        assert_eq!(
            signed.get("url").and_then(Value::as_str),
            Some("https://bucket.s3.us-east-1.amazonaws.com/a%20key%281%29.txt")
        );
        assert_eq!(
            header(&signed, "x-amz-content-sha256"),
            Some("2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824")
        );
        assert_eq!(header(&signed, "x-amz-security-token"), Some("TOKEN"));
        assert!(header(&signed, "Authorization").is_some_and(|a| {
            a.contains("SignedHeaders=host;x-amz-content-sha256;x-amz-date;x-amz-security-token,")
        }));
        assert!(signed.get("body").is_none());
    }

    #[test]
    fn presigns_with_the_signature_last() {
        let url = presign(&[obj(&[
            (
                "url",
                s("https://bucket.s3.amazonaws.com/report.pdf?versionId=3"),
            ),
            ("expiresIn", Value::Number(99_999_999.0)),
            ("accessKeyId", s("AK")),
            ("secretAccessKey", s("SK")),
            ("signingDate", Value::Number(1_440_938_160_000.0)),
        ])])
        .unwrap_or_else(|e| panic!("{e}"));
        let url = url.as_str().unwrap_or_default();
        assert!(url.starts_with("https://bucket.s3.amazonaws.com/report.pdf?versionId=3&X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AK%2F20150830%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20150830T123600Z&X-Amz-Expires=604800&X-Amz-SignedHeaders=host&X-Amz-Signature="), "{url}");
    }

    #[test]
    fn times() {
        for (given, stamp) in [
            (s("2015-08-30T12:36:00.000Z"), "20150830T123600Z"),
            (s("20000229T235959Z"), "20000229T235959Z"),
            (Value::Number(0.0), "19700101T000000Z"),
            (Value::Number(253_402_300_799_999.0), "99991231T235959Z"),
        ] {
            let got = Stamp::read("aws.sigv4", Some(&given)).map(|s| s.time);
            assert_eq!(got.as_deref(), Ok(stamp), "{given:?}");
        }
        for bad in [
            s("2015-02-29T00:00:00Z"),
            s("2015-08-30 12:36:00Z"),
            s("2015-08-30T12:36:00+02:00"),
            s("2015-08-30T24:00:00Z"),
            s("20150830T123600"),
            Value::Number(-1.0),
            Value::Number(f64::INFINITY),
            Value::Number(1e20),
            Value::Bool(true),
        ] {
            assert!(Stamp::read("aws.sigv4", Some(&bad)).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn path_and_query_rules() {
        assert_eq!(remove_dot_segments("/a//b/../c/"), "/a/c/");
        assert_eq!(remove_dot_segments("//"), "/");
        assert_eq!(remove_dot_segments("/"), "/");
        assert_eq!(
            encoded_pairs("b=a+b&&a&%FF=%e2%82%ac&c=*"),
            [
                ("b".to_string(), "a%20b".to_string()),
                ("a".into(), "".into()),
                ("%FF".into(), "%E2%82%AC".into()),
                ("c".into(), "%2A".into()),
            ]
        );
    }

    #[test]
    fn errors_never_show_the_secret() {
        let cases: Vec<Value> = vec![
            vanilla(&[("url", s("not a url"))]),
            vanilla(&[("url", s(&format!("ftp://{SECRET}@x/")))]),
            vanilla(&[("url", s(&format!("https://u:{SECRET}@x/")))]),
            vanilla(&[("method", s(SECRET))]),
            vanilla(&[("region", s(SECRET))]),
            vanilla(&[("service", s(SECRET))]),
            vanilla(&[("accessKeyId", s(&format!("{SECRET} x")))]),
            vanilla(&[("secretAccessKey", Value::Number(1.0))]),
            vanilla(&[("sessionToken", s(&format!("{SECRET}\u{1}")))]),
            vanilla(&[("signingDate", s(SECRET))]),
            vanilla(&[("payloadHash", s(&format!("{SECRET} ")))]),
            vanilla(&[("body", Value::Array(vec![s(SECRET)]))]),
            vanilla(&[("headers", obj(&[("x-a", obj(&[("k", s(SECRET))]))]))]),
            vanilla(&[("headers", obj(&[("x-a", s(&format!("{SECRET}\u{0}")))]))]),
            vanilla(&[("body", s(&"x".repeat(MAX_SIGNED_BODY_BYTES + 1)))]),
            obj(&[("url", s("https://x/")), ("secretAccessKey", s(SECRET))]),
        ];
        for case in cases {
            for f in [sigv4, presign] {
                match f(std::slice::from_ref(&case)) {
                    Ok(v) => assert!(!format!("{v:?}").contains(SECRET)),
                    Err(e) => {
                        assert!(e.message().starts_with("aws."), "{e}");
                        assert!(!e.message().contains(SECRET), "{e}");
                        assert!(!e.message().contains("wJalr"), "{e}");
                    }
                }
            }
        }
        // The results never carry it either.
        let signed = sigv4(&[vanilla(&[("body", s(SECRET))])]).unwrap_or_else(|e| panic!("{e}"));
        assert!(!format!("{signed:?}").contains(SECRET));
        let url = presign(&[vanilla(&[])]).unwrap_or_else(|e| panic!("{e}"));
        assert!(!format!("{url:?}").contains("wJalr"));
        let e = sigv4(&[vanilla(&[(
            "body",
            s(&"x".repeat(MAX_SIGNED_BODY_BYTES + 1)),
        )])])
        .err();
        assert_eq!(e.map(|e| e.code()), Some(HostErrorCode::LimitExceeded));
    }

    #[test]
    fn url_cap_holds() {
        let long = format!(
            "https://s3.amazonaws.com/?{}",
            "a=1&".repeat(MAX_URL_BYTES / 4)
        );
        for f in [sigv4, presign] {
            let e = f(&[vanilla(&[("url", s(&long))])]).err();
            assert_eq!(e.map(|e| e.code()), Some(HostErrorCode::LimitExceeded));
        }
        // Just under it, a query of 16,000 pairs signs.
        let under = format!(
            "https://s3.amazonaws.com/?{}",
            "a=1&".repeat(MAX_URL_BYTES / 4 - 16)
        );
        assert!(sigv4(&[vanilla(&[("url", s(&under))])]).is_ok());
    }

    #[test]
    fn header_caps_hold() {
        let many: Vec<(String, Value)> = (0..=MAX_HEADERS)
            .map(|i| (format!("x-h{i}"), s("v")))
            .collect();
        let e = sigv4(&[vanilla(&[("headers", Value::Object(many))])]).err();
        assert_eq!(e.map(|e| e.code()), Some(HostErrorCode::LimitExceeded));
        let big = vanilla(&[("headers", obj(&[("x-a", s(&"v".repeat(MAX_HEADER_BYTES)))]))]);
        assert_eq!(
            sigv4(&[big]).err().map(|e| e.code()),
            Some(HostErrorCode::LimitExceeded)
        );
    }
}
