//! A character-level transformer that learns to spell a small word list: token and position
//! embeddings, causal `TransformerBlock`s, a final `LayerNorm` and a linear head; padded
//! batches with an ignored label; AdamW with gradient clipping; then sampling new words.
//!
//! Run it with `cargo run --release -p forgia --example char_transformer`. `forgia train
//! words` trains the same kind of model on 57,000 English words.

use forgia::loss::{cross_entropy, CrossEntropyOptions};
use forgia::nn::{visit_child, visit_child_mut, Embedding, LayerNorm, Linear, Module, TransformerBlock};
use forgia::optim::{clip_grad_norm, AdamConfig, AdamW, Optimizer};
use forgia::{Indices, Result, Rng, Tensor};

const WORDS: &str = "apple banana cherry grape lemon mango melon olive peach pear plum berry lime kiwi \
                     date fig guava papaya quince orange apricot nectarine tangerine";
/// The longest sequence: the start token, up to 10 letters.
const CONTEXT: usize = 11;
/// Token 0 is `.`, which starts and ends every word; 1..=26 are `a`..=`z`.
const VOCAB: usize = 27;
/// The label of padding positions, which the loss skips.
const IGNORE: i64 = -100;

struct CharModel {
    tok: Embedding,
    pos: Embedding,
    blocks: Vec<TransformerBlock>,
    norm: LayerNorm,
    head: Linear,
}

impl CharModel {
    fn new(d_model: usize, layers: usize, rng: &mut Rng) -> Result<CharModel> {
        Ok(CharModel {
            tok: Embedding::new(VOCAB, d_model, rng)?,
            pos: Embedding::new(CONTEXT, d_model, rng)?,
            blocks: (0..layers).map(|_| TransformerBlock::new(d_model, 4, true, rng)).collect::<Result<_>>()?,
            norm: LayerNorm::new(&[d_model], 1e-5)?,
            head: Linear::new(d_model, VOCAB, true, rng)?,
        })
    }

    /// Next-token logits `[B, T, VOCAB]` of token ids `[B, T]`.
    fn forward(&self, ids: &Indices) -> Result<Tensor> {
        let t = ids.shape()[1];
        let mut h = self.tok.forward(ids)?.add(&self.pos.forward(&Indices::from((0..t).collect::<Vec<usize>>()))?)?;
        for block in &self.blocks {
            h = block.forward(&h)?;
        }
        self.head.forward(&self.norm.forward(&h)?)
    }
}

impl Module for CharModel {
    fn visit_params(&self, f: &mut dyn FnMut(&str, &Tensor)) {
        visit_child("tok", &self.tok, f);
        visit_child("pos", &self.pos, f);
        for (i, block) in self.blocks.iter().enumerate() {
            visit_child(&format!("blocks.{i}"), block, f);
        }
        visit_child("norm", &self.norm, f);
        visit_child("head", &self.head, f);
    }

    fn visit_params_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor)) {
        visit_child_mut("tok", &mut self.tok, f);
        visit_child_mut("pos", &mut self.pos, f);
        for (i, block) in self.blocks.iter_mut().enumerate() {
            visit_child_mut(&format!("blocks.{i}"), block, f);
        }
        visit_child_mut("norm", &mut self.norm, f);
        visit_child_mut("head", &mut self.head, f);
    }
}

/// Every word as inputs `.word` and targets `word.`, padded to the context.
fn encode(words: &[&str]) -> Result<(Indices, Indices)> {
    let mut inputs = vec![0i64; words.len() * CONTEXT];
    let mut targets = vec![IGNORE; words.len() * CONTEXT];
    for (row, word) in words.iter().enumerate() {
        let tokens: Vec<i64> =
            std::iter::once(0).chain(word.bytes().map(|b| (b - b'a' + 1) as i64)).chain([0]).collect();
        for (pos, pair) in tokens.windows(2).take(CONTEXT).enumerate() {
            inputs[row * CONTEXT + pos] = pair[0];
            targets[row * CONTEXT + pos] = pair[1];
        }
    }
    Ok((Indices::new(inputs, &[words.len(), CONTEXT])?, Indices::from(targets)))
}

/// Draws a word letter by letter from the softmax of the last position's logits.
fn sample(model: &CharModel, rng: &mut Rng) -> Result<String> {
    let _no_graph = forgia::no_grad();
    let mut tokens = vec![0i64];
    while tokens.len() < CONTEXT {
        let logits = model.forward(&Indices::new(tokens.clone(), &[1, tokens.len()])?)?;
        let probs = logits.narrow(1, tokens.len() - 1, 1)?.softmax(-1)?.to_vec();
        let (u, mut acc) = (rng.uniform(), 0.0);
        let next = probs.iter().position(|&p| {
            acc += p;
            acc > u
        });
        match next.unwrap_or(0) {
            0 => break,
            t => tokens.push(t as i64),
        }
    }
    Ok(tokens[1..].iter().map(|&t| (b'a' + t as u8 - 1) as char).collect())
}

/// Trains for `steps` full-batch steps; returns (first loss, last loss) and five samples.
fn run(d_model: usize, layers: usize, steps: usize) -> Result<(f32, f32, Vec<String>)> {
    let mut rng = Rng::new(0);
    let mut model = CharModel::new(d_model, layers, &mut rng)?;
    let mut opt = AdamW::new(AdamConfig { lr: 3e-3, ..AdamConfig::adamw() })?;
    let words: Vec<&str> = WORDS.split_whitespace().collect();
    let (inputs, targets) = encode(&words)?;
    let mut losses = Vec::new();
    for _ in 0..steps {
        opt.zero_grad(&model);
        let logits = model.forward(&inputs)?.reshape(&[words.len() * CONTEXT, VOCAB])?;
        let loss =
            cross_entropy(&logits, &targets, CrossEntropyOptions { ignore_index: IGNORE, ..Default::default() })?;
        loss.backward()?;
        clip_grad_norm(&model, 1.0)?;
        opt.step(&mut model)?;
        losses.push(loss.item()?);
    }
    let samples = (0..5).map(|_| sample(&model, &mut rng)).collect::<Result<_>>()?;
    Ok((losses[0], losses[steps - 1], samples))
}

fn main() -> Result<()> {
    let (first, last, samples) = run(64, 2, 300)?;
    println!("loss {first:.3} -> {last:.3}; samples: {}", samples.join(" "));
    Ok(())
}

#[test]
fn the_transformer_learns_to_spell() {
    let (first, last, samples) = run(32, 1, 60).unwrap();
    assert!(last < first * 0.6, "{first} -> {last}");
    assert!(samples.iter().all(|w| w.len() < CONTEXT && w.bytes().all(|b| b.is_ascii_lowercase())));
}
