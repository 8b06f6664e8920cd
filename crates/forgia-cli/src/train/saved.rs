//! The file `forgia train --save` writes and `--resume`, `forgia sample` and `forgia eval`
//! read: one safetensors file with the model's parameters, the optimizer's state (`optim.*`,
//! the library's checkpoint format) and the run's own entries under `train.`:
//!
//! * `train.job`: which job saved it ([`Task::code`]: 1 mnist, 2 words, 3 spirals);
//! * `train.epoch`: the number of finished epochs;
//! * what the job needs to rebuild its model without the training data (the words job:
//!   `train.vocab`, the characters as code points, and `train.config`, its sizes).
//!
//! All entries are f32 tensors, so the library stores and validates them with the weights.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use forgia::nn::Module;
use forgia::optim::Optimizer;
use forgia::Tensor;

use super::{Task, TrainError};

/// The entry naming the job.
const JOB_KEY: &str = "train.job";
/// The entry counting finished epochs.
const EPOCH_KEY: &str = "train.epoch";
/// The prefix of every run entry.
const PREFIX: &str = "train.";

/// A model plus the run's entries, visited as one module so that the library's checkpoint
/// functions store and validate the entries with everything else.
struct RunState<'a> {
    model: &'a mut dyn Module,
    entries: Vec<(String, Tensor)>,
}

impl Module for RunState<'_> {
    fn visit_params(&self, f: &mut dyn FnMut(&str, &Tensor)) {
        self.model.visit_params(f);
        self.entries.iter().for_each(|(name, t)| f(name, t));
    }

    fn visit_params_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor)) {
        self.model.visit_params_mut(f);
        self.entries.iter_mut().for_each(|(name, t)| f(name, t));
    }
}

/// Saves model, optimizer, the job, its `entries` and the finished epoch count to `path`
/// (atomically).
pub(crate) fn save(
    model: &mut dyn Module,
    optimizer: &dyn Optimizer,
    task: Task,
    entries: Vec<(&'static str, Tensor)>,
    epoch: u64,
    path: &Path,
) -> Result<(), TrainError> {
    let mut all =
        vec![(JOB_KEY.to_string(), Tensor::scalar(task.code())), (EPOCH_KEY.to_string(), Tensor::scalar(epoch as f32))];
    all.extend(entries.into_iter().map(|(name, t)| (name.to_string(), t)));
    let state = RunState { model, entries: all };
    forgia::io::save_checkpoint(path, &state, optimizer)?;
    Ok(())
}

/// Resumes the run of `task` saved at `path` into `model` and `optimizer`, after checking
/// that the file was saved by that job with the same `entries` (e.g. the same vocabulary).
/// Returns the number of finished epochs. On an error nothing is changed.
pub(crate) fn resume(
    model: &mut dyn Module,
    optimizer: &mut dyn Optimizer,
    task: Task,
    entries: Vec<(&'static str, Tensor)>,
    path: &Path,
) -> Result<u64, TrainError> {
    let saved = SavedRun::open(path, "--resume")?;
    saved.expect(task, &format!("`forgia train {} --resume`", task.name()))?;
    for (name, expected) in entries {
        let found = saved.entry(name)?;
        if found.shape() != expected.shape() || found.to_vec() != expected.to_vec() {
            return Err(TrainError::Invalid(format!(
                "{}: its {name} differs from this run's (saved from other data or settings)",
                path.display()
            )));
        }
    }
    saved.load_into(model, optimizer)?;
    Ok(saved.epoch)
}

/// A file written by [`save`], opened and checked for its run entries.
pub(crate) struct SavedRun {
    path: PathBuf,
    task: Task,
    epoch: u64,
    entries: HashMap<String, Tensor>,
}

impl SavedRun {
    /// Reads the file at `path`; `flag` names the option that gave the path, for the message
    /// when it does not exist.
    ///
    /// # Errors
    /// [`TrainError::MissingFile`] when there is no file; the library's error for an
    /// unreadable or corrupt one; [`TrainError::Invalid`] when it lacks the run entries.
    pub(crate) fn open(path: &Path, flag: &str) -> Result<SavedRun, TrainError> {
        if !path.is_file() {
            let hint = format!("pass {flag} FILE, a file written by `forgia train --save FILE`");
            return Err(TrainError::MissingFile { what: "model file", path: path.to_path_buf(), hint });
        }
        let entries: HashMap<String, Tensor> =
            forgia::io::load(path)?.into_iter().filter(|(name, _)| name.starts_with(PREFIX)).collect();
        let not_ours = |what: &str| {
            TrainError::Invalid(format!("{}: {what}; is it a file written by `forgia train --save`?", path.display()))
        };
        let code = entries.get(JOB_KEY).ok_or_else(|| not_ours("no train.job entry"))?.item()?;
        let task = Task::from_code(code).ok_or_else(|| not_ours(&format!("unknown train.job {code}")))?;
        let epoch = entries.get(EPOCH_KEY).ok_or_else(|| not_ours("no train.epoch entry"))?.item()?;
        if !(epoch >= 0.0 && epoch.fract() == 0.0) {
            return Err(not_ours(&format!("bad epoch counter {epoch}")));
        }
        Ok(SavedRun { path: path.to_path_buf(), task, epoch: epoch as u64, entries })
    }

    /// Finished epochs at the time of saving.
    pub(crate) fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The file's path.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Fails unless the file was saved by `task`; `user` names what needs it, for the message.
    ///
    /// # Errors
    /// [`TrainError::Invalid`] naming both jobs.
    pub(crate) fn expect(&self, task: Task, user: &str) -> Result<(), TrainError> {
        if self.task == task {
            return Ok(());
        }
        Err(TrainError::Invalid(format!(
            "{} holds a model of the {} job (saved by `forgia train {}`); {user} needs one of the {} job \
             (`forgia train {} --save FILE`)",
            self.path.display(),
            self.task.name(),
            self.task.name(),
            task.name(),
            task.name()
        )))
    }

    /// The run entry `name` (e.g. `train.vocab`).
    ///
    /// # Errors
    /// [`TrainError::Invalid`] when the file lacks it.
    pub(crate) fn entry(&self, name: &str) -> Result<&Tensor, TrainError> {
        self.entries.get(name).ok_or_else(|| TrainError::Invalid(format!("{}: no {name} entry", self.path.display())))
    }

    /// Loads the weights into `model` and the state into `optimizer` (which must be the kind
    /// the job trains with), validating every name and shape first; on an error neither
    /// changes.
    ///
    /// # Errors
    /// The library's checkpoint error naming the file and the first mismatch.
    pub(crate) fn load_into(&self, model: &mut dyn Module, optimizer: &mut dyn Optimizer) -> Result<(), TrainError> {
        let mut entries = Vec::with_capacity(self.entries.len());
        for (name, t) in &self.entries {
            entries.push((name.clone(), Tensor::from_vec(t.to_vec(), t.shape())?));
        }
        let mut state = RunState { model, entries };
        forgia::io::load_checkpoint(&mut state, optimizer, &self.path)?;
        Ok(())
    }
}
