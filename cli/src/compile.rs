//! `nodetool packs compile` and compile-on-first-use of shipped guest packs in `nodetool run`.
//!
//! Both go through `nodetool_compiler`, after installing the shipped packs' npm libraries when
//! they are missing (`nodetool_frontend::first_use::install_missing_libraries`: `npm ci
//! --ignore-scripts` from the shipped packs' lockfile); this module only picks the cache root,
//! the entries and the npm executable, and renders progress (npm's lines and a bar per module on
//! stderr, one outcome line per module, or one JSON object).

use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Duration;

use nodetool_compiler::{Cache, Compiler, NpmEntry, Outcome, Report, Stage, npm_entries};
use nodetool_discovery::{DiscoveredCatalog, SearchRoot};
use nodetool_frontend::first_use::{self, FirstUseEvent, InstallEvent};
use nodetool_frontend::search::{Environment, PackSources};

/// The compiler's cache: `$XDG_CACHE_HOME/nodetool/sandbox-modules`, else under
/// `$HOME/.cache`; an error naming the variables without either.
pub(crate) fn cache(env: &Environment) -> Result<Cache, String> {
    let home = env.cache_dir().map_err(|e| e.to_string())?;
    Ok(Cache::new(nodetool_compiler::cache_root(&home)))
}

/// The npm that installs the shipped packs' libraries: `NODETOOL_NPM`, else `npm` on `PATH`.
pub(crate) fn npm() -> PathBuf {
    std::env::var_os("NODETOOL_NPM")
        .filter(|v| !v.is_empty())
        .map_or_else(|| PathBuf::from("npm"), PathBuf::from)
}

/// Reports an install of the shipped packs' npm libraries on stderr: npm's own lines are
/// detail, shown with `-v` (or `NODETOOL_VERBOSE`); `-q` leaves only failures, and `quiet`
/// (JSON mode) leaves the notes out too.
fn install_progress(quiet: bool) -> impl FnMut(InstallEvent<'_>) {
    let output = crate::term::output();
    let verbose = output.verbose || std::env::var_os("NODETOOL_VERBOSE").is_some();
    let notes = !quiet && !output.quiet;
    move |event| match event {
        InstallEvent::Installing { .. } | InstallEvent::Installed { .. } if !notes => {}
        InstallEvent::Installing { root, missing } => errln!(
            "installing the npm libraries the shipped packs bundle ({} missing) into {}, by name and version from its package-lock.json with install scripts disabled (npm ci --ignore-scripts)",
            missing.join(", "),
            root.join("node_modules").display()
        ),
        InstallEvent::Npm(line) => {
            if verbose {
                errln!("  npm: {}", crate::term::safe(line));
            }
        }
        InstallEvent::Installed { elapsed, .. } => {
            errln!("installed in {}", seconds(elapsed));
        }
    }
}

fn seconds(elapsed: Duration) -> String {
    format!("{:.1} s", elapsed.as_secs_f64())
}

/// Draws one module's progress on stderr when it is a terminal.
struct Progress {
    enabled: bool,
    label: String,
}

impl Progress {
    fn new(label: String) -> Progress {
        Progress {
            enabled: std::io::stderr().is_terminal(),
            label,
        }
    }

    fn stage(&self, stage: Stage) {
        if !self.enabled {
            return;
        }
        let done = Stage::ALL.iter().position(|s| *s == stage).unwrap_or(0);
        let width = 20;
        let filled = width * done / Stage::ALL.len();
        err!(
            "\r\x1b[2K[{}{}] {} {}",
            "#".repeat(filled),
            "-".repeat(width - filled),
            self.label,
            stage.label()
        );
    }

    fn clear(&self) {
        if self.enabled {
            err!("\r\x1b[2K");
        }
    }
}

fn compile_one(compiler: &Compiler, entry: &NpmEntry) -> Report {
    let progress = Progress::new(format!("{} ({})", entry.specifier, entry.npm));
    let report = compiler.compile(&entry.request(), &mut |stage| progress.stage(stage));
    progress.clear();
    report
}

/// One line for a person: the outcome, the specifier, the npm name, then the size and export
/// count or the code and message.
fn outcome_line(entry: &NpmEntry, report: &Report) -> String {
    let head = format!(
        "{:<8} {} ({})",
        report.outcome.as_str(),
        entry.specifier,
        entry.npm
    );
    match (report.code(), report.message()) {
        (Some(code), Some(message)) => format!("{head}: {code}: {message}"),
        _ => {
            let bytes = report.bytes().unwrap_or(0);
            format!("{head}: {bytes} bytes, {} exports", report.exports.len())
        }
    }
}

fn warnings(report: &Report) -> &[String] {
    match &report.module {
        nodetool_runtime::CompiledNpmModule::Admitted(a) => &a.warnings,
        nodetool_runtime::CompiledNpmModule::Refused { .. } => &[],
    }
}

/// Compiles `entries` in order, each with its progress bar, telling `done` about each as it
/// finishes; a cache write that failed is reported on stderr.
pub(crate) fn compile_entries(
    entries: Vec<NpmEntry>,
    cache: &Cache,
    done: &mut dyn FnMut(&NpmEntry, &Report),
) -> Result<Vec<(NpmEntry, Report)>, String> {
    let compiler = Compiler::new(cache.clone())?;
    Ok(entries
        .into_iter()
        .map(|entry| {
            let report = compile_one(&compiler, &entry);
            if let Some(e) = &report.store_error {
                errln!(
                    "nodetool: {}: the outcome was not cached: {e}",
                    entry.specifier
                );
            }
            done(&entry, &report);
            (entry, report)
        })
        .collect())
}

