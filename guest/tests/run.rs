//! The guest runtime end to end: loading, denial, hardening, limits, values, outcomes.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Poll, Waker};
use std::time::Duration;

use nodetool_guest::{
    CancelToken, Capabilities, DispatchError, DispatchFuture, Dispatcher, Dispatchers, RunLimits,
    RunOutcome, RunRequest, Sandbox,
};
use nodetool_protocol::catalog::{
    FileContent, GraphFile, Resolution, ResolvedKind, ResolvedModule,
};
use nodetool_protocol::run::RunErrorCode;
use nodetool_protocol::value::Value;

fn js_file(id: &str, internal: bool, deps: &[&str], source: &str) -> GraphFile {
    GraphFile {
        id: id.into(),
        internal,
        dependencies: deps.iter().map(|d| d.to_string()).collect(),
        content: FileContent::Js {
            source: source.into(),
        },
    }
}

fn js_module(specifier: &str, pack: &str, files: Vec<GraphFile>) -> ResolvedModule {
    ResolvedModule {
        specifier: specifier.into(),
        pack_name: pack.into(),
        pack_version: Some("1.0.0".into()),
        content_digest: "a".repeat(64),
        module_id: files[0].id.clone(),
        graph: files,
        kind: ResolvedKind::Js,
    }
}

fn geo() -> ResolvedModule {
    js_module(
        "@acme/geo",
        "@acme/nodetool-geo",
        vec![
            js_file(
                "sandbox/geo.js",
                false,
                &["sandbox/internal/round.js"],
                "import { round } from './internal/round.js';\nexport function haversine(a, b) { return round(Math.abs(a - b) * 111); }\n",
            ),
            js_file(
                "sandbox/internal/round.js",
                true,
                &[],
                "export function round(n) { return Math.round(n * 100) / 100; }\n",
            ),
        ],
    )
}

fn host_csv() -> ResolvedModule {
    ResolvedModule {
        specifier: "@nodetool-ai/sandbox-csv".into(),
        pack_name: "@nodetool-ai/sandbox-csv".into(),
        pack_version: None,
        content_digest: "a".repeat(64),
        module_id: "host:csv".into(),
        graph: vec![],
        kind: ResolvedKind::Host {
            host_id: "csv".into(),
        },
    }
}

/// Echoes its call back, or fails when the export is "fail".
struct EchoDispatcher;

impl Dispatcher for EchoDispatcher {
    fn call(
        &self,
        module_key: &str,
        export: &str,
        args: Vec<Value>,
        _deadline: std::time::Instant,
    ) -> DispatchFuture {
        let answer = if export == "stringify" {
            Err(DispatchError {
                message: format!("csv.{export}: rows must be an array of records or arrays"),
            })
        } else {
            Ok(Value::Object(vec![
                ("key".into(), Value::String(module_key.into())),
                ("export".into(), Value::String(export.into())),
                ("args".into(), Value::Array(args)),
            ]))
        };
        Box::pin(std::future::ready(answer))
    }
}

struct Run<'a> {
    code: &'a str,
    modules: Vec<ResolvedModule>,
    limits: RunLimits,
    caps: Capabilities,
    inputs: Value,
    cancel: Option<CancelToken>,
    host: Arc<dyn Dispatcher>,
}

impl<'a> Run<'a> {
    fn new(code: &'a str) -> Self {
        Run {
            code,
            modules: vec![],
            limits: RunLimits::STANDARD,
            caps: Capabilities::default(),
            inputs: Value::Null,
            cancel: None,
            host: Arc::new(EchoDispatcher),
        }
    }
    fn with(mut self, m: ResolvedModule) -> Self {
        self.modules.push(m);
        self
    }
    fn go(self) -> RunOutcome {
        let resolution = Resolution {
            modules: self.modules,
            statuses: vec![],
        };
        Sandbox::new().run(RunRequest {
            code: self.code,
            resolution: &resolution,
            inputs: &self.inputs,
            limits: self.limits,
            capabilities: self.caps,
            dispatchers: Dispatchers {
                host: Some(self.host),
                wasm: None,
            },
            cancel: self.cancel,
        })
    }
}

fn ok(outcome: RunOutcome) -> Value {
    outcome.result.unwrap_or_else(|e| panic!("run failed: {e}"))
}

fn err(outcome: RunOutcome) -> nodetool_protocol::run::RunError {
    match outcome.result {
        Ok(v) => panic!("run succeeded with {v:?}"),
        Err(e) => e,
    }
}

