//! `nodetool-guest`: the QuickJS (quickjs-ng, through rquickjs) sandbox a Code node body runs
//! in, with the loader that holds the package boundary.
//!
//! It owns one run end to end ([`Sandbox::run`]): a fresh runtime and context per run with the
//! memory, stack and deadline limits of [`RunLimits`]; hardening before any module evaluates
//! (the context is built without the `Eval` intrinsic and every code-generating constructor is
//! replaced by a guard that names what it refused); the entry it builds from a body with
//! `nodetool_jssource`'s entry builder, which hoists the body's static imports ([`body_imports`],
//! re-exported, reads them, which is how a body declares its packages); the resolver/loader pair that serves only the run's resolved specifiers and intra-pack files;
//! the private bridges behind the generated host and WASM facades, and the [`Dispatcher`]
//! trait they call; values across the boundary ([`Value`]); the granted [`Capabilities`]; and
//! typed outcomes ([`RunError`] with a stable [`RunErrorCode`]).
//!
//! Architecture invariants: the loader, not static analysis, is the boundary — nothing
//! resolves that the run's resolution does not serve, a module cache hit never skips the
//! resolver, and every resolution after the entry's static graph links is a refused dynamic
//! import; no filesystem path ever reaches guest code; untrusted input never panics the host.
//!
//! [`Value`]: nodetool_protocol::value::Value
//! [`RunError`]: nodetool_protocol::run::RunError
//! [`RunErrorCode`]: nodetool_protocol::run::RunErrorCode

mod bridge;
mod caps;
mod caret;
mod compile;
mod convert;
mod engine;
mod entry;
mod globals;
mod harden;
mod loader;
mod run;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use nodetool_protocol::catalog::Resolution;
use nodetool_protocol::run::{LogEntry, RunError};
use nodetool_protocol::value::Value;

pub use caps::Capabilities;
pub use entry::{BodyImport, BodySyntaxError, body_imports};
pub use nodetool_broker as broker;

/// The limits of one run. There is no `Default`: callers state them ([`RunLimits::STANDARD`]
/// is NodeTool's standard set).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunLimits {
    /// Wall-clock deadline, enforced by the interrupt handler and the event loop.
    pub timeout: Duration,
    /// Heap the runtime may allocate.
    pub memory_bytes: usize,
    /// Stack the engine may use.
    pub stack_bytes: usize,
    /// Console lines kept; the rest are counted and reported as dropped.
    pub log_entries: usize,
    /// Characters kept per console line.
    pub log_chars: usize,
}

impl RunLimits {
    /// NodeTool's standard limits: 30 s, 64 MiB heap, 512 KiB stack, 1,000 console lines of at
    /// most 10,000 characters.
    pub const STANDARD: RunLimits = RunLimits {
        timeout: Duration::from_secs(30),
        memory_bytes: 64 * 1024 * 1024,
        stack_bytes: 512 * 1024,
        log_entries: 1_000,
        log_chars: 10_000,
    };
}

/// Cancels a run from another thread.
#[derive(Debug, Clone, Default)]
pub struct CancelToken(Arc<AtomicBool>);

impl CancelToken {
    /// A token that has not fired.
    pub fn new() -> Self {
        CancelToken::default()
    }

    /// Stops the run at its next interrupt check or event-loop turn.
    pub fn cancel(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    /// Whether [`CancelToken::cancel`] was called.
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

pub use nodetool_runtime::dispatch::{
    DispatchError, DispatchFuture, Dispatcher, Reply, ReplyFuture,
};

/// The dispatchers a run's facades reach.
#[derive(Clone, Default)]
pub struct Dispatchers {
    /// For `kind: "host"` modules.
    pub host: Option<Arc<dyn Dispatcher>>,
    /// For `kind: "wasm"` modules.
    pub wasm: Option<Arc<dyn Dispatcher>>,
}

/// Everything one run needs.
pub struct RunRequest<'a> {
    /// The Code node body.
    pub code: &'a str,
    /// What the body's imports resolved to (its error statuses end the run before it starts).
    pub resolution: &'a Resolution,
    /// The `inputs` global (deeply frozen in the guest).
    pub inputs: &'a Value,
    /// The run's limits.
    pub limits: RunLimits,
    /// What the run is granted.
    pub capabilities: Capabilities,
    /// Where facades dispatch.
    pub dispatchers: Dispatchers,
    /// Cancellation from the host.
    pub cancel: Option<CancelToken>,
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq)]
pub struct RunOutcome {
    /// The body's result, or the typed error.
    pub result: Result<Value, RunError>,
    /// Captured console output.
    pub logs: Vec<LogEntry>,
    /// Wall time of the run.
    pub duration: Duration,
}

/// The guest runtime of a process: it owns the per-process bytecode cache of pack modules, so
/// each module source is compiled once and loaded into every fresh context. Runs are
/// independent; `run` may be called from many threads at once.
#[derive(Clone, Default)]
pub struct Sandbox {
    cache: Arc<compile::BytecodeCache>,
}

impl Sandbox {
    /// A sandbox with an empty bytecode cache.
    pub fn new() -> Self {
        Sandbox::default()
    }

    /// Runs one body in a fresh runtime and context on the calling thread.
    pub fn run(&self, request: RunRequest<'_>) -> RunOutcome {
        run::run(&self.cache, request)
    }

    /// [`Sandbox::run`] for a thread that serves runs one after another (a sandbox worker):
    /// the run takes the never-used runtime and context [`Sandbox::prepare`] built, when its
    /// heap limit matches, and its own teardown waits for the next `prepare`, so neither is on
    /// the run's latency path. Each run still gets a runtime no code ran in.
    pub fn run_prepared(&self, request: RunRequest<'_>) -> RunOutcome {
        run::run_deferred(&self.cache, request)
    }

    /// The most heap bytes the last run on this thread held at once: a bound on what its
    /// teardown has to free.
    pub fn last_peak_heap_bytes(&self) -> usize {
        run::last_peak()
    }

    /// Between runs on this thread: frees what the last [`Sandbox::run_prepared`] left and
    /// builds the runtime and context of the next run under `limits`.
    pub fn prepare(&self, limits: &RunLimits) {
        run::prepare(limits);
    }
}
