//! `nodetool codeact step | prompt | docs`: model-written actions under a session allowlist.

use std::collections::BTreeSet;
use std::path::Path;

use nodetool_discovery::DiscoveredCatalog;
use nodetool_frontend::run::BodyRun;
use nodetool_frontend::search::Environment;
use nodetool_protocol::catalog::StatusLevel;
use nodetool_protocol::run::{RunError, RunErrorCode};
use nodetool_runtime::SandboxModuleCatalog;
use nodetool_runtime::codeact::{self, Allowlist};

use super::execution::{capabilities, limits, parse_input, warn_unenforced};
use super::read_source;
use crate::args::ExecutionArgs;
use crate::{Failure, Outcome, error_json, help, print_json, render, term};

/// `codeact step`: one action run under `allowlist`, answered as an observation.
pub(super) fn step(
    file: Option<&Path>,
    allowlist: &Allowlist,
    json: bool,
    catalog: &DiscoveredCatalog,
    execution: &ExecutionArgs,
    env: &Environment,
) -> Outcome {
    let (code, _) = read_source(file)?;
    let inputs = parse_input(execution.input.as_deref())?;
    let capabilities = capabilities(execution)?;
    let limits = limits(execution)?;
    let refused = |observation: String, error: Option<&RunError>| -> Outcome {
        if json {
            let mut answer = serde_json::json!({ "ok": false, "observation": observation });
            if let Some(error) = error {
                answer["error"] = step_error_json(error);
            } else {
                answer["error"] =
                    serde_json::json!({ "code": "import-refused", "message": observation });
            }
            print_json(&answer);
        } else {
            outln!("{}", term::safe(&observation));
        }
        Err(Failure::Failed)
    };
    let runner = execution.isolation.runner(env)?;
    warn_unenforced(&runner);
    // An unparseable action still runs: the sandbox reports the syntax error itself.
    let imports: Vec<String> = match runner.scan(&code, None) {
        Ok(imports) => imports.into_iter().map(|i| i.specifier).collect(),
        Err(e) if e.code == RunErrorCode::SyntaxError => Vec::new(),
        Err(e) => return refused(render::error_line(&e), Some(&e)),
    };
    let resolution = match codeact::mount_action_imports(&imports, allowlist, catalog) {
        Ok(resolution) => resolution,
        Err(refusal) => return refused(refusal.observation, None),
    };
    if resolution
        .statuses
        .iter()
        .any(|s| s.status == StatusLevel::Error)
    {
        return refused("the action's imports could not be resolved".into(), None);
    }
    let outcome = runner.run_resolved(
        &resolution,
        BodyRun {
            code: &code,
            inputs: &inputs,
            limits,
            capabilities,
            cancel: None,
        },
    );
    let logs: String = outcome
        .logs
        .iter()
        .map(|l| format!("{}\n", l.message))
        .collect();
    let (ok, observation) = match &outcome.result {
        Ok(value) => (true, format!("{logs}{}", render::value_text(value))),
        Err(error) => {
            let (_, help) = help::run_error(error, &code, Some(catalog));
            let mut text = format!("{logs}{}", render::error_line(error));
            for frame in &error.stack {
                text.push_str(&format!("\n    {frame}"));
            }
            for line in help {
                text.push_str(&format!("\nhelp: {line}"));
            }
            (false, text)
        }
    };
    if json {
        let mut answer = serde_json::json!({
            "ok": ok,
            "observation": observation,
            "logs": outcome.logs,
            "durationMs": u64::try_from(outcome.duration.as_millis()).unwrap_or(u64::MAX),
        });
        match &outcome.result {
            Ok(value) => answer["result"] = value.to_json(),
            Err(error) => answer["error"] = step_error_json(error),
        }
        print_json(&answer);
    } else {
        outln!("{}", term::safe(&observation));
    }
    if ok { Ok(()) } else { Err(Failure::Failed) }
}

/// `{code, message, line, column, stack?}` of a step's error.
fn step_error_json(error: &RunError) -> serde_json::Value {
    let mut out = serde_json::json!({
        "code": error.code.as_str(),
        "message": error.message,
        "line": error.line,
        "column": error.column,
    });
    if !error.stack.is_empty() {
        out["stack"] = serde_json::json!(error.stack);
    }
    out
}

/// Warns on stderr about `--allow` names no pack on the search path has (the model would be
/// told it may import them).
pub(super) fn warn_unknown_allowed(allow: &[String], catalog: &DiscoveredCatalog) {
    let summaries = catalog.summaries();
    for name in allow {
        let known = summaries.iter().any(|s| {
            &s.pack_name == name
                || &s.specifier == name
                || s.specifier.starts_with(&format!("{name}/"))
        });
        if !known {
            let hint = nodetool_jssource::exports::closest(
                name,
                summaries.iter().map(|s| s.pack_name.as_str()),
            )
            .map(|c| format!("; did you mean {c}?"))
            .unwrap_or_default();
            errln!(
                "nodetool: warning: --allow {} names no installed pack{}",
                term::safe(name),
                term::safe(&hint)
            );
        }
    }
}

pub(super) fn session(allow: Vec<String>, trusted: &BTreeSet<String>) -> Allowlist {
    if allow.is_empty() {
        Allowlist::new(trusted.iter().cloned())
    } else {
        Allowlist::new(allow)
    }
}

/// `codeact prompt`: the package section of the system prompt.
pub(super) fn prompt(
    allow: Vec<String>,
    consented: &BTreeSet<String>,
    json: bool,
    catalog: &DiscoveredCatalog,
) -> Outcome {
    warn_unknown_allowed(&allow, catalog);
    let text = codeact::prompt_section(&session(allow, consented), catalog);
    if json {
        print_json(&serde_json::json!({ "ok": true, "prompt": text }));
    } else {
        outln!("{}", term::safe(&text));
    }
    Ok(())
}

/// `codeact docs`: the package-docs tool's answer, as the model would read it.
pub(super) fn docs(
    specifier: &str,
    allow: Vec<String>,
    consented: &BTreeSet<String>,
    json: bool,
    catalog: &DiscoveredCatalog,
) -> Outcome {
    match codeact::package_docs(specifier, &session(allow, consented), catalog) {
        Ok(text) => {
            if json {
                print_json(
                    &serde_json::json!({ "ok": true, "specifier": specifier, "text": text }),
                );
            } else {
                outln!("{}", term::safe(&text));
            }
            Ok(())
        }
        Err(refusal) => {
            // The tool's own answer, as the model would read it.
            if json {
                print_json(&error_json("docs-refused", refusal.message()));
            } else {
                errln!("{}", term::safe(refusal.message()));
            }
            Err(Failure::Failed)
        }
    }
}