#[test]
fn a_plain_body_returns_its_value() {
    assert_eq!(ok(Run::new("return 1 + 1").go()), Value::Number(2.0));
    assert_eq!(
        ok(Run::new("const x = await Promise.resolve(5); return { x, s: 'a' }").go()),
        Value::Object(vec![
            ("x".into(), Value::Number(5.0)),
            ("s".into(), Value::String("a".into()))
        ])
    );
    assert_eq!(ok(Run::new("").go()), Value::Undefined);
}

#[test]
fn a_declared_pack_imports_with_its_internal_helper() {
    let v = ok(
        Run::new("import { haversine } from \"@acme/geo\";\nreturn haversine(0, 0.001);")
            .with(geo())
            .go(),
    );
    assert_eq!(v, Value::Number(0.11));
}

#[test]
fn undeclared_and_private_imports_are_denied_by_name() {
    for spec in [
        "node:buffer",
        "buffer",
        "/etc/passwd",
        "../secrets.js",
        "%2e%2e/secrets.js",
        "@acme/other",
        "@acme/nodetool-geo/sandbox/internal/round.js",
        "sandbox/internal/round.js",
        "file:///etc/passwd",
        "data:text/javascript,export default 1",
    ] {
        let e = err(Run::new(&format!("import x from {spec:?};\nreturn 1"))
            .with(geo())
            .go());
        assert_eq!(e.code, RunErrorCode::ModuleDenied, "{spec}: {e}");
        assert!(
            e.message.contains(&format!(
                "\"{spec}\" is not a sandbox package this run serves"
            )),
            "{spec}: {}",
            e.message
        );
        assert_eq!(e.specifier.as_deref(), Some(spec));
    }
}

#[test]
fn bridges_are_private() {
    for spec in ["nodetool:host-bridge", "nodetool:wasm-bridge"] {
        let e = err(
            Run::new(&format!("import {{ __call }} from {spec:?}; return 1"))
                .with(host_csv())
                .go(),
        );
        assert_eq!(e.code, RunErrorCode::ModuleDenied);
        assert!(
            e.message.contains("is private to the sandbox's generated"),
            "{}",
            e.message
        );
    }
    let v = ok(Run::new("import csv from '@nodetool-ai/sandbox-csv'; return [typeof __nodetoolHostDispatch, typeof __hostCall, typeof __call, typeof csv.parse]").with(host_csv()).go());
    assert_eq!(
        v,
        Value::Array(
            ["undefined", "undefined", "undefined", "function"]
                .iter()
                .map(|s| Value::String(s.to_string()))
                .collect()
        )
    );
}

#[test]
fn dynamic_imports_are_denied_even_for_declared_packs() {
    let v = ok(Run::new("import { haversine } from '@acme/geo';\ntry { await import('@acme/geo'); return 'loaded' } catch (e) { return e.message }").with(geo()).go());
    assert_eq!(
        v,
        Value::String(
            "dynamic import() is not allowed in the sandbox (requested \"@acme/geo\")".into()
        )
    );
    let e = err(Run::new("await import('node:' + 'fs')").go());
    assert_eq!(e.code, RunErrorCode::DynamicImportDenied);
    assert_eq!(e.specifier.as_deref(), Some("node:fs"));
}

#[test]
fn every_code_generation_path_is_refused_by_name() {
    for (code, names) in [
        ("eval('1')", "eval"),
        ("new Function('return 1')", "the Function constructor"),
        ("Function('return 1')", "the Function constructor"),
        (
            "(function(){}).constructor('return 1')",
            "the Function constructor",
        ),
        (
            "(async function(){}).constructor('return 1')",
            "the AsyncFunction constructor",
        ),
        (
            "(function*(){}).constructor('yield 1')",
            "the GeneratorFunction constructor",
        ),
        (
            "(async function*(){}).constructor('yield 1')",
            "the AsyncGeneratorFunction constructor",
        ),
        (
            "Reflect.construct(Function, ['return 1'])",
            "the Function constructor",
        ),
        (
            "Object.getPrototypeOf(async () => {}).constructor('return 1')",
            "the AsyncFunction constructor",
        ),
    ] {
        let e = err(Run::new(code).go());
        assert_eq!(e.code, RunErrorCode::RuntimeError, "{code}");
        assert!(
            e.message.contains(names) && e.message.contains("not allowed in the sandbox"),
            "{code}: {}",
            e.message
        );
    }
    let v = ok(Run::new("return [typeof setTimeout, typeof setInterval, typeof setImmediate, typeof clearTimeout, typeof process, typeof Buffer, typeof require, (() => {}) instanceof Function]").go());
    let Value::Array(items) = v else { panic!() };
    assert_eq!(
        items[..7]
            .iter()
            .filter(|v| **v == Value::String("undefined".into()))
            .count(),
        7
    );
    assert_eq!(items[7], Value::Bool(true));
}

