//! The compiler end to end on tiny fixture packages (`tests/fixtures/libs`, copied into a
//! temp dir's `node_modules` so resolution finds them as it finds installed ones), one per
//! outcome: every skip code, the warning, and the cache (warm hit, an edited input, a
//! shadowing copy, a corrupt entry). Every test works on its own copy of the fixtures and its
//! own cache root, so nothing outside a temp dir is written and nothing touches the network.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use nodetool_compiler::{Cache, Compiler, Outcome, ROLLDOWN_VERSION, Report, Stage, npm_entries};
use nodetool_discovery::{DiscoveryOptions, RootKind, SearchRoot, discover_catalog};
use nodetool_guest::{Capabilities, Dispatchers, RunLimits, RunRequest, Sandbox};
use nodetool_protocol::catalog::{Declaration, StatusCode, StatusLevel};
use nodetool_protocol::run::RunError;
use nodetool_protocol::value::Value;
use nodetool_runtime::{CompileRequest, CompiledLookup, CompiledNpmModule, SandboxModuleCatalog};
use tempfile::TempDir;

mod common;

fn must<T, E: std::fmt::Display>(r: Result<T, E>, what: &str) -> T {
    r.unwrap_or_else(|e| panic!("{what}: {e}"))
}

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn copy_dir(from: &Path, to: &Path) {
    must(fs::create_dir_all(to), "create a fixture dir");
    for entry in must(fs::read_dir(from), "read a fixture dir") {
        let entry = must(entry, "read a fixture entry");
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            must(fs::copy(entry.path(), &target), "copy a fixture file");
        }
    }
}

/// A private copy of the fixtures and a cache root, in one temp dir.
struct World {
    tmp: TempDir,
    compiler: Compiler,
}

impl World {
    fn new() -> World {
        let tmp = must(tempfile::tempdir(), "create a temp dir");
        let root = tmp.path().join("fixtures");
        copy_dir(&fixtures().join("packs"), &root.join("packs"));
        copy_dir(&fixtures().join("libs"), &root.join("node_modules"));
        let compiler = must(
            Compiler::new(Cache::new(tmp.path().join("cache"))),
            "start the compiler",
        );
        World { tmp, compiler }
    }

    fn root(&self) -> PathBuf {
        self.tmp.path().join("fixtures")
    }

    fn pack(&self, name: &str) -> PathBuf {
        self.root().join("packs").join(name)
    }

    fn lib_file(&self, lib: &str, file: &str) -> PathBuf {
        self.root().join("node_modules").join(lib).join(file)
    }

    fn compile(&self, pack: &str) -> (Report, Vec<Stage>) {
        self.compile_npm(pack, &format!("{pack}-lib"))
    }

    fn compile_npm(&self, pack: &str, npm: &str) -> (Report, Vec<Stage>) {
        let dir = self.pack(pack);
        let npm = npm.to_string();
        let mut stages = Vec::new();
        let report = self.compiler.compile(
            &CompileRequest {
                pack_name: &format!("@fixture/{pack}"),
                pack_dir: &dir,
                npm: &npm,
            },
            &mut |s| stages.push(s),
        );
        assert_eq!(report.store_error, None, "the cache write failed");
        (report, stages)
    }

    fn lookup(&self, pack: &str) -> Option<CompiledNpmModule> {
        let dir = self.pack(pack);
        let npm = format!("{pack}-lib");
        self.compiler.cache().lookup(&CompileRequest {
            pack_name: &format!("@fixture/{pack}"),
            pack_dir: &dir,
            npm: &npm,
        })
    }

    fn cache_files(&self, sub: &str) -> Vec<PathBuf> {
        let dir = self.tmp.path().join("cache").join(sub);
        let mut files: Vec<PathBuf> = fs::read_dir(dir)
            .map(|d| d.filter_map(Result::ok).map(|e| e.path()).collect())
            .unwrap_or_default();
        files.sort();
        files
    }
}

fn source_of(report: &Report) -> String {
    match &report.module {
        CompiledNpmModule::Admitted(a) => a.source.to_string(),
        CompiledNpmModule::Refused { code, message } => panic!("refused: {code}: {message}"),
    }
}

