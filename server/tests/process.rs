//! A real `nodetool-server` process on a free loopback port: it serves the shipped packs, logs
//! each request, and on SIGTERM finishes the request in flight before exiting 0.

mod support;

use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};
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
    assert!(!text.contains(&world.shipped.display().to_string()));

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
        Command::new(env!("CARGO_BIN_EXE_nodetool-server"))
            .args(["--port", "0", "--packs"])
            .arg(&missing)
            .env("NODETOOL_SHIPPED_PACKS_DIR", &world.shipped)
            .env("XDG_CONFIG_HOME", world.tmp.path().join("config"))
            .env("XDG_CACHE_HOME", world.tmp.path().join("cache"))
            .stdin(Stdio::null())
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
