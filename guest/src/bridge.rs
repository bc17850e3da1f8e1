//! The private bridges facades call, and the run state they reach.
//!
//! `nodetool:host-bridge` and `nodetool:wasm-bridge` are native modules exporting `__call`.
//! Only generated facades may import them (the resolver refuses everyone else), and no global
//! binding exists at any point, so user code cannot see a dispatcher at all. The calls still
//! go through the dispatcher's own checks: hiding is not the boundary.

use std::cell::{Cell, RefCell};
use std::collections::{HashSet, VecDeque};
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};
use std::time::Instant;

use nodetool_protocol::run::RunErrorCode;
use nodetool_protocol::value::Value;
use rquickjs::module::{Declarations, Exports, ModuleDef};
use rquickjs::{Ctx, Exception, Function, Object, Persistent, Promise};

use crate::convert::{from_js, packed_to_js, to_js};
use crate::{Dispatcher, Reply, ReplyFuture};
use nodetool_broker::{AuthorityFuture, Granted};

/// What the guest is awaiting, and what to build from it when it settles.
pub(crate) enum Awaited {
    /// A facade's dispatcher call: settles into the converted reply; an uncaught failure is
    /// reported with `code`.
    Dispatch {
        future: ReplyFuture,
        code: RunErrorCode,
        /// The `Error` a failure rejects with, created when the call was made so its stack
        /// points at the body line that made the call.
        error: Persistent<Object<'static>>,
        /// Whether the call holds one of the run's running slots ([`MAX_HOST_CALLS_RUNNING`]).
        slot: bool,
    },
    /// A capability call (`workspace`, `fetch`) the run's authority performs: settles into the
    /// value its reply becomes.
    Authority {
        future: AuthorityFuture,
        settle: Box<dyn SettleAuthority>,
    },
}

/// What a capability call's reply becomes in the guest: said by the capability that made the
/// call (`caps`), so the bridge knows nothing of workspaces or responses.
pub(crate) trait SettleAuthority {
    /// The guest value of the settled call, or the message it rejects with.
    fn settle<'js>(
        &self,
        ctx: &Ctx<'js>,
        outcome: Result<Granted, String>,
    ) -> rquickjs::Result<Result<rquickjs::Value<'js>, String>>;
}

/// What an [`Awaited`] future produced.
pub(crate) enum Outcome {
    Dispatch(Result<Reply, crate::DispatchError>),
    Authority(Result<Granted, String>),
}

/// A host call (dispatcher or capability) the guest is awaiting. Polled by the run's event loop
/// and dropped, unsettled, if the run ends first.
pub(crate) struct PendingCall {
    pub awaited: Awaited,
    pub resolve: Persistent<Function<'static>>,
    pub reject: Persistent<Function<'static>>,
}

impl PendingCall {
    /// Whether this call holds one of the run's running slots.
    pub(crate) fn holds_slot(&self) -> bool {
        matches!(self.awaited, Awaited::Dispatch { slot: true, .. })
    }

    /// Polls the awaited future once.
    pub(crate) fn poll(&mut self, cx: &mut TaskContext<'_>) -> Poll<Outcome> {
        match &mut self.awaited {
            Awaited::Dispatch { future, .. } => future.as_mut().poll(cx).map(Outcome::Dispatch),
            Awaited::Authority { future, .. } => future.as_mut().poll(cx).map(Outcome::Authority),
        }
    }
}

/// One side of dispatch (host or WASM): the dispatcher and the module keys this run declared.
pub(crate) struct DispatchSide {
    pub dispatcher: Option<Arc<dyn Dispatcher>>,
    pub keys: HashSet<String>,
    pub code: RunErrorCode,
    pub label: &'static str,
    /// Whether this side's calls take one of the run's running slots
    /// ([`MAX_HOST_CALLS_RUNNING`]); WASM calls finish inside `Dispatcher::call` and need none.
    pub slotted: bool,
}