fn warnings(report: &Report) -> Vec<String> {
    match &report.module {
        CompiledNpmModule::Admitted(a) => a.warnings.clone(),
        CompiledNpmModule::Refused { code, message } => panic!("refused: {code}: {message}"),
    }
}

/// Runs `body` in a fresh guest with the admitted module served as `lib`.
fn run_with_lib(report: &Report, body: &str) -> Result<Value, RunError> {
    common::run_module(&source_of(report), "lib", body)
}

fn json(text: &str) -> Value {
    must(serde_json::from_str(text), "parse the expected value")
}

fn refusal(report: &Report) -> (StatusCode, String) {
    match &report.module {
        CompiledNpmModule::Refused { code, message } => (*code, message.clone()),
        CompiledNpmModule::Admitted(_) => panic!("admitted: {report:#?}"),
    }
}

// ---------------------------------------------------------------------------------------------
// Admitted modules.

#[test]
fn a_clean_package_is_admitted_with_its_sorted_exports() {
    let world = World::new();
    let (report, stages) = world.compile("clean");
    assert_eq!(report.outcome, Outcome::Compiled);
    assert_eq!(report.exports, ["default", "double", "inc"]);
    assert_eq!(
        stages,
        [
            Stage::Cache,
            Stage::Bundle,
            Stage::Scan,
            Stage::Probe,
            Stage::Store
        ]
    );
    let source = source_of(&report);
    // One self-contained module: the relative import was bundled, JSDoc was dropped.
    assert!(!source.contains("import "), "{source}");
    assert!(source.contains("n * 2"), "{source}");
    assert!(!source.contains("Adds one"), "{source}");
    assert_eq!(report.bytes(), Some(source.len()));
    let CompiledNpmModule::Admitted(artifact) = &report.module else {
        panic!("not admitted");
    };
    assert!(artifact.warnings.is_empty());
    assert_eq!(
        artifact.compiler_version,
        nodetool_compiler::COMPILER_VERSION
    );
    assert_eq!(artifact.options_digest.len(), 64);
    assert_eq!(artifact.inputs_digest.len(), 64);
}

