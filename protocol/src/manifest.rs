//! The `nodetool` block of a pack's `package.json`: what a pack author writes.
//!
//! Two layers: [`ManifestBlock`] is the wire shape (serde + JSON Schema, strict inside module
//! entries), and [`SandboxManifest`] is what [`parse_manifest`] returns once every rule of the
//! contract holds, with file paths normalized to their one canonical id and WASM exports
//! normalized to `{ wasm, as }`. Discovery only ever sees the validated form.

use std::collections::BTreeSet;
use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize};

use crate::limits::{WASM_BUDGETS, WASM_MAX_MEMORY_PAGES};
use crate::names::{
    check_host_id, check_identifier, check_module_name, check_package_name, normalize_package_path,
};

/// The one manifest API version this implementation reads.
pub const API_VERSION: u32 = 1;

/// The sandbox part of the `nodetool` block. Other keys of the block (`register`, `nodes`,
/// `recommended`, ...) belong to other readers and are ignored here.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ManifestBlock {
    /// The manifest API version. Only `1` exists.
    #[serde(default = "default_api_version")]
    #[schemars(range(min = 1, max = 1))]
    pub api_version: u32,
    /// The modules this pack makes importable inside the sandbox.
    #[serde(default)]
    pub sandbox_modules: Vec<ModuleEntry>,
    /// Package-relative `.js` helper files public modules of this pack may import. Never
    /// importable by user code.
    #[serde(default)]
    pub internal: Vec<String>,
}

fn default_api_version() -> u32 {
    API_VERSION
}

/// One importable module, discriminated on `kind`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum ModuleEntry {
    /// A guest JavaScript module: an authored `file` of the pack, or an npm dependency compiled
    /// into one.
    Js(JsEntry),
    /// A scalar WASM module run on the host behind a generated facade.
    Wasm(WasmEntry),
    /// A NodeTool-implemented host module, named by id.
    Host(HostEntry),
}

impl ModuleEntry {
    /// The entry's module name (`"."` for the pack's root specifier).
    pub fn name(&self) -> &str {
        match self {
            ModuleEntry::Js(e) => &e.name,
            ModuleEntry::Wasm(e) => &e.name,
            ModuleEntry::Host(e) => &e.name,
        }
    }
}

/// `{ "name", "kind": "js", "file" | "npm" }`: exactly one of `file` and `npm`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(extend("oneOf" = [{ "required": ["file"] }, { "required": ["npm"] }]))]
pub struct JsEntry {
    /// `"."` or one path segment of `[A-Za-z0-9._-]`.
    #[schemars(pattern(r"^(?:\.|[A-Za-z0-9._-]+)$"))]
    pub name: String,
    /// A package-relative `.js` file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// An npm dependency of the pack, bundled into a guest module by `nodetool packs compile`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub npm: Option<String>,
}

/// `{ "name", "kind": "wasm", "file", "memoryPagesMax", "exports", "limits"? }`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct WasmEntry {
    /// `"."` or one path segment of `[A-Za-z0-9._-]`.
    #[schemars(pattern(r"^(?:\.|[A-Za-z0-9._-]+)$"))]
    pub name: String,
    /// A package-relative WASM binary.
    pub file: String,
    /// The most 64 KiB pages the binary's memories may declare as their maximum.
    #[schemars(range(max = 4096))]
    pub memory_pages_max: u32,
    /// The exports the facade exposes: the binary's export name when it is a JavaScript
    /// identifier, else `{ "wasm": "<binary name>", "as": "<identifier>" }`.
    #[schemars(length(min = 1))]
    pub exports: Vec<WasmExportEntry>,
    /// Budgets this module asks for; each may only lower NodeTool's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<WasmLimits>,
}

/// A WASM export as the manifest spells it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum WasmExportEntry {
    /// The binary's export name, used as-is in JavaScript.
    Name(#[schemars(pattern(r"^[A-Za-z_$][A-Za-z0-9_$]*$"))] String),
    /// An explicit mapping from the binary's export name to a JavaScript identifier.
    Alias(WasmExport),
}

impl<'de> Deserialize<'de> for WasmExportEntry {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        match serde_json::Value::deserialize(deserializer)? {
            serde_json::Value::String(s) => Ok(WasmExportEntry::Name(s)),
            value @ serde_json::Value::Object(_) => serde_json::from_value(value)
                .map(WasmExportEntry::Alias)
                .map_err(D::Error::custom),
            _ => Err(D::Error::custom(
                "a WASM export must be an identifier string or { \"wasm\": ..., \"as\": ... }",
            )),
        }
    }
}

