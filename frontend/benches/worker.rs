//! `cargo xtask bench worker`: what running in a sandbox worker process costs, side by side
//! with running in process, in one window.
//!
//! * a trivial body (`return 1 + 1`) in process and through a one-worker pool (the order
//!   framed, sent over the pipe, run in a fresh runtime in the worker, the answer read back);
//! * a body importing the js-yaml bundle and parsing a small document, both ways (the pool
//!   sends the module once, then names it by key);
//! * a worker's respawn after a kill: a stuck body with a 1 ms deadline and no grace is killed,
//!   and the time until the replacement is ready is measured;
//! * an idle worker's resident memory.
//!
//! The worker program is `NODETOOL_BENCH_WORKER` (xtask builds the release `nodetool` and sets
//! it), js-yaml's bundle `NODETOOL_BENCH_JS_YAML`; `BENCH_SECONDS` sets each measurement's budget.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use nodetool_frontend::run::{BodyRun, Isolation, Runner};
use nodetool_frontend::worker::WorkerOptions;
use nodetool_guest::{Capabilities, RunLimits};
use nodetool_protocol::catalog::{
    FileContent, GraphFile, Resolution, ResolvedKind, ResolvedModule,
};
use nodetool_protocol::value::Value;

const YAML_BODY: &str = r#"import { load } from 'js-yaml';
const doc = "service:\n  name: peer-bench\n  version: 3\n  enabled: true\n  ratio: 0.75\n  tags: [fast, small, \"quoted tag\"]\n  owners:\n    - name: Alice\n      email: alice@example.com\n    - name: Bob\n      email: bob@example.com\nlimits:\n  memory_mb: 64\n  timeout_ms: 1000\ndescription: |\n  A small YAML document with a block scalar,\n  a flow sequence and nested mappings.\n";
return JSON.stringify(load(doc));
"#;

fn run(runner: &Runner, code: &str, resolution: &Resolution, limits: RunLimits) -> Value {
    let outcome = runner.run_resolved(
        resolution,
        BodyRun {
            code,
            inputs: &Value::Null,
            limits,
            capabilities: Capabilities::default(),
            cancel: None,
        },
    );
    outcome
        .result
        .unwrap_or_else(|e| panic!("bench run failed: {e}"))
}

