//! The refcounted f32 buffer behind every tensor, the library's own accounting of live and
//! peak storage bytes (the `peak_live_mb` of the benchmarks), and the cache of freed buffers
//! that new tensors reuse.
//!
//! # The buffer cache
//! A training step allocates the same large buffers every step. Fresh from the allocator,
//! each one costs a page fault per 4 KiB and a memset (W6 spent about 30% of its forward pass
//! there, W7 most of its non-GEMM time). So a dropped [`Storage`] of at least
//! 64 KiB goes to a cache keyed by its length, and [`buffer`] hands it
//! out again. A cached buffer holds stale values: [`buffer`]'s callers overwrite every element,
//! and [`zeroed`] clears it first. The cache holds at most [`buffer_cache_limit`] bytes
//! (default 1 GiB; [`set_buffer_cache_limit`] changes it, 0 turns caching off), freeing the
//! buffers of other lengths first when a new one does not fit, and [`clear_buffer_cache`]
//! returns everything to the allocator. Cached bytes are not live bytes.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};

use parking_lot::Mutex;

use super::size::Size;
use crate::error::{fail, ErrorKind, Result};

// Relaxed everywhere: these are statistics, not synchronization. No other memory is published
// through them, and readers accept a value that is momentarily stale.
static LIVE_BYTES: AtomicUsize = AtomicUsize::new(0);
static PEAK_BYTES: AtomicUsize = AtomicUsize::new(0);

/// Buffers shorter than this (64 KiB) go straight back to the allocator, which serves small
/// sizes from warm memory anyway.
pub(crate) const CACHE_MIN_ELEMENTS: usize = 1 << 14;

const BYTES: usize = std::mem::size_of::<f32>();

/// Buffers up to this many floats (4 KiB) are allocated plainly and cleared, larger ones with a
/// zeroed allocation (fresh zero pages, no memset).
const SMALL_ELEMENTS: usize = 1 << 10;

/// Freed buffers by length, and their total bytes.
struct Cache {
    by_len: HashMap<usize, Vec<Vec<f32>>>,
    bytes: usize,
}

impl Cache {
    /// A cached buffer of length `len`, if any (an emptied length leaves the map).
    fn pop(&mut self, len: usize) -> Option<Vec<f32>> {
        let list = self.by_len.get_mut(&len)?;
        let v = list.pop()?;
        if list.is_empty() {
            self.by_len.remove(&len);
        }
        self.bytes -= len * BYTES;
        Some(v)
    }

    /// Frees one cached buffer, of another length than `keep` when there is one; false when
    /// the cache is empty.
    fn evict(&mut self, keep: usize) -> bool {
        let len = self.by_len.keys().copied().find(|&len| len != keep);
        match len.or_else(|| self.by_len.contains_key(&keep).then_some(keep)) {
            Some(len) => self.pop(len).is_some(),
            None => false,
        }
    }
}

static CACHE: Mutex<Option<Cache>> = Mutex::new(None);
// Relaxed: a limit read on each free; a momentarily stale value only caches one buffer more or less.
static CACHE_LIMIT: AtomicUsize = AtomicUsize::new(DEFAULT_BUFFER_CACHE_BYTES);

/// The buffer cache's default limit: 1 GiB.
pub(crate) const DEFAULT_BUFFER_CACHE_BYTES: usize = 1 << 30;

