//! The shipped host packs through `nodetool run`, as a new user would call them.

use nodetool_tests::world::{World, shipped_packs};
use serde_json::Value;

fn run(code: &str) -> (Value, i32) {
    let (json, code, _) = run_with(code, &[]);
    (json, code)
}

/// `nodetool run --json <extra>` with the body on stdin: the JSON answer, the exit code and
/// what went to stderr.
fn run_with(code: &str, extra: &[&str]) -> (Value, i32, String) {
    let world = World::with_shipped(shipped_packs());
    let output = assert_cmd::Command::from_std(world.command(env!("CARGO_BIN_EXE_nodetool")))
        .args(["run", "--json"])
        .args(extra)
        .write_stdin(code)
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let text = String::from_utf8_lossy(&output.stdout);
    let json: Value = serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("{e}: {text}"));
    (
        json,
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn every_shipped_host_pack_works_through_nodetool_run() {
    let (out, code) = run("import Papa from '@nodetool-ai/sandbox-csv';\n\
         import { parse as xml } from '@nodetool-ai/sandbox-xml';\n\
         import { write, parse as xlsx } from '@nodetool-ai/sandbox-xlsx';\n\
         import { zip, unzip } from '@nodetool-ai/sandbox-zip';\n\
         import { unified } from '@nodetool-ai/sandbox-diff';\n\
         const rows = await Papa.parse('city,km\\nParis,0\\nLondon,344');\n\
         const book = await xlsx(await write({ Trip: rows }));\n\
         const files = await unzip(await zip({ 'a.txt': 'x' }));\n\
         return { rows, book, xml: await xml('<a n=\"1\">007</a>'), files: Object.keys(files), diff: await unified('a\\n', 'b\\n') };");
    assert_eq!(code, 0, "{out}");
    let result = &out["result"];
    assert_eq!(
        result["rows"],
        serde_json::json!([{ "city": "Paris", "km": "0" }, { "city": "London", "km": "344" }])
    );
    assert_eq!(result["book"]["Trip"][1]["city"], "London");
    assert_eq!(result["xml"]["a"]["#text"], "007");
    assert_eq!(result["files"], serde_json::json!(["a.txt"]));
    assert!(
        result["diff"]
            .as_str()
            .is_some_and(|d| d.contains("-a\n+b")),
        "{out}"
    );
}

#[test]
fn an_uncaught_host_error_names_the_module_and_line() {
    let (out, code) = run(
        "import { parse } from '@nodetool-ai/sandbox-csv';\nconst x = 1;\nawait parse('a', { delimiter: 'ab' });",
    );
    assert_eq!(code, 1);
    assert_eq!(out["error"]["code"], "host-module-error");
    assert_eq!(
        out["error"]["message"],
        "Error: csv.parse: delimiter must be a single character"
    );
    assert_eq!(out["error"]["line"], 3);
}

#[test]
fn the_html_and_ocr_packs_work_through_nodetool_run() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let png = nodetool_tests::render::text_png(
        "Read this line aloud",
        40.0,
        nodetool_tests::render::Paper::White,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(dir.path().join("line.png"), png).unwrap_or_else(|e| panic!("{e}"));
    let workspace = dir.path().to_string_lossy().into_owned();
    let (out, code, stderr) = run_with(
        "import { select, toMarkdown, extractLinks } from '@nodetool-ai/sandbox-html';\n\
         import ocr from '@nodetool-ai/sandbox-ocr';\n\
         const page = '<h1>Notes</h1><ul><li>one<ul><li>two</li></ul></li></ul><p class=\"x\"><a href=\"https://example.com\">site</a></p>';\n\
         const reading = await ocr.recognize(await workspace.readBytes('line.png'));\n\
         return { markdown: await toMarkdown(page), texts: await select(page, 'p.x'), links: await extractLinks(page), words: reading.words.map((w) => w.text) };",
        &["--workspace", &workspace],
    );
    assert_eq!(code, 0, "{out} {stderr}");
    let result = &out["result"];
    assert_eq!(
        result["markdown"],
        "# Notes\n\n- one\n  - two\n\n[site](https://example.com)"
    );
    assert_eq!(result["texts"], serde_json::json!(["site"]));
    assert_eq!(result["links"][0]["type"], "external");
    assert_eq!(
        result["words"],
        serde_json::json!(["Read", "this", "line", "aloud"])
    );
    // Tesseract leaves nothing behind to complain about when the process exits.
    assert!(!stderr.contains("LEAK"), "{stderr}");
}
