//! The few engine operations rquickjs does not wrap, in one place.
//!
//! A sandbox context has no `Eval` intrinsic, so it cannot compile source: every module it
//! runs arrives as bytecode written by the compiler runtime of this same process (see
//! `compile`). Loading the entry ourselves, rather than through the loader, is what lets a run
//! resolve the entry's whole static graph first, lock the resolver, and only then evaluate.

#![allow(unsafe_code)]

use std::ptr::NonNull;

use rquickjs::module::Declared;
use rquickjs::qjs;
use rquickjs::{Array, Ctx, Module, Object, Promise, Value};

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

/// The allocator behind every sandbox runtime.
///
/// QuickJS serves small allocations from 4 KiB arenas it takes from this allocator, and a run
/// frees every one of them when its runtime is dropped. Handed straight to the system
/// allocator, that memory went back to the kernel at the end of each run (the heap top was
/// trimmed) and was faulted in again, zeroed, by the next run. Here each thread keeps a bounded
/// stack of freed arena-sized chunks and hands them to its next run instead; everything else
/// goes to the system allocator. A run still starts from a fresh runtime: QuickJS initializes
/// every block it takes (`calloc` requests are zeroed here), exactly as it must with recycled
/// `malloc` memory, and the memory limit is enforced by the runtime's own accounting.
///
/// It also holds the run to a hard cap on the bytes it has handed out. QuickJS's memory limit
/// counts the blocks it asked for, not the 4 KiB arenas those blocks pin: a body that keeps one
/// small block alive per arena, across the size classes, held over 500 MB under a 64 MiB limit.
/// Past the cap an allocation fails, which QuickJS reports as out of memory.
///
/// It also tells the run whether its heap came within [`PRESSURE_SLACK`] of the memory limit
/// ([`HeapPressure`]), because QuickJS cannot always say so itself: when the allocation that
/// fails is small, making the `InternalError: out of memory` fails too, and QuickJS throws
/// `null` instead (`JS_ThrowError2`), or, failing while it settles a promise, leaves the
/// promise pending for good. Every byte QuickJS counts against its limit lies in a block this
/// allocator handed out (its block headers are at least as large as the 8 bytes QuickJS adds
/// per block), so its heap can only have been at its limit if `held` was too.
pub(crate) struct RunAllocator {
    /// Usable bytes of every live block this allocator handed out.
    held: usize,
    /// The most `held` may reach.
    cap: usize,
    /// `held` at which the run counts as having reached its memory limit.
    alarm: usize,
    pressure: HeapPressure,
}

/// How close to the memory limit a heap must come to count as having reached it: far more than
/// the error object QuickJS fails to make (a few hundred bytes), far less than any heap that
/// merely ran large.
pub(crate) const PRESSURE_SLACK: usize = 256 * 1024;

/// Whether a run's heap reached its memory limit (see [`RunAllocator`]); read after the engine
/// reported something only an exhausted heap explains.
#[derive(Clone, Default)]
pub(crate) struct HeapPressure(
    std::rc::Rc<std::cell::Cell<bool>>,
    std::rc::Rc<std::cell::Cell<usize>>,
);

impl HeapPressure {
    /// Whether the heap reached its limit (or the allocator refused a block) at some point.
    pub(crate) fn reached(&self) -> bool {
        self.0.get()
    }

    /// The most bytes the heap held at once.
    pub(crate) fn peak(&self) -> usize {
        self.1.get()
    }
}

/// Every block carries its usable size in front of it (16 bytes keeps the 16-byte alignment).
const BLOCK_HEADER: usize = 16;
const BLOCK_ALIGN: usize = 16;
/// The recycled class: requests from `CHUNK_MIN` to `CHUNK` bytes get a whole chunk. QuickJS
/// asks for its arenas in that band (a 4 KiB arena less the unused tail, at most one block of
/// at most 512 bytes); anything else in it wastes at most 12.5%.
const CHUNK: usize = 4096;
const CHUNK_MIN: usize = CHUNK - 512;
/// Chunks a thread keeps between runs (1 MiB): enough for a typical run's arenas; a bigger run
/// returns the excess to the system allocator.
const CHUNKS_KEPT: usize = 256;

struct ChunkCache(std::cell::RefCell<Vec<NonNull<u8>>>);

