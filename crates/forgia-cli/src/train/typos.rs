//! The typos job: LoRA fine-tuning of a sentence-transformers model (all-MiniLM-L6-v2, fetched
//! by `tools/fetch_minilm.sh`) so that a misspelled English word's embedding lies nearest its
//! correct form.
//!
//! * Data ([`crate::data::typos`]): the shipped word list, a fixed split of held-out words,
//!   and a fresh seeded typo (insert, delete, swap, replace) of every training word of a step.
//! * Model: the pretrained encoder, frozen (every base weight a constant), with LoRA adapters
//!   (`--lora-rank`, `--lora-alpha`) on every linear layer of the encoder ([`TARGETS`]) and
//!   on the word-embedding table (`--embedding-lora-rank`, `--embedding-lora-alpha`); words
//!   are short, so sequences are cut at [`MAX_TOKENS`] tokens. A step's texts are embedded in
//!   groups of equal token length ([`length_groups`]), so that little compute goes to padding.
//! * Loss: in-batch contrastive (sentence-transformers' `MultipleNegativesRankingLoss`, or its
//!   symmetric variant with `--loss symmetric`): the cosine similarities of the batch's typos
//!   against its correct words, times `--scale`, cross-entropy against the diagonal (each
//!   typo's own word is its class; the batch's other words are the negatives, and with
//!   `--hard-negatives` one more word per word of the batch: a training word within two edits
//!   of it, or its alphabetical neighbour).
//! * Optimizer: AdamW, its learning rate warmed up linearly to `--lr` over the first
//!   `--warmup` share of the steps, then decayed as `--schedule` says ([`Scheduled`]).
//! * Metric: top-1 retrieval on the held-out words: the query is a fixed typo of each held-out
//!   word, the candidates are all [`typos::HELDOUT`] held-out words; a query scores when its
//!   most similar candidate is its word. Measured before training (the pretrained model) and
//!   after every epoch of `--steps-per-epoch` steps.
//! * Output: the adapters, under PEFT's names, in `<out>/adapter_model.safetensors`.
//!
//! The defaults of every knob are in [`DEFAULTS`] and
//! [`TyposArgs::resolve`](super::typos_args::TyposArgs::resolve); the experiments that chose
//! them are in `docs/TYPOS.md`.

use std::cell::Cell;
use std::path::{Path, PathBuf};

use forgia::loss::{cross_entropy, CrossEntropyOptions};
use forgia::models::lora;
use forgia::nn::Module;
use forgia::optim::{AdamConfig, AdamW, Optimizer};
use forgia::{Indices, Rng, Tensor};

use super::job::{fixed_step_epoch, subset};
use super::scheduled::{Scheduled, WarmupDecay};
use super::typos_args::{HardNegatives, LossKind, TyposOptions};
use super::{Job, Metric, Settings, StepOut, TrainArgs, TrainError};
use crate::data::typos::{self, TypoWords};
use crate::embed::Embedder;

/// Epochs, batch size and (peak) learning rate when no flag says otherwise; the job's other
/// knobs are [`TyposArgs`](super::typos_args::TyposArgs).
pub(super) const DEFAULTS: (u64, usize, f32) = (5, 64, 2e-3);
/// Longest token sequence (`[CLS]`, the word pieces, `[SEP]`).
pub(crate) const MAX_TOKENS: usize = 16;
/// The layers that get adapters: every linear layer of every encoder block (not the pooler,
/// which sentence embeddings do not use).
pub(crate) const TARGETS: [&str; 6] =
    ["query", "key", "value", "attention.output.dense", "intermediate.dense", "output.dense"];
/// The most texts of one forward pass during evaluation.
const EVAL_BATCH: usize = 256;
/// The fewest texts of a group of [`length_groups`] (a smaller group joins the next length).
const MIN_GROUP: usize = 16;
/// The adapters' file in the output folder (PEFT's name).
pub(crate) const ADAPTERS_FILE: &str = "adapter_model.safetensors";
/// Where the model is looked for without `--model` (relative to the working directory, then
/// to the repository root).
pub(crate) const DEFAULT_MODEL: &str = "models/all-minilm-l6-v2";

