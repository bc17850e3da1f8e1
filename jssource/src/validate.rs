//! Offline validation of a workflow graph's Code nodes, and the lock that stamps what each
//! node's imports resolved to.
//!
//! A body's static imports are its declaration. Validation parses every `nodetool.code.Code`
//! body, reports what the loader would refuse before anything runs (syntax, a top-level
//! `export`, `import()` or `require()`), resolves the imports through the catalog (a missing or
//! unavailable module is an error naming the pack; drift against the node's recorded stamp is a
//! warning), checks named imports against what each module exports, reads of globals the
//! sandbox lacks and host or WASM calls whose Promise is used as a value, and never executes
//! anything.

use oxc::allocator::Allocator;
use oxc::ast::ast::{
    AwaitExpression, BinaryExpression, BindingIdentifier, CallExpression, ComputedMemberExpression,
    ConditionalExpression, Expression, IdentifierReference, IfStatement,
    ImportDeclarationSpecifier, LogicalExpression, NewExpression, Statement,
    StaticMemberExpression, TemplateLiteral, UnaryExpression, UnaryOperator,
};
use oxc::ast_visit::{VisitJs, walk_js};
use oxc::parser::Parser;
use oxc::span::SourceType;
use serde::Serialize;

use nodetool_protocol::catalog::{Declaration, ResolvedKind, StatusCode, StatusLevel};
use nodetool_runtime::SandboxModuleCatalog;

use crate::dynamic::dynamic_loads;
use crate::entry::{build_entry, parse_body_program};
use crate::exports::{ImportedName, imported_names, missing_exports};
pub use crate::issue::{CODES, IssueCode, IssueCodeDoc, docs_table};
use crate::position::position;

/// The node type whose `data.code` is a Code node body.
pub const CODE_NODE_TYPE: &str = "nodetool.code.Code";
/// The package-name prefix of the packs NodeTool ships; a missing one gets an install hint.
const SHIPPED_PACK_PREFIX: &str = "@nodetool-ai/sandbox-";

/// How serious an issue is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// The node will fail.
    Error,
    /// The node runs, but something is off.
    Warning,
}

/// One finding about one Code node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Issue {
    /// The node's id.
    pub node_id: String,
    /// How serious.
    pub severity: Severity,
    /// The stable code (serialized as its text).
    pub code: IssueCode,
    /// In words.
    pub message: String,
    /// 1-based line in the body.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    /// 1-based column in the body.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub column: Option<u32>,
}

/// A Code node found in a graph.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeNode {
    /// The node's id.
    pub id: String,
    /// Its body.
    pub code: String,
    /// What `nodetool lock` recorded for its imports, if anything.
    pub stamps: Vec<Declaration>,
}

/// Why a document is not a workflow graph.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GraphError(pub String);

/// The graph object of a workflow document: `{"nodes": [...], ...}` or `{"graph": {...}}`.
fn graph_of(document: &serde_json::Value) -> Result<&serde_json::Value, GraphError> {
    let graph = document
        .get("graph")
        .filter(|g| g.is_object())
        .unwrap_or(document);
    match graph.get("nodes") {
        Some(serde_json::Value::Array(_)) => Ok(graph),
        _ => Err(GraphError("the document is not a workflow graph: it has no \"nodes\" array (expected {\"nodes\": [...], \"edges\": [...]} or {\"graph\": {...}})".into())),
    }
}

/// Every Code node of a workflow document.
pub fn code_nodes(document: &serde_json::Value) -> Result<Vec<CodeNode>, GraphError> {
    let graph = graph_of(document)?;
    let mut out = Vec::new();
    for (i, node) in graph
        .get("nodes")
        .and_then(|n| n.as_array())
        .into_iter()
        .flatten()
        .enumerate()
    {
        if node.get("type").and_then(|t| t.as_str()) != Some(CODE_NODE_TYPE) {
            continue;
        }
        let id = match node.get("id") {
            Some(serde_json::Value::String(s)) => s.clone(),
            Some(serde_json::Value::Number(n)) => n.to_string(),
            _ => return Err(GraphError(format!("node {i} has no id"))),
        };
        let data = node.get("data");
        let code = data
            .and_then(|d| d.get("code"))
            .and_then(|c| c.as_str())
            .unwrap_or_default()
            .to_string();
        let stamps = data
            .and_then(|d| d.get("sandboxModules"))
            .and_then(|s| serde_json::from_value::<Vec<Declaration>>(s.clone()).ok())
            .unwrap_or_default();
        out.push(CodeNode { id, code, stamps });
    }
    Ok(out)
}

/// What the loader would refuse in a body, found statically, and the free names it reads.
struct Dynamic {
    body: String,
    /// Reads of names the sandbox lacks, outside `typeof`, with where they are.
    absent: Vec<(String, u32)>,
    /// Every name the body binds anywhere (a body that declares `process` may read it).
    bound: std::collections::BTreeSet<String>,
    /// Calls that generate code from strings (`eval(...)`, `Function(...)`, `new Function`).
    codegen: Vec<(String, u32)>,
}

