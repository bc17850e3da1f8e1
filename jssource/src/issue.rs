//! Validation issue codes as data: each code declared once with what it means and what to do,
//! rendered at the edge. `docs/validation.md`'s table is generated from [`CODES`] (a test keeps
//! the two equal), and each code's message has a snapshot (`jssource/tests/issue_messages.rs`).

use serde::{Serialize, Serializer};

nodetool_protocol::stable_codes! {
    /// What a validation issue is about. The codes are stable: front ends and scripts match on
    /// them.
    pub enum IssueCode, table CODES;
    /// The body does not parse.
    Syntax = "code_syntax",
        "The body does not parse as JavaScript (a Code node body may use `return` and top-level `await`).",
        "Fix the syntax at the line and column given.";
    /// The body breaks a module rule the loader enforces.
    Module = "code_module",
        "The body breaks a module rule the loader enforces: a top-level `export`, a dynamic `import()` or `require()`, or an import that is not a sandbox specifier (`node:fs`, a path, a URL).",
        "Import sandbox packs with a static `import` at the top of the body, by package name (`@scope/pack` or `@scope/pack/module`); return the result with `return`.";
    /// The body reads a global the sandbox does not have.
    UndefinedName = "code_undefined_name",
        "The body reads a global a Node or browser script may expect that the sandbox does not have (`setTimeout`, `process`, `Buffer`, ...): the run throws ReferenceError there.",
        "Use what the message suggests instead (`await sleep(ms)`, `inputs`, `getSecret(NAME)`, `Uint8Array`), or test for the name with `typeof` first.";
    /// A host or WASM call's Promise is used as a value.
    UnawaitedCall = "code_unawaited_call",
        "The result of a host or WASM module's export is used as a value without `await`; those exports return Promises, so the value is a Promise.",
        "Write `(await f(...))` where the value is used.";
    /// A specifier does not resolve to a usable module.
    PackageUnavailable = "code_package_unavailable",
        "An imported specifier does not resolve: its pack is not installed, not consented, or its module is unavailable (the message names the pack and why).",
        "Install (or consent to) the pack the message names, or compile its npm module; `nodetool packs list` shows what is available.";
    /// A named import the module does not export.
    MissingExport = "code_missing_export",
        "The body imports a name (or reads a namespace member) that the module does not export.",
        "Use one of the module's exports; the message suggests the closest one when one is close.";
    /// The pack changed since the node was locked.
    PackageMismatch = "code_package_mismatch",
        "An import resolves, but not to what `nodetool lock` recorded for the node (another version or content digest).",
        "Run `nodetool lock <workflow>` to record what the imports resolve to now, or install the recorded version.";
    /// A namespace member read, noted by the parse for the catalog phase.
    NamespaceMember = "code_namespace_member",
        "Internal: a member read off a namespace import (`ns.name`), noted by the parse phase for the catalog phase, which checks it against the module's exports. Never shown on its own.",
        "Nothing: a missing member is reported as `code_missing_export`.";
}

/// One code's documentation.
pub type IssueCodeDoc = nodetool_protocol::codes::CodeDoc<IssueCode>;

/// A code compares equal to its stable text, so a test or a caller holding the text (an issue
/// that crossed a process) can ask without parsing.
impl PartialEq<&str> for IssueCode {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl Serialize for IssueCode {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// `docs/validation.md`'s code table, generated from [`CODES`].
pub fn docs_table() -> String {
    nodetool_protocol::codes::docs_table(CODES)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_unique_parse_back_and_are_documented() {
        let mut seen = std::collections::HashSet::new();
        for doc in CODES {
            assert!(seen.insert(doc.name), "{} twice", doc.name);
            assert!(doc.name.starts_with("code_"), "{}", doc.name);
            assert_eq!(IssueCode::parse(doc.name), Some(doc.code));
            assert_eq!(doc.code.as_str(), doc.name);
            assert_eq!(doc.code.doc(), doc);
            assert!(!doc.meaning.is_empty() && !doc.todo.is_empty());
        }
        assert_eq!(IssueCode::parse("code_nonsense"), None);
    }
}
