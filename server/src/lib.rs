//! `nodetool-server`: the HTTP front end (axum on tokio).
//!
//! It serves the delivery route `GET /api/sandbox-modules/{*id}` (answered only through the
//! catalog's `authorize_delivery`), the catalog API (`GET /api/packs/sandbox-modules`,
//! `GET /api/packs`, `GET /api/packs/{name}/docs`), runs and validation over HTTP
//! (`POST /api/run`, `POST /api/validate`), the host-module route for the browser runner
//! (`POST /api/host-modules/{id}/{export}`), soft reload (`POST /api/packs/reload`), the
//! Packages page at `/` (plain HTML, CSS and JavaScript compiled into the binary), and the
//! built browser runner under `/web/` (read from `web/dist` once at start-up, served from
//! memory; the page's playground runs a body there as well as here).
//!
//! Runs, validations and host calls execute on the blocking pool, never on the reactor, behind
//! a [`RunGate`]: a bounded number at once, a bounded queue, and `503` with `Retry-After`
//! beyond it. A reload discovers the packs again and swaps the new catalog into a
//! [`CatalogHandle`]; a run keeps the snapshot it was admitted with.
//!
//! Safe on a person's machine by default: every request's `Host` must name this server and its
//! `Origin`, when present, must be this server (`access`); executing and state-changing routes
//! take only `application/json` bodies, read within a timeout, capped in size and in nesting
//! (`body`); a server bound beyond loopback needs a bearer token on `/api/`. Connections are
//! capped and their heads read under hyper's timer (`listen`). `GET /healthz`, `/readyz` and
//! `/metrics` are for supervisors (`health`, `metrics`); one log line per request names its
//! route template, status, milliseconds and run outcome, never a body, a token or a path.
//!
//! Architecture invariants: thin — the search path, the run pipeline and every JSON answer
//! shared with the CLI come from `nodetool-frontend`; no route turns a request into a
//! filesystem lookup, and no answer carries a filesystem path (roots are labelled opaquely,
//! and errors that would name a path are logged, not answered).

mod access;
mod api;
mod body;
mod delivery;
mod error;
mod gate;
mod health;
mod listen;
mod metrics;
mod page;
mod runs;
mod web;

use std::io::{IsTerminal as _, Write as _};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{DefaultBodyLimit, MatchedPath, Request};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use nodetool_frontend::run::{Isolation, Runner};
use nodetool_frontend::search::{Environment, PackSources, RootLabels, SourceError};
use nodetool_runtime::{CatalogHandle, CompiledLookup, SandboxModuleCatalog};

pub use access::{
    Access, MAX_HEAD_BYTES, MIN_TOKEN_CHARS, PublicHost, RELOAD_HEADER, TOKEN_FILE_ENV, Token,
};
pub use api::CONSENT;
pub use body::MAX_JSON_DEPTH;
pub use delivery::{
    CONTENT_DIGEST, CONTENT_SHA256, DEPENDENCIES, FILE_ID, HOST_MODULE, INTERNAL, PACK,
    PACK_VERSION, WASM_CONTRACT,
};
pub use error::{ApiError, RETRY_AFTER_SECONDS, Refused};
pub use gate::{Admitted, Busy, RunGate};
pub use listen::{PARSER_HEAD_CEILING, serve};
pub use metrics::Metrics;
pub use web::{DEFAULT_WEB_DIR, WebAssets, web_dir};

/// The server's bounds and who it answers. There is no `Default`: the caller states them
/// ([`ServerConfig::standard`] is the command line's default set).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerConfig {
    /// Runs (and validations, and host calls) executing at once.
    pub max_running: usize,
    /// Requests that may wait for a run slot; beyond them the answer is `503`.
    pub max_queued: usize,
    /// The largest request body accepted (`413` beyond).
    pub max_request_bytes: usize,
    /// The longest a request body may take to arrive, whole (`408` beyond).
    pub body_timeout: Duration,
    /// The longest a request head may take to arrive, and a kept-alive connection may stay
    /// idle (the connection is closed beyond).
    pub header_timeout: Duration,
    /// Connections open at once; beyond, new ones wait in the listen backlog.
    pub max_connections: usize,
    /// The hosts, origins and token requests are checked against.
    pub access: Access,
}

