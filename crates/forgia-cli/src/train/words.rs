//! The words job: a character-level transformer trained to spell English words, one word per
//! sequence framed by the boundary token (`.cat.`); reports the validation loss per token and
//! prints sampled words at the end.

use forgia::loss::{cross_entropy, CrossEntropyOptions, Reduction};
use forgia::nn::Module;
use forgia::optim::{AdamConfig, AdamW, Optimizer};
use forgia::{Indices, Rng, Tensor};

use super::charlm::{CharTransformer, Config, Sampling};
use super::job::{fixed_step_epoch, subset};
use super::saved::SavedRun;
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
/// How the words at the end of training are drawn.
const SAMPLING: Sampling = Sampling { temperature: 0.8, top_k: None };
/// The saved run's vocabulary: the characters as code points, the boundary first.
const VOCAB_KEY: &str = "train.vocab";
/// The saved run's sizes: vocabulary, context, width, heads, blocks.
const CONFIG_KEY: &str = "train.config";
/// Validation words per evaluation batch.
const EVAL_BATCH: usize = 512;

/// The words job.
pub(super) struct WordsJob {
    words: Words,
    train: Vec<usize>,
    model: CharTransformer,
    settings: Settings,
}

/// Rebuilds the model and vocabulary of a words run saved at `saved` (no word list needed).
///
/// # Errors
/// [`TrainError::Invalid`] when the file is another job's or its entries are malformed; the
/// library's checkpoint error when the weights do not fit.
pub(crate) fn model_from_saved(saved: &SavedRun, user: &str) -> Result<(CharTransformer, Vocab), TrainError> {
    saved.expect(super::Task::Words, user)?;
    let bad = |what: &str| TrainError::Invalid(format!("{}: bad {what}", saved.path().display()));
    let as_whole = |v: f32| (v >= 0.0 && v.fract() == 0.0).then_some(v as usize);
    let chars: Option<Vec<char>> = saved
        .entry(VOCAB_KEY)?
        .to_vec()
        .into_iter()
        .map(|v| as_whole(v).and_then(|v| char::from_u32(v as u32)))
        .collect();
    let vocab = chars.and_then(Vocab::from_chars).ok_or_else(|| bad(VOCAB_KEY))?;
    let sizes: Option<Vec<usize>> = saved.entry(CONFIG_KEY)?.to_vec().into_iter().map(as_whole).collect();
    let config = match sizes.as_deref() {
        Some(&[vocab_len, context, d_model, heads, layers]) if vocab_len == vocab.len() && heads > 0 => {
            Config { vocab: vocab_len, context, d_model, heads, layers }
        }
        _ => return Err(bad(CONFIG_KEY)),
    };
    let mut model = CharTransformer::new(config, 0, false)?;
    // The optimizer only receives the saved state; the words job trains with AdamW.
    let mut optimizer = AdamW::new(AdamConfig::adamw())?;
    saved.load_into(&mut model, &mut optimizer)?;
    Ok((model, vocab))
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
        let words = words::load(settings.data_dir.as_deref())?;
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
        fixed_step_epoch(&self.train, self.settings.batch_size, self.settings.seed, self.steps_per_epoch(), epoch)
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

    fn saved_entries(&self) -> Result<Vec<(&'static str, Tensor)>, TrainError> {
        let vocab: Vec<f32> = self.words.vocab.chars().iter().map(|&c| c as u32 as f32).collect();
        let c = self.model.config();
        let config = vec![c.vocab, c.context, c.d_model, c.heads, c.layers];
        let config: Vec<f32> = config.into_iter().map(|v| v as f32).collect();
        let n = vocab.len();
        Ok(vec![(VOCAB_KEY, Tensor::from_vec(vocab, &[n])?), (CONFIG_KEY, Tensor::from_vec(config, &[5])?)])
    }

    fn clip_norm(&self) -> Option<f32> {
        Some(1.0)
    }

    fn finish(&self) -> Result<(), TrainError> {
        let _guard = forgia::no_grad();
        let mut rng = Rng::new(self.settings.seed ^ 0x5A3B1E);
        println!("\nsampled words (temperature {}):", SAMPLING.temperature);
        for _ in 0..SAMPLES {
            let tokens = self.model.sample(BOUNDARY_INDEX, SAMPLING, &mut rng)?;
            let word = self.words.vocab.decode(&tokens).unwrap_or_default();
            let known = self.words.train.contains(&word) || self.words.validation.contains(&word);
            println!("  {word}{}", if known { "" } else { "  (new)" });
        }
        Ok(())
    }
}