impl Drop for ChunkCache {
    fn drop(&mut self) {
        for chunk in self.0.get_mut().drain(..) {
            // SAFETY: every cached pointer came from `std::alloc::alloc` with `chunk_layout()`
            // and is owned by the cache alone.
            unsafe { std::alloc::dealloc(chunk.as_ptr(), chunk_layout()) };
        }
    }
}

thread_local! {
    static CHUNK_CACHE: ChunkCache = const { ChunkCache(std::cell::RefCell::new(Vec::new())) };
}

/// The memory of one chunk: its header and `CHUNK` usable bytes.
#[repr(C, align(16))]
struct Chunk([u8; CHUNK + BLOCK_HEADER]);

fn chunk_layout() -> std::alloc::Layout {
    std::alloc::Layout::new::<Chunk>()
}

/// The layout of a block with `usable` bytes, or `None` when the size overflows.
fn block_layout(usable: usize) -> Option<std::alloc::Layout> {
    if usable == CHUNK {
        return Some(chunk_layout());
    }
    let total = usable.checked_add(BLOCK_HEADER)?;
    std::alloc::Layout::from_size_align(total, BLOCK_ALIGN).ok()
}

/// The usable size a request of `size` bytes gets.
fn usable_for(size: usize) -> Option<usize> {
    if (CHUNK_MIN..=CHUNK).contains(&size) {
        return Some(CHUNK);
    }
    size.max(1).checked_next_multiple_of(BLOCK_ALIGN)
}

impl RunAllocator {
    /// An allocator that hands out at most `cap` bytes at once.
    #[cfg(test)]
    fn new(cap: usize) -> RunAllocator {
        RunAllocator {
            held: 0,
            cap,
            alarm: usize::MAX,
            pressure: HeapPressure::default(),
        }
    }

    /// The allocator of a runtime whose QuickJS memory limit is `limit`: it hands out at most
    /// [`RunAllocator::cap_for`] bytes at once and reports to `pressure` when the heap comes
    /// within [`PRESSURE_SLACK`] of `limit`.
    pub(crate) fn for_limit(limit: usize, pressure: HeapPressure) -> RunAllocator {
        RunAllocator {
            held: 0,
            cap: Self::cap_for(limit),
            alarm: limit.saturating_sub(PRESSURE_SLACK),
            pressure,
        }
    }

    /// The cap for a run whose QuickJS memory limit is `limit`: room for the arenas' overhead
    /// on an ordinary heap, not for a heap shaped to pin arenas.
    fn cap_for(limit: usize) -> usize {
        limit.saturating_mul(2).saturating_add(16 * 1024 * 1024)
    }

    /// Counts `usable` more bytes, unless that passes the cap.
    fn admit(&mut self, usable: usize) -> bool {
        match self.held.checked_add(usable) {
            Some(held) if held <= self.cap => {
                self.held = held;
                if held >= self.alarm {
                    self.pressure.0.set(true);
                }
                if held > self.pressure.1.get() {
                    self.pressure.1.set(held);
                }
                true
            }
            _ => {
                self.pressure.0.set(true);
                false
            }
        }
    }

    fn release(&mut self, usable: usize) {
        self.held = self.held.saturating_sub(usable);
    }

    fn take_chunk() -> *mut u8 {
        let cached = CHUNK_CACHE
            .try_with(|cache| cache.0.borrow_mut().pop())
            .ok()
            .flatten();
        match cached {
            Some(chunk) => chunk.as_ptr(),
            // SAFETY: the layout has a non-zero size.
            None => unsafe { std::alloc::alloc(chunk_layout()) },
        }
    }

    /// # Safety
    /// `base` must be a chunk from `take_chunk`, not used afterwards.
    unsafe fn give_chunk(base: *mut u8) {
        let Some(chunk) = NonNull::new(base) else {
            return;
        };
        let kept = CHUNK_CACHE
            .try_with(|cache| {
                let mut cache = cache.0.borrow_mut();
                if cache.len() < CHUNKS_KEPT {
                    cache.push(chunk);
                    true
                } else {
                    false
                }
            })
            .unwrap_or(false);
        if !kept {
            // SAFETY: the chunk was allocated with `chunk_layout()` and is no longer used.
            unsafe { std::alloc::dealloc(base, chunk_layout()) };
        }
    }

