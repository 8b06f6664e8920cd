//! [`Embedding`]: a lookup table of learned vectors, one row per token id.

use super::{init, Module};
use crate::autograd::{no_grad, Tensor};
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
    /// The low-rank adapter, if any ([`Embedding::add_lora`]).
    pub lora: Option<EmbeddingLora>,
}

/// A low-rank adapter on a table, PEFT's LoRA for `nn.Embedding`: the rows of
/// `W + scaling · (B A)ᵀ`. `A [r, num_embeddings]` starts at zero and `B [dim, r]` at
/// `N(0, 1)` (PEFT's initialization, the reverse of a linear layer's), so a fresh adapter
/// changes nothing; only the `A` columns of the ids a step looks up get a gradient.
pub struct EmbeddingLora {
    /// `lora_embedding_A`, `[r, num_embeddings]`, a variable.
    pub a: Tensor,
    /// `lora_embedding_B`, `[dim, r]`, a variable.
    pub b: Tensor,
    /// `alpha / r`.
    pub scaling: f32,
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
        Ok(Embedding { weight: Tensor::randn(&[num_embeddings, dim], 0.0, 1.0, rng)?.into_variable(), lora: None })
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
        Ok(Embedding { weight, lora: None })
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
    /// Backward: `gW = zeros.index_add(0, ids, gy)`; with an adapter, the rows gain
    /// `scaling · A[:, ids]ᵀ Bᵀ`, adding `gB = scaling · gyᵀ A[:, ids]ᵀ` and the scatter of
    /// `scaling · (gy B)ᵀ` into the columns `ids` of `gA`.
    ///
    /// # Errors
    /// `IndexOutOfRange` for an id outside `0..num_embeddings`.
    pub fn forward(&self, ids: &Indices) -> Result<Tensor> {
        within("embedding", || {
            let flat = ids.reshape(&[ids.len()])?;
            let rows = self.weight.index_select(0, &flat)?;
            let rows = match &self.lora {
                None => rows,
                // Only the columns of A that `ids` name are gathered (`[r, n]`, not a transposed
                // copy of the whole `[r, num_embeddings]` table), so the lookup and its scatter
                // cost O(r·n) plus one zeroed gradient table per call.
                Some(l) => {
                    let picked = l.a.index_select(1, &flat)?.transpose(0, 1)?;
                    rows.add(&picked.scale(l.scaling).linear(&l.b, None)?)?
                }
            };
            let mut shape = ids.shape().to_vec();
            shape.push(self.dim());
            rows.reshape(&shape)
        })
    }
}

impl Embedding {
    /// Adds a fresh adapter of rank `rank` and scaling `alpha / rank` (replacing any other).
    ///
    /// # Errors
    /// `InvalidArgument` for rank 0 or a non-finite `alpha`.
    pub fn add_lora(&mut self, rank: usize, alpha: f32, rng: &mut Rng) -> Result<()> {
        if rank == 0 || !alpha.is_finite() {
            return fail(ErrorKind::InvalidArgument {
                op: "Embedding::add_lora",
                arg: "rank",
                reason: format!("rank {rank} must be positive and alpha {alpha} finite"),
            });
        }
        let a = Tensor::zeros(&[rank, self.num_embeddings()])?.into_variable();
        let mut b = Tensor::zeros(&[self.dim(), rank])?.into_variable();
        init::normal(&mut b, 0.0, 1.0, rng)?;
        self.lora = Some(EmbeddingLora { a, b, scaling: alpha / rank as f32 });
        Ok(())
    }

    /// Folds the adapter into the table (`W += scaling · (B A)ᵀ`) and removes it: the same
    /// lookups, one GEMM per call. The table keeps its kind (a frozen constant stays one).
    ///
    /// # Errors
    /// Only on internal shape errors (the adapter's shapes are fixed by construction).
    pub fn merge_lora(&mut self) -> Result<()> {
        let Some(l) = self.lora.take() else { return Ok(()) };
        let _guard = no_grad();
        let delta = l.a.transpose(0, 1)?.matmul(&l.b.transpose(0, 1)?)?.scale(l.scaling);
        let merged = self.weight.add(&delta)?;
        self.weight.with_data_mut(|w| merged.with_data(|m| w.copy_from_slice(m)))?;
        Ok(())
    }
}

/// Parameters: `weight` and, with an adapter, PEFT's `lora_embedding_A` and
/// `lora_embedding_B` (without its `.default` adapter name).
impl Module for Embedding {
    fn visit_params(&self, f: &mut dyn FnMut(&str, &Tensor)) {
        f("weight", &self.weight);
        if let Some(l) = &self.lora {
            f("lora_embedding_A", &l.a);
            f("lora_embedding_B", &l.b);
        }
    }

    fn visit_params_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor)) {
        f("weight", &mut self.weight);
        if let Some(l) = &mut self.lora {
            f("lora_embedding_A", &mut l.a);
            f("lora_embedding_B", &mut l.b);
        }
    }
}
