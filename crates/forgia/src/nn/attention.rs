//! [`MultiHeadAttention`]: self-attention with `q`, `k`, `v`, `o` projections (with bias) over
//! [`Tensor::scaled_dot_product_attention`], optionally causal, with as many key/value heads
//! as query heads or fewer (grouped-query attention).

use super::{visit_child, visit_child_mut, Forward, Linear, Module};
use crate::autograd::Tensor;
use crate::error::{fail, ErrorKind, Result};
use crate::ops::attention::AttentionOptions;
use crate::tensor::Rng;

/// Multi-head self-attention over `x [B, S, D]`:
/// `o(concat_heads(softmax(q kᵀ / √dh [+ causal mask]) v))` with `q = x Wqᵀ + bq` (and so on),
/// heads split as `reshape(B, S, H, dh).transpose(1, 2)`.
///
/// Parameters: `q.weight`, `q.bias`, `k.*`, `v.*`, `o.*`, each projection `[D, D]` + `[D]`;
/// with `Hkv` key/value heads ([`MultiHeadAttention::with_kv_heads`]) the `k` and `v`
/// projections are `[Hkv·dh, D]` + `[Hkv·dh]` and each key/value head serves `H / Hkv` query
/// heads (Llama's `num_key_value_heads`; `Hkv = 1` is multi-query attention).
///
/// ```
/// use forgia::nn::{Forward, Module, MultiHeadAttention};
/// use forgia::{Rng, Tensor};
/// let attn = MultiHeadAttention::new(16, 4, true, &mut Rng::new(0))?;
/// assert_eq!(attn.num_parameters(), 4 * (16 * 16 + 16));
/// let y = attn.forward(&Tensor::zeros(&[2, 5, 16])?)?;
/// assert_eq!(y.shape(), &[2, 5, 16]);
/// # Ok::<(), forgia::Error>(())
/// ```
pub struct MultiHeadAttention {
    /// Query projection.
    pub q: Linear,
    /// Key projection.
    pub k: Linear,
    /// Value projection.
    pub v: Linear,
    /// Output projection.
    pub o: Linear,
    /// Number of (query) heads (divides the model width). The number of key/value heads is
    /// the `k` projection's width over the head width ([`MultiHeadAttention::num_kv_heads`]).
    pub heads: usize,
    /// Whether position `i` attends only to positions `j <= i`.
    pub causal: bool,
}

impl MultiHeadAttention {
    /// Attention of width `d_model` with `heads` heads; the four projections are initialized
    /// like [`Linear::new`], drawn in the order q, k, v, o.
    ///
    /// # Errors
    /// `InvalidArgument` when `heads` is zero or does not divide `d_model`.
    pub fn new(d_model: usize, heads: usize, causal: bool, rng: &mut Rng) -> Result<MultiHeadAttention> {
        check_heads("MultiHeadAttention::new", d_model, heads)?;
        let q = Linear::new(d_model, d_model, true, rng)?;
        let k = Linear::new(d_model, d_model, true, rng)?;
        let v = Linear::new(d_model, d_model, true, rng)?;
        let o = Linear::new(d_model, d_model, true, rng)?;
        Ok(MultiHeadAttention { q, k, v, o, heads, causal })
    }

