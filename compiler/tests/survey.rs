//! The admission survey (ignored: it installs about 90 npm libraries and takes minutes):
//!
//! ```sh
//! cargo test -p nodetool-compiler --test survey -- --ignored --nocapture
//! ```
//!
//! It installs `tests/survey/package-lock.json` with `npm ci --ignore-scripts` into
//! `target/npm-survey/` (skipped when that lockfile is already installed there), then for every
//! dependency (and the `csv-parse/sync` subpath):
//!
//! 1. compiles it with the compiler (its own cache under `target/npm-survey/cache`);
//! 2. when admitted, imports the module in a fresh guest run (the same guest as every run) and
//!    reads its namespace: "admitted and working" when that loads, "admitted but broken at
//!    load" when it does not;
//! 3. when refused, bundles the same entry with esbuild (`web/node_modules/.bin/esbuild`,
//!    `--platform=browser`, so the browser builds count) and imports that bundle in the guest:
//!    "falsely refused" when it loads there, "correctly refused" when esbuild cannot bundle it
//!    or the bundle cannot initialize in the guest.
//!
//! It prints one line per library and the four counts, writes them to
//! `target/npm-survey/report.md`, and fails when any library is admitted but broken at load.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use nodetool_compiler::{Cache, Compiler, Report};
use nodetool_protocol::limits::NPM_BUNDLE_BYTES;
use nodetool_protocol::value::Value;
use nodetool_runtime::{CompileRequest, CompiledNpmModule};

mod common;

/// Entries measured besides the lockfile's dependencies (subpaths).
const EXTRA_ENTRIES: [&str; 1] = ["csv-parse/sync"];

/// A call per library for the libraries whose use needs a standard global or a CommonJS
/// default, with the answer it gives: "working" for these means the call works too, not only
/// the load. An answer that is an error's name is a known failure at call time (`Intl` absent,
/// code generation refused), counted apart.
const CALLS: [(&str, &str, &str); 12] = [
    (
        "uuid",
        "import { v4, validate } from \"surveyed\";\nreturn validate(v4());",
        "true",
    ),
    (
        "nanoid",
        "import { nanoid } from \"surveyed\";\nreturn nanoid().length;",
        "21",
    ),
    (
        "jwt-decode",
        "import { jwtDecode } from \"surveyed\";\nreturn jwtDecode(\"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhZGEifQ.x\").sub;",
        "\"ada\"",
    ),
    (
        "pako",
        "import { deflate, inflate } from \"surveyed\";\nreturn new TextDecoder().decode(inflate(deflate(\"hello hello\")));",
        "\"hello hello\"",
    ),
    (
        "js-base64",
        "import { Base64 } from \"surveyed\";\nreturn Base64.decode(Base64.encode(\"h\\u00e9\"));",
        "\"h\u{e9}\"",
    ),
    (
        "crypto-js",
        "import CryptoJS from \"surveyed\";\nreturn [CryptoJS.SHA256(\"abc\").toString().slice(0, 8), CryptoJS.lib.WordArray.random(8).sigBytes];",
        "[\"ba7816bf\",8]",
    ),
    (
        "validator",
        "import { isEmail } from \"surveyed\";\nreturn isEmail(\"a@b.co\");",
        "true",
    ),
    (
        "query-string",
        "import qs from \"surveyed\";\nreturn qs.parse(\"a=1&b=x%20y\");",
        "{\"a\":\"1\",\"b\":\"x y\"}",
    ),
    (
        "fast-xml-parser",
        "import { XMLParser } from \"surveyed\";\nreturn new XMLParser().parse(\"<a><b>1</b></a>\");",
        "{\"a\":{\"b\":1}}",
    ),
    (
        "zod",
        "import { z } from \"surveyed\";\nreturn z.object({ a: z.number() }).safeParse({ a: \"x\" }).success;",
        "false",
    ),
    (
        "handlebars",
        "import Handlebars from \"surveyed\";\ntry { Handlebars.compile(\"{{a}}\")({ a: 1 }); return \"compiled\"; } catch (e) { return e.name; }",
        "\"EvalError\"",
    ),
    (
        "luxon",
        "import { DateTime } from \"surveyed\";\ntry { return DateTime.fromISO(\"2024-01-31\").plus({ days: 1 }).toISODate(); } catch (e) { return e.name; }",
        "\"ReferenceError\"",
    ),
];

fn survey_source() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/survey")
}

fn work_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/npm-survey")
}

fn esbuild() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../web/node_modules/.bin/esbuild")
}