#[test]
fn hardening_precedes_module_evaluation() {
    let evil = js_module(
        "@acme/evil",
        "@acme/evil",
        vec![js_file(
            "sandbox/evil.js",
            false,
            &[],
            "export const value = eval('1 + 1');",
        )],
    );
    let e = err(Run::new("import { value } from '@acme/evil'; return value")
        .with(evil)
        .go());
    assert!(e.message.contains("eval"), "{e}");
    let timer = js_module(
        "@acme/timer",
        "@acme/timer",
        vec![js_file(
            "sandbox/t.js",
            false,
            &[],
            "setTimeout(() => {}, 0); export const value = 1;",
        )],
    );
    let e = err(
        Run::new("import { value } from '@acme/timer'; return value")
            .with(timer)
            .go(),
    );
    assert!(e.message.contains("setTimeout"), "{e}");
}

#[test]
fn errors_carry_the_body_position() {
    let e = err(Run::new("const a = 1;\nconst b = 2;\nnull.x;").go());
    assert_eq!(e.code, RunErrorCode::RuntimeError);
    assert_eq!(e.line, Some(3), "{e:?}");
    let e = err(Run::new(
        "import { haversine } from '@acme/geo';\nconst a = 1;\nthrow new Error('boom');",
    )
    .with(geo())
    .go());
    assert_eq!(e.line, Some(3), "{e:?}");
    assert_eq!(e.message, "Error: boom");
    let e = err(Run::new("const a = 1;\nconst = 2;").go());
    assert_eq!(e.code, RunErrorCode::SyntaxError);
    assert_eq!(e.line, Some(2), "{e:?}");
    let e = err(Run::new("import x from 'y';\nexport const a = 1;").go());
    assert_eq!(e.code, RunErrorCode::SyntaxError);
    assert!(e.message.contains("cannot export"));
}

#[test]
fn limits_end_runs_with_typed_outcomes_and_the_next_run_works() {
    let mut run = Run::new("while (true) {}");
    run.limits.timeout = Duration::from_millis(200);
    assert_eq!(err(run.go()).code, RunErrorCode::Timeout);
    assert_eq!(
        err(Run::new("const a = []; while (true) a.push(new Array(100000).fill(1));").go()).code,
        RunErrorCode::MemoryLimit
    );
    assert_eq!(
        err(Run::new("function f() { return f() + 1 } return f()").go()).code,
        RunErrorCode::StackOverflow
    );
    assert_eq!(
        err(Run::new("let s = 'x'; while (true) s += s;").go()).code,
        RunErrorCode::MemoryLimit
    );
    let e = err(Run::new("return new Promise(() => {})").go());
    assert_eq!(e.code, RunErrorCode::RuntimeError);
    assert!(e.message.contains("never settles"), "{e}");
    assert_eq!(
        ok(Run::new("return 'still works'").go()),
        Value::String("still works".into())
    );
}

#[test]
fn cancellation_stops_a_run() {
    let token = CancelToken::new();
    let mut run = Run::new("while (true) {}");
    run.cancel = Some(token.clone());
    let t = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(100));
        token.cancel();
    });
    assert_eq!(err(run.go()).code, RunErrorCode::Cancelled);
    t.join().unwrap_or_default();
}

#[test]
fn results_that_cannot_cross_are_named() {
    let e = err(Run::new("const a = {}; a.self = a; return a").go());
    assert!(e.message.contains("cycle"), "{e}");
    let e = err(Run::new("return { get x() { throw new Error('no') } }").go());
    assert!(
        e.message
            .contains("the result.x could not be read: Error: no"),
        "{e}"
    );
    let e = err(Run::new("return 10n").go());
    assert!(e.message.contains("BigInt"), "{e}");
    let e = err(Run::new("let v = []; const root = v; for (let i = 0; i < 200; i++) { const n = []; v.push(n); v = n } return root").go());
    assert!(e.message.contains("nested more than"), "{e}");
}

