//! Error answers: one JSON shape, `{"detail": "<message>"}`, with the status that says why.
//! No message names a filesystem path, and none repeats what the client sent (a Host, an
//! Origin, a token): each names the rule and what the server accepts instead. Every refusal has
//! a stable [`ApiError::rule`], which the request log line and `/metrics` carry.

use axum::Json;
use axum::extract::rejection::BytesRejection;
use std::time::Duration;

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// Seconds a client is told to wait when the run queue is full.
pub const RETRY_AFTER_SECONDS: u32 = 1;

/// Why a request failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApiError {
    /// 400: the request is malformed.
    BadRequest(String),
    /// 403: the catalog refused the delivery.
    Forbidden(String),
    /// 404: no such route, module, pack or host module.
    NotFound(String),
    /// 413: the request body is over the cap.
    TooLarge(usize),
    /// 422: a host-module call the implementation refused (its own message).
    Unprocessable(String),
    /// 500: something that is the server's fault (logged in full; the answer says little).
    Internal(String),
    /// 500: discovery failed on reload; the current catalog stays (the message names no path).
    ReloadFailed(String),
    /// 503: every run slot and queue place is taken.
    Busy,
    /// 503: the server is shutting down (after SIGTERM) and admits no new work.
    Draining,
    /// 400: the request names no host (neither a `Host` header nor an absolute URI).
    NoHost,
    /// 421: the `Host` header names a host this server does not answer to (a DNS-rebinding
    /// page's name); the message lists the hosts it does answer to.
    MisdirectedHost(String),
    /// 403: the `Origin` header names a page that is neither this server nor an
    /// `--allow-origin`.
    CrossOrigin,
    /// 401: an `/api/` route without the bearer token this server requires.
    Unauthorized,
    /// 403: reloading the packs without the token or the page's header from loopback.
    OperatorOnly,
    /// 415: a state-changing or executing route without `Content-Type: application/json`.
    UnsupportedMediaType,
    /// 408: the request body did not arrive within the body read timeout.
    BodyTimeout(Duration),
    /// 400: the request body nests JSON deeper than the server's depth limit.
    TooDeep(usize),
    /// 431: the request line and headers are larger than the server accepts.
    HeadTooLarge(usize),
}

/// The rule a refused request broke, as the log line and `/metrics` name it (response
/// extension set by [`ApiError::into_response`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refused(pub &'static str);

