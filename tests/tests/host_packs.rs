//! The shipped host packs (`packs/@nodetool-ai/sandbox-{csv,html,xml,xlsx,ocr,zip,diff}`): discovery finds
//! them clean as a shipped root, each resolves to its host id, the package.json and SKILL.md
//! follow the shipped-pack conventions, and a pack that forges a host entry is refused at
//! discovery whatever root it sits in.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use nodetool_discovery::{
    DiscoveredCatalog, DiscoveryOptions, RootKind, SearchRoot, discover_catalog,
};
use nodetool_protocol::catalog::{
    Declaration, ModuleKind, ResolvedKind, Status, StatusCode, StatusLevel,
};
use nodetool_protocol::host::{HOST_MODULES, host_module};
use nodetool_protocol::limits::SKILL_BYTES;
use nodetool_runtime::{NoCompiledModules, SandboxModuleCatalog};
use serde_json::{Value as Json, json};

/// The host ids this build ships a pack for: every id of the registry (a host id without its
/// pinned pack could never be imported).
fn shipped_host_ids() -> impl Iterator<Item = &'static str> {
    HOST_MODULES.iter().map(|m| m.id)
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| panic!("the tests crate has no parent directory"))
}

fn pack_dir(id: &str) -> PathBuf {
    workspace().join(format!("packs/@nodetool-ai/sandbox-{id}"))
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {path:?}: {e}"))
}

fn discover(roots: &[SearchRoot]) -> DiscoveredCatalog {
    let trusted = BTreeSet::new();
    discover_catalog(
        roots,
        &DiscoveryOptions {
            compiled: &NoCompiledModules,
            trusted_packs: &trusted,
        },
    )
}

fn shipped_root() -> SearchRoot {
    SearchRoot {
        path: workspace().join("packs"),
        kind: RootKind::Shipped,
        label: "shipped".into(),
    }
}

fn shipped_catalog() -> DiscoveredCatalog {
    discover(&[shipped_root()])
}

fn spec_of(id: &str) -> &'static nodetool_protocol::host::HostModuleSpec {
    host_module(id).unwrap_or_else(|| panic!("{id} is not in the host registry"))
}

// ---------------------------------------------------------------------------------------------
// The shipped packs.

#[test]
fn the_host_packs_discover_clean_and_resolve_to_their_ids() {
    let catalog = shipped_catalog();
    for id in shipped_host_ids() {
        let pack = spec_of(id).pack_name;
        let diagnostics: Vec<&Status> = catalog
            .diagnostics()
            .iter()
            .filter(|s| s.pack_name == pack)
            .collect();
        assert!(diagnostics.is_empty(), "{pack}: {diagnostics:#?}");

        let summary = catalog
            .summaries()
            .iter()
            .find(|s| s.specifier == pack)
            .unwrap_or_else(|| panic!("no summary for {pack}: {:#?}", catalog.summaries()));
        assert_eq!(summary.pack_name, pack);
        assert_eq!(summary.pack_version.as_deref(), Some("1.0.0"));
        assert_eq!(summary.kind, ModuleKind::Host);
        assert!(summary.description.is_some(), "{summary:#?}");
        // One module per pack: the pack name itself.
        assert_eq!(
            catalog
                .summaries()
                .iter()
                .filter(|s| s.pack_name == pack)
                .count(),
            1
        );

        let resolution = catalog.resolve_for_execution(&[Declaration::of(pack)]);
        assert!(
            resolution
                .statuses
                .iter()
                .all(|s| s.status == StatusLevel::Ready),
            "{pack}: {:#?}",
            resolution.statuses
        );
        let [module] = resolution.modules.as_slice() else {
            panic!("{pack} resolves to one module: {:#?}", resolution.modules);
        };
        assert_eq!(module.specifier, pack);
        assert_eq!(module.pack_name, pack);
        assert_eq!(
            module.kind,
            ResolvedKind::Host {
                host_id: id.to_string()
            }
        );
        assert_eq!(module.module_id, format!("host:{id}"));
        assert!(module.graph.is_empty(), "a host module ships no files");
    }
    // The shipped root as a whole stays clean too (the guest library packs are only waiting
    // for the compiler, whose cache this catalog does not read).
    assert!(
        catalog
            .diagnostics()
            .iter()
            .all(|s| s.code == nodetool_protocol::catalog::StatusCode::PendingCompile),
        "{:#?}",
        catalog.diagnostics()
    );
}

#[test]
fn every_registry_export_has_an_implementation() {
    assert_eq!(
        nodetool_host_modules::registry_drift(),
        Vec::<String>::new()
    );
}

