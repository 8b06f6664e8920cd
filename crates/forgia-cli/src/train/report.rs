//! What a run shows and leaves behind: the live progress bar, the per-epoch lines and final
//! table, `loss.csv` and the `loss.png` plot in the output folder.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};

use super::{Metric, TrainError};
use crate::plot::curves::{self, EpochPoint, RunCurves};

fn write_error(path: &Path, source: std::io::Error) -> TrainError {
    TrainError::Write { path: path.to_path_buf(), source }
}

/// Creates the output folder and proves it writable (a probe file), before any training.
pub(super) fn prepare_dir(dir: &Path) -> Result<(), TrainError> {
    std::fs::create_dir_all(dir).map_err(|e| write_error(dir, e))?;
    let probe = dir.join(format!(".forgia-write-probe-{}", std::process::id()));
    std::fs::write(&probe, b"").map_err(|e| write_error(dir, e))?;
    std::fs::remove_file(&probe).map_err(|e| write_error(&probe, e))
}

/// Checks that a checkpoint can be written at `path` (its folder exists and is writable), so
/// a bad `--save` fails before the first epoch rather than after it.
pub(super) fn check_writable_file(path: &Path) -> Result<(), TrainError> {
    if path.is_dir() {
        let e = std::io::Error::new(std::io::ErrorKind::IsADirectory, "is a folder");
        return Err(write_error(path, e));
    }
    let parent = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let probe = parent.join(format!(".forgia-write-probe-{}", std::process::id()));
    std::fs::write(&probe, b"").map_err(|e| write_error(path, e))?;
    std::fs::remove_file(&probe).map_err(|e| write_error(&probe, e))
}

/// One finished epoch.
#[derive(Clone, Debug)]
pub(super) struct EpochRow {
    /// 1-based epoch number.
    pub(super) epoch: u64,
    /// Mean training loss over the epoch's samples.
    pub(super) train_loss: f64,
    /// The job's metric after the epoch.
    pub(super) metric: f64,
    /// Wall time of training plus evaluation.
    pub(super) seconds: f64,
}

impl EpochRow {
    /// The line printed after each epoch, e.g. `epoch 3: train loss 0.1690, test accuracy 96.30%, 11.9 s`.
    pub(super) fn line(&self, metric: Metric) -> String {
        format!(
            "epoch {}: train loss {:.4}, {} {}, {:.2} s",
            self.epoch,
            self.train_loss,
            metric.label(),
            metric.format(self.metric),
            self.seconds
        )
    }
}

/// Prints the table of every epoch of this run and the final metric; `quiet`: only the
/// final metric line.
pub(super) fn print_summary(metric: Metric, rows: &[EpochRow], quiet: bool) {
    let Some(last) = rows.last() else { return };
    if quiet {
        println!("final {}: {}", metric.label(), metric.format(last.metric));
        return;
    }
    let mut table = format!("\n{:>5}  {:>10}  {:>15}  {:>8}\n", "epoch", "train loss", metric.label(), "time (s)");
    for r in rows {
        let _ = writeln!(
            table,
            "{:>5}  {:>10.4}  {:>15}  {:>8.2}",
            r.epoch,
            r.train_loss,
            metric.format(r.metric),
            r.seconds
        );
    }
    print!("{table}");
    println!("final {}: {}", metric.label(), metric.format(last.metric));
}

/// The live progress bar of one epoch: loss, accuracy, samples per second and the time left
/// in the epoch and in the run. Hidden when stderr is not a terminal, and under `--quiet`.
pub(super) struct Progress {
    bar: ProgressBar,
    start: Instant,
    /// Epochs after this one.
    later_epochs: u64,
}

