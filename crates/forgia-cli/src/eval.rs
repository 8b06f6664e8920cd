//! `forgia eval`: the test accuracy of an mnist model that `forgia train mnist --save FILE`
//! wrote, with its confusion matrix printed as a table and drawn as a heat map.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use clap::Args;

use crate::data::mnist::{self, CLASSES};
use crate::plot::confusion;
use crate::train::saved::SavedRun;
use crate::train::{mnist as job, TrainError};

/// Arguments of `forgia eval`.
#[derive(Args, Debug)]
pub(crate) struct EvalArgs {
    /// An mnist model written by `forgia train mnist --save FILE`.
    #[arg(long, value_name = "FILE")]
    pub(crate) model: PathBuf,
    /// Output folder for confusion.png.
    #[arg(long, value_name = "DIR", default_value = "out/eval")]
    pub(crate) out: PathBuf,
    /// Folder holding the data files [default: $FORGIA_DATA_DIR, else ./data or the
    /// repository's data/].
    #[arg(long, value_name = "DIR")]
    pub(crate) data_dir: Option<PathBuf>,
    /// Print only the accuracy line (and errors).
    #[arg(long, short)]
    pub(crate) quiet: bool,
}

/// Runs `forgia eval`.
///
/// # Errors
/// A missing, corrupt or non-mnist model file, missing data, or an unwritable output folder.
pub(crate) fn run(args: &EvalArgs) -> Result<(), TrainError> {
    let saved = SavedRun::open(&args.model, "--model")?;
    let model = job::model_from_saved(&saved, "`forgia eval`")?;
    let data = mnist::load(args.data_dir.as_deref())?;
    let predicted = {
        let _guard = forgia::no_grad();
        job::predict(&model, &data.test_images)?
    };
    let counts = confusion_counts(&data.test_labels, &predicted);
    let correct: usize = (0..CLASSES).map(|d| counts[d][d]).sum();
    let accuracy = 100.0 * correct as f64 / data.test_labels.len().max(1) as f64;
    let line = format!("test accuracy: {accuracy:.2}% ({correct} / {} test images)", data.test_labels.len());
    if args.quiet {
        println!("{line}");
    }
    std::fs::create_dir_all(&args.out).map_err(|source| TrainError::Write { path: args.out.clone(), source })?;
    let png = args.out.join("confusion.png");
    let title = format!("mnist test set, {accuracy:.2}% correct: {}", file_name(saved.path()));
    confusion::write(&png, &title, &counts)
        .map_err(|e| TrainError::Write { path: png.clone(), source: std::io::Error::other(e) })?;
    if !args.quiet {
        let epochs = if saved.epoch() == 1 { "1 epoch".to_string() } else { format!("{} epochs", saved.epoch()) };
        println!("{}: mnist CNN after {epochs}\n{line}\n", saved.path().display());
        print!("{}", table(&counts));
        println!("\nconfusion matrix drawn to {}", png.display());
    }
    Ok(())
}

/// The last component of `path`, for titles.
fn file_name(path: &Path) -> String {
    path.file_name().map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into_owned())
}

/// `counts[true][predicted]` of every test image.
fn confusion_counts(labels: &[usize], predicted: &[usize]) -> Vec<Vec<usize>> {
    let mut counts = vec![vec![0; CLASSES]; CLASSES];
    for (&l, &p) in labels.iter().zip(predicted) {
        counts[l][p] += 1;
    }
    counts
}

/// The confusion matrix as text: a row per true digit, a column per predicted digit, and each
/// row's share of correct predictions.
fn table(counts: &[Vec<usize>]) -> String {
    let mut s = String::from("true\\pred");
    for d in 0..counts.len() {
        let _ = write!(s, "{d:>6}");
    }
    s.push_str("  correct\n");
    for (d, row) in counts.iter().enumerate() {
        let _ = write!(s, "{d:>9}");
        for c in row {
            let _ = write!(s, "{c:>6}");
        }
        let total = row.iter().sum::<usize>().max(1);
        let _ = writeln!(s, "  {:>6.1}%", 100.0 * row[d] as f64 / total as f64);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_has_a_row_per_true_digit_and_a_column_per_prediction() {
        let counts = confusion_counts(&[0, 0, 1, 1], &[0, 1, 1, 1]);
        assert_eq!(counts[0][0..2], [1, 1]);
        assert_eq!(counts[1][1], 2);
        let text = table(&counts[..2].iter().map(|r| r[..2].to_vec()).collect::<Vec<_>>());
        let expected =
            "true\\pred     0     1  correct\n        0     1     1    50.0%\n        1     0     2   100.0%\n";
        assert_eq!(text, expected);
    }
}
