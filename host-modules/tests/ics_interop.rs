//! `ics` against the field's own tools: what `createEvents` writes for a few hundred generated
//! events (Unicode, long text, all-day dates, durations, attendees, alarms, recurrence) parses
//! in Python's `icalendar` (7.3.2, installed by `.ci/run`) without an error and with the same
//! values the events hold, computed from the events in Python; and it is compared, content line
//! by content line, with what the `ics` npm library (3.12.0, the reference's, in
//! `conformance/node_modules`) writes for the same events, every difference in a known class.
//!
//! On a machine without python3 + icalendar, or node + `conformance/node_modules/ics`, each
//! test says what is missing and passes, unless `CI` is set, where it fails.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use nodetool_host_modules::implementation;
use nodetool_protocol::value::Value;
use serde_json::{Value as Json, json};

mod common;
use common::{Must, Rng};

const WORDS: &[&str] = &[
    "meeting",
    "Café",
    "naïve",
    "東京",
    "Zoë",
    "review",
    "a,b",
    "semi;colon",
    "back\\slash",
    "line\nbreak",
    "crlf\r\nbreak",
    "🎉",
    "Ünïcödé",
    "Δοκιμή",
    "résumé",
    "テスト",
    "x",
];

fn text(rng: &mut Rng, max_words: u64) -> String {
    let n = 1 + rng.below(max_words);
    (0..n)
        .map(|_| rng.pick(WORDS))
        .collect::<Vec<_>>()
        .join(" ")
}

/// A date in one of the library's forms.
fn date(rng: &mut Rng, all_day: bool) -> Json {
    let (y, m, d) = (1990 + rng.below(80), 1 + rng.below(12), 1 + rng.below(28));
    if all_day {
        return json!([y, m, d]);
    }
    match rng.below(5) {
        0 => json!([y, m, d, rng.below(24)]),
        1 => json!([y, m, d, rng.below(24), rng.below(61), rng.below(61)]),
        2 => json!(631_152_000_000u64 + rng.below(2_000_000_000) * 1000),
        3 => json!(format!(
            "{y:04}{m:02}{d:02}T{:02}{:02}{:02}Z",
            rng.below(24),
            rng.below(60),
            rng.below(60)
        )),
        _ => json!([y, m, d, rng.below(24), rng.below(61)]),
    }
}

fn duration(rng: &mut Rng) -> Json {
    let mut d = serde_json::Map::new();
    for unit in ["weeks", "days", "hours", "minutes", "seconds"] {
        if rng.chance(35) {
            d.insert(unit.into(), json!(1 + rng.below(40)));
        }
    }
    if d.is_empty() {
        d.insert("hours".into(), json!(1));
    }
    Json::Object(d)
}

