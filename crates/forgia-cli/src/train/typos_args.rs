//! The typos job's own flags of `forgia train` ([`TyposArgs`], each unset flag taking the
//! job's default) and the options they resolve to ([`TyposOptions`]).

use clap::{Args, ValueEnum};

use super::scheduled::Decay;
use super::{at_least_one, positive_f32};

/// Which hard negatives a training step holds: one extra word per word of the batch, shared by
/// every typo of the batch (`alphabetical`, `edit`), or pairs of close words that are each
/// other's hard negatives (`paired`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum HardNegatives {
    /// None: the batch's other words only.
    None,
    /// Each word's alphabetical neighbour among the training words (often the same stem).
    Alphabetical,
    /// A training word within two edits of the word, drawn afresh every step (the
    /// alphabetical neighbour for a word that has none).
    Edit,
    /// No extra words: the batch is made of pairs of close training words (half of the batch
    /// drawn as usual, each with a partner within two edits drawn afresh every step, a random
    /// training word for a word that has none), each word with its own typo, so that every
    /// word is its partner's hard negative and a positive of its own typo.
    Paired,
}

impl HardNegatives {
    /// The name on the command line and in the job's header line.
    pub(crate) fn name(self) -> &'static str {
        match self {
            HardNegatives::None => "none",
            HardNegatives::Alphabetical => "alphabetical",
            HardNegatives::Edit => "edit",
            HardNegatives::Paired => "paired",
        }
    }
}

/// The direction of the contrastive loss.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum LossKind {
    /// Each typo retrieves its word among the batch's words (`MultipleNegativesRankingLoss`).
    OneWay,
    /// The mean of that and each word retrieving its typo among the batch's typos
    /// (`MultipleNegativesSymmetricRankingLoss`).
    Symmetric,
}

/// Flags of `forgia train` that only the typos job takes.
#[derive(Args, Clone, Debug, Default)]
pub(crate) struct TyposArgs {
    /// Typos: optimizer steps per epoch; held-out top-1 is measured before training and after
    /// each epoch [default: 320].
    #[arg(long, value_name = "N", value_parser = at_least_one)]
    pub(crate) steps_per_epoch: Option<u64>,
    /// Typos: the learning rate after a linear warmup to --lr: constant, or a linear or
    /// cosine decay to zero at the last step [default: linear].
    #[arg(long, value_enum)]
    pub(crate) schedule: Option<Decay>,
    /// Typos: the share of the run's steps spent warming up, in [0, 1) [default: 0.1].
    #[arg(long, value_name = "FRACTION", value_parser = warmup_fraction)]
    pub(crate) warmup: Option<f32>,
    /// Typos: the scale of the cosine similarities in the contrastive loss [default: 20].
    #[arg(long, value_parser = positive_f32)]
    pub(crate) scale: Option<f32>,
    /// Typos: one-way (typos retrieve words) or symmetric contrastive loss [default: symmetric].
    #[arg(long, value_enum)]
    pub(crate) loss: Option<LossKind>,
    /// Typos: extra negatives per word of the batch [default: paired].
    #[arg(long, value_enum)]
    pub(crate) hard_negatives: Option<HardNegatives>,
    /// Typos: typos of each word in one step, each a query row of the loss [default: 1].
    #[arg(long, value_name = "K", value_parser = at_least_one)]
    pub(crate) typos_per_word: Option<u64>,
    /// Typos: the rank of the LoRA adapters [default: 8].
    #[arg(long, value_parser = at_least_one)]
    pub(crate) lora_rank: Option<u64>,
    /// Typos: LoRA alpha (the adapters are scaled by alpha / rank) [default: 2 × rank].
    #[arg(long, value_parser = positive_f32)]
    pub(crate) lora_alpha: Option<f32>,
    /// Typos: the rank of a LoRA adapter on the word-embedding table, scaled by alpha / this
    /// rank; 0 leaves the table without one [default: 8].
    #[arg(long, value_name = "R")]
    pub(crate) embedding_lora_rank: Option<u64>,
    /// Typos: alpha of the word-embedding adapter (scaled by alpha / its rank) [default: 0.25 ×
    /// its rank].
    #[arg(long, value_parser = positive_f32)]
    pub(crate) embedding_lora_alpha: Option<f32>,
}

