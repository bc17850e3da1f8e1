//! `cargo xtask bench wasm`: the cost of one scalar WASM call — a fresh store and instance from
//! the cached `InstancePre`, the call, the drop — from Rust through the dispatcher, and from
//! guest code through the generated facade (awaiting the result in the guest).

use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use nodetool_guest::{Capabilities, Dispatchers, RunLimits, RunRequest, Sandbox};
use nodetool_protocol::catalog::{
    Bytes, FileContent, GraphFile, Resolution, ResolvedKind, ResolvedModule,
};
use nodetool_protocol::manifest::{WasmContract, WasmExport};
use nodetool_protocol::value::Value;
use nodetool_runtime::dispatch::Dispatcher;
use nodetool_wasm_host::WasmHost;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let budget = Duration::from_secs(
        std::env::var("BENCH_SECONDS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(3),
    );
    let bytes = wat::parse_str(r#"(module (memory 1 1) (func (export "add") (param i32 i32) (result i32) local.get 0 local.get 1 i32.add))"#)
        .unwrap_or_else(|e| panic!("{e}"));
    let module = ResolvedModule {
        specifier: "@bench/wasm".into(),
        pack_name: "@bench/wasm".into(),
        pack_version: None,
        content_digest: "a".repeat(64),
        module_id: "add.wasm".into(),
        graph: vec![GraphFile {
            id: "add.wasm".into(),
            internal: false,
            dependencies: vec![],
            content: FileContent::Wasm {
                bytes: Bytes::from(bytes),
            },
        }],
        kind: ResolvedKind::Wasm {
            wasm: WasmContract {
                memory_pages_max: 1,
                exports: vec![WasmExport {
                    wasm: "add".into(),
                    as_name: "add".into(),
                }],
                limits: None,
            },
        },
    };
    let resolution = Resolution {
        modules: vec![module],
        statuses: vec![],
    };
    let host = WasmHost::new().unwrap_or_else(|e| panic!("{e:?}"));

    // From Rust: the dispatcher's call path (argument conversion, budgets, instance, call), the
    // call executed inline to measure the work itself, then through the dispatcher's thread.
    let far = Instant::now() + Duration::from_secs(3600);
    let mut direct = Vec::new();
    let start = Instant::now();
    while start.elapsed() < budget {
        // A fresh dispatcher per 200 calls keeps within the per-invocation call budget.
        let d = host
            .dispatcher_for(&resolution)
            .ok()
            .flatten()
            .unwrap_or_else(|| panic!("dispatcher"));
        for _ in 0..200 {
            let t = Instant::now();
            let mut f = d.call(
                "@bench/wasm",
                "add",
                vec![Value::Number(2.0), Value::Number(40.0)],
                far,
            );
            let answer = f.as_mut().poll(&mut Context::from_waker(Waker::noop()));
            direct.push(t.elapsed());
            assert!(matches!(answer, Poll::Ready(Ok(Value::Number(42.0)))));
        }
    }
    println!(
        "from Rust through the dispatcher (convert + budget + instantiate + call + drop): median {:.2} µs over {} calls",
        median(direct.clone()).as_secs_f64() * 1e6,
        direct.len()
    );

    // From guest code: 200 awaited calls in one run, the run's own cost subtracted.
    let sandbox = Sandbox::new();
    let run = |code: &str| {
        let d = host
            .dispatcher_for(&resolution)
            .ok()
            .flatten()
            .unwrap_or_else(|| panic!("dispatcher"));
        let t = Instant::now();
        let outcome = sandbox.run(RunRequest {
            code,
            resolution: &resolution,
            inputs: &Value::Null,
            limits: RunLimits::STANDARD,
            capabilities: Capabilities::default(),
            dispatchers: Dispatchers {
                host: None,
                wasm: Some(d as Arc<dyn Dispatcher>),
            },
            cancel: None,
        });
        let elapsed = t.elapsed();
        assert!(outcome.result.is_ok(), "{:?}", outcome.result);
        elapsed
    };
    let calls = 200u32;
    let with_calls = format!(
        "import {{ add }} from '@bench/wasm'; let s = 0; for (let i = 0; i < {calls}; i++) s += await add(i, 1); return s;"
    );
    let without = "import { add } from '@bench/wasm'; let s = 0; for (let i = 0; i < 200; i++) s += await Promise.resolve(i + 1); return s;";
    let (mut a, mut b) = (Vec::new(), Vec::new());
    let start = Instant::now();
    while start.elapsed() < budget || a.len() < 10 {
        a.push(run(&with_calls));
        b.push(run(without));
    }
    let per_call = (median(a).saturating_sub(median(b))) / calls;
    println!(
        "from guest code through the facade (await add(i, 1)): median {:.2} µs per call",
        per_call.as_secs_f64() * 1e6
    );
}
