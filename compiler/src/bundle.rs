//! Bundling one npm dependency into one self-contained ES module with rolldown, used as a
//! library: platform neutral, conditions `import`, `module`, `default`, main fields `module`,
//! `main`, no externals, no minification, no code splitting, no debug comments (rolldown's
//! `//#region <path>` lines would make the bundle depend on where the pack sits), through a
//! virtual entry that re-exports the package's named exports and its default, which is the
//! namespace of its named exports when the package has none.
//!
//! A plugin in front of rolldown's own resolver and loader does three things: it serves the
//! virtual entry; it resolves every Node builtin to a stub module that throws when it is
//! evaluated (recording each request and its importer, for the builtin rules below); and it
//! reads every input file itself, so exactly the bytes that were bundled are the bytes whose
//! hashes key the cache. It also records every bare import with its importer, from which the
//! shadow candidates (a `node_modules/<name>` nearer the importer that would win if it
//! appeared) are derived after the build.
//!
//! The builtin rules, once the bundle is built: a builtin whose stub the bundle does not
//! contain (tree-shaking dropped it: no code reachable from the entry's exports uses it) is a
//! warning; so is one every request of which is a `require(...)` inside a `try` block (the
//! package's own fallback runs when the stub throws). Any other builtin the bundle contains is
//! one the package cannot run without: the build is tried again with the `browser` condition
//! (and main field and `browser` field), and when that bundle breaks no rule it is the one
//! kept, with a warning; otherwise the package is refused (`npm-module-builtin-import`).

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use nodetool_protocol::catalog::StatusCode;
use nodetool_protocol::hex::sha256_hex;
use oxc::allocator::Allocator;
use oxc::ast::ast::{
    Argument, ArrowFunctionExpression, CallExpression, ExportAllDeclaration, ExportFromDeclaration,
    Expression, Function, ImportDeclaration, ImportExpression, ModuleExportName, Statement,
    TryStatement,
};
use oxc::ast_visit::{VisitJs, walk_js};
use oxc::parser::Parser;
use oxc::semantic::ScopeFlags;
use oxc::span::SourceType;
use rolldown::{
    Bundler, BundlerOptions, CodeSplittingMode, CommentsOptions, InputItem, LegalComments,
    ModuleType, OutputFormat, Platform, ResolveOptions, TsConfig,
};
use rolldown_common::side_effects::HookSideEffects;
use rolldown_common::{AttachDebugInfo, ExperimentalOptions, ExportsKind, Output};
use rolldown_error::{BuildDiagnostic, DiagnosticOptions, EventKind, Severity};
use rolldown_plugin::{
    HookLoadArgs, HookLoadOutput, HookLoadReturn, HookResolveIdArgs, HookResolveIdOutput,
    HookResolveIdReturn, HookUsage, Plugin, PluginContext, SharedLoadPluginContext,
};

use crate::Refusal;

/// Resolution conditions, in order.
pub(crate) const CONDITIONS: [&str; 3] = ["import", "module", "default"];
/// package.json main fields, in order.
pub(crate) const MAIN_FIELDS: [&str; 2] = ["module", "main"];
/// The conditions of the retry when the default entry needs a builtin.
pub(crate) const BROWSER_CONDITIONS: [&str; 4] = ["browser", "import", "module", "default"];
/// The main fields of that retry.
pub(crate) const BROWSER_MAIN_FIELDS: [&str; 3] = ["browser", "module", "main"];
/// The id prefix of a builtin's stub module (`\0` keeps it out of every path lookup).
const BUILTIN_STUB_PREFIX: &str = "\0nodetool-builtin:";
/// The id prefix of a builtin a package's `browser` field maps to `false`.
const BUILTIN_EMPTY_PREFIX: &str = "\0nodetool-builtin-empty:";
/// What every bundle is built with: `process.env.NODE_ENV` is `"production"`, as browser
/// bundlers define it (libraries test it at load to pick their build).
pub(crate) const DEFINES: [(&str, &str); 1] = [("process.env.NODE_ENV", "\"production\"")];
/// What a builtin's stub throws, after the builtin's quoted `node:` name.
pub(crate) const BUILTIN_STUB_MESSAGE: &str =
    " is not available in the sandbox: Node builtins are not part of the guest";
/// The largest single input file the bundler reads.
pub(crate) const MAX_INPUT_FILE_BYTES: u64 = 16 * 1024 * 1024;
/// The most input bytes one bundle may read.
pub(crate) const MAX_INPUT_TOTAL_BYTES: u64 = 64 * 1024 * 1024;
/// How long one bundling may take before it is abandoned.
pub(crate) const BUNDLE_DEADLINE: Duration = Duration::from_secs(120);
/// The virtual entry's file name (inside the pack directory; never read from disk).
const ENTRY_FILE: &str = "__nodetool_npm_entry__.mjs";
/// The most text of rolldown's diagnostics a skip message carries.
const MAX_DIAGNOSTIC_CHARS: usize = 2_000;

/// A file that decided the bundle, relative to the pack directory with `/` separators, and its
/// SHA-256 (`None`: recorded absent).
pub(crate) type FileRecords = BTreeMap<String, Option<String>>;

/// What bundling produced: the source or a refusal, plus every file that decided it.
pub(crate) struct Bundled {
    pub result: Result<String, Refusal>,
    /// What admission should say about the builtins it let through and the browser retry.
    pub warnings: Vec<String>,
    /// Whether this is the browser-condition build.
    pub browser: bool,
    /// Every input file rolldown loaded, with its hash.
    pub inputs: FileRecords,
    /// The package.json files that governed resolution and the shadow candidates.
    pub resolution: FileRecords,
}

