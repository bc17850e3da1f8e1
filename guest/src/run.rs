//! One run: a fresh runtime and context, hardening, the entry, the event loop, the outcome.

use std::cell::{Cell, RefCell};
use std::collections::{HashSet, VecDeque};
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::{Context as TaskContext, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use nodetool_protocol::catalog::{ResolvedKind, StatusCode, StatusLevel};
use nodetool_protocol::run::{LogEntry, LogLevel, RunError, RunErrorCode};
use nodetool_protocol::value::Value;
use rquickjs::context::intrinsic;
use rquickjs::function::{Rest, This};
use rquickjs::object::Property;
use rquickjs::promise::PromiseState;
use rquickjs::{Context, Ctx, Function, Object, Persistent, Promise, Runtime};

use crate::bridge::{BridgeState, CurrentRun, DispatchSide, settle};
use crate::caps;
use crate::compile::{BytecodeCache, CompileError, compile_module};
use crate::convert::{describe_exception, from_js, serde_json_text, to_js};
use crate::engine::{HeapPressure, RunAllocator, load_and_resolve_entry, string_length};
use crate::entry::{ENTRY_LINE_OFFSET, ENTRY_MODULE_NAME, build_entry};
use crate::harden;
use crate::loader::{ModuleTable, SandboxLoader, SandboxResolver};
use crate::{RunLimits, RunOutcome, RunRequest};

/// The intrinsics a sandbox context gets: everything standard except `Eval` (so no source can
/// be compiled inside it) and the host-flavoured `Performance` and `DOMException`.
type SandboxIntrinsics = (
    intrinsic::Date,
    intrinsic::RegExpCompiler,
    intrinsic::RegExp,
    intrinsic::Json,
    intrinsic::Proxy,
    intrinsic::MapSet,
    intrinsic::TypedArrays,
    intrinsic::Promise,
    intrinsic::WeakRef,
);

/// Heap a run may allocate before its first garbage collection. QuickJS starts at 256 KiB, so
/// a run that imports a library collected once mid-run (about 2% of a js-yaml run) only to
/// find nothing to free: reference counting frees everything but cycles at once, and a run's
/// whole heap is released when it ends. After a collection QuickJS sets the next threshold to
/// 1.5 times what is live, as before; the memory limit is enforced independently of it.
const GC_THRESHOLD: usize = 2 * 1024 * 1024;

struct ThreadWaker(std::thread::Thread);

impl Wake for ThreadWaker {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// Captured console output under the run's caps.
pub(crate) struct Logs {
    pub entries: Vec<LogEntry>,
    pub dropped: usize,
    max_entries: usize,
    max_chars: usize,
}

impl Logs {
    /// Whether the entry cap is reached (a further line is only counted).
    fn full(&self) -> bool {
        self.entries.len() >= self.max_entries
    }

    fn push(&mut self, level: LogLevel, mut message: String) {
        if self.entries.len() >= self.max_entries {
            self.dropped += 1;
            return;
        }
        if message.chars().count() > self.max_chars {
            let cut: String = message.chars().take(self.max_chars).collect();
            message = format!("{cut}… [truncated]");
        }
        self.entries.push(LogEntry { level, message });
    }

    fn finish(mut self) -> Vec<LogEntry> {
        if self.dropped > 0 {
            self.entries.push(LogEntry {
                level: LogLevel::Warn,
                message: format!(
                    "… {} more console lines were dropped (the cap is {} per run)",
                    self.dropped, self.max_entries
                ),
            });
        }
        self.entries
    }
}

/// Why the interrupt handler stopped the engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    /// The deadline (the run's timeout) passed.
    Deadline(Duration),
    Cancelled,
}

/// A runtime and a context no code has run in, with the allocator and heap-pressure flag
/// they were built with. Fields drop in order: the context before its runtime.
pub(crate) struct Engine {
    context: Context,
    runtime: Runtime,
    pressure: HeapPressure,
    memory_bytes: usize,
}

impl Engine {
    /// A fresh runtime and context for `limits`.
    fn build(limits: &RunLimits) -> Result<Engine, RunError> {
        let pressure = HeapPressure::default();
        let runtime = Runtime::new_with_alloc(RunAllocator::for_limit(
            limits.memory_bytes,
            pressure.clone(),
        ))
        .map_err(|e| engine_error(&e))?;
        runtime.set_memory_limit(limits.memory_bytes);
        runtime.set_max_stack_size(limits.stack_bytes);
        runtime.set_gc_threshold(GC_THRESHOLD);
        let context =
            Context::custom::<SandboxIntrinsics>(&runtime).map_err(|e| engine_error(&e))?;
        Ok(Engine {
            context,
            runtime,
            pressure,
            memory_bytes: limits.memory_bytes,
        })
    }
}

thread_local! {
    /// The engine built ahead for this thread's next run ([`prepare`]); each is used once.
    static SPARE: RefCell<Option<Engine>> = const { RefCell::new(None) };
    /// Engines of finished runs whose teardown waits for [`prepare`] (see [`run_deferred`]).
    static SPENT: RefCell<Vec<Engine>> = const { RefCell::new(Vec::new()) };
    /// The most heap bytes this thread's last run held at once.
    static LAST_PEAK: Cell<usize> = const { Cell::new(0) };
}

/// The most heap bytes the thread's last run held at once (what its teardown has to free).
pub(crate) fn last_peak() -> usize {
    LAST_PEAK.with(Cell::get)
}

/// Off a run's latency path: frees what the thread's finished runs left ([`run_deferred`]) and
/// builds a never-used runtime and context for its next run under `limits`.
pub(crate) fn prepare(limits: &RunLimits) {
    let spent = SPENT.with(|s| std::mem::take(&mut *s.borrow_mut()));
    drop(spent);
    if SPARE.with(|s| s.borrow().is_none())
        && let Ok(engine) = Engine::build(limits)
    {
        SPARE.with(|s| *s.borrow_mut() = Some(engine));
    }
}

pub(crate) fn run(cache: &Arc<BytecodeCache>, request: RunRequest<'_>) -> RunOutcome {
    run_with(cache, request, false)
}

/// [`run`], leaving the engine's teardown to the thread's next [`prepare`], and using the
/// engine it built when the limits match.
pub(crate) fn run_deferred(cache: &Arc<BytecodeCache>, request: RunRequest<'_>) -> RunOutcome {
    run_with(cache, request, true)
}

fn run_with(cache: &Arc<BytecodeCache>, request: RunRequest<'_>, defer: bool) -> RunOutcome {
    let started = Instant::now();
    let logs = Rc::new(RefCell::new(Logs {
        entries: Vec::new(),
        dropped: 0,
        max_entries: request.limits.log_entries,
        max_chars: request.limits.log_chars,
    }));
    let spare = if defer {
        SPARE
            .with(|s| s.borrow_mut().take())
            .filter(|e| e.memory_bytes == request.limits.memory_bytes)
    } else {
        None
    };
    let engine = match spare {
        Some(engine) => {
            // Built for the same heap limit; the stack limit is the run's own.
            engine
                .runtime
                .set_max_stack_size(request.limits.stack_bytes);
            Ok(engine)
        }
        None => Engine::build(&request.limits),
    };
    let result = match &engine {
        Ok(engine) => execute(cache, &request, &logs, started, engine),
        Err(error) => Err(error.clone()),
    };
    // The context still holds the console functions (and their handle on the logs) when the
    // teardown is deferred, so the lines are taken out rather than unwrapped.
    let logs = std::mem::replace(
        &mut *logs.borrow_mut(),
        Logs {
            entries: Vec::new(),
            dropped: 0,
            max_entries: 0,
            max_chars: 0,
        },
    )
    .finish();
    let duration = started.elapsed();
    LAST_PEAK.with(|p| p.set(engine.as_ref().map_or(0, |e| e.pressure.peak())));
    if defer && let Ok(engine) = engine {
        SPENT.with(|s| s.borrow_mut().push(engine));
    }
    RunOutcome {
        result,
        logs,
        duration,
    }
}

fn execute(
    cache: &Arc<BytecodeCache>,
    request: &RunRequest<'_>,
    logs: &Rc<RefCell<Logs>>,
    started: Instant,
    engine: &Engine,
) -> Result<Value, RunError> {
    // Resolution errors end the run before anything starts, naming the specifier.
    if let Some(status) = request
        .resolution
        .statuses
        .iter()
        .find(|s| s.status == StatusLevel::Error)
    {
        let code = match status.code {
            StatusCode::ModuleUnavailable => RunErrorCode::ModuleUnavailable,
            _ => RunErrorCode::ModuleNotFound,
        };
        return Err(RunError {
            specifier: status.specifier.clone(),
            ..RunError::new(code, status.message.clone())
        });
    }
    let entry = build_entry(request.code).map_err(|e| RunError {
        line: Some(e.line),
        column: Some(e.column),
        ..RunError::new(RunErrorCode::SyntaxError, e.message)
    })?;
    let entry_bytecode = compile_module(ENTRY_MODULE_NAME, &entry.source)
        .map_err(|e| entry_syntax_error(request.code, &e))?;
    let samples = cache
        .prelude(harden::SAMPLES_NAME, harden::SAMPLES)
        .map_err(|e| {
            RunError::new(
                RunErrorCode::RuntimeError,
                format!("the sandbox prelude did not compile: {}", e.message),
            )
        })?;
    let limits: &RunLimits = &request.limits;
    let deadline = started + limits.timeout;
    let timeout = limits.timeout;
    let pressure = engine.pressure.clone();
    let runtime = &engine.runtime;
    let stop: Rc<Cell<Option<Stop>>> = Rc::new(Cell::new(None));
    {
        let stop = Rc::clone(&stop);
        let cancel = request.cancel.clone();
        runtime.set_interrupt_handler(Some(Box::new(move || {
            if cancel.as_ref().is_some_and(|c| c.0.load(Ordering::Relaxed)) {
                stop.set(Some(Stop::Cancelled));
            } else if Instant::now() >= deadline {
                stop.set(Some(Stop::Deadline(timeout)));
            }
            stop.get().is_some()
        })));
    }
    let table = Rc::new(ModuleTable::new(
        &request.resolution.modules,
        Arc::clone(cache),
    ));
    runtime.set_loader(
        SandboxResolver(Rc::clone(&table)),
        SandboxLoader(Rc::clone(&table)),
    );
    let bridge = Rc::new(bridge_state(request, deadline));
    let _current = CurrentRun::enter(Rc::clone(&bridge));
    let context = &engine.context;
    // Declared after the context, so dropped before it: calls still pending when the run ends
    // hold guest functions, which must be released while the runtime is alive.
    let _pending = DropPending(Rc::clone(&bridge));
    let prefix = Rc::new(Prefix::default());
    let _prefix = ReleasePrefix(Rc::clone(&prefix));

    let judge = Judge {
        code: request.code,
        table: &table,
        bridge: &bridge,
        stop: &stop,
        pressure: &pressure,
    };
    let failure = |ctx: &Ctx<'_>, error: rquickjs::Error| -> RunError { judge.error(ctx, error) };
    // A link error names the body's import, never an engine module id.
    let link = |e| {
        nodetool_jssource::exports::explain_link_error(e, request.code, &request.resolution.modules)
    };

    // Globals, hardening, then the entry: resolve its whole static graph, lock, evaluate.
    let evaluation: Persistent<Promise<'static>> = context.with(|ctx| -> Result<_, RunError> {
        install_globals(&ctx, request, logs, &prefix).map_err(|e| failure(&ctx, e))?;
        // Hardening first: the guards are in place before the entry's graph is even resolved.
        harden::install(&ctx, &samples).map_err(|e| failure(&ctx, e))?;
        let resolved =
            load_and_resolve_entry(&ctx, &entry_bytecode).map_err(|e| link(failure(&ctx, e)))?;
        table.locked.set(true);
        let promise = resolved
            .evaluate(&ctx)
            .map_err(|e| link(failure(&ctx, e)))?;
        ctx.store_userdata(EntryHandle(resolved)).map_err(|_| {
            RunError::new(RunErrorCode::RuntimeError, "the entry could not be kept")
        })?;
        Ok(Persistent::save(&ctx, promise))
    })?;

    let waker = Waker::from(Arc::new(ThreadWaker(std::thread::current())));
    loop {
        // Run every queued job (promise reactions) until the queue is empty.
        loop {
            match runtime.execute_pending_job() {
                Ok(true) => {}
                Ok(false) => break,
                // A job that throws rejects the promise it belongs to; the outcome comes from
                // the entry's promise, so nothing is lost by moving on.
                Err(_) => {}
            }
        }
        let settled = context.with(|ctx| -> Option<Result<Value, RunError>> {
            let promise = evaluation.clone().restore(&ctx).ok()?;
            match promise.state() {
                PromiseState::Pending => None,
                PromiseState::Resolved => Some(read_result(&ctx, &judge)),
                PromiseState::Rejected => {
                    let reason: rquickjs::Value = match promise.result::<rquickjs::Value>() {
                        Some(Err(e)) => {
                            if e.is_exception() {
                                ctx.catch()
                            } else {
                                rquickjs::Value::new_undefined(ctx.clone())
                            }
                        }
                        Some(Ok(v)) => v,
                        None => rquickjs::Value::new_undefined(ctx.clone()),
                    };
                    Some(Err(judge.thrown(&reason)))
                }
            }
        });
        // Once the run is stopped, the stop is its outcome, whatever the body made of it: an
        // interrupt QuickJS swallowed (in `Error.prepareStackTrace`, say) lets the body go on
        // and even finish after its deadline.
        if let Some(reason) = stop.get() {
            return Err(stopped(reason));
        }
        if let Some(outcome) = settled {
            return outcome;
        }
        // Poll the dispatcher calls the guest awaits.
        let mut progressed = false;
        let mut pending = std::mem::take(&mut *bridge.pending.borrow_mut());
        let mut still = Vec::with_capacity(pending.len());
        for mut call in pending.drain(..) {
            match call.poll(&mut TaskContext::from_waker(&waker)) {
                Poll::Pending => still.push(call),
                Poll::Ready(outcome) => {
                    progressed = true;
                    bridge.release(&call);
                    context.with(|ctx| {
                        if let Err(e) = settle(&ctx, &bridge, call, outcome) {
                            let _ = failure(&ctx, e);
                        }
                    });
                }
            }
        }
        {
            let mut slot = bridge.pending.borrow_mut();
            still.append(&mut slot);
            *slot = still;
        }
        // Host calls waiting for a slot take the ones that finished.
        progressed |= bridge.start_queued();
        let waiting = bridge.in_flight() > 0;
        if progressed || runtime.is_job_pending() {
            continue;
        }
        if !waiting {
            // QuickJS drops a promise's settlement it has no memory to make: the body's result
            // then never settles. (A body that reached its limit and then awaits forever is
            // reported the same way; it did not finish either.)
            if pressure.reached() {
                return Err(memory_limit());
            }
            return Err(RunError::new(
                RunErrorCode::RuntimeError,
                "the body's result never settles: it awaits a Promise that nothing will resolve",
            ));
        }
        if request
            .cancel
            .as_ref()
            .is_some_and(|c| c.0.load(Ordering::Relaxed))
        {
            return Err(stopped(Stop::Cancelled));
        }
        let now = Instant::now();
        if now >= deadline {
            return Err(stopped(Stop::Deadline(limits.timeout)));
        }
        // Woken by a dispatcher's waker; the cap lets cancellation be noticed promptly.
        std::thread::park_timeout((deadline - now).min(Duration::from_millis(20)));
    }
}

