//! `nodetool packs docs`: a pack's SKILL.md, or the module's own section.

use nodetool_discovery::DiscoveredCatalog;
use nodetool_runtime::SandboxModuleCatalog;
use nodetool_runtime::codeact;

use crate::{Failure, Outcome, error_json, help, print_json, term};

pub(super) fn packs_docs(specifier: &str, json: bool, catalog: &DiscoveredCatalog) -> Outcome {
    let Some((pack, module)) = nodetool_protocol::names::split_specifier(specifier) else {
        return Err(Failure::Usage(format!(
            "{specifier:?} is not a sandbox specifier"
        )));
    };
    match catalog.pack_skill(pack) {
        Some(disclosure) => {
            let text = codeact::module_section(&disclosure.skill, specifier, module)
                .unwrap_or(&disclosure.skill.body);
            if json {
                print_json(
                    &serde_json::json!({ "ok": true, "specifier": specifier, "text": text.trim() }),
                );
            } else {
                outln!("{}", term::safe(text.trim()));
            }
            Ok(())
        }
        None => {
            let message = format!(
                "No installed sandbox package documents \"{specifier}\" (it is not installed, or its SKILL.md is missing or invalid; see `nodetool packs doctor`)."
            );
            let hint = help::closest_specifier(specifier, catalog);
            if json {
                print_json(&error_json("docs-not-found", &message));
            } else {
                errln!("{message}");
                if let Some(hint) = hint {
                    errln!("help: {}", term::safe(&hint));
                }
            }
            Err(Failure::Failed)
        }
    }
}
