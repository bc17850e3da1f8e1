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
//!
//! `NODETOOL_BENCH_BASELINE=/path/to/an/older/nodetool-server` measures that binary side by
//! side with this one in the same window: both servers run at once, and each scenario runs
//! `NODETOOL_BENCH_ROUNDS` times (default 3 with a baseline, else 1) alternating which binary
//! goes first, then a table gives each binary's median requests/s and p99 and the ratio. Only
//! flags both binaries know are passed (`--host`, `--port`, `--max-runs`, `--queue`).

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

/// What one wrk run measured.
#[derive(Debug, Clone, Copy, Default)]
struct Measured {
    requests_per_second: f64,
    p99_ms: f64,
}

/// Reads wrk's `Requests/sec:` line and the hook's `latency:` line.
fn measured(output: &str) -> Measured {
    let mut m = Measured::default();
    for line in output.lines() {
        if let Some(rate) = line.trim().strip_prefix("Requests/sec:") {
            m.requests_per_second = rate.trim().parse().unwrap_or(0.0);
        }
        if let Some(p99) = line
            .split_whitespace()
            .find_map(|field| field.strip_prefix("p99="))
        {
            m.p99_ms = p99.trim_end_matches("ms").parse().unwrap_or(0.0);
        }
    }
    m
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(0.0)
}

fn wrk(
    title: &str,
    script: &Path,
    url: &str,
    connections: u32,
    seconds: u32,
) -> Result<Measured, String> {
    // wrk needs at least one connection per thread.
    let threads = connections.min(2);
    let command = format!(
        "wrk --latency -t{threads} -c{connections} -d{seconds}s --timeout 10s -s {} {url}",
        script.display()
    );
    println!("\n== {title}\n$ {command}");
    let output = Command::new("wrk")
        .arg("--latency")
        .arg(format!("-t{threads}"))
        .arg(format!("-c{connections}"))
        .arg(format!("-d{seconds}s"))
        .args(["--timeout", "10s", "-s"])
        .arg(script)
        .arg(url)
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("cannot run wrk (Debian: apt-get install -y wrk): {e}"))?;
    let text = String::from_utf8_lossy(&output.stdout);
    print!("{text}");
    if output.status.success() {
        Ok(measured(&text))
    } else {
        Err(format!("wrk failed: {}", output.status))
    }
}

/// The binaries measured: this build, and the baseline when one is given.
struct Contender {
    name: &'static str,
    binary: PathBuf,
}

/// One scenario against every contender, `rounds` times, alternating which goes first; the
/// medians per contender.
struct Scenario<'a> {
    title: String,
    script: &'a Path,
    path: &'a str,
    connections: u32,
}