#[test]
fn values_and_bytes_cross_both_ways() {
    let mut run = Run::new(
        "return { b: inputs.b, doubled: inputs.n * 2, view: new Uint16Array([1, 258]), frozen: Object.isFrozen(inputs) && Object.isFrozen(inputs.o) }",
    );
    run.inputs = Value::Object(vec![
        ("n".into(), Value::Number(21.0)),
        ("b".into(), Value::Bytes(vec![1, 2, 3])),
        ("o".into(), Value::Object(vec![])),
    ]);
    let v = ok(run.go());
    assert_eq!(v.get("b"), Some(&Value::Bytes(vec![1, 2, 3])));
    assert_eq!(v.get("doubled"), Some(&Value::Number(42.0)));
    assert_eq!(v.get("view"), Some(&Value::Bytes(vec![1, 0, 2, 1])));
    assert_eq!(v.get("frozen"), Some(&Value::Bool(true)));
}

#[test]
fn host_facades_reach_the_dispatcher_and_its_errors_are_catchable() {
    let v = ok(Run::new("import csv, { parse } from '@nodetool-ai/sandbox-csv';\nconst r = await parse('a,b', { header: true, bytes: new Uint8Array([7]) });\nreturn [r, csv.parse === parse]").with(host_csv()).go());
    let Value::Array(items) = v else { panic!() };
    assert_eq!(
        items[0].get("key"),
        Some(&Value::String("@nodetool-ai/sandbox-csv".into()))
    );
    assert_eq!(items[0].get("export"), Some(&Value::String("parse".into())));
    assert_eq!(items[1], Value::Bool(true));
    let v = ok(Run::new("import { stringify } from '@nodetool-ai/sandbox-csv'; try { await stringify(1) } catch (e) { return [e instanceof Error, e.message] }").with(host_csv()).go());
    assert_eq!(
        v,
        Value::Array(vec![
            Value::Bool(true),
            Value::String("csv.stringify: rows must be an array of records or arrays".into())
        ])
    );
    let e = err(Run::new(
        "import { stringify } from '@nodetool-ai/sandbox-csv';\nawait stringify(1)",
    )
    .with(host_csv())
    .go());
    assert_eq!(e.code, RunErrorCode::HostModuleError);
}

#[test]
fn console_is_captured_and_capped() {
    let mut run = Run::new(
        "console.log('a', 1, { b: [true] }); console.warn(new Error('w')); for (let i = 0; i < 10; i++) console.info('x'.repeat(50)); return 0",
    );
    run.limits.log_entries = 5;
    run.limits.log_chars = 20;
    let outcome = run.go();
    assert_eq!(outcome.logs[0].message, "a 1 {\"b\":[true]}");
    assert_eq!(outcome.logs[1].message, "Error: w");
    assert_eq!(outcome.logs.len(), 6);
    assert!(outcome.logs[2].message.ends_with("[truncated]"));
    assert!(
        outcome.logs[5]
            .message
            .contains("7 more console lines were dropped"),
        "{:?}",
        outcome.logs[5]
    );
}

#[test]
fn a_pack_module_sees_exactly_the_granted_secrets() {
    let reader = js_module(
        "@acme/reader",
        "@acme/reader",
        vec![js_file(
            "sandbox/r.js",
            false,
            &[],
            "export const seen = typeof getSecret === 'function' ? await getSecret('TOKEN').catch(e => e.message) : 'no getSecret';",
        )],
    );
    let v = ok(Run::new("import { seen } from '@acme/reader'; return seen")
        .with(reader.clone())
        .go());
    assert_eq!(v, Value::String("no getSecret".into()));
    let mut run = Run::new("import { seen } from '@acme/reader'; return seen").with(reader.clone());
    run.caps.secrets = Some(BTreeMap::from([(
        "TOKEN".to_string(),
        "s3cret".to_string(),
    )]));
    assert_eq!(ok(run.go()), Value::String("s3cret".into()));
    let mut run = Run::new("import { seen } from '@acme/reader'; return seen").with(reader);
    run.caps.secrets = Some(BTreeMap::new());
    assert_eq!(
        ok(run.go()),
        Value::String("getSecret: the secret \"TOKEN\" was not granted to this run".into())
    );
}

