//! The guest contract fixtures: what a run must do, as data any runner can replay.
//!
//! A [`Fixture`] is a body, the modules its run resolved (hand-built [`ResolvedModule`]s, all
//! digests `"a"` × 64), optional inputs, secrets and deadline, and the [`Expect`]ed outcome.
//! The cases follow the reference's shared loading/denial fixtures and extend them (denials
//! with no modules declared, intra-pack relative imports, every code-generation path, private
//! bridges, capability sharing, limits, positions, values). [`fixtures`] is the list,
//! [`run_fixture`] checks one against the Rust guest, and [`fixtures_json`] is the exact text
//! committed at [`FIXTURES_JSON_PATH`] for runners that are not written in Rust.
//!
//! On the wire every field is camelCase; values use the run protocol's JSON form (bytes as
//! `{"$bytes": "<base64>"}`), modules the catalog's `ResolvedModule` form, error codes their
//! stable strings.

mod cases;
pub mod catalog;
pub mod packs;
pub mod relative;
pub mod specifiers;
pub mod wasm;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use nodetool_guest::{Capabilities, Dispatchers, RunLimits, RunRequest, Sandbox};
use nodetool_protocol::catalog::{Resolution, ResolvedKind, ResolvedModule};
use nodetool_protocol::run::{RunError, RunErrorCode};
use nodetool_protocol::value::Value;
use serde::{Deserialize, Serialize};

pub use cases::fixtures;

/// Where `cargo xtask export` writes the fixtures, relative to the workspace root.
pub const FIXTURES_JSON_PATH: &str = "tests/contract/fixtures.json";

/// The `format` tag of the exported file.
pub const FIXTURES_FORMAT: &str = "nodetool-sandbox-guest-fixtures/1";

/// One contract case.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Fixture {
    /// A unique kebab-case name.
    pub name: String,
    /// What the case shows, in one sentence.
    pub description: String,
    /// The modules the run's resolution mounts.
    pub modules: Vec<ResolvedModule>,
    /// The Code node body (top-level `return` and `await` allowed).
    pub code: String,
    /// The `inputs` global (`null` when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inputs: Option<Value>,
    /// Granted secrets. Absent: no `getSecret` global at all; present (even empty): `getSecret`
    /// exists and answers exactly these names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secrets: Option<BTreeMap<String, String>>,
    /// The run's deadline in milliseconds (the standard 30 s when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// The outcome.
    pub expect: Expect,
    /// The body (or a module it imports) catches the error and returns its message, so the run
    /// succeeds with a string and `errorContains` is checked against that string.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub catches_error: bool,
}

/// What a fixture's run must end with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Expect {
    /// The run succeeds with exactly this value.
    Result(ExpectResult),
    /// The run fails (or, with `catchesError`, returns a caught message).
    Error(ExpectError),
}

/// `{ "result": <value> }`: compared as JSON (so `undefined` equals `null`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpectResult {
    /// The exact result.
    pub result: Value,
}

/// `{ "errorCode"?, "errorContains", "errorLine"? }`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExpectError {
    /// The run's error code (required unless the fixture catches the error).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_code: Option<RunErrorCode>,
    /// Substrings the error message (or the caught message) must contain.
    #[serde(default)]
    pub error_contains: Vec<String>,
    /// The 1-based body line the error must report.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_line: Option<u32>,
}

/// The exported file: a format tag, a note, and the fixtures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FixtureFile {
    /// [`FIXTURES_FORMAT`].
    pub format: String,
    /// How the file is made and what it is for.
    pub description: String,
    /// The closed list of run error codes (`protocol::run::RunErrorCode`), so the browser
    /// runner can check that it answers with no other.
    pub run_error_codes: Vec<String>,
    /// Every fixture, in [`fixtures`] order.
    pub fixtures: Vec<Fixture>,
}

