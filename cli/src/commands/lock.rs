//! `nodetool lock`: stamps each Code node's imports with what they resolve to now.

use std::path::Path;

use nodetool_discovery::{DiscoveredCatalog, trust};
use nodetool_frontend::answers;
use nodetool_frontend::search::Environment;

use super::validate::{read_workflow, workflow_issues};
use crate::{Failure, Outcome, print_json, render, term};

pub(super) fn lock(
    path: &Path,
    json: bool,
    catalog: &DiscoveredCatalog,
    env: &Environment,
) -> Outcome {
    let mut document = read_workflow(path)?;
    // A broken node is not stamped: lock refuses with the findings validate would print.
    let issues = workflow_issues(&document, &path.display().to_string(), catalog, env)?;
    if answers::has_errors(&issues) {
        let nodes = nodetool_jssource::validate::code_nodes(&document).unwrap_or_default();
        if json {
            let mut answer = answers::validate_json(&issues);
            if let Some(object) = answer.as_object_mut() {
                object.insert(
                    "error".into(),
                    serde_json::json!({
                        "code": "lock-refused",
                        "message": "a Code node has errors; nothing was written",
                    }),
                );
            }
            print_json(&answer);
        } else {
            render::issues_human(&issues, &nodes, path, Some(catalog));
            errln!(
                "nodetool: lock refused: a Code node has errors, so {} was not written",
                term::safe(&path.display().to_string())
            );
        }
        return Err(Failure::Failed);
    }
    let stamped = nodetool_jssource::validate::lock_graph(&mut document, catalog)
        .map_err(|e| Failure::Usage(format!("{}: {}", path.display(), e.0)))?;
    let text = serde_json::to_string_pretty(&document).unwrap_or_default();
    trust::write_atomically(path, &text).map_err(Failure::Usage)?;
    if json {
        print_json(
            &serde_json::json!({ "ok": true, "stamped": stamped, "file": path.display().to_string() }),
        );
    } else {
        outln!(
            "stamped {stamped} Code node(s) in {}",
            term::safe(&path.display().to_string())
        );
    }
    Ok(())
}
