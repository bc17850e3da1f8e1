//! Values across the boundary: `Value` to JavaScript (inputs, dispatcher results) and
//! JavaScript to `Value` (results, log arguments, dispatcher arguments).
//!
//! Going out, every failure is an error naming where in the value it happened: a cycle, a
//! getter that throws, a BigInt, nesting deeper than the cap. Nothing here can recurse without
//! bound on the host stack.

use nodetool_protocol::value::Value;
use rquickjs::{Array, Ctx, Function, Object, TypedArray};

use crate::engine::bytes_of;

/// Deepest nesting a value may have when it crosses.
pub(crate) const MAX_DEPTH: usize = 64;

/// Converts a host value into the guest. `freeze` makes every object and array immutable.
pub(crate) fn to_js<'js>(
    ctx: &Ctx<'js>,
    value: &Value,
    freeze: Option<&Function<'js>>,
) -> rquickjs::Result<rquickjs::Value<'js>> {
    to_js_at(ctx, value, freeze, 0)
}

fn to_js_at<'js>(
    ctx: &Ctx<'js>,
    value: &Value,
    freeze: Option<&Function<'js>>,
    depth: usize,
) -> rquickjs::Result<rquickjs::Value<'js>> {
    if depth > MAX_DEPTH {
        return Err(rquickjs::Error::new_into_js_message(
            "value",
            "JavaScript",
            "nested too deeply",
        ));
    }
    let frozen = |object: Object<'js>| -> rquickjs::Result<rquickjs::Value<'js>> {
        if let Some(freeze) = freeze {
            freeze.call::<_, ()>((object.clone(),))?;
        }
        Ok(object.into_value())
    };
    Ok(match value {
        Value::Undefined => rquickjs::Value::new_undefined(ctx.clone()),
        Value::Null => rquickjs::Value::new_null(ctx.clone()),
        Value::Bool(b) => rquickjs::Value::new_bool(ctx.clone(), *b),
        Value::Number(n) => rquickjs::Value::new_number(ctx.clone(), *n),
        Value::String(s) => rquickjs::String::from_str(ctx.clone(), s)?.into_value(),
        Value::Bytes(b) => TypedArray::<u8>::new_copy(ctx.clone(), b)?.into_value(),
        Value::Array(items) => {
            let array = Array::new(ctx.clone())?;
            for (i, item) in items.iter().enumerate() {
                array.set(i, to_js_at(ctx, item, freeze, depth + 1)?)?;
            }
            frozen(array.into_object())?
        }
        Value::Object(members) => {
            let object = Object::new(ctx.clone())?;
            for (k, v) in members {
                // Defined, not assigned: a "__proto__" key stays an ordinary key.
                let item = to_js_at(ctx, v, freeze, depth + 1)?;
                object.prop(
                    k.as_str(),
                    rquickjs::object::Property::from(item)
                        .writable()
                        .enumerable()
                        .configurable(),
                )?;
            }
            frozen(object)?
        }
    })
}

/// Why a guest value could not cross, with the path to the offending part (`result.a[2]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CrossError {
    pub message: String,
}

/// Approximate host bytes a value may occupy once it has crossed (the guest heap's own size):
/// the guest cannot make the host hold more than it could hold itself.
pub(crate) const MAX_CROSSING_BYTES: usize = 64 * 1024 * 1024;

/// Converts a guest value to a host value. `what` names the root in messages (`result`).
pub(crate) fn from_js<'js>(value: &rquickjs::Value<'js>, what: &str) -> Result<Value, CrossError> {
    from_js_limited(value, what, MAX_CROSSING_BYTES)
}

/// [`from_js`] with an explicit budget of approximate host bytes.
pub(crate) fn from_js_limited<'js>(
    value: &rquickjs::Value<'js>,
    what: &str,
    budget: usize,
) -> Result<Value, CrossError> {
    let mut walk = Walk {
        stack: Vec::new(),
        left: budget,
        budget,
    };
    from_js_at(value, what, &mut walk)
}

struct Walk<'js> {
    stack: Vec<rquickjs::Value<'js>>,
    left: usize,
    budget: usize,
}

/// Approximate host cost of one node besides its payload.
const NODE_BYTES: usize = 32;

impl<'js> Walk<'js> {
    fn spend(&mut self, path: &str, bytes: usize) -> Result<(), CrossError> {
        match self.left.checked_sub(bytes + NODE_BYTES) {
            Some(left) => {
                self.left = left;
                Ok(())
            }
            None => Err(CrossError {
                message: format!(
                    "{path} is larger than the {} bytes a value may occupy when it crosses the sandbox boundary",
                    self.budget
                ),
            }),
        }
    }
}

