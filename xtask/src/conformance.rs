//! `cargo xtask conformance [--cases N]`: the host modules against the libraries the reference
//! runs (papaparse, fast-xml-parser, cheerio, jsdiff, fflate, exceljs) and against real clients
//! (GNU `patch`, Info-ZIP `zip` and `unzip -t`, Python's `zipfile`, openpyxl, expat), on the same
//! inputs: the published ones (csv-spectrum, papaparse's own test inputs) and `N` seeded random
//! ones per module (300 by default).
//!
//! Our side calls `nodetool_host_modules::implementation(id, export)` directly; the reference
//! side is `conformance/driver.mjs` (its npm libraries installed from the committed lockfile,
//! scripts disabled) and `conformance/interop.py`, each given every call of a run in one file.
//! Each answer pair is identical, an accepted difference (a rule of [`ACCEPTED`], each listed
//! with its reason in the table of `docs/host-modules.md`), or a difference; the run prints a
//! table per check and fails on any difference, and on a rule the docs do not list.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use nodetool_host_modules::{HostError, implementation};
use nodetool_protocol::value::Value;
use serde_json::{Map, Value as Json};

/// Random cases per module when `--cases` is not given.
pub const DEFAULT_CASES: usize = 300;

/// The differences the suite accepts: `(id, what differs)`. The reason for each is in the table
/// of `docs/host-modules.md`, which must name every id.
pub const ACCEPTED: &[(&str, &str)] = &[
    (
        "xml-declaration-key",
        "fast-xml-parser keeps the <?xml?> declaration as a `?xml` key; ours leaves it out",
    ),
    (
        "xml-well-formedness",
        "one side refuses a document the other accepts, and expat agrees with ours",
    ),
    (
        "xml-character-references",
        "ours decodes &#N; and &#xH; as XML requires; fast-xml-parser keeps them verbatim",
    ),
    (
        "diff-identical-texts",
        "identical texts: ours is \"\", jsdiff writes the ===/---/+++ header alone",
    ),
    (
        "diff-equally-minimal",
        "both patches remove and add the same number of lines; the common lines chosen differ",
    ),
    (
        "csv-proto-header",
        "a column named __proto__: papaparse's record loses it (the assignment sets the prototype); ours keeps it",
    ),
    (
        "csv-mixed-line-ends",
        "a text mixing line ends: papaparse splits rows at the first kind only; ours at every CR, LF or CRLF",
    ),
    (
        "csv-leading-empty-line",
        "a text starting with an empty line: papaparse renames no repeated header (a later column overwrites); ours renames",
    ),
    (
        "csv-stringify-every-key",
        "records with different keys: papaparse writes the first record's columns only; ours every key, first seen first",
    ),
    (
        "csv-stringify-json-cells",
        "an array or object in a cell: papaparse writes String(value) ([object Object]); ours its JSON",
    ),
    (
        "csv-malformed-quotes",
        "a quote that opens no field or never closes: the csv crate and papaparse split such a text differently",
    ),
    (
        "html-nested-anchors",
        "an <a> opened inside another around block elements: html5ever and parse5 build different trees",
    ),
    (
        "html-markdown-writer",
        "toMarkdown: our writer and turndown escape and space Markdown differently; the text and structure agree",
    ),
];

/// A deterministic generator (xorshift64*), so a failing case is the same on every machine.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    fn chance(&mut self, one_in: usize) -> bool {
        self.below(one_in) == 0
    }
}

/// What one comparison found.
#[derive(Debug)]
enum Verdict {
    Identical,
    Accepted(&'static str),
    Different(String),
}

/// One host call, answered by ours and by the reference library.
struct Case {
    /// The row of the table it counts in.
    check: &'static str,
    /// `<id>.<export>`.
    call: &'static str,
    /// Where the input came from (`random 17`, `csv-spectrum simple.csv`).
    label: String,
    args: Vec<Value>,
}

/// The per-check tallies, and the differences in full.
#[derive(Default)]
struct Report {
    rows: BTreeMap<&'static str, [usize; 3]>,
    accepted: BTreeMap<&'static str, usize>,
    differences: Vec<String>,
}

impl Report {
    fn add(&mut self, check: &'static str, label: &str, verdict: Verdict) {
        let row = self.rows.entry(check).or_default();
        match verdict {
            Verdict::Identical => row[0] += 1,
            Verdict::Accepted(rule) => {
                row[1] += 1;
                *self.accepted.entry(rule).or_default() += 1;
            }
            Verdict::Different(why) => {
                row[2] += 1;
                self.differences.push(format!("{check} / {label}: {why}"));
            }
        }
    }

