//! The dropout mask as a pure function of (seed, element index): nothing is stored, the
//! backward regenerates it.
//!
//! # The hash
//! Element `i` draws 32 bits from a keyed counter-based hash of its low 32 bits,
//! `bits = round(round(lo ^ k0) + k1)` with `round` Wellons' `lowbias32` (two 32-bit
//! multiplies and three xor-shifts, a bijection with near-ideal avalanche), where
//! `(k0, k1)` are the two halves of `mix64(seed ^ mix64(i >> 32))`: one 64-bit key per
//! 2^32-element block, computed once per block, not per element. It is kept iff its top 24 bits
//! `u = bits >> 8` satisfy `u / 2^24 >= p`, i.e. `u >= ceil(p · 2^24)`. Everything per element
//! is 32-bit integer work without a branch, so the loop vectorizes (16 lanes with AVX-512);
//! the mask does not depend on how the tensor is chunked or on the thread count.
//!
//! (Until December 2026 each element took `mix64(seed ^ mix64(i))`, two 64-bit mixes and a
//! branch per element; the masks of a given seed changed when the hash did.)

use rayon::prelude::*;

use crate::parallel::{self, CHUNK_ELEMENTS, PARALLEL_ELEMENTS};
use crate::tensor::mix64;

/// Elements per key block: the hash reads an index's low 32 bits under its block's key.
const BLOCK: u64 = 1 << 32;

/// Wellons' `lowbias32`: a 32-bit bijection with strong avalanche.
#[inline(always)]
fn round32(mut x: u32) -> u32 {
    x ^= x >> 16;
    x = x.wrapping_mul(0x7feb_352d);
    x ^= x >> 15;
    x = x.wrapping_mul(0x846c_a68b);
    x ^ (x >> 16)
}

/// The two 32-bit keys of the 2^32-element block `block` under `seed`.
#[inline(always)]
fn block_key(seed: u64, block: u64) -> (u32, u32) {
    let k = mix64(seed ^ mix64(block));
    (k as u32, (k >> 32) as u32)
}

/// The 32 hash bits of the element whose index has low bits `lo`, under its block's key.
#[inline(always)]
fn hash_bits((k0, k1): (u32, u32), lo: u32) -> u32 {
    round32(round32(lo ^ k0).wrapping_add(k1))
}

/// The smallest 24-bit draw that is kept at drop probability `p` in `[0, 1]`:
/// `ceil(p · 2^24)` (exact: `p · 2^24` is a power-of-two scaling of an f32). `2^24` at `p = 1`,
/// which no draw reaches.
#[inline(always)]
fn threshold(p: f32) -> u32 {
    (p * (1u32 << 24) as f32).ceil() as u32
}

/// True when element `index` is kept: its 24-bit draw `u` (see the module doc) is at least
/// `p · 2^24`, i.e. `u / 2^24 >= p`.
#[inline]
pub(crate) fn keep(seed: u64, index: u64, p: f32) -> bool {
    let bits = hash_bits(block_key(seed, index / BLOCK), index as u32);
    (bits >> 8) >= threshold(p)
}

/// Elements `start..start + out.len()` of the mask (times `x` when given): `x[i] · scale` (or
/// `scale`) where kept, 0 where dropped. The range is cut at key-block boundaries.
#[inline(always)]
fn run(x: Option<&[f32]>, start: u64, seed: u64, t: u32, scale: f32, out: &mut [f32]) {
    let (mut done, len) = (0usize, out.len());
    while done < len {
        let at = start + done as u64;
        let in_block = (BLOCK - at % BLOCK).min((len - done) as u64) as usize;
        let (key, lo) = (block_key(seed, at / BLOCK), at as u32);
        let o = &mut out[done..done + in_block];
        match x {
            Some(x) => {
                for (j, (o, &v)) in o.iter_mut().zip(&x[done..done + in_block]).enumerate() {
                    let kept = (hash_bits(key, lo.wrapping_add(j as u32)) >> 8) >= t;
                    *o = if kept { v * scale } else { 0.0 };
                }
            }
            None => {
                for (j, o) in o.iter_mut().enumerate() {
                    let kept = (hash_bits(key, lo.wrapping_add(j as u32)) >> 8) >= t;
                    *o = if kept { scale } else { 0.0 };
                }
            }
        }
        done += in_block;
    }
}