impl ApiError {
    /// The status code.
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::Forbidden(_) => StatusCode::FORBIDDEN,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::Unprocessable(_) => StatusCode::UNPROCESSABLE_ENTITY,
            ApiError::Internal(_) | ApiError::ReloadFailed(_) => StatusCode::INTERNAL_SERVER_ERROR,
            ApiError::Busy | ApiError::Draining => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::NoHost | ApiError::TooDeep(_) => StatusCode::BAD_REQUEST,
            ApiError::MisdirectedHost(_) => StatusCode::MISDIRECTED_REQUEST,
            ApiError::CrossOrigin | ApiError::OperatorOnly => StatusCode::FORBIDDEN,
            ApiError::Unauthorized => StatusCode::UNAUTHORIZED,
            ApiError::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiError::BodyTimeout(_) => StatusCode::REQUEST_TIMEOUT,
            ApiError::HeadTooLarge(_) => StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
        }
    }

    /// The stable name of the rule behind a refusal of the request itself (`None` for answers
    /// about what was asked: a missing module, a refused delivery, a failed reload).
    pub fn rule(&self) -> Option<&'static str> {
        Some(match self {
            ApiError::BadRequest(_) => "malformed",
            ApiError::TooLarge(_) => "body-size",
            ApiError::Busy => "busy",
            ApiError::Draining => "draining",
            ApiError::NoHost | ApiError::MisdirectedHost(_) => "host",
            ApiError::CrossOrigin => "origin",
            ApiError::Unauthorized => "token",
            ApiError::OperatorOnly => "operator",
            ApiError::UnsupportedMediaType => "content-type",
            ApiError::BodyTimeout(_) => "body-timeout",
            ApiError::TooDeep(_) => "json-depth",
            ApiError::HeadTooLarge(_) => "head-size",
            ApiError::Forbidden(_)
            | ApiError::NotFound(_)
            | ApiError::Unprocessable(_)
            | ApiError::Internal(_)
            | ApiError::ReloadFailed(_) => return None,
        })
    }

    /// The plain 404 of an unknown route or an empty id.
    pub fn not_found() -> ApiError {
        ApiError::NotFound("Not found".into())
    }

    /// A request body that could not be read: over the cap (413) or broken (400).
    pub fn from_body(rejection: &BytesRejection, cap: usize) -> ApiError {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::TooLarge(cap)
        } else {
            ApiError::BadRequest(format!("the request body could not be read: {rejection}"))
        }
    }

    fn detail(&self) -> String {
        match self {
            ApiError::BadRequest(m)
            | ApiError::Forbidden(m)
            | ApiError::NotFound(m)
            | ApiError::Unprocessable(m) => m.clone(),
            ApiError::TooLarge(cap) => {
                format!("the request body is larger than the server accepts ({cap} bytes)")
            }
            ApiError::Internal(_) => "the server failed to answer (see its log)".into(),
            ApiError::ReloadFailed(why) => {
                format!(
                    "the packs could not be discovered again, so the current catalog stays: {why}"
                )
            }
            ApiError::Busy => {
                "the server is running and queueing as many runs as it can; retry shortly".into()
            }
            ApiError::Draining => {
                "the server is shutting down and admits no new work; retry shortly (another replica answers)".into()
            }
            ApiError::NoHost => {
                "the request names no host: HTTP/1.1 requires a Host header, and this server checks it (DNS-rebinding guard)".into()
            }
            ApiError::MisdirectedHost(accepted) => format!(
                "the Host header names a host this server does not answer to (DNS-rebinding guard); it answers to {accepted}; name another with --public-host"
            ),
            ApiError::CrossOrigin => {
                "requests from another origin are refused: the Origin header names a page that is not this server (an operator can allow one with --allow-origin)".into()
            }
            ApiError::Unauthorized => {
                "this server requires `Authorization: Bearer <token>` on /api/ routes; the token is in the file its --token-file names".into()
            }
            ApiError::OperatorOnly => format!(
                "reloading the packs is an operator action: send the bearer token, or send `{}: 1` from a loopback address (the Packages page does)",
                crate::access::RELOAD_HEADER
            ),
            ApiError::UnsupportedMediaType => {
                "this route accepts only `Content-Type: application/json` (a page on another site can send other types without asking)".into()
            }
            ApiError::BodyTimeout(limit) => format!(
                "the request body did not arrive within {} ms (--body-timeout-ms)",
                limit.as_millis()
            ),
            ApiError::TooDeep(limit) => format!(
                "the request body nests JSON deeper than {limit} levels, the server's depth limit"
            ),
            ApiError::HeadTooLarge(limit) => format!(
                "the request line and headers are larger than the server accepts ({limit} bytes)"
            ),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if let ApiError::Internal(why) = &self {
            tracing::error!(error = %why, "request failed");
        }
        let mut response =
            (self.status(), Json(json!({ "detail": self.detail() }))).into_response();
        match self {
            ApiError::Busy | ApiError::Draining => {
                response
                    .headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECONDS));
            }
            ApiError::Unauthorized => {
                response.headers_mut().insert(
                    header::WWW_AUTHENTICATE,
                    HeaderValue::from_static("Bearer realm=\"nodetool\""),
                );
            }
            _ => {}
        }
        if let Some(rule) = self.rule() {
            response.extensions_mut().insert(Refused(rule));
        }
        response
    }
}
