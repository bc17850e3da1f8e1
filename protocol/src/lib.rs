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
pub mod facade;
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
pub fn manifest_json_schema() -> serde_json::Value {
    let generator = schemars::generate::SchemaSettings::draft2020_12()
        .for_deserialize()
        .into_generator();
    generator.into_root_schema_for::<PackageJson>().to_value()
}

/// The committed schema file's path relative to the workspace root.
pub const MANIFEST_SCHEMA_PATH: &str = "protocol/schema/nodetool-manifest.schema.json";
