//! The catalog's answers: declarations, summaries, statuses, resolutions and deliveries.
//!
//! Invariant: nothing here carries a filesystem path. A module is named by its specifier, a
//! file by its package-relative id, a pack by its package name.

use std::fmt;
use std::sync::Arc;

use base64::Engine as _;
use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::manifest::WasmContract;
use crate::skill::SkillDocument;

/// A module-graph digest: lowercase hex SHA-256 (see `nodetool-discovery`'s digest module for
/// the canonical form it is taken over).
pub type ContentDigest = String;

/// What a caller asks the catalog for: a specifier, optionally with what it saw last time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Declaration {
    /// The import specifier, e.g. `@acme/nodetool-geo` or `@acme/nodetool-geo/extra`.
    pub specifier: String,
    /// The pack version the caller saw; a different installed version is a warning.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolved_pack_version: Option<String>,
    /// The module-graph digest the caller saw; a different one is a warning.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_digest: Option<ContentDigest>,
}

impl Declaration {
    /// A declaration of just a specifier, as read off a body's imports.
    pub fn of(specifier: impl Into<String>) -> Self {
        Declaration {
            specifier: specifier.into(),
            resolved_pack_version: None,
            content_digest: None,
        }
    }
}

/// The three module kinds.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum ModuleKind {
    /// Guest JavaScript, authored or compiled from npm.
    Js,
    /// Scalar WASM on the host behind a facade.
    Wasm,
    /// A NodeTool host module behind a facade.
    Host,
}

impl ModuleKind {
    /// The kind as the manifest spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            ModuleKind::Js => "js",
            ModuleKind::Wasm => "wasm",
            ModuleKind::Host => "host",
        }
    }
}

/// One importable module as the UI and the prompt tier see it. Never a body, never a path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    /// The import specifier.
    pub specifier: String,
    /// The pack that provides it.
    pub pack_name: String,
    /// The pack's version, when its package.json has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pack_version: Option<String>,
    /// The module kind.
    pub kind: ModuleKind,
    /// A sanitized one-line description (see [`sanitize_description`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The module-graph digest.
    pub content_digest: ContentDigest,
}

/// How serious a status is.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum StatusLevel {
    /// The module is available.
    Ready,
    /// Something is off, but nothing is withheld.
    Warning,
    /// A module is withheld for a reason that is not a fault of the pack (not compiled yet, or
    /// the compiler refused it).
    Skipped,
    /// A pack or module is withheld because it breaks the contract.
    Error,
}

