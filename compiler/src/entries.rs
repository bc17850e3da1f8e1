//! The npm entries on a search path: every config-only `{"kind": "js", "npm": ...}` module of
//! every pack discovery finds, with the pack directory it resolves from.
//!
//! Discovery is the one reader of packs, so the entries are collected by running it with a
//! lookup that records what it is asked (and answers "not compiled"); the specifiers come from
//! the pack's own manifest. A shipped pack shadowed by an installed one of the same name is
//! left out, as the catalog leaves it out.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use nodetool_discovery::{DiscoveryOptions, RootKind, SearchRoot, discover_catalog};
use nodetool_protocol::manifest::{ModuleSource, parse_manifest};
use nodetool_protocol::names::normalize_specifier;
use nodetool_runtime::{CompileRequest, CompiledLookup, CompiledNpmModule};

/// One npm entry of one pack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NpmEntry {
    /// The pack's package name.
    pub pack_name: String,
    /// The specifier user code imports.
    pub specifier: String,
    /// The npm dependency the entry names.
    pub npm: String,
    /// The pack directory (canonical).
    pub pack_dir: PathBuf,
    /// Whether the pack comes from the shipped root.
    pub shipped: bool,
}

impl NpmEntry {
    /// The request the compiler and the cache take for this entry.
    pub fn request(&self) -> CompileRequest<'_> {
        CompileRequest {
            pack_name: &self.pack_name,
            pack_dir: &self.pack_dir,
            npm: &self.npm,
        }
    }
}

#[derive(Default)]
struct Recorder {
    asked: Mutex<BTreeSet<(String, PathBuf, String)>>,
}

impl CompiledLookup for Recorder {
    fn lookup(&self, request: &CompileRequest<'_>) -> Option<CompiledNpmModule> {
        self.asked
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert((
                request.pack_name.to_string(),
                request.pack_dir.to_path_buf(),
                request.npm.to_string(),
            ));
        None
    }
}

/// Every npm entry under `roots`, sorted by pack name and specifier.
pub fn npm_entries(roots: &[SearchRoot]) -> Vec<NpmEntry> {
    let recorder = Recorder::default();
    let trusted = BTreeSet::new();
    let _ = discover_catalog(
        roots,
        &DiscoveryOptions {
            compiled: &recorder,
            trusted_packs: &trusted,
        },
    );
    let asked = std::mem::take(
        &mut *recorder
            .asked
            .lock()
            .unwrap_or_else(PoisonError::into_inner),
    );
    let canonical_roots: Vec<(PathBuf, RootKind)> = roots
        .iter()
        .filter_map(|r| Some((std::fs::canonicalize(&r.path).ok()?, r.kind)))
        .collect();
    let mut entries: Vec<NpmEntry> = Vec::new();
    for (pack_name, pack_dir, npm) in asked {
        let shipped = canonical_roots
            .iter()
            .find(|(root, _)| pack_dir.starts_with(root))
            .is_some_and(|(_, kind)| *kind == RootKind::Shipped);
        for specifier in specifiers_for(&pack_dir, &pack_name, &npm) {
            entries.push(NpmEntry {
                pack_name: pack_name.clone(),
                specifier,
                npm: npm.clone(),
                pack_dir: pack_dir.clone(),
                shipped,
            });
        }
    }
    let installed: BTreeSet<String> = entries
        .iter()
        .filter(|e| !e.shipped)
        .map(|e| e.pack_name.clone())
        .collect();
    entries.retain(|e| !(e.shipped && installed.contains(&e.pack_name)));
    entries.sort_by(|a, b| {
        (&a.pack_name, &a.specifier, &a.pack_dir).cmp(&(&b.pack_name, &b.specifier, &b.pack_dir))
    });
    entries
}

/// The specifiers of the pack's modules that name `npm` (read from its manifest).
fn specifiers_for(pack_dir: &Path, pack_name: &str, npm: &str) -> Vec<String> {
    let Ok(text) = std::fs::read(pack_dir.join("package.json")) else {
        return Vec::new();
    };
    let Ok(package) = serde_json::from_slice::<serde_json::Value>(&text) else {
        return Vec::new();
    };
    let Some(Ok(Some(manifest))) = package.get("nodetool").map(parse_manifest) else {
        return Vec::new();
    };
    manifest
        .modules
        .iter()
        .filter(|m| matches!(&m.source, ModuleSource::JsNpm { npm: n } if n == npm))
        .filter_map(|m| normalize_specifier(pack_name, &m.name).ok())
        .collect()
}
