//! `nodetool packs allow` and `packs disallow`: the operator's consent for agents.

use std::path::PathBuf;

use nodetool_frontend::search::Environment;

use crate::{Failure, Outcome, error_json, install, print_json, term};

pub(super) fn set_allowed(
    env: &Environment,
    packs: Vec<PathBuf>,
    name: &str,
    allowed: bool,
) -> Outcome {
    let change = install::set_allowed(env, packs, name, allowed).map_err(|e| match e.code {
        nodetool_frontend::install::InstallErrorCode::AllowNotFound => {
            if term::json() {
                print_json(&error_json(e.code.as_str(), &e.message));
            } else {
                errln!("nodetool: {}", term::safe(&e.message));
            }
            Failure::Failed
        }
        _ => Failure::Usage(e.message),
    })?;
    let changed = change.changed;
    if term::json() {
        print_json(
            &serde_json::json!({ "ok": true, "name": name, "allowedForAgents": allowed, "changed": changed, "identity": change.identity }),
        );
        return Ok(());
    }
    let verb = match &change.identity {
        Some(identity) => format!("allowed for agents as {identity}"),
        None => "no longer allowed for agents".into(),
    };
    let note = match &change.previous {
        Some(was) => format!(" (was allowed for {was})"),
        None if changed => String::new(),
        None => " (unchanged)".into(),
    };
    outln!(
        "{name} is {verb}{note}. This decides how its SKILL.md reaches agents and whether CodeAct sessions allow it by default; it never lets a pack run host code."
    );
    Ok(())
}