/// Installs the survey's lockfile into the work directory unless it is installed already.
fn install(work: &Path) {
    fs::create_dir_all(work).unwrap_or_else(|e| panic!("{work:?}: {e}"));
    let lock = fs::read(survey_source().join("package-lock.json"))
        .unwrap_or_else(|e| panic!("the survey lockfile: {e}"));
    let installed = work.join("node_modules/.package-lock.json").is_file()
        && fs::read(work.join("package-lock.json")).ok().as_ref() == Some(&lock);
    if installed {
        return;
    }
    for file in ["package.json", "package-lock.json"] {
        fs::copy(survey_source().join(file), work.join(file))
            .unwrap_or_else(|e| panic!("copy {file}: {e}"));
    }
    let npm = |args: &[&str]| {
        Command::new("npm")
            .args(args)
            .args(["--ignore-scripts", "--no-audit", "--no-fund"])
            .current_dir(work)
            .status()
            .unwrap_or_else(|e| panic!("npm: {e}"))
            .success()
    };
    // npm 11 writes this lockfile without cbor-extract's optional platform packages, then its
    // own `npm ci` calls the lockfile out of sync; `npm install --no-save` installs the same
    // locked versions without rewriting it.
    assert!(
        npm(&["ci"]) || npm(&["install", "--no-save"]),
        "npm ci (and npm install --no-save) failed"
    );
}

/// The survey's entries: every dependency of its package.json, then the extra entries.
fn entries() -> Vec<String> {
    let text = fs::read_to_string(survey_source().join("package.json"))
        .unwrap_or_else(|e| panic!("the survey package.json: {e}"));
    let manifest: serde_json::Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("the survey package.json: {e}"));
    let mut names: Vec<String> = manifest["dependencies"]
        .as_object()
        .map(|d| d.keys().cloned().collect())
        .unwrap_or_default();
    names.extend(EXTRA_ENTRIES.iter().map(|e| (*e).to_string()));
    names
}

/// The answer of `body` run with `source` as the module, as JSON text, or why it failed.
fn call(source: &str, body: &str) -> Result<String, String> {
    common::run_module(source, "surveyed", body)
        .map(|v| serde_json::to_string(&v).unwrap_or_default())
        .map_err(|e| format!("{}: {}", e.code, e.message))
}

/// Imports `source` as a module in a fresh guest and reads its namespace: the number of
/// exports, or why it did not load.
fn loads(source: &str) -> Result<usize, String> {
    match common::run_module(
        source,
        "surveyed",
        "import * as m from \"surveyed\";\nreturn Object.keys(m).length;",
    ) {
        Ok(Value::Number(n)) => Ok(n as usize),
        Ok(other) => Err(format!("read {other:?}")),
        Err(e) => Err(format!("{}: {}", e.code, e.message)),
    }
}

/// esbuild's bundle of the same entry (browser platform), or why there is none.
fn esbuild_bundle(work: &Path, entry: &str) -> Result<String, String> {
    let dir = work.join("esbuild");
    fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let stem = entry.replace(['/', '@'], "_");
    let input = dir.join(format!("{stem}.entry.mjs"));
    let output = dir.join(format!("{stem}.bundle.mjs"));
    let quoted = serde_json::to_string(entry).map_err(|e| e.to_string())?;
    fs::write(
        &input,
        format!("import * as ns from {quoted};\nexport * from {quoted};\nexport default ns;\n"),
    )
    .map_err(|e| e.to_string())?;
    let ran = Command::new(esbuild())
        .arg(&input)
        .args([
            "--bundle",
            "--format=esm",
            "--platform=browser",
            "--log-level=error",
        ])
        .arg(format!("--outfile={}", output.display()))
        .current_dir(work)
        .output()
        .map_err(|e| format!("esbuild: {e}"))?;
    if !ran.status.success() {
        let text = String::from_utf8_lossy(&ran.stderr);
        let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
        return Err(format!("esbuild failed: {first}"));
    }
    fs::read_to_string(&output).map_err(|e| e.to_string())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Verdict {
    Working,
    FailsAtCall,
    CorrectlyRefused,
    FalselyRefused,
    Broken,
}

impl Verdict {
    fn label(self) -> &'static str {
        match self {
            Verdict::Working => "admitted and working",
            Verdict::FailsAtCall => "admitted, loads, a known call fails",
            Verdict::CorrectlyRefused => "correctly refused",
            Verdict::FalselyRefused => "falsely refused",
            Verdict::Broken => "admitted but broken at load",
        }
    }
}

