//! What `run` and `codeact step` share: the inputs, secrets, workspace and fetch grants and
//! limits the execution flags ask for.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use nodetool_frontend::fetch;
use nodetool_frontend::run::Runner;
use nodetool_guest::broker::{FetchGrant, RunAuthority, WorkspaceGrant};
use nodetool_guest::{Capabilities, RunLimits};
use nodetool_protocol::value::Value;

use crate::Failure;
use crate::args::ExecutionArgs;

/// The largest response body `fetch` accepts in a CLI run.
const MAX_FETCH_RESPONSE_BYTES: usize = 10 * 1024 * 1024;

pub(super) fn parse_input(input: Option<&str>) -> Result<Value, Failure> {
    let Some(input) = input else {
        return Ok(Value::Object(Vec::new()));
    };
    let (text, origin) = match input.strip_prefix('@') {
        Some(path) => (
            std::fs::read_to_string(path)
                .map_err(|e| Failure::Usage(format!("cannot read --input file {path}: {e}")))?,
            path.to_string(),
        ),
        None => (input.to_string(), "--input".to_string()),
    };
    let json: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| Failure::Usage(format!("{origin} is not valid JSON: {e}")))?;
    Ok(Value::from_json(json))
}

pub(super) fn capabilities(args: &ExecutionArgs) -> Result<Capabilities, Failure> {
    let mut secrets = BTreeMap::new();
    for s in &args.secrets {
        let Some((name, value)) = s.split_once('=').filter(|(n, _)| !n.is_empty()) else {
            return Err(Failure::Usage(format!(
                "--secret expects NAME=VALUE, got {s:?}"
            )));
        };
        secrets.insert(name.to_string(), value.to_string());
    }
    let workspace = match &args.workspace {
        None => None,
        Some(dir) if dir.is_dir() => Some(WorkspaceGrant::standard(
            std::fs::canonicalize(dir)
                .map_err(|e| Failure::Usage(format!("--workspace {}: {e}", dir.display())))?,
        )),
        Some(dir) => {
            return Err(Failure::Usage(format!(
                "--workspace {} does not exist or is not a directory",
                dir.display()
            )));
        }
    };
    let fetch = (!args.allow_fetch.is_empty()).then(|| FetchGrant {
        allowed_hosts: args.allow_fetch.clone(),
        max_response_bytes: MAX_FETCH_RESPONSE_BYTES,
        transport: Arc::new(fetch::HttpClient::new()),
    });
    // The run's authority: its workspace quotas and in-flight budget are this run's.
    let authority = (workspace.is_some() || fetch.is_some()).then(|| {
        Arc::new(RunAuthority::new(workspace, fetch)) as Arc<dyn nodetool_guest::broker::Authority>
    });
    Ok(Capabilities {
        secrets: (!secrets.is_empty()).then_some(secrets),
        authority,
    })
}

/// The limits the execution flags ask for.
pub(super) fn limits(args: &ExecutionArgs) -> Result<RunLimits, Failure> {
    if args.timeout_ms == 0 {
        return Err(Failure::Usage("--timeout-ms must be at least 1".into()));
    }
    let mut limits = RunLimits::STANDARD;
    limits.timeout = Duration::from_millis(args.timeout_ms);
    Ok(limits)
}

/// States once what the runner cannot enforce here.
pub(super) fn warn_unenforced(runner: &Runner) {
    if let Some(note) = runner.unenforced() {
        errln!("nodetool: warning: {note}");
    }
}
