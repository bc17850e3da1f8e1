//! The request-building service modules (`aws`, `notion`, `supabase`, `twilio`, `apify`)
//! through the server's host-module route, the one the browser runner calls: each export's
//! prepared request, and a refused argument answered as a 422 whose detail names the argument
//! and never the token.

mod support;

use support::host_result as call;

use axum::http::StatusCode;
use serde_json::json;
use support::{World, post_json, test_config};

const TOKEN: &str = "tok_SECRET_route_5e1f";

#[tokio::test]
async fn the_host_module_route_serves_every_service_helper() {
    let world = World::shipped_packs();
    let state = world.state(test_config());

    let signed = call(
        &state,
        "aws",
        "sigv4",
        json!([{
            "url": "https://example.amazonaws.com/", "service": "service", "region": "us-east-1",
            "accessKeyId": "AKIDEXAMPLE", "secretAccessKey": "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
            "signingDate": "2015-08-30T12:36:00Z"
        }]),
    )
    .await;
    assert_eq!(
        signed,
        json!({
            "url": "https://example.amazonaws.com/",
            "method": "GET",
            "headers": {
                "x-amz-date": "20150830T123600Z",
                "Authorization": "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, SignedHeaders=host;x-amz-date, Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"
            }
        })
    );
    let link = call(
        &state,
        "aws",
        "presign",
        json!([{ "url": "https://b.s3.amazonaws.com/k", "accessKeyId": "AK", "secretAccessKey": "SK", "expiresIn": 60 }]),
    )
    .await;
    assert!(
        link.as_str().is_some_and(|l| l.starts_with(
            "https://b.s3.amazonaws.com/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AK%2F"
        ) && l.contains("&X-Amz-Expires=60&")),
        "{link}"
    );

    assert_eq!(
        call(
            &state,
            "notion",
            "request",
            json!([{ "token": "secret_x", "path": "search", "method": "POST", "body": { "query": "q" } }])
        )
        .await,
        json!({
            "url": "https://api.notion.com/v1/search",
            "method": "POST",
            "headers": { "Authorization": "Bearer secret_x", "Notion-Version": "2022-06-28", "Content-Type": "application/json" },
            "body": "{\"query\":\"q\"}"
        })
    );
    assert_eq!(
        call(
            &state,
            "notion",
            "plainText",
            json!([[{ "plain_text": "Road" }, { "plain_text": "map" }]])
        )
        .await,
        json!("Roadmap")
    );
    assert_eq!(
        call(
            &state,
            "notion",
            "toMarkdown",
            json!([[{ "type": "quote", "quote": { "rich_text": [{ "plain_text": "hi" }] } }, { "type": "divider", "divider": {} }]])
        )
        .await,
        json!("> hi\n\n---")
    );
    assert_eq!(
        call(
            &state,
            "supabase",
            "from",
            json!([{ "url": "https://ref.supabase.co", "key": "anon", "table": "issues", "filters": { "status": "eq.open" }, "limit": 5 }])
        )
        .await["url"],
        json!("https://ref.supabase.co/rest/v1/issues?status=eq.open&limit=5")
    );
    assert_eq!(
        call(
            &state,
            "supabase",
            "rpc",
            json!([{ "url": "https://ref.supabase.co", "key": "anon", "fn": "f" }])
        )
        .await["body"],
        json!("{}")
    );
    assert_eq!(
        call(
            &state,
            "twilio",
            "request",
            json!([{ "accountSid": "AC1", "authToken": "t", "path": "Calls.json", "method": "POST", "params": { "To": "+1" } }])
        )
        .await,
        json!({
            "url": "https://api.twilio.com/2010-04-01/Accounts/AC1/Calls.json",
            "method": "POST",
            "headers": { "Authorization": "Basic QUMxOnQ=", "Content-Type": "application/x-www-form-urlencoded" },
            "body": "To=%2B1"
        })
    );
    assert_eq!(
        call(
            &state,
            "apify",
            "startRun",
            json!([{ "token": "t", "actor": "a/b" }])
        )
        .await["url"],
        json!("https://api.apify.com/v2/acts/a~b/runs")
    );
    assert_eq!(
        call(
            &state,
            "apify",
            "runStatus",
            json!([{ "token": "t", "runId": "r" }])
        )
        .await["url"],
        json!("https://api.apify.com/v2/actor-runs/r")
    );
    assert_eq!(
        call(
            &state,
            "apify",
            "datasetItems",
            json!([{ "token": "t", "datasetId": "d" }])
        )
        .await["url"],
        json!("https://api.apify.com/v2/datasets/d/items?format=json")
    );
}

#[tokio::test]
async fn refused_arguments_are_422s_without_the_token() {
    let world = World::shipped_packs();
    let state = world.state(test_config());
    for (id, export, args, detail) in [
        (
            "notion",
            "request",
            json!([{ "token": TOKEN, "path": "//evil.example/" }]),
            "notion.request: path must stay on api.notion.com",
        ),
        (
            "twilio",
            "request",
            json!([{ "accountSid": "AC1", "authToken": TOKEN, "host": format!("{TOKEN}.evil"), "path": "x" }]),
            "twilio.request: host must be a twilio.com host, such as api.twilio.com or lookups.twilio.com",
        ),
        (
            "supabase",
            "from",
            json!([{ "url": format!("nope {TOKEN}"), "key": TOKEN, "table": "t" }]),
            "supabase.from: url must be the project URL, e.g. https://<ref>.supabase.co",
        ),
        (
            "apify",
            "runStatus",
            json!([{ "token": TOKEN }]),
            "apify.runStatus: runId is required",
        ),
        (
            "aws",
            "sigv4",
            json!([{ "url": format!("https://u:{TOKEN}@s3.amazonaws.com/"), "accessKeyId": "AK", "secretAccessKey": TOKEN }]),
            "aws.sigv4: url must not carry a user name or password",
        ),
        (
            "aws",
            "presign",
            json!([{ "url": "https://s3.amazonaws.com/", "accessKeyId": "AK", "secretAccessKey": TOKEN, "signingDate": TOKEN }]),
            "aws.presign: signingDate must be an ISO 8601 UTC time (\"2015-08-30T12:36:00Z\"), \"20150830T123600Z\", or milliseconds since 1970, between 1970 and 9999",
        ),
    ] {
        let refused = post_json(
            &state,
            &format!("/api/host-modules/{id}/{export}"),
            &json!({ "args": args }),
        )
        .await;
        assert_eq!(
            refused.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{id}.{export}"
        );
        assert!(!refused.text().contains(TOKEN), "{}", refused.text());
        assert_eq!(refused.json()["detail"], json!(detail));
    }
}
