//! The WASM host end to end, called as the guest's facades call it.

use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use nodetool_protocol::catalog::{
    Bytes, FileContent, GraphFile, Resolution, ResolvedKind, ResolvedModule,
};
use nodetool_protocol::manifest::{WasmContract, WasmExport, WasmLimits};
use nodetool_protocol::value::Value;
use nodetool_runtime::dispatch::{DispatchFuture, Dispatcher};
use nodetool_wasm_host::{WasmDispatcher, WasmHost};

const REFERENCE: &str = r#"(module
  (memory 1 2)
  (global $g (mut i32) (i32.const 0))
  (func (export "add") (param i32 i32) (result i32) local.get 0 local.get 1 i32.add)
  (func (export "scale") (param f64) (result f64) local.get 0 f64.const 2.5 f64.mul)
  (func (export "sum-f32") (param f32 f32) (result f32) local.get 0 local.get 1 f32.add)
  (func (export "noop"))
  (func (export "bump") (result i32) global.get $g i32.const 1 i32.add global.set $g global.get $g)
  (func (export "spin") (loop $l br $l))
  (func (export "grow") (result i32) i32.const 5 memory.grow))"#;

fn exports(names: &[(&str, &str)]) -> Vec<WasmExport> {
    names
        .iter()
        .map(|(w, a)| WasmExport {
            wasm: w.to_string(),
            as_name: a.to_string(),
        })
        .collect()
}

fn module(specifier: &str, wat: &str, contract: WasmContract) -> ResolvedModule {
    let bytes = wat::parse_str(wat).unwrap_or_else(|e| panic!("{e}"));
    ResolvedModule {
        specifier: specifier.into(),
        pack_name: specifier.into(),
        pack_version: None,
        content_digest: "a".repeat(64),
        module_id: "m.wasm".into(),
        graph: vec![GraphFile {
            id: "m.wasm".into(),
            internal: false,
            dependencies: vec![],
            content: FileContent::Wasm {
                bytes: Bytes::from(bytes),
            },
        }],
        kind: ResolvedKind::Wasm { wasm: contract },
    }
}

fn reference(limits: Option<WasmLimits>) -> ResolvedModule {
    module(
        "@acme/ref/scalar",
        REFERENCE,
        WasmContract {
            memory_pages_max: 2,
            exports: exports(&[
                ("add", "add"),
                ("scale", "scale"),
                ("sum-f32", "sumF32"),
                ("noop", "noop"),
                ("bump", "bump"),
                ("spin", "spin"),
                ("grow", "grow"),
            ]),
            limits,
        },
    )
}

fn host() -> Arc<WasmHost> {
    WasmHost::new().unwrap_or_else(|e| panic!("{e:?}"))
}

fn dispatcher(host: &Arc<WasmHost>, modules: Vec<ResolvedModule>) -> Arc<WasmDispatcher> {
    host.dispatcher_for(&Resolution {
        modules,
        statuses: vec![],
    })
    .unwrap_or_else(|e| panic!("{e:?}"))
    .unwrap_or_else(|| panic!("no dispatcher"))
}

fn wait(f: DispatchFuture) -> Result<Value, String> {
    let mut f = f;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
            return v.map_err(|e| e.message);
        }
        assert!(Instant::now() < deadline, "call never settled");
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn far() -> Instant {
    Instant::now() + Duration::from_secs(60)
}

fn n(v: f64) -> Value {
    Value::Number(v)
}

#[test]
fn scalar_round_trips_and_statelessness() {
    let host = host();
    let d = dispatcher(&host, vec![reference(None)]);
    let call = |e: &str, args: Vec<Value>| wait(d.call("@acme/ref/scalar", e, args, far()));
    assert_eq!(call("add", vec![n(2.0), n(40.0)]), Ok(n(42.0)));
    assert_eq!(call("add", vec![n(-5.0), n(3.0)]), Ok(n(-2.0)));
    assert_eq!(call("scale", vec![n(4.0)]), Ok(n(10.0)));
    assert_eq!(call("sumF32", vec![n(0.5), n(0.25)]), Ok(n(0.75)));
    assert_eq!(call("noop", vec![]), Ok(Value::Undefined));
    let bumps: Vec<_> = (0..3).map(|_| call("bump", vec![])).collect();
    assert_eq!(
        bumps,
        vec![Ok(n(1.0)), Ok(n(1.0)), Ok(n(1.0))],
        "a fresh instance per call"
    );
    assert_eq!(call("scale", vec![n(f64::INFINITY)]), Ok(n(f64::INFINITY)));
    // Memory growth past the declared maximum fails inside the module (memory.grow returns -1).
    assert_eq!(call("grow", vec![]), Ok(n(-1.0)));
}