/// `n` generated events; `npm` leaves out what the library is known to write wrong
/// (durations with days only, which it writes `P1DT`, are kept: that class is counted).
fn events(seed: u64, n: usize) -> Vec<Json> {
    let mut rng = Rng(seed);
    (0..n)
        .map(|i| {
            let all_day = rng.chance(25);
            let mut e = serde_json::Map::new();
            e.insert("uid".into(), json!(format!("event-{i}@example.com")));
            e.insert("timestamp".into(), json!(1_700_000_000_000u64 + i as u64));
            e.insert("start".into(), date(&mut rng, all_day));
            match rng.below(3) {
                0 => {
                    e.insert("end".into(), date(&mut rng, all_day));
                }
                1 if !all_day => {
                    e.insert("duration".into(), duration(&mut rng));
                }
                _ => {}
            }
            if !all_day && rng.chance(20) {
                e.insert("startOutputType".into(), json!("local"));
            }
            e.insert("title".into(), json!(text(&mut rng, 6)));
            if rng.chance(60) {
                // Long enough to fold several times, multi-byte characters across the folds.
                e.insert("description".into(), json!(text(&mut rng, 80)));
            }
            if rng.chance(50) {
                e.insert("location".into(), json!(text(&mut rng, 5)));
            }
            if rng.chance(30) {
                e.insert("url".into(), json!(format!("https://example.com/e/{i}?q=1")));
            }
            if rng.chance(30) {
                e.insert("geo".into(), json!({"lat": 48.8566, "lon": -2.3522 + i as f64 / 100.0}));
            }
            if rng.chance(40) {
                e.insert("status".into(), json!(rng.pick(&["TENTATIVE", "CONFIRMED", "CANCELLED"])));
            }
            if rng.chance(30) {
                e.insert("busyStatus".into(), json!(rng.pick(&["FREE", "BUSY", "OOF", "TENTATIVE"])));
            }
            if rng.chance(20) {
                e.insert("transp".into(), json!(rng.pick(&["TRANSPARENT", "OPAQUE"])));
            }
            if rng.chance(30) {
                e.insert("sequence".into(), json!(rng.below(100)));
            }
            if rng.chance(40) {
                let cats: Vec<String> = (0..1 + rng.below(3)).map(|_| text(&mut rng, 2)).collect();
                e.insert("categories".into(), json!(cats));
            }
            if rng.chance(40) {
                e.insert(
                    "organizer".into(),
                    json!({"name": text(&mut rng, 2).replace(['\n', '\r'], " "), "email": format!("org{i}@example.com")}),
                );
            }
            if rng.chance(50) {
                let attendees: Vec<Json> = (0..1 + rng.below(4))
                    .map(|k| {
                        let mut a = serde_json::Map::new();
                        a.insert("email".into(), json!(format!("a{i}-{k}@example.org")));
                        if rng.chance(80) {
                            a.insert("name".into(), json!(text(&mut rng, 2).replace(['\n', '\r'], " ")));
                        }
                        if rng.chance(50) {
                            a.insert("rsvp".into(), json!(rng.chance(50)));
                        }
                        if rng.chance(50) {
                            a.insert("partstat".into(), json!(rng.pick(&["ACCEPTED", "DECLINED", "NEEDS-ACTION"])));
                        }
                        if rng.chance(50) {
                            a.insert("role".into(), json!(rng.pick(&["REQ-PARTICIPANT", "OPT-PARTICIPANT", "CHAIR"])));
                        }
                        Json::Object(a)
                    })
                    .collect();
                e.insert("attendees".into(), json!(attendees));
            }
            if rng.chance(40) {
                let alarms: Vec<Json> = (0..1 + rng.below(2))
                    .map(|_| {
                        let trigger = if rng.chance(75) {
                            let mut d = duration(&mut rng);
                            d["before"] = json!(rng.chance(70));
                            d
                        } else {
                            date(&mut rng, false)
                        };
                        json!({"action": "display", "description": text(&mut rng, 4), "trigger": trigger})
                    })
                    .collect();
                e.insert("alarms".into(), json!(alarms));
            }
            if rng.chance(30) {
                e.insert(
                    "recurrenceRule".into(),
                    json!(rng.pick(&["FREQ=WEEKLY;BYDAY=MO,WE;COUNT=10", "FREQ=DAILY;INTERVAL=2", "FREQ=MONTHLY;BYMONTHDAY=15;UNTIL=20301231T000000Z", "FREQ=YEARLY"])),
                );
            }
            if rng.chance(15) && !all_day {
                e.insert("exclusionDates".into(), json!([date(&mut rng, false), date(&mut rng, false)]));
            }
            if rng.chance(15) {
                e.insert("created".into(), json!(1_600_000_000_000u64 + i as u64 * 1000));
            }
            if rng.chance(15) {
                e.insert("htmlContent".into(), json!(format!("<p>{}</p>", text(&mut rng, 5))));
            }
            Json::Object(e)
        })
        .collect()
}

