//! Every refusal of a request itself, in-process: a foreign or missing Host, a cross-origin
//! page, a body that is not JSON, a missing or wrong token, a reload that is not an operator's,
//! JSON nested too deep, an oversized head, work while draining. Each answers its status with a
//! JSON `detail` naming the rule (and never what the client sent), and none reaches a run. Then
//! what a supervisor reads: `/healthz`, `/readyz`, `/metrics`.

mod support;

use axum::body::Body;
use axum::http::{Method, StatusCode};
use nodetool_server::{Access, AppState, PublicHost, ServerConfig, Token};
use serde_json::{Value, json};
use support::{Answer, TEST_PORT, World, get, must, post_json, send, send_from, test_config};

const TOKEN: &str = "a-test-token-0123456789";

/// The routes that execute or change state, with a body each accepts.
fn posts() -> Vec<(&'static str, Value)> {
    vec![
        ("/api/run", json!({"code": "return 1;"})),
        ("/api/validate", json!({"graph": {"nodes": []}})),
        (
            "/api/host-modules/csv/parse",
            json!({"args": ["a,b\n1,2\n"]}),
        ),
        ("/api/packs/reload", json!({})),
    ]
}

fn detail(answer: &Answer) -> String {
    answer.json()["detail"]
        .as_str()
        .unwrap_or_else(|| panic!("no detail: {}", answer.text()))
        .to_string()
}

async fn metrics(state: &AppState) -> String {
    let answer = get(state, "/metrics").await;
    assert_eq!(answer.status, StatusCode::OK);
    answer.text()
}

/// No run and no admission at the gate so far.
async fn assert_nothing_ran(state: &AppState) {
    let text = metrics(state).await;
    assert!(!text.contains("nodetool_runs_total{"), "{text}");
    assert!(!text.contains("answer=\"admitted\""), "{text}");
}

#[tokio::test]
async fn a_foreign_or_missing_host_is_refused_before_any_route() {
    let world = World::fixtures();
    let state = world.state(test_config());
    for host in [
        "attacker.example",
        "attacker.example:7777",
        "localhost:8080",
        "127.0.0.1",
    ] {
        for (uri, body) in posts() {
            let answer = send(
                &state,
                Method::POST,
                uri,
                &[("host", host), ("content-type", "application/json")],
                body.to_string(),
            )
            .await;
            assert_eq!(
                answer.status,
                StatusCode::MISDIRECTED_REQUEST,
                "{host} {uri}"
            );
            let detail = detail(&answer);
            assert!(detail.contains("DNS-rebinding"), "{detail}");
            assert!(detail.contains("localhost:7777"), "{detail}");
            assert!(detail.contains("--public-host"), "{detail}");
            assert!(
                !detail.contains("attacker"),
                "the answer repeats the Host: {detail}"
            );
        }
        let page = send(
            &state,
            Method::GET,
            "/api/packs",
            &[("host", host)],
            Body::empty(),
        )
        .await;
        assert_eq!(page.status, StatusCode::MISDIRECTED_REQUEST, "{host}");
    }
    // HTTP/1.1 requires a Host; without one the request is refused.
    let request = must(
        axum::http::Request::builder()
            .uri("/api/packs")
            .body(Body::empty()),
        "build a request",
    );
    let response = must(
        tower::ServiceExt::oneshot(nodetool_server::router(state.clone()), request).await,
        "route a request",
    );
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    for host in [
        "localhost:7777",
        "LOCALHOST:7777",
        "127.0.0.1:7777",
        "[::1]:7777",
        "10.0.0.5:7777",
    ] {
        let answer = send(
            &state,
            Method::GET,
            "/api/packs",
            &[("host", host)],
            Body::empty(),
        )
        .await;
        assert_eq!(answer.status, StatusCode::OK, "{host}");
    }
    assert_nothing_ran(&state).await;

    // --public-host: a name with any port, or only the port it names.
    let state = world.state(ServerConfig {
        access: Access {
            public_hosts: vec![
                must("nodetool.example".parse::<PublicHost>(), "a public host"),
                must("pinned.example:8443".parse::<PublicHost>(), "a public host"),
            ],
            ..Access::loopback(TEST_PORT)
        },
        ..test_config()
    });
    for (host, status) in [
        ("nodetool.example", StatusCode::OK),
        ("Nodetool.Example:443", StatusCode::OK),
        ("pinned.example:8443", StatusCode::OK),
        ("pinned.example", StatusCode::MISDIRECTED_REQUEST),
        ("other.example", StatusCode::MISDIRECTED_REQUEST),
    ] {
        let answer = send(
            &state,
            Method::GET,
            "/api/packs",
            &[("host", host)],
            Body::empty(),
        )
        .await;
        assert_eq!(answer.status, status, "{host}");
    }
}

