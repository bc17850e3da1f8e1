//! `nodetool run` runs every body in a sandbox worker process the CLI can always stop: bodies
//! that no cooperative check can interrupt still end at their deadline plus the grace, a worker
//! that dies is `sandbox-crashed`, and the worker's memory ceiling holds for everything it
//! allocates.
//!
//! Each invocation runs in a fresh world of the harness (`nodetool_tests::world`: its own home,
//! XDG and temporary directories, nothing of the caller's environment) with the repo's shipped
//! packs.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nodetool_tests::world::{World, must, shipped_packs};
use serde_json::Value;

/// A fresh world (the harness's) for invocations against the repo's shipped packs.
struct Home(World);

impl Home {
    fn new() -> Home {
        Home(World::with_shipped(shipped_packs()))
    }

    /// The working directory (bodies and workspaces go here).
    fn path(&self) -> PathBuf {
        self.0.work()
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut command = self.0.command(env!("CARGO_BIN_EXE_nodetool"));
        command.args(args);
        command
    }

    fn body(&self, name: &str, code: &str) -> PathBuf {
        self.0.write(name, code)
    }
}

/// One `nodetool run --json` of `code`: its JSON answer and how long the whole command took.
fn run_json(code: &str, extra: &[&str]) -> (Value, Duration) {
    let home = Home::new();
    let body = home.body("body.js", code);
    let body = body.to_string_lossy().into_owned();
    let mut args = vec!["run", body.as_str(), "--json"];
    args.extend_from_slice(extra);
    let started = Instant::now();
    let out = must(home.command(&args).output(), "run nodetool");
    let elapsed = started.elapsed();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let answer: Value = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
        panic!(
            "not one JSON answer ({e}): {stdout}\nstderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (answer, elapsed)
}

fn code_of(answer: &Value) -> &str {
    answer["error"]["code"].as_str().unwrap_or("ok")
}

/// The bound a run with a 1,000 ms deadline must end within, as a whole command: the deadline,
/// the 100 ms grace, and generous room for starting an unoptimized binary and its worker on a
/// shared machine. Today's main ran each of these for minutes.
const ONE_SECOND_RUN_BOUND: Duration = Duration::from_secs(6);

#[test]
fn bodies_stuck_in_engine_builtins_end_at_their_deadline() {
    let bodies = [
        "const a = []; a.length = 2 ** 32 - 1; return a.reverse().length;",
        "const a = []; a.length = 2 ** 32 - 1; return a.join(',').length;",
        "const a = []; a.length = 2 ** 32 - 1; return a.copyWithin(0, 1).length;",
        "return Array.prototype.join.call({ length: 2 ** 53 - 1 }).length;",
        // BigInt conversions: decimal text to BigInt and back, each quadratic in C.
        "const x = BigInt('7'.repeat(300000)); const y = BigInt('9'.repeat(300000)); return (x.toString() + y.toString()).length;",
        // A slow host call repeated in a loop must not multiply the deadline.
        "const s = 'x'.repeat(30e6); for (;;) console.log(s);",
    ];
    for code in bodies {
        let (answer, elapsed) = run_json(code, &["--timeout-ms", "1000"]);
        assert_eq!(code_of(&answer), "timeout", "{code}: {answer}");
        assert!(
            elapsed < ONE_SECOND_RUN_BOUND,
            "{code}: took {elapsed:?} under a 1 s deadline"
        );
    }
}

#[test]
fn a_quadratic_host_call_ends_at_the_deadline() {
    let code = r#"
import { unified } from "@nodetool-ai/sandbox-diff";
// One shared line, so the diff has to search (texts sharing none are answered at once).
const a = "same\n" + Array.from({ length: 40000 }, (_, i) => "a" + i).join("\n");
const b = "same\n" + Array.from({ length: 40000 }, (_, i) => "b" + i).join("\n");
return (await unified(a, b)).length;
"#;
    let (answer, elapsed) = run_json(code, &["--timeout-ms", "1000"]);
    assert_eq!(code_of(&answer), "timeout", "{answer}");
    assert!(elapsed < ONE_SECOND_RUN_BOUND, "took {elapsed:?}");
}

#[test]
fn a_result_computed_after_the_deadline_is_never_ok() {
    let code = "Error.prepareStackTrace = () => { for (;;); };\nreturn new Error('x').stack;";
    let (answer, elapsed) = run_json(code, &["--timeout-ms", "1000"]);
    assert_ne!(answer["ok"], Value::Bool(true), "{answer}");
    assert!(elapsed < ONE_SECOND_RUN_BOUND, "took {elapsed:?}");
}

#[test]
fn the_worker_ceiling_bounds_what_a_run_allocates() {
    // A 20 MB string fits the guest's 64 MiB heap but not a 16 MiB worker ceiling: the engine's
    // allocation fails cleanly and the run says so.
    let guest = "const s = 'x'.repeat(20e6); return (s + 'y').length;";
    let (answer, _) = run_json(guest, &["--worker-memory-mb", "16"]);
    assert_eq!(code_of(&answer), "memory-limit", "{answer}");
    // A 7 MB result fits the guest, but its copies on the host side (the value, its packed
    // form) do not fit the ceiling: the host's allocation fails, the worker dies, and the run
    // is still `memory-limit`, not a crash of the front end.
    let host = "return 'x'.repeat(7e6);";
    let (answer, _) = run_json(host, &["--worker-memory-mb", "16"]);
    assert_eq!(code_of(&answer), "memory-limit", "{answer}");
    // The same bodies under the standard ceiling run.
    let (answer, _) = run_json(guest, &[]);
    assert_eq!(answer["result"], Value::from(20_000_001), "{answer}");
    let (answer, _) = run_json(host, &[]);
    assert_eq!(answer["result"].as_str().map(str::len), Some(7_000_000));
}

#[test]
fn a_ten_million_deep_object_chain_is_memory_limit() {
    let (answer, elapsed) = run_json(
        "let o = null; for (let i = 0; i < 1e7; i++) o = { o }; return 1;",
        &[],
    );
    assert_eq!(code_of(&answer), "memory-limit", "{answer}");
    assert!(elapsed < Duration::from_secs(30), "took {elapsed:?}");
}

#[test]
fn a_workspace_write_loop_stops_at_the_runs_quota() {
    let home = Home::new();
    let workspace = home.path().join("workspace");
    must(fs::create_dir_all(&workspace), "create the workspace");
    let body = home.body(
        "write.js",
        "const big = 'x'.repeat(8 * 1024 * 1024);
for (let i = 0; ; i++) await workspace.writeText('f' + i, big);",
    );
    let out = must(
        home.command(&[
            "run",
            &body.to_string_lossy(),
            "--json",
            "--workspace",
            &workspace.to_string_lossy(),
        ])
        .output(),
        "run nodetool",
    );
    let answer: Value = must(serde_json::from_slice(&out.stdout), "read the answer");
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("write quota (256 MiB)"), "{answer}");
    let written: u64 = fs::read_dir(&workspace)
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0);
    assert!(written <= 256 * 1024 * 1024, "{written} bytes on disk");
}