impl Progress {
    /// The bar of epoch `epoch` (1-based) of `epochs`, which has `steps` steps.
    pub(super) fn new(epoch: u64, epochs: u64, steps: usize, quiet: bool) -> Progress {
        let bar = if quiet { ProgressBar::hidden() } else { ProgressBar::new(steps as u64) };
        let template = "{prefix} [{bar:30.cyan/blue}] {pos}/{len} {msg}";
        if let Ok(style) = ProgressStyle::with_template(template) {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_prefix(format!("epoch {epoch}/{epochs}"));
        Progress { bar, start: Instant::now(), later_epochs: epochs.saturating_sub(epoch) }
    }

    /// After each step: the running mean loss, the running accuracy (classifiers), the
    /// throughput so far and the time left at that pace (evaluation time not included).
    pub(super) fn update(&mut self, loss: f64, accuracy: Option<f64>, samples: usize) {
        self.bar.inc(1);
        let elapsed = self.start.elapsed().as_secs_f64().max(1e-9);
        let rate = samples as f64 / elapsed;
        let steps = self.bar.length().unwrap_or(1).max(1) as f64;
        let per_step = elapsed / self.bar.position().max(1) as f64;
        let epoch_left = (steps - self.bar.position() as f64).max(0.0) * per_step;
        let run_left = epoch_left + self.later_epochs as f64 * steps * per_step;
        let accuracy = accuracy.map(|a| format!(" acc {a:.1}%")).unwrap_or_default();
        self.bar.set_message(format!(
            "loss {loss:.4}{accuracy} {rate:.0} samples/s, epoch {} left, run {} left",
            clock(epoch_left),
            clock(run_left)
        ));
    }

    pub(super) fn finish(self) {
        self.bar.finish_and_clear();
    }
}

/// A duration for people: `0:07`, `12:30`, `1:02:03`.
pub(super) fn clock(seconds: f64) -> String {
    let s = seconds.max(0.0).round() as u64;
    let (h, m, s) = (s / 3600, s / 60 % 60, s % 60);
    if h > 0 {
        format!("{h}:{m:02}:{s:02}")
    } else {
        format!("{m}:{s:02}")
    }
}

/// The loss curve and epoch metrics of a run, written to `loss.csv` and `loss.png`.
pub(super) struct Log {
    dir: PathBuf,
    title: String,
    metric: Metric,
    steps: Vec<(u64, f32)>,
    epochs: Vec<(u64, EpochRow)>,
    rows: String,
}

impl Log {
    /// A log writing into `dir`; `title` heads the plot (the job and its settings).
    pub(super) fn new(dir: &Path, title: String, metric: Metric) -> Log {
        Log { dir: dir.to_path_buf(), title, metric, steps: Vec::new(), epochs: Vec::new(), rows: String::new() }
    }

    pub(super) fn csv_path(&self) -> PathBuf {
        self.dir.join("loss.csv")
    }

    pub(super) fn png_path(&self) -> PathBuf {
        self.dir.join("loss.png")
    }

    /// Records the loss of optimizer step `step` (1-based) in epoch `epoch` (1-based).
    pub(super) fn step(&mut self, step: u64, epoch: u64, loss: f32) {
        self.steps.push((step, loss));
        let _ = writeln!(self.rows, "step,{step},{epoch},{loss:.6},");
    }

    /// Records the metric before training (a pretrained model's) as epoch 0 at step 0: a CSV
    /// `epoch` row with an empty loss, and the first point of the metric panel.
    pub(super) fn baseline(&mut self, metric: f64) {
        let row = EpochRow { epoch: 0, train_loss: f64::NAN, metric, seconds: 0.0 };
        self.epochs.push((0, row));
        let _ = writeln!(self.rows, "epoch,0,0,,{metric:.6}");
    }

    /// Records a finished epoch, `step` being the last step taken.
    pub(super) fn epoch(&mut self, step: u64, row: &EpochRow) {
        self.epochs.push((step, row.clone()));
        let _ = writeln!(self.rows, "epoch,{step},{},{:.6},{:.6}", row.epoch, row.train_loss, row.metric);
    }

    /// The CSV: header `kind,step,epoch,loss,<metric>`; one `step` row per optimizer step
    /// (its batch loss, metric empty) and one `epoch` row per epoch (the mean training loss
    /// and the metric), in the order they happened.
    fn csv(&self) -> String {
        let mut s = format!("kind,step,epoch,loss,{}\n", self.metric.column());
        s.push_str(&self.rows);
        s
    }

    /// Rewrites `loss.csv` and `loss.png` (each through a temporary file and a rename).
    pub(super) fn write(&self) -> Result<(), TrainError> {
        let csv = self.csv_path();
        let tmp = self.dir.join(".loss.csv.tmp");
        std::fs::write(&tmp, self.csv()).map_err(|e| write_error(&tmp, e))?;
        std::fs::rename(&tmp, &csv).map_err(|e| write_error(&csv, e))?;
        let png = self.png_path();
        let tmp = self.dir.join(".loss.tmp.png");
        let epochs: Vec<EpochPoint> = self
            .epochs
            .iter()
            .map(|(step, r)| EpochPoint { step: *step, epoch: r.epoch, train_loss: r.train_loss, metric: r.metric })
            .collect();
        let run = RunCurves {
            title: &self.title,
            steps: &self.steps,
            epochs: &epochs,
            metric_label: self.metric.axis_label(),
            percent: self.metric.is_percent(),
        };
        curves::write(&tmp, &run).map_err(|e| write_error(&png, std::io::Error::other(e)))?;
        std::fs::rename(&tmp, &png).map_err(|e| write_error(&png, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_clock_times() {
        assert_eq!(clock(7.4), "0:07");
        assert_eq!(clock(750.0), "12:30");
        assert_eq!(clock(3723.0), "1:02:03");
        assert_eq!(clock(-1.0), "0:00");
    }
}
