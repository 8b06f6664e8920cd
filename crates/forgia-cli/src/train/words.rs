//! The words job: a character-level transformer trained to spell English words, one word per
//! sequence framed by the boundary token (`.cat.`); reports the validation loss per token and
//! prints sampled words at the end.

use forgia::loss::{cross_entropy, CrossEntropyOptions, Reduction};
use forgia::nn::Module;
use forgia::optim::{AdamConfig, AdamW, Optimizer};
use forgia::{Indices, Rng, Tensor};

use super::charlm::{CharTransformer, Config};
use super::job::{shuffled_batches, subset};
use super::{Job, Metric, Settings, StepOut, TrainError};
use crate::data::words::{self, Vocab, Words, BOUNDARY_INDEX, MAX_LEN};

/// Epochs, batch size and learning rate when no flag says otherwise.
pub(super) const DEFAULTS: (u64, usize, f32) = (6, 64, 3e-3);
/// Transformer blocks.
const LAYERS: usize = 2;
/// Optimizer steps per epoch: an epoch is a fixed block of steps, or one pass over the
/// training words when that is shorter (only with a small `--limit`).
const STEPS_PER_EPOCH: usize = 200;
/// Sequence length: the boundary token and up to `MAX_LEN` letters (targets: the letters and
/// the closing boundary).
const CONTEXT: usize = MAX_LEN + 1;
/// Label of padding positions (ignored by the loss).
const IGNORE: i64 = -100;
/// Words sampled at the end.
const SAMPLES: usize = 10;
/// Sampling temperature.
const TEMPERATURE: f32 = 0.8;
/// Validation words per evaluation batch.
const EVAL_BATCH: usize = 512;

/// The words job.
pub(super) struct WordsJob {
    words: Words,
    train: Vec<usize>,
    model: CharTransformer,
    settings: Settings,
}

/// Inputs `[B, CONTEXT]` (boundary-padded) and targets `[B·CONTEXT]` (padding ignored).
fn encode_batch(vocab: &Vocab, words: &[&str]) -> forgia::Result<(Indices, Indices)> {
    let mut inputs = vec![BOUNDARY_INDEX as i64; words.len() * CONTEXT];
    let mut targets = vec![IGNORE; words.len() * CONTEXT];
    for (row, word) in words.iter().enumerate() {
        // Every kept word encodes (the vocabulary was built from all of them).
        let tokens = vocab.encode(word).unwrap_or_default();
        for (pos, pair) in tokens.windows(2).take(CONTEXT).enumerate() {
            inputs[row * CONTEXT + pos] = pair[0] as i64;
            targets[row * CONTEXT + pos] = pair[1] as i64;
        }
    }
    Ok((Indices::new(inputs, &[words.len(), CONTEXT])?, Indices::from(targets)))
}

impl WordsJob {
    pub(super) fn new(settings: &Settings) -> Result<WordsJob, TrainError> {
        let words = words::load()?;
        let train = subset(words.train.len(), settings.limit);
        let config = Config { vocab: words.vocab.len(), context: CONTEXT, d_model: 64, heads: 4, layers: LAYERS };
        let model = CharTransformer::new(config, settings.seed, settings.checkpoint)?;
        Ok(WordsJob { words, train, model, settings: settings.clone() })
    }

    /// Steps per epoch: [`STEPS_PER_EPOCH`], or one pass when the training set is smaller.
    fn steps_per_epoch(&self) -> usize {
        STEPS_PER_EPOCH.min(self.train.len().div_ceil(self.settings.batch_size).max(1))
    }

    /// The cross-entropy of every next-character target of `words`, combined by `reduction`.
    fn loss_of(&self, words: &[&str], reduction: Reduction) -> forgia::Result<Tensor> {
        let (inputs, targets) = encode_batch(&self.words.vocab, words)?;
        let logits = self.model.forward(&inputs)?;
        let flat = logits.reshape(&[words.len() * CONTEXT, self.words.vocab.len()])?;
        let options = CrossEntropyOptions { ignore_index: IGNORE, reduction, ..CrossEntropyOptions::default() };
        cross_entropy(&flat, &targets, options)
    }

