//! The program's global allocator: mimalloc, entered through its plain functions whenever
//! their alignment suffices.
//!
//! The `mimalloc` crate's `MiMalloc` calls `mi_malloc_aligned` for every request. In mimalloc
//! 3, when a size class's free list is momentarily empty, that call takes an over-allocating
//! path for every block size that is not a power of two: W1's 160-byte graph nodes then took
//! 192-byte blocks, through about 250 instructions instead of about 30, once per op (and W8's
//! million nodes never used their own size class; docs/BENCHMARKS.md, engine section).
//! `mi_malloc` returns blocks aligned to 8 bytes for every size, and to 16 for every size that
//! is a multiple of 16 (the first block of a page is 16-aligned and every size class above 64
//! bytes is a multiple of 16), so those requests go there; any other alignment keeps the
//! aligned entry points.
//!
//! [`configure`] (run first thing in `main`) turns off mimalloc's purging of freed memory:
//! mimalloc 3 hands memory that stayed free for `purge_delay` (1 s) back to the OS, and a
//! training step touches it again in the next second, as fresh pages the kernel clears (with
//! transparent huge pages, 2 MiB per fault): 6.5% of the main job's one-thread profile.

use std::alloc::{GlobalAlloc, Layout};
use std::ffi::c_void;

use libmimalloc_sys as mi;

/// `mi_option_purge_delay` in mimalloc 3's `mi_option_t` (the 16th option; `libmimalloc-sys`
/// names only a few options, and only with its `extended` feature).
const MI_OPTION_PURGE_DELAY: std::ffi::c_int = 15;

extern "C" {
    /// mimalloc's `mi_option_set` (always linked: the feature only gates the declaration).
    fn mi_option_set(option: std::ffi::c_int, value: std::ffi::c_long);
}

#[cfg(test)]
extern "C" {
    /// mimalloc's `mi_option_get`.
    fn mi_option_get(option: std::ffi::c_int) -> std::ffi::c_long;
}

/// Sets mimalloc's options for this program: no purging (`purge_delay = -1`), so memory a
/// step frees stays mapped for the next step instead of returning as fresh pages. The
/// process keeps its peak footprint until it exits (the resident size only ever grows to the
/// high-water mark, which `peak_rss` already reports). `MIMALLOC_PURGE_DELAY`, when set,
/// still wins: it is the documented way to choose another delay.
pub(crate) fn configure() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_some() {
        return;
    }
    // SAFETY: plain C calls with an option index of mimalloc 3's enum (checked by a test) and
    // a value that option accepts (-1: never purge).
    unsafe { mi_option_set(MI_OPTION_PURGE_DELAY, -1) }
}

/// mimalloc's current purge delay in milliseconds (-1: never).
#[cfg(test)]
fn purge_delay() -> std::ffi::c_long {
    // SAFETY: a plain C call with an option index of mimalloc 3's enum.
    unsafe { mi_option_get(MI_OPTION_PURGE_DELAY) }
}

/// mimalloc, with the plain entry points for the alignments they guarantee.
pub(crate) struct Mimalloc;

/// True when mimalloc's plain functions return a block aligned for `align` at `size` bytes.
#[inline]
fn plain_suffices(size: usize, align: usize) -> bool {
    align <= 8 || (align <= 16 && size.is_multiple_of(16))
}

// SAFETY: every method forwards to mimalloc, which returns blocks of at least the requested
// size (or null on failure) with the alignment `plain_suffices` admits for the plain calls,
// and the requested alignment for the aligned ones; `mi_free` and `mi_realloc*` accept any
// block from either family (mimalloc finds a block's page from its address).
unsafe impl GlobalAlloc for Mimalloc {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: plain C calls with a size and a power-of-two alignment from `layout`.
        unsafe {
            if plain_suffices(layout.size(), layout.align()) {
                mi::mi_malloc(layout.size()).cast()
            } else {
                mi::mi_malloc_aligned(layout.size(), layout.align()).cast()
            }
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as in `alloc`.
        unsafe {
            if plain_suffices(layout.size(), layout.align()) {
                mi::mi_zalloc(layout.size()).cast()
            } else {
                mi::mi_zalloc_aligned(layout.size(), layout.align()).cast()
            }
        }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        // SAFETY: `ptr` was returned by one of the calls above (the `GlobalAlloc` contract).
        unsafe { mi::mi_free(ptr.cast::<c_void>()) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `ptr` came from this allocator with `layout` (the `GlobalAlloc` contract);
        // the new block keeps `layout.align()` by the same rule as `alloc`.
        unsafe {
            if plain_suffices(new_size, layout.align()) {
                mi::mi_realloc(ptr.cast::<c_void>(), new_size).cast()
            } else {
                mi::mi_realloc_aligned(ptr.cast::<c_void>(), new_size, layout.align()).cast()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::alloc::{GlobalAlloc, Layout};

    use super::Mimalloc;

    #[test]
    fn configure_turns_purging_off_through_the_purge_delay_option() {
        // The option index is mimalloc 3's: its default delay is 1000 ms (unless the
        // environment chose one), and `configure` sets it to -1.
        if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
            let before = super::purge_delay();
            assert!(before == 1000 || before == -1, "purge_delay read {before}: not mimalloc 3's option index");
            super::configure();
            assert_eq!(super::purge_delay(), -1);
        }
    }

    #[test]
    fn blocks_have_the_alignment_asked_for_at_every_small_size() {
        for size in 1..=600 {
            for align in [1, 2, 4, 8, 16, 32, 64] {
                let layout = Layout::from_size_align(size, align).unwrap();
                // SAFETY: a non-zero size; the block is freed with the same layout.
                unsafe {
                    let p = Mimalloc.alloc(layout);
                    assert!(!p.is_null());
                    assert_eq!(p as usize % align, 0, "size {size} align {align}");
                    let q = Mimalloc.realloc(p, layout, size + 40);
                    assert_eq!(q as usize % align, 0, "realloc to {} align {align}", size + 40);
                    Mimalloc.dealloc(q, Layout::from_size_align(size + 40, align).unwrap());
                    let z = Mimalloc.alloc_zeroed(layout);
                    assert!(std::slice::from_raw_parts(z, size).iter().all(|&b| b == 0));
                    Mimalloc.dealloc(z, layout);
                }
            }
        }
    }
}
