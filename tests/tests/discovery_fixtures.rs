//! Discovery over the committed fixture packs in `tests/fixtures/packs/`, plus the cases too large
//! to commit (generated into temp dirs), which together produce every stable status code.
//!
//! The roots are searched as the product searches them: `installed-a`, `installed-b`, then
//! `shipped` last, each under a label (its folder name) by which diagnostics name directories.
//! Diagnostics and summaries are snapshotted sorted; no status may carry a filesystem path, so
//! the snapshots need no path normalization and each scenario asserts that none leaked.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use nodetool_discovery::{
    DiscoveredCatalog, DiscoveryOptions, RootKind, SearchRoot, discover_catalog,
};
use nodetool_protocol::catalog::{
    Declaration, ModuleKind, Status, StatusCode, StatusLevel, Summary,
};
use nodetool_protocol::limits::{AUTHORED_JS_BYTES, NPM_BUNDLE_BYTES, PACK_BYTES, WASM_BYTES};
use nodetool_runtime::{
    CompileRequest, CompiledArtifact, CompiledLookup, CompiledNpmModule, SandboxModuleCatalog,
};

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/packs")
}

fn fixture_roots() -> Vec<SearchRoot> {
    let dir = fixtures_dir();
    [
        ("installed-a", RootKind::Installed),
        ("installed-b", RootKind::Installed),
        ("shipped", RootKind::Shipped),
    ]
    .into_iter()
    .map(|(label, kind)| SearchRoot {
        path: dir.join(label),
        kind,
        label: label.into(),
    })
    .collect()
}

/// The compiler's cache as discovery sees it: one answer per npm dependency of `@fixture/npm`,
/// covering every outcome the compiler has.
struct FixtureCompiler;

fn artifact(source: String, warnings: Vec<String>) -> CompiledNpmModule {
    CompiledNpmModule::Admitted(CompiledArtifact {
        source: Arc::from(source),
        compiler_version: "fixture-compiler/1".into(),
        options_digest: "1".repeat(64),
        inputs_digest: "2".repeat(64),
        warnings,
    })
}

impl CompiledLookup for FixtureCompiler {
    fn lookup(&self, request: &CompileRequest<'_>) -> Option<CompiledNpmModule> {
        if request.pack_name != "@fixture/npm" {
            return None;
        }
        let npm = request.npm;
        let refused =
            |code: StatusCode, message: String| Some(CompiledNpmModule::Refused { code, message });
        match npm {
            "fixture-compiled" => Some(artifact("export const answer = 42;\n".into(), vec![])),
            "fixture-warned" => Some(artifact(
                "export const onNode = typeof process !== \"undefined\";\n".into(),
                vec![format!(
                    "{npm} feature-detects process at 1:23; the guest has no such global, so that branch never runs"
                )],
            )),
            "fixture-too-large" => {
                let blob = "x".repeat(usize::try_from(NPM_BUNDLE_BYTES).unwrap_or(usize::MAX));
                Some(artifact(
                    format!("export const blob = \"{blob}\";\n"),
                    vec![],
                ))
            }
            "fixture-builtin-import" => refused(
                StatusCode::NpmModuleBuiltinImport,
                format!(
                    "{npm} imports node:fs — a Node builtin needs the host bridge path, which the guest does not have"
                ),
            ),
            "fixture-unresolved" => refused(
                StatusCode::NpmModuleUnresolved,
                format!("{npm}: could not resolve \"left-pad\""),
            ),
            "fixture-bundle-failed" => refused(
                StatusCode::NpmModuleBundleFailed,
                format!("{npm}: the bundler produced no output"),
            ),
            "fixture-forbidden-global" => refused(
                StatusCode::NpmModuleForbiddenGlobal,
                format!(
                    "{npm} references process (first at 3:7), which the guest does not provide"
                ),
            ),
            "fixture-scan-rejected" => refused(
                StatusCode::NpmModuleScanRejected,
                format!("{npm}: bundle uses dynamic import(), which the guest loader denies"),
            ),
            "fixture-probe-failed" => refused(
                StatusCode::NpmModuleProbeFailed,
                format!("{npm} failed the sandbox admission probe: Error: boom"),
            ),
            // `fixture-pending` (and anything else) has not been compiled.
            _ => None,
        }
    }
}

