//! `cargo xtask bench data`: `tokens.count` beside js-tiktoken, and `sqlite.query` beside
//! better-sqlite3, on the same inputs, side by side.
//!
//! - tokens: 400 texts (prose, code, non-Latin scripts, emoji; 1.1 MB in all) counted in
//!   `cl100k_base` and `o200k_base`; js-tiktoken's figure is the reference's `count`
//!   (`getEncoding(name).encode(text).length`), its encoder built before timing, as ours is.
//! - sqlite: one database of 10,000 rows made here (`sqlite.run`) and written to
//!   `target/bench-data/items.db`; each call is the reference's `query` (open the bytes, check
//!   the header, prepare, read every row, close) for three queries: a point lookup, a
//!   1,000-row range and a `GROUP BY`. The figure is calls per second.
//!
//! The reference's libraries are installed by name into `target/bench-data-npm/` on first use
//! (js-tiktoken 1.0.21, the version the reference and `conformance/` pin, and better-sqlite3
//! 12.11.1 built from source against Debian's node headers, since prebuilt binaries come from
//! GitHub, which this network cannot reach). What cannot be installed is named, and its side
//! left out. Figures are the median of `RUNS` (15) after 3 warm-ups, of the host implementations
//! called directly (the reference's figures are its library calls, likewise without a sandbox
//! crossing). Each reference line also says whether its answers equal ours.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nodetool_host_modules::implementation;
use nodetool_protocol::value::Value;
use serde_json::json;

const RUNS: usize = 15;
const WARMUPS: usize = 3;
const TEXTS: usize = 400;
const ROWS: usize = 10_000;
const JS_TIKTOKEN: &str = "js-tiktoken@1.0.21";
const BETTER_SQLITE3: &str = "better-sqlite3@12.11.1";

fn s(v: &str) -> Value {
    Value::String(v.into())
}

fn call(id: &str, export: &str, args: &[Value]) -> Value {
    let f = implementation(id, export).unwrap_or_else(|| panic!("{id}.{export}"));
    f(args).unwrap_or_else(|e| panic!("{e}"))
}

fn median(mut times: Vec<Duration>) -> f64 {
    times.sort();
    times[times.len() / 2].as_secs_f64() * 1000.0
}

/// The median of `f` in milliseconds, after the warm-ups.
fn time(mut f: impl FnMut()) -> f64 {
    for _ in 0..WARMUPS {
        f();
    }
    median(
        (0..RUNS)
            .map(|_| {
                let started = Instant::now();
                f();
                started.elapsed()
            })
            .collect(),
    )
}

/// Text `i` of the corpus: a few KiB mixing prose, code, other scripts and emoji.
fn text(i: usize) -> String {
    const PARTS: [&str; 12] = [
        "The quarterly report shows that revenue increased in every region, while costs stayed flat. ",
        "Customers asked for faster exports, so the team rewrote the pipeline in two weeks. ",
        "fn parse(input: &str) -> Result<Vec<Token>, Error> {\n    let mut out = Vec::new();\n    for c in input.chars() { out.push(Token::from(c)?); }\n    Ok(out)\n}\n",
        "const rows = await query(db, \"SELECT * FROM cards WHERE box = ?\", [1]);\n",
        "日本語の文章も少し含まれています。東京は晴れです。",
        "Привет! Это короткий текст на русском языке. ",
        "Emoji 🎉👍🏽 and flags 🇩🇪🇯🇵 appear now and then. ",
        "    indented line with trailing spaces    \n\n\t\ttabs\n",
        "Numbers: 3.14159, 2,718,281, 1e-9 and 42 answers. ",
        "Straße, café, naïve, résumé — accented words. ",
        "<div class=\"card\"><p>Hello, <b>world</b>!</p></div>\n",
        "{\"id\": 17, \"tags\": [\"a\", \"b\"], \"ok\": true}\n",
    ];
    let mut out = String::new();
    let mut seed = i as u64 * 2_654_435_761 + 17;
    while out.len() < 2_800 {
        seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        out.push_str(PARTS[(seed >> 33) as usize % PARTS.len()]);
    }
    out
}

