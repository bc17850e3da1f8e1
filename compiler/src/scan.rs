//! The scope-aware scan of a bundle, on oxc's semantic analysis. It refuses only what the guest
//! can never run: a bundle that does not parse, a dynamic `import()` (the loader denies every
//! one) and an import the bundle still makes. Everything else it finds would fail only when the
//! code that has it runs, so it is a warning naming the global and its first line and column:
//! a free reference to a global the guest does not provide (feature detection when a `typeof`
//! guards it), and code generated from strings (`eval(...)`, `Function(...)`, `new
//! Function(...)`), which the hardened guest refuses at the call. Whether the module
//! initializes is the probe's question, not the scan's. Local bindings (declarations,
//! parameters, catch clauses, imports) shadow a global name, so only references that resolve
//! to no binding count.

use std::collections::BTreeMap;

use nodetool_jssource::dynamic::{DynamicLoadKind, dynamic_loads};
use nodetool_jssource::imports::static_requests;
use nodetool_jssource::position::position;
use nodetool_protocol::catalog::StatusCode;
use oxc::allocator::Allocator;
use oxc::ast::ast::{
    CallExpression, ConditionalExpression, Expression, IdentifierReference, IfStatement,
    LogicalExpression, NewExpression, UnaryExpression, UnaryOperator,
};
use oxc::ast_visit::{VisitJs, walk_js};
use oxc::parser::Parser;
use oxc::semantic::{Scoping, SemanticBuilder};
use oxc::span::SourceType;

use crate::Refusal;

/// Globals the guest does not provide: reference §5's list in its order, less what the guest
/// now has (`eval` and `Function`, which refuse only code from strings, and
/// `queueMicrotask`), plus `Intl` and Node's `global`.
pub const FORBIDDEN_GLOBALS: [&str; 32] = [
    "process",
    "Buffer",
    "require",
    "module",
    "exports",
    "__dirname",
    "__filename",
    "setTimeout",
    "setInterval",
    "setImmediate",
    "clearTimeout",
    "clearInterval",
    "clearImmediate",
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
    "Intl",
    "global",
];

/// The free callees whose call generates code from a string.
const CODE_FROM_STRINGS: [&str; 2] = ["eval", "Function"];

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
    if let Some((_, literal)) = static_requests(&parsed.program).next() {
        return Err(rejected(format!(
            "bundle still imports {}, so it is not self-contained",
            literal.value
        )));
    }
    // Semantic analysis binds every identifier reference; one that binds to no symbol is free.
    let built = SemanticBuilder::new().build(&parsed.program);
    let scoping = built.semantic.scoping();
    let mut walker = Walker {
        scoping,
        guards: Vec::new(),
        hard: BTreeMap::new(),
        detected: BTreeMap::new(),
        generated: BTreeMap::new(),
    };
    walker.visit_program(&parsed.program);
    let dynamic_import = dynamic_loads(&parsed.program)
        .into_iter()
        .find(|load| load.kind == DynamicLoadKind::Import);
    if let Some(load) = dynamic_import {
        let (line, column) = position(source, load.offset);
        return Err(rejected(format!(
            "bundle uses dynamic import() (at {line}:{column}), which the guest loader denies"
        )));
    }
    let at = |offset: u32| {
        let (line, column) = position(source, offset);
        format!("{line}:{column}")
    };
    let mut warnings = Vec::new();
    for (name, offset) in &walker.hard {
        warnings.push(format!(
            "{npm} reads {name} at {}, which the guest does not provide{}; code that reaches it throws a ReferenceError",
            at(*offset),
            absent_note(name)
        ));
    }
    for (name, offset) in &walker.detected {
        warnings.push(format!(
            "{npm} feature-detects {name} at {}; the guest has no such global, so that branch never runs",
            at(*offset)
        ));
    }
    for (name, offset) in &walker.generated {
        warnings.push(format!(
            "{npm} generates code from a string with {name} at {}; the sandbox refuses that when it runs",
            at(*offset)
        ));
    }
    Ok(warnings)
}

/// Node's own globals: a bundle that reads one is a Node build, which a browser build of the
/// same package may avoid.
const NODE_GLOBALS: [&str; 10] = [
    "process",
    "Buffer",
    "require",
    "module",
    "exports",
    "__dirname",
    "__filename",
    "global",
    "setImmediate",
    "clearImmediate",
];

/// The Node global a warning of [`scan_bundle`] says `npm` reads outside a `typeof` guard.
pub(crate) fn node_global_read<'w>(npm: &str, warning: &'w str) -> Option<&'w str> {
    let name = warning
        .strip_prefix(npm)?
        .strip_prefix(" reads ")?
        .split(' ')
        .next()?;
    NODE_GLOBALS.contains(&name).then_some(name)
}