#[tokio::test]
async fn a_page_on_another_origin_is_403_and_the_servers_own_passes() {
    let world = World::fixtures();
    let state = world.state(test_config());
    for origin in [
        "http://evil.example",
        "http://localhost:8080",
        "http://127.0.0.1:8080",
        "null",
    ] {
        // What a page elsewhere can send without a preflight: text/plain and form bodies.
        for (uri, body) in posts() {
            for content_type in [
                "text/plain",
                "application/x-www-form-urlencoded",
                "application/json",
            ] {
                let answer = send(
                    &state,
                    Method::POST,
                    uri,
                    &[("origin", origin), ("content-type", content_type)],
                    body.to_string(),
                )
                .await;
                assert_eq!(answer.status, StatusCode::FORBIDDEN, "{origin} {uri}");
                let detail = detail(&answer);
                assert!(detail.contains("another origin"), "{detail}");
                assert!(detail.contains("--allow-origin"), "{detail}");
                assert!(!detail.contains("evil"), "{detail}");
                assert_eq!(answer.header("access-control-allow-origin"), None);
            }
        }
        let read = send(
            &state,
            Method::GET,
            "/api/packs",
            &[("origin", origin)],
            Body::empty(),
        )
        .await;
        assert_eq!(read.status, StatusCode::FORBIDDEN, "{origin}");
    }
    assert_nothing_ran(&state).await;
    for origin in ["http://127.0.0.1:7777", "https://127.0.0.1:7777"] {
        let answer = send(
            &state,
            Method::POST,
            "/api/run",
            &[("origin", origin), ("content-type", "application/json")],
            json!({"code": "return 2;"}).to_string(),
        )
        .await;
        assert_eq!(answer.status, StatusCode::OK, "{origin}");
        assert_eq!(answer.json()["result"], json!(2));
        // No CORS header unless the operator allows origins.
        assert_eq!(answer.header("access-control-allow-origin"), None);
    }
}

#[tokio::test]
async fn executing_and_state_changing_routes_take_only_json() {
    let world = World::fixtures();
    let state = world.state(test_config());
    for (uri, body) in posts() {
        for content_type in [
            None,
            Some("text/plain"),
            Some("text/plain;charset=UTF-8"),
            Some("application/x-www-form-urlencoded"),
            Some("multipart/form-data; boundary=x"),
            Some("application/merge-patch+json"),
        ] {
            let mut headers = vec![("x-nodetool-reload", "1")];
            if let Some(content_type) = content_type {
                headers.push(("content-type", content_type));
            }
            let answer = send(&state, Method::POST, uri, &headers, body.to_string()).await;
            assert_eq!(
                answer.status,
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "{uri} {content_type:?}"
            );
            assert!(detail(&answer).contains("application/json"));
        }
    }
    assert_nothing_ran(&state).await;
    let ok = send(
        &state,
        Method::POST,
        "/api/run",
        &[("content-type", "Application/JSON; charset=utf-8")],
        json!({"code": "return 3;"}).to_string(),
    )
    .await;
    assert_eq!(ok.json()["result"], json!(3));
}