/// The one fallible allocation of a tensor-sized buffer: `n` zeros for op `op`.
///
/// A zeroed allocation (`calloc` semantics, as `vec![0.0; n]` has, so large buffers come as
/// fresh zero pages with no memset) whose failure is an error rather than a process abort.
/// What the allocator grants is what Linux's overcommit policy grants: a request beyond it
/// (such as 2^40 floats on this machine) is refused here; one below it that the machine later
/// cannot back ends the process when the pages are touched, as for any program.
///
/// # Errors
/// `OutOfMemory { op, bytes }`.
pub(crate) fn alloc(op: &'static str, n: usize) -> Result<Vec<f32>> {
    let bytes = Size::bytes(n);
    let layout = match bytes.filter(|&b| b <= isize::MAX as usize) {
        Some(_) => std::alloc::Layout::array::<f32>(n).ok(),
        None => None,
    };
    let Some(layout) = layout else {
        return fail(ErrorKind::OutOfMemory { op, bytes: bytes.unwrap_or(usize::MAX) });
    };
    if n == 0 {
        return Ok(Vec::new());
    }
    let ptr = if n <= SMALL_ELEMENTS {
        // A small buffer: the allocator's plain fast path and a short clear (a zeroed request
        // takes a slower path in some allocators, and small blocks come from warm memory).
        // SAFETY: `layout` has a non-zero size (n > 0 floats), as `alloc` requires; the block
        // it returns, when non-null, holds `layout.size()` writable bytes.
        unsafe {
            // `black_box`: else the compiler folds the allocation and the clear back into one
            // zeroed allocation.
            let p = std::hint::black_box(std::alloc::alloc(layout));
            if !p.is_null() {
                std::ptr::write_bytes(p, 0, layout.size());
            }
            p
        }
    } else {
        // SAFETY: `layout` has a non-zero size (n > 0 floats), as `alloc_zeroed` requires.
        unsafe { std::alloc::alloc_zeroed(layout) }
    }
    .cast::<f32>();
    if ptr.is_null() {
        return fail(ErrorKind::OutOfMemory { op, bytes: layout.size() });
    }
    // SAFETY: `ptr` is non-null and was allocated by the global allocator with the layout of
    // `[f32; n]`, which is the layout a `Vec<f32>` of capacity `n` frees with; all `n` elements
    // are initialized (all-zero bytes are the f32 value 0.0), so length `n` is valid.
    Ok(unsafe { Vec::from_raw_parts(ptr, n, n) })
}

/// A buffer of `n` floats with unspecified (but initialized) values: a cached one when there
/// is one of that length, else a fresh zeroed allocation ([`alloc`]). Callers overwrite every
/// element.
///
/// # Errors
/// `OutOfMemory` as [`alloc`].
pub(crate) fn buffer(op: &'static str, n: usize) -> Result<Vec<f32>> {
    if n >= CACHE_MIN_ELEMENTS {
        if let Some(v) = CACHE.lock().as_mut().and_then(|cache| cache.pop(n)) {
            return Ok(v);
        }
    }
    alloc(op, n)
}

/// A buffer of `n` zeros (a cached one cleared, or a fresh allocation).
///
/// # Errors
/// `OutOfMemory` as [`alloc`].
pub(crate) fn zeroed(op: &'static str, n: usize) -> Result<Vec<f32>> {
    let mut v = buffer(op, n)?;
    v.fill(0.0);
    Ok(v)
}

/// Offers a freed buffer to the cache.
fn recycle(v: Vec<f32>) {
    let n = v.len();
    let bytes = n * BYTES;
    let limit = CACHE_LIMIT.load(Ordering::Relaxed);
    // Buffers with spare capacity would be handed out too small; they go back to the allocator.
    if n < CACHE_MIN_ELEMENTS || v.capacity() != n || bytes > limit {
        return;
    }
    let mut guard = CACHE.lock();
    let cache = guard.get_or_insert_with(|| Cache { by_len: HashMap::new(), bytes: 0 });
    // Make room by freeing buffers of other lengths (then of this one) first.
    while cache.bytes + bytes > limit && cache.evict(n) {}
    if cache.bytes + bytes <= limit {
        cache.bytes += bytes;
        cache.by_len.entry(n).or_default().push(v);
    }
}

/// A kernel's temporary buffer, taken from the cache and given back when dropped.
pub(crate) struct Scratch(Vec<f32>);

impl Scratch {
    /// `n` floats of unspecified value (see [`buffer`]).
    ///
    /// # Errors
    /// `OutOfMemory` as [`alloc`].
    pub(crate) fn new(op: &'static str, n: usize) -> Result<Scratch> {
        Ok(Scratch(buffer(op, n)?))
    }

    /// `n` floats for a temporary no larger than a buffer its caller already allocated through
    /// [`alloc`] (so the request was proven satisfiable once); a failure here aborts like any
    /// `Vec`. The one exception to "kernels allocate nothing fallible-sized": its single use is
    /// attention's `gemm`-crate path (`kernels/attention/tile.rs`), which packs a product for a
    /// strided destination deep inside a parallel chunk, where the block is no larger than the
    /// output or the chunk scratch the op already allocated. Every other kernel temporary comes
    /// from the caller; keep it that way.
    pub(crate) fn within_checked(n: usize) -> Scratch {
        if n >= CACHE_MIN_ELEMENTS {
            if let Some(v) = CACHE.lock().as_mut().and_then(|cache| cache.pop(n)) {
                return Scratch(v);
            }
        }
        Scratch(vec![0.0; n])
    }

