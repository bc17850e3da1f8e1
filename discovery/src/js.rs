//! The static scan of authored JavaScript: parse as a module with oxc, collect the static import
//! sources, and refuse dynamic `import()` and `require()`. Nothing is ever executed.

use oxc::allocator::Allocator;
use oxc::ast::ast::{CallExpression, Expression, ImportExpression, Statement};
use oxc::ast_visit::{VisitJs, walk_js};
use oxc::parser::Parser;
use oxc::span::SourceType;

use nodetool_protocol::catalog::StatusCode;

/// One static import (`import … from`, `export … from`, `import "…"`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StaticImport {
    pub source: String,
    pub line: u32,
    pub column: u32,
}

/// A rule the source breaks: its code, and the rule in words with a `line:column`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ScanError {
    pub code: StatusCode,
    pub message: String,
}

/// Scans a module's source: its static imports, or every rule it breaks.
pub(crate) fn scan_module(source: &str) -> Result<Vec<StaticImport>, Vec<ScanError>> {
    let allocator = Allocator::default();
    let parsed = Parser::new(&allocator, source, SourceType::mjs()).parse();
    if parsed.panicked || !parsed.diagnostics.is_empty() {
        let first = parsed.diagnostics.iter().next();
        let message = match first {
            Some(d) => {
                let at = d
                    .labels
                    .first()
                    .map(|l| l.offset())
                    .map(|o| position(source, o));
                match at {
                    Some((line, column)) => {
                        format!("invalid JavaScript at {line}:{column}: {}", d.message)
                    }
                    None => format!("invalid JavaScript: {}", d.message),
                }
            }
            None => "invalid JavaScript".into(),
        };
        return Err(vec![ScanError {
            code: StatusCode::JsInvalid,
            message,
        }]);
    }

    let mut imports = Vec::new();
    for statement in &parsed.program.body {
        let literal = match statement {
            Statement::ImportDeclaration(d) => Some(&d.source),
            Statement::ExportFromDeclaration(d) => Some(&d.source),
            Statement::ExportAllDeclaration(d) => Some(&d.source),
            _ => None,
        };
        if let Some(literal) = literal {
            let (line, column) = position(source, literal.span.start);
            imports.push(StaticImport {
                source: literal.value.to_string(),
                line,
                column,
            });
        }
    }

    let mut finder = Forbidden {
        source,
        errors: Vec::new(),
    };
    finder.visit_program(&parsed.program);
    if finder.errors.is_empty() {
        Ok(imports)
    } else {
        Err(finder.errors)
    }
}

struct Forbidden<'s> {
    source: &'s str,
    errors: Vec<ScanError>,
}

impl<'a> VisitJs<'a> for Forbidden<'_> {
    fn visit_import_expression(&mut self, it: &ImportExpression<'a>) {
        let (line, column) = position(self.source, it.span.start);
        self.errors.push(ScanError {
            code: StatusCode::DynamicImport,
            message: format!("dynamic import() is not allowed (at {line}:{column})"),
        });
        walk_js::walk_import_expression(self, it);
    }

    fn visit_call_expression(&mut self, it: &CallExpression<'a>) {
        if matches!(&it.callee, Expression::Identifier(id) if id.name == "require") {
            let (line, column) = position(self.source, it.span.start);
            self.errors.push(ScanError {
                code: StatusCode::RequireCall,
                message: format!("require() is not allowed (at {line}:{column})"),
            });
        }
        walk_js::walk_call_expression(self, it);
    }
}

/// 1-based line and column (in characters) of a byte offset.
pub(crate) fn position(source: &str, offset: u32) -> (u32, u32) {
    let offset = (offset as usize).min(source.len());
    let before = source.get(..offset).unwrap_or(source);
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = before[line_start..].chars().count() + 1;
    (
        u32::try_from(line).unwrap_or(u32::MAX),
        u32::try_from(column).unwrap_or(u32::MAX),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collects_static_imports() {
        let src = "import { a } from './a.js';\nexport { b } from \"./b.js\";\nexport * from './c.js';\nimport './d.js';\nexport const x = 1;";
        let imports = scan_module(src).unwrap_or_default();
        let sources: Vec<_> = imports.iter().map(|i| i.source.as_str()).collect();
        assert_eq!(sources, ["./a.js", "./b.js", "./c.js", "./d.js"]);
        assert_eq!((imports[1].line, imports[1].column), (2, 19));
    }

    #[test]
    fn refuses_dynamic_import_and_require_with_positions() {
        let errors = scan_module(
            "const a = 1;\nexport async function f() { return import('x'); }\nrequire('fs');",
        )
        .err()
        .unwrap_or_default();
        assert_eq!(errors.len(), 2);
        assert_eq!(errors[0].code, StatusCode::DynamicImport);
        assert!(errors[0].message.contains("2:36"), "{}", errors[0].message);
        assert_eq!(errors[1].code, StatusCode::RequireCall);
        assert!(errors[1].message.contains("3:1"), "{}", errors[1].message);
        // A member call named require is not a require() call.
        assert!(scan_module("const o = { require() {} }; o.require('x');").is_ok());
    }

    #[test]
    fn syntax_errors_name_the_position() {
        let errors = scan_module("export const = 1;").err().unwrap_or_default();
        assert_eq!(errors[0].code, StatusCode::JsInvalid);
        assert!(
            errors[0].message.starts_with("invalid JavaScript at 1:"),
            "{}",
            errors[0].message
        );
        // Top-level return is a syntax error in a module.
        assert!(scan_module("return 1;").is_err());
    }
}