impl ServerConfig {
    /// One run per core, 32 waiting, 16 MiB bodies (host-module inputs go up to 10 MiB of
    /// bytes, which is 13.4 MiB of base64) arriving within 10 s, heads within 5 s, 256
    /// connections.
    pub fn standard(cores: usize, access: Access) -> ServerConfig {
        ServerConfig {
            max_running: cores.max(1),
            max_queued: 32,
            max_request_bytes: 16 * 1024 * 1024,
            body_timeout: Duration::from_secs(10),
            header_timeout: Duration::from_secs(5),
            max_connections: 256,
            access,
        }
    }
}

/// Where the catalog comes from, at start-up and on every reload.
pub trait CatalogSource: Send + Sync + 'static {
    /// Discovers the packs into a new catalog (blocking: it reads the filesystem).
    fn load(&self) -> Result<Arc<dyn SandboxModuleCatalog>, SourceError>;

    /// The install ledger (`packs list --json`'s `installed` rows, the Packages page's install
    /// chips), when this source has an installed root and its ledger reads (blocking).
    fn ledger(&self) -> Option<nodetool_frontend::install::Ledger> {
        None
    }

    /// Compiles the shipped guest packs among a body's `imports` that nothing compiled yet and
    /// discovers again (blocking), as `nodetool run` does; `None` when there was nothing to
    /// compile.
    fn compile_first_use(
        &self,
        imports: &[nodetool_guest::BodyImport],
        catalog: &dyn SandboxModuleCatalog,
    ) -> Option<Arc<dyn SandboxModuleCatalog>> {
        let _ = (imports, catalog);
        None
    }
}

/// The production source: the CLI's search path with opaque root labels.
pub struct Discovery {
    /// The search path.
    pub sources: PackSources,
    /// Where compiled npm artifacts come from.
    pub compiled: Arc<dyn CompiledLookup>,
    /// The compiler's cache, when shipped packs compile on first use (one compile at a time).
    pub first_use: Option<tokio::sync::Mutex<nodetool_compiler::Cache>>,
}

impl CatalogSource for Discovery {
    fn load(&self) -> Result<Arc<dyn SandboxModuleCatalog>, SourceError> {
        let trusted = self.sources.trusted()?;
        let catalog = self
            .sources
            .discover(&trusted, self.compiled.as_ref())
            .map_err(SourceError::Root)?;
        Ok(Arc::new(catalog))
    }

    fn compile_first_use(
        &self,
        imports: &[nodetool_guest::BodyImport],
        catalog: &dyn SandboxModuleCatalog,
    ) -> Option<Arc<dyn SandboxModuleCatalog>> {
        let cache = self.first_use.as_ref()?.blocking_lock();
        let roots = self.sources.roots().ok()?;
        // Asked again under the lock: a run that waited for it may find the work done.
        let entries = nodetool_frontend::first_use::pending_entries(imports, catalog, &roots);
        let stored = nodetool_frontend::first_use::compile_entries(
            &entries,
            &cache,
            &mut |event| {
                use nodetool_frontend::first_use::FirstUseEvent;
                match event {
                    FirstUseEvent::Compiling(entry) => {
                        tracing::info!(specifier = %entry.specifier, npm = %entry.npm, "compiling on first use");
                    }
                    FirstUseEvent::Done(entry, report, elapsed) => {
                        tracing::info!(
                            specifier = %entry.specifier,
                            outcome = report.outcome.as_str(),
                            code = report.code().map_or("", |c| c.as_str()),
                            ms = elapsed.as_millis() as u64,
                            "compiled on first use"
                        );
                    }
                    FirstUseEvent::Failed(e) => {
                        tracing::warn!("first-use compile unavailable: {e}")
                    }
                    FirstUseEvent::Stage(..) => {}
                }
            },
        );
        drop(cache);
        if !stored {
            return None;
        }
        self.load().ok()
    }

    fn ledger(&self) -> Option<nodetool_frontend::install::Ledger> {
        let dir = self.sources.env.install_dir()?;
        match nodetool_frontend::install::Installer::new(dir).ledger() {
            Ok(ledger) => Some(ledger),
            Err(e) => {
                // The message names a local path: logged for the operator, never answered.
                tracing::warn!("the install ledger cannot be read: {}", e.message);
                None
            }
        }
    }
}

/// What every handler shares. Cheap to clone.
#[derive(Clone)]
pub struct AppState(Arc<Shared>);

