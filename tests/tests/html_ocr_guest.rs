//! The shipped `@nodetool-ai/sandbox-html` and `@nodetool-ai/sandbox-ocr` packs used the way a
//! Code node uses them: discovered from `packs/`, imported by the body, called through the
//! generated facades and the host dispatcher, with results and errors arriving in the guest
//! as JavaScript values. The OCR images are drawn by the test itself
//! (`nodetool_tests::render`, DejaVu Sans from Debian's fonts-dejavu-core).

mod shipped_guest;

use nodetool_protocol::run::RunErrorCode;
use nodetool_protocol::value::Value;
use nodetool_tests::render::{Paper, text_png};
use serde_json::json;
use shipped_guest::run;

fn json_of(code: &str, inputs: Value) -> serde_json::Value {
    run(code, inputs)
        .unwrap_or_else(|e| panic!("{e}"))
        .to_json()
}

fn json(code: &str) -> serde_json::Value {
    json_of(code, Value::Null)
}

/// Each of `calls` (expressions using the module's named exports) run in its own try block:
/// the message of what it threw, or `"ok"`.
fn messages(module: &str, calls: &[&str]) -> Vec<String> {
    let body = calls
        .iter()
        .map(|c| format!("try {{ await {c}; out.push('ok') }} catch (e) {{ out.push(e.message) }}"))
        .collect::<Vec<_>>()
        .join("\n");
    let exports = match module {
        "html" => {
            "select, toMarkdown, toText, extractLinks, extractImages, extractAudio, extractVideos, extractMetadata, extractReadableText"
        }
        _ => "recognize",
    };
    let code = format!(
        "import {{ {exports} }} from '@nodetool-ai/sandbox-{module}';\nconst out = [];\n{body}\nreturn out;"
    );
    match json(&code) {
        serde_json::Value::Array(items) => items
            .into_iter()
            .map(|v| v.as_str().unwrap_or_default().to_string())
            .collect(),
        other => panic!("{other}"),
    }
}

fn html_input(text: String) -> Value {
    Value::Object(vec![("html".into(), Value::String(text))])
}

// ---------------------------------------------------------------------------------------------
// html

#[test]
fn select_and_its_errors() {
    let out = json(
        "import html, { select } from '@nodetool-ai/sandbox-html';\n\
         const page = '<ul><li class=\"x\"> a </li><li><a href=\"/b\">b</a></li></ul>';\n\
         return [await select(page, 'li'), await html.select(page, 'a', { attr: 'href' }), html.select === select];",
    );
    assert_eq!(out, json!([["a", "b"], ["/b"], true]));
    assert_eq!(
        messages(
            "html",
            &[
                "select('<p>', '')",
                "select('<p>', 42)",
                "select('<p>', 'p[')",
                "select('<p>', 'p:first')",
                "select(null, 'p')",
            ]
        )
        .iter()
        .map(|m| m.split(" (").next().unwrap_or_default())
        .collect::<Vec<_>>(),
        [
            "html.select: selector must be a non-empty string",
            "html.select: selector must be a non-empty string",
            "html.select: invalid selector \"p[\"",
            "html.select: invalid selector \"p:first\"",
            "html.select: html must be a string",
        ]
    );
}

#[test]
fn the_select_limit_defaults_to_100_and_clamps_to_1000() {
    let page = "<p>x</p>".repeat(1500);
    let out = json_of(
        "import { select } from '@nodetool-ai/sandbox-html';\n\
         return [(await select(inputs.html, 'p')).length, (await select(inputs.html, 'p', { limit: 100000 })).length, (await select(inputs.html, 'p', { limit: 3 })).length];",
        html_input(page),
    );
    assert_eq!(out, json!([100, 1000, 3]));
}

#[test]
fn html_input_one_byte_over_the_cap_is_refused() {
    let code = "import { toText } from '@nodetool-ai/sandbox-html'; try { return (await toText(inputs.html)).length } catch (e) { return e.message }";
    let at_cap = json_of(code, html_input("a".repeat(5 * 1024 * 1024)));
    assert_eq!(at_cap, json!(5 * 1024 * 1024));
    let over = json_of(code, html_input("a".repeat(5 * 1024 * 1024 + 1)));
    assert_eq!(
        over,
        json!("html.toText: input exceeds the 5242880 character limit")
    );
}

const PAGE: &str = r#"<!DOCTYPE html>
<html lang="en">
<head><title>Release notes</title><meta name="description" content="What changed in 2.0"><style>body { margin: 0 }</style></head>
<body>
<nav><a href="/">Home</a> <a href="/docs">Docs</a></nav>
<main>
<h1>Release notes: version <em>2.0</em></h1>
<p>This release adds a <strong>parser</strong>, a <a href="https://example.com/guide" title="The guide">guide</a> and <code>cargo xtask</code>.</p>
<h2>Install</h2>
<pre><code class="language-sh">cargo install nodetool
nodetool --version
</code></pre>
<h2>Changes</h2>
<ul>
  <li>Parsing
    <ul>
      <li>HTML5 <em>spec</em> parser</li>
      <li>CSS selectors
        <ol><li>level 4</li><li><code>:has()</code></li></ol>
      </li>
    </ul>
  </li>
  <li>Markdown output</li>