#[test]
fn the_host_package_jsons_are_config_only_recommended_packs() {
    for id in shipped_host_ids() {
        let pack = spec_of(id).pack_name;
        let path = pack_dir(id).join("package.json");
        let package: Json = serde_json::from_str(&read(&path))
            .unwrap_or_else(|e| panic!("{path:?} is not JSON: {e}"));
        assert_eq!(package["name"], pack);
        assert_eq!(package["version"], "1.0.0");
        assert!(
            package["description"]
                .as_str()
                .is_some_and(|d| !d.is_empty()),
            "{pack}: a description"
        );
        assert_eq!(package["keywords"], json!(["nodetool-sandbox-pack"]));
        assert_eq!(package["files"], json!(["SKILL.md"]));
        assert_eq!(
            package["nodetool"],
            json!({
                "apiVersion": 1,
                "recommended": true,
                "sandboxModules": [{ "name": ".", "kind": "host", "host": id }]
            })
        );
        // The library is NodeTool's own; the pack carries no code and no dependency.
        for key in [
            "dependencies",
            "devDependencies",
            "peerDependencies",
            "optionalDependencies",
            "main",
            "exports",
        ] {
            assert!(package.get(key).is_none(), "{pack} has {key}");
        }
        let mut entries: Vec<String> = fs::read_dir(pack_dir(id))
            .unwrap_or_else(|e| panic!("{pack}: {e}"))
            .filter_map(Result::ok)
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        entries.sort();
        assert_eq!(entries, ["SKILL.md", "package.json"], "{pack}");
    }
}

#[test]
fn each_host_skill_documents_every_export() {
    let catalog = shipped_catalog();
    for id in shipped_host_ids() {
        let spec = spec_of(id);
        let pack = spec.pack_name;
        let text = read(&pack_dir(id).join("SKILL.md"));
        assert!(
            (text.len() as u64) < SKILL_BYTES,
            "{pack}: {} bytes",
            text.len()
        );

        let skill = catalog
            .pack_skill(pack)
            .unwrap_or_else(|| panic!("no skill for {pack}"))
            .skill;
        assert_eq!(skill.name, format!("sandbox-{id}"));
        assert!(!skill.description.contains('\n'), "{pack}");
        assert!(
            skill.description.chars().count() <= 160,
            "{pack}: the description is the prompt-tier line"
        );
        assert!(skill.body.starts_with("# "), "{pack}: {}", skill.body);
        assert!(
            skill.body.contains(&format!(
                "Specifier: `{pack}`. Import it at the top of the body."
            )),
            "{pack}"
        );
        // Both import forms are shown: named exports and the default namespace object.
        assert!(
            skill.body.contains(&format!(
                "import {{ {} }} from \"{pack}\";",
                spec.exports.join(", ")
            )),
            "{pack}: the named import"
        );
        assert!(
            skill.body.lines().any(|l| l.starts_with("import ")
                && !l.contains('{')
                && l.contains(&format!("from \"{pack}\";"))),
            "{pack}: the default import"
        );

        let headings: Vec<&str> = text.lines().filter_map(|l| l.strip_prefix("## ")).collect();
        assert_eq!(
            headings.len(),
            spec.exports.len() + 1,
            "{pack}: one section per export, then Gotchas: {headings:?}"
        );
        for (export, heading) in spec.exports.iter().zip(&headings) {
            let prefix = format!("{export} — ");
            assert!(
                heading.starts_with(&prefix),
                "{pack}: `## {prefix}...` in registry order: {headings:?}"
            );
            let section = skill
                .sections
                .get(&heading.to_lowercase())
                .unwrap_or_else(|| panic!("{pack}: no parsed section {heading:?}"));
            assert_eq!(
                section.matches("```js").count(),
                1,
                "{pack}: one example in {heading:?}"
            );
            assert!(
                section.contains(&format!("await {export}(")),
                "{pack}: the example awaits {export}"
            );
        }
        assert_eq!(headings.last(), Some(&"Gotchas"), "{pack}");
        let gotchas = skill
            .sections
            .get("gotchas")
            .unwrap_or_else(|| panic!("{pack}: no Gotchas"));
        assert!(gotchas.contains("async"), "{pack}");
        assert!(
            gotchas.contains("5 MiB") || gotchas.contains("10 MiB"),
            "{pack}: the input cap"
        );
    }
    let gotchas = |id: &str| {
        catalog
            .pack_skill(spec_of(id).pack_name)
            .and_then(|d| d.skill.sections.get("gotchas").cloned())
            .unwrap_or_default()
    };
    assert!(gotchas("zip").contains("50 MiB"));
    assert!(gotchas("zip").contains("52428800"));
    assert!(gotchas("xlsx").contains("64 sheets") && gotchas("xlsx").contains("250,000 cells"));
    assert!(gotchas("html").contains("1000") && gotchas("html").contains("1024 deep"));
    assert!(
        gotchas("ocr").contains("20,000 words") && gotchas("ocr").contains("40,000,000 pixels")
    );
}

