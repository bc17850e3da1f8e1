//! Running a body against the shipped packs (`packs/`) the way a Code node does: discovered,
//! its imports resolved, host calls through the host dispatcher. Shared by the guest tests of
//! the host packs (each test binary uses what it needs of it).
#![allow(dead_code)]

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

use nodetool_discovery::{DiscoveryOptions, RootKind, SearchRoot, discover_catalog};
use nodetool_guest::{Capabilities, Dispatchers, RunLimits, RunRequest, Sandbox, body_imports};
use nodetool_host_modules::HostDispatcher;
use nodetool_protocol::catalog::Declaration;
use nodetool_protocol::run::RunError;
use nodetool_protocol::value::Value;
use nodetool_runtime::{NoCompiledModules, SandboxModuleCatalog};

pub fn run(code: &str, inputs: Value) -> Result<Value, RunError> {
    run_limited(code, inputs, RunLimits::STANDARD)
}

pub fn run_limited(code: &str, inputs: Value, limits: RunLimits) -> Result<Value, RunError> {
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("../packs");
    let roots = [SearchRoot {
        path: shipped,
        kind: RootKind::Shipped,
        label: "shipped".into(),
    }];
    let trusted = BTreeSet::new();
    let catalog = discover_catalog(
        &roots,
        &DiscoveryOptions {
            compiled: &NoCompiledModules,
            trusted_packs: &trusted,
        },
    );
    let imports = body_imports(code).unwrap_or_default();
    let declarations: Vec<Declaration> = imports
        .into_iter()
        .map(|i| Declaration::of(i.specifier))
        .collect();
    let resolution = catalog.resolve_for_execution(&declarations);
    let host = HostDispatcher::for_resolution(&resolution)
        .unwrap_or_else(|e| panic!("{e:?}"))
        .map(|d| d as Arc<dyn nodetool_runtime::dispatch::Dispatcher>);
    Sandbox::new()
        .run(RunRequest {
            code,
            resolution: &resolution,
            inputs: &inputs,
            limits,
            capabilities: Capabilities::default(),
            dispatchers: Dispatchers { host, wasm: None },
            cancel: None,
        })
        .result
}
