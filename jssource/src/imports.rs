//! The static module requests of a parsed program: `import … from`, `export … from`,
//! `export * from` and `import "…"`, each with the string literal it names.

use oxc::ast::ast::{Program, Statement, StringLiteral};

/// Which statement makes the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestKind {
    /// `import … from "x"` or `import "x"`.
    Import,
    /// `export { … } from "x"` or `export * from "x"`.
    ReExport,
}

/// Every static request of `program`'s top level, in source order, with its literal.
pub fn static_requests<'p, 'a>(
    program: &'p Program<'a>,
) -> impl Iterator<Item = (RequestKind, &'p StringLiteral<'a>)> {
    program.body.iter().filter_map(|statement| match statement {
        Statement::ImportDeclaration(d) => Some((RequestKind::Import, &d.source)),
        Statement::ExportFromDeclaration(d) => Some((RequestKind::ReExport, &d.source)),
        Statement::ExportAllDeclaration(d) => Some((RequestKind::ReExport, &d.source)),
        _ => None,
    })
}