/// Rejects the flags of `forgia train` that the typos job does not take.
///
/// # Errors
/// [`TrainError::Invalid`] naming the flag.
pub(super) fn check_flags(args: &TrainArgs) -> Result<(), TrainError> {
    let unsupported =
        [(args.save.is_some(), "--save"), (args.resume.is_some(), "--resume"), (args.checkpoint, "--checkpoint")];
    match unsupported.iter().find(|(set, _)| *set) {
        Some((_, flag)) => Err(TrainError::Invalid(format!(
            "{flag} does not apply to the typos task (it saves its LoRA adapters to <out>/{ADAPTERS_FILE})"
        ))),
        None => Ok(()),
    }
}

/// The model folder: `--model`, else [`DEFAULT_MODEL`] under the working directory or the
/// repository root; [`TrainError::MissingFile`] when it holds no `config.json`.
fn model_dir(given: Option<&Path>) -> Result<PathBuf, TrainError> {
    let dir = match given {
        Some(d) => d.to_path_buf(),
        None => {
            let repo = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")).join(DEFAULT_MODEL);
            [PathBuf::from(DEFAULT_MODEL), repo]
                .into_iter()
                .find(|d| d.join("config.json").is_file())
                .unwrap_or_else(|| PathBuf::from(DEFAULT_MODEL))
        }
    };
    if !dir.join("config.json").is_file() {
        return Err(TrainError::MissingFile {
            what: "model folder",
            path: dir,
            hint: "run tools/fetch_minilm.sh or pass --model DIR".into(),
        });
    }
    Ok(dir)
}

/// L2-normalizes the rows of `x [N, H]` (`x / max(‖x‖, 1e-12)`, as `F.normalize`).
fn normalize_rows(x: &Tensor) -> forgia::Result<Tensor> {
    x.div(&x.square().sum(1, true)?.sqrt().clamp(1e-12, f32::INFINITY)?)
}

/// For each word, the index of the word after it in alphabetical order (case ignored; the one
/// before it for the last word; itself when it is the only one).
pub(crate) fn neighbours(words: &[String]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..words.len()).collect();
    order.sort_by_cached_key(|&i| (words[i].to_lowercase(), i));
    let mut out = vec![0; words.len()];
    for (r, &i) in order.iter().enumerate() {
        out[i] = if r + 1 < order.len() { order[r + 1] } else { order[r.saturating_sub(1)] };
    }
    out
}

/// The in-batch contrastive loss of queries `q [B, H]` against their positives `d [B, H]`
/// (`MultipleNegativesRankingLoss`): `S = scale · cos(q_i, d_j)`, the mean cross-entropy of
/// each row of `S` against its diagonal; `symmetric` averages it with the same of the first
/// `B` columns of `S`, transposed (each positive retrieving its query among the queries:
/// `MultipleNegativesSymmetricRankingLoss`). `d` may hold more rows than `q` (`[B + M, H]`):
/// rows past `B` are extra negatives of every query (hard negatives). Backward: that of the ops
/// it is built from. [`multi_query_contrastive`] with one query per positive (the job calls
/// that one; this form is the tests' reference).
///
/// # Errors
/// `ShapeMismatch` when `q` is not `[B, H]` or `d` is not `[B + M, H]` (`M ≥ 0`).
#[cfg(test)]
pub(crate) fn in_batch_contrastive(q: &Tensor, d: &Tensor, scale: f32, symmetric: bool) -> forgia::Result<Tensor> {
    multi_query_contrastive(q, d, q.shape().first().copied().unwrap_or(0), scale, symmetric)
}

