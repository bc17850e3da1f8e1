//! Capabilities a run is granted: absent unless granted, and shared with every pack module the
//! body imports (importing a module means trusting it with the node's capabilities).
//!
//! - `getSecret(name)`: the granted secrets, by name.
//! - `workspace`: a frozen object whose async methods read and write files inside the run's
//!   directory and nowhere else.
//! - `fetch(url, init?)`: HTTP(S) to the granted hosts.
//!
//! The guest only reads what the call was given (types, strings, bytes) and hands it to the
//! run's [`Authority`] (`nodetool_broker`): every decision about a path or a request, and the
//! work itself, are the authority's, in the process that holds it (the supervisor, when runs
//! live in confined worker processes). Its replies settle through the run's event loop like a
//! dispatcher call. Every refusal is an `Error` in the guest (a rejected Promise), never a
//! panic, and no message names a host filesystem path.
//!
//! This file holds the globals' installation and the call path every capability shares;
//! [`workspace`] and [`fetch`] build their objects and read their replies.

mod fetch;
mod workspace;

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use nodetool_broker::{Authority, Granted, Reply, Request, WorkspaceMethod};
use rquickjs::object::Property;
use rquickjs::{Ctx, Exception, Function, Persistent, Promise, Value as JsValue};

use crate::bridge::{self, Awaited, PendingCall, SettleAuthority};
use fetch::{build_response, fetch_function};
use workspace::{workspace_object, workspace_value};

/// What a run may reach beyond pure computation. Every field defaults to "not granted".
#[derive(Clone, Default)]
pub struct Capabilities {
    /// Secrets `getSecret(name)` may return, by name. `None`: no `getSecret` global at all.
    pub secrets: Option<BTreeMap<String, String>>,
    /// What performs `workspace` and `fetch` calls; each global exists only when the
    /// authority grants it ([`Authority::grants`]). `None`: neither global.
    pub authority: Option<Arc<dyn Authority>>,
}

impl fmt::Debug for Capabilities {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Capabilities")
            .field(
                "secrets",
                &self.secrets.as_ref().map(|s| s.keys().collect::<Vec<_>>()),
            )
            .field("grants", &self.authority.as_ref().map(|a| a.grants()))
            .finish()
    }
}

/// Installs the granted capabilities as globals.
pub(crate) fn install<'js>(
    ctx: &Ctx<'js>,
    caps: &Capabilities,
    freeze: &Function<'js>,
) -> rquickjs::Result<()> {
    if let Some(secrets) = &caps.secrets {
        let secrets = secrets.clone();
        let get_secret = Function::new(
            ctx.clone(),
            move |ctx: Ctx<'js>, name: rquickjs::Value<'js>| -> rquickjs::Result<Promise<'js>> {
                let (promise, resolve, reject) = Promise::new(&ctx)?;
                let name = name.as_string().and_then(|s| s.to_string().ok());
                match name.as_deref().and_then(|n| secrets.get(n).map(|v| (n, v))) {
                    Some((_, value)) => resolve.call::<_, ()>((value.clone(),))?,
                    None => {
                        let message = match name {
                            Some(n) => {
                                format!("getSecret: the secret \"{n}\" was not granted to this run")
                            }
                            None => "getSecret: the secret name must be a string".to_string(),
                        };
                        reject.call::<_, ()>((Exception::from_message(ctx.clone(), &message)?,))?;
                    }
                }
                Ok(promise)
            },
        )?;
        ctx.globals()
            .prop("getSecret", Property::from(get_secret))?;
    }
    if let Some(authority) = &caps.authority {
        let grants = authority.grants();
        if grants.workspace {
            ctx.globals().prop(
                "workspace",
                Property::from(workspace_object(ctx, authority, freeze)?),
            )?;
        }
        if grants.fetch {
            ctx.globals()
                .prop("fetch", Property::from(fetch_function(ctx, authority)?))?;
        }
    }
    Ok(())
}

