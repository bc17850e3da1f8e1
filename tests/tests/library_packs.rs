//! The guest library packs of issue 19 (zod, Day.js, uuid, Ramda, validator.js, Mustache), end
//! to end: each compiles from the checkout's `packs/` with its libraries from
//! `npm ci --ignore-scripts --prefix packs`, discovery serves it, and a body that imports it
//! the way its SKILL.md says gets the library's real answers inside the guest.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use nodetool_compiler::{Cache, Compiler, Outcome, npm_entries};
use nodetool_discovery::{
    DiscoveredCatalog, DiscoveryOptions, RootKind, SearchRoot, discover_catalog,
};
use nodetool_guest::{Capabilities, Dispatchers, RunLimits, RunRequest, Sandbox};
use nodetool_protocol::catalog::Declaration;
use nodetool_protocol::run::RunError;
use nodetool_protocol::value::Value;
use nodetool_runtime::SandboxModuleCatalog;
use serde_json::{Value as Json, json};

/// The packs this file covers, by library.
const PACKS: [(&str, &str); 7] = [
    ("@nodetool-ai/sandbox-zod", "zod"),
    ("@nodetool-ai/sandbox-dayjs", "dayjs"),
    ("@nodetool-ai/sandbox-uuid", "uuid"),
    ("@nodetool-ai/sandbox-ramda", "ramda"),
    ("@nodetool-ai/sandbox-validator", "validator"),
    ("@nodetool-ai/sandbox-mustache", "mustache"),
    // Issue 23's chrono (a guest pack: no Rust crate reads dates as chrono-node does).
    ("@nodetool-ai/sandbox-chrono", "chrono-node"),
];

fn packs_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../packs")
        .canonicalize()
        .unwrap_or_else(|e| panic!("the packs directory: {e}"))
}

fn roots() -> [SearchRoot; 1] {
    [SearchRoot {
        path: packs_root(),
        kind: RootKind::Shipped,
        label: "shipped".into(),
    }]
}

/// The packs compiled once per test process into a cache of this file's own.
fn catalog() -> &'static DiscoveredCatalog {
    static CATALOG: OnceLock<DiscoveredCatalog> = OnceLock::new();
    CATALOG.get_or_init(|| {
        assert!(
            packs_root().join("node_modules/zod").is_dir(),
            "packs/node_modules is not installed: run `npm ci --ignore-scripts --prefix packs`"
        );
        let cache = Cache::new(Path::new(env!("CARGO_TARGET_TMPDIR")).join("library-packs-cache"));
        let compiler = Compiler::new(cache.clone()).unwrap_or_else(|e| panic!("{e}"));
        let ours: BTreeSet<&str> = PACKS.iter().map(|(p, _)| *p).collect();
        let entries: Vec<_> = npm_entries(&roots())
            .into_iter()
            .filter(|e| ours.contains(e.pack_name.as_str()))
            .collect();
        assert_eq!(entries.len(), PACKS.len(), "{entries:#?}");
        for entry in &entries {
            let report = compiler.compile(&entry.request(), &mut |_| {});
            assert!(
                report.outcome != Outcome::Skipped && report.store_error.is_none(),
                "{} did not compile: {report:#?}",
                entry.specifier
            );
        }
        let trusted = BTreeSet::new();
        discover_catalog(
            &roots(),
            &DiscoveryOptions {
                compiled: &cache,
                trusted_packs: &trusted,
            },
        )
    })
}

fn run(code: &str) -> Result<Json, RunError> {
    let catalog = catalog();
    let declarations: Vec<Declaration> = nodetool_guest::body_imports(code)
        .unwrap_or_else(|e| panic!("{e:?}"))
        .into_iter()
        .map(|i| Declaration::of(&i.specifier))
        .collect();
    let resolution = catalog.resolve_for_execution(&declarations);
    Sandbox::new()
        .run(RunRequest {
            code,
            resolution: &resolution,
            inputs: &Value::Null,
            limits: RunLimits::STANDARD,
            capabilities: Capabilities::default(),
            dispatchers: Dispatchers::default(),
            cancel: None,
        })
        .result
        .map(|v| serde_json::to_value(&v).unwrap_or(Json::Null))
}

fn ok(code: &str) -> Json {
    run(code).unwrap_or_else(|e| panic!("the body failed: {e:?}\n{code}"))
}