/// A dispatcher call made while every running slot was taken: its arguments converted (a call
/// sees them as they were when it was made), the dispatcher not yet asked.
pub(crate) struct QueuedCall {
    dispatcher: Arc<dyn Dispatcher>,
    key: String,
    export: String,
    args: Vec<Value>,
    code: RunErrorCode,
    error: Persistent<Object<'static>>,
    resolve: Persistent<Function<'static>>,
    reject: Persistent<Function<'static>>,
}

/// What the bridges reach during a run.
pub(crate) struct BridgeState {
    pub host: DispatchSide,
    pub wasm: DispatchSide,
    pub pending: RefCell<Vec<PendingCall>>,
    /// Host calls waiting for a running slot, in call order.
    pub queued: RefCell<VecDeque<QueuedCall>>,
    /// Running slots taken (calls in `pending` that hold one).
    pub running: Cell<usize>,
    /// The run's deadline, passed to every dispatcher call.
    pub deadline: Instant,
    /// Messages of dispatcher errors thrown into the guest, to name an uncaught one's code.
    pub thrown: RefCell<Vec<(String, RunErrorCode)>>,
}

/// Dispatcher errors remembered per run (the most recent ones), to name an uncaught one.
const MAX_REMEMBERED_THROWN: usize = 64;
/// Calls (dispatcher or fetch, running or queued) a run may have in flight at once: each holds
/// host memory the guest heap limit does not see, so the count is bounded.
pub(crate) const MAX_PENDING_CALLS: usize = 1_024;

/// Host-module calls one run may have executing at once (as many as the WASM budgets allow a
/// run in flight, `WASM_BUDGETS.call_concurrency`). The rest wait in the run's queue, in call
/// order, and start as earlier ones finish: `Promise.all` over fifty calls still overlaps
/// them, two at a time.
///
/// The limit lives here, in the run's bridge, not in the host dispatcher, because the run is
/// what it limits and the bridge state lives and dies with the run. A host dispatcher starts a
/// thread the moment it is asked (and one may be shared by several runs, or built per request
/// as the server's host-call route does), so a queue inside it would need a cancellation
/// protocol to learn that a run had ended; a queue here is simply dropped with the run, and a
/// call still in it never reaches a dispatcher, so it never starts once the run has ended. It
/// also holds for any dispatcher a front end wires in.
pub(crate) const MAX_HOST_CALLS_RUNNING: usize = 2;

impl BridgeState {
    /// Remembers an error thrown into the guest, keeping only the recent ones.
    pub(crate) fn remember_thrown(&self, message: String, code: RunErrorCode) {
        let mut thrown = self.thrown.borrow_mut();
        if thrown.len() >= MAX_REMEMBERED_THROWN {
            thrown.remove(0);
        }
        thrown.push((message, code));
    }

    /// Calls in flight: running, awaited or queued.
    pub(crate) fn in_flight(&self) -> usize {
        self.pending.borrow().len() + self.queued.borrow().len()
    }

    /// Queues a call, or says why not (too many in flight).
    pub(crate) fn push_pending(&self, call: PendingCall) -> Result<(), String> {
        if self.in_flight() >= MAX_PENDING_CALLS {
            return Err(format!(
                "{MAX_PENDING_CALLS} calls are already in flight in this run; await some before starting more"
            ));
        }
        if call.holds_slot() {
            self.running.set(self.running.get() + 1);
        }
        self.pending.borrow_mut().push(call);
        Ok(())
    }

    /// Gives back the running slot of a call that finished (or was given up).
    pub(crate) fn release(&self, call: &PendingCall) {
        if call.holds_slot() {
            self.running.set(self.running.get().saturating_sub(1));
        }
    }

    /// Starts queued calls while running slots are free (none once the deadline has passed:
    /// the run is about to end). Returns whether any started.
    pub(crate) fn start_queued(&self) -> bool {
        let mut started = false;
        while self.running.get() < MAX_HOST_CALLS_RUNNING && Instant::now() < self.deadline {
            let Some(queued) = self.queued.borrow_mut().pop_front() else {
                break;
            };
            let future = queued.dispatcher.call_for_guest(
                &queued.key,
                &queued.export,
                queued.args,
                self.deadline,
            );
            self.running.set(self.running.get() + 1);
            self.pending.borrow_mut().push(PendingCall {
                awaited: Awaited::Dispatch {
                    future,
                    code: queued.code,
                    error: queued.error,
                    slot: true,
                },
                resolve: queued.resolve,
                reject: queued.reject,
            });
            started = true;
        }
        started
    }
}

