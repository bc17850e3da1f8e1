//! Values across the boundary: `Value` to JavaScript (inputs, dispatcher results) and
//! JavaScript to `Value` (results, log arguments, dispatcher arguments).
//!
//! Going out, every failure is an error naming where in the value it happened: a cycle, a
//! getter that throws, a BigInt, nesting deeper than the cap. Nothing here can recurse without
//! bound on the host stack.

use nodetool_protocol::packed::{Packed, PackedError, Token};
use nodetool_protocol::value::Value;
use rquickjs::{Array, Ctx, Function, Object, TypedArray};

use crate::engine::{
    Keys, SharedStrings, bytes_of, define_index, define_member, define_shared_member,
    define_string_member, string_length, without_gc,
};

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
                define_index(&array, i, &to_js_at(ctx, item, freeze, depth + 1)?)?;
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

/// Converts a packed host result into the guest: the JavaScript value [`to_js`] makes of
/// `packed.to_value()` (members defined, not assigned; nothing frozen), built straight from the
/// tape: each distinct key made a property key once, string members defined straight from
/// their bytes, each shared string made once, objects with the same keys in the same order
/// sharing one engine shape (see [`Shapes`]), and the cycle collector held off meanwhile (see
/// [`without_gc`]).
pub(crate) fn packed_to_js<'js>(
    ctx: &Ctx<'js>,
    packed: &Packed,
) -> rquickjs::Result<rquickjs::Value<'js>> {
    without_gc(ctx, || build_packed(ctx, packed))
}

fn build_packed<'js>(ctx: &Ctx<'js>, packed: &Packed) -> rquickjs::Result<rquickjs::Value<'js>> {
    enum Open<'js> {
        Array(Array<'js>, usize),
        /// An object, the key of the member whose value comes next, and its keys so far as a
        /// node of `shapes`.
        Object(Object<'js>, usize, Option<usize>),
    }
    enum Failed {
        Js(rquickjs::Error),
        Packed(PackedError),
    }
    impl From<PackedError> for Failed {
        fn from(e: PackedError) -> Failed {
            Failed::Packed(e)
        }
    }
    impl From<rquickjs::Error> for Failed {
        fn from(e: rquickjs::Error) -> Failed {
            Failed::Js(e)
        }
    }
    let keys = Keys::new(ctx, packed.keys())?;
    let mut strings = SharedStrings::new(ctx);
    let mut shapes = Shapes::new();
    let mut open: Vec<Open<'js>> = Vec::new();
    let mut root: Option<rquickjs::Value<'js>> = None;
    let walked = packed.walk(|token| -> Result<(), Failed> {
        if !matches!(token, Token::Key(_) | Token::End) && open.len() > MAX_DEPTH {
            return Err(rquickjs::Error::new_into_js_message(
                "value",
                "JavaScript",
                "nested too deeply",
            )
            .into());
        }
        let value = match token {
            Token::Key(key) => {
                if let Some(Open::Object(object, pending, node)) = open.last_mut() {
                    *pending = key as usize;
                    *node = match *node {
                        Some(at) => shapes.step(object.ctx(), &keys, at, *pending)?,
                        None => None,
                    };
                }
                return Ok(());
            }
            Token::Array => {
                open.push(Open::Array(Array::new(ctx.clone())?, 0));
                return Ok(());
            }
            Token::Object => {
                open.push(Open::Object(Object::new(ctx.clone())?, 0, Some(0)));
                return Ok(());
            }
            Token::String(s) => {
                if let Some(Open::Object(object, key, _)) = open.last() {
                    define_string_member(object, &keys, *key, s)?;
                    return Ok(());
                }
                rquickjs::String::from_str(ctx.clone(), s)?.into_value()
            }
            Token::Shared(s, index) => {
                if let Some(Open::Object(object, key, _)) = open.last() {
                    define_shared_member(object, &keys, *key, &mut strings, index, s)?;
                    return Ok(());
                }
                strings.value(index, s)?
            }
            Token::End => match open.pop() {
                Some(Open::Array(array, _)) => array.into_value(),
                Some(Open::Object(object, ..)) => object.into_value(),
                None => return Ok(()),
            },
            Token::Undefined => rquickjs::Value::new_undefined(ctx.clone()),
            Token::Null => rquickjs::Value::new_null(ctx.clone()),
            Token::Bool(b) => rquickjs::Value::new_bool(ctx.clone(), b),
            Token::Number(n) => rquickjs::Value::new_number(ctx.clone(), n),
            Token::Bytes(b) => TypedArray::<u8>::new_copy(ctx.clone(), b)?.into_value(),
        };
        match open.last_mut() {
            Some(Open::Array(array, next)) => {
                define_index(array, *next, &value)?;
                *next += 1;
            }
            Some(Open::Object(object, key, _)) => define_member(object, &keys, *key, &value)?,
            None => root = Some(value),
        }
        Ok(())
    });
    match walked {
        Ok(()) => root.ok_or_else(|| {
            rquickjs::Error::new_into_js_message("value", "JavaScript", "a packed value is empty")
        }),
        Err(Failed::Js(e)) => Err(e),
        Err(Failed::Packed(e)) => Err(rquickjs::Error::new_into_js_message(
            "value",
            "JavaScript",
            e.to_string(),
        )),
    }
}

