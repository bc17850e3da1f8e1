//! What a resolved module exports, what a body imports by name, and the missing-export link
//! error said in the body's terms.
//!
//! QuickJS reports a named import that its module does not export as `SyntaxError: Could not
//! find export 'x' in module '<engine module name>'`, naming the loader's internal module id
//! and no position. [`explain_link_error`] turns that into a `missing-export` error naming the
//! specifier the body wrote, placed on the imported name. [`missing_exports`] finds the same
//! mistakes offline, from the export lists a resolution carries: the entry's `export`
//! statements for JS modules (authored or compiled), the manifest's contract for WASM, the host
//! registry for host modules.
//!
//! Invariant: no engine module id (`nodetool-sandbox:...|...`) survives in a message this
//! module returns; a pack-internal file is named `pack::file`.

use std::collections::BTreeSet;

use oxc::allocator::Allocator;
use oxc::ast::ast::{Declaration, ImportDeclarationSpecifier, ModuleExportName, Statement};
use oxc::parser::{ParseOptions, Parser};
use oxc::span::{GetSpan, SourceType};

use nodetool_protocol::catalog::{FileContent, ResolvedKind, ResolvedModule};
use nodetool_protocol::host::host_module;
use nodetool_protocol::run::{RunError, RunErrorCode};

use crate::position::Positions;
use crate::relative::{relative_candidates, relative_file};

/// The engine's prefix of every module name the loader gives it.
const MODULE_PREFIX: &str = "nodetool-sandbox:";
/// How QuickJS starts the message of a named import its module lacks.
const LINK_ERROR: &str = "Could not find export '";
/// How deep `export * from` chains are followed before the export list counts as unknown.
const MAX_STAR_DEPTH: usize = 16;
/// The longest name a suggestion is computed for (edit distance is quadratic).
const MAX_SUGGESTED_NAME: usize = 128;

/// One name a body imports from a specifier, where it is written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportedName {
    /// The specifier it is imported from.
    pub specifier: String,
    /// The export it names (`default` for a default import).
    pub name: String,
    /// 1-based line of the name in the body.
    pub line: u32,
    /// 1-based column of the name in the body.
    pub column: u32,
}

/// A named import the module does not export.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissingExport {
    /// The import as written.
    pub import: ImportedName,
    /// The closest export, by case and edit distance, if one is close.
    pub suggestion: Option<String>,
}

impl MissingExport {
    /// The error message: the specifier and the name, never an engine module id.
    pub fn message(&self) -> String {
        missing_message(&self.import.specifier, &self.import.name)
    }

    /// The `help:` line, when an export is close.
    pub fn help(&self) -> Option<String> {
        self.suggestion
            .as_deref()
            .map(|s| format!("did you mean {s}?"))
    }
}

fn missing_message(specifier: &str, name: &str) -> String {
    if name == "default" {
        format!("\"{specifier}\" has no default export; import its named exports instead")
    } else {
        format!("\"{specifier}\" has no export named \"{name}\"")
    }
}

fn parse_module<'a>(
    allocator: &'a Allocator,
    source: &'a str,
) -> Option<oxc::ast::ast::Program<'a>> {
    let options = ParseOptions {
        allow_return_outside_function: true,
        ..ParseOptions::default()
    };
    let parsed = Parser::new(allocator, source, SourceType::mjs())
        .with_options(options)
        .parse();
    (parsed.diagnostics.is_empty() && !parsed.panicked).then_some(parsed.program)
}

fn export_name(name: &ModuleExportName<'_>) -> String {
    name.name().to_string()
}

/// The names a body's static imports name, in order. Parses the body: call it only where the
/// body may be parsed (a sandbox worker, or the operator's own file). A body that does not
/// parse names nothing.
pub fn imported_names(body: &str) -> Vec<ImportedName> {
    let allocator = Allocator::default();
    let Some(program) = parse_module(&allocator, body) else {
        return Vec::new();
    };
    let mut positions = Positions::new(body);
    let mut out = Vec::new();
    for statement in &program.body {
        let Statement::ImportDeclaration(d) = statement else {
            continue;
        };
        for specifier in d.specifiers.iter().flatten() {
            let (name, at) = match specifier {
                ImportDeclarationSpecifier::ImportSpecifier(s) => {
                    (export_name(&s.imported), s.imported.span().start)
                }
                ImportDeclarationSpecifier::ImportDefaultSpecifier(s) => {
                    ("default".to_string(), s.local.span.start)
                }
                ImportDeclarationSpecifier::ImportNamespaceSpecifier(_) => continue,
            };
            let (line, column) = positions.at(at);
            out.push(ImportedName {
                specifier: d.source.value.to_string(),
                name,
                line,
                column,
            });
        }
    }
    out
}