/// Declares the stable status codes once: the enum, its string form, and the list of all codes.
macro_rules! status_codes {
    ($($(#[doc = $doc:literal])* $variant:ident = $code:literal,)*) => {
        /// A stable status code. The string form never changes once shipped; tests and tools
        /// match on it.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema)]
        pub enum StatusCode {
            $($(#[doc = $doc])* #[serde(rename = $code)] $variant,)*
        }

        impl StatusCode {
            /// Every code, in declaration order.
            pub const ALL: &'static [StatusCode] = &[$(StatusCode::$variant,)*];

            /// The code's stable string form.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(StatusCode::$variant => $code,)*
                }
            }

            /// The code for a stable string form.
            pub fn parse(s: &str) -> Option<StatusCode> {
                match s {
                    $($code => Some(StatusCode::$variant),)*
                    _ => None,
                }
            }
        }
    };
}

status_codes! {
    // Catalog host: which packs exist.
    /// `package.json` could not be read or is not a JSON object with a valid package name.
    DiscoveryFailed = "discovery-failed",
    /// One package name was found in two install roots (or two directories of one root); both
    /// are dropped.
    DuplicatePack = "duplicate-pack",
    /// Two packs claim the same specifier (compared without regard to ASCII case); neither
    /// module resolves.
    DuplicateSpecifier = "duplicate-specifier",
    // Discovery: the pack breaks a rule and is withheld whole.
    /// The `nodetool` block breaks a manifest rule.
    ManifestInvalid = "manifest-invalid",
    /// A declared file is missing, not a regular file, or unreadable.
    FileUnreadable = "file-unreadable",
    /// A declared file resolves outside the package directory.
    FileEscapesPackage = "file-escapes-package",
    /// A path component of a declared file is a symlink.
    SymlinkNotAllowed = "symlink-not-allowed",
    /// A file exceeds its kind's size cap.
    FileTooLarge = "file-too-large",
    /// The pack's sandbox files together exceed the pack cap.
    PackTooLarge = "pack-too-large",
    /// An authored JavaScript file does not parse as a module (or is not UTF-8).
    JsInvalid = "js-invalid",
    /// An authored JavaScript file uses dynamic `import()`.
    DynamicImport = "dynamic-import",
    /// An authored JavaScript file calls `require()`.
    RequireCall = "require-call",
    /// An authored JavaScript file imports a bare specifier (anything outside the pack).
    ImportOutsidePack = "import-outside-pack",
    /// A relative import climbs out of the package directory.
    ImportEscapesPack = "import-escapes-pack",
    /// A relative import lands on a file the manifest does not declare.
    ImportUndeclaredFile = "import-undeclared-file",
    /// A relative import lands on a declared file that is not JavaScript.
    ImportNotJs = "import-not-js",
    /// The pack's JavaScript files import each other in a cycle.
    ModuleCycle = "module-cycle",
    /// A WASM file is not a valid binary.
    WasmInvalid = "wasm-invalid",
    /// A WASM binary imports something.
    WasmImports = "wasm-imports",
    /// A WASM memory is shared, has no maximum, or its maximum is above the manifest or host
    /// ceiling.
    WasmMemory = "wasm-memory",
    /// A declared WASM export is missing, not a function, or outside the scalar contract.
    WasmExport = "wasm-export",
    /// A host entry names an id NodeTool does not implement.
    HostModuleUnknown = "host-module-unknown",
    /// A host entry names an id that belongs to another package.
    HostModuleForeign = "host-module-foreign",
    // Discovery: per module, the pack stays.
    /// An npm module has no compiled artifact yet.
    PendingCompile = "pending-compile",
    /// An npm module compiled and was admitted.
    NpmModuleCompiled = "npm-module-compiled",
    /// The compiler admitted an npm module with a warning (a feature-detected global).
    NpmModuleWarning = "npm-module-warning",
    /// The compiled bundle is over the npm bundle cap.
    NpmModuleTooLarge = "npm-module-too-large",
    /// The bundle imports a Node builtin.
    NpmModuleBuiltinImport = "npm-module-builtin-import",
    /// The bundler could not resolve an import.
    NpmModuleUnresolved = "npm-module-unresolved",
    /// The bundler failed otherwise.
    NpmModuleBundleFailed = "npm-module-bundle-failed",
    /// The bundle references a forbidden global.
    NpmModuleForbiddenGlobal = "npm-module-forbidden-global",
    /// The scan rejected the bundle (dynamic import, leftover import).
    NpmModuleScanRejected = "npm-module-scan-rejected",
    /// The admission probe threw at module initialization.
    NpmModuleProbeFailed = "npm-module-probe-failed",
    /// The pack has no SKILL.md (agents cannot discover it; modules still work).
    SkillMissing = "skill-missing",
    /// The pack's SKILL.md is unreadable, over its cap, or malformed (modules still work).
    SkillInvalid = "skill-invalid",
    // The front end: what only the host that runs the module can know.
    /// A host module's native library, or the data it needs, is not installed on this host
    /// (the OCR pack without Tesseract or its English data). The module still resolves; its
    /// calls fail naming what to install. Never produced by discovery, which loads no library.
    HostLibraryMissing = "host-library-missing",
    // Identity: which pack a name and a consent stand for.
    /// An installed pack has the name of a pack shipped with NodeTool and is used instead of
    /// it (the shipped copy is set aside). Installing such a name from a local tarball or
    /// directory takes `packs install --allow-reserved-name`.
    ShippedPackShadowed = "shipped-pack-shadowed",
    /// The operator allowed a pack of this name, but for another identity (another integrity
    /// or content digest, or the shipped pack): the pack is untrusted until allowed again.
    ConsentIdentityChanged = "consent-identity-changed",
    /// The pack is allowed by an allowlist entry that records no identity (written before
    /// consent recorded one); it stays trusted, and `packs allow` records its identity.
    ConsentIdentityUnrecorded = "consent-identity-unrecorded",
    // Resolution.
    /// No installed pack offers the specifier.
    ModuleNotFound = "module-not-found",
    /// The module was discovered but has no content to execute (e.g. not compiled).
    ModuleUnavailable = "module-unavailable",
    /// The installed pack version differs from the declaration's (resolves anyway).
    VersionMismatch = "version-mismatch",
    /// The module-graph digest differs from the declaration's (resolves anyway).
    ContentDigestMismatch = "content-digest-mismatch",
}

impl fmt::Display for StatusCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One diagnostic: which pack (and module), how serious, which rule, in words.
///
/// The resolution statuses have constructors here so every catalog implementation words them
/// the same way.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    /// The pack's package name (for a pack whose name could not be read, its directory name).
    pub pack_name: String,
    /// The module's specifier, when the status is about one module.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub specifier: Option<String>,
    /// How serious it is.
    pub status: StatusLevel,
    /// The stable code.
    pub code: StatusCode,
    /// A message naming the pack, the file and the rule.
    pub message: String,
}

impl Status {
    /// `module-not-found`: no installed pack offers `specifier`.
    pub fn module_not_found(specifier: &str) -> Status {
        Status {
            pack_name: pack_name_of(specifier),
            specifier: Some(specifier.to_string()),
            status: StatusLevel::Error,
            code: StatusCode::ModuleNotFound,
            message: format!("Sandbox module {specifier} is not installed."),
        }
    }

    /// `module-unavailable`: the module was discovered but has nothing to execute.
    pub fn module_unavailable(pack_name: &str, specifier: &str, why: &str) -> Status {
        Status {
            pack_name: pack_name.to_string(),
            specifier: Some(specifier.to_string()),
            status: StatusLevel::Error,
            code: StatusCode::ModuleUnavailable,
            message: format!("Sandbox module {specifier} is not available for execution: {why}"),
        }
    }

    /// `version-mismatch`: the declaration saw another pack version.
    pub fn version_mismatch(
        pack_name: &str,
        specifier: &str,
        saved: &str,
        installed: Option<&str>,
    ) -> Status {
        let installed = installed.unwrap_or("an unversioned pack");
        Status {
            pack_name: pack_name.to_string(),
            specifier: Some(specifier.to_string()),
            status: StatusLevel::Warning,
            code: StatusCode::VersionMismatch,
            message: format!(
                "Sandbox module {specifier} was saved with pack version {saved}, but {installed} is installed."
            ),
        }
    }

    /// `content-digest-mismatch`: the module graph changed since the declaration saw it.
    pub fn content_digest_mismatch(pack_name: &str, specifier: &str) -> Status {
        Status {
            pack_name: pack_name.to_string(),
            specifier: Some(specifier.to_string()),
            status: StatusLevel::Warning,
            code: StatusCode::ContentDigestMismatch,
            message: format!(
                "Sandbox module {specifier} has changed since the workflow was saved."
            ),
        }
    }
}

/// The package name a specifier names (`@scope/name` or `name`), or the text itself when it is
/// not shaped like a specifier.
pub fn pack_name_of(specifier: &str) -> String {
    crate::names::split_specifier(specifier)
        .map_or_else(|| specifier.to_string(), |(pack, _)| pack.to_string())
}

/// A file of a resolved module graph: its package-relative id and its content.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GraphFile {
    /// The package-relative id (`sandbox/geo.js`), `npm:<name>` for a compiled bundle, or
    /// `host:<id>` for a host facade.
    pub id: String,
    /// Whether the file is an internal helper (never importable by user code).
    pub internal: bool,
    /// Ids of the graph files this one imports, sorted.
    pub dependencies: Vec<String>,
    /// The content.
    #[serde(flatten)]
    pub content: FileContent,
}

