//! The canonical digests.
//!
//! Every digest is the lowercase hex SHA-256 of a compact JSON document (serde_json, no
//! whitespace) whose object keys appear in the fixed order the structs below declare and whose
//! arrays are sorted by the byte order of their sort key. File contents enter only as their own
//! SHA-256; no filesystem path enters at all, so a pack digests the same wherever it is
//! installed. Each document carries a `format` tag so a change to this canonical form changes
//! every digest rather than colliding with an old one.
//!
//! * A **module digest** (what a declaration pins, what summaries and deliveries carry) covers
//!   the package name and version, the specifier, the entry's graph id, the kind, the manifest
//!   declaration as validated, every file reachable from the entry (id, kind, internal flag,
//!   sorted dependencies, content hash), the generated facade and its generator version for
//!   WASM and host modules, and the compiler identity plus bundle hash for npm modules.
//! * The **pack digest** covers the package name and version, the whole validated manifest
//!   (modules sorted by name, internal files sorted), every file of the pack, and every
//!   compiled artifact's identity.

use serde::Serialize;

use nodetool_protocol::hex::sha256_hex;
use nodetool_protocol::manifest::ManifestModule;

fn digest_of<T: Serialize>(document: &T) -> String {
    // Serializing plain structs of strings, bools and vectors cannot fail.
    sha256_hex(&serde_json::to_vec(document).unwrap_or_default())
}

/// One file as it enters a digest.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct DigestEntry<'a> {
    pub id: &'a str,
    pub kind: &'a str,
    pub internal: bool,
    pub dependencies: &'a [String],
    pub sha256: &'a str,
}

/// A generated facade as it enters a digest.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct DigestFacade<'a> {
    pub version: u32,
    pub source: &'a str,
}

/// A compiled npm artifact's identity as it enters a digest.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct DigestCompiled<'a> {
    pub id: &'a str,
    pub compiler_version: &'a str,
    pub options_digest: &'a str,
    pub inputs_digest: &'a str,
    pub sha256: &'a str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ModuleDocument<'a> {
    format: &'static str,
    package_name: &'a str,
    package_version: Option<&'a str>,
    specifier: &'a str,
    module_id: &'a str,
    kind: &'a str,
    declaration: &'a ManifestModule,
    entries: Vec<DigestEntry<'a>>,
    facade: Option<DigestFacade<'a>>,
    compiled: Option<DigestCompiled<'a>>,
}

/// Everything a module digest covers.
pub(crate) struct ModuleDigestInput<'a> {
    pub package_name: &'a str,
    pub package_version: Option<&'a str>,
    pub specifier: &'a str,
    pub module_id: &'a str,
    pub kind: &'a str,
    pub declaration: &'a ManifestModule,
    pub entries: Vec<DigestEntry<'a>>,
    pub facade: Option<DigestFacade<'a>>,
    pub compiled: Option<DigestCompiled<'a>>,
}

pub(crate) fn module_digest(input: ModuleDigestInput<'_>) -> String {
    let mut entries = input.entries;
    entries.sort_by(|a, b| a.id.cmp(b.id));
    digest_of(&ModuleDocument {
        format: "nodetool-module-digest/1",
        package_name: input.package_name,
        package_version: input.package_version,
        specifier: input.specifier,
        module_id: input.module_id,
        kind: input.kind,
        declaration: input.declaration,
        entries,
        facade: input.facade,
        compiled: input.compiled,
    })
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PackManifestDocument<'a> {
    api_version: u32,
    internal: Vec<&'a str>,
    modules: Vec<&'a ManifestModule>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PackDocument<'a> {
    format: &'static str,
    package_name: &'a str,
    package_version: Option<&'a str>,
    manifest: PackManifestDocument<'a>,
    entries: Vec<DigestEntry<'a>>,
    compiled: Vec<DigestCompiled<'a>>,
}

pub(crate) fn pack_digest<'a>(
    package_name: &'a str,
    package_version: Option<&'a str>,
    modules: &'a [ManifestModule],
    internal: &'a [String],
    mut entries: Vec<DigestEntry<'a>>,
    mut compiled: Vec<DigestCompiled<'a>>,
) -> String {
    let mut internal: Vec<&str> = internal.iter().map(String::as_str).collect();
    internal.sort_unstable();
    let mut modules: Vec<&ManifestModule> = modules.iter().collect();
    modules.sort_by(|a, b| a.name.cmp(&b.name));
    entries.sort_by(|a, b| a.id.cmp(b.id));
    compiled.sort_by(|a, b| a.id.cmp(b.id));
    digest_of(&PackDocument {
        format: "nodetool-pack-digest/1",
        package_name,
        package_version,
        manifest: PackManifestDocument {
            api_version: nodetool_protocol::manifest::API_VERSION,
            internal,
            modules,
        },
        entries,
        compiled,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256_of_known_input() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
