//! The naming rules: JavaScript identifiers, module names, package names, specifiers and
//! package-relative file paths. Each check returns the rule text a diagnostic quotes.

/// ECMAScript keywords and strict-mode reserved words. An export alias or a WASM export exposed
/// under one of these would be unusable as a binding, so the manifest refuses it.
const RESERVED_IDENTIFIERS: &[&str] = &[
    "await",
    "break",
    "case",
    "catch",
    "class",
    "const",
    "continue",
    "debugger",
    "default",
    "delete",
    "do",
    "else",
    "enum",
    "export",
    "extends",
    "false",
    "finally",
    "for",
    "function",
    "if",
    "implements",
    "import",
    "in",
    "instanceof",
    "interface",
    "let",
    "new",
    "null",
    "package",
    "private",
    "protected",
    "public",
    "return",
    "static",
    "super",
    "switch",
    "this",
    "throw",
    "true",
    "try",
    "typeof",
    "var",
    "void",
    "while",
    "with",
    "yield",
];

/// The longest package name npm accepts.
const MAX_PACKAGE_NAME_CHARS: usize = 214;

fn has_control_char(s: &str) -> bool {
    s.chars().any(|c| c <= '\u{1f}' || c == '\u{7f}')
}

fn has_encoded_traversal(s: &str) -> bool {
    let lower = s.to_ascii_lowercase();
    ["%2e", "%2f", "%5c"].iter().any(|e| lower.contains(e))
}

/// `^[A-Za-z_$][A-Za-z0-9_$]*$`: the ASCII identifiers a facade can export.
pub fn is_identifier_shape(s: &str) -> bool {
    let mut chars = s.chars();
    match chars.next() {
        Some(c) if c.is_ascii_alphabetic() || c == '_' || c == '$' => {}
        _ => return false,
    }
    chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
}

/// Whether `s` is a keyword or strict-mode reserved word.
pub fn is_reserved_identifier(s: &str) -> bool {
    RESERVED_IDENTIFIERS.contains(&s)
}

/// A name a generated facade can bind: identifier-shaped and not reserved.
pub fn check_identifier(s: &str) -> Result<(), &'static str> {
    if !is_identifier_shape(s) {
        Err("is not a JavaScript identifier")
    } else if is_reserved_identifier(s) {
        Err("is a reserved JavaScript identifier")
    } else {
        Ok(())
    }
}

/// A module name: `"."` (the pack's root specifier) or one path segment of `[A-Za-z0-9._-]`,
/// never `..` or `node_modules`.
pub fn check_module_name(name: &str) -> Result<(), &'static str> {
    if has_control_char(name) {
        return Err("module name contains a control character");
    }
    if name == "." {
        return Ok(());
    }
    if name.is_empty() {
        return Err("module name must not be empty");
    }
    if name.contains('/') || name.contains('\\') {
        return Err("module name must be \".\" or a single path segment");
    }
    if name == ".." || name == "node_modules" {
        return Err("module name is reserved");
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
    {
        return Err("module name may only contain letters, digits, '.', '_' and '-'");
    }
    Ok(())
}

fn is_package_segment(s: &str) -> bool {
    !s.is_empty()
        && s != "."
        && s != ".."
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '~' | '-'))
}

/// An npm package name: `name` or `@scope/name` of `[a-z0-9._~-]` (any case), at most 214
/// characters. A segment that is `.` or `..` is refused as well, which npm's own pattern allows.
pub fn check_package_name(name: &str) -> Result<(), &'static str> {
    if name.len() > MAX_PACKAGE_NAME_CHARS {
        return Err("package name is longer than 214 characters");
    }
    let ok = match name.strip_prefix('@') {
        Some(scoped) => match scoped.split_once('/') {
            Some((scope, bare)) => is_package_segment(scope) && is_package_segment(bare),
            None => false,
        },
        None => is_package_segment(name),
    };
    if ok {
        Ok(())
    } else {
        Err("is not a valid npm package name")
    }
}

/// The one specifier rule: a pack's root module (`"."`) is imported by the package name, any
/// other module by `<package>/<name>`.
pub fn normalize_specifier(package_name: &str, module_name: &str) -> Result<String, String> {
    check_package_name(package_name).map_err(|e| format!("{package_name}: {e}"))?;
    check_module_name(module_name)
        .map_err(|e| format!("invalid sandbox module name {module_name:?}: {e}"))?;
    Ok(if module_name == "." {
        package_name.to_string()
    } else {
        format!("{package_name}/{module_name}")
    })
}

/// Splits a specifier into its package name and module name (`"."` for the root), or `None`
/// when the text is not shaped like a sandbox specifier at all.
pub fn split_specifier(specifier: &str) -> Option<(&str, &str)> {
    let package_end = if specifier.starts_with('@') {
        let scope_end = specifier.find('/')?;
        specifier[scope_end + 1..]
            .find('/')
            .map_or(specifier.len(), |i| scope_end + 1 + i)
    } else {
        specifier.find('/').unwrap_or(specifier.len())
    };
    let (package, rest) = specifier.split_at(package_end);
    check_package_name(package).ok()?;
    let module = match rest.strip_prefix('/') {
        None if rest.is_empty() => ".",
        Some(m) if m != "." => m,
        _ => return None,
    };
    check_module_name(module).ok()?;
    Some((package, module))
}

/// Whether `s` matches the specifier grammar (a pack name plus at most one subpath segment).
pub fn is_specifier(s: &str) -> bool {
    split_specifier(s).is_some()
}

