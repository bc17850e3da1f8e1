//! A real `nodetool-server` process on a free loopback port: it serves the shipped packs, logs
//! each request, and on SIGTERM finishes the request in flight before exiting 0.

mod support;

use std::io::{BufRead, BufReader, Read};
use std::process::Command;
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::{ServerProcess, World, must};

fn agent() -> ureq::Agent {
    ureq::Agent::new_with_config(
        ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(60)))
            .build(),
    )
}

/// Status, headers and body text of one answer.
fn read(response: ureq::http::Response<ureq::Body>) -> (u16, ureq::http::HeaderMap, String) {
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let mut body = response.into_body();
    let text = must(body.read_to_string(), "read a body");
    (status, headers, text)
}

fn post_run(base: &ServerProcess, body: &Value) -> (u16, Value) {
    let response = must(
        agent()
            .post(&base.url("/api/run"))
            .header("content-type", "application/json")
            .send(body.to_string()),
        "POST /api/run",
    );
    let (status, _, text) = read(response);
    (status, must(serde_json::from_str(&text), "run JSON"))
}

/// Forwards the child's stderr lines into a channel (and keeps the pipe drained).
fn stderr_lines(process: &mut ServerProcess) -> Receiver<String> {
    let stderr = process
        .child
        .stderr
        .take()
        .unwrap_or_else(|| panic!("no stderr pipe"));
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// Waits for a line containing `needle`, keeping every line read so far in `seen`.
fn wait_for(lines: &Receiver<String>, seen: &mut Vec<String>, needle: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !seen.iter().any(|l| l.contains(needle)) {
        let left = deadline.saturating_duration_since(Instant::now());
        match lines.recv_timeout(left) {
            Ok(line) => seen.push(line),
            Err(_) => panic!("no log line with {needle:?}; saw:\n{}", seen.join("\n")),
        }
    }
}

#[test]
fn a_server_process_serves_runs_and_modules_then_shuts_down_gracefully() {
    let world = World::shipped_packs();
    let mut server = ServerProcess::start(&world, &[]);
    let logs = stderr_lines(&mut server);
    let mut seen = Vec::new();

    let (status, _, text) = read(must(
        agent()
            .get(&server.url("/api/packs/sandbox-modules"))
            .call(),
        "GET the packs",
    ));
    assert_eq!(status, 200);
    let list: Value = must(serde_json::from_str(&text), "packs JSON");
    assert!(
        list["summaries"].as_array().is_some_and(|s| s
            .iter()
            .any(|m| m["specifier"] == "@nodetool-ai/sandbox-geo")),
        "{text}"
    );
    assert!(!text.contains(&world.shipped().display().to_string()));

    let (status, out) = post_run(
        &server,
        &json!({"code": "import { haversine } from \"@nodetool-ai/sandbox-geo\";\nreturn Math.round(haversine({lat: 48.8566, lon: 2.3522}, {lat: 51.5074, lon: -0.1278}));"}),
    );
    assert_eq!(status, 200);
    assert_eq!(out["ok"], json!(true), "{out}");
    assert_eq!(out["result"], json!(344));

    let module = must(
        agent()
            .get(&server.url("/api/sandbox-modules/@nodetool-ai/sandbox-geo"))
            .call(),
        "GET a module",
    );
    let (status, headers, _) = read(module);
    assert_eq!(status, 200);
    let etag = headers
        .get("etag")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let (status, _, body) = read(must(
        agent()
            .get(&server.url("/api/sandbox-modules/@nodetool-ai/sandbox-geo"))
            .header("if-none-match", &etag)
            .call(),
        "GET a module again",
    ));
    assert_eq!(status, 304);
    assert!(body.is_empty());

    // A request log line per request, structured.
    wait_for(&logs, &mut seen, "/api/run");
    let line = seen
        .iter()
        .find(|l| l.contains("/api/run"))
        .cloned()
        .unwrap_or_default();
    assert!(
        line.contains("status=200") && line.contains("method=POST"),
        "{line}"
    );

    // SIGTERM while a run is in flight: the run finishes and is answered, then the process
    // exits 0.
    // Only log lines from here on count: the earlier run was admitted too, and its line must
    // not be mistaken for this one's (that race sent SIGTERM before this request connected).
    seen.clear();
    let base = server.base.clone();
    let in_flight = std::thread::spawn(move || {
        let response = agent()
            .post(&format!("{base}/api/run"))
            .header("content-type", "application/json")
            .send(json!({"code": "while (true) {}", "timeoutMs": 1500}).to_string());
        response.map(read)
    });
    wait_for(&logs, &mut seen, "run admitted");
    server.terminate();
    let answered = in_flight
        .join()
        .unwrap_or_else(|_| panic!("the client thread panicked"));
    let (status, _, text) = must(answered, "the in-flight run");
    assert_eq!(status, 200);
    let out: Value = must(serde_json::from_str(&text), "run JSON");
    assert_eq!(out["error"]["code"], json!("timeout"));
    let deadline = Instant::now() + Duration::from_secs(20);
    let exit = loop {
        if let Some(status) = must(server.child.try_wait(), "poll the process") {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "the server did not exit after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(exit.success(), "exit status {exit}");
    wait_for(&logs, &mut seen, "shutting down");
}

#[test]
fn a_missing_pack_root_is_a_configuration_error() {
    let world = World::empty();
    let missing = world.tmp.path().join("missing");
    let output = must(
        world
            .server_command()
            .args(["--port", "0", "--packs"])
            .arg(&missing)
            .output(),
        "run nodetool-server",
    );
    assert_eq!(output.status.code(), Some(2));
    assert!(output.stdout.is_empty(), "it must not claim to listen");
    let mut stderr = String::new();
    let _ = output.stderr.as_slice().read_to_string(&mut stderr);
    assert!(
        stderr.contains("does not exist or is not a directory"),
        "{stderr}"
    );
}

/// CPU seconds a process has used (user + system, from `/proc/<pid>/stat`).
fn cpu_seconds(pid: u32) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0.0;
    };
    // Fields after the command name (which may hold spaces) start after the last ')'.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or("", |(_, rest)| rest)
        .split_whitespace()
        .collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // utime and stime are fields 14 and 15 of the whole line, 12 and 13 after the name.
    (ticks(11) + ticks(12)) / 100.0
}

/// The server's process and its workers.
fn process_tree(pid: u32) -> Vec<u32> {
    let mut pids = vec![pid];
    if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for task in tasks.flatten() {
            if let Ok(list) = std::fs::read_to_string(task.path().join("children")) {
                pids.extend(
                    list.split_whitespace()
                        .filter_map(|p| p.parse::<u32>().ok()),
                );
            }
        }
    }
    pids
}

