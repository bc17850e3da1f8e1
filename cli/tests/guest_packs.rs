//! The shipped guest library packs (npm libraries compiled into sandbox modules) through
//! `nodetool run` and `nodetool packs compile`, as a new user would call them: a fresh home and
//! cache per test, so each pack compiles on first use.
//!
//! The libraries come from `packs/node_modules`, installed by `npm ci --ignore-scripts --prefix
//! packs` (the README's setup; `.ci/run` does it before the tests). Nothing here touches the
//! network.

use std::path::{Path, PathBuf};
use std::process::Output;

use nodetool_tests::world::{World, copy_dir, must};
use serde_json::{Value, json};

const PACKS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../packs");
/// The compiler's fixture packs and the tiny libraries they name, authored in
/// `compiler/tests/fixtures/{packs,libs}`.
const COMPILER_FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../compiler/tests/fixtures");

/// A fresh world of the harness (whose cache is the compiler's cache) for a series of
/// invocations.
struct Home(World);

impl Home {
    fn new() -> Home {
        let packs = Path::new(PACKS).join("node_modules");
        assert!(
            packs.join("js-yaml").is_dir(),
            "packs/node_modules is not installed: run `npm ci --ignore-scripts --prefix packs` (the README's setup; .ci/run does it)"
        );
        Home(World::new())
    }

    fn nodetool(&self, args: &[&str], stdin: &str, shipped: &Path) -> Output {
        let output = assert_cmd::Command::from_std(self.0.command(env!("CARGO_BIN_EXE_nodetool")))
            .env("TZ", "UTC")
            .env("NODETOOL_SHIPPED_PACKS_DIR", shipped)
            .args(args)
            .write_stdin(stdin)
            .output();
        let output = must(output, "run nodetool");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!stderr.contains("panicked"), "nodetool panicked: {stderr}");
        output
    }

    /// Runs a body against the shipped packs: (the JSON answer, stderr, exit status).
    fn run(&self, code: &str) -> (Value, String, i32) {
        let output = self.nodetool(&["run", "--json"], code, Path::new(PACKS));
        let stdout = String::from_utf8_lossy(&output.stdout);
        let json: Value = must(
            serde_json::from_str(stdout.trim()),
            &format!("parse {stdout}"),
        );
        (
            json,
            String::from_utf8_lossy(&output.stderr).into_owned(),
            output.status.code().unwrap_or(-1),
        )
    }

    fn cache_root(&self) -> PathBuf {
        self.0.cache().join("nodetool/sandbox-modules")
    }
}

#[test]
fn yaml_compiles_on_first_use_and_is_cached_after() {
    let home = Home::new();
    let body = "import { load, dump } from '@nodetool-ai/sandbox-yaml';\n\
                const v = load('a: 1\\nb: [x, y]');\n\
                return { v, text: dump({ k: [1, 2] }) };";
    let (out, stderr, code) = home.run(body);
    assert_eq!(code, 0, "{out} {stderr}");
    assert_eq!(
        out["result"],
        json!({ "v": { "a": 1, "b": ["x", "y"] }, "text": "k:\n  - 1\n  - 2\n" })
    );
    assert!(
        stderr.contains("compiling @nodetool-ai/sandbox-yaml (js-yaml) on first use"),
        "{stderr}"
    );
    assert!(home.cache_root().join("entries").is_dir());
    // The second run finds it in the cache: no compile, same answer.
    let (again, stderr, code) = home.run(body);
    assert_eq!(code, 0);
    assert_eq!(again["result"], out["result"]);
    assert!(!stderr.contains("compiling"), "{stderr}");
    // js-yaml 5 has no default export: the compiled module's default is its namespace.
    let (out, _, code) =
        home.run("import yaml from '@nodetool-ai/sandbox-yaml';\nreturn yaml.load('a: [1, 2]');");
    assert_eq!(code, 0, "{out}");
    assert_eq!(out["result"], json!({ "a": [1, 2] }));
}