/// Drops the calls still pending when a run ends (a timeout, a cancellation, an early result),
/// unsettled, before the context and runtime go: each holds guest functions, and a guest
/// value that outlives its runtime aborts the process in `JS_FreeRuntime`.
struct DropPending(Rc<BridgeState>);

impl Drop for DropPending {
    fn drop(&mut self) {
        let pending = std::mem::take(&mut *self.0.pending.borrow_mut());
        drop(pending);
        // Calls still queued for a running slot are dropped unstarted: no dispatcher ever
        // hears of them.
        let queued = std::mem::take(&mut *self.0.queued.borrow_mut());
        drop(queued);
    }
}

/// Keeps the resolved entry reachable from the context so its namespace can be read at the end.
struct EntryHandle(crate::engine::ResolvedEntry);

// SAFETY: EntryHandle holds no JavaScript value with a lifetime; it is a module definition
// pointer that stays valid for the context's whole life.
#[allow(unsafe_code)]
unsafe impl<'js> rquickjs::JsLifetime<'js> for EntryHandle {
    type Changed<'to> = EntryHandle;
}

fn read_result(ctx: &Ctx<'_>, judge: &Judge<'_>) -> Result<Value, RunError> {
    let Some(entry) = ctx.userdata::<EntryHandle>() else {
        return Err(RunError::new(
            RunErrorCode::RuntimeError,
            "the entry's result is unavailable",
        ));
    };
    let namespace = entry.0.namespace(ctx).map_err(|e| judge.error(ctx, e))?;
    let value: rquickjs::Value = namespace.get("default").map_err(|e| judge.error(ctx, e))?;
    from_js(&value, "the result").map_err(|e| {
        if let Some(reason) = judge.stop.get() {
            return stopped(reason);
        }
        RunError::new(RunErrorCode::RuntimeError, e.message)
    })
}

