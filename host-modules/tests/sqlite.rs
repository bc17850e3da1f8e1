//! `sqlite.query` and `sqlite.run` called as the dispatcher calls them: the reference's shapes
//! (rows as objects, `{rows}` and `{changes, lastInsertRowid}` per statement, the database back
//! as bytes), and every hostile input with its cap: bytes that are not SQLite, a corrupt
//! database, one past the size cap, a query that never ends, `ATTACH`, `VACUUM INTO` a path,
//! `load_extension`, and a result too large to return.

use std::time::{Duration, Instant};

use nodetool_host_modules::{HostError, HostErrorCode, implementation};
use nodetool_protocol::value::Value;

fn call(export: &str, args: &[Value]) -> Result<Value, HostError> {
    let f = implementation("sqlite", export).unwrap_or_else(|| panic!("sqlite.{export}"));
    f(args)
}

fn s(v: &str) -> Value {
    Value::String(v.into())
}

fn n(v: f64) -> Value {
    Value::Number(v)
}

fn obj(members: &[(&str, Value)]) -> Value {
    Value::Object(
        members
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect(),
    )
}

fn stmt(sql: &str, params: Value) -> Value {
    obj(&[("sql", s(sql)), ("params", params)])
}

/// `run`'s bytes and results.
fn run(database: Value, statements: Vec<Value>) -> (Vec<u8>, Vec<Value>) {
    match call("run", &[database, Value::Array(statements)]) {
        Ok(Value::Object(members)) => {
            let mut bytes = None;
            let mut results = None;
            for (k, v) in members {
                match (k.as_str(), v) {
                    ("database", Value::Bytes(b)) => bytes = Some(b),
                    ("results", Value::Array(r)) => results = Some(r),
                    other => panic!("unexpected member {other:?}"),
                }
            }
            (
                bytes.unwrap_or_else(|| panic!("no database")),
                results.unwrap_or_else(|| panic!("no results")),
            )
        }
        other => panic!("run: {other:?}"),
    }
}

/// A database with `cards(id, front, box)` holding `rows` rows.
fn cards(rows: usize) -> Vec<u8> {
    let mut statements = vec![s(
        "CREATE TABLE cards (id INTEGER PRIMARY KEY, front TEXT NOT NULL, box INTEGER)",
    )];
    if rows > 0 {
        statements.push(stmt(
            "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < ?) \
             INSERT INTO cards (front, box) SELECT 'card ' || i, i % 3 FROM c",
            Value::Array(vec![n(rows as f64)]),
        ));
    }
    run(Value::Null, statements).0
}

fn err(result: Result<Value, HostError>) -> HostError {
    match result {
        Err(e) => e,
        Ok(v) => panic!(
            "expected an error, got {}",
            format!("{v:?}").chars().take(300).collect::<String>()
        ),
    }
}

