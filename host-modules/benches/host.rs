//! `cargo xtask bench host`: host modules measured from guest code — import, call, result back
//! in the guest as JavaScript values — on the byte-identical inputs the reference stack's
//! `peer-bench/host_libs.mjs` writes (`NODETOOL_BENCH_INPUTS`, default
//! `../shared/peer-bench/results/inputs`).
//!
//! Each figure is the median over runs of (a run calling the module) minus the median of (the
//! same run that only touches its input), so it is the call and the crossing, not the run.
//! `BENCH_ONLY=csv,xml` limits the run to those rows.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use nodetool_guest::{Capabilities, Dispatchers, RunLimits, RunRequest, Sandbox};
use nodetool_host_modules::HostDispatcher;
use nodetool_protocol::catalog::{Resolution, ResolvedKind, ResolvedModule};
use nodetool_protocol::value::Value;
use nodetool_runtime::dispatch::Dispatcher;

fn host(id: &str) -> ResolvedModule {
    let pack = format!("@nodetool-ai/sandbox-{id}");
    ResolvedModule {
        specifier: pack.clone(),
        pack_name: pack,
        pack_version: None,
        content_digest: "a".repeat(64),
        module_id: format!("host:{id}"),
        graph: vec![],
        kind: ResolvedKind::Host { host_id: id.into() },
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

struct Bench {
    sandbox: Sandbox,
    resolution: Resolution,
    dispatcher: Arc<dyn Dispatcher>,
}

impl Bench {
    fn run(&self, code: &str, inputs: &Value) -> (Duration, Value) {
        let mut limits = RunLimits::STANDARD;
        limits.memory_bytes = 512 * 1024 * 1024;
        let t = Instant::now();
        let outcome = self.sandbox.run(RunRequest {
            code,
            resolution: &self.resolution,
            inputs,
            limits,
            capabilities: Capabilities::default(),
            dispatchers: Dispatchers {
                host: Some(Arc::clone(&self.dispatcher)),
                wasm: None,
            },
            cancel: None,
        });
        let elapsed = t.elapsed();
        (
            elapsed,
            outcome
                .result
                .unwrap_or_else(|e| panic!("bench run failed: {e}")),
        )
    }

    /// Median of (call run) - median of (baseline run), over `runs` pairs.
    fn measure(
        &self,
        runs: usize,
        call: &str,
        baseline: &str,
        inputs: &Value,
    ) -> (Duration, Value) {
        let (mut a, mut b) = (Vec::new(), Vec::new());
        let mut last = Value::Null;
        for _ in 0..runs {
            let (t, v) = self.run(call, inputs);
            a.push(t);
            last = v;
            b.push(self.run(baseline, inputs).0);
        }
        (median(a).saturating_sub(median(b)), last)
    }
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
    let read = |name: &str| {
        std::fs::read(dir.join(name)).unwrap_or_else(|e| {
            panic!(
                "{}: {e} (run `node host_libs.mjs` in peer-bench first)",
                dir.join(name).display()
            )
        })
    };
    let text = |name: &str| String::from_utf8(read(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
    let runs: usize = std::env::var("BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(7);
    let resolution = Resolution {
        modules: ["csv", "xml", "zip", "diff"]
            .iter()
            .map(|id| host(id))
            .collect(),
        statuses: vec![],
    };
    let dispatcher: Arc<dyn Dispatcher> = HostDispatcher::for_resolution(&resolution)
        .ok()
        .flatten()
        .unwrap_or_else(|| panic!("dispatcher"));
    let bench = Bench {
        sandbox: Sandbox::new(),
        resolution,
        dispatcher,
    };
    let mb = |bytes: usize, d: Duration| bytes as f64 / 1e6 / d.as_secs_f64();
    // `BENCH_ONLY=csv,xml` runs only those rows (a profiler run wants one module at a time).
    let only = std::env::var("BENCH_ONLY").ok();
    let wanted = |name: &str| {
        only.as_deref()
            .is_none_or(|only| only.split(',').any(|w| w.trim() == name))
    };

    if wanted("csv") {
        let csv = text("data.csv");
        let inputs = Value::Object(vec![("text".into(), Value::String(csv.clone()))]);
        let (d, rows) = bench.measure(
        runs,
        "import { parse } from '@nodetool-ai/sandbox-csv'; const rows = await parse(inputs.text, { header: true }); return rows.length;",
        "return inputs.text.length;",
        &inputs,
    );
        println!(
            "csv.parse, header (papaparse: 31 MB/s): {:.1} MB/s ({:.0} ms, {} rows, {} bytes)",
            mb(csv.len(), d),
            d.as_secs_f64() * 1e3,
            rows.to_json(),
            csv.len()
        );
    }

    if wanted("xml") {
        let xml = text("data.xml");
        let inputs = Value::Object(vec![("text".into(), Value::String(xml.clone()))]);
        let (d, _) = bench.measure(
        runs,
        "import { parse } from '@nodetool-ai/sandbox-xml'; const doc = await parse(inputs.text); return Object.keys(doc).length;",
        "return inputs.text.length;",
        &inputs,
    );
        println!(
            "xml.parse, attributes (fast-xml-parser: 5.8 MB/s): {:.1} MB/s ({:.0} ms, {} bytes)",
            mb(xml.len(), d),
            d.as_secs_f64() * 1e3,
            xml.len()
        );
    }

    if wanted("zip") {
        let zip = read("data.zip");
        let inputs = Value::Object(vec![("zip".into(), Value::Bytes(zip.clone()))]);
        let (d, total) = bench.measure(
        runs,
        "import { unzip } from '@nodetool-ai/sandbox-zip'; const files = await unzip(inputs.zip); let n = 0; for (const k in files) n += files[k].length; return n;",
        "return inputs.zip.length;",
        &inputs,
    );
        let inflated = match total {
            Value::Number(n) => n as usize,
            _ => 0,
        };
        println!(
            "zip.unzip (fflate: 101 MB/s of output): {:.1} MB/s of output ({:.0} ms, {inflated} bytes out)",
            mb(inflated, d),
            d.as_secs_f64() * 1e3
        );
    }

    if wanted("diff") {
        let (a, b) = (text("diff-a.txt"), text("diff-b.txt"));
        let inputs = Value::Object(vec![
            ("a".into(), Value::String(a)),
            ("b".into(), Value::String(b)),
        ]);
        let (d, _) = bench.measure(
        runs,
        "import { unified } from '@nodetool-ai/sandbox-diff'; const patch = await unified(inputs.a, inputs.b); return patch.length;",
        "return inputs.a.length + inputs.b.length;",
        &inputs,
    );
        println!(
            "diff.unified, 10,000-line texts (diff: 26 ms): {:.1} ms",
            d.as_secs_f64() * 1e3
        );
    }
}
