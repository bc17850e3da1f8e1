//! `nodetool-wasm-host`: runs a pack's scalar WASM exports on the host with wasmtime.
//!
//! It owns one engine per process ([`WasmHost`]) with modules compiled once and cached by
//! content digest (a digest of the bytes, computed here, never taken from the resolution), a
//! fresh store and instance per call from an `InstancePre` with an empty linker (no imports:
//! globals and memory never persist between calls), re-validation of every binary against the
//! scalar contract before first use, per-call timeouts by epoch interruption, memory growth
//! capped by a resource limiter at the declared maximum, the per-invocation budgets (calls in
//! flight, calls, aggregate wall clock with reserve-and-refund) and a process-wide cap on
//! executing calls, and [`WasmDispatcher`], the `Dispatcher` behind the generated WASM facades.
//!
//! Architecture invariants: a pack's module is never linked to anything (the linker is empty),
//! never keeps state between calls, and a runaway export is stopped by the engine, not by
//! abandoning a thread. Arguments are converted host-side and never implicitly.

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use nodetool_protocol::catalog::{FileContent, Resolution, ResolvedKind};
use nodetool_protocol::limits::{WASM_BUDGETS, WasmBudgets};
use nodetool_protocol::manifest::{WasmContract, WasmLimits};
use nodetool_protocol::value::Value;
use nodetool_runtime::dispatch::{DispatchError, DispatchFuture, Dispatcher};
use nodetool_runtime::wasm_contract::check_wasm;
use sha2::{Digest as _, Sha256};
use wasmtime::{
    Config, Engine, InstancePre, Linker, Module, Store, StoreLimits, StoreLimitsBuilder, Val,
    ValType,
};

/// How often the epoch ticks; per-call timeouts are counted in ticks of this length.
const EPOCH_TICK: Duration = Duration::from_millis(2);
/// WASM page size in bytes.
const PAGE_BYTES: usize = 64 * 1024;

/// What each call's store carries.
struct CallState {
    limits: StoreLimits,
}

/// A validated, compiled module ready to instantiate.
struct Compiled {
    pre: InstancePre<CallState>,
    /// Alias -> (binary export name, parameter types, result type).
    exports: HashMap<String, ExportSig>,
    memory_bytes: usize,
}

#[derive(Clone)]
struct ExportSig {
    wasm: String,
    params: Vec<ValType>,
    result: Option<ValType>,
}

/// A counting semaphore (std has none).
struct Slots {
    free: Mutex<usize>,
    available: Condvar,
}

impl Slots {
    fn new(n: usize) -> Self {
        Slots {
            free: Mutex::new(n),
            available: Condvar::new(),
        }
    }

    /// Takes a slot, waiting at most until `deadline`.
    fn acquire(&self, deadline: Instant) -> Option<SlotGuard<'_>> {
        let mut free = self.free.lock().unwrap_or_else(PoisonError::into_inner);
        while *free == 0 {
            let left = deadline.checked_duration_since(Instant::now())?;
            free = self
                .available
                .wait_timeout(free, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        *free -= 1;
        Some(SlotGuard(self))
    }
}

struct SlotGuard<'a>(&'a Slots);

impl Drop for SlotGuard<'_> {
    fn drop(&mut self) {
        *self.0.free.lock().unwrap_or_else(PoisonError::into_inner) += 1;
        self.0.available.notify_one();
    }
}

/// Where compiled modules are kept between processes: a serialized module by
/// [`module_key`]. The front end owns the files; a worker only reads what it is handed and
/// hands back what it compiled.
pub trait ArtifactStore: Send + Sync {
    /// The serialized module kept under `key`, if any.
    fn load(&self, key: &[u8; 32]) -> Option<Arc<[u8]>>;
    /// A module compiled now, serialized, for the store to keep under `key`.
    fn save(&self, key: [u8; 32], artifact: Vec<u8>);
}

/// What identifies a compiled module: the binary and the contract it was validated against.
/// The engine's own compatibility (version, settings) is checked by wasmtime when an artifact
/// is loaded, and a mismatch is a recompile.
pub fn module_key(bytes: &[u8], contract: &WasmContract) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update(bytes);
    hasher.update(format!("{contract:?}").as_bytes());
    hasher.finalize().into()
}

