//! `nodetool-protocol`: the words every layer of the sandbox package system shares.
//!
//! It owns the `nodetool` manifest block and its rules ([`manifest`]), the naming rules
//! ([`names`]), the catalog's answers — declarations, summaries, statuses with their stable
//! codes, resolutions and deliveries ([`catalog`]) — the host-module registry ([`host`]), the
//! SKILL.md format ([`skill`]), the generated facade sources ([`facade`]), the values that cross
//! the guest boundary and the packed form of large host results ([`value`], [`packed`]) and
//! every limit ([`limits`]). The manifest's JSON Schema is generated from these types
//! ([`manifest_json_schema`]) and committed at `protocol/schema/nodetool-manifest.schema.json`.
//!
//! Architecture invariant: this crate does no I/O and links no engine (no QuickJS, wasmtime or
//! rolldown), so anything — a browser build, a validator, a server — can depend on it. No type
//! here carries a filesystem path.
//!
//! ```
//! use nodetool_protocol::manifest::parse_manifest;
//!
//! let block = serde_json::json!({
//!     "sandboxModules": [{ "name": ".", "kind": "js", "file": "sandbox/geo.js" }]
//! });
//! let manifest = parse_manifest(&block).map_err(|e| format!("{e:?}"))?;
//! assert_eq!(manifest.map(|m| m.modules.len()), Some(1));
//! # Ok::<(), String>(())
//! ```

pub mod catalog;
pub mod codes;
pub mod env;
pub mod facade;
pub mod hex;
pub mod host;
pub mod limits;
pub mod manifest;
pub mod names;
pub mod packed;
pub mod run;
pub mod skill;
pub mod value;

use schemars::JsonSchema;

/// The part of `package.json` NodeTool reads, for the generated JSON Schema. Every other key of
/// a package.json is allowed and ignored.
#[derive(JsonSchema)]
#[schemars(title = "NodeTool pack package.json")]
#[allow(dead_code)]
struct PackageJson {
    /// The npm package name; a module named "." is imported by exactly this name.
    #[schemars(pattern(r"^(?:@[A-Za-z0-9._~-]+/)?[A-Za-z0-9._~-]+$"))]
    name: String,
    /// The package version.
    version: Option<String>,
    /// NodeTool's block. Keys other than `apiVersion`, `sandboxModules` and `internal` belong
    /// to other readers and are ignored by sandbox discovery.
    nodetool: Option<manifest::ManifestBlock>,
}

/// The JSON Schema of a pack's `package.json` as NodeTool reads it. Pack authors point their
/// editors at the committed copy; a test fails when that copy drifts from this.
///
/// A module entry is discriminated on `kind` with `if`/`then` branches rather than the
/// `oneOf` serde's tagged enum generates: with `oneOf`, one typo in `kind` fails every branch
/// and an editor reports each branch's errors; here `kind` is checked once against its three
/// values, and only the branch it names applies.
pub fn manifest_json_schema() -> serde_json::Value {
    let generator = schemars::generate::SchemaSettings::draft2020_12()
        .for_deserialize()
        .into_generator();
    let mut schema = generator.into_root_schema_for::<PackageJson>().to_value();
    if let Some(root) = schema.as_object_mut() {
        root.insert("$id".into(), MANIFEST_SCHEMA_ID.into());
    }
    if let Some(entry) = schema.pointer_mut("/$defs/ModuleEntry") {
        discriminate_on_kind(entry);
    }
    // `nodetool: null` is allowed, but an object is checked against the block directly (an
    // `anyOf` with null would report only that neither branch matched).
    if let Some(block) = schema.pointer_mut("/properties/nodetool")
        && let Some(object) = block.as_object_mut()
        && let Some(serde_json::Value::Array(branches)) = object.remove("anyOf")
    {
        let reference = branches.into_iter().find(|b| b.get("$ref").is_some());
        if let Some(reference) = reference {
            object.insert("if".into(), serde_json::json!({ "type": "object" }));
            object.insert("then".into(), reference);
            object.insert("else".into(), serde_json::json!({ "type": "null" }));
        }
    }
    schema
}

/// The schema's `$id`: a name for it, not a place to fetch it from.
pub const MANIFEST_SCHEMA_ID: &str = "urn:nodetool-sandbox:schema:nodetool-manifest:1";

/// Rewrites `{"oneOf": [branch...]}`, each branch with a `kind` const, as one object whose
/// `kind` is an enum and whose `allOf` holds an `if kind == K then branch` per kind.
fn discriminate_on_kind(entry: &mut serde_json::Value) {
    let Some(branches) = entry.get("oneOf").and_then(|b| b.as_array()).cloned() else {
        return;
    };
    let mut kinds = Vec::new();
    let mut cases = Vec::new();
    for branch in branches {
        let Some(kind) = branch.pointer("/properties/kind/const").cloned() else {
            return;
        };
        kinds.push(kind.clone());
        cases.push(serde_json::json!({
            "if": { "properties": { "kind": { "const": kind } }, "required": ["kind"] },
            "then": branch,
        }));
    }
    let description = entry.get("description").cloned();
    let mut out = serde_json::json!({
        "type": "object",
        "properties": { "kind": { "enum": kinds, "description": "What the module is: `js` (an authored file or an npm library), `wasm` or `host`." } },
        "required": ["kind", "name"],
        "allOf": cases,
    });
    if let (Some(object), Some(description)) = (out.as_object_mut(), description) {
        object.insert("description".into(), description);
    }
    *entry = out;
}

/// The committed schema file's path relative to the workspace root.
pub const MANIFEST_SCHEMA_PATH: &str = "protocol/schema/nodetool-manifest.schema.json";