/// Globals a body may expect from Node or a browser that the sandbox does not have, and what
/// to use instead.
const ABSENT_GLOBALS: &[(&str, &str)] = &[
    ("setTimeout", "await sleep(ms) pauses; there are no timers"),
    (
        "setInterval",
        "loop with await sleep(ms); there are no timers",
    ),
    (
        "setImmediate",
        "await null (or queueMicrotask) yields; there are no timers",
    ),
    ("clearTimeout", "there are no timers"),
    ("clearInterval", "there are no timers"),
    ("clearImmediate", "there are no timers"),
    (
        "process",
        "inputs arrive on `inputs`, secrets through getSecret(NAME)",
    ),
    (
        "Buffer",
        "use Uint8Array, TextEncoder/TextDecoder and toBase64/fromBase64",
    ),
    (
        "env",
        "inputs arrive on `inputs`, secrets through getSecret(NAME)",
    ),
    ("Blob", "use Uint8Array"),
    ("FormData", "send a JSON or text body with fetch"),
    (
        "AbortController",
        "a run has one deadline; there is no cancellation object",
    ),
    ("Headers", "pass headers to fetch as a plain object"),
    ("Request", "pass fetch a URL and a plain options object"),
    ("Response", "fetch answers a plain object"),
    (
        "Intl",
        "format numbers and dates by hand or with a sandbox pack",
    ),
];

/// What to use instead of `name`, a global a body may expect from Node or a browser that the
/// sandbox does not have (`Intl`, `setTimeout`, `process`, ...); `None` for any other name. The
/// offline check's hint, and the run-time one a front end adds to `X is not defined`.
pub fn absent_global_hint(name: &str) -> Option<&'static str> {
    ABSENT_GLOBALS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, hint)| *hint)
}

/// Calls of imported functions whose result is used as a value without `await` (a member of
/// it read, an operand, a condition, a template part). Which of them are host or WASM calls
/// (whose exports return Promises) only the catalog knows, so each is reported with its
/// specifier and the catalog phase keeps those.
struct Unawaited {
    /// Local name → (specifier, whether it names the module object rather than a function).
    bindings: std::collections::HashMap<String, (String, bool)>,
    /// Start offsets of calls that are awaited.
    awaited: std::collections::HashSet<u32>,
    /// (what was called, its specifier, where).
    found: Vec<(String, String, u32)>,
    /// Names that bind a module namespace (`import * as ns`).
    namespaces: std::collections::HashSet<String>,
    /// Members read off a namespace: (member, specifier, where the member is written).
    members: Vec<(String, String, u32)>,
}

impl Unawaited {
    fn check(&mut self, value: &Expression<'_>) {
        let Expression::CallExpression(call) = value.without_parentheses() else {
            return;
        };
        if self.awaited.contains(&call.span.start) {
            return;
        }
        let called = match call.callee.without_parentheses() {
            Expression::Identifier(id) => self
                .bindings
                .get(id.name.as_str())
                .filter(|(_, object)| !object)
                .map(|(spec, _)| (id.name.to_string(), spec.clone())),
            Expression::StaticMemberExpression(m) => match m.object.without_parentheses() {
                Expression::Identifier(id) => self
                    .bindings
                    .get(id.name.as_str())
                    .map(|(spec, _)| (format!("{}.{}", id.name, m.property.name), spec.clone())),
                _ => None,
            },
            _ => None,
        };
        if let Some((name, specifier)) = called {
            self.found.push((name, specifier, call.span.start));
        }
    }
}

impl<'a> VisitJs<'a> for Unawaited {
    fn visit_await_expression(&mut self, it: &AwaitExpression<'a>) {
        if let Expression::CallExpression(call) = it.argument.without_parentheses() {
            self.awaited.insert(call.span.start);
        }
        walk_js::walk_await_expression(self, it);
    }

    fn visit_static_member_expression(&mut self, it: &StaticMemberExpression<'a>) {
        self.check(&it.object);
        if let Expression::Identifier(id) = it.object.without_parentheses()
            && self.namespaces.contains(id.name.as_str())
            && let Some((specifier, _)) = self.bindings.get(id.name.as_str())
        {
            self.members.push((
                it.property.name.to_string(),
                specifier.clone(),
                it.property.span.start,
            ));
        }
        walk_js::walk_static_member_expression(self, it);
    }

    fn visit_computed_member_expression(&mut self, it: &ComputedMemberExpression<'a>) {
        self.check(&it.object);
        walk_js::walk_computed_member_expression(self, it);
    }

    fn visit_binary_expression(&mut self, it: &BinaryExpression<'a>) {
        self.check(&it.left);
        self.check(&it.right);
        walk_js::walk_binary_expression(self, it);
    }

    fn visit_logical_expression(&mut self, it: &LogicalExpression<'a>) {
        self.check(&it.left);
        walk_js::walk_logical_expression(self, it);
    }