fn pack_dir(work: &Path, entry: &str) -> PathBuf {
    let dir = work.join("packs").join(entry.replace(['/', '@'], "_"));
    fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{dir:?}: {e}"));
    let manifest = serde_json::json!({
        "name": format!("survey-{}", entry.replace(['/', '@'], "-").trim_start_matches('-')),
        "version": "1.0.0",
        "nodetool": { "sandboxModules": [{ "name": ".", "kind": "js", "npm": entry }] },
    });
    fs::write(dir.join("package.json"), manifest.to_string())
        .unwrap_or_else(|e| panic!("{dir:?}: {e}"));
    dir
}

fn judge(work: &Path, entry: &str, report: &Report) -> (Verdict, String) {
    match &report.module {
        CompiledNpmModule::Admitted(artifact) => match loads(&artifact.source) {
            Ok(n) => {
                let mut detail = format!(
                    "{} bytes, {n} exports, {} warnings",
                    artifact.source.len(),
                    artifact.warnings.len()
                );
                if let Some((_, body, want)) = CALLS.iter().find(|(lib, _, _)| *lib == entry) {
                    let got = call(&artifact.source, body);
                    detail.push_str(&format!("; call: {got:?}"));
                    if got.as_deref() != Ok(*want) {
                        return (Verdict::Broken, format!("{detail}, expected {want}"));
                    }
                    if want.ends_with("Error\"") {
                        return (Verdict::FailsAtCall, detail);
                    }
                }
                (Verdict::Working, detail)
            }
            Err(why) => (Verdict::Broken, why),
        },
        CompiledNpmModule::Refused { code, message } => {
            let ours = format!("{code}: {}", message.chars().take(160).collect::<String>());
            let baseline =
                esbuild_bundle(work, entry).and_then(|b| loads(&b).map(|n| (n, b.len())));
            match baseline {
                // Over the cap either way: the size rule refuses it, not the compiler's bundle.
                Ok((n, bytes)) if bytes as u64 > NPM_BUNDLE_BYTES => (
                    Verdict::CorrectlyRefused,
                    format!(
                        "{ours} | esbuild's bundle loads ({n} exports) but is {bytes} bytes, over the cap too"
                    ),
                ),
                Ok((n, _)) => (
                    Verdict::FalselyRefused,
                    format!("{ours} | esbuild's bundle loads ({n} exports)"),
                ),
                Err(why) => (
                    Verdict::CorrectlyRefused,
                    format!(
                        "{ours} | esbuild: {}",
                        why.chars().take(120).collect::<String>()
                    ),
                ),
            }
        }
    }
}

#[test]
#[ignore = "installs about 90 npm libraries; run by hand (see the module doc)"]
fn survey_of_npm_libraries() {
    let work = work_dir();
    install(&work);
    assert!(
        esbuild().is_file(),
        "esbuild is missing: npm ci --ignore-scripts --prefix web"
    );
    let cache_dir = work.join("cache");
    let _ = fs::remove_dir_all(&cache_dir);
    let compiler = Compiler::new(Cache::new(cache_dir)).unwrap_or_else(|e| panic!("{e}"));
    let entries = entries();
    assert!(entries.len() >= 60, "{} entries", entries.len());
    let mut lines = Vec::new();
    let mut counts = std::collections::BTreeMap::<Verdict, usize>::new();
    for entry in &entries {
        let dir = pack_dir(&work, entry);
        let report = compiler.compile(
            &CompileRequest {
                pack_name: "survey",
                pack_dir: &dir,
                npm: entry,
            },
            &mut |_| {},
        );
        let (verdict, detail) = judge(&work, entry, &report);
        *counts.entry(verdict).or_default() += 1;
        let line = format!("| {entry} | {} | {detail} |", verdict.label());
        println!("{line}");
        lines.push(line);
    }
    let summary: Vec<String> = [
        Verdict::Working,
        Verdict::FailsAtCall,
        Verdict::CorrectlyRefused,
        Verdict::FalselyRefused,
        Verdict::Broken,
    ]
    .iter()
    .map(|v| format!("{}: {}", v.label(), counts.get(v).copied().unwrap_or(0)))
    .collect();
    let summary = format!("{} libraries; {}", entries.len(), summary.join(", "));
    println!("{summary}");
    let report = format!(
        "# Compiler admission survey\n\n{summary}\n\n| entry | verdict | detail |\n|---|---|---|\n{}\n",
        lines.join("\n")
    );
    fs::write(work.join("report.md"), report).unwrap_or_else(|e| panic!("report.md: {e}"));
    assert_eq!(
        counts.get(&Verdict::Broken).copied().unwrap_or(0),
        0,
        "a library was admitted but does not load"
    );
}
