//! Math on pre-checked slices and layouts. Kernels never allocate a tensor, never fail and know
//! nothing about graphs; `ops/` validates inputs and wraps the results.

pub(crate) mod attention;
pub(crate) mod compare;
pub(crate) mod conv;
pub(crate) mod copy;
pub(crate) mod dropout;
pub(crate) mod fastmath;
pub(crate) mod gemm;
pub(crate) mod index;
pub(crate) mod lanes;
pub(crate) mod loss;
pub(crate) mod norm;
pub(crate) mod pointwise;
pub(crate) mod pool;
pub(crate) mod reduce;
pub(crate) mod rope;
pub(crate) mod scan;
pub(crate) mod scatter;
pub(crate) mod simd;
pub(crate) mod softmax;
pub(crate) mod sort;
pub(crate) mod ste;
pub(crate) mod unfold;

/// The first `n` consecutive chunks of `len` floats of `buf` (empty ones when `len` is 0): how
/// the parallel kernels hand each part of their work its own slice of one scratch buffer.
pub(crate) fn split_len(buf: &mut [f32], n: usize, len: usize) -> Vec<&mut [f32]> {
    let mut rest = buf;
    (0..n)
        .map(|_| {
            let (head, tail) = std::mem::take(&mut rest).split_at_mut(len);
            rest = tail;
            head
        })
        .collect()
}

/// Runs `f(index, item, scratch)` for every item, on `scratches.len()` workers at once, each
/// with its own scratch and with the kernels it calls kept on its thread (the workers already
/// fill the pool). The workers take the items one at a time from a shared counter, so a worker
/// whose core runs slower (a busy sibling on a shared host) runs fewer of them and the others
/// do not wait for it at the end. `f` must not depend on which scratch it gets beyond what it
/// writes there first: then every item's result is the same whichever worker runs it.
pub(crate) fn for_each_with_scratch<T: Send>(
    items: &mut [T],
    scratches: &mut [&mut [f32]],
    f: impl Fn(usize, &mut T, &mut [f32]) + Sync,
) {
    use rayon::prelude::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Mutex, PoisonError};

    if scratches.len() <= 1 || items.len() <= 1 {
        if let Some(scratch) = scratches.first_mut() {
            for (i, t) in items.iter_mut().enumerate() {
                f(i, t, scratch);
            }
        }
        return;
    }
    // Each item is taken by exactly one worker (the counter hands out every index once); the
    // lock only proves that to the compiler, and is never contended.
    let cells: Vec<Mutex<&mut T>> = items.iter_mut().map(Mutex::new).collect();
    let next = AtomicUsize::new(0);
    crate::parallel::install(|| {
        scratches.par_iter_mut().for_each(|scratch| {
            crate::parallel::with_kernels_on_this_thread(true, || loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(cell) = cells.get(i) else { break };
                let mut item = cell.lock().unwrap_or_else(PoisonError::into_inner);
                f(i, &mut item, scratch);
            })
        })
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_item_runs_once_with_a_scratch_of_its_own_whatever_the_number_of_workers() {
        for (items, workers) in [(0, 3), (1, 3), (5, 1), (7, 2), (64, 3), (9, 8)] {
            let mut done = vec![0usize; items];
            let mut buf = vec![0.0f32; workers * 4];
            let mut scratches = split_len(&mut buf, workers, 4);
            for_each_with_scratch(&mut done, &mut scratches, |i, item, scratch| {
                // A worker's scratch is its own while it runs an item: what it writes first
                // is still there at the end.
                scratch.fill(i as f32);
                std::thread::yield_now();
                assert!(scratch.iter().all(|&s| s == i as f32), "item {i}: another worker wrote its scratch");
                *item += i + 1;
            });
            let want: Vec<usize> = (1..=items).collect();
            assert_eq!(done, want, "{items} items on {workers} workers: each ran once, as itself");
        }
    }
}