#[tokio::test]
async fn allow_origin_turns_cors_on_for_the_origins_it_names_only() {
    let world = World::fixtures();
    let state = world.state(ServerConfig {
        access: Access {
            allow_origins: vec!["https://app.example".into()],
            ..Access::loopback(TEST_PORT)
        },
        ..test_config()
    });
    let preflight = send(
        &state,
        Method::OPTIONS,
        "/api/run",
        &[
            ("origin", "https://app.example"),
            ("access-control-request-method", "POST"),
            ("access-control-request-headers", "content-type"),
        ],
        Body::empty(),
    )
    .await;
    assert_eq!(preflight.status, StatusCode::OK);
    assert_eq!(
        preflight.header("access-control-allow-origin"),
        Some("https://app.example")
    );
    let run = send(
        &state,
        Method::POST,
        "/api/run",
        &[
            ("origin", "https://app.example"),
            ("content-type", "application/json"),
        ],
        json!({"code": "return 4;"}).to_string(),
    )
    .await;
    assert_eq!(run.status, StatusCode::OK);
    assert_eq!(
        run.header("access-control-allow-origin"),
        Some("https://app.example")
    );
    let other = send(
        &state,
        Method::OPTIONS,
        "/api/run",
        &[
            ("origin", "https://other.example"),
            ("access-control-request-method", "POST"),
        ],
        Body::empty(),
    )
    .await;
    assert_eq!(other.status, StatusCode::FORBIDDEN);
    assert_eq!(other.header("access-control-allow-origin"), None);
}

#[tokio::test]
async fn with_a_token_every_api_route_needs_it_and_probes_do_not() {
    let world = World::fixtures();
    let token = must(Token::new(TOKEN), "a token");
    let state = world.state(ServerConfig {
        access: Access {
            token: Some(token),
            ..Access::loopback(TEST_PORT)
        },
        ..test_config()
    });
    let bearer = format!("Bearer {TOKEN}");
    for uri in [
        "/api/packs",
        "/api/packs/sandbox-modules",
        "/api/sandbox-modules/@fixture/geo",
        "/api/packs/@fixture/geo/docs",
    ] {
        for authorization in [
            None,
            Some("Bearer wrong-token-0123456789"),
            Some(TOKEN),
            Some("Basic eDp5"),
        ] {
            let headers: Vec<(&str, &str)> = authorization
                .map(|a| ("authorization", a))
                .into_iter()
                .collect();
            let answer = send(&state, Method::GET, uri, &headers, Body::empty()).await;
            assert_eq!(
                answer.status,
                StatusCode::UNAUTHORIZED,
                "{uri} {authorization:?}"
            );
            assert_eq!(
                answer.header("www-authenticate"),
                Some("Bearer realm=\"nodetool\"")
            );
            let detail = detail(&answer);
            assert!(detail.contains("Authorization: Bearer"), "{detail}");
            assert!(!detail.contains(TOKEN));
        }
        let answer = send(
            &state,
            Method::GET,
            uri,
            &[("authorization", &bearer)],
            Body::empty(),
        )
        .await;
        assert_ne!(answer.status, StatusCode::UNAUTHORIZED, "{uri}");
    }
    for (uri, body) in posts() {
        let answer = post_json(&state, uri, &body).await;
        assert_eq!(answer.status, StatusCode::UNAUTHORIZED, "{uri}");
    }
    assert_nothing_ran(&state).await;
    // The scheme is case-insensitive; the token is not.
    let lower = format!("bearer {TOKEN}");
    let run = send(
        &state,
        Method::POST,
        "/api/run",
        &[
            ("authorization", &lower),
            ("content-type", "application/json"),
        ],
        json!({"code": "return 5;"}).to_string(),
    )
    .await;
    assert_eq!(run.json()["result"], json!(5));
    // With the token, a reload needs nothing else, from any address.
    let reload = send_from(
        &state,
        "192.0.2.7:5000",
        Method::POST,
        "/api/packs/reload",
        &[
            ("authorization", &bearer),
            ("content-type", "application/json"),
        ],
        Body::empty(),
    )
    .await;
    assert_eq!(reload.status, StatusCode::OK, "{}", reload.text());
    // Probes, the page and the runner's files are not /api/.
    for uri in ["/healthz", "/readyz", "/metrics", "/", "/assets/app.js"] {
        assert_eq!(get(&state, uri).await.status, StatusCode::OK, "{uri}");
    }
}

