//! The document host packs through `nodetool run` (a confined sandbox worker), as a Code node
//! would call them: every pack's exports, each writer's output read back by its reader, and a
//! hostile input answered with the module's error, not a dead worker.

use nodetool_tests::world::{World, shipped_packs};
use serde_json::{Value, json};

/// `nodetool run --json` with the body on stdin: the JSON answer and the exit code.
fn run(code: &str) -> (Value, i32) {
    run_in(code, None)
}

/// The same, with `--workspace DIR` when given.
fn run_in(code: &str, workspace: Option<&std::path::Path>) -> (Value, i32) {
    let world = World::with_shipped(shipped_packs());
    let mut extra: Vec<String> = Vec::new();
    if let Some(dir) = workspace {
        extra.push("--workspace".into());
        extra.push(dir.display().to_string());
    }
    let output = assert_cmd::Command::from_std(world.command(env!("CARGO_BIN_EXE_nodetool")))
        .args(["run", "--json"])
        .args(&extra)
        .write_stdin(code)
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let text = String::from_utf8_lossy(&output.stdout);
    let json: Value = serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("{e}: {text}"));
    (json, output.status.code().unwrap_or(-1))
}

#[test]
fn every_document_pack_works_through_nodetool_run() {
    let (out, code) = run(r#"
import { build as docx } from "@nodetool-ai/sandbox-docx";
import mammoth from "@nodetool-ai/sandbox-mammoth";
import { build as slides } from "@nodetool-ai/sandbox-pptxgen";
import { extractText as deckText, extractSlides } from "@nodetool-ai/sandbox-pptx";
import { build as pdf, merge } from "@nodetool-ai/sandbox-pdflib";
import { extractText, extractPages } from "@nodetool-ai/sandbox-pdf";
import { metadata, tableOfContents, extractText as bookText, extractChapters } from "@nodetool-ai/sandbox-epub";
import { zip } from "@nodetool-ai/sandbox-zip";

const word = await docx({ elements: [
  { type: "heading", text: "Report", level: 1 },
  { type: "paragraph", runs: [{ text: "All ", bold: false }, { text: "green", bold: true }] },
  { type: "list", items: ["one", "two"] },
] });
const deck = await slides({ slides: [{ title: "Hello", notes: "smile", items: [{ type: "text", text: "Body" }] }] });
const page = (text) => ({ items: [{ type: "text", text, x: 72, y: 72 }] });
const one = await pdf({ pages: [page("First page")] });
const both = await merge([one, await pdf({ pages: [page("Second page")] })]);
const book = await zip({
  "mimetype": "application/epub+zip",
  "META-INF/container.xml": '<container><rootfiles><rootfile full-path="book.opf"/></rootfiles></container>',
  "book.opf": '<package><metadata xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>Tiny</dc:title></metadata>'
    + '<manifest><item id="c" href="c.xhtml" media-type="application/xhtml+xml"/><item id="toc" href="toc.ncx" media-type="application/x-dtbncx+xml"/></manifest>'
    + '<spine toc="toc"><itemref idref="c"/></spine></package>',
  "toc.ncx": '<ncx><navMap><navPoint playOrder="1"><navLabel><text>Only</text></navLabel><content src="c.xhtml"/></navPoint></navMap></ncx>',
  "c.xhtml": "<html><body><p>Once upon a time.</p></body></html>",
});
return {
  raw: await mammoth.extractRawText(word),
  html: await mammoth.convertToHtml(word),
  deck: await deckText(deck),
  slides: await extractSlides(deck),
  pdf: await extractText(both),
  pages: (await extractPages(both)).length,
  meta: await metadata(book),
  toc: (await tableOfContents(book)).map((e) => e.title),
  book: await bookText(book),
  chapters: (await extractChapters(book)).map((c) => c.title),
  isBytes: word instanceof Uint8Array && deck instanceof Uint8Array && both instanceof Uint8Array,
};
"#);
    assert_eq!(code, 0, "{out}");
    let r = &out["result"];
    assert_eq!(r["raw"], "Report\n\nAll green\n\none\n\ntwo\n\n");
    assert_eq!(
        r["html"],
        "<h1>Report</h1><p>All <strong>green</strong></p><ul><li>one</li><li>two</li></ul>"
    );
    assert_eq!(r["deck"], "Hello\nBody");
    assert_eq!(r["slides"][0]["notes"], "smile");
    assert_eq!(r["pdf"], "First page\n\nSecond page");
    assert_eq!(r["pages"], 2);
    assert_eq!(r["meta"], json!({ "title": "Tiny" }));
    assert_eq!(r["toc"], json!(["Only"]));
    assert_eq!(r["book"], "Once upon a time.");
    assert_eq!(r["chapters"], json!(["Only"]));
    assert_eq!(r["isBytes"], true);
}

#[test]
fn hostile_documents_are_module_errors_the_body_can_catch() {
    let (out, code) = run(r#"
import { extractText } from "@nodetool-ai/sandbox-pdf";
import { extractRawText } from "@nodetool-ai/sandbox-mammoth";
import { zip } from "@nodetool-ai/sandbox-zip";
const errors = [];
try { await extractText(new Uint8Array([1, 2, 3])); } catch (e) { errors.push(e.message); }
const laughs = '<!DOCTYPE d [<!ENTITY a "aaaa">]><w:document xmlns:w="w"><w:body>&a;</w:body></w:document>';
try { await extractRawText(await zip({ "word/document.xml": laughs })); } catch (e) { errors.push(e.message); }
return errors;
"#);
    assert_eq!(code, 0, "{out}");
    assert_eq!(
        out["result"],
        json!([
            "pdf.extractText: the bytes are not a PDF file (no %PDF- header)",
            "mammoth.extractRawText: part \"word/document.xml\" has a document type declaration; DTDs are refused"
        ])
    );
}

/// Every example of the seven document SKILL.md files runs as written, against a workspace
/// holding the files they name (made by the packs themselves first).
#[test]
fn every_document_skill_example_runs() {
    let workspace = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let (made, code) = run_in(
        r#"
import { build as pdf } from "@nodetool-ai/sandbox-pdflib";
import { build as docx } from "@nodetool-ai/sandbox-docx";
import { build as pptx } from "@nodetool-ai/sandbox-pptxgen";
import { zip } from "@nodetool-ai/sandbox-zip";
const page = (...lines) => ({ items: lines.map((text, i) => ({ type: "text", text, x: 72, y: 72 + i * 18 })) });
await workspace.writeBytes("invoice.pdf", await pdf({ pages: [page("Invoice 42", "Total: 1,234.50")] }));
await workspace.writeBytes("report.pdf", await pdf({ pages: [page("Intro"), page("Summary of the year", "All good")] }));
for (const name of ["cover", "appendix"]) await workspace.writeBytes(`${name}.pdf`, await pdf({ pages: [page(name)] }));
const doc = await docx({ elements: [{ type: "heading", text: "Terms" }, { type: "paragraph", text: "The parties agree." }] });
await workspace.writeBytes("contract.docx", doc);
await workspace.writeBytes("notes.docx", doc);
const deck = await pptx({ slides: [{ title: "Pitch", notes: "Open strong", items: [{ type: "text", text: "Raise $2M" }] }, { items: [{ type: "text", text: "untitled" }] }] });
await workspace.writeBytes("pitch.pptx", deck);
await workspace.writeBytes("talk.pptx", deck);
await workspace.writeBytes("book.epub", await zip({
  "META-INF/container.xml": '<container><rootfiles><rootfile full-path="b.opf"/></rootfiles></container>',
  "b.opf": '<package><metadata xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>Tiny</dc:title><dc:creator>Ann</dc:creator><dc:language>en</dc:language></metadata><manifest><item id="c" href="c.xhtml"/><item id="n" href="toc.ncx" media-type="application/x-dtbncx+xml"/></manifest><spine toc="n"><itemref idref="c"/></spine></package>',
  "toc.ncx": '<ncx><navMap><navPoint playOrder="1"><navLabel><text>One</text></navLabel><content src="c.xhtml"/></navPoint></navMap></ncx>',
  "c.xhtml": "<html><body><p>Once upon a time.</p></body></html>",
}));
return true;
"#,
        Some(workspace.path()),
    );
    assert_eq!((code, &made["result"]), (0, &json!(true)), "{made}");

    let packs = concat!(env!("CARGO_MANIFEST_DIR"), "/../packs/@nodetool-ai");
    let mut results = Vec::new();
    for id in [
        "pdf", "pdflib", "docx", "mammoth", "pptx", "pptxgen", "epub",
    ] {
        let skill = std::fs::read_to_string(format!("{packs}/sandbox-{id}/SKILL.md"))
            .unwrap_or_else(|e| panic!("{id}: {e}"));
        // The first block is the import forms, not a body.
        for block in nodetool_tests::skill::js_blocks(&skill).into_iter().skip(1) {
            let (out, code) = run_in(&block, Some(workspace.path()));
            assert_eq!(code, 0, "sandbox-{id} example failed:\n{block}\n{out}");
            results.push((id, out["result"].clone()));
        }
    }
    let result_of = |id: &str, i: usize| {
        results
            .iter()
            .filter(|(r, _)| *r == id)
            .nth(i)
            .map(|(_, v)| v.clone())
            .unwrap_or_else(|| panic!("no example {i} of {id}"))
    };
    assert_eq!(result_of("pdf", 0)["total"], json!("1,234.50"));
    assert_eq!(
        result_of("pdf", 1),
        json!([{ "page": 2, "firstLine": "Summary of the year" }])
    );
    assert_eq!(
        result_of("mammoth", 0),
        json!({ "paragraphs": 2, "first": "Terms" })
    );
    assert_eq!(
        result_of("mammoth", 1),
        json!("# Terms\n\nThe parties agree.")
    );
    assert_eq!(result_of("pptx", 0), json!(["Raise $2M"]));
    assert_eq!(
        result_of("pptx", 1),
        json!(["1. Pitch — Open strong", "2. (untitled)"])
    );
    assert_eq!(result_of("epub", 0), json!("Tiny by Ann (en)"));
    assert_eq!(result_of("epub", 1), json!("One"));
    assert_eq!(result_of("epub", 2), json!({ "words": 4 }));
    assert_eq!(
        result_of("epub", 3),
        json!([{ "title": "One", "chars": 17 }])
    );
    // One example per export: 2 + 2 + 1 + 2 + 2 + 1 + 4.
    assert_eq!(results.len(), 14, "{results:?}");
}
