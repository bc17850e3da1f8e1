//! The entry builder: a Code node body becomes an ES module.
//!
//! A body may use `return` and top-level `await` and may start with static imports. The entry
//! hoists the import declarations onto its first line, ahead of an async wrapper whose result is
//! the module's default export, and blanks the ranges they vacated, so line *n* of the body is
//! line *n + 1* of the entry with every column unchanged. A body with no `import` or `export`
//! text skips parsing altogether (the fast path).

use oxc::allocator::Allocator;
use oxc::ast::ast::Statement;
use oxc::parser::{ParseOptions, Parser};
use oxc::span::{GetSpan, SourceType};

use crate::position::{Positions, position};

/// Lines the entry puts before the body's first line.
pub const ENTRY_LINE_OFFSET: u32 = 1;
/// The module name the entry is compiled under (it appears in stack traces).
pub const ENTRY_MODULE_NAME: &str = "code";

const WRAPPER_OPEN: &str = "export default await (async () => {";
const WRAPPER_CLOSE: &str = "\n})();\n";

/// A static import of the body, as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BodyImport {
    /// The specifier.
    pub specifier: String,
    /// 1-based line in the body.
    pub line: u32,
    /// 1-based column in the body.
    pub column: u32,
}

/// A body that does not parse, with the position of the problem in the body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BodySyntaxError {
    /// What is wrong.
    pub message: String,
    /// 1-based line.
    pub line: u32,
    /// 1-based column.
    pub column: u32,
}

/// The built entry module.
#[derive(Debug, Clone)]
pub struct Entry {
    /// The module's source.
    pub source: String,
    /// The body's static imports, in order (duplicates kept).
    pub imports: Vec<BodyImport>,
}

/// Builds the entry module for `body`.
pub fn build_entry(body: &str) -> Result<Entry, BodySyntaxError> {
    if !body.contains("import") && !body.contains("export") {
        return Ok(Entry {
            source: format!("{WRAPPER_OPEN}\n{body}{WRAPPER_CLOSE}"),
            imports: Vec::new(),
        });
    }
    let allocator = Allocator::default();
    let parsed = parse(&allocator, body)?;

    let mut blanked = body.as_bytes().to_vec();
    let mut hoisted = Vec::new();
    let mut imports = Vec::new();
    // Statements come in source order, so positions are found in one pass over the body (a
    // position per import from the start would be quadratic in a body of many imports).
    let mut positions = Positions::new(body);
    for statement in &parsed.program.body {
        match statement {
            Statement::ImportDeclaration(d) => {
                let (start, end) = (d.span.start as usize, d.span.end as usize);
                let text = body.get(start..end).unwrap_or_default();
                let mut one_line: String = text
                    .chars()
                    .map(|c| if c == '\n' || c == '\r' { ' ' } else { c })
                    .collect();
                if !one_line.trim_end().ends_with(';') {
                    one_line.push(';');
                }
                hoisted.push(one_line);
                for b in blanked.get_mut(start..end).into_iter().flatten() {
                    if *b != b'\n' && *b != b'\r' {
                        *b = b' ';
                    }
                }
                let (line, column) = positions.at(d.source.span.start);
                imports.push(BodyImport {
                    specifier: d.source.value.to_string(),
                    line,
                    column,
                });
            }
            s if s.is_module_declaration() => {
                let (line, column) = position(body, statement.span().start);
                return Err(BodySyntaxError {
                    message: "SyntaxError: a Code node body cannot export; it has no importers. Return the result with `return` instead".into(),
                    line,
                    column,
                });
            }
            _ => {}
        }
    }
    // Blanking replaced whole UTF-8 sequences byte for byte with spaces only inside import
    // declarations, whose boundaries are character boundaries, so this cannot fail; the
    // fallback keeps the original text rather than panic.
    let blanked = String::from_utf8(blanked).unwrap_or_else(|_| body.to_string());
    let mut source = hoisted.join(" ");
    if !hoisted.is_empty() {
        source.push(' ');
    }
    source.push_str(WRAPPER_OPEN);
    source.push('\n');
    source.push_str(&blanked);
    source.push_str(WRAPPER_CLOSE);
    Ok(Entry { source, imports })
}

/// Parses a Code node body as the entry builder reads it: an ES module in which `return` may
/// appear at the top level (top-level `await` is a module's anyway). Validation parses with
/// this too, so what it accepts is what the entry builder accepts.
pub fn parse_body_program<'a>(
    allocator: &'a Allocator,
    body: &'a str,
) -> oxc::parser::ParserReturn<'a> {
    let options = ParseOptions {
        allow_return_outside_function: true,
        ..ParseOptions::default()
    };
    Parser::new(allocator, body, SourceType::mjs())
        .with_options(options)
        .parse()
}

