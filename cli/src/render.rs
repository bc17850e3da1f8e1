//! Rendering: what a person reads and what a machine parses.

use std::collections::BTreeMap;
use std::path::Path;

use nodetool_discovery::DiscoveredCatalog;
use nodetool_guest::RunOutcome;
use nodetool_jssource::validate::{CodeNode, Issue, IssueCode, Severity};
use nodetool_protocol::catalog::StatusLevel;
use nodetool_protocol::run::{LogLevel, RunError};
use nodetool_protocol::value::Value;
use nodetool_runtime::SandboxModuleCatalog;

use crate::term::{Paint, Stream, paint, safe};

/// A value as one line: strings as themselves, the rest as compact JSON.
pub(crate) fn value_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Undefined => "undefined".into(),
        other => other.to_json().to_string(),
    }
}

/// An error as one line: `<code>: <message> (line N, column M)`.
pub(crate) fn error_line(error: &RunError) -> String {
    error.to_string()
}

pub(crate) fn run_human(
    outcome: &RunOutcome,
    code: &str,
    origin: &str,
    catalog: Option<&DiscoveredCatalog>,
) {
    for log in &outcome.logs {
        let prefix = match log.level {
            LogLevel::Log => "",
            LogLevel::Info => "info: ",
            LogLevel::Warn => "warn: ",
            LogLevel::Error => "error: ",
            LogLevel::Debug => "debug: ",
        };
        errln!("{prefix}{}", safe(&log.message));
    }
    match &outcome.result {
        Ok(Value::String(s)) => outln!("{}", safe(s)),
        Ok(value) => outln!(
            "{}",
            safe(&serde_json::to_string_pretty(&value.to_json()).unwrap_or_default())
        ),
        Err(error) => err!("{}", error_report(error, code, origin, catalog)),
    }
}

/// `error[<code>]: message`, then where, then the source line with a caret under the column,
/// then what to do (`help:` lines).
pub(crate) fn error_report(
    error: &RunError,
    code: &str,
    origin: &str,
    catalog: Option<&DiscoveredCatalog>,
) -> String {
    let (message, help) = crate::help::run_error(error, code, catalog);
    let head = paint(&format!("error[{}]", error.code), Paint::Error, Stream::Err);
    let mut out = format!("{head}: {}\n", safe(&message));
    if let Some(specifier) = &error.specifier {
        out.push_str(&format!("  = specifier: {}\n", safe(specifier)));
    }
    out.push_str(&snippet(code, &safe(origin), error.line, error.column));
    if !error.stack.is_empty() {
        out.push_str("  = stack:\n");
        for frame in &error.stack {
            out.push_str(&format!("      {}\n", safe(frame)));
        }
    }
    for line in help {
        out.push_str(&format!(
            "  {} {}\n",
            paint("help:", Paint::Help, Stream::Err),
            safe(&line)
        ));
    }
    out
}

/// `  --> origin:line:column` and the line with a caret, when the position is known.
fn snippet(code: &str, origin: &str, line: Option<u32>, column: Option<u32>) -> String {
    let Some(line) = line else {
        return String::new();
    };
    let Some(text) = code.lines().nth(line.saturating_sub(1) as usize) else {
        return format!("  --> {origin}:{line}\n");
    };
    let number = line.to_string();
    let pad = " ".repeat(number.len());
    let mut out = match column {
        Some(column) => format!("  --> {origin}:{line}:{column}\n"),
        None => format!("  --> {origin}:{line}\n"),
    };
    out.push_str(&format!("{pad} |\n{number} | {}\n", safe(text)));
    if let Some(column) = column {
        // The caret sits under the column, counting characters (tabs kept as tabs).
        // Measured on the escaped text, so an escaped control character keeps the caret true.
        let before: String = text
            .chars()
            .take(column.saturating_sub(1) as usize)
            .collect();
        let lead: String = safe(&before)
            .chars()
            .map(|c| if c == '\t' { '\t' } else { ' ' })
            .collect();
        out.push_str(&format!("{pad} | {lead}^\n"));
    }
    out
}