/// `out[i] = x[i] · scale` where element `i` is kept and 0 where it is dropped (`x = None`
/// gives the mask itself: `scale` or 0). Every element of `out` is written, so any buffer
/// will do. `x`, when given, is as long as `out`.
pub(crate) fn apply(x: Option<&[f32]>, seed: u64, p: f32, scale: f32, out: &mut [f32]) {
    let t = threshold(p);
    let body = |start: usize, o: &mut [f32]| {
        let xs = x.map(|x| &x[start..start + o.len()]);
        super::simd::vectorized(
            #[inline(always)]
            || run(xs, start as u64, seed, t, scale, o),
        )
    };
    if out.len() >= PARALLEL_ELEMENTS {
        parallel::install(|| {
            out.par_chunks_mut(CHUNK_ELEMENTS).enumerate().for_each(|(c, o)| body(c * CHUNK_ELEMENTS, o))
        });
    } else {
        body(0, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The mask element by element through [`keep`].
    fn by_keep(x: &[f32], start: u64, seed: u64, p: f32, scale: f32) -> Vec<f32> {
        x.iter().enumerate().map(|(j, &v)| if keep(seed, start + j as u64, p) { v * scale } else { 0.0 }).collect()
    }

    #[test]
    fn the_vectorized_mask_matches_keep_element_by_element_on_odd_sizes_and_tails() {
        for (len, p) in [(1, 0.5), (15, 0.25), (17, 0.1), (1000, 0.75), (33, 1.0), (40, 0.0)] {
            let x: Vec<f32> = (0..len).map(|v| v as f32 - 7.5).collect();
            let scale = if p < 1.0 { 1.0 / (1.0 - p) } else { 0.0 };
            let mut out = vec![f32::NAN; len];
            apply(Some(&x), 99, p, scale, &mut out);
            assert_eq!(out, by_keep(&x, 0, 99, p, scale), "len {len} p {p}");
            let mut mask = vec![f32::NAN; len];
            apply(None, 99, p, scale, &mut mask);
            assert_eq!(mask, by_keep(&vec![1.0; len], 0, 99, p, scale), "mask, len {len} p {p}");
        }
    }

    #[test]
    fn a_range_across_a_key_block_boundary_uses_each_blocks_key() {
        let (start, len) = (BLOCK - 5, 12);
        let x = vec![1.0f32; len];
        let mut out = vec![f32::NAN; len];
        vectorized_run(Some(&x), start, 3, 0.5, 2.0, &mut out);
        assert_eq!(out, by_keep(&x, start, 3, 0.5, 2.0));
        // The next block is not a copy of the first.
        let first: Vec<bool> = (0..64).map(|i| keep(3, i, 0.5)).collect();
        let second: Vec<bool> = (0..64).map(|i| keep(3, BLOCK + i, 0.5)).collect();
        assert_ne!(first, second);
    }

    fn vectorized_run(x: Option<&[f32]>, start: u64, seed: u64, p: f32, scale: f32, out: &mut [f32]) {
        super::super::simd::vectorized(|| run(x, start, seed, threshold(p), scale, out))
    }

    #[test]
    fn the_threshold_is_the_exact_float_rule() {
        for p in [0.0f32, 1e-9, 0.1, 0.25, 0.3, 0.5, 0.9999999, 1.0] {
            let t = threshold(p);
            for u in [t.saturating_sub(1), t, t + 1].into_iter().filter(|&u| u < 1 << 24) {
                let by_float = u as f32 * (1.0 / (1u64 << 24) as f32) >= p;
                assert_eq!(u >= t, by_float, "p {p} u {u}");
            }
        }
    }

    #[test]
    fn chunking_in_parallel_gives_the_serial_mask() {
        let len = PARALLEL_ELEMENTS + 3 * CHUNK_ELEMENTS / 2 + 7;
        let x: Vec<f32> = (0..len).map(|v| (v % 13) as f32).collect();
        let mut out = vec![0.0; len];
        apply(Some(&x), 5, 0.3, 1.0 / 0.7, &mut out);
        let mut serial = vec![0.0; len];
        vectorized_run(Some(&x), 0, 5, 0.3, 1.0 / 0.7, &mut serial);
        assert_eq!(out, serial);
    }
}
