//! [`Dense`]: the linear layer of the pretrained architectures, in either weight layout
//! `transformers` uses (`nn.Linear`'s `[out, in]`, GPT-2's `Conv1D` `[in, out]`), with an
//! optional LoRA adapter ([`Lora`]).

use crate::autograd::{no_grad, Tensor};
use crate::error::{fail, ErrorKind, Result};
use crate::nn::{init, Module};
use crate::tensor::Rng;

/// How a [`Dense`] weight is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WeightLayout {
    /// `[out, in]`, `y = x Wᵀ + b` (`nn.Linear`).
    OutIn,
    /// `[in, out]`, `y = x W + b` (GPT-2's `Conv1D`).
    InOut,
}

/// A low-rank adapter `ΔW = scaling · B A` (PEFT's LoRA): `A [r, in]` starts Kaiming-uniform
/// (`a = √5`, as PEFT), `B [out, r]` starts at zero, so a fresh adapter changes nothing.
pub struct Lora {
    /// `lora_A.weight`, `[r, in]`, a variable.
    pub a: Tensor,
    /// `lora_B.weight`, `[out, r]`, a variable.
    pub b: Tensor,
    /// `alpha / r`.
    pub scaling: f32,
}

/// A linear layer `y = x·W(ᵀ) + b (+ scaling · (x Aᵀ) Bᵀ)`.
///
/// Parameters: `weight`, `bias` (optional) and, with an adapter, `lora_A.weight` and
/// `lora_B.weight` (PEFT's names without its `.default` adapter name). The base weights may be
/// constants ([`crate::models::lora::freeze_base`]): then backward does no work for them.
pub struct Dense {
    /// The weight, in `layout`.
    pub weight: Tensor,
    /// The bias `[out]`.
    pub bias: Option<Tensor>,
    /// How `weight` is stored.
    pub layout: WeightLayout,
    /// The low-rank adapter, if any.
    pub lora: Option<Lora>,
}

impl Dense {
    /// A layer with `nn.Linear`'s default initialization (Kaiming-uniform weight, uniform bias).
    ///
    /// # Errors
    /// `InvalidArgument` for a zero size.
    pub fn new(
        in_features: usize,
        out_features: usize,
        bias: bool,
        layout: WeightLayout,
        rng: &mut Rng,
    ) -> Result<Dense> {
        let l = crate::nn::Linear::new(in_features, out_features, bias, rng)?;
        let weight = match layout {
            WeightLayout::OutIn => l.weight,
            WeightLayout::InOut => l.weight.transpose(0, 1)?.contiguous()?.detach().into_variable(),
        };
        Ok(Dense { weight, bias: l.bias, layout, lora: None })
    }

    /// Input features.
    pub fn in_features(&self) -> usize {
        match self.layout {
            WeightLayout::OutIn => self.weight.shape()[1],
            WeightLayout::InOut => self.weight.shape()[0],
        }
    }

    /// Output features.
    pub fn out_features(&self) -> usize {
        match self.layout {
            WeightLayout::OutIn => self.weight.shape()[0],
            WeightLayout::InOut => self.weight.shape()[1],
        }
    }

    /// The layer applied to `x [..., in]`, giving `[..., out]`.
    ///
    /// Backward: that of `linear` / `matmul` and `add` (the adapter path, computed as
    /// `(scaling · x Aᵀ) Bᵀ`, adds `gA = scaling · (gy B)ᵀ x`, `gB = scaling · gyᵀ (x Aᵀ)`).
    ///
    /// # Errors
    /// `ShapeMismatch` when the last axis of `x` is not `in_features`.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let y = match self.layout {
            WeightLayout::OutIn => x.linear(&self.weight, self.bias.as_ref())?,
            WeightLayout::InOut => {
                let y = x.matmul(&self.weight)?;
                match &self.bias {
                    Some(b) => y.add(b)?,
                    None => y,
                }
            }
        };
        match &self.lora {
            None => Ok(y),
            // The scaling is applied to the rank-r intermediate `x Aᵀ` rather than to the
            // full-width `(x Aᵀ) Bᵀ` (the same product; a pass over `r` instead of `out`
            // columns, forward and backward).
            Some(l) => y.add(&x.linear(&l.a, None)?.scale(l.scaling).linear(&l.b, None)?),
        }
    }

    /// Adds a fresh adapter of rank `rank` and scaling `alpha / rank` (replacing any other).
    ///
    /// # Errors
    /// `InvalidArgument` for rank 0 or a non-finite `alpha`.
    pub fn add_lora(&mut self, rank: usize, alpha: f32, rng: &mut Rng) -> Result<()> {
        if rank == 0 || !alpha.is_finite() {
            return fail(ErrorKind::InvalidArgument {
                op: "Dense::add_lora",
                arg: "rank",
                reason: format!("rank {rank} must be positive and alpha {alpha} finite"),
            });
        }
        let mut a = Tensor::zeros(&[rank, self.in_features()])?.into_variable();
        let gain = init::gain(init::Nonlinearity::LeakyRelu(5f32.sqrt()));
        init::kaiming_uniform(&mut a, gain, init::FanMode::FanIn, rng)?;
        let b = Tensor::zeros(&[self.out_features(), rank])?.into_variable();
        self.lora = Some(Lora { a, b, scaling: alpha / rank as f32 });
        Ok(())
    }

    /// Folds the adapter into the base weight (`W += scaling · B A`, transposed for
    /// [`WeightLayout::InOut`]) and removes it: the same function, one GEMM per call. The
    /// weight keeps its kind (a frozen constant stays one).
    ///
    /// # Errors
    /// Only on internal shape errors (the adapter's shapes are fixed by construction).
    pub fn merge_lora(&mut self) -> Result<()> {
        let Some(l) = self.lora.take() else { return Ok(()) };
        let _guard = no_grad();
        let delta = l.b.matmul(&l.a)?.scale(l.scaling);
        let delta = match self.layout {
            WeightLayout::OutIn => delta,
            WeightLayout::InOut => delta.transpose(0, 1)?.contiguous()?,
        };
        let merged = self.weight.add(&delta)?;
        self.weight.with_data_mut(|w| merged.with_data(|m| w.copy_from_slice(m)))?;
        Ok(())
    }
}

impl Module for Dense {
    fn visit_params(&self, f: &mut dyn FnMut(&str, &Tensor)) {
        f("weight", &self.weight);
        if let Some(b) = &self.bias {
            f("bias", b);
        }
        if let Some(l) = &self.lora {
            f("lora_A.weight", &l.a);
            f("lora_B.weight", &l.b);
        }
    }

    fn visit_params_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor)) {
        f("weight", &mut self.weight);
        if let Some(b) = &mut self.bias {
            f("bias", b);
        }
        if let Some(l) = &mut self.lora {
            f("lora_A.weight", &mut l.a);
            f("lora_B.weight", &mut l.b);
        }
    }
}