/// The exported file as data.
pub fn fixture_file() -> FixtureFile {
    FixtureFile {
        format: FIXTURES_FORMAT.to_string(),
        description: "Guest contract fixtures of nodetool-sandbox, generated from \
                      tests/src/contract by `cargo xtask export`; do not edit. Each fixture \
                      runs `code` with `modules` as the run's resolution and must end as \
                      `expect` says."
            .to_string(),
        run_error_codes: nodetool_protocol::run::RunErrorCode::ALL
            .iter()
            .map(|c| c.as_str().to_string())
            .collect(),
        fixtures: fixtures(),
    }
}

/// The exact text of [`FIXTURES_JSON_PATH`]: pretty JSON plus a final newline.
pub fn fixtures_json() -> Result<String, serde_json::Error> {
    Ok(format!(
        "{}\n",
        serde_json::to_string_pretty(&fixture_file())?
    ))
}

/// Where `cargo xtask export` writes the host-module registry for the browser runner.
pub const HOST_MODULES_JSON_PATH: &str = "web/src/host-modules.json";

/// The exact text of [`HOST_MODULES_JSON_PATH`]: NodeTool's host-module registry (id, pinned
/// pack, exports in facade order) as pretty JSON plus a final newline.
pub fn host_modules_json() -> Result<String, serde_json::Error> {
    let mut modules = serde_json::Map::new();
    for m in nodetool_protocol::host::HOST_MODULES {
        modules.insert(
            m.id.to_string(),
            serde_json::json!({ "packName": m.pack_name, "exports": m.exports }),
        );
    }
    let document = serde_json::json!({
        "format": "nodetool-sandbox-host-modules/1",
        "description": "NodeTool's host-module registry (protocol/src/host.rs) for the browser runner, generated by `cargo xtask export`; do not edit.",
        "modules": modules,
    });
    Ok(format!("{}\n", serde_json::to_string_pretty(&document)?))
}

/// Checks a run's answer in the JSON of `POST /api/run` (`{"ok", "result"}` or `{"ok": false,
/// "error"}`), as the browser runner gives it, against `fixture`.
pub fn check_answer(fixture: &Fixture, answer: &serde_json::Value) -> Result<(), String> {
    let outcome = match answer.get("ok").and_then(serde_json::Value::as_bool) {
        Some(true) => Ok(Value::from_json(
            answer
                .get("result")
                .cloned()
                .unwrap_or(serde_json::Value::Null),
        )),
        Some(false) => Err(serde_json::from_value::<RunError>(
            answer.get("error").cloned().unwrap_or_default(),
        )
        .map_err(|e| format!("the answer's error is malformed ({e}): {answer}"))?),
        None => return Err(format!("the answer is not a run's: {answer}")),
    };
    check_outcome(fixture, outcome)
}

/// Runs one fixture on `sandbox` and says why it failed, if it did.
pub fn run_fixture(sandbox: &Sandbox, fixture: &Fixture) -> Result<(), String> {
    let resolution = Resolution {
        modules: fixture.modules.clone(),
        statuses: vec![],
    };
    let inputs = fixture.inputs.clone().unwrap_or(Value::Null);
    let mut limits = RunLimits::STANDARD;
    if let Some(ms) = fixture.timeout_ms {
        limits.timeout = Duration::from_millis(ms);
    }
    let outcome = sandbox.run(RunRequest {
        code: &fixture.code,
        resolution: &resolution,
        inputs: &inputs,
        limits,
        capabilities: Capabilities {
            secrets: fixture.secrets.clone(),
            ..Capabilities::default()
        },
        dispatchers: Dispatchers {
            wasm: wasm::dispatcher(&resolution)?,
            ..Dispatchers::default()
        },
        cancel: None,
    });
    check_outcome(fixture, outcome.result)
}

