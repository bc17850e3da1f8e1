//! `nodetool packs doctor`: every problem of every pack (or of one) at once, with what to do.

use std::collections::BTreeSet;

use nodetool_discovery::DiscoveredCatalog;
use nodetool_runtime::SandboxModuleCatalog;

use crate::{Failure, Outcome, render};

/// The absent globals of every authored JS file of the packs (or of `only`): each file once,
/// compiled npm bundles left to the compiler's own scan.
fn authored_globals(
    catalog: &DiscoveredCatalog,
    only: Option<&str>,
) -> Vec<render::AuthoredGlobal> {
    use nodetool_protocol::catalog::{Declaration, FileContent, ModuleKind};
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for summary in catalog.summaries() {
        if summary.kind != ModuleKind::Js || only.is_some_and(|p| p != summary.pack_name) {
            continue;
        }
        let resolution =
            catalog.resolve_for_execution(&[Declaration::of(summary.specifier.clone())]);
        for module in &resolution.modules {
            for file in &module.graph {
                let FileContent::Js { source } = &file.content else {
                    continue;
                };
                if file.id.starts_with("npm:")
                    || !seen.insert((module.pack_name.clone(), file.id.clone()))
                {
                    continue;
                }
                for global in
                    nodetool_jssource::validate::module_globals(source).unwrap_or_default()
                {
                    out.push(render::AuthoredGlobal {
                        pack: module.pack_name.clone(),
                        file: file.id.clone(),
                        global,
                    });
                }
            }
        }
    }
    out
}

/// Checks `pack` is on the search path, then renders the report; fails on an error (or, with
/// `deny_warnings`, a warning).
pub(super) fn doctor(
    catalog: &DiscoveredCatalog,
    pack: Option<&str>,
    deny_warnings: bool,
    json: bool,
) -> Outcome {
    if let Some(pack) = pack
        && !catalog.diagnostics().iter().any(|d| d.pack_name == pack)
        && !catalog.summaries().iter().any(|s| s.pack_name == pack)
    {
        // Every pack the search path holds: those with diagnostics and the healthy ones.
        let names: BTreeSet<&str> = catalog
            .diagnostics()
            .iter()
            .map(|d| d.pack_name.as_str())
            .chain(catalog.summaries().iter().map(|s| s.pack_name.as_str()))
            .collect();
        let hint = nodetool_jssource::exports::closest(pack, names)
            .map(|c| format!("; did you mean {c}?"))
            .unwrap_or_default();
        return Err(Failure::Usage(format!(
            "no pack named {pack:?} is on the search path{hint}"
        )));
    }
    let authored = authored_globals(catalog, pack);
    let report = render::doctor(catalog, pack, &authored, json);
    if report.errors > 0 || (deny_warnings && report.warnings > 0) {
        Err(Failure::Failed)
    } else {
        Ok(())
    }
}
