//! The broker's budget holds when a body sends many large bodies and reads many large
//! responses at once, through a real (confined) worker and a loopback HTTP server: the
//! supervisor, which performs every fetch, never holds more than the run's budget of bytes in
//! flight (64 MiB) plus the frames being handed over, and the calls past the budget or the
//! per-run cap of 8 fetches are refused with a message saying so.
//!
//! This file holds one test, so the process's peak RSS is this test's.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use nodetool_frontend::fetch::HttpClient;
use nodetool_frontend::worker::{PoolRun, WorkerOptions, WorkerPool};
use nodetool_guest::broker::{FetchGrant, RunAuthority};
use nodetool_guest::{Capabilities, RunLimits};
use nodetool_protocol::catalog::Resolution;
use nodetool_protocol::value::Value;
use nodetool_tests::world::must;

/// The process's peak resident set (`VmHWM`), in bytes.
fn peak_rss() -> u64 {
    let status = must(std::fs::read_to_string("/proc/self/status"), "read status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

const RESPONSE_BYTES: usize = 10 * 1024 * 1024;
/// A response past the run's 64 MiB budget on its own (and under the grant's response cap).
const HUGE_BYTES: usize = 80 * 1024 * 1024;
/// How many responses the run can have in flight at once (the per-run fetch cap).
const IN_FLIGHT: usize = 8;
/// How far one response may run ahead of the slowest one still being sent.
const LEAD: usize = 1024 * 1024;
/// How long the pacer waits for the others before it lets a response go on alone, so a
/// connection the client dropped cannot hold the rest for long.
const PATIENCE: Duration = Duration::from_secs(10);

/// Keeps the GET responses in step: none starts its body until [`IN_FLIGHT`] have arrived, and
/// none gets more than [`LEAD`] ahead of the slowest still being sent. So the run reads all of
/// them at once, whatever the scheduler does, and its budget (64 MiB, less than the 80 MiB of
/// eight 10 MiB bodies) must refuse one part-way instead of seeing each finish before the next.
#[derive(Default)]
struct Pacer {
    /// Bytes sent so far by each response still being sent, by connection number.
    sent: Mutex<Vec<Option<usize>>>,
    moved: Condvar,
}

impl Pacer {
    fn join(&self) -> usize {
        let mut sent = self.sent.lock().unwrap_or_else(|e| e.into_inner());
        sent.push(Some(0));
        self.moved.notify_all();
        sent.len() - 1
    }

    /// Waits until response `me`, having sent `now` bytes, may send more.
    fn wait_turn(&self, me: usize, now: usize, since: Instant) {
        let mut sent = self.sent.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(mine) = sent.get_mut(me) {
            *mine = Some(now);
        }
        self.moved.notify_all();
        loop {
            let arrived = sent.len() >= IN_FLIGHT;
            let slowest = sent.iter().flatten().min().copied().unwrap_or(now);
            if (arrived && now <= slowest + LEAD) || since.elapsed() > PATIENCE {
                return;
            }
            sent = match self.moved.wait_timeout(sent, Duration::from_millis(50)) {
                Ok((guard, _)) => guard,
                Err(e) => e.into_inner().0,
            };
        }
    }

    fn leave(&self, me: usize) {
        let mut sent = self.sent.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(mine) = sent.get_mut(me) {
            *mine = None;
        }
        self.moved.notify_all();
    }
}

/// Answers each connection on its own thread: a POST's body is read and dropped as it
/// arrives; a GET gets 10 MiB, paced by the [`Pacer`]. Stops accepting when `stop` is set
/// (and one connection wakes it).
fn serve(listener: TcpListener, stop: Arc<AtomicBool>, pacer: Arc<Pacer>) {
    for stream in listener.incoming() {
        if stop.load(Ordering::Acquire) {
            return;
        }
        let Ok(stream) = stream else { continue };
        let pacer = Arc::clone(&pacer);
        std::thread::spawn(move || {
            let _ = answer(stream, &pacer);
        });
    }
}

fn answer(stream: TcpStream, pacer: &Pacer) -> std::io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    stream.set_write_timeout(Some(Duration::from_secs(30)))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let post = line.starts_with("POST");
    let huge = line.starts_with("GET /huge");
    let mut length = 0usize;
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header)? == 0 || header == "\r\n" {
            break;
        }
        if let Some(v) = header.to_ascii_lowercase().strip_prefix("content-length:") {
            length = v.trim().parse().unwrap_or(0);
        }
    }
    let mut sink = [0u8; 64 * 1024];
    let mut left = length;
    while left > 0 {
        let take = left.min(sink.len());
        let n = reader.read(&mut sink[..take])?;
        if n == 0 {
            break;
        }
        left -= n;
    }
    let mut stream = stream;
    if post {
        return stream
            .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok");
    }
    if huge {
        // One response larger than the run's whole budget: refused part-way, whatever the
        // scheduling.
        write!(
            stream,
            "HTTP/1.1 200 OK\r\nContent-Length: {HUGE_BYTES}\r\nConnection: close\r\n\r\n"
        )?;
        let chunk = vec![b'x'; 64 * 1024];
        for _ in 0..HUGE_BYTES / chunk.len() {
            stream.write_all(&chunk)?;
        }
        return Ok(());
    }
    let me = pacer.join();
    let since = Instant::now();
    let sent = (|| {
        write!(
            stream,
            "HTTP/1.1 200 OK\r\nContent-Length: {RESPONSE_BYTES}\r\nConnection: close\r\n\r\n"
        )?;
        let chunk = vec![b'x'; 64 * 1024];
        for k in 0..RESPONSE_BYTES / chunk.len() {
            pacer.wait_turn(me, k * chunk.len(), since);
            stream.write_all(&chunk)?;
        }
        Ok(())
    })();
    pacer.leave(me);
    sent
}

