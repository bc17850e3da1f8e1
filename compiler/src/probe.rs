//! The admission probe: import the bundle in a capability-free guest and read its export
//! names. The guest is the one every run gets (`Sandbox::run`: the standard globals and the
//! hardening are installed before the bundle is even resolved), so a module admitted here
//! initializes in a run too. Only the bundle resolves; nothing is granted (no fetch,
//! workspace or secrets, no dispatchers); the deadline, heap and console are the probe's own,
//! tighter limits.
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

/// The probe's body: the sorted export names, then the default's own enumerable string keys
/// (at most a few thousand) when the default is an object or a function.
const PROBE_BODY: &str = "import * as probed from \"nodetool-probe-module\";\n\
                          const d = probed.default;\n\
                          const keys = d !== null && (typeof d === \"object\" || typeof d === \"function\") ? Object.keys(d).slice(0, 5000) : [];\n\
                          return [Object.keys(probed).sort(), keys.filter((k) => typeof k === \"string\")];\n";

/// What the probe read.
pub(crate) struct Probed {
    /// The sorted export names.
    pub exports: Vec<String>,
    /// The default's own enumerable keys (empty when it has none or is not an object).
    pub default_keys: Vec<String>,
}

/// Imports `source` in a fresh capability-free guest: what it exports, or the refusal.
pub(crate) fn probe(sandbox: &Sandbox, npm: &str, source: Arc<str>) -> Result<Probed, Refusal> {
    let module_id = format!("npm:{npm}");
    let resolution = Resolution {
        modules: vec![ResolvedModule {
            specifier: PROBE_SPECIFIER.into(),
            pack_name: "nodetool-probe".into(),
            pack_version: None,
            content_digest: nodetool_protocol::hex::sha256_hex(source.as_bytes()),
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
        // A builtin's stub threw while the module initialized: a builtin it cannot run
        // without.
        Err(error) if error.message.contains(crate::bundle::BUILTIN_STUB_MESSAGE) => {
            Err(Refusal::new(
                StatusCode::NpmModuleBuiltinImport,
                format!(
                    "{npm} needs a Node builtin when it loads ({}), which the guest does not have",
                    error.message
                ),
            ))
        }
        // A deadline depends on the machine's load as much as on the package: reported, never
        // cached.
        Err(error) => Err(Refusal {
            transient: error.code == RunErrorCode::Timeout,
            ..failed(error.message)
        }),
        Ok(Value::Array(mut read)) if read.len() == 2 => {
            let strings = |v: Value| match v {
                Value::Array(items) => items
                    .into_iter()
                    .map(|n| match n {
                        Value::String(s) => Ok(s),
                        _ => Err(failed("its namespace has a non-string key".into())),
                    })
                    .collect::<Result<Vec<String>, Refusal>>(),
                _ => Err(failed("the probe did not read its exports".into())),
            };
            let default_keys = strings(read.pop().unwrap_or(Value::Null))?;
            let exports = strings(read.pop().unwrap_or(Value::Null))?;
            Ok(Probed {
                exports,
                default_keys,
            })
        }
        Ok(_) => Err(failed("the probe did not read its exports".into())),
    }
}