struct Shared {
    catalog: CatalogHandle,
    source: Arc<dyn CatalogSource>,
    /// One reload at a time, so an older discovery never overwrites a newer one.
    reloading: tokio::sync::Mutex<()>,
    runner: Arc<Runner>,
    /// The latest deadline of any run admitted so far (what a shutdown waits for at most).
    latest_deadline: std::sync::Mutex<Option<Instant>>,
    gate: Arc<RunGate>,
    config: ServerConfig,
    web: WebAssets,
    metrics: Metrics,
    /// Set when shutdown begins: `/readyz` says so and no new work is admitted.
    draining: AtomicBool,
}

/// The run outcome code of an answer (`ok` or a run error code), for the request log line
/// (response extension).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunOutcomeCode(pub &'static str);

/// What passes the run gate, as logs and metrics name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Work {
    Run,
    Validate,
    HostCall,
}

impl Work {
    fn as_str(self) -> &'static str {
        match self {
            Work::Run => "run",
            Work::Validate => "validate",
            Work::HostCall => "host-call",
        }
    }
}

impl AppState {
    /// Loads the catalog once (blocking) and builds the state, with no browser runner and runs
    /// in process (tests of the routes; the server itself runs them in workers, see
    /// [`AppState::with_runner`]).
    pub fn new(
        config: ServerConfig,
        source: Arc<dyn CatalogSource>,
    ) -> Result<AppState, SourceError> {
        AppState::with_web(config, source, WebAssets::none())
    }

    /// [`AppState::new`] serving the built browser runner `web` under `/web/`.
    pub fn with_web(
        config: ServerConfig,
        source: Arc<dyn CatalogSource>,
        web: WebAssets,
    ) -> Result<AppState, SourceError> {
        AppState::with_runner(config, source, web, Arc::new(Runner::in_process()))
    }

    /// [`AppState::with_web`] running bodies through `runner` (a pool of sandbox workers, in
    /// production).
    pub fn with_runner(
        config: ServerConfig,
        source: Arc<dyn CatalogSource>,
        web: WebAssets,
        runner: Arc<Runner>,
    ) -> Result<AppState, SourceError> {
        let catalog = source.load()?;
        let gate = RunGate::new(config.max_running, config.max_queued);
        let metrics = Metrics::new(Arc::clone(&gate), runner.pool().cloned());
        Ok(AppState(Arc::new(Shared {
            catalog: CatalogHandle::new(catalog),
            source,
            reloading: tokio::sync::Mutex::new(()),
            runner,
            latest_deadline: std::sync::Mutex::new(None),
            gate,
            config,
            web,
            metrics,
            draining: AtomicBool::new(false),
        })))
    }

    /// The catalog as of now (a run keeps the one it took).
    pub fn catalog(&self) -> Arc<dyn SandboxModuleCatalog> {
        self.0.catalog.snapshot()
    }

    /// The install ledger, read now (off the async workers), or `None` when the source has no
    /// installed root or its ledger cannot be read.
    pub async fn ledger(&self) -> Option<nodetool_frontend::install::Ledger> {
        let source = self.0.source.clone();
        tokio::task::spawn_blocking(move || source.ledger())
            .await
            .ok()
            .flatten()
    }

    /// Requests running or queued at the run gate now.
    pub fn runs_admitted(&self) -> usize {
        self.0.gate.admitted()
    }

    /// Discovers the packs again and swaps the new catalog in; the current one stays when
    /// discovery fails.
    pub async fn reload(&self) -> Result<Arc<dyn SandboxModuleCatalog>, ApiError> {
        let _one_at_a_time = self.0.reloading.lock().await;
        let source = Arc::clone(&self.0.source);
        let loaded = tokio::task::spawn_blocking(move || source.load())
            .await
            .map_err(|e| ApiError::Internal(format!("discovery panicked: {e}")))?;
        self.0.metrics.reloaded(loaded.is_ok());
        match loaded {
            Ok(catalog) => {
                self.0.catalog.replace(Arc::clone(&catalog));
                tracing::info!(
                    modules = catalog.summaries().len(),
                    diagnostics = catalog.diagnostics().len(),
                    "catalog reloaded"
                );
                Ok(catalog)
            }
            Err(e) => {
                tracing::error!(error = %e, "reload failed; the current catalog stays");
                Err(ApiError::ReloadFailed(e.without_path()))
            }
        }
    }