/// What `module` exports, or `None` when that cannot be told without running it (a JS entry
/// that does not parse, or an `export *` whose target is not in the graph).
pub fn module_exports(module: &ResolvedModule) -> Option<BTreeSet<String>> {
    match &module.kind {
        ResolvedKind::Wasm { wasm } => {
            Some(wasm.exports.iter().map(|e| e.as_name.clone()).collect())
        }
        ResolvedKind::Host { host_id } => {
            let spec = host_module(host_id)?;
            let mut names: BTreeSet<String> = spec.exports.iter().map(|e| e.to_string()).collect();
            names.insert("default".into());
            Some(names)
        }
        ResolvedKind::Js => {
            let mut names = BTreeSet::new();
            js_exports(module, &module.module_id, 0, &mut names).then_some(names)
        }
    }
}

/// Adds the exports of graph file `file_id` to `names`; false when they cannot be known.
fn js_exports(
    module: &ResolvedModule,
    file_id: &str,
    depth: usize,
    names: &mut BTreeSet<String>,
) -> bool {
    if depth > MAX_STAR_DEPTH {
        return false;
    }
    let Some(FileContent::Js { source }) = module
        .graph
        .iter()
        .find(|f| f.id == file_id)
        .map(|f| &f.content)
    else {
        return false;
    };
    let allocator = Allocator::default();
    let Some(program) = parse_module(&allocator, source) else {
        return false;
    };
    for statement in &program.body {
        match statement {
            Statement::ExportNamedDeclaration(d) => {
                for s in &d.specifiers {
                    names.insert(export_name(&s.exported));
                }
            }
            Statement::ExportFromDeclaration(d) => {
                for s in &d.specifiers {
                    names.insert(export_name(&s.exported));
                }
            }
            Statement::ExportDeclaration(d) => match &d.declaration {
                Declaration::VariableDeclaration(v) => {
                    for declarator in &v.declarations {
                        for id in declarator.id.get_binding_identifiers() {
                            names.insert(id.name.to_string());
                        }
                    }
                }
                Declaration::FunctionDeclaration(f) => {
                    if let Some(id) = &f.id {
                        names.insert(id.name.to_string());
                    }
                }
                Declaration::ClassDeclaration(c) => {
                    if let Some(id) = &c.id {
                        names.insert(id.name.to_string());
                    }
                }
                _ => {}
            },
            Statement::ExportDefaultDeclaration(_) => {
                names.insert("default".into());
            }
            Statement::ExportAllDeclaration(d) => match &d.exported {
                Some(exported) => {
                    names.insert(export_name(exported));
                }
                None => {
                    let Some(joined) = relative_file(file_id, &d.source.value) else {
                        return false;
                    };
                    // The file the loader would serve: the first candidate in the graph.
                    let Some(target) = relative_candidates(&joined)
                        .into_iter()
                        .find(|c| module.graph.iter().any(|f| f.id == *c))
                    else {
                        return false;
                    };
                    // `export *` never re-exports a default.
                    let had_default = names.contains("default");
                    if !js_exports(module, &target, depth + 1, names) {
                        return false;
                    }
                    if !had_default {
                        names.remove("default");
                    }
                }
            },
            _ => {}
        }
    }
    true
}

/// The candidate closest to `name`: one that differs only in case first, else the nearest by
/// edit distance when it is within a third of the name's length (at least one edit).
pub fn closest<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    if name.chars().count() > MAX_SUGGESTED_NAME {
        return None;
    }
    let lower = name.to_lowercase();
    let limit = (name.chars().count() / 3).max(1);
    let mut best: Option<(usize, &str)> = None;
    for candidate in candidates {
        if candidate == name || candidate.chars().count() > MAX_SUGGESTED_NAME {
            continue;
        }
        let distance = if candidate.to_lowercase() == lower {
            0
        } else {
            edit_distance(&lower, &candidate.to_lowercase())
        };
        if distance <= limit && best.is_none_or(|(d, _)| distance < d) {
            best = Some((distance, candidate));
        }
    }
    best.map(|(_, c)| c)
}

/// Levenshtein distance over characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = if ca == *cb {
                diagonal
            } else {
                1 + diagonal.min(above).min(row[j])
            };
            diagonal = above;
        }
    }
    row[b.len()]
}

