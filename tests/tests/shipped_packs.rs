//! The packs the repository ships (`packs/`, a node_modules-style root) and the example bodies
//! in `examples/`, end to end: discovery finds the shipped root clean, every example body runs
//! in the guest with exactly what the catalog resolves for its static imports, and the geo
//! pack's numbers are checked against independent Rust implementations and published values.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use nodetool_compiler::{Cache, Compiler, npm_entries};
use nodetool_discovery::{
    DiscoveredCatalog, DiscoveryOptions, RootKind, SearchRoot, discover_catalog,
};
use nodetool_guest::{Capabilities, Dispatchers, RunLimits, RunOutcome, RunRequest, Sandbox};
use nodetool_jssource::validate::{Severity, validate_graph};
use nodetool_protocol::catalog::{Declaration, ModuleKind, Resolution, StatusCode, StatusLevel};
use nodetool_protocol::limits::{AUTHORED_JS_BYTES, SKILL_BYTES};
use nodetool_protocol::run::{RunError, RunErrorCode};
use nodetool_protocol::value::Value;
use nodetool_runtime::{NoCompiledModules, SandboxModuleCatalog};
use serde_json::{Value as Json, json};

const GEO: &str = "@nodetool-ai/sandbox-geo";
const POLYLINE: &str = "@nodetool-ai/sandbox-geo/polyline";

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| panic!("the tests crate has no parent directory"))
}

fn read(relative: &str) -> String {
    let path = workspace().join(relative);
    fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {path:?}: {e}"))
}

fn shipped_roots() -> [SearchRoot; 1] {
    [SearchRoot {
        path: workspace().join("packs"),
        kind: RootKind::Shipped,
        label: "shipped".into(),
    }]
}

/// The compiler's cache with every shipped guest library pack compiled, once per test process
/// (under the target dir's test scratch space, so later runs are warm hits). Their libraries
/// come from `npm ci --ignore-scripts --prefix packs`.
fn shipped_cache() -> &'static Cache {
    static CACHE: OnceLock<Cache> = OnceLock::new();
    CACHE.get_or_init(|| {
        assert!(
            workspace().join("packs/node_modules/js-yaml").is_dir(),
            "packs/node_modules is not installed: run `npm ci --ignore-scripts --prefix packs` (the README's setup; .ci/run does it)"
        );
        let cache = Cache::new(Path::new(env!("CARGO_TARGET_TMPDIR")).join("shipped-packs-cache"));
        let compiler = Compiler::new(cache.clone()).unwrap_or_else(|e| panic!("{e}"));
        for entry in npm_entries(&shipped_roots()) {
            let report = compiler.compile(&entry.request(), &mut |_| {});
            assert!(
                report.code().is_none() && report.store_error.is_none(),
                "{} did not compile: {report:#?}",
                entry.specifier
            );
        }
        cache
    })
}

fn shipped_catalog() -> DiscoveredCatalog {
    let trusted = BTreeSet::new();
    discover_catalog(
        &shipped_roots(),
        &DiscoveryOptions {
            compiled: shipped_cache(),
            trusted_packs: &trusted,
        },
    )
}

/// What the catalog resolves for a body's static imports, as a front end would ask.
fn resolution_of(catalog: &DiscoveredCatalog, code: &str) -> Resolution {
    let imports = nodetool_guest::body_imports(code)
        .unwrap_or_else(|e| panic!("the body does not parse: {e:?}"));
    let declarations: Vec<Declaration> = imports
        .iter()
        .map(|i| Declaration::of(i.specifier.clone()))
        .collect();
    catalog.resolve_for_execution(&declarations)
}

fn run_with(resolution: &Resolution, code: &str, inputs: Json) -> RunOutcome {
    Sandbox::new().run(RunRequest {
        code,
        resolution,
        inputs: &Value::from_json(inputs),
        limits: RunLimits::STANDARD,
        capabilities: Capabilities::default(),
        dispatchers: Dispatchers::default(),
        cancel: None,
    })
}

/// Runs a body against the shipped catalog, as `nodetool run` would.
fn run(catalog: &DiscoveredCatalog, code: &str, inputs: Json) -> Result<Json, RunError> {
    let resolution = resolution_of(catalog, code);
    run_with(&resolution, code, inputs)
        .result
        .map(|v| v.to_json())
}

fn ok(catalog: &DiscoveredCatalog, code: &str) -> Json {
    run(catalog, code, Json::Null).unwrap_or_else(|e| panic!("run failed: {e:?}\n{code}"))
}

fn failed(result: Result<Json, RunError>) -> RunError {
    match result {
        Ok(v) => panic!("the run succeeded with {v}"),
        Err(e) => e,
    }
}

