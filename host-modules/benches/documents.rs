//! `cargo xtask bench documents`: text out of a 50-page PDF (`pdf.extractText`) and a 50-page
//! .docx (`mammoth.extractRawText`), beside the reference's libraries (pdf-parse, mammoth) on the
//! same files.
//!
//! Both files are made here, deterministically (`pdflib.build`, `docx.build`: 50 pages of 44
//! lines; 50 sections of a heading, 20 paragraphs with bold and italic runs, a 6-row table and a
//! page break), and written to `target/bench-documents/`. With `node` on PATH and
//! `host-modules/benches/documents-peer/node_modules` installed (`npm ci --ignore-scripts` there),
//! the peer script runs on the same files and the ratios are printed. Figures are the median of
//! `BENCH_RUNS` (15) calls after 3 warm-ups, of the host implementations called directly (the
//! reference's figures are its library calls, likewise without the sandbox crossing). Each
//! reference line also says whether its text equals ours, character for character.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use nodetool_host_modules::implementation;
use nodetool_protocol::value::Value;

const PAGES: usize = 50;

fn s(v: &str) -> Value {
    Value::String(v.into())
}

fn obj(members: Vec<(&str, Value)>) -> Value {
    Value::Object(
        members
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
    )
}

fn call(id: &str, export: &str, args: &[Value]) -> Value {
    let f = implementation(id, export).unwrap_or_else(|| panic!("{id}.{export}"));
    f(args).unwrap_or_else(|e| panic!("{e}"))
}

/// Sentence `i` of a deterministic text.
fn sentence(i: usize) -> String {
    const WORDS: [&str; 16] = [
        "revenue",
        "quarter",
        "growth",
        "the",
        "market",
        "of",
        "and",
        "customers",
        "report",
        "increased",
        "regional",
        "sales",
        "in",
        "product",
        "team",
        "forecast",
    ];
    let mut out = String::new();
    let mut seed = i as u64 * 2_654_435_761 + 1;
    for w in 0..12 {
        seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        if w > 0 {
            out.push(' ');
        }
        out.push_str(WORDS[(seed >> 33) as usize % WORDS.len()]);
    }
    out.push_str(&format!(" {i}."));
    out
}

fn pdf_input() -> Vec<u8> {
    let pages = (0..PAGES)
        .map(|p| {
            let items = (0..44)
                .map(|l| {
                    obj(vec![
                        ("type", s("text")),
                        ("text", s(&sentence(p * 44 + l))),
                        ("x", Value::Number(56.0)),
                        ("y", Value::Number(48.0 + l as f64 * 16.0)),
                        ("size", Value::Number(10.0)),
                    ])
                })
                .collect();
            obj(vec![("items", Value::Array(items))])
        })
        .collect();
    match call(
        "pdflib",
        "build",
        &[obj(vec![("pages", Value::Array(pages))])],
    ) {
        Value::Bytes(b) => b,
        other => panic!("{other:?}"),
    }
}

