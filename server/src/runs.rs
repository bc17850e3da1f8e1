//! Work that executes: `POST /api/run`, `POST /api/validate` and
//! `POST /api/host-modules/{id}/{export}`. Each body is checked first (`body::JsonBody`: JSON
//! only, in time, capped in size and depth), then admitted through the run gate (a bounded
//! number at once, `503` beyond the queue or while draining), and executes off the async
//! reactor. Runs and host calls are counted by outcome code and their answers carry it for the
//! request log line.

use std::time::{Duration, Instant};

use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use nodetool_frontend::answers;
use nodetool_frontend::run::BodyRun;
use nodetool_guest::RunOutcome;
use nodetool_guest::{CancelToken, Capabilities, RunLimits};
use nodetool_protocol::catalog::{Declaration, ModuleKind, ResolvedKind};
use nodetool_protocol::host::host_module;
use nodetool_protocol::value::Value;
use serde::Deserialize;
use serde_json::{Value as JsonValue, json};

use crate::body::JsonBody;
use crate::error::ApiError;
use crate::{AppState, RunOutcomeCode, Work};

/// `POST /api/run`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct RunBody {
    /// The Code node body.
    code: String,
    /// The `inputs` object (any JSON; `{"$bytes": ...}` decodes to bytes).
    #[serde(default)]
    input: Option<JsonValue>,
    /// The deadline in milliseconds (1 to the standard 30,000).
    #[serde(default)]
    timeout_ms: Option<u64>,
}

/// `POST /api/validate`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ValidateBody {
    /// The workflow graph (`{"nodes": [...]}`, or a document with a `graph` object).
    graph: JsonValue,
}

/// `POST /api/host-modules/{id}/{export}`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct HostCallBody {
    /// The arguments, as JSON with `{"$bytes": ...}` for bytes.
    #[serde(default)]
    args: Vec<JsonValue>,
}

/// The outcome code of a run (`ok` or its error code), counted and put on the answer.
fn count(state: &AppState, kind: &'static str, outcome: &RunOutcome) -> RunOutcomeCode {
    let code = match &outcome.result {
        Ok(_) => "ok",
        Err(e) => e.code.as_str(),
    };
    state.metrics().ran(kind, code, outcome.duration);
    RunOutcomeCode(code)
}

/// Cancels a run whose request went away before it finished (a client that disconnected).
struct CancelOnDrop(Option<CancelToken>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(token) = self.0.take() {
            token.cancel();
        }
    }
}

/// The run route: the same JSON as `nodetool run --json`, status 200 whether the run
/// succeeded or failed (the request did not).
pub(crate) async fn run(
    State(state): State<AppState>,
    JsonBody(request): JsonBody<RunBody>,
) -> Result<Response, ApiError> {
    let mut limits = RunLimits::STANDARD;
    if let Some(ms) = request.timeout_ms {
        let max = RunLimits::STANDARD.timeout.as_millis();
        if ms == 0 || u128::from(ms) > max {
            return Err(ApiError::BadRequest(format!(
                "timeoutMs must be between 1 and {max}"
            )));
        }
        limits.timeout = Duration::from_millis(ms);
    }
    let inputs = request
        .input
        .map_or(Value::Object(Vec::new()), Value::from_json);
    let admitted = state.admit(Work::Run).await?;
    tracing::debug!("run admitted");
    state.note_deadline(Instant::now() + limits.timeout);
    // The snapshot is taken once the run is admitted: it is the catalog the run started with,
    // whatever a reload swaps in while it executes.
    let catalog = state.catalog();
    let runner = state.runner();
    let cancel = CancelToken::new();
    let mut guard = CancelOnDrop(Some(cancel.clone()));
    let running = state.clone();
    let outcome = tokio::task::spawn_blocking(move || {
        let _admitted = admitted;
        let state = running;
        // The body is parsed in a worker (never here); a shipped pack it imports compiles now
        // if nothing compiled it yet, as in `nodetool run`.
        let imports = match runner.scan(&request.code, Some(&cancel)) {
            Ok(imports) => imports,
            Err(error) => {
                return nodetool_guest::RunOutcome {
                    result: Err(error),
                    logs: Vec::new(),
                    duration: Duration::ZERO,
                };
            }
        };
        let catalog = state.catalog_for(&imports, catalog);
        runner.run_scanned(
            catalog.as_ref(),
            &imports,
            BodyRun {
                code: &request.code,
                inputs: &inputs,
                limits,
                capabilities: Capabilities::default(),
                cancel: Some(cancel),
            },
        )
    })
    .await
    .map_err(|e| ApiError::Internal(format!("a run panicked: {e}")))?;
    guard.0 = None;
    let code = count(&state, "run", &outcome);
    Ok((Extension(code), Json(answers::run_json(&outcome))).into_response())
}

