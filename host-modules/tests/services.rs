//! The service helpers (`notion`, `supabase`, `twilio`, `apify`) at the host level: the
//! requests they build are the ones each API expects (the reference's own expectations,
//! byte for byte), their caps hold, and no error carries the token it was given.

use nodetool_host_modules::{HostError, HostErrorCode, implementation};
use nodetool_protocol::value::Value;
use serde_json::json;

fn call(id: &str, export: &str, args: serde_json::Value) -> Result<serde_json::Value, HostError> {
    let f = implementation(id, export).unwrap_or_else(|| panic!("{id}.{export}"));
    f(&[Value::from_json(args)]).map(|v| v.to_json())
}

fn ok(id: &str, export: &str, args: serde_json::Value) -> serde_json::Value {
    call(id, export, args).unwrap_or_else(|e| panic!("{id}.{export}: {e}"))
}

#[test]
fn notion_builds_a_versioned_authenticated_request() {
    assert_eq!(
        ok(
            "notion",
            "request",
            json!({ "token": "secret_x", "path": "search", "method": "post", "body": { "query": "q" } })
        ),
        json!({
            "url": "https://api.notion.com/v1/search",
            "method": "POST",
            "headers": {
                "Authorization": "Bearer secret_x",
                "Notion-Version": "2022-06-28",
                "Content-Type": "application/json"
            },
            "body": "{\"query\":\"q\"}"
        })
    );
    // No body: no Content-Type, no body key. A query bag, an absolute path, another version.
    assert_eq!(
        ok(
            "notion",
            "request",
            json!({ "token": "t", "path": "/v1/blocks/abc/children", "query": { "page_size": 100, "start_cursor": null, "filter": ["a", "b c"] }, "version": "2025-09-03" })
        ),
        json!({
            "url": "https://api.notion.com/v1/blocks/abc/children?page_size=100&filter=a&filter=b+c",
            "method": "GET",
            "headers": { "Authorization": "Bearer t", "Notion-Version": "2025-09-03" }
        })
    );
}

#[test]
fn notion_reads_rich_text_and_blocks() {
    assert_eq!(
        ok(
            "notion",
            "plainText",
            json!([{ "plain_text": "Road" }, { "text": { "content": "map" } }, 5, { "x": 1 }])
        ),
        json!("Roadmap")
    );
    assert_eq!(ok("notion", "plainText", json!("as is")), json!("as is"));
    assert_eq!(
        ok("notion", "plainText", json!({ "no": "array" })),
        json!("")
    );
    let md = ok(
        "notion",
        "toMarkdown",
        json!([
            { "type": "heading_1", "heading_1": { "rich_text": [{ "plain_text": "Plan" }] } },
            { "type": "bulleted_list_item", "bulleted_list_item": { "rich_text": [{ "plain_text": "ship" }] } },
            { "type": "to_do", "to_do": { "rich_text": [{ "plain_text": "write" }], "checked": true } },
            { "type": "to_do", "to_do": { "rich_text": [{ "plain_text": "test" }], "checked": "yes" } },
            { "type": "child_database", "child_database": {} },
            { "type": "code", "code": { "rich_text": [{ "plain_text": "let x = 1;" }], "language": "rust" } },
            { "type": "quote", "quote": { "rich_text": "quoted" } },
            { "type": "numbered_list_item", "numbered_list_item": {} },
            { "type": "divider", "divider": {} },
            "not a block",
            { "type": "heading_3", "heading_3": { "rich_text": [{ "plain_text": "End" }] } }
        ]),
    );
    assert_eq!(
        md,
        json!(
            "# Plan\n\n- ship\n\n- [x] write\n\n- [ ] test\n\n```rust\nlet x = 1;\n```\n\n> quoted\n\n1. \n\n---\n\n### End"
        )
    );
    assert_eq!(ok("notion", "toMarkdown", json!(null)), json!(""));
}

