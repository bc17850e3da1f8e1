//! The data and text packs of issue 23 through the server: `ics`, `subtitle` and `expr` on the
//! host-module route the browser runner calls, a run that imports them, and the `chrono` guest
//! library pack compiled on first use by a server process, as `nodetool run` does.

mod support;

use support::host_result as call;

use std::io::{BufRead, BufReader};
use std::time::Duration;

use axum::http::StatusCode;
use serde_json::{Value, json};
use support::{ServerProcess, World, must, post_json, test_config};

#[tokio::test]
async fn the_host_module_route_serves_ics_subtitle_and_expr() {
    let world = World::shipped_packs();
    let state = world.state(test_config());

    let event = json!({ "title": "Launch", "start": [2024, 6, 1], "uid": "l1", "timestamp": 0 });
    let text = call(&state, "ics", "createEvent", json!([event])).await;
    let text = text.as_str().unwrap_or_default().to_string();
    assert!(
        text.starts_with("BEGIN:VCALENDAR\r\nVERSION:2.0\r\n")
            && text.ends_with("END:VCALENDAR\r\n"),
        "{text}"
    );
    assert!(
        text.contains("\r\nDTSTART;VALUE=DATE:20240601\r\n"),
        "{text}"
    );
    let both = call(
        &state,
        "ics",
        "createEvents",
        json!([[{ "start": [2024, 6, 1] }, { "start": 1_717_200_000_000u64 }]]),
    )
    .await;
    assert_eq!(
        both.as_str()
            .unwrap_or_default()
            .matches("BEGIN:VEVENT")
            .count(),
        2
    );

    let cues = call(
        &state,
        "subtitle",
        "parse",
        json!(["1\r\n00:00:01,000 --> 00:00:02,000\r\nHi\r\n"]),
    )
    .await;
    assert_eq!(cues, json!([{ "start": 1000, "end": 2000, "text": "Hi" }]));
    assert_eq!(
        call(
            &state,
            "subtitle",
            "stringify",
            json!([cues, { "format": "WebVTT" }])
        )
        .await,
        json!("WEBVTT\n\n1\n00:00:01.000 --> 00:00:02.000\nHi\n")
    );

    assert_eq!(
        call(
            &state,
            "expr",
            "evaluate",
            json!(["a * b + c.d", { "a": 6, "b": 7, "c": { "d": 0.5 } }])
        )
        .await,
        json!(42.5)
    );

    // Refusals are the module's message, as a 422.
    for (uri, args, detail) in [
        (
            "/api/host-modules/expr/evaluate",
            json!(["__proto__.polluted = 1; constructor"]),
            "expr.evaluate: undefined variable: constructor",
        ),
        (
            "/api/host-modules/subtitle/stringify",
            json!(["not cues"]),
            "subtitle.stringify: cues must be an array",
        ),
        (
            "/api/host-modules/ics/createEvents",
            json!([[]]),
            "ics.createEvents: provide a non-empty array of events",
        ),
    ] {
        let refused = post_json(&state, uri, &json!({ "args": args })).await;
        assert_eq!(refused.status, StatusCode::UNPROCESSABLE_ENTITY, "{uri}");
        assert_eq!(refused.json()["detail"], json!(detail), "{uri}");
    }
}

#[tokio::test]
async fn a_run_on_the_server_imports_the_host_packs() {
    let world = World::shipped_packs();
    let state = world.state(test_config());
    let code = "import { evaluate } from '@nodetool-ai/sandbox-expr';\nimport { parse } from '@nodetool-ai/sandbox-subtitle';\nimport { createEvent } from '@nodetool-ai/sandbox-ics';\nconst cues = await parse('1\\n00:00:01,000 --> 00:00:04,000\\nx');\nconst ics = await createEvent({ start: [2024, 1, 1, 9, 0], duration: { seconds: await evaluate('(end - start) / 1000', cues[0]) } });\nreturn ics.split('\\r\\n').find((l) => l.startsWith('DURATION'));";
    let answer = post_json(&state, "/api/run", &json!({ "code": code })).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.text());
    assert_eq!(answer.json()["result"], json!("DURATION:PT3S"));
}

#[test]
fn a_server_process_compiles_and_runs_the_chrono_pack() {
    let world = World::shipped_packs();
    let mut server = ServerProcess::start(&world, &["--max-runs", "1"]);
    // Keep the child's stderr drained.
    if let Some(stderr) = server.child.stderr.take() {
        std::thread::spawn(move || for _ in BufReader::new(stderr).lines() {});
    }
    let agent = ureq::Agent::new_with_config(
        ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(120)))
            .build(),
    );
    let body = json!({
        "code": "import * as chrono from '@nodetool-ai/sandbox-chrono';\nconst ref = new Date('2024-05-01T12:00:00Z');\nreturn [chrono.parseDate('next Friday at 3pm', ref).toISOString(), chrono.parse('from May 20 to May 22', ref).map((r) => [r.text, r.end.date().toISOString()])];"
    });
    let mut response = must(
        agent
            .post(&server.url("/api/run"))
            .header("content-type", "application/json")
            .send(body.to_string()),
        "POST /api/run",
    );
    let status = response.status().as_u16();
    let text = must(response.body_mut().read_to_string(), "the run's answer");
    assert_eq!(status, 200, "{text}");
    let answer: Value = must(serde_json::from_str(&text), "run JSON");
    assert_eq!(
        answer["result"],
        json!([
            "2024-05-10T15:00:00.000Z",
            [["May 20 to May 22", "2024-05-22T12:00:00.000Z"]]
        ]),
        "{answer}"
    );
    server.terminate();
}