/// What the plugin saw during one build.
#[derive(Debug, Default)]
struct Recorded {
    /// Absolute input path to its SHA-256.
    inputs: BTreeMap<PathBuf, String>,
    input_bytes: u64,
    /// Node builtins imported anywhere (as `node:<name>`), with the files that import them.
    builtins: BTreeMap<String, BTreeSet<PathBuf>>,
    /// (importer directory, package name) of every bare import.
    bare: BTreeSet<(PathBuf, String)>,
}

#[derive(Debug)]
struct NpmPlugin {
    /// The pack directory (messages name inputs relative to it).
    pack_dir: PathBuf,
    entry_id: String,
    npm: String,
    /// Whether the entry re-exports the package's `default` (off for the named-only retry).
    with_default: bool,
    /// Whether this is the browser-condition build, where a package's `browser` field may map
    /// a builtin to `false` (an empty module).
    browser: bool,
    /// For a package whose only export is its default (CommonJS): the default's own keys to
    /// re-export by name, read by the probe.
    named: Option<Vec<String>>,
    recorded: Arc<Mutex<Recorded>>,
}

impl NpmPlugin {
    fn record<T>(&self, f: impl FnOnce(&mut Recorded) -> T) -> T {
        f(&mut self.recorded.lock().unwrap_or_else(PoisonError::into_inner))
    }

    async fn entry_source(&self, ctx: &PluginContext) -> String {
        if let Some(names) = &self.named {
            // Each key of the default as a named export, as Node's CommonJS interop offers
            // them: `import { isEmail } from "validator"`.
            let mut text = format!(
                "import __nodetool_default from {};\nexport default __nodetool_default;\n",
                js_string(&self.npm)
            );
            for name in names {
                text.push_str(&format!(
                    "export const {name} = __nodetool_default[{}];\n",
                    js_string(name)
                ));
            }
            return text;
        }
        let star = format!("export * from {};\n", js_string(&self.npm));
        // Without a default of its own, the module's default is the namespace of its named
        // exports (as the host facades have), so `import lib from` works too.
        let namespace = format!(
            "{star}import * as __nodetool_namespace from {};\nexport default __nodetool_namespace;\n",
            js_string(&self.npm)
        );
        if !self.with_default {
            return namespace;
        }
        // Re-export `default` only when the package's entry has one (js-yaml 5 has none, and
        // rolldown refuses a re-export of a missing name); when it cannot be told, try it and
        // let a MISSING_EXPORT failure fall back to named exports only.
        let has_default = match ctx.resolve(&self.npm, Some(&self.entry_id), None).await {
            Ok(Ok(resolved)) if !resolved.external.is_external() => {
                // Have rolldown load (and parse) the package's entry now and read its exports,
                // rather than parsing it a second time here.
                let id = resolved.id.as_str();
                let loaded = ctx
                    .load(id, resolved.side_effects, resolved.module_def_format)
                    .await;
                match (loaded, ctx.get_module_info(id)) {
                    (Ok(()), Some(info)) => {
                        info.input_format != ExportsKind::Esm
                            || info.exports.iter().any(|e| e.as_str() == "default")
                    }
                    _ => module_has_default(Path::new(id)),
                }
            }
            _ => true,
        };
        if has_default {
            format!(
                "{star}export {{ default }} from {};\n",
                js_string(&self.npm)
            )
        } else {
            namespace
        }
    }

    fn read_input(&self, path: &Path) -> Result<String, InputError> {
        let shown = relative_to(&self.pack_dir, path);
        let size = std::fs::metadata(path)
            .map_err(|e| InputError(format!("cannot read {shown}: {e}")))?
            .len();
        if size > MAX_INPUT_FILE_BYTES {
            return Err(InputError(format!(
                "{shown} is {size} bytes, over the compiler's {MAX_INPUT_FILE_BYTES} byte input cap"
            )));
        }
        let total = self.record(|r| {
            r.input_bytes += size;
            r.input_bytes
        });
        if total > MAX_INPUT_TOTAL_BYTES {
            return Err(InputError(format!(
                "the package's input files total over the compiler's {MAX_INPUT_TOTAL_BYTES} byte cap"
            )));
        }
        let bytes =
            std::fs::read(path).map_err(|e| InputError(format!("cannot read {shown}: {e}")))?;
        let sha = sha256_hex(&bytes);
        let text = String::from_utf8(bytes)
            .map_err(|_| InputError(format!("{shown} is not UTF-8 text")))?;
        self.record(|r| r.inputs.insert(path.to_path_buf(), sha));
        Ok(text)
    }
}

/// Why the plugin refused to load an input (rolldown reports it as a plugin error).
#[derive(Debug)]
struct InputError(String);

impl std::fmt::Display for InputError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for InputError {}

