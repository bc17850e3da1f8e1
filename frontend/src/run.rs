//! One body's run end to end: its static imports resolved through the catalog, the
//! dispatchers its facades need, the guest run, and the import located when the guest could
//! not place an import error.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use nodetool_guest::{
    BodyImport, CancelToken, Capabilities, Dispatchers, RunLimits, RunOutcome, RunRequest, Sandbox,
    body_imports,
};
use nodetool_jssource::validate::{BodyAnalysis, GraphError, Issue, IssueCode, Severity};
use nodetool_protocol::catalog::{Declaration, Resolution, ResolvedKind, StatusCode, StatusLevel};
use nodetool_protocol::run::{RunError, RunErrorCode};
use nodetool_protocol::value::Value;
use nodetool_runtime::SandboxModuleCatalog;
use nodetool_runtime::dispatch::Dispatcher;
use nodetool_wasm_host::{ArtifactStore, WasmHost};

use crate::worker::{PoolRun, WorkerOptions, WorkerPool, WorkerStartError};

/// The engines a front end runs bodies with: the guest sandbox (whose bytecode cache of pack
/// modules lives as long as this value) and the WASM host, started on the first run that
/// declares a WASM module and shared by every run after it. One per process; `Sync`, so a
/// server's runs share it.
#[derive(Default)]
pub struct Engines {
    sandbox: Sandbox,
    wasm: OnceLock<Result<Arc<WasmHost>, String>>,
    artifacts: Option<Arc<dyn ArtifactStore>>,
    /// Runs come one after another on one thread (a worker's): each takes the engine
    /// [`Engines::prepare`] built and leaves its teardown to the next `prepare`.
    serial: bool,
}

/// One body to run.
pub struct BodyRun<'a> {
    /// The Code node body.
    pub code: &'a str,
    /// The `inputs` object.
    pub inputs: &'a Value,
    /// The run's limits.
    pub limits: RunLimits,
    /// What the run is granted.
    pub capabilities: Capabilities,
    /// Cancellation from the front end (a client that went away, a shutdown).
    pub cancel: Option<CancelToken>,
}

impl Engines {
    /// Engines with empty caches; the WASM host starts on first use.
    pub fn new() -> Self {
        Engines::default()
    }

    /// A sandbox worker's engines: runs come one after another on one thread, each in the
    /// never-used runtime [`Engines::prepare`] built before it, and the WASM host loads compiled
    /// modules from `artifacts` and gives it what it compiles.
    pub fn for_worker(artifacts: Arc<dyn ArtifactStore>) -> Self {
        Engines {
            artifacts: Some(artifacts),
            serial: true,
            ..Engines::default()
        }
    }

    /// The most heap bytes the last run on this thread held at once.
    pub fn last_peak_heap_bytes(&self) -> usize {
        self.sandbox.last_peak_heap_bytes()
    }

    /// Between two runs of a worker: frees what the last run left and builds the next run's
    /// runtime and context (hardening still happens in the run).
    pub fn prepare(&self, limits: &RunLimits) {
        self.sandbox.prepare(limits);
    }

    /// The dispatchers the resolution's facades need: the host-module dispatcher (which
    /// re-checks every host id against the registry pin) and, only when a WASM module is
    /// declared, the WASM host's (compiling and re-validating each binary before first use).
    pub fn dispatchers(&self, resolution: &Resolution) -> Result<Dispatchers, RunError> {
        let host = nodetool_host_modules::HostDispatcher::for_resolution(resolution)
            .map_err(|e| RunError::new(RunErrorCode::HostModuleError, e.to_string()))?
            .map(|d| d as Arc<dyn Dispatcher>);
        let declares_wasm = resolution
            .modules
            .iter()
            .any(|m| matches!(m.kind, ResolvedKind::Wasm { .. }));
        let wasm = if declares_wasm {
            let engine = self
                .wasm
                .get_or_init(|| {
                    match &self.artifacts {
                        Some(store) => WasmHost::with_artifacts(Arc::clone(store)),
                        None => WasmHost::new(),
                    }
                    .map_err(|e| e.0)
                })
                .as_ref()
                .map_err(|e| RunError::new(RunErrorCode::WasmError, e.clone()))?;
            engine
                .dispatcher_for(resolution)
                .map_err(|e| RunError::new(RunErrorCode::WasmError, e.0))?
                .map(|d| d as Arc<dyn Dispatcher>)
        } else {
            None
        };
        Ok(Dispatchers { host, wasm })
    }