/// A normalized WASM export: the binary's name and the identifier the facade exports.
#[derive(
    Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(deny_unknown_fields)]
pub struct WasmExport {
    /// The export's name in the binary.
    #[schemars(length(min = 1))]
    pub wasm: String,
    /// The JavaScript identifier the facade exports it as.
    #[serde(rename = "as")]
    #[schemars(pattern(r"^[A-Za-z_$][A-Za-z0-9_$]*$"))]
    pub as_name: String,
}

/// Budgets a WASM module may lower. Raising one is a manifest error, never a clamp.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct WasmLimits {
    /// Per-call timeout in milliseconds (at most 5000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 5000))]
    pub call_timeout_ms: Option<u64>,
    /// Calls in flight at once per invocation (at most 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 2))]
    pub call_concurrency: Option<u32>,
    /// Calls per invocation (at most 256).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 256))]
    pub calls_per_invocation: Option<u32>,
    /// Aggregate WASM wall clock per invocation in milliseconds (at most 30000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 30000))]
    pub wall_clock_ms: Option<u64>,
}

/// `{ "name", "kind": "host", "host": "<id>" }`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HostEntry {
    /// `"."` or one path segment of `[A-Za-z0-9._-]`.
    #[schemars(pattern(r"^(?:\.|[A-Za-z0-9._-]+)$"))]
    pub name: String,
    /// The id of a host module NodeTool implements (see the host registry).
    #[schemars(pattern(r"^[a-z][a-z0-9-]*$"), length(min = 1, max = 64))]
    pub host: String,
}

/// The WASM contract of one module after validation: what the dispatcher enforces.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WasmContract {
    /// The manifest's ceiling on the binary's memory maximum, in pages.
    pub memory_pages_max: u32,
    /// Exports in manifest order, normalized to `{ wasm, as }`.
    pub exports: Vec<WasmExport>,
    /// The manifest's lowered budgets, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<WasmLimits>,
}

/// A manifest that passed every rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SandboxManifest {
    /// Modules in manifest order.
    pub modules: Vec<ManifestModule>,
    /// Normalized internal helper file ids, in manifest order.
    pub internal: Vec<String>,
}

/// One validated module entry. Its serialization is the `declaration` part of the module digest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ManifestModule {
    /// The module name (`"."` for the root specifier).
    pub name: String,
    /// Where the module's code comes from.
    pub source: ModuleSource,
}

/// Where a validated module's code comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum ModuleSource {
    /// An authored `.js` file of the pack (normalized id).
    JsFile {
        /// Normalized package-relative id.
        file: String,
    },
    /// An npm dependency compiled into a guest module.
    JsNpm {
        /// The dependency's package name.
        npm: String,
    },
    /// A scalar WASM binary of the pack.
    Wasm {
        /// Normalized package-relative id.
        file: String,
        /// The validated contract.
        contract: WasmContract,
    },
    /// A NodeTool host module.
    Host {
        /// The host module id.
        host: String,
    },
}

impl ModuleSource {
    /// The authored file this module reads, if it reads one.
    pub fn file(&self) -> Option<&str> {
        match self {
            ModuleSource::JsFile { file } | ModuleSource::Wasm { file, .. } => Some(file),
            ModuleSource::JsNpm { .. } | ModuleSource::Host { .. } => None,
        }
    }
}

/// One broken manifest rule: where (a JSON path inside the `nodetool` block) and which rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManifestError {
    /// JSON path inside the `nodetool` block, e.g. `sandboxModules[1].exports[0]`.
    pub path: String,
    /// The rule, in words.
    pub message: String,
}

impl fmt::Display for ManifestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

/// Reads the sandbox part of a `nodetool` block.
///
/// Returns `Ok(None)` when the block declares no sandbox modules (the package is not a sandbox
/// pack), `Ok(Some(_))` when every rule holds, and every broken rule otherwise.
pub fn parse_manifest(
    nodetool: &serde_json::Value,
) -> Result<Option<SandboxManifest>, Vec<ManifestError>> {
    let Some(object) = nodetool.as_object() else {
        return Ok(None);
    };
    if !object.contains_key("sandboxModules") {
        return Ok(None);
    }
    let block: ManifestBlock = serde_path_to_error::deserialize(nodetool).map_err(|e| {
        let path = e.path().to_string();
        let error = ManifestError {
            path: if path == "." { String::new() } else { path },
            message: e.into_inner().to_string(),
        };
        vec![refine_entry_error(nodetool, error)]
    })?;
    if block.sandbox_modules.is_empty() {
        return Ok(None);
    }
    block.validate().map(Some)
}