/// The process's WASM engine: compile cache, epoch ticker, and the cap on executing calls.
pub struct WasmHost {
    engine: Engine,
    artifacts: Option<Arc<dyn ArtifactStore>>,
    compiled: Mutex<HashMap<[u8; 32], Arc<Compiled>>>,
    by_address: Mutex<HashMap<usize, AddressEntry>>,
    executing: Slots,
}

type AddressEntry = (Arc<[u8]>, WasmContract, Arc<Compiled>);

/// Why a WASM module or dispatcher could not be prepared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WasmHostError(pub String);

impl WasmHost {
    /// An engine with epoch interruption and a ticker thread. One per process is the intent.
    pub fn new() -> Result<Arc<WasmHost>, WasmHostError> {
        WasmHost::build(None)
    }

    /// [`WasmHost::new`] that loads compiled modules from `artifacts` before compiling, and
    /// gives it every module it compiles.
    pub fn with_artifacts(
        artifacts: Arc<dyn ArtifactStore>,
    ) -> Result<Arc<WasmHost>, WasmHostError> {
        WasmHost::build(Some(artifacts))
    }

    fn build(artifacts: Option<Arc<dyn ArtifactStore>>) -> Result<Arc<WasmHost>, WasmHostError> {
        let mut config = Config::new();
        config.epoch_interruption(true);
        let engine = Engine::new(&config)
            .map_err(|e| WasmHostError(format!("the WASM engine could not start: {e}")))?;
        let ticker = engine.weak();
        std::thread::Builder::new()
            .name("nodetool-wasm-epoch".into())
            .spawn(move || {
                // Ends with the engine: a weak handle that no longer upgrades stops the loop.
                while let Some(engine) = ticker.upgrade() {
                    engine.increment_epoch();
                    drop(engine);
                    std::thread::sleep(EPOCH_TICK);
                }
            })
            .map_err(|e| WasmHostError(format!("the WASM epoch thread could not start: {e}")))?;
        Ok(Arc::new(WasmHost {
            engine,
            artifacts,
            compiled: Mutex::new(HashMap::new()),
            by_address: Mutex::new(HashMap::new()),
            executing: Slots::new(WASM_BUDGETS.worker_pool_size as usize),
        }))
    }

