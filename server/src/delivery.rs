//! `GET /api/sandbox-modules/{*id}`: one module body by opaque id, answered only through the
//! catalog's `authorize_delivery` (an entry specifier such as `@acme/geo`, or a graph-file id
//! `<pack>::<file>`). The route never turns an id into a filesystem lookup: traversal attempts
//! are just ids the catalog does not know.

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use nodetool_protocol::catalog::{AuthorizedDelivery, RefusalReason};

use crate::AppState;
use crate::error::ApiError;

/// `X-Content-Digest`: the owning module's graph digest.
pub const CONTENT_DIGEST: &str = "x-content-digest";
/// `X-Content-Sha256`: SHA-256 of exactly this body.
pub const CONTENT_SHA256: &str = "x-content-sha256";
/// `X-Sandbox-Module-Dependencies`: JSON array of the delivery ids this file imports.
pub const DEPENDENCIES: &str = "x-sandbox-module-dependencies";
/// `X-Sandbox-Pack`.
pub const PACK: &str = "x-sandbox-pack";
/// `X-Sandbox-Pack-Version` (only for a versioned pack).
pub const PACK_VERSION: &str = "x-sandbox-pack-version";
/// `X-Sandbox-File-Id`: the pack-relative file id relative imports resolve against.
pub const FILE_ID: &str = "x-sandbox-file-id";
/// `X-Sandbox-Internal`: `1` for an internal helper, `0` for a public entry.
pub const INTERNAL: &str = "x-sandbox-internal";
/// `X-Sandbox-Wasm-Contract`: the WASM contract JSON (public WASM entries only).
pub const WASM_CONTRACT: &str = "x-sandbox-wasm-contract";
/// `X-Sandbox-Host-Module`: the host module id (host facades only).
pub const HOST_MODULE: &str = "x-sandbox-host-module";

/// The delivery route's handler.
pub async fn deliver(
    State(state): State<AppState>,
    Path(id): Path<String>,
    request_headers: HeaderMap,
) -> Result<Response, ApiError> {
    if id.is_empty() {
        return Err(ApiError::not_found());
    }
    let catalog = state.catalog();
    let delivery =
        catalog
            .authorize_delivery(&id)
            .await
            .map_err(|refusal| match refusal.reason {
                RefusalReason::Forbidden => {
                    state.metrics().delivered("forbidden");
                    ApiError::Forbidden(refusal.message)
                }
                RefusalReason::NotFound | RefusalReason::Unavailable => {
                    state.metrics().delivered("not-found");
                    ApiError::NotFound(refusal.message)
                }
            })?;
    let headers = delivery_headers(&delivery)?;
    let etag = format!("\"{}\"", delivery.content_digest);
    let status = if if_none_match_hits(&request_headers, &etag) {
        StatusCode::NOT_MODIFIED
    } else {
        StatusCode::OK
    };
    let body = if status == StatusCode::OK {
        state.metrics().delivered("ok");
        Body::from(delivery.body.as_bytes().to_vec())
    } else {
        state.metrics().delivered("not-modified");
        Body::empty()
    };
    Ok((status, headers, body).into_response())
}

/// Whether `If-None-Match` names the current entity tag (or `*`). Weak tags compare equal to
/// the strong tag with the same value, as RFC 9110 says for `If-None-Match`.
fn if_none_match_hits(headers: &HeaderMap, etag: &str) -> bool {
    headers
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .any(|tag| tag == "*" || tag == etag || tag.strip_prefix("W/") == Some(etag))
}

/// The headers of a 200 and of a 304 (reference §7).
fn delivery_headers(d: &AuthorizedDelivery) -> Result<HeaderMap, ApiError> {
    let mut headers = HeaderMap::new();
    let mut set = |name: &'static str, value: &str| -> Result<(), ApiError> {
        // Values come from the catalog (names, ids, digests, JSON); one that cannot be a
        // header value is a catalog bug, answered as such rather than as a panic.
        let value = HeaderValue::from_str(value).map_err(|_| {
            ApiError::Internal(format!("{name} of {} is not a header value", d.module_id))
        })?;
        headers.insert(HeaderName::from_static(name), value);
        Ok(())
    };
    set("content-type", d.media_type.as_str())?;
    set(CONTENT_DIGEST, &d.content_digest)?;
    set(CONTENT_SHA256, &d.content_sha256)?;
    set("etag", &format!("\"{}\"", d.content_digest))?;
    let dependencies = serde_json::to_string(&d.dependencies)
        .map_err(|e| ApiError::Internal(format!("dependencies of {}: {e}", d.module_id)))?;
    set(DEPENDENCIES, &ascii_json(&dependencies))?;
    set(PACK, &d.pack_name)?;
    if let Some(version) = &d.pack_version {
        set(PACK_VERSION, version)?;
    }
    set(FILE_ID, &d.file_id)?;
    set(INTERNAL, if d.internal { "1" } else { "0" })?;
    if let Some(contract) = &d.wasm {
        let json = serde_json::to_string(contract)
            .map_err(|e| ApiError::Internal(format!("WASM contract of {}: {e}", d.module_id)))?;
        set(WASM_CONTRACT, &ascii_json(&json))?;
    }
    if let Some(host) = &d.host_id {
        set(HOST_MODULE, host)?;
    }
    set("cache-control", "private, no-cache")?;
    Ok(headers)
}

/// JSON with every non-ASCII character escaped (`\uXXXX`), so a header value stays ASCII while
/// still parsing to the same strings (ids may contain any character JSON strings can).
fn ascii_json(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        if c.is_ascii() {
            out.push(c);
        } else {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_json_stays_ascii_and_parses_back() {
        let ids = vec!["@acme/geo::sandbox/é😀.js".to_string()];
        let header = ascii_json(&serde_json::to_string(&ids).unwrap_or_default());
        assert!(header.is_ascii(), "{header}");
        let back: Vec<String> = serde_json::from_str(&header).unwrap_or_default();
        assert_eq!(back, ids);
    }
}
