//! Hardening: every route to a code-generating constructor is replaced, before any module of
//! the run evaluates.
//!
//! The context is built without the `Eval` intrinsic, so nothing in it can compile source. On
//! top of that, `eval`, the global `Function` and the `constructor` of `Function.prototype`
//! and of the async, generator and async-generator function prototypes are replaced by guards
//! whose error names what was refused, and the replacements are locked (not writable, not
//! configurable). Each guard is a `Proxy` of the constructor it stands for, so everything but
//! calling and constructing it (its `prototype`, `name`, `instanceof Function`) still works.
//! Its handler has no prototype (no trap can be planted on `Object.prototype`), and the async
//! and generator constructors inherit from the `Function` guard, so neither a trap nor
//! `Object.getPrototypeOf` ever yields an unguarded constructor.
//!
//! The guards are built natively: the only script involved yields one sample function of each
//! kind, whose prototype leads to the constructor (nothing else can reach the async and
//! generator constructors without compiling source in the sandbox).

use rquickjs::function::Constructor;
use rquickjs::proxy::ProxyHandler;
use rquickjs::{Array, Ctx, Exception, Function, Object, Proxy, Value};

use crate::engine::{eval_script, lock_property};

/// The name the samples script is compiled under (it is run directly, never imported).
pub(crate) const SAMPLES_NAME: &str = "nodetool:prelude";

/// One function of each kind whose constructor compiles source, in the order of
/// [`REFUSED`]'s last three entries, then the standard globals' script (`globals.js`), so that
/// one script compiled once per process serves both.
pub(crate) const SAMPLES: &str = concat!(
    "[async function () {}, function* () {}, async function* () {},\n",
    include_str!("globals.js"),
    "]"
);

/// What each guard's refusal names: the `Function` constructor, then the constructors of the
/// samples.
const REFUSED: [&str; 4] = [
    "the Function constructor",
    "the AsyncFunction constructor",
    "the GeneratorFunction constructor",
    "the AsyncGeneratorFunction constructor",
];

/// Installs the standard globals, then the guards, in `ctx`. `samples` is the bytecode of
/// [`SAMPLES`].
pub(crate) fn install<'js>(ctx: &Ctx<'js>, samples: &[u8]) -> rquickjs::Result<()> {
    let globals = ctx.globals();
    let function: Object<'js> = globals.get("Function")?;
    let samples: Array<'js> = eval_script(ctx, samples)?
        .into_array()
        .ok_or(rquickjs::Error::Unknown)?;
    let shell: Function<'js> = samples.get(3)?;
    crate::globals::install(ctx, shell)?;
    let mut constructors = vec![function];
    for sample in samples.iter::<Object<'js>>().take(3) {
        let prototype = sample?.get_prototype().ok_or(rquickjs::Error::Unknown)?;
        constructors.push(prototype.get("constructor")?);
    }
    if constructors.len() != REFUSED.len() {
        return Err(rquickjs::Error::Unknown);
    }
    let mut function_guard: Option<Value<'js>> = None;
    for (constructor, what) in constructors.into_iter().zip(REFUSED) {
        // The async and generator constructors inherit from the Function guard, not from the
        // real Function: a guard without a `getPrototypeOf` trap answers its target's
        // prototype, which would otherwise hand the body the unguarded constructor.
        if let Some(guard) = function_guard.as_ref().and_then(Value::as_object) {
            constructor.set_prototype(Some(guard))?;
        }
        let refuse = refuser(ctx, what)?;
        // The handler inherits nothing: a trap it does not define is looked up on its
        // prototype, and a body could plant a `get` trap on Object.prototype that receives the
        // real constructor as its target.
        let handler = Object::new(ctx.clone())?;
        handler.set_prototype(None)?;
        handler.set("apply", refuse.clone())?;
        handler.set("construct", refuse)?;
        let prototype: Object<'js> = constructor.get("prototype")?;
        let guard = Proxy::new(
            ctx.clone(),
            constructor,
            ProxyHandler::from_object(handler)?,
        )?;
        let guard = guard.into_value();
        lock_property(&prototype, "constructor", guard.clone())?;
        function_guard.get_or_insert(guard);
    }
    let function_guard = function_guard.ok_or(rquickjs::Error::Unknown)?;
    lock_property(&globals, "Function", function_guard)?;
    lock_property(&globals, "eval", refuser(ctx, "eval")?.into_value())?;
    Ok(())
}

/// A native function that throws the refusal of `what` whatever it is called with.
fn refuser<'js>(ctx: &Ctx<'js>, what: &'static str) -> rquickjs::Result<Function<'js>> {
    Function::new(ctx.clone(), move |ctx: Ctx<'js>| -> rquickjs::Result<()> {
        Err(refusal(&ctx, what))
    })
}

/// Throws `EvalError: <what> is not allowed in the sandbox: …` in `ctx`. The `EvalError`
/// constructor is looked up when the refusal happens, as `new EvalError(…)` in script would
/// (holding it in the guard would hide a reference from the garbage collector); if the body
/// has replaced it with something that does not construct, a plain `Error` carries the message.
fn refusal(ctx: &Ctx<'_>, what: &str) -> rquickjs::Error {
    let message =
        format!("{what} is not allowed in the sandbox: code cannot be generated from strings");
    let error = ctx
        .globals()
        .get::<_, Constructor>("EvalError")
        .and_then(|eval_error| eval_error.construct::<_, Value>((message.as_str(),)));
    match error {
        Ok(error) => ctx.throw(error),
        Err(e) if e.is_exception() => e,
        Err(_) => Exception::throw_message(ctx, &message),
    }
}