    /// Validates (again) and compiles `bytes` under `contract`, once per distinct binary.
    fn compile(
        &self,
        specifier: &str,
        bytes: &Arc<[u8]>,
        contract: &WasmContract,
    ) -> Result<Arc<Compiled>, WasmHostError> {
        // A catalog hands out the same shared bytes run after run: found by address without
        // hashing them again (the entry keeps the bytes, so the address stays theirs).
        let address = Arc::as_ptr(bytes).cast::<u8>() as usize;
        if let Some((held, held_contract, hit)) = self
            .by_address
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&address)
            && Arc::ptr_eq(held, bytes)
            && held_contract == contract
        {
            return Ok(Arc::clone(hit));
        }
        let key = module_key(bytes, contract);
        let cached = self
            .compiled
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&key)
            .cloned();
        let compiled = match cached {
            Some(hit) => hit,
            None => {
                let compiled = self.compile_new(specifier, bytes, contract, key)?;
                self.compiled
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .insert(key, Arc::clone(&compiled));
                compiled
            }
        };
        self.by_address
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(
                address,
                (Arc::clone(bytes), contract.clone(), Arc::clone(&compiled)),
            );
        Ok(compiled)
    }

    fn compile_new(
        &self,
        specifier: &str,
        bytes: &[u8],
        contract: &WasmContract,
        key: [u8; 32],
    ) -> Result<Arc<Compiled>, WasmHostError> {
        if let Err(errors) = check_wasm(bytes, contract) {
            let reasons: Vec<String> = errors.into_iter().map(|e| e.message).collect();
            return Err(WasmHostError(format!(
                "{specifier}: {}",
                reasons.join("; ")
            )));
        }
        let loaded = self
            .artifacts
            .as_ref()
            .and_then(|store| store.load(&key))
            .and_then(|artifact| load_artifact(&self.engine, &artifact));
        let module = match loaded {
            Some(module) => module,
            None => {
                let module = Module::new(&self.engine, bytes).map_err(|e| {
                    WasmHostError(format!(
                        "{specifier}: the WASM module does not compile: {e}"
                    ))
                })?;
                if let (Some(store), Ok(artifact)) = (&self.artifacts, module.serialize()) {
                    store.save(key, artifact);
                }
                module
            }
        };
        let mut exports = HashMap::new();
        for export in &contract.exports {
            let ty = module
                .get_export(&export.wasm)
                .and_then(|t| t.func().cloned())
                .ok_or_else(|| {
                    WasmHostError(format!(
                        "{specifier}: export {} has no signature in the binary",
                        export.wasm
                    ))
                })?;
            exports.insert(
                export.as_name.clone(),
                ExportSig {
                    wasm: export.wasm.clone(),
                    params: ty.params().collect(),
                    result: ty.results().next(),
                },
            );
        }
        let linker: Linker<CallState> = Linker::new(&self.engine);
        let pre = linker.instantiate_pre(&module).map_err(|e| {
            WasmHostError(format!(
                "{specifier}: the WASM module cannot be instantiated without imports: {e}"
            ))
        })?;
        Ok(Arc::new(Compiled {
            pre,
            exports,
            memory_bytes: contract.memory_pages_max as usize * PAGE_BYTES,
        }))
    }

    /// The dispatcher for the WASM modules of `resolution`, or `None` when it has none.
    pub fn dispatcher_for(
        self: &Arc<Self>,
        resolution: &Resolution,
    ) -> Result<Option<Arc<WasmDispatcher>>, WasmHostError> {
        let mut modules = HashMap::new();
        let mut budgets = WASM_BUDGETS;
        for m in &resolution.modules {
            let ResolvedKind::Wasm { wasm } = &m.kind else {
                continue;
            };
            let bytes = m
                .graph
                .iter()
                .find(|f| f.id == m.module_id)
                .and_then(|f| match &f.content {
                    FileContent::Wasm { bytes } => Some(Arc::clone(&bytes.0)),
                    FileContent::Js { .. } => None,
                })
                .ok_or_else(|| {
                    WasmHostError(format!(
                        "{}: the resolution carries no WASM bytes",
                        m.specifier
                    ))
                })?;
            let compiled = self.compile(&m.specifier, &bytes, wasm)?;
            budgets = lower(budgets, wasm.limits);
            let call_timeout = Duration::from_millis(
                wasm.limits
                    .and_then(|l| l.call_timeout_ms)
                    .unwrap_or(WASM_BUDGETS.call_timeout_ms),
            );
            modules.insert(
                m.specifier.clone(),
                Declared {
                    compiled,
                    call_timeout,
                },
            );
        }
        if modules.is_empty() {
            return Ok(None);
        }
        Ok(Some(Arc::new(WasmDispatcher {
            inner: Arc::new(Inner {
                host: Arc::clone(self),
                modules,
                budget: Budget {
                    limits: budgets,
                    state: Mutex::new(BudgetState {
                        calls: 0,
                        wall_used: Duration::ZERO,
                    }),
                    in_flight: Slots::new(budgets.call_concurrency as usize),
                },
            }),
        })))
    }
}

/// The lowest limit any declared module asks for binds the run (a manifest lowers, never raises:
/// raising is refused when the manifest is validated).
fn lower(mut budgets: WasmBudgets, limits: Option<WasmLimits>) -> WasmBudgets {
    if let Some(l) = limits {
        if let Some(v) = l.call_concurrency {
            budgets.call_concurrency = budgets.call_concurrency.min(v.max(1));
        }
        if let Some(v) = l.calls_per_invocation {
            budgets.calls_per_invocation = budgets.calls_per_invocation.min(v);
        }
        if let Some(v) = l.wall_clock_ms {
            budgets.wall_clock_ms = budgets.wall_clock_ms.min(v);
        }
    }
    budgets
}

struct Declared {
    compiled: Arc<Compiled>,
    call_timeout: Duration,
}

struct BudgetState {
    calls: u32,
    wall_used: Duration,
}

/// One invocation's WASM budget.
struct Budget {
    limits: WasmBudgets,
    state: Mutex<BudgetState>,
    in_flight: Slots,
}

/// A module from an artifact, or `None` when wasmtime refuses it (another version or settings,
/// or bytes that are not an artifact), so the caller compiles instead.
#[allow(unsafe_code)]
fn load_artifact(engine: &Engine, artifact: &[u8]) -> Option<Module> {
    // SAFETY: `Module::deserialize` trusts the bytes to be what `Module::serialize` wrote.
    // Artifacts come only from the front end's content-addressed store, which writes what a
    // worker's `serialize` produced for this key and checks each entry's SHA-256 before it is
    // handed out (a corrupt entry is evicted), and wasmtime itself refuses an artifact of
    // another version or configuration. The worker loading it is the process that would have
    // compiled the same module.
    unsafe { Module::deserialize(engine, artifact) }.ok()
}