/// `in_batch_contrastive` (sentence-transformers' loss) with `K` queries per positive: `q [K·B, H]` holds `K` blocks of
/// `B` queries, query `k·B + i` being one of positive `i`'s (`d [B + M, H]`, rows past `B`
/// extra negatives). One way: each of the `K·B` queries retrieves its positive among all rows
/// of `d` (the mean cross-entropy of the rows of `S = scale · cos(q, d)` against label
/// `i`). The symmetric half: for each block `k`, each positive retrieves its `k`-th query among
/// the `B` queries of that block (the transposed `B × B` block of `S`), averaged over the
/// blocks; the loss is the mean of the two halves. With `K = 1` this is
/// `MultipleNegativesSymmetricRankingLoss`. Backward: that of the ops it is built from.
///
/// # Errors
/// `ShapeMismatch` when `q` is not `[K·B, H]` (`K ≥ 1`) or `d` is not `[B + M, H]` (`M ≥ 0`),
/// `B = n ≥ 1`.
pub(crate) fn multi_query_contrastive(
    q: &Tensor,
    d: &Tensor,
    n: usize,
    scale: f32,
    symmetric: bool,
) -> forgia::Result<Tensor> {
    let (qs, ds) = (q.shape(), d.shape());
    if qs.len() != 2 || ds.len() != 2 || qs[1] != ds[1] || n == 0 || qs[0] % n != 0 || qs[0] == 0 || ds[0] < n {
        return Err(forgia::Error::from(forgia::ErrorKind::ShapeMismatch {
            op: "multi_query_contrastive",
            lhs: qs.to_vec(),
            rhs: ds.to_vec(),
        }));
    }
    let k = qs[0] / n;
    let scores = normalize_rows(q)?.matmul(&normalize_rows(d)?.transpose(0, 1)?)?.scale(scale);
    let labels = Indices::from((0..(k * n) as i64).map(|r| r % n as i64).collect::<Vec<_>>());
    let forward = cross_entropy(&scores, &labels, CrossEntropyOptions::default())?;
    if !symmetric {
        return Ok(forward);
    }
    let diagonal = Indices::from((0..n as i64).collect::<Vec<_>>());
    let mut backward: Option<Tensor> = None;
    for block in 0..k {
        let square = scores.narrow(0, block * n, n)?.narrow(1, 0, n)?.transpose(0, 1)?.contiguous()?;
        let ce = cross_entropy(&square, &diagonal, CrossEntropyOptions::default())?;
        backward = Some(match backward {
            None => ce,
            Some(sum) => sum.add(&ce)?,
        });
    }
    let backward = backward.expect("k >= 1 blocks").scale(1.0 / k as f32);
    Ok(forward.add(&backward)?.scale(0.5))
}

/// Groups of the indices of texts with token counts `lens`, for one forward pass each: by
/// count, shortest first, each group cut when the count changes (once it holds at least
/// `min_rows`; a smaller group takes the next count's texts too) or when it holds `max_rows`.
/// Every index appears once. A group pads its texts to its longest, so this spends little on
/// padding while keeping the matrix products large.
pub(crate) fn length_groups(lens: &[usize], max_rows: usize, min_rows: usize) -> Vec<Vec<usize>> {
    let mut order: Vec<usize> = (0..lens.len()).collect();
    order.sort_by_key(|&i| (lens[i], i));
    let mut groups: Vec<Vec<usize>> = Vec::new();
    let mut current: Vec<usize> = Vec::new();
    for i in order {
        let longer = current.last().is_some_and(|&j| lens[i] > lens[j]);
        if current.len() >= max_rows.max(1) || (longer && current.len() >= min_rows) {
            groups.push(std::mem::take(&mut current));
        }
        current.push(i);
    }
    if !current.is_empty() {
        groups.push(current);
    }
    groups
}

/// The share (in percent) of rows `i` of `scores [N, N]` (row-major) whose largest entry is
/// the diagonal one (the first largest on ties).
pub(crate) fn top1_percent(scores: &[f32], n: usize) -> f64 {
    if n == 0 {
        return 0.0;
    }
    let hits = scores
        .chunks(n)
        .enumerate()
        .filter(|(i, row)| {
            let best = row.iter().enumerate().fold(0, |b, (j, &v)| if v > row[b] { j } else { b });
            best == *i
        })
        .count();
    100.0 * hits as f64 / n as f64
}

/// The typos job.
pub(super) struct TyposJob {
    embedder: Embedder,
    dir: PathBuf,
    words: TypoWords,
    /// Indices into `words.train` in use (`--limit`).
    train: Vec<usize>,
    /// One fixed typo of each held-out word.
    queries: Vec<String>,
    /// Each training word's alphabetical neighbour among the training words (the next one, the
    /// previous one for the last), which often shares its stem (`abandon`, `abandoned`).
    neighbour: Vec<usize>,
    /// Each training word's close words ([`typos::close_words`]; empty unless
    /// `--hard-negatives edit`).
    close: Vec<Vec<u32>>,
    adapted: usize,
    settings: Settings,
    options: TyposOptions,
    /// The metric before training and after the latest epoch, for the closing line.
    before: Cell<Option<f64>>,
    after: Cell<Option<f64>>,
    /// Token rows embedded by the training steps so far (texts times the padded length of their
    /// group, summed over the groups), and those steps: the cost of a step.
    train_rows: Cell<u64>,
    train_steps: Cell<u64>,
}

