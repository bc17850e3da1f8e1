//! The static scan of authored JavaScript: parse as a module with oxc, collect the static import
//! sources, and refuse dynamic `import()` and `require()`. Nothing is ever executed.

use oxc::allocator::Allocator;
use oxc::parser::Parser;
use oxc::span::SourceType;

use nodetool_jssource::dynamic::{DynamicLoadKind, dynamic_loads};
use nodetool_jssource::imports::static_requests;
use nodetool_protocol::catalog::StatusCode;

use nodetool_jssource::position::position;

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
    for (_, literal) in static_requests(&parsed.program) {
        let (line, column) = position(source, literal.span.start);
        imports.push(StaticImport {
            source: literal.value.to_string(),
            line,
            column,
        });
    }

    let errors: Vec<ScanError> = dynamic_loads(&parsed.program)
        .into_iter()
        .map(|load| {
            let (line, column) = position(source, load.offset);
            match load.kind {
                DynamicLoadKind::Import => ScanError {
                    code: StatusCode::DynamicImport,
                    message: format!("dynamic import() is not allowed (at {line}:{column})"),
                },
                DynamicLoadKind::Require => ScanError {
                    code: StatusCode::RequireCall,
                    message: format!("require() is not allowed (at {line}:{column})"),
                },
            }
        })
        .collect();
    if errors.is_empty() {
        Ok(imports)
    } else {
        Err(errors)
    }
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
