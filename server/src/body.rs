//! Request bodies of the executing and state-changing routes ([`JsonBody`]): `Content-Type:
//! application/json` or `415`; the whole body within the body read timeout or `408`; at most
//! the body cap or `413`; JSON nested at most [`MAX_JSON_DEPTH`] deep or `400`; then parsed
//! into the route's type or `400` naming what is wrong. Each check runs before the route does,
//! so a refused request never reaches the run gate.
//!
//! The timeout bounds the whole body, not the gap between two reads (what tower-http's
//! `TimeoutBody` bounds): a client that trickles one byte a second would otherwise hold its
//! buffer until the cap.

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::{HeaderMap, header};
use serde::de::DeserializeOwned;

use crate::AppState;
use crate::error::ApiError;

/// The deepest JSON nesting a request body may have (an array or object is one level). Run
/// inputs, host-module arguments and workflow graphs stay far below it; every layer that
/// converts a value (`Value::from_json`, the packed tapes to the worker) then has a known
/// bound. `serde_json`'s own recursion limit (128) is never reached.
pub const MAX_JSON_DEPTH: usize = 64;

/// A JSON request body, checked as the module documentation says.
pub struct JsonBody<T>(pub T);

impl<T: DeserializeOwned> FromRequest<AppState> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &AppState) -> Result<Self, ApiError> {
        read(request, state)
            .await
            .map(JsonBody)
            .inspect_err(|refusal| {
                if let Some(rule) = refusal.rule() {
                    state.metrics().refused(rule);
                }
            })
    }
}

async fn read<T: DeserializeOwned>(request: Request, state: &AppState) -> Result<T, ApiError> {
    if !is_json(request.headers()) {
        return Err(ApiError::UnsupportedMediaType);
    }
    let config = state.config();
    let (cap, limit) = (config.max_request_bytes, config.body_timeout);
    let bytes = tokio::time::timeout(limit, Bytes::from_request(request, state))
        .await
        .map_err(|_| ApiError::BodyTimeout(limit))?
        .map_err(|rejection| ApiError::from_body(&rejection, cap))?;
    parse(&bytes)
}

/// Whether the request says its body is `application/json` (parameters such as `charset`
/// allowed; `+json` types are not this).
pub(crate) fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|essence| essence.trim().eq_ignore_ascii_case("application/json"))
}

/// Parses a body already read; an empty body is `{}`.
fn parse<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let bytes: &[u8] = if bytes.trim_ascii().is_empty() {
        b"{}"
    } else {
        bytes
    };
    if nesting_exceeds(bytes, MAX_JSON_DEPTH) {
        return Err(ApiError::TooDeep(MAX_JSON_DEPTH));
    }
    serde_json::from_slice(bytes).map_err(|e| {
        ApiError::BadRequest(format!(
            "the request body is not what the route expects: {e}"
        ))
    })
}

/// Whether JSON text opens more than `max` arrays or objects inside each other. A scan of the
/// bytes (strings and their escapes skipped), so the limit holds before any parser recurses;
/// for text that is not JSON the parser's own error follows.
fn nesting_exceeds(bytes: &[u8], max: usize) -> bool {
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for &b in bytes {
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > max {
                    return true;
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nesting_counts_brackets_outside_strings_only() {
        assert!(!nesting_exceeds(br#"{"a":[[1]]}"#, 3));
        assert!(nesting_exceeds(br#"{"a":[[[1]]]}"#, 3));
        assert!(!nesting_exceeds(br#"{"a":"[[[[[[\"[[[["}"#, 1));
        let deep = format!("{}{}", "[".repeat(65), "]".repeat(65));
        assert!(nesting_exceeds(deep.as_bytes(), MAX_JSON_DEPTH));
        let ok = format!("{}{}", "[".repeat(64), "]".repeat(64));
        assert!(!nesting_exceeds(ok.as_bytes(), MAX_JSON_DEPTH));
    }

    #[test]
    fn only_application_json_is_json() {
        let mut headers = HeaderMap::new();
        assert!(!is_json(&headers));
        for (value, json) in [
            ("application/json", true),
            ("Application/JSON; charset=utf-8", true),
            ("text/plain", false),
            ("application/x-www-form-urlencoded", false),
            ("multipart/form-data; boundary=x", false),
            ("application/merge-patch+json", false),
        ] {
            headers.insert(
                header::CONTENT_TYPE,
                value.parse().unwrap_or_else(|e| panic!("{e}")),
            );
            assert_eq!(is_json(&headers), json, "{value}");
        }
    }
}