impl TyposJob {
    /// Loads the model and the words, adds the adapters and freezes the base.
    ///
    /// # Errors
    /// A missing model folder or word list, a bad model file or tokenizer.
    pub(super) fn new(settings: &Settings) -> Result<TyposJob, TrainError> {
        let options = settings.typos.resolve();
        let dir = model_dir(settings.model.as_deref())?;
        let words = typos::load(settings.data_dir.as_deref())?;
        let mut embedder = Embedder::open(&dir, Some(MAX_TOKENS))?;
        let mut rng = Rng::new(settings.seed ^ 0x10_4a);
        let adapted = lora::add_lora(&mut embedder.encoder.bert, &TARGETS, options.rank, options.alpha, &mut rng)?;
        if options.embedding_rank > 0 {
            let table = &mut embedder.encoder.bert.word_embeddings;
            table.add_lora(options.embedding_rank, options.embedding_alpha, &mut rng)?;
        }
        lora::freeze_base(&mut embedder.encoder.bert);
        let train = subset(words.train.len(), settings.limit);
        let queries = typos::eval_queries(&words);
        let neighbour = neighbours(&words.train);
        let close = match options.hard_negatives {
            HardNegatives::Edit | HardNegatives::Paired => typos::close_words(&words.train),
            HardNegatives::None | HardNegatives::Alphabetical => Vec::new(),
        };
        Ok(TyposJob {
            embedder,
            dir,
            words,
            train,
            queries,
            neighbour,
            close,
            adapted,
            settings: settings.clone(),
            options,
            before: Cell::new(None),
            after: Cell::new(None),
            train_rows: Cell::new(0),
            train_steps: Cell::new(0),
        })
    }

    /// Steps per epoch: `--steps-per-epoch`, or one pass when the training set is smaller.
    fn steps_per_epoch(&self) -> usize {
        self.options.steps_per_epoch.min(self.train.len().div_ceil(self.settings.batch_size).max(1))
    }

    /// The learning rate of every step of the run.
    fn schedule(&self, s: &Settings) -> WarmupDecay {
        let total = s.epochs * self.steps_per_epoch() as u64;
        let warmup = (self.options.warmup as f64 * total as f64).round() as u64;
        WarmupDecay { peak: s.lr, warmup, total, decay: self.options.schedule }
    }

    /// Embeddings `[N, H]` of `texts` (a graph when grad mode is on), computed in groups of
    /// equal token length ([`length_groups`], at most `max_rows` texts a forward pass) and
    /// put back in the order of `texts`; with the token rows embedded (texts times their
    /// group's padded length, summed over the groups).
    fn embed(&self, texts: &[String], max_rows: usize) -> Result<(Tensor, usize), TrainError> {
        let (ids, mask) = self.embedder.tokenize(texts)?;
        let width = ids.shape()[1];
        let lens: Vec<usize> = mask.data().chunks(width).map(|m| m.iter().filter(|&&v| v != 0).count()).collect();
        let groups = length_groups(&lens, max_rows, MIN_GROUP);
        if groups.len() == 1 {
            return Ok((self.embedder.encoder.embed(&ids, &mask)?, texts.len() * width));
        }
        let mut token_rows = 0;
        let mut parts = Vec::with_capacity(groups.len());
        let mut row_of = vec![0i64; texts.len()];
        let mut row = 0;
        for g in &groups {
            let len = g.iter().map(|&i| lens[i]).max().unwrap_or(0);
            // Padding is at the end of each row: a row's first `len` tokens hold all of it.
            let cut = |x: &Indices| -> Vec<i64> {
                g.iter().flat_map(|&i| x.data()[i * width..i * width + len].iter().copied()).collect()
            };
            let shape = [g.len(), len];
            token_rows += g.len() * len;
            let (gi, gm) = (Indices::new(cut(&ids), &shape)?, Indices::new(cut(&mask), &shape)?);
            parts.push(self.embedder.encoder.embed(&gi, &gm)?);
            for &i in g {
                row_of[i] = row;
                row += 1;
            }
        }
        let refs: Vec<&Tensor> = parts.iter().collect();
        Ok((Tensor::concat(&refs, 0)?.index_select(0, &Indices::from(row_of))?, token_rows))
    }

