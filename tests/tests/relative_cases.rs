//! `tests/contract/relative.json` is the one generated from `nodetool_jssource::relative`'s
//! cases (the browser runner's test reads it). `cargo xtask export` writes it; so does this test
//! with `NODETOOL_UPDATE_FIXTURES=1`.

use nodetool_tests::contract::relative::{RELATIVE_JSON_PATH, relative_json};

#[test]
fn the_exported_relative_cases_are_current() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let committed = std::fs::read_to_string(root.join(RELATIVE_JSON_PATH)).unwrap_or_default();
    let generated = relative_json().unwrap_or_else(|e| panic!("{e}"));
    if committed != generated && std::env::var_os("NODETOOL_UPDATE_FIXTURES").is_some() {
        std::fs::write(root.join(RELATIVE_JSON_PATH), &generated)
            .unwrap_or_else(|e| panic!("write {RELATIVE_JSON_PATH}: {e}"));
        return;
    }
    assert!(
        committed == generated,
        "{RELATIVE_JSON_PATH} is stale: run `cargo xtask export` and commit the result"
    );
}

#[test]
fn every_case_is_exported_with_its_answer() {
    let generated = relative_json().unwrap_or_else(|e| panic!("{e}"));
    let document: serde_json::Value =
        serde_json::from_str(&generated).unwrap_or_else(|e| panic!("{e}"));
    let cases = document["cases"].as_array().cloned().unwrap_or_default();
    assert_eq!(cases.len(), nodetool_jssource::relative::CASES.len());
    // At least one case of each answer, so the browser test checks both sides.
    assert!(cases.iter().any(|c| c["joined"].is_null()));
    assert!(
        cases
            .iter()
            .any(|c| c["joined"].is_string() && c["relative"] == true)
    );
    assert!(cases.iter().any(|c| c["relative"] == false));
}