impl Plugin for NpmPlugin {
    fn name(&self) -> Cow<'static, str> {
        Cow::Borrowed("nodetool:npm")
    }

    async fn resolve_id(
        &self,
        _ctx: &PluginContext,
        args: &HookResolveIdArgs<'_>,
    ) -> HookResolveIdReturn {
        let specifier = args.specifier;
        if specifier == self.entry_id {
            return Ok(Some(HookResolveIdOutput::from_id(self.entry_id.as_str())));
        }
        if is_builtin(specifier) {
            let name = node_name(specifier);
            let importer = args.importer.map(PathBuf::from);
            // The browser build of a package may say it does without the builtin.
            if self.browser
                && let Some(importer) = importer.as_deref()
                && browser_field_drops(importer, specifier)
            {
                return Ok(Some(HookResolveIdOutput {
                    id: format!("{BUILTIN_EMPTY_PREFIX}{name}").into(),
                    side_effects: Some(HookSideEffects::False),
                    ..HookResolveIdOutput::default()
                }));
            }
            self.record(|r| {
                let importers = r.builtins.entry(name.clone()).or_default();
                if let Some(importer) = importer.filter(|i| i.is_absolute()) {
                    importers.insert(importer);
                }
            });
            // Side-effect free, so an import nothing uses is dropped with the code around it.
            return Ok(Some(HookResolveIdOutput {
                id: format!("{BUILTIN_STUB_PREFIX}{name}").into(),
                side_effects: Some(HookSideEffects::False),
                ..HookResolveIdOutput::default()
            }));
        }
        if let (Some(name), Some(importer)) = (package_name(specifier), args.importer) {
            let dir = Path::new(importer).parent().map(Path::to_path_buf);
            if let Some(dir) = dir.filter(|d| d.is_absolute()) {
                self.record(|r| r.bare.insert((dir, name.to_string())));
            }
        }
        Ok(None)
    }

    async fn load(&self, ctx: SharedLoadPluginContext, args: &HookLoadArgs<'_>) -> HookLoadReturn {
        if args.id == self.entry_id {
            return Ok(Some(HookLoadOutput {
                code: self.entry_source(&ctx).await.into(),
                module_type: Some(ModuleType::Js),
                ..HookLoadOutput::default()
            }));
        }
        if args.id.starts_with(BUILTIN_EMPTY_PREFIX) {
            return Ok(Some(HookLoadOutput {
                code: "module.exports = {};\n".into(),
                module_type: Some(ModuleType::Js),
                side_effects: Some(HookSideEffects::False),
                ..HookLoadOutput::default()
            }));
        }
        if let Some(name) = args.id.strip_prefix(BUILTIN_STUB_PREFIX) {
            return Ok(Some(HookLoadOutput {
                code: builtin_stub(name).into(),
                module_type: Some(ModuleType::Js),
                side_effects: Some(HookSideEffects::False),
                ..HookLoadOutput::default()
            }));
        }
        let path = Path::new(args.id);
        if !path.is_absolute() || args.id.contains('\0') {
            return Ok(None);
        }
        let code = self.read_input(path)?;
        Ok(Some(HookLoadOutput {
            code: code.into(),
            ..HookLoadOutput::default()
        }))
    }

    fn register_hook_usage(&self) -> HookUsage {
        HookUsage::ResolveId | HookUsage::Load
    }
}

/// Whether the `browser` field of the package.json nearest to `importer` maps `specifier` (as
/// written, or without its `node:` prefix) to `false`.
fn browser_field_drops(importer: &Path, specifier: &str) -> bool {
    let bare = specifier.strip_prefix("node:").unwrap_or(specifier);
    let mut dir = importer.parent();
    for _ in 0..64 {
        let Some(d) = dir else { return false };
        let manifest = d.join("package.json");
        if let Ok(meta) = std::fs::metadata(&manifest)
            && meta.is_file()
        {
            if meta.len() > MAX_INPUT_FILE_BYTES {
                return false;
            }
            let Ok(text) = std::fs::read_to_string(&manifest) else {
                return false;
            };
            let Ok(json) = serde_json::from_str::<serde_json::Value>(&text) else {
                return false;
            };
            let browser = &json["browser"];
            return [specifier, bare]
                .iter()
                .any(|k| browser.get(*k) == Some(&serde_json::Value::Bool(false)));
        }
        dir = d.parent();
    }
    false
}

/// `node:<name>` for a builtin specifier written either way.
fn node_name(specifier: &str) -> String {
    if specifier.starts_with("node:") {
        specifier.to_string()
    } else {
        format!("node:{specifier}")
    }
}

/// A builtin's stub: a CommonJS module that throws when it is evaluated, so a `require` of it
/// inside `try` falls to the package's own fallback and any other use fails with a clear error.
fn builtin_stub(name: &str) -> String {
    let message = format!("{}{BUILTIN_STUB_MESSAGE}", js_string(name));
    format!(
        "module.exports = (() => {{\n  throw new Error({});\n}})();\n",
        js_string(&message)
    )
}

/// Whether `specifier` names a Node builtin (`fs`, `node:fs`, `node:test`, any `node:` id).
pub(crate) fn is_builtin(specifier: &str) -> bool {
    specifier.starts_with("node:") || nodejs_built_in_modules::is_nodejs_builtin_module(specifier)
}

/// The package a bare specifier names (`@scope/name` or `name`), or `None` for relative,
/// absolute, `#` and URL-like specifiers.
fn package_name(specifier: &str) -> Option<&str> {
    if specifier.is_empty()
        || specifier.starts_with('.')
        || specifier.starts_with('/')
        || specifier.starts_with('#')
        || specifier.contains(':')
        || specifier.contains('\0')
    {
        return None;
    }
    let mut parts = specifier.splitn(3, '/');
    let first = parts.next()?;
    if first.starts_with('@') {
        let second = parts.next().filter(|s| !s.is_empty())?;
        Some(&specifier[..first.len() + 1 + second.len()])
    } else {
        Some(first)
    }
}