#[test]
fn many_large_fetches_at_once_stay_within_the_runs_budget() {
    let listener = must(TcpListener::bind("127.0.0.1:0"), "bind a loopback port");
    let port = must(listener.local_addr(), "local address").port();
    let stop = Arc::new(AtomicBool::new(false));
    let pacer = Arc::new(Pacer::default());
    let server = {
        let (stop, pacer) = (Arc::clone(&stop), Arc::clone(&pacer));
        std::thread::spawn(move || serve(listener, stop, pacer))
    };

    let mut options = WorkerOptions::standard(PathBuf::from(env!("CARGO_BIN_EXE_nodetool")), 1);
    options.memory_bytes = 1024 * 1024 * 1024;
    let pool = must(WorkerPool::start(options), "start a worker");
    let authority = RunAuthority::new(
        None,
        Some(FetchGrant {
            allowed_hosts: vec!["127.0.0.1".into()],
            max_response_bytes: 128 * 1024 * 1024,
            transport: Arc::new(HttpClient::new()),
        }),
    );
    let capabilities = Capabilities {
        secrets: None,
        authority: Some(Arc::new(authority)),
    };
    let code = r#"
const base = `http://127.0.0.1:${inputs.port}`;
const big = "x".repeat(30 * 1024 * 1024);
const count = (settled) => ({
  ok: settled.filter((s) => s.status === "fulfilled").length,
  reasons: [...new Set(settled.filter((s) => s.status === "rejected").map((s) => String(s.reason.message).replace(/[0-9.]+ (MiB|KiB|bytes)/g, "N")))],
});
const posts = count(await Promise.allSettled(
  Array.from({ length: 30 }, () => fetch(`${base}/sink`, { method: "POST", body: big }).then((r) => r.text())),
));
const gets = count(await Promise.allSettled(
  Array.from({ length: 400 }, () => fetch(`${base}/big`).then((r) => r.bytes()).then((b) => b.length)),
));
const huge = await fetch(`${base}/huge`).then((r) => r.bytes()).then((b) => `read ${b.length}`, (e) => String(e.message));
return { posts, gets, huge };
"#;
    let before = peak_rss();
    let inputs = Value::Object(
        [("port".to_string(), Value::Number(f64::from(port)))]
            .into_iter()
            .collect(),
    );
    let outcome = pool.run(PoolRun {
        code,
        resolution: &Resolution {
            modules: Vec::new(),
            statuses: Vec::new(),
        },
        inputs: &inputs,
        limits: RunLimits {
            timeout: Duration::from_secs(60),
            memory_bytes: 256 * 1024 * 1024,
            ..RunLimits::STANDARD
        },
        capabilities: &capabilities,
        cancel: None,
    });
    let grown = peak_rss().saturating_sub(before);
    stop.store(true, Ordering::Release);
    let _ = TcpStream::connect(("127.0.0.1", port));
    let _ = server.join();

    let result = match outcome.result {
        Ok(value) => serde_json::to_value(&value).unwrap_or_default(),
        Err(e) => panic!("the run failed: {e}"),
    };
    let posts_ok = result["posts"]["ok"].as_u64().unwrap_or(0);
    let gets_ok = result["gets"]["ok"].as_u64().unwrap_or(0);
    // The requests' bodies cross one at a time and are sent as they arrive, so they may all
    // get through; of the responses, only what fits the budget and the cap of 8 is read, and
    // the rest are refused saying why.
    assert!(posts_ok >= 1, "{result}");
    assert!((1..400).contains(&gets_ok), "{result}");
    let reasons = result["gets"]["reasons"].to_string();
    assert!(
        reasons.contains("8 fetch calls are already in flight"),
        "{result}"
    );
    // Whether eight 10 MiB responses pass the budget together depends on how the supervisor's
    // reads interleave with the kernel's socket buffers; one 80 MiB response always does.
    let huge = result["huge"].as_str().unwrap_or_default();
    assert!(huge.contains("in flight through the host"), "{result}");
    // The supervisor held no more than the budget (64 MiB) plus the frames it was handing
    // over (a 30 MiB request in, a 10 MiB response out, each read or written whole) and its
    // own working memory: far below the 30 x 30 MiB and 400 x 10 MiB asked for.
    const BOUND: u64 = 256 * 1024 * 1024;
    assert!(
        grown < BOUND,
        "the supervisor's peak grew by {} MiB: {result}",
        grown / (1024 * 1024)
    );
    eprintln!(
        "broker budget: peak RSS grew {} MiB; posts ok {posts_ok}/30, gets ok {gets_ok}/400; {}",
        grown / (1024 * 1024),
        result
    );
}
