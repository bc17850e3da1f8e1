//! Compile-on-first-use: a shipped guest library pack a body imports is compiled when nothing
//! compiled it yet, so `nodetool run` and `POST /api/run` give the same answer for the same
//! body (the first one waits for the compile; every later one hits the cache).
//!
//! Only shipped packs are compiled this way: their npm libraries come from the project's own
//! lockfile. An installed pack's npm entries are compiled when it is installed, or by
//! `nodetool packs compile`.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use nodetool_compiler::{Cache, Compiler, NpmEntry, Report, Stage, npm_entries};
use nodetool_discovery::SearchRoot;
use nodetool_protocol::catalog::StatusCode;
use nodetool_runtime::SandboxModuleCatalog;

/// What a first-use compile tells its caller as it goes.
pub enum FirstUseEvent<'a> {
    /// `entry` starts compiling.
    Compiling(&'a NpmEntry),
    /// `entry` reached `stage`.
    Stage(&'a NpmEntry, Stage),
    /// `entry` finished with `report`, after `elapsed`.
    Done(&'a NpmEntry, &'a Report, Duration),
    /// The compiler could not be set up (its message).
    Failed(String),
}

/// The shipped npm entries `code` imports that `catalog` reports as `pending-compile`.
pub fn pending_entries(
    code: &str,
    catalog: &dyn SandboxModuleCatalog,
    roots: &[SearchRoot],
) -> Vec<NpmEntry> {
    let Ok(imports) = nodetool_guest::body_imports(code) else {
        return Vec::new();
    };
    let imported: BTreeSet<&str> = imports.iter().map(|i| i.specifier.as_str()).collect();
    let pending: BTreeSet<&str> = catalog
        .diagnostics()
        .iter()
        .filter(|s| s.code == StatusCode::PendingCompile)
        .filter_map(|s| s.specifier.as_deref())
        .filter(|s| imported.contains(s))
        .collect();
    if pending.is_empty() {
        return Vec::new();
    }
    npm_entries(roots)
        .into_iter()
        .filter(|e| e.shipped && pending.contains(e.specifier.as_str()))
        .collect()
}

/// Compiles `entries` into `cache`, telling `events` about each. Returns whether any outcome
/// was stored (an admission or a refusal, which the catalog then names instead of
/// `pending-compile`), so the caller discovers again.
pub fn compile_entries(
    entries: &[NpmEntry],
    cache: &Cache,
    events: &mut dyn FnMut(FirstUseEvent<'_>),
) -> bool {
    if entries.is_empty() {
        return false;
    }
    let compiler = match Compiler::new(cache.clone()) {
        Ok(c) => c,
        Err(e) => {
            events(FirstUseEvent::Failed(e));
            return false;
        }
    };
    let mut stored = false;
    for entry in entries {
        events(FirstUseEvent::Compiling(entry));
        let started = Instant::now();
        let report = compiler.compile(&entry.request(), &mut |stage| {
            events(FirstUseEvent::Stage(entry, stage));
        });
        events(FirstUseEvent::Done(entry, &report, started.elapsed()));
        stored |= report.store_error.is_none();
    }
    stored
}