#[test]
fn a_body_nested_too_deeply_to_parse_is_an_answer_not_an_abort() {
    // The word `import` sends the body to the parser (here in a worker); 20,000 levels
    // overflowed the parser's stack in the CLI's own process before.
    for code in [
        format!(
            "// import\nreturn {}1{};",
            "(".repeat(20_000),
            ")".repeat(20_000)
        ),
        format!("return {}1{};", "[".repeat(200_000), "]".repeat(200_000)),
    ] {
        let (answer, _) = run_json(&code, &[]);
        let code_of = code_of(&answer).to_string();
        assert!(
            ["stack-overflow", "syntax-error"].contains(&code_of.as_str()),
            "{answer}"
        );
    }
}

#[test]
fn forty_thousand_imports_are_read_in_linear_time() {
    let code = format!(
        "{}return 1;",
        "import '@nodetool-ai/sandbox-diff';\n".repeat(40_000)
    );
    let (answer, elapsed) = run_json(&code, &[]);
    assert_eq!(answer["result"], Value::from(1), "{answer}");
    // Quadratic position finding took about a minute for this body.
    assert!(elapsed < Duration::from_secs(20), "took {elapsed:?}");
}

#[test]
fn a_result_that_fans_out_one_string_is_refused_before_it_crosses() {
    // One 1 MB string referenced 100 times: 1 MB in the guest, 100 MB as a host value.
    let (answer, elapsed) = run_json(
        "const s = 'x'.repeat(1e6); return Array(100).fill(s);",
        &["--worker-memory-mb", "128"],
    );
    assert_eq!(code_of(&answer), "runtime-error", "{answer}");
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("67108864 bytes"), "{message}");
    assert!(elapsed < Duration::from_secs(10), "took {elapsed:?}");
}

