//! The private bridges facades call, and the run state they reach.
//!
//! `nodetool:host-bridge` and `nodetool:wasm-bridge` are native modules exporting `__call`.
//! Only generated facades may import them (the resolver refuses everyone else), and no global
//! binding exists at any point, so user code cannot see a dispatcher at all. The calls still
//! go through the dispatcher's own checks: hiding is not the boundary.

use std::cell::RefCell;
use std::collections::HashSet;
use std::rc::Rc;
use std::sync::Arc;

use nodetool_protocol::run::RunErrorCode;
use nodetool_protocol::value::Value;
use rquickjs::module::{Declarations, Exports, ModuleDef};
use rquickjs::{Ctx, Exception, Function, Persistent, Promise};

use crate::convert::{from_js, to_js};
use crate::{DispatchFuture, Dispatcher};

/// A dispatcher call the guest is awaiting.
pub(crate) struct PendingCall {
    pub future: DispatchFuture,
    pub resolve: Persistent<Function<'static>>,
    pub reject: Persistent<Function<'static>>,
    pub code: RunErrorCode,
}

/// One side of dispatch (host or WASM): the dispatcher and the module keys this run declared.
pub(crate) struct DispatchSide {
    pub dispatcher: Option<Arc<dyn Dispatcher>>,
    pub keys: HashSet<String>,
    pub code: RunErrorCode,
    pub label: &'static str,
}

/// What the bridges reach during a run.
pub(crate) struct BridgeState {
    pub host: DispatchSide,
    pub wasm: DispatchSide,
    pub pending: RefCell<Vec<PendingCall>>,
    /// Messages of dispatcher errors thrown into the guest, to name an uncaught one's code.
    pub thrown: RefCell<Vec<(String, RunErrorCode)>>,
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

fn current() -> Option<Rc<BridgeState>> {
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
        state.thrown.borrow_mut().push((message.clone(), side.code));
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
    let future = dispatcher.call(&key_text, &export_text, values);
    state.pending.borrow_mut().push(PendingCall {
        future,
        resolve: Persistent::save(ctx, resolve),
        reject: Persistent::save(ctx, reject),
        code: side.code,
    });
    Ok(promise)
}

/// Settles a finished call in the guest.
pub(crate) fn settle<'js>(
    ctx: &Ctx<'js>,
    state: &BridgeState,
    call: PendingCall,
    outcome: Result<Value, crate::DispatchError>,
) -> rquickjs::Result<()> {
    let resolve = call.resolve.restore(ctx)?;
    let reject = call.reject.restore(ctx)?;
    let converted = outcome.and_then(|value| {
        to_js(ctx, &value, None).map_err(|e| crate::DispatchError {
            message: format!("the result could not cross into the sandbox: {e}"),
        })
    });
    match converted {
        Ok(value) => resolve.call::<_, ()>((value,)),
        Err(e) => {
            state
                .thrown
                .borrow_mut()
                .push((e.message.clone(), call.code));
            let error = Exception::from_message(ctx.clone(), &e.message)?;
            reject.call::<_, ()>((error,))
        }
    }
}