#[test]
fn arguments_are_converted_exactly() {
    let host = host();
    let d = dispatcher(&host, vec![reference(None)]);
    let call = |e: &str, args: Vec<Value>| {
        wait(d.call("@acme/ref/scalar", e, args, far()))
            .err()
            .unwrap_or_default()
    };
    assert_eq!(
        call("add", vec![n(2147483648.0), n(1.0)]),
        "@acme/ref/scalar: add argument 1 expects i32 in the range -2147483648…2147483647, received 2147483648"
    );
    assert_eq!(
        call("add", vec![n(1.5), n(1.0)]),
        "@acme/ref/scalar: add argument 1 expects i32, received the non-integer 1.5"
    );
    assert_eq!(
        call("add", vec![Value::String("2".into()), n(1.0)]),
        "@acme/ref/scalar: add argument 1 expects i32, received a string value"
    );
    assert_eq!(
        call("add", vec![n(1.0)]),
        "@acme/ref/scalar: add takes 2 arguments, received 1"
    );
    assert_eq!(
        call("scale", vec![]),
        "@acme/ref/scalar: scale takes 1 argument, received 0"
    );
    assert_eq!(
        call("add", vec![n(f64::NAN), n(1.0)]),
        "@acme/ref/scalar: add argument 1 expects i32, received NaN"
    );
    assert_eq!(
        call("sum-f32", vec![]),
        "@acme/ref/scalar has no export named \"sum-f32\""
    );
    assert_eq!(
        wait(d.call("@acme/forged", "add", vec![], far()))
            .err()
            .unwrap_or_default(),
        "\"@acme/forged\" is not a WASM sandbox module this run serves"
    );
}

#[test]
fn a_runaway_call_is_stopped_and_the_next_one_works() {
    let host = host();
    let d = dispatcher(
        &host,
        vec![reference(Some(WasmLimits {
            call_timeout_ms: Some(100),
            ..WasmLimits::default()
        }))],
    );
    let started = Instant::now();
    let e = wait(d.call("@acme/ref/scalar", "spin", vec![], far()))
        .err()
        .unwrap_or_default();
    assert!(e.contains("exceeded its 100 ms per-call timeout"), "{e}");
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(
        wait(d.call("@acme/ref/scalar", "add", vec![n(40.0), n(2.0)], far())),
        Ok(n(42.0))
    );
}

#[test]
fn the_call_budget_binds_and_can_be_lowered() {
    let host = host();
    let d = dispatcher(
        &host,
        vec![reference(Some(WasmLimits {
            calls_per_invocation: Some(2),
            ..WasmLimits::default()
        }))],
    );
    assert!(wait(d.call("@acme/ref/scalar", "noop", vec![], far())).is_ok());
    // Argument errors are refused before the call is counted, as the reference does.
    assert!(wait(d.call("@acme/ref/scalar", "add", vec![n(1.0)], far())).is_err());
    assert!(wait(d.call("@acme/ref/scalar", "noop", vec![], far())).is_ok());
    let e = wait(d.call("@acme/ref/scalar", "noop", vec![], far()))
        .err()
        .unwrap_or_default();
    assert_eq!(
        e,
        "@acme/ref/scalar: this node exhausted its budget of 2 WASM calls per invocation"
    );
    let d = dispatcher(&host, vec![reference(None)]);
    for _ in 0..256 {
        assert!(wait(d.call("@acme/ref/scalar", "noop", vec![], far())).is_ok());
    }
    assert!(
        wait(d.call("@acme/ref/scalar", "noop", vec![], far()))
            .err()
            .unwrap_or_default()
            .contains("budget of 256 WASM calls")
    );
}