#[test]
fn the_module_field_wins_and_a_package_without_default_exports_its_names_only() {
    let world = World::new();
    let (report, _) = world.compile("named-only");
    // index.cjs (the `main` field) throws at init; the probe passing proves `module` won.
    // Without a default of its own, the default is the namespace of the named exports.
    assert_eq!(report.exports, ["answer", "default", "greet"]);
    let got = run_with_lib(
        &report,
        "import lib from \"lib\";\nimport * as ns from \"lib\";\nreturn [typeof lib.greet, lib.answer, lib === ns.default, Object.keys(lib).sort()];",
    );
    assert_eq!(
        got.ok(),
        Some(json(r#"["function", 42, true, ["answer", "greet"]]"#))
    );
}

#[test]
fn a_commonjs_package_is_admitted_with_its_default() {
    let world = World::new();
    let (report, _) = world.compile("cjs");
    assert_eq!(report.outcome, Outcome::Compiled);
    // The default's keys are named exports too, as Node's CommonJS interop offers them.
    assert_eq!(report.exports, ["default", "shout"]);
    let got = run_with_lib(
        &report,
        "import lib, { shout } from \"lib\";\nreturn [shout(\"a\"), lib.shout === shout];",
    );
    assert_eq!(got.ok(), Some(json(r#"["A", true]"#)));
}

#[test]
fn a_typeof_guard_is_admitted_with_a_warning() {
    let world = World::new();
    let (report, _) = world.compile("detect");
    let CompiledNpmModule::Admitted(artifact) = &report.module else {
        panic!("refused: {report:#?}");
    };
    assert_eq!(artifact.warnings.len(), 1, "{:?}", artifact.warnings);
    let warning = &artifact.warnings[0];
    assert!(
        warning.starts_with("detect-lib feature-detects process at "),
        "{warning}"
    );
    assert!(
        warning.ends_with("; the guest has no such global, so that branch never runs"),
        "{warning}"
    );
    assert_eq!(report.exports, ["default", "isNode", "platform"]);
}

// ---------------------------------------------------------------------------------------------
// Every skip code.

#[test]
fn a_node_builtin_import_is_skipped_listing_every_builtin() {
    let world = World::new();
    let (report, stages) = world.compile("builtin");
    assert_eq!(report.outcome, Outcome::Skipped);
    assert_eq!(
        refusal(&report),
        (
            StatusCode::NpmModuleBuiltinImport,
            "builtin-lib imports node:fs, node:path — a Node builtin needs the host bridge path, which the guest does not have".into()
        )
    );
    assert!(!stages.contains(&Stage::Probe));
}

#[test]
fn a_process_read_in_a_function_is_admitted_with_a_warning_and_throws_when_called() {
    let world = World::new();
    let (report, _) = world.compile("process");
    let warnings = warnings(&report);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].starts_with("process-lib reads process at ")
            && warnings[0].ends_with(
                ", which the guest does not provide; code that reaches it throws a ReferenceError"
            ),
        "{warnings:?}"
    );
    let e = run_with_lib(&report, "import { home } from \"lib\";\nreturn home();").err();
    assert!(
        e.is_some_and(|e| e.message.contains("process is not defined")),
        "the call must fail"
    );
}

#[test]
fn a_builtin_required_only_inside_try_is_an_empty_module_and_the_fallback_runs() {
    let world = World::new();
    let (report, _) = world.compile("try");
    let warnings = warnings(&report);
    assert_eq!(
        warnings,
        [
            "try-lib requires node:crypto (try-lib/index.js) only inside try; it is an empty module that throws, so the package's own fallback runs"
        ]
    );
    let got = run_with_lib(
        &report,
        "import lib from \"lib\";\nreturn [lib.source(), typeof lib.random()];",
    );
    assert_eq!(got.ok(), Some(json(r#"["web", "number"]"#)));
}

#[test]
fn a_builtin_only_unreachable_code_imports_is_left_out() {
    let world = World::new();
    let (report, _) = world.compile("unreachable");
    assert_eq!(
        warnings(&report),
        [
            "unreachable-lib imports node:fs (unreachable-lib/index.js) only from code its exports never reach; it is left out"
        ]
    );
    let source = source_of(&report);
    assert!(!source.contains("node:fs"), "{source}");
    let got = run_with_lib(&report, "import { add } from \"lib\";\nreturn add(2, 3);");
    assert_eq!(got.ok(), Some(Value::Number(5.0)));
}

#[test]
fn a_builtin_required_at_load_is_refused() {
    let world = World::new();
    let (report, _) = world.compile("needs");
    assert_eq!(
        refusal(&report),
        (
            StatusCode::NpmModuleBuiltinImport,
            "needs-lib imports node:path — a Node builtin needs the host bridge path, which the guest does not have".into()
        )
    );
}

#[test]
fn the_browser_condition_is_tried_when_the_default_entry_needs_a_builtin() {
    let world = World::new();
    let (report, _) = world.compile("browser");
    assert_eq!(
        warnings(&report),
        [
            "browser-lib's default entry needs node:crypto, so it was bundled with the browser condition"
        ]
    );
    let got = run_with_lib(
        &report,
        "import { hash, flavour } from \"lib\";\nreturn [flavour, hash(\"abc\")];",
    );
    assert_eq!(got.ok(), Some(json(r#"["browser", "3"]"#)));
}

#[test]
fn node_env_is_defined_as_production() {
    let world = World::new();
    let (report, _) = world.compile("env");
    assert_eq!(warnings(&report), Vec::<String>::new());
    let got = run_with_lib(&report, "import { mode } from \"lib\";\nreturn mode;");
    assert_eq!(got.ok(), Some(Value::String("production".into())));
}

#[test]
fn a_builtin_the_browser_field_maps_to_false_is_an_empty_module() {
    let world = World::new();
    let (report, _) = world.compile("nobuiltin");
    assert_eq!(
        warnings(&report),
        [
            "nobuiltin-lib's default entry needs node:crypto, so it was bundled with the browser condition"
        ]
    );
    let got = run_with_lib(
        &report,
        "import lib from \"lib\";\nreturn lib.hasNodeCrypto();",
    );
    assert_eq!(got.ok(), Some(Value::Bool(false)));
}

#[test]
fn a_default_build_that_fails_the_probe_is_retried_with_the_browser_condition() {
    let world = World::new();
    let (report, _) = world.compile("loadfail");
    let warnings = warnings(&report);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].starts_with("loadfail-lib was bundled with the browser condition: its default entry does not initialize in the guest (loadfail-lib failed the sandbox admission probe: ReferenceError: setTimeout is not defined"),
        "{warnings:?}"
    );
    let got = run_with_lib(&report, "import lib from \"lib\";\nreturn lib.flavour;");
    assert_eq!(got.ok(), Some(Value::String("browser".into())));
    // The cache serves the browser build next time.
    let (again, stages) = world.compile("loadfail");
    assert_eq!(again.outcome, Outcome::Cached);
    assert_eq!(stages, [Stage::Cache]);
}

#[test]
fn a_default_build_that_reads_node_globals_gives_way_to_the_browser_build() {
    let world = World::new();
    let (report, _) = world.compile("nodeglobal");
    assert_eq!(
        warnings(&report),
        [
            "nodeglobal-lib was bundled with the browser condition: its default entry reads Node's Buffer"
        ]
    );
    let got = run_with_lib(&report, "import { hex } from \"lib\";\nreturn hex(\"x\");");
    assert_eq!(got.ok(), Some(Value::String("78".into())));
}

#[test]
fn function_mentioned_but_not_called_at_load_is_admitted() {
    let world = World::new();
    let (report, _) = world.compile("codegen");
    let warnings = warnings(&report);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].starts_with("codegen-lib generates code from a string with Function at "),
        "{warnings:?}"
    );
    let got = run_with_lib(
        &report,
        "import { fast, isFn, compile } from \"lib\";\nlet refused = null;\ntry { compile(\"return x\"); } catch (e) { refused = e.name; }\nreturn [fast(), isFn(() => 1), refused];",
    );
    assert_eq!(got.ok(), Some(json(r#"[false, true, "EvalError"]"#)));
}

#[test]
fn a_subpath_entry_resolves_through_the_exports_map() {
    let world = World::new();
    let (report, _) = world.compile_npm("sub", "sub-lib/sync");
    assert_eq!(report.outcome, Outcome::Compiled, "{report:#?}");
    let got = run_with_lib(
        &report,
        "import { parse } from \"lib\";\nreturn parse(\"a,b\");",
    );
    assert_eq!(got.ok(), Some(json(r#"["a", "b"]"#)));
    // A subpath the map does not export is unresolved.
    let (report, _) = world.compile_npm("sub", "sub-lib/missing");
    assert_eq!(refusal(&report).0, StatusCode::NpmModuleUnresolved);
}

#[test]
fn the_same_library_from_two_roots_has_one_digest() {
    let world = World::new();
    let (near, _) = world.compile("cjs");
    // Another root where node_modules sits three levels above the pack, not two.
    let other = must(tempfile::tempdir(), "create a temp dir");
    let pack = other.path().join("deep/packs/@scope/cjs");
    copy_dir(&world.pack("cjs"), &pack);
    copy_dir(
        &world.root().join("node_modules/cjs-lib"),
        &other.path().join("deep/node_modules/cjs-lib"),
    );
    let report = world.compiler.compile(
        &CompileRequest {
            pack_name: "@fixture/cjs",
            pack_dir: &pack,
            npm: "cjs-lib",
        },
        &mut |_| {},
    );
    let (CompiledNpmModule::Admitted(a), CompiledNpmModule::Admitted(b)) =
        (&near.module, &report.module)
    else {
        panic!("not both admitted: {near:#?} {report:#?}");
    };
    assert!(!a.source.contains("node_modules"), "{}", a.source);
    assert_eq!(a.source, b.source);
    assert_eq!(a.inputs_digest, b.inputs_digest);
    assert_eq!(a.options_digest, b.options_digest);
}

#[test]
fn a_throw_at_top_level_fails_the_probe_with_the_error() {
    let world = World::new();
    let (report, _) = world.compile("throws");
    assert_eq!(
        refusal(&report),
        (
            StatusCode::NpmModuleProbeFailed,
            "throws-lib failed the sandbox admission probe: TypeError: throws-lib cannot initialize here".into()
        )
    );
}

#[test]
fn a_dynamic_import_is_rejected_by_the_scan() {
    let world = World::new();
    let (report, _) = world.compile("dynamic");
    let (code, message) = refusal(&report);
    assert_eq!(code, StatusCode::NpmModuleScanRejected);
    assert!(
        message.starts_with("dynamic-lib: bundle uses dynamic import() (at "),
        "{message}"
    );
}

#[test]
fn an_unresolvable_import_is_unresolved_and_names_no_absolute_path() {
    let world = World::new();
    let (report, _) = world.compile("unresolved");
    let (code, message) = refusal(&report);
    assert_eq!(code, StatusCode::NpmModuleUnresolved);
    assert!(
        message.starts_with("unresolved-lib: Could not resolve 'not-installed-anywhere'"),
        "{message}"
    );
    assert!(
        !message.contains(&world.tmp.path().display().to_string()),
        "{message}"
    );
    // A package that is not installed at all is unresolved too.
    let (report, _) = world.compile("missing");
    let (code, message) = refusal(&report);
    assert_eq!(code, StatusCode::NpmModuleUnresolved);
    assert!(message.contains("missing-lib"), "{message}");
}

#[test]
fn a_syntax_error_fails_the_bundle() {
    let world = World::new();
    let (report, _) = world.compile("broken");
    let (code, message) = refusal(&report);
    assert_eq!(code, StatusCode::NpmModuleBundleFailed);
    assert!(message.starts_with("broken-lib: "), "{message}");
}

#[test]
fn a_bundle_over_one_mebibyte_is_too_large() {
    let world = World::new();
    // Generated here rather than committed: one string literal just over the cap.
    let lib = world.root().join("node_modules/large-lib");
    must(fs::create_dir_all(&lib), "create large-lib");
    must(
        fs::write(
            lib.join("package.json"),
            r#"{ "name": "large-lib", "version": "1.0.0", "type": "module", "main": "index.js" }"#,
        ),
        "write large-lib",
    );
    let big = "x".repeat(1024 * 1024 + 1);
    must(
        fs::write(
            lib.join("index.js"),
            format!("export const big = \"{big}\";\n"),
        ),
        "write large-lib",
    );
    let (report, stages) = world.compile("large");
    let (code, message) = refusal(&report);
    assert_eq!(code, StatusCode::NpmModuleTooLarge);
    assert!(message.starts_with("large-lib bundles to "), "{message}");
    assert!(
        message.ends_with(" bytes, over the 1048576 byte sandbox module cap"),
        "{message}"
    );
    assert!(!stages.contains(&Stage::Scan));
}

// ---------------------------------------------------------------------------------------------
// The cache.

#[test]
fn a_warm_hit_skips_every_stage_but_the_cache() {
    let world = World::new();
    let (first, _) = world.compile("clean");
    let (second, stages) = world.compile("clean");
    assert_eq!(second.outcome, Outcome::Cached);
    assert_eq!(stages, [Stage::Cache]);
    assert_eq!(second.module, first.module);
    assert_eq!(second.exports, first.exports);
    assert_eq!(world.lookup("clean"), Some(first.module));
    // Refusals are cached too, with their code.
    let (_, _) = world.compile("builtin");
    let (again, stages) = world.compile("builtin");
    assert_eq!(stages, [Stage::Cache]);
    assert_eq!(again.code(), Some(StatusCode::NpmModuleBuiltinImport));
}

#[test]
fn nothing_compiled_is_a_miss() {
    let world = World::new();
    assert_eq!(world.lookup("clean"), None);
}

#[test]
fn an_edited_input_invalidates() {
    let world = World::new();
    world.compile("clean");
    must(
        fs::write(
            world.lib_file("clean-lib", "lib/math.js"),
            "export const double = (n) => n + n;\n",
        ),
        "edit an input",
    );
    assert_eq!(world.lookup("clean"), None, "an edited input must miss");
    let (report, _) = world.compile("clean");
    assert_eq!(report.outcome, Outcome::Compiled);
    assert!(source_of(&report).contains("n + n"));
    // A removed input misses too.
    must(
        fs::remove_file(world.lib_file("clean-lib", "lib/math.js")),
        "remove an input",
    );
    assert_eq!(world.lookup("clean"), None);
}

#[test]
fn an_edited_package_json_that_governed_resolution_invalidates() {
    let world = World::new();
    world.compile("named-only");
    let manifest = world.lib_file("named-only-lib", "package.json");
    let text = must(fs::read_to_string(&manifest), "read package.json");
    must(
        fs::write(&manifest, text.replace("\"1.0.0\"", "\"1.0.1\"")),
        "edit package.json",
    );
    assert_eq!(world.lookup("named-only"), None);
}

#[test]
fn a_shadowing_copy_invalidates() {
    let world = World::new();
    world.compile("clean");
    // A nearer node_modules/clean-lib now wins resolution from the pack.
    let shadow = world.pack("clean").join("node_modules/clean-lib");
    must(fs::create_dir_all(&shadow), "create the shadow");
    must(
        fs::write(
            shadow.join("package.json"),
            r#"{ "name": "clean-lib", "version": "2.0.0", "type": "module", "main": "index.js" }"#,
        ),
        "write the shadow",
    );
    must(
        fs::write(shadow.join("index.js"), "export const shadowed = true;\n"),
        "write the shadow",
    );
    assert_eq!(
        world.lookup("clean"),
        None,
        "a new shadowing copy must miss"
    );
    let (report, _) = world.compile("clean");
    assert_eq!(report.exports, ["default", "shadowed"]);
}

#[test]
fn a_corrupt_entry_is_evicted_never_trusted() {
    let world = World::new();
    world.compile("clean");
    let entries = world.cache_files("entries");
    assert_eq!(entries.len(), 1);
    // Valid JSON whose source no longer matches its recorded hash.
    let text = must(fs::read_to_string(&entries[0]), "read the entry");
    must(
        fs::write(&entries[0], text.replace("n * 2", "n * 3")),
        "tamper with the entry",
    );
    assert_eq!(world.lookup("clean"), None);
    assert!(!entries[0].exists(), "the corrupt entry must be evicted");
    // Recompiling stores it again; then garbage in its place is evicted too.
    world.compile("clean");
    let entries = world.cache_files("entries");
    must(fs::write(&entries[0], b"{not json"), "corrupt the entry");
    assert_eq!(world.lookup("clean"), None);
    assert!(!entries[0].exists());
    // A pointer holding a key that is not 64 lowercase hex never reaches a path.
    world.compile("clean");
    let pointers = world.cache_files("index");
    assert_eq!(pointers.len(), 1);
    must(
        fs::write(&pointers[0], br#"{"key":"../../../../etc/passwd"}"#),
        "corrupt the pointer",
    );
    assert_eq!(world.lookup("clean"), None);
    assert!(!pointers[0].exists(), "the corrupt pointer must be evicted");
}

#[test]
fn the_key_is_content_not_place_and_holds_no_absolute_path() {
    let world = World::new();
    let (first, _) = world.compile("clean");
    let entry = must(
        fs::read_to_string(&world.cache_files("entries")[0]),
        "read the entry",
    );
    assert!(
        !entry.contains(&world.tmp.path().display().to_string()),
        "an absolute path leaked into the entry"
    );
    // The same tree somewhere else is the same content: served without a second probe.
    let elsewhere = must(tempfile::tempdir(), "create a temp dir");
    copy_dir(&world.root(), elsewhere.path());
    let mut stages = Vec::new();
    let report = world.compiler.compile(
        &CompileRequest {
            pack_name: "@fixture/clean",
            pack_dir: &elsewhere.path().join("packs/clean"),
            npm: "clean-lib",
        },
        &mut |s| stages.push(s),
    );
    assert_eq!(report.outcome, Outcome::Cached);
    assert!(!stages.contains(&Stage::Probe), "{stages:?}");
    assert_eq!(report.module, first.module);
    assert_eq!(world.cache_files("entries").len(), 1);
    assert_eq!(world.cache_files("index").len(), 2);
}

// ---------------------------------------------------------------------------------------------
// Discovery through the cache, and the entries on a search path.

#[test]
fn discovery_reads_admitted_and_refused_modules_from_the_cache() {
    let world = World::new();
    let roots = [SearchRoot {
        path: world.root().join("packs"),
        kind: RootKind::Installed,
        label: "fixtures".into(),
    }];
    let entries = npm_entries(&roots);
    let names: BTreeSet<&str> = entries.iter().map(|e| e.specifier.as_str()).collect();
    assert!(
        names.contains("@fixture/clean") && names.contains("@fixture/builtin"),
        "{names:?}"
    );
    assert!(entries.iter().all(|e| !e.shipped));
    for entry in entries.iter().filter(|e| {
        ["clean", "builtin"]
            .iter()
            .any(|p| e.pack_name.ends_with(p))
    }) {
        let report = world.compiler.compile(&entry.request(), &mut |_| {});
        assert_eq!(report.store_error, None);
    }
    let trusted = BTreeSet::new();
    let catalog = discover_catalog(
        &roots,
        &DiscoveryOptions {
            compiled: world.compiler.cache(),
            trusted_packs: &trusted,
        },
    );
    let status = |pack: &str| {
        catalog
            .diagnostics()
            .iter()
            .filter(|s| s.pack_name == pack)
            .map(|s| (s.status, s.code))
            .collect::<Vec<_>>()
    };
    assert!(
        status("@fixture/clean").contains(&(StatusLevel::Ready, StatusCode::NpmModuleCompiled)),
        "{:#?}",
        catalog.diagnostics()
    );
    assert!(
        status("@fixture/builtin")
            .contains(&(StatusLevel::Skipped, StatusCode::NpmModuleBuiltinImport))
    );
    assert!(
        status("@fixture/throws").contains(&(StatusLevel::Skipped, StatusCode::PendingCompile))
    );
    let resolution = catalog.resolve_for_execution(&[Declaration::of("@fixture/clean")]);
    assert_eq!(resolution.modules.len(), 1, "{resolution:#?}");
    assert_eq!(resolution.modules[0].module_id, "npm:clean-lib");
    // Importing a skipped module is module-unavailable with the skip's code and reason.
    let resolution = catalog.resolve_for_execution(&[Declaration::of("@fixture/builtin")]);
    let outcome = Sandbox::new().run(RunRequest {
        code: "import { read } from \"@fixture/builtin\";\nreturn read(\"x\");",
        resolution: &resolution,
        inputs: &Value::Null,
        limits: RunLimits::STANDARD,
        capabilities: Capabilities::default(),
        dispatchers: Dispatchers::default(),
        cancel: None,
    });
    let e = outcome.result.err();
    assert_eq!(
        e.as_ref().map(|e| (e.code, e.message.as_str())),
        Some((
            nodetool_protocol::run::RunErrorCode::ModuleUnavailable,
            "Sandbox module @fixture/builtin is not available for execution: the compiler skipped npm module builtin-lib (npm-module-builtin-import): builtin-lib imports node:fs, node:path — a Node builtin needs the host bridge path, which the guest does not have"
        )),
        "{e:?}"
    );
    // One not compiled yet says so.
    let resolution = catalog.resolve_for_execution(&[Declaration::of("@fixture/throws")]);
    assert!(
        resolution
            .statuses
            .iter()
            .any(|s| s.code == StatusCode::ModuleUnavailable
                && s.message
                    .ends_with("npm module throws-lib has no admitted compiled artifact")),
        "{resolution:#?}"
    );
}

#[test]
fn the_rolldown_version_matches_the_lockfile() {
    let lock = must(
        fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../Cargo.lock")),
        "read Cargo.lock",
    );
    let pinned = lock
        .split("[[package]]")
        .find(|p| p.contains("\nname = \"rolldown\"\n"))
        .and_then(|p| p.lines().find_map(|l| l.strip_prefix("version = \"")))
        .map(|v| v.trim_end_matches('"'));
    assert_eq!(pinned, Some(ROLLDOWN_VERSION));
}