    /// Samples one word: from the boundary, draw each next character from
    /// `softmax(logits / TEMPERATURE)` until the boundary or `MAX_LEN` letters.
    fn sample(&self, rng: &mut Rng) -> forgia::Result<String> {
        let mut tokens = vec![BOUNDARY_INDEX];
        while tokens.len() <= MAX_LEN {
            let ids = Indices::new(tokens.iter().map(|&t| t as i64).collect(), &[1, tokens.len()])?;
            let logits = self.model.forward(&ids)?;
            let last = logits.narrow(1, tokens.len() - 1, 1)?.scale(1.0 / TEMPERATURE).softmax(-1)?.to_vec();
            let u = rng.uniform();
            let mut acc = 0.0;
            let next = last.iter().position(|&p| {
                acc += p;
                acc > u
            });
            let next = next.unwrap_or(last.len() - 1);
            if next == BOUNDARY_INDEX {
                break;
            }
            tokens.push(next);
        }
        Ok(self.words.vocab.decode(&tokens).unwrap_or_default())
    }
}

impl Job for WordsJob {
    fn model(&self) -> &dyn Module {
        &self.model
    }

    fn model_mut(&mut self) -> &mut dyn Module {
        &mut self.model
    }

    fn optimizer(&self, settings: &Settings) -> Result<Box<dyn Optimizer>, TrainError> {
        Ok(Box::new(AdamW::new(AdamConfig { lr: settings.lr, ..AdamConfig::adamw() })?))
    }

    fn headline(&self) -> &'static str {
        "char transformer, AdamW"
    }

    fn describe(&self, s: &Settings) -> String {
        format!(
            "words: char transformer ({LAYERS} blocks, d_model 64, 4 heads, context {CONTEXT}) with {} parameters; \
             {} training / {} validation words, vocab {}; AdamW lr {}, batch {}, {} epochs of {} steps{}",
            self.model.num_parameters(),
            self.train.len(),
            self.words.validation.len(),
            self.words.vocab.len(),
            s.lr,
            s.batch_size,
            s.epochs,
            self.steps_per_epoch(),
            if s.checkpoint { ", activation checkpointing" } else { "" },
        )
    }

    fn metric(&self) -> Metric {
        Metric::ValidationLoss
    }

    fn plan(&self, epoch: u64) -> Vec<Vec<usize>> {
        // Passes over the (shuffled) list, continued across epochs, cut into epochs of equal steps.
        let per_pass = self.train.len().div_ceil(self.settings.batch_size).max(1);
        let steps = self.steps_per_epoch();
        let first = epoch as usize * steps;
        let mut plan = Vec::with_capacity(steps);
        while plan.len() < steps {
            let step = first + plan.len();
            let pass =
                shuffled_batches(&self.train, self.settings.batch_size, self.settings.seed, (step / per_pass) as u64);
            plan.extend(pass.into_iter().skip(step % per_pass).take(steps - plan.len()));
        }
        plan
    }

    fn train_step(&self, batch: &[usize], _step: u64) -> Result<StepOut, TrainError> {
        let words: Vec<&str> = batch.iter().map(|&i| self.words.train[i].as_str()).collect();
        Ok(StepOut { loss: self.loss_of(&words, Reduction::Mean)?, correct: None })
    }

    fn evaluate(&self) -> Result<f64, TrainError> {
        let (mut total, mut count) = (0.0f64, 0usize);
        for chunk in self.words.validation.chunks(EVAL_BATCH) {
            let words: Vec<&str> = chunk.iter().map(String::as_str).collect();
            total += self.loss_of(&words, Reduction::Sum)?.item()? as f64;
            count += words.iter().map(|w| w.len() + 1).sum::<usize>();
        }
        Ok(total / count as f64)
    }

    fn clip_norm(&self) -> Option<f32> {
        Some(1.0)
    }

    fn finish(&self) -> Result<(), TrainError> {
        let _guard = forgia::no_grad();
        let mut rng = Rng::new(self.settings.seed ^ 0x5A3B1E);
        println!("\nsampled words (temperature {TEMPERATURE}):");
        for _ in 0..SAMPLES {
            let word = self.sample(&mut rng)?;
            let known = self.words.train.contains(&word) || self.words.validation.contains(&word);
            println!("  {word}{}", if known { "" } else { "  (new)" });
        }
        Ok(())
    }
}