fn median(budget: Duration, mut f: impl FnMut()) -> (Duration, Duration, usize) {
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
    (
        samples[samples.len() / 2],
        samples[samples.len() * 95 / 100],
        samples.len(),
    )
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// Measures `a` and `b` interleaved in rounds, so both see the same machine.
fn side_by_side(
    label: &str,
    names: (&str, &str),
    budget: Duration,
    mut a: impl FnMut(),
    mut b: impl FnMut(),
) {
    let rounds = 5;
    let mut am = Vec::new();
    let mut bm = Vec::new();
    for _ in 0..rounds {
        am.push(median(budget / rounds, &mut a));
        bm.push(median(budget / rounds, &mut b));
    }
    let pick = |v: &mut Vec<(Duration, Duration, usize)>| {
        v.sort();
        v[v.len() / 2]
    };
    let (a_med, a_p95, a_n) = pick(&mut am);
    let (b_med, b_p95, b_n) = pick(&mut bm);
    println!(
        "{label}: {} median {:.1} µs (p95 {:.1}, n={a_n}); {} median {:.1} µs (p95 {:.1}, n={b_n}); ratio {:.2}x",
        names.0,
        us(a_med),
        us(a_p95),
        names.1,
        us(b_med),
        us(b_p95),
        b_med.as_secs_f64() / a_med.as_secs_f64()
    );
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

fn main() {
    let budget = Duration::from_secs(
        std::env::var("BENCH_SECONDS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(5),
    );
    let Some(program) = std::env::var_os("NODETOOL_BENCH_WORKER").map(PathBuf::from) else {
        println!(
            "skipped: set NODETOOL_BENCH_WORKER to a release nodetool (`cargo xtask bench worker` does)"
        );
        return;
    };
    let in_process = Runner::in_process();
    let pool = Runner::start(Isolation::Workers(WorkerOptions::standard(
        program.clone(),
        1,
    )))
    .unwrap_or_else(|e| panic!("{e}"));
    let empty = Resolution::default();
    let limits = RunLimits::STANDARD;
    assert_eq!(
        run(&pool, "return 1 + 1", &empty, limits),
        Value::Number(2.0)
    );
    side_by_side(
        "trivial run (`return 1 + 1`)",
        ("in process", "worker pool"),
        budget,
        || {
            run(&in_process, "return 1 + 1", &empty, limits);
        },
        || {
            run(&pool, "return 1 + 1", &empty, limits);
        },
    );

    if let Ok(path) = std::env::var("NODETOOL_BENCH_JS_YAML") {
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
        side_by_side(
            "js-yaml import + load() of a 17-line document",
            ("in process", "worker pool"),
            budget,
            || {
                run(&in_process, YAML_BODY, &resolution, limits);
            },
            || {
                run(&pool, YAML_BODY, &resolution, limits);
            },
        );
    } else {
        println!("js-yaml: skipped (set NODETOOL_BENCH_JS_YAML)");
    }

    // What confinement (the seccomp filter on every system call, Landlock) costs a run: the
    // same pool with and without it.
    let mut unconfined_options = WorkerOptions::standard(program.clone(), 1);
    unconfined_options.confine = false;
    let unconfined =
        Runner::start(Isolation::Workers(unconfined_options)).unwrap_or_else(|e| panic!("{e}"));
    side_by_side(
        "trivial run (`return 1 + 1`), confinement",
        ("unconfined worker", "confined worker"),
        budget,
        || {
            run(&unconfined, "return 1 + 1", &empty, limits);
        },
        || {
            run(&pool, "return 1 + 1", &empty, limits);
        },
    );
    drop(unconfined);

    // Respawn after a kill: a stuck body, 1 ms deadline, no grace.
    let mut options = WorkerOptions::standard(program, 1);
    options.grace = Duration::ZERO;
    let killer = Runner::start(Isolation::Workers(options)).unwrap_or_else(|e| panic!("{e}"));
    let Some(killer_pool) = killer.pool() else {
        panic!("a worker runner has a pool");
    };
    let stuck_limits = RunLimits {
        timeout: Duration::from_millis(1),
        ..RunLimits::STANDARD
    };
    let mut respawns = Vec::new();
    for _ in 0..30 {
        let outcome = killer.run_resolved(
            &empty,
            BodyRun {
                code: "const a = []; a.length = 2 ** 32 - 1; return a.reverse().length;",
                inputs: &Value::Null,
                limits: stuck_limits,
                capabilities: Capabilities::default(),
                cancel: None,
            },
        );
        assert!(outcome.result.is_err());
        let killed = Instant::now();
        while killer_pool.ready() == 0 {
            std::thread::sleep(Duration::from_micros(100));
        }
        respawns.push(killed.elapsed());
    }
    respawns.sort();
    println!(
        "worker respawn after a kill (until the replacement is ready): median {:.2} ms, max {:.2} ms, n={}",
        respawns[respawns.len() / 2].as_secs_f64() * 1e3,
        respawns[respawns.len() - 1].as_secs_f64() * 1e3,
        respawns.len()
    );

    if let Some(pid) = pool.pool().and_then(|p| p.idle_pids().first().copied()) {
        println!(
            "idle worker RSS (after the runs above): {:.1} MiB",
            rss_kib(pid) as f64 / 1024.0
        );
    }
    if let Some(pid) = killer_pool.idle_pids().first().copied() {
        println!(
            "fresh idle worker RSS: {:.1} MiB",
            rss_kib(pid) as f64 / 1024.0
        );
    }
}