fn num(v: &Json, pointer: &str) -> f64 {
    v.pointer(pointer)
        .and_then(Json::as_f64)
        .unwrap_or_else(|| panic!("{pointer} is not a number in {v}"))
}

fn assert_close(got: f64, want: f64, tolerance: f64, what: &str) {
    assert!(
        (got - want).abs() <= tolerance,
        "{what}: got {got}, want {want} ± {tolerance}"
    );
}

// ---------------------------------------------------------------------------------------------
// Independent references.

const EARTH_RADIUS_KM: f64 = 6371.0088;

fn haversine_km(a: (f64, f64), b: (f64, f64)) -> f64 {
    let (p1, p2) = (a.0.to_radians(), b.0.to_radians());
    let dp = p2 - p1;
    let dl = (b.1 - a.1).to_radians();
    let h = (dp / 2.0).sin().powi(2) + p1.cos() * p2.cos() * (dl / 2.0).sin().powi(2);
    2.0 * EARTH_RADIUS_KM * h.sqrt().asin()
}

/// Google's encoded polyline algorithm, as its documentation states it (precision 5).
fn encode_polyline(points: &[(f64, f64)]) -> String {
    fn value(out: &mut String, v: i64) {
        let mut v = if v < 0 { !(v << 1) } else { v << 1 };
        while v >= 0x20 {
            out.push(char::from(
                u8::try_from((0x20 | (v & 0x1f)) + 63).unwrap_or(b'?'),
            ));
            v >>= 5;
        }
        out.push(char::from(u8::try_from(v + 63).unwrap_or(b'?')));
    }
    let mut out = String::new();
    let (mut last_lat, mut last_lon) = (0i64, 0i64);
    for &(lat, lon) in points {
        // f64::round rounds half away from zero, as the reference does.
        let (la, lo) = ((lat * 1e5).round() as i64, (lon * 1e5).round() as i64);
        value(&mut out, la - last_lat);
        value(&mut out, lo - last_lon);
        (last_lat, last_lon) = (la, lo);
    }
    out
}

// ---------------------------------------------------------------------------------------------
// The shipped root.

#[test]
fn the_shipped_root_discovers_clean() {
    let catalog = shipped_catalog();
    // Once compiled, a guest library pack's only statuses are its `npm-module-compiled` note
    // and the compiler's warnings (a global read only at call time, say).
    assert!(
        catalog
            .diagnostics()
            .iter()
            .all(
                |s| (s.code == StatusCode::NpmModuleCompiled && s.status == StatusLevel::Ready)
                    || s.code == StatusCode::NpmModuleWarning
            ),
        "the shipped packs must produce no diagnostic but compiled notes: {:#?}",
        catalog.diagnostics()
    );
    // Before compiling, those packs are pending, and only those.
    let trusted = BTreeSet::new();
    let fresh = discover_catalog(
        &shipped_roots(),
        &DiscoveryOptions {
            compiled: &NoCompiledModules,
            trusted_packs: &trusted,
        },
    );
    assert!(
        fresh
            .diagnostics()
            .iter()
            .all(|s| s.code == StatusCode::PendingCompile),
        "{:#?}",
        fresh.diagnostics()
    );
    for specifier in [GEO, POLYLINE] {
        let summary = catalog
            .summaries()
            .iter()
            .find(|s| s.specifier == specifier)
            .unwrap_or_else(|| panic!("no summary for {specifier}: {:#?}", catalog.summaries()));
        assert_eq!(summary.pack_name, GEO);
        assert_eq!(summary.pack_version.as_deref(), Some("1.0.0"));
        assert_eq!(summary.kind, ModuleKind::Js);
        assert!(
            summary
                .description
                .as_deref()
                .is_some_and(|d| d.contains("Great-circle")),
            "{summary:#?}"
        );
    }
    // The internal helper is never a specifier.
    assert!(
        catalog
            .summaries()
            .iter()
            .all(|s| !s.specifier.contains("internal")),
        "{:#?}",
        catalog.summaries()
    );
}

