//! The scope-aware scan of a bundle, on oxc's semantic analysis: free references to globals
//! the guest does not provide, `typeof`-guarded feature detection, dynamic `import()` and any
//! import the bundle still makes. Local bindings (declarations, parameters, catch clauses,
//! imports) shadow a global name, so only references that resolve to no binding count.

use std::collections::BTreeMap;

use nodetool_protocol::catalog::StatusCode;
use oxc::allocator::Allocator;
use oxc::ast::ast::{
    ConditionalExpression, Expression, IdentifierReference, IfStatement, ImportExpression,
    LogicalExpression, Statement, UnaryExpression, UnaryOperator,
};
use oxc::ast_visit::{VisitJs, walk_js};
use oxc::parser::Parser;
use oxc::semantic::{Scoping, SemanticBuilder};
use oxc::span::SourceType;

use crate::Refusal;

/// Globals the guest does not provide (reference §5's list, in its order).
pub const FORBIDDEN_GLOBALS: [&str; 33] = [
    "process",
    "Buffer",
    "require",
    "module",
    "exports",
    "__dirname",
    "__filename",
    "eval",
    "Function",
    "setTimeout",
    "setInterval",
    "setImmediate",
    "clearTimeout",
    "clearInterval",
    "clearImmediate",
    "queueMicrotask",
    "WebAssembly",
    "window",
    "document",
    "navigator",
    "location",
    "self",
    "top",
    "parent",
    "frames",
    "alert",
    "XMLHttpRequest",
    "HTMLElement",
    "customElements",
    "localStorage",
    "sessionStorage",
    "indexedDB",
    "importScripts",
];

/// Scans a bundle: the warnings to surface (feature-detected globals), or the refusal.
pub(crate) fn scan_bundle(npm: &str, source: &str) -> Result<Vec<String>, Refusal> {
    let rejected =
        |why: String| Refusal::new(StatusCode::NpmModuleScanRejected, format!("{npm}: {why}"));
    let allocator = Allocator::default();
    let parsed = Parser::new(&allocator, source, SourceType::mjs()).parse();
    if parsed.panicked || !parsed.diagnostics.is_empty() {
        let why = parsed.diagnostics.iter().next().map_or_else(
            || "it does not parse".to_string(),
            |d| d.message.to_string(),
        );
        return Err(rejected(format!("bundle is not valid JavaScript: {why}")));
    }
    for statement in &parsed.program.body {
        let leftover = match statement {
            Statement::ImportDeclaration(d) => Some(&d.source),
            Statement::ExportFromDeclaration(d) => Some(&d.source),
            Statement::ExportAllDeclaration(d) => Some(&d.source),
            _ => None,
        };
        if let Some(literal) = leftover {
            return Err(rejected(format!(
                "bundle still imports {}, so it is not self-contained",
                literal.value
            )));
        }
    }
    // Semantic analysis binds every identifier reference; one that binds to no symbol is free.
    let built = SemanticBuilder::new().build(&parsed.program);
    let scoping = built.semantic.scoping();
    let mut walker = Walker {
        scoping,
        guards: Vec::new(),
        hard: BTreeMap::new(),
        detected: BTreeMap::new(),
        dynamic_import: None,
    };
    walker.visit_program(&parsed.program);
    if let Some(at) = walker.dynamic_import {
        let (line, column) = position(source, at);
        return Err(rejected(format!(
            "bundle uses dynamic import() (at {line}:{column}), which the guest loader denies"
        )));
    }
    if !walker.hard.is_empty() {
        let names: Vec<&str> = walker.hard.keys().copied().collect();
        let first = walker.hard.values().copied().min().unwrap_or(0);
        let (line, column) = position(source, first);
        return Err(Refusal::new(
            StatusCode::NpmModuleForbiddenGlobal,
            format!(
                "{npm} references {} (first at {line}:{column}), which the guest does not provide",
                names.join(", ")
            ),
        ));
    }
    Ok(walker
        .detected
        .into_iter()
        .map(|(name, at)| {
            let (line, column) = position(source, at);
            format!(
                "{npm} feature-detects {name} at {line}:{column}; the guest has no such global, so that branch never runs"
            )
        })
        .collect())
}

