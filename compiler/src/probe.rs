//! The admission probe: import the bundle in a capability-free guest and read its export
//! names. Only the bundle resolves; nothing is granted (no fetch, workspace or secrets, no
//! dispatchers); the deadline, heap and console are the probe's own, tighter limits.
//! Admission proves that the module initializes; the runtime loader stays authoritative.

use std::sync::Arc;
use std::time::Duration;

use nodetool_guest::{Capabilities, Dispatchers, RunLimits, RunRequest, Sandbox};
use nodetool_protocol::catalog::{
    FileContent, GraphFile, Resolution, ResolvedKind, ResolvedModule, StatusCode,
};
use nodetool_protocol::run::RunErrorCode;
use nodetool_protocol::value::Value;

use crate::Refusal;

/// The only specifier the probe serves.
pub const PROBE_SPECIFIER: &str = "nodetool-probe-module";

/// The probe's limits: 5 s, 64 MiB heap, 1 MiB stack, console capped at 20 lines of 500
/// characters.
pub const PROBE_LIMITS: RunLimits = RunLimits {
    timeout: Duration::from_secs(5),
    memory_bytes: 64 * 1024 * 1024,
    stack_bytes: 1024 * 1024,
    log_entries: 20,
    log_chars: 500,
};

const PROBE_BODY: &str = "import * as probed from \"nodetool-probe-module\";\n\
                          return Object.keys(probed).sort();\n";

/// Imports `source` in a fresh capability-free guest: its sorted export names, or the refusal.
pub(crate) fn probe(
    sandbox: &Sandbox,
    npm: &str,
    source: Arc<str>,
) -> Result<Vec<String>, Refusal> {
    let module_id = format!("npm:{npm}");
    let resolution = Resolution {
        modules: vec![ResolvedModule {
            specifier: PROBE_SPECIFIER.into(),
            pack_name: "nodetool-probe".into(),
            pack_version: None,
            content_digest: crate::bundle::sha256_hex(source.as_bytes()),
            module_id: module_id.clone(),
            graph: vec![GraphFile {
                id: module_id,
                internal: false,
                dependencies: Vec::new(),
                content: FileContent::Js { source },
            }],
            kind: ResolvedKind::Js,
        }],
        statuses: Vec::new(),
    };
    let outcome = sandbox.run(RunRequest {
        code: PROBE_BODY,
        resolution: &resolution,
        inputs: &Value::Object(Vec::new()),
        limits: PROBE_LIMITS,
        capabilities: Capabilities::default(),
        dispatchers: Dispatchers::default(),
        cancel: None,
    });
    let failed = |why: String| {
        Refusal::new(
            StatusCode::NpmModuleProbeFailed,
            format!("{npm} failed the sandbox admission probe: {why}"),
        )
    };
    match outcome.result {
        // A deadline depends on the machine's load as much as on the package: reported, never
        // cached.
        Err(error) => Err(Refusal {
            transient: error.code == RunErrorCode::Timeout,
            ..failed(error.message)
        }),
        Ok(Value::Array(names)) => names
            .into_iter()
            .map(|n| match n {
                Value::String(s) => Ok(s),
                _ => Err(failed("its namespace has a non-string key".into())),
            })
            .collect(),
        Ok(_) => Err(failed("the probe did not read its exports".into())),
    }
}