#[test]
fn run_then_query_round_trip() {
    let (bytes, results) = run(
        Value::Null,
        vec![
            s(
                "CREATE TABLE cards (id INTEGER PRIMARY KEY AUTOINCREMENT, front TEXT, back TEXT, box INTEGER, data BLOB)",
            ),
            stmt(
                "INSERT INTO cards (front, back, box, data) VALUES (?, ?, ?, ?)",
                Value::Array(vec![
                    s("hablar"),
                    s("to speak"),
                    n(1.0),
                    Value::Bytes(vec![0, 1, 255]),
                ]),
            ),
            stmt(
                "INSERT INTO cards (front, back, box) VALUES (:front, @back, $box)",
                obj(&[
                    ("front", s("comer")),
                    ("back", s("to eat")),
                    ("box", Value::Bool(true)),
                ]),
            ),
            s("SELECT COUNT(*) AS total FROM cards"),
        ],
    );
    assert_eq!(&bytes[..16], b"SQLite format 3\0");
    assert_eq!(
        results,
        vec![
            obj(&[("changes", n(0.0)), ("lastInsertRowid", n(0.0))]),
            obj(&[("changes", n(1.0)), ("lastInsertRowid", n(1.0))]),
            obj(&[("changes", n(1.0)), ("lastInsertRowid", n(2.0))]),
            obj(&[("rows", Value::Array(vec![obj(&[("total", n(2.0))])]))]),
        ]
    );
    let rows = call(
        "query",
        &[
            Value::Bytes(bytes.clone()),
            s("SELECT front, box, data FROM cards WHERE box = ? ORDER BY id"),
            Value::Array(vec![n(1.0)]),
        ],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        rows,
        Value::Array(vec![
            obj(&[
                ("front", s("hablar")),
                ("box", n(1.0)),
                ("data", Value::Bytes(vec![0, 1, 255]))
            ]),
            obj(&[
                ("front", s("comer")),
                ("box", n(1.0)),
                ("data", Value::Null)
            ]),
        ])
    );
    // Objects bind as JSON text; an integer past 2^53 comes back as its decimal string.
    let rows = call(
        "query",
        &[
            Value::Bytes(bytes),
            s("SELECT ? AS j, 9007199254740993 AS big, 1.5 AS r, 'x' AS a, 'y' AS a"),
            Value::Array(vec![obj(&[("k", Value::Array(vec![n(1.0)]))])]),
        ],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        rows,
        Value::Array(vec![obj(&[
            ("j", s("{\"k\":[1]}")),
            ("big", s("9007199254740993")),
            ("r", n(1.5)),
            ("a", s("y")),
        ])])
    );
}

#[test]
fn a_failing_batch_changes_nothing_and_names_its_statement() {
    let before = cards(3);
    let e = err(call(
        "run",
        &[
            Value::Bytes(before.clone()),
            Value::Array(vec![
                s("DELETE FROM cards"),
                s("INSERT INTO missing VALUES (1)"),
            ]),
        ],
    ));
    assert_eq!(e.code(), HostErrorCode::InvalidArgument);
    assert_eq!(
        e.message(),
        "sqlite.run: statement 2: no such table: missing"
    );
    let rows = call(
        "query",
        &[Value::Bytes(before), s("SELECT count(*) AS n FROM cards")],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(rows, Value::Array(vec![obj(&[("n", n(3.0))])]));
}

#[test]
fn query_refuses_writes_and_bad_arguments() {
    let db = Value::Bytes(cards(1));
    for sql in [
        "DELETE FROM cards",
        "INSERT INTO cards (front) VALUES ('x') RETURNING id",
        "CREATE TABLE t (x)",
    ] {
        let e = err(call("query", &[db.clone(), s(sql)]));
        assert!(
            e.message().contains("use run() for anything that writes"),
            "{sql}: {e}"
        );
    }
    let e = err(call("query", &[db.clone(), s("  ")]));
    assert_eq!(e.message(), "sqlite.query: sql must be a non-empty string");
    let e = err(call("query", &[db.clone(), s("SELECT 1; SELECT 2")]));
    assert!(e.message().contains("more than one statement"), "{e}");
    let e = err(call(
        "query",
        &[db.clone(), s("SELECT ?"), Value::Array(vec![])],
    ));
    assert!(e.message().contains("has 1 parameters and 0 params"), "{e}");
    let e = err(call("query", &[db.clone(), s("SELECT :x"), obj(&[])]));
    assert!(e.message().contains("missing named parameter \"x\""), "{e}");
    let e = err(call("query", &[db, s("SELECT 1"), s("nope")]));
    assert!(
        e.message().contains("params must be an array or an object"),
        "{e}"
    );
    let e = err(call("query", &[s("not bytes"), s("SELECT 1")]));
    assert!(e.message().contains("database must be a Uint8Array"), "{e}");
    let e = err(call("run", &[Value::Null, Value::Array(vec![])]));
    assert_eq!(e.message(), "sqlite.run: pass at least one statement");
    let e = err(call(
        "run",
        &[Value::Null, Value::Array(vec![s("SELECT 1"); 501])],
    ));
    assert_eq!(e.code(), HostErrorCode::LimitExceeded);
    let e = err(call(
        "run",
        &[
            Value::Null,
            Value::Array(vec![s("BEGIN"), s("CREATE TABLE t (x)")]),
        ],
    ));
    assert!(e.message().contains("a transaction is still open"), "{e}");
}

#[test]
fn hostile_bytes_that_are_not_sqlite() {
    let e = err(call(
        "query",
        &[
            Value::Bytes(b"this is a text file, not a database".repeat(200)),
            s("SELECT 1"),
        ],
    ));
    assert_eq!(e.code(), HostErrorCode::MalformedInput);
    assert!(
        e.message()
            .starts_with("sqlite.query: those bytes are not a SQLite database"),
        "{e}"
    );
}

#[test]
fn hostile_corrupt_database() {
    let mut bytes = cards(2000);
    assert!(bytes.len() > 8 * 4096);
    // The header stays valid; every page after the first is noise.
    let mut seed = 7u32;
    for b in &mut bytes[4096..] {
        seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12_345);
        *b = (seed >> 16) as u8;
    }
    for sql in [
        "SELECT count(*) FROM cards",
        "SELECT * FROM cards ORDER BY front",
    ] {
        let e = err(call("query", &[Value::Bytes(bytes.clone()), s(sql)]));
        assert_eq!(e.code(), HostErrorCode::MalformedInput, "{sql}: {e}");
        assert!(
            e.message().contains("not a well-formed SQLite database")
                || e.message().contains("not a SQLite database"),
            "{e}"
        );
    }
}

