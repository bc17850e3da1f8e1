//! Rendering: what a person reads and what a machine parses.

use std::collections::BTreeMap;
use std::path::Path;

use nodetool_discovery::DiscoveredCatalog;
use nodetool_guest::RunOutcome;
use nodetool_guest::validate::{CodeNode, Issue, Severity};
use nodetool_protocol::catalog::StatusLevel;
use nodetool_protocol::run::{LogLevel, RunError};
use nodetool_protocol::value::Value;
use nodetool_runtime::SandboxModuleCatalog;

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

pub(crate) fn run_human(outcome: &RunOutcome, code: &str, origin: &str) {
    for log in &outcome.logs {
        let prefix = match log.level {
            LogLevel::Log => "",
            LogLevel::Info => "info: ",
            LogLevel::Warn => "warn: ",
            LogLevel::Error => "error: ",
            LogLevel::Debug => "debug: ",
        };
        errln!("{prefix}{}", log.message);
    }
    match &outcome.result {
        Ok(Value::String(s)) => outln!("{s}"),
        Ok(value) => outln!(
            "{}",
            serde_json::to_string_pretty(&value.to_json()).unwrap_or_default()
        ),
        Err(error) => err!("{}", error_report(error, code, origin)),
    }
}

/// `error[<code>]: message`, then where, then the source line with a caret under the column.
pub(crate) fn error_report(error: &RunError, code: &str, origin: &str) -> String {
    let mut out = format!("error[{}]: {}\n", error.code, error.message);
    if let Some(specifier) = &error.specifier {
        out.push_str(&format!("  = specifier: {specifier}\n"));
    }
    out.push_str(&snippet(code, origin, error.line, error.column));
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
    out.push_str(&format!("{pad} |\n{number} | {text}\n"));
    if let Some(column) = column {
        // The caret sits under the column, counting characters (tabs kept as tabs).
        let lead: String = text
            .chars()
            .take(column.saturating_sub(1) as usize)
            .map(|c| if c == '\t' { '\t' } else { ' ' })
            .collect();
        out.push_str(&format!("{pad} | {lead}^\n"));
    }
    out
}

pub(crate) fn issues_human(issues: &[Issue], nodes: &[CodeNode], path: &Path) {
    if issues.is_empty() {
        outln!(
            "{}: {} Code node(s), no issues",
            path.display(),
            nodes.len()
        );
        return;
    }
    for issue in issues {
        let severity = match issue.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        out!(
            "{severity}[{}]: {}\n  = node: {}\n",
            issue.code,
            issue.message,
            issue.node_id
        );
        if let Some(node) = nodes.iter().find(|n| n.id == issue.node_id) {
            out!(
                "{}",
                snippet(
                    &node.code,
                    &format!("{} (node {})", path.display(), node.id),
                    issue.line,
                    issue.column
                )
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
            s.specifier,
            s.kind.as_str(),
            s.pack_name,
            version,
            description
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

/// Prints the doctor report; returns whether any diagnostic is an error.
pub(crate) fn doctor(catalog: &DiscoveredCatalog) -> bool {
    let mut by_pack: BTreeMap<&str, Vec<&nodetool_protocol::catalog::Status>> = BTreeMap::new();
    for d in catalog.diagnostics() {
        if d.status != StatusLevel::Ready {
            by_pack.entry(d.pack_name.as_str()).or_default().push(d);
        }
    }
    if by_pack.is_empty() {
        outln!(
            "All {} sandbox module(s) are healthy.",
            catalog.summaries().len()
        );
        return false;
    }
    let mut errors = false;
    for (pack, statuses) in by_pack {
        outln!("{pack}");
        for s in statuses {
            errors |= s.status == StatusLevel::Error;
            let level = match s.status {
                StatusLevel::Error => "error",
                StatusLevel::Warning => "warning",
                StatusLevel::Skipped => "skipped",
                StatusLevel::Ready => "ready",
            };
            outln!(
                "  {level}[{}]: {}\n    fix: {}",
                s.code,
                s.message,
                nodetool_frontend::answers::advice(s.code)
            );
        }
    }
    errors
}
