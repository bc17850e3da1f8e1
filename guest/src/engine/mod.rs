//! The few engine operations rquickjs does not wrap, in one place, in three parts: loading
//! and resolving modules and scripts from bytecode (here), the allocator behind every sandbox
//! runtime ([`alloc`]), and building values straight from their parts ([`values`]).
//!
//! A sandbox context has no `Eval` intrinsic, so it cannot compile source: every module it
//! runs arrives as bytecode written by the compiler runtime of this same process (see
//! `compile`). Loading the entry ourselves, rather than through the loader, is what lets a run
//! resolve the entry's whole static graph first, lock the resolver, and only then evaluate.

#![allow(unsafe_code)]

mod alloc;
mod values;

pub(crate) use alloc::{HeapPressure, RunAllocator};
pub(crate) use values::{
    Keys, SharedStrings, bytes_of, define_index, define_member, define_shared_member,
    define_string_member, string_length, without_gc,
};

use std::ptr::NonNull;

use rquickjs::module::Declared;
use rquickjs::qjs;
use rquickjs::{Ctx, Module, Object, Promise, Value};

/// Loads module bytecode into `ctx`.
///
/// `bytes` must be bytecode this process's compiler wrote (`compile::Compiler`): the engine
/// trusts bytecode completely, so bytecode from anywhere else must never reach this function.
pub(crate) fn load_module<'js>(
    ctx: &Ctx<'js>,
    bytes: &[u8],
) -> rquickjs::Result<Module<'js, Declared>> {
    // SAFETY: the bytes were produced by `Module::write` in this process's own engine build
    // (the compile cache holds nothing else), so they are valid bytecode for it.
    unsafe { Module::load(ctx.clone(), bytes) }
}

/// An entry module read from bytecode whose static graph has been resolved.
pub(crate) struct ResolvedEntry {
    module: NonNull<qjs::JSModuleDef>,
}

/// Reads the entry's bytecode and resolves its whole static import graph through the
/// runtime's resolver and loader, evaluating nothing.
pub(crate) fn load_and_resolve_entry(
    ctx: &Ctx<'_>,
    bytes: &[u8],
) -> rquickjs::Result<ResolvedEntry> {
    let raw = ctx.as_raw().as_ptr();
    // SAFETY: as for `load_module`, the bytes are this process's own compiler output; the
    // returned value is checked for an exception and for the module tag before use.
    unsafe {
        let value = qjs::JS_ReadObject(
            raw,
            bytes.as_ptr(),
            bytes.len() as _,
            (qjs::JS_READ_OBJ_BYTECODE | qjs::JS_READ_OBJ_ROM_DATA) as i32,
        );
        if qjs::JS_IsException(value) {
            return Err(rquickjs::Error::Exception);
        }
        if qjs::JS_VALUE_GET_TAG(value) != qjs::JS_TAG_MODULE {
            qjs::JS_FreeValue(raw, value);
            return Err(rquickjs::Error::Unknown);
        }
        let module =
            NonNull::new(qjs::JS_VALUE_GET_PTR(value).cast()).ok_or(rquickjs::Error::Unknown)?;
        // JS_ResolveModule walks every static import, calling our resolver and loader.
        if qjs::JS_ResolveModule(raw, value) < 0 {
            return Err(rquickjs::Error::Exception);
        }
        Ok(ResolvedEntry { module })
    }
}

impl ResolvedEntry {
    /// Links and evaluates the entry (dependencies first). Returns the evaluation promise.
    pub(crate) fn evaluate<'js>(&self, ctx: &Ctx<'js>) -> rquickjs::Result<Promise<'js>> {
        let raw = ctx.as_raw().as_ptr();
        // SAFETY: `module` was read into this context by `load_and_resolve_entry`; the engine
        // keeps module definitions alive for the context's lifetime. JS_EvalFunction consumes
        // one reference, so one is taken first (as rquickjs's own `Module::eval` does).
        unsafe {
            let value = qjs::JS_MKPTR(qjs::JS_TAG_MODULE, self.module.as_ptr().cast());
            qjs::JS_DupValue(raw, value);
            let result = qjs::JS_EvalFunction(raw, value);
            if qjs::JS_IsException(result) {
                return Err(rquickjs::Error::Exception);
            }
            let promise = Value::from_raw(ctx.clone(), result);
            promise.into_promise().ok_or(rquickjs::Error::Unknown)
        }
    }

    /// The entry's namespace object (after evaluation).
    pub(crate) fn namespace<'js>(&self, ctx: &Ctx<'js>) -> rquickjs::Result<Object<'js>> {
        let raw = ctx.as_raw().as_ptr();
        // SAFETY: as for `evaluate`; JS_GetModuleNamespace returns a new reference that
        // `Value::from_raw` takes ownership of.
        unsafe {
            let ns = qjs::JS_GetModuleNamespace(raw, self.module.as_ptr());
            if qjs::JS_IsException(ns) {
                return Err(rquickjs::Error::Exception);
            }
            Value::from_raw(ctx.clone(), ns)
                .into_object()
                .ok_or(rquickjs::Error::Unknown)
        }
    }
}