    /// The header of the block whose user pointer is `ptr`.
    ///
    /// # Safety
    /// `ptr` must be a live block from this allocator.
    unsafe fn base_and_usable(ptr: *mut u8) -> (*mut u8, usize) {
        // SAFETY: every block starts BLOCK_HEADER bytes before its user pointer with its usable
        // size written there (aligned for usize).
        unsafe {
            let base = ptr.sub(BLOCK_HEADER);
            (base, base.cast::<usize>().read())
        }
    }
}

// SAFETY: every pointer returned is null or the user part of a block at least as large as
// requested and 16-byte aligned (BLOCK_HEADER is a multiple of BLOCK_ALIGN); the usable size in
// its header is exact and never changes while the block lives, so QuickJS's accounting (which
// adds it on allocation and subtracts it on free) balances; `dealloc` and `realloc` accept only
// blocks from this allocator, which QuickJS guarantees by construction (one allocator per
// runtime, one thread per runtime).
unsafe impl rquickjs::allocator::Allocator for RunAllocator {
    fn alloc(&mut self, size: usize) -> *mut u8 {
        let Some(usable) = usable_for(size) else {
            return std::ptr::null_mut();
        };
        if !self.admit(usable) {
            return std::ptr::null_mut();
        }
        let base = if usable == CHUNK {
            Self::take_chunk()
        } else {
            match block_layout(usable) {
                // SAFETY: the layout has a non-zero size.
                Some(layout) => unsafe { std::alloc::alloc(layout) },
                None => std::ptr::null_mut(),
            }
        };
        if base.is_null() {
            self.release(usable);
            return base;
        }
        // SAFETY: the block has room for the header and `usable` bytes after it.
        unsafe {
            base.cast::<usize>().write(usable);
            base.add(BLOCK_HEADER)
        }
    }

    fn calloc(&mut self, count: usize, size: usize) -> *mut u8 {
        let Some(usable) = count.checked_mul(size).and_then(usable_for) else {
            return std::ptr::null_mut();
        };
        if usable == CHUNK {
            let ptr = self.alloc(usable);
            if !ptr.is_null() {
                // SAFETY: a chunk has `CHUNK` usable bytes; a recycled one is dirty.
                unsafe { ptr.write_bytes(0, CHUNK) };
            }
            return ptr;
        }
        // Larger blocks come zeroed from the system allocator, which can hand out fresh pages
        // without writing them (a big ArrayBuffer costs nothing until it is used).
        let Some(layout) = block_layout(usable) else {
            return std::ptr::null_mut();
        };
        if !self.admit(usable) {
            return std::ptr::null_mut();
        }
        // SAFETY: the layout has a non-zero size.
        let base = unsafe { std::alloc::alloc_zeroed(layout) };
        if base.is_null() {
            self.release(usable);
            return base;
        }
        // SAFETY: the block has room for the header and `usable` bytes after it.
        unsafe {
            base.cast::<usize>().write(usable);
            base.add(BLOCK_HEADER)
        }
    }

    unsafe fn dealloc(&mut self, ptr: *mut u8) {
        if ptr.is_null() {
            return;
        }
        // SAFETY: the caller passes a live block of this allocator.
        let (base, usable) = unsafe { Self::base_and_usable(ptr) };
        self.release(usable);
        if usable == CHUNK {
            // SAFETY: a CHUNK-sized block is always a chunk from `take_chunk`.
            unsafe { Self::give_chunk(base) };
        } else if let Some(layout) = block_layout(usable) {
            // SAFETY: the block was allocated with this very layout.
            unsafe { std::alloc::dealloc(base, layout) };
        }
    }