/// The pids of `parent`'s child processes (from `/proc`).
fn children(parent: u32) -> Vec<u32> {
    let mut pids = Vec::new();
    let Ok(tasks) = fs::read_dir(format!("/proc/{parent}/task")) else {
        return pids;
    };
    for task in tasks.flatten() {
        if let Ok(list) = fs::read_to_string(task.path().join("children")) {
            pids.extend(
                list.split_whitespace()
                    .filter_map(|p| p.parse::<u32>().ok()),
            );
        }
    }
    pids
}

#[test]
fn a_worker_killed_by_sigsegv_mid_run_is_sandbox_crashed() {
    let home = Home::new();
    let body = home.body("spin.js", "for (;;) {}");
    let child = home
        .command(&[
            "run",
            &body.to_string_lossy(),
            "--json",
            "--timeout-ms",
            "20000",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let child = must(child, "start nodetool");
    let started = Instant::now();
    // Wait for the worker, then signal it until it dies: the Rust runtime's stack-overflow
    // handler swallows the first SIGSEGV that is not a fault (it resets to the default action
    // and returns), exactly as a real fault would then re-fault under the default action.
    let mut workers = Vec::new();
    while workers.is_empty() && started.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(50));
        workers = children(child.id());
    }
    assert!(!workers.is_empty(), "no worker process appeared");
    std::thread::sleep(Duration::from_millis(300));
    for _ in 0..20 {
        for pid in &workers {
            let _ = Command::new("kill")
                .args(["-SEGV", &pid.to_string()])
                .status();
        }
        if workers.iter().all(|pid| {
            !Path::new(&format!("/proc/{pid}/cmdline")).exists()
                || fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| s.contains(") Z "))
        }) {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = must(child.wait_with_output(), "wait for nodetool");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the run was not ended by its worker's death"
    );
    let answer: Value = must(serde_json::from_slice(&out.stdout), "read the JSON answer");
    assert_eq!(code_of(&answer), "sandbox-crashed", "{answer}");
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("SIGSEGV"), "{message}");
    assert_eq!(out.status.code(), Some(1));
    // The next run gets a fresh worker and succeeds.
    let (answer, _) = run_json("return 40 + 2;", &[]);
    assert_eq!(answer["result"], Value::from(42), "{answer}");
}

#[test]
fn in_process_is_a_debugging_switch_that_says_what_it_cannot_enforce() {
    let home = Home::new();
    let body = home.body("one.js", "return 1;");
    let out = must(
        home.command(&["run", &body.to_string_lossy(), "--in-process"])
            .output(),
        "run nodetool",
    );
    // Alone it is refused: it gives up the worker's confinement as well.
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--allow-unconfined"), "{stderr}");
    let out = must(
        home.command(&[
            "run",
            &body.to_string_lossy(),
            "--in-process",
            "--allow-unconfined",
        ])
        .output(),
        "run nodetool",
    );
    assert_eq!(out.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("holds only while the engine cooperates"),
        "{stderr}"
    );
    // A worker run says nothing of the kind.
    let out = must(
        home.command(&["run", &body.to_string_lossy()]).output(),
        "run nodetool",
    );
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
}

#[test]
fn codeact_step_runs_through_the_same_runner() {
    let home = Home::new();
    let body = home.body("step.js", "console.log('seen'); return 6 * 7;");
    let out = must(
        home.command(&["codeact", "step", &body.to_string_lossy(), "--json"])
            .output(),
        "run nodetool",
    );
    let answer: Value = must(serde_json::from_slice(&out.stdout), "read the answer");
    assert_eq!(answer["ok"], Value::Bool(true), "{answer}");
    assert_eq!(answer["observation"], Value::from("seen\n42"));
    // A bad worker flag is a usage error, like any other.
    let out = must(
        home.command(&[
            "codeact",
            "step",
            &body.to_string_lossy(),
            "--worker-memory-mb",
            "1",
        ])
        .output(),
        "run nodetool",
    );
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--worker-memory-mb must be between 16"),
        "{stderr}"
    );
}