    /// Runs a body whose imports are already resolved (a CodeAct action checked against its
    /// session allowlist) on the calling thread.
    pub fn run_resolved(&self, resolution: &Resolution, body: BodyRun<'_>) -> RunOutcome {
        let dispatchers = match self.dispatchers(resolution) {
            Ok(d) => d,
            Err(error) => return failed(error),
        };
        let request = RunRequest {
            code: body.code,
            resolution,
            inputs: body.inputs,
            limits: body.limits,
            capabilities: body.capabilities,
            dispatchers,
            cancel: body.cancel,
        };
        if self.serial {
            self.sandbox.run_prepared(request)
        } else {
            self.sandbox.run(request)
        }
    }
}

/// How runs are isolated from the front end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Isolation {
    /// Each run in a sandbox worker process the front end can always stop (the default of
    /// both front ends).
    Workers(WorkerOptions),
    /// Each run on the caller's thread, in the front end's own process: deadlines and memory
    /// hold only while the engine cooperates. For debugging and for tests of the engines.
    InProcess,
}

/// The one way both front ends run bodies: through a pool of sandbox workers, or in process
/// when asked to ([`Isolation`]). The same body gets the same answer either way, except where
/// only a worker can hold a limit (a deadline a C builtin ignores, a host allocation).
pub struct Runner {
    executor: Executor,
    /// Bodies a worker has parsed, by SHA-256 of their text: the same Code node runs again and
    /// again, and its imports do not change.
    scans: std::sync::Mutex<std::collections::HashMap<[u8; 32], Vec<BodyImport>>>,
}

/// Scanned bodies kept by a [`Runner`]; the map is emptied when it is full.
const MAX_KEPT_SCANS: usize = 1024;

enum Executor {
    Workers(WorkerPool),
    InProcess(Engines),
}

impl Runner {
    /// Starts the runner: for [`Isolation::Workers`], its workers, each ready before this
    /// returns (an error names the program and why it did not start).
    pub fn start(isolation: Isolation) -> Result<Runner, WorkerStartError> {
        let executor = match isolation {
            Isolation::Workers(options) => Executor::Workers(WorkerPool::start(options)?),
            Isolation::InProcess => Executor::InProcess(Engines::new()),
        };
        Ok(Runner {
            executor,
            scans: Default::default(),
        })
    }

    /// A runner that runs in process.
    pub fn in_process() -> Runner {
        Runner {
            scans: Default::default(),
            executor: Executor::InProcess(Engines::new()),
        }
    }

    /// The worker pool, when runs are isolated.
    pub fn pool(&self) -> Option<&WorkerPool> {
        match &self.executor {
            Executor::Workers(pool) => Some(pool),
            Executor::InProcess(_) => None,
        }
    }

    /// What this runner cannot enforce on this platform, to state once at start-up.
    pub fn unenforced(&self) -> Option<String> {
        match &self.executor {
            Executor::InProcess(_) => Some(
                "runs execute in process (--in-process), unconfined: a deadline or memory limit holds only while the engine cooperates, and a memory-safety bug in the engine or a host module reaches everything this process can".into(),
            ),
            Executor::Workers(pool) if pool.unconfined().is_some() => Some(format!(
                "sandbox workers run unconfined (allowed by the operator): {}; a memory-safety bug in the engine or a host module reaches everything this process can",
                pool.unconfined().unwrap_or_default()
            )),
            Executor::Workers(pool) if !pool.memory_enforced() => Some(
                "the kernel refused the sandbox workers' memory ceiling (RLIMIT_DATA): host memory is not bounded".into(),
            ),
            Executor::Workers(_) => None,
        }
    }

    /// Stops admitting runs (see [`WorkerPool::drain`]); in process, nothing to do.
    pub fn drain(&self) {
        if let Some(pool) = self.pool() {
            pool.drain();
        }
    }