fn trusted_packs() -> BTreeSet<String> {
    BTreeSet::from(["@nodetool-ai/sandbox-csv".to_string()])
}

fn discover(roots: &[SearchRoot]) -> DiscoveredCatalog {
    let trusted = trusted_packs();
    let options = DiscoveryOptions {
        compiled: &FixtureCompiler,
        trusted_packs: &trusted,
    };
    discover_catalog(roots, &options)
}

fn fixture_catalog() -> DiscoveredCatalog {
    discover(&fixture_roots())
}

/// Asserts no status names `dir` (as given or canonical): diagnostics name directories only
/// by the labels of their roots.
fn assert_no_path(statuses: &[Status], dir: &Path) {
    let mut spellings = vec![dir.display().to_string()];
    if let Ok(canonical) = fs::canonicalize(dir) {
        spellings.push(canonical.display().to_string());
    }
    for status in statuses {
        for spelling in &spellings {
            assert!(
                !status.pack_name.contains(spelling.as_str())
                    && !status.message.contains(spelling.as_str()),
                "a path leaked: {status:#?}"
            );
        }
    }
}

/// Statuses sorted by pack, specifier, code and message.
fn sorted(statuses: &[Status]) -> Vec<Status> {
    let mut out = statuses.to_vec();
    out.sort_by(|a, b| {
        (&a.pack_name, &a.specifier, a.code, &a.message).cmp(&(
            &b.pack_name,
            &b.specifier,
            b.code,
            &b.message,
        ))
    });
    out
}

fn codes_of(statuses: &[Status]) -> BTreeSet<StatusCode> {
    statuses.iter().map(|s| s.code).collect()
}

fn summary<'a>(catalog: &'a DiscoveredCatalog, specifier: &str) -> Option<&'a Summary> {
    catalog
        .summaries()
        .iter()
        .find(|s| s.specifier == specifier)
}

fn statuses_of<'a>(statuses: &'a [Status], pack_name: &str) -> Vec<&'a Status> {
    statuses
        .iter()
        .filter(|s| s.pack_name == pack_name)
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Writing packs at run time.

fn write_file(path: &Path, bytes: &[u8]) {
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).unwrap_or_else(|e| panic!("creating {parent:?}: {e}"));
    }
    fs::write(path, bytes).unwrap_or_else(|e| panic!("writing {path:?}: {e}"));
}

/// Writes `<root>/<name>/package.json` with the given `nodetool` block, then every file.
fn write_pack(root: &Path, name: &str, nodetool: serde_json::Value, files: &[(&str, Vec<u8>)]) {
    let dir = root.join(name);
    let package = serde_json::json!({ "name": name, "version": "1.0.0", "nodetool": nodetool });
    let text = serde_json::to_string_pretty(&package).unwrap_or_else(|e| panic!("{e}"));
    write_file(&dir.join("package.json"), text.as_bytes());
    for (id, bytes) in files {
        write_file(&dir.join(id), bytes);
    }
}

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap_or_else(|e| panic!("creating {to:?}: {e}"));
    let entries = fs::read_dir(from).unwrap_or_else(|e| panic!("listing {from:?}: {e}"));
    for entry in entries {
        let entry = entry.unwrap_or_else(|e| panic!("listing {from:?}: {e}"));
        let target = to.join(entry.file_name());
        let kind = entry
            .file_type()
            .unwrap_or_else(|e| panic!("{:?}: {e}", entry.path()));
        if kind.is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            fs::copy(entry.path(), &target)
                .unwrap_or_else(|e| panic!("copying {:?}: {e}", entry.path()));
        }
    }
}