    /// Wraps a buffer so that it returns to the cache.
    pub(crate) fn from_vec(v: Vec<f32>) -> Scratch {
        Scratch(v)
    }
}

impl std::ops::Deref for Scratch {
    type Target = [f32];
    fn deref(&self) -> &[f32] {
        &self.0
    }
}

impl std::ops::DerefMut for Scratch {
    fn deref_mut(&mut self) -> &mut [f32] {
        &mut self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        recycle(std::mem::take(&mut self.0));
    }
}

/// Sets the most bytes the buffer cache keeps (0 turns caching off and frees what it holds);
/// the same setting as [`crate::runtime::RuntimeConfig::buffer_cache_bytes`].
pub fn set_buffer_cache_limit(bytes: usize) {
    CACHE_LIMIT.store(bytes, Ordering::Relaxed);
    if let Some(cache) = CACHE.lock().as_mut() {
        while cache.bytes > bytes && cache.evict(0) {}
    }
}

/// The most bytes the buffer cache keeps.
pub fn buffer_cache_limit() -> usize {
    CACHE_LIMIT.load(Ordering::Relaxed)
}

/// Bytes held by the buffer cache now (freed tensor buffers kept for reuse).
pub fn cached_bytes() -> usize {
    CACHE.lock().as_ref().map_or(0, |c| c.bytes)
}

/// Returns every cached buffer to the allocator.
pub fn clear_buffer_cache() {
    *CACHE.lock() = None;
}

/// Elements a [`Storage`] holds inline, in the same allocation as its `Arc` counts (64 bytes,
/// one cache line). Up to this size a tensor's value costs one allocation instead of two (the
/// `Arc<Storage>` and its buffer): scalars, losses, biases of tiny layers, and every tensor of a
/// graph of small ops (W1 and W8, where each op makes two: its output and, in backward, its
/// operand's gradient).
pub(crate) const INLINE_ELEMENTS: usize = 16;

/// A contiguous f32 buffer. Tensors share it through an `Arc`; views never copy it.
#[derive(Debug)]
pub(crate) struct Storage {
    buf: Buf,
}

/// Where a storage's elements are.
#[derive(Debug)]
enum Buf {
    /// A buffer of its own (any length; large ones go back to the buffer cache when dropped).
    Heap(Vec<f32>),
    /// Up to [`INLINE_ELEMENTS`] elements inside the storage itself.
    Inline { len: u8, data: [f32; INLINE_ELEMENTS] },
}

/// Counts `bytes` of storage as live.
#[inline]
fn count_live(bytes: usize) {
    let live = LIVE_BYTES.fetch_add(bytes, Ordering::Relaxed) + bytes;
    // A plain load first: most allocations do not raise the peak, and a `fetch_max` is a
    // locked read-modify-write on every tensor made.
    if live > PEAK_BYTES.load(Ordering::Relaxed) {
        PEAK_BYTES.fetch_max(live, Ordering::Relaxed);
    }
}

impl Storage {
    /// Takes ownership of `data` and counts its bytes as live.
    pub(crate) fn new(data: Vec<f32>) -> Self {
        count_live(data.capacity() * BYTES);
        Storage { buf: Buf::Heap(data) }
    }

    /// A fresh buffer of `n` elements, all written by `fill` (it is handed unspecified values:
    /// zeros inline, a recycled buffer's stale values otherwise, see [`buffer`]). Small
    /// buffers sit inline: one allocation for the whole value.
    ///
    /// # Errors
    /// `OutOfMemory` as [`alloc`].
    #[inline]
    pub(crate) fn filled(op: &'static str, n: usize, fill: impl FnOnce(&mut [f32])) -> Result<std::sync::Arc<Storage>> {
        if n <= INLINE_ELEMENTS {
            count_live(n * BYTES);
            // Built in its `Arc`'s own allocation (a storage made on the stack and moved in
            // costs a zeroed copy and a move on every small tensor).
            let storage = std::sync::Arc::<Storage>::new_uninit();
            // SAFETY: `storage` was created just above and has no other handle, so this is the
            // only access to its contents; `Arc::as_ptr` points at them (a raw pointer, no
            // shared reference is made).
            let slot = unsafe { &mut *std::sync::Arc::as_ptr(&storage).cast_mut() };
            // `n` fits in a u8: INLINE_ELEMENTS is below 256.
            let inner = slot.write(Storage { buf: Buf::Inline { len: n as u8, data: [0.0; INLINE_ELEMENTS] } });
            fill(inner.as_mut_slice());
            // SAFETY: written just above.
            return Ok(unsafe { storage.assume_init() });
        }
        let mut data = buffer(op, n)?;
        fill(&mut data);
        Ok(std::sync::Arc::new(Storage::new(data)))
    }