fn parse<'a>(
    allocator: &'a Allocator,
    body: &'a str,
) -> Result<oxc::parser::ParserReturn<'a>, BodySyntaxError> {
    let parsed = parse_body_program(allocator, body);
    if let Some(d) = parsed.diagnostics.iter().next() {
        let offset = d.labels.first().map_or(0, |l| l.offset());
        let (line, column) = position(body, offset);
        return Err(BodySyntaxError {
            message: format!("SyntaxError: {}", d.message),
            line,
            column,
        });
    }
    if parsed.panicked {
        return Err(BodySyntaxError {
            message: "SyntaxError: the body could not be parsed".into(),
            line: 1,
            column: 1,
        });
    }
    Ok(parsed)
}

/// Parses the body as the entry builder does, for the syntax error alone.
pub fn parse_body(body: &str) -> Result<(), BodySyntaxError> {
    let allocator = Allocator::default();
    parse(&allocator, body).map(|_| ())
}

/// The body's static import specifiers, in order, without duplicates: what the body declares.
pub fn body_imports(body: &str) -> Result<Vec<BodyImport>, BodySyntaxError> {
    let mut seen = std::collections::BTreeSet::new();
    Ok(build_entry(body)?
        .imports
        .into_iter()
        .filter(|i| seen.insert(i.specifier.clone()))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn many_imports_are_found_in_linear_time() {
        // 40,000 imports: quadratic position finding took seconds here.
        let body = format!("{}return 1;", "import '@acme/a';\n".repeat(40_000));
        let started = std::time::Instant::now();
        let entry = build_entry(&body);
        assert!(entry.is_ok_and(|e| e.imports.len() == 40_000 && e.imports[39_999].line == 40_000));
        assert!(started.elapsed() < std::time::Duration::from_secs(20));
    }

    #[test]
    fn fast_path_wraps_without_parsing() {
        let e = build_entry("return 1 + 1").unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(
            e.source,
            "export default await (async () => {\nreturn 1 + 1\n})();\n"
        );
        assert!(e.imports.is_empty());
    }

    #[test]
    fn imports_are_hoisted_and_lines_kept() {
        let body = "// geo\nimport { haversine } from \"@acme/geo\";\nconst km = haversine(1, 3);\nimport x\n  from './y'\nreturn km;";
        let e = build_entry(body).unwrap_or_else(|e| panic!("{e:?}"));
        let lines: Vec<&str> = e.source.lines().collect();
        assert_eq!(
            lines[0],
            "import { haversine } from \"@acme/geo\"; import x   from './y'; export default await (async () => {"
        );
        assert_eq!(lines[1], "// geo");
        assert_eq!(lines[2].trim(), "");
        assert_eq!(lines[3], "const km = haversine(1, 3);");
        assert_eq!(lines[6], "return km;");
        assert_eq!(e.source.lines().count(), body.lines().count() + 2);
        let specs: Vec<_> = e
            .imports
            .iter()
            .map(|i| (i.specifier.as_str(), i.line))
            .collect();
        assert_eq!(specs, [("@acme/geo", 2), ("./y", 5)]);
    }

    #[test]
    fn export_is_a_syntax_error_that_says_why() {
        let e = build_entry("const a = 1;\nexport const b = 2;")
            .err()
            .unwrap_or_else(|| panic!("accepted"));
        assert!(e.message.contains("cannot export"), "{}", e.message);
        assert_eq!((e.line, e.column), (2, 1));
    }

    #[test]
    fn syntax_errors_point_at_the_body() {
        let e = build_entry("import x from 'y';\nconst = 3;")
            .err()
            .unwrap_or_else(|| panic!("accepted"));
        assert_eq!(e.line, 2);
        assert!(e.message.starts_with("SyntaxError"), "{}", e.message);
    }

    #[test]
    fn dynamic_imports_stay_in_the_body() {
        let e = build_entry("const m = await import('x'); return m;")
            .unwrap_or_else(|e| panic!("{e:?}"));
        assert!(e.imports.is_empty());
        assert!(e.source.contains("await import('x')"));
    }

    #[test]
    fn body_imports_are_deduplicated() {
        let imports =
            body_imports("import a from 'p'; import { b } from 'p'; import 'q'; return 1")
                .unwrap_or_default();
        let specs: Vec<_> = imports.iter().map(|i| i.specifier.as_str()).collect();
        assert_eq!(specs, ["p", "q"]);
    }
}