#[test]
fn runs_stuck_in_engine_builtins_end_at_their_deadline_and_free_their_slots() {
    let world = World::shipped_packs();
    let mut server = ServerProcess::start(&world, &["--max-runs", "2"]);
    let _logs = stderr_lines(&mut server);
    let base = server.base.clone();
    let post = move |code: &str, timeout_ms: u64| {
        let started = Instant::now();
        let response = must(
            agent()
                .post(&format!("{base}/api/run"))
                .header("content-type", "application/json")
                .send(json!({ "code": code, "timeoutMs": timeout_ms }).to_string()),
            "POST /api/run",
        );
        let (status, _, text) = read(response);
        let answer: Value = must(serde_json::from_str(&text), "run JSON");
        (status, answer, started.elapsed())
    };

    // Every body no cooperative check interrupts ends as `timeout` through the server too.
    for code in [
        "const a = []; a.length = 2 ** 32 - 1; return a.join(',').length;",
        "const a = []; a.length = 2 ** 32 - 1; return a.copyWithin(0, 1).length;",
        "return Array.prototype.join.call({ length: 2 ** 53 - 1 }).length;",
        "const s = 'x'.repeat(30e6); for (;;) console.log(s);",
        "import { unified } from '@nodetool-ai/sandbox-diff';\nconst a = 'same\\n' + Array.from({ length: 40000 }, (_, i) => 'a' + i).join('\\n');\nconst b = 'same\\n' + Array.from({ length: 40000 }, (_, i) => 'b' + i).join('\\n');\nreturn (await unified(a, b)).length;",
    ] {
        let (status, answer, elapsed) = post(code, 1000);
        assert_eq!(status, 200);
        assert_eq!(answer["error"]["code"], "timeout", "{code}: {answer}");
        assert!(elapsed < Duration::from_secs(3), "{code}: {elapsed:?}");
    }

    // Two never-ending runs hold both slots; a third client's run is answered within a second
    // of their deadlines.
    let stuck = "const a = []; a.length = 2 ** 32 - 1; return a.reverse().length;";
    let started = Instant::now();
    let holders: Vec<_> = (0..2)
        .map(|_| {
            let post = post.clone();
            std::thread::spawn(move || post(stuck, 1000))
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let (status, answer, _) = post("return 1;", 5000);
    assert_eq!(
        (status, answer["result"].clone()),
        (200, json!(1)),
        "{answer}"
    );
    assert!(
        started.elapsed() < Duration::from_millis(1000 + 1000 + 300),
        "the third run waited {:?}",
        started.elapsed()
    );
    for holder in holders {
        let (status, answer, elapsed) = must(holder.join().map_err(|_| "panicked"), "a holder");
        assert_eq!(status, 200);
        assert_eq!(answer["error"]["code"], "timeout", "{answer}");
        assert!(elapsed < Duration::from_secs(3), "{elapsed:?}");
    }

    // Once they are answered, nothing keeps burning CPU for them.
    std::thread::sleep(Duration::from_millis(300));
    let tree = process_tree(server.child.id());
    let before: f64 = tree.iter().map(|p| cpu_seconds(*p)).sum();
    std::thread::sleep(Duration::from_secs(1));
    let after: f64 = process_tree(server.child.id())
        .iter()
        .map(|p| cpu_seconds(*p))
        .sum();
    assert!(
        after - before < 0.3,
        "{:.2} CPU seconds in one idle second",
        after - before
    );

    // SIGTERM with a stuck run in flight exits 0 within its deadline plus the grace.
    let holder = {
        let post = post.clone();
        std::thread::spawn(move || post(stuck, 1500))
    };
    std::thread::sleep(Duration::from_millis(300));
    let terminated = Instant::now();
    server.terminate();
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Ok(Some(status)) = server.child.try_wait() {
            break Some(status);
        }
        if Instant::now() > deadline {
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let waited = terminated.elapsed();
    assert_eq!(status.and_then(|s| s.code()), Some(0), "after {waited:?}");
    assert!(
        waited < Duration::from_millis(1500 + 100 + 1000),
        "{waited:?}"
    );
    let _ = holder.join();
}

#[test]
fn a_shipped_guest_pack_compiles_on_first_use_as_in_nodetool_run() {
    let world = World::shipped_packs();
    let mut server = ServerProcess::start(&world, &["--max-runs", "1"]);
    let _logs = stderr_lines(&mut server);
    let body = json!({
        "code": "import { load } from \"@nodetool-ai/sandbox-yaml\";\nreturn load(\"a: 1\\nb: [x, y]\");"
    });
    // The cache is empty (a fresh XDG_CACHE_HOME): the first run compiles, the second hits.
    for _ in 0..2 {
        let (status, answer) = post_run(&server, &body);
        assert_eq!(status, 200);
        assert_eq!(
            answer["result"],
            json!({ "a": 1, "b": ["x", "y"] }),
            "{answer}"
        );
    }
}

#[test]
fn a_client_that_goes_away_cancels_its_run_and_frees_the_slot() {
    use std::io::Write as _;
    let world = World::shipped_packs();
    let mut server = ServerProcess::start(&world, &["--max-runs", "1"]);
    let _logs = stderr_lines(&mut server);
    let address = server
        .base
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_string();
    // A run that would hold the only slot for 20 s, from a client that then hangs up.
    for code in [
        "for (;;) {}",
        "const a = []; a.length = 2 ** 32 - 1; a.reverse();",
    ] {
        let body = json!({ "code": code, "timeoutMs": 20000 }).to_string();
        let mut stream = must(std::net::TcpStream::connect(&address), "connect");
        let request = format!(
            "POST /api/run HTTP/1.1\r\nhost: {address}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        );
        must(stream.write_all(request.as_bytes()), "send the run");
        std::thread::sleep(Duration::from_millis(400));
        drop(stream);
        let started = Instant::now();
        let (status, answer) = post_run(&server, &json!({ "code": "return 1;" }));
        assert_eq!(
            (status, answer["result"].clone()),
            (200, json!(1)),
            "{answer}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "{code}: the next run waited {:?}",
            started.elapsed()
        );
    }
}

#[test]
fn hostile_bodies_never_reach_a_parser_in_the_server_and_workers_recover() {
    let world = World::shipped_packs();
    let mut server = ServerProcess::start(&world, &["--max-runs", "1"]);
    let _logs = stderr_lines(&mut server);
    let deep = format!(
        "// import\nreturn {}1{};",
        "(".repeat(20_000),
        ")".repeat(20_000)
    );
    // A 40 KB body nested too deeply for the parser: an answer, and the server lives on.
    let (status, answer) = post_run(&server, &json!({ "code": deep }));
    assert_eq!(status, 200);
    assert_ne!(answer["ok"], json!(true), "{answer}");
    // Deeper than a worker's parser stack holds: the finding says it could not be checked.
    let graph = json!({ "graph": { "nodes": [{ "id": "n", "type": "nodetool.code.Code", "data": { "code": format!("return {}1{};", "(".repeat(400_000), ")".repeat(400_000)) } }] } });
    let response = must(
        agent()
            .post(&server.url("/api/validate"))
            .header("content-type", "application/json")
            .send(graph.to_string()),
        "POST /api/validate",
    );
    let (status, _, text) = read(response);
    assert_eq!(status, 200, "{text}");
    assert!(
        text.contains("code_syntax") && text.contains("stack"),
        "{}",
        text.get(..400).unwrap_or(&text)
    );
    let (status, answer) = post_run(&server, &json!({ "code": "return 1;" }));
    assert_eq!(
        (status, answer["result"].clone()),
        (200, json!(1)),
        "{answer}"
    );

    // A worker killed while idle is replaced; the next run is not charged with its death.
    std::thread::sleep(Duration::from_millis(300));
    for pid in process_tree(server.child.id()).into_iter().skip(1) {
        let _ = Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status();
    }
    std::thread::sleep(Duration::from_millis(100));
    let (status, answer) = post_run(&server, &json!({ "code": "return 2;" }));
    assert_eq!(
        (status, answer["result"].clone()),
        (200, json!(2)),
        "{answer}"
    );

    // Host work a run did not wait for dies with its worker: nothing burns CPU afterwards.
    let unawaited = "import { unified } from '@nodetool-ai/sandbox-diff';\nconst a = 'same\\n' + Array.from({ length: 40000 }, (_, i) => 'a' + i).join('\\n');\nconst b = 'same\\n' + Array.from({ length: 40000 }, (_, i) => 'b' + i).join('\\n');\nunified(a, b).catch(() => {});\nreturn 'x';";
    let (status, answer) = post_run(&server, &json!({ "code": unawaited }));
    assert_eq!(
        (status, answer["result"].clone()),
        (200, json!("x")),
        "{answer}"
    );
    std::thread::sleep(Duration::from_millis(500));
    let before: f64 = process_tree(server.child.id())
        .iter()
        .map(|p| cpu_seconds(*p))
        .sum();
    std::thread::sleep(Duration::from_secs(1));
    let after: f64 = process_tree(server.child.id())
        .iter()
        .map(|p| cpu_seconds(*p))
        .sum();
    assert!(
        after - before < 0.3,
        "{:.2} CPU seconds in one idle second",
        after - before
    );

    // A run's teardown is not the next run's time: a large heap, then a 100 ms run.
    let heavy = "globalThis.keep = []; for (let i = 0; i < 1.2e5; i++) keep.push({ i, s: 'v' + i, a: [i] }); return 1;";
    let (_, answer) = post_run(&server, &json!({ "code": heavy }));
    assert_eq!(answer["result"], json!(1), "{answer}");
    let (_, answer) = post_run(&server, &json!({ "code": "return 3;", "timeoutMs": 100 }));
    assert_eq!(answer["result"], json!(3), "{answer}");
}

#[test]
fn the_worker_ceiling_and_recycling_hold_through_the_server() {
    let world = World::shipped_packs();
    let mut server = ServerProcess::start(
        &world,
        &[
            "--max-runs",
            "1",
            "--worker-memory-mb",
            "16",
            "--recycle-after",
            "2",
        ],
    );
    let _logs = stderr_lines(&mut server);
    // Past a 16 MiB ceiling, in the guest and on the host side: `memory-limit`, and the server
    // answers the next run.
    for code in [
        "const s = 'x'.repeat(20e6); return (s + 'y').length;",
        "return 'x'.repeat(7e6);",
    ] {
        let (status, answer) = post_run(&server, &json!({ "code": code }));
        assert_eq!(status, 200);
        assert_eq!(
            answer["error"]["code"],
            json!("memory-limit"),
            "{code}: {answer}"
        );
        let (_, answer) = post_run(&server, &json!({ "code": "return 1;" }));
        assert_eq!(answer["result"], json!(1), "{answer}");
    }
    // Recycled after two runs: across six runs, no worker serves more than two.
    let workers = |server: &ServerProcess| {
        process_tree(server.child.id())
            .into_iter()
            .skip(1)
            .collect::<Vec<_>>()
    };
    let mut seen = std::collections::BTreeSet::new();
    for i in 0..6 {
        let (_, answer) = post_run(&server, &json!({ "code": format!("return {i};") }));
        assert_eq!(answer["result"], json!(i), "{answer}");
        seen.extend(workers(&server));
    }
    assert!(seen.len() >= 3, "workers seen: {seen:?}");
}
