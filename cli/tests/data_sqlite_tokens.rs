//! The `sqlite` and `tokens` host packs through `nodetool run` (a confined sandbox worker, which
//! cannot open files): every export, every SKILL.md example as written, and the hostile cases
//! that matter confined: a query that never ends stopped at the run's deadline, and `ATTACH` /
//! `VACUUM INTO` refused with nothing written.

use std::time::{Duration, Instant};

use nodetool_tests::world::{World, shipped_packs};
use serde_json::{Value, json};

/// `nodetool run --json` with the body on stdin, `extra` arguments after it: the JSON answer and
/// the exit code.
fn run_with(code: &str, extra: &[String]) -> (Value, i32) {
    let world = World::with_shipped(shipped_packs());
    let output = assert_cmd::Command::from_std(world.command(env!("CARGO_BIN_EXE_nodetool")))
        .args(["run", "--json"])
        .args(extra)
        .write_stdin(code)
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let text = String::from_utf8_lossy(&output.stdout);
    let json: Value = serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("{e}: {text}"));
    (json, output.status.code().unwrap_or(-1))
}

fn run(code: &str) -> (Value, i32) {
    run_with(code, &[])
}

#[test]
fn both_packs_work_through_nodetool_run() {
    let (out, code) = run(r#"
import { count, encode, decode } from "@nodetool-ai/sandbox-tokens";
import sqlite from "@nodetool-ai/sandbox-sqlite";

const ids = await encode("hello world");
const { database, results } = await sqlite.run(null, [
  "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT, tokens INTEGER)",
  { sql: "INSERT INTO notes (body, tokens) VALUES (?, ?)", params: ["hello world", await count("hello world")] },
  { sql: "INSERT INTO notes (body, tokens) VALUES (:body, :tokens)", params: { body: "🎉 emoji", tokens: await count("🎉 emoji", "o200k_base") } },
  "SELECT count(*) AS n FROM notes",
]);
const rows = await sqlite.query(database, "SELECT body, tokens FROM notes ORDER BY id");
return {
  ids,
  o200k: await encode("hello world", "o200k_base"),
  text: await decode(ids),
  empty: await count(""),
  isBytes: database instanceof Uint8Array,
  header: new TextDecoder().decode(database.subarray(0, 15)),
  results,
  rows,
};
"#);
    assert_eq!(code, 0, "{out}");
    let r = &out["result"];
    assert_eq!(r["ids"], json!([15339, 1917]));
    assert_eq!(r["o200k"], json!([24912, 2375]));
    assert_eq!(r["text"], "hello world");
    assert_eq!(r["empty"], 0);
    assert_eq!(r["isBytes"], true);
    assert_eq!(r["header"], "SQLite format 3");
    assert_eq!(
        r["results"],
        json!([
            { "changes": 0, "lastInsertRowid": 0 },
            { "changes": 1, "lastInsertRowid": 1 },
            { "changes": 1, "lastInsertRowid": 2 },
            { "rows": [{ "n": 2 }] },
        ])
    );
    assert_eq!(r["rows"][0], json!({ "body": "hello world", "tokens": 2 }));
    assert_eq!(r["rows"][1]["body"], "🎉 emoji");
}

/// Every example of the two SKILL.md files runs as written, against a workspace holding the
/// `cards.db` the sqlite examples read (made by the pack itself first).
#[test]
fn every_skill_example_runs() {
    let workspace = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let dir = workspace.path().display().to_string();
    let with = |input: Value| {
        vec![
            "--workspace".to_string(),
            dir.clone(),
            "--input".to_string(),
            input.to_string(),
        ]
    };
    let (made, code) = run_with(
        r#"
import { run } from "@nodetool-ai/sandbox-sqlite";
const { database } = await run(null, [
  "CREATE TABLE cards (id INTEGER PRIMARY KEY, front TEXT, back TEXT, box INTEGER)",
  "INSERT INTO cards (front, back, box) VALUES ('hablar', 'to speak', 1), ('comer', 'to eat', 2), ('vivir', 'to live', 1)",
]);
await workspace.writeBytes("cards.db", database);
return database.length;
"#,
        &with(json!({})),
    );
    assert_eq!(code, 0, "{made}");
    let input = json!({
        "text": "The quick brown fox jumps over the lazy dog. ".repeat(20),
        "front": "tener",
        "back": "to have",
    });
    let packs = concat!(env!("CARGO_MANIFEST_DIR"), "/../packs/@nodetool-ai");
    let mut results = Vec::new();
    for id in ["tokens", "sqlite"] {
        let skill = std::fs::read_to_string(format!("{packs}/sandbox-{id}/SKILL.md"))
            .unwrap_or_else(|e| panic!("{id}: {e}"));
        // The first block is the import forms, not a body.
        for block in nodetool_tests::skill::js_blocks(&skill).into_iter().skip(1) {
            let (out, code) = run_with(&block, &with(input.clone()));
            assert_eq!(code, 0, "sandbox-{id} example failed:\n{block}\n{out}");
            results.push(out["result"].clone());
        }
    }
    assert_eq!(results.len(), 5, "{results:?}");
    assert_eq!(results[0], json!({ "tokens": 201, "fits": true }));
    assert_eq!(results[1], json!({ "ids": [15339, 1917], "first": 15339 }));
    let head = results[2]["head"].as_str().unwrap_or_default();
    assert!(
        head.len() > 300 && input["text"].as_str().is_some_and(|t| t.starts_with(head)),
        "{head:?}"
    );
    assert_eq!(
        results[3],
        json!({ "due": [
            { "front": "hablar", "back": "to speak" },
            { "front": "vivir", "back": "to live" },
        ] })
    );
    assert_eq!(results[4], json!({ "id": 4, "total": 4 }));
}

#[test]
fn an_endless_query_stops_at_the_runs_deadline() {
    let started = Instant::now();
    let (out, code) = run_with(
        r#"
import { query } from "@nodetool-ai/sandbox-sqlite";
return await query(null, "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c) SELECT count(*) AS n FROM c");
"#,
        &["--timeout-ms".to_string(), "1500".to_string()],
    );
    let took = started.elapsed();
    assert_ne!(code, 0, "{out}");
    let text = out.to_string();
    assert!(
        text.contains("deadline") || text.contains("timed out") || text.contains("timeout"),
        "{out}"
    );
    // The run's 1.5 s and the worker's start-up, well before the step cap's billion steps.
    assert!(took < Duration::from_secs(15), "{took:?}: {out}");
}

#[test]
fn attach_and_vacuum_into_are_refused_confined_and_write_nothing() {
    let workspace = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let target = workspace.path().join("copy.db");
    let path = target.display().to_string();
    let statements = json!([
        format!("ATTACH DATABASE '{path}' AS other"),
        format!("VACUUM INTO '{path}'"),
    ]);
    let body = format!(
        r#"
import {{ run, query }} from "@nodetool-ai/sandbox-sqlite";
const errors = [];
const {{ database }} = await run(null, ["CREATE TABLE t (x)", "INSERT INTO t VALUES (1)"]);
for (const sql of {statements}) {{
  try {{ await run(database, [sql]); errors.push("ran: " + sql); }} catch (e) {{ errors.push(e.message); }}
}}
try {{ await query(database, "SELECT load_extension('libc.so.6')"); }} catch (e) {{ errors.push(e.message); }}
try {{ await query(new Uint8Array([1, 2, 3, 4]), "SELECT 1"); }} catch (e) {{ errors.push(e.message); }}
return errors;
"#
    );
    let (out, code) = run_with(
        &body,
        &[
            "--workspace".to_string(),
            workspace.path().display().to_string(),
        ],
    );
    assert_eq!(code, 0, "{out}");
    let errors = out["result"].as_array().cloned().unwrap_or_default();
    assert_eq!(errors.len(), 4, "{out}");
    assert!(
        errors[0]
            .as_str()
            .is_some_and(|e| e.starts_with("sqlite.run: statement 1: ATTACH is not allowed")),
        "{out}"
    );
    assert!(
        errors[1]
            .as_str()
            .is_some_and(|e| e.starts_with("sqlite.run: statement 1:") && !e.starts_with("ran")),
        "{out}"
    );
    assert_eq!(
        errors[2], "sqlite.query: load_extension is not allowed",
        "{out}"
    );
    assert!(
        errors[3]
            .as_str()
            .is_some_and(|e| e.starts_with("sqlite.query: those bytes are not a SQLite database")),
        "{out}"
    );
    assert!(!target.exists());
}