fn create_events(events: &[Json]) -> Result<String, String> {
    let f = implementation("ics", "createEvents").must("ics.createEvents is implemented");
    let arg = Value::from_json(Json::Array(events.to_vec()));
    match f(&[arg]) {
        Ok(Value::String(s)) => Ok(s),
        Ok(other) => panic!("expected text, got {other:?}"),
        Err(e) => Err(e.into_message()),
    }
}

/// Whether a tool is here; without it, a note (and a failure under CI).
fn have(what: &str, ok: bool) -> bool {
    if !ok {
        let note = format!("{what} is not installed");
        assert!(std::env::var_os("CI").is_none(), "{note}");
        eprintln!("skipped: {note}");
    }
    ok
}

fn run(mut command: Command, input: &[u8]) -> String {
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{command:?}: {e}"));
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(input).must("stdin");
    }
    let out = child.wait_with_output().must("wait");
    assert!(
        out.status.success(),
        "{command:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).must("utf-8 output")
}

const PYTHON_CHECK: &str = r#"
import json, re, sys
from datetime import date, datetime, timedelta, timezone
import icalendar

data = json.load(sys.stdin)
events, text = data["events"], data["text"]
cal = icalendar.Calendar.from_ical(text)
problems = []
if cal.errors:
    problems.append(["calendar", repr(cal.errors)])
vevents = list(cal.walk("VEVENT"))
if len(vevents) != len(events):
    problems.append(["count", len(vevents), len(events)])

def nl(s):
    return s.replace("\r\n", "\n").replace("\r", "\n")