#[test]
fn the_wall_clock_budget_is_charged_and_a_call_only_gets_what_is_left() {
    let host = host();
    let limits = WasmLimits {
        call_timeout_ms: Some(300),
        wall_clock_ms: Some(400),
        ..WasmLimits::default()
    };
    let d = dispatcher(&host, vec![reference(Some(limits))]);
    // The first spin reserves its whole 300 ms timeout; the second can only reserve what is
    // left of the 400 ms (at most 100 ms, less when the first overran its tick); then nothing
    // is left.
    let a = wait(d.call("@acme/ref/scalar", "spin", vec![], far()))
        .err()
        .unwrap_or_default();
    assert!(a.contains("exceeded its 300 ms"), "{a}");
    let b = wait(d.call("@acme/ref/scalar", "spin", vec![], far()))
        .err()
        .unwrap_or_default();
    let ms: u64 = b
        .split("exceeded its ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(u64::MAX);
    // On a loaded machine the first call can overrun its tick by 100 ms or more and leave
    // nothing, so the second is then refused by the budget itself.
    assert!(
        (1..=100).contains(&ms) || b.contains("budget of 400 ms"),
        "{b}"
    );
    let e = wait(d.call("@acme/ref/scalar", "noop", vec![], far()))
        .err()
        .unwrap_or_default();
    assert_eq!(
        e,
        "@acme/ref/scalar: this node exhausted its budget of 400 ms of WASM wall clock per invocation"
    );
}

#[test]
fn a_call_never_runs_past_the_runs_deadline() {
    let host = host();
    let d = dispatcher(&host, vec![reference(None)]);
    let started = Instant::now();
    let e = wait(d.call(
        "@acme/ref/scalar",
        "spin",
        vec![],
        Instant::now() + Duration::from_millis(150),
    ))
    .err()
    .unwrap_or_default();
    assert!(e.contains("per-call timeout"), "{e}");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "the 5 s call timeout was clamped to the run's deadline"
    );
}

#[test]
fn the_binary_is_checked_again_before_first_use() {
    let host = host();
    /// (case, WAT, memoryPagesMax, exports as (wasm, as), expected reason)
    type Case<'a> = (&'a str, &'a str, u32, &'a [(&'a str, &'a str)], &'a str);
    let cases: &[Case<'_>] = &[
        (
            "import",
            r#"(module (import "env" "f" (func)) (func (export "a")))"#,
            1,
            &[("a", "a")],
            "imports are not allowed",
        ),
        (
            "i64",
            r#"(module (func (export "a") (param i64)))"#,
            1,
            &[("a", "a")],
            "uses i64",
        ),
        (
            "v128",
            r#"(module (func (export "a") (param v128)))"#,
            1,
            &[("a", "a")],
            "v128",
        ),
        (
            "ref",
            r#"(module (func (export "a") (param externref)))"#,
            1,
            &[("a", "a")],
            "reference type",
        ),
        (
            "multi",
            r#"(module (func (export "a") (result i32 i32) i32.const 1 i32.const 2))"#,
            1,
            &[("a", "a")],
            "multi-value",
        ),
        (
            "arity",
            r#"(module (func (export "a") (param i32 i32 i32 i32 i32 i32 i32 i32 i32)))"#,
            1,
            &[("a", "a")],
            "9 parameters",
        ),
        (
            "no max",
            r#"(module (memory 1) (func (export "a")))"#,
            1,
            &[("a", "a")],
            "declares no maximum",
        ),
        (
            "shared",
            r#"(module (memory 1 1 shared) (func (export "a")))"#,
            1,
            &[("a", "a")],
            "shared",
        ),
        (
            "over manifest",
            r#"(module (memory 1 8) (func (export "a")))"#,
            2,
            &[("a", "a")],
            "above the manifest",
        ),
        (
            "over host",
            r#"(module (memory 1 5000) (func (export "a")))"#,
            4096,
            &[("a", "a")],
            "host ceiling",
        ),
        (
            "memory export",
            r#"(module (memory (export "m") 1 1))"#,
            1,
            &[("m", "m")],
            "is a memory, not a function",
        ),
        (
            "missing",
            r#"(module (func (export "a")))"#,
            1,
            &[("b", "b")],
            "missing from the binary",
        ),
    ];
    for (name, wat, pages, names, expected) in cases {
        let m = module(
            "@acme/bad",
            wat,
            WasmContract {
                memory_pages_max: *pages,
                exports: exports(names),
                limits: None,
            },
        );
        let e = host
            .dispatcher_for(&Resolution {
                modules: vec![m],
                statuses: vec![],
            })
            .err()
            .map(|e| e.0)
            .unwrap_or_default();
        assert!(
            e.contains(expected) && e.starts_with("@acme/bad: "),
            "{name}: {e}"
        );
    }
}