#[test]
fn dates_run_the_whole_date_fns_entry() {
    let home = Home::new();
    let (out, stderr, code) = home.run(
        "import { parseISO, addMonths, format, differenceInCalendarDays, eachDayOfInterval } from '@nodetool-ai/sandbox-dates';\n\
         const jan31 = parseISO('2024-01-31T09:30:00');\n\
         return {\n\
           next: format(addMonths(jan31, 1), 'yyyy-MM-dd HH:mm'),\n\
           long: format(jan31, 'EEEE d MMMM yyyy'),\n\
           days: differenceInCalendarDays(parseISO('2024-03-01'), parseISO('2024-02-01')),\n\
           range: eachDayOfInterval({ start: parseISO('2024-02-27'), end: parseISO('2024-03-01') }).map((d) => format(d, 'MM-dd')),\n\
         };",
    );
    assert_eq!(code, 0, "{out} {stderr}");
    assert_eq!(
        out["result"],
        json!({
            "next": "2024-02-29 09:30",
            "long": "Wednesday 31 January 2024",
            "days": 29,
            "range": ["02-27", "02-28", "02-29", "03-01"],
        })
    );
}

#[test]
fn markdown_renders_html() {
    let home = Home::new();
    let (out, stderr, code) = home.run(
        "import { marked, lexer } from '@nodetool-ai/sandbox-markdown';\n\
         return {\n\
           html: marked.parse('# Title\\n\\nSome *emphasis*.\\n\\n- one\\n- two\\n'),\n\
           headings: lexer('# A\\ntext\\n## B\\n').filter((t) => t.type === 'heading').map((t) => t.text),\n\
         };",
    );
    assert_eq!(code, 0, "{out} {stderr}");
    assert_eq!(
        out["result"],
        json!({
            "html": "<h1>Title</h1>\n<p>Some <em>emphasis</em>.</p>\n<ul>\n<li>one</li>\n<li>two</li>\n</ul>\n",
            "headings": ["A", "B"],
        })
    );
}

#[test]
fn packs_compile_compiles_every_shipped_guest_pack() {
    let home = Home::new();
    let output = home.nodetool(&["packs", "compile", "--json"], "", Path::new(PACKS));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let v: Value = must(serde_json::from_str(stdout.trim()), "parse the answer");
    let modules = v["modules"].as_array().cloned().unwrap_or_default();
    let npm: Vec<&str> = modules.iter().filter_map(|m| m["npm"].as_str()).collect();
    for lib in ["js-yaml", "date-fns", "marked"] {
        assert!(npm.contains(&lib), "{lib} missing from {stdout}");
    }
    for m in &modules {
        assert_eq!(m["outcome"], "compiled", "{m}");
        assert!(m["bytes"].as_u64().is_some_and(|b| b > 0), "{m}");
        assert!(
            m["exports"].as_array().is_some_and(|e| !e.is_empty()),
            "{m}"
        );
        assert_eq!(m["packName"], m["specifier"], "{m}");
    }
    // Again: everything is served from the cache. Human output is one line per module (and an
    // indented line per warning).
    let output = home.nodetool(&["packs", "compile"], "", Path::new(PACKS));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(0));
    let heads: Vec<&str> = stdout.lines().filter(|l| !l.starts_with(' ')).collect();
    assert_eq!(heads.len(), modules.len(), "{stdout}");
    assert!(heads.iter().all(|l| l.starts_with("cached ")), "{stdout}");
    // And `packs list` now shows them compiled, not pending.
    let output = home.nodetool(&["packs", "list", "--json"], "", Path::new(PACKS));
    let list: Value = must(
        serde_json::from_slice(&output.stdout),
        "parse the packs list",
    );
    let codes: Vec<&str> = list["diagnostics"]
        .as_array()
        .map(|d| d.iter().filter_map(|s| s["code"].as_str()).collect())
        .unwrap_or_default();
    assert!(!codes.contains(&"pending-compile"), "{codes:?}");
    assert!(codes.contains(&"npm-module-compiled"), "{codes:?}");
}

/// A private copy of the compiler fixtures laid out as installed packs resolve them: the packs
/// in `packs/`, their libraries in a `node_modules` beside it. Returns (the copy, its packs
/// root).
fn compiler_fixtures() -> (World, String) {
    let world = World::new();
    let source = Path::new(COMPILER_FIXTURES);
    copy_dir(&source.join("packs"), &world.path().join("packs"));
    copy_dir(&source.join("libs"), &world.path().join("node_modules"));
    let packs = world.path().join("packs").to_string_lossy().into_owned();
    (world, packs)
}