#[test]
fn the_geo_package_json_is_a_recommended_sandbox_pack() {
    let package: Json = serde_json::from_str(&read("packs/@nodetool-ai/sandbox-geo/package.json"))
        .unwrap_or_else(|e| panic!("package.json: {e}"));
    assert_eq!(package["name"], GEO);
    assert_eq!(package["version"], "1.0.0");
    assert_eq!(package["keywords"], json!(["nodetool-sandbox-pack"]));
    assert_eq!(package["files"], json!(["SKILL.md", "sandbox"]));
    assert_eq!(package["nodetool"]["recommended"], true);
    assert_eq!(package["nodetool"]["apiVersion"], 1);
    assert_eq!(
        package["nodetool"]["internal"],
        json!(["sandbox/internal/math.js"])
    );
    for file in [
        "sandbox/index.js",
        "sandbox/polyline.js",
        "sandbox/internal/math.js",
    ] {
        let path = workspace()
            .join("packs/@nodetool-ai/sandbox-geo")
            .join(file);
        let len = fs::metadata(&path)
            .unwrap_or_else(|e| panic!("{path:?}: {e}"))
            .len();
        assert!(len < AUTHORED_JS_BYTES, "{file} is {len} bytes");
    }
}

#[test]
fn the_geo_skill_documents_every_export() {
    let catalog = shipped_catalog();
    let disclosure = catalog
        .pack_skill(GEO)
        .unwrap_or_else(|| panic!("no skill for {GEO}"));
    let skill = disclosure.skill;
    assert_eq!(skill.name, "sandbox-geo");
    assert!(!skill.description.contains('\n'));
    assert!(skill.body.starts_with("# Geo\n"), "{}", skill.body);
    assert!(
        skill
            .body
            .contains("Specifier: `@nodetool-ai/sandbox-geo`. Import it at the top of the body.")
    );
    let text = read("packs/@nodetool-ai/sandbox-geo/SKILL.md");
    assert!((text.len() as u64) < SKILL_BYTES, "{} bytes", text.len());

    let headings: Vec<&str> = text.lines().filter_map(|l| l.strip_prefix("## ")).collect();
    let exports = [
        "haversine",
        "initialBearing",
        "finalBearing",
        "midpoint",
        "destination",
        "boundingBox",
        "pathLength",
    ];
    for export in exports {
        let prefix = format!("{export} — ");
        let found: Vec<&&str> = headings.iter().filter(|h| h.starts_with(&prefix)).collect();
        assert_eq!(found.len(), 1, "one `## {prefix}...` section: {headings:?}");
        let key = found[0].to_lowercase();
        let section = skill
            .sections
            .get(&key)
            .unwrap_or_else(|| panic!("no parsed section {key:?}"));
        assert_eq!(section.matches("```js").count(), 1, "{export}: {section}");
        assert!(section.contains(export), "{export}: {section}");
    }
    assert!(skill.sections.contains_key(POLYLINE), "{headings:?}");
    assert_eq!(headings.last(), Some(&"Gotchas"), "{headings:?}");
}

/// The `js` code blocks of a SKILL.md, in order; an unclosed block is a broken SKILL.md.
fn js_blocks(skill: &str) -> Vec<String> {
    assert_eq!(
        skill.lines().filter(|l| l.trim_end() == "```js").count(),
        nodetool_tests::skill::js_blocks(skill).len(),
        "an unclosed code block"
    );
    nodetool_tests::skill::js_blocks(skill)
}

#[test]
fn every_guest_library_skill_example_runs() {
    let catalog = shipped_catalog();
    let entries = npm_entries(&shipped_roots());
    assert!(entries.len() >= 3, "{entries:#?}");
    let mut results: std::collections::BTreeMap<String, Vec<Json>> = Default::default();
    for entry in &entries {
        let dir = entry.pack_name.trim_start_matches("@nodetool-ai/");
        let blocks = js_blocks(&read(&format!("packs/@nodetool-ai/{dir}/SKILL.md")));
        assert!(blocks.len() >= 3, "{dir}: {} examples", blocks.len());
        let ran = blocks
            .iter()
            .map(|b| {
                run(&catalog, b, Json::Null)
                    .unwrap_or_else(|e| panic!("{dir}: the example failed: {e:?}\n{b}"))
            })
            .collect();
        results.insert(dir.to_string(), ran);
    }
    let at = |pack: &str, i: usize| -> &Json { &results[pack][i] };
    // Spot checks of what the examples' comments promise.
    assert_eq!(
        at("sandbox-yaml", 3),
        &json!("name: nodetool\nnested:\n  x: 1\ntags:\n  - a\n  - b\n")
    );
    assert_eq!(at("sandbox-yaml", 2), &json!([{ "a": 1 }, { "a": 2 }]));
    assert_eq!(
        at("sandbox-dates", 1),
        &json!([
            "2024-01-31 09:30",
            "Wednesday 31 January 2024",
            "31st of Jan"
        ])
    );
    assert_eq!(
        at("sandbox-markdown", 2),
        &json!("<strong>bold</strong> text")
    );
    assert_eq!(
        at("sandbox-decimal", 1),
        &json!({ "total": "0.3", "exact": true, "line": "59.97", "sum": "6.6" })
    );
    assert_eq!(at("sandbox-jmespath", 2)["total"], json!(152));
    assert_eq!(
        at("sandbox-color", 3),
        &json!(["#ff0000", "#e8007b", "#ba00c2", "#7a00f4", "#0000ff"])
    );
    assert_eq!(
        at("sandbox-rrule", 1)["text"],
        json!("every week on Monday, Wednesday for 5 times")
    );
    assert_eq!(
        at("sandbox-stats", 2),
        &json!({ "quartiles": [4, 4.5, 5.5], "iqr": 1.5 })
    );
}