/// A Promise already settled with `outcome` (an `Error` with the message when it failed).
fn settled<'js>(
    ctx: &Ctx<'js>,
    outcome: Result<JsValue<'js>, String>,
) -> rquickjs::Result<Promise<'js>> {
    let (promise, resolve, reject) = Promise::new(ctx)?;
    match outcome {
        Ok(value) => resolve.call::<_, ()>((value,))?,
        Err(message) => {
            reject.call::<_, ()>((Exception::from_message(ctx.clone(), &message)?,))?;
        }
    }
    Ok(promise)
}

/// A Promise already rejected with `reason`.
fn rejected_with<'js>(ctx: &Ctx<'js>, reason: JsValue<'js>) -> rquickjs::Result<Promise<'js>> {
    let (promise, _, reject) = Promise::new(ctx)?;
    reject.call::<_, ()>((reason,))?;
    Ok(promise)
}

/// A guest string quoted for a message: escaped (so control characters stay visible) and cut
/// short when long.
fn quoted(text: &str) -> String {
    const SHOWN: usize = 200;
    if text.chars().count() <= SHOWN {
        return format!("{text:?}");
    }
    let cut: String = text.chars().take(SHOWN).collect();
    format!("{cut:?}…")
}

fn type_of(value: Option<&JsValue<'_>>) -> &'static str {
    value.map_or("undefined", JsValue::type_name)
}

// ---------------------------------------------------------------------------------------------
// calls to the authority
// ---------------------------------------------------------------------------------------------

/// What a settled authority call turns into.
enum Settle {
    /// A `workspace` method's result.
    Workspace(WorkspaceMethod),
    /// A `fetch`'s Response.
    Fetch,
}

/// Hands `request` to the authority and returns the Promise its reply settles; `label` starts
/// the message of a refusal made here (`workspace.readText`, `fetch`).
fn start_call<'js>(
    ctx: &Ctx<'js>,
    authority: &Arc<dyn Authority>,
    label: &str,
    request: Request,
    settle: Settle,
) -> rquickjs::Result<Promise<'js>> {
    let (promise, resolve, reject) = Promise::new(ctx)?;
    let refuse = |message: &str| -> rquickjs::Result<Promise<'js>> {
        reject.call::<_, ()>((Exception::from_message(ctx.clone(), message)?,))?;
        Ok(promise.clone())
    };
    let Some(state) = bridge::current() else {
        return refuse(&format!(
            "{label}: the sandbox cannot reach the host outside a run"
        ));
    };
    if state.in_flight() >= bridge::MAX_PENDING_CALLS {
        return refuse(&format!(
            "{label}: {} calls are already in flight in this run; await some before starting more",
            bridge::MAX_PENDING_CALLS
        ));
    }
    let future = authority.ask(request);
    let queued = state.push_pending(PendingCall {
        awaited: Awaited::Authority {
            future,
            settle: Box::new(settle),
        },
        resolve: Persistent::save(ctx, resolve),
        reject: Persistent::save(ctx, reject.clone()),
    });
    if let Err(message) = queued {
        return refuse(&format!("{label}: {message}"));
    }
    Ok(promise)
}

impl SettleAuthority for Settle {
    fn settle<'js>(
        &self,
        ctx: &Ctx<'js>,
        outcome: Result<Granted, String>,
    ) -> rquickjs::Result<Result<JsValue<'js>, String>> {
        settle_call(ctx, self, outcome)
    }
}

/// The guest value of a settled authority call, or the message it rejects with.
fn settle_call<'js>(
    ctx: &Ctx<'js>,
    settle: &Settle,
    outcome: Result<Granted, String>,
) -> rquickjs::Result<Result<JsValue<'js>, String>> {
    let granted = match outcome {
        Ok(granted) => granted,
        Err(message) => return Ok(Err(message)),
    };
    // The bytes move into the guest's heap (counted against its memory limit); the host's copy
    // and its share of the run's budget go with `granted` at the end.
    match (settle, &granted.reply) {
        (Settle::Workspace(_), Reply::Workspace(reply)) => Ok(Ok(workspace_value(ctx, reply)?)),
        (Settle::Fetch, Reply::Fetch(response)) => build_response(ctx, response).map(Ok),
        (Settle::Workspace(method), _) => Ok(Err(format!(
            "workspace.{}: the host answered with something else",
            method.name()
        ))),
        (Settle::Fetch, _) => Ok(Err(
            "fetch: the host answered with something else".to_string()
        )),
    }
}