    fn visit_unary_expression(&mut self, it: &UnaryExpression<'a>) {
        if !matches!(it.operator, UnaryOperator::Typeof | UnaryOperator::Void) {
            self.check(&it.argument);
        }
        walk_js::walk_unary_expression(self, it);
    }

    fn visit_template_literal(&mut self, it: &TemplateLiteral<'a>) {
        for e in &it.expressions {
            self.check(e);
        }
        walk_js::walk_template_literal(self, it);
    }

    fn visit_if_statement(&mut self, it: &IfStatement<'a>) {
        self.check(&it.test);
        walk_js::walk_if_statement(self, it);
    }

    fn visit_conditional_expression(&mut self, it: &ConditionalExpression<'a>) {
        self.check(&it.test);
        walk_js::walk_conditional_expression(self, it);
    }
}

/// A [`IssueCode::UnawaitedCall`] message names the specifier between this and a closing
/// `")`; so does a [`IssueCode::NamespaceMember`] note, the parse phase's note of a member read
/// off a namespace import (`ns.name`) for the catalog phase to check against the module's
/// exports (never shown, always consumed there), whose message is `<member>` then this, the
/// specifier and `")`.
const UNAWAITED_FROM: &str = "(from \"";
/// The codes' text, as the tests compare it.
#[cfg(test)]
const UNAWAITED: &str = IssueCode::UnawaitedCall.as_str();
#[cfg(test)]
const NAMESPACE_MEMBER: &str = IssueCode::NamespaceMember.as_str();

impl<'a> VisitJs<'a> for Dynamic {
    fn visit_identifier_reference(&mut self, it: &IdentifierReference<'a>) {
        if ABSENT_GLOBALS.iter().any(|(n, _)| *n == it.name.as_str()) {
            self.absent.push((it.name.to_string(), it.span.start));
        }
    }

    fn visit_binding_identifier(&mut self, it: &BindingIdentifier<'a>) {
        self.bound.insert(it.name.to_string());
    }

    fn visit_unary_expression(&mut self, it: &UnaryExpression<'a>) {
        // `typeof x` of a missing name is the way to test for it, not a read.
        if it.operator == UnaryOperator::Typeof && matches!(&it.argument, Expression::Identifier(_))
        {
            return;
        }
        walk_js::walk_unary_expression(self, it);
    }

    fn visit_call_expression(&mut self, it: &CallExpression<'a>) {
        if let Expression::Identifier(id) = &it.callee
            && (id.name == "eval" || id.name == "Function")
        {
            self.codegen.push((id.name.to_string(), it.span.start));
        }
        walk_js::walk_call_expression(self, it);
    }

    fn visit_new_expression(&mut self, it: &NewExpression<'a>) {
        if matches!(&it.callee, Expression::Identifier(id) if id.name == "Function") {
            self.codegen.push(("Function".into(), it.span.start));
        }
        walk_js::walk_new_expression(self, it);
    }
}

/// A global an authored pack module uses that the sandbox lacks or refuses, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModuleGlobal {
    /// The global (`process`, `eval`, ...).
    pub name: String,
    /// 1-based line in the file.
    pub line: u32,
    /// 1-based column in the file.
    pub column: u32,
    /// What happens, and what to use instead.
    pub hint: &'static str,
}

/// The globals an authored pack module reads that the sandbox does not have, and its code
/// generation from strings (`eval(...)`, `Function(...)`), which the sandbox refuses when it
/// runs: one finding per name, at its first use. `None` when the file does not parse (discovery
/// reports that). The operator's own files: this parses in process, as discovery does.
pub fn module_globals(source: &str) -> Option<Vec<ModuleGlobal>> {
    let allocator = Allocator::default();
    let parsed = Parser::new(&allocator, source, SourceType::mjs()).parse();
    if !parsed.diagnostics.is_empty() || parsed.panicked {
        return None;
    }
    let mut scan = Dynamic {
        body: source.to_string(),
        absent: Vec::new(),
        bound: Default::default(),
        codegen: Vec::new(),
    };
    scan.visit_program(&parsed.program);
    let mut seen = std::collections::BTreeSet::new();
    let mut out = Vec::new();
    let absent = scan.absent.iter().filter(|(n, _)| !scan.bound.contains(n));
    let codegen = scan.codegen.iter().filter(|(n, _)| !scan.bound.contains(n));
    for (name, at) in absent.chain(codegen) {
        if !seen.insert(name.clone()) {
            continue;
        }
        let hint = ABSENT_GLOBALS.iter().find(|(n, _)| n == name).map_or(
            "the sandbox refuses code generated from strings when the module runs",
            |(_, h)| *h,
        );
        let (line, column) = position(source, *at);
        out.push(ModuleGlobal {
            name: name.clone(),
            line,
            column,
            hint,
        });
    }
    out.sort_by_key(|g| (g.line, g.column));
    Some(out)
}

/// What parsing one body found, before the catalog is asked: its issues and its static
/// imports with their positions (deduplicated, in order). The one step of validation that
/// parses untrusted code, so a front end can run it where a parser crash harms nobody.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BodyAnalysis {
    /// Syntax and module issues.
    pub issues: Vec<Issue>,
    /// The static imports, each once, where they are first written.
    pub imports: Vec<crate::BodyImport>,
}

