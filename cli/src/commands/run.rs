//! `nodetool run`: one Code node body in a sandbox worker, against the catalog.

use std::time::Duration;

use nodetool_discovery::DiscoveredCatalog;
use nodetool_frontend::answers;
use nodetool_frontend::run::BodyRun;

use super::execution::{capabilities, limits, parse_input, warn_unenforced};
use super::read_source;
use crate::args::RunArgs;
use crate::{Failure, Outcome, compile, help, print_json, render};

pub(super) fn run(
    args: RunArgs,
    json: bool,
    catalog: &DiscoveredCatalog,
    first_use: &compile::FirstUse<'_>,
) -> Outcome {
    let (code, origin) = read_source(args.file.as_deref())?;
    let inputs = parse_input(args.execution.input.as_deref())?;
    let capabilities = capabilities(&args.execution)?;
    let limits = limits(&args.execution)?;
    let runner = args.execution.isolation.runner(&first_use.sources.env)?;
    warn_unenforced(&runner);
    // The body is parsed in a worker; a shipped guest pack it imports compiles now if nothing
    // compiled it yet.
    let body = BodyRun {
        code: &code,
        inputs: &inputs,
        limits,
        capabilities,
        cancel: None,
    };
    let outcome = match runner.scan(&code, None) {
        Ok(imports) => {
            let recompiled = first_use.catalog_for(&imports, catalog);
            let catalog = recompiled.as_ref().unwrap_or(catalog);
            runner.run_scanned(catalog, &imports, body)
        }
        Err(error) => nodetool_guest::RunOutcome {
            result: Err(error),
            logs: Vec::new(),
            duration: Duration::ZERO,
        },
    };
    let ok = outcome.result.is_ok();
    if json {
        let mut answer = answers::run_json(&outcome);
        // The next steps a person would read as `help:` lines travel as `error.help`.
        if let Err(error) = &outcome.result {
            let (_, help) = help::run_error(error, &code, Some(catalog));
            if !help.is_empty() {
                answer["error"]["help"] = serde_json::json!(help);
            }
        }
        print_json(&answer);
    } else {
        render::run_human(&outcome, &code, &origin, Some(catalog));
    }
    if ok { Ok(()) } else { Err(Failure::Failed) }
}
