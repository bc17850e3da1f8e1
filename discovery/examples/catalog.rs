//! Prints the catalog a set of node_modules-style roots produces, as JSON:
//! `{"summaries": [...], "diagnostics": [...]}`. Until the `nodetool` CLI lands this is how to
//! look at what discovery makes of a directory of packs.
//!
//! `cargo run -p nodetool-discovery --example catalog -- [--shipped DIR] DIR...`

use std::collections::BTreeSet;
use std::process::ExitCode;

use nodetool_discovery::{DiscoveryOptions, RootKind, SearchRoot, discover_catalog};
use nodetool_runtime::{NoCompiledModules, SandboxModuleCatalog};

fn main() -> ExitCode {
    let mut roots = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let (path, kind) = if arg == "--shipped" {
            match args.next() {
                Some(p) => (p, RootKind::Shipped),
                None => {
                    eprintln!("--shipped needs a directory");
                    return ExitCode::from(2);
                }
            }
        } else {
            (arg, RootKind::Installed)
        };
        roots.push(SearchRoot {
            label: path.clone(),
            path: path.into(),
            kind,
        });
    }
    if roots.is_empty() {
        eprintln!("usage: catalog [--shipped DIR] DIR...");
        return ExitCode::from(2);
    }
    let trusted = BTreeSet::new();
    let catalog = discover_catalog(
        &roots,
        &DiscoveryOptions {
            compiled: &NoCompiledModules,
            trusted_packs: &trusted,
        },
    );
    let out = serde_json::json!({ "summaries": catalog.summaries(), "diagnostics": catalog.diagnostics() });
    println!("{}", serde_json::to_string_pretty(&out).unwrap_or_default());
    ExitCode::SUCCESS
}