    /// Grouped-query attention of width `d_model` with `heads` query heads and `kv_heads`
    /// key/value heads (`kv_heads == heads` is [`MultiHeadAttention::new`]); initialized like
    /// [`Linear::new`], drawn in the order q, k, v, o.
    ///
    /// ```
    /// use forgia::nn::{Forward, Module, MultiHeadAttention};
    /// use forgia::{Rng, Tensor};
    /// let attn = MultiHeadAttention::with_kv_heads(16, 4, 2, true, &mut Rng::new(0))?;
    /// assert_eq!(attn.num_kv_heads(), 2);
    /// assert_eq!(attn.num_parameters(), 2 * (16 * 16 + 16) + 2 * (8 * 16 + 8));
    /// assert_eq!(attn.forward(&Tensor::zeros(&[2, 5, 16])?)?.shape(), &[2, 5, 16]);
    /// # Ok::<(), forgia::Error>(())
    /// ```
    ///
    /// # Errors
    /// `InvalidArgument` when `heads` is zero or does not divide `d_model`, or `kv_heads` is
    /// zero or does not divide `heads`.
    pub fn with_kv_heads(
        d_model: usize,
        heads: usize,
        kv_heads: usize,
        causal: bool,
        rng: &mut Rng,
    ) -> Result<MultiHeadAttention> {
        const OP: &str = "MultiHeadAttention::with_kv_heads";
        check_heads(OP, d_model, heads)?;
        check_kv_heads(OP, heads, kv_heads)?;
        let kv = kv_heads * (d_model / heads);
        let q = Linear::new(d_model, d_model, true, rng)?;
        let k = Linear::new(d_model, kv, true, rng)?;
        let v = Linear::new(d_model, kv, true, rng)?;
        let o = Linear::new(d_model, d_model, true, rng)?;
        Ok(MultiHeadAttention { q, k, v, o, heads, causal })
    }

    /// The number of key/value heads (`heads` unless grouped).
    pub fn num_kv_heads(&self) -> usize {
        self.k.out_features() / (self.d_model() / self.heads.max(1)).max(1)
    }

    /// The model width.
    pub fn d_model(&self) -> usize {
        self.q.out_features()
    }

    /// Attention of `x [B, S, D]`, giving `[B, S, D]`.
    ///
    /// # Errors
    /// `RankMismatch` for an input that is not rank 3; `ShapeMismatch` when its width is not
    /// the model width.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        self.forward_with(x, AttentionOptions::default())
    }

    /// Attention of `x [B, S, D]` with per-call options: masks (a key-padding `key_mask`
    /// `[B, S]`, a `bool_mask`, an additive `mask`), dropout with this step's seed, a window,
    /// ALiBi, sinks (see [`AttentionOptions`]). The module's own `causal` is or-ed in, and
    /// grouped heads are enabled when the module has them.
    ///
    /// ```
    /// use forgia::nn::MultiHeadAttention;
    /// use forgia::{AttentionDropout, AttentionOptions, Rng, Tensor};
    /// let attn = MultiHeadAttention::with_kv_heads(8, 2, 1, false, &mut Rng::new(0))?;
    /// let x = Tensor::randn(&[2, 3, 8], 0.0, 1.0, &mut Rng::new(1))?;
    /// let real = Tensor::from_vec(vec![1.0, 1.0, 1.0, 1.0, 1.0, 0.0], &[2, 3])?; // pad the last
    /// let dropout = Some(AttentionDropout { p: 0.1, seed: 42 });
    /// let y = attn.forward_with(&x, AttentionOptions { key_mask: Some(&real), dropout, ..Default::default() })?;
    /// assert_eq!(y.shape(), &[2, 3, 8]);
    /// # Ok::<(), forgia::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`MultiHeadAttention::forward`], and the option errors of
    /// [`Tensor::scaled_dot_product_attention`].
    pub fn forward_with(&self, x: &Tensor, opts: AttentionOptions<'_>) -> Result<Tensor> {
        let params: Vec<Tensor> = self.named_parameters().into_iter().map(|(_, t)| t).collect();
        attention_with(x, &params, self.heads, AttentionOptions { causal: self.causal || opts.causal, ..opts })
    }
}

pub(super) fn check_heads(op: &'static str, d_model: usize, heads: usize) -> Result<()> {
    if heads == 0 || d_model == 0 || !d_model.is_multiple_of(heads) {
        return fail(ErrorKind::InvalidArgument {
            op,
            arg: "heads",
            reason: format!("{heads} heads must be positive and divide d_model {d_model}"),
        });
    }
    Ok(())
}

