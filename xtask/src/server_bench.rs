//! `cargo xtask bench server`: load on a release `nodetool-server` with `wrk` (Debian's
//! package), bounded in time, on loopback.
//!
//! Scenarios (each `wrk --latency -d<secs>`): `POST /api/run` with a trivial body and with a
//! body importing `@nodetool-ai/sandbox-geo`, `GET` of a module, all below the run gate's bound;
//! then the trivial run far above it against a server with a small queue, where everything
//! beyond the bound must be a clean `503`. A Lua hook counts statuses and bodies that are not
//! `"ok":true`, so "errors" means exactly that. `NODETOOL_BENCH_SECONDS` (default 10) sets the
//! duration. The server logs at `warn` here: a request line per run on stderr is a measurable
//! cost at these rates.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// Counts statuses and failed runs in every wrk thread, printed once at the end.
const COUNTING: &str = r#"
local threads = {}
function setup(thread) table.insert(threads, thread) end
function init(args) ok = 0; failed = 0; busy = 0; other = 0 end
function response(status, headers, body)
  if status == 200 or status == 304 then
    if body ~= nil and string.find(body, '"ok":false', 1, true) then failed = failed + 1 else ok = ok + 1 end
  elseif status == 503 then busy = busy + 1
  else other = other + 1 end
end
function done(summary, latency, requests)
  local o, f, b, x = 0, 0, 0, 0
  for _, t in ipairs(threads) do
    o = o + t:get("ok"); f = f + t:get("failed"); b = b + t:get("busy"); x = x + t:get("other")
  end
  io.write(string.format("answers: ok=%d run-failed=%d 503=%d other=%d socket-errors=%d\n",
    o, f, b, x, summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout))
  io.write(string.format("latency: p50=%.2fms p90=%.2fms p99=%.2fms max=%.2fms\n",
    latency:percentile(50) / 1000, latency:percentile(90) / 1000, latency:percentile(99) / 1000, latency.max / 1000))
end
"#;

fn post(body: &str) -> String {
    format!(
        "wrk.method = \"POST\"\nwrk.headers[\"Content-Type\"] = \"application/json\"\nwrk.body = {}\n{COUNTING}",
        lua_string(body)
    )
}

fn lua_string(text: &str) -> String {
    format!("[==[{text}]==]")
}

/// A release server on a free port; killed on drop.
struct Server {
    child: Child,
    base: String,
}

impl Server {
    fn start(binary: &Path, root: &Path, extra: &[&str]) -> Result<Server, String> {
        let mut child = Command::new(binary)
            .args(["--host", "127.0.0.1", "--port", "0"])
            .args(extra)
            .env("RUST_LOG", "warn")
            .env("NODETOOL_SHIPPED_PACKS_DIR", root.join("packs"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", binary.display()))?;
        let stdout = child.stdout.take().ok_or("no stdout pipe")?;
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .map_err(|e| format!("cannot read the server's address: {e}"))?;
        let base = line
            .trim()
            .strip_prefix("nodetool-server listening on ")
            .ok_or_else(|| format!("unexpected first line from the server: {line:?}"))?
            .to_string();
        Ok(Server { child, base })
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn wrk(
    title: &str,
    script: &Path,
    url: &str,
    connections: u32,
    seconds: u32,
) -> Result<(), String> {
    // wrk needs at least one connection per thread.
    let threads = connections.min(2);
    let command = format!(
        "wrk --latency -t{threads} -c{connections} -d{seconds}s --timeout 10s -s {} {url}",
        script.display()
    );
    println!("\n== {title}\n$ {command}");
    let status = Command::new("wrk")
        .arg("--latency")
        .arg(format!("-t{threads}"))
        .arg(format!("-c{connections}"))
        .arg(format!("-d{seconds}s"))
        .args(["--timeout", "10s", "-s"])
        .arg(script)
        .arg(url)
        .status()
        .map_err(|e| format!("cannot run wrk (Debian: apt-get install -y wrk): {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("wrk failed: {status}"))
    }
}

/// Builds the release server and runs every scenario.
pub fn run(root: &Path, cargo: impl Fn() -> Command) -> Result<(), String> {
    let seconds: u32 = std::env::var("NODETOOL_BENCH_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10);
    let status = cargo()
        .args(["build", "--release", "--locked", "-p", "nodetool-server"])
        .status()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if !status.success() {
        return Err("cargo build --release -p nodetool-server failed".into());
    }
    let target =
        std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), PathBuf::from);
    let binary = target.join("release/nodetool-server");
    let dir = target.join("bench-server");
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let script = |name: &str, text: String| -> Result<PathBuf, String> {
        let path = dir.join(name);
        std::fs::write(&path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        Ok(path)
    };
    let trivial = script("run-trivial.lua", post(r#"{"code":"return 1 + 1;"}"#))?;
    let geo = script(
        "run-geo.lua",
        post(
            r#"{"code":"import { haversine } from \"@nodetool-ai/sandbox-geo\";\nreturn haversine({lat: 48.8566, lon: 2.3522}, {lat: 51.5074, lon: -0.1278});"}"#,
        ),
    )?;
    let module = script("get-module.lua", COUNTING.to_string())?;

    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    println!(
        "nodetool-server bench: {cores} core(s) shared by the server and wrk; {seconds}s per scenario"
    );
    {
        let server = Server::start(&binary, root, &[])?;
        println!("server: default bounds (runs at once = cores, queue = 32)");
        let run = format!("{}/api/run", server.base);
        for c in [1, 4, 16] {
            wrk(
                &format!("POST /api/run, trivial body, {c} connection(s)"),
                &trivial,
                &run,
                c,
                seconds,
            )?;
        }
        wrk(
            "POST /api/run, body importing @nodetool-ai/sandbox-geo, 16 connections",
            &geo,
            &run,
            16,
            seconds,
        )?;
        wrk(
            "GET /api/sandbox-modules/@nodetool-ai/sandbox-geo, 16 connections",
            &module,
            &format!(
                "{}/api/sandbox-modules/@nodetool-ai/sandbox-geo",
                server.base
            ),
            16,
            seconds,
        )?;
    }
    let server = Server::start(&binary, root, &["--max-runs", "2", "--queue", "8"])?;
    println!("\nserver: --max-runs 2 --queue 8 (the gate's bound is 10 requests)");
    wrk(
        "POST /api/run, trivial body, 128 connections (above the bound: the rest must be 503)",
        &trivial,
        &format!("{}/api/run", server.base),
        128,
        seconds,
    )
}
