//! Error answers: one JSON shape, `{"detail": "<message>"}`, with the status that says why.
//! No message names a filesystem path.

use axum::Json;
use axum::extract::rejection::BytesRejection;
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
}

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
            ApiError::Busy => StatusCode::SERVICE_UNAVAILABLE,
        }
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
        if self == ApiError::Busy {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECONDS));
        }
        response
    }
}