#[test]
fn packs_compile_reports_skips_and_exits_1() {
    let (_fixtures, fixture_packs) = compiler_fixtures();
    let fixture_packs = fixture_packs.as_str();
    let home = Home::new();
    let output = home.nodetool(
        &["packs", "compile", "--json", "--packs", fixture_packs],
        "",
        home.0.shipped(),
    );
    assert_eq!(output.status.code(), Some(1));
    let v: Value = must(serde_json::from_slice(&output.stdout), "parse the answer");
    let by_pack = |name: &str| {
        v["modules"]
            .as_array()
            .and_then(|m| m.iter().find(|m| m["packName"] == name).cloned())
            .unwrap_or_else(|| panic!("{name} missing from {v}"))
    };
    let builtin = by_pack("@fixture/builtin");
    assert_eq!(builtin["outcome"], "skipped");
    assert_eq!(builtin["code"], "npm-module-builtin-import");
    assert!(
        builtin["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("builtin-lib imports node:fs, node:path")),
        "{builtin}"
    );
    assert!(builtin.get("bytes").is_none() && builtin.get("exports").is_none());
    let clean = by_pack("@fixture/clean");
    assert_eq!(clean["outcome"], "compiled");
    assert_eq!(clean["exports"], json!(["default", "double", "inc"]));
    assert!(clean.get("code").is_none());
    let detect = by_pack("@fixture/detect");
    assert_eq!(detect["outcome"], "compiled");
    assert!(
        detect["message"]
            .as_str()
            .is_some_and(|m| m.contains("feature-detects process")),
        "{detect}"
    );
    // Nothing is compiled on first use outside the shipped root: an installed pack that is not
    // compiled stays `pending-compile` until `packs compile` runs.
    let fresh = Home::new();
    let output = fresh.nodetool(
        &["run", "--json", "--packs", fixture_packs],
        "import { inc } from '@fixture/clean';\nreturn inc(1);",
        home.0.shipped(),
    );
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("compiling"), "{stderr}");
    // After `packs compile`, the same body runs.
    fresh.nodetool(
        &["packs", "compile", "--packs", fixture_packs],
        "",
        home.0.shipped(),
    );
    let output = fresh.nodetool(
        &["run", "--json", "--packs", fixture_packs],
        "import { inc } from '@fixture/clean';\nreturn inc(1);",
        home.0.shipped(),
    );
    let v: Value = must(serde_json::from_slice(&output.stdout), "parse the run");
    assert_eq!(v["result"], 2, "{v}");
}

#[test]
fn guest_pack_versions_match_the_lockfile() {
    let read = |p: &Path| -> Value {
        must(
            serde_json::from_str(&must(std::fs::read_to_string(p), "read package.json")),
            "parse package.json",
        )
    };
    let root = read(&Path::new(PACKS).join("package.json"));
    let lock = read(&Path::new(PACKS).join("package-lock.json"));
    let scope = Path::new(PACKS).join("@nodetool-ai");
    let mut seen = 0;
    for entry in must(std::fs::read_dir(&scope), "read packs/@nodetool-ai") {
        let dir = must(entry, "read a pack dir").path();
        let pack = read(&dir.join("package.json"));
        let modules = pack["nodetool"]["sandboxModules"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        for m in modules.iter().filter(|m| m.get("npm").is_some()) {
            seen += 1;
            let lib = m["npm"].as_str().unwrap_or_default();
            let wanted = &pack["dependencies"][lib];
            assert!(
                wanted.is_string(),
                "{dir:?} does not declare {lib} in dependencies"
            );
            assert_eq!(
                &root["dependencies"][lib], wanted,
                "packs/package.json and {dir:?} disagree on {lib}"
            );
            assert_eq!(
                &lock["packages"][format!("node_modules/{lib}")]["version"],
                wanted,
                "the lockfile does not pin {lib} at {wanted}"
            );
            assert_eq!(pack["nodetool"]["recommended"], true, "{dir:?}");
            assert_eq!(
                modules.len(),
                1,
                "{dir:?}: a guest library pack has one module"
            );
            assert_eq!(m["name"], ".", "{dir:?}");
            assert!(dir.join("SKILL.md").is_file(), "{dir:?} has no SKILL.md");
        }
    }
    assert!(seen >= 3, "the yaml, dates and markdown packs at least");
}