/// Whether the module at `path` has a default export. A module with no ES module syntax is
/// CommonJS, whose `module.exports` is its default; an unreadable or unparsable file answers
/// `true`, so the bundler reports the real problem.
fn module_has_default(path: &Path) -> bool {
    let Ok(meta) = std::fs::metadata(path) else {
        return true;
    };
    if meta.len() > MAX_INPUT_FILE_BYTES {
        return true;
    }
    let Ok(source) = std::fs::read_to_string(path) else {
        return true;
    };
    let allocator = Allocator::default();
    let source_type = SourceType::from_path(path)
        .unwrap_or_else(|_| SourceType::mjs())
        .with_module(true);
    let parsed = Parser::new(&allocator, &source, source_type).parse();
    if parsed.panicked || !parsed.diagnostics.is_empty() {
        return true;
    }
    let body = &parsed.program.body;
    if !body.iter().any(Statement::is_module_declaration) {
        return true;
    }
    let is_default = |name: &ModuleExportName<'_>| name.name() == "default";
    body.iter().any(|s| match s {
        Statement::ExportDefaultDeclaration(_) => true,
        Statement::ExportNamedDeclaration(d) => {
            d.specifiers.iter().any(|s| is_default(&s.exported))
        }
        Statement::ExportFromDeclaration(d) => d.specifiers.iter().any(|s| is_default(&s.exported)),
        Statement::ExportAllDeclaration(d) => d.exported.as_ref().is_some_and(is_default),
        _ => false,
    })
}

/// A JavaScript string literal for `text`.
fn js_string(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_else(|_| "\"\"".into())
}

/// Bundles `npm` again with its default's keys as named exports (`names` are checked to be
/// plain identifiers here), under the conditions of the build that was admitted.
pub(crate) fn bundle_named(
    runtime: &tokio::runtime::Runtime,
    pack_dir: &Path,
    npm: &str,
    browser: bool,
    names: &[String],
) -> Bundled {
    let names: Vec<String> = names
        .iter()
        .filter(|n| is_plain_identifier(n))
        .take(MAX_NAMED_FROM_DEFAULT)
        .cloned()
        .collect();
    let attempt = bundle_once_with(runtime, pack_dir, npm, true, browser, Some(names));
    let mut bundled = finish(pack_dir, npm, attempt);
    bundled.browser = browser;
    bundled
}

/// The most keys of a default re-exported by name.
pub(crate) const MAX_NAMED_FROM_DEFAULT: usize = 2_000;

/// Whether `name` can be an exported `const`: an identifier that is no reserved word (the
/// protocol's rule for facade bindings), nor `eval`, `arguments`, interop's `__esModule` or
/// one of the entry's own names.
pub(crate) fn is_plain_identifier(name: &str) -> bool {
    name.len() <= 256
        && nodetool_protocol::names::check_identifier(name).is_ok()
        && !["eval", "arguments", "__esModule"].contains(&name)
        && !name.starts_with("__nodetool")
}

/// Bundles `npm` with the browser condition only (the compiler's retry when the default build
/// does not initialize).
pub(crate) fn bundle_browser(
    runtime: &tokio::runtime::Runtime,
    pack_dir: &Path,
    npm: &str,
) -> Bundled {
    let mut bundled = finish(pack_dir, npm, bundle_with(runtime, pack_dir, npm, true));
    bundled.browser = true;
    bundled
}

/// Bundles `npm` as resolved from `pack_dir` (a canonical directory): with the default
/// conditions, then, when that bundle needs a builtin, with the browser condition.
pub(crate) fn bundle(runtime: &tokio::runtime::Runtime, pack_dir: &Path, npm: &str) -> Bundled {
    let first = bundle_with(runtime, pack_dir, npm, false);
    let needs_builtin = first.outcome.is_ok() && !builtin_verdict(pack_dir, &first).hard.is_empty();
    if needs_builtin {
        let browser = bundle_with(runtime, pack_dir, npm, true);
        if browser.outcome.is_ok() && builtin_verdict(pack_dir, &browser).hard.is_empty() {
            let needed = builtin_verdict(pack_dir, &first).hard.join(", ");
            let mut bundled = finish(pack_dir, npm, browser);
            bundled.browser = true;
            bundled.warnings.insert(
                0,
                format!(
                    "{npm}'s default entry needs {needed}, so it was bundled with the browser condition"
                ),
            );
            return bundled;
        }
    }
    finish(pack_dir, npm, first)
}

/// One build with the default re-export, and again without it when that re-export was the
/// problem (its presence could not be read off the entry file).
fn bundle_with(
    runtime: &tokio::runtime::Runtime,
    pack_dir: &Path,
    npm: &str,
    browser: bool,
) -> Attempt {
    let first = bundle_once(runtime, pack_dir, npm, true, browser);
    match &first.outcome {
        Err(Failure::Diagnostics(diagnostics))
            if diagnostics
                .iter()
                .any(|d| matches!(d.kind, EventKind::MissingExportError)) =>
        {
            bundle_once(runtime, pack_dir, npm, false, browser)
        }
        _ => first,
    }
}

/// The builtins of a built attempt, judged by the rules in the module doc.
struct BuiltinVerdict {
    /// `node:` names the package cannot run without, sorted.
    hard: Vec<String>,
    /// Warnings for the builtins let through.
    warnings: Vec<String>,
}