fn compare(
    scenario: &Scenario<'_>,
    servers: &[(&Contender, Server)],
    rounds: usize,
    seconds: u32,
    table: &mut Vec<(String, Vec<(&'static str, Measured)>)>,
) -> Result<(), String> {
    let mut results: Vec<Vec<Measured>> = vec![Vec::new(); servers.len()];
    for round in 0..rounds {
        let mut order: Vec<usize> = (0..servers.len()).collect();
        if round % 2 == 1 {
            order.reverse();
        }
        for i in order {
            let (contender, server) = &servers[i];
            let title = if servers.len() > 1 {
                format!(
                    "{} [{}, round {}]",
                    scenario.title,
                    contender.name,
                    round + 1
                )
            } else {
                scenario.title.clone()
            };
            let m = wrk(
                &title,
                scenario.script,
                &format!("{}{}", server.base, scenario.path),
                scenario.connections,
                seconds,
            )?;
            results[i].push(m);
        }
    }
    let row = servers
        .iter()
        .zip(results)
        .map(|((contender, _), runs)| {
            (
                contender.name,
                Measured {
                    requests_per_second: median(
                        runs.iter().map(|m| m.requests_per_second).collect(),
                    ),
                    p99_ms: median(runs.iter().map(|m| m.p99_ms).collect()),
                },
            )
        })
        .collect();
    table.push((scenario.title.clone(), row));
    Ok(())
}

fn print_table(table: &[(String, Vec<(&'static str, Measured)>)], rounds: usize) {
    println!("\n== summary (median of {rounds} round(s) per binary)");
    for (title, row) in table {
        println!("{title}");
        let base = row.get(1).map(|(_, m)| *m);
        for (name, m) in row {
            let ratio = match base {
                Some(b) if b.requests_per_second > 0.0 && *name != "baseline" => format!(
                    "  ({:+.1}% requests/s vs baseline)",
                    (m.requests_per_second / b.requests_per_second - 1.0) * 100.0
                ),
                _ => String::new(),
            };
            println!(
                "  {name:>8}: {:>9.0} requests/s  p99 {:>7.2} ms{ratio}",
                m.requests_per_second, m.p99_ms
            );
        }
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
    let mut contenders = vec![Contender {
        name: "this",
        binary,
    }];
    if let Some(baseline) = std::env::var_os("NODETOOL_BENCH_BASELINE").filter(|v| !v.is_empty()) {
        let baseline = PathBuf::from(baseline);
        if !baseline.is_file() {
            return Err(format!(
                "NODETOOL_BENCH_BASELINE names {}, which is not a file",
                baseline.display()
            ));
        }
        contenders.push(Contender {
            name: "baseline",
            binary: baseline,
        });
    }
    let rounds: usize = std::env::var("NODETOOL_BENCH_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(if contenders.len() > 1 { 3 } else { 1 })
        .max(1);
    println!(
        "nodetool-server bench: {cores} core(s) shared by the server(s) and wrk; {seconds}s per scenario, {rounds} round(s)"
    );
    for c in &contenders {
        println!("{}: {}", c.name, c.binary.display());
    }
    let mut table = Vec::new();
    {
        let servers = contenders
            .iter()
            .map(|c| Server::start(&c.binary, root, &[]).map(|s| (c, s)))
            .collect::<Result<Vec<_>, String>>()?;
        println!("server(s): default bounds (runs at once = cores, queue = 32)");
        for c in [1, 4, 16] {
            let scenario = Scenario {
                title: format!("POST /api/run, trivial body, {c} connection(s)"),
                script: &trivial,
                path: "/api/run",
                connections: c,
            };
            compare(&scenario, &servers, rounds, seconds, &mut table)?;
        }
        let scenario = Scenario {
            title: "POST /api/run, body importing @nodetool-ai/sandbox-geo, 16 connections".into(),
            script: &geo,
            path: "/api/run",
            connections: 16,
        };
        compare(&scenario, &servers, rounds, seconds, &mut table)?;
        let scenario = Scenario {
            title: "GET /api/sandbox-modules/@nodetool-ai/sandbox-geo, 16 connections".into(),
            script: &module,
            path: "/api/sandbox-modules/@nodetool-ai/sandbox-geo",
            connections: 16,
        };
        compare(&scenario, &servers, rounds, seconds, &mut table)?;
    }
    let servers = contenders
        .iter()
        .map(|c| {
            Server::start(&c.binary, root, &["--max-runs", "2", "--queue", "8"]).map(|s| (c, s))
        })
        .collect::<Result<Vec<_>, String>>()?;
    println!("\nserver(s): --max-runs 2 --queue 8 (the gate's bound is 10 requests)");
    let scenario = Scenario {
        title:
            "POST /api/run, trivial body, 128 connections (above the bound: the rest must be 503)"
                .into(),
        script: &trivial,
        path: "/api/run",
        connections: 128,
    };
    compare(&scenario, &servers, rounds, seconds, &mut table)?;
    drop(servers);
    print_table(&table, rounds);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrk_output_and_the_hook_line_are_read() {
        let output = "Running 10s test @ http://127.0.0.1:1/api/run\n  2 threads and 16 connections\nRequests/sec:   5123.45\nTransfer/sec:      1.20MB\nanswers: ok=51234 run-failed=0 503=0 other=0 socket-errors=0\nlatency: p50=2.91ms p90=3.80ms p99=6.02ms max=12.00ms\n";
        let m = measured(output);
        assert!((m.requests_per_second - 5123.45).abs() < 1e-9);
        assert!((m.p99_ms - 6.02).abs() < 1e-9);
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
    }
}
