//! The document host modules through the server: the host-module route the browser runner calls
//! (bytes as `{"$bytes": ...}` both ways), each writer's output read back by its reader, and a
//! run that imports them.

mod support;

use support::host_result as call;

use axum::http::StatusCode;
use serde_json::json;
use support::{World, post_json, test_config};

#[tokio::test]
async fn the_host_module_route_serves_every_document_module() {
    let world = World::shipped_packs();
    let state = world.state(test_config());

    let pdf = call(
        &state,
        "pdflib",
        "build",
        json!([{ "pages": [{ "items": [{ "type": "text", "text": "Route page", "x": 72, "y": 72 }] }] }]),
    )
    .await;
    assert!(pdf["$bytes"].is_string(), "{pdf}");
    let merged = call(
        &state,
        "pdflib",
        "merge",
        json!([[pdf.clone(), pdf.clone()]]),
    )
    .await;
    assert_eq!(
        call(&state, "pdf", "extractText", json!([merged])).await,
        json!("Route page\n\nRoute page")
    );
    assert_eq!(
        call(&state, "pdf", "extractPages", json!([pdf])).await,
        json!([{ "index": 0, "pageNumber": 1, "text": "Route page" }])
    );

    let docx = call(
        &state,
        "docx",
        "build",
        json!([{ "elements": [{ "type": "heading", "text": "Hi" }, { "type": "paragraph", "text": "there" }] }]),
    )
    .await;
    assert_eq!(
        call(&state, "mammoth", "extractRawText", json!([docx.clone()])).await,
        json!("Hi\n\nthere\n\n")
    );
    assert_eq!(
        call(&state, "mammoth", "convertToHtml", json!([docx])).await,
        json!("<h1>Hi</h1><p>there</p>")
    );

    let deck = call(
        &state,
        "pptxgen",
        "build",
        json!([{ "slides": [{ "title": "One", "items": [{ "type": "text", "text": "body" }] }] }]),
    )
    .await;
    assert_eq!(
        call(&state, "pptx", "extractText", json!([deck.clone()])).await,
        json!("One\nbody")
    );
    assert_eq!(
        call(&state, "pptx", "extractSlides", json!([deck])).await[0]["title"],
        json!("One")
    );

    let book = call(
        &state,
        "zip",
        "zip",
        json!([{
            "META-INF/container.xml": "<container><rootfiles><rootfile full-path=\"b.opf\"/></rootfiles></container>",
            "b.opf": "<package><metadata xmlns:dc=\"dc\"><dc:title>T</dc:title></metadata><manifest><item id=\"c\" href=\"c.xhtml\"/></manifest><spine><itemref idref=\"c\"/></spine></package>",
            "c.xhtml": "<html><body><p>Text.</p></body></html>"
        }]),
    )
    .await;
    assert_eq!(
        call(&state, "epub", "metadata", json!([book.clone()])).await,
        json!({ "title": "T" })
    );
    assert_eq!(
        call(&state, "epub", "tableOfContents", json!([book.clone()])).await,
        json!([])
    );
    assert_eq!(
        call(&state, "epub", "extractText", json!([book.clone()])).await,
        json!("Text.")
    );
    assert_eq!(
        call(&state, "epub", "extractChapters", json!([book])).await,
        json!([{ "id": "c", "title": "", "href": "c.xhtml", "text": "Text." }])
    );

    // A hostile input is the module's message, as a 422.
    let refused = post_json(
        &state,
        "/api/host-modules/pdf/extractText",
        &json!({ "args": [{ "$bytes": "aGVsbG8=" }] }),
    )
    .await;
    assert_eq!(refused.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        refused.json()["detail"],
        json!("pdf.extractText: the bytes are not a PDF file (no %PDF- header)")
    );
}

#[tokio::test]
async fn a_run_on_the_server_imports_a_document_pack() {
    let world = World::shipped_packs();
    let state = world.state(test_config());
    let answer = post_json(
        &state,
        "/api/run",
        &json!({ "code": "import { build } from '@nodetool-ai/sandbox-docx';\nimport { extractRawText } from '@nodetool-ai/sandbox-mammoth';\nreturn await extractRawText(await build({ elements: [{ type: 'paragraph', text: 'from the server' }] }));" }),
    )
    .await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.text());
    assert_eq!(answer.json()["ok"], json!(true), "{}", answer.text());
    assert_eq!(answer.json()["result"], json!("from the server\n\n"));
}
