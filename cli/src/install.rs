//! `nodetool packs install | trust | uninstall`: the front end of
//! `nodetool_frontend::install`, which owns the flow (scripts-disabled installs, the ledger, the
//! integrity-bound rebuild). This module picks the installed root, shows npm's progress on
//! stderr, compiles a sandbox-only pack's npm entries, and renders the outcome.

use nodetool_compiler::npm_entries;
use nodetool_discovery::{RootKind, SearchRoot};
use nodetool_frontend::install::{InstallError, Installer, Ledger, Spec};
use nodetool_frontend::search::Environment;
use serde_json::json;

use crate::compile;

/// The installer for this environment's installed root.
pub(crate) fn installer(env: &Environment) -> Result<Installer, String> {
    let dir = env.install_dir().ok_or_else(|| {
        env.data_home()
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    })?;
    let mut installer = Installer::new(dir);
    if let Some(npm) = std::env::var_os("NODETOOL_NPM").filter(|v| !v.is_empty()) {
        installer.npm = npm.into();
    }
    Ok(installer)
}

/// One line per installed pack for `packs list`.
pub(crate) fn print_installed(ledger: &Ledger) {
    if ledger.packs.is_empty() {
        return;
    }
    outln!();
    outln!("Installed with `nodetool packs install`:");
    for r in ledger.packs.values() {
        outln!(
            "  {}@{}  {}  {}  scripts {}",
            r.pack_name,
            r.version,
            r.mode.as_str(),
            if r.active { "active" } else { "inactive" },
            r.scripts.as_str()
        );
    }
}

/// npm's output goes to stderr, indented, so stdout stays the answer.
fn npm_log(json: bool) -> impl FnMut(&str) {
    move |line: &str| {
        if !json || std::env::var_os("NODETOOL_VERBOSE").is_some() {
            errln!("  npm: {line}");
        }
    }
}

fn failure(e: &InstallError, json: bool) {
    if json {
        outln!(
            "{}",
            json!({ "ok": false, "error": { "code": e.code, "message": e.message } })
        );
    } else {
        errln!("nodetool: {}", e.message);
    }
}

/// `nodetool packs install SPEC [--json]`. Returns whether the install landed (a sandbox-only
/// pack whose npm entry is refused by the compiler still installed; the skip is reported).
pub(crate) fn install(env: &Environment, spec: &str, json: bool) -> Result<bool, String> {
    let installer = installer(env)?;
    let spec = match Spec::parse(spec) {
        Ok(spec) => spec,
        Err(e) => return Err(e.message),
    };
    if !json {
        errln!("installing {spec} with lifecycle scripts disabled (npm install --ignore-scripts)");
    }
    let installed = match installer.install(&spec, &mut npm_log(json)) {
        Ok(installed) => installed,
        Err(e) => {
            failure(&e, json);
            return Ok(false);
        }
    };
    let record = &installed.record;
    // A sandbox-only pack is active now: compile its npm entries so the first run finds them.
    let mut modules = Vec::new();
    if record.active {
        let root = SearchRoot {
            path: installer.node_modules(),
            kind: RootKind::Installed,
            label: "installed".into(),
        };
        let entries: Vec<_> = npm_entries(&[root])
            .into_iter()
            .filter(|e| e.pack_name == record.pack_name)
            .collect();
        let compiled = compile::compile_entries(entries, &compile::cache(env)?, &mut |e, r| {
            if !json {
                compile::print_outcome(e, r);
            }
        })?;
        modules = compiled
            .iter()
            .map(|(e, r)| compile::module_json(e, r))
            .collect();
    }
    if json {
        let mut answer = record.row_json();
        answer["ok"] = json!(true);
        answer["closure"] = json!(record.closure);
        answer["modules"] = json!(modules);
        if let Some(previous) = &installed.previous {
            answer["previous"] = previous.row_json();
        }
        outln!("{answer}");
        return Ok(true);
    }
    if let Some(previous) = &installed.previous
        && previous.mode != record.mode
    {
        outln!(
            "{} changed mode: {} ({}) was {}; it is classified from the artifact now on disk.",
            record.pack_name,
            record.version,
            record.mode.as_str(),
            previous.mode.as_str()
        );
    }
    let dependencies = record.closure.len().saturating_sub(1);
    outln!(
        "installed {}@{} ({} dependenc{}; no install script ran)",
        record.pack_name,
        record.version,
        dependencies,
        if dependencies == 1 { "y" } else { "ies" }
    );
    outln!("mode: {} — {}", record.mode.as_str(), record.mode.meaning());
    if record.active {
        outln!("active: its sandbox modules can be imported now.");
    } else {
        outln!(
            "warning: {} is inactive. Review it, then `nodetool packs trust {}` runs its install scripts against the files on disk.",
            record.pack_name,
            record.pack_name
        );
    }
    Ok(true)
}

/// `nodetool packs trust NAME [--json]`.
pub(crate) fn trust(env: &Environment, name: &str, json: bool) -> Result<bool, String> {
    let installer = installer(env)?;
    if !json {
        errln!("verifying {name} against the install ledger before running its scripts");
    }
    match installer.trust(name, &mut npm_log(json)) {
        Ok(record) => {
            if json {
                let mut answer = record.row_json();
                answer["ok"] = json!(true);
                outln!("{answer}");
            } else {
                outln!(
                    "trusted {}@{}: the lockfile matched all {} package(s) recorded at install; their install scripts ran and the pack is active.",
                    record.pack_name,
                    record.version,
                    record.closure.len()
                );
            }
            Ok(true)
        }
        Err(e) => {
            failure(&e, json);
            Ok(false)
        }
    }
}

/// `nodetool packs uninstall NAME [--json]`.
pub(crate) fn uninstall(env: &Environment, name: &str, json: bool) -> Result<bool, String> {
    let installer = installer(env)?;
    match installer.uninstall(name, &mut npm_log(json)) {
        Ok(record) => {
            if json {
                let mut answer = record.row_json();
                answer["ok"] = json!(true);
                outln!("{answer}");
            } else {
                outln!("uninstalled {}@{}", record.pack_name, record.version);
            }
            Ok(true)
        }
        Err(e) => {
            failure(&e, json);
            Ok(false)
        }
    }
}