#[test]
fn every_skill_example_runs() {
    let catalog = shipped_catalog();
    let blocks = js_blocks(&read("packs/@nodetool-ai/sandbox-geo/SKILL.md"));
    assert!(blocks.len() >= 9, "{} blocks", blocks.len());
    let results: Vec<Json> = blocks.iter().map(|b| ok(&catalog, b)).collect();

    let by_import = |name: &str| -> &Json {
        let i = blocks
            .iter()
            .position(|b| b.starts_with(&format!("import {{ {name} }}")))
            .unwrap_or_else(|| panic!("no example importing only {name}"));
        &results[i]
    };
    assert_close(num(by_import("haversine"), "/km"), 343.56, 0.05, "km");
    assert_close(num(by_import("haversine"), "/mi"), 213.48, 0.05, "mi");
    assert_close(
        num(by_import("initialBearing"), ""),
        330.02,
        0.05,
        "bearing",
    );
    assert_close(num(by_import("finalBearing"), ""), 107.94, 0.05, "final");
    assert_close(num(by_import("midpoint"), "/lat"), 50.1886, 1e-4, "mid lat");
    assert_close(num(by_import("midpoint"), "/lon"), 1.1466, 1e-4, "mid lon");
    assert_close(num(by_import("destination"), "/lat"), 37.8197, 1e-4, "dest");
    assert_close(
        num(by_import("destination"), "/lon"),
        -122.2675,
        1e-4,
        "dest",
    );
    assert_eq!(
        by_import("boundingBox"),
        &json!({
            "box": { "minLat": -18.1, "minLon": 177.4, "maxLat": -16.8, "maxLon": -179.9 },
            "wraps": true
        })
    );
    assert_close(num(by_import("pathLength"), ""), 456.74, 0.05, "path");
    let decoded = results
        .iter()
        .zip(&blocks)
        .find(|(_, b)| b.contains("decode(line)"))
        .map(|(r, _)| r)
        .unwrap_or_else(|| panic!("no polyline example"));
    assert_eq!(
        decoded,
        &json!([
            { "lat": 38.5, "lon": -120.2 },
            { "lat": 40.7, "lon": -120.95 },
            { "lat": 43.252, "lon": -126.453 }
        ])
    );
}

// ---------------------------------------------------------------------------------------------
// The examples.

#[test]
fn example_distance() {
    let catalog = shipped_catalog();
    let v = ok(&catalog, &read("examples/distance.js"));
    assert_close(num(&v, "/parisToLondonKm"), 343.5, 0.5, "Paris–London");
    assert_eq!(v["closest"], "paris–london");
    assert_eq!(v["farthest"], "newYork–tokyo");
    let legs = v["legs"]
        .as_array()
        .unwrap_or_else(|| panic!("no legs: {v}"));
    assert_eq!(legs.len(), 6);
    let cities = [
        ("paris", (48.8566, 2.3522)),
        ("london", (51.5074, -0.1278)),
        ("newYork", (40.7128, -74.006)),
        ("tokyo", (35.6762, 139.6503)),
    ];
    let at = |name: &Json| {
        cities
            .iter()
            .find(|(n, _)| name == n)
            .map(|(_, p)| *p)
            .unwrap_or_else(|| panic!("unknown city {name}"))
    };
    for leg in legs {
        let want = haversine_km(at(&leg["from"]), at(&leg["to"]));
        assert_close(num(leg, "/km"), want, 0.051, "leg km");
        assert_close(num(leg, "/mi"), want / 1.609344, 0.051, "leg mi");
        let bearing = num(leg, "/bearing");
        assert!((0.0..360.0).contains(&bearing), "{leg}");
    }
    // New York to Tokyo (~10,850 km) leaves heading north-north-west, over Canada and Alaska,
    // not west; Paris to London heads north-north-west too.
    let leg = |from: &str, to: &str| {
        legs.iter()
            .find(|l| l["from"] == from && l["to"] == to)
            .unwrap_or_else(|| panic!("no {from}–{to} leg"))
    };
    assert_close(
        num(leg("newYork", "tokyo"), "/km"),
        10851.7,
        0.1,
        "NY–Tokyo",
    );
    assert_close(
        num(leg("newYork", "tokyo"), "/bearing"),
        333.0,
        0.1,
        "NY–Tokyo",
    );
    assert_close(
        num(leg("paris", "london"), "/bearing"),
        330.0,
        0.1,
        "Paris–London",
    );
}

