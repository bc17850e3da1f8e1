//! Every route in-process (`tower::ServiceExt::oneshot`): each status it answers with and
//! each header it sets, against the fixture packs.

mod support;

use std::sync::Arc;

use axum::body::Body;
use axum::http::{Method, StatusCode};
use nodetool_frontend::answers;
use nodetool_frontend::search::SourceError;
use nodetool_protocol::catalog::{
    Declaration, DeliveryRefusal, RefusalReason, Resolution, SkillDisclosure, Status, Summary,
};
use nodetool_protocol::hex::sha256_hex;
use nodetool_runtime::{DeliveryFuture, SandboxModuleCatalog};
use nodetool_server::{AppState, CatalogSource, ServerConfig};
use serde_json::{Value, json};
use support::{Answer, World, get, must, post_json, send, test_config};

fn digest_of(state: &AppState, specifier: &str) -> String {
    state
        .catalog()
        .summaries()
        .iter()
        .find(|s| s.specifier == specifier)
        .map(|s| s.content_digest.clone())
        .unwrap_or_else(|| panic!("{specifier} has no summary"))
}

/// The headers every 200 and 304 of the delivery route carry.
fn assert_delivery_headers(answer: &Answer, digest: &str, file_id: &str, internal: bool) {
    assert_eq!(answer.header("x-content-digest"), Some(digest));
    assert_eq!(
        answer.header("etag").map(str::to_string),
        Some(format!("\"{digest}\""))
    );
    assert_eq!(answer.header("x-sandbox-file-id"), Some(file_id));
    assert_eq!(
        answer.header("x-sandbox-internal"),
        Some(if internal { "1" } else { "0" })
    );
    assert_eq!(answer.header("cache-control"), Some("private, no-cache"));
    let dependencies: Value = must(
        serde_json::from_str(answer.header("x-sandbox-module-dependencies").unwrap_or("")),
        "the dependencies header is JSON",
    );
    assert!(dependencies.is_array(), "{dependencies}");
}