fn bridge_state(request: &RunRequest<'_>, deadline: Instant) -> BridgeState {
    let mut host_keys = HashSet::new();
    let mut wasm_keys = HashSet::new();
    for m in &request.resolution.modules {
        match m.kind {
            ResolvedKind::Host { .. } => {
                host_keys.insert(m.specifier.clone());
            }
            ResolvedKind::Wasm { .. } => {
                wasm_keys.insert(m.specifier.clone());
            }
            ResolvedKind::Js => {}
        }
    }
    BridgeState {
        host: DispatchSide {
            dispatcher: request.dispatchers.host.clone(),
            keys: host_keys,
            code: RunErrorCode::HostModuleError,
            label: "host",
            slotted: true,
        },
        wasm: DispatchSide {
            dispatcher: request.dispatchers.wasm.clone(),
            keys: wasm_keys,
            code: RunErrorCode::WasmError,
            label: "WASM",
            slotted: false,
        },
        pending: RefCell::new(Vec::new()),
        queued: RefCell::new(VecDeque::new()),
        running: Cell::new(0),
        deadline,
        thrown: RefCell::new(Vec::new()),
    }
}

fn install_globals<'js>(
    ctx: &Ctx<'js>,
    request: &RunRequest<'_>,
    logs: &Rc<RefCell<Logs>>,
    prefix: &Rc<Prefix>,
) -> rquickjs::Result<()> {
    let globals = ctx.globals();
    let freeze: Function = globals.get::<_, Object>("Object")?.get("freeze")?;
    prefix.capture(ctx)?;

    let console = Object::new(ctx.clone())?;
    for (name, level) in [
        ("log", LogLevel::Log),
        ("info", LogLevel::Info),
        ("warn", LogLevel::Warn),
        ("error", LogLevel::Error),
        ("debug", LogLevel::Debug),
    ] {
        let logs = Rc::clone(logs);
        let prefix = Rc::clone(prefix);
        console.set(
            name,
            Function::new(
                ctx.clone(),
                move |ctx: Ctx<'js>, args: Rest<rquickjs::Value<'js>>| -> rquickjs::Result<()> {
                    // Past the entry cap nothing is formatted: the line is only counted.
                    if logs.borrow().full() {
                        logs.borrow_mut().dropped += 1;
                        return Ok(());
                    }
                    let max_chars = logs.borrow().max_chars;
                    // Formatting may run guest code (a getter, `toJSON`) that logs too, so no
                    // borrow is held meanwhile.
                    let line = format_log_line(&ctx, &prefix, &args.0, max_chars)?;
                    logs.borrow_mut().push(level, line);
                    Ok(())
                },
            )?,
        )?;
    }
    freeze.call::<_, ()>((console.clone(),))?;
    // Capability globals are read-only bindings: a pack module shares them but cannot swap
    // one out to watch what the body does with it.
    globals.prop("console", Property::from(console))?;

    globals.prop(
        "inputs",
        Property::from(to_js(ctx, request.inputs, Some(&freeze))?),
    )?;
    caps::install(ctx, &request.capabilities, &freeze)?;
    Ok(())
}

