//! The [`Job`] trait every training task implements, and the sample order helpers the jobs
//! share.

use forgia::nn::Module;
use forgia::optim::{Adam, AdamConfig, Optimizer};
use forgia::{Rng, Tensor};

use super::{Settings, TrainError};

/// What a job reports after each epoch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Metric {
    /// Percent of the test set classified correctly (higher is better).
    TestAccuracy,
    /// Mean cross-entropy per token on the validation set (lower is better).
    ValidationLoss,
    /// Percent of held-out queries whose nearest candidate is the right one (higher is better).
    RetrievalTop1,
}

impl Metric {
    /// The metric's name in tables and messages.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Metric::TestAccuracy => "test accuracy",
            Metric::ValidationLoss => "validation loss",
            Metric::RetrievalTop1 => "held-out top-1",
        }
    }

    /// The CSV column name.
    pub(crate) fn column(self) -> &'static str {
        match self {
            Metric::TestAccuracy => "test_accuracy",
            Metric::ValidationLoss => "validation_loss",
            Metric::RetrievalTop1 => "heldout_top1",
        }
    }

    /// The metric's axis label on plots, with its unit.
    pub(crate) fn axis_label(self) -> &'static str {
        match self {
            Metric::TestAccuracy => "test accuracy (%)",
            Metric::ValidationLoss => "validation loss (nats per character)",
            Metric::RetrievalTop1 => "held-out top-1 retrieval (%)",
        }
    }

    /// A value formatted for people.
    pub(crate) fn format(self, value: f64) -> String {
        match self {
            Metric::TestAccuracy | Metric::RetrievalTop1 => format!("{value:.2}%"),
            Metric::ValidationLoss => format!("{value:.4}"),
        }
    }

    /// Whether the metric is a percentage.
    pub(crate) fn is_percent(self) -> bool {
        matches!(self, Metric::TestAccuracy | Metric::RetrievalTop1)
    }
}

/// One training step's result: the loss (with its graph) and, for classifiers, how many of
/// the batch's samples the model got right.
pub(crate) struct StepOut {
    /// The scalar mean loss of the batch, ready for `backward`.
    pub(crate) loss: Tensor,
    /// Correct predictions in the batch, for classifiers.
    pub(crate) correct: Option<usize>,
}

/// A training task: a model, its data, its loss and its evaluation.
pub(crate) trait Job {
    /// The model (for gradients and checkpoints).
    fn model(&self) -> &dyn Module;
    /// The model, mutably (for the optimizer and train/eval switches).
    fn model_mut(&mut self) -> &mut dyn Module;
    /// The optimizer this task trains with (Adam at the requested learning rate unless a task
    /// says otherwise).
    fn optimizer(&self, settings: &Settings) -> Result<Box<dyn Optimizer>, TrainError> {
        Ok(Box::new(Adam::new(AdamConfig { lr: settings.lr, ..AdamConfig::adam() })?))
    }
    /// The model and optimizer in a few words, for the plot's title (`CNN, Adam`).
    fn headline(&self) -> &'static str;
    /// One line describing the model and the data.
    fn describe(&self, settings: &Settings) -> String;
    /// What `evaluate` measures.
    fn metric(&self) -> Metric;
    /// The batches of epoch `epoch` as lists of training-sample indices.
    fn plan(&self, epoch: u64) -> Vec<Vec<usize>>;
    /// The loss of one batch; `step` is the number of optimizer steps taken before it
    /// (seeds dropout and augmentation, so a resumed run continues the same sequence).
    fn train_step(&self, batch: &[usize], step: u64) -> Result<StepOut, TrainError>;
    /// The epoch metric, computed in evaluation mode without a graph.
    fn evaluate(&self) -> Result<f64, TrainError>;
    /// Gradient-norm clipping threshold, if the task clips.
    fn clip_norm(&self) -> Option<f32> {
        None
    }
    /// What a saved run must carry, beyond the weights, to rebuild this model without the
    /// training data (the words task: its vocabulary and sizes), as named constant tensors.
    fn saved_entries(&self) -> Result<Vec<(&'static str, Tensor)>, TrainError> {
        Ok(Vec::new())
    }
    /// Runs after training (the words task prints samples).
    fn finish(&self) -> Result<(), TrainError> {
        Ok(())
    }
    /// The metric before the first step, for a job that starts from a pretrained model (computed
    /// like `evaluate`; logged as epoch 0).
    fn baseline(&self) -> Result<Option<f64>, TrainError> {
        Ok(None)
    }
    /// Writes what a run leaves besides its log into the output folder `out` (the typos job: its
    /// LoRA adapters), after training, in every run (`--quiet` too); returns the files written.
    fn write_outputs(&mut self, _out: &std::path::Path) -> Result<Vec<std::path::PathBuf>, TrainError> {
        Ok(Vec::new())
    }
}

/// The training samples in use: all of `0..n`, or the first `limit` of a fixed shuffled
/// order (seed-independent, so every class appears and `--limit` picks the same samples in
/// every run).
pub(crate) fn subset(n: usize, limit: Option<usize>) -> Vec<usize> {
    let mut all: Vec<usize> = (0..n).collect();
    if let Some(limit) = limit.filter(|&l| l < n) {
        Rng::new(0x5e_ed5a_b5e7).shuffle(&mut all);
        all.truncate(limit);
    }
    all
}

/// `samples` in the seeded order of `epoch`, cut into batches of `batch_size` (the last may
/// be short). The order depends only on `(seed, epoch)`, so a resumed run sees the batches of
/// an uninterrupted one.
pub(crate) fn shuffled_batches(samples: &[usize], batch_size: usize, seed: u64, epoch: u64) -> Vec<Vec<usize>> {
    let mut order = samples.to_vec();
    Rng::new(seed ^ (epoch + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)).shuffle(&mut order);
    order.chunks(batch_size.max(1)).map(<[usize]>::to_vec).collect()
}

/// Epoch `epoch` of a job whose epochs are a fixed number of `steps`: passes over the
/// shuffled `samples` ([`shuffled_batches`], one seeded order per pass) continued across
/// epochs, so that an epoch may end inside a pass and the next one picks up where it stopped.
pub(crate) fn fixed_step_epoch(
    samples: &[usize],
    batch_size: usize,
    seed: u64,
    steps: usize,
    epoch: u64,
) -> Vec<Vec<usize>> {
    let per_pass = samples.len().div_ceil(batch_size.max(1)).max(1);
    let first = epoch as usize * steps;
    let mut plan = Vec::with_capacity(steps);
    while plan.len() < steps {
        let step = first + plan.len();
        let pass = shuffled_batches(samples, batch_size, seed, (step / per_pass) as u64);
        plan.extend(pass.into_iter().skip(step % per_pass).take(steps - plan.len()));
    }
    plan
}