#[test]
fn hostile_database_past_the_size_cap() {
    let e = err(call(
        "query",
        &[Value::Bytes(vec![0; 10 * 1024 * 1024 + 1]), s("SELECT 1")],
    ));
    assert_eq!(e.code(), HostErrorCode::InputTooLarge);
    // Grown past the output cap inside one call: stopped by max_page_count.
    let e = err(call(
        "run",
        &[
            Value::Null,
            Value::Array(vec![
                s("CREATE TABLE big (b BLOB)"),
                s(
                    "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 100) INSERT INTO big SELECT zeroblob(1000000) FROM c",
                ),
            ]),
        ],
    ));
    assert_eq!(e.code(), HostErrorCode::OutputTooLarge, "{e}");
    assert!(
        e.message()
            .contains("statement 2: the database would pass the 33554432 byte limit"),
        "{e}"
    );
}

#[test]
fn hostile_endless_recursive_cte_is_stopped_by_the_step_cap() {
    let started = Instant::now();
    let e = err(call(
        "query",
        &[
            Value::Null,
            s(
                "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c) SELECT count(*) FROM c",
            ),
        ],
    ));
    assert_eq!(e.code(), HostErrorCode::LimitExceeded, "{e}");
    assert!(
        e.message().contains("steps, the step limit of one call"),
        "{e}"
    );
    assert!(started.elapsed() < Duration::from_secs(300));
}

#[test]
fn hostile_attach_is_refused() {
    for sql in [
        "ATTACH DATABASE '/tmp/nodetool-attach.db' AS other",
        "ATTACH ':memory:' AS m",
        "DETACH DATABASE main",
    ] {
        let e = err(call("run", &[Value::Null, s(sql)]));
        assert_eq!(e.code(), HostErrorCode::Unsupported, "{sql}: {e}");
        assert!(e.message().contains("is not allowed"), "{sql}: {e}");
    }
    assert!(!std::path::Path::new("/tmp/nodetool-attach.db").exists());
}

