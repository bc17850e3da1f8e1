//! The data and text packs of issue 23 (`ics`, `subtitle`, `expr` host modules and the `chrono`
//! guest library pack) through `nodetool run` (a confined sandbox worker), as a Code node calls
//! them: every export, results the body can use, and hostile inputs answered with the module's
//! error, not a dead worker.

use nodetool_tests::world::{World, shipped_packs};
use serde_json::{Value, json};

/// `nodetool run --json` with the body on stdin: the JSON answer and the exit code.
fn run(code: &str) -> (Value, i32) {
    run_with(code, &[])
}

/// [`run`] with further flags (`--workspace`, `--secret`, ...).
fn run_with(code: &str, flags: &[&str]) -> (Value, i32) {
    let world = World::with_shipped(shipped_packs());
    let output = assert_cmd::Command::from_std(world.command(env!("CARGO_BIN_EXE_nodetool")))
        .args(["run", "--json"])
        .args(flags)
        .write_stdin(code)
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let text = String::from_utf8_lossy(&output.stdout);
    let json: Value = serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("{e}: {text}"));
    (json, output.status.code().unwrap_or(-1))
}

#[test]
fn ics_subtitle_and_expr_work_through_nodetool_run() {
    let (out, code) = run(r#"
import { createEvent, createEvents } from "@nodetool-ai/sandbox-ics";
import subtitle from "@nodetool-ai/sandbox-subtitle";
import { evaluate } from "@nodetool-ai/sandbox-expr";

const one = await createEvent({
  title: "Review, weekly", start: [2024, 5, 1, 14, 0], duration: { hours: 1 }, uid: "r1", timestamp: 0,
  attendees: [{ name: "Grace", email: "grace@example.com", rsvp: true }],
  alarms: [{ action: "display", description: "soon", trigger: { minutes: 15, before: true } }],
});
const many = await createEvents([{ title: "A", start: [2025, 1, 1] }, { title: "B", start: [2025, 5, 1] }], { calName: "Days" });
const cues = await subtitle.parse("WEBVTT\n\n00:01.000 --> 00:02.500 align:start\nHello\nthere\n\nNOTE skip\n\n2\n00:00:03.000 --> 00:00:04.000\nBye");
const srt = await subtitle.stringify(cues.map((c) => ({ ...c, start: c.start + 500, end: c.end + 500 })));
return {
  one: one.split("\r\n").filter((l) => /^(SUMMARY|DTSTART|DURATION|ATTENDEE|TRIGGER|UID|DTSTAMP)/.test(l)),
  events: many.match(/BEGIN:VEVENT/g).length,
  calName: many.includes("X-WR-CALNAME:Days\r\n"),
  cues,
  srt,
  expr: [
    await evaluate("total > 100 and country in ['FR', 'DE'] ? total * 0.1 : 0", { total: 120, country: "FR" }),
    await evaluate("map(f(x) = x ^ 2, [1, 2, 3])"),
    await evaluate("'n=' || roundTo(PI, 3)"),
  ],
};
"#);
    assert_eq!(code, 0, "{out}");
    let r = &out["result"];
    assert_eq!(
        r["one"],
        json!([
            "UID:r1",
            "SUMMARY:Review\\, weekly",
            "DTSTAMP:19700101T000000Z",
            "DTSTART:20240501T140000Z",
            "ATTENDEE;RSVP=TRUE;CN=\"Grace\":mailto:grace@example.com",
            "DURATION:PT1H",
            "TRIGGER:-PT15M"
        ])
    );
    assert_eq!(r["events"], 2);
    assert_eq!(r["calName"], true);
    assert_eq!(
        r["cues"],
        json!([
            { "start": 1000, "end": 2500, "text": "Hello\nthere" },
            { "start": 3000, "end": 4000, "text": "Bye" }
        ])
    );
    assert_eq!(
        r["srt"],
        "1\n00:00:01,500 --> 00:00:03,000\nHello\nthere\n\n2\n00:00:03,500 --> 00:00:04,500\nBye\n"
    );
    assert_eq!(r["expr"], json!([12, [1, 4, 9], "n=3.142"]));
}

#[test]
fn hostile_inputs_are_module_errors_the_body_can_catch() {
    let (out, code) = run(r#"
import { createEvent } from "@nodetool-ai/sandbox-ics";
import { parse } from "@nodetool-ai/sandbox-subtitle";
import { evaluate } from "@nodetool-ai/sandbox-expr";
const errors = [];
const attempt = async (f) => { try { await f(); errors.push("no error"); } catch (e) { errors.push(e.message); } };
await attempt(() => createEvent({ start: [2024, 2, 30] }));
await attempt(() => createEvent({ start: [2024, 1, 1], attendees: [{ name: "x" }] }));
await attempt(() => parse("1\n00:00:01,000 -> 00:00:02,000\nx"));
await attempt(() => evaluate("(".repeat(100000) + "1" + ")".repeat(100000)));
await attempt(() => evaluate("(".repeat(40000) + "1" + ")".repeat(40000)));
await attempt(() => evaluate("f(x) = f(x + 1); f(0)"));
await attempt(() => evaluate("constructor"));
await attempt(() => evaluate("s = 'x'; " + "s = s || s; ".repeat(40) + "s"));
return { errors, tower: await evaluate("9^9^9^9") === Infinity };
"#);
    assert_eq!(code, 0, "{out}");
    assert_eq!(
        out["result"],
        json!({
            "errors": [
                "ics.createEvent: start is not a date of the calendar (that month is shorter)",
                "ics.createEvent: attendees[0].email is required (ATTENDEE's value is its address)",
                "subtitle.parse: expected timestamp at row 2, but received: \"00:00:01,000 -> 00:00:02,000\"",
                "expr.evaluate: the formula is longer than 100000 characters",
                "expr.evaluate: the formula nests deeper than 100 levels",
                "expr.evaluate: calls nest deeper than 100 levels",
                "expr.evaluate: undefined variable: constructor",
                "expr.evaluate: a string or array would exceed 1048576 bytes"
            ],
            "tower": true
        })
    );
}

#[test]
fn chrono_runs_in_the_guest_through_nodetool_run() {
    let (out, code) = run(r#"
import { parseDate, parse } from "@nodetool-ai/sandbox-chrono";
const ref = new Date("2024-05-01T12:00:00Z");
return {
  next: parseDate("next Friday at 3pm", ref).toISOString(),
  none: parseDate("no date in here", ref),
  hits: parse("Meet me tomorrow at 10am or on May 20 - 22", ref).map((h) => [h.text, h.index, h.start.date().toISOString(), h.end ? h.end.date().toISOString() : null]),
};
"#);
    assert_eq!(code, 0, "{out}");
    assert_eq!(
        out["result"],
        json!({
            "next": "2024-05-10T15:00:00.000Z",
            "none": null,
            "hits": [
                ["tomorrow at 10am", 8, "2024-05-02T10:00:00.000Z", null],
                ["May 20 - 22", 31, "2024-05-20T12:00:00.000Z", "2024-05-22T12:00:00.000Z"]
            ]
        })
    );
}

/// Every example of the ics, subtitle and expr SKILL.md files runs as written, against a
/// workspace holding the `film.srt` the subtitle examples read; so does aws's `presign` (its
/// `sigv4` example fetches from S3, which no test can reach), with the secrets it asks for.
#[test]
fn every_ics_subtitle_expr_and_presign_skill_example_runs() {
    let workspace = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(
        workspace.path().join("film.srt"),
        "1\n00:00:01,000 --> 00:00:04,000\nHello there.\n\n2\n00:01:05,500 --> 00:01:09,000\nGeneral Kenobi, you are a bold one.\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let dir = workspace.path().display().to_string();
    let flags = [
        "--workspace",
        dir.as_str(),
        "--secret",
        "AWS_ACCESS_KEY_ID=AKIDEXAMPLE",
        "--secret",
        "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
    ];
    let mut results = Vec::new();
    for id in ["ics", "subtitle", "expr", "aws"] {
        let skill = nodetool_tests::skill::shipped_skill(id);
        // The first block is the import forms, not a body.
        for block in nodetool_tests::skill::js_blocks(&skill).into_iter().skip(1) {
            if block.contains("await fetch(") {
                continue;
            }
            let (out, code) = run_with(&block, &flags);
            assert_eq!(code, 0, "sandbox-{id} example failed:\n{block}\n{out}");
            results.push((id, out["result"].clone()));
        }
    }
    let ids: Vec<&str> = results.iter().map(|(id, _)| *id).collect();
    assert_eq!(
        ids,
        ["ics", "ics", "subtitle", "subtitle", "expr", "aws"],
        "{results:?}"
    );
    // What each example's comment says it returns.
    let starts = results[0].1.as_array().cloned().unwrap_or_default();
    assert!(
        starts.iter().any(|l| l == "DTSTART:20240501T140000Z"),
        "{starts:?}"
    );
    assert_eq!(results[1].1, json!(2));
    assert_eq!(results[2].1, json!({ "cues": 2, "minutes": 1, "words": 9 }));
    assert_eq!(results[3].1, json!("00:00:03,500 --> 00:00:06,500"));
    assert!(workspace.path().join("film.vtt").is_file());
    assert!(workspace.path().join("review.ics").is_file());
    assert_eq!(
        results[4].1,
        json!({ "discount": 12, "largest": 50, "rounded": 17.14, "label": "FR-3", "doubled": [80, 100, 60] })
    );
    let link = results[5].1["link"].as_str().unwrap_or_default();
    assert!(
        link.starts_with("https://my-bucket.s3.us-east-1.amazonaws.com/reports/2026%20Q3.pdf?")
            && link.contains("X-Amz-Credential=AKIDEXAMPLE%2F")
            && link.contains("X-Amz-Expires=600")
            && link.contains("X-Amz-Signature="),
        "{link}"
    );
    // The secret key itself is never in the link.
    assert!(!link.contains("wJalrXUtnFEMI"), "{link}");
}