#[test]
fn zod_parses_validates_and_reports_issues() {
    let got = ok(r#"
        import { z } from "@nodetool-ai/sandbox-zod";
        const User = z.object({ name: z.string().min(2), age: z.number().int().nonnegative(), email: z.email().optional() });
        const good = User.parse({ name: "Ada", age: 36, extra: true });
        const bad = User.safeParse({ name: "A", age: -1, email: "nope" });
        const coerced = z.coerce.number().parse("42");
        return { good, ok: bad.success, paths: bad.error.issues.map((i) => i.path.join(".")).sort(), coerced };
    "#);
    assert_eq!(
        got,
        json!({ "good": { "name": "Ada", "age": 36 }, "ok": false, "paths": ["age", "email", "name"], "coerced": 42 })
    );
}

#[test]
fn dayjs_formats_adds_and_diffs() {
    let got = ok(r#"
        import dayjs from "@nodetool-ai/sandbox-dayjs";
        const d = dayjs("2024-01-31T09:30:00");
        return [d.format("YYYY-MM-DD HH:mm dddd"), d.add(1, "month").format("YYYY-MM-DD"), dayjs("2024-03-01").diff(d, "day"), d.isBefore("2024-02-01"), dayjs("nonsense").isValid()];
    "#);
    assert_eq!(
        got,
        json!(["2024-01-31 09:30 Wednesday", "2024-02-29", 29, true, false])
    );
}

#[test]
fn uuid_generates_v4_and_v7_and_checks_them() {
    let got = ok(r#"
        import { v4, v5, v7, validate, version, NIL } from "@nodetool-ai/sandbox-uuid";
        const ids = new Set(Array.from({ length: 100 }, () => v4()));
        const a = v7(), b = v7();
        return [ids.size, [...ids].every((id) => validate(id) && version(id) === 4), version(a), a < b || a === b,
                v5("hello", "6ba7b811-9dad-11d1-80b4-00c04fd430c8"), validate("not-a-uuid"), NIL];
    "#);
    assert_eq!(
        got,
        json!([
            100,
            true,
            7,
            true,
            "074171de-bc84-5ea4-b636-1135477620e1",
            false,
            "00000000-0000-0000-0000-000000000000"
        ])
    );
}

#[test]
fn ramda_pipes_groups_and_sorts() {
    let got = ok(r#"
        import * as R from "@nodetool-ai/sandbox-ramda";
        const rows = [{ team: "a", n: 3 }, { team: "b", n: 1 }, { team: "a", n: 2 }];
        const total = R.pipe(R.groupBy(R.prop("team")), R.map(R.pipe(R.pluck("n"), R.sum)));
        return [total(rows), R.sortBy(R.prop("n"), rows).map((r) => r.n), R.evolve({ n: R.inc }, rows[0])];
    "#);
    assert_eq!(
        got,
        json!([{ "a": 5, "b": 1 }, [1, 2, 3], { "team": "a", "n": 4 }])
    );
}

#[test]
fn validator_checks_and_sanitizes_strings() {
    let got = ok(r#"
        import validator from "@nodetool-ai/sandbox-validator";
        return [validator.isEmail("ada@example.com"), validator.isEmail("ada@"), validator.isURL("https://nodetool.ai/x?y=1"),
                validator.isUUID("9342d47a-1bab-5709-9869-c840b2eac501"), validator.isInt("12", { min: 10 }), validator.escape("<b>&</b>"),
                validator.normalizeEmail("Ada.Lovelace+x@GMAIL.com")];
    "#);
    assert_eq!(
        got,
        json!([
            true,
            false,
            true,
            true,
            true,
            "&lt;b&gt;&amp;&lt;&#x2F;b&gt;",
            "adalovelace@gmail.com"
        ])
    );
}

#[test]
fn mustache_renders_sections_partials_and_escapes() {
    let got = ok(r#"
        import Mustache from "@nodetool-ai/sandbox-mustache";
        const view = { name: "<Ada>", items: [{ n: 1 }, { n: 2 }], none: [] };
        return [Mustache.render("Hi {{name}} / {{{name}}}", view), Mustache.render("{{#items}}[{{n}}]{{/items}}{{^none}}empty{{/none}}", view),
                Mustache.render("{{> line}}!", view, { line: "({{name}})" })];
    "#);
    assert_eq!(
        got,
        json!(["Hi &lt;Ada&gt; / <Ada>", "[1][2]empty", "(&lt;Ada&gt;)!"])
    );
}

/// The body of every ```js block of a pack's SKILL.md.
fn skill_examples(pack: &str) -> Vec<String> {
    let dir = pack.trim_start_matches("@nodetool-ai/");
    let path = packs_root().join("@nodetool-ai").join(dir).join("SKILL.md");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    nodetool_tests::skill::js_blocks(&text)
}

/// Every example of the six SKILL.md files runs and gives what its comment says.
#[test]
fn every_skill_example_gives_what_it_promises() {
    let expected: [(&str, Vec<Json>); 6] = [
        (
            "@nodetool-ai/sandbox-zod",
            vec![
                Json::Null,
                json!({ "good": { "name": "Ada", "age": 36 }, "ok": false, "problems": ["name", "age"] }),
                json!({ "level": "low", "events": [{ "type": "key", "key": "a" }, { "type": "click", "x": 1, "y": 2 }] }),
                json!({ "ok": { "qty": 3, "price": 2.5, "total": 7.5 }, "message": "order too large" }),
            ],
        ),
        (
            "@nodetool-ai/sandbox-dayjs",
            vec![
                Json::Null,
                json!([
                    "2024-01-31 09:30",
                    "Wednesday 31 January 2024 at 9:30 AM",
                    false
                ]),
                json!(["2024-02-29", "2024-01-17", "2024-01-01", "2024-12-31 23:59"]),
                json!({ "days": 29, "months": true, "before": true, "sameMonth": true }),
            ],
        ),
        (
            "@nodetool-ai/sandbox-uuid",
            vec![
                Json::Null,
                json!({ "random": 4, "ordered": true, "valid": true }),
                json!(["491baa2d-9a76-5f5d-9da5-48f402699658", true]),
                json!([
                    true,
                    5,
                    true,
                    false,
                    "00000000-0000-0000-0000-000000000000",
                    "ffffffff-ffff-ffff-ffff-ffffffffffff"
                ]),
            ],
        ),
        (
            "@nodetool-ai/sandbox-ramda",
            vec![
                Json::Null,
                json!(30),
                json!({ "sums": { "a": 5, "b": 1 }, "counts": { "a": 2, "b": 1 }, "sorted": [3, 2, 1] }),
                json!({ "port": 5432, "moved": "db.internal", "bumped": { "db": { "host": "localhost", "port": 5433 }, "debug": true }, "merged": { "host": "localhost", "port": 6543 } }),
            ],
        ),
        (
            "@nodetool-ai/sandbox-validator",
            vec![
                Json::Null,
                json!({ "email": [true, false], "url": true, "ip": [true, true], "int": true, "iso": true }),
                json!([
                    "&lt;b&gt;Tom &amp; Jerry&lt;&#x2F;b&gt;",
                    "adalovelace@gmail.com",
                    42,
                    false
                ]),
                json!([{ "row": 0, "problems": [] }, { "row": 1, "problems": ["email", "site"] }]),
            ],
        ),
        (
            "@nodetool-ai/sandbox-mustache",
            vec![
                Json::Null,
                json!("Hi &lt;Ada&gt; (<Ada>), 3 new, ."),
                json!(["- a: 1\n- b: 2\n[x][y]", "nothing\n"]),
                json!({ "html": "* A &amp; B <https:&#x2F;&#x2F;a.example&#x2F;?x&#x3D;1&amp;y&#x3D;2>", "text": "* A & B <https://a.example/?x=1&y=2>" }),
            ],
        ),
    ];
    for (pack, want) in expected {
        let got: Vec<Json> = skill_examples(pack).iter().map(|b| ok(b)).collect();
        assert_eq!(got, want, "{pack}");
    }
}

/// A CommonJS library's functions can be imported by name as well as through its default.
#[test]
fn commonjs_functions_import_by_name() {
    let got = ok(r#"
        import validator, { isEmail, escape } from "@nodetool-ai/sandbox-validator";
        import { render } from "@nodetool-ai/sandbox-mustache";
        return [isEmail("a@b.co"), escape("<") , validator.isEmail === isEmail, render("{{x}}!", { x: 1 })];
    "#);
    assert_eq!(got, json!([true, "&lt;", true, "1!"]));
}

/// chrono-node reads dates in the guest as it does in Node (TZ=UTC), its facade exports
/// `parseDate` and `parse`, and every example of its SKILL.md gives what its comment says.
#[test]
fn chrono_reads_natural_language_dates() {
    let got = ok(r#"
        import * as chrono from "@nodetool-ai/sandbox-chrono";
        import { parseDate, parse } from "@nodetool-ai/sandbox-chrono";
        const ref = new Date("2024-05-01T12:00:00Z");
        const hits = parse("Call at 9:30pm EST on Friday, then 7 days later", ref, { forwardDate: true });
        return [parseDate === chrono.parseDate, parseDate("the day after tomorrow at noon", ref).toISOString(),
                hits.map((h) => [h.text, h.index, h.start.date().toISOString(), h.start.isCertain("hour")]),
                parseDate("Sat Aug 17 2013 18:40:39 GMT+0900 (JST)").toISOString(), parseDate("", ref), chrono.de.parseDate("morgen um 9 Uhr", ref).toISOString()];
    "#);
    assert_eq!(
        got,
        json!([
            true,
            "2024-05-03T12:00:00.000Z",
            [
                [
                    "at 9:30pm EST on Friday,",
                    5,
                    "2024-05-04T02:30:00.000Z",
                    true
                ],
                ["7 days later", 35, "2024-05-08T12:00:00.000Z", false]
            ],
            "2013-08-17T09:40:39.000Z",
            null,
            "2024-05-02T09:00:00.000Z"
        ])
    );
    let want = [
        Json::Null,
        json!([
            "2024-05-10T15:00:00.000Z",
            "2024-05-15T12:00:00.000Z",
            "2024-06-03T07:00:00.000Z",
            null
        ]),
        json!([
            { "text": "tomorrow at 10am", "index": 8, "start": "2024-05-02T10:00:00.000Z", "end": null },
            { "text": "May 20 - 22", "index": 31, "start": "2024-05-20T12:00:00.000Z", "end": "2024-05-22T12:00:00.000Z" }
        ]),
        json!(["2024-05-02T09:00:00.000Z", null]),
    ];
    let examples: Vec<Json> = skill_examples("@nodetool-ai/sandbox-chrono")
        .iter()
        .map(|b| ok(b))
        .collect();
    assert_eq!(examples, want);
}
