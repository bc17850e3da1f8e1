//! `nodetool check`: one body validated offline, as a one-node workflow.

use std::path::Path;

use nodetool_discovery::DiscoveredCatalog;
use nodetool_frontend::search::Environment;

use super::read_source;
use super::validate::{report_issues, workflow_issues};
use crate::Outcome;

/// `nodetool check BODY.js`: one body validated as a one-node workflow.
pub(super) fn check(
    file: Option<&Path>,
    json: bool,
    deny_warnings: bool,
    catalog: &DiscoveredCatalog,
    env: &Environment,
) -> Outcome {
    let (code, origin) = read_source(file)?;
    let document = serde_json::json!({ "nodes": [{
        "id": "body",
        "type": nodetool_jssource::validate::CODE_NODE_TYPE,
        "data": { "code": code },
    }] });
    let issues = workflow_issues(&document, &origin, catalog, env)?;
    let nodes = nodetool_jssource::validate::code_nodes(&document).unwrap_or_default();
    report_issues(
        &issues,
        &nodes,
        Path::new(&origin),
        json,
        deny_warnings,
        catalog,
    )
}
