//! [`Embedding`]: a lookup table of learned vectors, one row per token id.

use super::Module;
use crate::autograd::Tensor;
use crate::error::{fail, within, ErrorKind, Result};
use crate::ops::index::Indices;
use crate::tensor::Rng;

/// A table `weight [num_embeddings, dim]`; `forward(ids)` picks the rows named by `ids`.
///
/// Initialized `N(0, 1)` like PyTorch's `nn.Embedding`. The backward of the lookup adds each
/// incoming row gradient into its table row (`index_select`'s scatter), so repeated ids sum.
///
/// ```
/// use forgia::nn::Embedding;
/// use forgia::{Indices, Rng};
/// let emb = Embedding::new(10, 4, &mut Rng::new(0))?;
/// let ids = Indices::new(vec![1, 2, 2, 9, 0, 3], &[2, 3])?;
/// assert_eq!(emb.forward(&ids)?.shape(), &[2, 3, 4]);
/// # Ok::<(), forgia::Error>(())
/// ```
pub struct Embedding {
    /// The table, `[num_embeddings, dim]`, a variable.
    pub weight: Tensor,
}

impl Embedding {
    /// A table of `num_embeddings` rows of width `dim`, drawn from `N(0, 1)`.
    ///
    /// # Errors
    /// `InvalidArgument` when either size is zero.
    pub fn new(num_embeddings: usize, dim: usize, rng: &mut Rng) -> Result<Embedding> {
        if num_embeddings == 0 || dim == 0 {
            return fail(ErrorKind::InvalidArgument {
                op: "Embedding::new",
                arg: "size",
                reason: format!("num_embeddings {num_embeddings} and dim {dim} must be positive"),
            });
        }
        Ok(Embedding { weight: Tensor::randn(&[num_embeddings, dim], 0.0, 1.0, rng)?.into_variable() })
    }

    /// A table from a given `[num_embeddings, dim]` tensor (made a variable if it is not one).
    ///
    /// # Errors
    /// `RankMismatch` when `weight` is not rank 2.
    pub fn from_tensor(weight: Tensor) -> Result<Embedding> {
        if weight.rank() != 2 {
            return fail(ErrorKind::RankMismatch {
                op: "Embedding::from_tensor",
                expected: "a rank-2 table [num_embeddings, dim]",
                shape: weight.shape().to_vec(),
            });
        }
        let weight = if weight.is_variable() { weight } else { weight.into_variable() };
        Ok(Embedding { weight })
    }

    /// Number of rows (the vocabulary size).
    pub fn num_embeddings(&self) -> usize {
        self.weight.shape()[0]
    }

    /// Width of each row.
    pub fn dim(&self) -> usize {
        self.weight.shape()[1]
    }

    /// The rows of `ids`: shape `ids.shape() + [dim]`.
    ///
    /// # Errors
    /// `IndexOutOfRange` for an id outside `0..num_embeddings`.
    pub fn forward(&self, ids: &Indices) -> Result<Tensor> {
        within("embedding", || {
            let flat = ids.reshape(&[ids.len()])?;
            let rows = self.weight.index_select(0, &flat)?;
            let mut shape = ids.shape().to_vec();
            shape.push(self.dim());
            rows.reshape(&shape)
        })
    }
}

impl Module for Embedding {
    fn visit_params(&self, f: &mut dyn FnMut(&str, &Tensor)) {
        f("weight", &self.weight);
    }

    fn visit_params_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor)) {
        f("weight", &mut self.weight);
    }
}
