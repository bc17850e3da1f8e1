//! Reading guest values without converting them, and building host results in the guest
//! (`convert::packed_to_js`) straight from their parts.

#![allow(unsafe_code)]

use rquickjs::qjs;
use rquickjs::{Array, Ctx, Object, Value};

/// The bytes of an `ArrayBuffer` or of any typed array's view, copied out; `None` for anything
/// else.
pub(crate) fn bytes_of(value: &Value<'_>) -> Option<Vec<u8>> {
    use rquickjs::ArrayBuffer;
    let object = value.as_object()?;
    if let Some(buffer) = object.as_array_buffer() {
        // SAFETY: the slice is copied before any JavaScript can run (and so before anything
        // could detach or resize the buffer).
        return unsafe { buffer.as_slice::<u8>() }.ok().map(<[u8]>::to_vec);
    }
    let is_view = object.is_typed_array::<u8>()
        || object.is_typed_array::<i8>()
        || object.is_typed_array::<rquickjs::U8Clamped>()
        || object.is_typed_array::<u16>()
        || object.is_typed_array::<i16>()
        || object.is_typed_array::<u32>()
        || object.is_typed_array::<i32>()
        || object.is_typed_array::<f32>()
        || object.is_typed_array::<f64>()
        || object.is_typed_array::<i64>()
        || object.is_typed_array::<u64>();
    if !is_view {
        return None;
    }
    let buffer: ArrayBuffer = object.get("buffer").ok()?;
    let offset: usize = object
        .get::<_, f64>("byteOffset")
        .ok()
        .map(|v| v as usize)?;
    let length: usize = object
        .get::<_, f64>("byteLength")
        .ok()
        .map(|v| v as usize)?;
    // SAFETY: as above; the range is checked against the buffer before slicing.
    let all = unsafe { buffer.as_slice::<u8>() }.ok()?;
    all.get(offset..offset.checked_add(length)?)
        .map(<[u8]>::to_vec)
}

/// The length of a guest string in UTF-16 code units, read without converting it (so a
/// conversion can be refused, or a prefix taken, before a large string is copied).
pub(crate) fn string_length(text: &rquickjs::String<'_>) -> usize {
    let raw = text.ctx().as_raw().as_ptr();
    let mut length: i64 = 0;
    // SAFETY: `text` is a live string of this context; for a string, JS_GetLength reads the
    // engine's own length field (no getter can run) into `length`, a valid out-pointer.
    let status = unsafe { qjs::JS_GetLength(raw, text.as_raw(), &mut length) };
    if status < 0 {
        return 0;
    }
    usize::try_from(length).unwrap_or(0)
}

// Building host results in the guest (`convert::packed_to_js`): property keys made once per
// result, members defined straight from their bytes, and the cycle collector held off while a
// result that cannot contain garbage is built.

/// Property keys (atoms) for one conversion, released when dropped.
pub(crate) struct Keys<'js> {
    ctx: Ctx<'js>,
    atoms: Vec<qjs::JSAtom>,
}

impl<'js> Keys<'js> {
    /// The atom of each name, in order.
    pub(crate) fn new(ctx: &Ctx<'js>, names: &[String]) -> rquickjs::Result<Keys<'js>> {
        let mut keys = Keys {
            ctx: ctx.clone(),
            atoms: Vec::with_capacity(names.len()),
        };
        for name in names {
            // SAFETY: the pointer and length describe `name`'s bytes, alive for the call. The
            // atom is released by `drop`.
            let atom = unsafe {
                qjs::JS_NewAtomLen(ctx.as_raw().as_ptr(), name.as_ptr().cast(), name.len() as _)
            };
            if atom == qjs::JS_ATOM_NULL {
                return Err(rquickjs::Error::Exception);
            }
            keys.atoms.push(atom);
        }
        Ok(keys)
    }

    fn atom(&self, key: usize) -> rquickjs::Result<qjs::JSAtom> {
        // A `match`, not `ok_or`: an error value made and dropped per member shows up.
        match self.atoms.get(key) {
            Some(&atom) => Ok(atom),
            None => Err(rquickjs::Error::Unknown),
        }
    }
}

impl Drop for Keys<'_> {
    fn drop(&mut self) {
        for &atom in &self.atoms {
            // SAFETY: each atom was made by `Keys::new` in this context and is released once.
            unsafe { qjs::JS_FreeAtom(self.ctx.as_raw().as_ptr(), atom) };
        }
    }
}