#[test]
fn example_route() {
    let catalog = shipped_catalog();
    let v = ok(&catalog, &read("examples/route.js"));
    let route = [
        (51.5007, -0.1246),
        (51.5033, -0.1196),
        (51.5081, -0.0972),
        (51.5138, -0.0984),
        (51.5081, -0.0759),
    ];
    let km: f64 = route.windows(2).map(|w| haversine_km(w[0], w[1])).sum();
    assert_eq!(v["stops"], 5);
    assert_close(num(&v, "/km"), km, 0.006, "route km");
    assert_close(num(&v, "/metres"), km * 1000.0, 0.6, "route m");
    assert_eq!(
        v["box"],
        json!({ "minLat": 51.5007, "minLon": -0.1246, "maxLat": 51.5138, "maxLon": -0.0759 })
    );
    assert_eq!(v["polyline"], encode_polyline(&route));
    assert_eq!(v["roundTrips"], true);
}

#[test]
fn example_inputs() {
    let catalog = shipped_catalog();
    let code = read("examples/inputs.js");
    assert!(
        code.contains("--input '{\"a\":"),
        "the header says how to run it"
    );
    let paris_london = json!({
        "a": { "lat": 48.8566, "lon": 2.3522 },
        "b": { "lat": 51.5074, "lon": -0.1278 }
    });
    let v = run(&catalog, &code, paris_london).unwrap_or_else(|e| panic!("run failed: {e:?}"));
    assert_close(num(&v, "/km"), 343.5, 0.5, "km");
    assert_close(num(&v, "/nmi"), 343.556 / 1.852, 0.06, "nmi");
    assert_close(num(&v, "/initialBearing"), 330.0, 0.1, "initial");
    assert_close(num(&v, "/finalBearing"), 328.1, 0.1, "final");
    assert_close(num(&v, "/midpoint/lat"), 50.1886, 1e-4, "mid lat");
    assert_close(num(&v, "/midpoint/lon"), 1.1466, 1e-4, "mid lon");

    let e = failed(run(&catalog, &code, Json::Null));
    assert_eq!(e.code, RunErrorCode::RuntimeError);
    assert!(e.message.contains("pass two points"), "{e:?}");

    let e = failed(run(
        &catalog,
        &code,
        json!({ "a": { "lat": 91, "lon": 0 }, "b": { "lat": 0, "lon": 0 } }),
    ));
    assert_eq!(e.code, RunErrorCode::RuntimeError);
    assert!(
        e.message
            .contains("TypeError: haversine: a.lat must be a finite number between -90 and 90"),
        "{e:?}"
    );
}

#[test]
fn example_denied() {
    let catalog = shipped_catalog();
    let code = read("examples/denied.js");
    let resolution = resolution_of(&catalog, &code);
    assert!(resolution.modules.is_empty());

    // With the catalog's answer the run ends before it starts: no pack offers node:fs.
    let e = failed(
        run_with(&resolution, &code, Json::Null)
            .result
            .map(|v| v.to_json()),
    );
    assert_eq!(e.code, RunErrorCode::ModuleNotFound, "{e:?}");
    assert_eq!(e.specifier.as_deref(), Some("node:fs"));
    assert!(e.message.contains("node:fs"), "{e:?}");

    // And the loader refuses it on its own when nothing else stops the run.
    let bare = Resolution {
        modules: vec![],
        statuses: vec![],
    };
    let e = failed(
        run_with(&bare, &code, Json::Null)
            .result
            .map(|v| v.to_json()),
    );
    assert_eq!(e.code, RunErrorCode::ModuleDenied, "{e:?}");
    assert_eq!(e.specifier.as_deref(), Some("node:fs"));
    assert!(
        e.message
            .contains("\"node:fs\" is not a sandbox package this run serves"),
        "{e:?}"
    );
}

#[test]
fn example_yaml_round_trips_through_the_compiled_js_yaml() {
    let catalog = shipped_catalog();
    let v = ok(&catalog, &read("examples/yaml.js"));
    assert_eq!(
        v,
        json!("service: nodetool\nports:\n  - 80\n  - 443\n  - 8080\nlimits:\n  memory_mb: 64\n")
    );
}

