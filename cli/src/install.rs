//! `nodetool packs install | trust | uninstall`: the front end of
//! `nodetool_frontend::install`, which owns the flow (scripts-disabled installs, the ledger, the
//! integrity-bound rebuild). This module picks the installed root, shows npm's progress on
//! stderr, compiles a sandbox-only pack's npm entries, and renders the outcome.

use nodetool_compiler::npm_entries;
use nodetool_discovery::{RootKind, SearchRoot};
use nodetool_frontend::install::{InstallError, Installer, Ledger, ReservedNames, Spec};
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
        // "install mode" (how npm classified the package), never a module kind (js, wasm,
        // host) and never whether agents may use it.
        outln!(
            "  {}@{}  install mode {}  {}  scripts {}",
            crate::term::safe(&r.pack_name),
            crate::term::safe(&r.version),
            r.mode.as_str(),
            if r.active { "active" } else { "inactive" },
            r.scripts.as_str()
        );
    }
}

/// For `packs list`: every diagnostic about trust and identity (a consent given to another
/// identity, one that records none, an installed pack used instead of a shipped one), in full,
/// since each needs the operator (the rest are counted, and `packs doctor` shows them).
pub(crate) fn print_consent(catalog: &nodetool_discovery::DiscoveredCatalog) {
    use nodetool_protocol::catalog::StatusCode;
    use nodetool_runtime::SandboxModuleCatalog;
    let identity: Vec<_> = catalog
        .diagnostics()
        .iter()
        .filter(|d| {
            matches!(
                d.code,
                StatusCode::ConsentIdentityChanged
                    | StatusCode::ConsentIdentityUnrecorded
                    | StatusCode::ShippedPackShadowed
            )
        })
        .collect();
    if identity.is_empty() {
        return;
    }
    outln!();
    outln!("Trust and identity:");
    for d in identity {
        outln!("  warning[{}]: {}", d.code, crate::term::safe(&d.message));
    }
}

/// npm's output goes to stderr, indented, so stdout stays the answer; its lines are detail,
/// shown with -v (or NODETOOL_VERBOSE), in JSON mode too.
fn npm_log(_json: bool) -> impl FnMut(&str) {
    move |line: &str| {
        if crate::term::output().verbose || std::env::var_os("NODETOOL_VERBOSE").is_some() {
            errln!("  npm: {}", crate::term::safe(line));
        }
    }
}

fn failure(e: &InstallError, json: bool) {
    if json {
        outln!(
            "{}",
            json!({ "ok": false, "error": { "code": e.code.as_str(), "message": e.message } })
        );
    } else {
        errln!("nodetool: {}", crate::term::safe(&e.message));
    }
}

/// `nodetool packs install SPEC [--json] [--allow-reserved-name]`. Returns whether the install
/// landed (a sandbox-only pack whose npm entry is refused by the compiler still installed; the
/// skip is reported).
pub(crate) fn install(
    env: &Environment,
    spec: &str,
    json: bool,
    allow_reserved_name: bool,
) -> Result<bool, String> {
    let installer = installer(env)?;
    let spec = match Spec::parse(spec) {
        Ok(spec) => spec,
        Err(e) => return Err(e.message),
    };
    if !json {
        errln!("installing {spec} with lifecycle scripts disabled (npm install --ignore-scripts)");
    }
    let reserved = if allow_reserved_name {
        ReservedNames::Allow
    } else {
        ReservedNames::Refuse
    };
    let installed = match installer.install(&spec, reserved, &mut npm_log(json)) {
        Ok(installed) => installed,
        Err(e) => {
            failure(&e, json);
            return Ok(false);
        }
    };
    let record = &installed.record;
    // Taken with --allow-reserved-name (the installer refuses it otherwise).
    let reserved_name = !matches!(spec, Spec::Registry { .. })
        && nodetool_protocol::names::is_reserved_package_name(&record.pack_name);
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
        answer["reservedName"] = json!(reserved_name);
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
            "{} changed install mode: {} ({}) was {}; it is classified from the artifact now on disk.",
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
    outln!(
        "install mode: {} — {}",
        record.mode.as_str(),
        record.mode.meaning()
    );
    if reserved_name {
        outln!(
            "warning: {} is a name reserved for NodeTool's own packs; this copy is used instead of the shipped pack of that name, and consent given to that pack does not carry over (`nodetool packs list` shows both).",
            record.pack_name
        );
    }
    if record.active {
        outln!("active: its sandbox modules can be imported now.");
    } else {
        outln!(
            "warning: {} is inactive. Review it, then `nodetool packs rebuild {}` rebuilds it with scripts, against the files on disk.",
            record.pack_name,
            record.pack_name
        );
    }
    Ok(true)
}

/// What `packs allow` or `packs disallow` changed.
pub(crate) struct AllowChange {
    pub changed: bool,
    /// The identity the consent now records (when allowing).
    pub identity: Option<String>,
    /// The identity it recorded before, when it recorded one and it differs.
    pub previous: Option<String>,
}

/// `nodetool packs allow | disallow NAME`: consent bound to the identity the pack has now on
/// the search path (`explicit` is the `--packs` roots); see
/// `nodetool_frontend::install::consent`. `allow-not-found` when no pack of that name is there.
pub(crate) fn set_allowed(
    env: &Environment,
    explicit: Vec<std::path::PathBuf>,
    name: &str,
    allowed: bool,
) -> Result<AllowChange, InstallError> {
    use nodetool_frontend::install::consent;
    if !allowed {
        let changed = consent::disallow(env, name)?;
        return Ok(AllowChange {
            changed,
            identity: None,
            previous: None,
        });
    }
    let sources = nodetool_frontend::search::PackSources {
        explicit,
        env: env.clone(),
        labels: nodetool_frontend::search::RootLabels::Paths,
    };
    let cache = compile::cache(env)
        .map_err(|m| InstallError::new(nodetool_frontend::install::InstallErrorCode::AllowIo, m))?;
    let done = consent::allow(&sources, &cache, name)?;
    let previous = done.previous.flatten();
    Ok(AllowChange {
        changed: previous.as_ref() != Some(&done.identity),
        previous: previous.filter(|p| *p != done.identity),
        identity: Some(done.identity),
    })
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
                    "rebuilt {}@{} with scripts: the lockfile matched all {} package(s) recorded at install; their install scripts ran and the pack is active.",
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
