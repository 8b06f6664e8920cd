//! Mini-batches over in-memory data: [`BatchIterator`] holds features (one flat `Vec<f32>`
//! with a per-sample shape) and integer labels, and yields `(Tensor, Vec<usize>)` batches per
//! epoch, optionally shuffled by a seeded permutation.
//!
//! The permutation of epoch `e` depends only on `(seed, e)`, not on earlier epochs, so a run
//! resumed from a checkpoint at epoch `e` sees exactly the batches of an uninterrupted run.
//!
//! ```
//! use forgia::data::BatchIterator;
//! let features: Vec<f32> = (0..10).map(|i| i as f32).collect(); // 5 samples of shape [2]
//! let data = BatchIterator::new(features, &[2], vec![0, 1, 0, 1, 0], 2, 7)?.drop_last(true);
//! let batches: Vec<_> = data.epoch(0).collect();
//! assert_eq!(batches.len(), 2);
//! assert_eq!(batches[0].0.shape(), &[2, 2]);
//! # Ok::<(), forgia::Error>(())
//! ```

use crate::autograd::Tensor;
use crate::error::{fail, ErrorKind, Result};
use crate::tensor::{mix64, Rng, Size};

/// In-memory samples and labels, cut into batches per epoch.
#[derive(Clone, Debug)]
pub struct BatchIterator {
    features: Vec<f32>,
    sample_shape: Vec<usize>,
    labels: Vec<usize>,
    batch_size: usize,
    seed: u64,
    shuffle: bool,
    drop_last: bool,
}

impl BatchIterator {
    /// Batches of `batch_size` over `labels.len()` samples, each `sample_shape` values of
    /// `features` (row-major, sample after sample). Shuffled with `seed` by default; the last
    /// short batch is kept by default.
    ///
    /// # Errors
    /// `InvalidArgument` for a zero `batch_size`; `LengthMismatch` when `features` does not
    /// hold `labels.len()` samples of `sample_shape`; `SizeOverflow` when that shape's size
    /// overflows.
    pub fn new(
        features: Vec<f32>,
        sample_shape: &[usize],
        labels: Vec<usize>,
        batch_size: usize,
        seed: u64,
    ) -> Result<BatchIterator> {
        if batch_size == 0 {
            return fail(ErrorKind::InvalidArgument {
                op: "BatchIterator::new",
                arg: "batch_size",
                reason: "must be positive".into(),
            });
        }
        let mut shape = vec![labels.len()];
        shape.extend_from_slice(sample_shape);
        Size::of("BatchIterator::new", &shape)?;
        let per_sample = Size::of("BatchIterator::new", sample_shape)?.numel();
        if per_sample.checked_mul(labels.len()) != Some(features.len()) {
            return fail(ErrorKind::LengthMismatch {
                op: "BatchIterator::new",
                expected: per_sample.saturating_mul(labels.len()),
                got: features.len(),
                shape,
            });
        }
        let sample_shape = sample_shape.to_vec();
        Ok(BatchIterator { features, sample_shape, labels, batch_size, seed, shuffle: true, drop_last: false })
    }

    /// Turns per-epoch shuffling on or off (off: samples in their stored order).
    pub fn shuffle(mut self, shuffle: bool) -> BatchIterator {
        self.shuffle = shuffle;
        self
    }

    /// Drops the last batch of an epoch when it is shorter than `batch_size`.
    pub fn drop_last(mut self, drop_last: bool) -> BatchIterator {
        self.drop_last = drop_last;
        self
    }

    /// Number of samples.
    pub fn len(&self) -> usize {
        self.labels.len()
    }

