//! `tokens` against js-tiktoken (the reference's library, 1.0.21 in `conformance/`), id for id:
//! 1,000 generated texts (ASCII prose, accented and non-Latin scripts, emoji sequences,
//! whitespace runs, code, long words, numbers, contractions, special-token spellings) through
//! every encoding both have, compared for the ids `encode` gives and the count `count` gives,
//! and decoded back to the text.
//!
//! js-tiktoken runs under `node` from `conformance/node_modules` (`npm ci` there; `.ci/run`
//! does it). On a machine without them the test says what is missing and passes, unless `CI` is
//! set, where it fails.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use nodetool_host_modules::implementation;
use nodetool_protocol::value::Value;

const ENCODINGS: [&str; 4] = ["cl100k_base", "p50k_base", "r50k_base", "o200k_base"];
const TEXTS: usize = 1000;

fn conformance() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../conformance"))
}

/// Whether node and js-tiktoken are here; without them, a note (and a failure under CI).
fn have_js_tiktoken() -> bool {
    let node = Command::new("node")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    let lib = conformance()
        .join("node_modules/js-tiktoken/package.json")
        .is_file();
    if node && lib {
        return true;
    }
    let note = if node {
        "js-tiktoken is not installed in conformance/ (npm ci --ignore-scripts --prefix conformance)"
    } else {
        "node is not installed (Debian: nodejs npm)"
    };
    assert!(std::env::var_os("CI").is_none(), "{note}");
    eprintln!("skipped: {note}");
    false
}

/// A small deterministic generator (64-bit LCG), so a failure names a text that stays put.
struct Gen(u64);

impl Gen {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
}

const WORDS: &[&str] = &[
    "the",
    "quick",
    "brown",
    "fox",
    "jumps",
    "over",
    "lazy",
    "dog",
    "token",
    "model",
    "prompt",
    "Hello",
    "WORLD",
    "it's",
    "they'LL",
    "we've",
    "I'm",
    "don't",
    "She'd",
    "naïve",
    "café",
    "résumé",
    "über",
    "Straße",
    "encyclopedia",
    "antidisestablishmentarianism",
    "GPT-4o",
    "e-mail",
    "U.S.A.",
    "3.14159",
    "1,000,000",
    "2026-12-01",
    "#hashtag",
    "@mention",
    "https://example.com/a?b=c&d=e",
    "C:\\path\\to\\file.txt",
    "...",
    "!!!",
    "?!",
    "—",
    "«quote»",
];

const SCRIPTS: &[&str] = &[
    "日本語のテキストです。",
    "中文分词测试，包括标点符号。",
    "한국어 문장입니다.",
    "Привет, как дела? Всё хорошо!",
    "Γειά σου Κόσμε",
    "مرحبا بالعالم، هذا نص عربي",
    "שלום עולם",
    "नमस्ते दुनिया, यह हिंदी है।",
    "ภาษาไทยไม่มีช่องว่างระหว่างคำ",
    "Tiếng Việt có dấu: ắ ằ ẳ ẵ ặ",
    "e\u{301}le\u{300}ve combining marks",
    "ﬁ ligature and ＦＵＬＬＷＩＤＴＨ text",
    "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 math alphanumerics 𝟙𝟚𝟛",
];

const EMOJI: &[&str] = &[
    "🎉",
    "👍🏽",
    "👨‍👩‍👧‍👦",
    "🏳️‍🌈",
    "🇩🇪🇯🇵",
    "❤️",
    "🤖",
    "🧑🏿‍💻",
    "☕",
    "😀😃😄😁",
    "🫠",
    "1️⃣",
];

const SPACES: &[&str] = &[
    " ", "  ", "    ", "\t", "\t\t", "\n", "\n\n", "\r\n", "\r\n\r\n", " \n ", "\u{a0}",
    "\u{3000}", "\u{2028}", "\u{200b}", " \t \n",
];

const CODE: &[&str] = &[
    "fn main() {\n    println!(\"{}\", 42);\n}\n",
    "def f(x):\n\treturn x ** 2  # square\n",
    "const xs = [1, 2, 3].map((x) => x * 2);",
    "SELECT id, name FROM users WHERE age >= 18 ORDER BY name;",
    "<div class=\"a\"><span>&amp; &lt;tag&gt;</span></div>",
    "{\"key\": [true, false, null, 1.5e-10]}",
    "if (a && b || !c) { x += 1; } else { x -= 1; }",
    "    indented\n        more\n            most",
    "#include <stdio.h>\nint main(void){return 0;}",
    "$ cargo test --offline -p nodetool-host-modules -- --nocapture",
];

const SPECIALS: &[&str] = &[
    "<|endoftext|>",
    "<|fim_prefix|>",
    "<|fim_middle|>",
    "<|fim_suffix|>",
    "<|endofprompt|>",
];