/// Normalizes a package-relative file path: backslashes and `.` segments are not accepted as
/// spellings of something else, so one file has exactly one id. Returns the canonical id, or the
/// rule it breaks.
pub fn normalize_package_path(path: &str) -> Result<String, &'static str> {
    if has_control_char(path) {
        return Err("file contains a control character");
    }
    if has_encoded_traversal(path) {
        return Err("file contains encoded path traversal");
    }
    if path.is_empty() || path.starts_with('/') || path.contains('\\') {
        return Err("file must be a package-relative path");
    }
    let mut segments = Vec::new();
    for segment in path.split('/') {
        match segment {
            "." => {}
            "" | ".." => return Err("file must be a package-relative path"),
            s => segments.push(s),
        }
    }
    if segments.is_empty() {
        return Err("file must be a package-relative path");
    }
    Ok(segments.join("/"))
}

/// Whether `s` is a lowercase hex SHA-256 digest.
pub fn is_sha256_hex(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// The host-module id pattern `^[a-z][a-z0-9-]*$`, 1 to 64 characters.
pub fn check_host_id(id: &str) -> Result<(), &'static str> {
    let mut chars = id.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_lowercase());
    if first_ok
        && id.len() <= 64
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
    {
        Ok(())
    } else {
        Err("invalid host module id")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers() {
        assert!(check_identifier("haversine").is_ok());
        assert!(check_identifier("$x_1").is_ok());
        assert_eq!(
            check_identifier("foo-bar"),
            Err("is not a JavaScript identifier")
        );
        assert_eq!(
            check_identifier("1x"),
            Err("is not a JavaScript identifier")
        );
        assert_eq!(check_identifier(""), Err("is not a JavaScript identifier"));
        assert_eq!(
            check_identifier("yield"),
            Err("is a reserved JavaScript identifier")
        );
        assert_eq!(
            check_identifier("enum"),
            Err("is a reserved JavaScript identifier")
        );
    }

    #[test]
    fn module_names() {
        assert!(check_module_name(".").is_ok());
        assert!(check_module_name("gemini.audio").is_ok());
        assert!(check_module_name("simplify-wasm").is_ok());
        assert!(check_module_name("..").is_err());
        assert!(check_module_name("node_modules").is_err());
        assert!(check_module_name("a/b").is_err());
        assert!(check_module_name("a\u{0}").is_err());
        assert!(check_module_name("").is_err());
        assert!(check_module_name("caf\u{e9}").is_err());
    }

    #[test]
    fn package_names() {
        assert!(check_package_name("@acme/nodetool-geo").is_ok());
        assert!(check_package_name("left-pad").is_ok());
        assert!(check_package_name("@ACME/Geo").is_ok());
        assert!(check_package_name("@acme").is_err());
        assert!(check_package_name("@acme/").is_err());
        assert!(check_package_name("a/b").is_err());
        assert!(check_package_name("..").is_err());
        assert!(check_package_name("@../x").is_err());
        assert!(check_package_name(&"a".repeat(215)).is_err());
    }

    #[test]
    fn specifiers() {
        assert_eq!(
            normalize_specifier("@acme/geo", ".").as_deref(),
            Ok("@acme/geo")
        );
        assert_eq!(
            normalize_specifier("@acme/geo", "extra").as_deref(),
            Ok("@acme/geo/extra")
        );
        assert!(normalize_specifier("@acme/geo", "a/b").is_err());
        assert_eq!(split_specifier("@acme/geo"), Some(("@acme/geo", ".")));
        assert_eq!(
            split_specifier("@acme/geo/extra"),
            Some(("@acme/geo", "extra"))
        );
        assert_eq!(split_specifier("lodash/fp"), Some(("lodash", "fp")));
        assert_eq!(split_specifier("@acme/geo/a/b"), None);
        assert_eq!(split_specifier("node:buffer"), None);
        assert_eq!(split_specifier("/etc/passwd"), None);
        assert_eq!(split_specifier("./x.js"), None);
        assert_eq!(split_specifier("@acme/geo/"), None);
        assert_eq!(split_specifier("@acme/geo/.."), None);
    }

    #[test]
    fn package_paths() {
        assert_eq!(
            normalize_package_path("sandbox/geo.js").as_deref(),
            Ok("sandbox/geo.js")
        );
        assert_eq!(
            normalize_package_path("./sandbox/./geo.js").as_deref(),
            Ok("sandbox/geo.js")
        );
        for bad in [
            "",
            "/etc/passwd",
            "../x.js",
            "a/../../x.js",
            "a\\b.js",
            "a//b.js",
            ".",
        ] {
            assert_eq!(
                normalize_package_path(bad),
                Err("file must be a package-relative path"),
                "{bad}"
            );
        }
        assert_eq!(
            normalize_package_path("%2e%2e/x.js"),
            Err("file contains encoded path traversal")
        );
        assert_eq!(
            normalize_package_path("a%2Fb.js"),
            Err("file contains encoded path traversal")
        );
        assert_eq!(
            normalize_package_path("a\u{7f}.js"),
            Err("file contains a control character")
        );
    }

    #[test]
    fn host_ids_and_digests() {
        assert!(check_host_id("csv").is_ok());
        assert!(check_host_id("a-1").is_ok());
        assert!(check_host_id("Csv").is_err());
        assert!(check_host_id("1a").is_err());
        assert!(check_host_id(&"a".repeat(65)).is_err());
        assert!(is_sha256_hex(&"a".repeat(64)));
        assert!(!is_sha256_hex(&"A".repeat(64)));
        assert!(!is_sha256_hex("abc"));
    }
}
