//! `cargo xtask bench hostile`: the host-module inputs that were quadratic or unbounded inside
//! the input caps, each called once through `nodetool_host_modules::implementation` (no guest),
//! with its wall time and the shape of its answer. `BENCH_ONLY=diff,xml` limits the rows.
//!
//! The figures belong in notes with this command; they are never asserted (the unit tests check
//! the answers on the same inputs). `BENCH_BEFORE=1` also times the library paths the modules
//! took before their limits (similar with no deadline, quick-xml's own repeat check, scraper's
//! parse with no attribute bound) on the same inputs.

use std::time::{Duration, Instant};

use nodetool_host_modules::implementation;
use nodetool_protocol::value::Value;

fn text(s: String) -> Value {
    Value::String(s)
}

/// One element carrying `n` distinct attributes.
fn many_attributes(open: &str, close: &str, n: usize) -> String {
    let mut s = format!("<{open}");
    for i in 0..n {
        s.push_str(&format!(" a{i}=\"{i}\""));
    }
    s.push_str(&format!(">x</{close}>"));
    s
}

/// `n` lines, all distinct, none shared with `lines(n, other_tag)`.
fn lines(n: usize, tag: &str) -> String {
    (0..n).map(|i| format!("{tag} line {i}\n")).collect()
}

/// A `side`×`side` grey noise image, PNG.
fn noise_png(side: u32) -> Vec<u8> {
    let mut state: u32 = 0x9e37_79b9;
    let image = image::GrayImage::from_fn(side, side, |_, _| {
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        image::Luma([(state >> 24) as u8])
    });
    let mut out = std::io::Cursor::new(Vec::new());
    image
        .write_to(&mut out, image::ImageFormat::Png)
        .unwrap_or_else(|e| panic!("encode: {e}"));
    out.into_inner()
}

fn describe(v: &Result<Value, nodetool_host_modules::HostError>) -> String {
    match v {
        Ok(Value::String(s)) => format!("string of {} bytes", s.len()),
        Ok(Value::Array(a)) => format!("array of {}", a.len()),
        Ok(Value::Object(o)) => format!("object of {} members", o.len()),
        Ok(other) => format!("{other:?}").chars().take(60).collect(),
        Err(e) => format!(
            "error[{}]: {}",
            e.code(),
            e.message().chars().take(100).collect::<String>()
        ),
    }
}

fn main() {
    let only: Option<Vec<String>> = std::env::var("BENCH_ONLY")
        .ok()
        .map(|s| s.split(',').map(str::to_string).collect());
    let wanted = |id: &str| only.as_ref().is_none_or(|o| o.iter().any(|x| x == id));
    let call = |id: &'static str, export: &'static str, what: &'static str, args: Vec<Value>| {
        if !wanted(id) {
            return;
        }
        let Some(f) = implementation(id, export) else {
            panic!("{id}.{export} is not implemented");
        };
        let t = Instant::now();
        let out = f(&args);
        let elapsed: Duration = t.elapsed();
        println!(
            "{id}.{export:<10} {what:<48} {:>9.3} s  {}",
            elapsed.as_secs_f64(),
            describe(&out)
        );
    };
    let long = "h".repeat(3000);
    call(
        "csv",
        "parse",
        "1,500 copies of one 3,000-byte header",
        vec![text(format!(
            "{}\n{}",
            vec![long.as_str(); 1500].join(","),
            vec!["1"; 1500].join(",")
        ))],
    );
    let mut occupied = vec!["c".to_string()];
    occupied.extend((1..=20_000).map(|i| format!("c_{i}")));
    occupied.extend((0..20_000).map(|_| "c".to_string()));
    call(
        "csv",
        "parse",
        "c, c_1..c_20000, then 20,000 more c",
        vec![text(occupied.join(","))],
    );
    call(
        "xml",
        "parse",
        "one element, 40,000 attributes",
        vec![text(many_attributes("r", "r", 40_000))],
    );
    let html = many_attributes("div", "div", 40_000);
    for export in ["select", "toText", "toMarkdown"] {
        let mut args = vec![text(html.clone())];
        if export == "select" {
            args.push(text("div".into()));
        }
        call("html", export, "one element, 40,000 attributes", args);
    }
    call(
        "diff",
        "unified",
        "two fully different 40,000-line texts",
        vec![text(lines(40_000, "old")), text(lines(40_000, "new"))],
    );
    call(
        "diff",
        "unified",
        "two fully different 5 MiB texts (cap)",
        vec![text(lines(280_000, "old")), text(lines(280_000, "new"))],
    );
    let page: String = (0..5_000).map(|_| many_attributes("p", "p", 25)).collect();
    call(
        "html",
        "toText",
        "5,000 elements of 25 attributes each",
        vec![text(page)],
    );
    call(
        "html",
        "toText",
        "one element, 8,000 attributes (under the bound)",
        vec![text(many_attributes("div", "div", 8_000))],
    );
    let shared = |tag: &str| format!("same\n{}", lines(40_000, tag));
    call(
        "diff",
        "unified",
        "40,000-line texts sharing one line (to the budget)",
        vec![text(shared("old")), text(shared("new"))],
    );
    if std::env::var_os("BENCH_BEFORE").is_some() {
        before();
    }
    call(
        "ocr",
        "recognize",
        "2000x2000 grey noise (PNG)",
        vec![Value::Bytes(noise_png(2000))],
    );
}

/// The library paths the modules took before their limits, on the same inputs.
fn before() {
    let time = |what: &str, f: &dyn Fn() -> usize| {
        let t = Instant::now();
        let n = f();
        println!(
            "before: {what:<58} {:>9.3} s  ({n})",
            t.elapsed().as_secs_f64()
        );
    };
    let xml = many_attributes("r", "r", 40_000);
    time(
        "quick-xml attributes with its repeat check, 40,000",
        &|| {
            let mut reader = quick_xml::Reader::from_str(&xml);
            let mut n = 0;
            while let Ok(event) = reader.read_event() {
                match event {
                    quick_xml::events::Event::Start(start) => {
                        n += start.attributes().filter(Result::is_ok).count();
                    }
                    quick_xml::events::Event::Eof => break,
                    _ => {}
                }
            }
            n
        },
    );
    let html = many_attributes("div", "div", 40_000);
    time("scraper parse, one element with 40,000 attributes", &|| {
        scraper::Html::parse_document(&html).tree.values().count()
    });
    let (old, new) = (lines(40_000, "old"), lines(40_000, "new"));
    time(
        "similar unified diff, no deadline, 40,000 different lines",
        &|| {
            similar::TextDiff::from_lines(old.as_str(), new.as_str())
                .unified_diff()
                .to_string()
                .len()
        },
    );
}
