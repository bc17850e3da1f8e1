//! The allocator behind every sandbox runtime ([`RunAllocator`]): arena-sized chunks recycled
//! per thread, a hard cap on the bytes a run has been handed, and the heap-pressure signal.

#![allow(unsafe_code)]

use std::ptr::NonNull;

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
