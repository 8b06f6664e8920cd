//! The character-level transformer of the words job: token and position embeddings, pre-norm
//! [`TransformerBlock`]s (causal), a final LayerNorm and a linear head over the vocabulary;
//! and drawing sequences from it with a temperature and top-k.

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
    config: Config,
    checkpoint: bool,
}

/// How [`CharTransformer::sample`] draws each next token.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Sampling {
    /// Logits are divided by this before the softmax (positive; below 1 sharpens).
    pub(crate) temperature: f32,
    /// Draw only among the `k` most likely tokens (`None`: all of them).
    pub(crate) top_k: Option<usize>,
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
        Ok(CharTransformer { tok_emb, pos_emb, blocks, ln_f, head, config, checkpoint })
    }

    /// The sizes the model was built with.
    pub(crate) fn config(&self) -> Config {
        self.config
    }

    /// Draws one sequence: from the `boundary` token, each next token from
    /// `softmax(logits / temperature)` over the `top_k` most likely tokens, until `boundary`
    /// comes again or the context is full. Returns the drawn tokens without either boundary.
    /// Run it under `no_grad`.
    pub(crate) fn sample(&self, boundary: usize, sampling: Sampling, rng: &mut Rng) -> forgia::Result<Vec<usize>> {
        let mut tokens = vec![boundary];
        while tokens.len() < self.config.context {
            let ids = Indices::new(tokens.iter().map(|&t| t as i64).collect(), &[1, tokens.len()])?;
            let logits = self.forward(&ids)?.narrow(1, tokens.len() - 1, 1)?;
            let probs = logits.scale(1.0 / sampling.temperature).softmax(-1)?.to_vec();
            let next = draw(&probs, sampling.top_k, rng.uniform());
            if next == boundary {
                break;
            }
            tokens.push(next);
        }
        Ok(tokens.split_off(1))
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

/// The token that `u` (uniform in `[0, 1)`) picks from `probs`, keeping only the `top_k` most
/// likely tokens (ties broken by index) and renormalizing.
pub(crate) fn draw(probs: &[f32], top_k: Option<usize>, u: f32) -> usize {
    let mut order: Vec<usize> = (0..probs.len()).collect();
    order.sort_by(|&a, &b| probs[b].total_cmp(&probs[a]).then(a.cmp(&b)));
    order.truncate(top_k.unwrap_or(probs.len()).clamp(1, probs.len().max(1)));
    let total: f32 = order.iter().map(|&i| probs[i]).sum();
    let mut acc = 0.0;
    let target = u * total;
    order
        .iter()
        .copied()
        .find(|&i| {
            acc += probs[i];
            acc > target
        })
        .unwrap_or(order.last().copied().unwrap_or(0))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn top_1_always_takes_the_most_likely_token() {
        let probs = [0.1, 0.6, 0.3];
        for u in [0.0, 0.5, 0.99] {
            assert_eq!(draw(&probs, Some(1), u), 1);
        }
    }

    #[test]
    fn top_k_renormalizes_over_the_kept_tokens() {
        let probs = [0.1, 0.6, 0.3];
        // Kept: 1 (0.6) then 2 (0.3); u·0.9 splits them at u = 2/3.
        assert_eq!(draw(&probs, Some(2), 0.6), 1);
        assert_eq!(draw(&probs, Some(2), 0.7), 2);
        assert_eq!(draw(&probs, None, 0.95), 0, "without top-k the least likely token is reachable");
    }
}