#[test]
fn a_timeout_cannot_be_caught() {
    let mut run = Run::new("for (;;) { try { while (true) {} } catch (e) { } }\nreturn 'escaped'");
    run.limits.timeout = Duration::from_millis(150);
    assert_eq!(err(run.go()).code, RunErrorCode::Timeout);
}

#[test]
fn the_host_never_holds_more_than_the_guest_could() {
    // 40 MB of strings in a 64 MiB heap is fine for the guest; the result's crossing budget
    // refuses it by name rather than letting the host allocate it several times over.
    let e = err(Run::new(
        "const s = 'x'.repeat(1 << 20); return Array.from({ length: 70 }, () => s)",
    )
    .go());
    assert_eq!(e.code, RunErrorCode::RuntimeError);
    assert!(e.message.contains("larger than the"), "{e}");
    let outcome = Run::new("console.log(new Array(1e6).fill(7)); return 1").go();
    assert_eq!(outcome.result, Ok(Value::Number(1.0)));
    assert!(
        outcome.logs[0].message.contains("larger than the"),
        "{:?}",
        outcome.logs
    );
}

#[test]
fn proto_keys_stay_ordinary_keys_and_capabilities_are_read_only() {
    let mut run = Run::new(
        "return [Object.keys(inputs), inputs.x, Object.getPrototypeOf(inputs) === Object.prototype, (() => { try { globalThis.console = 1 } catch (e) { return 'refused' } return typeof console })(), (() => { try { inputs = 2 } catch (e) { return 'refused' } return typeof inputs })()]",
    );
    run.inputs = Value::from_json(serde_json_value());
    let v = ok(run.go());
    let Value::Array(items) = v else { panic!() };
    assert_eq!(
        items[0],
        Value::Array(vec![Value::String("__proto__".into())])
    );
    assert_eq!(
        items[1],
        Value::Null,
        "inputs.x must not come from a prototype"
    );
    assert_eq!(items[2], Value::Bool(true));
    assert_eq!(items[3], Value::String("refused".into()));
    assert_eq!(items[4], Value::String("refused".into()));
}

fn serde_json_value() -> serde_json::Value {
    serde_json::from_str(r#"{"__proto__": {"x": 1}}"#).unwrap_or_default()
}

/// QuickJS's memory limit counts the blocks a body holds, not the 4 KiB arenas they pin. This
/// body keeps one small string per arena in each of 30 size classes while the rest of every
/// batch is freed: a few MiB by QuickJS's count, but without the allocator's cap it pinned over
/// 500 MB under the 64 MiB limit. With the cap it runs out of memory partway.
#[test]
fn a_heap_shaped_to_pin_arenas_cannot_grow_past_the_allocators_cap() {
    let code = "const keep = [];\n\
        let classes = 0;\n\
        for (let L = 8; L <= 480; L += 16) {\n\
          const per = Math.max(1, Math.floor(4000 / (L + 32)));\n\
          const n = Math.floor(30e6 / (L + 40));\n\
          let batch = new Array(n);\n\
          try {\n\
            for (let i = 0; i < n; i++) batch[i] = String(i).padStart(L, 'x');\n\
          } catch (e) { batch = null; return ['out of memory', classes]; }\n\
          for (let i = 0; i < n; i += per) keep.push(batch[i]);\n\
          batch = null;\n\
          classes++;\n\
        }\n\
        return ['completed', classes];";
    let mut run = Run::new(code);
    run.limits.timeout = Duration::from_secs(120);
    let outcome = run.go();
    // The process's peak resident memory (Linux): the cap is 2 × 64 MiB + 16 MiB; without it
    // this body pinned over 500 MB. The other tests of this binary hold a few MiB each.
    if let Ok(status) = std::fs::read_to_string("/proc/self/status") {
        let peak_kib: u64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0);
        assert!(
            peak_kib < 320 * 1024,
            "peak resident memory {peak_kib} KiB: the arenas were not capped"
        );
    }
    match outcome.result {
        Ok(Value::Array(items)) => {
            assert_eq!(
                items.first(),
                Some(&Value::String("out of memory".into())),
                "{items:?}"
            );
        }
        Ok(other) => panic!("unexpected result {other:?}"),
        Err(e) => assert_eq!(e.code, RunErrorCode::MemoryLimit, "{e}"),
    }
}