    fn gate(&self) -> &Arc<RunGate> {
        &self.0.gate
    }

    /// Admits `work` at the run gate, or refuses it: `503` when the gate is full or the server
    /// is draining.
    async fn admit(&self, work: Work) -> Result<Admitted, ApiError> {
        let admitted = if self.draining() {
            Err(ApiError::Draining)
        } else {
            self.0.gate.admit().await.map_err(|Busy| ApiError::Busy)
        };
        self.0.metrics.gated(work.as_str(), admitted.is_ok());
        admitted
    }

    /// What the server counts.
    pub fn metrics(&self) -> &Metrics {
        &self.0.metrics
    }

    /// Whether shutdown has begun.
    pub fn draining(&self) -> bool {
        self.0.draining.load(Ordering::Acquire)
    }

    /// Begins the drain: no new work is admitted and `/readyz` says so; work already admitted
    /// finishes (each run by its deadline plus the grace).
    pub fn begin_draining(&self) {
        self.0.draining.store(true, Ordering::Release);
        self.0.runner.drain();
    }

    /// Why the server should not be sent work now, or `None` when it should.
    fn unready(&self) -> Option<&'static str> {
        if self.draining() || self.0.runner.pool().is_some_and(|p| p.draining()) {
            return Some("draining: the server is shutting down and admits no new work");
        }
        if let Some(pool) = self.0.runner.pool()
            && pool.ready() == 0
            && self.0.gate.running() == 0
        {
            return Some("no sandbox worker is ready (they are starting or being replaced)");
        }
        None
    }

    /// Compiles what a body's `imports` need on first use and swaps the new catalog in
    /// (blocking); the catalog to run with.
    fn catalog_for(
        &self,
        imports: &[nodetool_guest::BodyImport],
        catalog: Arc<dyn SandboxModuleCatalog>,
    ) -> Arc<dyn SandboxModuleCatalog> {
        match self.0.source.compile_first_use(imports, catalog.as_ref()) {
            Some(compiled) => {
                self.0.catalog.replace(Arc::clone(&compiled));
                compiled
            }
            None => catalog,
        }
    }

    /// Records an admitted run's deadline.
    fn note_deadline(&self, deadline: Instant) {
        let mut latest = self
            .0
            .latest_deadline
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if latest.is_none_or(|l| l < deadline) {
            *latest = Some(deadline);
        }
    }

    /// How long from now until every admitted run has passed its deadline.
    pub(crate) fn remaining_deadlines(&self) -> std::time::Duration {
        let latest = *self
            .0
            .latest_deadline
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        latest.map_or(std::time::Duration::ZERO, |l| {
            l.saturating_duration_since(Instant::now())
        })
    }

    /// How runs execute.
    pub fn runner(&self) -> Arc<Runner> {
        Arc::clone(&self.0.runner)
    }

    fn config(&self) -> &ServerConfig {
        &self.0.config
    }

    fn web(&self) -> &WebAssets {
        &self.0.web
    }
}

/// Every route, the page, the body cap, the access guard, CORS when `--allow-origin` names
/// origins, and the request log.
pub fn router(state: AppState) -> Router {
    let cap = state.config().max_request_bytes;
    let cors = state.config().access.cors();
    let mut app = Router::new()
        .route("/healthz", get(health::healthz))
        .route("/readyz", get(health::readyz))
        .route("/metrics", get(health::metrics))
        .route("/", get(page::index))
        .route("/assets/app.js", get(page::script))
        .route("/assets/style.css", get(page::style))
        .route("/web/{file}", get(web::asset))
        .route("/api/sandbox-modules/{*id}", get(delivery::deliver))
        .route("/api/packs", get(api::packs_view))
        .route("/api/packs/sandbox-modules", get(api::packs_list))
        .route("/api/packs/reload", post(api::reload))
        .route("/api/packs/{name}/docs", get(api::docs))
        .route("/api/packs/{scope}/{name}/docs", get(api::scoped_docs))
        .route("/api/run", post(runs::run))
        .route("/api/validate", post(runs::validate))
        .route("/api/host-modules/{id}/{export}", post(runs::host_call))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(cap));
    if let Some(cors) = cors {
        app = app.layer(cors);
    }
    app.layer(middleware::from_fn_with_state(state.clone(), access::guard))
        .layer(middleware::from_fn(log_request))
        .with_state(state)
}