/// The `help:` lines of a validation issue: the command that clears a stale stamp, the
/// closest importable specifier for one that is not installed, the closest export.
pub(crate) fn issue_help(
    issue: &Issue,
    node: Option<&CodeNode>,
    path: &str,
    catalog: Option<&DiscoveredCatalog>,
) -> (String, Vec<String>) {
    let mut message = issue.message.clone();
    let mut help = Vec::new();
    if let Some(at) = message.find("; did you mean ") {
        help.push(message[at + 2..].to_string());
        message.truncate(at);
    }
    match issue.code {
        IssueCode::PackageMismatch => help.push(format!(
            "run `nodetool lock {path}` to record what the imports resolve to now"
        )),
        IssueCode::PackageUnavailable if message.contains("is not installed") => {
            let written = node.and_then(|n| quoted_at(&n.code, issue.line, issue.column));
            if let (Some(specifier), Some(catalog)) = (written, catalog) {
                help.extend(crate::help::closest_specifier(&specifier, catalog));
            }
        }
        IssueCode::PackageUnavailable if message.contains("compile") => {
            help.push(format!(
                "compile it with `{}`",
                crate::help::compile_command()
            ));
        }
        _ => {}
    }
    (message, help)
}

/// The string literal that starts at (line, column) of `code`, if one does.
fn quoted_at(code: &str, line: Option<u32>, column: Option<u32>) -> Option<String> {
    let text = code.lines().nth(line?.saturating_sub(1) as usize)?;
    let rest: String = text
        .chars()
        .skip(column?.saturating_sub(1) as usize)
        .collect();
    let quote = rest.chars().next().filter(|c| *c == '"' || *c == '\'')?;
    let inner = &rest[1..];
    Some(inner[..inner.find(quote)?].to_string())
}

pub(crate) fn issues_human(
    issues: &[Issue],
    nodes: &[CodeNode],
    path: &Path,
    catalog: Option<&DiscoveredCatalog>,
) {
    let shown = path.display().to_string();
    let shown = safe(&shown);
    if issues.is_empty() {
        outln!("{shown}: {} Code node(s), no issues", nodes.len());
        return;
    }
    for issue in issues {
        let (severity, colour) = match issue.severity {
            Severity::Error => ("error", Paint::Error),
            Severity::Warning => ("warning", Paint::Warning),
        };
        let node = nodes.iter().find(|n| n.id == issue.node_id);
        let (message, help) = issue_help(issue, node, &shown, catalog);
        out!(
            "{}: {}\n  = node: {}\n",
            paint(&format!("{severity}[{}]", issue.code), colour, Stream::Out),
            safe(&message),
            safe(&issue.node_id)
        );
        if let Some(node) = node {
            let origin = if nodes.len() == 1 && node.id == "body" {
                shown.to_string()
            } else {
                format!("{shown} (node {})", safe(&node.id))
            };
            out!("{}", snippet(&node.code, &origin, issue.line, issue.column));
        }
        for line in help {
            outln!(
                "  {} {}",
                paint("help:", Paint::Help, Stream::Out),
                safe(&line)
            );
        }
    }
    let errors = issues
        .iter()
        .filter(|i| i.severity == Severity::Error)
        .count();
    outln!(
        "{} error(s), {} warning(s) in {} Code node(s)",
        errors,
        issues.len() - errors,
        nodes.len()
    );
}

pub(crate) fn packs_list(
    catalog: &DiscoveredCatalog,
    ledger: Option<&nodetool_frontend::install::Ledger>,
    json: bool,
) {
    if json {
        let mut out = nodetool_frontend::answers::packs_list_json(catalog);
        if let Some(ledger) = ledger {
            out["installed"] = ledger.rows_json();
        }
        outln!("{}", serde_json::to_string(&out).unwrap_or_default());
        return;
    }
    if catalog.summaries().is_empty() {
        outln!("No sandbox module is installed.");
    }
    for s in catalog.summaries() {
        let version = s
            .pack_version
            .as_deref()
            .map(|v| format!("@{v}"))
            .unwrap_or_default();
        let description = s
            .description
            .as_deref()
            .map(|d| format!(" — {d}"))
            .unwrap_or_default();
        outln!(
            "{} [{}] {}{}{}",
            safe(&s.specifier),
            s.kind.as_str(),
            safe(&s.pack_name),
            safe(&version),
            safe(&description)
        );
    }
    let problems = catalog
        .diagnostics()
        .iter()
        .filter(|d| {
            matches!(
                d.status,
                StatusLevel::Error | StatusLevel::Warning | StatusLevel::Skipped
            )
        })
        .count();
    if problems > 0 {
        outln!("{problems} diagnostic(s); run `nodetool packs doctor` for what to do about them.");
    }
    if let Some(ledger) = ledger {
        crate::install::print_installed(ledger);
    }
}