    /// True when there are no samples.
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }

    /// The shape of one sample.
    pub fn sample_shape(&self) -> &[usize] {
        &self.sample_shape
    }

    /// Batches per epoch.
    pub fn num_batches(&self) -> usize {
        if self.drop_last {
            self.len() / self.batch_size
        } else {
            self.len().div_ceil(self.batch_size)
        }
    }

    /// The sample order of epoch `epoch`: a seeded permutation, or `0..len` unshuffled.
    pub fn order(&self, epoch: u64) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.len()).collect();
        if self.shuffle {
            Rng::new(self.seed ^ mix64(epoch)).shuffle(&mut order);
        }
        order
    }

    /// The batches of epoch `epoch`: `(features [b, sample_shape...], labels)`.
    pub fn epoch(&self, epoch: u64) -> Epoch<'_> {
        Epoch { data: self, order: self.order(epoch), batch: 0 }
    }
}

/// The batches of one epoch, from [`BatchIterator::epoch`].
pub struct Epoch<'a> {
    data: &'a BatchIterator,
    order: Vec<usize>,
    batch: usize,
}

impl Iterator for Epoch<'_> {
    type Item = (Tensor, Vec<usize>);

    fn next(&mut self) -> Option<(Tensor, Vec<usize>)> {
        if self.batch >= self.data.num_batches() {
            return None;
        }
        let d = self.data;
        let start = self.batch * d.batch_size;
        let idx = &self.order[start..(start + d.batch_size).min(d.len())];
        self.batch += 1;
        let per: usize = d.sample_shape.iter().product();
        let mut features = Vec::with_capacity(idx.len() * per);
        for &i in idx {
            features.extend_from_slice(&d.features[i * per..(i + 1) * per]);
        }
        let mut shape = vec![idx.len()];
        shape.extend_from_slice(&d.sample_shape);
        let labels = idx.iter().map(|&i| d.labels[i]).collect();
        Some((Tensor::from_parts(features, &shape), labels))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.data.num_batches() - self.batch;
        (left, Some(left))
    }
}

impl ExactSizeIterator for Epoch<'_> {}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(n: usize) -> BatchIterator {
        let features = (0..n * 3).map(|i| i as f32).collect();
        BatchIterator::new(features, &[3], (0..n).collect(), 4, 11).unwrap()
    }

    #[test]
    fn every_sample_appears_once_per_epoch_with_its_label() {
        let d = data(10);
        let mut seen = Vec::new();
        for (x, y) in d.epoch(3) {
            assert_eq!(x.shape()[1..], [3]);
            for (row, &label) in y.iter().enumerate() {
                // Sample i holds 3i, 3i+1, 3i+2 and label i.
                assert_eq!(
                    x.to_vec()[row * 3..row * 3 + 3],
                    [3.0 * label as f32, 3.0 * label as f32 + 1.0, 3.0 * label as f32 + 2.0]
                );
            }
            seen.extend(y);
        }
        assert_eq!(seen.len(), 10);
        seen.sort_unstable();
        assert_eq!(seen, (0..10).collect::<Vec<_>>());
    }

    #[test]
    fn epochs_are_reproducible_and_differ_from_each_other() {
        let d = data(32);
        assert_eq!(d.order(5), data(32).order(5));
        assert_ne!(d.order(5), d.order(6));
        assert_eq!(d.clone().shuffle(false).order(5), (0..32).collect::<Vec<_>>());
    }

    #[test]
    fn drop_last_drops_only_the_short_batch() {
        let d = data(10);
        let sizes: Vec<usize> = d.epoch(0).map(|(_, y)| y.len()).collect();
        assert_eq!(sizes, [4, 4, 2]);
        let d = d.drop_last(true);
        assert_eq!(d.epoch(0).len(), 2);
        assert!(d.epoch(0).all(|(x, _)| x.shape() == [4, 3]));
    }

    #[test]
    fn bad_sizes_are_errors() {
        let e = BatchIterator::new(vec![0.0; 5], &[2], vec![0, 1], 1, 0).unwrap_err();
        assert!(matches!(e.kind(), ErrorKind::LengthMismatch { .. }));
        let e = BatchIterator::new(vec![0.0; 4], &[2], vec![0, 1], 0, 0).unwrap_err();
        assert!(matches!(e.kind(), ErrorKind::InvalidArgument { .. }));
        assert_eq!(BatchIterator::new(vec![], &[2], vec![], 3, 0).unwrap().epoch(0).count(), 0);
    }
}
