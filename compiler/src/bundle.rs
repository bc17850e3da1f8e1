//! Bundling one npm dependency into one self-contained ES module with rolldown, used as a
//! library: platform neutral, conditions `import`, `module`, `default`, main fields `module`,
//! `main`, no externals, no minification, no code splitting, through a virtual entry that
//! re-exports the package's named exports and (when it has one) its default.
//!
//! A plugin in front of rolldown's own resolver and loader does three things: it serves the
//! virtual entry; it refuses every Node builtin by name (recording each, so the skip lists them
//! all); and it reads every input file itself, so exactly the bytes that were bundled are the
//! bytes whose hashes key the cache. It also records every bare import with its importer, from
//! which the shadow candidates (a `node_modules/<name>` nearer the importer that would win if
//! it appeared) are derived after the build.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use nodetool_protocol::catalog::StatusCode;
use oxc::allocator::Allocator;
use oxc::ast::ast::{ModuleExportName, Statement};
use oxc::parser::Parser;
use oxc::span::SourceType;
use rolldown::{
    Bundler, BundlerOptions, CodeSplittingMode, CommentsOptions, InputItem, LegalComments,
    ModuleType, OutputFormat, Platform, ResolveOptions, TsConfig,
};
use rolldown_common::{ExportsKind, Output, ResolvedExternal};
use rolldown_error::{BuildDiagnostic, DiagnosticOptions, EventKind, Severity};
use rolldown_plugin::{
    HookLoadArgs, HookLoadOutput, HookLoadReturn, HookResolveIdArgs, HookResolveIdOutput,
    HookResolveIdReturn, HookUsage, Plugin, PluginContext, SharedLoadPluginContext,
};
use sha2::{Digest, Sha256};

use crate::Refusal;

/// Resolution conditions, in order.
pub(crate) const CONDITIONS: [&str; 3] = ["import", "module", "default"];
/// package.json main fields, in order.
pub(crate) const MAIN_FIELDS: [&str; 2] = ["module", "main"];
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
    /// Node builtins imported anywhere, as written.
    builtins: BTreeSet<String>,
    /// (importer directory, package name) of every bare import.
    bare: BTreeSet<(PathBuf, String)>,
}

#[derive(Debug)]
struct NpmPlugin {
    /// The pack directory (messages name inputs relative to it).
    pack_dir: PathBuf,
    entry_id: String,
    npm: String,
    /// Whether the entry re-exports `default` (off for the named-only retry).
    with_default: bool,
    recorded: Arc<Mutex<Recorded>>,
}

impl NpmPlugin {
    fn record<T>(&self, f: impl FnOnce(&mut Recorded) -> T) -> T {
        f(&mut self.recorded.lock().unwrap_or_else(PoisonError::into_inner))
    }

    async fn entry_source(&self, ctx: &PluginContext) -> String {
        let star = format!("export * from {};\n", js_string(&self.npm));
        if !self.with_default {
            return star;
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
            star
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
            self.record(|r| r.builtins.insert(specifier.to_string()));
            return Ok(Some(HookResolveIdOutput {
                id: specifier.into(),
                external: Some(ResolvedExternal::Bool(true)),
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

pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let mut out = String::with_capacity(64);
    for b in digest {
        out.push(char::from(b"0123456789abcdef"[usize::from(b >> 4)]));
        out.push(char::from(b"0123456789abcdef"[usize::from(b & 15)]));
    }
    out
}

/// Bundles `npm` as resolved from `pack_dir` (a canonical directory).
pub(crate) fn bundle(runtime: &tokio::runtime::Runtime, pack_dir: &Path, npm: &str) -> Bundled {
    let first = bundle_once(runtime, pack_dir, npm, true);
    match &first.outcome {
        Err(Failure::Diagnostics(diagnostics))
            if diagnostics
                .iter()
                .any(|d| matches!(d.kind, EventKind::MissingExportError)) =>
        {
            // The default re-export was the problem (its presence could not be read off the
            // entry file): the package's named exports alone.
            finish(pack_dir, npm, bundle_once(runtime, pack_dir, npm, false))
        }
        _ => finish(pack_dir, npm, first),
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
) -> Attempt {
    let entry_id = pack_dir.join(ENTRY_FILE).to_string_lossy().into_owned();
    let recorded = Arc::new(Mutex::new(Recorded::default()));
    let plugin = Arc::new(NpmPlugin {
        pack_dir: pack_dir.to_path_buf(),
        entry_id: entry_id.clone(),
        npm: npm.to_string(),
        with_default,
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
        resolve: Some(ResolveOptions {
            condition_names: Some(CONDITIONS.iter().map(|s| (*s).to_string()).collect()),
            main_fields: Some(MAIN_FIELDS.iter().map(|s| (*s).to_string()).collect()),
            ..ResolveOptions::default()
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
        {
            message = format!("{message} (at {file}:{line}:{})", column + 1);
        }
        // The virtual entry is an implementation detail: name the pack directory instead.
        let message = message.replace(
            &format!("in {ENTRY_FILE}"),
            "from the pack directory (is it installed?)",
        );
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
    let Attempt { outcome, recorded } = attempt;
    let inputs: FileRecords = recorded
        .inputs
        .iter()
        .map(|(path, sha)| (relative_to(pack_dir, path), Some(sha.clone())))
        .collect();
    let resolution = resolution_records(pack_dir, &recorded);
    let result = classify(npm, outcome, &recorded.builtins);
    Bundled {
        result,
        inputs,
        resolution,
    }
}

fn classify(
    npm: &str,
    outcome: Result<(String, Vec<Diagnostic>), Failure>,
    builtins: &BTreeSet<String>,
) -> Result<String, Refusal> {
    // Builtins first: whatever else failed, this is the reason the package cannot be a guest
    // module.
    if !builtins.is_empty() {
        let mut names: Vec<String> = builtins
            .iter()
            .map(|b| {
                if b.starts_with("node:") {
                    b.clone()
                } else {
                    format!("node:{b}")
                }
            })
            .collect();
        names.sort();
        names.dedup();
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
            )
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
    fn package_roots() {
        assert!(is_package_root(Path::new("/p/node_modules/x")));
        assert!(is_package_root(Path::new("/p/node_modules/@s/x")));
        assert!(!is_package_root(Path::new("/p/node_modules/x/lib")));
        assert!(!is_package_root(Path::new("/p/@s/x")));
    }
}
