//! `nodetool validate`: every Code node of a workflow graph, offline; and what `check` and
//! `lock` share with it (reading a workflow, finding its issues, reporting them).

use std::path::Path;

use nodetool_discovery::DiscoveredCatalog;
use nodetool_frontend::answers;
use nodetool_frontend::search::Environment;
use nodetool_jssource::validate::Issue;

use crate::args::IsolationArgs;
use crate::{Failure, Outcome, print_json, render};

pub(super) fn read_workflow(path: &Path) -> Result<serde_json::Value, Failure> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Failure::Usage(format!("cannot read {}: {e}", path.display())))?;
    serde_json::from_str(&text)
        .map_err(|e| Failure::Usage(format!("{} is not valid JSON: {e}", path.display())))
}

/// Every issue of a workflow document: the worker's parse, then the catalog's checks and the
/// missing exports.
pub(super) fn workflow_issues(
    document: &serde_json::Value,
    label: &str,
    catalog: &DiscoveredCatalog,
    env: &Environment,
) -> Result<Vec<Issue>, Failure> {
    // Every body is parsed in a sandbox worker, as a run's is.
    let runner = IsolationArgs::default().runner(env)?;
    runner
        .validate_graph(document, catalog)
        .map_err(|e| Failure::Usage(format!("{label}: {}", e.0)))
}

/// Prints validation findings, in JSON or for a person; whether they fail the command.
pub(super) fn report_issues(
    issues: &[Issue],
    nodes: &[nodetool_jssource::validate::CodeNode],
    path: &Path,
    json: bool,
    deny_warnings: bool,
    catalog: &DiscoveredCatalog,
) -> Outcome {
    let failed = answers::has_errors(issues) || (deny_warnings && !issues.is_empty());
    if json {
        let mut answer = answers::validate_json(issues);
        if deny_warnings && let Some(object) = answer.as_object_mut() {
            object.insert("ok".into(), serde_json::Value::Bool(!failed));
        }
        // Each issue's `help:` lines travel as its `help`.
        let shown = path.display().to_string();
        if let Some(list) = answer.get_mut("issues").and_then(|i| i.as_array_mut()) {
            for (entry, issue) in list.iter_mut().zip(issues) {
                let node = nodes.iter().find(|n| n.id == issue.node_id);
                let (_, help) = render::issue_help(issue, node, &shown, Some(catalog));
                if !help.is_empty() {
                    entry["help"] = serde_json::json!(help);
                }
            }
        }
        print_json(&answer);
    } else {
        render::issues_human(issues, nodes, path, Some(catalog));
    }
    if failed { Err(Failure::Failed) } else { Ok(()) }
}

pub(super) fn validate(
    path: &Path,
    json: bool,
    deny_warnings: bool,
    catalog: &DiscoveredCatalog,
    env: &Environment,
) -> Outcome {
    let document = read_workflow(path)?;
    let issues = workflow_issues(&document, &path.display().to_string(), catalog, env)?;
    let nodes = nodetool_jssource::validate::code_nodes(&document).unwrap_or_default();
    report_issues(&issues, &nodes, path, json, deny_warnings, catalog)
}