// ---------------------------------------------------------------------------------------------
// Forged host entries.

fn write_file(path: &Path, text: &str) {
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).unwrap_or_else(|e| panic!("creating {parent:?}: {e}"));
    }
    fs::write(path, text).unwrap_or_else(|e| panic!("writing {path:?}: {e}"));
}

/// A pack that is valid in every respect but its one host entry.
fn write_forged_pack(root: &Path, name: &str, host: &str) {
    let package = json!({
        "name": name,
        "version": "1.0.0",
        "keywords": ["nodetool-sandbox-pack"],
        "nodetool": {
            "apiVersion": 1,
            "sandboxModules": [{ "name": ".", "kind": "host", "host": host }]
        }
    });
    let text = serde_json::to_string_pretty(&package).unwrap_or_else(|e| panic!("{e}"));
    write_file(&root.join(name).join("package.json"), &text);
    write_file(
        &root.join(name).join("SKILL.md"),
        "---\nname: forged\ndescription: Claims a host module.\n---\n# Forged\n\nNothing here.\n",
    );
}

fn only_status<'a>(catalog: &'a DiscoveredCatalog, pack: &str) -> &'a Status {
    let statuses: Vec<&Status> = catalog
        .diagnostics()
        .iter()
        .filter(|s| s.pack_name == pack)
        .collect();
    match statuses.as_slice() {
        [status] => status,
        _ => panic!("{pack}: exactly one diagnostic: {statuses:#?}"),
    }
}

#[test]
fn forged_host_entries_are_refused_at_discovery() {
    for kind in [RootKind::Installed, RootKind::Shipped] {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("a temp dir: {e}"));
        write_forged_pack(dir.path(), "@evil/x", "csv");
        write_forged_pack(dir.path(), "@acme/invented", "shell");
        let forged = SearchRoot {
            path: dir.path().to_path_buf(),
            kind,
            label: "forged".into(),
        };
        // Searched ahead of the shipped root, as an install root is.
        let catalog = discover(&[forged, shipped_root()]);

        let foreign = only_status(&catalog, "@evil/x");
        assert_eq!(foreign.code, StatusCode::HostModuleForeign, "{foreign:#?}");
        assert_eq!(foreign.code.as_str(), "host-module-foreign");
        assert_eq!(foreign.status, StatusLevel::Error);
        assert!(
            foreign
                .message
                .contains("belongs to @nodetool-ai/sandbox-csv"),
            "{foreign:#?}"
        );

        let unknown = only_status(&catalog, "@acme/invented");
        assert_eq!(unknown.code, StatusCode::HostModuleUnknown, "{unknown:#?}");
        assert_eq!(unknown.code.as_str(), "host-module-unknown");
        assert_eq!(unknown.status, StatusLevel::Error);
        assert!(
            unknown
                .message
                .contains("is not a host module NodeTool implements"),
            "{unknown:#?}"
        );

        // Neither forged pack is offered, and neither message leaks the temp path.
        for status in [foreign, unknown] {
            assert!(
                !status
                    .message
                    .contains(dir.path().to_string_lossy().as_ref()),
                "{status:#?}"
            );
        }
        assert!(
            catalog
                .summaries()
                .iter()
                .all(|s| s.pack_name != "@evil/x" && s.pack_name != "@acme/invented"),
            "{:#?}",
            catalog.summaries()
        );
        let resolution = catalog.resolve_for_execution(&[
            Declaration::of("@evil/x"),
            Declaration::of("@acme/invented"),
            Declaration::of("@nodetool-ai/sandbox-csv"),
        ]);
        let mounted: Vec<(&str, &ResolvedKind)> = resolution
            .modules
            .iter()
            .map(|m| (m.specifier.as_str(), &m.kind))
            .collect();
        assert_eq!(
            mounted,
            [(
                "@nodetool-ai/sandbox-csv",
                &ResolvedKind::Host {
                    host_id: "csv".into()
                }
            )],
            "only the genuine pack mounts"
        );
    }
}