#[test]
fn supabase_encodes_selects_upserts_and_rpc() {
    let req = ok(
        "supabase",
        "from",
        json!({
            "url": "https://ref.supabase.co/ignored?x=1", "key": "anon",
            "table": "issues", "select": "id,title",
            "filters": { "status": "eq.open", "age": { "gte": 18, "lt": null }, "tags": ["a", "b"], "skip": null },
            "order": "created_at.desc", "limit": 20, "offset": 40, "count": "exact"
        }),
    );
    assert_eq!(
        req,
        json!({
            "url": "https://ref.supabase.co/rest/v1/issues?select=id%2Ctitle&status=eq.open&age=gte.18&tags=a%2Cb&order=created_at.desc&limit=20&offset=40",
            "method": "GET",
            "headers": { "apikey": "anon", "Authorization": "Bearer anon", "Prefer": "return=representation,count=exact" }
        })
    );
    let upsert = ok(
        "supabase",
        "from",
        json!({ "url": "https://ref.supabase.co", "key": "anon", "table": "users", "method": "POST", "onConflict": "email", "returning": "minimal", "body": [{ "email": "a@b.c" }] }),
    );
    assert_eq!(
        upsert,
        json!({
            "url": "https://ref.supabase.co/rest/v1/users?on_conflict=email",
            "method": "POST",
            "headers": {
                "apikey": "anon", "Authorization": "Bearer anon",
                "Prefer": "return=minimal,resolution=merge-duplicates",
                "Content-Type": "application/json"
            },
            "body": "[{\"email\":\"a@b.c\"}]"
        })
    );
    assert_eq!(
        ok(
            "supabase",
            "rpc",
            json!({ "url": "https://ref.supabase.co", "key": "anon", "fn": "search me", "args": { "term": "x" } })
        ),
        json!({
            "url": "https://ref.supabase.co/rest/v1/rpc/search%20me",
            "method": "POST",
            "headers": { "apikey": "anon", "Authorization": "Bearer anon", "Content-Type": "application/json" },
            "body": "{\"term\":\"x\"}"
        })
    );
    // A table name cannot climb out of /rest/v1/.
    let climb = ok(
        "supabase",
        "from",
        json!({ "url": "https://ref.supabase.co", "key": "k", "table": "../auth/v1/admin" }),
    );
    assert_eq!(
        climb["url"],
        "https://ref.supabase.co/rest/v1/..%2Fauth%2Fv1%2Fadmin"
    );
}

#[test]
fn twilio_form_encodes_writes_and_queries_reads() {
    assert_eq!(
        ok(
            "twilio",
            "request",
            json!({
                "accountSid": "AC123", "authToken": "tok", "path": "Messages.json", "method": "POST",
                "params": { "To": "+15551234567", "From": "+15559876543", "Body": "hi there", "MediaUrl": ["a", "b"] }
            })
        ),
        json!({
            "url": "https://api.twilio.com/2010-04-01/Accounts/AC123/Messages.json",
            "method": "POST",
            "headers": {
                "Authorization": "Basic QUMxMjM6dG9r",
                "Content-Type": "application/x-www-form-urlencoded"
            },
            "body": "To=%2B15551234567&From=%2B15559876543&Body=hi+there&MediaUrl=a&MediaUrl=b"
        })
    );
    assert_eq!(
        ok(
            "twilio",
            "request",
            json!({ "accountSid": "AC1", "authToken": "t", "host": "lookups.twilio.com", "path": "/v2/PhoneNumbers/+15551234567", "params": { "Fields": "line_type_intelligence" } })
        ),
        json!({
            "url": "https://lookups.twilio.com/v2/PhoneNumbers/+15551234567?Fields=line_type_intelligence",
            "method": "GET",
            "headers": { "Authorization": "Basic QUMxOnQ=" }
        })
    );
    // A password with an accent makes a header, not an exception.
    let accented = ok(
        "twilio",
        "request",
        json!({ "accountSid": "AC1", "authToken": "pâss", "path": "Calls.json" }),
    );
    assert_eq!(accented["headers"]["Authorization"], "Basic QUMxOnDDonNz");
}

#[test]
fn apify_builds_the_three_requests_of_a_run() {
    assert_eq!(
        ok(
            "apify",
            "startRun",
            json!({ "token": "apify_api_x", "actor": "apify/web-scraper", "input": { "startUrls": [{ "url": "https://example.com" }] }, "memoryMbytes": 1024, "timeoutSecs": 60 })
        ),
        json!({
            "url": "https://api.apify.com/v2/acts/apify~web-scraper/runs?memory=1024&timeout=60",
            "method": "POST",
            "headers": { "Authorization": "Bearer apify_api_x", "Content-Type": "application/json" },
            "body": "{\"startUrls\":[{\"url\":\"https://example.com\"}]}"
        })
    );
    assert_eq!(
        ok(
            "apify",
            "startRun",
            json!({ "token": "t", "actor": "me~a" })
        )["body"],
        "{}"
    );
    assert_eq!(
        ok(
            "apify",
            "runStatus",
            json!({ "token": "t", "runId": "run/1" })
        ),
        json!({
            "url": "https://api.apify.com/v2/actor-runs/run%2F1",
            "method": "GET",
            "headers": { "Authorization": "Bearer t" }
        })
    );
    assert_eq!(
        ok(
            "apify",
            "datasetItems",
            json!({ "token": "t", "datasetId": "ds1", "clean": true, "limit": 10 })
        )["url"],
        "https://api.apify.com/v2/datasets/ds1/items?format=json&clean=true&limit=10"
    );
}

const TOKEN: &str = "tok_SECRET_9f8e7d6c5b4a";

fn refused(id: &str, export: &str, args: serde_json::Value) -> HostError {
    match call(id, export, args.clone()) {
        Ok(v) => panic!("{id}.{export}({args}) gave {v}"),
        Err(e) => {
            assert!(e.message().starts_with(&format!("{id}.{export}: ")), "{e}");
            assert!(!e.message().contains(TOKEN), "the token leaked: {e}");
            assert!(!e.message().contains("SECRET"), "the token leaked: {e}");
            e
        }
    }
}