#[test]
fn every_example_is_covered() {
    let dir = workspace().join("examples");
    let mut names: Vec<String> = fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{dir:?}: {e}"))
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "denied.js",
            "distance.js",
            "inputs.js",
            "route.js",
            "workflow.json",
            "yaml.js"
        ],
        "a new example needs a test here"
    );
}

#[test]
fn example_workflow_validates_with_one_issue_per_broken_node() {
    let catalog = shipped_catalog();
    let document: Json = serde_json::from_str(&read("examples/workflow.json"))
        .unwrap_or_else(|e| panic!("workflow.json: {e}"));
    let issues =
        validate_graph(&document, &catalog).unwrap_or_else(|e| panic!("not a graph: {e:?}"));
    assert!(
        issues.iter().all(|i| i.node_id != "n1"),
        "n1 is valid: {issues:#?}"
    );
    let of = |id: &str| -> Vec<_> { issues.iter().filter(|i| i.node_id == id).collect() };

    let n2 = of("n2");
    assert_eq!(n2.len(), 1, "{issues:#?}");
    assert_eq!(n2[0].severity, Severity::Error);
    assert_eq!(n2[0].code, "code_package_unavailable");
    assert!(
        n2[0]
            .message
            .contains("Install @nodetool-ai/sandbox-speech to use it."),
        "{:?}",
        n2[0]
    );
    assert_eq!(n2[0].line, Some(1));

    let n3 = of("n3");
    assert!(!n3.is_empty(), "{issues:#?}");
    assert!(
        n3.iter()
            .any(|i| i.code == "code_syntax" && i.severity == Severity::Error && i.line == Some(2)),
        "{issues:#?}"
    );
    assert!(n3.iter().all(|i| i.code == "code_syntax"), "{issues:#?}");

    // The valid node also runs.
    let n1 = document["nodes"][0]["data"]["code"]
        .as_str()
        .unwrap_or_else(|| panic!("n1 has no code"));
    assert_eq!(ok(&catalog, n1), json!({ "km": 343.6, "bearing": 330 }));
}

// ---------------------------------------------------------------------------------------------
// The API, beyond the examples.

#[test]
fn polyline_matches_the_canonical_google_example_and_round_trips() {
    let catalog = shipped_catalog();
    let v = ok(
        &catalog,
        r#"import { encode, decode } from "@nodetool-ai/sandbox-geo/polyline";
const points = [{ lat: 38.5, lon: -120.2 }, { lat: 40.7, lon: -120.95 }, { lat: 43.252, lon: -126.453 }];
const line = encode(points);
const six = encode(points, 6);
const high = encode([{ lat: -89.9999999, lon: 179.9999999 }, { lat: 89.9999999, lon: -179.9999999 }], 7);
return {
  line,
  decoded: decode(line),
  six: decode(six, 6),
  high: decode(high, 7),
  lng: encode([{ lat: 38.5, lng: -120.2 }]) === encode([points[0]]),
  empty: [encode([]), decode("").length],
};"#,
    );
    assert_eq!(v["line"], "_p~iF~ps|U_ulLnnqC_mqNvxq`@");
    assert_eq!(
        v["line"],
        encode_polyline(&[(38.5, -120.2), (40.7, -120.95), (43.252, -126.453)])
    );
    let points = json!([
        { "lat": 38.5, "lon": -120.2 },
        { "lat": 40.7, "lon": -120.95 },
        { "lat": 43.252, "lon": -126.453 }
    ]);
    assert_eq!(v["decoded"], points);
    assert_eq!(v["six"], points);
    assert_eq!(
        v["high"],
        json!([
            { "lat": -89.9999999, "lon": 179.9999999 },
            { "lat": 89.9999999, "lon": -179.9999999 }
        ])
    );
    assert_eq!(v["lng"], true);
    assert_eq!(v["empty"], json!(["", 0]));
}