/// When the allocation that fails is small, QuickJS cannot make its `out of memory` error
/// either: it throws `null`, or (settling a promise) leaves the body's result pending for good.
/// Both were reported as a runtime error ("null", "never settles").
#[test]
fn an_exhausted_heap_is_a_memory_limit_even_when_quickjs_cannot_say_so() {
    for code in [
        "let o = null; for (let i = 0; i < 1e7; i++) o = { o }; return 1;",
        "let o = null; for (let i = 0; i < 1e7; i++) o = [o]; return o;",
        "let p = Promise.resolve(); for (let i = 0; i < 1e9; i++) p = p.then(() => {}); await p;",
    ] {
        // A small heap: the same failure, and little for the arena test's peak to share.
        let mut run = Run::new(code);
        run.limits.memory_bytes = 16 * 1024 * 1024;
        let e = err(run.go());
        assert_eq!(e.code, RunErrorCode::MemoryLimit, "{code}: {e}");
        assert_eq!(e.message, "the run exceeded its memory limit");
    }
    // A body's own `null` is still its own error.
    for code in ["throw null", "await Promise.reject(null)"] {
        let e = err(Run::new(code).go());
        assert_eq!(e.code, RunErrorCode::RuntimeError, "{code}: {e}");
        assert_eq!(e.message, "null");
    }
}

/// QuickJS swallows an exception thrown while it builds a stack trace, the uncatchable
/// interrupt included, so a body could outlive its deadline and even return a value.
#[test]
fn a_stopped_run_ends_stopped_whatever_the_body_made_of_the_interrupt() {
    for code in [
        "Error.prepareStackTrace = () => { for (;;); }; throw new Error('x')",
        "Error.prepareStackTrace = () => { for (;;); }; return new Error('x').stack;",
        "Error.prepareStackTrace = () => { for (;;); }; try { null.x } catch (e) { return 'caught' }",
    ] {
        let mut run = Run::new(code);
        run.limits.timeout = Duration::from_millis(300);
        let outcome = run.go();
        let e = err(outcome);
        assert_eq!(e.code, RunErrorCode::Timeout, "{code}: {e}");
        assert_eq!(e.message, "the run exceeded its 300 ms deadline");
    }
    let token = CancelToken::new();
    let mut run =
        Run::new("Error.prepareStackTrace = () => { for (;;); }; return new Error('x').stack;");
    run.cancel = Some(token.clone());
    let t = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(100));
        token.cancel();
    });
    assert_eq!(err(run.go()).code, RunErrorCode::Cancelled);
    t.join().unwrap_or_default();
}

/// A host dispatcher whose every call runs on a thread of its own for `work`, counting the
/// calls that have started and the most that ran at once.
struct SlowDispatcher {
    work: Duration,
    running: Arc<AtomicUsize>,
    most: Arc<AtomicUsize>,
    started: Arc<AtomicUsize>,
}

impl SlowDispatcher {
    fn new(work: Duration) -> Arc<SlowDispatcher> {
        Arc::new(SlowDispatcher {
            work,
            running: Arc::default(),
            most: Arc::default(),
            started: Arc::default(),
        })
    }
}

impl Dispatcher for SlowDispatcher {
    fn call(
        &self,
        _module_key: &str,
        _export: &str,
        args: Vec<Value>,
        _deadline: std::time::Instant,
    ) -> DispatchFuture {
        type Slot = Arc<Mutex<(Option<Value>, Option<Waker>)>>;
        let slot: Slot = Arc::default();
        let (running, most, work) = (Arc::clone(&self.running), Arc::clone(&self.most), self.work);
        self.started.fetch_add(1, Ordering::SeqCst);
        let answer = Arc::clone(&slot);
        std::thread::spawn(move || {
            let now = running.fetch_add(1, Ordering::SeqCst) + 1;
            most.fetch_max(now, Ordering::SeqCst);
            std::thread::sleep(work);
            running.fetch_sub(1, Ordering::SeqCst);
            let mut answer = answer.lock().unwrap_or_else(PoisonError::into_inner);
            answer.0 = Some(args.into_iter().next().unwrap_or(Value::Null));
            if let Some(waker) = answer.1.take() {
                waker.wake();
            }
        });
        Box::pin(std::future::poll_fn(move |cx| {
            let mut slot = slot.lock().unwrap_or_else(PoisonError::into_inner);
            match slot.0.take() {
                Some(value) => Poll::Ready(Ok(value)),
                None => {
                    slot.1 = Some(cx.waker().clone());
                    Poll::Pending
                }
            }
        }))
    }
}