#[test]
fn hostile_vacuum_into_a_path_is_refused_and_writes_nothing() {
    let dir = std::env::temp_dir().join(format!("nodetool-vacuum-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    let target = dir.join("x.db");
    let db = Value::Bytes(cards(10));
    for sql in [
        format!("VACUUM INTO '{}'", target.display()),
        format!("VACUUM INTO 'file:{}?mode=rwc'", target.display()),
        "VACUUM".to_string(),
    ] {
        let e = err(call("run", &[db.clone(), s(&sql)]));
        assert!(
            matches!(
                e.code(),
                HostErrorCode::Unsupported | HostErrorCode::InvalidArgument
            ),
            "{sql}: {e}"
        );
        assert!(!target.exists(), "{sql} wrote a file");
    }
    assert_eq!(
        std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{e}"))
            .count(),
        0
    );
    std::fs::remove_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn hostile_load_extension_and_pragmas_are_refused() {
    for sql in [
        "SELECT load_extension('/usr/lib/x86_64-linux-gnu/libc.so.6')",
        "SELECT LOAD_EXTENSION('x', 'y')",
    ] {
        let e = err(call("query", &[Value::Null, s(sql)]));
        assert_eq!(e.code(), HostErrorCode::Unsupported, "{sql}: {e}");
        assert!(e.message().contains("load_extension is not allowed"), "{e}");
    }
    for sql in [
        "PRAGMA temp_store=FILE",
        "PRAGMA journal_mode=WAL",
        "PRAGMA writable_schema=ON",
        "PRAGMA hard_heap_limit=0",
        "PRAGMA max_page_count=100000000",
    ] {
        let e = err(call("run", &[Value::Null, s(sql)]));
        assert_eq!(e.code(), HostErrorCode::Unsupported, "{sql}: {e}");
        assert!(e.message().contains("is not allowed"), "{e}");
    }
    // The read-only pragmas work.
    let rows = call(
        "query",
        &[Value::Bytes(cards(1)), s("PRAGMA table_info(cards)")],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(matches!(rows, Value::Array(r) if r.len() == 3));
}

#[test]
fn hostile_huge_result_is_stopped_by_the_result_cap() {
    let db = Value::Bytes(cards(2000));
    // 4 million rows: reading stops at the 10,001st.
    let started = Instant::now();
    let e = err(call(
        "query",
        &[
            db.clone(),
            s("SELECT a.id, b.id FROM cards a CROSS JOIN cards b"),
        ],
    ));
    assert_eq!(e.code(), HostErrorCode::OutputTooLarge, "{e}");
    assert!(e.message().contains("more than 10000 rows"), "{e}");
    assert!(started.elapsed() < Duration::from_secs(60));
    // Wide rows: the value cap across the statements of one call.
    let wide: Vec<String> = (0..200).map(|i| format!("a.front AS c{i}")).collect();
    let sql = format!(
        "SELECT {} FROM cards a, cards b LIMIT 6000",
        wide.join(", ")
    );
    let e = err(call("run", &[db, Value::Array(vec![s(&sql)])]));
    assert_eq!(e.code(), HostErrorCode::OutputTooLarge, "{e}");
    assert!(e.message().contains("1000000 values"), "{e}");
}

#[test]
fn deep_expressions_and_long_values_hit_sqlite_limits() {
    let deep = format!("SELECT {}1{}", "(".repeat(5000), ")".repeat(5000));
    let e = err(call("query", &[Value::Null, s(&deep)]));
    assert_eq!(e.code(), HostErrorCode::InvalidArgument, "{e}");
    let e = err(call(
        "query",
        &[Value::Null, s("SELECT length(zeroblob(20000000)) AS n")],
    ));
    assert_eq!(e.code(), HostErrorCode::LimitExceeded, "{e}");
    let e = err(call(
        "query",
        &[
            Value::Null,
            s("SELECT length(printf('%.*c', 20000000, 'x')) AS n"),
        ],
    ));
    assert_eq!(e.code(), HostErrorCode::LimitExceeded, "{e}");
}

#[test]
fn a_wal_mode_database_is_read() {
    let mut bytes = cards(5);
    bytes[18] = 2;
    bytes[19] = 2;
    let rows = call(
        "query",
        &[Value::Bytes(bytes), s("SELECT count(*) AS n FROM cards")],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(rows, Value::Array(vec![obj(&[("n", n(5.0))])]));
}
