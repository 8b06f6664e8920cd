//! The character-level transformer of the words job: token and position embeddings, pre-norm
//! [`TransformerBlock`]s (causal), a final LayerNorm and a linear head over the vocabulary.

use forgia::nn::{visit_child, visit_child_mut, Embedding, LayerNorm, Linear, Module, TransformerBlock};
use forgia::{Indices, Rng, Tensor};

/// Sizes of a [`CharTransformer`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct Config {
    /// Tokens in the vocabulary.
    pub(crate) vocab: usize,
    /// The longest sequence (positions with an embedding).
    pub(crate) context: usize,
    /// Model width.
    pub(crate) d_model: usize,
    /// Attention heads per block.
    pub(crate) heads: usize,
    /// Number of blocks.
    pub(crate) layers: usize,
}

/// A GPT-style character model. Parameters `tok_emb.weight`, `pos_emb.weight`,
/// `blocks.<i>.*` (see [`TransformerBlock`]), `ln_f.*`, `head.*`.
pub(crate) struct CharTransformer {
    tok_emb: Embedding,
    pos_emb: Embedding,
    blocks: Vec<TransformerBlock>,
    ln_f: LayerNorm,
    head: Linear,
    checkpoint: bool,
}

impl CharTransformer {
    /// A model drawn from `Rng::new(seed)`; `checkpoint` recomputes each block in backward.
    pub(crate) fn new(config: Config, seed: u64, checkpoint: bool) -> forgia::Result<CharTransformer> {
        let mut rng = Rng::new(seed);
        let d = config.d_model;
        let tok_emb = Embedding::new(config.vocab, d, &mut rng)?;
        let pos_emb = Embedding::new(config.context, d, &mut rng)?;
        let blocks = (0..config.layers)
            .map(|_| TransformerBlock::new(d, config.heads, true, &mut rng))
            .collect::<forgia::Result<_>>()?;
        let ln_f = LayerNorm::new(&[d], 1e-5)?;
        let head = Linear::new(d, config.vocab, true, &mut rng)?;
        Ok(CharTransformer { tok_emb, pos_emb, blocks, ln_f, head, checkpoint })
    }

    /// Next-token logits `[B, T, vocab]` for token ids `[B, T]` (`T` up to the context).
    pub(crate) fn forward(&self, ids: &Indices) -> forgia::Result<Tensor> {
        let t = ids.shape().get(1).copied().unwrap_or(0);
        let positions = Indices::from((0..t).collect::<Vec<usize>>());
        let mut h = self.tok_emb.forward(ids)?.add(&self.pos_emb.forward(&positions)?)?;
        for block in &self.blocks {
            h = if self.checkpoint { block.forward_checkpointed(&h)? } else { block.forward(&h)? };
        }
        self.head.forward(&self.ln_f.forward(&h)?)
    }
}

impl Module for CharTransformer {
    fn visit_params(&self, f: &mut dyn FnMut(&str, &Tensor)) {
        visit_child("tok_emb", &self.tok_emb, f);
        visit_child("pos_emb", &self.pos_emb, f);
        for (i, block) in self.blocks.iter().enumerate() {
            visit_child(&format!("blocks.{i}"), block, f);
        }
        visit_child("ln_f", &self.ln_f, f);
        visit_child("head", &self.head, f);
    }

    fn visit_params_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor)) {
        visit_child_mut("tok_emb", &mut self.tok_emb, f);
        visit_child_mut("pos_emb", &mut self.pos_emb, f);
        for (i, block) in self.blocks.iter_mut().enumerate() {
            visit_child_mut(&format!("blocks.{i}"), block, f);
        }
        visit_child_mut("ln_f", &mut self.ln_f, f);
        visit_child_mut("head", &mut self.head, f);
    }
}