impl ManifestBlock {
    /// Checks every rule and returns the normalized manifest, or every broken rule.
    pub fn validate(&self) -> Result<SandboxManifest, Vec<ManifestError>> {
        let mut errors = Vec::new();
        let mut err = |path: String, message: String| errors.push(ManifestError { path, message });

        if self.api_version != API_VERSION {
            err(
                "apiVersion".into(),
                format!("apiVersion must be {API_VERSION}"),
            );
        }

        let mut internal = Vec::new();
        let mut internal_seen = BTreeSet::new();
        for (i, file) in self.internal.iter().enumerate() {
            let path = format!("internal[{i}]");
            match normalize_package_path(file) {
                Err(rule) => err(path, format!("{rule}: {file:?}")),
                Ok(id) if !id.ends_with(".js") => {
                    err(path, format!("internal file must be JavaScript: {id}"))
                }
                Ok(id) if !internal_seen.insert(id.clone()) => {
                    err(path, format!("duplicate internal file: {id}"))
                }
                Ok(id) => internal.push(id),
            }
        }

        let mut modules = Vec::new();
        let mut names = BTreeSet::new();
        let mut public_files = BTreeSet::new();
        for (i, entry) in self.sandbox_modules.iter().enumerate() {
            let at = format!("sandboxModules[{i}]");
            let name = entry.name();
            if let Err(rule) = check_module_name(name) {
                err(format!("{at}.name"), format!("{rule}: {name:?}"));
            } else if !names.insert(name.to_string()) {
                err(
                    format!("{at}.name"),
                    format!("duplicate module name: {name}"),
                );
            }
            let mut file_id =
                |file: &str, errors: &mut dyn FnMut(String, String)| match normalize_package_path(
                    file,
                ) {
                    Err(rule) => {
                        errors(format!("{at}.file"), format!("{rule}: {file:?}"));
                        None
                    }
                    Ok(id) if internal_seen.contains(&id) => {
                        errors(
                            format!("{at}.file"),
                            format!("internal file is also public: {id}"),
                        );
                        None
                    }
                    Ok(id) if !public_files.insert(id.clone()) => {
                        errors(
                            format!("{at}.file"),
                            format!("file is declared by two modules: {id}"),
                        );
                        None
                    }
                    Ok(id) => Some(id),
                };
            let source = match entry {
                ModuleEntry::Js(js) => match (&js.file, &js.npm) {
                    (Some(file), None) => {
                        file_id(file, &mut err).map(|file| ModuleSource::JsFile { file })
                    }
                    (None, Some(npm)) => match check_npm_name(npm) {
                        Ok(()) => Some(ModuleSource::JsNpm { npm: npm.clone() }),
                        Err(rule) => {
                            err(format!("{at}.npm"), format!("{rule}: {npm:?}"));
                            None
                        }
                    },
                    _ => {
                        err(
                            at.clone(),
                            "a JS module must declare exactly one of file or npm".into(),
                        );
                        None
                    }
                },
                ModuleEntry::Wasm(wasm) => {
                    let file = file_id(&wasm.file, &mut err);
                    let contract = validate_wasm(&at, wasm, &mut err);
                    file.zip(contract)
                        .map(|(file, contract)| ModuleSource::Wasm { file, contract })
                }
                ModuleEntry::Host(host) => match check_host_id(&host.host) {
                    Ok(()) => Some(ModuleSource::Host {
                        host: host.host.clone(),
                    }),
                    Err(rule) => {
                        err(format!("{at}.host"), format!("{rule}: {:?}", host.host));
                        None
                    }
                },
            };
            if let Some(source) = source {
                modules.push(ManifestModule {
                    name: name.to_string(),
                    source,
                });
            }
        }
        // Two npm entries naming one dependency would compile to the same graph id.
        let mut npm_seen = BTreeSet::new();
        for (i, m) in modules.iter().enumerate() {
            if let ModuleSource::JsNpm { npm } = &m.source
                && !npm_seen.insert(npm.as_str())
            {
                errors.push(ManifestError {
                    path: format!("sandboxModules[{i}].npm"),
                    message: format!("duplicate npm module {npm}"),
                });
            }
        }
        if errors.is_empty() {
            Ok(SandboxManifest { modules, internal })
        } else {
            Err(errors)
        }
    }
}