/// A graph file's content, by kind.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum FileContent {
    /// JavaScript source text.
    Js {
        /// The source.
        source: Arc<str>,
    },
    /// A WASM binary.
    Wasm {
        /// The bytes.
        bytes: Bytes,
    },
}

/// A module ready for the loader: its specifier, graph and what kind of facade (if any) fronts it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResolvedModule {
    /// The specifier user code imports.
    pub specifier: String,
    /// The pack that provides it.
    pub pack_name: String,
    /// The pack's version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pack_version: Option<String>,
    /// The module-graph digest.
    pub content_digest: ContentDigest,
    /// The graph id of the entry file (`sandbox/geo.js`, `npm:js-yaml`, `host:csv`).
    pub module_id: String,
    /// Exactly the files reachable from the entry, sorted by id (empty for host modules).
    pub graph: Vec<GraphFile>,
    /// What fronts the module.
    #[serde(flatten)]
    pub kind: ResolvedKind,
}

impl ResolvedModule {
    /// The entry file of the graph (absent for host modules, whose facade is generated).
    pub fn entry(&self) -> Option<&GraphFile> {
        self.graph.iter().find(|f| f.id == self.module_id)
    }

    /// The module kind.
    pub fn module_kind(&self) -> ModuleKind {
        match self.kind {
            ResolvedKind::Js => ModuleKind::Js,
            ResolvedKind::Wasm { .. } => ModuleKind::Wasm,
            ResolvedKind::Host { .. } => ModuleKind::Host,
        }
    }
}

