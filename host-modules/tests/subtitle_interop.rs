//! `subtitle` against the `subtitle` npm library (4.2.2, the reference's, in
//! `conformance/node_modules`, driven by `conformance/subtitle.mjs`): generated SRT and WebVTT
//! files and edge cases (CRLF, BOM, missing indices, WebVTT headers, NOTE blocks, cue settings,
//! hours past 99, malformed timing lines) parse to the same cues or fail at the same row, and
//! generated cue lists write the same text.
//!
//! Without node or the library, the test says what is missing and passes, unless `CI` is set.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use nodetool_host_modules::implementation;
use nodetool_protocol::value::Value;
use serde_json::{Value as Json, json};

mod common;
use common::{Must, Rng};

const LINES: &[&str] = &[
    "Hello there.",
    "- Who's that?",
    "<i>whispers</i>",
    "Ünïcödé 東京 🎉",
    "42",
    "NOTE this is not a note inside SRT",
    "a --> b",
    "  indented  ",
    "trailing\r",
];

fn stamp(rng: &mut Rng, vtt: bool, big_hours: bool) -> (String, u64) {
    let h = if big_hours {
        99 + rng.below(2000)
    } else {
        rng.below(3)
    };
    let (m, s, f) = (rng.below(60), rng.below(60), rng.below(1000));
    let sep = if vtt { '.' } else { ',' };
    let ms = ((h * 60 + m) * 60 + s) * 1000 + f;
    if vtt && h == 0 && rng.chance(40) {
        (format!("{m:02}:{s:02}{sep}{f:03}"), ms)
    } else {
        (format!("{h:02}:{m:02}:{s:02}{sep}{f:03}"), ms)
    }
}

/// One generated caption file.
fn file(rng: &mut Rng) -> String {
    let vtt = rng.chance(40);
    let mut out = String::new();
    if rng.chance(15) {
        out.push('\u{feff}');
    }
    if rng.chance(10) {
        out.push_str("\n\n");
    }
    if vtt {
        out.push_str("WEBVTT");
        if rng.chance(50) {
            out.push_str(" - Title\nKind: captions\nLanguage: en");
        }
        out.push_str("\n\n");
    }
    let n = rng.below(8);
    for i in 0..n {
        if vtt && rng.chance(15) {
            out.push_str("NOTE a comment\nover two lines\n\n");
        }
        if !rng.chance(20) {
            out.push_str(&format!("{}\n", i + 1));
        } else if vtt && rng.chance(50) {
            out.push_str(&format!("cue-{i}\n"));
        }
        let big = rng.chance(5);
        let (a, _) = stamp(rng, vtt, big);
        let (b, _) = stamp(rng, vtt, big);
        out.push_str(&format!("{a} --> {b}"));
        if vtt && rng.chance(30) {
            out.push_str(" align:start position:10%");
        }
        out.push('\n');
        for _ in 0..rng.below(4) {
            out.push_str(LINES[rng.below(LINES.len() as u64) as usize]);
            out.push('\n');
        }
        if rng.chance(3) {
            // A malformed timing line where one is due.
            out.push_str("\n7\n00:00:01,000 -> 00:00:02,000\n");
        }
        out.push_str(if rng.chance(20) { "\n\n\n" } else { "\n" });
    }
    if rng.chance(50) {
        out.replace('\n', "\r\n")
    } else {
        out
    }
}

fn cue_list(rng: &mut Rng) -> Json {
    let n = rng.below(6);
    let cues: Vec<Json> = (0..n)
        .map(|i| {
            let start = rng.below(86_000_000);
            let mut cue = json!({"start": start, "end": start + rng.below(400_000), "text": LINES[i as usize % LINES.len()]});
            if rng.chance(30) {
                cue["settings"] = json!("line:0 align:end");
            }
            cue
        })
        .collect();
    Json::Array(cues)
}

fn call(export: &str, args: Vec<Value>) -> Result<Json, String> {
    let f = implementation("subtitle", export).must("implemented");
    f(&args).map(|v| v.to_json()).map_err(|e| e.into_message())
}

fn conformance() -> Option<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../conformance");
    let node = Command::new("node")
        .arg("--version")
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    let ok = node && dir.join("node_modules/subtitle/package.json").is_file();
    if !ok {
        let note = "node with conformance/node_modules/subtitle is not installed (npm ci --ignore-scripts --prefix conformance)";
        assert!(std::env::var_os("CI").is_none(), "{note}");
        eprintln!("skipped: {note}");
    }
    ok.then_some(dir)
}

fn node(dir: &std::path::Path, calls: &Json) -> Vec<Json> {
    let mut child = Command::new("node")
        .arg(dir.join("subtitle.mjs"))
        .env("TZ", "UTC")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .must("node");
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(calls.to_string().as_bytes()).must("stdin");
    }
    let out = child.wait_with_output().must("node");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).must("json")
}

/// The row of a "expected timestamp at row N" message.
fn row_of(message: &str) -> Option<&str> {
    let rest = message.split("at row ").nth(1)?;
    rest.split(',').next()
}