/// Flags of an ordinary data member (an object literal's): writable, enumerable,
/// configurable; a failure throws.
const MEMBER_FLAGS: i32 = (qjs::JS_PROP_C_W_E | qjs::JS_PROP_THROW) as i32;

/// Defines `object[key] = value` as an ordinary data member: defined, not assigned, so a
/// `__proto__` key stays an ordinary key and no setter on the prototype chain runs (what
/// `Object::prop` with a writable, enumerable, configurable `Property` does).
pub(crate) fn define_member<'js>(
    object: &Object<'js>,
    keys: &Keys<'js>,
    key: usize,
    value: &Value<'js>,
) -> rquickjs::Result<()> {
    let atom = keys.atom(key)?;
    let ctx = object.ctx().as_raw().as_ptr();
    // SAFETY: `object`, `value` and `atom` are live in this context. JS_DefinePropertyValue
    // takes one reference to the value, so one is added first; the caller keeps its own.
    let defined = unsafe {
        let value = qjs::JS_DupValue(ctx, value.as_raw());
        qjs::JS_DefinePropertyValue(ctx, object.as_raw(), atom, value, MEMBER_FLAGS)
    };
    if defined < 0 {
        return Err(rquickjs::Error::Exception);
    }
    Ok(())
}

/// Defines `array[index] = value` as an ordinary element: defined, not assigned, so no index
/// setter a body planted on `Array.prototype` or `Object.prototype` runs while a host result is
/// built (an assignment would call it with the half-built array).
pub(crate) fn define_index<'js>(
    array: &Array<'js>,
    index: usize,
    value: &Value<'js>,
) -> rquickjs::Result<()> {
    let index = u32::try_from(index).map_err(|_| {
        rquickjs::Error::new_into_js_message("value", "JavaScript", "an array is too long")
    })?;
    let ctx = array.ctx().as_raw().as_ptr();
    // SAFETY: `array` and `value` are live in this context. JS_DefinePropertyValueUint32 takes
    // one reference to the value, so one is added first; the caller keeps its own.
    let defined = unsafe {
        let value = qjs::JS_DupValue(ctx, value.as_raw());
        qjs::JS_DefinePropertyValueUint32(ctx, array.as_raw(), index, value, MEMBER_FLAGS)
    };
    if defined < 0 {
        return Err(rquickjs::Error::Exception);
    }
    Ok(())
}

/// [`define_member`] with a new string made of `s`, without a `Value` in between.
pub(crate) fn define_string_member<'js>(
    object: &Object<'js>,
    keys: &Keys<'js>,
    key: usize,
    s: &str,
) -> rquickjs::Result<()> {
    let atom = keys.atom(key)?;
    let ctx = object.ctx().as_raw().as_ptr();
    // SAFETY: the pointer and length describe `s`'s bytes, alive for the call; the new string
    // is checked for an exception before use, and JS_DefinePropertyValue takes its only
    // reference (releasing it whether or not the definition succeeds).
    let defined = unsafe {
        let value = qjs::JS_NewStringLen(ctx, s.as_ptr().cast(), s.len() as _);
        if qjs::JS_IsException(value) {
            return Err(rquickjs::Error::Exception);
        }
        qjs::JS_DefinePropertyValue(ctx, object.as_raw(), atom, value, MEMBER_FLAGS)
    };
    if defined < 0 {
        return Err(rquickjs::Error::Exception);
    }
    Ok(())
}