    fn print(&self) {
        println!(
            "{:<38} {:>6} {:>10} {:>9} {:>10}",
            "check", "cases", "identical", "accepted", "different"
        );
        for (check, [same, accepted, different]) in &self.rows {
            println!(
                "{check:<38} {:>6} {same:>10} {accepted:>9} {different:>10}",
                same + accepted + different
            );
        }
        let [same, accepted, different] = self
            .rows
            .values()
            .fold([0; 3], |t, r| [t[0] + r[0], t[1] + r[1], t[2] + r[2]]);
        println!(
            "{:<38} {:>6} {same:>10} {accepted:>9} {different:>10}",
            "all",
            same + accepted + different
        );
        if !self.accepted.is_empty() {
            println!("accepted differences (docs/host-modules.md):");
            for (rule, n) in &self.accepted {
                println!("  {rule}: {n}");
            }
        }
        // At most five of each check, so every check's kind of difference shows.
        let mut shown: BTreeMap<&str, usize> = BTreeMap::new();
        for difference in &self.differences {
            let check = difference.split(" / ").next().unwrap_or("");
            let n = shown.entry(check).or_default();
            *n += 1;
            if *n <= 5 {
                println!("DIFFERENT {difference}");
            }
        }
        for (check, n) in shown.iter().filter(|(_, n)| **n > 5) {
            println!("... and {} more in {check}", n - 5);
        }
    }
}

/// What the suite's real clients need that this machine lacks, one sentence each.
pub fn missing_tools() -> Vec<String> {
    let works = |program: &Path, args: &[&str]| {
        Command::new(program)
            .args(args)
            .output()
            .is_ok_and(|o| o.status.success())
    };
    let mut missing = Vec::new();
    for (program, arg, package) in [
        ("patch", "--version", "patch"),
        ("unzip", "-v", "unzip"),
        ("zip", "-v", "zip"),
    ] {
        if !works(Path::new(program), &[arg]) {
            missing.push(format!(
                "{program} (Debian: {package}), which the host-module conformance suite checks our output with"
            ));
        }
    }
    if !works(&python_program(), &["-c", "import openpyxl"]) {
        missing.push(
            "openpyxl for Debian's python3 (Debian: python3-openpyxl), which the host-module conformance suite reads and writes workbooks with".to_string(),
        );
    }
    missing
}

/// Runs the suite from the workspace root.
pub fn run(root: &Path, cases: usize) -> Result<(), String> {
    let documented = documented_rules(root)?;
    let undocumented: Vec<&str> = ACCEPTED
        .iter()
        .map(|(id, _)| *id)
        .filter(|id| !documented.iter().any(|d| d == id))
        .collect();
    if !undocumented.is_empty() {
        return Err(format!(
            "docs/host-modules.md does not list the accepted differences {}",
            undocumented.join(", ")
        ));
    }
    install(root)?;
    let work = root.join("target/conformance");
    std::fs::create_dir_all(&work).map_err(|e| format!("cannot create {}: {e}", work.display()))?;
    let published = node_published(root, &work)?;
    let mut rng = Rng(0x6e6f_6465_746f_6f6c);
    let mut all = Vec::new();
    csv_cases(&published, cases, &mut rng, &mut all);
    xml_cases(cases, &mut rng, &mut all);
    html_cases(cases, &mut rng, &mut all);
    diff_cases(cases, &mut rng, &mut all);

    let theirs = node_calls(root, &work, &all)?;
    let ours: Vec<Result<Value, String>> = all.iter().map(call_ours).collect();
    // XML cases the two parsers disagree on get expat's view.
    let disputed: Vec<usize> = (0..all.len())
        .filter(|&i| all[i].call == "xml.parse" && ours[i].is_ok() != theirs[i].is_ok())
        .collect();
    let expat = python(
        root,
        &work,
        &disputed
            .iter()
            .map(|&i| {
                let text = match all[i].args.first() {
                    Some(Value::String(s)) => s.clone(),
                    _ => String::new(),
                };
                serde_json::json!({"op": "expat.well_formed", "text": text})
            })
            .collect::<Vec<_>>(),
    )?;
    let mut well_formed: BTreeMap<usize, bool> = BTreeMap::new();
    for (i, answer) in disputed.iter().zip(expat) {
        well_formed.insert(*i, answer.ok().and_then(|j| j.as_bool()).unwrap_or(false));
    }
    let mut report = Report::default();
    for (i, case) in all.iter().enumerate() {
        let verdict = compare(case, &ours[i], &theirs[i], well_formed.get(&i).copied());
        report.add(case.check, &case.label, verdict);
    }
    patch_checks(&work, &all, &ours, &mut report)?;
    zip_checks(root, &work, cases, &mut rng, &mut report)?;
    xlsx_checks(root, &work, cases, &mut rng, &mut report)?;
    report.print();
    if report.differences.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{} difference(s) not in the accepted-differences table",
            report.differences.len()
        ))
    }
}

/// The rule ids the accepted-differences table of `docs/host-modules.md` lists (its first
/// column, in backquotes).
fn documented_rules(root: &Path) -> Result<Vec<String>, String> {
    let path = root.join("docs/host-modules.md");
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    Ok(text
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split_once('`').map(|(id, _)| id.to_string()))
        .collect())
}

/// `npm ci --ignore-scripts --prefix conformance`, when its libraries are not installed yet.
fn install(root: &Path) -> Result<(), String> {
    crate::npm_ci(&root.join("conformance"), "conformance")
}

fn node(root: &Path, args: &[&Path]) -> Result<(), String> {
    let mut command = Command::new("node");
    command.arg(root.join("conformance/driver.mjs"));
    command.args(args);
    let output = command
        .output()
        .map_err(|e| format!("cannot run node: {e}"))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "conformance/driver.mjs failed: {}",
            String::from_utf8_lossy(&output.stderr)
        ))
    }
}

fn read_json(path: &Path) -> Result<Json, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{} is not JSON: {e}", path.display()))
}