/// Bytes of a non-string console argument worth converting: more than a line shows.
const LOG_VALUE_BYTES: usize = 64 * 1024;

/// Cuts a guest string before it is converted, with `String.prototype.slice` and
/// `toWellFormed` as the context had them before any module ran (a body that replaces them
/// changes nothing here). QuickJS keeps strings as Latin-1 or UTF-16 and takes a long slice
/// without copying it, so the cost is the prefix, not the string.
///
/// The functions are held from Rust, where the cycle collector cannot see them, so
/// [`ReleasePrefix`] lets go of them before the context is freed.
#[derive(Default)]
struct Prefix(RefCell<Option<PrefixFunctions>>);

struct PrefixFunctions {
    slice: Persistent<Function<'static>>,
    well_formed: Persistent<Function<'static>>,
}

impl Prefix {
    fn capture(&self, ctx: &Ctx<'_>) -> rquickjs::Result<()> {
        let prototype: Object = ctx.globals().get::<_, Object>("String")?.get("prototype")?;
        let slice: Function = prototype.get("slice")?;
        let well_formed: Function = prototype.get("toWellFormed")?;
        *self.0.borrow_mut() = Some(PrefixFunctions {
            slice: Persistent::save(ctx, slice),
            well_formed: Persistent::save(ctx, well_formed),
        });
        Ok(())
    }