/// Checks a run's outcome against `fixture`'s expectation.
pub fn check_outcome(fixture: &Fixture, outcome: Result<Value, RunError>) -> Result<(), String> {
    match (&fixture.expect, outcome) {
        (Expect::Result(want), Ok(got)) => {
            if got.to_json() == want.result.to_json() {
                Ok(())
            } else {
                Err(format!(
                    "expected result {}, got {}",
                    want.result.to_json(),
                    got.to_json()
                ))
            }
        }
        (Expect::Result(want), Err(e)) => Err(format!(
            "expected result {}, but the run failed: {e}",
            want.result.to_json()
        )),
        (Expect::Error(want), Ok(got)) if fixture.catches_error => match got.as_str() {
            Some(caught) => contains_all("the caught message", caught, &want.error_contains),
            None => Err(format!(
                "expected a caught error message, got {}",
                got.to_json()
            )),
        },
        (Expect::Error(_), Ok(got)) => Err(format!(
            "expected the run to fail, but it returned {}",
            got.to_json()
        )),
        (Expect::Error(_), Err(e)) if fixture.catches_error => Err(format!(
            "expected the body to catch the error, but the run failed: {e}"
        )),
        (Expect::Error(want), Err(e)) => {
            if let Some(code) = want.error_code
                && code != e.code
            {
                return Err(format!("expected error code {code}, got {e}"));
            }
            if let Some(line) = want.error_line
                && e.line != Some(line)
            {
                let got = e.line.map_or_else(|| "none".to_string(), |l| l.to_string());
                return Err(format!(
                    "expected the error on line {line}, got line {got}: {e}"
                ));
            }
            contains_all("the error", &e.message, &want.error_contains)
        }
    }
}

fn contains_all(what: &str, text: &str, needles: &[String]) -> Result<(), String> {
    let missing: Vec<&str> = needles
        .iter()
        .filter(|n| !text.contains(n.as_str()))
        .map(String::as_str)
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(format!("{what} {text:?} lacks {missing:?}"))
    }
}

/// Runs every fixture, one sandbox for all (as a process does: the bytecode cache is shared,
/// every run is fresh), and pairs each with its result.
pub fn run_all(fixtures: &[Fixture]) -> Vec<(&Fixture, Result<(), String>)> {
    let sandbox = Sandbox::new();
    fixtures
        .iter()
        .map(|f| (f, run_fixture(&sandbox, f)))
        .collect()
}

/// Problems with the fixture data itself: duplicate or malformed names, expectations that
/// cannot be checked, modules whose entry is not in their graph.
pub fn problems(fixtures: &[Fixture]) -> Vec<String> {
    let mut problems = Vec::new();
    let mut names = BTreeSet::new();
    for f in fixtures {
        let name = &f.name;
        if !names.insert(name.as_str()) {
            problems.push(format!("{name}: the name is used twice"));
        }
        let kebab = !name.is_empty()
            && !name.starts_with('-')
            && !name.ends_with('-')
            && !name.contains("--")
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
        if !kebab {
            problems.push(format!("{name}: the name is not kebab-case"));
        }
        if f.description.trim().is_empty() {
            problems.push(format!("{name}: no description"));
        }
        match &f.expect {
            Expect::Result(_) if f.catches_error => {
                problems.push(format!("{name}: catchesError needs an error expectation"));
            }
            Expect::Result(_) => {}
            Expect::Error(e) if f.catches_error => {
                if e.error_code.is_some() || e.error_line.is_some() {
                    problems.push(format!(
                        "{name}: a caught error has no errorCode or errorLine to check"
                    ));
                }
                if e.error_contains.is_empty() {
                    problems.push(format!("{name}: a caught error needs errorContains"));
                }
            }
            Expect::Error(e) => {
                if e.error_code.is_none() {
                    problems.push(format!("{name}: an error expectation needs errorCode"));
                }
            }
        }
        for m in &f.modules {
            if matches!(m.kind, ResolvedKind::Js) && m.entry().is_none() {
                problems.push(format!(
                    "{name}: module {} has no graph file {}",
                    m.specifier, m.module_id
                ));
            }
        }
    }
    problems
}