/// The per-run dispatcher behind the generated WASM facades.
pub struct WasmDispatcher {
    inner: Arc<Inner>,
}

struct Inner {
    host: Arc<WasmHost>,
    modules: HashMap<String, Declared>,
    budget: Budget,
}

fn describe(value: &Value) -> String {
    match value {
        Value::Number(n) if n.is_nan() => "NaN".into(),
        Value::Number(n) if n.is_infinite() => {
            if *n > 0.0 {
                "Infinity".into()
            } else {
                "-Infinity".into()
            }
        }
        Value::Number(n) if n.fract() != 0.0 => format!("the non-integer {n}"),
        Value::Number(n) => format!("{n}"),
        Value::Null => "null".into(),
        Value::Undefined => "a undefined value".into(),
        Value::Array(_) => "an array".into(),
        Value::Bool(_) => "a boolean value".into(),
        Value::String(_) => "a string value".into(),
        Value::Bytes(_) | Value::Object(_) => "a object value".into(),
    }
}

fn type_name(t: &ValType) -> String {
    match t {
        ValType::I32 => "i32".into(),
        ValType::I64 => "i64".into(),
        ValType::F32 => "f32".into(),
        ValType::F64 => "f64".into(),
        ValType::V128 => "v128".into(),
        ValType::Ref(_) => "a reference type".into(),
    }
}

/// Converts the guest's arguments exactly: arity, numbers only, i32 in range without wrapping.
fn convert(
    specifier: &str,
    alias: &str,
    sig: &ExportSig,
    args: &[Value],
) -> Result<Vec<Val>, String> {
    if args.len() != sig.params.len() {
        let plural = if sig.params.len() == 1 {
            "argument"
        } else {
            "arguments"
        };
        return Err(format!(
            "{specifier}: {alias} takes {} {plural}, received {}",
            sig.params.len(),
            args.len()
        ));
    }
    let mut out = Vec::with_capacity(args.len());
    for (i, (arg, ty)) in args.iter().zip(&sig.params).enumerate() {
        let index = i + 1;
        let Value::Number(n) = arg else {
            return Err(format!(
                "{specifier}: {alias} argument {index} expects {}, received {}",
                type_name(ty),
                describe(arg)
            ));
        };
        out.push(match ty {
            ValType::I32 => {
                if !n.is_finite() || n.fract() != 0.0 {
                    return Err(format!("{specifier}: {alias} argument {index} expects i32, received {}", describe(arg)));
                }
                if *n < f64::from(i32::MIN) || *n > f64::from(i32::MAX) {
                    return Err(format!("{specifier}: {alias} argument {index} expects i32 in the range -2147483648…2147483647, received {n}"));
                }
                Val::I32(*n as i32)
            }
            ValType::F32 => Val::F32((*n as f32).to_bits()),
            ValType::F64 => Val::F64(n.to_bits()),
            other => {
                return Err(format!("{specifier}: {alias} argument {index} uses {}, which the scalar contract does not carry", type_name(other)));
            }
        });
    }
    Ok(out)
}