async fn not_found() -> ApiError {
    ApiError::not_found()
}

async fn method_not_allowed() -> Response {
    (
        axum::http::StatusCode::METHOD_NOT_ALLOWED,
        axum::Json(serde_json::json!({ "detail": "Method not allowed" })),
    )
        .into_response()
}

/// One line per request: method, route template (never the raw path, which carries ids and
/// names), status, milliseconds, the run outcome code and the rule a refusal broke. Nothing a
/// client sent (a body, a header, a token) is in it.
async fn log_request(request: Request, next: Next) -> Response {
    if !tracing::enabled!(tracing::Level::INFO) {
        return next.run(request).await;
    }
    let started = Instant::now();
    let method = request.method().clone();
    let route = request.extensions().get::<MatchedPath>().cloned();
    let response = next.run(request).await;
    let extensions = response.extensions();
    tracing::info!(
        %method,
        route = %route.as_ref().map_or("-", MatchedPath::as_str),
        status = response.status().as_u16(),
        ms = (started.elapsed().as_secs_f64() * 1000.0 * 100.0).round() / 100.0,
        outcome = %extensions.get::<RunOutcomeCode>().map_or("-", |c| c.0),
        refused = %extensions.get::<Refused>().map_or("-", |r| r.0),
        "request"
    );
    response
}

/// Completes on SIGINT or SIGTERM.
pub async fn shutdown_signal() {
    let interrupt = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        () = interrupt => {}
        () = terminate => {}
    }
    tracing::info!("shutting down: finishing the requests in flight");
}

/// The server's options (also `nodetool serve`'s).
#[derive(Debug, Clone, clap::Args)]
pub struct ServeArgs {
    /// The address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// The port to listen on (0 picks a free one; the address is printed on stdout).
    #[arg(long, default_value_t = 7777)]
    pub port: u16,
    /// Runs executing at once (default: the number of cores).
    #[arg(long, value_name = "N")]
    pub max_runs: Option<usize>,
    /// Runs that may wait for a slot; beyond them the server answers 503.
    #[arg(long, value_name = "N")]
    pub queue: Option<usize>,
    /// The built browser runner to serve under /web/ (default: NODETOOL_WEB_DIR, else the
    /// checkout's web/dist).
    #[arg(long, value_name = "DIR")]
    pub web_dir: Option<PathBuf>,
    /// The memory ceiling of each sandbox worker process, in MiB: everything a run allocates,
    /// host modules and WASM included (default 512).
    #[arg(long, value_name = "MIB")]
    pub worker_memory_mb: Option<u64>,
    /// How long past its deadline a run may take to answer before its worker is killed, in
    /// milliseconds (default 100).
    #[arg(long, value_name = "MS")]
    pub grace_ms: Option<u64>,
    /// Runs a sandbox worker serves before it is replaced (default 500).
    #[arg(long, value_name = "N")]
    pub recycle_after: Option<u32>,
    /// Debugging only: run bodies in the server's own process instead of sandbox workers, with
    /// no confinement. A deadline or memory limit then holds only while the engine cooperates,
    /// and a hostile body can stop the server; it needs --allow-unconfined too.
    #[arg(long)]
    pub in_process: bool,
    /// Serve with sandbox workers even where they cannot be confined (no seccomp: another OS,
    /// an old kernel, a container that forbids it); without this flag (or
    /// NODETOOL_ALLOW_UNCONFINED=1) such a host refuses to start.
    #[arg(long)]
    pub allow_unconfined: bool,
    /// A further name the server answers to in the Host header (repeatable): NAME matches any
    /// port, NAME:PORT only that one. Without one, only localhost and IP addresses with the
    /// bound port are answered (a DNS-rebinding guard).
    #[arg(long = "public-host", value_name = "NAME[:PORT]")]
    pub public_hosts: Vec<PublicHost>,
    /// An origin whose pages may call the API (repeatable), written as the browser sends it
    /// (https://app.example); only then are CORS headers sent. Other origins are refused (403).
    #[arg(long = "allow-origin", value_name = "ORIGIN", value_parser = parse_origin)]
    pub allow_origins: Vec<String>,
    /// A file holding the bearer token every /api/ route then requires (default:
    /// NODETOOL_TOKEN_FILE). Required when --host is not a loopback address.
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// How long a request head may take to arrive, and a kept-alive connection may stay idle,
    /// in milliseconds (default 5000).
    #[arg(long, value_name = "MS")]
    pub header_timeout_ms: Option<u64>,
    /// How long a request body may take to arrive, whole, in milliseconds (default 10000).
    #[arg(long, value_name = "MS")]
    pub body_timeout_ms: Option<u64>,
    /// Connections open at once; beyond it new ones wait (default 256).
    #[arg(long, value_name = "N")]
    pub max_connections: Option<usize>,
    /// Log lines as text for people (default) or JSON for collectors.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

/// How log lines are written (stderr).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// One human-readable line per event.
    Text,
    /// One JSON object per line.
    Json,
}

