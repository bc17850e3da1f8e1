//! `tests/contract/specifiers.json` is the one generated from the specifier grammar's cases
//! (the browser runner's test reads it). `cargo xtask export` writes it; so does this test with
//! `NODETOOL_UPDATE_FIXTURES=1`.

use nodetool_tests::contract::specifiers::{SPECIFIERS_JSON_PATH, specifiers_json};

#[test]
fn the_exported_specifier_cases_are_current() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let committed = std::fs::read_to_string(root.join(SPECIFIERS_JSON_PATH)).unwrap_or_default();
    let generated = specifiers_json().unwrap_or_else(|e| panic!("{e}"));
    if committed != generated && std::env::var_os("NODETOOL_UPDATE_FIXTURES").is_some() {
        std::fs::write(root.join(SPECIFIERS_JSON_PATH), &generated)
            .unwrap_or_else(|e| panic!("write {SPECIFIERS_JSON_PATH}: {e}"));
        return;
    }
    assert!(
        committed == generated,
        "{SPECIFIERS_JSON_PATH} is stale: run `cargo xtask export` and commit the result"
    );
}

#[test]
fn the_cases_hold_both_answers_for_each_part_of_the_rule() {
    let generated = specifiers_json().unwrap_or_else(|e| panic!("{e}"));
    let document: serde_json::Value =
        serde_json::from_str(&generated).unwrap_or_else(|e| panic!("{e}"));
    let cases = document["cases"].as_array().cloned().unwrap_or_default();
    let split = |text: &str| {
        cases
            .iter()
            .find(|c| c["text"] == text)
            .map(|c| c["split"].clone())
            .unwrap_or_else(|| panic!("no case {text:?}"))
    };
    // The rules the browser runner's port once lacked: a leading dot on any part, a leading
    // underscore on an unscoped name, npm's blacklist.
    for refused in [
        ".hidden",
        "@scope/.x",
        "_private",
        "node_modules",
        "favicon.ico",
    ] {
        assert!(split(refused).is_null(), "{refused} must be refused");
    }
    for admitted in ["@scope/_x", "a~b", "Upper", "x/_under"] {
        assert!(!split(admitted).is_null(), "{admitted} must be admitted");
    }
    assert_eq!(
        split("@nodetool-ai/sandbox-geo/helpers"),
        serde_json::json!(["@nodetool-ai/sandbox-geo", "helpers"])
    );
    assert!(split(&"a".repeat(215)).is_null());
    assert!(!split(&"a".repeat(214)).is_null());
}