impl Inner {
    /// Runs one call to completion on the calling thread: budgets, instance, call, refund.
    fn run_call(
        &self,
        specifier: &str,
        alias: &str,
        args: &[Value],
        deadline: Instant,
    ) -> Result<Value, String> {
        let Some(declared) = self.modules.get(specifier) else {
            return Err(format!(
                "\"{specifier}\" is not a WASM sandbox module this run serves"
            ));
        };
        let Some(sig) = declared.compiled.exports.get(alias) else {
            return Err(format!("{specifier} has no export named \"{alias}\""));
        };
        let params = convert(specifier, alias, sig, args)?;
        let limits = self.budget.limits;
        {
            let mut state = self
                .budget
                .state
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if state.calls >= limits.calls_per_invocation {
                return Err(format!(
                    "{specifier}: this node exhausted its budget of {} WASM calls per invocation",
                    limits.calls_per_invocation
                ));
            }
            // The call counts even if it later fails.
            state.calls += 1;
        }
        let no_slot =
            || format!("{specifier}: no WASM execution slot became free before the run's deadline");
        let _in_flight = self
            .budget
            .in_flight
            .acquire(deadline)
            .ok_or_else(no_slot)?;
        let wall_budget = Duration::from_millis(limits.wall_clock_ms);
        let reserved = {
            let mut state = self
                .budget
                .state
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            let remaining = wall_budget.saturating_sub(state.wall_used);
            if remaining.is_zero() {
                return Err(format!(
                    "{specifier}: this node exhausted its budget of {} ms of WASM wall clock per invocation",
                    limits.wall_clock_ms
                ));
            }
            // Reserve before running, so two concurrent calls cannot both spend the remainder.
            // A call never runs past the run's own deadline either.
            let run_left = deadline
                .saturating_duration_since(Instant::now())
                .max(Duration::from_millis(1));
            let reserved = declared.call_timeout.min(remaining).min(run_left);
            state.wall_used += reserved;
            reserved
        };
        let _executing = self.host.executing.acquire(deadline).ok_or_else(no_slot)?;
        let started = Instant::now();
        let outcome = self.execute(declared, sig, &params, reserved);
        let elapsed = started.elapsed();
        {
            // Charge what the call used and refund the rest of the reservation; a call cut at
            // its timeout is charged at least the whole reservation.
            let charged = match outcome {
                Err(CallFailure::Timeout) => reserved.max(elapsed),
                _ => elapsed.min(reserved),
            };
            let mut state = self
                .budget
                .state
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            state.wall_used = state.wall_used.saturating_sub(reserved) + charged;
        }
        outcome.map_err(|e| match e {
            CallFailure::Timeout => format!(
                "WASM call {} exceeded its {} ms per-call timeout; the instance was stopped and discarded",
                sig.wasm,
                reserved.as_millis()
            ),
            CallFailure::Trap(message) => format!("{specifier}: {alias} trapped: {message}"),
        })
    }

    fn execute(
        &self,
        declared: &Declared,
        sig: &ExportSig,
        params: &[Val],
        timeout: Duration,
    ) -> Result<Value, CallFailure> {
        let limits = StoreLimitsBuilder::new()
            .memory_size(declared.compiled.memory_bytes)
            .instances(1)
            .build();
        let mut store = Store::new(&self.host.engine, CallState { limits });
        store.limiter(|state| &mut state.limits);
        let ticks = (timeout.as_millis() / EPOCH_TICK.as_millis()).max(1) as u64;
        store.set_epoch_deadline(ticks);
        store.epoch_deadline_trap();
        let instance = declared
            .compiled
            .pre
            .instantiate(&mut store)
            .map_err(|e| classify(&e))?;
        let func = instance
            .get_func(&mut store, &sig.wasm)
            .ok_or_else(|| CallFailure::Trap(format!("export {} is not callable", sig.wasm)))?;
        let mut results: Vec<Val> = sig.result.iter().map(|_| Val::I32(0)).collect();
        func.call(&mut store, params, &mut results)
            .map_err(|e| classify(&e))?;
        Ok(match results.first() {
            None => Value::Undefined,
            Some(Val::I32(v)) => Value::Number(f64::from(*v)),
            Some(Val::F32(bits)) => Value::Number(f64::from(f32::from_bits(*bits))),
            Some(Val::F64(bits)) => Value::Number(f64::from_bits(*bits)),
            Some(_) => Value::Undefined,
        })
    }
}

enum CallFailure {
    Timeout,
    Trap(String),
}

fn classify(e: &wasmtime::Error) -> CallFailure {
    match e.downcast_ref::<wasmtime::Trap>() {
        Some(wasmtime::Trap::Interrupt) => CallFailure::Timeout,
        Some(trap) => CallFailure::Trap(trap.to_string()),
        None => CallFailure::Trap(e.to_string()),
    }
}

impl Dispatcher for WasmDispatcher {
    /// Runs the call on the caller's thread: a scalar call costs microseconds, far less than
    /// any hand-off to another thread. The per-call timeout (clamped to the run's deadline) is
    /// enforced by epoch interruption, so a runaway export still returns promptly, and calls
    /// from one run are never in flight together (well within the two the budget allows).
    fn call(
        &self,
        module_key: &str,
        export: &str,
        args: Vec<Value>,
        deadline: Instant,
    ) -> DispatchFuture {
        let answer = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.inner.run_call(module_key, export, &args, deadline)
        }))
        .unwrap_or_else(|_| Err("the WASM call failed unexpectedly".into()))
        .map_err(|message| DispatchError { message });
        Box::pin(std::future::ready(answer))
    }
}