#[test]
fn bearings_midpoint_and_destination_are_consistent() {
    let catalog = shipped_catalog();
    let v = ok(
        &catalog,
        r#"import { initialBearing, finalBearing, midpoint, destination, haversine } from "@nodetool-ai/sandbox-geo";
const o = { lat: 0, lon: 0 };
const paris = { lat: 48.8566, lon: 2.3522 };
const london = { lat: 51.5074, lon: -0.1278 };
const back = destination(paris, initialBearing(paris, london), haversine(paris, london));
const there = destination(paris, initialBearing(paris, london), haversine(paris, london, { unit: "m" }), { unit: "m" });
return {
  north: initialBearing(o, { lat: 10, lon: 0 }),
  east: initialBearing(o, { lat: 0, lon: 10 }),
  south: initialBearing(o, { lat: -10, lon: 0 }),
  west: initialBearing(o, { lat: 0, lon: -10 }),
  same: initialBearing(paris, paris),
  eastFinal: finalBearing(o, { lat: 0, lon: 90 }),
  reverse: finalBearing(london, paris) - (initialBearing(paris, london) + 180) % 360,
  equatorMid: midpoint({ lat: 0, lon: 170 }, { lat: 0, lon: -170 }),
  meridianMid: midpoint({ lat: 10, lon: 5 }, { lat: 30, lon: 5 }),
  back, there,
  quarter: destination(o, 90, haversine(o, { lat: 0, lon: 90 })),
  dateline: destination({ lat: 0, lon: 179 }, 90, haversine(o, { lat: 0, lon: 2 })),
  quarterMi: haversine(o, { lat: 0, lon: 90 }, { unit: "mi" }),
  quarterNmi: haversine(o, { lat: 0, lon: 90 }, { unit: "nmi" }),
  pole: haversine({ lat: 90, lon: 0 }, { lat: -90, lon: 0 }),
};"#,
    );
    assert_eq!(num(&v, "/north"), 0.0);
    assert_close(num(&v, "/east"), 90.0, 1e-9, "east");
    assert_close(num(&v, "/south"), 180.0, 1e-9, "south");
    assert_close(num(&v, "/west"), 270.0, 1e-9, "west");
    assert_eq!(num(&v, "/same"), 0.0);
    assert_close(num(&v, "/eastFinal"), 90.0, 1e-9, "east final");
    assert_close(
        num(&v, "/reverse"),
        0.0,
        1e-9,
        "final(b, a) = initial(a, b) + 180",
    );
    assert_close(num(&v, "/equatorMid/lat"), 0.0, 1e-9, "equator mid lat");
    assert_close(
        num(&v, "/equatorMid/lon").abs(),
        180.0,
        1e-9,
        "equator mid lon",
    );
    assert_close(num(&v, "/meridianMid/lat"), 20.0, 1e-9, "meridian mid");
    assert_close(num(&v, "/meridianMid/lon"), 5.0, 1e-9, "meridian mid");
    for key in ["back", "there"] {
        assert_close(num(&v, &format!("/{key}/lat")), 51.5074, 1e-9, key);
        assert_close(num(&v, &format!("/{key}/lon")), -0.1278, 1e-9, key);
    }
    assert_close(num(&v, "/quarter/lat"), 0.0, 1e-9, "quarter");
    assert_close(num(&v, "/quarter/lon"), 90.0, 1e-9, "quarter");
    assert_close(num(&v, "/dateline/lon"), -179.0, 1e-9, "wraps past 180");
    let quarter_km = EARTH_RADIUS_KM * std::f64::consts::FRAC_PI_2;
    assert_close(num(&v, "/quarterMi"), quarter_km / 1.609344, 1e-6, "mi");
    assert_close(num(&v, "/quarterNmi"), quarter_km / 1.852, 1e-6, "nmi");
    assert_close(num(&v, "/pole"), 2.0 * quarter_km, 1e-6, "pole to pole");
}

#[test]
fn bounding_box_handles_the_antimeridian() {
    let catalog = shipped_catalog();
    let v = ok(
        &catalog,
        r#"import { boundingBox, pathLength } from "@nodetool-ai/sandbox-geo";
return {
  plain: boundingBox([{ lat: 1, lon: -10 }, { lat: -2, lon: 20 }, { lat: 3, lon: 5 }]),
  one: boundingBox([{ lat: 1, lon: 2 }]),
  wraps: boundingBox([{ lat: 10, lon: 170 }, { lat: -5, lon: -175 }, { lat: 0, lon: 179 }]),
  wide: boundingBox([{ lat: 0, lon: -170 }, { lat: 0, lon: 170 }, { lat: 0, lon: 0 }]),
  tie: boundingBox([{ lat: 0, lon: -90 }, { lat: 0, lon: 90 }]),
  empty: pathLength([]),
  single: pathLength([{ lat: 1, lon: 1 }]),
};"#,
    );
    assert_eq!(
        v["plain"],
        json!({ "minLat": -2, "minLon": -10, "maxLat": 3, "maxLon": 20 })
    );
    assert_eq!(
        v["one"],
        json!({ "minLat": 1, "minLon": 2, "maxLat": 1, "maxLon": 2 })
    );
    assert_eq!(
        v["wraps"],
        json!({ "minLat": -5, "minLon": 170, "maxLat": 10, "maxLon": -175 })
    );
    // 190° across the antimeridian is smaller than 340° through 0°, so the box wraps.
    assert_eq!(
        v["wide"],
        json!({ "minLat": 0, "minLon": 0, "maxLat": 0, "maxLon": -170 })
    );
    assert_eq!(
        v["tie"],
        json!({ "minLat": 0, "minLon": -90, "maxLat": 0, "maxLon": 90 })
    );
    assert_eq!(v["empty"], 0);
    assert_eq!(v["single"], 0);
}

