//! `cargo xtask bench guest`: what one invocation costs.
//!
//! * a fresh runtime + context with the standard limits, a trivial body (`return 1 + 1`), the
//!   result read back, everything dropped — the whole `Sandbox::run`;
//! * the same with a body importing the js-yaml ESM bundle as a declared pack module and parsing
//!   a small document (the bundle is compiled once per process and loaded as bytecode into each
//!   fresh context; the body itself is compiled per run); the bundle's path comes from
//!   `NODETOOL_BENCH_JS_YAML` (xtask installs js-yaml from npm and sets it);
//! * peak engine memory of one such invocation, and throughput with two runs in parallel.

use std::sync::Arc;
use std::time::{Duration, Instant};

use nodetool_guest::{Capabilities, Dispatchers, RunLimits, RunRequest, Sandbox};
use nodetool_protocol::catalog::{
    FileContent, GraphFile, Resolution, ResolvedKind, ResolvedModule,
};
use nodetool_protocol::value::Value;

const YAML_BODY: &str = r#"import { load } from 'js-yaml';
const doc = "service:\n  name: peer-bench\n  version: 3\n  enabled: true\n  ratio: 0.75\n  tags: [fast, small, \"quoted tag\"]\n  owners:\n    - name: Alice\n      email: alice@example.com\n    - name: Bob\n      email: bob@example.com\nlimits:\n  memory_mb: 64\n  timeout_ms: 1000\ndescription: |\n  A small YAML document with a block scalar,\n  a flow sequence and nested mappings.\n";
return JSON.stringify(load(doc));
"#;

fn run(sandbox: &Sandbox, code: &str, resolution: &Resolution) -> Value {
    let outcome = sandbox.run(RunRequest {
        code,
        resolution,
        inputs: &Value::Null,
        limits: RunLimits::STANDARD,
        capabilities: Capabilities::default(),
        dispatchers: Dispatchers::default(),
        cancel: None,
    });
    outcome
        .result
        .unwrap_or_else(|e| panic!("bench run failed: {e}"))
}

struct Stats {
    median: Duration,
    p95: Duration,
    n: usize,
}

fn measure(budget: Duration, mut f: impl FnMut()) -> Stats {
    for _ in 0..50 {
        f();
    }
    let mut samples = Vec::new();
    let start = Instant::now();
    while start.elapsed() < budget || samples.len() < 100 {
        let t = Instant::now();
        f();
        samples.push(t.elapsed());
    }
    samples.sort();
    Stats {
        median: samples[samples.len() / 2],
        p95: samples[samples.len() * 95 / 100],
        n: samples.len(),
    }
}

fn show(what: &str, s: &Stats) {
    println!(
        "{what}: median {:.1} µs, p95 {:.1} µs, n={} ({:.0}/s at the median)",
        s.median.as_secs_f64() * 1e6,
        s.p95.as_secs_f64() * 1e6,
        s.n,
        1.0 / s.median.as_secs_f64()
    );
}

