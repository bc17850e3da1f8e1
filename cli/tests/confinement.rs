//! Sandbox workers are confined (Linux): a real worker, started as `nodetool run` starts one,
//! cannot open a file, make a socket or start a process, yet still runs bodies, host modules,
//! WASM and the brokered capabilities; a worker that cannot be confined is refused unless the
//! operator allows it.
//!
//! The probes use a debug-only order (`ToWorker::Probe`), compiled out of release builds.

#![cfg(target_os = "linux")]

use std::fs;
use std::path::PathBuf;

use nodetool_frontend::worker::{WorkerOptions, WorkerPool};
use nodetool_tests::world::{World, fixture_packs, must, shipped_packs};
use serde_json::Value;

fn pool() -> WorkerPool {
    let options = WorkerOptions::standard(PathBuf::from(env!("CARGO_BIN_EXE_nodetool")), 1);
    must(WorkerPool::start(options), "start a confined worker")
}

#[test]
fn a_confined_worker_cannot_open_a_file_make_a_socket_or_start_a_process() {
    let pool = pool();
    for operation in ["open", "socket", "spawn"] {
        let outcome = must(pool.probe(operation), "probe the worker");
        let refusal = match outcome {
            Ok(got) => panic!("{operation} succeeded in a confined worker: {got}"),
            Err(refusal) => refusal,
        };
        assert!(
            refusal.contains("Operation not permitted") || refusal.contains("os error 1"),
            "{operation}: {refusal}"
        );
    }
    eprintln!("landlock in force: {}", pool.landlock());
    // What computing needs still works: a thread, and the worker is alive after every refusal.
    assert_eq!(
        must(pool.probe("thread"), "probe a thread"),
        Ok("a thread answered 42".to_string())
    );
}

/// A fresh world (the harness's) for `nodetool` invocations against the repo's shipped packs.
struct Home(World);

impl Home {
    fn new() -> Home {
        Home(World::with_shipped(shipped_packs()))
    }

    fn path(&self) -> PathBuf {
        self.0.work()
    }