/// The benchmark database: `items(id, name, category, price, note)`, 10,000 rows.
fn database() -> Vec<u8> {
    let answer = call(
        "sqlite",
        "run",
        &[
            Value::Null,
            Value::Array(vec![
                s(
                    "CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL, category TEXT NOT NULL, price REAL NOT NULL, note TEXT)",
                ),
                s("CREATE INDEX items_category ON items (category)"),
                Value::Object(vec![
                    (
                        "sql".into(),
                        s(
                            "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < ?) \
                        INSERT INTO items (name, category, price, note) \
                        SELECT 'item ' || i, 'cat' || (i % 20), (i * 37 % 1000) / 10.0, CASE WHEN i % 3 = 0 THEN NULL ELSE 'note for ' || i END FROM c",
                        ),
                    ),
                    (
                        "params".into(),
                        Value::Array(vec![Value::Number(ROWS as f64)]),
                    ),
                ]),
            ]),
        ],
    );
    match answer.get("database") {
        Some(Value::Bytes(b)) => b.clone(),
        _ => panic!("sqlite.run gave no database"),
    }
}

/// The three queries: (label, sql, params).
fn queries() -> Vec<(&'static str, &'static str, serde_json::Value)> {
    vec![
        (
            "point lookup",
            "SELECT * FROM items WHERE id = ?",
            json!([4242]),
        ),
        (
            "1,000-row range",
            "SELECT id, name, price, note FROM items WHERE id BETWEEN ? AND ? ORDER BY id",
            json!([3000, 3999]),
        ),
        (
            "group by",
            "SELECT category, count(*) AS n, avg(price) AS mean FROM items GROUP BY category ORDER BY category",
            json!([]),
        ),
    ]
}

/// The peer script: js-tiktoken's count and better-sqlite3's query as the reference has them.
const PEER: &str = r#"
import { readFileSync } from "node:fs";
const input = JSON.parse(readFileSync(0, "utf8"));
const { runs, warmups } = input;
function time(f) {
  for (let i = 0; i < warmups; i++) f();
  const times = [];
  for (let i = 0; i < runs; i++) {
    const t = process.hrtime.bigint();
    f();
    times.push(Number(process.hrtime.bigint() - t) / 1e6);
  }
  times.sort((a, b) => a - b);
  return times[Math.floor(times.length / 2)];
}
const out = { node: process.version, tokens: {}, sqlite: null, sqliteError: null };
const { getEncoding } = await import("js-tiktoken");
for (const name of input.encodings) {
  const enc = getEncoding(name);
  let total = 0;
  const ms = time(() => { total = 0; for (const t of input.texts) total += t === "" ? 0 : enc.encode(t).length; });
  out.tokens[name] = { ms, total };
}
try {
  const Database = (await import("better-sqlite3")).default;
  const bytes = readFileSync(input.database);
  const rowValue = (v) => typeof v === "bigint" ? (Number.isSafeInteger(Number(v)) ? Number(v) : v.toString()) : v instanceof Uint8Array ? new Uint8Array(v) : v;
  const query = (sql, params) => {
    const db = new Database(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length));
    try {
      db.prepare("SELECT count(*) FROM sqlite_master").all();
      const stmt = db.prepare(sql);
      const rows = stmt.all(...params);
      return rows.map((row) => { const o = {}; for (const [k, v] of Object.entries(row)) o[k] = rowValue(v); return o; });
    } finally { db.close(); }
  };
  out.sqlite = input.queries.map(({ sql, params, calls }) => {
    let rows;
    const ms = time(() => { for (let i = 0; i < calls; i++) rows = query(sql, params); });
    return { ms, rows };
  });
} catch (e) {
  out.sqliteError = String(e && e.message || e);
}
process.stdout.write(JSON.stringify(out));
"#;

/// `target/` of the workspace.
fn target() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../target")
}