    /// Held-out top-1 retrieval in percent (see the module docs).
    fn top1(&self) -> Result<f64, TrainError> {
        let candidates = normalize_rows(&self.embed(&self.words.heldout, EVAL_BATCH)?.0)?;
        let queries = normalize_rows(&self.embed(&self.queries, EVAL_BATCH)?.0)?;
        let scores = queries.matmul(&candidates.transpose(0, 1)?)?;
        Ok(top1_percent(&scores.to_vec(), self.queries.len()))
    }

    /// The hard negative of training word `i` in slot `slot` of step `step` (none in
    /// `paired` mode, where the partners are positives too).
    fn hard_negative(&self, i: usize, step: u64, slot: usize) -> Option<usize> {
        match self.options.hard_negatives {
            HardNegatives::None | HardNegatives::Paired => None,
            HardNegatives::Alphabetical => Some(self.neighbour[i]),
            HardNegatives::Edit => match self.close[i].as_slice() {
                [] => Some(self.neighbour[i]),
                close => {
                    let mut rng = Rng::new(typos::pair_seed(self.settings.seed ^ 0x006e_6567, step, slot));
                    Some(close[rng.below(close.len())] as usize)
                }
            },
        }
    }
}

impl TyposJob {
    /// The words of step `step` whose typos are queries (the `batch`'s words, and in `paired`
    /// mode their partners after them: [`typos::partners`]) and the extra negatives (one per
    /// word of the batch, or none), as indices into the training words.
    fn step_words(&self, batch: &[usize], step: u64) -> (Vec<usize>, Vec<usize>) {
        if self.options.hard_negatives != HardNegatives::Paired {
            let negatives = batch.iter().enumerate().filter_map(|(slot, &i)| self.hard_negative(i, step, slot));
            return (batch.to_vec(), negatives.collect());
        }
        let mut rng = Rng::new(typos::pair_seed(self.settings.seed ^ 0x7061_6972, step, 0));
        let partners = typos::partners(batch, &self.close, &self.train, self.words.train.len(), &mut rng);
        (batch.iter().copied().chain(partners.into_iter().flatten()).collect(), Vec::new())
    }
}

/// Words drawn from the plan for each step of `batch` words: half of them (rounded up) in
/// `paired` mode, where each brings a partner, else all.
pub(crate) fn anchors_per_step(batch: usize, hard_negatives: HardNegatives) -> usize {
    match hard_negatives {
        HardNegatives::Paired => batch.div_ceil(2),
        _ => batch,
    }
}

impl Job for TyposJob {
    fn model(&self) -> &dyn Module {
        &self.embedder.encoder.bert
    }

    fn model_mut(&mut self) -> &mut dyn Module {
        &mut self.embedder.encoder.bert
    }

    fn optimizer(&self, settings: &Settings) -> Result<Box<dyn Optimizer>, TrainError> {
        let adamw = Box::new(AdamW::new(AdamConfig { lr: settings.lr, ..AdamConfig::adamw() })?);
        Ok(Box::new(Scheduled::new(adamw, self.schedule(settings))?))
    }