    /// The first `chars` characters of `text` (all of it when shorter). At most
    /// `2 × (chars + 1)` UTF-16 units are converted: enough for `chars` characters of any kind,
    /// and the surrogate a cut may split lies past them. An unpaired surrogate becomes U+FFFD.
    fn take<'js>(
        &self,
        ctx: &Ctx<'js>,
        text: &rquickjs::String<'js>,
        chars: usize,
    ) -> rquickjs::Result<String> {
        let (slice, well_formed) = match self.0.borrow().as_ref() {
            Some(f) => (f.slice.clone(), f.well_formed.clone()),
            None => return Err(rquickjs::Error::Unknown),
        };
        let units = chars.saturating_add(1).saturating_mul(2);
        let cut: rquickjs::String = if string_length(text) <= units {
            text.clone()
        } else {
            slice
                .restore(ctx)?
                .call((This(text.clone()), 0, units as f64))?
        };
        let mut converted = match cut.to_string() {
            Ok(converted) => converted,
            Err(_) => well_formed
                .restore(ctx)?
                .call::<_, rquickjs::String>((This(cut),))?
                .to_string()?,
        };
        if let Some((at, _)) = converted.char_indices().nth(chars) {
            converted.truncate(at);
        }
        Ok(converted)
    }
}

/// Releases the functions a [`Prefix`] holds; declared after the context, so dropped before it.
struct ReleasePrefix(Rc<Prefix>);