    /// Runs a body whose imports are already resolved (a CodeAct action checked against its
    /// session allowlist).
    pub fn run_resolved(&self, resolution: &Resolution, body: BodyRun<'_>) -> RunOutcome {
        match &self.executor {
            Executor::InProcess(engines) => engines.run_resolved(resolution, body),
            Executor::Workers(pool) => {
                if let Some(error) = first_error(resolution) {
                    return failed(error);
                }
                pool.run(PoolRun {
                    code: body.code,
                    resolution,
                    inputs: body.inputs,
                    limits: body.limits,
                    capabilities: &body.capabilities,
                    cancel: body.cancel.as_ref(),
                })
            }
        }
    }

    /// Runs a Code node body: its static imports are its declaration, resolved through
    /// `catalog`. An import error the guest could not place is located in the body.
    pub fn run_body(&self, catalog: &dyn SandboxModuleCatalog, body: BodyRun<'_>) -> RunOutcome {
        match self.scan(body.code, body.cancel.as_ref()) {
            Ok(imports) => self.run_scanned(catalog, &imports, body),
            Err(error) => failed(error),
        }
    }

    /// [`Runner::run_body`] of a body whose imports [`Runner::scan`] read.
    pub fn run_scanned(
        &self,
        catalog: &dyn SandboxModuleCatalog,
        imports: &[BodyImport],
        body: BodyRun<'_>,
    ) -> RunOutcome {
        let resolution = resolve_imports(imports, catalog);
        let mut outcome = self.run_resolved(&resolution, body);
        outcome.result = outcome.result.map_err(|e| locate_in(e, imports));
        outcome
    }

    /// A body's static imports, or its syntax error as a run error. With workers, a body that
    /// could import anything is parsed in one (the front end never parses untrusted code: a
    /// parser can recurse off its stack); a body without the word `import` has no static
    /// import and is not parsed here at all.
    pub fn scan(
        &self,
        code: &str,
        cancel: Option<&CancelToken>,
    ) -> Result<Vec<BodyImport>, RunError> {
        let syntax = |message: String, line: u32, column: u32| RunError {
            line: Some(line),
            column: Some(column),
            ..RunError::new(RunErrorCode::SyntaxError, message)
        };
        match &self.executor {
            Executor::InProcess(_) => {
                body_imports(code).map_err(|e| syntax(e.message, e.line, e.column))
            }
            Executor::Workers(_) if !code.contains("import") => Ok(Vec::new()),
            Executor::Workers(pool) => {
                use sha2::{Digest as _, Sha256};
                let key: [u8; 32] = Sha256::digest(code.as_bytes()).into();
                let lock = || {
                    self.scans
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                };
                if let Some(imports) = lock().get(&key) {
                    return Ok(imports.clone());
                }
                let answer = pool.scan(code, None, cancel)?;
                if let Some(e) = answer.syntax_error {
                    return Err(syntax(e.text, e.line, e.column));
                }
                let imports: Vec<BodyImport> = answer.imports.into_iter().map(import_of).collect();
                let mut kept = lock();
                if kept.len() >= MAX_KEPT_SCANS {
                    kept.clear();
                }
                kept.insert(key, imports.clone());
                Ok(imports)
            }
        }
    }

    /// Validates every Code node of a workflow against `catalog`, each body parsed where
    /// [`Runner::scan`] parses (a body that cannot be parsed safely is a `code_syntax` finding
    /// saying why).
    pub fn validate_graph(
        &self,
        document: &serde_json::Value,
        catalog: &dyn SandboxModuleCatalog,
    ) -> Result<Vec<Issue>, GraphError> {
        let Executor::Workers(pool) = &self.executor else {
            return nodetool_jssource::validate::validate_graph(document, catalog);
        };
        nodetool_jssource::validate::validate_graph_with(document, catalog, &mut |node, code| {
            match pool.scan(code, Some(node), None) {
                Ok(answer) => BodyAnalysis {
                    issues: answer
                        .issues
                        .into_iter()
                        .map(|i| Issue {
                            node_id: node.to_string(),
                            severity: if i.error {
                                Severity::Error
                            } else {
                                Severity::Warning
                            },
                            code: IssueCode::parse(&i.code).unwrap_or(IssueCode::Syntax),
                            message: i.message,
                            line: i.line,
                            column: i.column,
                        })
                        .collect(),
                    imports: answer.imports.into_iter().map(import_of).collect(),
                },
                Err(e) => BodyAnalysis {
                    issues: vec![Issue {
                        node_id: node.to_string(),
                        severity: Severity::Error,
                        code: IssueCode::Syntax,
                        message: format!("The code could not be checked: {}", e.message),
                        line: None,
                        column: None,
                    }],
                    imports: Vec::new(),
                },
            }
        })
    }
}