def expected_when(v, local=False):
    if isinstance(v, list):
        if len(v) == 3:
            return date(*v)
        y, m, d, h, mi, s = (v + [0, 0, 0])[:6]
        t = datetime(y, m, 1, tzinfo=timezone.utc) + timedelta(days=d - 1, hours=h, minutes=mi, seconds=s)
    elif isinstance(v, (int, float)):
        t = datetime.fromtimestamp(v // 1000, timezone.utc)
    else:
        t = datetime.strptime(v[:15], "%Y%m%dT%H%M%S")
        return t.replace(tzinfo=timezone.utc) if v.endswith("Z") else t
    return t.replace(tzinfo=None) if local else t

def same_when(got, want):
    if isinstance(want, datetime) and isinstance(got, datetime):
        if (want.tzinfo is None) != (got.tzinfo is None):
            return False
        return got == want
    return type(got) is type(want) and got == want

def check(i, name, got, want):
    if got != want:
        problems.append([i, name, repr(got), repr(want)])

for i, (ev, want) in enumerate(zip(vevents, events)):
    if ev.errors:
        problems.append([i, "errors", repr(ev.errors)])
    check(i, "uid", str(ev.get("uid")), want["uid"])
    check(i, "summary", str(ev.get("summary")), nl(want["title"]))
    for key, prop in [("description", "description"), ("location", "location")]:
        if key in want:
            check(i, key, str(ev.get(prop)), nl(want[key]))
    if "htmlContent" in want:
        # An x-property's value is TEXT by default (RFC 5545 3.8.8.2); icalendar keeps it raw.
        raw = str(ev.get("x-alt-desc"))
        text = re.sub(r"\\([\\;,nN])", lambda m: "\n" if m.group(1) in "nN" else m.group(1), raw)
        check(i, "htmlContent", text, nl(want["htmlContent"]))
    local = want.get("startOutputType") == "local"
    start = expected_when(want["start"], local)
    if not same_when(ev.decoded("dtstart"), start):
        problems.append([i, "dtstart", repr(ev.decoded("dtstart")), repr(start)])
    if "end" in want:
        end = expected_when(want["end"], local)
        if end != start and not same_when(ev.decoded("dtend"), end):
            problems.append([i, "dtend", repr(ev.decoded("dtend")), repr(end)])
    if "duration" in want:
        d = want["duration"]
        secs = (d.get("weeks", 0) * 7 + d.get("days", 0)) * 86400 + d.get("hours", 0) * 3600 + d.get("minutes", 0) * 60 + d.get("seconds", 0)
        check(i, "duration", ev.decoded("duration"), timedelta(seconds=secs))
    if "categories" in want:
        check(i, "categories", [str(c) for c in ev.get("categories").cats], [nl(c) for c in want["categories"]])
    if "organizer" in want:
        o = ev.get("organizer")
        check(i, "organizer", (str(o), o.params.get("CN")), ("MAILTO:" + want["organizer"]["email"], want["organizer"]["name"] or "Organizer"))
    if "attendees" in want:
        got = ev.get("attendee")
        got = got if isinstance(got, list) else [got]
        check(i, "attendees", [(str(a), a.params.get("CN"), a.params.get("RSVP"), a.params.get("PARTSTAT"), a.params.get("ROLE")) for a in got],
              [("mailto:" + a["email"], a.get("name") or "Unnamed attendee", None if "rsvp" not in a else ("TRUE" if a["rsvp"] else "FALSE"), a.get("partstat"), a.get("role")) for a in want["attendees"]])
    if "alarms" in want:
        alarms = list(ev.walk("VALARM"))
        check(i, "alarm count", len(alarms), len(want["alarms"]))
        for a, w in zip(alarms, want["alarms"]):
            check(i, "alarm description", str(a.get("description")), nl(w["description"]))
            t = w["trigger"]
            if isinstance(t, dict):
                secs = (t.get("weeks", 0) * 7 + t.get("days", 0)) * 86400 + t.get("hours", 0) * 3600 + t.get("minutes", 0) * 60 + t.get("seconds", 0)
                check(i, "trigger", a.decoded("trigger"), timedelta(seconds=-secs if t.get("before") else secs))
            else:
                check(i, "trigger", a.decoded("trigger"), expected_when(t))
    if "recurrenceRule" in want:
        check(i, "rrule", dict(ev.get("rrule")), dict(icalendar.vRecur.from_ical(want["recurrenceRule"])))
    if "geo" in want:
        g = ev.get("geo")
        check(i, "geo", (g.latitude, g.longitude), (want["geo"]["lat"], want["geo"]["lon"]))
    if "sequence" in want:
        check(i, "sequence", int(ev.get("sequence")), want["sequence"])
    if "exclusionDates" in want:
        ex = ev.get("exdate")
        ex = ex if isinstance(ex, list) else [ex]
        got = [d.dt for e in ex for d in e.dts]
        check(i, "exdate", got, [expected_when(d) for d in want["exclusionDates"]])
print(json.dumps({"events": len(vevents), "problems": problems[:20], "problem_count": len(problems)}))
"#;

#[test]
fn python_icalendar_reads_back_every_generated_event() {
    let python = "/usr/bin/python3";
    let ok = Command::new(python)
        .args(["-c", "import icalendar"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !have(
        "python3 with icalendar 7.3.2 (pip install icalendar==7.3.2)",
        ok,
    ) {
        return;
    }
    let events = events(0x1c5_2024, 400);
    let text = create_events(&events).must("the generated events are valid");
    // RFC 5545 §3.1: no line longer than 75 octets, CRLF only.
    for line in text.split("\r\n") {
        assert!(
            line.len() <= 75,
            "a line of {} octets: {line:?}",
            line.len()
        );
        assert!(!line.contains('\n') && !line.contains('\r'), "{line:?}");
    }
    let input = json!({"events": events, "text": text}).to_string();
    let mut command = Command::new(python);
    command.args(["-c", PYTHON_CHECK]);
    let report: Json = serde_json::from_str(&run(command, input.as_bytes())).must("json report");
    eprintln!("icalendar: {report}");
    assert_eq!(report["events"], json!(400));
    assert_eq!(report["problem_count"], json!(0), "{report}");
}

/// The conformance directory's `node_modules`, when the `ics` library is installed there.
fn conformance() -> Option<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../conformance");
    let node = Command::new("node")
        .arg("--version")
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    let ok = node && dir.join("node_modules/ics/package.json").is_file();
    have(
        "node with conformance/node_modules/ics (npm ci --ignore-scripts --prefix conformance)",
        ok,
    )
    .then_some(dir)
}

/// Content lines of one calendar, unfolded (the library folds with a tab, we with a space).
fn unfolded(text: &str) -> Vec<String> {
    text.replace("\r\n ", "")
        .replace("\r\n\t", "")
        .split("\r\n")
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect()
}

/// Seconds of a `dur-value`, the library's `P1DT` included.
fn seconds(value: &str) -> Option<i64> {
    let (sign, rest) = match value.strip_prefix('-') {
        Some(r) => (-1, r),
        None => (1, value),
    };
    let rest = rest.strip_prefix('P')?;
    let (mut total, mut n, mut time) = (0i64, 0i64, false);
    for c in rest.chars() {
        match c {
            '0'..='9' => n = n * 10 + i64::from(c as u8 - b'0'),
            'T' => time = true,
            'W' => (total, n) = (total + n * 604_800, 0),
            'D' => (total, n) = (total + n * 86_400, 0),
            'H' if time => (total, n) = (total + n * 3600, 0),
            'M' if time => (total, n) = (total + n * 60, 0),
            'S' if time => (total, n) = (total + n, 0),
            _ => return None,
        }
    }
    Some(sign * total)
}

fn unescape(s: &str) -> String {
    s.replace("\\,", ",")
        .replace("\\;", ";")
        .replace("\\\\", "\\")
}

/// The class of an accepted difference between our line and the library's, or `None`.
fn accepted(ours: &str, theirs: &str, in_alarm: bool) -> Option<&'static str> {
    let (name_o, value_o) = ours.split_once(':')?;
    let (name_t, value_t) = theirs.split_once(':')?;
    if name_o != name_t {
        return None;
    }
    match name_o {
        "DURATION" | "TRIGGER"
            if seconds(value_o).is_some() && seconds(value_o) == seconds(value_t) =>
        {
            Some("duration written as an RFC 5545 dur-value (the library: P1DT, P1W2D)")
        }
        "CATEGORIES" if unescape(value_o) == value_t => Some("each category's text escaped"),
        "X-ALT-DESC;FMTTYPE=text/html" if unescape(value_o) == value_t => {
            Some("X-ALT-DESC escaped as TEXT (an x-property's default type)")
        }
        "DESCRIPTION" | "SUMMARY"
            if in_alarm
                && unescape(value_o).replace("\\n", "\n") == value_t.replace("\\n", "\n") =>
        {
            Some("alarm text escaped")
        }
        _ => None,
    }
}

#[test]
fn the_ics_library_writes_the_same_lines() {
    let Some(dir) = conformance() else {
        return;
    };
    let events = events(0x1c5_0312, 400);
    let calls: Vec<Json> = events.iter().map(|e| json!({"events": [e]})).collect();
    let mut command = Command::new("node");
    command
        .arg(dir.join("ics.mjs"))
        .env("TZ", "UTC")
        .current_dir(&dir);
    let answers: Vec<Json> =
        serde_json::from_str(&run(command, Json::Array(calls).to_string().as_bytes())).must("json");
    assert_eq!(answers.len(), events.len());
    let (mut identical, mut classes) = (0usize, std::collections::BTreeMap::<&str, usize>::new());
    for (i, (event, answer)) in events.iter().zip(&answers).enumerate() {
        let theirs = answer["value"]
            .as_str()
            .unwrap_or_else(|| panic!("event {i}: the library refused it: {answer}"));
        let ours =
            create_events(std::slice::from_ref(event)).unwrap_or_else(|e| panic!("event {i}: {e}"));
        let (ours, theirs) = (unfolded(&ours), unfolded(theirs));
        if ours == theirs {
            identical += 1;
            continue;
        }
        assert_eq!(
            ours.len(),
            theirs.len(),
            "event {i}: line counts differ\nours: {ours:#?}\ntheirs: {theirs:#?}"
        );
        let mut in_alarm = false;
        for (o, t) in ours.iter().zip(&theirs) {
            in_alarm = (in_alarm || o == "BEGIN:VALARM") && o != "END:VALARM";
            if o != t {
                let class = accepted(o, t, in_alarm).unwrap_or_else(|| {
                    panic!("event {i}: an unexplained difference\nours:   {o}\ntheirs: {t}")
                });
                *classes.entry(class).or_default() += 1;
            }
        }
    }
    eprintln!(
        "ics vs the ics library: {identical} of {} events identical; accepted differences by line: {classes:?}",
        events.len()
    );
    // A third of the events hold none of the classes above (a sentinel for this seed).
    assert!(identical * 3 > events.len(), "{identical} identical");
}

#[test]
fn hostile_inputs_are_refused_by_their_caps() {
    let f = implementation("ics", "createEvents").must("implemented");
    let event = json!({"start": [2024, 1, 1], "title": "x"});
    let many = Value::from_json(Json::Array(vec![event.clone(); 10_001]));
    let err = f(&[many]).err().must("an error");
    assert!(err.message().contains("10000 event limit"), "{err}");
    // 5 MiB of text over the events.
    let big = "y".repeat(1_100_000);
    let heavy: Vec<Json> = (0..5)
        .map(|_| json!({"start": [2024, 1, 1], "description": big}))
        .collect();
    let err = f(&[Value::from_json(Json::Array(heavy))])
        .err()
        .must("an error");
    assert!(err.message().contains("character text limit"), "{err}");
    // Fan-out: attendees past the per-event cap.
    let attendees: Vec<Json> = (0..1001)
        .map(|k| json!({"email": format!("a{k}@x.org")}))
        .collect();
    let err = f(&[Value::from_json(
        json!([{"start": [2024, 1, 1], "attendees": attendees}]),
    )])
    .err()
    .must("an error");
    assert!(err.message().contains("1000 item limit"), "{err}");
    // 10,000 events at the cap are written.
    let at_cap = Value::from_json(Json::Array(vec![event; 10_000]));
    let text = match f(&[at_cap]) {
        Ok(Value::String(s)) => s,
        other => panic!("{other:?}"),
    };
    assert_eq!(text.matches("BEGIN:VEVENT").count(), 10_000);
}

#[test]
fn line_breaks_and_quotes_cannot_inject_properties() {
    let f = implementation("ics", "createEvent").must("implemented");
    let event = json!({
        "start": [2024, 1, 1, 10, 0],
        "title": "x\r\nATTENDEE:mailto:evil@example.com",
        "attendees": [{"name": "A\"; ROLE=CHAIR:mailto:x\nY", "email": "a@example.com"}],
        "uid": "u\nEND:VEVENT",
    });
    let text = match f(&[Value::from_json(event)]) {
        Ok(Value::String(s)) => s,
        other => panic!("{other:?}"),
    };
    let lines = unfolded(&text);
    assert_eq!(
        lines.iter().filter(|l| l.starts_with("ATTENDEE")).count(),
        1,
        "{lines:#?}"
    );
    assert_eq!(lines.iter().filter(|l| *l == "END:VEVENT").count(), 1);
    assert!(
        lines.contains(
            &"ATTENDEE;CN=\"A^'; ROLE=CHAIR:mailto:x^nY\":mailto:a@example.com".to_string()
        ),
        "{lines:#?}"
    );
    for bad in [
        json!({"start": [2024, 1, 1], "url": "https://x\r\nX-EVIL:1"}),
        json!({"start": [2024, 1, 1], "attendees": [{"email": "a@b.c\r\nX:1"}]}),
    ] {
        assert!(f(&[Value::from_json(bad)]).is_err());
    }
}
