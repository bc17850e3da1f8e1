//! The `sqlite` and `tokens` host modules through the server's host-module route (the one the
//! browser runner calls; bytes as `{"$bytes": ...}` both ways): every export, the database
//! carried from `run` to `query` as bytes, and hostile inputs answered as the module's 422.

mod support;

use support::host_result as call;

use axum::http::StatusCode;
use serde_json::{Value, json};
use support::{World, post_json, test_config};

async fn refused(state: &nodetool_server::AppState, id: &str, export: &str, args: Value) -> Value {
    let answer = post_json(
        state,
        &format!("/api/host-modules/{id}/{export}"),
        &json!({ "args": args }),
    )
    .await;
    assert_eq!(
        answer.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{id}.{export}: {}",
        answer.text()
    );
    answer.json()["detail"].clone()
}

#[tokio::test]
async fn the_host_module_route_serves_tokens() {
    let world = World::shipped_packs();
    let state = world.state(test_config());
    assert_eq!(
        call(&state, "tokens", "count", json!(["hello world"])).await,
        json!(2)
    );
    assert_eq!(
        call(
            &state,
            "tokens",
            "encode",
            json!(["hello world", "o200k_base"])
        )
        .await,
        json!([24912, 2375])
    );
    assert_eq!(
        call(&state, "tokens", "decode", json!([[15339, 1917], null])).await,
        json!("hello world")
    );
    assert_eq!(
        refused(&state, "tokens", "count", json!(["x", "gpt-4"])).await,
        json!(
            "tokens.count: encoding must be one of cl100k_base, p50k_base, r50k_base, o200k_base"
        )
    );
}

#[tokio::test]
async fn the_host_module_route_serves_sqlite() {
    let world = World::shipped_packs();
    let state = world.state(test_config());
    let ran = call(
        &state,
        "sqlite",
        "run",
        json!([null, [
            "CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT, data BLOB)",
            { "sql": "INSERT INTO t (name, data) VALUES (?, ?)", "params": ["a", { "$bytes": "AAEC" }] },
            "SELECT name FROM t"
        ]]),
    )
    .await;
    assert_eq!(
        ran["results"],
        json!([
            { "changes": 0, "lastInsertRowid": 0 },
            { "changes": 1, "lastInsertRowid": 1 },
            { "rows": [{ "name": "a" }] },
        ])
    );
    let database = ran["database"].clone();
    assert!(database["$bytes"].is_string(), "{database}");
    assert_eq!(
        call(
            &state,
            "sqlite",
            "query",
            json!([database.clone(), "SELECT id, data FROM t WHERE name = :name", { "name": "a" }])
        )
        .await,
        json!([{ "id": 1, "data": { "$bytes": "AAEC" } }])
    );
    // "hello" is not a database; VACUUM INTO a path is refused and writes nothing.
    let detail = refused(
        &state,
        "sqlite",
        "query",
        json!([{ "$bytes": "aGVsbG8=" }, "SELECT 1"]),
    )
    .await;
    assert!(
        detail
            .as_str()
            .is_some_and(|d| d.starts_with("sqlite.query: those bytes are not a SQLite database")),
        "{detail}"
    );
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let target = dir.path().join("out.db");
    let detail = refused(
        &state,
        "sqlite",
        "run",
        json!([
            database.clone(),
            [format!("VACUUM INTO '{}'", target.display())]
        ]),
    )
    .await;
    assert!(
        detail
            .as_str()
            .is_some_and(|d| d.starts_with("sqlite.run: statement 1:")),
        "{detail}"
    );
    assert!(!target.exists());
    let detail = refused(
        &state,
        "sqlite",
        "run",
        json!([database, ["ATTACH ':memory:' AS m"]]),
    )
    .await;
    assert!(
        detail
            .as_str()
            .is_some_and(|d| d.starts_with("sqlite.run: statement 1: ATTACH is not allowed")),
        "{detail}"
    );
}
