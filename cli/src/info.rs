//! `nodetool info [--json]` and the `--version` text: what this binary is, which engines it
//! carries, and every place it reads or writes. Nothing here writes anything.

use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use nodetool_frontend::search::{Environment, PackSources, RootEntry, RootLabels};
use serde_json::{Value as Json, json};

/// The quickjs-ng release each rquickjs-sys release vendors (its `quickjs/quickjs.h`,
/// `QJS_VERSION_*`): rquickjs offers no safe way to ask the engine. A test fails when the
/// locked rquickjs-sys is missing here.
const QUICKJS_NG: &[(&str, &str)] = &[("0.14.0", "0.16.2")];

/// The engine versions this binary was built with.
pub(crate) struct Engines {
    /// `quickjs-ng 0.16.2`.
    pub quickjs: String,
    /// The rquickjs-sys crate that builds it.
    pub rquickjs_sys: &'static str,
    /// The rolldown the compiler bundles with (part of every cache key).
    pub rolldown: &'static str,
    /// The wasmtime that runs WASM packs.
    pub wasmtime: &'static str,
    /// The compiler's contract version (part of every cache key).
    pub compiler_contract: &'static str,
}

/// The quickjs-ng release an rquickjs-sys release vendors.
pub(crate) fn quickjs_ng(rquickjs_sys: &str) -> Option<&'static str> {
    QUICKJS_NG
        .iter()
        .find(|(sys, _)| *sys == rquickjs_sys)
        .map(|(_, ng)| *ng)
}

pub(crate) fn engines() -> Engines {
    let rquickjs_sys = env!("NODETOOL_LOCKED_RQUICKJS_SYS");
    Engines {
        quickjs: match quickjs_ng(rquickjs_sys) {
            Some(ng) => format!("quickjs-ng {ng}"),
            None => "quickjs-ng (release unknown)".into(),
        },
        rquickjs_sys,
        rolldown: nodetool_compiler::ROLLDOWN_VERSION,
        wasmtime: env!("NODETOOL_LOCKED_WASMTIME"),
        compiler_contract: nodetool_compiler::COMPILER_VERSION,
    }
}

/// What `nodetool --version` prints after the name.
pub(crate) fn version_text() -> &'static str {
    static TEXT: LazyLock<String> = LazyLock::new(|| {
        let e = engines();
        format!(
            "{} (QuickJS {}, rolldown {}, wasmtime {}, compiler contract {})",
            env!("CARGO_PKG_VERSION"),
            e.quickjs,
            e.rolldown,
            e.wasmtime,
            e.compiler_contract
        )
    });
    &TEXT
}

/// `nodetool info [--json]`.
pub(crate) fn info(packs: Vec<PathBuf>, env: &Environment, json: bool) {
    let sources = PackSources {
        explicit: packs,
        env: env.clone(),
        labels: RootLabels::Opaque,
    };
    let search_path = sources.search_path();
    let dirs = env.dirs();
    let runner = nodetool_server::web_dir(None, std::env::var_os("NODETOOL_WEB_DIR"));
    let runner_built = runner.join("runner.js").is_file();
    let ocr = nodetool_host_modules::library_status("ocr").unwrap_or(Ok(String::new()));
    let engines = engines();
    if json {
        let root = |r: &RootEntry| json!({ "label": r.label, "origin": r.origin, "path": r.path, "present": r.present });
        let by_label = |label: &str| {
            search_path
                .iter()
                .find(|r| r.label == label)
                .map_or(Json::Null, root)
        };
        let dirs_json = match &dirs {
            Ok(d) => json!({
                "config": d.config.join("nodetool"),
                "data": d.data.join("nodetool"),
                "cache": d.cache.join("nodetool"),
                "allowlist": d.config.join("nodetool/packs.json"),
            }),
            Err(e) => json!({ "error": e.to_string() }),
        };
        let ocr_json = match &ocr {
            Ok(library) => json!({ "available": true, "library": library }),
            Err(message) => json!({ "available": false, "message": message }),
        };
        let answer = json!({
            "version": env!("CARGO_PKG_VERSION"),
            "engines": {
                "quickjs": engines.quickjs,
                "rquickjsSys": engines.rquickjs_sys,
                "rolldown": engines.rolldown,
                "wasmtime": engines.wasmtime,
                "compilerContract": engines.compiler_contract,
            },
            "searchPath": search_path.iter().map(root).collect::<Vec<_>>(),
            "installedRoot": by_label("installed packs"),
            "shippedRoot": by_label("shipped packs"),
            "dirs": dirs_json,
            "browserRunner": { "dir": runner, "built": runner_built },
            "ocr": ocr_json,
        });
        outln!("{answer}");
        return;
    }
    outln!("nodetool {}", env!("CARGO_PKG_VERSION"));
    outln!(
        "  QuickJS            {} (rquickjs-sys {})",
        engines.quickjs,
        engines.rquickjs_sys
    );
    outln!("  rolldown           {}", engines.rolldown);
    outln!("  wasmtime           {}", engines.wasmtime);
    outln!("  compiler contract  {}", engines.compiler_contract);
    outln!();
    outln!("pack search path, in order:");
    for r in &search_path {
        let path = r
            .path
            .as_deref()
            .map_or_else(|| "(no data directory)".into(), shown);
        let state = if r.present { "" } else { "; not there yet" };
        outln!("  {:<24} {path} [{}{state}]", r.label, r.origin);
    }
    outln!();
    outln!("directories:");
    match &dirs {
        Ok(d) => {
            outln!(
                "  config                   {}",
                shown(&d.config.join("nodetool"))
            );
            outln!(
                "  data                     {}",
                shown(&d.data.join("nodetool"))
            );
            outln!(
                "  cache                    {}",
                shown(&d.cache.join("nodetool"))
            );
        }
        Err(e) => outln!("  error: {e}"),
    }
    outln!();
    outln!(
        "browser runner             {} ({})",
        shown(&runner),
        if runner_built { "built" } else { "not built" }
    );
    match &ocr {
        Ok(library) => outln!("OCR                        available: {library}"),
        Err(message) => outln!("OCR                        unavailable: {message}"),
    }
}

fn shown(path: &Path) -> String {
    path.display().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_engine_versions_are_the_locked_ones() {
        let e = engines();
        assert_ne!(e.rquickjs_sys, "unknown", "Cargo.lock was not read");
        assert!(
            quickjs_ng(e.rquickjs_sys).is_some(),
            "rquickjs-sys {} is locked: add the quickjs-ng release it vendors (quickjs/quickjs.h, QJS_VERSION_*) to QUICKJS_NG",
            e.rquickjs_sys
        );
        assert_eq!(
            env!("NODETOOL_LOCKED_ROLLDOWN"),
            nodetool_compiler::ROLLDOWN_VERSION,
            "the compiler's ROLLDOWN_VERSION must be the locked rolldown"
        );
        assert!(e.wasmtime.starts_with("48."), "{}", e.wasmtime);
        assert_eq!(
            version_text(),
            format!(
                "{} (QuickJS quickjs-ng {}, rolldown {}, wasmtime {}, compiler contract {})",
                env!("CARGO_PKG_VERSION"),
                quickjs_ng(e.rquickjs_sys).unwrap_or_default(),
                e.rolldown,
                e.wasmtime,
                e.compiler_contract
            )
        );
    }
}
