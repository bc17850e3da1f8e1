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

#[test]
fn module_entries_discriminate_on_kind_and_the_schema_has_an_id() {
    let schema = nodetool_protocol::manifest_json_schema();
    assert_eq!(schema["$id"], nodetool_protocol::MANIFEST_SCHEMA_ID);
    let entry = &schema["$defs"]["ModuleEntry"];
    assert!(entry.get("oneOf").is_none(), "{entry}");
    assert_eq!(
        entry["properties"]["kind"]["enum"],
        serde_json::json!(["js", "wasm", "host"])
    );
    // The block itself is checked directly when it is an object (null is allowed).
    let block = &schema["properties"]["nodetool"];
    assert_eq!(
        block["if"],
        serde_json::json!({ "type": "object" }),
        "{block}"
    );
    assert_eq!(block["then"]["$ref"], "#/$defs/ManifestBlock", "{block}");
    assert_eq!(
        block["else"],
        serde_json::json!({ "type": "null" }),
        "{block}"
    );
    let cases = entry["allOf"].as_array().cloned().unwrap_or_default();
    assert_eq!(cases.len(), 3);
    for case in cases {
        let kind = &case["if"]["properties"]["kind"]["const"];
        assert_eq!(&case["then"]["properties"]["kind"]["const"], kind, "{case}");
        assert_eq!(case["then"]["additionalProperties"], false, "{case}");
    }
}
