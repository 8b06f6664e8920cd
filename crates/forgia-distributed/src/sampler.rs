//! [`DistributedSampler`]: each rank's share of every global batch. The global order of an
//! epoch is one seeded permutation that every rank computes alike, cut into global batches;
//! rank `r` of `w` takes the `r`-th contiguous part of each. So the ranks together see
//! exactly the batches single-process training sees with the same global batch size, and a
//! resumed run sees the batches of an uninterrupted one.

use forgia::Rng;

/// This rank's shards of the global batches (PyTorch's `DistributedSampler`, sharding each
/// global batch instead of the epoch, so the global batches match single-process training).
///
/// ```
/// use forgia_distributed::DistributedSampler;
/// let samples: Vec<usize> = (0..10).collect();
/// let ranks: Vec<_> = (0..2).map(|r| DistributedSampler::new(r, 2).epoch(&samples, 4, 7, 0)).collect();
/// let single = DistributedSampler::new(0, 1).epoch(&samples, 4, 7, 0);
/// for (k, global) in single.iter().enumerate() {
///     let joined: Vec<usize> = ranks.iter().flat_map(|r| r[k].clone()).collect();
///     assert_eq!(&joined, global); // the ranks' shards make up the global batch, in order
/// }
/// ```
#[derive(Clone, Copy, Debug)]
pub struct DistributedSampler {
    rank: usize,
    world: usize,
}

impl DistributedSampler {
    /// The sampler of rank `rank` among `world` ranks.
    ///
    /// # Panics
    /// When `rank >= world` (the process group guarantees it does not).
    pub fn new(rank: usize, world: usize) -> DistributedSampler {
        assert!(rank < world, "rank {rank} of a group of {world}");
        DistributedSampler { rank, world }
    }

    /// This rank's part of `global`: the `rank`-th of `world` contiguous parts whose sizes
    /// differ by at most one (the first `len % world` ranks take one more). Empty when the
    /// batch has fewer samples than ranks and this rank comes last.
    pub fn shard<'a, T>(&self, global: &'a [T]) -> &'a [T] {
        let (n, w) = (global.len(), self.world);
        let (base, extra) = (n / w, n % w);
        let start = self.rank * base + self.rank.min(extra);
        let len = base + usize::from(self.rank < extra);
        &global[start..start + len]
    }

    /// The weight of this rank's mean loss so that the average over ranks of the weighted
    /// losses' gradients is the gradient of the global batch's mean loss:
    /// `world · shard_len / global_len` (1 when the shards are equal).
    pub fn loss_weight(&self, shard_len: usize, global_len: usize) -> f32 {
        if global_len == 0 {
            return 0.0;
        }
        (self.world * shard_len) as f32 / global_len as f32
    }

    /// This rank's shards of epoch `epoch`'s global batches of `samples`: the samples in the
    /// seeded order of `(seed, epoch)`, cut into global batches of `global_batch` (the last
    /// may be short), each sharded with [`DistributedSampler::shard`].
    pub fn epoch(&self, samples: &[usize], global_batch: usize, seed: u64, epoch: u64) -> Vec<Vec<usize>> {
        global_batches(samples, global_batch, seed, epoch).iter().map(|b| self.shard(b).to_vec()).collect()
    }
}

/// The global batches of an epoch: `samples` shuffled by `Rng::new(seed ^ (epoch + 1) ·
/// 0x9E3779B97F4A7C15)` (the order of the forgia CLI's jobs), in chunks of `global_batch`.
pub fn global_batches(samples: &[usize], global_batch: usize, seed: u64, epoch: u64) -> Vec<Vec<usize>> {
    let mut order = samples.to_vec();
    Rng::new(seed ^ (epoch + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)).shuffle(&mut order);
    order.chunks(global_batch.max(1)).map(<[usize]>::to_vec).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_cover_each_global_batch_once_in_order() {
        for world in 1..5 {
            for n in 0..11 {
                let global: Vec<usize> = (0..n).collect();
                let joined: Vec<usize> =
                    (0..world).flat_map(|r| DistributedSampler::new(r, world).shard(&global).to_vec()).collect();
                assert_eq!(joined, global);
                let sizes: Vec<usize> =
                    (0..world).map(|r| DistributedSampler::new(r, world).shard(&global).len()).collect();
                assert!(sizes.iter().max().unwrap() - sizes.iter().min().unwrap() <= 1);
            }
        }
    }

    #[test]
    fn epochs_are_seeded_and_differ() {
        let samples: Vec<usize> = (0..20).collect();
        let s = DistributedSampler::new(1, 3);
        assert_eq!(s.epoch(&samples, 6, 3, 1), s.epoch(&samples, 6, 3, 1));
        assert_ne!(s.epoch(&samples, 6, 3, 0), s.epoch(&samples, 6, 3, 1));
        assert_ne!(s.epoch(&samples, 6, 3, 0), s.epoch(&samples, 6, 4, 0));
    }

    #[test]
    fn loss_weights_make_unequal_shards_a_global_mean() {
        // 7 samples over 3 ranks: 3, 2, 2; weights 9/7, 6/7, 6/7 average to 1.
        let w: f32 =
            (0..3).map(|r| DistributedSampler::new(r, 3)).map(|s| s.loss_weight(s.shard(&[0; 7]).len(), 7)).sum();
        assert!((w / 3.0 - 1.0).abs() < 1e-6);
    }
}