fn builtin_verdict(pack_dir: &Path, attempt: &Attempt) -> BuiltinVerdict {
    let mut verdict = BuiltinVerdict {
        hard: Vec::new(),
        warnings: Vec::new(),
    };
    let Ok((code, _)) = &attempt.outcome else {
        // The bundle did not build: whatever else failed, a builtin is reason enough.
        verdict.hard = attempt.recorded.builtins.keys().cloned().collect();
        return verdict;
    };
    for (name, importers) in &attempt.recorded.builtins {
        let marker = format!("{}{BUILTIN_STUB_MESSAGE}", js_string(name));
        let files: Vec<String> = importers
            .iter()
            .map(|i| package_relative(&relative_to(pack_dir, i)))
            .collect();
        let files = files.join(", ");
        if !code.contains(&js_string(&marker)) {
            verdict.warnings.push(format!(
                "imports {name} ({files}) only from code its exports never reach; it is left out"
            ));
        } else if !importers.is_empty() && importers.iter().all(|i| required_only_in_try(i, name)) {
            verdict.warnings.push(format!(
                "requires {name} ({files}) only inside try; it is an empty module that throws, so the package's own fallback runs"
            ));
        } else {
            verdict.hard.push(name.clone());
        }
    }
    verdict
}

/// `text` with every `../…/node_modules/` run removed, so a file is named from its package's
/// directory on (`js-yaml/index.js`), whatever the layout around the pack.
fn without_layout(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("node_modules/") {
        let (before, after) = rest.split_at(at);
        let mut kept = before;
        while let Some(stripped) = kept.strip_suffix("../") {
            kept = stripped;
        }
        out.push_str(kept);
        rest = &after["node_modules/".len()..];
    }
    out.push_str(rest);
    out
}

/// A path as `node_modules/…` shows it: from the package's own directory on (never a path
/// outside the pack's tree).
fn package_relative(relative: &str) -> String {
    match relative.rfind("node_modules/") {
        Some(at) => relative[at + "node_modules/".len()..].to_string(),
        None => relative.trim_start_matches("../").to_string(),
    }
}

/// Whether every request of builtin `name` in the file at `path` is a `require("…")` call
/// inside a `try` block (not its `catch` or `finally`). An unreadable or unparsable file, an
/// `import` or an `export … from` of the builtin answers `false`.
fn required_only_in_try(path: &Path, name: &str) -> bool {
    let Ok(meta) = std::fs::metadata(path) else {
        return false;
    };
    if meta.len() > MAX_INPUT_FILE_BYTES {
        return false;
    }
    let Ok(source) = std::fs::read_to_string(path) else {
        return false;
    };
    let allocator = Allocator::default();
    let source_type = SourceType::from_path(path).unwrap_or_else(|_| SourceType::mjs());
    let parsed = Parser::new(&allocator, &source, source_type).parse();
    if parsed.panicked {
        return false;
    }
    let bare = name.strip_prefix("node:").unwrap_or(name);
    let mut finder = BuiltinRequests {
        names: [name, bare],
        try_depth: 0,
        in_try: 0,
        outside: 0,
    };
    finder.visit_program(&parsed.program);
    finder.outside == 0 && finder.in_try > 0
}

/// Counts the requests of one builtin inside and outside `try` blocks.
struct BuiltinRequests<'n> {
    names: [&'n str; 2],
    try_depth: usize,
    in_try: usize,
    outside: usize,
}

impl BuiltinRequests<'_> {
    fn is_it(&self, text: &str) -> bool {
        self.names.contains(&text)
    }
}

impl<'a> VisitJs<'a> for BuiltinRequests<'_> {
    fn visit_try_statement(&mut self, it: &TryStatement<'a>) {
        self.try_depth += 1;
        self.visit_block_statement(&it.block);
        self.try_depth -= 1;
        if let Some(handler) = &it.handler {
            self.visit_catch_clause(handler);
        }
        if let Some(finalizer) = &it.finalizer {
            self.visit_block_statement(finalizer);
        }
    }

    // A function's body runs when it is called, not where it is written: a `try` around its
    // definition guards nothing inside it.
    fn visit_function(&mut self, it: &Function<'a>, flags: ScopeFlags) {
        let depth = std::mem::replace(&mut self.try_depth, 0);
        walk_js::walk_function(self, it, flags);
        self.try_depth = depth;
    }

    fn visit_arrow_function_expression(&mut self, it: &ArrowFunctionExpression<'a>) {
        let depth = std::mem::replace(&mut self.try_depth, 0);
        walk_js::walk_arrow_function_expression(self, it);
        self.try_depth = depth;
    }

    fn visit_call_expression(&mut self, it: &CallExpression<'a>) {
        if let Expression::Identifier(callee) = &it.callee
            && callee.name == "require"
            && let Some(Argument::StringLiteral(arg)) = it.arguments.first()
            && self.is_it(arg.value.as_str())
        {
            if self.try_depth > 0 {
                self.in_try += 1;
            } else {
                self.outside += 1;
            }
        }
        walk_js::walk_call_expression(self, it);
    }

    fn visit_import_declaration(&mut self, it: &ImportDeclaration<'a>) {
        if self.is_it(it.source.value.as_str()) {
            self.outside += 1;
        }
    }

    fn visit_export_from_declaration(&mut self, it: &ExportFromDeclaration<'a>) {
        if self.is_it(it.source.value.as_str()) {
            self.outside += 1;
        }
    }

    fn visit_export_all_declaration(&mut self, it: &ExportAllDeclaration<'a>) {
        if self.is_it(it.source.value.as_str()) {
            self.outside += 1;
        }
    }

    fn visit_import_expression(&mut self, it: &ImportExpression<'a>) {
        if let Expression::StringLiteral(arg) = &it.source
            && self.is_it(arg.value.as_str())
        {
            self.outside += 1;
        }
        walk_js::walk_import_expression(self, it);
    }
}