/// Installs `spec` by name into `dir` unless `module` is already there; `Err` says why not.
fn npm_install(
    dir: &Path,
    spec: &str,
    module: &str,
    env: &[(&str, String)],
    extra: &[&str],
) -> Result<(), String> {
    if dir
        .join("node_modules")
        .join(module)
        .join("package.json")
        .is_file()
    {
        return Ok(());
    }
    let mut command = Command::new("npm");
    command
        // Saved into the directory's own package.json (under target/): with --no-save, each
        // install would prune the package the one before it installed.
        .args(["install", "--no-audit", "--no-fund", "--prefix"])
        .arg(dir)
        .args(extra)
        .arg(spec)
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    for (k, v) in env {
        command.env(k, v);
    }
    let out = command
        .output()
        .map_err(|e| format!("npm could not be run ({e}); Debian: nodejs npm"))?;
    if out.status.success()
        && dir
            .join("node_modules")
            .join(module)
            .join("package.json")
            .is_file()
    {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    let last: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    let tail = last[last.len().saturating_sub(4)..].join(" | ");
    Err(format!(
        "npm install {spec} failed ({}): {tail}",
        out.status
    ))
}

/// What the peer needs, installed into `target/bench-data-npm/`; a note per thing missing.
fn install_peer(dir: &Path) -> Vec<String> {
    let mut missing = Vec::new();
    if let Err(e) = std::fs::create_dir_all(dir) {
        return vec![format!("cannot create {}: {e}", dir.display())];
    }
    if let Err(e) = npm_install(dir, JS_TIKTOKEN, "js-tiktoken", &[], &["--ignore-scripts"]) {
        missing.push(e);
    }
    // better-sqlite3's install script builds the addon; its prebuilt binaries and node-gyp's
    // header download both come from hosts this network cannot reach, so it is built from
    // source against the node headers Debian installs (nodejs / libnode-dev).
    let headers = ["/usr/include/node/node.h", "/usr/include/nodejs/src/node.h"]
        .iter()
        .find(|p| Path::new(p).is_file())
        .map(|p| {
            Path::new(p)
                .ancestors()
                .nth(3)
                .map(Path::to_path_buf)
                .unwrap_or_default()
        });
    let built = dir
        .join("node_modules/better-sqlite3/build/Release/better_sqlite3.node")
        .is_file();
    if !built {
        match headers {
            None => missing.push(format!(
                "{BETTER_SQLITE3} needs node's C headers to build (none in /usr/include/node): apt-get install libnode-dev node-gyp"
            )),
            Some(nodedir) => {
                let _ = std::fs::remove_dir_all(dir.join("node_modules/better-sqlite3"));
                if let Err(e) = npm_install(
                    dir,
                    BETTER_SQLITE3,
                    "better-sqlite3",
                    &[
                        ("npm_config_nodedir", nodedir.display().to_string()),
                        ("npm_config_build_from_source", "true".into()),
                    ],
                    &[],
                ) {
                    missing.push(format!(
                        "{e} (built from source with npm_config_nodedir={}; it needs python3, make and g++)",
                        nodedir.display()
                    ));
                } else if !dir
                    .join("node_modules/better-sqlite3/build/Release/better_sqlite3.node")
                    .is_file()
                {
                    missing.push(format!("{BETTER_SQLITE3} installed but its addon was not built"));
                }
            }
        }
    }
    missing
}

/// Numbers compared as numbers (node writes `2`, our JSON may write `2.0`).
fn same(a: &serde_json::Value, b: &serde_json::Value) -> bool {
    use serde_json::Value as J;
    match (a, b) {
        (J::Number(x), J::Number(y)) => x.as_f64() == y.as_f64(),
        (J::Array(x), J::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same(a, b))
        }
        (J::Object(x), J::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .zip(y)
                    .all(|((ka, a), (kb, b))| ka == kb && same(a, b))
        }
        (a, b) => a == b,
    }
}