#[test]
fn invalid_input_throws_a_type_error_naming_the_argument() {
    let catalog = shipped_catalog();
    let v = ok(
        &catalog,
        r#"import { haversine, destination, boundingBox, pathLength } from "@nodetool-ai/sandbox-geo";
import { encode, decode } from "@nodetool-ai/sandbox-geo/polyline";
const p = { lat: 0, lon: 0 };
const attempt = (f) => {
  try { f(); return "no error"; } catch (e) { return (e instanceof TypeError ? "TypeError: " : "other: ") + e.message; }
};
return [
  attempt(() => haversine({ lat: 91, lon: 0 }, p)),
  attempt(() => haversine(p, { lat: "48.8", lon: 2 })),
  attempt(() => haversine(p, { lat: 0, lon: 181 })),
  attempt(() => haversine(p)),
  attempt(() => haversine(p, p, { unit: "ft" })),
  attempt(() => haversine(p, p, "km")),
  attempt(() => destination(p, NaN, 1)),
  attempt(() => destination(p, 0, -1)),
  attempt(() => boundingBox([])),
  attempt(() => pathLength([p, p, { lat: 1 }])),
  attempt(() => pathLength("abc")),
  attempt(() => encode([[38.5, -120.2]])),
  attempt(() => encode([p], 11)),
  attempt(() => decode(42)),
  attempt(() => decode("_p~iF~ps|U_")),
  attempt(() => decode("_p~iF")),
  attempt(() => decode("ab cd")),
];"#,
    );
    let want = [
        "TypeError: haversine: a.lat must be a finite number between -90 and 90 (got 91)",
        "TypeError: haversine: b.lat must be a finite number between -90 and 90 (got \"48.8\")",
        "TypeError: haversine: b.lon must be a finite number between -180 and 180 (got 181)",
        "TypeError: haversine: b must be an object like { lat: 48.85, lon: 2.35 } (got undefined)",
        "TypeError: haversine: options.unit must be one of \"km\", \"m\", \"mi\", \"nmi\" (got \"ft\")",
        "TypeError: haversine: options must be an object like { unit: \"km\" } (got \"km\")",
        "TypeError: destination: bearingDeg must be a finite number (got NaN)",
        "TypeError: destination: distance must be at least 0 (got -1)",
        "TypeError: boundingBox: points must hold at least 1 point (got 0)",
        "TypeError: pathLength: points[2].lon must be a finite number between -180 and 180 (got undefined)",
        "TypeError: pathLength: points must be an array of { lat, lon } points (got \"abc\")",
        "TypeError: encode: points[0] must be an object like { lat: 48.85, lon: 2.35 } (got an array)",
        "TypeError: encode: precision must be an integer between 0 and 10 (got 11)",
        "TypeError: decode: str must be a string (got 42)",
        "TypeError: decode: str is not a valid encoded polyline: it ends in the middle of a value",
        "TypeError: decode: str is not a valid encoded polyline: it ends after a latitude with no longitude",
        "TypeError: decode: str is not a valid encoded polyline: unexpected character \" \" at index 2",
    ];
    assert_eq!(v, json!(want));

    // Uncaught, the run fails with the same message.
    let e = failed(run(
        &catalog,
        "import { haversine } from \"@nodetool-ai/sandbox-geo\";\nreturn haversine({ lat: 91, lon: 0 }, { lat: 0, lon: 0 });",
        Json::Null,
    ));
    assert_eq!(e.code, RunErrorCode::RuntimeError);
    assert_eq!(
        e.message,
        "TypeError: haversine: a.lat must be a finite number between -90 and 90 (got 91)"
    );
}

#[test]
fn the_internal_helper_is_not_importable_by_a_body() {
    let catalog = shipped_catalog();
    for specifier in [
        "@nodetool-ai/sandbox-geo/internal/math.js",
        "@nodetool-ai/sandbox-geo/sandbox/internal/math.js",
        "@nodetool-ai/sandbox-geo/internal",
        "./internal/math.js",
    ] {
        let code = format!("import {{ toRadians }} from {specifier:?};\nreturn toRadians(180);");
        let e = failed(run(&catalog, &code, Json::Null));
        assert!(
            matches!(
                e.code,
                RunErrorCode::ModuleNotFound | RunErrorCode::ModuleDenied
            ),
            "{specifier}: {e:?}"
        );
        assert_eq!(e.specifier.as_deref(), Some(specifier), "{e:?}");
    }
}
