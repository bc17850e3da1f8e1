//! Untrusted input never panics discovery: arbitrary bytes as package.json, as authored
//! JavaScript and as WASM, and arbitrary JSON as manifest entries, all end in a pack or in
//! statuses that name the pack and carry a stable code.

use std::path::Path;

use nodetool_discovery::{PackOutcome, discover_pack};
use nodetool_protocol::catalog::StatusLevel;
use nodetool_runtime::NoCompiledModules;
use proptest::prelude::*;

/// `add(i32, i32) -> i32` with one memory of 1..2 pages.
const ADD_WASM: &[u8] = &[
    0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, 0x01, 0x07, 0x01, 0x60, 0x02, 0x7f, 0x7f, 0x01,
    0x7f, 0x03, 0x02, 0x01, 0x00, 0x05, 0x04, 0x01, 0x01, 0x01, 0x02, 0x07, 0x07, 0x01, 0x03, b'a',
    b'd', b'd', 0x00, 0x00, 0x0a, 0x09, 0x01, 0x07, 0x00, 0x20, 0x00, 0x20, 0x01, 0x6a, 0x0b,
];

const MANIFEST: &str = r#"{ "name": "@fuzz/pack", "version": "1.0.0", "nodetool": { "internal": ["sandbox/util.js"], "sandboxModules": [
    { "name": ".", "kind": "js", "file": "sandbox/index.js" },
    { "name": "add", "kind": "wasm", "file": "sandbox/add.wasm", "memoryPagesMax": 2, "exports": ["add"] }
] } }"#;

fn write(dir: &Path, rel: &str, bytes: &[u8]) {
    let path = dir.join(rel);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).unwrap_or_else(|e| panic!("{e}"));
    }
    std::fs::write(path, bytes).unwrap_or_else(|e| panic!("{e}"));
}

fn pack(package_json: &[u8], index_js: &[u8], util_js: &[u8], wasm: &[u8]) -> PackOutcome {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    write(dir.path(), "package.json", package_json);
    write(dir.path(), "sandbox/index.js", index_js);
    write(dir.path(), "sandbox/util.js", util_js);
    write(dir.path(), "sandbox/add.wasm", wasm);
    discover_pack(dir.path(), "fuzz/pack", &NoCompiledModules)
}

fn assert_well_formed(outcome: &PackOutcome) {
    match outcome {
        PackOutcome::NotAPack | PackOutcome::Discovered(_) => {}
        PackOutcome::Refused { name, statuses } => {
            assert!(!statuses.is_empty(), "a refused pack must say why");
            for s in statuses {
                assert_eq!(s.status, StatusLevel::Error);
                let who = name.as_deref().unwrap_or("fuzz/pack");
                assert!(
                    s.message.starts_with(who),
                    "{} does not name {who}",
                    s.message
                );
                assert!(
                    !s.message
                        .contains(std::env::temp_dir().to_string_lossy().as_ref()),
                    "a path leaked: {}",
                    s.message
                );
            }
        }
    }
}

/// JavaScript-shaped noise: tokens that make the parser and the import scan work hard.
fn js_noise() -> impl Strategy<Value = String> {
    let token = prop_oneof![
        Just("import ".to_string()),
        Just("export ".to_string()),
        Just("from ".to_string()),
        Just("'./util.js'".to_string()),
        Just("\"../x.js\"".to_string()),
        Just("import(".to_string()),
        Just("require(".to_string()),
        Just("{ a }".to_string()),
        Just("* as ns ".to_string()),
        Just("function f(){".to_string()),
        Just("}".to_string()),
        Just(")".to_string()),
        Just(";\n".to_string()),
        Just("`${".to_string()),
        Just("/re/g".to_string()),
        "[a-z]{1,6}".prop_map(|s| format!("{s} ")),
        any::<char>().prop_map(String::from),
    ];
    prop::collection::vec(token, 0..40).prop_map(|v| v.concat())
}

fn json_value() -> impl Strategy<Value = serde_json::Value> {
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::from),
        any::<i64>().prop_map(serde_json::Value::from),
        prop_oneof![
            Just("."),
            Just("js"),
            Just("wasm"),
            Just("host"),
            Just("csv"),
            Just("sandbox/index.js"),
            Just("sandbox/add.wasm"),
            Just("../x.js"),
            Just("%2e%2e"),
            Just("add"),
            Just("name"),
            Just("kind"),
            Just("file"),
            Just("npm"),
            Just("exports"),
            Just("memoryPagesMax"),
        ]
        .prop_map(serde_json::Value::from),
        ".{0,12}".prop_map(serde_json::Value::from),
    ];
    leaf.prop_recursive(3, 24, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::Array),
            prop::collection::btree_map(
                prop_oneof![
                    Just("name"),
                    Just("kind"),
                    Just("file"),
                    Just("npm"),
                    Just("exports"),
                    Just("memoryPagesMax"),
                    Just("limits"),
                    Just("host"),
                    Just("wasm"),
                    Just("as")
                ]
                .prop_map(String::from),
                inner,
                0..5
            )
            .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_package_json(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        assert_well_formed(&pack(&bytes, b"export const x = 1;", b"", ADD_WASM));
    }

    #[test]
    fn arbitrary_javascript(index in js_noise(), util in prop::collection::vec(any::<u8>(), 0..256)) {
        assert_well_formed(&pack(MANIFEST.as_bytes(), index.as_bytes(), &util, ADD_WASM));
    }

    #[test]
    fn arbitrary_wasm(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        assert_well_formed(&pack(MANIFEST.as_bytes(), b"export const x = 1;", b"", &bytes));
    }

    #[test]
    fn mutated_wasm(flips in prop::collection::vec((0..ADD_WASM.len(), any::<u8>()), 1..4)) {
        let mut wasm = ADD_WASM.to_vec();
        for (at, byte) in flips {
            wasm[at] = byte;
        }
        assert_well_formed(&pack(MANIFEST.as_bytes(), b"export const x = 1;", b"", &wasm));
    }

    #[test]
    fn arbitrary_manifest_entries(entries in prop::collection::vec(json_value(), 0..4), internal in json_value()) {
        let manifest = serde_json::json!({
            "name": "@fuzz/pack",
            "nodetool": { "internal": internal, "sandboxModules": entries }
        });
        let text = serde_json::to_vec(&manifest).unwrap_or_default();
        assert_well_formed(&pack(&text, b"import { u } from './util.js'; export const x = u;", b"export const u = 1;", ADD_WASM));
    }
}

#[test]
fn the_seed_pack_is_admitted() {
    let outcome = pack(
        MANIFEST.as_bytes(),
        b"import { u } from './util.js'; export const x = u;",
        b"export const u = 1;",
        ADD_WASM,
    );
    assert!(matches!(outcome, PackOutcome::Discovered(_)), "{outcome:?}");
}