#[test]
fn the_subtitle_library_agrees() {
    let Some(dir) = conformance() else {
        return;
    };
    let mut rng = Rng(0x5ab_717e);
    let mut texts: Vec<String> = (0..600).map(|_| file(&mut rng)).collect();
    texts.extend(
        [
            "",
            "\u{feff}",
            "\n\n\n",
            "WEBVTT",
            "WEBVTT\n\n",
            "1\n00:00:01,000 --> 00:00:02,000\n",
            "00:00:01,000 --> 00:00:02,000\nno index\n\n00:00:03,000 --> 00:00:04,000\nstill none",
            "1\n00:00:01,000 --> 00:00:02,000\ntext\n2\n00:00:03,000 --> 00:00:04,000\nnext",
            "1\n1:2:3,4 --> 1:2:3,45\nshort fields",
            "1\n00:00:01 --> 00:00:02\nno fraction",
            "1\n00:00:01,0000 --> 00:00:02,000\nfour digits",
            "1\n00:00:01,000 --> 00:00:02,000 \nspace then nothing",
            "1\n00:00:01,000  --> 00:00:02,000\ntwo spaces",
            "1\n123456789012:00:00,000 --> 123456789012:00:00,001\nhuge hours",
            "WEBVTT\n\nNOTE\n\n00:01.000 --> 00:02.000\nx\n\nNOTE tail",
            "garbage first line\n00:00:01,000 --> 00:00:02,000\n",
            "1\n00:00:01,000 --> 00:00:02,000\na\r\rb\n",
            "1\r\n00:00:01,000 --> 00:00:02,000 settings\rwith cr\r\nx",
            "\u{feff}\u{feff}1\n00:00:01,000 --> 00:00:02,000\nbom twice",
            "  \n\t\n1\n00:00:01,000 --> 00:00:02,000\nleading blanks",
        ]
        .map(String::from),
    );
    let mut lists: Vec<(Json, &str)> = Vec::new();
    for i in 0..300 {
        lists.push((
            cue_list(&mut rng),
            if i % 2 == 0 { "SRT" } else { "WebVTT" },
        ));
    }
    let mut calls: Vec<Json> = texts
        .iter()
        .map(|t| json!({"op": "parse", "text": t}))
        .collect();
    calls.extend(
        lists
            .iter()
            .map(|(cues, format)| json!({"op": "stringify", "cues": cues, "format": format})),
    );
    let answers = node(&dir, &Json::Array(calls));
    let (mut same, mut both_failed) = (0usize, 0usize);
    for (text, answer) in texts.iter().zip(&answers) {
        let ours = call("parse", vec![Value::String(text.clone())]);
        match (&ours, answer.get("value"), answer.get("error")) {
            (Ok(v), Some(theirs), _) => {
                // Through `Value`, so both sides' numbers are doubles written alike.
                let theirs = Value::from_json(theirs.clone()).to_json();
                assert_eq!(v, &theirs, "{text:?}");
                same += 1;
            }
            (Err(e), None, Some(theirs)) => {
                let theirs = theirs.as_str().unwrap_or("");
                assert_eq!(row_of(e), row_of(theirs), "{text:?}: {e} / {theirs}");
                assert!(
                    e.starts_with("subtitle.parse: expected timestamp at row"),
                    "{e}"
                );
                both_failed += 1;
            }
            _ => panic!("{text:?}: ours {ours:?}, theirs {answer}"),
        }
    }
    for ((cues, format), answer) in lists.iter().zip(&answers[texts.len()..]) {
        let options = Value::Object(vec![("format".into(), Value::String((*format).into()))]);
        let ours = call("stringify", vec![Value::from_json(cues.clone()), options]).must("written");
        assert_eq!(Some(&ours), answer.get("value"), "{cues}");
    }
    eprintln!(
        "subtitle vs the subtitle library: {} parses ({same} equal cues, {both_failed} failing at the same row), {} stringify calls identical",
        texts.len(),
        lists.len()
    );
    assert!(both_failed > 5 && same > 400);
}

#[test]
fn hostile_inputs_hold_their_caps() {
    // 100,001 one-character cues fit in the text cap but not the cue cap.
    let one = "0:0,0 --> 0:0,0\nx\n\n";
    let text = one.repeat(100_001);
    let err = call("parse", vec![Value::String(text)])
        .err()
        .must("an error");
    assert!(err.contains("more than 100000 cues"), "{err}");
    let cue = json!({"start": 0, "end": 1, "text": "x"});
    let many = Value::from_json(Json::Array(vec![cue; 100_001]));
    assert!(
        call("stringify", vec![many])
            .err()
            .must("an error")
            .contains("100000 cue limit")
    );
    let bad = Value::from_json(json!([{"start": -1, "end": 2}]));
    assert!(
        call("stringify", vec![bad])
            .err()
            .must("an error")
            .contains("cues[0].start")
    );
    let nan = Value::from_json(json!([{"start": "soon", "end": 2}]));
    assert!(call("stringify", vec![nan]).is_err());
    // A 5 MiB line with no line break is one malformed row, answered at once.
    let long = "9".repeat(5 * 1024 * 1024 - 10) + ":00,000";
    let err = call("parse", vec![Value::String(long)])
        .err()
        .must("an error");
    assert!(err.contains("at row 1") && err.len() < 300, "{}", err.len());
    // Hours beyond 24 are written as they are (the library wraps them).
    let late =
        Value::from_json(json!([{"start": 360_000_000u64, "end": 360_000_001u64, "text": "x"}]));
    assert_eq!(
        call("stringify", vec![late]).must("a value"),
        json!("1\n100:00:00,000 --> 100:00:00,001\nx\n")
    );
}