/// serde loses the field path inside an internally tagged enum (it buffers the entry to find
/// `kind`), so an error located at `sandboxModules[i]` is re-derived by deserializing that
/// entry as its variant directly, which names the offending field.
fn refine_entry_error(nodetool: &serde_json::Value, error: ManifestError) -> ManifestError {
    fn field_error<T: serde::de::DeserializeOwned>(
        entry: serde_json::Value,
    ) -> Option<(String, String)> {
        serde_path_to_error::deserialize::<_, T>(entry)
            .err()
            .map(|e| (e.path().to_string(), e.into_inner().to_string()))
    }
    let Some(entry) = nodetool.get("sandboxModules").and_then(|m| {
        let index: usize = error
            .path
            .strip_prefix("sandboxModules[")?
            .strip_suffix(']')?
            .parse()
            .ok()?;
        m.get(index)
    }) else {
        return error;
    };
    let mut fields = entry.clone();
    let kind = fields.as_object_mut().and_then(|o| o.remove("kind"));
    let refined = match kind.as_ref().and_then(|k| k.as_str()) {
        Some("js") => field_error::<JsEntry>(fields),
        Some("wasm") => field_error::<WasmEntry>(fields),
        Some("host") => field_error::<HostEntry>(fields),
        _ => None,
    };
    match refined {
        Some((path, message)) if path != "." => ManifestError {
            path: format!("{}.{path}", error.path),
            message,
        },
        Some((_, message)) => ManifestError { message, ..error },
        None => error,
    }
}

fn check_npm_name(npm: &str) -> Result<(), &'static str> {
    if npm.chars().any(|c| c <= '\u{1f}' || c == '\u{7f}') {
        return Err("npm name contains a control character");
    }
    if npm.to_ascii_lowercase().contains('%') {
        return Err("npm name contains encoded path traversal");
    }
    // A package name, then an optional subpath its `exports` map serves (`csv-parse/sync`).
    let package_len = match npm.strip_prefix('@') {
        Some(scoped) => scoped
            .match_indices('/')
            .nth(1)
            .map_or(npm.len(), |(at, _)| at + 1),
        None => npm.find('/').unwrap_or(npm.len()),
    };
    let (package, subpath) = npm.split_at(package_len);
    check_package_name(package).map_err(|_| "npm must name a package")?;
    if let Some(subpath) = subpath.strip_prefix('/') {
        let segment_ok = |s: &str| {
            s.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        };
        if !subpath.split('/').all(segment_ok) {
            return Err("npm subpath must be plain segments (letters, digits, ., _, -)");
        }
    }
    Ok(())
}