impl Issue {
    /// An issue of `kind` about node `node_id`, at a 1-based (line, column) of its body.
    pub fn new(
        node_id: &str,
        severity: Severity,
        kind: IssueCode,
        message: String,
        at: Option<(u32, u32)>,
    ) -> Issue {
        Issue {
            node_id: node_id.to_string(),
            severity,
            code: kind,
            message,
            line: at.map(|a| a.0),
            column: at.map(|a| a.1),
        }
    }

    /// The issue's code.
    pub fn kind(&self) -> IssueCode {
        self.code
    }
}

/// Parses one body: [`BodyAnalysis`].
pub fn analyze_body(node_id: &str, code: &str) -> BodyAnalysis {
    let (issues, imports) = validate_body(node_id, code);
    BodyAnalysis { issues, imports }
}

/// Validates one body: its issues and its static imports (deduplicated, in order).
fn validate_body(node_id: &str, code: &str) -> (Vec<Issue>, Vec<crate::BodyImport>) {
    let issue = |severity, kind: IssueCode, message: String, at: Option<(u32, u32)>| {
        Issue::new(node_id, severity, kind, message, at)
    };
    let allocator = Allocator::default();
    let parsed = parse_body_program(&allocator, code);
    if let Some(d) = parsed.diagnostics.iter().next() {
        let at = position(code, d.labels.first().map_or(0, |l| l.offset()));
        let message = format!(
            "The code does not parse as JavaScript (line {}): {}",
            at.0, d.message
        );
        return (
            vec![issue(Severity::Error, IssueCode::Syntax, message, Some(at))],
            Vec::new(),
        );
    }
    let mut issues = Vec::new();
    let entry = match build_entry(code) {
        Ok(entry) => entry,
        Err(e) => {
            let message = "The code uses `export` at the top level. The body runs inside an async function and returns its result with `return`; do not wrap the body in `export async function run`.".to_string();
            issues.push(issue(
                Severity::Error,
                IssueCode::Module,
                message,
                Some((e.line, e.column)),
            ));
            return (issues, Vec::new());
        }
    };
    let mut dynamic = Dynamic {
        body: code.to_string(),
        absent: Vec::new(),
        bound: Default::default(),
        codegen: Vec::new(),
    };
    dynamic.visit_program(&parsed.program);
    let loads = dynamic_loads(&parsed.program);
    if let Some(first) = loads.first().map(|l| l.offset) {
        let mut kinds: Vec<&str> = loads.iter().map(|l| l.kind.as_str()).collect();
        kinds.sort_unstable();
        kinds.dedup();
        let what = kinds
            .iter()
            .map(|k| format!("`{k}`"))
            .collect::<Vec<_>>()
            .join(" and ");
        let message = format!(
            "The code uses {what}, which the sandbox does not support — the loader denies every dynamic resolution. Import the module with a static `import` at the top of the code."
        );
        issues.push(issue(
            Severity::Error,
            IssueCode::Module,
            message,
            Some(position(&dynamic.body, first)),
        ));
    }
    let mut unawaited = Unawaited {
        bindings: Default::default(),
        awaited: Default::default(),
        found: Vec::new(),
        namespaces: Default::default(),
        members: Vec::new(),
    };
    for statement in &parsed.program.body {
        let Statement::ImportDeclaration(d) = statement else {
            continue;
        };
        for specifier in d.specifiers.iter().flatten() {
            let (local, object) = match specifier {
                ImportDeclarationSpecifier::ImportSpecifier(s) => (&s.local, false),
                // A default import of a host module is its namespace object.
                ImportDeclarationSpecifier::ImportDefaultSpecifier(s) => (&s.local, true),
                ImportDeclarationSpecifier::ImportNamespaceSpecifier(s) => {
                    unawaited.namespaces.insert(s.local.name.to_string());
                    (&s.local, true)
                }
            };
            unawaited
                .bindings
                .insert(local.name.to_string(), (d.source.value.to_string(), object));
        }
    }
    if !unawaited.bindings.is_empty() {
        unawaited.visit_program(&parsed.program);
    }
    for (name, specifier, at) in &unawaited.found {
        issues.push(issue(
            Severity::Warning,
            IssueCode::UnawaitedCall,
            format!(
                "The code uses the result of `{name}(...)` {UNAWAITED_FROM}{specifier}\") as a value without `await`: a host or WASM module's exports return Promises, so this is a Promise, not its result; write `(await {name}(...))`."
            ),
            Some(position(&dynamic.body, *at)),
        ));
    }
    for (member, specifier, at) in &unawaited.members {
        issues.push(issue(
            Severity::Warning,
            IssueCode::NamespaceMember,
            format!("{member}{UNAWAITED_FROM}{specifier}\")"),
            Some(position(&dynamic.body, *at)),
        ));
    }
    let mut reported = std::collections::BTreeSet::new();
    for (name, at) in &dynamic.absent {
        if dynamic.bound.contains(name) || !reported.insert(name.clone()) {
            continue;
        }
        let hint = ABSENT_GLOBALS
            .iter()
            .find(|(n, _)| n == name)
            .map_or("", |(_, h)| *h);
        issues.push(issue(
            Severity::Error,
            IssueCode::UndefinedName,
            format!(
                "The code reads `{name}`, which the sandbox does not have: the run throws ReferenceError here; {hint}."
            ),
            Some(position(&dynamic.body, *at)),
        ));
    }
    let mut imports: Vec<crate::BodyImport> = Vec::new();
    for i in entry.imports {
        if !imports.iter().any(|seen| seen.specifier == i.specifier) {
            imports.push(i);
        }
    }
    (issues, imports)
}

