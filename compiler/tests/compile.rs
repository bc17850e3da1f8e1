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
use nodetool_protocol::catalog::{Declaration, StatusCode, StatusLevel};
use nodetool_runtime::{CompileRequest, CompiledLookup, CompiledNpmModule, SandboxModuleCatalog};
use tempfile::TempDir;

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
        let dir = self.pack(pack);
        let npm = format!("{pack}-lib");
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
    assert_eq!(report.exports, ["answer", "greet"]);
}

#[test]
fn a_commonjs_package_is_admitted_with_its_default() {
    let world = World::new();
    let (report, _) = world.compile("cjs");
    assert_eq!(report.outcome, Outcome::Compiled);
    assert!(report.exports.iter().any(|e| e == "default"), "{report:#?}");
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
    assert_eq!(report.exports, ["isNode", "platform"]);
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
fn a_hard_process_reference_is_a_forbidden_global() {
    let world = World::new();
    let (report, _) = world.compile("process");
    let (code, message) = refusal(&report);
    assert_eq!(code, StatusCode::NpmModuleForbiddenGlobal);
    assert!(
        message.starts_with("process-lib references process (first at "),
        "{message}"
    );
    assert!(
        message.ends_with("), which the guest does not provide"),
        "{message}"
    );
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
    assert_eq!(report.exports, ["shadowed"]);
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
