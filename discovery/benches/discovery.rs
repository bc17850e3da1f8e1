//! `cargo xtask bench discovery`: discovery and resolution cost on generated packs.
//!
//! Generates 200 packs (5 authored JS modules sharing one internal helper, plus one scalar WASM
//! module and a SKILL.md each) in a temporary node_modules root, then reports the median wall
//! time of `discover_catalog` over it, and the median cost of resolving one declaration in
//! catalogs of 20 and 2,000 packs (which should be the same: resolution is an index lookup).

use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};

use nodetool_discovery::{DiscoveryOptions, RootKind, SearchRoot, discover_catalog};
use nodetool_protocol::catalog::Declaration;
use nodetool_runtime::{NoCompiledModules, SandboxModuleCatalog};

/// `add(i32, i32) -> i32` with one memory of 1..2 pages, hand-assembled.
const ADD_WASM: &[u8] = &[
    0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, // magic, version
    0x01, 0x07, 0x01, 0x60, 0x02, 0x7f, 0x7f, 0x01, 0x7f, // type: (i32, i32) -> i32
    0x03, 0x02, 0x01, 0x00, // function 0 has type 0
    0x05, 0x04, 0x01, 0x01, 0x01, 0x02, // memory min 1 max 2
    0x07, 0x07, 0x01, 0x03, b'a', b'd', b'd', 0x00, 0x00, // export "add" = func 0
    0x0a, 0x09, 0x01, 0x07, 0x00, 0x20, 0x00, 0x20, 0x01, 0x6a, 0x0b, // local.get 0 + 1
];

fn write(path: &Path, contents: &[u8]) {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .unwrap_or_else(|e| panic!("create {}: {e}", parent.display()));
    }
    std::fs::write(path, contents).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
}

fn generate(root: &Path, packs: usize) {
    for p in 0..packs {
        let dir = root.join("@bench").join(format!("pack-{p:04}"));
        let mut modules = Vec::new();
        for m in 0..5 {
            let body = format!(
                "import {{ clamp }} from './internal/util.js';\n\
                 /** Module {m} of pack {p}. */\n\
                 export function f{m}(x) {{ return clamp(x * {m} + {p}, 0, 1000); }}\n\
                 export const table{m} = [{}];\n",
                (0..200)
                    .map(|i| i.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            write(&dir.join(format!("sandbox/m{m}.js")), body.as_bytes());
            modules.push(format!(
                r#"{{ "name": "m{m}", "kind": "js", "file": "sandbox/m{m}.js" }}"#
            ));
        }
        write(
            &dir.join("sandbox/internal/util.js"),
            b"export function clamp(x, lo, hi) { return Math.min(hi, Math.max(lo, x)); }\n",
        );
        write(&dir.join("sandbox/add.wasm"), ADD_WASM);
        modules.push(r#"{ "name": "add", "kind": "wasm", "file": "sandbox/add.wasm", "memoryPagesMax": 2, "exports": ["add"] }"#.into());
        let manifest = format!(
            r#"{{ "name": "@bench/pack-{p:04}", "version": "1.0.{p}", "nodetool": {{ "apiVersion": 1, "internal": ["sandbox/internal/util.js"], "sandboxModules": [{}] }} }}"#,
            modules.join(", ")
        );
        write(&dir.join("package.json"), manifest.as_bytes());
        write(&dir.join("SKILL.md"), format!("---\nname: bench-{p}\ndescription: Bench pack {p}.\n---\n# Bench\n\n## m0\nuse it\n").as_bytes());
    }
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn catalog_of(root: &Path) -> nodetool_discovery::DiscoveredCatalog {
    let trusted = BTreeSet::new();
    let roots = [SearchRoot {
        path: root.to_path_buf(),
        kind: RootKind::Installed,
        label: "bench".into(),
    }];
    discover_catalog(
        &roots,
        &DiscoveryOptions {
            compiled: &NoCompiledModules,
            trusted_packs: &trusted,
        },
    )
}

fn resolve_cost(catalog: &dyn SandboxModuleCatalog, specifier: &str) -> Duration {
    let declaration = [Declaration::of(specifier)];
    let rounds = 20;
    let per_round = 2_000;
    let samples = (0..rounds)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..per_round {
                let r = catalog.resolve_for_execution(std::hint::black_box(&declaration));
                assert_eq!(r.modules.len(), 1, "{:?}", r.statuses);
            }
            start.elapsed() / per_round
        })
        .collect();
    median(samples)
}

fn main() {
    let iterations: usize = std::env::var("BENCH_ITERATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(15);
    let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));

    let root200 = tmp.path().join("200");
    generate(&root200, 200);
    let mut samples = Vec::new();
    let mut modules = 0;
    for _ in 0..iterations {
        let start = Instant::now();
        let catalog = catalog_of(&root200);
        samples.push(start.elapsed());
        modules = catalog.summaries().len();
        assert!(
            catalog
                .diagnostics()
                .iter()
                .all(|s| s.status != nodetool_protocol::catalog::StatusLevel::Error),
            "{:?}",
            catalog.diagnostics()
        );
    }
    let min = samples.iter().min().copied().unwrap_or_default();
    println!(
        "discover_catalog, 200 packs ({modules} modules, 1,400 files): median {:.1} ms, min {:.1} ms over {iterations} runs",
        median(samples).as_secs_f64() * 1e3,
        min.as_secs_f64() * 1e3
    );

    let root20 = tmp.path().join("20");
    generate(&root20, 20);
    let root2000 = tmp.path().join("2000");
    generate(&root2000, 2000);
    let small = catalog_of(&root20);
    let large = catalog_of(&root2000);
    let spec = "@bench/pack-0007/m3";
    let cost20 = resolve_cost(&small, spec);
    let cost2000 = resolve_cost(&large, spec);
    println!(
        "resolve one declaration: {:.2} µs with 20 packs, {:.2} µs with 2,000 packs (ratio {:.2})",
        cost20.as_secs_f64() * 1e6,
        cost2000.as_secs_f64() * 1e6,
        cost2000.as_secs_f64() / cost20.as_secs_f64()
    );
}