    fn headline(&self) -> &'static str {
        "MiniLM + LoRA, in-batch contrastive, AdamW"
    }

    fn describe(&self, s: &Settings) -> String {
        let c = &self.embedder.encoder.bert.config;
        let params = self.embedder.encoder.bert.named_parameters();
        let trainable: usize = params.iter().filter(|(_, t)| t.is_variable()).map(|(_, t)| t.numel()).sum();
        let total: usize = params.iter().map(|(_, t)| t.numel()).sum();
        let o = &self.options;
        let loss = match o.loss {
            LossKind::OneWay => "one-way",
            LossKind::Symmetric => "symmetric",
        };
        let schedule = self.schedule(s);
        let table = match o.embedding_rank {
            0 => String::new(),
            r => format!(" and rank {r} (alpha {}) on the word embeddings", o.embedding_alpha),
        };
        format!(
            "typos: {} ({} layers, hidden {}) with LoRA rank {} (alpha {}) on {} linear layers{table}: \
             {trainable} trainable of {total} parameters, base frozen; {} training / {} held-out words, \
             sequences of at most {MAX_TOKENS} tokens; {loss} in-batch contrastive loss (scale {}), \
             hard negatives: {}, {} typo(s) per word; AdamW lr {} ({} warmup steps, then {}), batch {}, {} epochs of {} steps",
            self.dir.display(),
            c.num_hidden_layers,
            c.hidden_size,
            o.rank,
            o.alpha,
            self.adapted,
            self.train.len(),
            self.words.heldout.len(),
            o.scale,
            o.hard_negatives.name(),
            o.typos_per_word,
            s.lr,
            schedule.warmup,
            o.schedule.name(),
            s.batch_size,
            s.epochs,
            self.steps_per_epoch(),
        )
    }

    fn metric(&self) -> Metric {
        Metric::RetrievalTop1
    }

    fn plan(&self, epoch: u64) -> Vec<Vec<usize>> {
        let anchors = anchors_per_step(self.settings.batch_size, self.options.hard_negatives);
        fixed_step_epoch(&self.train, anchors, self.settings.seed, self.steps_per_epoch(), epoch)
    }

    fn train_step(&self, batch: &[usize], step: u64) -> Result<StepOut, TrainError> {
        let (positives, negatives) = self.step_words(batch, step);
        let train = &self.words.train;
        let words: Vec<&str> = positives.iter().map(|&i| train[i].as_str()).collect();
        let k = self.options.typos_per_word;
        let seed = self.settings.seed;
        let mut texts = typos::distinct_typos(&words, k, &self.words.dictionary, |slot| {
            Rng::new(typos::pair_seed(seed, step, slot))
        });
        texts.extend(words.iter().map(|w| w.to_string()));
        texts.extend(negatives.iter().map(|&j| train[j].clone()));
        // One embedding pass for the typos, their words and the negatives together.
        let (e, rows) = self.embed(&texts, texts.len())?;
        self.train_rows.set(self.train_rows.get() + rows as u64);
        self.train_steps.set(self.train_steps.get() + 1);
        let (n, queries) = (positives.len(), k * positives.len());
        let symmetric = self.options.loss == LossKind::Symmetric;
        let (q, d) = (e.narrow(0, 0, queries)?, e.narrow(0, queries, texts.len() - queries)?);
        let loss = multi_query_contrastive(&q, &d, n, self.options.scale, symmetric)?;
        Ok(StepOut { loss, correct: None })
    }

    fn evaluate(&self) -> Result<f64, TrainError> {
        let top1 = self.top1()?;
        self.after.set(Some(top1));
        Ok(top1)
    }

    fn baseline(&self) -> Result<Option<f64>, TrainError> {
        // The adapters start at zero (`B = 0`): this is the pretrained model's score.
        let top1 = self.top1()?;
        self.before.set(Some(top1));
        Ok(Some(top1))
    }

    fn write_outputs(&mut self, out: &Path) -> Result<Vec<PathBuf>, TrainError> {
        let path = out.join(ADAPTERS_FILE);
        lora::save_adapters(&path, &mut self.embedder.encoder.bert)?;
        Ok(vec![path])
    }

    fn finish(&self) -> Result<(), TrainError> {
        if self.train_steps.get() > 0 {
            println!(
                "token rows embedded per training step: {:.1} (mean of {} steps)",
                self.train_rows.get() as f64 / self.train_steps.get() as f64,
                self.train_steps.get()
            );
        }
        if let (Some(before), Some(after)) = (self.before.get(), self.after.get()) {
            println!(
                "held-out top-1 retrieval ({} typos among {} words): pretrained {before:.2}%, fine-tuned {after:.2}% \
                 ({:+.2} points)",
                self.queries.len(),
                self.words.heldout.len(),
                after - before
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_contrastive_loss_is_the_cross_entropy_of_scaled_cosines_against_the_diagonal() {
        // q = [(1, 0), (0, 2)], d = [(1, 1), (0, 3)]: cosines [[1/√2, 0], [1/√2, 1]].
        let q = Tensor::from_vec(vec![1.0, 0.0, 0.0, 2.0], &[2, 2]).unwrap();
        let d = Tensor::from_vec(vec![1.0, 1.0, 0.0, 3.0], &[2, 2]).unwrap();
        let s = std::f64::consts::FRAC_1_SQRT_2;
        let scale = 2.0;
        let ce = |row: [f64; 2], label: usize| {
            let lse = ((row[0] * scale).exp() + (row[1] * scale).exp()).ln();
            lse - row[label] * scale
        };
        let rows = (ce([s, 0.0], 0) + ce([s, 1.0], 1)) / 2.0;
        let cols = (ce([s, s], 0) + ce([0.0, 1.0], 1)) / 2.0;
        let one_way = in_batch_contrastive(&q, &d, scale as f32, false).unwrap().item().unwrap() as f64;
        assert!((one_way - rows).abs() < 1e-5, "{one_way} vs {rows}");
        let both = in_batch_contrastive(&q, &d, scale as f32, true).unwrap().item().unwrap() as f64;
        assert!((both - (rows + cols) / 2.0).abs() < 1e-5, "{both} vs {}", (rows + cols) / 2.0);
        for (bad, symmetric) in [([2, 3], false), ([1, 2], false), ([1, 2], true), ([3, 3], true)] {
            let bad = Tensor::zeros(&bad).unwrap();
            assert!(in_batch_contrastive(&q, &bad, 1.0, symmetric).is_err(), "{:?}", bad.shape());
        }
        // An extra row of d, (1, 0), is one more negative of both queries.
        let with_negative = Tensor::from_vec(vec![1.0, 1.0, 0.0, 3.0, 1.0, 0.0], &[3, 2]).unwrap();
        let ce3 = |row: [f64; 3], label: usize| {
            let lse = row.iter().map(|v| (v * scale).exp()).sum::<f64>().ln();
            lse - row[label] * scale
        };
        let rows3 = (ce3([s, 0.0, 1.0], 0) + ce3([s, 1.0, 0.0], 1)) / 2.0;
        let got = in_batch_contrastive(&q, &with_negative, scale as f32, false).unwrap().item().unwrap() as f64;
        assert!((got - rows3).abs() < 1e-5, "{got} vs {rows3}");
        // Symmetric: the words retrieve their typos among the typos only (the first two columns).
        let got = in_batch_contrastive(&q, &with_negative, scale as f32, true).unwrap().item().unwrap() as f64;
        assert!((got - (rows3 + cols) / 2.0).abs() < 1e-5, "{got} vs {}", (rows3 + cols) / 2.0);
    }

    #[test]
    fn with_k_typos_per_word_every_typo_is_a_query_row_and_each_block_a_reverse_problem() {
        // B = 2 words d = [(1, 0), (0, 1)], K = 2 blocks of queries: q0 = [(1, 0), (1, 1)],
        // q1 = [(1, 1), (0, 1)] (query k·B + i is a typo of word i).
        let q = Tensor::from_vec(vec![1.0, 0.0, 1.0, 1.0, 1.0, 1.0, 0.0, 1.0], &[4, 2]).unwrap();
        let d = Tensor::from_vec(vec![1.0, 0.0, 0.0, 1.0], &[2, 2]).unwrap();
        let (s, scale) = (std::f64::consts::FRAC_1_SQRT_2, 3.0);
        let ce = |row: &[f64], label: usize| {
            let lse = row.iter().map(|v| (v * scale).exp()).sum::<f64>().ln();
            lse - row[label] * scale
        };
        // Cosines of the query rows against the words: [1, 0], [s, s], [s, s], [0, 1].
        let rows = (ce(&[1.0, 0.0], 0) + ce(&[s, s], 1) + ce(&[s, s], 0) + ce(&[0.0, 1.0], 1)) / 4.0;
        let got = multi_query_contrastive(&q, &d, 2, scale as f32, false).unwrap().item().unwrap() as f64;
        assert!((got - rows).abs() < 1e-5, "{got} vs {rows}");
        // Reverse: word i retrieves its typo among block k's typos. Block 0: word 0 sees
        // [1, s], word 1 sees [0, s]; block 1: word 0 sees [s, 0], word 1 sees [s, 1].
        let block0 = (ce(&[1.0, s], 0) + ce(&[0.0, s], 1)) / 2.0;
        let block1 = (ce(&[s, 0.0], 0) + ce(&[s, 1.0], 1)) / 2.0;
        let want = (rows + (block0 + block1) / 2.0) / 2.0;
        let got = multi_query_contrastive(&q, &d, 2, scale as f32, true).unwrap().item().unwrap() as f64;
        assert!((got - want).abs() < 1e-5, "{got} vs {want}");
        // K = 1 is the in-batch loss.
        let first = q.narrow(0, 0, 2).unwrap().contiguous().unwrap();
        let a = multi_query_contrastive(&first, &d, 2, 3.0, true).unwrap().item().unwrap();
        assert_eq!(a, in_batch_contrastive(&first, &d, 3.0, true).unwrap().item().unwrap());
        // Query rows not a multiple of B, or no word: an error.
        assert!(multi_query_contrastive(&q, &d, 3, 1.0, true).is_err());
        assert!(multi_query_contrastive(&q, &d, 0, 1.0, true).is_err());
        let report = forgia::gradcheck(
            |x| multi_query_contrastive(&x[0], &d, 2, 2.0, true),
            &[q.detach().into_variable()],
            forgia::GradcheckOptions::default(),
        )
        .unwrap();
        assert!(report.passed(), "{:?}", report.first_mismatch);
        assert_eq!(anchors_per_step(64, HardNegatives::Paired), 32);
        assert_eq!(anchors_per_step(7, HardNegatives::Paired), 4);
        assert_eq!(anchors_per_step(64, HardNegatives::Edit), 64);
    }

    #[test]
    fn length_groups_cut_at_each_new_length_and_at_the_row_limit() {
        let lens = [5, 3, 3, 4, 5, 3, 9];
        assert_eq!(length_groups(&lens, 10, 1), vec![vec![1, 2, 5], vec![3], vec![0, 4], vec![6]]);
        // A group of fewer than 3 texts takes the next length's too.
        assert_eq!(length_groups(&lens, 10, 3), vec![vec![1, 2, 5], vec![3, 0, 4], vec![6]]);
        assert_eq!(length_groups(&lens, 2, 1), vec![vec![1, 2], vec![5], vec![3], vec![0, 4], vec![6]]);
        assert_eq!(length_groups(&lens, 100, 100), vec![vec![1, 2, 5, 3, 0, 4, 6]]);
        assert!(length_groups(&[], 4, 1).is_empty());
    }

    #[test]
    fn each_words_hard_negative_is_its_alphabetical_neighbour() {
        let words: Vec<String> = ["cat", "Abandoned", "abandon", "zebra"].iter().map(|w| w.to_string()).collect();
        // Sorted: abandon (2), Abandoned (1), cat (0), zebra (3).
        assert_eq!(neighbours(&words), vec![3, 0, 1, 0]);
        assert_eq!(neighbours(&["one".to_string()]), vec![0]);
        assert!(neighbours(&[]).is_empty());
    }

    #[test]
    fn the_contrastive_loss_trains_only_what_has_a_gradient() {
        let q = Tensor::from_vec(vec![0.3, -0.2, 0.5, 0.1, 0.9, -0.4], &[3, 2]).unwrap().into_variable();
        let d = Tensor::from_vec(vec![0.2, 0.1, -0.3, 0.8, 0.4, 0.4], &[3, 2]).unwrap();
        let loss = in_batch_contrastive(&q, &d, 20.0, false).unwrap();
        loss.backward().unwrap();
        assert_eq!(q.grad().unwrap().shape(), &[3, 2]);
        assert!(d.grad().is_none());
        let report = forgia::gradcheck(
            |x| in_batch_contrastive(&x[0], &d, 5.0, true),
            &[q.detach().into_variable()],
            forgia::GradcheckOptions::default(),
        )
        .unwrap();
        assert!(report.passed(), "{:?}", report.first_mismatch);
    }

    #[test]
    fn top1_counts_rows_whose_best_column_is_the_diagonal() {
        let scores = [0.9, 0.1, 0.0, 0.5, 0.2, 0.1, 0.3, 0.3, 0.3];
        // Row 0: best 0 (hit); row 1: best 0 (miss); row 2: a tie goes to the first (miss).
        assert!((top1_percent(&scores, 3) - 100.0 / 3.0).abs() < 1e-9);
        assert_eq!(top1_percent(&[], 0), 0.0);
    }
}