/// The kind-specific part of a resolved module.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum ResolvedKind {
    /// The entry file is the module.
    Js,
    /// The entry file is a WASM binary fronted by a generated facade.
    Wasm {
        /// The validated contract the dispatcher enforces.
        wasm: WasmContract,
    },
    /// A host module fronted by a generated facade. Its exports come from the host registry,
    /// so a resolution cannot widen what an id means.
    Host {
        /// The host module id.
        #[serde(rename = "hostId")]
        host_id: String,
    },
}

/// What the catalog answers for a list of declarations: the modules to mount and what went
/// wrong or looks off.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Resolution {
    /// Modules to mount, one per distinct resolvable specifier, in declaration order.
    pub modules: Vec<ResolvedModule>,
    /// Errors (the module is not mounted) and warnings (it is).
    pub statuses: Vec<Status>,
}

impl Resolution {
    /// Whether any status is an error.
    pub fn has_errors(&self) -> bool {
        self.statuses.iter().any(|s| s.status == StatusLevel::Error)
    }
}

/// A media type the delivery route serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum MediaType {
    /// `text/javascript`
    #[serde(rename = "text/javascript")]
    JavaScript,
    /// `application/wasm`
    #[serde(rename = "application/wasm")]
    Wasm,
}

impl MediaType {
    /// The header value.
    pub fn as_str(self) -> &'static str {
        match self {
            MediaType::JavaScript => "text/javascript",
            MediaType::Wasm => "application/wasm",
        }
    }
}

/// The separator of a graph-file delivery id: `<packName>::<fileId>`.
pub const GRAPH_FILE_ID_SEPARATOR: &str = "::";

/// Builds the delivery id of a graph file.
pub fn graph_file_module_id(pack_name: &str, file_id: &str) -> String {
    format!("{pack_name}{GRAPH_FILE_ID_SEPARATOR}{file_id}")
}

/// Splits a graph-file delivery id into pack name and file id, or `None` if `id` is not one.
pub fn parse_graph_file_module_id(id: &str) -> Option<(&str, &str)> {
    let at = id.find(GRAPH_FILE_ID_SEPARATOR)?;
    let (pack, file) = (&id[..at], &id[at + GRAPH_FILE_ID_SEPARATOR.len()..]);
    (!pack.is_empty() && !file.is_empty()).then_some((pack, file))
}

/// An authorized delivery: the body and everything a remote loader needs to verify and link it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AuthorizedDelivery {
    /// The opaque id that was asked for.
    pub module_id: String,
    /// The delivered file's graph id.
    pub file_id: String,
    /// Whether the file is an internal helper.
    pub internal: bool,
    /// The pack it belongs to.
    pub pack_name: String,
    /// The pack's version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pack_version: Option<String>,
    /// The owning module's graph digest.
    pub content_digest: ContentDigest,
    /// SHA-256 (lowercase hex) of exactly the body bytes.
    pub content_sha256: String,
    /// Delivery ids of what this file imports.
    pub dependencies: Vec<String>,
    /// The body's media type.
    pub media_type: MediaType,
    /// The body.
    pub body: DeliveryBody,
    /// The WASM contract (public WASM entries only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wasm: Option<WasmContract>,
    /// The host module id (host facades only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_id: Option<String>,
}

/// A delivery body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum DeliveryBody {
    /// JavaScript source (authored, compiled, or a generated facade).
    Source(Arc<str>),
    /// A WASM binary.
    Bytes(Bytes),
}

impl DeliveryBody {
    /// The exact bytes that go on the wire.
    pub fn as_bytes(&self) -> &[u8] {
        match self {
            DeliveryBody::Source(s) => s.as_bytes(),
            DeliveryBody::Bytes(b) => &b.0,
        }
    }
}

/// Why a delivery was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum RefusalReason {
    /// No such module or file (traversal attempts included).
    #[serde(rename = "not-found")]
    NotFound,
    /// Known, but there is nothing to deliver (e.g. not compiled).
    Unavailable,
    /// Known, and this client may not have it.
    Forbidden,
}

/// A refused delivery.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct DeliveryRefusal {
    /// Why.
    pub reason: RefusalReason,
    /// In words, naming the id.
    pub message: String,
}

/// A pack's SKILL.md as disclosed to a consumer, with the trust flag that decides how.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SkillDisclosure {
    /// The pack.
    pub pack_name: String,
    /// Its version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pack_version: Option<String>,
    /// Whether the operator trusts the pack: a trusted pack's skill registers normally, an
    /// untrusted one reaches an agent only as untrusted tool output.
    pub trusted: bool,
    /// The parsed document.
    pub skill: SkillDocument,
}