/// Validates every Code node of a workflow document against the catalog, offline.
pub fn validate_graph(
    document: &serde_json::Value,
    catalog: &dyn SandboxModuleCatalog,
) -> Result<Vec<Issue>, GraphError> {
    validate_graph_with(document, catalog, &mut |node, code| {
        analyze_body(node, code)
    })
}

/// [`validate_graph`] with each body parsed by `analyze` (for example in a sandbox worker);
/// this function itself never parses a body.
pub fn validate_graph_with(
    document: &serde_json::Value,
    catalog: &dyn SandboxModuleCatalog,
    analyze: &mut dyn FnMut(&str, &str) -> BodyAnalysis,
) -> Result<Vec<Issue>, GraphError> {
    let mut issues = Vec::new();
    for node in code_nodes(document)? {
        let BodyAnalysis {
            issues: found,
            imports,
        } = analyze(&node.id, &node.code);
        let mut unawaited = Vec::new();
        let mut members = Vec::new();
        for issue in found {
            if issue.kind() == IssueCode::UnawaitedCall {
                unawaited.push(issue);
            } else if issue.kind() == IssueCode::NamespaceMember {
                members.push(issue);
            } else {
                issues.push(issue);
            }
        }
        // An import that is not shaped like a sandbox specifier (`node:fs`, a path, a URL) is
        // never a pack: the loader refuses it by name, so it is a module error, not a missing
        // package.
        let (specifiers, foreign): (Vec<&crate::BodyImport>, Vec<&crate::BodyImport>) = imports
            .iter()
            .partition(|i| nodetool_protocol::names::is_specifier(&i.specifier));
        if let Some(first) = foreign.first() {
            let names = foreign
                .iter()
                .map(|f| format!("\"{}\"", f.specifier))
                .collect::<Vec<_>>()
                .join(", ");
            issues.push(Issue::new(
                &node.id,
                Severity::Error,
                IssueCode::Module,
                format!(
                    "The code imports {names}, which the sandbox refuses: only installed sandbox packs resolve, imported by package name (`@scope/pack` or `@scope/pack/module`)."
                ),
                Some((first.line, first.column)),
            ));
        }
        let declarations: Vec<Declaration> = specifiers
            .iter()
            .map(|import| {
                node.stamps
                    .iter()
                    .find(|s| s.specifier == import.specifier)
                    .cloned()
                    .unwrap_or_else(|| Declaration::of(import.specifier.clone()))
            })
            .collect();
        let resolution = catalog.resolve_for_execution(&declarations);
        // Only a host or WASM export returns a Promise; an authored function may not.
        for issue in unawaited {
            let specifier = issue
                .message
                .split_once(UNAWAITED_FROM)
                .and_then(|(_, rest)| rest.split_once("\")"))
                .map(|(s, _)| s);
            let facade = resolution.modules.iter().any(|m| {
                Some(m.specifier.as_str()) == specifier
                    && matches!(
                        m.kind,
                        ResolvedKind::Wasm { .. } | ResolvedKind::Host { .. }
                    )
            });
            if facade {
                issues.push(issue);
            }
        }
        let mut names: Vec<ImportedName> = specifiers
            .iter()
            .flat_map(|i| names_of_import(&node.code, i))
            .collect();
        // A member read off a namespace import names an export as much as `{ name }` does.
        for note in &members {
            let Some((member, rest)) = note.message.split_once(UNAWAITED_FROM) else {
                continue;
            };
            let (Some(specifier), Some(line), Some(column)) =
                (rest.strip_suffix("\")"), note.line, note.column)
            else {
                continue;
            };
            if !names
                .iter()
                .any(|n| n.specifier == specifier && n.name == member)
            {
                names.push(ImportedName {
                    specifier: specifier.to_string(),
                    name: member.to_string(),
                    line,
                    column,
                });
            }
        }
        for missing in missing_exports(&names, &resolution.modules) {
            let message = match missing.help() {
                Some(help) => format!("{}; {help}", missing.message()),
                None => missing.message(),
            };
            issues.push(Issue::new(
                &node.id,
                Severity::Error,
                IssueCode::MissingExport,
                message,
                Some((missing.import.line, missing.import.column)),
            ));
        }
        for status in &resolution.statuses {
            let (severity, code) = match status.status {
                StatusLevel::Error => (Severity::Error, IssueCode::PackageUnavailable),
                _ => (Severity::Warning, IssueCode::PackageMismatch),
            };
            let mut message = format!("{} (pack \"{}\")", status.message, status.pack_name);
            if status.code == StatusCode::ModuleNotFound
                && status.pack_name.starts_with(SHIPPED_PACK_PREFIX)
            {
                message.push_str(&format!(" Install {} to use it.", status.pack_name));
            }
            let at = status
                .specifier
                .as_deref()
                .and_then(|s| specifiers.iter().find(|i| i.specifier == s))
                .map(|i| (i.line, i.column));
            issues.push(Issue::new(&node.id, severity, code, message, at));
        }
    }
    Ok(issues)
}