</ul>
<h3>Timings</h3>
<table>
  <caption>Median of 15 runs</caption>
  <thead><tr><th>Step</th><th align="right">ms</th></tr></thead>
  <tbody>
    <tr><td>parse</td><td>31.5</td></tr>
    <tr><td>select | text</td><td>2.1</td></tr>
  </tbody>
</table>
<blockquote><p>Faster than before.</p></blockquote>
<p><img src="/img/chart.png" alt="Timing chart"><br>Figure 1.</p>
</main>
<footer>© 2026 Example</footer>
<script>console.log("not content")</script>
</body>
</html>"#;

#[test]
fn markdown_of_a_page_with_headings_code_a_table_and_nested_lists() {
    let out = json_of(
        "import { toMarkdown } from '@nodetool-ai/sandbox-html'; return await toMarkdown(inputs.html);",
        html_input(PAGE.into()),
    );
    let markdown = out.as_str().unwrap_or_else(|| panic!("{out}"));
    insta::assert_snapshot!(markdown);
    let setext = json_of(
        "import { toMarkdown } from '@nodetool-ai/sandbox-html'; return await toMarkdown('<h1>A</h1><ul><li>b</li></ul>', { turndown: { headingStyle: 'setext', bulletListMarker: '*' } });",
        Value::Null,
    );
    assert_eq!(setext, json!("A\n===\n\n* b"));
    assert_eq!(
        messages("html", &["toMarkdown(7)"]),
        ["html.toMarkdown: html must be a string"]
    );
}

#[test]
fn text_metadata_and_readable_text() {
    let out = json_of(
        "import { toText, extractMetadata, extractReadableText } from '@nodetool-ai/sandbox-html';\n\
         const text = await toText(inputs.html);\n\
         return [text.startsWith('Release notes'), text.includes('console.log'), text.includes('body { margin'), await extractMetadata(inputs.html), await extractReadableText(inputs.html), await extractReadableText('<nav>only</nav>')];",
        html_input(PAGE.into()),
    );
    assert_eq!(out[0], true);
    assert_eq!(out[1], false);
    assert_eq!(out[2], false);
    assert_eq!(
        out[3],
        json!({ "title": "Release notes", "description": "What changed in 2.0", "keywords": null })
    );
    let readable = out[4].as_str().unwrap_or_default();
    assert!(
        readable.starts_with("Release notes: version 2.0 This release adds a parser"),
        "{readable}"
    );
    assert!(
        !readable.contains("Home") && !readable.contains("©"),
        "{readable}"
    );
    assert_eq!(out[5], "No main content found");
    assert_eq!(
        messages(
            "html",
            &["toText([])", "extractMetadata()", "extractReadableText({})"]
        ),
        [
            "html.toText: html must be a string",
            "html.extractMetadata: html must be a string",
            "html.extractReadableText: html must be a string",
        ]
    );
}

#[test]
fn links_and_media() {
    let out = json(
        "import { extractLinks, extractImages, extractAudio, extractVideos } from '@nodetool-ai/sandbox-html';\n\
         const page = '<a href=\"/docs\"> Docs </a><a href=\"https://example.com/x\">x</a><a href=\"https://elsewhere.org\">e</a><a href=\"mailto:a@b.c\">m</a>'\n\
           + '<img src=\"a.png\"><audio src=\"s.mp3\"></audio><video><source src=\"v.webm\"></video><iframe src=\"https://yt.example/e\"></iframe>';\n\
         const base = 'https://example.com/blog/';\n\
         return [await extractLinks(page, base), await extractLinks(page), await extractImages(page, base), await extractAudio(page, base), await extractVideos(page, base), await extractImages(page)];",
    );
    assert_eq!(
        out[0],
        json!([
            { "href": "/docs", "text": "Docs", "type": "internal" },
            { "href": "https://example.com/x", "text": "x", "type": "internal" },
            { "href": "https://elsewhere.org", "text": "e", "type": "external" },
            { "href": "mailto:a@b.c", "text": "m", "type": "external" },
        ])
    );
    assert_eq!(out[1][1]["type"], "external");
    assert_eq!(out[2], json!(["https://example.com/blog/a.png"]));
    assert_eq!(out[3], json!(["https://example.com/blog/s.mp3"]));
    assert_eq!(
        out[4],
        json!(["https://example.com/blog/v.webm", "https://yt.example/e"])
    );
    assert_eq!(out[5], json!(["a.png"]));
    assert_eq!(
        messages(
            "html",
            &[
                "extractLinks(1)",
                "extractImages(null)",
                "extractAudio(undefined)",
                "extractVideos(new Uint8Array(1))",
            ]
        ),
        [
            "html.extractLinks: html must be a string",
            "html.extractImages: html must be a string",
            "html.extractAudio: html must be a string",
            "html.extractVideos: html must be a string",
        ]
    );
}