impl TyposArgs {
    /// The first of these flags that is set, for the error of a job that does not take them.
    pub(crate) fn first_set(&self) -> Option<&'static str> {
        [
            (self.steps_per_epoch.is_some(), "--steps-per-epoch"),
            (self.schedule.is_some(), "--schedule"),
            (self.warmup.is_some(), "--warmup"),
            (self.scale.is_some(), "--scale"),
            (self.loss.is_some(), "--loss"),
            (self.hard_negatives.is_some(), "--hard-negatives"),
            (self.typos_per_word.is_some(), "--typos-per-word"),
            (self.lora_rank.is_some(), "--lora-rank"),
            (self.lora_alpha.is_some(), "--lora-alpha"),
            (self.embedding_lora_rank.is_some(), "--embedding-lora-rank"),
            (self.embedding_lora_alpha.is_some(), "--embedding-lora-alpha"),
        ]
        .into_iter()
        .find_map(|(set, flag)| set.then_some(flag))
    }

    /// The options with the job's defaults in place of unset flags.
    pub(crate) fn resolve(&self) -> TyposOptions {
        let rank = self.lora_rank.map_or(TyposOptions::RANK, |r| r as usize);
        let embedding_rank = self.embedding_lora_rank.map_or(TyposOptions::EMBEDDING_RANK, |r| r as usize);
        TyposOptions {
            steps_per_epoch: self.steps_per_epoch.map_or(TyposOptions::STEPS_PER_EPOCH, |s| s as usize),
            schedule: self.schedule.unwrap_or(Decay::Linear),
            warmup: self.warmup.unwrap_or(TyposOptions::WARMUP),
            scale: self.scale.unwrap_or(TyposOptions::SCALE),
            loss: self.loss.unwrap_or(LossKind::Symmetric),
            hard_negatives: self.hard_negatives.unwrap_or(TyposOptions::HARD_NEGATIVES),
            typos_per_word: self.typos_per_word.map_or(1, |k| k as usize),
            rank,
            alpha: self.lora_alpha.unwrap_or(2.0 * rank as f32),
            embedding_rank,
            embedding_alpha: self.embedding_lora_alpha.unwrap_or(0.25 * embedding_rank as f32),
        }
    }
}

/// Parses a warmup share in `[0, 1)` (a clap value parser).
fn warmup_fraction(s: &str) -> Result<f32, String> {
    match s.parse::<f32>() {
        Ok(v) if (0.0..1.0).contains(&v) => Ok(v),
        Ok(v) => Err(format!("{v} is not in [0, 1)")),
        Err(e) => Err(format!("{s:?} is not a number: {e}")),
    }
}

/// The typos job's options (see [`TyposArgs`] for each).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct TyposOptions {
    /// Optimizer steps per epoch (fewer when `--limit` leaves fewer batches in one pass).
    pub(crate) steps_per_epoch: usize,
    /// The learning rate after the warmup.
    pub(crate) schedule: Decay,
    /// The share of the run's steps spent warming up.
    pub(crate) warmup: f32,
    /// The similarity scale of the contrastive loss.
    pub(crate) scale: f32,
    /// One-way or symmetric loss.
    pub(crate) loss: LossKind,
    /// The extra negatives of each step.
    pub(crate) hard_negatives: HardNegatives,
    /// Typos of each word in one step.
    pub(crate) typos_per_word: usize,
    /// LoRA rank.
    pub(crate) rank: usize,
    /// LoRA alpha.
    pub(crate) alpha: f32,
    /// The rank of the word-embedding table's adapter (0: none).
    pub(crate) embedding_rank: usize,
    /// Alpha of the word-embedding adapter.
    pub(crate) embedding_alpha: f32,
}

impl TyposOptions {
    /// Default steps per epoch.
    pub(crate) const STEPS_PER_EPOCH: usize = 320;
    /// Default warmup share.
    pub(crate) const WARMUP: f32 = 0.1;
    /// Default similarity scale (sentence-transformers' default).
    pub(crate) const SCALE: f32 = 20.0;
    /// Default LoRA rank.
    pub(crate) const RANK: usize = 8;
    /// Default rank of the word-embedding adapter (0: none).
    pub(crate) const EMBEDDING_RANK: usize = 8;
    /// Default hard negatives.
    pub(crate) const HARD_NEGATIVES: HardNegatives = HardNegatives::Paired;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unset_typos_flags_take_the_jobs_defaults() {
        let none = TyposArgs::default();
        assert_eq!(none.first_set(), None);
        let o = none.resolve();
        assert_eq!((o.rank, o.alpha, o.scale), (TyposOptions::RANK, 16.0, TyposOptions::SCALE));
        assert_eq!(
            (o.schedule, o.loss, o.hard_negatives),
            (Decay::Linear, LossKind::Symmetric, TyposOptions::HARD_NEGATIVES)
        );
        assert_eq!(o.typos_per_word, 1);
        assert_eq!((o.embedding_rank, o.embedding_alpha), (TyposOptions::EMBEDDING_RANK, 2.0));
        let off = TyposArgs { embedding_lora_rank: Some(0), ..TyposArgs::default() };
        assert_eq!(off.first_set(), Some("--embedding-lora-rank"));
        assert_eq!(off.resolve().embedding_rank, 0);
        let set = TyposArgs { lora_rank: Some(4), scale: Some(30.0), ..TyposArgs::default() };
        assert_eq!(set.first_set(), Some("--scale"));
        let o = set.resolve();
        assert_eq!((o.rank, o.alpha, o.scale), (4, 8.0, 30.0), "alpha follows the rank");
        assert!(warmup_fraction("0").is_ok() && warmup_fraction("1").is_err() && warmup_fraction("-0.1").is_err());
        assert!(warmup_fraction("x").is_err());
    }
}