thread_local! {
    static CURRENT: RefCell<Option<Rc<BridgeState>>> = const { RefCell::new(None) };
}

/// Installs `state` for the duration of a run on this thread.
pub(crate) struct CurrentRun;

impl CurrentRun {
    pub(crate) fn enter(state: Rc<BridgeState>) -> CurrentRun {
        CURRENT.with(|c| *c.borrow_mut() = Some(state));
        CurrentRun
    }
}

impl Drop for CurrentRun {
    fn drop(&mut self) {
        CURRENT.with(|c| *c.borrow_mut() = None);
    }
}

/// The state of the run on this thread, if one is running.
pub(crate) fn current() -> Option<Rc<BridgeState>> {
    CURRENT.with(|c| c.borrow().clone())
}

/// `nodetool:host-bridge`.
pub(crate) struct HostBridge;
/// `nodetool:wasm-bridge`.
pub(crate) struct WasmBridge;

impl ModuleDef for HostBridge {
    fn declare(decl: &Declarations<'_>) -> rquickjs::Result<()> {
        decl.declare("__call")?;
        Ok(())
    }

    fn evaluate<'js>(ctx: &Ctx<'js>, exports: &Exports<'js>) -> rquickjs::Result<()> {
        exports.export("__call", bridge_function(ctx, true)?)?;
        Ok(())
    }
}

impl ModuleDef for WasmBridge {
    fn declare(decl: &Declarations<'_>) -> rquickjs::Result<()> {
        decl.declare("__call")?;
        Ok(())
    }

    fn evaluate<'js>(ctx: &Ctx<'js>, exports: &Exports<'js>) -> rquickjs::Result<()> {
        exports.export("__call", bridge_function(ctx, false)?)?;
        Ok(())
    }
}

fn bridge_function<'js>(ctx: &Ctx<'js>, host: bool) -> rquickjs::Result<Function<'js>> {
    let state = current();
    Function::new(
        ctx.clone(),
        move |ctx: Ctx<'js>,
              key: rquickjs::Value<'js>,
              export: rquickjs::Value<'js>,
              args: rquickjs::Value<'js>| {
            call(&ctx, state.as_ref(), host, &key, &export, &args)
        },
    )
}

fn describe(value: &rquickjs::Value<'_>) -> String {
    match value.as_string().and_then(|s| s.to_string().ok()) {
        Some(s) => format!("{s:?}"),
        None => format!("a {} value", value.type_name()),
    }
}