/// Text `i`: mostly mixtures, every tenth of one kind alone, a few long ones.
fn text(g: &mut Gen, i: usize) -> String {
    let mut out = String::new();
    match i % 10 {
        // A long word of one letter, or of random letters (the BPE merge's worst case).
        0 => {
            // Short enough for js-tiktoken, whose merge is quadratic in a piece's length (one
            // piece of 3,000 CJK characters takes it 14 s); the long-input behaviour of ours is
            // the unit tests' and the bench's.
            let n = 50 + g.below(if i.is_multiple_of(100) { 400 } else { 150 });
            if g.below(2) == 0 {
                let c = g.pick(&["a", "z", "é", "日", "x"]);
                out.push_str(&c.repeat(n));
            } else {
                for _ in 0..n {
                    out.push(char::from(b'a' + g.below(26) as u8));
                }
            }
        }
        // Whitespace runs, long and mixed.
        1 => {
            for _ in 0..1 + g.below(6) {
                let s = g.pick(SPACES);
                out.push_str(&s.repeat(1 + g.below(if i % 50 == 1 { 500 } else { 12 })));
                if g.below(2) == 0 {
                    out.push_str(g.pick(WORDS));
                }
            }
        }
        // Code.
        2 => {
            for _ in 0..1 + g.below(3) {
                out.push_str(g.pick(CODE));
            }
        }
        // Emoji.
        3 => {
            for _ in 0..1 + g.below(10) {
                out.push_str(g.pick(EMOJI));
                if g.below(3) == 0 {
                    out.push(' ');
                }
            }
        }
        // Numbers and punctuation.
        4 => {
            for _ in 0..1 + g.below(20) {
                let digits = g.next().to_string();
                let len = (1 + g.below(9)).min(digits.len());
                out.push_str(&digits[..len]);
                out.push_str(g.pick(&[" ", ".", ",", "-", "/", ":", "%", "$", "", "(", ")"]));
            }
        }
        // Mixtures of everything, special-token spellings among them.
        _ => {
            for _ in 0..1 + g.below(40) {
                match g.below(12) {
                    0 => out.push_str(g.pick(SCRIPTS)),
                    1 => out.push_str(g.pick(EMOJI)),
                    2 => out.push_str(g.pick(SPACES)),
                    3 => out.push_str(g.pick(CODE)),
                    4 if g.below(4) == 0 => out.push_str(g.pick(SPECIALS)),
                    _ => {
                        out.push_str(g.pick(WORDS));
                        out.push(' ');
                    }
                }
            }
        }
    }
    out
}

fn call(export: &str, args: &[Value]) -> Value {
    let f = implementation("tokens", export).unwrap_or_else(|| panic!("tokens.{export}"));
    f(args).unwrap_or_else(|e| panic!("tokens.{export}: {e}"))
}

fn ids_of(v: &Value) -> Vec<u64> {
    match v {
        Value::Array(items) => items
            .iter()
            .map(|i| match i {
                Value::Number(n) => *n as u64,
                other => panic!("{other:?}"),
            })
            .collect(),
        other => panic!("{other:?}"),
    }
}

#[test]
fn ids_and_counts_match_js_tiktoken_on_1000_texts() {
    if !have_js_tiktoken() {
        return;
    }
    let mut g = Gen(0x7031_6b65_6e73);
    let texts: Vec<String> = (0..TEXTS).map(|i| text(&mut g, i)).collect();
    let input = serde_json::json!({ "encodings": ENCODINGS, "texts": texts });
    let mut child = Command::new("node")
        .arg(conformance().join("tokens.mjs"))
        .current_dir(conformance())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("node: {e}"));
    let body = input.to_string();
    let writer = child
        .stdin
        .take()
        .map(|mut stdin| std::thread::spawn(move || stdin.write_all(body.as_bytes())));
    let out = child
        .wait_with_output()
        .unwrap_or_else(|e| panic!("node: {e}"));
    if let Some(writer) = writer {
        let _ = writer.join();
    }
    assert!(
        out.status.success(),
        "tokens.mjs failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let answer: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("tokens.mjs output: {e}"));
    assert_eq!(answer["version"], "1.0.21", "the pinned js-tiktoken");
    let mut compared = 0;
    for encoding in ENCODINGS {
        let theirs = answer["ids"][encoding]
            .as_array()
            .unwrap_or_else(|| panic!("no ids for {encoding}"));
        assert_eq!(theirs.len(), TEXTS);
        for (i, text) in texts.iter().enumerate() {
            let expected: Vec<u64> = theirs[i]
                .as_array()
                .unwrap_or_else(|| panic!("{encoding} text {i}"))
                .iter()
                .map(|n| n.as_u64().unwrap_or(u64::MAX))
                .collect();
            let args = [Value::String(text.clone()), Value::String(encoding.into())];
            let ours = call("encode", &args);
            assert_eq!(
                ids_of(&ours),
                expected,
                "{encoding}, text {i}: {:?}",
                text.chars().take(80).collect::<String>()
            );
            assert_eq!(
                call("count", &args),
                Value::Number(expected.len() as f64),
                "{encoding}, text {i}"
            );
            assert_eq!(
                call("decode", &[ours, Value::String(encoding.into())]),
                Value::String(text.clone()),
                "{encoding}, text {i} round trip"
            );
            compared += 1;
        }
    }
    assert_eq!(compared, TEXTS * ENCODINGS.len());
}