fn docx_input() -> Vec<u8> {
    let mut elements = Vec::new();
    for p in 0..PAGES {
        elements.push(obj(vec![
            ("type", s("heading")),
            ("text", s(&format!("Section {}", p + 1))),
            ("level", Value::Number(2.0)),
        ]));
        for k in 0..20 {
            let i = p * 20 + k;
            elements.push(obj(vec![
                ("type", s("paragraph")),
                (
                    "runs",
                    Value::Array(vec![
                        s(&sentence(i)),
                        obj(vec![
                            ("text", s(" Key point.")),
                            ("bold", Value::Bool(true)),
                        ]),
                        obj(vec![
                            ("text", s(&format!(" {}", sentence(i + 7)))),
                            ("italic", Value::Bool(true)),
                        ]),
                    ]),
                ),
            ]));
        }
        let rows = (0..6)
            .map(|r| {
                Value::Array(vec![
                    s(&format!("row {r}")),
                    Value::Number(r as f64 * 1.5),
                    s("ok"),
                ])
            })
            .collect();
        elements.push(obj(vec![
            ("type", s("table")),
            ("rows", Value::Array(rows)),
        ]));
        elements.push(obj(vec![("type", s("pageBreak"))]));
    }
    match call(
        "docx",
        "build",
        &[obj(vec![("elements", Value::Array(elements))])],
    ) {
        Value::Bytes(b) => b,
        other => panic!("{other:?}"),
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn time(runs: usize, f: impl Fn() -> usize) -> (Duration, usize) {
    let mut chars = 0;
    for _ in 0..3 {
        chars = f();
    }
    let samples = (0..runs)
        .map(|_| {
            let t = Instant::now();
            chars = f();
            t.elapsed()
        })
        .collect();
    (median(samples), chars)
}

fn main() {
    let runs: usize = std::env::var("BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(15);
    let dir = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../target/bench-documents"
    ));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let (pdf, docx) = (pdf_input(), docx_input());
    let (pdf_path, docx_path) = (dir.join("report-50.pdf"), dir.join("report-50.docx"));
    std::fs::write(&pdf_path, &pdf).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(&docx_path, &docx).unwrap_or_else(|e| panic!("{e}"));

    let text_of = |v: Value| match v {
        Value::String(t) => t,
        _ => String::new(),
    };
    let text_len = |v: Value| text_of(v).len();
    // Ours beside the inputs, for the peer script to compare its text with.
    let ours_pdf = text_of(call("pdf", "extractText", &[Value::Bytes(pdf.clone())]));
    let ours_docx = text_of(call(
        "mammoth",
        "extractRawText",
        &[Value::Bytes(docx.clone())],
    ));
    std::fs::write(dir.join("report-50.pdf.ours.txt"), ours_pdf).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(dir.join("report-50.docx.ours.txt"), ours_docx)
        .unwrap_or_else(|e| panic!("{e}"));
    let pdf_value = Value::Bytes(pdf.clone());
    let (pdf_ms, pdf_chars) = time(runs, || {
        text_len(call("pdf", "extractText", std::slice::from_ref(&pdf_value)))
    });
    let docx_value = Value::Bytes(docx.clone());
    let (docx_ms, docx_chars) = time(runs, || {
        text_len(call(
            "mammoth",
            "extractRawText",
            std::slice::from_ref(&docx_value),
        ))
    });
    println!(
        "inputs: {} ({} bytes, {PAGES} pages), {} ({} bytes, {PAGES} sections)",
        pdf_path.display(),
        pdf.len(),
        docx_path.display(),
        docx.len()
    );
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "pdf.extractText          {:>9.2} ms  ({pdf_chars} chars)",
        ms(pdf_ms)
    );
    println!(
        "mammoth.extractRawText   {:>9.2} ms  ({docx_chars} chars)",
        ms(docx_ms)
    );

    let peer = Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/benches/documents-peer"
    ));
    if !peer.join("node_modules").is_dir() {
        println!(
            "reference: not run (npm ci --ignore-scripts --prefix {} first)",
            peer.display()
        );
        return;
    }
    let out = Command::new("node")
        .arg(peer.join("documents.mjs"))
        .arg(&pdf_path)
        .arg(&docx_path)
        .arg(runs.to_string())
        .output();
    let Ok(out) = out
        .as_ref()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
    else {
        println!("reference: node could not be run");
        return;
    };
    // Lines of `<name> <median ms> <chars>`.
    let field = |lib: &str, i: usize| {
        out.lines()
            .find_map(|l| l.strip_prefix(lib).and_then(|r| r.strip_prefix(' ')))
            .and_then(|r| r.split(' ').nth(i).map(str::to_string))
            .unwrap_or_default()
    };
    let peer_ms = |lib: &str| field(lib, 0).parse::<f64>().unwrap_or(f64::NAN);
    let (pdf_parse, mammoth) = (peer_ms("pdf-parse"), peer_ms("mammoth"));
    println!(
        "pdf-parse getText        {pdf_parse:>9.2} ms  ({} chars, same text as ours: {})   ours is {:.1}x faster",
        field("pdf-parse", 1),
        field("pdf-parse", 2),
        pdf_parse / ms(pdf_ms)
    );
    println!(
        "mammoth extractRawText   {mammoth:>9.2} ms  ({} chars, same text as ours: {})   ours is {:.1}x faster",
        field("mammoth", 1),
        field("mammoth", 2),
        mammoth / ms(docx_ms)
    );
    println!("reference runtime: node {}", field("node", 0));
}