fn temp_root() -> tempfile::TempDir {
    tempfile::tempdir().unwrap_or_else(|e| panic!("creating a temp dir: {e}"))
}

fn installed(root: &Path) -> Vec<SearchRoot> {
    vec![SearchRoot {
        path: root.to_path_buf(),
        kind: RootKind::Installed,
        label: "installed".into(),
    }]
}

/// A valid scalar WASM module padded with a custom section to exactly `size` bytes.
fn padded_wasm(size: usize) -> Vec<u8> {
    let mut bytes = wat::parse_str(
        r#"(module (func (export "add") (param i32 i32) (result i32) local.get 0 local.get 1 i32.add))"#,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let name = b"padding";
    // id (1) + size (5, padded LEB128) + name length (1) + name.
    let header = 1 + 5 + 1 + name.len();
    let payload = size - bytes.len() - header;
    let section = u32::try_from(1 + name.len() + payload).unwrap_or(u32::MAX);
    bytes.push(0);
    for i in 0..5 {
        let byte = ((section >> (7 * i)) & 0x7f) as u8;
        bytes.push(if i < 4 { byte | 0x80 } else { byte });
    }
    bytes.push(u8::try_from(name.len()).unwrap_or(u8::MAX));
    bytes.extend_from_slice(name);
    bytes.resize(size, 0);
    bytes
}

// ---------------------------------------------------------------------------------------------
// The scenarios, each returning what it saw so one test can check every code is produced.

/// Resolution of the fixture catalog: not found, unavailable, version and digest drift.
fn resolution_statuses(catalog: &DiscoveredCatalog) -> Vec<Status> {
    let geo = summary(catalog, "@fixture/geo").unwrap_or_else(|| panic!("@fixture/geo is listed"));
    let resolution = catalog.resolve_for_execution(&[
        Declaration::of("@fixture/nope"),
        Declaration::of("@fixture/npm/pending"),
        Declaration {
            specifier: "@fixture/geo".into(),
            resolved_pack_version: Some("0.9.0".into()),
            content_digest: Some("0".repeat(64)),
        },
        Declaration {
            specifier: "@fixture/geo/extra".into(),
            resolved_pack_version: geo.pack_version.clone(),
            content_digest: summary(catalog, "@fixture/geo/extra")
                .map(|s| s.content_digest.clone()),
        },
    ]);
    let mounted: Vec<&str> = resolution
        .modules
        .iter()
        .map(|m| m.specifier.as_str())
        .collect();
    assert_eq!(
        mounted,
        ["@fixture/geo", "@fixture/geo/extra"],
        "drift is a warning, so geo still resolves; statuses: {:#?}",
        resolution.statuses
    );
    resolution.statuses
}

/// The shipped OCR pack on a host whose Tesseract is missing: the front end's warning
/// (discovery loads no library, so it never produces this code itself).
fn host_library_statuses() -> Vec<Status> {
    let shipped = [SearchRoot {
        path: Path::new(env!("CARGO_MANIFEST_DIR")).join("../packs"),
        kind: RootKind::Shipped,
        label: "shipped packs".into(),
    }];
    let catalog = discover_catalog(
        &shipped,
        &DiscoveryOptions {
            compiled: &nodetool_runtime::NoCompiledModules,
            trusted_packs: &BTreeSet::new(),
        },
    );
    nodetool_frontend::search::host_library_statuses(&catalog, &|id| {
        (id == "ocr").then(|| "Tesseract is not installed on this host".to_string())
    })
}

/// The fixture roots under an allowlist that allowed the installed csv for another identity
/// (`consent-identity-changed`) and zip by an old entry (`consent-identity-unrecorded`).
fn consent_statuses() -> Vec<Status> {
    use nodetool_discovery::trust::{Allowlist, apply_consent};
    let mut allowlist = Allowlist::parse("{\"allowed\": [\"@nodetool-ai/sandbox-zip\"]}")
        .unwrap_or_else(|e| panic!("{e}"));
    allowlist.allow("@nodetool-ai/sandbox-csv", "shipped".into());
    let mut catalog = discover_catalog(
        &fixture_roots(),
        &DiscoveryOptions {
            compiled: &FixtureCompiler,
            trusted_packs: &allowlist.names(),
        },
    );
    let before = catalog.diagnostics().len();
    apply_consent(&mut catalog, &allowlist, &|_| None);
    assert!(!catalog.pack_trusted("@nodetool-ai/sandbox-csv"));
    assert!(catalog.pack_trusted("@nodetool-ai/sandbox-zip"));
    catalog.diagnostics()[before..].to_vec()
}

/// An authored JavaScript file one KiB over its cap.
fn file_too_large_statuses() -> Vec<Status> {
    let root = temp_root();
    let mut source = b"export const ok = true;\n".to_vec();
    let size = usize::try_from(AUTHORED_JS_BYTES + 1024).unwrap_or(usize::MAX);
    while source.len() < size {
        source.extend_from_slice(b"// padding padding padding padding padding padding padding\n");
    }
    write_pack(
        root.path(),
        "@fixture/file-too-large",
        serde_json::json!({ "sandboxModules": [{ "name": ".", "kind": "js", "file": "sandbox/index.js" }] }),
        &[("sandbox/index.js", source)],
    );
    let catalog = discover(&installed(root.path()));
    assert!(catalog.summaries().is_empty(), "{:#?}", catalog.summaries());
    assert_no_path(catalog.diagnostics(), root.path());
    sorted(catalog.diagnostics())
}

/// Three WASM modules, each under the WASM cap, together over the pack cap.
fn pack_too_large_statuses() -> Vec<Status> {
    let root = temp_root();
    let each = usize::try_from(PACK_BYTES / 3 + 1024).unwrap_or(usize::MAX);
    assert!(each as u64 <= WASM_BYTES && 3 * each as u64 > PACK_BYTES);
    let wasm = padded_wasm(each);
    let modules: Vec<serde_json::Value> = ["a", "b", "c"]
        .iter()
        .map(|m| {
            serde_json::json!({
                "name": m, "kind": "wasm", "file": format!("sandbox/{m}.wasm"),
                "memoryPagesMax": 1, "exports": ["add"]
            })
        })
        .collect();
    write_pack(
        root.path(),
        "@fixture/pack-too-large",
        serde_json::json!({ "sandboxModules": modules }),
        &[
            ("sandbox/a.wasm", wasm.clone()),
            ("sandbox/b.wasm", wasm.clone()),
            ("sandbox/c.wasm", wasm),
        ],
    );
    let catalog = discover(&installed(root.path()));
    assert!(catalog.summaries().is_empty(), "{:#?}", catalog.summaries());
    assert_no_path(catalog.diagnostics(), root.path());
    sorted(catalog.diagnostics())
}

// ---------------------------------------------------------------------------------------------
// Tests.

#[test]
fn fixture_diagnostics() {
    let catalog = fixture_catalog();
    assert_no_path(catalog.diagnostics(), &fixtures_dir());
    insta::assert_yaml_snapshot!("fixture_diagnostics", sorted(catalog.diagnostics()));
}

/// Each fixture pack is named for what it shows and shows exactly that: every pack's diagnostic
/// codes, with multiplicity. Packs that are not listed (geo, wasm-scalar, csv, zip) have none.
#[test]
fn each_fixture_pack_produces_exactly_its_codes() {
    use StatusCode::*;
    let mut expected: BTreeMap<&str, Vec<StatusCode>> = BTreeMap::from([
        ("@fixture/Case", vec![DuplicateSpecifier]),
        ("@fixture/case", vec![DuplicateSpecifier]),
        ("@fixture/duplicate-pack", vec![DuplicatePack]),
        ("@fixture/dynamic-import", vec![DynamicImport]),
        ("@fixture/evil", vec![HostModuleForeign]),
        ("@fixture/file-escapes-package", vec![FileEscapesPackage]),
        ("@fixture/file-unreadable", vec![FileUnreadable]),
        ("@fixture/host-module-unknown", vec![HostModuleUnknown]),
        ("@fixture/import-escapes-pack", vec![ImportEscapesPack]),
        ("@fixture/import-not-js", vec![ImportNotJs]),
        ("@fixture/import-outside-pack", vec![ImportOutsidePack]),
        (
            "@fixture/import-undeclared-file",
            vec![ImportUndeclaredFile],
        ),
        ("@fixture/js-invalid", vec![JsInvalid]),
        ("@fixture/manifest-invalid", vec![ManifestInvalid]),
        ("@fixture/module-cycle", vec![ModuleCycle]),
        (
            "@fixture/npm",
            vec![
                PendingCompile,
                NpmModuleCompiled,
                NpmModuleCompiled,
                NpmModuleWarning,
                NpmModuleTooLarge,
                NpmModuleBuiltinImport,
                NpmModuleUnresolved,
                NpmModuleBundleFailed,
                NpmModuleForbiddenGlobal,
                NpmModuleScanRejected,
                NpmModuleProbeFailed,
            ],
        ),
        ("@fixture/require-call", vec![RequireCall]),
        ("@fixture/skill-invalid", vec![SkillInvalid]),
        ("@fixture/skill-missing", vec![SkillMissing]),
        ("@fixture/symlink-not-allowed", vec![SymlinkNotAllowed]),
        ("@fixture/wasm-export-arity", vec![WasmExport]),
        ("@fixture/wasm-export-i64", vec![WasmExport]),
        ("@fixture/wasm-export-memory", vec![WasmExport]),
        ("@fixture/wasm-export-missing", vec![WasmExport]),
        ("@fixture/wasm-export-multi-value", vec![WasmExport]),
        ("@fixture/wasm-imports", vec![WasmImports]),
        ("@fixture/wasm-invalid", vec![WasmInvalid]),
        ("@fixture/wasm-memory-over-max", vec![WasmMemory]),
        ("@fixture/wasm-memory-unbounded", vec![WasmMemory]),
        // The installed copy of a shipped pack wins and says so.
        ("@nodetool-ai/sandbox-csv", vec![ShippedPackShadowed]),
        // Named by the directory label: neither package.json yields a name.
        ("installed-b/@fixture/not-json", vec![DiscoveryFailed]),
        ("installed-b/no-name", vec![DiscoveryFailed]),
    ]);
    for codes in expected.values_mut() {
        codes.sort_unstable();
    }
    let catalog = fixture_catalog();
    let mut actual: BTreeMap<&str, Vec<StatusCode>> = BTreeMap::new();
    for status in catalog.diagnostics() {
        actual
            .entry(status.pack_name.as_str())
            .or_default()
            .push(status.code);
    }
    for codes in actual.values_mut() {
        codes.sort_unstable();
    }
    let wrong: Vec<String> = expected
        .keys()
        .chain(actual.keys())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .filter(|pack| expected.get(*pack) != actual.get(*pack))
        .map(|pack| {
            format!(
                "{pack}: expected {:?}, got {:?}",
                expected.get(pack),
                actual.get(pack)
            )
        })
        .collect();
    assert!(wrong.is_empty(), "{wrong:#?}");
}

#[test]
fn fixture_summaries() {
    let catalog = fixture_catalog();
    let summaries = catalog.summaries();
    let specifiers: Vec<&str> = summaries.iter().map(|s| s.specifier.as_str()).collect();
    let mut sorted = specifiers.clone();
    sorted.sort_unstable();
    assert_eq!(specifiers, sorted, "summaries are sorted by specifier");
    for s in summaries {
        assert_eq!(s.content_digest.len(), 64, "{s:#?}");
        assert!(!s.content_digest.contains(['/', '\\']), "{s:#?}");
    }
    insta::assert_yaml_snapshot!("fixture_summaries", summaries);
}

#[test]
fn an_installed_pack_shadows_the_shipped_copy_and_says_so() {
    let catalog = fixture_catalog();
    let csv = summary(&catalog, "@nodetool-ai/sandbox-csv")
        .unwrap_or_else(|| panic!("csv is listed: {:#?}", catalog.summaries()));
    assert_eq!(
        csv.pack_version.as_deref(),
        Some("2.0.0"),
        "the installed copy wins"
    );
    assert_eq!(csv.kind, ModuleKind::Host);
    let statuses = statuses_of(catalog.diagnostics(), "@nodetool-ai/sandbox-csv");
    assert_eq!(
        statuses
            .iter()
            .map(|s| (s.code, s.status))
            .collect::<Vec<_>>(),
        [(StatusCode::ShippedPackShadowed, StatusLevel::Warning)],
        "shadowing is never silent: {:#?}",
        catalog.diagnostics()
    );
    assert_eq!(
        statuses[0].message,
        "@nodetool-ai/sandbox-csv from installed-a/@nodetool-ai/sandbox-csv is used instead of the pack of that name shipped with NodeTool (shipped/@nodetool-ai/sandbox-csv); consent given to the shipped pack does not carry over to it."
    );
    // A shipped pack nobody shadows is discovered from the shipped root.
    let zip = summary(&catalog, "@nodetool-ai/sandbox-zip");
    assert_eq!(zip.and_then(|s| s.pack_version.as_deref()), Some("1.0.0"));

    let skill = catalog
        .pack_skill("@nodetool-ai/sandbox-csv")
        .unwrap_or_else(|| panic!("csv has a skill"));
    assert!(skill.trusted, "csv is on the trusted list");
    assert_eq!(skill.pack_version.as_deref(), Some("2.0.0"));
    assert_eq!(
        skill.skill.description,
        "Parse and write CSV (installed copy)."
    );
    assert!(
        skill.skill.sections.contains_key("gotchas"),
        "{:#?}",
        skill.skill.sections
    );

    let geo = catalog
        .pack_skill("@fixture/geo")
        .unwrap_or_else(|| panic!("geo has a skill"));
    assert!(!geo.trusted);
    assert!(catalog.pack_skill("@fixture/skill-invalid").is_none());
    assert!(catalog.pack_skill("@fixture/skill-missing").is_none());
}

#[test]
fn duplicates_drop_every_claimant() {
    let catalog = fixture_catalog();
    for specifier in ["@fixture/duplicate-pack", "@fixture/case", "@fixture/Case"] {
        assert!(
            summary(&catalog, specifier).is_none(),
            "{specifier} must not be listed"
        );
        let resolution = catalog.resolve_for_execution(&[Declaration::of(specifier)]);
        assert!(
            resolution.modules.is_empty(),
            "{specifier} must not resolve"
        );
        assert!(
            resolution.has_errors(),
            "{specifier}: {:#?}",
            resolution.statuses
        );
    }
}

#[test]
fn withheld_packs_have_no_modules() {
    let catalog = fixture_catalog();
    for status in catalog.diagnostics() {
        if status.status == StatusLevel::Error {
            let listed: Vec<&Summary> = catalog
                .summaries()
                .iter()
                .filter(|s| s.pack_name == status.pack_name)
                .collect();
            assert!(
                listed.is_empty(),
                "{} is withheld but lists {listed:#?}",
                status.pack_name
            );
        }
    }
}

#[test]
fn resolution() {
    let catalog = fixture_catalog();
    let statuses = resolution_statuses(&catalog);
    insta::assert_yaml_snapshot!("resolution_statuses", statuses);
}

#[test]
fn npm_modules_follow_the_compiler() {
    let catalog = fixture_catalog();
    let compiled = summary(&catalog, "@fixture/npm").unwrap_or_else(|| panic!("npm is listed"));
    assert_eq!(compiled.kind, ModuleKind::Js);
    let resolution = catalog.resolve_for_execution(&[
        Declaration::of("@fixture/npm"),
        Declaration::of("@fixture/npm/warned"),
    ]);
    assert!(!resolution.has_errors(), "{:#?}", resolution.statuses);
    let module = &resolution.modules[0];
    assert_eq!(module.module_id, "npm:fixture-compiled");
    let ids: Vec<&str> = module.graph.iter().map(|f| f.id.as_str()).collect();
    assert_eq!(ids, ["npm:fixture-compiled"]);

    for name in [
        "pending",
        "too-large",
        "builtin-import",
        "unresolved",
        "bundle-failed",
        "forbidden-global",
        "scan-rejected",
        "probe-failed",
    ] {
        let specifier = format!("@fixture/npm/{name}");
        let resolution = catalog.resolve_for_execution(&[Declaration::of(&specifier)]);
        assert!(resolution.modules.is_empty(), "{specifier}");
        let codes = codes_of(&resolution.statuses);
        assert_eq!(
            codes,
            BTreeSet::from([StatusCode::ModuleUnavailable]),
            "{specifier}"
        );
    }
}

#[test]
fn the_geo_graph_is_the_entry_and_its_helper() {
    let catalog = fixture_catalog();
    let resolution = catalog.resolve_for_execution(&[Declaration::of("@fixture/geo")]);
    assert!(resolution.statuses.is_empty(), "{:#?}", resolution.statuses);
    let [geo] = resolution.modules.as_slice() else {
        panic!("one module: {:#?}", resolution.modules);
    };
    assert_eq!(geo.module_id, "sandbox/geo.js");
    assert_eq!(geo.pack_name, "@fixture/geo");
    assert_eq!(geo.pack_version.as_deref(), Some("1.0.0"));
    let files: Vec<(&str, bool, &[String])> = geo
        .graph
        .iter()
        .map(|f| (f.id.as_str(), f.internal, f.dependencies.as_slice()))
        .collect();
    let helper = ["sandbox/internal/round.js".to_string()];
    assert_eq!(
        files,
        [
            ("sandbox/geo.js", false, &helper[..]),
            ("sandbox/internal/round.js", true, &[][..])
        ],
        "exactly the entry and its internal helper; extra.js is another module's graph"
    );
    let digest = summary(&catalog, "@fixture/geo").map(|s| s.content_digest.as_str());
    assert_eq!(Some(geo.content_digest.as_str()), digest);
}

#[test]
fn digests_ignore_location_and_follow_content() {
    let digests = |catalog: &DiscoveredCatalog| -> BTreeMap<String, String> {
        catalog
            .summaries()
            .iter()
            .filter(|s| s.pack_name == "@fixture/geo")
            .map(|s| (s.specifier.clone(), s.content_digest.clone()))
            .collect()
    };
    let original = digests(&fixture_catalog());
    assert_eq!(original.len(), 2, "{original:#?}");

    let root = temp_root();
    let geo = root.path().join("@fixture/geo");
    copy_dir(&fixtures_dir().join("installed-a/@fixture/geo"), &geo);
    let copied = digests(&discover(&installed(root.path())));
    assert_eq!(
        copied, original,
        "a pack digests the same wherever it is installed"
    );

    let helper = geo.join("sandbox/internal/round.js");
    let mut bytes = fs::read(&helper).unwrap_or_else(|e| panic!("reading {helper:?}: {e}"));
    let at = bytes
        .iter()
        .rposition(|b| *b == b'0')
        .unwrap_or_else(|| panic!("a digit"));
    bytes[at] = b'1';
    write_file(&helper, &bytes);
    let changed = digests(&discover(&installed(root.path())));
    assert_ne!(
        changed.get("@fixture/geo"),
        original.get("@fixture/geo"),
        "the helper is in geo's graph"
    );
    assert_eq!(
        changed.get("@fixture/geo/extra"),
        original.get("@fixture/geo/extra"),
        "the helper is not in extra's graph"
    );
}

#[test]
fn an_authored_file_over_its_cap() {
    let statuses = file_too_large_statuses();
    assert_eq!(
        codes_of(&statuses),
        BTreeSet::from([StatusCode::FileTooLarge]),
        "{statuses:#?}"
    );
    insta::assert_yaml_snapshot!("file_too_large", statuses);
}

#[test]
fn a_pack_over_its_cap() {
    let statuses = pack_too_large_statuses();
    assert_eq!(
        codes_of(&statuses),
        BTreeSet::from([StatusCode::PackTooLarge]),
        "{statuses:#?}"
    );
    insta::assert_yaml_snapshot!("pack_too_large", statuses);
}

/// Every committed `.wasm` with a `.wat` beside it is exactly what the `.wat` assembles to.
#[test]
fn committed_wasm_matches_its_wat() {
    fn walk(dir: &Path, found: &mut Vec<PathBuf>) {
        let entries = fs::read_dir(dir).unwrap_or_else(|e| panic!("listing {dir:?}: {e}"));
        for entry in entries {
            let entry = entry.unwrap_or_else(|e| panic!("listing {dir:?}: {e}"));
            let kind = entry
                .file_type()
                .unwrap_or_else(|e| panic!("{:?}: {e}", entry.path()));
            if kind.is_dir() {
                walk(&entry.path(), found);
            } else if entry.path().extension().is_some_and(|e| e == "wat") {
                found.push(entry.path());
            }
        }
    }
    let mut wats = Vec::new();
    walk(&fixtures_dir(), &mut wats);
    assert!(wats.len() >= 10, "{wats:#?}");
    for wat in wats {
        let expected = wat::parse_file(&wat).unwrap_or_else(|e| panic!("{wat:?}: {e}"));
        let wasm = wat.with_extension("wasm");
        let committed = fs::read(&wasm).unwrap_or_else(|e| panic!("reading {wasm:?}: {e}"));
        assert!(
            committed == expected,
            "{wasm:?} is stale: regenerate it from {wat:?} with wat::parse_file"
        );
    }
}

/// The level each code is reported at.
fn expected_level(code: StatusCode) -> StatusLevel {
    use StatusCode::*;
    match code {
        NpmModuleCompiled => StatusLevel::Ready,
        NpmModuleWarning
        | SkillMissing
        | SkillInvalid
        | HostLibraryMissing
        | ShippedPackShadowed
        | ConsentIdentityChanged
        | ConsentIdentityUnrecorded
        | VersionMismatch
        | ContentDigestMismatch => StatusLevel::Warning,
        PendingCompile
        | NpmModuleTooLarge
        | NpmModuleBuiltinImport
        | NpmModuleUnresolved
        | NpmModuleBundleFailed
        | NpmModuleForbiddenGlobal
        | NpmModuleScanRejected
        | NpmModuleProbeFailed => StatusLevel::Skipped,
        _ => StatusLevel::Error,
    }
}

#[test]
fn every_status_code_is_produced() {
    let catalog = fixture_catalog();
    let mut seen: Vec<Status> = catalog.diagnostics().to_vec();
    seen.extend(resolution_statuses(&catalog));
    seen.extend(file_too_large_statuses());
    seen.extend(pack_too_large_statuses());
    seen.extend(host_library_statuses());
    seen.extend(consent_statuses());

    for status in &seen {
        assert_eq!(status.status, expected_level(status.code), "{status:#?}");
        assert!(!status.pack_name.is_empty(), "{status:#?}");
        assert!(!status.message.is_empty(), "{status:#?}");
    }
    let produced = codes_of(&seen);
    let missing: Vec<&str> = StatusCode::ALL
        .iter()
        .filter(|code| !produced.contains(code))
        .map(|code| code.as_str())
        .collect();
    assert!(missing.is_empty(), "no scenario produces {missing:?}");
}