fn from_js_at<'js>(
    value: &rquickjs::Value<'js>,
    path: &str,
    walk: &mut Walk<'js>,
) -> Result<Value, CrossError> {
    walk.spend(path, 0)?;
    use rquickjs::Type;
    let fail = |why: String| CrossError {
        message: format!("{path} {why}"),
    };
    match value.type_of() {
        Type::Uninitialized | Type::Undefined => return Ok(Value::Undefined),
        Type::Null => return Ok(Value::Null),
        Type::Bool => return Ok(Value::Bool(value.as_bool().unwrap_or(false))),
        Type::Int => return Ok(Value::Number(f64::from(value.as_int().unwrap_or(0)))),
        Type::Float => return Ok(Value::Number(value.as_float().unwrap_or(f64::NAN))),
        Type::String => {
            let s = value
                .as_string()
                .map(|s| s.to_string())
                .transpose()
                .map_err(|e| fail(format!("is not a valid string ({e})")))?
                .unwrap_or_default();
            walk.spend(path, s.len())?;
            return Ok(Value::String(s));
        }
        Type::BigInt => return Err(fail("is a BigInt, which cannot cross the sandbox boundary; convert it with String() or Number()".into())),
        Type::Symbol => return Ok(Value::Undefined),
        Type::Function | Type::Constructor => return Ok(Value::Undefined),
        _ => {}
    }
    let Some(object) = value.as_object() else {
        return Ok(Value::Undefined);
    };
    if let Some(bytes) = bytes_of(value) {
        walk.spend(path, bytes.len())?;
        return Ok(Value::Bytes(bytes));
    }
    if walk.stack.iter().any(|seen| seen == value) {
        return Err(fail(
            "refers back to itself (a cycle), which cannot cross the sandbox boundary".into(),
        ));
    }
    if walk.stack.len() >= MAX_DEPTH {
        return Err(fail(format!("is nested more than {MAX_DEPTH} levels deep")));
    }
    // `toJSON` first (Date and friends), as JSON.stringify does.
    if let Ok(to_json) = object.get::<_, Function>("toJSON") {
        let converted: rquickjs::Value = to_json
            .call((rquickjs::function::This(object.clone()),))
            .map_err(|e| fail(format!("could not be read: {}", thrown(object.ctx(), e))))?;
        if converted != *value {
            walk.stack.push(value.clone());
            let out = from_js_at(&converted, path, walk);
            walk.stack.pop();
            return out;
        }
    }
    walk.stack.push(value.clone());
    let out = if value.is_array() {
        let length: usize = object
            .get::<_, f64>("length")
            .map(|l| l as usize)
            .unwrap_or(0);
        walk.spend(path, length.saturating_mul(16))?;
        let mut items = Vec::with_capacity(length.min(1 << 16));
        for i in 0..length {
            let index = u32::try_from(i)
                .map_err(|_| fail("is too long to cross the sandbox boundary".into()))?;
            let item: rquickjs::Value = object.get(index).map_err(|e| CrossError {
                message: format!("{path}[{i}] could not be read: {}", thrown(object.ctx(), e)),
            })?;
            let converted = from_js_at(&item, &format!("{path}[{i}]"), walk)?;
            items.push(if converted == Value::Undefined {
                Value::Null
            } else {
                converted
            });
        }
        Ok(Value::Array(items))
    } else if value.is_promise() {
        Err(fail(
            "is a Promise; await it before it crosses the sandbox boundary".into(),
        ))
    } else {
        let mut members = Vec::new();
        for key in object.keys::<String>() {
            let key = key.map_err(|e| fail(format!("has an unreadable key ({e})")))?;
            walk.spend(path, key.len())?;
            let item: rquickjs::Value = object.get(key.as_str()).map_err(|e| CrossError {
                message: format!(
                    "{path}.{key} could not be read: {}",
                    thrown(object.ctx(), e)
                ),
            })?;
            let converted = from_js_at(&item, &format!("{path}.{key}"), walk)?;
            if converted != Value::Undefined {
                members.push((key, converted));
            }
        }
        Ok(Value::Object(members))
    };
    walk.stack.pop();
    out
}

/// The message of what `error` threw (taking the pending exception), as `Name: message`.
pub(crate) fn thrown(ctx: &Ctx<'_>, error: rquickjs::Error) -> String {
    if !error.is_exception() {
        return error.to_string();
    }
    describe_exception(&ctx.catch())
}

/// `Name: message` for an error object; the string form of anything else thrown.
pub(crate) fn describe_exception(value: &rquickjs::Value<'_>) -> String {
    if let Some(object) = value.as_object() {
        let name: Option<String> = object.get("name").ok();
        let message: Option<String> = object.get("message").ok();
        if let Some(message) = message {
            return match name {
                Some(name) if !name.is_empty() => format!("{name}: {message}"),
                _ => message,
            };
        }
    }
    if let Some(s) = value.as_string().and_then(|s| s.to_string().ok()) {
        return s;
    }
    match from_js(value, "the thrown value") {
        Ok(v) => serde_json_text(&v),
        Err(e) => e.message,
    }
}

/// A compact display of a value for logs and messages: strings as themselves, the rest as JSON.
pub(crate) fn serde_json_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Undefined => "undefined".into(),
        other => other.to_json().to_string(),
    }
}