/// Each host call holds a host thread; fifty at once from one `Promise.all` held fifty.
#[test]
fn a_run_has_at_most_two_host_calls_running_and_the_rest_queue() {
    let slow = SlowDispatcher::new(Duration::from_millis(20));
    let mut run = Run::new(
        "import { parse } from '@nodetool-ai/sandbox-csv';\n\
         return await Promise.all(Array.from({ length: 50 }, (_, i) => parse(i)));",
    )
    .with(host_csv());
    run.host = Arc::clone(&slow) as Arc<dyn Dispatcher>;
    let v = ok(run.go());
    assert_eq!(
        v,
        Value::Array((0..50).map(|i| Value::Number(f64::from(i))).collect())
    );
    assert_eq!(slow.started.load(Ordering::SeqCst), 50);
    // Calls still overlap, two at a time.
    assert_eq!(slow.most.load(Ordering::SeqCst), 2);
}

/// A call still waiting for a slot when the run ends is dropped with the run, never started.
#[test]
fn queued_host_calls_never_start_once_the_run_has_ended() {
    let slow = SlowDispatcher::new(Duration::from_millis(200));
    let mut run = Run::new(
        "import { parse } from '@nodetool-ai/sandbox-csv';\n\
         return await Promise.all(Array.from({ length: 10 }, (_, i) => parse(i)));",
    )
    .with(host_csv());
    run.host = Arc::clone(&slow) as Arc<dyn Dispatcher>;
    run.limits.timeout = Duration::from_millis(300);
    assert_eq!(err(run.go()).code, RunErrorCode::Timeout);
    let started = slow.started.load(Ordering::SeqCst);
    assert!((2..=4).contains(&started), "{started} calls started");
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(slow.started.load(Ordering::SeqCst), started);
    assert_eq!(slow.running.load(Ordering::SeqCst), 0);
}

/// A worker's runs: each takes the runtime `prepare` built ahead and leaves its teardown to the
/// next `prepare`; nothing one run does reaches the next, and a run whose heap limit differs
/// from the prepared one gets a runtime of its own.
#[test]
fn prepared_runs_each_get_a_never_used_runtime() {
    let sandbox = Sandbox::new();
    let resolution = Resolution::default();
    let run = |code: &str, limits: RunLimits| {
        sandbox.run_prepared(RunRequest {
            code,
            resolution: &resolution,
            inputs: &Value::Null,
            limits,
            capabilities: Capabilities::default(),
            dispatchers: Dispatchers::default(),
            cancel: None,
        })
    };
    sandbox.prepare(&RunLimits::STANDARD);
    let first = run(
        "Array.prototype.planted = 1; globalThis.leak = 2; console.log('one'); return [].planted;",
        RunLimits::STANDARD,
    );
    assert_eq!(ok(first.clone()), Value::Number(1.0));
    assert_eq!(first.logs.len(), 1);
    sandbox.prepare(&RunLimits::STANDARD);
    let second = run(
        "return [typeof [].planted, typeof globalThis.leak];",
        RunLimits::STANDARD,
    );
    assert_eq!(
        ok(second),
        Value::Array(vec![
            Value::String("undefined".into()),
            Value::String("undefined".into())
        ])
    );
    // Without a prepare in between there is no spare: the run builds its own, and is clean too.
    let third = run("return typeof [].planted;", RunLimits::STANDARD);
    assert_eq!(ok(third), Value::String("undefined".into()));
    // A smaller heap than the prepared runtime's is enforced: the spare is not used.
    sandbox.prepare(&RunLimits::STANDARD);
    let small = RunLimits {
        memory_bytes: 16 * 1024 * 1024,
        ..RunLimits::STANDARD
    };
    let outcome = run("const s = 'x'.repeat(40e6); return s.length;", small);
    assert_eq!(err(outcome).code, RunErrorCode::MemoryLimit);
    // Dropped lines are still reported when the teardown is deferred.
    sandbox.prepare(&RunLimits::STANDARD);
    let limits = RunLimits {
        log_entries: 2,
        ..RunLimits::STANDARD
    };
    let outcome = run(
        "for (let i = 0; i < 5; i++) console.log(i); return 0;",
        limits,
    );
    assert_eq!(outcome.logs.len(), 3);
    assert!(
        outcome.logs[2]
            .message
            .contains("3 more console lines were dropped")
    );
    sandbox.prepare(&RunLimits::STANDARD);
}