/// Key sequences seen while converting one result, each seen twice held by a template object
/// so that the engine shape for it stays alive.
///
/// QuickJS finds an existing shape when a property is added (the shape for "these keys, then
/// this one"), but only while some object still holds that shape: an object whose shape it
/// alone holds grows that shape in place. Built one after another, a thousand records with the
/// same keys would get a thousand private shapes (a hash table and a property table each) and
/// pay to build every one. With a template holding each prefix, every record from the second on
/// walks the same shared shapes; a key sequence seen once (a document's root) costs nothing.
/// Templates are made for the first [`Shapes::MAX_NODES`] prefixes of at most
/// [`Shapes::MAX_KEYS`] keys; past either cap, objects get shapes of their own, as before.
struct Shapes<'js> {
    nodes: Vec<ShapeNode<'js>>,
}

struct ShapeNode<'js> {
    parent: usize,
    key: usize,
    depth: usize,
    /// (key, node) for each key seen after this prefix.
    next: Vec<(usize, usize)>,
    /// Holds the prefix's shape, from the prefix's second use on (the empty prefix's shape the
    /// engine keeps).
    template: Option<Object<'js>>,
}

impl<'js> Shapes<'js> {
    const MAX_NODES: usize = 1024;
    const MAX_KEYS: usize = 64;

    fn new() -> Shapes<'js> {
        Shapes {
            nodes: vec![ShapeNode {
                parent: 0,
                key: 0,
                depth: 0,
                next: Vec::new(),
                template: None,
            }],
        }
    }

    /// The node for `at`'s keys followed by `key`: made on first use, given its template on
    /// the second; `None` past the caps.
    fn step(
        &mut self,
        ctx: &Ctx<'js>,
        keys: &Keys<'js>,
        at: usize,
        key: usize,
    ) -> rquickjs::Result<Option<usize>> {
        let Some(node) = self.nodes.get(at) else {
            return Ok(None);
        };
        if let Some(&(_, next)) = node.next.iter().find(|(k, _)| *k == key) {
            if self.nodes.get(next).is_some_and(|n| n.template.is_none()) {
                let template = self.template(ctx, keys, next)?;
                if let Some(node) = self.nodes.get_mut(next) {
                    node.template = Some(template);
                }
            }
            return Ok(Some(next));
        }
        if node.depth >= Self::MAX_KEYS || self.nodes.len() >= Self::MAX_NODES {
            return Ok(None);
        }
        let id = self.nodes.len();
        self.nodes.push(ShapeNode {
            parent: at,
            key,
            depth: node.depth + 1,
            next: Vec::new(),
            template: None,
        });
        if let Some(node) = self.nodes.get_mut(at) {
            node.next.push((key, id));
        }
        Ok(Some(id))
    }

    /// An object with node `at`'s keys in order (each value undefined): its shape is the one
    /// every object with those keys then finds.
    fn template(
        &self,
        ctx: &Ctx<'js>,
        keys: &Keys<'js>,
        at: usize,
    ) -> rquickjs::Result<Object<'js>> {
        let mut path = Vec::new();
        let mut walk = at;
        while walk != 0 {
            let Some(node) = self.nodes.get(walk) else {
                break;
            };
            path.push(node.key);
            walk = node.parent;
        }
        let template = Object::new(ctx.clone())?;
        let undefined = rquickjs::Value::new_undefined(ctx.clone());
        for &key in path.iter().rev() {
            define_member(&template, keys, key, &undefined)?;
        }
        Ok(template)
    }
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
    /// Spends one node carrying `bytes` of payload.
    fn spend(&mut self, path: &str, bytes: usize) -> Result<(), CrossError> {
        self.charge(path, bytes.saturating_add(NODE_BYTES))
    }

    /// Spends exactly `bytes`.
    fn charge(&mut self, path: &str, bytes: usize) -> Result<(), CrossError> {
        match self.left.checked_sub(bytes) {
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
            let Some(text) = value.as_string() else {
                return Ok(Value::String(String::new()));
            };
            // Each UTF-16 unit is at least one UTF-8 byte: a string the budget cannot hold is
            // refused before it is copied.
            let units = string_length(text);
            walk.charge(path, units)?;
            let s = text
                .to_string()
                .map_err(|e| fail(format!("is not a valid string ({e})")))?;
            walk.charge(path, s.len().saturating_sub(units))?;
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