#[test]
fn every_extractor_stops_at_1000_items() {
    let page = "<a href=x>x</a><img src=i><audio src=a></audio><video src=v></video>".repeat(1100);
    let out = json_of(
        "import { extractLinks, extractImages, extractAudio, extractVideos } from '@nodetool-ai/sandbox-html';\n\
         return [(await extractLinks(inputs.html)).length, (await extractImages(inputs.html)).length, (await extractAudio(inputs.html)).length, (await extractVideos(inputs.html)).length];",
        html_input(page),
    );
    assert_eq!(out, json!([1000, 1000, 1000, 1000]));
}

#[test]
fn an_uncaught_html_error_is_a_host_module_error() {
    let e = run(
        "import { select } from '@nodetool-ai/sandbox-html';\nawait select('<p>', 'p[');",
        Value::Null,
    )
    .err()
    .unwrap_or_else(|| panic!("ran"));
    assert_eq!(e.code, RunErrorCode::HostModuleError);
    assert!(
        e.message
            .starts_with("Error: html.select: invalid selector \"p[\" ("),
        "{}",
        e.message
    );
    assert_eq!(e.line, Some(2));
}

// ---------------------------------------------------------------------------------------------
// ocr

const SENTENCE: &str = "The quick brown fox jumps over the lazy dog";

fn image_input(png: Vec<u8>) -> Value {
    Value::Object(vec![("image".into(), Value::Bytes(png))])
}

#[test]
fn ocr_reads_a_rendered_sentence_word_for_word() {
    let png = text_png(SENTENCE, 48.0, Paper::White).unwrap_or_else(|e| panic!("{e}"));
    let out = json_of(
        "import ocr, { recognize } from '@nodetool-ai/sandbox-ocr';\n\
         const result = await recognize(inputs.image);\n\
         return { ...result, same: ocr.recognize === recognize };",
        image_input(png),
    );
    assert_eq!(out["same"], true);
    assert_eq!(out["text"].as_str().map(str::trim), Some(SENTENCE), "{out}");
    let words: Vec<&str> = out["words"]
        .as_array()
        .map(|w| w.iter().filter_map(|w| w["text"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(words, SENTENCE.split(' ').collect::<Vec<_>>(), "{out}");
    let confidence = out["confidence"].as_f64().unwrap_or_default();
    assert!(confidence > 80.0, "{out}");
    // Boxes run left to right on one line, inside the image.
    let boxes = out["words"].as_array().cloned().unwrap_or_default();
    let mut right = 0.0;
    for word in &boxes {
        let bbox = &word["bbox"];
        let (x, width, height) = (
            bbox["x"].as_f64().unwrap_or(-1.0),
            bbox["width"].as_f64().unwrap_or(-1.0),
            bbox["height"].as_f64().unwrap_or(-1.0),
        );
        assert!(x >= right && width > 0.0 && height > 10.0, "{word}");
        assert!(
            word["confidence"].as_f64().unwrap_or_default() > 50.0,
            "{word}"
        );
        right = x + width;
    }
}

#[test]
fn ocr_reads_ink_on_a_transparent_page_and_honours_the_language() {
    let png = text_png("Hello from the sandbox", 40.0, Paper::Transparent)
        .unwrap_or_else(|e| panic!("{e}"));
    let out = json_of(
        "import { recognize } from '@nodetool-ai/sandbox-ocr'; return (await recognize(inputs.image, { language: 'eng' })).words.map((w) => w.text);",
        image_input(png),
    );
    assert_eq!(out, json!(["Hello", "from", "the", "sandbox"]));
}

#[test]
fn ocr_errors() {
    assert_eq!(
        messages(
            "ocr",
            &[
                "recognize('scan.png')",
                "recognize(new Uint8Array([1, 2, 3]))",
                "recognize(new Uint8Array(8), { language: 'en' })",
                "recognize(new Uint8Array(8), { language: 'eng+../x' })",
                "recognize(new Uint8Array(10 * 1024 * 1024 + 1))",
            ]
        ),
        [
            "ocr.recognize: image must be a Uint8Array (e.g. from workspace.readBytes or response.bytes())",
            "ocr.recognize: the image could not be decoded (it is not a PNG, JPEG, GIF, BMP, TIFF, WebP or PNM image)",
            "ocr.recognize: \"en\" is not a Tesseract language code (e.g. \"eng\", \"eng+deu\")",
            "ocr.recognize: \"eng+../x\" is not a Tesseract language code (e.g. \"eng\", \"eng+deu\")",
            "ocr.recognize: input exceeds the 10485760 byte limit",
        ]
    );
}