/// The imports of `names` that their resolved module does not export. A specifier that did
/// not resolve, or whose exports cannot be known, is not checked.
pub fn missing_exports(names: &[ImportedName], modules: &[ResolvedModule]) -> Vec<MissingExport> {
    let mut out = Vec::new();
    let mut known: Vec<(&str, Option<BTreeSet<String>>)> = Vec::new();
    for import in names {
        let exports = match known.iter().find(|(s, _)| *s == import.specifier) {
            Some((_, exports)) => exports.clone(),
            None => {
                let exports = modules
                    .iter()
                    .find(|m| m.specifier == import.specifier)
                    .and_then(module_exports);
                known.push((&import.specifier, exports.clone()));
                exports
            }
        };
        let Some(exports) = exports else {
            continue;
        };
        if exports.contains(&import.name) {
            continue;
        }
        let suggestion =
            closest(&import.name, exports.iter().map(String::as_str)).map(str::to_string);
        out.push(MissingExport {
            import: import.clone(),
            suggestion,
        });
    }
    out
}

/// The file part of the engine module name the loader gives `module`'s entry (facades are
/// `wasm:<module id>` and `host:<host id>`).
fn engine_file(module: &ResolvedModule) -> String {
    match &module.kind {
        ResolvedKind::Js => module.module_id.clone(),
        ResolvedKind::Wasm { .. } => format!("wasm:{}", module.module_id),
        ResolvedKind::Host { host_id } => format!("host:{host_id}"),
    }
}

/// `pack::file` for an engine module name the loader gave a pack file, so no internal id
/// reaches a message.
fn public_module_name(engine_name: &str) -> Option<String> {
    let (pack, file) = engine_name.strip_prefix(MODULE_PREFIX)?.split_once('|')?;
    Some(format!("{pack}::{file}"))
}

/// Rewrites every engine module name in `message` as `pack::file`.
pub fn scrub_module_ids(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut rest = message;
    while let Some(at) = rest.find(MODULE_PREFIX) {
        out.push_str(&rest[..at]);
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| c == '\'' || c == '"' || c.is_whitespace() || c == ')')
            .unwrap_or(tail.len());
        let (name, after) = tail.split_at(end);
        match public_module_name(name) {
            Some(public) => out.push_str(&public),
            None => out.push_str(name),
        }
        rest = after;
    }
    out.push_str(rest);
    out
}

