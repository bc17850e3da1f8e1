//! `cargo xtask bench html`: `html.select` and `html.toMarkdown` measured from guest code —
//! import, call, result back in the guest as JavaScript values — on the ~1 MB page the
//! reference stack's `peer-bench/html_libs.mjs` writes (`page.html` in `NODETOOL_BENCH_INPUTS`,
//! default `../shared/peer-bench/results/inputs`), beside its cheerio (load + `p.note`, first
//! 100 texts) and turndown (whole page) figures.
//!
//! Each figure is the median over runs of (a run calling the module) minus the median of (the
//! same run that only touches its input), so it is the call and the crossing, not the run.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use nodetool_guest::{Capabilities, Dispatchers, RunLimits, RunRequest, Sandbox};
use nodetool_host_modules::{HostDispatcher, implementation};
use nodetool_protocol::catalog::{Resolution, ResolvedKind, ResolvedModule};
use nodetool_protocol::value::Value;
use nodetool_runtime::dispatch::Dispatcher;

/// The reference stack's figures on this page (peer-bench, same machine class).
const CHEERIO_LOAD_SELECT_MS: f64 = 209.0;
const TURNDOWN_MS: f64 = 454.0;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let dir = std::env::var_os("NODETOOL_BENCH_INPUTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../../shared/peer-bench/results/inputs"
            ))
        });
    let path = dir.join("page.html");
    let page = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (run `node html_libs.mjs` in peer-bench first, or set NODETOOL_BENCH_INPUTS)",
            path.display()
        )
    });
    let runs: usize = std::env::var("BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(15);

    let pack = "@nodetool-ai/sandbox-html".to_string();
    let resolution = Resolution {
        modules: vec![ResolvedModule {
            specifier: pack.clone(),
            pack_name: pack,
            pack_version: None,
            content_digest: "a".repeat(64),
            module_id: "host:html".into(),
            graph: vec![],
            kind: ResolvedKind::Host {
                host_id: "html".into(),
            },
        }],
        statuses: vec![],
    };
    let dispatcher: Arc<dyn Dispatcher> = HostDispatcher::for_resolution(&resolution)
        .ok()
        .flatten()
        .unwrap_or_else(|| panic!("dispatcher"));
    let sandbox = Sandbox::new();
    let inputs = Value::Object(vec![("html".into(), Value::String(page.clone()))]);
    let run = |code: &str| -> (Duration, Value) {
        let mut limits = RunLimits::STANDARD;
        limits.memory_bytes = 512 * 1024 * 1024;
        let t = Instant::now();
        let outcome = sandbox.run(RunRequest {
            code,
            resolution: &resolution,
            inputs: &inputs,
            limits,
            capabilities: Capabilities::default(),
            dispatchers: Dispatchers {
                host: Some(Arc::clone(&dispatcher)),
                wasm: None,
            },
            cancel: None,
        });
        let elapsed = t.elapsed();
        let value = outcome
            .result
            .unwrap_or_else(|e| panic!("bench run failed: {e}"));
        (elapsed, value)
    };
    let measure = |call: &str| -> (Duration, Value) {
        let baseline = "return inputs.html.length;";
        run(call);
        run(baseline);
        let (mut a, mut b) = (Vec::new(), Vec::new());
        let mut last = Value::Null;
        for _ in 0..runs {
            let (t, v) = run(call);
            a.push(t);
            last = v;
            b.push(run(baseline).0);
        }
        (median(a).saturating_sub(median(b)), last)
    };
    let native = |id: &str, export: &str, args: &[Value]| -> Duration {
        let f = implementation(id, export).unwrap_or_else(|| panic!("{id}.{export}"));
        let _ = f(args);
        median(
            (0..runs)
                .map(|_| {
                    let t = Instant::now();
                    let _ = f(args);
                    t.elapsed()
                })
                .collect(),
        )
    };
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!("page.html: {} bytes, {runs} runs", page.len());

    let (d, out) = measure(
        "import { select } from '@nodetool-ai/sandbox-html'; const texts = await select(inputs.html, 'p.note'); return [texts.length, texts.join('\\n').length];",
    );
    let n = native(
        "html",
        "select",
        &[Value::String(page.clone()), Value::String("p.note".into())],
    );
    println!(
        "html.select p.note, first 100 texts (cheerio load + select: {CHEERIO_LOAD_SELECT_MS} ms): {:.1} ms from the guest, {:.1} ms natively ({:.1}x faster than cheerio) -> {}",
        ms(d),
        ms(n),
        CHEERIO_LOAD_SELECT_MS / ms(d),
        out.to_json()
    );

    let (d, out) = measure(
        "import { toMarkdown } from '@nodetool-ai/sandbox-html'; const md = await toMarkdown(inputs.html); return md.length;",
    );
    let n = native("html", "toMarkdown", &[Value::String(page)]);
    println!(
        "html.toMarkdown, whole page (turndown: {TURNDOWN_MS} ms): {:.1} ms from the guest, {:.1} ms natively ({:.1}x faster than turndown) -> {} chars",
        ms(d),
        ms(n),
        TURNDOWN_MS / ms(d),
        out.to_json()
    );
}