fn parse_origin(text: &str) -> Result<String, String> {
    access::validate_origin(text).map(|()| text.to_string())
}

#[derive(clap::Parser)]
#[command(
    name = "nodetool-server",
    version,
    about = "Serve sandbox packs to browsers, run Code node bodies over HTTP, and show the Packages page."
)]
struct Cli {
    #[command(flatten)]
    serve: ServeArgs,
    /// A node_modules-style pack root to search first (repeatable, searched in order).
    #[arg(long = "packs", value_name = "DIR")]
    packs: Vec<PathBuf>,
}

/// Why the server could not start or stopped serving.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServeError {
    /// Configuration: a pack root, the allowlist file, the address (exit 2).
    Config(String),
    /// Anything else (exit 1).
    Failed(String),
}

impl std::fmt::Display for ServeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ServeError::Config(m) | ServeError::Failed(m) => f.write_str(m),
        }
    }
}

/// The `nodetool-server` binary: its arguments and environment.
pub fn main() -> ExitCode {
    // Started as a sandbox worker by a front end: serve runs, nothing else.
    if let Some(code) = nodetool_frontend::worker::run_if_worker() {
        return code;
    }
    let cli = match <Cli as clap::Parser>::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    let env = Environment::from_vars(|name| std::env::var_os(name));
    match serve_blocking(cli.serve, cli.packs, env) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "nodetool-server: {e}");
            ExitCode::from(match e {
                ServeError::Config(_) => 2,
                ServeError::Failed(_) => 1,
            })
        }
    }
}