#[tokio::test]
async fn an_entry_is_delivered_with_every_header() {
    let world = World::fixtures();
    let state = world.state(test_config());
    let answer = get(&state, "/api/sandbox-modules/@fixture/geo").await;
    assert_eq!(answer.status, StatusCode::OK);
    let digest = digest_of(&state, "@fixture/geo");
    assert_delivery_headers(&answer, &digest, "sandbox/geo.js", false);
    assert_eq!(answer.header("content-type"), Some("text/javascript"));
    assert_eq!(
        answer.header("x-content-sha256").map(str::to_string),
        Some(sha256_hex(&answer.body))
    );
    assert_eq!(
        answer.header("x-sandbox-module-dependencies"),
        Some(r#"["@fixture/geo::sandbox/internal/round.js"]"#)
    );
    assert_eq!(answer.header("x-sandbox-pack"), Some("@fixture/geo"));
    assert_eq!(answer.header("x-sandbox-pack-version"), Some("1.0.0"));
    assert_eq!(answer.header("x-sandbox-wasm-contract"), None);
    assert_eq!(answer.header("x-sandbox-host-module"), None);
    let on_disk = must(
        std::fs::read(support::fixtures().join("installed-a/@fixture/geo/sandbox/geo.js")),
        "read the fixture",
    );
    assert_eq!(answer.body, on_disk);
}

#[tokio::test]
async fn a_graph_file_is_delivered_by_its_id_encoded_or_not() {
    let world = World::fixtures();
    let state = world.state(test_config());
    let digest = digest_of(&state, "@fixture/geo");
    for uri in [
        "/api/sandbox-modules/@fixture/geo::sandbox/internal/round.js",
        "/api/sandbox-modules/%40fixture%2Fgeo%3A%3Asandbox%2Finternal%2Fround.js",
    ] {
        let answer = get(&state, uri).await;
        assert_eq!(answer.status, StatusCode::OK, "{uri}");
        assert_delivery_headers(&answer, &digest, "sandbox/internal/round.js", true);
        assert_eq!(answer.header("x-sandbox-module-dependencies"), Some("[]"));
    }
}

#[tokio::test]
async fn a_wasm_entry_carries_its_contract_and_a_host_facade_its_id() {
    let world = World::fixtures();
    let state = world.state(test_config());
    let wasm = get(&state, "/api/sandbox-modules/@fixture/wasm-scalar").await;
    assert_eq!(wasm.status, StatusCode::OK);
    assert_eq!(wasm.header("content-type"), Some("application/wasm"));
    assert!(wasm.body.starts_with(b"\0asm"));
    let contract: Value = must(
        serde_json::from_str(wasm.header("x-sandbox-wasm-contract").unwrap_or("")),
        "the contract header is JSON",
    );
    assert_eq!(contract["memoryPagesMax"], json!(2));
    assert!(
        contract["exports"]
            .as_array()
            .is_some_and(|e| e.contains(&json!({"wasm": "sum-f32", "as": "sumF32"}))),
        "{contract}"
    );
    assert_eq!(contract["limits"]["callTimeoutMs"], json!(2000));
    let file = get(
        &state,
        "/api/sandbox-modules/@fixture/wasm-scalar::sandbox/scalar.wasm",
    )
    .await;
    assert_eq!(file.status, StatusCode::OK);
    assert_eq!(file.header("x-sandbox-wasm-contract"), None);

    let host = get(&state, "/api/sandbox-modules/@nodetool-ai/sandbox-csv").await;
    assert_eq!(host.status, StatusCode::OK);
    assert_eq!(host.header("x-sandbox-host-module"), Some("csv"));
    assert_eq!(host.header("x-sandbox-file-id"), Some("host:csv"));
    assert_eq!(host.header("content-type"), Some("text/javascript"));
}

#[tokio::test]
async fn if_none_match_gives_304_with_the_headers_and_no_body() {
    let world = World::fixtures();
    let state = world.state(test_config());
    let digest = digest_of(&state, "@fixture/geo");
    let etag = format!("\"{digest}\"");
    for matching in [
        etag.clone(),
        format!("W/{etag}"),
        format!("\"other\", {etag}"),
        "*".to_string(),
    ] {
        let answer = send(
            &state,
            Method::GET,
            "/api/sandbox-modules/@fixture/geo",
            &[("if-none-match", &matching)],
            Body::empty(),
        )
        .await;
        assert_eq!(answer.status, StatusCode::NOT_MODIFIED, "{matching}");
        assert!(answer.body.is_empty());
        assert_delivery_headers(&answer, &digest, "sandbox/geo.js", false);
        assert_eq!(answer.header("content-type"), Some("text/javascript"));
        assert!(answer.header("x-content-sha256").is_some());
    }
    let stale = send(
        &state,
        Method::GET,
        "/api/sandbox-modules/@fixture/geo",
        &[("if-none-match", "\"0000\"")],
        Body::empty(),
    )
    .await;
    assert_eq!(stale.status, StatusCode::OK);
    assert!(!stale.body.is_empty());
}

#[tokio::test]
async fn unknown_unavailable_and_traversal_ids_are_404_naming_no_path() {
    let world = World::fixtures();
    let state = world.state(test_config());
    for id in [
        "@fixture/nope",
        "@fixture/geo/nope",
        "@fixture/geo::package.json",
        "@fixture/geo::../package.json",
        "@fixture/geo::sandbox/internal/../geo.js",
        "@fixture/geo::%2e%2e/%2e%2e/etc/passwd",
        "@fixture/geo::/etc/passwd",
        "..%2F..%2Fetc%2Fpasswd",
        "@fixture/wasm-imports",
        "@fixture/npm",
        "node:fs",
    ] {
        let answer = get(&state, &format!("/api/sandbox-modules/{id}")).await;
        assert_eq!(answer.status, StatusCode::NOT_FOUND, "{id}");
        let detail = answer.json()["detail"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        assert!(!detail.is_empty(), "{id}");
        answer.assert_no_path(&world.paths());
    }
    let unavailable = get(&state, "/api/sandbox-modules/@fixture/npm").await;
    assert!(
        unavailable.json()["detail"]
            .as_str()
            .is_some_and(|d| d.contains("@fixture/npm")),
        "{}",
        unavailable.text()
    );
    let empty = get(&state, "/api/sandbox-modules/").await;
    assert_eq!(empty.status, StatusCode::NOT_FOUND);
    assert_eq!(empty.json(), json!({"detail": "Not found"}));
}

/// A catalog that refuses one id as `forbidden`, as an entitlement-aware catalog would.
struct Forbidding(Arc<dyn SandboxModuleCatalog>);

impl SandboxModuleCatalog for Forbidding {
    fn summaries(&self) -> &[Summary] {
        self.0.summaries()
    }
    fn resolve_for_execution(&self, declarations: &[Declaration]) -> Resolution {
        self.0.resolve_for_execution(declarations)
    }
    fn diagnostics(&self) -> &[Status] {
        self.0.diagnostics()
    }
    fn pack_skill(&self, pack_name: &str) -> Option<SkillDisclosure> {
        self.0.pack_skill(pack_name)
    }
    fn authorize_delivery<'a>(&'a self, module_id: &'a str) -> DeliveryFuture<'a> {
        if module_id == "@fixture/geo" {
            return Box::pin(std::future::ready(Err(DeliveryRefusal {
                reason: RefusalReason::Forbidden,
                message: format!("Sandbox module {module_id} is not delivered to this client."),
            })));
        }
        self.0.authorize_delivery(module_id)
    }
}

struct ForbiddingSource(Arc<dyn CatalogSource>);

impl CatalogSource for ForbiddingSource {
    fn load(&self) -> Result<Arc<dyn SandboxModuleCatalog>, SourceError> {
        Ok(Arc::new(Forbidding(self.0.load()?)))
    }
}

#[tokio::test]
async fn a_refusal_is_403_with_the_catalog_message() {
    let world = World::fixtures();
    let state = must(
        AppState::new(test_config(), Arc::new(ForbiddingSource(world.source()))),
        "build the state",
    );
    let answer = get(&state, "/api/sandbox-modules/@fixture/geo").await;
    assert_eq!(answer.status, StatusCode::FORBIDDEN);
    assert_eq!(
        answer.json(),
        json!({"detail": "Sandbox module @fixture/geo is not delivered to this client."})
    );
    assert_eq!(answer.header("etag"), None);
    let other = get(&state, "/api/sandbox-modules/@fixture/geo/extra").await;
    assert_eq!(other.status, StatusCode::OK);
}

#[tokio::test]
async fn the_packs_list_is_the_cli_json_and_names_no_path() {
    let world = World::fixtures();
    let state = world.state(test_config());
    let answer = get(&state, "/api/packs/sandbox-modules").await;
    assert_eq!(answer.status, StatusCode::OK);
    assert!(
        answer
            .header("content-type")
            .is_some_and(|c| c.starts_with("application/json"))
    );
    // The CLI's `packs list --json`: the catalog, plus the install ledger's rows (none yet).
    let mut expected = answers::packs_list_json(state.catalog().as_ref());
    expected["installed"] = json!([]);
    assert_eq!(answer.json(), expected);
    assert!(
        answer.json()["summaries"]
            .as_array()
            .is_some_and(|s| !s.is_empty())
    );
    answer.assert_no_path(&world.paths());
    // Duplicate-pack diagnostics name roots by their opaque labels.
    assert!(answer.text().contains("--packs["), "{}", answer.text());
}

#[tokio::test]
async fn the_page_view_groups_by_pack_with_mode_and_advice() {
    let world = World::fixtures();
    world.trust(&["@fixture/geo"]);
    let state = world.state(test_config());
    let answer = get(&state, "/api/packs").await;
    assert_eq!(answer.status, StatusCode::OK);
    let view = answer.json();
    assert_eq!(view["consent"], json!(nodetool_server::CONSENT));
    let packs = view["packs"].as_array().cloned().unwrap_or_default();
    let pack = |name: &str| {
        packs
            .iter()
            .find(|p| p["name"] == json!(name))
            .cloned()
            .unwrap_or_else(|| panic!("{name} is not in the view"))
    };
    let geo = pack("@fixture/geo");
    assert_eq!(geo["mode"], json!("trusted"));
    assert_eq!(geo["version"], json!("1.0.0"));
    assert_eq!(geo["hasDocs"], json!(true));
    let specifiers: Vec<&str> = geo["modules"]
        .as_array()
        .map(|m| m.iter().filter_map(|m| m["specifier"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(specifiers, ["@fixture/geo", "@fixture/geo/extra"]);
    let cycle = pack("@fixture/module-cycle");
    assert_eq!(cycle["mode"], json!("untrusted"));
    assert!(cycle["modules"].as_array().is_some_and(Vec::is_empty));
    let diagnostic = &cycle["diagnostics"][0];
    assert_eq!(diagnostic["code"], json!("module-cycle"));
    assert_eq!(
        diagnostic["advice"],
        json!(answers::advice(
            nodetool_protocol::catalog::StatusCode::ModuleCycle
        ))
    );
    answer.assert_no_path(&world.paths());
}

#[tokio::test]
async fn docs_answer_the_disclosure_with_its_trust_flag() {
    let world = World::fixtures();
    world.trust(&["@fixture/geo"]);
    let state = world.state(test_config());
    for uri in [
        "/api/packs/@fixture/geo/docs",
        "/api/packs/%40fixture%2Fgeo/docs",
    ] {
        let answer = get(&state, uri).await;
        assert_eq!(answer.status, StatusCode::OK, "{uri}");
        let docs = answer.json();
        assert_eq!(docs["packName"], json!("@fixture/geo"));
        assert_eq!(docs["trusted"], json!(true));
        assert_eq!(docs["skill"]["name"], json!("fixture-geo"));
        assert!(
            docs["skill"]["body"]
                .as_str()
                .is_some_and(|b| b.contains("## haversine"))
        );
    }
    let csv = get(&state, "/api/packs/@nodetool-ai/sandbox-csv/docs").await;
    assert_eq!(csv.status, StatusCode::OK);
    assert_eq!(csv.json()["trusted"], json!(false));
    for uri in [
        "/api/packs/@fixture/skill-missing/docs",
        "/api/packs/@fixture/nope/docs",
        "/api/packs/fixture/geo/docs",
    ] {
        let answer = get(&state, uri).await;
        assert_eq!(answer.status, StatusCode::NOT_FOUND, "{uri}");
        assert!(answer.json()["detail"].is_string());
    }
}

#[tokio::test]
async fn a_run_answers_the_cli_json() {
    let world = World::fixtures();
    let state = world.state(test_config());
    let trivial = post_json(&state, "/api/run", &json!({"code": "return 1 + 2;"})).await;
    assert_eq!(trivial.status, StatusCode::OK);
    let out = trivial.json();
    assert_eq!(out["ok"], json!(true));
    assert_eq!(out["result"], json!(3));
    assert_eq!(out["logs"], json!([]));
    assert!(out["durationMs"].is_u64());

    let with_pack = post_json(
        &state,
        "/api/run",
        &json!({
            "code": "import { haversine } from \"@fixture/geo\";\nconsole.log(\"from\", inputs.a);\nreturn haversine(inputs.a, inputs.b);",
            "input": {"a": 1, "b": 3},
        }),
    )
    .await;
    let out = with_pack.json();
    assert_eq!(out["ok"], json!(true), "{out}");
    assert_eq!(out["result"], json!(222));
    assert_eq!(out["logs"], json!([{"level": "log", "message": "from 1"}]));

    let missing = post_json(
        &state,
        "/api/run",
        &json!({"code": "const a = 1;\nimport { x } from \"@fixture/nope\";\nreturn x;"}),
    )
    .await;
    assert_eq!(
        missing.status,
        StatusCode::OK,
        "a failed run is not a failed request"
    );
    let out = missing.json();
    assert_eq!(out["ok"], json!(false));
    assert_eq!(out["error"]["code"], json!("module-not-found"));
    assert_eq!(out["error"]["line"], json!(2));
    assert_eq!(out["error"]["specifier"], json!("@fixture/nope"));

    let thrown = post_json(
        &state,
        "/api/run",
        &json!({"code": "const a = 1;\n\nthrow new Error(\"boom\");"}),
    )
    .await;
    let out = thrown.json();
    assert_eq!(out["error"]["code"], json!("runtime-error"));
    assert_eq!(out["error"]["line"], json!(3));

    let slow = post_json(
        &state,
        "/api/run",
        &json!({"code": "while (true) {}", "timeoutMs": 50}),
    )
    .await;
    assert_eq!(slow.json()["error"]["code"], json!("timeout"));
    slow.assert_no_path(&world.paths());
}

#[tokio::test]
async fn run_requests_that_are_wrong_are_400() {
    let world = World::fixtures();
    let state = world.state(test_config());
    for body in [
        json!({}),
        json!({"code": 1}),
        json!({"code": "return 1;", "extra": true}),
        json!({"code": "return 1;", "timeoutMs": 0}),
        json!({"code": "return 1;", "timeoutMs": 30_001}),
    ] {
        let answer = post_json(&state, "/api/run", &body).await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{body}");
        assert!(answer.json()["detail"].is_string());
    }
    let broken = send(
        &state,
        Method::POST,
        "/api/run",
        &[("content-type", "application/json")],
        "{not json",
    )
    .await;
    assert_eq!(broken.status, StatusCode::BAD_REQUEST);
    let method = get(&state, "/api/run").await;
    assert_eq!(method.status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(method.json(), json!({"detail": "Method not allowed"}));
}

#[tokio::test]
async fn bodies_over_the_cap_are_413() {
    let world = World::fixtures();
    let state = world.state(ServerConfig {
        max_request_bytes: 64,
        ..test_config()
    });
    let code = format!("return \"{}\";", "x".repeat(100));
    for uri in ["/api/run", "/api/validate", "/api/host-modules/csv/parse"] {
        let answer = post_json(&state, uri, &json!({"code": code})).await;
        assert_eq!(answer.status, StatusCode::PAYLOAD_TOO_LARGE, "{uri}");
        assert!(answer.json()["detail"].is_string());
    }
}

#[tokio::test]
async fn beyond_the_queue_a_run_is_503_with_retry_after() {
    let world = World::fixtures();
    let state = world.state(ServerConfig {
        max_running: 1,
        max_queued: 0,
        ..test_config()
    });
    let first = tokio::spawn({
        let state = state.clone();
        async move {
            post_json(
                &state,
                "/api/run",
                &json!({"code": "while (true) {}", "timeoutMs": 30000}),
            )
            .await
        }
    });
    while state.runs_admitted() == 0 {
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    }
    for (uri, body) in [
        ("/api/run", json!({"code": "return 1;"})),
        ("/api/validate", json!({"graph": {"nodes": []}})),
        (
            "/api/host-modules/csv/parse",
            json!({"args": ["a,b\n1,2\n"]}),
        ),
    ] {
        let busy = post_json(&state, uri, &body).await;
        assert_eq!(busy.status, StatusCode::SERVICE_UNAVAILABLE, "{uri}");
        assert_eq!(busy.header("retry-after"), Some("1"));
        assert!(busy.json()["detail"].is_string());
    }
    // The client of the first run goes away: its run is cancelled and its slot freed.
    first.abort();
    let started = std::time::Instant::now();
    while state.runs_admitted() > 0 {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(10),
            "the abandoned run was not cancelled"
        );
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    let after = post_json(&state, "/api/run", &json!({"code": "return 1;"})).await;
    assert_eq!(after.json()["ok"], json!(true));
}

#[tokio::test]
async fn validate_answers_the_cli_json() {
    let world = World::fixtures();
    let state = world.state(test_config());
    let graph = json!({"nodes": [
        {"id": "a", "type": "nodetool.code.Code", "data": {"code": "import { haversine } from \"@fixture/geo\";\nreturn haversine(1, 2);"}},
        {"id": "b", "type": "nodetool.code.Code", "data": {"code": "import { x } from \"@fixture/nope\";\nreturn x;"}},
    ], "edges": []});
    let answer = post_json(&state, "/api/validate", &json!({ "graph": graph })).await;
    assert_eq!(answer.status, StatusCode::OK);
    let issues = nodetool_jssource::validate::validate_graph(&graph, state.catalog().as_ref())
        .unwrap_or_else(|e| panic!("validate in-process: {}", e.0));
    assert_eq!(answer.json(), answers::validate_json(&issues));
    assert_eq!(answer.json()["ok"], json!(false));
    let not_a_graph = post_json(&state, "/api/validate", &json!({"graph": {"x": 1}})).await;
    assert_eq!(not_a_graph.status, StatusCode::BAD_REQUEST);
    assert!(not_a_graph.json()["detail"].is_string());
    let missing = post_json(&state, "/api/validate", &json!({})).await;
    assert_eq!(missing.status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn host_module_calls_go_through_the_dispatcher() {
    let world = World::fixtures();
    let state = world.state(test_config());
    let parsed = post_json(
        &state,
        "/api/host-modules/csv/parse",
        &json!({"args": ["a,b\n1,2\n"]}),
    )
    .await;
    assert_eq!(parsed.status, StatusCode::OK, "{}", parsed.text());
    assert_eq!(parsed.json(), json!({"result": [{"a": "1", "b": "2"}]}));

    // Bytes cross as {"$bytes": ...} both ways.
    let zipped = post_json(
        &state,
        "/api/host-modules/zip/zip",
        &json!({"args": [{"a.txt": {"$bytes": "aGVsbG8="}}]}),
    )
    .await;
    assert_eq!(zipped.status, StatusCode::OK, "{}", zipped.text());
    let archive = zipped.json()["result"].clone();
    assert!(archive["$bytes"].is_string(), "{archive}");
    let unzipped = post_json(
        &state,
        "/api/host-modules/zip/unzip",
        &json!({ "args": [archive] }),
    )
    .await;
    assert_eq!(unzipped.status, StatusCode::OK, "{}", unzipped.text());
    assert_eq!(
        unzipped.json()["result"]["a.txt"],
        json!({"$bytes": "aGVsbG8="})
    );

    let refused = post_json(
        &state,
        "/api/host-modules/csv/parse",
        &json!({"args": [42]}),
    )
    .await;
    assert_eq!(refused.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(
        refused.json()["detail"]
            .as_str()
            .is_some_and(|d| d.starts_with("csv.parse: ")),
        "{}",
        refused.text()
    );
    for (uri, fragment) in [
        ("/api/host-modules/nope/parse", "is not a host module"),
        ("/api/host-modules/csv/nope", "has no export named"),
        ("/api/host-modules/csv/__proto__", "has no export named"),
        // The xml pack is not installed in this world.
        ("/api/host-modules/xml/parse", "is not installed"),
    ] {
        let answer = post_json(&state, uri, &json!({"args": []})).await;
        assert_eq!(answer.status, StatusCode::NOT_FOUND, "{uri}");
        assert!(
            answer.json()["detail"]
                .as_str()
                .is_some_and(|d| d.contains(fragment)),
            "{uri}: {}",
            answer.text()
        );
    }
    let not_args = post_json(&state, "/api/host-modules/csv/parse", &json!({"args": "x"})).await;
    assert_eq!(not_args.status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn the_page_and_its_assets_are_served_with_a_strict_policy() {
    let world = World::fixtures();
    let state = world.state(test_config());
    for (uri, kind) in [
        ("/", "text/html"),
        ("/assets/app.js", "text/javascript"),
        ("/assets/style.css", "text/css"),
    ] {
        let answer = get(&state, uri).await;
        assert_eq!(answer.status, StatusCode::OK, "{uri}");
        assert!(
            answer
                .header("content-type")
                .is_some_and(|c| c.starts_with(kind)),
            "{uri}"
        );
        assert!(
            answer
                .header("content-security-policy")
                .is_some_and(|p| p.contains("script-src 'self'")),
            "{uri}"
        );
        assert_eq!(answer.header("x-content-type-options"), Some("nosniff"));
    }
    assert!(
        get(&state, "/")
            .await
            .text()
            .contains(nodetool_server::CONSENT)
    );
    let unknown = get(&state, "/nope").await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
    assert_eq!(unknown.json(), json!({"detail": "Not found"}));
}

#[tokio::test]
async fn reload_swaps_in_what_is_installed_now() {
    let world = World::empty();
    let state = world.state(test_config());
    let before = get(&state, "/api/packs/sandbox-modules").await.json();
    assert_eq!(before["summaries"], json!([]));

    world.install_fixture("@fixture/geo");
    let reloaded = send(
        &state,
        Method::POST,
        "/api/packs/reload",
        support::RELOAD,
        Body::empty(),
    )
    .await;
    assert_eq!(reloaded.status, StatusCode::OK);
    assert_eq!(reloaded.json()["ok"], json!(true));
    assert_eq!(reloaded.json()["modules"], json!(2));
    let run = post_json(
        &state,
        "/api/run",
        &json!({"code": "import { label } from \"@fixture/geo/extra\";\nreturn label();"}),
    )
    .await;
    assert_eq!(run.json()["result"], json!("extra"));

    // A root that disappears fails the reload; the catalog in service stays.
    must(std::fs::remove_dir_all(&world.root), "remove the root");
    let failed = send(
        &state,
        Method::POST,
        "/api/packs/reload",
        support::RELOAD,
        Body::empty(),
    )
    .await;
    assert_eq!(failed.status, StatusCode::INTERNAL_SERVER_ERROR);
    let detail = failed.json()["detail"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(detail.contains("--packs[1]"), "{detail}");
    failed.assert_no_path(&world.paths());
    assert_eq!(state.catalog().summaries().len(), 2);
    let get_reload = get(&state, "/api/packs/reload").await;
    assert_eq!(get_reload.status, StatusCode::METHOD_NOT_ALLOWED);
}

#[tokio::test]
async fn the_browser_runner_is_served_from_memory_once_built() {
    let world = World::fixtures();
    // Not built: every /web/ file is a 404 that says how to build it.
    let state = world.state(test_config());
    let answer = get(&state, "/web/runner.js").await;
    assert_eq!(answer.status, StatusCode::NOT_FOUND);
    let detail = answer.json()["detail"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(detail.contains("npm run build --prefix web"), "{detail}");

    // Built: the files of one flat directory, with their media types and the runner's policy.
    let dist = world.tmp.path().join("dist");
    must(std::fs::create_dir_all(dist.join("nested")), "create dist");
    must(
        std::fs::write(dist.join("runner.js"), "export const x = 1;\n"),
        "write runner.js",
    );
    must(
        std::fs::write(dist.join("engine.wasm"), b"\0asm\x01\0\0\0"),
        "write a wasm file",
    );
    must(
        std::fs::write(dist.join("notes.txt"), "not served"),
        "write a text file",
    );
    must(
        std::fs::write(dist.join("nested/secret.js"), "no"),
        "write a nested file",
    );
    let web = nodetool_server::WebAssets::load(&dist);
    assert!(web.is_built());
    let state = must(
        AppState::with_web(test_config(), world.source(), web),
        "build the state",
    );
    // The files were read at start-up: removing them changes nothing.
    must(
        std::fs::remove_file(dist.join("runner.js")),
        "remove runner.js",
    );
    let answer = get(&state, "/web/runner.js").await;
    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(answer.text(), "export const x = 1;\n");
    assert_eq!(
        answer.header("content-type"),
        Some("text/javascript; charset=utf-8")
    );
    assert!(
        answer
            .header("content-security-policy")
            .is_some_and(|p| p.contains("'wasm-unsafe-eval'") && p.contains("connect-src 'self'")),
        "{:?}",
        answer.header("content-security-policy")
    );
    let answer = get(&state, "/web/engine.wasm").await;
    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(answer.header("content-type"), Some("application/wasm"));
    for missing in [
        "/web/notes.txt",
        "/web/nested%2Fsecret.js",
        "/web/nested/secret.js",
        "/web/..%2Fdist%2Frunner.js",
    ] {
        let answer = get(&state, missing).await;
        assert_eq!(answer.status, StatusCode::NOT_FOUND, "{missing}");
        answer.assert_no_path(&world.paths());
    }
    // The page lets the runner compile WebAssembly and start its workers.
    let page = get(&state, "/").await;
    let policy = page
        .header("content-security-policy")
        .unwrap_or_default()
        .to_string();
    assert!(
        policy.contains("'wasm-unsafe-eval'") && policy.contains("worker-src 'self'"),
        "{policy}"
    );
}

#[tokio::test]
async fn the_packs_list_carries_the_install_ledger_rows_and_never_its_path() {
    let world = World::fixtures();
    let dir = world.tmp.path().join("data/nodetool/packs");
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("create the data dir: {e}"));
    let ledger = json!({
        "version": 1,
        "packs": {
            "@acme/host-pack": {
                "packName": "@acme/host-pack", "version": "1.0.0", "spec": "@acme/host-pack@1",
                "mode": "register", "active": false, "scripts": "skipped",
                "closure": [{ "path": "node_modules/@acme/host-pack", "name": "@acme/host-pack",
                              "version": "1.0.0", "resolved": "https://r/x.tgz", "integrity": "sha512-x" }]
            }
        }
    });
    std::fs::write(dir.join("nodetool-packs.json"), ledger.to_string())
        .unwrap_or_else(|e| panic!("write the ledger: {e}"));
    let state = world.state(test_config());
    let answer = get(&state, "/api/packs/sandbox-modules").await;
    assert_eq!(
        answer.json()["installed"],
        json!([{ "packName": "@acme/host-pack", "version": "1.0.0", "mode": "register",
                 "active": false, "scripts": "skipped" }])
    );
    // The Packages page's view shows the ledger's pack (it declares no sandbox module) with its
    // install mode, state and what the mode means; catalog packs carry no install line.
    let view = get(&state, "/api/packs").await.json();
    let packs = view["packs"].as_array().cloned().unwrap_or_default();
    let host = packs
        .iter()
        .find(|p| p["name"] == "@acme/host-pack")
        .unwrap_or_else(|| panic!("the ledger's pack is missing from {view}"));
    assert_eq!(host["version"], "1.0.0");
    assert_eq!(host["install"]["mode"], "register");
    assert_eq!(host["install"]["active"], false);
    assert!(
        host["install"]["meaning"]
            .as_str()
            .is_some_and(|m| m.contains("inactive")),
        "{host}"
    );
    assert_eq!(host["modules"], json!([]));
    assert!(
        packs
            .iter()
            .filter(|p| p["name"] != "@acme/host-pack")
            .all(|p| p["install"].is_null())
    );
    // A corrupt ledger is left out of the answer (the server logs why); the catalog still lists.
    std::fs::write(
        dir.join("nodetool-packs.json"),
        "{\"version\": 1, \"packs\": [",
    )
    .unwrap_or_else(|e| panic!("corrupt the ledger: {e}"));
    let answer = get(&state, "/api/packs/sandbox-modules").await;
    assert_eq!(answer.status, StatusCode::OK);
    assert!(
        answer.json().get("installed").is_none(),
        "{}",
        answer.text()
    );
    assert!(
        answer.json()["summaries"]
            .as_array()
            .is_some_and(|s| !s.is_empty())
    );
    answer.assert_no_path(&world.paths());
}