    #[inline]
    pub(crate) fn as_slice(&self) -> &[f32] {
        match &self.buf {
            Buf::Heap(v) => v,
            Buf::Inline { len, data } => &data[..usize::from(*len)],
        }
    }

    #[inline]
    pub(crate) fn as_mut_slice(&mut self) -> &mut [f32] {
        match &mut self.buf {
            Buf::Heap(v) => v,
            Buf::Inline { len, data } => &mut data[..usize::from(*len)],
        }
    }
}

impl Drop for Storage {
    fn drop(&mut self) {
        match &mut self.buf {
            Buf::Heap(data) => {
                LIVE_BYTES.fetch_sub(data.capacity() * BYTES, Ordering::Relaxed);
                // Small buffers (most of a graph of tiny ops) are freed as they were, untouched.
                if data.len() >= CACHE_MIN_ELEMENTS {
                    recycle(std::mem::take(data));
                }
            }
            Buf::Inline { len, .. } => {
                LIVE_BYTES.fetch_sub(usize::from(*len) * BYTES, Ordering::Relaxed);
            }
        }
    }
}

/// Bytes of tensor storage alive right now, across all threads.
pub fn live_bytes() -> usize {
    LIVE_BYTES.load(Ordering::Relaxed)
}

/// The high-water mark of [`live_bytes`] since the start or the last [`reset_peak_bytes`]
/// (like `torch.cuda.max_memory_allocated`, for CPU tensors).
pub fn peak_bytes() -> usize {
    PEAK_BYTES.load(Ordering::Relaxed)
}

/// Resets the peak to the bytes alive now.
pub fn reset_peak_bytes() {
    PEAK_BYTES.store(LIVE_BYTES.load(Ordering::Relaxed), Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_freed_large_buffer_is_handed_out_again_and_zeroed_clears_it() {
        let n = CACHE_MIN_ELEMENTS + 17; // a length no other test uses
        let v = vec![3.0f32; n];
        let ptr = v.as_ptr();
        drop(Storage::new(v));
        let again = buffer("test", n).unwrap();
        assert_eq!(again.len(), n);
        // Another test thread may have taken it first; when we got it, it is the same memory.
        if again.as_ptr() == ptr {
            assert_eq!(again[0], 3.0);
        }
        drop(Storage::new(again));
        assert!(zeroed("test", n).unwrap().iter().all(|&x| x == 0.0));
    }

    #[test]
    fn a_small_buffer_sits_inline_and_a_larger_one_on_the_heap_with_its_bytes_counted() {
        for n in [0, 1, INLINE_ELEMENTS, INLINE_ELEMENTS + 1, 1000] {
            let s = Storage::filled("test", n, |d| d.iter_mut().enumerate().for_each(|(i, v)| *v = i as f32)).unwrap();
            assert_eq!(s.as_slice().len(), n);
            assert!(s.as_slice().iter().enumerate().all(|(i, &v)| v == i as f32));
            assert_eq!(matches!(s.buf, Buf::Inline { .. }), n <= INLINE_ELEMENTS);
        }
        // An `Arc<Storage>` of inline elements stays within mimalloc's 96-byte size class.
        assert!(std::mem::size_of::<Storage>() + 16 <= 96, "{}", std::mem::size_of::<Storage>());
    }

    #[test]
    fn an_allocation_the_machine_cannot_satisfy_is_an_error() {
        let e = alloc("test", 1 << 40).unwrap_err();
        assert!(matches!(e.kind(), ErrorKind::OutOfMemory { op: "test", bytes } if *bytes == 1 << 42));
        let e = alloc("test", usize::MAX).unwrap_err();
        assert!(matches!(e.kind(), ErrorKind::OutOfMemory { bytes: usize::MAX, .. }));
    }
}