/// Whether a module compiled (or was cached) and its outcome was stored.
pub(crate) fn admitted(report: &Report) -> bool {
    report.outcome != Outcome::Skipped && report.store_error.is_none()
}

/// One module's line of `packs compile --json`.
pub(crate) fn module_json(entry: &NpmEntry, report: &Report) -> serde_json::Value {
    let mut module = serde_json::json!({
        "packName": entry.pack_name,
        "specifier": entry.specifier,
        "npm": entry.npm,
        "outcome": report.outcome.as_str(),
    });
    if let Some(code) = report.code() {
        module["code"] = serde_json::json!(code);
    }
    let message = match report.code() {
        Some(_) => report.message().map(str::to_string),
        None => Some(warnings(report).join("; ")).filter(|w| !w.is_empty()),
    };
    if let Some(message) = message {
        module["message"] = serde_json::json!(message);
    }
    if let Some(bytes) = report.bytes() {
        module["bytes"] = serde_json::json!(bytes);
        module["exports"] = serde_json::json!(report.exports);
    }
    module
}

/// The person-readable lines of one module's outcome.
pub(crate) fn print_outcome(entry: &NpmEntry, report: &Report) {
    outln!("{}", crate::term::safe(&outcome_line(entry, report)));
    for w in warnings(report) {
        outln!("         warning: {}", crate::term::safe(w));
    }
}

/// `nodetool packs compile [--json]`: every npm entry on the search path, after installing the
/// shipped packs' npm libraries if they are missing (an entry whose library could not be
/// installed is left out, and the answer is a failure). Returns whether every module was
/// admitted and stored.
pub(crate) fn packs_compile(
    roots: &[SearchRoot],
    cache: &Cache,
    json: bool,
    npm: &std::path::Path,
) -> Result<bool, String> {
    let mut entries = npm_entries(roots);
    let mut installed = true;
    if let Err(e) = first_use::install_missing_libraries(&entries, npm, &mut install_progress(json))
    {
        errln!("nodetool: {}", crate::term::safe(&e.to_string()));
        installed = false;
        entries.retain(|entry| !first_use::library_missing(entry));
    }
    let compiled = compile_entries(entries, cache, &mut |entry, report| {
        if !json {
            print_outcome(entry, report);
        }
    })?;
    let ok = installed && compiled.iter().all(|(_, r)| admitted(r));
    if json {
        let modules: Vec<_> = compiled.iter().map(|(e, r)| module_json(e, r)).collect();
        outln!("{}", serde_json::json!({ "modules": modules }));
    } else if compiled.is_empty() && installed {
        outln!("no npm modules on the pack search path");
    }
    Ok(ok)
}

/// Compiles the shipped guest packs a body imports (`imports`) that are not compiled yet, installing their
/// npm libraries first when missing (progress on stderr). Returns whether anything was
/// compiled, so the caller discovers again.
pub(crate) fn first_use(
    imports: &[nodetool_guest::BodyImport],
    catalog: &DiscoveredCatalog,
    roots: &[SearchRoot],
    cache: &Cache,
) -> bool {
    let entries = first_use::pending_entries(imports, catalog, roots);
    let mut progress: Option<Progress> = None;
    let mut installs = install_progress(false);
    let quiet = crate::term::output().quiet;
    let events = &mut |event: FirstUseEvent<'_>| match event {
        // -q: only what went wrong.
        FirstUseEvent::Compiling(_) | FirstUseEvent::Stage(..) if quiet => {}
        FirstUseEvent::Done(_, report, _)
            if quiet && report.store_error.is_none() && report.code().is_none() => {}
        FirstUseEvent::Compiling(entry) => {
            errln!(
                "compiling {} ({}) on first use; `nodetool packs compile` does this ahead of time",
                entry.specifier,
                entry.npm
            );
            progress = Some(Progress::new(format!(
                "{} ({})",
                entry.specifier, entry.npm
            )));
        }
        FirstUseEvent::Stage(_, stage) => {
            if let Some(p) = &progress {
                p.stage(stage);
            }
        }
        FirstUseEvent::Done(entry, report, elapsed) => {
            if let Some(p) = progress.take() {
                p.clear();
            }
            match (&report.store_error, report.code()) {
                (Some(e), _) => errln!(
                    "nodetool: {}: the outcome was not cached: {e}",
                    entry.specifier
                ),
                (None, Some(_)) => errln!("{}", crate::term::safe(&outcome_line(entry, report))),
                (None, None) => errln!(
                    "{} in {} ms",
                    crate::term::safe(&outcome_line(entry, report)),
                    elapsed.as_millis()
                ),
            }
        }
        FirstUseEvent::Failed(e) => errln!("nodetool: {}", crate::term::safe(&e.to_string())),
    };
    first_use::compile_entries_with(&entries, cache, &npm(), events, &mut installs)
}

/// What `nodetool run` needs to compile on first use and discover again.
pub(crate) struct FirstUse<'a> {
    pub sources: &'a PackSources,
    pub trusted: &'a nodetool_discovery::trust::Allowlist,
    pub cache: &'a Cache,
}

impl FirstUse<'_> {
    /// The catalog discovered again after compiling what a body's `imports` need, or `None` when nothing
    /// was compiled (or the search path can no longer be read: the run then reports what the
    /// first catalog says).
    pub(crate) fn catalog_for(
        &self,
        imports: &[nodetool_guest::BodyImport],
        catalog: &DiscoveredCatalog,
    ) -> Option<DiscoveredCatalog> {
        let roots = self.sources.roots().ok()?;
        if !first_use(imports, catalog, &roots, self.cache) {
            return None;
        }
        self.sources.discover_for_run(self.trusted, self.cache).ok()
    }
}
