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

/// A scope or bare-name part: `[A-Za-z0-9._~-]`, not empty, never starting with `.` (which
/// also refuses `.` and `..`: a part is a directory name under `node_modules`).
fn is_package_segment(s: &str) -> bool {
    !s.is_empty()
        && !s.starts_with('.')
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '~' | '-'))
}

/// Names npm refuses outright (its blacklist).
const BLACKLISTED_PACKAGE_NAMES: [&str; 2] = ["node_modules", "favicon.ico"];

/// The name of a package that may exist: npm's rules for every package name, old or new
/// (`validate-npm-package-name`'s errors), and the one rule the sandbox adds. `name` or
/// `@scope/name`; each part of `[A-Za-z0-9._~-]` and not starting with `.` (npm refuses a
/// leading `.` on the whole name; the sandbox on every part, so `.`, `..` and hidden
/// directories are never a pack); an unscoped name not starting with `_` and not
/// `node_modules` or `favicon.ico`; at most 214 characters.
///
/// Capital letters are allowed: npm still serves packages published with them before it
/// refused them, and discovery reports two packs whose names differ only in case as one
/// duplicate specifier rather than refusing either. A name a pack is *created* under must pass
/// [`check_new_package_name`] as well.
///
/// The one package-name rule of the workspace: discovery, the manifest's `npm` field, the
/// install front end and the scaffold all call it (or [`check_new_package_name`]).
pub fn check_package_name(name: &str) -> Result<(), &'static str> {
    if name.len() > MAX_PACKAGE_NAME_CHARS {
        return Err("package name is longer than 214 characters");
    }
    let ok = match name.strip_prefix('@') {
        Some(scoped) => match scoped.split_once('/') {
            Some((scope, bare)) => is_package_segment(scope) && is_package_segment(bare),
            None => false,
        },
        None => {
            is_package_segment(name)
                && !name.starts_with('_')
                && !BLACKLISTED_PACKAGE_NAMES.contains(&name)
        }
    };
    if ok {
        Ok(())
    } else {
        Err("is not a valid npm package name")
    }
}

/// The name a new package may be published under: [`check_package_name`], and npm's rules for
/// new packages: no capital letters and no `~` (npm refuses `~'!()*` in a new name; the rest
/// never pass [`check_package_name`]).
pub fn check_new_package_name(name: &str) -> Result<(), &'static str> {
    check_package_name(name)?;
    if name.chars().any(|c| c.is_ascii_uppercase()) {
        return Err("is not a valid name for a new npm package: capital letters are not allowed");
    }
    if name.contains('~') {
        return Err("is not a valid name for a new npm package: '~' is not allowed");
    }
    Ok(())
}

/// The npm scope of NodeTool's own packs (the shipped packs, and the packs the host-module
/// registry pins: `@nodetool-ai/sandbox-<id>`).
pub const FIRST_PARTY_SCOPE: &str = "@nodetool-ai";

/// Whether `name` is reserved for NodeTool's own packs: any name in [`FIRST_PARTY_SCOPE`],
/// the scope compared without regard to ASCII case (so `@NodeTool-AI/x` is reserved too). The
/// one place this rule lives: `packs install` refuses a local tarball or directory of such a
/// name without an explicit override, and discovery warns when an installed pack of a shipped
/// pack's name is used instead of it.
pub fn is_reserved_package_name(name: &str) -> bool {
    name.split_once('/').is_some_and(|(scope, bare)| {
        scope.eq_ignore_ascii_case(FIRST_PARTY_SCOPE) && !bare.is_empty()
    })
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

    /// The cases where the install front end's own validator and this one used to disagree,
    /// each answered by npm's rules.
    #[test]
    fn package_names_where_the_two_validators_disagreed() {
        // A leading `.` or `_`: npm refuses both on a name (install refused, discovery took).
        for refused in [".hidden", "_private", "@acme/.hidden", "@.acme/x"] {
            assert!(check_package_name(refused).is_err(), "{refused}");
        }
        // npm's blacklist (neither refused it).
        for refused in ["node_modules", "favicon.ico"] {
            assert!(check_package_name(refused).is_err(), "{refused}");
        }
        // A scoped part may start with `_` on npm (install refused it).
        assert!(check_package_name("@acme/_x").is_ok());
        assert!(check_package_name("@acme/node_modules").is_ok());
        // Capital letters: an existing package may have them (install refused, discovery took);
        // a new one may not.
        assert!(check_package_name("@ACME/Geo").is_ok());
        assert!(check_package_name("JSONStream").is_ok());
        assert!(check_new_package_name("@ACME/Geo").is_err());
        assert!(check_new_package_name("JSONStream").is_err());
        // `~`: legal in an existing name, not in a new one (both took it).
        assert!(check_package_name("a~b").is_ok());
        assert!(check_new_package_name("a~b").is_err());
        // What both took, npm takes.
        for fine in ["left-pad", "@acme/nodetool-geo", "a.b", "a_b", "@a/b-c.d"] {
            assert!(check_new_package_name(fine).is_ok(), "{fine}");
        }
        // Length counts the whole name, scope included.
        let long = format!("@acme/{}", "a".repeat(208));
        assert!(check_package_name(&long).is_ok());
        assert!(check_package_name(&format!("{long}a")).is_err());
    }

    #[test]
    fn first_party_names_are_reserved() {
        for reserved in [
            "@nodetool-ai/sandbox-geo",
            "@nodetool-ai/anything",
            "@NodeTool-AI/sandbox-geo",
        ] {
            assert!(is_reserved_package_name(reserved), "{reserved}");
        }
        for free in [
            "@acme/sandbox-geo",
            "nodetool-ai",
            "@nodetool-ai",
            "@nodetool-ai/",
            "@nodetool-aix/geo",
            "sandbox-geo",
            "",
        ] {
            assert!(!is_reserved_package_name(free), "{free}");
        }
        // Every pack the host-module registry pins is first-party.
        for module in crate::host::HOST_MODULES {
            assert!(
                is_reserved_package_name(module.pack_name),
                "{}",
                module.pack_name
            );
        }
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
