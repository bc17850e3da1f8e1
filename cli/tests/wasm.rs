//! WASM modules through `nodetool run`: a pack with a scalar WASM module imports and runs, each
//! argument error and budget reaches the body as a catchable error, and the bridge is private.

use std::fs;
use std::path::Path;

use nodetool_tests::world::World;
use serde_json::Value;

const REFERENCE: &str = r#"(module
  (memory 1 2)
  (global $g (mut i32) (i32.const 0))
  (func (export "add") (param i32 i32) (result i32) local.get 0 local.get 1 i32.add)
  (func (export "scale") (param f64) (result f64) local.get 0 f64.const 2.5 f64.mul)
  (func (export "sum-f32") (param f32 f32) (result f32) local.get 0 local.get 1 f32.add)
  (func (export "noop"))
  (func (export "bump") (result i32) global.get $g i32.const 1 i32.add global.set $g global.get $g)
  (func (export "spin") (loop $l br $l)))"#;

/// A temp root holding `@acme/ref` with module `scalar` under the given limits.
fn pack_root(limits: &str) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let dir = tmp.path().join("@acme/ref");
    fs::create_dir_all(dir.join("sandbox")).unwrap_or_else(|e| panic!("{e}"));
    fs::write(
        dir.join("sandbox/ref.wasm"),
        wat::parse_str(REFERENCE).unwrap_or_else(|e| panic!("{e}")),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let manifest = format!(
        r#"{{ "name": "@acme/ref", "version": "1.0.0", "nodetool": {{ "sandboxModules": [
            {{ "name": "scalar", "kind": "wasm", "file": "sandbox/ref.wasm", "memoryPagesMax": 2,
               "exports": ["add", "scale", {{ "wasm": "sum-f32", "as": "sumF32" }}, "noop", "bump", "spin"]{limits} }}
        ] }} }}"#
    );
    fs::write(dir.join("package.json"), manifest).unwrap_or_else(|e| panic!("{e}"));
    tmp
}

fn run(root: &Path, code: &str) -> (Value, i32) {
    let world = World::new();
    let output = nodetool(&world, root, code);
    let text = String::from_utf8_lossy(&output.stdout);
    let json: Value = serde_json::from_str(text.trim())
        .unwrap_or_else(|e| panic!("{e}: {text} / {}", String::from_utf8_lossy(&output.stderr)));
    (json, output.status.code().unwrap_or(-1))
}

/// `nodetool run --json --packs ROOT` in `world` (an empty shipped root), the body on stdin.
fn nodetool(world: &World, root: &Path, code: &str) -> std::process::Output {
    assert_cmd::Command::from_std(world.command(env!("CARGO_BIN_EXE_nodetool")))
        .args(["run", "--json", "--packs"])
        .arg(root)
        .write_stdin(code)
        .output()
        .unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn round_trips_through_the_facade() {
    let root = pack_root("");
    let (out, code) = run(
        root.path(),
        "import { add, scale, sumF32, noop, bump } from '@acme/ref/scalar';\nreturn [await add(2, 40), await scale(4), await sumF32(0.5, 0.25), await noop(), [await bump(), await bump(), await bump()].join(','), await add(-5, 3)];",
    );
    assert_eq!(code, 0, "{out}");
    assert_eq!(
        out["result"],
        serde_json::json!([42, 10, 0.75, null, "1,1,1", -2])
    );
}

#[test]
fn argument_errors_are_catchable_and_named() {
    let root = pack_root("");
    let (out, _) = run(
        root.path(),
        "import { add } from '@acme/ref/scalar';\nconst m = async (f) => { try { await f(); return 'ok' } catch (e) { return e.message } };\nreturn [await m(() => add(2147483648, 1)), await m(() => add(1.5, 1)), await m(() => add('2', 1)), await m(() => add(1))];",
    );
    let messages: Vec<String> = out["result"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|v| v.as_str().unwrap_or_default().to_string())
                .collect()
        })
        .unwrap_or_default();
    assert!(
        messages[0].contains("expects i32 in the range"),
        "{messages:?}"
    );
    assert!(
        messages[1].contains("expects i32, received the non-integer 1.5"),
        "{messages:?}"
    );
    assert!(
        messages[2].contains("expects i32, received a string value"),
        "{messages:?}"
    );
    assert!(
        messages[3].contains("takes 2 arguments, received 1"),
        "{messages:?}"
    );
    // Uncaught, a WASM error is the run's typed outcome.
    let (out, code) = run(
        root.path(),
        "import { add } from '@acme/ref/scalar';\nawait add(1);",
    );
    assert_eq!(code, 1);
    assert_eq!(out["error"]["code"], "wasm-error");
}

