//! `help:` lines: the next step an error allows, where one exists. Each is derived from the
//! error's stable code and what the catalog knows, never from guessing at free text beyond the
//! engine's own fixed messages.

use nodetool_discovery::DiscoveredCatalog;
use nodetool_jssource::exports::closest;
use nodetool_protocol::run::{RunError, RunErrorCode};
use nodetool_runtime::SandboxModuleCatalog;

/// The methods the `workspace` object has (pinned by a CLI test that lists them from a run).
pub(crate) const WORKSPACE_METHODS: &[&str] = &[
    "readText",
    "writeText",
    "readBytes",
    "writeBytes",
    "list",
    "exists",
];

/// The `--packs` roots this process was given, so a suggested command repeats them.
static PACKS_ARGS: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Records the `--packs` roots (once, at start-up).
pub(crate) fn set_packs_args(roots: &[std::path::PathBuf]) {
    let args: String = roots
        .iter()
        .map(|r| format!(" --packs {}", shell_word(&r.display().to_string())))
        .collect();
    let _ = PACKS_ARGS.set(args);
}

/// `word` as a POSIX shell reads it back: as it is when it is plain, else single-quoted.
fn shell_word(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_./-@+:,=".contains(c));
    if plain {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

/// `nodetool packs compile` with this process's `--packs` roots.
pub(crate) fn compile_command() -> String {
    format!(
        "nodetool packs compile{}",
        PACKS_ARGS.get().map(String::as_str).unwrap_or_default()
    )
}

/// The doctor's advice for `code`, with the exact command where it names one.
pub(crate) fn advice(code: nodetool_protocol::catalog::StatusCode) -> String {
    let text = nodetool_frontend::answers::advice(code);
    text.replace(
        "`nodetool packs compile`",
        &format!("`{}`", compile_command()),
    )
}

/// The separator `missing-export` messages put before their suggestion.
const SUGGESTION: &str = "; did you mean ";

/// A run error's message without its suggestion, and the `help:` lines that say what to do.
pub(crate) fn run_error(
    error: &RunError,
    code: &str,
    catalog: Option<&DiscoveredCatalog>,
) -> (String, Vec<String>) {
    let mut message = error.message.clone();
    let mut help = Vec::new();
    match error.code {
        RunErrorCode::MissingExport => {
            if let Some(at) = message.find(SUGGESTION) {
                let suggestion = message[at + 2..].to_string();
                message.truncate(at);
                help.push(suggestion);
            }
        }
        RunErrorCode::ModuleNotFound => {
            if let (Some(specifier), Some(catalog)) = (&error.specifier, catalog) {
                let close = closest_specifier(specifier, catalog);
                let typo = close.is_some();
                help.extend(close);
                // A near miss is a typo; otherwise the pack may just not be installed.
                if !typo && !specifier.starts_with("@nodetool-ai/sandbox-") {
                    let pack = nodetool_protocol::catalog::pack_name_of(specifier);
                    help.push(format!("install it with `nodetool packs install {pack}`"));
                }
            }
        }
        RunErrorCode::ModuleUnavailable if message.contains("compile") => {
            help.push(format!("compile it with `{}`", compile_command()));
        }
        RunErrorCode::RuntimeError => {
            help.extend(capability_hint(&message));
            if message.starts_with("TypeError:")
                && message.contains("not a function")
                && called_on(code, error.line, error.column, "workspace")
            {
                help.push(format!(
                    "`workspace` has these methods: {}",
                    WORKSPACE_METHODS.join(", ")
                ));
            }
        }
        _ => {}
    }
    (message, help)
}

/// The flag that grants a capability a body read without having it.
pub(crate) fn capability_hint(message: &str) -> Option<String> {
    let name = message
        .strip_prefix("ReferenceError: ")?
        .strip_suffix(" is not defined")?;
    Some(match name {
        "fetch" => {
            "grant `fetch` with `--allow-fetch HOST` (repeatable), naming each host it may reach"
                .into()
        }
        "getSecret" => "grant `getSecret` with `--secret NAME=VALUE` (repeatable)".into(),
        "workspace" => {
            "grant `workspace` with `--workspace DIR`, a directory the body may read and write"
                .into()
        }
        other => format!(
            "the sandbox has no `{other}`: {}",
            nodetool_jssource::validate::absent_global_hint(other)?
        ),
    })
}

/// Whether the expression at (line, column) of `code` is a member of `object`
/// (`workspace.lst(...)`), reading the text the caret points at.
fn called_on(code: &str, line: Option<u32>, column: Option<u32>, object: &str) -> bool {
    let (Some(line), Some(column)) = (line, column) else {
        return false;
    };
    let Some(text) = code.lines().nth(line.saturating_sub(1) as usize) else {
        return false;
    };
    let at: String = text
        .chars()
        .skip(column.saturating_sub(1) as usize)
        .collect();
    let before: String = text
        .chars()
        .take(column.saturating_sub(1) as usize)
        .collect();
    at.starts_with(&format!("{object}.")) || before.trim_end().ends_with(&format!("{object}."))
}

/// `did you mean X?` for a specifier no pack offers, from the importable specifiers.
pub(crate) fn closest_specifier(specifier: &str, catalog: &DiscoveredCatalog) -> Option<String> {
    let summaries = catalog.summaries();
    let found = closest(specifier, summaries.iter().map(|s| s.specifier.as_str()))?;
    Some(format!("did you mean {found}?"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capabilities_name_their_flags() {
        assert!(
            capability_hint("ReferenceError: fetch is not defined")
                .is_some_and(|h| h.contains("--allow-fetch"))
        );
        assert!(
            capability_hint("ReferenceError: getSecret is not defined")
                .is_some_and(|h| h.contains("--secret NAME=VALUE"))
        );
        assert!(
            capability_hint("ReferenceError: workspace is not defined")
                .is_some_and(|h| h.contains("--workspace DIR"))
        );
        assert_eq!(capability_hint("ReferenceError: foo is not defined"), None);
        // A global from Node or a browser the sandbox lacks says what to use instead.
        let intl = capability_hint("ReferenceError: Intl is not defined").unwrap_or_default();
        assert!(
            intl.starts_with("the sandbox has no `Intl`: ") && intl.contains("sandbox pack"),
            "{intl}"
        );
        let timer =
            capability_hint("ReferenceError: setTimeout is not defined").unwrap_or_default();
        assert!(timer.contains("await sleep(ms)"), "{timer}");
    }

    #[test]
    fn suggested_commands_quote_what_a_shell_would_split() {
        assert_eq!(shell_word("tests/fixtures/packs"), "tests/fixtures/packs");
        assert_eq!(shell_word("my packs"), "'my packs'");
        assert_eq!(shell_word("it's"), "'it'\\''s'");
        assert_eq!(shell_word(""), "''");
    }

    #[test]
    fn workspace_calls_are_recognised() {
        assert!(called_on(
            "return workspace.lst();",
            Some(1),
            Some(8),
            "workspace"
        ));
        assert!(called_on(
            "return workspace.lst();",
            Some(1),
            Some(18),
            "workspace"
        ));
        assert!(!called_on(
            "return other.lst();",
            Some(1),
            Some(8),
            "workspace"
        ));
        assert!(!called_on("", Some(9), Some(1), "workspace"));
    }
}