fn write_json(path: &Path, value: &Json) -> Result<(), String> {
    let text = serde_json::to_string(value).map_err(|e| format!("cannot encode JSON: {e}"))?;
    std::fs::write(path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

fn node_published(root: &Path, work: &Path) -> Result<Json, String> {
    let out = work.join("published.json");
    node(root, &[Path::new("--published"), &out])?;
    read_json(&out)
}

/// Every case's reference answer, in one run of the driver.
fn node_calls(
    root: &Path,
    work: &Path,
    cases: &[Case],
) -> Result<Vec<Result<Value, String>>, String> {
    let requests: Vec<Json> = cases
        .iter()
        .map(|c| serde_json::json!({"call": c.call, "args": c.args.iter().map(to_json).collect::<Vec<_>>()}))
        .collect();
    let (input, output) = (work.join("calls.json"), work.join("answers.json"));
    write_json(&input, &Json::Array(requests))?;
    node(root, &[&input, &output])?;
    answers(&read_json(&output)?, cases.len())
}

/// Debian's Python, where python3-openpyxl installs (a python3 earlier on PATH may be another).
fn python_program() -> PathBuf {
    let debian = PathBuf::from("/usr/bin/python3");
    if debian.is_file() {
        debian
    } else {
        PathBuf::from("python3")
    }
}

fn python(
    root: &Path,
    work: &Path,
    requests: &[Json],
) -> Result<Vec<Result<Json, String>>, String> {
    if requests.is_empty() {
        return Ok(Vec::new());
    }
    let (input, output) = (work.join("interop-in.json"), work.join("interop-out.json"));
    write_json(&input, &Json::Array(requests.to_vec()))?;
    let out = Command::new(python_program())
        .arg(root.join("conformance/interop.py"))
        .arg(&input)
        .arg(&output)
        .output()
        .map_err(|e| format!("cannot run python3: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "conformance/interop.py failed (Debian: python3-openpyxl): {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let Json::Array(items) = read_json(&output)? else {
        return Err("interop.py answered no array".into());
    };
    Ok(items
        .into_iter()
        .map(|item| match item {
            Json::Object(mut m) => match (m.remove("ok"), m.remove("error")) {
                (Some(ok), _) => Ok(ok),
                (_, Some(e)) => Err(e.as_str().unwrap_or("error").to_string()),
                _ => Err("no answer".into()),
            },
            _ => Err("no answer".into()),
        })
        .collect())
}

fn answers(json: &Json, expected: usize) -> Result<Vec<Result<Value, String>>, String> {
    let Json::Array(items) = json else {
        return Err("the driver answered no array".into());
    };
    if items.len() != expected {
        return Err(format!(
            "the driver answered {} of {expected} calls",
            items.len()
        ));
    }
    Ok(items
        .iter()
        .map(|item| match (item.get("ok"), item.get("error")) {
            (Some(ok), _) => Ok(from_json(ok)),
            (_, Some(e)) => Err(e.as_str().unwrap_or("error").to_string()),
            _ => Err("no answer".into()),
        })
        .collect())
}

fn call_ours(case: &Case) -> Result<Value, String> {
    let (id, export) = case.call.split_once('.').unwrap_or((case.call, ""));
    match implementation(id, export) {
        Some(f) => f(&case.args).map_err(HostError::into_message),
        None => Err(format!("{} is not implemented", case.call)),
    }
}

use nodetool_protocol::hex::hex;

fn unhex(text: &str) -> Option<Vec<u8>> {
    (0..text.len())
        .step_by(2)
        .map(|i| {
            text.get(i..i + 2)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        })
        .collect()
}

fn to_json(value: &Value) -> Json {
    match value {
        Value::Undefined | Value::Null => Json::Null,
        Value::Bool(b) => Json::Bool(*b),
        Value::Number(n) => serde_json::Number::from_f64(*n).map_or(Json::Null, Json::Number),
        Value::String(s) => Json::String(s.clone()),
        Value::Bytes(b) => serde_json::json!({"$hex": hex(b)}),
        Value::Array(items) => Json::Array(items.iter().map(to_json).collect()),
        Value::Object(members) => Json::Object(
            members
                .iter()
                .map(|(k, v)| (k.clone(), to_json(v)))
                .collect::<Map<String, Json>>(),
        ),
    }
}

fn from_json(json: &Json) -> Value {
    match json {
        Json::Null => Value::Null,
        Json::Bool(b) => Value::Bool(*b),
        Json::Number(n) => Value::Number(n.as_f64().unwrap_or(f64::NAN)),
        Json::String(s) => Value::String(s.clone()),
        Json::Array(items) => Value::Array(items.iter().map(from_json).collect()),
        Json::Object(members) => match members.get("$hex").and_then(Json::as_str) {
            Some(h) if members.len() == 1 => Value::Bytes(unhex(h).unwrap_or_default()),
            _ => Value::Object(
                members
                    .iter()
                    .map(|(k, v)| (k.clone(), from_json(v)))
                    .collect(),
            ),
        },
    }
}

fn s(text: &str) -> Value {
    Value::String(text.to_string())
}

fn obj(members: Vec<(&str, Value)>) -> Value {
    Value::Object(
        members
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
    )
}

fn short(value: &Result<Value, String>) -> String {
    let text = match value {
        Ok(v) => serde_json::to_string(&to_json(v)).unwrap_or_default(),
        Err(e) => format!("error {e:?}"),
    };
    text.chars().take(300).collect()
}

fn show(case: &Case) -> String {
    let args: Vec<Json> = case.args.iter().map(to_json).collect();
    serde_json::to_string(&args)
        .unwrap_or_default()
        .chars()
        .take(300)
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Comparison

fn compare(
    case: &Case,
    ours: &Result<Value, String>,
    theirs: &Result<Value, String>,
    expat: Option<bool>,
) -> Verdict {
    let different = || {
        Verdict::Different(format!(
            "input {}\n    ours   {}\n    theirs {}",
            show(case),
            short(ours),
            short(theirs)
        ))
    };
    // Objects as JavaScript enumerates them (array-index keys first, ascending), on both sides:
    // the guest sees our records in that order too.
    let ours = &ours.as_ref().map(js_order).map_err(Clone::clone);
    let theirs = &theirs.as_ref().map(js_order).map_err(Clone::clone);
    match (ours, theirs) {
        // Both refuse: the messages are each module's own (`<id>.<export>: ...`).
        (Err(_), Err(_)) => return Verdict::Identical,
        (Ok(a), Ok(b)) if a == b => return Verdict::Identical,
        _ => {}
    }
    match case.call {
        "xml.parse" => {
            if let Some(well_formed) = expat {
                // Exactly one side refused; expat settles which is right.
                return if well_formed == ours.is_ok() {
                    Verdict::Accepted("xml-well-formedness")
                } else {
                    different()
                };
            }
            let (Ok(a), Ok(b)) = (ours, theirs) else {
                return different();
            };
            let mut b = b.clone();
            let mut rule = None;
            if let Value::Object(members) = &mut b
                && members.iter().any(|(k, _)| k == "?xml")
            {
                members.retain(|(k, _)| k != "?xml");
                rule = Some("xml-declaration-key");
            }
            if *a == b {
                return Verdict::Accepted(rule.unwrap_or("xml-declaration-key"));
            }
            let text = match case.args.first() {
                Some(Value::String(t)) => t.as_str(),
                _ => "",
            };
            if text.contains("&#") && *a == decode_references(&b) {
                return Verdict::Accepted("xml-character-references");
            }
            different()
        }
        "diff.unified" => {
            let (Ok(Value::String(a)), Ok(Value::String(b))) = (ours, theirs) else {
                return different();
            };
            if a.is_empty() && !b.contains("\n@@") {
                return Verdict::Accepted("diff-identical-texts");
            }
            let b = jsdiff_as_gnu(b);
            if *a == b {
                return Verdict::Identical;
            }
            if edit_counts(a) == edit_counts(&b) {
                return Verdict::Accepted("diff-equally-minimal");
            }
            different()
        }
        "csv.parse" => {
            let text = match case.args.first() {
                Some(Value::String(t)) => t.as_str(),
                _ => "",
            };
            let given = match case.args.get(1) {
                Some(Value::Object(o)) => {
                    o.iter()
                        .find(|(k, _)| k == "delimiter")
                        .and_then(|(_, v)| match v {
                            Value::String(d) => d.chars().next(),
                            _ => None,
                        })
                }
                _ => None,
            };
            let candidates: Vec<char> = match given {
                Some(d) => vec![d],
                None => vec![',', '\t', '|', ';', '\u{1e}', '\u{1f}'],
            };
            if candidates.iter().any(|&d| has_malformed_quotes(text, d)) {
                return Verdict::Accepted("csv-malformed-quotes");
            }
            if line_end_kinds(text) > 1 {
                return Verdict::Accepted("csv-mixed-line-ends");
            }
            let header = text.split(['\n', '\r']).next().unwrap_or("");
            if header.contains("__proto__") {
                return Verdict::Accepted("csv-proto-header");
            }
            if text
                .trim_start_matches('\u{feff}')
                .starts_with(['\n', '\r'])
            {
                return Verdict::Accepted("csv-leading-empty-line");
            }
            different()
        }
        "csv.stringify" => {
            let Some(Value::Array(rows)) = case.args.first() else {
                return different();
            };
            let nested = |v: &Value| matches!(v, Value::Array(_) | Value::Object(_));
            let has_nested = rows.iter().any(|row| match row {
                Value::Array(cells) => cells.iter().any(nested),
                Value::Object(members) => members.iter().any(|(_, v)| nested(v)),
                _ => false,
            });
            if has_nested {
                return Verdict::Accepted("csv-stringify-json-cells");
            }
            fn keys(row: &Value) -> Option<Vec<&str>> {
                match row {
                    Value::Object(m) => {
                        let mut k: Vec<&str> = m.iter().map(|(k, _)| k.as_str()).collect();
                        k.sort_unstable();
                        Some(k)
                    }
                    _ => None,
                }
            }
            let first = rows.first().and_then(keys);
            if first.is_some() && rows.iter().any(|r| keys(r) != first) {
                // papaparse's header is the first record's keys; ours starts with them.
                if let (Ok(Value::String(a)), Ok(Value::String(b))) = (ours, theirs) {
                    let (ours_head, theirs_head) = (a.lines().next(), b.lines().next());
                    if ours_head
                        .zip(theirs_head)
                        .is_some_and(|(o, t)| o.starts_with(t))
                    {
                        return Verdict::Accepted("csv-stringify-every-key");
                    }
                }
            }
            different()
        }
        "html.select" | "html.toText" | "html.extractLinks"
            if case
                .args
                .first()
                .is_some_and(|v| matches!(v, Value::String(t) if nests_anchors(t))) =>
        {
            Verdict::Accepted("html-nested-anchors")
        }
        "html.toMarkdown" => {
            let (Ok(Value::String(a)), Ok(Value::String(b))) = (ours, theirs) else {
                return different();
            };
            if markdown_words(a) == markdown_words(b) {
                return Verdict::Accepted("html-markdown-writer");
            }
            different()
        }
        _ => different(),
    }
}

/// Whether an `<a>` opens while another is open (the adoption agency's corner of the HTML
/// tree builder).
fn nests_anchors(html: &str) -> bool {
    let mut depth = 0usize;
    let mut rest = html;
    while let Some(at) = rest.find('<') {
        rest = &rest[at + 1..];
        if rest.starts_with("a ") || rest.starts_with("a>") {
            depth += 1;
            if depth > 1 {
                return true;
            }
        } else if rest.starts_with("/a>") {
            depth = depth.saturating_sub(1);
        }
    }
    false
}

/// Every string of a tree with its `&#N;` and `&#xH;` character references replaced.
fn decode_references(value: &Value) -> Value {
    match value {
        Value::String(text) => {
            let mut out = String::with_capacity(text.len());
            let mut rest = text.as_str();
            while let Some(at) = rest.find("&#") {
                out.push_str(&rest[..at]);
                let after = &rest[at + 2..];
                let decoded = after.split_once(';').and_then(|(number, tail)| {
                    let code = match number.strip_prefix('x') {
                        Some(hex) => u32::from_str_radix(hex, 16).ok()?,
                        None => number.parse().ok()?,
                    };
                    Some((char::from_u32(code)?, tail))
                });
                match decoded {
                    Some((c, tail)) => {
                        out.push(c);
                        rest = tail;
                    }
                    None => {
                        out.push_str("&#");
                        rest = after;
                    }
                }
            }
            out.push_str(rest);
            Value::String(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(decode_references).collect()),
        Value::Object(members) => Value::Object(
            members
                .iter()
                .map(|(k, v)| (k.clone(), decode_references(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// jsdiff's patch in GNU's spelling: no `===` line, and `,1` left out of a range.
fn jsdiff_as_gnu(patch: &str) -> String {
    let mut out = String::with_capacity(patch.len());
    for line in patch.split_inclusive('\n') {
        if line.starts_with("=====") {
            continue;
        }
        if let Some(rest) = line.strip_prefix("@@ -")
            && let Some((ranges, tail)) = rest.split_once(" @@")
            && let Some((old, new)) = ranges.split_once(" +")
        {
            let gnu = |r: &str| r.strip_suffix(",1").unwrap_or(r).to_string();
            out.push_str(&format!("@@ -{} +{} @@{tail}", gnu(old), gnu(new)));
            continue;
        }
        out.push_str(line);
    }
    out
}

/// Lines removed and added by a unified patch.
fn edit_counts(patch: &str) -> (usize, usize) {
    let mut counts = (0, 0);
    for line in patch.lines() {
        if line.starts_with("---") || line.starts_with("+++") {
            continue;
        }
        if line.starts_with('-') {
            counts.0 += 1;
        } else if line.starts_with('+') {
            counts.1 += 1;
        }
    }
    counts
}

/// Objects' members in JavaScript's enumeration order: keys that are array indices first,
/// ascending, then the rest as inserted.
fn js_order(value: &Value) -> Value {
    match value {
        Value::Array(items) => Value::Array(items.iter().map(js_order).collect()),
        Value::Object(members) => {
            let index = |k: &str| {
                k.parse::<u32>()
                    .ok()
                    .filter(|n| *n < u32::MAX && n.to_string() == k)
            };
            let mut indexed: Vec<(u32, &(String, Value))> = members
                .iter()
                .filter_map(|m| index(&m.0).map(|n| (n, m)))
                .collect();
            indexed.sort_by_key(|(n, _)| *n);
            let ordered = indexed
                .into_iter()
                .map(|(_, m)| m)
                .chain(members.iter().filter(|m| index(&m.0).is_none()));
            Value::Object(ordered.map(|(k, v)| (k.clone(), js_order(v))).collect())
        }
        other => other.clone(),
    }
}

/// How many kinds of line end a text uses (CRLF, a lone LF, a lone CR).
fn line_end_kinds(text: &str) -> usize {
    let bytes = text.as_bytes();
    let (mut crlf, mut lf, mut cr) = (false, false, false);
    for (i, &b) in bytes.iter().enumerate() {
        match b {
            b'\r' if bytes.get(i + 1) == Some(&b'\n') => crlf = true,
            b'\r' => cr = true,
            b'\n' if i > 0 && bytes[i - 1] == b'\r' => {}
            b'\n' => lf = true,
            _ => {}
        }
    }
    usize::from(crlf) + usize::from(lf) + usize::from(cr)
}

/// With `delimiter`: a quote in the middle of an unquoted field, something other than a
/// delimiter or line end right after a closing quote, or a quoted field left open.
fn has_malformed_quotes(text: &str, delimiter: char) -> bool {
    let separates = |c: char| c == delimiter || c == '\n' || c == '\r';
    let mut in_quotes = false;
    let mut at_field_start = true;
    let mut after_close = false;
    for c in text.chars() {
        if in_quotes {
            if c == '"' {
                in_quotes = false;
                after_close = true;
            }
            continue;
        }
        if c == '"' {
            if after_close {
                // `""` inside quotes: an escaped quote.
                in_quotes = true;
                after_close = false;
                continue;
            }
            if !at_field_start {
                return true;
            }
            in_quotes = true;
            at_field_start = false;
            continue;
        }
        if after_close && !separates(c) {
            return true;
        }
        after_close = false;
        at_field_start = separates(c);
    }
    in_quotes
}

/// The words of a Markdown text with its markup and escapes taken out.
fn markdown_words(markdown: &str) -> Vec<String> {
    markdown
        .replace('\\', "")
        .split(|c: char| c.is_whitespace() || "\\*_`#->[]()!|=~+".contains(c))
        .filter(|w| !w.is_empty())
        .map(str::to_string)
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Cases

fn csv_cases(published: &Json, n: usize, rng: &mut Rng, out: &mut Vec<Case>) {
    let list = |key: &str| {
        published
            .get(key)
            .and_then(Json::as_array)
            .cloned()
            .unwrap_or_default()
    };
    for file in list("csvSpectrum") {
        let (Some(name), Some(text)) = (file["name"].as_str(), file["text"].as_str()) else {
            continue;
        };
        for header in [true, false] {
            out.push(Case {
                check: "csv.parse (published)",
                call: "csv.parse",
                label: format!("csv-spectrum {name} header={header}"),
                args: vec![s(text), obj(vec![("header", Value::Bool(header))])],
            });
        }
    }
    for (i, test) in list("parse").iter().enumerate() {
        let Some(text) = test["text"].as_str() else {
            continue;
        };
        let header = test["config"]["header"].as_bool().unwrap_or(false);
        let mut options = vec![("header", Value::Bool(header))];
        if let Some(d) = test["config"]["delimiter"]
            .as_str()
            .filter(|d| d.chars().count() == 1)
        {
            options.push(("delimiter", s(d)));
        }
        out.push(Case {
            check: "csv.parse (published)",
            call: "csv.parse",
            label: format!(
                "papaparse test {i} {:?}",
                test["name"].as_str().unwrap_or("")
            ),
            args: vec![s(text), obj(options)],
        });
    }
    for (i, test) in list("unparse").iter().enumerate() {
        let rows = from_json(&test["rows"]);
        let mut options = vec![];
        if let Some(d) = test["config"]["delimiter"]
            .as_str()
            .filter(|d| d.chars().count() == 1)
        {
            options.push(("delimiter", s(d)));
        }
        if let Some(h) = test["config"]["header"].as_bool() {
            options.push(("header", Value::Bool(h)));
        }
        out.push(Case {
            check: "csv.stringify (published)",
            call: "csv.stringify",
            label: format!(
                "papaparse unparse test {i} {:?}",
                test["name"].as_str().unwrap_or("")
            ),
            args: vec![rows, obj(options)],
        });
    }
    const FIELDS: &[&str] = &[
        "",
        "a",
        "bc",
        " x ",
        "é",
        "\"q\"",
        "\"a,b\"",
        "\"l1\nl2\"",
        "\"say \"\"hi\"\"\"",
        "1",
        "c",
        "c_1",
        "01",
        "ü ö",
    ];
    for i in 0..n {
        let delimiter = *rng.pick(&[",", ";", "\t", "|"]);
        let newline = *rng.pick(&["\n", "\r\n"]);
        let width = 1 + rng.below(4);
        let mut text = String::new();
        for r in 0..rng.below(6) {
            if r > 0 {
                text.push_str(newline);
            }
            let fields = if rng.chance(4) {
                1 + rng.below(5)
            } else {
                width
            };
            let row: Vec<&str> = (0..fields).map(|_| *rng.pick(FIELDS)).collect();
            text.push_str(&row.join(delimiter));
        }
        if rng.chance(3) {
            text.push_str(newline);
        }
        let mut options = vec![("header", Value::Bool(rng.chance(2)))];
        if rng.chance(2) {
            options.push(("delimiter", s(delimiter)));
        }
        out.push(Case {
            check: "csv.parse (random)",
            call: "csv.parse",
            label: format!("random {i}"),
            args: vec![s(&text), obj(options)],
        });
    }
    const CELLS: &[&str] = &[
        "a",
        "",
        " x",
        "y ",
        "a,b",
        "q\"q",
        "l1\nl2",
        "é",
        "\u{feff}b",
        "1",
    ];
    for i in 0..n {
        let header = rng.chance(2);
        let width = 1 + rng.below(4);
        let rows: Vec<Value> = (0..rng.below(5))
            .map(|_| {
                if header {
                    obj((0..width)
                        .map(|c| {
                            let key = *rng.pick(&["k", "v", "x y", "é"]);
                            let _ = c;
                            (key, cell(rng, CELLS))
                        })
                        .collect())
                } else {
                    Value::Array((0..width).map(|_| cell(rng, CELLS)).collect())
                }
            })
            .collect();
        let delimiter = *rng.pick(&[",", ";", "\t"]);
        out.push(Case {
            check: "csv.stringify (random)",
            call: "csv.stringify",
            label: format!("random {i}"),
            args: vec![
                Value::Array(rows),
                obj(vec![
                    ("header", Value::Bool(header)),
                    ("delimiter", s(delimiter)),
                ]),
            ],
        });
    }
}

fn cell(rng: &mut Rng, strings: &[&str]) -> Value {
    match rng.below(6) {
        0 => Value::Number((rng.below(2000) as f64 - 1000.0) / 8.0),
        1 => Value::Bool(rng.chance(2)),
        2 => Value::Null,
        _ => s(rng.pick::<&str>(strings)),
    }
}

fn xml_cases(n: usize, rng: &mut Rng, out: &mut Vec<Case>) {
    const TEXT: &[&str] = &[
        "hi",
        " spaced ",
        "a &amp; b",
        "&lt;x&gt;",
        "007",
        "&#65;",
        "&#x42;",
        "é",
        "\r\nline\r\n",
        "&quot;q&quot;",
        "",
    ];
    const NAMES: &[&str] = &["a", "b", "item", "x:y", "c"];
    fn element(rng: &mut Rng, depth: usize, out: &mut String) {
        let name = *rng.pick(NAMES);
        out.push('<');
        out.push_str(name);
        let mut used = Vec::new();
        for _ in 0..rng.below(3) {
            let key = *rng.pick(&["id", "k", "x:z", "n"]);
            if used.contains(&key) && !rng.chance(8) {
                continue;
            }
            used.push(key);
            let value = *rng.pick(&["1", " v ", "a &amp; b", "&#65;", "&lt;", "é", ""]);
            let quote = if rng.chance(3) { '\'' } else { '"' };
            out.push_str(&format!(" {key}={quote}{value}{quote}"));
        }
        if depth > 3 || rng.chance(4) {
            out.push_str("/>");
            return;
        }
        out.push('>');
        for _ in 0..rng.below(4) {
            match rng.below(6) {
                0 | 1 => element(rng, depth + 1, out),
                2 => out.push_str("<![CDATA[ <raw> & ]]>"),
                3 => out.push_str("<!-- c -->"),
                _ => out.push_str(rng.pick::<&str>(TEXT)),
            }
        }
        out.push_str(&format!("</{name}>"));
    }
    for i in 0..n {
        let mut text = String::new();
        if rng.chance(3) {
            text.push_str("<?xml version=\"1.0\"?>\n");
        }
        element(rng, 0, &mut text);
        // Now and then, one of the ill-formed shapes.
        match rng.below(12) {
            0 => text = text.replacen("</", "<", 1),
            1 => text = text.replacen("&amp;", "&", 1),
            2 => text = text.replacen("\" ", "\"", 1),
            3 => text.push_str("<extra/>"),
            _ => {}
        }
        let mut args = vec![s(&text)];
        if rng.chance(4) {
            args.push(obj(vec![("attributes", Value::Bool(false))]));
        }
        out.push(Case {
            check: "xml.parse (random)",
            call: "xml.parse",
            label: format!("random {i}"),
            args,
        });
    }
}

fn html_cases(n: usize, rng: &mut Rng, out: &mut Vec<Case>) {
    fn node(rng: &mut Rng, depth: usize, out: &mut String) {
        let words = [
            "hello",
            "world",
            "a  b",
            "x\ty",
            "line\n\n\n\nbreak",
            "&amp;",
            "é",
        ];
        if depth > 3 || rng.chance(3) {
            out.push_str(rng.pick::<&str>(&words));
            return;
        }
        let (open, close) = *rng.pick(&[
            ("<p>", "</p>"),
            ("<div class=\"c\">", "</div>"),
            ("<div id=\"i\">", "</div>"),
            ("<span>", "</span>"),
            ("<a href=\"/x\">", "</a>"),
            ("<a href=\"https://other.example/y\">", "</a>"),
            ("<a href=\"#top\">", "</a>"),
            ("<a href=\"mailto:m@example.com\">", "</a>"),
            ("<ul><li>", "</li></ul>"),
            ("<h2>", "</h2>"),
            ("<b>", "</b>"),
            ("<script>", "</script>"),
            ("<style>", "</style>"),
        ]);
        out.push_str(open);
        for _ in 0..1 + rng.below(3) {
            node(rng, depth + 1, out);
        }
        out.push_str(close);
    }
    for i in 0..n {
        let mut page = String::new();
        if rng.chance(2) {
            page.push_str("<html><head><title>T</title></head><body>");
        }
        for _ in 0..1 + rng.below(3) {
            node(rng, 0, &mut page);
        }
        let label = format!("random {i}");
        let selector = *rng.pick(&["p", "a", "div > p", "li", ".c", "#i", "a[href]", "span, b"]);
        let mut options = vec![];
        if rng.chance(3) {
            options.push(("attr", s("href")));
        }
        out.push(Case {
            check: "html.select (random)",
            call: "html.select",
            label: label.clone(),
            args: vec![s(&page), s(selector), obj(options)],
        });
        out.push(Case {
            check: "html.toText (random)",
            call: "html.toText",
            label: label.clone(),
            args: vec![s(&page)],
        });
        let mut args = vec![s(&page)];
        if rng.chance(2) {
            args.push(s("https://site.example/base/"));
        }
        out.push(Case {
            check: "html.extractLinks (random)",
            call: "html.extractLinks",
            label: label.clone(),
            args,
        });
    }
    // Markdown from documents as people write them: blocks holding inline content, lists of
    // items, code in pre (the tag soup above has no Markdown both writers would agree on).
    fn inline(rng: &mut Rng, out: &mut String) {
        for _ in 0..1 + rng.below(4) {
            let word = *rng.pick(&[
                "plain words",
                "more text",
                "x",
                "snake_case",
                "a*b",
                "1. not a list",
            ]);
            match rng.below(7) {
                0 => out.push_str(&format!("<b>{word}</b>")),
                1 => out.push_str(&format!("<em>{word}</em>")),
                2 => out.push_str(&format!(
                    "<a href=\"https://example.com/{}\">{word}</a>",
                    rng.below(9)
                )),
                3 => out.push_str(&format!("<code>{word}</code>")),
                _ => out.push_str(word),
            }
            out.push(' ');
        }
    }
    for i in 0..n {
        let mut page = String::from("<body>");
        for _ in 0..1 + rng.below(5) {
            match rng.below(6) {
                0 => {
                    let level = 1 + rng.below(3);
                    page.push_str(&format!("<h{level}>"));
                    inline(rng, &mut page);
                    page.push_str(&format!("</h{level}>"));
                }
                1 => {
                    let list = *rng.pick(&["ul", "ol"]);
                    page.push_str(&format!("<{list}>"));
                    for _ in 0..1 + rng.below(3) {
                        page.push_str("<li>");
                        inline(rng, &mut page);
                        page.push_str("</li>");
                    }
                    page.push_str(&format!("</{list}>"));
                }
                2 => page.push_str(
                    "<pre><code class=\"language-js\">let x = 1;\nreturn x;\n</code></pre>",
                ),
                3 => {
                    page.push_str("<blockquote><p>");
                    inline(rng, &mut page);
                    page.push_str("</p></blockquote>");
                }
                _ => {
                    page.push_str("<p>");
                    inline(rng, &mut page);
                    page.push_str("</p>");
                }
            }
        }
        page.push_str("</body>");
        out.push(Case {
            check: "html.toMarkdown (random)",
            call: "html.toMarkdown",
            label: format!("random {i}"),
            args: vec![s(&page)],
        });
    }
}

fn diff_cases(n: usize, rng: &mut Rng, out: &mut Vec<Case>) {
    const LINES: &[&str] = &["a", "b", "{", "}", "", "return x;", "x"];
    for i in 0..n {
        let text = |rng: &mut Rng| {
            let mut t: String = (0..rng.below(14))
                .map(|_| format!("{}\n", rng.pick(LINES)))
                .collect();
            if rng.chance(5) {
                t.push_str("tail");
            }
            t
        };
        let a = text(rng);
        let b = if rng.chance(10) { a.clone() } else { text(rng) };
        let mut options = vec![("context", Value::Number(rng.below(5) as f64))];
        if rng.chance(3) {
            options.push(("oldName", s("old.txt")));
            options.push(("newName", s("new.txt")));
        }
        out.push(Case {
            check: "diff.unified (random)",
            call: "diff.unified",
            label: format!("random {i}"),
            args: vec![s(&a), s(&b), obj(options)],
        });
    }
}

// ---------------------------------------------------------------------------------------------
// Real clients

/// Every patch we wrote applies with GNU `patch` and gives the new text exactly.
fn patch_checks(
    work: &Path,
    cases: &[Case],
    ours: &[Result<Value, String>],
    report: &mut Report,
) -> Result<(), String> {
    let dir = work.join("patch");
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    for (case, answer) in cases.iter().zip(ours) {
        if case.call != "diff.unified" {
            continue;
        }
        let (Some(Value::String(a)), Some(Value::String(b))) =
            (case.args.first(), case.args.get(1))
        else {
            continue;
        };
        let verdict = match answer {
            Err(e) => Verdict::Different(format!("no patch: {e}")),
            Ok(Value::String(p)) if p.is_empty() => {
                if a == b {
                    Verdict::Identical
                } else {
                    Verdict::Different("an empty patch for different texts".into())
                }
            }
            Ok(Value::String(p)) => {
                let (old, patch, new) = (dir.join("old"), dir.join("p.diff"), dir.join("new"));
                write(&old, a.as_bytes())?;
                write(&patch, p.as_bytes())?;
                let _ = std::fs::remove_file(&new);
                let out = Command::new("patch")
                    .args(["--silent", "--force", "--no-backup-if-mismatch", "-o"])
                    .arg(&new)
                    .arg(&old)
                    .arg(&patch)
                    .output()
                    .map_err(|e| format!("cannot run patch (Debian: patch): {e}"))?;
                let result = std::fs::read(&new).unwrap_or_default();
                if out.status.success() && result == b.as_bytes() {
                    Verdict::Identical
                } else {
                    Verdict::Different(format!(
                        "patch {}: {}{}",
                        out.status,
                        String::from_utf8_lossy(&out.stdout),
                        String::from_utf8_lossy(&out.stderr)
                    ))
                }
            }
            Ok(other) => Verdict::Different(format!("not a string: {other:?}")),
        };
        report.add("diff.unified (GNU patch applies)", &case.label, verdict);
    }
    Ok(())
}

fn write(path: &Path, bytes: &[u8]) -> Result<(), String> {
    std::fs::write(path, bytes).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

type Files = Vec<(String, Vec<u8>)>;

fn random_files(rng: &mut Rng) -> Files {
    const NAMES: &[&str] = &[
        "a.txt",
        "dir/b.bin",
        "ünï/çødé.txt",
        "x y.txt",
        "deep/er/c.csv",
        "e",
    ];
    let mut files: Files = Vec::new();
    for _ in 0..1 + rng.below(4) {
        let name = rng.pick(NAMES).to_string();
        if files.iter().any(|(n, _)| *n == name) {
            continue;
        }
        let len = rng.below(3000);
        let data: Vec<u8> = if rng.chance(2) {
            (0..len).map(|_| rng.next() as u8).collect()
        } else {
            b"row,row,row\n".iter().copied().cycle().take(len).collect()
        };
        files.push((name, data));
    }
    files
}

fn files_value(files: &Files) -> Value {
    Value::Object(
        files
            .iter()
            .map(|(n, d)| (n.clone(), Value::Bytes(d.clone())))
            .collect(),
    )
}

/// The files an unzip answered, sorted by name.
fn files_of(value: &Value) -> Option<Files> {
    let Value::Object(members) = value else {
        return None;
    };
    let mut files: Files = members
        .iter()
        .map(|(n, v)| match v {
            Value::Bytes(b) => Some((n.clone(), b.clone())),
            _ => None,
        })
        .collect::<Option<_>>()?;
    files.sort();
    Some(files)
}

fn files_of_json(json: &Json) -> Option<Files> {
    let Json::Object(members) = json else {
        return None;
    };
    let mut files: Files = members
        .iter()
        .map(|(n, v)| Some((n.clone(), unhex(v.as_str()?)?)))
        .collect::<Option<_>>()?;
    files.sort();
    Some(files)
}

fn same_files(got: Option<Files>, want: &Files, what: &str) -> Verdict {
    let mut want = want.clone();
    want.sort();
    match got {
        Some(got) if got == want => Verdict::Identical,
        Some(got) => Verdict::Different(format!(
            "{what}: names {:?}, expected {:?}",
            got.iter().map(|(n, d)| (n, d.len())).collect::<Vec<_>>(),
            want.iter().map(|(n, d)| (n, d.len())).collect::<Vec<_>>()
        )),
        None => Verdict::Different(format!("{what}: not an archive of files")),
    }
}

fn zip_checks(
    root: &Path,
    work: &Path,
    n: usize,
    rng: &mut Rng,
    report: &mut Report,
) -> Result<(), String> {
    let sets: Vec<Files> = (0..n).map(|_| random_files(rng)).collect();
    let zip = implementation("zip", "zip").ok_or("zip.zip is not implemented")?;
    let unzip = implementation("zip", "unzip").ok_or("zip.unzip is not implemented")?;
    let ours: Vec<Vec<u8>> = sets
        .iter()
        .map(|files| match zip(&[files_value(files)]) {
            Ok(Value::Bytes(b)) => Ok(b),
            other => Err(format!("zip.zip: {other:?}")),
        })
        .collect::<Result<_, _>>()?;
    // Ours read by fflate and Python; fflate's and Python's read by ours.
    let mut calls = Vec::new();
    for (files, archive) in sets.iter().zip(&ours) {
        calls.push(Case {
            check: "zip",
            call: "zip.unzip",
            label: String::new(),
            args: vec![Value::Bytes(archive.clone())],
        });
        calls.push(Case {
            check: "zip",
            call: "zip.zip",
            label: String::new(),
            args: vec![files_value(files)],
        });
    }
    let fflate = node_calls(root, work, &calls)?;
    let mut requests = Vec::new();
    for (files, archive) in sets.iter().zip(&ours) {
        requests.push(serde_json::json!({"op": "zipfile.read", "bytes": hex(archive)}));
        let files: Map<String, Json> = files
            .iter()
            .map(|(n, d)| (n.clone(), Json::String(hex(d))))
            .collect();
        requests.push(serde_json::json!({"op": "zipfile.write", "files": files}));
    }
    let py = python(root, work, &requests)?;
    for (i, files) in sets.iter().enumerate() {
        let label = format!("random {i}");
        let by_fflate = fflate[2 * i].as_ref().ok().and_then(files_of);
        report.add(
            "zip.zip read by fflate",
            &label,
            same_files(by_fflate, files, "fflate"),
        );
        let by_python = py[2 * i].as_ref().ok().and_then(files_of_json);
        report.add(
            "zip.zip read by zipfile",
            &label,
            same_files(by_python, files, "zipfile"),
        );
        let fflate_archive = match &fflate[2 * i + 1] {
            Ok(Value::Bytes(b)) => unzip(&[Value::Bytes(b.clone())]).ok(),
            _ => None,
        };
        report.add(
            "zip.unzip of fflate's archives",
            &label,
            same_files(fflate_archive.as_ref().and_then(files_of), files, "ours"),
        );
        let python_archive = py[2 * i + 1]
            .as_ref()
            .ok()
            .and_then(Json::as_str)
            .and_then(unhex)
            .and_then(|b| unzip(&[Value::Bytes(b)]).ok());
        report.add(
            "zip.unzip of zipfile's archives",
            &label,
            same_files(python_archive.as_ref().and_then(files_of), files, "ours"),
        );
    }
    // Info-ZIP, as a process per archive: a few dozen of them.
    let dir = work.join("infozip");
    for (i, (files, archive)) in sets.iter().zip(&ours).enumerate().take(40) {
        let label = format!("random {i}");
        let _ = std::fs::remove_dir_all(&dir);
        let tree = dir.join("tree");
        for (name, data) in files {
            let path = tree.join(name);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)
                    .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
            }
            write(&path, data)?;
        }
        let ours_path = dir.join("ours.zip");
        write(&ours_path, archive)?;
        let tested = Command::new("unzip")
            .arg("-tqq")
            .arg(&ours_path)
            .output()
            .map_err(|e| format!("cannot run unzip (Debian: unzip): {e}"))?;
        report.add(
            "zip.zip tested by unzip -t",
            &label,
            if tested.status.success() {
                Verdict::Identical
            } else {
                Verdict::Different(String::from_utf8_lossy(&tested.stdout).into_owned())
            },
        );
        let made = dir.join("infozip.zip");
        let zipped = Command::new("zip")
            .args(["-q", "-r"])
            .arg(&made)
            .arg(".")
            .current_dir(&tree)
            .env("LC_ALL", "C.UTF-8")
            .output()
            .map_err(|e| format!("cannot run zip (Debian: zip): {e}"))?;
        if !zipped.status.success() {
            return Err(format!(
                "zip failed: {}",
                String::from_utf8_lossy(&zipped.stderr)
            ));
        }
        let bytes =
            std::fs::read(&made).map_err(|e| format!("cannot read {}: {e}", made.display()))?;
        let read = unzip(&[Value::Bytes(bytes)]).ok();
        // Info-ZIP names entries ./-relative without the ./ and adds the directories.
        report.add(
            "zip.unzip of Info-ZIP's archives",
            &label,
            same_files(read.as_ref().and_then(files_of), files, "ours"),
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// A sheet's rows as they can be compared: each row's trailing empty cells dropped, and rows
/// with no value left out (openpyxl writes nothing for them; exceljs and ours skip them).
fn trimmed(rows: &[Vec<Value>]) -> Vec<Vec<Value>> {
    rows.iter()
        .map(|row| {
            let mut row = row.clone();
            while matches!(row.last(), Some(Value::Null)) {
                row.pop();
            }
            row
        })
        .filter(|row| !row.is_empty())
        .collect()
}

fn rows_of(value: &Value) -> Vec<Vec<Value>> {
    match value {
        Value::Array(rows) => rows
            .iter()
            .map(|r| match r {
                Value::Array(cells) => cells.clone(),
                _ => vec![],
            })
            .collect(),
        _ => vec![],
    }
}

fn xlsx_checks(
    root: &Path,
    work: &Path,
    n: usize,
    rng: &mut Rng,
    report: &mut Report,
) -> Result<(), String> {
    const STRINGS: &[&str] = &[
        "a",
        "text with spaces",
        " lead",
        "é ü",
        "x&y<z>",
        "007",
        "line\nbreak",
    ];
    let write = implementation("xlsx", "write").ok_or("xlsx.write is not implemented")?;
    let parse = implementation("xlsx", "parse").ok_or("xlsx.parse is not implemented")?;
    let grids: Vec<Vec<Vec<Value>>> = (0..n)
        .map(|_| {
            let width = 1 + rng.below(4);
            (0..1 + rng.below(5))
                .map(|_| {
                    (0..width)
                        .map(|_| match rng.below(7) {
                            0 => Value::Number(rng.below(100_000) as f64 / 16.0 - 1000.0),
                            1 => Value::Number(rng.below(1000) as f64),
                            2 => Value::Bool(rng.chance(2)),
                            3 => Value::Null,
                            _ => s(rng.pick::<&str>(STRINGS)),
                        })
                        .collect()
                })
                .collect()
        })
        .collect();
    let no_header = || obj(vec![("header", Value::Bool(false))]);
    let books: Vec<Vec<u8>> = grids
        .iter()
        .map(|grid| {
            let rows = Value::Array(grid.iter().map(|r| Value::Array(r.clone())).collect());
            match write(&[obj(vec![("S", rows)]), no_header()]) {
                Ok(Value::Bytes(b)) => Ok(b),
                other => Err(format!("xlsx.write: {other:?}")),
            }
        })
        .collect::<Result<_, _>>()?;
    let mut requests = Vec::new();
    for (grid, book) in grids.iter().zip(&books) {
        requests.push(serde_json::json!({"op": "openpyxl.read", "bytes": hex(book)}));
        let rows: Vec<Json> = grid
            .iter()
            .map(|r| Json::Array(r.iter().map(to_json).collect()))
            .collect();
        requests.push(serde_json::json!({"op": "openpyxl.write", "sheets": {"S": rows}}));
    }
    let py = python(root, work, &requests)?;
    // exceljs reads our workbooks and openpyxl's; ours reads openpyxl's.
    let mut calls = Vec::new();
    let mut openpyxl_books = Vec::new();
    for (i, book) in books.iter().enumerate() {
        calls.push(Case {
            check: "xlsx",
            call: "xlsx.parse",
            label: String::new(),
            args: vec![Value::Bytes(book.clone()), no_header()],
        });
        let theirs = py[2 * i + 1]
            .as_ref()
            .ok()
            .and_then(Json::as_str)
            .and_then(unhex)
            .unwrap_or_default();
        calls.push(Case {
            check: "xlsx",
            call: "xlsx.parse",
            label: String::new(),
            args: vec![Value::Bytes(theirs.clone()), no_header()],
        });
        openpyxl_books.push(theirs);
    }
    let exceljs = node_calls(root, work, &calls)?;
    for (i, grid) in grids.iter().enumerate() {
        let label = format!("random {i}");
        let want = trimmed(grid);
        let sheet = |v: &Value| match v {
            Value::Object(m) => m.iter().find(|(k, _)| k == "S").map(|(_, v)| rows_of(v)),
            _ => None,
        };
        // openpyxl's read of ours, as values.
        let by_openpyxl = py[2 * i]
            .as_ref()
            .ok()
            .map(from_json)
            .and_then(|v| sheet(&v))
            .map(|rows| trimmed(&rows));
        report.add(
            "xlsx.write read by openpyxl",
            &label,
            if by_openpyxl.as_ref() == Some(&want) {
                Verdict::Identical
            } else {
                Verdict::Different(format!("openpyxl read {by_openpyxl:?}, wrote {want:?}"))
            },
        );
        let ours_of_ours =
            parse(&[Value::Bytes(books[i].clone()), no_header()]).map_err(HostError::into_message);
        let compare_reads = |ours: &Result<Value, String>, theirs: &Result<Value, String>| {
            let ours_rows = ours.as_ref().ok().and_then(sheet).map(|r| trimmed(&r));
            let theirs_rows = theirs.as_ref().ok().and_then(sheet).map(|r| trimmed(&r));
            if ours_rows.is_some() && ours_rows == theirs_rows {
                Verdict::Identical
            } else {
                Verdict::Different(format!("ours {ours_rows:?}\n    exceljs {theirs_rows:?}"))
            }
        };
        report.add(
            "xlsx.parse of ours = exceljs's",
            &label,
            compare_reads(&ours_of_ours, &exceljs[2 * i]),
        );
        let ours_of_openpyxl = parse(&[Value::Bytes(openpyxl_books[i].clone()), no_header()])
            .map_err(HostError::into_message);
        report.add(
            "xlsx.parse of openpyxl's = exceljs's",
            &label,
            compare_reads(&ours_of_openpyxl, &exceljs[2 * i + 1]),
        );
        let ours_rows = ours_of_openpyxl
            .as_ref()
            .ok()
            .and_then(sheet)
            .map(|r| trimmed(&r));
        report.add(
            "xlsx.parse of openpyxl's = written",
            &label,
            if ours_rows.as_ref() == Some(&want) {
                Verdict::Identical
            } else {
                Verdict::Different(format!("ours {ours_rows:?}, openpyxl wrote {want:?}"))
            },
        );
    }
    let _ = std::io::stdout().flush();
    Ok(())
}
