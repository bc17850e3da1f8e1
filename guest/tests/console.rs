//! Console output under its caps when the arguments are hostile: huge strings, many of them,
//! endless loops. Each argument is cut before it is converted, a full line converts nothing
//! more, and a run past its entry cap formats nothing at all.

use std::time::Duration;

use nodetool_guest::{Capabilities, Dispatchers, RunLimits, RunOutcome, RunRequest, Sandbox};
use nodetool_protocol::catalog::Resolution;
use nodetool_protocol::run::{LogEntry, RunErrorCode};
use nodetool_protocol::value::Value;

fn run(code: &str, limits: RunLimits) -> RunOutcome {
    let resolution = Resolution {
        modules: vec![],
        statuses: vec![],
    };
    Sandbox::new().run(RunRequest {
        code,
        resolution: &resolution,
        inputs: &Value::Null,
        limits,
        capabilities: Capabilities::default(),
        dispatchers: Dispatchers::default(),
        cancel: None,
    })
}

fn messages(logs: &[LogEntry]) -> Vec<&str> {
    logs.iter().map(|l| l.message.as_str()).collect()
}

/// The process's peak resident memory in KiB (Linux; 0 elsewhere).
fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

/// Forty arguments of one 30 MB string: each was converted in full and all were joined
/// before the line was cut (2.5 GB resident).
#[test]
fn forty_huge_arguments_make_one_line_cut_at_the_cap() {
    let outcome = run(
        "const s = 'x'.repeat(30e6); console.log(...Array(40).fill(s)); console.warn(new Error(s)); return 1",
        RunLimits::STANDARD,
    );
    assert_eq!(outcome.result, Ok(Value::Number(1.0)));
    let cap = RunLimits::STANDARD.log_chars;
    assert_eq!(
        messages(&outcome.logs),
        [
            format!("{}… [truncated]", "x".repeat(cap)),
            format!("Error: {}… [truncated]", "x".repeat(cap - "Error: ".len())),
        ]
    );
    assert!(
        outcome.duration < Duration::from_secs(10),
        "{:?}",
        outcome.duration
    );
    let peak = peak_rss_kib();
    assert!(peak < 1024 * 1024, "peak resident memory {peak} KiB");
}

/// Every call converted 30 MB, so the engine's interrupt checks came minutes apart: 253 s
/// under a 1 s deadline.
#[test]
fn an_endless_console_loop_over_a_huge_string_ends_at_its_deadline() {
    for code in [
        "const s = 'x'.repeat(30e6); for (;;) console.log(s)",
        "const s = 'x'.repeat(30e6); for (;;) console.log({ s })",
        "const s = 'x'.repeat(30e6); for (;;) console.error(new Error(s))",
    ] {
        let limits = RunLimits {
            timeout: Duration::from_millis(1000),
            ..RunLimits::STANDARD
        };
        let outcome = run(code, limits);
        assert_eq!(
            outcome.result.as_ref().err().map(|e| e.code),
            Some(RunErrorCode::Timeout),
            "{code}: {:?}",
            outcome.result
        );
        assert!(
            outcome.duration < Duration::from_secs(5),
            "{code}: {:?}",
            outcome.duration
        );
        assert_eq!(outcome.logs.len(), limits.log_entries + 1, "{code}");
        let last = outcome.logs.last().map(|l| l.message.as_str());
        assert!(
            last.is_some_and(|m| m.contains("more console lines were dropped")),
            "{code}: {last:?}"
        );
    }
}

/// What is not shown is not converted: no argument past a full line, no line past the entry
/// cap (a `toJSON` counts the conversions).
#[test]
fn nothing_is_converted_past_the_line_or_the_entry_cap() {
    let limits = RunLimits {
        log_entries: 3,
        log_chars: 10,
        ..RunLimits::STANDARD
    };
    let outcome = run(
        "let n = 0; const o = { toJSON() { n++; return 'o' } };\n\
         console.log('0123456789', o, o);\n\
         console.log('012345678', o, o);\n\
         console.log(o);\n\
         for (let i = 0; i < 100; i++) console.log(o, o);\n\
         return n",
        limits,
    );
    // The first line is full before its objects; the second has room for one character, so
    // its first object is converted (and cut) and its second is not; the third converts one.
    assert_eq!(outcome.result, Ok(Value::Number(2.0)));
    assert_eq!(
        messages(&outcome.logs),
        [
            "0123456789… [truncated]",
            "012345678 … [truncated]",
            "o",
            "… 100 more console lines were dropped (the cap is 3 per run)",
        ]
    );
}

/// The cut is counted in characters whatever the string's engine form (Latin-1 or UTF-16,
/// astral characters included), and an unpaired surrogate is shown, not refused.
#[test]
fn cuts_count_characters_in_every_string_form() {
    let limits = RunLimits {
        log_chars: 5,
        ..RunLimits::STANDARD
    };
    let outcome = run(
        "console.log('ab' + '😀'.repeat(1e5));\n\
         console.log('é'.repeat(1e5));\n\
         console.log('😀😀', '😀😀');\n\
         console.log('😀😀', 'é😀x');\n\
         console.log('a\\uD800b');\n\
         console.log('x'.repeat(1e6) + '😀');",
        limits,
    );
    assert_eq!(outcome.result, Ok(Value::Undefined));
    assert_eq!(
        messages(&outcome.logs),
        [
            "ab😀😀😀… [truncated]",
            "ééééé… [truncated]",
            "😀😀 😀😀",
            "😀😀 é😀… [truncated]",
            "a\u{FFFD}b",
            "xxxxx… [truncated]",
        ]
    );
}