/// One diagnostic, reduced to what classification needs.
struct Diagnostic {
    kind: EventKind,
    message: String,
}

enum Failure {
    Diagnostics(Vec<Diagnostic>),
    /// The build did not finish (deadline, panic).
    Aborted(String),
}

struct Attempt {
    outcome: Result<(String, Vec<Diagnostic>), Failure>,
    recorded: Recorded,
}

fn bundle_once(
    runtime: &tokio::runtime::Runtime,
    pack_dir: &Path,
    npm: &str,
    with_default: bool,
    browser: bool,
) -> Attempt {
    bundle_once_with(runtime, pack_dir, npm, with_default, browser, None)
}

fn bundle_once_with(
    runtime: &tokio::runtime::Runtime,
    pack_dir: &Path,
    npm: &str,
    with_default: bool,
    browser: bool,
    named: Option<Vec<String>>,
) -> Attempt {
    let entry_id = pack_dir.join(ENTRY_FILE).to_string_lossy().into_owned();
    let recorded = Arc::new(Mutex::new(Recorded::default()));
    let plugin = Arc::new(NpmPlugin {
        pack_dir: pack_dir.to_path_buf(),
        entry_id: entry_id.clone(),
        npm: npm.to_string(),
        with_default,
        browser,
        named,
        recorded: Arc::clone(&recorded),
    });
    let options = BundlerOptions {
        input: Some(vec![InputItem {
            name: Some("bundle".into()),
            import: entry_id,
        }]),
        cwd: Some(pack_dir.to_path_buf()),
        platform: Some(Platform::Neutral),
        format: Some(OutputFormat::Esm),
        resolve: Some(if browser {
            ResolveOptions {
                condition_names: Some(
                    BROWSER_CONDITIONS
                        .iter()
                        .map(|s| (*s).to_string())
                        .collect(),
                ),
                main_fields: Some(
                    BROWSER_MAIN_FIELDS
                        .iter()
                        .map(|s| (*s).to_string())
                        .collect(),
                ),
                alias_fields: Some(vec![vec!["browser".to_string()]]),
                ..ResolveOptions::default()
            }
        } else {
            ResolveOptions {
                condition_names: Some(CONDITIONS.iter().map(|s| (*s).to_string()).collect()),
                main_fields: Some(MAIN_FIELDS.iter().map(|s| (*s).to_string()).collect()),
                ..ResolveOptions::default()
            }
        }),
        code_splitting: Some(CodeSplittingMode::Bool(false)),
        comments: Some(CommentsOptions {
            legal: false,
            annotation: true,
            jsdoc: false,
        }),
        legal_comments: Some(LegalComments::None),
        // No tsconfig.json lookup per file: a package's sources are JavaScript, and every file
        // that decides the output must be one the cache key records.
        tsconfig: Some(TsConfig::Auto(false)),
        define: Some(
            DEFINES
                .iter()
                .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
                .collect(),
        ),
        // No `//#region <path>` around each module: the bundle must not depend on where the
        // pack sits.
        experimental: Some(ExperimentalOptions {
            attach_debug_info: Some(AttachDebugInfo::None),
            ..ExperimentalOptions::default()
        }),
        ..BundlerOptions::default()
    };
    let diagnostic_options = DiagnosticOptions {
        cwd: pack_dir.to_path_buf(),
    };
    let describe = |d: &BuildDiagnostic| {
        let kind = d.kind();
        let mut message = d.to_message_with(&diagnostic_options);
        if d.severity() == Severity::Error
            && !matches!(
                kind,
                EventKind::UnresolvedImport | EventKind::UnresolvedEntry
            )
            && let Some((file, line, column, _)) = d
                .to_diagnostic_with(&diagnostic_options)
                .get_primary_location()
            && !file.ends_with(ENTRY_FILE)
        {
            message = format!("{message} (at {file}:{line}:{})", column + 1);
        }
        // The virtual entry is an implementation detail: name the pack directory instead.
        let message = without_layout(&message.replace(
            &format!("in {ENTRY_FILE}"),
            "from the pack directory (is it installed?)",
        ));
        Diagnostic { kind, message }
    };
    let build = async move {
        let mut bundler = Bundler::with_plugins(options, vec![plugin])?;
        let output = bundler.generate().await;
        let _ = bundler.close().await;
        output
    };
    let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        runtime.block_on(async { tokio::time::timeout(BUNDLE_DEADLINE, build).await })
    }));
    let outcome = match ran {
        Err(_) => Err(Failure::Aborted("the bundler failed unexpectedly".into())),
        Ok(Err(_)) => Err(Failure::Aborted(format!(
            "the bundler did not finish within {} s",
            BUNDLE_DEADLINE.as_secs()
        ))),
        Ok(Ok(Err(errors))) => Err(Failure::Diagnostics(
            errors.into_vec().iter().map(describe).collect(),
        )),
        Ok(Ok(Ok(output))) => {
            let warnings: Vec<Diagnostic> = output.warnings.iter().map(describe).collect();
            let mut chunks = output.assets.iter().filter_map(|o| match o {
                Output::Chunk(c) => Some(c),
                Output::Asset(_) => None,
            });
            match (chunks.next(), chunks.next(), output.assets.len()) {
                (Some(chunk), None, 1) => Ok((chunk.code.clone(), warnings)),
                _ => Err(Failure::Diagnostics(vec![Diagnostic {
                    kind: EventKind::InvalidOptionError,
                    message: format!(
                        "rolldown produced {} output files, not one self-contained module",
                        output.assets.len()
                    ),
                }])),
            }
        }
    };
    let recorded = std::mem::take(&mut *recorded.lock().unwrap_or_else(PoisonError::into_inner));
    Attempt { outcome, recorded }
}