    fn run(&self, code: &str, extra: &[&str], env: &[(&str, &str)]) -> (Value, String) {
        let body = self.0.write("body.js", code);
        let mut command = self.0.command(env!("CARGO_BIN_EXE_nodetool"));
        command.arg("run").arg(&body).arg("--json").args(extra);
        for (name, value) in env {
            command.env(name, value);
        }
        let out = must(command.output(), "run nodetool");
        let answer = must(serde_json::from_slice(&out.stdout), "read the answer");
        (answer, String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

#[test]
fn a_confined_worker_still_runs_host_modules_wasm_and_brokered_capabilities() {
    let home = Home::new();
    let workspace = home.path().join("ws");
    must(fs::create_dir_all(&workspace), "create the workspace");
    must(
        fs::write(workspace.join("in.csv"), "a,b\n1,2\n"),
        "write in.csv",
    );
    let code = r#"
import { parse } from "@nodetool-ai/sandbox-csv";
import * as zip from "@nodetool-ai/sandbox-zip";
import { add } from "@fixture/wasm-scalar";
const sum = await add(40, 2);
const rows = await parse(await workspace.readText("in.csv"));
const archive = await zip.zip({ "rows.json": JSON.stringify(rows) });
await workspace.writeBytes("rows.zip", archive);
const back = await zip.unzip(await workspace.readBytes("rows.zip"));
return { sum, rows, names: Object.keys(back), listed: (await workspace.list()).map((e) => e.name) };
"#;
    let fixtures = fixture_packs().join("installed-a");
    let fixtures = fixtures.to_string_lossy();
    let (answer, stderr) = home.run(
        code,
        &[
            "--workspace",
            &workspace.to_string_lossy(),
            "--packs",
            &fixtures,
        ],
        &[],
    );
    assert_eq!(answer["ok"], true, "{answer} {stderr}");
    assert_eq!(answer["result"]["sum"], 42);
    assert_eq!(
        answer["result"]["rows"],
        serde_json::json!([{ "a": "1", "b": "2" }])
    );
    assert_eq!(answer["result"]["names"], serde_json::json!(["rows.json"]));
    assert_eq!(
        answer["result"]["listed"],
        serde_json::json!(["in.csv", "rows.zip"])
    );
    assert!(workspace.join("rows.zip").is_file());
}

#[test]
fn a_worker_that_cannot_be_confined_is_refused_unless_the_operator_allows_it() {
    let home = Home::new();
    let (answer, _) = home.run("return 1;", &[], &[("NODETOOL_TEST_UNCONFINABLE", "1")]);
    assert_eq!(answer["ok"], false, "{answer}");
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("cannot be confined"), "{message}");
    assert!(message.contains("NODETOOL_ALLOW_UNCONFINED=1"), "{message}");

    let (answer, stderr) = home.run(
        "return 1;",
        &[],
        &[
            ("NODETOOL_TEST_UNCONFINABLE", "1"),
            ("NODETOOL_ALLOW_UNCONFINED", "1"),
        ],
    );
    assert_eq!(answer["result"], 1, "{answer}");
    assert!(
        stderr.contains("run unconfined"),
        "the warning is said once: {stderr}"
    );
}

#[test]
fn a_confined_worker_runs_every_contract_fixture() {
    use nodetool_frontend::worker::PoolRun;
    use nodetool_guest::{Capabilities, RunLimits};
    use nodetool_protocol::catalog::Resolution;
    use nodetool_protocol::value::Value;

    let pool = pool();
    let fixtures = nodetool_tests::contract::fixture_file().fixtures;
    assert!(fixtures.len() > 50, "{} fixtures", fixtures.len());
    let mut failed = Vec::new();
    for (n, fixture) in fixtures.iter().enumerate() {
        // The fixtures' modules carry placeholder digests, and a worker keeps the modules it
        // was sent by digest: each fixture's own (the catalog's digests are real).
        let modules = fixture
            .modules
            .iter()
            .cloned()
            .map(|mut m| {
                m.content_digest = format!("{n:064x}");
                m
            })
            .collect();
        let resolution = Resolution {
            modules,
            statuses: Vec::new(),
        };
        let inputs = fixture.inputs.clone().unwrap_or(Value::Null);
        let mut limits = RunLimits::STANDARD;
        if let Some(ms) = fixture.timeout_ms {
            limits.timeout = std::time::Duration::from_millis(ms);
        }
        let capabilities = Capabilities {
            secrets: fixture.secrets.clone(),
            authority: None,
        };
        let outcome = pool.run(PoolRun {
            code: &fixture.code,
            resolution: &resolution,
            inputs: &inputs,
            limits,
            capabilities: &capabilities,
            cancel: None,
        });
        if let Err(why) = nodetool_tests::contract::check_outcome(fixture, outcome.result) {
            failed.push(format!("{}: {why}", fixture.name));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

#[test]
fn a_worker_that_stops_reading_its_channel_still_ends_at_the_deadline() {
    use nodetool_frontend::worker::PoolRun;
    use nodetool_guest::broker::{RunAuthority, WorkspaceGrant};
    use nodetool_guest::{Capabilities, RunLimits};
    use nodetool_protocol::catalog::Resolution;
    use nodetool_protocol::value::Value;
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    let world = World::new();
    let root = world.dir("workspace");
    must(
        fs::write(root.join("big.bin"), vec![1u8; 4 * 1024 * 1024]),
        "write big.bin",
    );
    let pool = pool();
    // The next order is the last thing the worker reads: replies to its calls pile up in the
    // pipe until the supervisor's writes would block.
    assert!(must(pool.probe("stall-channel"), "stall the worker").is_ok());
    let capabilities = Capabilities {
        secrets: None,
        authority: Some(Arc::new(RunAuthority::new(
            Some(WorkspaceGrant::standard(&root)),
            None,
        ))),
    };
    let started = Instant::now();
    let outcome = pool.run(PoolRun {
        code: "return (await Promise.all([1, 2, 3, 4].map(() => workspace.readBytes('big.bin')))).length;",
        resolution: &Resolution::default(),
        inputs: &Value::Null,
        limits: RunLimits {
            timeout: Duration::from_millis(1000),
            ..RunLimits::STANDARD
        },
        capabilities: &capabilities,
        cancel: None,
    });
    let elapsed = started.elapsed();
    let error = match outcome.result {
        Ok(v) => panic!("the stalled run answered {v:?}"),
        Err(e) => e,
    };
    assert_eq!(error.code.as_str(), "timeout", "{error}");
    // The deadline plus the grace, not the stall's length (forever before the writes had one).
    assert!(elapsed < Duration::from_secs(10), "took {elapsed:?}");
}

#[test]
fn a_fetch_with_a_huge_header_object_is_refused_at_once_through_the_cli() {
    // 100,000 headers merged one by one took the supervisor minutes past a 1 s deadline.
    let home = Home::new();
    let code = r#"
const headers = {};
for (let i = 0; i < 100000; i++) headers["x-h" + i] = "";
try { await fetch("http://127.0.0.1:9/", { headers }); return "sent"; }
catch (e) { return String(e.message); }
"#;
    let started = std::time::Instant::now();
    let (answer, stderr) = home.run(
        code,
        &["--allow-fetch", "127.0.0.1", "--timeout-ms", "5000"],
        &[],
    );
    let elapsed = started.elapsed();
    let message = answer["result"].as_str().unwrap_or_default();
    assert!(message.contains("at most 256 headers"), "{answer} {stderr}");
    assert!(
        elapsed < std::time::Duration::from_secs(15),
        "took {elapsed:?}"
    );
}
