//! The dynamic-load finder: every `import()` and every call of a free-standing `require(...)`
//! in a parsed program, in source order. The guest loader refuses both when they run;
//! discovery refuses an authored pack file that has one, and validation reports one in a Code
//! node body, so all of them find them here.

use oxc::ast::ast::{CallExpression, Expression, ImportExpression, Program};
use oxc::ast_visit::{VisitJs, walk_js};

/// Which kind of dynamic load.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum DynamicLoadKind {
    /// `import(...)`.
    Import,
    /// `require(...)`, called by that name (a member call `o.require(...)` is not one).
    Require,
}

impl DynamicLoadKind {
    /// How diagnostics write it: `import()` or `require()`.
    pub fn as_str(self) -> &'static str {
        match self {
            DynamicLoadKind::Import => "import()",
            DynamicLoadKind::Require => "require()",
        }
    }
}

/// One dynamic load and the byte offset of its expression.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DynamicLoad {
    /// What it is.
    pub kind: DynamicLoadKind,
    /// Where its expression starts.
    pub offset: u32,
}

/// Every dynamic load of `program`, in the order a depth-first walk meets them.
pub fn dynamic_loads(program: &Program<'_>) -> Vec<DynamicLoad> {
    let mut finder = Finder(Vec::new());
    finder.visit_program(program);
    finder.0
}

struct Finder(Vec<DynamicLoad>);

impl<'a> VisitJs<'a> for Finder {
    fn visit_import_expression(&mut self, it: &ImportExpression<'a>) {
        self.0.push(DynamicLoad {
            kind: DynamicLoadKind::Import,
            offset: it.span.start,
        });
        walk_js::walk_import_expression(self, it);
    }

    fn visit_call_expression(&mut self, it: &CallExpression<'a>) {
        if matches!(&it.callee, Expression::Identifier(id) if id.name == "require") {
            self.0.push(DynamicLoad {
                kind: DynamicLoadKind::Require,
                offset: it.span.start,
            });
        }
        walk_js::walk_call_expression(self, it);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use oxc::allocator::Allocator;
    use oxc::parser::Parser;
    use oxc::span::SourceType;

    fn found(source: &str) -> Vec<(DynamicLoadKind, u32)> {
        let allocator = Allocator::default();
        let parsed = Parser::new(&allocator, source, SourceType::mjs()).parse();
        dynamic_loads(&parsed.program)
            .into_iter()
            .map(|d| (d.kind, d.offset))
            .collect()
    }

    #[test]
    fn finds_both_in_source_order_and_nested() {
        assert_eq!(
            found("require('a'); const f = async () => import(require('b'));"),
            [
                (DynamicLoadKind::Require, 0),
                (DynamicLoadKind::Import, 36),
                (DynamicLoadKind::Require, 43),
            ]
        );
    }

    #[test]
    fn member_calls_and_plain_names_are_not_loads() {
        assert!(found("const o = { require() {} }; o.require('x'); const r = require;").is_empty());
    }
}