#[test]
fn a_per_call_timeout_then_a_working_call() {
    let root = pack_root(r#", "limits": { "callTimeoutMs": 200 }"#);
    let (out, code) = run(
        root.path(),
        "import { spin, add } from '@acme/ref/scalar';\nlet first; try { await spin() } catch (e) { first = e.message }\nreturn [first, await add(40, 2)];",
    );
    assert_eq!(code, 0, "{out}");
    assert!(
        out["result"][0]
            .as_str()
            .is_some_and(|m| m.contains("exceeded its 200 ms per-call timeout")),
        "{out}"
    );
    assert_eq!(out["result"][1], 42);
}

#[test]
fn call_budgets_standard_and_lowered() {
    let root = pack_root("");
    let (out, _) = run(
        root.path(),
        "import { noop } from '@acme/ref/scalar';\nlet n = 0; try { for (;;) { await noop(); n++ } } catch (e) { return [n, e.message] }",
    );
    assert_eq!(out["result"][0], 256, "{out}");
    assert!(
        out["result"][1]
            .as_str()
            .is_some_and(|m| m.contains("budget of 256 WASM calls per invocation")),
        "{out}"
    );
    let lowered = pack_root(r#", "limits": { "callsPerInvocation": 3 }"#);
    let (out, _) = run(
        lowered.path(),
        "import { noop } from '@acme/ref/scalar';\nlet n = 0; try { for (;;) { await noop(); n++ } } catch (e) { return [n, e.message] }",
    );
    assert_eq!(out["result"][0], 3, "{out}");
}

#[test]
fn the_wall_clock_budget_holds_under_concurrent_calls() {
    let root = pack_root(r#", "limits": { "callTimeoutMs": 300, "wallClockMs": 400 }"#);
    let (out, code) = run(
        root.path(),
        "import { spin, noop } from '@acme/ref/scalar';\nconst r = await Promise.allSettled([spin(), spin()]);\nlet after; try { await noop() } catch (e) { after = e.message }\nreturn [r.map(x => x.reason.message).sort(), after];",
    );
    assert_eq!(code, 0, "{out}");
    // The first call reserves its 300 ms; the second gets only what is left of the 400 ms (on a
    // loaded machine the first may overrun its tick and leave nothing, so the second is then
    // refused by the budget itself).
    let reasons = out["result"][0].to_string();
    assert!(reasons.contains("exceeded its 300 ms"), "{out}");
    assert!(
        reasons.matches("per-call timeout").count() == 2 || reasons.contains("budget of 400 ms"),
        "{out}"
    );
    assert!(
        out["result"][1]
            .as_str()
            .is_some_and(|m| m.contains("budget of 400 ms of WASM wall clock")),
        "{out}"
    );
}

#[test]
fn the_bridge_is_private() {
    let root = pack_root("");
    let (out, code) = run(
        root.path(),
        "import { __call } from 'nodetool:wasm-bridge';\nreturn 1;",
    );
    assert_eq!(code, 1);
    assert!(
        out["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("private to the sandbox's generated WASM facades")),
        "{out}"
    );
    let (out, _) = run(
        root.path(),
        "import { add } from '@acme/ref/scalar';\nreturn [typeof __nodetoolWasmDispatch, typeof __wasmCall, typeof __call];",
    );
    assert_eq!(
        out["result"],
        serde_json::json!(["undefined", "undefined", "undefined"])
    );
}

/// Runs `code` in `world` (whose cache keeps the compiled artifacts between runs).
fn run_in(world: &World, root: &Path, code: &str) -> Value {
    let output = nodetool(world, root, code);
    let text = String::from_utf8_lossy(&output.stdout);
    serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// The artifact files under `world`'s cache.
fn artifacts(world: &World) -> Vec<std::path::PathBuf> {
    let dir = world.cache().join("nodetool/wasm-artifacts");
    let mut files: Vec<_> = fs::read_dir(dir)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    files.sort();
    files
}

#[test]
fn compiled_modules_are_kept_between_runs_and_a_corrupt_one_is_evicted() {
    use sha2::{Digest as _, Sha256};
    let root = pack_root("");
    let world = World::new();
    let code = "import { add } from '@acme/ref/scalar';\nreturn await add(40, 2);";
    assert_eq!(run_in(&world, root.path(), code)["result"], 42);
    // A compile worker (a fresh one that runs no guest code) compiled the module and handed it
    // back; the CLI kept it, digest first. Artifacts from a worker that ran a body never are.
    let files = artifacts(&world);
    assert_eq!(files.len(), 1, "{files:?}");
    assert!(files[0].extension().is_some_and(|e| e == "cwasm"));
    let valid =
        |bytes: &[u8]| bytes.len() > 32 && Sha256::digest(&bytes[32..]).as_slice() == &bytes[..32];
    let kept = fs::read(&files[0]).unwrap_or_else(|e| panic!("{e}"));
    assert!(valid(&kept));
    // A second run loads it: nothing was recompiled, so nothing was written (a write lands by
    // rename, as a new inode).
    use std::os::unix::fs::MetadataExt as _;
    let inode = |p: &Path| fs::metadata(p).map(|m| m.ino()).unwrap_or(0);
    let before = inode(&files[0]);
    assert_eq!(run_in(&world, root.path(), code)["result"], 42);
    assert_eq!(inode(&files[0]), before, "the artifact was written again");
    // A corrupt entry is never handed to a worker: it is evicted, the module compiles again,
    // and a valid entry replaces it.
    let mut corrupt = kept.clone();
    let last = corrupt.len() - 1;
    corrupt[last] ^= 0xff;
    fs::write(&files[0], &corrupt).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(run_in(&world, root.path(), code)["result"], 42);
    let rewritten = fs::read(&files[0]).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        valid(&rewritten),
        "the entry was not replaced by a valid one"
    );
    // An entry that is not an artifact at all (right digest, wrong bytes) is refused by the
    // engine and recompiled, never a crash.
    let junk = b"not a compiled module".to_vec();
    let mut forged = Sha256::digest(&junk).to_vec();
    forged.extend_from_slice(&junk);
    fs::write(&files[0], &forged).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(run_in(&world, root.path(), code)["result"], 42);
    assert!(valid(&fs::read(&files[0]).unwrap_or_default()));
}