/// Starts one dispatcher call and returns the promise the facade hands the guest.
fn call<'js>(
    ctx: &Ctx<'js>,
    state: Option<&Rc<BridgeState>>,
    host: bool,
    key: &rquickjs::Value<'js>,
    export: &rquickjs::Value<'js>,
    args: &rquickjs::Value<'js>,
) -> rquickjs::Result<Promise<'js>> {
    let (promise, resolve, reject) = Promise::new(ctx)?;
    let Some(state) = state else {
        let which = if host { "host" } else { "WASM" };
        let error = Exception::from_message(
            ctx.clone(),
            &format!("the sandbox {which} bridge is unavailable in this run"),
        )?;
        reject.call::<_, ()>((error,))?;
        return Ok(promise);
    };
    let side = if host { &state.host } else { &state.wasm };
    let refuse = |message: String| -> rquickjs::Result<Promise<'js>> {
        state.remember_thrown(message.clone(), side.code);
        let error = Exception::from_message(ctx.clone(), &message)?;
        reject.call::<_, ()>((error,))?;
        Ok(promise.clone())
    };
    let key_text = key.as_string().and_then(|s| s.to_string().ok());
    let Some(key_text) = key_text.filter(|k| side.keys.contains(k)) else {
        return refuse(format!(
            "{} is not a {} sandbox module this run serves",
            describe(key),
            side.label
        ));
    };
    let Some(export_text) = export.as_string().and_then(|s| s.to_string().ok()) else {
        return refuse(format!(
            "{key_text} has no export named {}",
            describe(export)
        ));
    };
    let Some(args_array) = args.as_array() else {
        return refuse(format!(
            "{key_text}: {export_text} was called with a non-list argument"
        ));
    };
    let mut values = Vec::with_capacity(args_array.len());
    for (i, item) in args_array.iter::<rquickjs::Value>().enumerate() {
        let item = item?;
        match from_js(&item, &format!("argument {}", i + 1)) {
            Ok(v) => values.push(v),
            Err(e) => return refuse(format!("{key_text}: {export_text}: {}", e.message)),
        }
    }
    let Some(dispatcher) = side.dispatcher.as_ref() else {
        return refuse(format!(
            "{key_text}: no {} dispatcher is available in this run",
            side.label
        ));
    };
    if state.in_flight() >= MAX_PENDING_CALLS {
        return refuse(format!(
            "{key_text}: {export_text}: {MAX_PENDING_CALLS} calls are already in flight in this run; await some before starting more"
        ));
    }
    let error = Persistent::save(ctx, Exception::from_message(ctx.clone(), "")?.into_object());
    let (resolve, reject) = (
        Persistent::save(ctx, resolve),
        Persistent::save(ctx, reject.clone()),
    );
    if side.slotted && state.running.get() >= MAX_HOST_CALLS_RUNNING {
        state.queued.borrow_mut().push_back(QueuedCall {
            dispatcher: Arc::clone(dispatcher),
            key: key_text,
            export: export_text,
            args: values,
            code: side.code,
            error,
            resolve,
            reject,
        });
        return Ok(promise);
    }
    let future = dispatcher.call_for_guest(&key_text, &export_text, values, state.deadline);
    let queued = state.push_pending(PendingCall {
        awaited: Awaited::Dispatch {
            future,
            code: side.code,
            error,
            slot: side.slotted,
        },
        resolve,
        reject,
    });
    if let Err(message) = queued {
        return refuse(format!("{key_text}: {export_text}: {message}"));
    }
    Ok(promise)
}

/// Settles a finished call in the guest.
pub(crate) fn settle<'js>(
    ctx: &Ctx<'js>,
    state: &BridgeState,
    call: PendingCall,
    outcome: Outcome,
) -> rquickjs::Result<()> {
    let resolve = call.resolve.restore(ctx)?;
    let reject = call.reject.restore(ctx)?;
    match (call.awaited, outcome) {
        (Awaited::Dispatch { code, error, .. }, Outcome::Dispatch(outcome)) => {
            let converted = outcome.and_then(|reply| {
                let value = match &reply {
                    Reply::Value(value) => to_js(ctx, value, None),
                    Reply::Packed(packed) => packed_to_js(ctx, packed),
                };
                value.map_err(|e| crate::DispatchError {
                    message: format!("the result could not cross into the sandbox: {e}"),
                })
            });
            match converted {
                Ok(value) => resolve.call::<_, ()>((value,)),
                Err(e) => {
                    state.remember_thrown(e.message.clone(), code);
                    let error = error.restore(ctx)?;
                    error.set("message", e.message.as_str())?;
                    reject.call::<_, ()>((error,))
                }
            }
        }
        (Awaited::Authority { settle, .. }, Outcome::Authority(outcome)) => {
            match settle.settle(ctx, outcome) {
                Ok(Ok(response)) => resolve.call::<_, ()>((response,)),
                Ok(Err(message)) => {
                    let error = Exception::from_message(ctx.clone(), &message)?;
                    reject.call::<_, ()>((error,))
                }
                // Building the value threw (out of memory, say): the guest gets that error.
                Err(e) if e.is_exception() => reject.call::<_, ()>((ctx.catch(),)),
                Err(e) => Err(e),
            }
        }
        // `PendingCall::poll` pairs each future with its own outcome.
        _ => {
            let error = Exception::from_message(
                ctx.clone(),
                "the sandbox settled a call with the wrong kind of result",
            )?;
            reject.call::<_, ()>((error,))
        }
    }
}