pub(super) fn check_kv_heads(op: &'static str, heads: usize, kv_heads: usize) -> Result<()> {
    if kv_heads == 0 || !heads.is_multiple_of(kv_heads) {
        return fail(ErrorKind::InvalidArgument {
            op,
            arg: "kv_heads",
            reason: format!("{kv_heads} key/value heads must be positive and divide the {heads} query heads"),
        });
    }
    Ok(())
}

/// `x · Wᵀ + b`.
pub(super) fn affine(x: &Tensor, w: &Tensor, b: &Tensor) -> Result<Tensor> {
    x.linear(w, Some(b))
}

/// The attention math over explicit parameters `[qw, qb, kw, kb, vw, vb, ow, ob]` (the visit
/// order), shared by the module and checkpointed callers.
pub(super) fn attention(x: &Tensor, p: &[Tensor], heads: usize, causal: bool) -> Result<Tensor> {
    attention_with(x, p, heads, AttentionOptions { causal, ..AttentionOptions::default() })
}

/// [`attention`] with the options of [`Tensor::scaled_dot_product_attention`] (grouped heads
/// are enabled from the parameters' shapes).
fn attention_with(x: &Tensor, p: &[Tensor], heads: usize, opts: AttentionOptions<'_>) -> Result<Tensor> {
    if p.len() != 8 {
        return fail(ErrorKind::InvalidArgument {
            op: "MultiHeadAttention",
            arg: "parameters",
            reason: format!("expected q, k, v, o weights and biases (8 tensors), got {}", p.len()),
        });
    }
    let d = p[0].shape()[0];
    if x.rank() != 3 {
        return fail(ErrorKind::RankMismatch {
            op: "MultiHeadAttention",
            expected: "rank 3 [B, S, D]",
            shape: x.shape().to_vec(),
        });
    }
    let (b, s) = (x.shape()[0], x.shape()[1]);
    if x.shape()[2] != d {
        return fail(ErrorKind::ShapeMismatch {
            op: "MultiHeadAttention",
            lhs: x.shape().to_vec(),
            rhs: vec![b, s, d],
        });
    }
    // Key/value heads from the k projection's width (fewer than `heads` when grouped).
    let dh = d / heads.max(1);
    let kv_heads = p[2].shape()[0] / dh.max(1);
    if kv_heads * dh != p[2].shape()[0] {
        return fail(ErrorKind::InvalidArgument {
            op: "MultiHeadAttention",
            arg: "k.weight",
            reason: format!("width {} is not a whole number of {dh}-wide heads", p[2].shape()[0]),
        });
    }
    check_kv_heads("MultiHeadAttention", heads, kv_heads)?;
    let split = |t: Tensor, h: usize| t.reshape(&[b, s, h, dh])?.transpose(1, 2);
    let q = split(affine(x, &p[0], &p[1])?, heads)?;
    let k = split(affine(x, &p[2], &p[3])?, kv_heads)?;
    let v = split(affine(x, &p[4], &p[5])?, kv_heads)?;
    let opts = AttentionOptions { enable_gqa: opts.enable_gqa || kv_heads != heads, ..opts };
    let y = q.scaled_dot_product_attention(&k, &v, opts)?;
    let merged = y.transpose(1, 2)?.reshape(&[b, s, d])?;
    affine(&merged, &p[6], &p[7])
}

impl Module for MultiHeadAttention {
    fn visit_params(&self, f: &mut dyn FnMut(&str, &Tensor)) {
        visit_child("q", &self.q, f);
        visit_child("k", &self.k, f);
        visit_child("v", &self.v, f);
        visit_child("o", &self.o, f);
    }

    fn visit_params_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor)) {
        visit_child_mut("q", &mut self.q, f);
        visit_child_mut("k", &mut self.k, f);
        visit_child_mut("v", &mut self.v, f);
        visit_child_mut("o", &mut self.o, f);
    }
}

impl Forward for MultiHeadAttention {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        MultiHeadAttention::forward(self, x)
    }
}
