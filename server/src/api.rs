//! The catalog API: `GET /api/packs/sandbox-modules` (the JSON of `nodetool packs list
//! --json`), `GET /api/packs` (the Packages page's view: per pack, its mode, modules and
//! diagnostics with what to do), `GET /api/packs/{name}/docs` (the SKILL.md disclosure with its
//! `trusted` flag), and `POST /api/packs/reload`.

use std::collections::BTreeMap;

use std::net::SocketAddr;

use axum::Json;
use axum::extract::{ConnectInfo, FromRequest, Path, Request, State};
use nodetool_frontend::answers;
use nodetool_frontend::install::Ledger;
use nodetool_protocol::catalog::{Status, Summary};
use nodetool_runtime::SandboxModuleCatalog;
use serde_json::{Value as JsonValue, json};

use crate::AppState;
use crate::body::JsonBody;
use crate::error::ApiError;

/// What importing a pack means, as the Packages page says it.
pub const CONSENT: &str =
    "Importing a package runs it inside your workflows with the node's capabilities.";

/// What being allowed for agents (`nodetool packs allow`) means, and not being.
const TRUSTED: &str = "Allowed for agents: its SKILL.md registers as an ordinary agent skill, and CodeAct sessions allow it by default. It still runs only inside the sandbox.";
const UNTRUSTED: &str = "Not allowed for agents: its SKILL.md reaches agents only as untrusted reference data, and a CodeAct session must name it to import it. Allow it with `nodetool packs allow NAME`.";

/// `GET /api/packs/sandbox-modules`.
pub async fn packs_list(State(state): State<AppState>) -> Json<JsonValue> {
    let mut list = answers::packs_list_json(state.catalog().as_ref());
    if let Some(ledger) = state.ledger().await {
        list["installed"] = ledger.rows_json();
    }
    Json(list)
}

/// `GET /api/packs`: the Packages page's view.
pub async fn packs_view(State(state): State<AppState>) -> Json<JsonValue> {
    let ledger = state.ledger().await;
    Json(view(state.catalog().as_ref(), ledger.as_ref()))
}

/// One entry per pack named by a summary, a diagnostic or an install-ledger row, sorted by
/// name. A pack `nodetool packs install` installed carries `install`: its mode, whether it is
/// active, whether its scripts ran, and what the mode means.
pub fn view(catalog: &dyn SandboxModuleCatalog, ledger: Option<&Ledger>) -> JsonValue {
    let mut packs: BTreeMap<&str, (Vec<&Summary>, Vec<&Status>)> = BTreeMap::new();
    for s in catalog.summaries() {
        packs.entry(s.pack_name.as_str()).or_default().0.push(s);
    }
    for d in catalog.diagnostics() {
        packs.entry(d.pack_name.as_str()).or_default().1.push(d);
    }
    for name in ledger.iter().flat_map(|l| l.packs.keys()) {
        packs.entry(name.as_str()).or_default();
    }
    let packs: Vec<JsonValue> = packs
        .into_iter()
        .map(|(name, (modules, diagnostics))| {
            let trusted = catalog.pack_trusted(name);
            let record = ledger.and_then(|l| l.packs.get(name));
            let install = record.map(|r| {
                let mut row = r.row_json();
                row["meaning"] = json!(r.mode.meaning());
                row
            });
            json!({
                "name": name,
                "version": modules
                    .iter()
                    .find_map(|m| m.pack_version.as_deref())
                    .or(record.map(|r| r.version.as_str())),
                "install": install,
                "mode": if trusted { "trusted" } else { "untrusted" },
                "modeSentence": if trusted { TRUSTED } else { UNTRUSTED },
                "hasDocs": catalog.pack_skill(name).is_some(),
                "modules": modules.iter().map(|m| json!({
                    "specifier": m.specifier,
                    "kind": m.kind.as_str(),
                    "description": m.description,
                    "contentDigest": m.content_digest,
                })).collect::<Vec<_>>(),
                "diagnostics": diagnostics.iter().map(|d| json!({
                    "status": d.status,
                    "code": d.code,
                    "specifier": d.specifier,
                    "message": d.message,
                    "advice": answers::advice(d.code),
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
    json!({ "consent": CONSENT, "packs": packs })
}

/// `GET /api/packs/{name}/docs`.
pub async fn docs(
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> Result<Json<JsonValue>, ApiError> {
    docs_of(&state, &name)
}

/// `GET /api/packs/{scope}/{name}/docs` (a scoped name written with its slash).
pub async fn scoped_docs(
    State(state): State<AppState>,
    Path((scope, name)): Path<(String, String)>,
) -> Result<Json<JsonValue>, ApiError> {
    if !scope.starts_with('@') {
        return Err(ApiError::not_found());
    }
    docs_of(&state, &format!("{scope}/{name}"))
}

fn docs_of(state: &AppState, name: &str) -> Result<Json<JsonValue>, ApiError> {
    let disclosure = state.catalog().pack_skill(name).ok_or_else(|| {
        ApiError::NotFound(format!(
            "No installed sandbox package {name} has a valid SKILL.md (it is not installed, or its SKILL.md is missing or invalid)."
        ))
    })?;
    serde_json::to_value(&disclosure)
        .map(Json)
        .map_err(|e| ApiError::Internal(format!("docs of {name}: {e}")))
}

/// `POST /api/packs/reload` (body empty or `{}`).
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReloadBody {}

/// `POST /api/packs/reload`: discovers the packs again and swaps the new catalog in. Runs in
/// flight keep the catalog they started with. A failed discovery keeps the current catalog. An
/// operator action: the token, or from loopback the header the Packages page sends.
pub async fn reload(
    State(state): State<AppState>,
    request: Request,
) -> Result<Json<JsonValue>, ApiError> {
    crate::access::reload_allowed(
        &state.config().access,
        request.headers(),
        request.extensions().get::<ConnectInfo<SocketAddr>>(),
    )
    .inspect_err(|_| state.metrics().refused("operator"))?;
    let JsonBody(ReloadBody {}) = JsonBody::from_request(request, &state).await?;
    let catalog = state.reload().await?;
    Ok(Json(json!({
        "ok": true,
        "modules": catalog.summaries().len(),
        "diagnostics": catalog.diagnostics().len(),
    })))
}