/// The error a run ends with when the engine could not link the body's graph: a named import
/// the module lacks becomes `missing-export` on the imported name (with the closest export as
/// help); another link error keeps its code with engine module names scrubbed, and any other
/// error is returned as it is.
pub fn explain_link_error(error: RunError, body: &str, modules: &[ResolvedModule]) -> RunError {
    // Only the engine's link error names an engine module id on its own; a denial echoes
    // what the body itself wrote, and is left as written.
    if !error.message.contains(MODULE_PREFIX) || !error.message.contains(LINK_ERROR) {
        return error;
    }
    let scrubbed = RunError {
        message: scrub_module_ids(&error.message),
        ..error.clone()
    };
    let Some((name, engine_module)) = error
        .message
        .split_once(LINK_ERROR)
        .and_then(|(_, rest)| rest.split_once("' in module '"))
        .and_then(|(name, rest)| Some((name, rest.split_once('\'')?.0)))
    else {
        return scrubbed;
    };
    let Some((pack, file)) = engine_module
        .strip_prefix(MODULE_PREFIX)
        .and_then(|m| m.split_once('|'))
    else {
        return scrubbed;
    };
    // Only the body's own imports are its mistakes; a pack file importing a sibling's missing
    // export is the pack's, reported as it is (scrubbed).
    let Some(module) = modules
        .iter()
        .find(|m| m.pack_name == pack && engine_file(m) == file)
    else {
        return scrubbed;
    };
    let names = imported_names(body);
    let Some(import) = names
        .iter()
        .find(|i| i.specifier == module.specifier && i.name == name)
    else {
        return scrubbed;
    };
    let missing = missing_exports(std::slice::from_ref(import), std::slice::from_ref(module));
    let message = match missing.first().and_then(MissingExport::help) {
        Some(help) => format!("{}; {help}", missing_message(&module.specifier, name)),
        None => missing_message(&module.specifier, name),
    };
    RunError {
        code: RunErrorCode::MissingExport,
        message,
        line: Some(import.line),
        column: Some(import.column),
        specifier: Some(module.specifier.clone()),
        stack: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closest_prefers_case_then_distance() {
        let exports = ["parseISO", "parse", "format", "formatISO"];
        assert_eq!(closest("parseIso", exports), Some("parseISO"));
        assert_eq!(closest("fromat", exports), Some("format"));
        assert_eq!(closest("completelyDifferent", exports), None);
        assert_eq!(closest("parse", exports), None);
        let long = "x".repeat(10_000);
        assert_eq!(closest(&long, [long.as_str()]), None);
    }

    #[test]
    fn names_and_positions() {
        let body = "import d, { parseIso as p, \"odd name\" as q } from \"@a/b\";\nimport * as ns from \"@a/c\";\nreturn 1";
        let names = imported_names(body);
        let got: Vec<(&str, &str, u32, u32)> = names
            .iter()
            .map(|n| (n.specifier.as_str(), n.name.as_str(), n.line, n.column))
            .collect();
        assert_eq!(
            got,
            [
                ("@a/b", "default", 1, 8),
                ("@a/b", "parseIso", 1, 13),
                ("@a/b", "odd name", 1, 28),
            ]
        );
        assert!(imported_names("import {").is_empty());
    }

    #[test]
    fn relative_files_stay_inside() {
        assert_eq!(
            relative_file("sandbox/a.js", "./x.js").as_deref(),
            Some("sandbox/x.js")
        );
        assert_eq!(
            relative_file("sandbox/a.js", "../x.js").as_deref(),
            Some("x.js")
        );
        assert_eq!(relative_file("a.js", "../../x.js"), None);
        assert_eq!(relative_file("a.js", "pkg"), None);
    }

    fn module(files: &[(&str, &str)]) -> ResolvedModule {
        ResolvedModule {
            specifier: "@a/b".into(),
            pack_name: "@a/pack".into(),
            pack_version: None,
            content_digest: "a".repeat(64),
            module_id: files.first().map(|f| f.0.to_string()).unwrap_or_default(),
            graph: files
                .iter()
                .map(|(id, source)| nodetool_protocol::catalog::GraphFile {
                    id: id.to_string(),
                    internal: false,
                    dependencies: Vec::new(),
                    content: FileContent::Js {
                        source: (*source).into(),
                    },
                })
                .collect(),
            kind: ResolvedKind::Js,
        }
    }

    #[test]
    fn exports_follow_star_reexports_and_give_up_on_cycles_and_depth() {
        let m = module(&[
            (
                "sandbox/a.js",
                "export * from './b.js';\nexport const a = 1;\nexport default 1;",
            ),
            (
                "sandbox/b.js",
                "export function b() {}\nexport { b as c };\nexport default 2;\nexport * as ns from './a.js';",
            ),
        ]);
        let names: Vec<String> = module_exports(&m).unwrap_or_default().into_iter().collect();
        assert_eq!(names, ["a", "b", "c", "default", "ns"]);
        // A cycle of `export *` cannot be told without running it: unknown, never a guess.
        let cycle = module(&[
            ("sandbox/a.js", "export * from './b.js';"),
            ("sandbox/b.js", "export * from './a.js';"),
        ]);
        assert_eq!(module_exports(&cycle), None);
        // A request without its extension lands where the loader would serve it.
        let m = module(&[
            (
                "sandbox/a.js",
                "export * from './b';\nexport * from './lib';",
            ),
            ("sandbox/b.js", "export const b = 1;"),
            ("sandbox/lib/index.js", "export const l = 1;"),
        ]);
        let names: Vec<String> = module_exports(&m).unwrap_or_default().into_iter().collect();
        assert_eq!(names, ["b", "l"]);
        // A target outside the graph, or a file that does not parse: unknown.
        assert_eq!(
            module_exports(&module(&[("sandbox/a.js", "export * from './gone.js';")])),
            None
        );
        assert_eq!(
            module_exports(&module(&[("sandbox/a.js", "export const = ;")])),
            None
        );
        // Many imports of one module are checked against one parse of it.
        let names: Vec<ImportedName> = (0..2000)
            .map(|i| ImportedName {
                specifier: "@a/b".into(),
                name: format!("n{i}"),
                line: 1,
                column: 1,
            })
            .collect();
        let one = module(&[("sandbox/a.js", "export const n1 = 1;")]);
        assert_eq!(
            missing_exports(&names, std::slice::from_ref(&one)).len(),
            1999
        );
    }

    #[test]
    fn scrubs_engine_ids() {
        assert_eq!(
            scrub_module_ids(
                "SyntaxError: Could not find export 'a' in module 'nodetool-sandbox:@a/b|sandbox/x.js'"
            ),
            "SyntaxError: Could not find export 'a' in module '@a/b::sandbox/x.js'"
        );
        assert_eq!(scrub_module_ids("plain"), "plain");
    }
}