/// Raw bytes that serialize as standard base64 (with padding).
#[derive(Clone, PartialEq, Eq, JsonSchema)]
#[schemars(transparent)]
pub struct Bytes(#[schemars(with = "String")] pub Arc<[u8]>);

impl fmt::Debug for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Bytes({} bytes)", self.0.len())
    }
}

impl From<Vec<u8>> for Bytes {
    fn from(v: Vec<u8>) -> Self {
        Bytes(v.into())
    }
}

impl Serialize for Bytes {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&base64::engine::general_purpose::STANDARD.encode(&self.0))
    }
}

impl<'de> Deserialize<'de> for Bytes {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        base64::engine::general_purpose::STANDARD
            .decode(text)
            .map(Bytes::from)
            .map_err(serde::de::Error::custom)
    }
}

/// Sanitizes a description for a summary or the one-line prompt tier: control characters
/// (U+0000–U+001F, U+007F–U+009F) become spaces, whitespace collapses to single spaces, the ends
/// are trimmed, and anything over 160 characters is cut to 159 plus `…`. The wording is never
/// judged; only its shape is bounded.
pub fn sanitize_description(text: &str) -> String {
    let spaced: String = text
        .chars()
        .map(|c| {
            if c <= '\u{1f}' || ('\u{7f}'..='\u{9f}').contains(&c) {
                ' '
            } else {
                c
            }
        })
        .collect();
    let collapsed = spaced.split_whitespace().collect::<Vec<_>>().join(" ");
    let max = crate::limits::MAX_DESCRIPTION_CHARS;
    if collapsed.chars().count() <= max {
        return collapsed;
    }
    let mut cut: String = collapsed.chars().take(max - 1).collect();
    cut.truncate(cut.trim_end().len());
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptions_are_sanitized_and_capped() {
        assert_eq!(sanitize_description("  a\u{0}b\n\tc\u{85}d  "), "a b c d");
        let long = "word ".repeat(100);
        let s = sanitize_description(&long);
        assert_eq!(s.chars().count(), 160);
        assert!(s.ends_with("word…") || s.ends_with("wor…") || s.ends_with('…'));
        assert!(!s.contains(" …"));
        assert_eq!(sanitize_description(&"x".repeat(160)), "x".repeat(160));
        assert_eq!(sanitize_description(&"x".repeat(161)).chars().count(), 160);
    }

    #[test]
    fn status_codes_round_trip() {
        for code in StatusCode::ALL {
            assert_eq!(StatusCode::parse(code.as_str()), Some(*code));
            let json = serde_json::to_string(code).unwrap_or_default();
            assert_eq!(json, format!("\"{}\"", code.as_str()));
        }
    }

    #[test]
    fn graph_file_ids() {
        assert_eq!(
            graph_file_module_id("@acme/geo", "sandbox/a.js"),
            "@acme/geo::sandbox/a.js"
        );
        assert_eq!(
            parse_graph_file_module_id("@acme/geo::sandbox/a.js"),
            Some(("@acme/geo", "sandbox/a.js"))
        );
        assert_eq!(parse_graph_file_module_id("::a.js"), None);
        assert_eq!(parse_graph_file_module_id("@acme/geo::"), None);
        assert_eq!(parse_graph_file_module_id("@acme/geo"), None);
    }

    #[test]
    fn resolved_modules_serialize_flat() {
        let m = ResolvedModule {
            specifier: "@acme/w".into(),
            pack_name: "@acme/w".into(),
            pack_version: None,
            content_digest: "a".repeat(64),
            module_id: "w.wasm".into(),
            graph: vec![GraphFile {
                id: "w.wasm".into(),
                internal: false,
                dependencies: vec![],
                content: FileContent::Wasm {
                    bytes: Bytes::from(vec![0, 97, 115, 109]),
                },
            }],
            kind: ResolvedKind::Wasm {
                wasm: WasmContract {
                    memory_pages_max: 1,
                    exports: vec![],
                    limits: None,
                },
            },
        };
        let v = serde_json::to_value(&m).unwrap_or_default();
        assert_eq!(v["kind"], "wasm");
        assert_eq!(v["graph"][0]["kind"], "wasm");
        assert_eq!(v["graph"][0]["bytes"], "AGFzbQ==");
        let back: ResolvedModule = serde_json::from_value(v).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(back, m);
    }
}
