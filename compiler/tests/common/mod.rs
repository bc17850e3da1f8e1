//! What the compiler's integration tests share: running a compiled module in a fresh guest.

use nodetool_guest::{Capabilities, Dispatchers, RunLimits, RunRequest, Sandbox};
use nodetool_protocol::catalog::{
    FileContent, GraphFile, Resolution, ResolvedKind, ResolvedModule,
};
use nodetool_protocol::run::RunError;
use nodetool_protocol::value::Value;

/// Runs `body` in a fresh guest (standard limits, no capabilities) where `source` is the one
/// module, importable as `specifier`.
pub fn run_module(source: &str, specifier: &str, body: &str) -> Result<Value, RunError> {
    let resolution = Resolution {
        modules: vec![ResolvedModule {
            specifier: specifier.into(),
            pack_name: "@fixture/lib".into(),
            pack_version: None,
            content_digest: "a".repeat(64),
            module_id: "npm:lib".into(),
            graph: vec![GraphFile {
                id: "npm:lib".into(),
                internal: false,
                dependencies: Vec::new(),
                content: FileContent::Js {
                    source: source.into(),
                },
            }],
            kind: ResolvedKind::Js,
        }],
        statuses: Vec::new(),
    };
    Sandbox::new()
        .run(RunRequest {
            code: body,
            resolution: &resolution,
            inputs: &Value::Null,
            limits: RunLimits::STANDARD,
            capabilities: Capabilities::default(),
            dispatchers: Dispatchers::default(),
            cancel: None,
        })
        .result
}