/// What `packs doctor` found: per pack, its problems (never its READY notes).
pub(crate) struct DoctorReport {
    pub errors: usize,
    pub warnings: usize,
}

/// A global an authored pack file uses that the sandbox lacks or refuses (`packs doctor`
/// scans every authored file, as the compiler scans npm bundles).
pub(crate) struct AuthoredGlobal {
    pub pack: String,
    pub file: String,
    pub global: nodetool_jssource::validate::ModuleGlobal,
}

/// The code `packs doctor` reports an [`AuthoredGlobal`] under.
pub(crate) const AUTHORED_GLOBAL: &str = "authored-global";

/// One problem of one pack, as the doctor shows it.
struct Problem {
    error: bool,
    level: &'static str,
    code: String,
    specifier: Option<String>,
    message: String,
    advice: String,
}

/// Prints the doctor report for every pack, or only `only`: every problem at once, READY
/// notes left out, authored files' absent globals as warnings.
pub(crate) fn doctor(
    catalog: &DiscoveredCatalog,
    only: Option<&str>,
    authored: &[AuthoredGlobal],
    json: bool,
) -> DoctorReport {
    let mut by_pack: BTreeMap<&str, Vec<Problem>> = BTreeMap::new();
    for d in catalog.diagnostics() {
        if d.status == StatusLevel::Ready || only.is_some_and(|p| d.pack_name != p) {
            continue;
        }
        let level = match d.status {
            StatusLevel::Error => "error",
            StatusLevel::Warning => "warning",
            StatusLevel::Skipped => "skipped",
            StatusLevel::Ready => "ready",
        };
        by_pack
            .entry(d.pack_name.as_str())
            .or_default()
            .push(Problem {
                error: d.status == StatusLevel::Error,
                level,
                code: d.code.as_str().to_string(),
                specifier: d.specifier.clone(),
                message: d.message.clone(),
                advice: crate::help::advice(d.code),
            });
    }
    for a in authored {
        let g = &a.global;
        let what = if g.name == "eval" || g.name == "Function" {
            format!("generates code with `{}(...)`", g.name)
        } else {
            format!("reads `{}`, which the sandbox does not have", g.name)
        };
        by_pack.entry(a.pack.as_str()).or_default().push(Problem {
            error: false,
            level: "warning",
            code: AUTHORED_GLOBAL.into(),
            specifier: None,
            message: format!("{}:{}:{}: {what}: {}", a.file, g.line, g.column, g.hint),
            advice: "Rewrite the module without it: a pack's modules run in the same sandbox as the bodies that import them (no Node or browser globals, no code from strings).".into(),
        });
    }
    let mut report = DoctorReport {
        errors: 0,
        warnings: 0,
    };
    for p in by_pack.values().flatten() {
        if p.error {
            report.errors += 1;
        } else {
            report.warnings += 1;
        }
    }
    let modules = catalog
        .summaries()
        .iter()
        .filter(|s| only.is_none_or(|p| s.pack_name == p))
        .count();
    if json {
        let packs: Vec<serde_json::Value> = by_pack
            .iter()
            .map(|(pack, problems)| {
                serde_json::json!({
                    "pack": pack,
                    "problems": problems.iter().map(|p| serde_json::json!({
                        "level": p.level,
                        "code": p.code,
                        "specifier": p.specifier,
                        "message": p.message,
                        "advice": p.advice,
                    })).collect::<Vec<_>>(),
                })
            })
            .collect();
        outln!(
            "{}",
            serde_json::json!({
                "ok": report.errors == 0,
                "modules": modules,
                "errors": report.errors,
                "warnings": report.warnings,
                "packs": packs,
            })
        );
        return report;
    }
    if by_pack.is_empty() {
        outln!("All {modules} sandbox module(s) are healthy.");
        return report;
    }
    for (pack, problems) in by_pack {
        outln!("{}", safe(pack));
        for p in problems {
            let colour = if p.error {
                Paint::Error
            } else {
                Paint::Warning
            };
            outln!(
                "  {}: {}\n    {} {}",
                paint(&format!("{}[{}]", p.level, p.code), colour, Stream::Out),
                safe(&p.message),
                paint("fix:", Paint::Help, Stream::Out),
                p.advice
            );
        }
    }
    outln!(
        "{} error(s), {} warning(s) in {modules} sandbox module(s)",
        report.errors,
        report.warnings
    );
    report
}