impl Drop for ReleasePrefix {
    fn drop(&mut self) {
        drop(self.0.0.borrow_mut().take());
    }
}

/// One console line from its arguments, joined by spaces, of at most `max_chars + 1`
/// characters (one past the cap tells [`Logs::push`] to mark the cut): each argument is cut to
/// the room left before it is converted, and none is converted once the line is full.
fn format_log_line<'js>(
    ctx: &Ctx<'js>,
    prefix: &Prefix,
    args: &[rquickjs::Value<'js>],
    max_chars: usize,
) -> rquickjs::Result<String> {
    let full = max_chars.saturating_add(1);
    let mut line = String::new();
    let mut used = 0;
    for (i, arg) in args.iter().enumerate() {
        if i > 0 {
            line.push(' ');
            used += 1;
        }
        if used >= full {
            break;
        }
        let text = format_log_argument(ctx, prefix, arg, full - used)?;
        used += text.chars().count();
        line.push_str(&text);
        if used >= full {
            break;
        }
    }
    Ok(line)
}

/// One console argument, at most `chars` characters of it: a string as itself, an error as
/// `Name: message`, anything else as JSON.
fn format_log_argument<'js>(
    ctx: &Ctx<'js>,
    prefix: &Prefix,
    value: &rquickjs::Value<'js>,
    chars: usize,
) -> rquickjs::Result<String> {
    if let Some(text) = value.as_string() {
        return prefix.take(ctx, text, chars);
    }
    if value.is_error()
        && let Some(error) = value.as_object()
        && let Some(text) = format_log_error(ctx, prefix, error, chars)?
    {
        return Ok(text);
    }
    // Only what fits in a console line is worth converting.
    let mut text = match crate::convert::from_js_limited(value, "the value", LOG_VALUE_BYTES) {
        Ok(v) => serde_json_text(&v),
        Err(e) => format!("[{}]", e.message),
    };
    if let Some((at, _)) = text.char_indices().nth(chars) {
        text.truncate(at);
    }
    Ok(text)
}