fn finish(pack_dir: &Path, npm: &str, attempt: Attempt) -> Bundled {
    let verdict = builtin_verdict(pack_dir, &attempt);
    let Attempt { outcome, recorded } = attempt;
    let inputs: FileRecords = recorded
        .inputs
        .iter()
        .map(|(path, sha)| (relative_to(pack_dir, path), Some(sha.clone())))
        .collect();
    let resolution = resolution_records(pack_dir, &recorded);
    let result = classify(npm, outcome, &verdict.hard);
    Bundled {
        result,
        browser: false,
        warnings: verdict
            .warnings
            .iter()
            .map(|w| format!("{npm} {w}"))
            .collect(),
        inputs,
        resolution,
    }
}

fn classify(
    npm: &str,
    outcome: Result<(String, Vec<Diagnostic>), Failure>,
    hard_builtins: &[String],
) -> Result<String, Refusal> {
    // Builtins first: whatever else failed, this is the reason the package cannot be a guest
    // module.
    if !hard_builtins.is_empty() {
        let names = hard_builtins;
        return Err(Refusal::new(
            StatusCode::NpmModuleBuiltinImport,
            format!(
                "{npm} imports {} — a Node builtin needs the host bridge path, which the guest does not have",
                names.join(", ")
            ),
        ));
    }
    let (code, diagnostics) = match outcome {
        Ok((code, warnings)) => (Some(code), warnings),
        // A deadline or a bundler panic says nothing reliable about the package: reported,
        // never cached.
        Err(Failure::Aborted(why)) => {
            return Err(Refusal {
                transient: true,
                ..Refusal::new(StatusCode::NpmModuleBundleFailed, format!("{npm}: {why}"))
            });
        }
        Err(Failure::Diagnostics(errors)) => (None, errors),
    };
    let unresolved: Vec<&Diagnostic> = diagnostics
        .iter()
        .filter(|d| {
            matches!(
                d.kind,
                EventKind::UnresolvedImport | EventKind::UnresolvedEntry
            ) || d.message.starts_with("Could not resolve")
        })
        .collect();
    if !unresolved.is_empty() {
        return Err(Refusal::new(
            StatusCode::NpmModuleUnresolved,
            format!(
                "{npm}: {}",
                joined(unresolved.iter().map(|d| d.message.as_str()))
            ),
        ));
    }
    match code {
        Some(code) => Ok(code),
        None if diagnostics.is_empty() => Err(Refusal::new(
            StatusCode::NpmModuleBundleFailed,
            format!("{npm}: rolldown produced no output"),
        )),
        None => Err(Refusal::new(
            StatusCode::NpmModuleBundleFailed,
            format!(
                "{npm}: {}",
                joined(diagnostics.iter().map(|d| d.message.as_str()))
            ),
        )),
    }
}

/// Diagnostic texts joined with `; `, capped.
fn joined<'a>(messages: impl Iterator<Item = &'a str>) -> String {
    let mut seen = BTreeSet::new();
    let unique: Vec<&str> = messages.filter(|m| seen.insert(*m)).collect();
    let text = unique.join("; ");
    if text.chars().count() > MAX_DIAGNOSTIC_CHARS {
        let cut: String = text.chars().take(MAX_DIAGNOSTIC_CHARS).collect();
        format!("{cut}…")
    } else {
        text
    }
}

/// The files that decided resolution: the pack's package.json; for every input, each
/// package.json from its directory up to the root of the package holding it; and for every
/// bare import, `node_modules/<name>/package.json` in each directory from the importer up to
/// the one that answered (absent ones recorded absent, so installing a nearer copy is seen).
fn resolution_records(pack_dir: &Path, recorded: &Recorded) -> FileRecords {
    let mut paths: BTreeSet<PathBuf> = BTreeSet::new();
    paths.insert(pack_dir.join("package.json"));
    let mut seen_dirs: BTreeSet<PathBuf> = BTreeSet::new();
    for input in recorded.inputs.keys() {
        let mut dir = input.parent();
        for _ in 0..64 {
            let Some(d) = dir else { break };
            if !seen_dirs.insert(d.to_path_buf()) {
                break; // this directory and everything above it were walked already
            }
            let manifest = d.join("package.json");
            let present = manifest.is_file();
            paths.insert(manifest);
            if is_package_root(d) || (present && !within_node_modules(d)) || d == pack_dir {
                break;
            }
            dir = d.parent();
        }
    }
    for (importer_dir, name) in &recorded.bare {
        let mut dir = Some(importer_dir.as_path());
        for _ in 0..64 {
            let Some(d) = dir else { break };
            let manifest = d.join("node_modules").join(name).join("package.json");
            let present = manifest.is_file();
            paths.insert(manifest);
            if present {
                break;
            }
            dir = d.parent();
        }
    }
    paths
        .into_iter()
        .map(|p| {
            let sha = std::fs::read(&p).ok().map(|bytes| sha256_hex(&bytes));
            (relative_to(pack_dir, &p), sha)
        })
        .collect()
}

