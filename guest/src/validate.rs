//! Offline validation of a workflow graph's Code nodes, and the lock that stamps what each
//! node's imports resolved to.
//!
//! A body's static imports are its declaration. Validation parses every `nodetool.code.Code`
//! body, reports what the loader would refuse before anything runs (syntax, a top-level
//! `export`, `import()` or `require()`), resolves the imports through the catalog (a missing or
//! unavailable module is an error naming the pack; drift against the node's recorded stamp is a
//! warning), and never executes anything.

use oxc::allocator::Allocator;
use oxc::ast::ast::{CallExpression, Expression, ImportExpression};
use oxc::ast_visit::{VisitJs, walk_js};
use oxc::parser::{ParseOptions, Parser};
use oxc::span::SourceType;
use serde::Serialize;

use nodetool_protocol::catalog::{Declaration, StatusCode, StatusLevel};
use nodetool_runtime::SandboxModuleCatalog;

use crate::entry::{build_entry, position};

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
    /// `code_syntax`, `code_module`, `code_package_unavailable` or `code_package_mismatch`.
    pub code: &'static str,
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

/// What the loader would refuse in a body, found statically.
struct Dynamic {
    body: String,
    found: Vec<(&'static str, u32)>,
}

impl<'a> VisitJs<'a> for Dynamic {
    fn visit_import_expression(&mut self, it: &ImportExpression<'a>) {
        self.found.push(("import()", it.span.start));
        walk_js::walk_import_expression(self, it);
    }

    fn visit_call_expression(&mut self, it: &CallExpression<'a>) {
        if matches!(&it.callee, Expression::Identifier(id) if id.name == "require") {
            self.found.push(("require()", it.span.start));
        }
        walk_js::walk_call_expression(self, it);
    }
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
    /// The stable issue code `code` names, if it is one (for an issue that crossed a process).
    pub fn known_code(code: &str) -> Option<&'static str> {
        [
            "code_syntax",
            "code_module",
            "code_package_unavailable",
            "code_package_mismatch",
        ]
        .into_iter()
        .find(|c| *c == code)
    }
}

/// Parses one body: [`BodyAnalysis`].
pub fn analyze_body(node_id: &str, code: &str) -> BodyAnalysis {
    let (issues, imports) = validate_body(node_id, code);
    BodyAnalysis { issues, imports }
}

/// Validates one body: its issues and its static imports (deduplicated, in order).
fn validate_body(node_id: &str, code: &str) -> (Vec<Issue>, Vec<crate::BodyImport>) {
    let issue = |severity, code: &'static str, message: String, at: Option<(u32, u32)>| Issue {
        node_id: node_id.to_string(),
        severity,
        code,
        message,
        line: at.map(|a| a.0),
        column: at.map(|a| a.1),
    };
    let allocator = Allocator::default();
    let options = ParseOptions {
        allow_return_outside_function: true,
        ..ParseOptions::default()
    };
    let parsed = Parser::new(&allocator, code, SourceType::mjs())
        .with_options(options)
        .parse();
    if let Some(d) = parsed.diagnostics.iter().next() {
        let at = position(code, d.labels.first().map_or(0, |l| l.offset()));
        let message = format!(
            "The code does not parse as JavaScript (line {}): {}",
            at.0, d.message
        );
        return (
            vec![issue(Severity::Error, "code_syntax", message, Some(at))],
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
                "code_module",
                message,
                Some((e.line, e.column)),
            ));
            return (issues, Vec::new());
        }
    };
    let mut dynamic = Dynamic {
        body: code.to_string(),
        found: Vec::new(),
    };
    dynamic.visit_program(&parsed.program);
    if let Some(&(_, first)) = dynamic.found.first() {
        let mut kinds: Vec<&str> = dynamic.found.iter().map(|(k, _)| *k).collect();
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
            "code_module",
            message,
            Some(position(&dynamic.body, first)),
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
            issues: mut found,
            imports,
        } = analyze(&node.id, &node.code);
        issues.append(&mut found);
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
            issues.push(Issue {
                node_id: node.id.clone(),
                severity: Severity::Error,
                code: "code_module",
                message: format!(
                    "The code imports {names}, which the sandbox refuses: only installed sandbox packs resolve, imported by package name (`@scope/pack` or `@scope/pack/module`)."
                ),
                line: Some(first.line),
                column: Some(first.column),
            });
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
        for status in &resolution.statuses {
            let (severity, code) = match status.status {
                StatusLevel::Error => (Severity::Error, "code_package_unavailable"),
                _ => (Severity::Warning, "code_package_mismatch"),
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
            issues.push(Issue {
                node_id: node.id.clone(),
                severity,
                code,
                message,
                line: at.map(|a| a.0),
                column: at.map(|a| a.1),
            });
        }
    }
    Ok(issues)
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
        validate_body("n", code).0.iter().map(|i| i.code).collect()
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