fn validate_wasm(
    at: &str,
    wasm: &WasmEntry,
    err: &mut dyn FnMut(String, String),
) -> Option<WasmContract> {
    let mut broken = 0usize;
    let mut failed = |path: String, message: String| {
        broken += 1;
        err(path, message)
    };
    if wasm.memory_pages_max > WASM_MAX_MEMORY_PAGES {
        failed(
            format!("{at}.memoryPagesMax"),
            format!(
                "memoryPagesMax {} is above the host ceiling of {WASM_MAX_MEMORY_PAGES} pages",
                wasm.memory_pages_max
            ),
        );
    }
    if wasm.exports.is_empty() {
        failed(
            format!("{at}.exports"),
            "a WASM module must declare at least one export".into(),
        );
    }
    let mut exports = Vec::new();
    let mut wasm_names = BTreeSet::new();
    let mut aliases = BTreeSet::new();
    for (j, export) in wasm.exports.iter().enumerate() {
        let path = format!("{at}.exports[{j}]");
        let normalized = match export {
            WasmExportEntry::Name(name) => match check_identifier(name) {
                Ok(()) => WasmExport {
                    wasm: name.clone(),
                    as_name: name.clone(),
                },
                Err(rule) => {
                    failed(
                        path,
                        format!(
                            "export {name:?} {rule}; map it with {{ \"wasm\": {name:?}, \"as\": \"<identifier>\" }}"
                        ),
                    );
                    continue;
                }
            },
            WasmExportEntry::Alias(alias) => {
                if alias.wasm.is_empty()
                    || alias.wasm.chars().any(|c| c <= '\u{1f}' || c == '\u{7f}')
                {
                    failed(
                        format!("{path}.wasm"),
                        "the WASM export name must be non-empty text without control characters"
                            .into(),
                    );
                    continue;
                }
                if let Err(rule) = check_identifier(&alias.as_name) {
                    failed(
                        format!("{path}.as"),
                        format!("alias {:?} {rule}", alias.as_name),
                    );
                    continue;
                }
                alias.clone()
            }
        };
        if !wasm_names.insert(normalized.wasm.clone()) {
            failed(
                path.clone(),
                format!("duplicate WASM export: {}", normalized.wasm),
            );
        } else if !aliases.insert(normalized.as_name.clone()) {
            failed(
                path,
                format!("duplicate JavaScript export alias: {}", normalized.as_name),
            );
        }
        exports.push(normalized);
    }
    if let Some(limits) = &wasm.limits {
        let b = WASM_BUDGETS;
        let checks: [(&str, Option<u64>, u64); 4] = [
            ("callTimeoutMs", limits.call_timeout_ms, b.call_timeout_ms),
            (
                "callConcurrency",
                limits.call_concurrency.map(u64::from),
                u64::from(b.call_concurrency),
            ),
            (
                "callsPerInvocation",
                limits.calls_per_invocation.map(u64::from),
                u64::from(b.calls_per_invocation),
            ),
            ("wallClockMs", limits.wall_clock_ms, b.wall_clock_ms),
        ];
        for (key, value, ceiling) in checks {
            match value {
                Some(0) => failed(
                    format!("{at}.limits.{key}"),
                    format!("limits.{key} must be at least 1"),
                ),
                Some(v) if v > ceiling => failed(
                    format!("{at}.limits.{key}"),
                    format!("limits.{key} may only lower the budget of {ceiling} (asked for {v})"),
                ),
                _ => {}
            }
        }
    }
    (broken == 0).then_some(WasmContract {
        memory_pages_max: wasm.memory_pages_max,
        exports,
        limits: wasm.limits,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn errors(block: serde_json::Value) -> Vec<String> {
        match parse_manifest(&block) {
            Err(errors) => errors.iter().map(ToString::to_string).collect(),
            Ok(m) => panic!("expected errors, got {m:?}"),
        }
    }

    fn one_error(block: serde_json::Value) -> String {
        let e = errors(block);
        assert_eq!(e.len(), 1, "{e:?}");
        e.into_iter().next().unwrap_or_default()
    }

    fn js(name: &str, file: &str) -> serde_json::Value {
        json!({ "name": name, "kind": "js", "file": file })
    }

    fn wasm_with(extra: serde_json::Value) -> serde_json::Value {
        let mut entry = json!({ "name": "w", "kind": "wasm", "file": "w.wasm", "memoryPagesMax": 2, "exports": ["add"] });
        if let (Some(e), Some(x)) = (entry.as_object_mut(), extra.as_object()) {
            e.extend(x.clone());
        }
        json!({ "sandboxModules": [entry] })
    }

    #[test]
    fn not_a_sandbox_pack() {
        assert_eq!(parse_manifest(&json!({ "register": "x" })), Ok(None));
        assert_eq!(parse_manifest(&json!("nodetool")), Ok(None));
        assert_eq!(parse_manifest(&json!({ "sandboxModules": [] })), Ok(None));
    }

    #[test]
    fn a_full_manifest_normalizes() {
        let m = parse_manifest(&json!({
            "apiVersion": 1,
            "register": "./dist/index.js",
            "recommended": true,
            "internal": ["./sandbox/util.js"],
            "sandboxModules": [
                js(".", "sandbox/geo.js"),
                { "name": "yaml", "kind": "js", "npm": "js-yaml" },
                { "name": "simplify-wasm", "kind": "wasm", "file": "sandbox/s.wasm", "memoryPagesMax": 256,
                  "exports": ["simplify", { "wasm": "sum-f32", "as": "sumF32" }], "limits": { "callTimeoutMs": 2000 } },
                { "name": "csv", "kind": "host", "host": "csv" }
            ]
        }))
        .ok()
        .flatten();
        let m = m.unwrap_or_else(|| panic!("manifest should parse"));
        assert_eq!(m.internal, vec!["sandbox/util.js"]);
        assert_eq!(m.modules.len(), 4);
        let ModuleSource::Wasm { contract, .. } = &m.modules[2].source else {
            panic!("wasm")
        };
        assert_eq!(
            contract.exports[1],
            WasmExport {
                wasm: "sum-f32".into(),
                as_name: "sumF32".into()
            }
        );
        assert_eq!(contract.limits.and_then(|l| l.call_timeout_ms), Some(2000));
    }

    #[test]
    fn unknown_keys_inside_an_entry_are_errors() {
        let e = one_error(
            json!({ "sandboxModules": [{ "name": ".", "kind": "js", "file": "a.js", "fiel": "b.js" }] }),
        );
        assert!(e.contains("unknown field `fiel`"), "{e}");
        assert!(e.starts_with("sandboxModules[0].fiel: "), "{e}");
    }

    #[test]
    fn unknown_kind() {
        let e = one_error(
            json!({ "sandboxModules": [{ "name": ".", "kind": "python", "file": "a.py" }] }),
        );
        assert!(e.contains("unknown variant `python`"), "{e}");
    }

    #[test]
    fn api_version() {
        let e = one_error(json!({ "apiVersion": 2, "sandboxModules": [js(".", "a.js")] }));
        assert_eq!(e, "apiVersion: apiVersion must be 1");
    }

    #[test]
    fn js_needs_exactly_one_source() {
        let e = one_error(json!({ "sandboxModules": [{ "name": ".", "kind": "js" }] }));
        assert!(e.contains("exactly one of file or npm"), "{e}");
        let e = one_error(
            json!({ "sandboxModules": [{ "name": ".", "kind": "js", "file": "a.js", "npm": "x" }] }),
        );
        assert!(e.contains("exactly one of file or npm"), "{e}");
    }

    #[test]
    fn module_names_and_duplicates() {
        assert!(
            one_error(json!({ "sandboxModules": [js("a/b", "a.js")] }))
                .contains("single path segment")
        );
        assert!(one_error(json!({ "sandboxModules": [js("..", "a.js")] })).contains("reserved"));
        assert!(
            one_error(json!({ "sandboxModules": [js("node_modules", "a.js")] }))
                .contains("reserved")
        );
        assert!(
            one_error(json!({ "sandboxModules": [js("a\u{1}", "a.js")] }))
                .contains("control character")
        );
        assert!(
            one_error(json!({ "sandboxModules": [js("x", "a.js"), js("x", "b.js")] }))
                .contains("duplicate module name: x")
        );
    }

    #[test]
    fn file_paths() {
        for (file, rule) in [
            ("../x.js", "package-relative"),
            ("/abs.js", "package-relative"),
            ("a\\b.js", "package-relative"),
            ("%2e%2e/x.js", "encoded path traversal"),
            ("x\u{0}.js", "control character"),
        ] {
            let e = one_error(json!({ "sandboxModules": [js(".", file)] }));
            assert!(e.contains(rule), "{file}: {e}");
            assert!(e.starts_with("sandboxModules[0].file"), "{e}");
        }
    }

    #[test]
    fn internal_files() {
        let e = one_error(json!({ "internal": ["a.txt"], "sandboxModules": [js(".", "a.js")] }));
        assert!(e.contains("internal file must be JavaScript: a.txt"), "{e}");
        let e = one_error(
            json!({ "internal": ["a.js", "./a.js"], "sandboxModules": [js(".", "b.js")] }),
        );
        assert!(e.contains("duplicate internal file: a.js"), "{e}");
        let e = one_error(json!({ "internal": ["./a.js"], "sandboxModules": [js(".", "a.js")] }));
        assert!(e.contains("internal file is also public: a.js"), "{e}");
        let e = one_error(json!({ "sandboxModules": [js(".", "a.js"), js("b", "./a.js")] }));
        assert!(e.contains("declared by two modules: a.js"), "{e}");
    }

    #[test]
    fn npm_names() {
        assert!(
            one_error(
                json!({ "sandboxModules": [{ "name": ".", "kind": "js", "npm": "../evil" }] })
            )
            .contains("npm")
        );
        assert!(
            one_error(
                json!({ "sandboxModules": [{ "name": ".", "kind": "js", "npm": "%2e%2e" }] })
            )
            .contains("encoded")
        );
        assert!(
            one_error(json!({ "sandboxModules": [
            { "name": "a", "kind": "js", "npm": "x" }, { "name": "b", "kind": "js", "npm": "x" }
        ] }))
            .contains("duplicate npm module x")
        );
        // A subpath served by the package's exports map is allowed; a path trick is not.
        for ok in ["csv-parse/sync", "@scope/pkg/sub/path", "ramda/es"] {
            assert!(
                parse_manifest(
                    &json!({ "sandboxModules": [{ "name": ".", "kind": "js", "npm": ok }] })
                )
                .is_ok(),
                "{ok}"
            );
        }
        for bad in [
            "csv-parse/../x",
            "csv-parse/",
            "csv-parse//x",
            "csv-parse/.hidden",
            "@scope/",
        ] {
            assert!(
                one_error(json!({ "sandboxModules": [{ "name": ".", "kind": "js", "npm": bad }] }))
                    .contains("npm"),
                "{bad}"
            );
        }
    }

    #[test]
    fn wasm_rules() {
        assert!(one_error(wasm_with(json!({ "memoryPagesMax": 4097 }))).contains("host ceiling"));
        let e = one_error(wasm_with(json!({ "memoryPagesMax": -1 })));
        assert!(
            // serde says "invalid value: integer `-1`, expected u32", or "invalid number" under
            // serde_json's arbitrary_precision (on in this workspace for rolldown).
            e.starts_with("sandboxModules[0].memoryPagesMax: invalid"),
            "{e}"
        );
        let e = one_error(wasm_with(json!({ "exports": ["a", 3] })));
        assert!(e.starts_with("sandboxModules[0].exports[1]: "), "{e}");
        assert!(one_error(wasm_with(json!({ "exports": [] }))).contains("at least one export"));
        let e = one_error(wasm_with(json!({ "exports": ["foo-bar"] })));
        assert!(e.contains("map it with"), "{e}");
        assert!(one_error(wasm_with(json!({ "exports": ["class"] }))).contains("reserved"));
        assert!(
            one_error(wasm_with(
                json!({ "exports": [{ "wasm": "x", "as": "default" }] })
            ))
            .contains("reserved")
        );
        assert!(
            one_error(wasm_with(json!({ "exports": [{ "wasm": "", "as": "x" }] })))
                .contains("non-empty")
        );
        assert!(
            one_error(wasm_with(json!({ "exports": ["a", "a"] })))
                .contains("duplicate WASM export: a")
        );
        assert!(
            one_error(wasm_with(
                json!({ "exports": ["a", { "wasm": "b", "as": "a" }] })
            ))
            .contains("duplicate JavaScript export alias: a")
        );
        assert!(
            one_error(wasm_with(
                json!({ "exports": [{ "wasm": "b", "as": "a", "x": 1 }] })
            ))
            .contains("unknown field")
        );
        assert!(one_error(wasm_with(json!({ "exports": [3] }))).contains("identifier string"));
        let e = one_error(wasm_with(json!({ "limits": { "callTimeoutMs": 6000 } })));
        assert!(
            e.contains("may only lower the budget of 5000 (asked for 6000)"),
            "{e}"
        );
        assert!(
            one_error(wasm_with(json!({ "limits": { "callConcurrency": 0 } })))
                .contains("at least 1")
        );
        assert!(
            one_error(wasm_with(json!({ "limits": { "threads": 4 } }))).contains("unknown field")
        );
        assert!(
            parse_manifest(&wasm_with(
                json!({ "limits": { "callsPerInvocation": 256, "wallClockMs": 1 } })
            ))
            .is_ok()
        );
    }

    #[test]
    fn host_ids() {
        let e = one_error(
            json!({ "sandboxModules": [{ "name": ".", "kind": "host", "host": "../csv" }] }),
        );
        assert!(e.contains("invalid host module id"), "{e}");
        let e = one_error(
            json!({ "sandboxModules": [{ "name": ".", "kind": "host", "host": "csv", "file": "x.js" }] }),
        );
        assert!(e.contains("unknown field `file`"), "{e}");
    }

    #[test]
    fn every_error_is_reported() {
        let e = errors(
            json!({ "apiVersion": 3, "internal": ["x.css"], "sandboxModules": [js("a/b", "../x.js")] }),
        );
        assert_eq!(e.len(), 4, "{e:?}");
    }
}
