//! The per-channel bias of a convolution: added to an activation `[N, C, S]`, and summed out
//! of its gradient.

use rayon::prelude::*;

use crate::parallel;

/// Adds `b[ch]` to every element of channel `ch` of `[N, C, S]`.
pub(crate) fn add_channel_bias(y: &mut [f32], b: &[f32], spatial: usize) {
    let c = b.len();
    for (i, plane) in y.chunks_mut(spatial.max(1)).enumerate() {
        let v = b[i % c];
        for e in plane {
            *e += v;
        }
    }
}

/// The per-channel sum of `[N, C, S]` (`C = out.len()`), added into the zeroed `out`: the
/// bias gradient. Each plane is summed in 16 interleaved lanes (a sequential sum waits on
/// every add: four cycles an element), then the lanes pairwise, and a channel's planes are
/// added in sample order. A large `y` is split between the pool's threads by channel, so
/// every channel sums in that same order and the result does not depend on the threads.
pub(crate) fn channel_sum(y: &[f32], spatial: usize, out: &mut [f32]) {
    let (c, spatial) = (out.len(), spatial.max(1));
    if c == 0 {
        return;
    }
    let channel = |ch: usize, acc: &mut f32| {
        crate::kernels::simd::vectorized(
            #[inline(always)]
            || {
                for plane in y.chunks(spatial).skip(ch).step_by(c) {
                    *acc += lane_sum(plane);
                }
            },
        )
    };
    if y.len() >= parallel::PARALLEL_ELEMENTS && c > 1 {
        parallel::install(|| out.par_iter_mut().enumerate().for_each(|(ch, acc)| channel(ch, acc)));
    } else {
        for (ch, acc) in out.iter_mut().enumerate() {
            channel(ch, acc);
        }
    }
}

/// The sum of `v` over 16 interleaved partial sums.
#[inline(always)]
fn lane_sum(v: &[f32]) -> f32 {
    const LANES: usize = 16;
    let mut acc = [0.0f32; LANES];
    let chunks = v.chunks_exact(LANES);
    let tail: f32 = chunks.remainder().iter().sum();
    for ch in chunks {
        for (a, x) in acc.iter_mut().zip(ch) {
            *a += *x;
        }
    }
    let mut width = LANES;
    while width > 1 {
        width /= 2;
        for l in 0..width {
            acc[l] += acc[l + width];
        }
    }
    acc[0] + tail
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bias_gradient_sums_each_channel_in_sample_order_however_it_is_split() {
        // Above the parallel threshold, so the channels are summed on several threads.
        let (n, c, spatial) = (64, 32, 196);
        assert!(n * c * spatial >= parallel::PARALLEL_ELEMENTS);
        let y: Vec<f32> = (0..n * c * spatial).map(|i| ((i * 7919) % 1013) as f32 * 1e-3 - 0.5).collect();
        let mut want = vec![0.0f32; c];
        for (i, plane) in y.chunks(spatial).enumerate() {
            want[i % c] += lane_sum(plane);
        }
        let mut got = vec![0.0f32; c];
        channel_sum(&y, spatial, &mut got);
        assert_eq!(got, want);
        // And a small one, on the calling thread.
        let mut small = vec![0.0f32; 3];
        channel_sum(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0], 2, &mut small);
        assert_eq!(small, vec![1.0 + 2.0 + 7.0 + 8.0, 3.0 + 4.0 + 9.0 + 10.0, 5.0 + 6.0 + 11.0 + 12.0]);
    }
}
