//! `nodetool schema`: the manifest JSON Schema.

use crate::Outcome;

pub(super) fn schema() -> Outcome {
    let schema = nodetool_protocol::manifest_json_schema();
    outln!(
        "{}",
        serde_json::to_string_pretty(&schema).unwrap_or_default()
    );
    Ok(())
}
