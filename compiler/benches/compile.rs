//! `cargo xtask bench compile`: what compiling an npm package costs.
//!
//! * Cold compiles of js-yaml, date-fns (its whole main entry, about 300 files) and marked, as
//!   the shipped guest packs resolve them from `packs/node_modules` (`npm ci --ignore-scripts
//!   --prefix packs` first): every run gets a fresh compiler (so a fresh guest with an empty
//!   bytecode cache) and an empty cache directory. The bundle stage alone is what esbuild's
//!   `node bundle.mjs` in the peer bench measures on the same package versions and options;
//!   the whole compile adds the scan, the probe and the cache write.
//! * The warm hit: the same compile once the cache holds it, re-hash of every recorded input
//!   included, and discovery's synchronous lookup.
//!
//! With `NODETOOL_PEER_BENCH=<dir>` (a copy of the peer bench with its node_modules), esbuild's
//! figures are measured in the same invocation and printed beside ours.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use nodetool_compiler::{Cache, Compiler, Outcome, Report, Stage};
use nodetool_runtime::{CompileRequest, CompiledLookup};

const PACKAGES: [(&str, &str); 3] = [
    ("sandbox-yaml", "js-yaml"),
    ("sandbox-dates", "date-fns"),
    ("sandbox-markdown", "marked"),
];
const COLD_RUNS: usize = 5;
const WARM_RUNS: usize = 200;

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v.get(v.len() / 2).copied().unwrap_or_default()
}

fn percentile(mut v: Vec<Duration>, p: usize) -> Duration {
    v.sort();
    v.get((v.len() * p / 100).min(v.len().saturating_sub(1)))
        .copied()
        .unwrap_or_default()
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(|| PathBuf::from(".."), Path::to_path_buf)
}

fn compile(compiler: &Compiler, pack_dir: &Path, npm: &str) -> Report {
    let report = compiler.compile(
        &CompileRequest {
            pack_name: "bench",
            pack_dir,
            npm,
        },
        &mut |_| {},
    );
    if report.outcome == Outcome::Skipped {
        panic!("{npm} was skipped: {:?}", report.message());
    }
    report
}

/// esbuild's figures from the peer bench: (first build, median, output bytes) per package.
fn esbuild_figures() -> Option<serde_json::Value> {
    let dir = std::env::var_os("NODETOOL_PEER_BENCH")?;
    let output = Command::new("node")
        .arg("bundle.mjs")
        .current_dir(&dir)
        .output()
        .map_err(|e| eprintln!("cannot run node bundle.mjs in the peer bench: {e}"))
        .ok()?;
    let text = String::from_utf8_lossy(&output.stdout);
    let start = text.find('{')?;
    serde_json::from_str::<serde_json::Value>(&text[start..])
        .map_err(|e| eprintln!("the peer bench printed no JSON: {e}"))
        .ok()
        .map(|v| v["results"].clone())
}

fn main() {
    let packs = workspace().join("packs");
    for (_, npm) in PACKAGES {
        if !packs.join("node_modules").join(npm).is_dir() {
            eprintln!(
                "packs/node_modules/{npm} is missing: run `npm ci --ignore-scripts --prefix packs` first"
            );
            std::process::exit(2);
        }
    }
    let esbuild = esbuild_figures();
    println!(
        "cold compile ({COLD_RUNS} runs after one first run, fresh compiler and empty cache each; ms)"
    );
    println!(
        "{:<10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>10} | {:>9} {:>9} {:>10}",
        "package",
        "bundle1st",
        "bundle",
        "scan",
        "probe",
        "store",
        "total",
        "bytes",
        "esbuild1st",
        "esbuild",
        "esb bytes"
    );
    for (pack, npm) in PACKAGES {
        let pack_dir = packs.join("@nodetool-ai").join(pack);
        let mut reports = Vec::new();
        for _ in 0..=COLD_RUNS {
            let cache_dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
            let compiler =
                Compiler::new(Cache::new(cache_dir.path())).unwrap_or_else(|e| panic!("{e}"));
            reports.push(compile(&compiler, &pack_dir, npm));
        }
        let first = reports.remove(0);
        let stage = |s: Stage| median(reports.iter().filter_map(|r| r.time_of(s)).collect());
        let total = median(reports.iter().map(Report::total_time).collect());
        let (e_first, e_median, e_bytes) = esbuild
            .as_ref()
            .map(|e| {
                (
                    e[npm]["first_build_ms"].as_f64().unwrap_or(f64::NAN),
                    e[npm]["median_ms"].as_f64().unwrap_or(f64::NAN),
                    e[npm]["output_bytes"].as_u64().unwrap_or(0),
                )
            })
            .unwrap_or((f64::NAN, f64::NAN, 0));
        println!(
            "{:<10} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>10} | {:>9.1} {:>9.1} {:>10}",
            npm,
            ms(first.time_of(Stage::Bundle).unwrap_or_default()),
            ms(stage(Stage::Bundle)),
            ms(stage(Stage::Scan)),
            ms(stage(Stage::Probe)),
            ms(stage(Stage::Store)),
            ms(total),
            first.bytes().unwrap_or(0),
            e_first,
            e_median,
            e_bytes,
        );
    }

    println!("\nwarm cache hit ({WARM_RUNS} runs; re-hash of every recorded input included; ms)");
    println!(
        "{:<10} {:>8} {:>10} {:>10} {:>10} {:>10}",
        "package", "inputs", "compile", "p95", "lookup", "p95"
    );
    let cache_dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let compiler = Compiler::new(Cache::new(cache_dir.path())).unwrap_or_else(|e| panic!("{e}"));
    for (pack, npm) in PACKAGES {
        let pack_dir = packs.join("@nodetool-ai").join(pack);
        compile(&compiler, &pack_dir, npm);
        let mut hits = Vec::new();
        let mut lookups = Vec::new();
        for _ in 0..WARM_RUNS {
            let t = Instant::now();
            let report = compile(&compiler, &pack_dir, npm);
            hits.push(t.elapsed());
            assert_eq!(report.outcome, Outcome::Cached);
            let t = Instant::now();
            let found = compiler.cache().lookup(&CompileRequest {
                pack_name: "bench",
                pack_dir: &pack_dir,
                npm,
            });
            lookups.push(t.elapsed());
            assert!(found.is_some());
        }
        let inputs = input_count(cache_dir.path(), npm);
        println!(
            "{:<10} {:>8} {:>10.2} {:>10.2} {:>10.2} {:>10.2}",
            npm,
            inputs,
            ms(median(hits.clone())),
            ms(percentile(hits, 95)),
            ms(median(lookups.clone())),
            ms(percentile(lookups, 95)),
        );
    }
}

/// How many files the cache entry for `npm` records (inputs plus resolution records).
fn input_count(cache: &Path, npm: &str) -> usize {
    let Ok(entries) = std::fs::read_dir(cache.join("entries")) else {
        return 0;
    };
    for entry in entries.filter_map(Result::ok) {
        let Ok(text) = std::fs::read_to_string(entry.path()) else {
            continue;
        };
        let Ok(json) = serde_json::from_str::<serde_json::Value>(&text) else {
            continue;
        };
        if json["npmName"] == npm {
            let count = |k: &str| json[k].as_array().map_or(0, Vec::len);
            return count("inputs") + count("resolution");
        }
    }
    0
}