fn main() {
    let texts: Vec<String> = (0..TEXTS).map(text).collect();
    let bytes: usize = texts.iter().map(String::len).sum();
    let encodings = ["cl100k_base", "o200k_base"];
    println!(
        "tokens.count: {TEXTS} texts, {bytes} bytes; median of {RUNS} after {WARMUPS} warm-ups"
    );
    let mut ours_tokens = Vec::new();
    for encoding in encodings {
        let args: Vec<[Value; 2]> = texts.iter().map(|t| [s(t), s(encoding)]).collect();
        let mut total = 0u64;
        let ms = time(|| {
            total = 0;
            for a in &args {
                if let Value::Number(n) = call("tokens", "count", a) {
                    total += n as u64;
                }
            }
        });
        println!(
            "  ours   {encoding:<12} {ms:>9.2} ms  ({total} tokens, {:.1} MB/s)",
            bytes as f64 / ms / 1000.0
        );
        ours_tokens.push((encoding, ms, total));
    }

    let db = database();
    let out_dir = target().join("bench-data");
    let _ = std::fs::create_dir_all(&out_dir);
    let db_path = out_dir.join("items.db");
    if let Err(e) = std::fs::write(&db_path, &db) {
        println!("cannot write {}: {e}", db_path.display());
    }
    // Calls per timed sample, so a sample is some milliseconds.
    let calls = [200usize, 20, 50];
    println!(
        "sqlite.query: a {} byte database of {ROWS} rows, opened per call; median of {RUNS} samples",
        db.len()
    );
    let mut ours_sql = Vec::new();
    for ((label, sql, params), n) in queries().into_iter().zip(calls) {
        let args = [
            Value::Bytes(db.clone()),
            s(sql),
            Value::from_json(params.clone()),
        ];
        let mut rows = Value::Null;
        let ms = time(|| {
            for _ in 0..n {
                rows = call("sqlite", "query", &args);
            }
        });
        let per_s = n as f64 / ms * 1000.0;
        println!(
            "  ours   {label:<16} {per_s:>9.0} calls/s  ({:.3} ms a call)",
            ms / n as f64
        );
        ours_sql.push((label, sql, params, n, per_s, rows.to_json()));
    }

    let peer_dir = target().join("bench-data-npm");
    let missing = install_peer(&peer_dir);
    for note in &missing {
        println!("reference: {note}");
    }
    if !peer_dir
        .join("node_modules/js-tiktoken/package.json")
        .is_file()
    {
        println!("reference: js-tiktoken is missing, so there is no reference figure");
        return;
    }
    let script = peer_dir.join("data-peer.mjs");
    if let Err(e) = std::fs::write(&script, PEER) {
        println!("reference: cannot write {}: {e}", script.display());
        return;
    }
    let input = json!({
        "runs": RUNS,
        "warmups": WARMUPS,
        "encodings": encodings,
        "texts": texts,
        "database": db_path,
        "queries": ours_sql.iter().map(|(_, sql, params, n, _, _)| json!({ "sql": sql, "params": params, "calls": n })).collect::<Vec<_>>(),
    });
    let child = Command::new("node")
        .arg(&script)
        .current_dir(&peer_dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let Ok(mut child) = child else {
        println!("reference: node could not be run (Debian: nodejs)");
        return;
    };
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(input.to_string().as_bytes());
    }
    let Ok(out) = child.wait_with_output() else {
        println!("reference: node failed");
        return;
    };
    let Ok(peer) = serde_json::from_slice::<serde_json::Value>(&out.stdout) else {
        println!(
            "reference: the peer script failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        return;
    };
    println!(
        "reference runtime: node {}",
        peer["node"].as_str().unwrap_or("?")
    );
    println!("side by side (ratio = reference time / ours; goal >= 3x)");
    for (encoding, ms, total) in &ours_tokens {
        let theirs = &peer["tokens"][encoding];
        let their_ms = theirs["ms"].as_f64().unwrap_or(f64::NAN);
        let agree = theirs["total"].as_u64() == Some(*total);
        println!(
            "  tokens.count {encoding:<12} ours {ms:>8.2} ms  js-tiktoken {their_ms:>8.2} ms  ratio {:>5.2}x  same counts: {}",
            their_ms / ms,
            if agree { "yes" } else { "NO" }
        );
    }
    match peer["sqlite"].as_array() {
        Some(list) => {
            for ((label, _, _, n, per_s, rows), theirs) in ours_sql.iter().zip(list) {
                let their_ms = theirs["ms"].as_f64().unwrap_or(f64::NAN);
                let their_per_s = *n as f64 / their_ms * 1000.0;
                println!(
                    "  sqlite.query {label:<16} ours {per_s:>8.0}/s  better-sqlite3 {their_per_s:>8.0}/s  ratio {:>5.2}x  same rows: {}",
                    per_s / their_per_s,
                    if same(rows, &theirs["rows"]) {
                        "yes"
                    } else {
                        "NO"
                    }
                );
            }
        }
        None => println!(
            "  sqlite.query: no better-sqlite3 figure ({})",
            peer["sqliteError"]
                .as_str()
                .unwrap_or("better-sqlite3 is not installed")
        ),
    }
}