/// The validate route: the same JSON as `nodetool validate --json`.
pub(crate) async fn validate(
    State(state): State<AppState>,
    JsonBody(request): JsonBody<ValidateBody>,
) -> Result<Json<JsonValue>, ApiError> {
    let admitted = state.admit(Work::Validate).await?;
    let catalog = state.catalog();
    let runner = state.runner();
    let issues = tokio::task::spawn_blocking(move || {
        let _admitted = admitted;
        // Every body is parsed in a sandbox worker, never in the server.
        runner.validate_graph(&request.graph, catalog.as_ref())
    })
    .await
    .map_err(|e| ApiError::Internal(format!("a validation panicked: {e}")))?
    .map_err(|e| ApiError::BadRequest(e.0))?;
    Ok(Json(answers::validate_json(&issues)))
}

/// The host-module route for the browser runner: one call of `<id>.<export>` through the
/// host dispatcher, with its checks, limits and messages. The id must be a host module
/// NodeTool implements and an installed pack (its pinned one) must serve it.
pub(crate) async fn host_call(
    State(state): State<AppState>,
    Path((id, export)): Path<(String, String)>,
    JsonBody(request): JsonBody<HostCallBody>,
) -> Result<Response, ApiError> {
    let Some(spec) = host_module(&id) else {
        return Err(ApiError::NotFound(format!(
            "\"{id}\" is not a host module NodeTool implements"
        )));
    };
    // The module as this server's catalog serves it: a host entry of the pinned pack whose id
    // is this one. The dispatcher then repeats the registry checks on the resolution.
    let catalog = state.catalog();
    let specifiers: Vec<Declaration> = catalog
        .summaries()
        .iter()
        .filter(|s| s.kind == ModuleKind::Host && s.pack_name == spec.pack_name)
        .map(|s| Declaration::of(s.specifier.clone()))
        .collect();
    let mut resolution = catalog.resolve_for_execution(&specifiers);
    resolution
        .modules
        .retain(|m| matches!(&m.kind, ResolvedKind::Host { host_id } if *host_id == id));
    resolution.statuses.clear();
    let Some(specifier) = resolution.modules.first().map(|m| m.specifier.clone()) else {
        return Err(ApiError::NotFound(format!(
            "host module \"{id}\" is not available: its pack {} is not installed",
            spec.pack_name
        )));
    };
    if !spec.exports.contains(&export.as_str()) {
        return Err(ApiError::NotFound(format!(
            "{specifier} has no export named {export:?}"
        )));
    }
    // The call runs where every run runs (a sandbox worker, under a deadline and a memory
    // ceiling): a one-line body that imports the module and calls the export with the
    // arguments, so a hostile input cannot hurt the server and every check of the facade and
    // the dispatcher applies.
    let code = format!(
        "import * as m from {};\nreturn await m[{}](...inputs.args);",
        serde_json::to_string(&specifier).unwrap_or_default(),
        serde_json::to_string(&export).unwrap_or_default()
    );
    let inputs = Value::Object(vec![(
        "args".to_string(),
        Value::Array(request.args.into_iter().map(Value::from_json).collect()),
    )]);
    let admitted = state.admit(Work::HostCall).await?;
    let limits = RunLimits::STANDARD;
    state.note_deadline(Instant::now() + limits.timeout);
    let runner = state.runner();
    let cancel = CancelToken::new();
    let mut guard = CancelOnDrop(Some(cancel.clone()));
    let outcome = tokio::task::spawn_blocking(move || {
        let _admitted = admitted;
        runner.run_resolved(
            &resolution,
            BodyRun {
                code: &code,
                inputs: &inputs,
                limits,
                capabilities: Capabilities::default(),
                cancel: Some(cancel),
            },
        )
    })
    .await
    .map_err(|e| ApiError::Internal(format!("a host call panicked: {e}")))?;
    guard.0 = None;
    let code = count(&state, "host-call", &outcome);
    let answer = match outcome.result {
        Ok(value) => Json(json!({ "result": value.to_json() })).into_response(),
        // The dispatcher's message, as the guest's Error carried it.
        Err(e) => ApiError::Unprocessable(
            e.message
                .strip_prefix("Error: ")
                .map_or(e.message.clone(), str::to_string),
        )
        .into_response(),
    };
    Ok((Extension(code), answer).into_response())
}
