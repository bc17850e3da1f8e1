//! For supervisors and load balancers: `GET /healthz` (the process answers), `GET /readyz`
//! (it should be sent work) and `GET /metrics` (see `metrics`). None of them is under `/api/`,
//! so a probe needs no token; none of them names a pack, a path or anything a client sent.

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::AppState;
use crate::error::ApiError;

/// `GET /healthz`: `200 {"status":"ok"}` whenever the process can answer at all.
pub async fn healthz() -> Json<serde_json::Value> {
    Json(json!({ "status": "ok" }))
}

/// `GET /readyz`: `200` when the catalog is loaded (it always is once the server listens: a
/// failed reload keeps the current one), a sandbox worker is ready or busy, and the server is
/// not draining; `503` with a `detail` saying which is not so.
pub async fn readyz(State(state): State<AppState>) -> Response {
    let catalog = state.catalog();
    let workers = state.runner().pool().map(|p| p.ready());
    let body = |ready: bool| {
        json!({
            "ready": ready,
            "draining": state.draining(),
            "modules": catalog.summaries().len(),
            "workersReady": workers,
            "runsRunning": state.gate().running(),
        })
    };
    match state.unready() {
        None => (StatusCode::OK, Json(body(true))).into_response(),
        Some(why) => {
            let mut answer = body(false);
            answer["detail"] = json!(why);
            (StatusCode::SERVICE_UNAVAILABLE, Json(answer)).into_response()
        }
    }
}

/// `GET /metrics`.
pub async fn metrics(State(state): State<AppState>) -> Response {
    let catalog = state.catalog();
    match state
        .metrics()
        .encode(catalog.summaries().len(), catalog.diagnostics().len())
    {
        Ok(text) => (
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static(crate::metrics::CONTENT_TYPE),
            )],
            text,
        )
            .into_response(),
        Err(e) => ApiError::Internal(format!("encoding the metrics failed: {e}")).into_response(),
    }
}