/// The longest import declaration [`names_of_import`] reads.
const MAX_IMPORT_TEXT: usize = 2048;
/// How many `import` words before a specifier [`names_of_import`] tries as the start of its
/// declaration.
const MAX_IMPORT_STARTS: usize = 8;

/// The names one import declaration imports, found from where its specifier is written.
///
/// This runs in the front end, which never parses a whole untrusted body (a parser may recurse
/// off its stack). It parses only the declaration's own text: from an `import` word before the
/// specifier through the specifier, at most [`MAX_IMPORT_TEXT`] bytes, and only when that text
/// holds no bracket or parenthesis and one brace pair at most, so nothing in it can nest. A
/// declaration it cannot read that way (a comment with a parenthesis inside the braces) is not
/// checked, never misreported.
fn names_of_import(code: &str, import: &crate::BodyImport) -> Vec<ImportedName> {
    let Some(at) = byte_offset(code, import.line, import.column) else {
        return Vec::new();
    };
    let Some(quote) = code[at..]
        .chars()
        .next()
        .filter(|c| *c == '"' || *c == '\'')
    else {
        return Vec::new();
    };
    let Some(end) = code[at + 1..].find(quote).map(|e| at + 1 + e + 1) else {
        return Vec::new();
    };
    let mut floor = at.saturating_sub(MAX_IMPORT_TEXT);
    while !code.is_char_boundary(floor) {
        floor += 1;
    }
    let window = &code[floor..at];
    let starts = window.rmatch_indices("import").map(|(i, _)| floor + i);
    for start in starts.take(MAX_IMPORT_STARTS) {
        let text = &code[start..end];
        let braces = text.matches('{').count();
        if braces > 1
            || text.matches('}').count() != braces
            || text.contains(['(', ')', '[', ']', '`'])
        {
            continue;
        }
        let names = imported_names(text);
        if names.is_empty() || names.iter().any(|n| n.specifier != import.specifier) {
            continue;
        }
        let (line, column) = position(code, start as u32);
        return names
            .into_iter()
            .map(|n| ImportedName {
                column: if n.line == 1 {
                    n.column + column - 1
                } else {
                    n.column
                },
                line: n.line + line - 1,
                ..n
            })
            .collect();
    }
    Vec::new()
}

/// The byte offset of a 1-based line and column (in characters).
fn byte_offset(code: &str, line: u32, column: u32) -> Option<usize> {
    let mut offset = 0;
    for (i, text) in code.split_inclusive('\n').enumerate() {
        if i + 1 == line as usize {
            let within = text
                .char_indices()
                .nth(column.saturating_sub(1) as usize)?
                .0;
            return Some(offset + within);
        }
        offset += text.len();
    }
    None
}