/// One pass over the bundle: free references to forbidden globals, split into hard ones and
/// feature detection (`typeof G` itself, or any use inside a branch an `if`, a ternary or the
/// right side of `&&`/`||`/`??` guards with `typeof G`), and the first dynamic import.
struct Walker<'s> {
    scoping: &'s Scoping,
    /// Globals the enclosing guarded branches tested with `typeof`.
    guards: Vec<&'static str>,
    /// Global to the offset of its first hard reference.
    hard: BTreeMap<&'static str, u32>,
    /// Global to the offset of its first feature-detecting reference.
    detected: BTreeMap<&'static str, u32>,
    dynamic_import: Option<u32>,
}

impl Walker<'_> {
    fn is_free(&self, it: &IdentifierReference<'_>) -> bool {
        it.reference_id
            .get()
            .is_some_and(|id| self.scoping.get_reference(id).symbol_id().is_none())
    }

    fn note(map: &mut BTreeMap<&'static str, u32>, name: &'static str, at: u32) {
        let first = map.entry(name).or_insert(at);
        *first = (*first).min(at);
    }

    /// Visits `branches` with the globals `test` checks with `typeof` counted as guarded.
    fn guarded<'a>(&mut self, test: &Expression<'a>, branches: impl FnOnce(&mut Self)) {
        let mut names = TypeofNames(Vec::new());
        names.visit_expression(test);
        let depth = self.guards.len();
        self.guards.extend(names.0);
        branches(self);
        self.guards.truncate(depth);
    }
}

impl<'a> VisitJs<'a> for Walker<'_> {
    fn visit_identifier_reference(&mut self, it: &IdentifierReference<'a>) {
        if let Some(name) = forbidden(it.name.as_str())
            && self.is_free(it)
        {
            if self.guards.contains(&name) {
                Self::note(&mut self.detected, name, it.span.start);
            } else {
                Self::note(&mut self.hard, name, it.span.start);
            }
        }
    }

    fn visit_unary_expression(&mut self, it: &UnaryExpression<'a>) {
        if it.operator == UnaryOperator::Typeof
            && let Expression::Identifier(id) = &it.argument
        {
            if let Some(name) = forbidden(id.name.as_str())
                && self.is_free(id)
            {
                Self::note(&mut self.detected, name, id.span.start);
            }
            return;
        }
        walk_js::walk_unary_expression(self, it);
    }

    fn visit_if_statement(&mut self, it: &IfStatement<'a>) {
        self.visit_expression(&it.test);
        self.guarded(&it.test, |w| {
            w.visit_statement(&it.consequent);
            if let Some(alternate) = &it.alternate {
                w.visit_statement(alternate);
            }
        });
    }

    fn visit_conditional_expression(&mut self, it: &ConditionalExpression<'a>) {
        self.visit_expression(&it.test);
        self.guarded(&it.test, |w| {
            w.visit_expression(&it.consequent);
            w.visit_expression(&it.alternate);
        });
    }

    fn visit_logical_expression(&mut self, it: &LogicalExpression<'a>) {
        self.visit_expression(&it.left);
        self.guarded(&it.left, |w| w.visit_expression(&it.right));
    }

    fn visit_import_expression(&mut self, it: &ImportExpression<'a>) {
        if self.dynamic_import.is_none() {
            self.dynamic_import = Some(it.span.start);
        }
        walk_js::walk_import_expression(self, it);
    }
}

/// The forbidden globals an expression checks with `typeof`.
struct TypeofNames(Vec<&'static str>);

impl<'a> VisitJs<'a> for TypeofNames {
    fn visit_unary_expression(&mut self, it: &UnaryExpression<'a>) {
        if it.operator == UnaryOperator::Typeof
            && let Expression::Identifier(id) = &it.argument
            && let Some(name) = forbidden(id.name.as_str())
        {
            self.0.push(name);
        }
        walk_js::walk_unary_expression(self, it);
    }
}

fn forbidden(name: &str) -> Option<&'static str> {
    FORBIDDEN_GLOBALS.iter().copied().find(|g| *g == name)
}