    unsafe fn realloc(&mut self, ptr: *mut u8, new_size: usize) -> *mut u8 {
        if ptr.is_null() {
            return self.alloc(new_size);
        }
        // SAFETY: the caller passes a live block of this allocator.
        let (base, usable) = unsafe { Self::base_and_usable(ptr) };
        let Some(new_usable) = usable_for(new_size) else {
            return std::ptr::null_mut();
        };
        if new_usable == usable {
            return ptr;
        }
        if usable != CHUNK && new_usable != CHUNK {
            let (Some(old), Some(new)) = (block_layout(usable), block_layout(new_usable)) else {
                return std::ptr::null_mut();
            };
            let growth = new_usable.saturating_sub(usable);
            if !self.admit(growth) {
                return std::ptr::null_mut();
            }
            // SAFETY: `base` was allocated with `old`; the new size is non-zero and fits
            // `isize` (checked by `block_layout`). On failure the old block stays valid.
            let moved = unsafe { std::alloc::realloc(base, old, new.size()) };
            if moved.is_null() {
                self.release(growth);
                return moved;
            }
            self.release(usable.saturating_sub(new_usable));
            // SAFETY: the block has room for the header and `new_usable` bytes.
            unsafe {
                moved.cast::<usize>().write(new_usable);
                return moved.add(BLOCK_HEADER);
            }
        }
        // Into or out of the chunk class: a new block, the contents copied.
        let fresh = self.alloc(new_size);
        if fresh.is_null() {
            return fresh;
        }
        // SAFETY: both blocks are live and distinct; the copy fits both.
        unsafe {
            std::ptr::copy_nonoverlapping(ptr, fresh, usable.min(new_usable));
            self.dealloc(ptr);
        }
        fresh
    }

    unsafe fn usable_size(ptr: *mut u8) -> usize {
        if ptr.is_null() {
            return 0;
        }
        // SAFETY: QuickJS asks only about live blocks of this allocator.
        unsafe { Self::base_and_usable(ptr).1 }
    }
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

#[cfg(test)]
mod run_allocator_tests {
    #[test]
    fn the_cap_bounds_what_is_handed_out_at_once() {
        let mut allocator = RunAllocator::new(3 * CHUNK);
        // SAFETY: every pointer passed back is a live block of this allocator.
        unsafe {
            let a = allocator.alloc(CHUNK);
            let b = allocator.alloc(CHUNK);
            let c = allocator.calloc(1, CHUNK);
            assert!(!a.is_null() && !b.is_null() && !c.is_null());
            assert!(allocator.alloc(16).is_null(), "past the cap");
            assert!(
                allocator.realloc(a, 2 * CHUNK).is_null(),
                "a growth past the cap"
            );
            allocator.dealloc(b);
            let d = allocator.alloc(CHUNK);
            assert!(!d.is_null(), "a freed block makes room again");
            allocator.dealloc(c);
            // Out of the chunk class: the small block is made before the chunk is freed.
            let small = allocator.realloc(a, 64);
            assert!(!small.is_null());
            let e = allocator.alloc(CHUNK);
            assert!(!e.is_null(), "a shrink makes room");
            for p in [small, d, e] {
                allocator.dealloc(p);
            }
            assert_eq!(allocator.held, 0);
        }
    }

    use rquickjs::allocator::Allocator as _;

    use super::{CHUNK, RunAllocator};

    #[test]
    fn blocks_keep_their_contents_across_classes_and_recycled_chunks_are_zeroed() {
        let mut allocator = RunAllocator::new(usize::MAX);
        // SAFETY: every pointer passed back is a live block of this allocator, used within the
        // usable size it reports.
        unsafe {
            let small = allocator.alloc(100);
            assert!(!small.is_null());
            assert_eq!(RunAllocator::usable_size(small), 112);
            for i in 0..100 {
                small.add(i).write(i as u8);
            }
            let chunk = allocator.realloc(small, 4_000);
            assert_eq!(RunAllocator::usable_size(chunk), CHUNK);
            assert!((0..100).all(|i| chunk.add(i).read() == i as u8));
            chunk.write_bytes(0xAA, CHUNK);
            allocator.dealloc(chunk);

            let zeroed = allocator.calloc(1, 3_900);
            assert_eq!(RunAllocator::usable_size(zeroed), CHUNK);
            assert!((0..CHUNK).all(|i| zeroed.add(i).read() == 0));
            zeroed.write(7);
            let large = allocator.realloc(zeroed, 10_000);
            assert_eq!(RunAllocator::usable_size(large), 10_000);
            assert_eq!(large.read(), 7);
            let larger = allocator.realloc(large, 100_000);
            assert_eq!(larger.read(), 7);
            allocator.dealloc(larger);

            let big = allocator.calloc(1_000, 1_000);
            assert!(
                (0..1_000_000)
                    .step_by(4_096)
                    .all(|i| big.add(i).read() == 0)
            );
            allocator.dealloc(big);
        }
    }
}