#[test]
fn errors_name_the_argument_and_never_the_token() {
    let e = refused("notion", "request", json!({ "path": "search" }));
    assert_eq!(e.message(), "notion.request: token is required");
    assert_eq!(e.code(), HostErrorCode::InvalidArgument);
    refused("notion", "request", json!({ "token": TOKEN }));
    let e = refused(
        "notion",
        "request",
        json!({ "token": TOKEN, "path": "//evil.example/steal" }),
    );
    assert_eq!(
        e.message(),
        "notion.request: path must stay on api.notion.com"
    );
    refused(
        "notion",
        "request",
        json!({ "token": TOKEN, "path": "x", "method": "GE T" }),
    );
    refused(
        "notion",
        "request",
        json!({ "token": format!("{TOKEN}\r\nX-Evil: 1"), "path": "x" }),
    );
    refused(
        "notion",
        "request",
        json!({ "token": TOKEN, "path": "x", "version": "1\n2" }),
    );
    refused(
        "supabase",
        "from",
        json!({ "url": "https://r.supabase.co", "table": "t" }),
    );
    let e = refused(
        "supabase",
        "from",
        json!({ "url": format!("not a url {TOKEN}"), "key": TOKEN, "table": "t" }),
    );
    assert!(e.message().contains("url must be the project URL"), "{e}");
    refused(
        "supabase",
        "rpc",
        json!({ "url": "https://r.supabase.co", "key": TOKEN }),
    );
    refused(
        "supabase",
        "from",
        json!({ "url": format!("ftp://{TOKEN}.example/"), "key": TOKEN, "table": "t" }),
    );
    let e = refused(
        "twilio",
        "request",
        json!({ "accountSid": "AC1", "authToken": TOKEN, "host": format!("{TOKEN}.evil.example"), "path": "x" }),
    );
    assert!(e.message().contains("must be a twilio.com host"), "{e}");
    refused(
        "twilio",
        "request",
        json!({ "accountSid": "AC1", "authToken": TOKEN, "path": "//evil.example/x" }),
    );
    refused(
        "twilio",
        "request",
        json!({ "accountSid": "AC1", "path": "x" }),
    );
    refused("apify", "startRun", json!({ "token": TOKEN }));
    refused("apify", "runStatus", json!({ "token": TOKEN }));
    refused("apify", "datasetItems", json!({ "runId": "x" }));
    // The one name encoding keeps, which would climb out of the API path.
    refused(
        "supabase",
        "from",
        json!({ "url": "https://r.supabase.co", "key": TOKEN, "table": ".." }),
    );
    refused(
        "apify",
        "runStatus",
        json!({ "token": TOKEN, "runId": ".." }),
    );
    // Not an options object at all.
    refused("apify", "startRun", json!("apify_api_token"));
}

#[test]
fn caps_hold_against_fan_out() {
    // A body past 1,048,576 characters.
    let big = "x".repeat(1024 * 1024);
    let e = refused(
        "notion",
        "request",
        json!({ "token": TOKEN, "path": "pages", "body": { "t": big } }),
    );
    assert_eq!(e.code(), HostErrorCode::LimitExceeded);
    assert_eq!(
        e.message(),
        "notion.request: body exceeds the 1048576 character limit"
    );
    // Exactly at the cap is fine: `"` + 1,048,574 + `"`.
    let at_cap = "y".repeat(1024 * 1024 - 2);
    assert!(
        call(
            "apify",
            "startRun",
            json!({ "token": "t", "actor": "a", "input": at_cap })
        )
        .is_ok()
    );
    // A form body too, counted in UTF-16 units.
    let e = refused(
        "twilio",
        "request",
        json!({ "accountSid": "AC1", "authToken": TOKEN, "path": "Messages.json", "method": "POST", "params": { "Body": "z".repeat(1024 * 1024) } }),
    );
    assert_eq!(e.code(), HostErrorCode::LimitExceeded);
    // A query bag that fans out past the URL cap.
    let many: Vec<String> = (0..20_000).map(|i| format!("value-{i}")).collect();
    let e = refused(
        "supabase",
        "from",
        json!({ "url": "https://r.supabase.co", "key": TOKEN, "table": "t", "query": { "id": many } }),
    );
    assert_eq!(e.code(), HostErrorCode::LimitExceeded);
    assert_eq!(
        e.message(),
        "supabase.from: the URL would pass the 65536 byte limit"
    );
    // A body nested deeper than anything JSON needs.
    let mut deep = json!(1);
    for _ in 0..600 {
        deep = json!([deep]);
    }
    let e = refused(
        "supabase",
        "rpc",
        json!({ "url": "https://r.supabase.co", "key": TOKEN, "fn": "f", "args": deep }),
    );
    assert_eq!(e.code(), HostErrorCode::LimitExceeded);
}