#[tokio::test]
async fn a_reload_without_a_token_needs_loopback_and_the_pages_header() {
    let world = World::fixtures();
    let state = world.state(test_config());
    let json = ("content-type", "application/json");
    for (peer, headers) in [
        ("127.0.0.1:5000", vec![json]),
        ("127.0.0.1:5000", vec![json, ("x-nodetool-reload", "yes")]),
        ("192.0.2.7:5000", vec![json, ("x-nodetool-reload", "1")]),
    ] {
        let answer = send_from(
            &state,
            peer,
            Method::POST,
            "/api/packs/reload",
            &headers,
            "{}",
        )
        .await;
        assert_eq!(answer.status, StatusCode::FORBIDDEN, "{peer} {headers:?}");
        let detail = detail(&answer);
        assert!(detail.contains("operator action"), "{detail}");
        assert!(detail.contains("x-nodetool-reload"), "{detail}");
    }
    for peer in ["127.0.0.1:5000", "[::1]:5000"] {
        let answer = send_from(
            &state,
            peer,
            Method::POST,
            "/api/packs/reload",
            support::RELOAD,
            Body::empty(),
        )
        .await;
        assert_eq!(answer.status, StatusCode::OK, "{peer}");
    }
    let extra = send(
        &state,
        Method::POST,
        "/api/packs/reload",
        support::RELOAD,
        r#"{"x":1}"#,
    )
    .await;
    assert_eq!(extra.status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn json_nested_beyond_the_limit_is_400_naming_it() {
    let world = World::fixtures();
    let state = world.state(test_config());
    let limit = nodetool_server::MAX_JSON_DEPTH;
    // The body object is the first level, so `input` may nest one level less.
    let nested = |levels: usize| format!("{}{}", "[".repeat(levels), "]".repeat(levels));
    let deep = format!(r#"{{"code": "return 1;", "input": {}}}"#, nested(limit));
    let answer = send(
        &state,
        Method::POST,
        "/api/run",
        &[("content-type", "application/json")],
        deep,
    )
    .await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST);
    let detail = detail(&answer);
    assert!(
        detail.contains(&format!("deeper than {limit} levels")),
        "{detail}"
    );
    for uri in ["/api/validate", "/api/host-modules/csv/parse"] {
        let body = format!(r#"{{"args": [{}]}}"#, nested(10_000));
        let answer = send(
            &state,
            Method::POST,
            uri,
            &[("content-type", "application/json")],
            body,
        )
        .await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{uri}");
        assert!(super_detail_names_depth(&answer), "{uri}");
    }
    assert_nothing_ran(&state).await;
    let fits = format!(
        r#"{{"code": "return inputs.length;", "input": {}}}"#,
        nested(limit - 1)
    );
    let answer = send(
        &state,
        Method::POST,
        "/api/run",
        &[("content-type", "application/json")],
        fits,
    )
    .await;
    assert_eq!(answer.json()["ok"], json!(true), "{}", answer.text());
}

fn super_detail_names_depth(answer: &Answer) -> bool {
    detail(answer).contains("depth limit")
}

#[tokio::test]
async fn an_oversized_head_is_431_naming_the_cap() {
    let world = World::fixtures();
    let state = world.state(test_config());
    let big = "x".repeat(nodetool_server::MAX_HEAD_BYTES);
    let answer = send(
        &state,
        Method::GET,
        "/api/packs",
        &[("x-filler", &big)],
        Body::empty(),
    )
    .await;
    assert_eq!(answer.status, StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE);
    assert!(detail(&answer).contains(&nodetool_server::MAX_HEAD_BYTES.to_string()));
    let long_uri = format!("/api/packs?{big}");
    let answer = get(&state, &long_uri).await;
    assert_eq!(answer.status, StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE);
}

#[tokio::test]
async fn probes_answer_and_metrics_count_runs_refusals_and_deliveries() {
    let world = World::fixtures();
    let state = world.state(test_config());
    let health = get(&state, "/healthz").await;
    assert_eq!(
        (health.status, health.json()),
        (StatusCode::OK, json!({"status": "ok"}))
    );
    let ready = get(&state, "/readyz").await;
    assert_eq!(ready.status, StatusCode::OK);
    assert_eq!(ready.json()["ready"], json!(true));
    assert!(ready.json()["modules"].as_u64().is_some_and(|n| n > 0));

    let ok = post_json(&state, "/api/run", &json!({"code": "return 1;"})).await;
    assert_eq!(ok.json()["ok"], json!(true));
    let thrown = post_json(
        &state,
        "/api/run",
        &json!({"code": "throw new Error('x');"}),
    )
    .await;
    assert_eq!(thrown.json()["ok"], json!(false));
    let module = get(&state, "/api/sandbox-modules/@fixture/geo").await;
    let etag = module.header("etag").unwrap_or_default().to_string();
    let again = send(
        &state,
        Method::GET,
        "/api/sandbox-modules/@fixture/geo",
        &[("if-none-match", &etag)],
        Body::empty(),
    )
    .await;
    assert_eq!(again.status, StatusCode::NOT_MODIFIED);
    let _ = send(
        &state,
        Method::GET,
        "/api/packs",
        &[("origin", "http://evil.example")],
        Body::empty(),
    )
    .await;
    let _ = send(
        &state,
        Method::POST,
        "/api/packs/reload",
        support::RELOAD,
        Body::empty(),
    )
    .await;
    let _ = send(
        &state,
        Method::POST,
        "/api/packs/reload",
        &[("content-type", "application/json")],
        Body::empty(),
    )
    .await;
    let _ = send(&state, Method::POST, "/api/run", &[], "return 1;").await;

    let answer = get(&state, "/metrics").await;
    assert_eq!(
        answer.header("content-type"),
        Some("application/openmetrics-text; version=1.0.0; charset=utf-8")
    );
    let text = answer.text();
    for line in [
        "nodetool_runs_total{kind=\"run\",outcome=\"ok\"} 1",
        "nodetool_runs_total{kind=\"run\",outcome=\"runtime-error\"} 1",
        "nodetool_gate_total{kind=\"run\",answer=\"admitted\"} 2",
        "nodetool_run_duration_seconds_count{kind=\"run\"} 2",
        "nodetool_deliveries_total{answer=\"ok\"} 1",
        "nodetool_deliveries_total{answer=\"not-modified\"} 1",
        "nodetool_http_refusals_total{rule=\"origin\"} 1",
        "nodetool_http_refusals_total{rule=\"operator\"} 1",
        "nodetool_http_refusals_total{rule=\"content-type\"} 1",
        "nodetool_catalog_reloads_total{result=\"ok\"} 1",
        "nodetool_run_queue_depth 0",
        "nodetool_runs_running 0",
        "# EOF",
    ] {
        assert!(text.contains(line), "no {line:?} in:\n{text}");
    }
    assert!(text.contains("nodetool_catalog_diagnostics "), "{text}");
    assert!(text.contains("nodetool_catalog_modules "), "{text}");
    answer.assert_no_path(&world.paths());

    // Draining: /readyz says so, and no new work is admitted.
    state.begin_draining();
    let ready = get(&state, "/readyz").await;
    assert_eq!(ready.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(ready.json()["ready"], json!(false));
    assert!(detail(&ready).starts_with("draining"), "{}", ready.text());
    for (uri, body) in posts().into_iter().take(3) {
        let answer = post_json(&state, uri, &body).await;
        assert_eq!(answer.status, StatusCode::SERVICE_UNAVAILABLE, "{uri}");
        assert_eq!(answer.header("retry-after"), Some("1"));
        assert!(detail(&answer).contains("shutting down"));
    }
    assert_eq!(get(&state, "/healthz").await.status, StatusCode::OK);
    let text = metrics(&state).await;
    assert!(
        text.contains("nodetool_gate_total{kind=\"run\",answer=\"rejected\"} 1"),
        "{text}"
    );
}