/// `Name: message` for an error whose message is a string, each part cut before it is
/// converted (as [`describe_exception`] writes it); `None` for any other error.
fn format_log_error<'js>(
    ctx: &Ctx<'js>,
    prefix: &Prefix,
    error: &Object<'js>,
    chars: usize,
) -> rquickjs::Result<Option<String>> {
    let read = |key: &str| {
        error
            .get::<_, rquickjs::Value>(key)
            .ok()
            .and_then(rquickjs::Value::into_string)
    };
    let Some(message) = read("message") else {
        return Ok(None);
    };
    let mut text = match read("name") {
        Some(name) => prefix.take(ctx, &name, chars)?,
        None => String::new(),
    };
    if !text.is_empty() {
        text.push_str(": ");
    }
    let used = text.chars().count();
    text.push_str(&prefix.take(ctx, &message, chars.saturating_sub(used))?);
    if let Some((at, _)) = text.char_indices().nth(chars) {
        text.truncate(at);
    }
    Ok(Some(text))
}

/// The engine reports compile errors without a position, so the body is parsed again with oxc
/// (which the fast path skipped) to say where; the engine's message is the fallback.
fn entry_syntax_error(body: &str, e: &CompileError) -> RunError {
    if let Err(parsed) = crate::entry::parse_body(body) {
        return RunError {
            line: Some(parsed.line),
            column: Some(parsed.column),
            ..RunError::new(RunErrorCode::SyntaxError, parsed.message)
        };
    }
    RunError {
        line: e.line.map(|l| l.saturating_sub(ENTRY_LINE_OFFSET).max(1)),
        column: e.column,
        ..RunError::new(RunErrorCode::SyntaxError, e.message.clone())
    }
}

fn engine_error(e: &rquickjs::Error) -> RunError {
    RunError::new(
        RunErrorCode::RuntimeError,
        format!("the sandbox could not start: {e}"),
    )
}

fn stopped(reason: Stop) -> RunError {
    match reason {
        Stop::Deadline(timeout) => RunError::new(
            RunErrorCode::Timeout,
            format!("the run exceeded its {} ms deadline", timeout.as_millis()),
        ),
        Stop::Cancelled => RunError::new(RunErrorCode::Cancelled, "the run was cancelled"),
    }
}

fn memory_limit() -> RunError {
    RunError::new(
        RunErrorCode::MemoryLimit,
        "the run exceeded its memory limit",
    )
}

/// What an outcome is judged against: the loader's refusals, the dispatcher errors thrown into
/// the guest, the stop reason and whether the heap reached its limit.
struct Judge<'a> {
    /// The body, for the caret rule (`caret::on_throw`).
    code: &'a str,
    table: &'a ModuleTable,
    bridge: &'a BridgeState,
    stop: &'a Cell<Option<Stop>>,
    pressure: &'a HeapPressure,
}