/// Why a global is absent, where that helps the reader.
fn absent_note(name: &str) -> &'static str {
    match name {
        "Intl" => " (no ICU data in the sandbox)",
        "setTimeout" | "setInterval" | "setImmediate" => " (no timers; sleep(ms) waits)",
        _ => "",
    }
}

/// One pass over the bundle: free references to forbidden globals, split into hard ones and
/// feature detection (`typeof G` itself, or any use inside a branch an `if`, a ternary or the
/// right side of `&&`/`||`/`??` guards with `typeof G`). The first dynamic import is the shared finder's
/// (`nodetool_jssource::dynamic`).
struct Walker<'s> {
    scoping: &'s Scoping,
    /// Globals the enclosing guarded branches tested with `typeof`.
    guards: Vec<&'static str>,
    /// Global to the offset of its first hard reference.
    hard: BTreeMap<&'static str, u32>,
    /// Global to the offset of its first feature-detecting reference.
    detected: BTreeMap<&'static str, u32>,
    /// Code-generating callee to the offset of its first call.
    generated: BTreeMap<&'static str, u32>,
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

    /// Notes a call of a free code-generating callee.
    fn note_generator(&mut self, callee: &Expression<'_>, at: u32) {
        if let Expression::Identifier(id) = callee
            && let Some(name) = CODE_FROM_STRINGS
                .iter()
                .copied()
                .find(|g| *g == id.name.as_str())
            && self.is_free(id)
        {
            Self::note(&mut self.generated, name, at);
        }
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

    fn visit_call_expression(&mut self, it: &CallExpression<'a>) {
        self.note_generator(&it.callee, it.span.start);
        walk_js::walk_call_expression(self, it);
    }

    fn visit_new_expression(&mut self, it: &NewExpression<'a>) {
        self.note_generator(&it.callee, it.span.start);
        walk_js::walk_new_expression(self, it);
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
    fn a_free_reference_is_a_warning_with_its_first_position() {
        let warnings = scan(
            "export const a = 1;\nexport function f() { return process.env.X + Buffer.from('x') + process.cwd(); }",
        )
        .unwrap_or_default();
        assert_eq!(
            warnings,
            [
                "pkg reads Buffer at 2:46, which the guest does not provide; code that reaches it throws a ReferenceError",
                "pkg reads process at 2:30, which the guest does not provide; code that reaches it throws a ReferenceError",
            ]
        );
        let warnings = scan("export const n = () => new Intl.NumberFormat('en').format(1);")
            .unwrap_or_default();
        assert_eq!(
            warnings,
            [
                "pkg reads Intl at 1:28, which the guest does not provide (no ICU data in the sandbox); code that reaches it throws a ReferenceError"
            ]
        );
    }

    #[test]
    fn node_global_reads_are_told_apart() {
        let warnings =
            scan("export const a = () => Buffer.from('x');\nexport const b = () => self.x;")
                .unwrap_or_default();
        let reads: Vec<Option<&str>> = warnings
            .iter()
            .map(|w| node_global_read("pkg", w))
            .collect();
        assert_eq!(reads, [Some("Buffer"), None]);
    }

    #[test]
    fn globals_the_guest_has_are_no_hits() {
        let source = "export const f = (x) => x instanceof Function;\n\
                      export const q = (g) => queueMicrotask(g);\n\
                      export const t = new TextEncoder();\n\
                      export const u = (s) => new URL(s).host + atob('') + crypto.randomUUID();";
        assert_eq!(scan(source).ok(), Some(vec![]));
    }

    #[test]
    fn code_from_strings_is_a_warning_at_its_call() {
        let warnings = scan(
            "export const a = () => new Function('return 1');\nexport const b = (s) => eval(s);\nlet eval2 = 1;",
        )
        .unwrap_or_default();
        assert_eq!(
            warnings,
            [
                "pkg generates code from a string with Function at 1:24; the sandbox refuses that when it runs",
                "pkg generates code from a string with eval at 2:25; the sandbox refuses that when it runs",
            ]
        );
        // A local named eval is not the global.
        assert_eq!(
            scan("const eval = (s) => s;\nexport const x = eval('1');").ok(),
            Some(vec![])
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
    fn an_unguarded_use_beside_a_guard_is_a_read_warning_too() {
        let warnings =
            scan("export const a = typeof process;\nexport const b = () => process.env;")
                .unwrap_or_default();
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert!(
            warnings[0].starts_with("pkg reads process at 2:24,"),
            "{warnings:?}"
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