/// 1-based line and column (in characters) of a byte offset.
pub(crate) fn position(source: &str, offset: u32) -> (u32, u32) {
    let offset = (offset as usize).min(source.len());
    let before = source.get(..offset).unwrap_or(source);
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = before.get(line_start..).map_or(0, |l| l.chars().count()) + 1;
    (
        u32::try_from(line).unwrap_or(u32::MAX),
        u32::try_from(column).unwrap_or(u32::MAX),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan(source: &str) -> Result<Vec<String>, Refusal> {
        scan_bundle("pkg", source)
    }

    #[test]
    fn a_clean_bundle_has_no_warnings() {
        assert_eq!(
            scan("export const a = 1;\nexport default a;").ok(),
            Some(vec![])
        );
    }

    #[test]
    fn a_free_reference_is_refused_with_names_and_first_position() {
        let r = scan(
            "export const a = 1;\nexport function f() { return process.env.X + Buffer.from('x'); }",
        )
        .err();
        let r = r.unwrap_or_else(|| Refusal::new(StatusCode::PendingCompile, String::new()));
        assert_eq!(r.code, StatusCode::NpmModuleForbiddenGlobal);
        assert_eq!(
            r.message,
            "pkg references Buffer, process (first at 2:30), which the guest does not provide"
        );
    }

    #[test]
    fn shadowed_names_are_not_hits() {
        let source = "function f(process) { return process.env; }\n\
                      const self = {}; self.x = 1;\n\
                      try { g(); } catch (window) { window.x; }\n\
                      class Buffer {}\nnew Buffer();\n\
                      const o = { setTimeout: 1 }; o.setTimeout; o['document'];\n\
                      export { f };";
        assert_eq!(scan(source).ok(), Some(vec![]));
    }

    #[test]
    fn typeof_guards_are_warnings() {
        let source = "export const isNode = typeof process !== 'undefined' && process.versions != null;\n\
                      export const g = typeof window === 'undefined' ? globalThis : window;\n\
                      if (typeof document !== 'undefined') { document.title; }";
        let warnings = scan(source).unwrap_or_default();
        assert_eq!(warnings.len(), 3, "{warnings:?}");
        assert!(
            warnings[0].starts_with("pkg feature-detects document at 3:12;"),
            "{warnings:?}"
        );
        assert!(
            warnings[1].starts_with("pkg feature-detects process at 1:30;"),
            "{warnings:?}"
        );
        assert!(warnings[1].ends_with("so that branch never runs"));
    }

    #[test]
    fn an_unguarded_use_beside_a_guard_is_still_refused() {
        let r = scan("export const a = typeof process;\nexport const b = process.env;").err();
        assert_eq!(
            r.map(|r| r.code),
            Some(StatusCode::NpmModuleForbiddenGlobal)
        );
    }

    #[test]
    fn dynamic_import_and_leftover_imports_are_rejected() {
        let r = scan("export const f = (n) => import(n);").err();
        let m = r.map(|r| (r.code, r.message));
        assert_eq!(
            m,
            Some((
                StatusCode::NpmModuleScanRejected,
                "pkg: bundle uses dynamic import() (at 1:25), which the guest loader denies".into()
            ))
        );
        let r = scan("import x from 'other';\nexport default x;").err();
        assert_eq!(
            r.map(|r| r.message),
            Some("pkg: bundle still imports other, so it is not self-contained".into())
        );
        let r = scan("export * from 'other';").err();
        assert_eq!(r.map(|r| r.code), Some(StatusCode::NpmModuleScanRejected));
        let r = scan("export const = ;").err();
        assert!(r.is_some_and(|r| {
            r.message
                .starts_with("pkg: bundle is not valid JavaScript:")
        }),);
    }
}