impl Judge<'_> {
    /// Names an engine error (taking the pending exception when it is one).
    fn error(&self, ctx: &Ctx<'_>, error: rquickjs::Error) -> RunError {
        if error.is_exception() {
            let value = ctx.catch();
            return self.thrown(&value);
        }
        if let Some(reason) = self.stop.get() {
            return stopped(reason);
        }
        RunError::new(RunErrorCode::RuntimeError, error.to_string())
    }

    /// Names an uncaught thrown value: a stop, an engine limit, a loader refusal, a dispatcher
    /// error, or the body's own error with its position in the body.
    fn thrown(&self, value: &rquickjs::Value<'_>) -> RunError {
        // A stopped run ends as stopped, whatever was thrown on the way out.
        if let Some(reason) = self.stop.get() {
            return stopped(reason);
        }
        // QuickJS throws `null` when it cannot even make the out-of-memory error.
        if value.is_null() && self.pressure.reached() {
            return memory_limit();
        }
        let (table, bridge) = (self.table, self.bridge);
        let described = describe_exception(value);
        let object = value.as_object();
        let name: String = object.and_then(|o| o.get("name").ok()).unwrap_or_default();
        let message: String = object
            .and_then(|o| o.get("message").ok())
            .unwrap_or_else(|| described.clone());
        if name == "InternalError" && message == "out of memory" {
            return memory_limit();
        }
        if name == "InternalError" && message == "string too long" {
            return RunError::new(
                RunErrorCode::MemoryLimit,
                "the run built a string longer than the engine allows",
            );
        }
        if message == "Maximum call stack size exceeded"
            || (name == "InternalError" && message == "stack overflow")
        {
            return RunError::new(
                RunErrorCode::StackOverflow,
                "the run exceeded its stack (too much recursion)",
            );
        }
        if let Some(denial) = table
            .denials
            .borrow()
            .iter()
            .rev()
            .find(|d| d.message == message)
        {
            let (line, column) = body_position(object);
            return RunError {
                code: denial.code,
                message: denial.message.clone(),
                line,
                column,
                specifier: Some(denial.specifier.clone()),
                stack: Vec::new(),
            };
        }
        if let Some(failure) = table
            .compile_failures
            .borrow()
            .iter()
            .find(|f| message == **f)
        {
            return RunError::new(RunErrorCode::SyntaxError, failure.clone());
        }
        if let Some((_, code)) = bridge
            .thrown
            .borrow()
            .iter()
            .rev()
            .find(|(m, _)| *m == message)
        {
            let (line, column) = body_position(object);
            return RunError {
                line,
                column,
                ..RunError::new(*code, described)
            };
        }
        let (line, column) = body_position(object);
        let (line, column) = crate::caret::on_throw(self.code, line, column);
        let stack: String = object.and_then(|o| o.get("stack").ok()).unwrap_or_default();
        RunError {
            line,
            column,
            stack: crate::caret::short_stack(&stack, self.code),
            ..RunError::new(RunErrorCode::RuntimeError, described)
        }
    }
}

/// The body position of the innermost stack frame in the entry module, if any.
fn body_position(error: Option<&Object<'_>>) -> (Option<u32>, Option<u32>) {
    let stack: String = error.and_then(|o| o.get("stack").ok()).unwrap_or_default();
    let marker = format!("{ENTRY_MODULE_NAME}:");
    for frame in stack.lines() {
        let Some(at) = frame
            .find(&format!("({marker}"))
            .map(|i| i + 1)
            .or_else(|| frame.find(&format!(" {marker}")).map(|i| i + 1))
        else {
            continue;
        };
        let rest = &frame[at + marker.len()..];
        let mut parts = rest.trim_end_matches(')').split(':');
        let line = parts.next().and_then(|l| l.parse::<u32>().ok());
        let column = parts.next().and_then(|c| c.parse::<u32>().ok());
        if let Some(line) = line {
            return (Some(line.saturating_sub(ENTRY_LINE_OFFSET).max(1)), column);
        }
    }
    (None, None)
}
