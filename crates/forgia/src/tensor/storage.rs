//! The refcounted f32 buffer behind every tensor, and the library's own accounting of live
//! and peak storage bytes (the `peak_live_mb` of the benchmarks).

use std::sync::atomic::{AtomicUsize, Ordering};

// Relaxed everywhere: these are statistics, not synchronization. No other memory is published
// through them, and readers accept a value that is momentarily stale.
static LIVE_BYTES: AtomicUsize = AtomicUsize::new(0);
static PEAK_BYTES: AtomicUsize = AtomicUsize::new(0);

/// A contiguous f32 buffer. Tensors share it through an `Arc`; views never copy it.
#[derive(Debug)]
pub(crate) struct Storage {
    data: Vec<f32>,
}

impl Storage {
    /// Takes ownership of `data` and counts its bytes as live.
    pub(crate) fn new(data: Vec<f32>) -> Self {
        let bytes = data.capacity() * std::mem::size_of::<f32>();
        let live = LIVE_BYTES.fetch_add(bytes, Ordering::Relaxed) + bytes;
        PEAK_BYTES.fetch_max(live, Ordering::Relaxed);
        Storage { data }
    }

    pub(crate) fn as_slice(&self) -> &[f32] {
        &self.data
    }

    pub(crate) fn as_mut_slice(&mut self) -> &mut [f32] {
        &mut self.data
    }
}

impl Drop for Storage {
    fn drop(&mut self) {
        let bytes = self.data.capacity() * std::mem::size_of::<f32>();
        LIVE_BYTES.fetch_sub(bytes, Ordering::Relaxed);
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
