//! `forgia train`: the shared training loop (flags, output folder, checkpoints, progress,
//! logs) and the jobs — [`mnist`] (a CNN on the MNIST subset), [`words`] (a
//! character-level transformer on the word list), [`spirals`] (an MLP on two spirals) and
//! [`typos`] (LoRA fine-tuning of MiniLM to retrieve misspelled words).

pub(crate) mod charlm;
mod cluster;
mod job;
pub(crate) mod mnist;
mod report;
pub(crate) mod saved;
mod scheduled;
mod spirals;
pub(crate) mod typos;
mod typos_args;
pub(crate) mod words;

use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::{Args, ValueEnum};
use forgia::optim::{clip_grad_norm, Optimizer};
use forgia::Tensor;

use crate::data::DataError;
use cluster::Cluster;
pub(crate) use job::{Job, Metric, StepOut};
use report::{EpochRow, Log, Progress};

/// The model to train.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum Task {
    /// A CNN on the 5,000-digit MNIST subset (reports test accuracy).
    Mnist,
    /// A character-level transformer on the English word list (reports validation loss and
    /// samples words).
    Words,
    /// An MLP on two interleaved spirals (seconds; reports test accuracy).
    Spirals,
    /// LoRA fine-tuning of a sentence-transformers model (all-MiniLM-L6-v2, --model) so that
    /// misspelled words retrieve their correct form (reports held-out top-1 retrieval).
    Typos,
}

impl Task {
    /// The job's name on the command line.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Task::Mnist => "mnist",
            Task::Words => "words",
            Task::Spirals => "spirals",
            Task::Typos => "typos",
        }
    }

    /// The job's number in a saved run (`train.job`).
    pub(crate) fn code(self) -> f32 {
        match self {
            Task::Mnist => 1.0,
            Task::Words => 2.0,
            Task::Spirals => 3.0,
            Task::Typos => 4.0,
        }
    }

    /// The job of a saved run's number, if it is one.
    pub(crate) fn from_code(code: f32) -> Option<Task> {
        [Task::Mnist, Task::Words, Task::Spirals, Task::Typos].into_iter().find(|t| t.code() == code)
    }
}

/// Arguments of `forgia train`. Unset hyperparameters take the task's defaults.
#[derive(Args, Debug)]
pub(crate) struct TrainArgs {
    /// What to train.
    #[arg(value_enum, default_value_t = Task::Mnist)]
    pub(crate) task: Task,
    /// Passes over the training data (words: blocks of a fixed number of steps).
    #[arg(long, value_parser = at_least_one)]
    pub(crate) epochs: Option<u64>,
    /// Samples per step.
    #[arg(long, value_parser = at_least_one)]
    pub(crate) batch_size: Option<u64>,
    /// Learning rate (positive).
    #[arg(long, value_parser = positive_f32, allow_negative_numbers = true)]
    pub(crate) lr: Option<f32>,
    /// Seed of the initialization, shuffling, dropout, augmentation and sampling.
    #[arg(long, default_value_t = 0)]
    pub(crate) seed: u64,
    /// Worker threads (default: all cores).
    #[arg(long, value_parser = at_least_one)]
    pub(crate) threads: Option<u64>,
    /// Activation checkpointing: recompute each block's activations during backward.
    #[arg(long)]
    pub(crate) checkpoint: bool,
    /// Save model, optimizer state and epoch here after every epoch (safetensors, atomic).
    #[arg(long, value_name = "PATH")]
    pub(crate) save: Option<PathBuf>,
    /// Resume from a file written by --save.
    #[arg(long, value_name = "PATH")]
    pub(crate) resume: Option<PathBuf>,
    /// Output folder for loss.csv and loss.png [default: out/<task>].
    #[arg(long, value_name = "DIR")]
    pub(crate) out: Option<PathBuf>,
    /// Train on only the first N training samples (of a fixed shuffled order).
    #[arg(long, value_name = "N", value_parser = at_least_one)]
    pub(crate) limit: Option<u64>,
    /// Folder holding the data files [default: $FORGIA_DATA_DIR, else ./data or the
    /// repository's data/].
    #[arg(long, value_name = "DIR")]
    pub(crate) data_dir: Option<PathBuf>,
    /// Print only the final metric line (and errors): no progress bar, epoch lines, tables or
    /// sampled words. The log and plot are still written.
    #[arg(long, short)]
    pub(crate) quiet: bool,
    /// MNIST: random shifts of up to ±2 pixels of each training image.
    #[arg(long)]
    pub(crate) augment: bool,
    /// Typos: the sentence-transformers folder to fine-tune (tools/fetch_minilm.sh fetches
    /// all-MiniLM-L6-v2) [default: ./models/all-minilm-l6-v2 or the repository's].
    #[arg(long, value_name = "DIR")]
    pub(crate) model: Option<PathBuf>,
    /// The typos job's own flags.
    #[command(flatten)]
    pub(crate) typos: typos_args::TyposArgs,
    /// Data-parallel training over MPI: start with `mpirun -np N forgia train --distributed`.
    /// Every rank trains on its share of each global batch of --batch-size samples and the
    /// gradients are averaged; rank 0 alone prints and writes the log, plot and --save file;
    /// every rank reads --resume.
    #[cfg(feature = "distributed")]
    #[arg(long)]
    pub(crate) distributed: bool,
}

