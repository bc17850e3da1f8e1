//! A real `nodetool-server` process on a loopback port, spoken to over raw sockets where a
//! client library would tidy the request up: each refusal with its status and JSON `detail`,
//! 200 slow connections that do not hold up a normal request, the connection cap, the token
//! (refusing to start beyond loopback without one), JSON logs that carry no body, token or path,
//! and `/readyz` while draining after SIGTERM.

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::{ServerProcess, World, must};

const TOKEN: &str = "process-test-token-0123456789";

/// One answer read off a socket: status, lowercase header lines, body.
struct Raw {
    status: u16,
    head: String,
    body: String,
}

impl Raw {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {} {}", self.head, self.body))
    }

    fn detail(&self) -> String {
        self.json()["detail"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }
}

/// Writes `request` as is and reads the answer to the end (requests say `connection: close`).
fn raw(address: &str, request: &[u8]) -> Raw {
    let mut stream = must(TcpStream::connect(address), "connect");
    must(
        stream.set_read_timeout(Some(Duration::from_secs(20))),
        "set a read timeout",
    );
    must(stream.write_all(request), "send a request");
    read_answer(&mut stream)
}

fn read_answer(stream: &mut TcpStream) -> Raw {
    let mut bytes = Vec::new();
    let _ = stream.read_to_end(&mut bytes);
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((text.as_str(), ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status line in {text:?}"));
    Raw {
        status,
        head: head.to_ascii_lowercase(),
        body: body.to_string(),
    }
}

fn request(method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Vec<u8> {
    let mut text = format!("{method} {path} HTTP/1.1\r\nconnection: close\r\n");
    for (name, value) in headers {
        text.push_str(&format!("{name}: {value}\r\n"));
    }
    text.push_str(&format!("content-length: {}\r\n\r\n{body}", body.len()));
    text.into_bytes()
}

fn agent() -> ureq::Agent {
    ureq::Agent::new_with_config(
        ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(30)))
            .build(),
    )
}

/// Forwards the child's stderr lines into a channel.
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

fn wait_exit(server: &mut ServerProcess) -> std::process::ExitStatus {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(status) = must(server.child.try_wait(), "poll the process") {
            return status;
        }
        assert!(Instant::now() < deadline, "the server did not exit");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn every_refusal_over_a_real_socket_has_its_status_and_rule() {
    let world = World::shipped_packs();
    let mut server = ServerProcess::start(&world, &[]);
    let logs = stderr_lines(&mut server);
    let address = server.address();
    let host = address.as_str();
    let json = ("content-type", "application/json");
    let run = r#"{"code": "return 1;"}"#;

    let foreign = raw(
        host,
        &request(
            "POST",
            "/api/run",
            &[("host", "attacker.example"), json],
            run,
        ),
    );
    assert_eq!(foreign.status, 421);
    assert!(
        foreign.detail().contains("DNS-rebinding"),
        "{}",
        foreign.body
    );
    let no_host = raw(host, b"GET /api/packs HTTP/1.0\r\n\r\n");
    assert_eq!(no_host.status, 400);
    assert!(
        no_host.detail().contains("names no host"),
        "{}",
        no_host.body
    );
    let cross = raw(
        host,
        &request(
            "POST",
            "/api/run",
            &[
                ("host", host),
                ("origin", "http://evil.example"),
                ("content-type", "text/plain"),
            ],
            run,
        ),
    );
    assert_eq!(cross.status, 403);
    assert!(cross.detail().contains("another origin"));
    assert!(!cross.head.contains("access-control-allow-origin"));
    let plain = raw(
        host,
        &request(
            "POST",
            "/api/run",
            &[("host", host), ("content-type", "text/plain")],
            run,
        ),
    );
    assert_eq!(plain.status, 415);
    assert!(plain.detail().contains("application/json"));
    let form = raw(
        host,
        &request(
            "POST",
            "/api/host-modules/csv/parse",
            &[
                ("host", host),
                ("content-type", "application/x-www-form-urlencoded"),
            ],
            "args=1",
        ),
    );
    assert_eq!(form.status, 415);
    let deep = format!(
        r#"{{"code": "return 1;", "input": {}{}}}"#,
        "[".repeat(200),
        "]".repeat(200)
    );
    let deep = raw(
        host,
        &request("POST", "/api/run", &[("host", host), json], &deep),
    );
    assert_eq!(deep.status, 400);
    assert!(deep.detail().contains("depth limit"));
    let big = "x".repeat(20 * 1024);
    let head = raw(
        host,
        &request(
            "GET",
            "/api/packs",
            &[("host", host), ("x-filler", &big)],
            "",
        ),
    );
    assert_eq!(head.status, 431);
    assert!(head.detail().contains("16384 bytes"), "{}", head.body);
    // Past hyper's own ceiling the parser answers before any request exists: a bare 431.
    let huge = "x".repeat(nodetool_server::PARSER_HEAD_CEILING + 1024);
    let head = raw(
        host,
        &request(
            "GET",
            "/api/packs",
            &[("host", host), ("x-filler", &huge)],
            "",
        ),
    );
    assert_eq!(head.status, 431);
    let reload = raw(
        host,
        &request("POST", "/api/packs/reload", &[("host", host), json], "{}"),
    );
    assert_eq!(reload.status, 403);
    assert!(reload.detail().contains("operator action"));
    let reload = raw(
        host,
        &request(
            "POST",
            "/api/packs/reload",
            &[("host", host), json, ("x-nodetool-reload", "1")],
            "",
        ),
    );
    assert_eq!(reload.status, 200, "{}", reload.body);

    // The probes, and metrics that count the workers.
    let ready = raw(host, &request("GET", "/readyz", &[("host", host)], ""));
    assert_eq!(ready.status, 200, "{}", ready.body);
    assert!(
        ready.json()["workersReady"]
            .as_u64()
            .is_some_and(|n| n >= 1),
        "{}",
        ready.body
    );
    let fine = raw(
        host,
        &request("POST", "/api/run", &[("host", host), json], run),
    );
    assert_eq!(fine.json()["result"], json!(1));
    let metrics = raw(host, &request("GET", "/metrics", &[("host", host)], ""));
    for line in [
        "nodetool_workers_started_total ",
        "nodetool_worker_restarts_total{cause=\"timeout\"} 0",
        "nodetool_workers_ready ",
        "nodetool_http_refusals_total{rule=\"host\"} 2",
        "nodetool_runs_total{kind=\"run\",outcome=\"ok\"} 1",
    ] {
        assert!(
            metrics.body.contains(line),
            "no {line:?} in\n{}",
            metrics.body
        );
    }

    // One line per request, by route template; a docs request names no pack in it.
    let docs = raw(
        host,
        &request(
            "GET",
            "/api/packs/@nodetool-ai/sandbox-geo/docs",
            &[("host", host)],
            "",
        ),
    );
    assert_eq!(docs.status, 200);
    let mut seen = Vec::new();
    wait_for(&logs, &mut seen, "route=/api/packs/{scope}/{name}/docs");
    wait_for(&logs, &mut seen, "refused=host");
    wait_for(&logs, &mut seen, "outcome=ok");
    for line in seen.iter().filter(|l| l.contains(" request ")) {
        assert!(!line.contains("sandbox-geo"), "a raw path in {line}");
        assert!(!line.contains("attacker"), "a client's header in {line}");
    }
}

#[test]
fn two_hundred_slow_connections_do_not_hold_up_a_normal_request() {
    let world = World::shipped_packs();
    let server = ServerProcess::start(
        &world,
        &["--header-timeout-ms", "1500", "--body-timeout-ms", "1500"],
    );
    let address = server.address();
    // Half never finish their head, half never finish their body.
    let mut heads = Vec::new();
    let mut bodies = Vec::new();
    for i in 0..200 {
        let mut stream = must(TcpStream::connect(&address), "open a slow connection");
        must(
            stream.set_read_timeout(Some(Duration::from_secs(15))),
            "set a read timeout",
        );
        if i % 2 == 0 {
            let partial = format!("POST /api/run HTTP/1.1\r\nhost: {address}\r\nx-slow: a");
            must(stream.write_all(partial.as_bytes()), "send half a head");
            heads.push(stream);
        } else {
            let partial = format!(
                "POST /api/run HTTP/1.1\r\nhost: {address}\r\ncontent-type: application/json\r\ncontent-length: 1000000\r\n\r\n{{\"code\": \""
            );
            must(
                stream.write_all(partial.as_bytes()),
                "send a head and a little body",
            );
            bodies.push(stream);
        }
    }
    let started = Instant::now();
    let response = must(
        agent()
            .post(&server.url("/api/run"))
            .header("content-type", "application/json")
            .send(r#"{"code": "return 40 + 2;"}"#),
        "a normal run",
    );
    let elapsed = started.elapsed();
    let mut body = response.into_body();
    let out: Value = must(
        serde_json::from_str(&must(body.read_to_string(), "read the run")),
        "run JSON",
    );
    assert_eq!(out["result"], json!(42), "{out}");
    assert!(
        elapsed < Duration::from_secs(1),
        "the normal run took {elapsed:?}"
    );

    // The slow ones are cut off by the timers: a body that does not arrive is a 408 naming the
    // rule; a head that does not arrive is closed (there is no request to answer).
    for mut stream in bodies {
        let answer = read_answer(&mut stream);
        assert_eq!(answer.status, 408, "{}", answer.body);
        assert!(
            answer.detail().contains("--body-timeout-ms"),
            "{}",
            answer.body
        );
    }
    for mut stream in heads {
        let mut rest = Vec::new();
        match stream.read_to_end(&mut rest) {
            Ok(_) => assert!(rest.is_empty(), "{}", String::from_utf8_lossy(&rest)),
            Err(e) => assert!(
                !matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ),
                "a slow head was never closed: {e}"
            ),
        }
    }
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[test]
fn beyond_the_connection_cap_a_connection_waits_for_a_place() {
    let world = World::empty();
    let server = ServerProcess::start(
        &world,
        &["--max-connections", "2", "--header-timeout-ms", "1000"],
    );
    let address = server.address();
    // Two connections that say nothing hold both places until the header timer closes them.
    let idle: Vec<TcpStream> = (0..2)
        .map(|_| must(TcpStream::connect(&address), "open an idle connection"))
        .collect();
    std::thread::sleep(Duration::from_millis(100));
    let started = Instant::now();
    let answer = raw(
        &address,
        &request("GET", "/healthz", &[("host", &address)], ""),
    );
    let waited = started.elapsed();
    assert_eq!(answer.status, 200);
    assert!(
        waited >= Duration::from_millis(500) && waited < Duration::from_secs(10),
        "waited {waited:?}"
    );
    drop(idle);
}

#[test]
fn in_process_alone_is_refused_since_it_gives_up_confinement() {
    let world = World::empty();
    let output = must(
        world
            .server_command()
            .args(["--port", "0", "--in-process"])
            .output(),
        "run nodetool-server",
    );
    assert_eq!(output.status.code(), Some(2));
    assert!(output.stdout.is_empty(), "it must not claim to listen");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("no seccomp or Landlock") && stderr.contains("--allow-unconfined"),
        "{stderr}"
    );
}

#[test]
fn beyond_loopback_without_a_token_the_server_refuses_to_start_saying_how() {
    let world = World::empty();
    // Refused before anything is bound: the name resolves beyond loopback.
    let output = must(
        world
            .server_command()
            .args([
                "--host",
                "0.0.0.0",
                "--port",
                "0",
                "--in-process",
                "--allow-unconfined",
            ])
            .output(),
        "run nodetool-server",
    );
    assert_eq!(output.status.code(), Some(2));
    assert!(output.stdout.is_empty(), "it must not claim to listen");
    let stderr = String::from_utf8_lossy(&output.stderr);
    for needle in [
        "not a loopback address",
        "needs a bearer token",
        "head -c 32 /dev/urandom",
        "--token-file",
        "NODETOOL_TOKEN_FILE",
    ] {
        assert!(stderr.contains(needle), "no {needle:?} in {stderr}");
    }
    // A token that is too short, or a file that is missing, is a configuration error too.
    let short = world.tmp.path().join("short-token");
    must(std::fs::write(&short, "abc\n"), "write a short token");
    for file in [short, world.tmp.path().join("missing-token")] {
        let output = must(
            world
                .server_command()
                .args([
                    "--port",
                    "0",
                    "--in-process",
                    "--allow-unconfined",
                    "--token-file",
                ])
                .arg(&file)
                .output(),
            "run nodetool-server",
        );
        assert_eq!(output.status.code(), Some(2));
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains("shorter than 16") || stderr.contains("cannot read the token file"),
            "{stderr}"
        );
    }
}

#[test]
fn a_token_guards_the_api_and_json_logs_carry_no_body_token_or_path() {
    let world = World::shipped_packs();
    let file = world.tmp.path().join("token");
    must(
        std::fs::write(&file, format!("{TOKEN}\n")),
        "write the token",
    );
    // The token file named by the environment variable, as a Deployment's Secret would be.
    let mut server = ServerProcess::start_with_env(
        &world,
        &["--log-format", "json"],
        &[("NODETOOL_TOKEN_FILE", file.as_os_str())],
    );
    let logs = stderr_lines(&mut server);
    let address = server.address();
    let host = address.as_str();
    let bearer = format!("Bearer {TOKEN}");
    let marker = "BODY-MARKER-7d1c";

    let refused = raw(host, &request("GET", "/api/packs", &[("host", host)], ""));
    assert_eq!(refused.status, 401);
    assert!(refused.head.contains("www-authenticate: bearer"));
    let wrong = raw(
        host,
        &request(
            "GET",
            "/api/packs",
            &[
                ("host", host),
                ("authorization", "Bearer not-the-token-000000"),
            ],
            "",
        ),
    );
    assert_eq!(wrong.status, 401);
    let packs = raw(
        host,
        &request(
            "GET",
            "/api/packs",
            &[("host", host), ("authorization", &bearer)],
            "",
        ),
    );
    assert_eq!(packs.status, 200);
    let body = json!({"code": format!("return \"{marker}\";")}).to_string();
    let run = raw(
        host,
        &request(
            "POST",
            "/api/run",
            &[
                ("host", host),
                ("authorization", &bearer),
                ("content-type", "application/json"),
            ],
            &body,
        ),
    );
    assert_eq!(run.json()["result"], json!(marker));
    let reload = raw(
        host,
        &request(
            "POST",
            "/api/packs/reload",
            &[
                ("host", host),
                ("authorization", &bearer),
                ("content-type", "application/json"),
            ],
            "",
        ),
    );
    assert_eq!(reload.status, 200);
    for probe in ["/healthz", "/readyz", "/metrics", "/"] {
        assert_eq!(
            raw(host, &request("GET", probe, &[("host", host)], "")).status,
            200,
            "{probe}"
        );
    }

    let mut seen = Vec::new();
    wait_for(&logs, &mut seen, "\"route\":\"/api/packs/reload\"");
    let paths = world.paths();
    let mut requests = 0;
    for line in &seen {
        let parsed: Value = must(serde_json::from_str(line), "a JSON log line");
        assert!(!line.contains(TOKEN), "the token in {line}");
        assert!(!line.contains(marker), "a body in {line}");
        for path in &paths {
            assert!(!line.contains(path.as_str()), "a path in {line}");
        }
        if parsed["message"] == "request" {
            requests += 1;
            for field in ["method", "route", "status", "ms", "outcome", "refused"] {
                assert!(!parsed[field].is_null(), "no {field} in {line}");
            }
        }
        if parsed["message"] == "listening" {
            assert_eq!(parsed["token"], json!("required on /api/"), "{line}");
        }
    }
    assert!(requests >= 5, "{seen:?}");
    let run_line = seen
        .iter()
        .find(|l| l.contains("\"route\":\"/api/run\""))
        .unwrap_or_else(|| panic!("no run line in {seen:?}"));
    assert!(run_line.contains("\"outcome\":\"ok\""), "{run_line}");
}

#[test]
fn after_sigterm_readyz_says_draining_while_runs_in_flight_finish() {
    let world = World::empty();
    let mut server = ServerProcess::start(&world, &[]);
    let logs = stderr_lines(&mut server);
    let address = server.address();
    let base = server.base.clone();
    let in_flight = std::thread::spawn(move || {
        agent()
            .post(&format!("{base}/api/run"))
            .header("content-type", "application/json")
            .send(json!({"code": "while (true) {}", "timeoutMs": 2500}).to_string())
            .map(|r| r.into_body().read_to_string())
    });
    let mut seen = Vec::new();
    wait_for(&logs, &mut seen, "run admitted");
    server.terminate();
    wait_for(&logs, &mut seen, "shutting down");
    let ready = raw(
        &address,
        &request("GET", "/readyz", &[("host", &address)], ""),
    );
    assert_eq!(ready.status, 503, "{}", ready.body);
    assert_eq!(ready.json()["ready"], json!(false));
    assert!(ready.detail().starts_with("draining"), "{}", ready.body);
    let run = raw(
        &address,
        &request(
            "POST",
            "/api/run",
            &[("host", &address), ("content-type", "application/json")],
            r#"{"code": "return 1;"}"#,
        ),
    );
    assert_eq!(run.status, 503);
    assert!(run.head.contains("retry-after: 1"));
    assert!(run.detail().contains("shutting down"));
    let answered = in_flight
        .join()
        .unwrap_or_else(|_| panic!("the client thread panicked"));
    let text = must(
        must(answered, "the in-flight run"),
        "read the in-flight run",
    );
    let out: Value = must(serde_json::from_str(&text), "run JSON");
    assert_eq!(out["error"]["code"], json!("timeout"));
    assert!(wait_exit(&mut server).success());
}