/// A scanned import as the guest names it.
fn import_of(place: crate::worker::wire::WirePlace) -> BodyImport {
    BodyImport {
        specifier: place.text,
        line: place.line,
        column: place.column,
    }
}

/// Imports resolved through the catalog (their errors end the run with `module-not-found` /
/// `module-unavailable`). Only sandbox-specifier-shaped imports are declarations; anything else
/// (`node:fs`, a path, a URL) is left for the loader to refuse by name.
fn resolve_imports(imports: &[BodyImport], catalog: &dyn SandboxModuleCatalog) -> Resolution {
    let declarations: Vec<Declaration> = imports
        .iter()
        .filter(|i| nodetool_protocol::names::is_specifier(&i.specifier))
        .map(|i| Declaration::of(i.specifier.clone()))
        .collect();
    catalog.resolve_for_execution(&declarations)
}

/// Fills in where an import-related error's specifier is imported, when the guest could not.
fn locate_in(mut error: RunError, imports: &[BodyImport]) -> RunError {
    if error.line.is_none()
        && let Some(import) = error
            .specifier
            .as_deref()
            .and_then(|s| imports.iter().find(|i| i.specifier == s))
    {
        error.line = Some(import.line);
        error.column = Some(import.column);
    }
    error
}

/// A resolution's first error status as the run error the guest would end with, so a run
/// that cannot start does not occupy a worker.
fn first_error(resolution: &Resolution) -> Option<RunError> {
    let status = resolution
        .statuses
        .iter()
        .find(|s| s.status == StatusLevel::Error)?;
    let code = match status.code {
        StatusCode::ModuleUnavailable => RunErrorCode::ModuleUnavailable,
        _ => RunErrorCode::ModuleNotFound,
    };
    Some(RunError {
        specifier: status.specifier.clone(),
        ..RunError::new(code, status.message.clone())
    })
}

/// An outcome that ended before the guest started.
fn failed(error: RunError) -> RunOutcome {
    RunOutcome {
        result: Err(error),
        logs: Vec::new(),
        duration: Duration::ZERO,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nodetool_runtime::EmptyCatalog;

    fn body(code: &str) -> BodyRun<'_> {
        static EMPTY: Value = Value::Object(Vec::new());
        BodyRun {
            code,
            inputs: &EMPTY,
            limits: RunLimits::STANDARD,
            capabilities: Capabilities::default(),
            cancel: None,
        }
    }

    #[test]
    fn a_missing_import_is_located_in_the_body() {
        let outcome = Runner::in_process().run_body(
            &EmptyCatalog,
            body("const x = 1;\nimport { a } from \"@acme/missing\";\nreturn a;"),
        );
        let error = outcome.result.err().unwrap_or_else(|| panic!("must fail"));
        assert_eq!(error.code, RunErrorCode::ModuleNotFound);
        assert_eq!(error.line, Some(2));
    }

    #[test]
    fn a_syntax_error_never_reaches_the_guest() {
        let outcome = Runner::in_process().run_body(&EmptyCatalog, body("return (;"));
        let error = outcome.result.err().unwrap_or_else(|| panic!("must fail"));
        assert_eq!(error.code, RunErrorCode::SyntaxError);
        assert!(error.line.is_some());
    }

    #[test]
    fn a_trivial_body_runs() {
        let outcome = Runner::in_process().run_body(&EmptyCatalog, body("return 1 + 1;"));
        assert_eq!(outcome.result, Ok(Value::Number(2.0)));
    }
}