/// Compiles `source` as strict global script code into bytecode, in an eval-capable context,
/// without source text or debug information (the hardening samples are internal code whose
/// positions nobody reads, and a smaller script reads back faster in every run).
pub(crate) fn compile_script(ctx: &Ctx<'_>, name: &str, source: &str) -> rquickjs::Result<Vec<u8>> {
    let raw = ctx.as_raw().as_ptr();
    let name = std::ffi::CString::new(name)?;
    let text = std::ffi::CString::new(source)?;
    // SAFETY: both strings are NUL-terminated and outlive the calls; every returned value is
    // checked for an exception, and each reference taken is released exactly once.
    unsafe {
        let flags = (qjs::JS_EVAL_TYPE_GLOBAL
            | qjs::JS_EVAL_FLAG_STRICT
            | qjs::JS_EVAL_FLAG_COMPILE_ONLY) as i32;
        let function = qjs::JS_Eval(raw, text.as_ptr(), source.len() as _, name.as_ptr(), flags);
        if qjs::JS_IsException(function) {
            return Err(rquickjs::Error::Exception);
        }
        let mut length: qjs::size_t = 0;
        let buffer = qjs::JS_WriteObject(
            raw,
            &mut length,
            function,
            (qjs::JS_WRITE_OBJ_BYTECODE
                | qjs::JS_WRITE_OBJ_STRIP_SOURCE
                | qjs::JS_WRITE_OBJ_STRIP_DEBUG) as i32,
        );
        qjs::JS_FreeValue(raw, function);
        if buffer.is_null() {
            return Err(rquickjs::Error::Exception);
        }
        let bytes = std::slice::from_raw_parts(buffer, length as usize).to_vec();
        qjs::js_free(raw, buffer.cast());
        Ok(bytes)
    }
}

/// Runs script bytecode written by [`compile_script`] in `ctx`'s global scope and returns its
/// completion value.
pub(crate) fn eval_script<'js>(ctx: &Ctx<'js>, bytes: &[u8]) -> rquickjs::Result<Value<'js>> {
    let raw = ctx.as_raw().as_ptr();
    // SAFETY: the bytes are this process's own compiler output (see `load_module`); the
    // function value is consumed by JS_EvalFunction, whose result `Value::from_raw` owns.
    unsafe {
        let function = qjs::JS_ReadObject(
            raw,
            bytes.as_ptr(),
            bytes.len() as _,
            qjs::JS_READ_OBJ_BYTECODE as i32,
        );
        if qjs::JS_IsException(function) {
            return Err(rquickjs::Error::Exception);
        }
        let result = qjs::JS_EvalFunction(raw, function);
        if qjs::JS_IsException(result) {
            return Err(rquickjs::Error::Exception);
        }
        Ok(Value::from_raw(ctx.clone(), result))
    }
}

/// Defines `object[key] = value` as a data property that is neither writable, enumerable nor
/// configurable, replacing an existing configurable property (the attributes are set
/// explicitly, not inherited from the property being replaced).
pub(crate) fn lock_property<'js>(
    object: &Object<'js>,
    key: &str,
    value: Value<'js>,
) -> rquickjs::Result<()> {
    let ctx = object.ctx();
    let raw = ctx.as_raw().as_ptr();
    let key = std::ffi::CString::new(key)?;
    // SAFETY: `key` is NUL-terminated and outlives the calls; the atom taken is released once;
    // JS_DefinePropertyValue consumes one reference to the value, so one is taken for it (the
    // `Value` releases its own when dropped). Flags without the WRITABLE, ENUMERABLE and
    // CONFIGURABLE bits make all three false (JS_DefinePropertyValue sets their HAS_ bits).
    unsafe {
        let atom = qjs::JS_NewAtom(raw, key.as_ptr());
        if atom == qjs::JS_ATOM_NULL as qjs::JSAtom {
            return Err(rquickjs::Error::Exception);
        }
        let value = qjs::JS_DupValue(raw, value.as_raw());
        let result = qjs::JS_DefinePropertyValue(
            raw,
            object.as_raw(),
            atom,
            value,
            qjs::JS_PROP_THROW as i32,
        );
        qjs::JS_FreeAtom(raw, atom);
        if result < 0 {
            return Err(rquickjs::Error::Exception);
        }
        Ok(())
    }
}