/// Parses a whole number of at least 1 (a clap value parser).
pub(crate) fn at_least_one(s: &str) -> Result<u64, String> {
    match s.parse::<u64>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(v) => Ok(v),
        Err(e) => Err(format!("{s:?} is not a whole number: {e}")),
    }
}

/// Parses a positive finite number (a clap value parser).
pub(crate) fn positive_f32(s: &str) -> Result<f32, String> {
    match s.parse::<f32>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        Ok(v) => Err(format!("{v} is not a positive finite number")),
        Err(e) => Err(format!("{s:?} is not a number: {e}")),
    }
}

/// What went wrong in `forgia train`.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TrainError {
    /// A data file is missing or malformed.
    #[error(transparent)]
    Data(#[from] DataError),
    /// A library error (shapes, checkpoint files, ...).
    #[error(transparent)]
    Forgia(#[from] forgia::Error),
    /// A file or folder of the run could not be written.
    #[error("cannot write {}: {source}", .path.display())]
    Write {
        /// The path being written.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A file the command needs does not exist.
    #[error("{what} not found at {} ({hint})", .path.display())]
    MissingFile {
        /// What the file is, e.g. `model file`.
        what: &'static str,
        /// Where it was looked for.
        path: PathBuf,
        /// How to point the command at it.
        hint: String,
    },
    /// A flag combination that cannot work.
    #[error("{0}")]
    Invalid(String),
    /// The model folder or its tokenizer could not be read (the typos job).
    #[error(transparent)]
    Embed(#[from] crate::embed::EmbedError),
    /// Distributed training failed (MPI, a collective's timeout, ranks that disagree).
    #[cfg(feature = "distributed")]
    #[error(transparent)]
    Distributed(#[from] forgia_distributed::DistError),
    /// The loss became NaN or infinite.
    #[error("the loss diverged ({loss}) at step {step}; try a smaller --lr")]
    Diverged {
        /// The step (1-based).
        step: u64,
        /// The loss value.
        loss: f32,
    },
}

/// The hyperparameters a job is built with (task defaults already applied).
#[derive(Clone, Debug)]
pub(crate) struct Settings {
    pub(crate) epochs: u64,
    pub(crate) batch_size: usize,
    pub(crate) lr: f32,
    pub(crate) seed: u64,
    pub(crate) checkpoint: bool,
    pub(crate) limit: Option<usize>,
    pub(crate) augment: bool,
    pub(crate) data_dir: Option<PathBuf>,
    pub(crate) model: Option<PathBuf>,
    pub(crate) typos: typos_args::TyposArgs,
}

/// Runs `forgia train`; in a distributed run, an error on any rank ends the job on all.
pub(crate) fn run(args: &TrainArgs) -> Result<(), TrainError> {
    let mut cluster = Cluster::new(args)?;
    run_in(args, &mut cluster).map_err(|e| cluster.fail(e))
}

/// `forgia train` as one rank of `cluster`.
fn run_in(args: &TrainArgs, cluster: &mut Cluster) -> Result<(), TrainError> {
    let quiet = args.quiet || !cluster.is_root();
    if let Some(t) = args.threads {
        forgia::set_num_threads(t as usize)?;
    }
    if args.augment && args.task != Task::Mnist {
        return Err(TrainError::Invalid("--augment applies to the mnist task only".into()));
    }
    if args.task == Task::Typos {
        typos::check_flags(args)?;
    } else if args.model.is_some() {
        return Err(TrainError::Invalid("--model applies to the typos task only".into()));
    } else if let Some(flag) = args.typos.first_set() {
        return Err(TrainError::Invalid(format!("{flag} applies to the typos task only")));
    }
    let out = args.out.clone().unwrap_or_else(|| Path::new("out").join(args.task.name()));
    if cluster.is_root() {
        report::prepare_dir(&out)?;
        if let Some(save) = &args.save {
            report::check_writable_file(save)?;
        }
    }
    let (epochs, batch_size, lr) = match args.task {
        Task::Mnist => mnist::DEFAULTS,
        Task::Words => words::DEFAULTS,
        Task::Spirals => spirals::DEFAULTS,
        Task::Typos => typos::DEFAULTS,
    };
    let settings = Settings {
        epochs: args.epochs.unwrap_or(epochs),
        batch_size: args.batch_size.map_or(batch_size, |b| b as usize),
        lr: args.lr.unwrap_or(lr),
        seed: args.seed,
        checkpoint: args.checkpoint,
        limit: args.limit.map(|n| n as usize),
        augment: args.augment,
        data_dir: args.data_dir.clone(),
        model: args.model.clone(),
        typos: args.typos.clone(),
    };
    let mut job: Box<dyn Job> = match args.task {
        Task::Mnist => Box::new(mnist::MnistJob::new(&settings)?),
        Task::Words => Box::new(words::WordsJob::new(&settings)?),
        Task::Spirals => Box::new(spirals::SpiralsJob::new(&settings)?),
        Task::Typos => Box::new(typos::TyposJob::new(&settings)?),
    };
    let mut optimizer = job.optimizer(&settings)?;
    let mut start_epoch = 0;
    if let Some(path) = &args.resume {
        let entries = job.saved_entries()?;
        start_epoch = saved::resume(job.model_mut(), optimizer.as_mut(), args.task, entries, path)?;
        if !quiet {
            println!("resumed from {} after epoch {start_epoch}", path.display());
        }
    }
    cluster.attach(job.model_mut())?;
    if !quiet {
        println!("{}", job.describe(&settings));
        if let Some((_, ranks)) = cluster.ranks() {
            println!(
                "data-parallel over {ranks} ranks: each takes its share of every batch of {}",
                settings.batch_size
            );
        }
    }
    let rows = train_epochs(job.as_mut(), optimizer.as_mut(), &settings, start_epoch, (args, quiet, cluster), &out)?;
    if cluster.is_root() {
        for path in job.write_outputs(&out)? {
            if !quiet {
                println!("saved {}", path.display());
            }
        }
        report::print_summary(job.metric(), &rows, quiet);
    }
    if !quiet {
        job.finish()?;
    }
    Ok(())
}

/// The epoch loop: train, evaluate, log, save.
fn train_epochs(
    job: &mut dyn Job,
    optimizer: &mut dyn Optimizer,
    settings: &Settings,
    start_epoch: u64,
    (args, quiet, cluster): (&TrainArgs, bool, &Cluster),
    out: &Path,
) -> Result<Vec<EpochRow>, TrainError> {
    let root = cluster.is_root();
    let mut log = Log::new(out, plot_title(args.task, job.headline(), settings), job.metric());
    let mut rows = Vec::new();
    let started = Instant::now();
    if start_epoch == 0 {
        let baseline = {
            let _guard = forgia::no_grad();
            job.baseline()?
        };
        if let Some(metric) = baseline {
            if !quiet {
                println!("before training: {} {}", job.metric().label(), job.metric().format(metric));
            }
            log.baseline(metric);
        }
    }
    for epoch in start_epoch..settings.epochs {
        let epoch_start = Instant::now();
        job.model_mut().set_training(true);
        let train_loss = train_one_epoch(job, optimizer, (epoch, settings.epochs), (quiet, cluster), &mut log)?;
        job.model_mut().set_training(false);
        let metric = {
            let _guard = forgia::no_grad();
            job.evaluate()?
        };
        let row = EpochRow { epoch: epoch + 1, train_loss, metric, seconds: epoch_start.elapsed().as_secs_f64() };
        if !quiet {
            println!("{}", row.line(job.metric()));
        }
        log.epoch(optimizer.steps_taken(), &row);
        rows.push(row);
        if root {
            log.write()?;
        }
        if let Some(path) = args.save.as_ref().filter(|_| root) {
            let entries = job.saved_entries()?;
            saved::save(job.model_mut(), optimizer, args.task, entries, epoch + 1, path)?;
        }
    }
    if !root {
    } else if quiet {
        log.write()?;
    } else if rows.is_empty() {
        println!("nothing to train: already at epoch {start_epoch} of {}", settings.epochs);
    } else {
        log.write()?;
        println!(
            "trained {} epochs in {:.1} s; log {} and plot {}",
            rows.len(),
            started.elapsed().as_secs_f64(),
            log.csv_path().display(),
            log.png_path().display()
        );
    }
    Ok(rows)
}

/// The plot's title: the job, its model and optimizer, and the settings of the run.
fn plot_title(task: Task, headline: &str, s: &Settings) -> String {
    let epochs = if s.epochs == 1 { "1 epoch".to_string() } else { format!("{} epochs", s.epochs) };
    let mut title =
        format!("{}: {headline}, lr {}, batch {}, {epochs}, seed {}", task.name(), s.lr, s.batch_size, s.seed);
    if let Some(limit) = s.limit {
        title += &format!(", first {limit} samples");
    }
    if s.augment {
        title += ", shifted";
    }
    if s.checkpoint {
        title += ", checkpointed";
    }
    title
}

/// One epoch of steps (`epoch` of `epochs`, 0-based); returns the mean training loss over its samples.
fn train_one_epoch(
    job: &mut dyn Job,
    optimizer: &mut dyn Optimizer,
    (epoch, epochs): (u64, u64),
    (quiet, cluster): (bool, &Cluster),
    log: &mut Log,
) -> Result<f64, TrainError> {
    let plan = job.plan(epoch);
    let mut progress = Progress::new(epoch + 1, epochs, plan.len(), quiet);
    let (mut loss_sum, mut samples, mut correct) = (0.0f64, 0usize, 0usize);
    for batch in &plan {
        let step = optimizer.steps_taken();
        optimizer.zero_grad(job.model());
        // This rank's share of the batch (all of it outside a distributed run): its loss sum,
        // sample count and correct count, summed over the ranks after backward.
        let shard = cluster.shard(batch);
        let mut stats = [0.0, shard.len() as f64, 0.0];
        if !shard.is_empty() {
            let out = job.train_step(shard, step)?;
            let loss = scalar_loss(&out.loss, step)?;
            match cluster.loss_weight(shard.len(), batch.len()) {
                1.0 => out.loss.backward()?,
                w => out.loss.scale(w).backward()?,
            }
            stats = [loss as f64 * shard.len() as f64, shard.len() as f64, out.correct.unwrap_or(0) as f64];
        }
        cluster.sync_gradients()?;
        cluster.sum(&mut stats)?;
        if let Some(max_norm) = job.clip_norm() {
            clip_grad_norm(job.model(), max_norm)?;
        }
        optimizer.step(job.model_mut())?;
        let loss = (stats[0] / stats[1]) as f32;
        loss_sum += stats[0];
        samples += stats[1] as usize;
        correct += stats[2] as usize;
        log.step(step + 1, epoch + 1, loss);
        let accuracy = (job.metric() == Metric::TestAccuracy).then(|| 100.0 * correct as f64 / samples as f64);
        progress.update(loss_sum / samples as f64, accuracy, samples);
    }
    progress.finish();
    Ok(if samples == 0 { f64::NAN } else { loss_sum / samples as f64 })
}

fn scalar_loss(loss: &Tensor, step: u64) -> Result<f32, TrainError> {
    let value = loss.item()?;
    if !value.is_finite() {
        return Err(TrainError::Diverged { step: step + 1, loss: value });
    }
    Ok(value)
}
