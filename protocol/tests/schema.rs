//! The committed JSON Schema must be exactly what the types generate.

#[test]
fn committed_schema_matches_the_types() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let path = root.join(nodetool_protocol::MANIFEST_SCHEMA_PATH);
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    let generated = format!(
        "{}\n",
        serde_json::to_string_pretty(&nodetool_protocol::manifest_json_schema())
            .unwrap_or_default()
    );
    assert!(
        committed == generated,
        "{} is stale: run `cargo xtask export` and commit the result",
        nodetool_protocol::MANIFEST_SCHEMA_PATH
    );
}

#[test]
fn the_schema_describes_the_manifest() {
    let schema = nodetool_protocol::manifest_json_schema();
    let text = schema.to_string();
    for needle in [
        "sandboxModules",
        "memoryPagesMax",
        "callTimeoutMs",
        "\"host\"",
        "internal",
    ] {
        assert!(text.contains(needle), "schema lacks {needle}");
    }
}