/// Runs `build` with the cycle collector held off, for building a host result: everything
/// `build` makes is reachable from the result, so a collection in the middle finds nothing to
/// free and only walks the growing heap (for a large result, over and over: the threshold
/// grows by half the heap each time). Afterwards the old threshold is back, so the next
/// allocation that checks it collects once, as it would have. The memory limit is the
/// runtime's allocation accounting, which this does not touch.
pub(crate) fn without_gc<R>(ctx: &Ctx<'_>, build: impl FnOnce() -> R) -> R {
    struct Restore(*mut qjs::JSRuntime, qjs::size_t);
    impl Drop for Restore {
        fn drop(&mut self) {
            // SAFETY: the runtime outlives the conversion this guard is dropped at the end of.
            unsafe { qjs::JS_SetGCThreshold(self.0, self.1) };
        }
    }
    // SAFETY: a context's runtime is live while the context is; setting the threshold only
    // changes when the engine decides to collect.
    let _restore = unsafe {
        let rt = qjs::JS_GetRuntime(ctx.as_raw().as_ptr());
        let restore = Restore(rt, qjs::JS_GetGCThreshold(rt));
        qjs::JS_SetGCThreshold(rt, qjs::size_t::MAX);
        restore
    };
    build()
}

/// The shared strings of one conversion (`nodetool_protocol::packed`), by index: each made
/// once, at its first occurrence, and held until dropped.
pub(crate) struct SharedStrings<'js> {
    ctx: Ctx<'js>,
    values: Vec<qjs::JSValue>,
}

impl<'js> SharedStrings<'js> {
    pub(crate) fn new(ctx: &Ctx<'js>) -> SharedStrings<'js> {
        SharedStrings {
            ctx: ctx.clone(),
            values: Vec::new(),
        }
    }

    /// Shared string `index`, made of `s` at its first occurrence (indexes come in order),
    /// still held by the table.
    fn raw(&mut self, index: u32, s: &str) -> rquickjs::Result<qjs::JSValue> {
        let index = index as usize;
        if let Some(&value) = self.values.get(index) {
            return Ok(value);
        }
        if index != self.values.len() {
            return Err(rquickjs::Error::Unknown);
        }
        // SAFETY: the pointer and length describe `s`'s bytes, alive for the call; the string
        // is checked for an exception, and the table keeps its reference until `drop`.
        unsafe {
            let value =
                qjs::JS_NewStringLen(self.ctx.as_raw().as_ptr(), s.as_ptr().cast(), s.len() as _);
            if qjs::JS_IsException(value) {
                return Err(rquickjs::Error::Exception);
            }
            self.values.push(value);
            Ok(value)
        }
    }

    /// Shared string `index` as a value of its own.
    pub(crate) fn value(&mut self, index: u32, s: &str) -> rquickjs::Result<Value<'js>> {
        let value = self.raw(index, s)?;
        // SAFETY: the table holds `value`; the new reference is owned by the returned `Value`.
        Ok(unsafe {
            Value::from_raw(
                self.ctx.clone(),
                qjs::JS_DupValue(self.ctx.as_raw().as_ptr(), value),
            )
        })
    }
}

impl Drop for SharedStrings<'_> {
    fn drop(&mut self) {
        for &value in &self.values {
            // SAFETY: each value is the table's own reference, released once.
            unsafe { qjs::JS_FreeValue(self.ctx.as_raw().as_ptr(), value) };
        }
    }
}

/// [`define_member`] with shared string `index` (made of `s` at its first occurrence).
pub(crate) fn define_shared_member<'js>(
    object: &Object<'js>,
    keys: &Keys<'js>,
    key: usize,
    strings: &mut SharedStrings<'js>,
    index: u32,
    s: &str,
) -> rquickjs::Result<()> {
    let atom = keys.atom(key)?;
    let value = strings.raw(index, s)?;
    let ctx = object.ctx().as_raw().as_ptr();
    // SAFETY: `object`, `atom` and the table's `value` are live in this context;
    // JS_DefinePropertyValue takes the reference added for it.
    let defined = unsafe {
        let value = qjs::JS_DupValue(ctx, value);
        qjs::JS_DefinePropertyValue(ctx, object.as_raw(), atom, value, MEMBER_FLAGS)
    };
    if defined < 0 {
        return Err(rquickjs::Error::Exception);
    }
    Ok(())
}