/// Stamps each Code node's imports into `data.sandboxModules` as what they resolve to now
/// (`{specifier, resolvedPackVersion, contentDigest}`), so a later validate can report drift.
/// Returns how many nodes were stamped; imports that do not resolve are left unstamped.
pub fn lock_graph(
    document: &mut serde_json::Value,
    catalog: &dyn SandboxModuleCatalog,
) -> Result<usize, GraphError> {
    graph_of(document)?;
    let graph = if document.get("graph").is_some_and(|g| g.is_object()) {
        document.get_mut("graph")
    } else {
        Some(document)
    };
    let Some(nodes) = graph
        .and_then(|g| g.get_mut("nodes"))
        .and_then(|n| n.as_array_mut())
    else {
        return Err(GraphError("the document is not a workflow graph".into()));
    };
    let mut stamped = 0;
    for node in nodes {
        if node.get("type").and_then(|t| t.as_str()) != Some(CODE_NODE_TYPE) {
            continue;
        }
        let code = node
            .get("data")
            .and_then(|d| d.get("code"))
            .and_then(|c| c.as_str())
            .unwrap_or_default()
            .to_string();
        let (_, imports) = validate_body("", &code);
        let declarations: Vec<Declaration> = imports
            .iter()
            .map(|i| Declaration::of(i.specifier.clone()))
            .collect();
        let resolution = catalog.resolve_for_execution(&declarations);
        let stamps: Vec<Declaration> = resolution
            .modules
            .iter()
            .map(|m| Declaration {
                specifier: m.specifier.clone(),
                resolved_pack_version: m.pack_version.clone(),
                content_digest: Some(m.content_digest.clone()),
            })
            .collect();
        let Some(data) = node
            .as_object_mut()
            .map(|n| n.entry("data").or_insert_with(|| serde_json::json!({})))
        else {
            continue;
        };
        if let Some(data) = data.as_object_mut() {
            data.insert(
                "sandboxModules".into(),
                serde_json::to_value(&stamps).unwrap_or_default(),
            );
            stamped += 1;
        }
    }
    Ok(stamped)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn codes(code: &str) -> Vec<&'static str> {
        validate_body("n", code)
            .0
            .iter()
            .map(|i| i.code.as_str())
            .collect()
    }

    #[test]
    fn body_rules() {
        assert!(codes("return 1").is_empty());
        assert_eq!(codes("const = 1"), ["code_syntax"]);
        assert_eq!(codes("export const a = 1"), ["code_module"]);
        assert_eq!(codes("const m = await import('x')"), ["code_module"]);
        assert_eq!(codes("const fs = require('fs')"), ["code_module"]);
        let (issues, _) = validate_body(
            "n",
            "const a = 1;\nconst m = await import('x'); require('y');",
        );
        assert!(
            issues[0].message.contains("`import()` and `require()`"),
            "{}",
            issues[0].message
        );
        assert_eq!(issues[0].line, Some(2));
        let (_, imports) = validate_body(
            "n",
            "import a from 'p'; import b from 'p'; import 'q'; return 1",
        );
        let specifiers: Vec<&str> = imports.iter().map(|i| i.specifier.as_str()).collect();
        assert_eq!(specifiers, ["p", "q"]);
    }

    #[test]
    fn absent_globals_are_named_unless_bound_or_tested() {
        assert_eq!(
            codes("setTimeout(() => 1, 10); return 1"),
            ["code_undefined_name"]
        );
        assert_eq!(codes("return process.env.X"), ["code_undefined_name"]);
        assert!(codes("return typeof process === 'undefined'").is_empty());
        assert!(codes("const process = 1; return process").is_empty());
        assert!(codes("return inputs.setTimeout").is_empty());
        let (issues, _) = validate_body("n", "const a = 1;\nreturn Buffer.from(a)");
        assert_eq!((issues[0].line, issues[0].column), (Some(2), Some(8)));
        assert!(
            issues[0].message.contains("Uint8Array"),
            "{}",
            issues[0].message
        );
        // One finding per name, however often it is read.
        assert_eq!(codes("Intl; Intl; Intl; return 1"), ["code_undefined_name"]);
    }

    #[test]
    fn promises_of_imported_calls_used_as_values_are_found() {
        let found = |code: &str| -> Vec<String> {
            validate_body("n", code)
                .0
                .into_iter()
                .filter(|i| i.code == UNAWAITED)
                .map(|i| i.message)
                .collect()
        };
        let head = "import { add } from \"@a/w\";\nimport * as ns from \"@a/h\";\n";
        for used in [
            "return add(1, 2) + 1;",
            "return add(1, 2).toFixed(1);",
            "if (add(1, 2)) { return 1; }",
            "return `${add(1, 2)}`;",
            "return -add(1, 2);",
            "return ns.parse('a').rows;",
            "return add(1, 2) ? 1 : 2;",
        ] {
            let messages = found(&format!("{head}{used}"));
            assert_eq!(messages.len(), 1, "{used}: {messages:?}");
        }
        assert!(found(&format!("{head}return add(1, 2) + 1;"))[0].contains("(from \"@a/w\")"));
        for fine in [
            "return (await add(1, 2)) + 1;",
            "return add(1, 2);",
            "const p = add(1, 2); return await p;",
            "return Promise.all([add(1, 2)]);",
            "return typeof add(1, 2);",
            "const other = (x) => x; return other(1) + 1;",
        ] {
            assert!(found(&format!("{head}{fine}")).is_empty(), "{fine}");
        }
        // Without a catalog that resolves the specifier to a host or WASM module, nothing is
        // reported: an authored function may return anything.
        let g = serde_json::json!({ "nodes": [{ "id": "a", "type": CODE_NODE_TYPE, "data": { "code": format!("{head}return add(1, 2) + 1;") } }] });
        let issues = validate_graph(&g, &nodetool_runtime::EmptyCatalog).unwrap_or_default();
        assert!(issues.iter().all(|i| i.code != UNAWAITED), "{issues:?}");
    }

    #[test]
    fn authored_modules_report_absent_globals_and_code_generation() {
        let source = "export function f() {\n  const k = process.env.KEY;\n  return eval(\"1\") + new Function(\"return 2\")() + process.pid;\n}\nexport const g = (Buffer) => Buffer;\n";
        let found = module_globals(source).unwrap_or_default();
        let got: Vec<(&str, u32, u32)> = found
            .iter()
            .map(|g| (g.name.as_str(), g.line, g.column))
            .collect();
        assert_eq!(
            got,
            [("process", 2, 13), ("eval", 3, 10), ("Function", 3, 22)]
        );
        assert!(module_globals("export const a = 1;").is_some_and(|f| f.is_empty()));
        assert!(module_globals("export const = ;").is_none());
    }

    #[test]
    fn namespace_members_are_noted_for_the_catalog_phase_and_never_shown_alone() {
        let code =
            "import * as geo from \"@a/g\";\nreturn geo.haversin(1, 2) + geo.haversin(3, 4);";
        let (issues, _) = validate_body("n", code);
        let notes: Vec<(&str, Option<u32>, Option<u32>)> = issues
            .iter()
            .filter(|i| i.code == NAMESPACE_MEMBER)
            .map(|i| (i.message.as_str(), i.line, i.column))
            .collect();
        assert_eq!(
            notes,
            [
                ("haversin(from \"@a/g\")", Some(2), Some(12)),
                ("haversin(from \"@a/g\")", Some(2), Some(33)),
            ]
        );
        // Without a module that lacks the member, nothing is reported.
        let g = serde_json::json!({ "nodes": [{ "id": "a", "type": CODE_NODE_TYPE, "data": { "code": code } }] });
        let issues = validate_graph(&g, &nodetool_runtime::EmptyCatalog).unwrap_or_default();
        assert!(
            issues.iter().all(|i| i.code != NAMESPACE_MEMBER),
            "{issues:?}"
        );
    }

    #[test]
    fn import_names_are_read_from_the_declaration_alone() {
        let code = "const x = f(1);\nimport { parseIso, format as f } from \"@a/b\";\nreturn 1";
        let import = crate::BodyImport {
            specifier: "@a/b".into(),
            line: 2,
            column: 39,
        };
        let names = names_of_import(code, &import);
        let got: Vec<(&str, u32, u32)> = names
            .iter()
            .map(|n| (n.name.as_str(), n.line, n.column))
            .collect();
        assert_eq!(got, [("parseIso", 2, 10), ("format", 2, 20)]);
        // A clause that could nest is not read (no false finding, no deep parse).
        let nested = "import { a /* ( */ } from \"@a/b\";";
        let import = crate::BodyImport {
            specifier: "@a/b".into(),
            line: 1,
            column: 27,
        };
        assert!(names_of_import(nested, &import).is_empty());
        // A position past the text, or not on a string, reads nothing.
        let far = crate::BodyImport {
            specifier: "@a/b".into(),
            line: 40,
            column: 1,
        };
        assert!(names_of_import(code, &far).is_empty());
        let deep = format!("{}import {{ a }} from \"@a/b\";", "(".repeat(100_000));
        let import = crate::BodyImport {
            specifier: "@a/b".into(),
            line: 1,
            column: 100_019,
        };
        assert_eq!(names_of_import(&deep, &import).len(), 1);
    }

    #[test]
    fn non_specifier_imports_are_module_errors() {
        let g = serde_json::json!({ "nodes": [{ "id": "a", "type": CODE_NODE_TYPE, "data": { "code": "const a = 1;\nimport fs from 'node:fs';\nreturn 1" } }] });
        let issues = validate_graph(&g, &nodetool_runtime::EmptyCatalog).unwrap_or_default();
        assert_eq!(issues.len(), 1, "{issues:?}");
        assert_eq!(issues[0].code, "code_module");
        assert!(
            issues[0].message.contains("\"node:fs\""),
            "{}",
            issues[0].message
        );
        assert_eq!(issues[0].line, Some(2));
    }

    #[test]
    fn graphs_are_recognised_or_refused() {
        let g = serde_json::json!({ "graph": { "nodes": [{ "id": "a", "type": CODE_NODE_TYPE, "data": { "code": "return 1" } }, { "id": "b", "type": "other" }], "edges": [] } });
        assert_eq!(code_nodes(&g).map(|n| n.len()), Ok(1));
        assert!(code_nodes(&serde_json::json!({ "nodes": 3 })).is_err());
        assert!(code_nodes(&serde_json::json!([1, 2])).is_err());
    }

    #[test]
    fn missing_shipped_packs_get_an_install_hint_and_others_do_not() {
        let g = serde_json::json!({ "nodes": [
            { "id": "a", "type": CODE_NODE_TYPE, "data": { "code": "import yaml from '@nodetool-ai/sandbox-yaml';\nreturn 1" } },
            { "id": "b", "type": CODE_NODE_TYPE, "data": { "code": "import x from '@acme/thing';\nreturn 1" } }
        ] });
        let issues = validate_graph(&g, &nodetool_runtime::EmptyCatalog).unwrap_or_default();
        assert_eq!(issues.len(), 2);
        assert_eq!(
            issues[0].message,
            "Sandbox module @nodetool-ai/sandbox-yaml is not installed. (pack \"@nodetool-ai/sandbox-yaml\") Install @nodetool-ai/sandbox-yaml to use it."
        );
        assert_eq!(issues[0].line, Some(1));
        assert_eq!(
            issues[1].message,
            "Sandbox module @acme/thing is not installed. (pack \"@acme/thing\")"
        );
    }
}