/// Starts the server (`--packs` roots first, then the search path `env` describes) and blocks
/// until it has shut down after SIGINT or SIGTERM.
pub fn serve_blocking(
    args: ServeArgs,
    packs: Vec<PathBuf>,
    env: Environment,
) -> Result<(), ServeError> {
    init_logging(args.log_format);
    let token_file = args.token_file.clone().or_else(|| {
        std::env::var_os(TOKEN_FILE_ENV)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    });
    let token = token_file
        .as_deref()
        .map(Token::read)
        .transpose()
        .map_err(ServeError::Config)?;
    let beyond_loopback = |address: &SocketAddr| {
        ServeError::Config(format!(
            "listening on {address} (not a loopback address) needs a bearer token, so that only whoever holds it can run code here; {}",
            access::TOKEN_HOWTO
        ))
    };
    // Refused before anything is bound when the name resolves beyond loopback.
    if token.is_none() {
        let resolved = std::net::ToSocketAddrs::to_socket_addrs(&(args.host.as_str(), args.port))
            .map_err(|e| {
            ServeError::Config(format!("cannot listen on {}:{}: {e}", args.host, args.port))
        })?;
        if let Some(address) = resolved.into_iter().find(|a| !a.ip().is_loopback()) {
            return Err(beyond_loopback(&address));
        }
    }
    // Bound before anything starts, so the Host rule knows the port (`--port 0` picks one).
    let listener = std::net::TcpListener::bind((args.host.as_str(), args.port))
        .and_then(|l| l.set_nonblocking(true).map(|()| l))
        .map_err(|e| {
            ServeError::Config(format!("cannot listen on {}:{}: {e}", args.host, args.port))
        })?;
    let address: SocketAddr = listener
        .local_addr()
        .map_err(|e| ServeError::Failed(format!("cannot read the listening address: {e}")))?;
    if token.is_none() && !address.ip().is_loopback() {
        return Err(beyond_loopback(&address));
    }
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let access = Access {
        port: address.port(),
        public_hosts: args.public_hosts.clone(),
        allow_origins: args.allow_origins.clone(),
        token,
    };
    let mut config = ServerConfig::standard(cores, access);
    if let Some(n) = args.max_runs {
        config.max_running = n.max(1);
    }
    if let Some(n) = args.queue {
        config.max_queued = n;
    }
    if let Some(ms) = args.header_timeout_ms {
        config.header_timeout = Duration::from_millis(ms.max(1));
    }
    if let Some(ms) = args.body_timeout_ms {
        config.body_timeout = Duration::from_millis(ms.max(1));
    }
    if let Some(n) = args.max_connections {
        config.max_connections = n.max(1);
    }
    // npm modules come from the compiler's cache (`nodetool packs compile` fills it); one that
    // nothing compiled yet is `pending-compile`, and a reload picks up what was compiled since.
    let cache = nodetool_compiler::Cache::new(nodetool_compiler::cache_root(&env.cache_home()));
    let unconfined_by_env = env.allow_unconfined;
    let source = Arc::new(Discovery {
        sources: PackSources {
            explicit: packs,
            env,
            labels: RootLabels::Opaque,
        },
        compiled: Arc::new(cache.clone()),
        first_use: Some(tokio::sync::Mutex::new(cache)),
    });
    let web = WebAssets::load(&web_dir(
        args.web_dir.clone(),
        std::env::var_os("NODETOOL_WEB_DIR"),
    ));
    if !web.is_built() {
        tracing::warn!("{}", web::BUILD_HINT);
    }
    let isolation = if args.in_process {
        if !(args.allow_unconfined || unconfined_by_env) {
            return Err(ServeError::Config(
                "--in-process serves bodies in the server's own process, with no sandbox worker and no seccomp or Landlock confinement\nhelp: for debugging, pass --allow-unconfined as well (or set NODETOOL_ALLOW_UNCONFINED=1)".into(),
            ));
        }
        Isolation::InProcess
    } else {
        Isolation::Workers(
            nodetool_frontend::worker::options_from_flags(
                config.max_running,
                args.worker_memory_mb,
                args.grace_ms,
                args.recycle_after,
            )
            .map(|mut options| {
                options.allow_unconfined |= args.allow_unconfined || unconfined_by_env;
                options
            })
            .map_err(ServeError::Config)?,
        )
    };
    let runner = Runner::start(isolation).map_err(|e| {
        ServeError::Failed(format!(
            "{e}\nhelp: reinstall the server binary, or pass --in-process --allow-unconfined to serve without sandbox workers (debugging only)"
        ))
    })?;
    if let Some(note) = runner.unenforced() {
        tracing::warn!("{note}");
    }
    let state = AppState::with_runner(config.clone(), source, web, Arc::new(runner))
        .map_err(|e| ServeError::Config(e.to_string()))?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| ServeError::Failed(format!("cannot start the async runtime: {e}")))?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::from_std(listener)
            .map_err(|e| ServeError::Failed(format!("cannot serve on {address}: {e}")))?;
        // The first stdout line, for people and for whoever started the process on port 0.
        let mut stdout = std::io::stdout();
        let _ = writeln!(stdout, "nodetool-server listening on http://{address}");
        let _ = stdout.flush();
        let public_hosts: Vec<String> =
            config.access.public_hosts.iter().map(ToString::to_string).collect();
        tracing::info!(
            %address,
            max_runs = config.max_running,
            queue = config.max_queued,
            max_connections = config.max_connections,
            header_timeout_ms = config.header_timeout.as_millis() as u64,
            body_timeout_ms = config.body_timeout.as_millis() as u64,
            max_body_bytes = config.max_request_bytes,
            token = if config.access.token.is_some() { "required on /api/" } else { "none (loopback only)" },
            public_hosts = public_hosts.join(","),
            allow_origins = config.access.allow_origins.join(","),
            "listening"
        );
        serve(listener, state, shutdown_signal())
            .await
            .map_err(|e| ServeError::Failed(format!("serving failed: {e}")))
    })
}

/// Logs on stderr, as text or JSON lines; `RUST_LOG` filters them (default `info`).
fn init_logging(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Text => builder
            .with_ansi(std::io::stderr().is_terminal())
            .try_init(),
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_ansi(false)
            .try_init(),
    };
}