fn main() {
    let budget = Duration::from_secs(
        std::env::var("BENCH_SECONDS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(3),
    );
    // The floor: a runtime and a context with the sandbox's intrinsics, created and dropped,
    // nothing evaluated. Everything `Sandbox::run` adds is measured against this.
    show(
        "floor: runtime + context (sandbox intrinsics) created and dropped, nothing run",
        &measure(budget, || {
            use rquickjs::context::intrinsic as i;
            let runtime = rquickjs::Runtime::new().unwrap_or_else(|e| panic!("{e}"));
            let context = rquickjs::Context::custom::<(
                i::Date,
                i::RegExpCompiler,
                i::RegExp,
                i::Json,
                i::Proxy,
                i::MapSet,
                i::TypedArrays,
                i::Promise,
                i::WeakRef,
            )>(&runtime)
            .unwrap_or_else(|e| panic!("{e}"));
            drop(context);
            drop(runtime);
        }),
    );
    let sandbox = Sandbox::new();
    let empty = Resolution::default();
    assert_eq!(run(&sandbox, "return 1 + 1", &empty), Value::Number(2.0));
    show(
        "fresh runtime+context, `return 1 + 1`, result read, dropped",
        &measure(budget, || {
            run(&sandbox, "return 1 + 1", &empty);
        }),
    );

    let Ok(path) = std::env::var("NODETOOL_BENCH_JS_YAML") else {
        println!(
            "js-yaml import: skipped (set NODETOOL_BENCH_JS_YAML to js-yaml's dist/js-yaml.mjs; `cargo xtask bench guest` does)"
        );
        return;
    };
    let source = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let resolution = Resolution {
        modules: vec![ResolvedModule {
            specifier: "js-yaml".into(),
            pack_name: "js-yaml".into(),
            pack_version: None,
            content_digest: "a".repeat(64),
            module_id: "npm:js-yaml".into(),
            graph: vec![GraphFile {
                id: "npm:js-yaml".into(),
                internal: false,
                dependencies: vec![],
                content: FileContent::Js {
                    source: Arc::from(source.as_str()),
                },
            }],
            kind: ResolvedKind::Js,
        }],
        statuses: vec![],
    };
    let first = Instant::now();
    let parsed = run(&sandbox, YAML_BODY, &resolution);
    let first = first.elapsed();
    assert!(
        parsed
            .as_str()
            .is_some_and(|s| s.contains("\"name\":\"peer-bench\"")),
        "{parsed:?}"
    );
    println!(
        "js-yaml bundle: {} bytes; first run (compiles the bundle once): {:.1} ms",
        source.len(),
        first.as_secs_f64() * 1e3
    );
    show(
        "fresh runtime+context, import js-yaml (cached bytecode) + load() a 17-line document",
        &measure(budget, || {
            run(&sandbox, YAML_BODY, &resolution);
        }),
    );

    // Two runs at once, one per core: the cache is shared, runtimes are not.
    let parallel_start = Instant::now();
    let per_thread = 400;
    std::thread::scope(|scope| {
        for _ in 0..2 {
            let sandbox = sandbox.clone();
            let resolution = &resolution;
            scope.spawn(move || {
                for _ in 0..per_thread {
                    run(&sandbox, YAML_BODY, resolution);
                }
            });
        }
    });
    let wall = parallel_start.elapsed();
    println!(
        "two threads, js-yaml import + parse: {:.0} runs/s over {} runs",
        (2 * per_thread) as f64 / wall.as_secs_f64(),
        2 * per_thread
    );

    // Peak memory per concurrent invocation: the rise of the process's peak RSS (VmHWM) when 8
    // runs are in flight at once, divided by 8. Everything shared (code, the bytecode cache) is
    // already resident from the runs above, so the rise is what each live run adds.
    let peak_rss_kib = || -> u64 {
        std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("VmHWM:"))
                    .and_then(|l| l.split_whitespace().nth(1))
                    .and_then(|v| v.parse().ok())
            })
            .unwrap_or(0)
    };
    let before = peak_rss_kib();
    let concurrent = 8;
    let barrier = std::sync::Barrier::new(concurrent);
    std::thread::scope(|scope| {
        for _ in 0..concurrent {
            let sandbox = sandbox.clone();
            let resolution = &resolution;
            let barrier = &barrier;
            scope.spawn(move || {
                for _ in 0..20 {
                    barrier.wait();
                    run(&sandbox, YAML_BODY, resolution);
                }
            });
        }
    });
    let after = peak_rss_kib();
    println!(
        "peak memory per concurrent invocation (js-yaml body, {concurrent} in flight): {:.1} MiB (peak RSS {:.1} -> {:.1} MiB)",
        (after.saturating_sub(before)) as f64 / 1024.0 / concurrent as f64,
        before as f64 / 1024.0,
        after as f64 / 1024.0
    );
}