/// Whether `dir` is `…/node_modules/<name>` or `…/node_modules/@scope/<name>`.
fn is_package_root(dir: &Path) -> bool {
    let parent = dir.parent();
    let parent_name = parent.and_then(Path::file_name).and_then(|n| n.to_str());
    match parent_name {
        Some("node_modules") => true,
        Some(scope) if scope.starts_with('@') => parent
            .and_then(Path::parent)
            .and_then(Path::file_name)
            .is_some_and(|n| n == "node_modules"),
        _ => false,
    }
}

fn within_node_modules(dir: &Path) -> bool {
    dir.components()
        .any(|c| matches!(c, Component::Normal(n) if n == "node_modules"))
}

/// `path` relative to `base` (both absolute), with `/` separators and `..` where it climbs.
pub(crate) fn relative_to(base: &Path, path: &Path) -> String {
    let base: Vec<Component<'_>> = base.components().collect();
    let target: Vec<Component<'_>> = path.components().collect();
    let common = base.iter().zip(&target).take_while(|(a, b)| a == b).count();
    let mut parts: Vec<String> = Vec::new();
    for _ in common..base.len() {
        parts.push("..".into());
    }
    for c in &target[common..] {
        parts.push(c.as_os_str().to_string_lossy().into_owned());
    }
    if parts.is_empty() {
        ".".into()
    } else {
        parts.join("/")
    }
}

/// `relative` (as [`relative_to`] wrote it) joined back onto `base`, or `None` when it is not
/// a plain relative path.
///
/// Not the import rule of `nodetool_jssource::relative`: that joins a request onto an
/// importing *file's* directory inside one package and refuses a climb above the package root,
/// while this rejoins a filesystem path [`relative_to`] wrote relative to a *directory* (the
/// cache records a compiled pack's input files relative to the pack's directory), where `..`
/// legitimately climbs out of `base` (to a `node_modules` above it), and an empty or `.`
/// segment is refused because no input file's record has one.
pub(crate) fn join_relative(base: &Path, relative: &str) -> Option<PathBuf> {
    if relative.is_empty() || relative.starts_with('/') || relative.contains('\0') {
        return None;
    }
    let mut out = base.to_path_buf();
    for part in relative.split('/') {
        match part {
            "" | "." => return None,
            ".." => {
                out.pop();
            }
            p => out.push(p),
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn package_names_of_bare_specifiers() {
        assert_eq!(package_name("js-yaml"), Some("js-yaml"));
        assert_eq!(package_name("date-fns/locale"), Some("date-fns"));
        assert_eq!(package_name("@scope/pkg/sub"), Some("@scope/pkg"));
        assert_eq!(package_name("@scope"), None);
        assert_eq!(package_name("./x"), None);
        assert_eq!(package_name("/abs"), None);
        assert_eq!(package_name("#internal"), None);
        assert_eq!(package_name("node:fs"), None);
    }

    #[test]
    fn builtins_by_name_and_prefix() {
        assert!(is_builtin("fs"));
        assert!(is_builtin("node:fs"));
        assert!(is_builtin("node:test"));
        assert!(is_builtin("stream"));
        assert!(!is_builtin("js-yaml"));
    }

    #[test]
    fn relative_paths_round_trip() {
        let base = Path::new("/a/b/packs/@x/y");
        let path = Path::new("/a/b/packs/node_modules/js-yaml/index.js");
        let rel = relative_to(base, path);
        assert_eq!(rel, "../../node_modules/js-yaml/index.js");
        assert_eq!(join_relative(base, &rel).as_deref(), Some(path));
        assert_eq!(
            relative_to(base, &base.join("package.json")),
            "package.json"
        );
        assert_eq!(join_relative(base, "/etc/passwd"), None);
        assert_eq!(join_relative(base, "a//b"), None);
    }

    #[test]
    fn only_plain_identifiers_become_named_exports() {
        for ok in ["isEmail", "_x", "$", "a1", "toDate"] {
            assert!(is_plain_identifier(ok), "{ok}");
        }
        for bad in [
            "default",
            "delete",
            "1a",
            "a-b",
            "",
            "__esModule",
            "é",
            "eval",
            "__nodetool_default",
        ] {
            assert!(!is_plain_identifier(bad), "{bad}");
        }
    }

    #[test]
    fn messages_name_files_from_their_package_on() {
        assert_eq!(
            without_layout(
                "x (at ../../node_modules/a/index.js:1:2); y (at ../node_modules/@s/b/c.js)"
            ),
            "x (at a/index.js:1:2); y (at @s/b/c.js)"
        );
        assert_eq!(without_layout("no path here"), "no path here");
        assert_eq!(package_relative("../../node_modules/a/b.js"), "a/b.js");
    }

    #[test]
    fn package_roots() {
        assert!(is_package_root(Path::new("/p/node_modules/x")));
        assert!(is_package_root(Path::new("/p/node_modules/@s/x")));
        assert!(!is_package_root(Path::new("/p/node_modules/x/lib")));
        assert!(!is_package_root(Path::new("/p/@s/x")));
    }
}
