//! The `forgia` binary end to end: short training runs (spirals, a cut-down MNIST), their
//! logs and plots, saving and resuming, bad input (one message, non-zero exit, no panic, no
//! partial checkpoint), and `forgia gradcheck`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A fresh, empty temporary folder for one test, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("forgia-cli-test-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn forgia(args: &[&str], envs: &[(&str, &Path)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_forgia"));
    cmd.args(args).env_remove("FORGIA_DATA_DIR");
    for (k, v) in envs {
        cmd.env(k, v);
    }
    cmd.output().expect("run the forgia binary")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Runs a command that must succeed and returns its stdout.
fn succeed(args: &[&str]) -> String {
    let o = forgia(args, &[]);
    assert!(o.status.success(), "{args:?} failed:\n{}\n{}", stdout(&o), stderr(&o));
    stdout(&o)
}

/// Runs a command that must fail cleanly and returns its stderr.
fn fail(args: &[&str], envs: &[(&str, &Path)]) -> String {
    let o = forgia(args, envs);
    let err = stderr(&o);
    assert!(!o.status.success(), "{args:?} should fail:\n{}", stdout(&o));
    assert!(!err.trim().is_empty(), "{args:?}: no message on stderr");
    assert!(!err.contains("panicked"), "{args:?} panicked:\n{err}");
    err
}

/// The value of the `final test accuracy: X%` line.
fn final_accuracy(out: &str) -> f64 {
    let line = out.lines().find(|l| l.starts_with("final test accuracy: ")).expect("an accuracy line");
    line["final test accuracy: ".len()..].trim_end_matches('%').parse().expect("a percentage")
}

/// Checks `loss.csv` (header, one step row per step, an epoch row per epoch, numbers that
/// parse) and that `loss.png` is a PNG. Returns (step rows, epoch rows).
fn check_outputs(dir: &Path) -> (usize, usize) {
    let csv = std::fs::read_to_string(dir.join("loss.csv")).expect("loss.csv");
    let mut lines = csv.lines();
    assert_eq!(lines.next(), Some("kind,step,epoch,loss,test_accuracy"));
    let (mut steps, mut epochs) = (0, 0);
    for line in lines {
        let fields: Vec<&str> = line.split(',').collect();
        assert_eq!(fields.len(), 5, "{line}");
        let _: u64 = fields[1].parse().unwrap();
        let _: u64 = fields[2].parse().unwrap();
        let loss: f64 = fields[3].parse().unwrap();
        assert!(loss.is_finite() && loss >= 0.0, "{line}");
        match fields[0] {
            "step" => steps += 1,
            "epoch" => {
                let acc: f64 = fields[4].parse().unwrap();
                assert!((0.0..=100.0).contains(&acc));
                epochs += 1;
            }
            other => panic!("unknown row kind {other}"),
        }
    }
    let png = std::fs::read(dir.join("loss.png")).expect("loss.png");
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "PNG magic bytes");
    (steps, epochs)
}

#[test]
fn train_spirals_learns_and_writes_its_log_and_plot() {
    let dir = TempDir::new("spirals");
    let out = dir.path().join("run");
    let text = succeed(&["train", "spirals", "--out", out.to_str().unwrap()]);
    assert!(final_accuracy(&text) >= 95.0, "{text}");
    assert!(text.contains("train loss"), "{text}");
    let (steps, epochs) = check_outputs(&out);
    assert_eq!(epochs, 40);
    assert_eq!(steps, 40 * 50, "1600 points in batches of 32");
}

#[test]
fn a_short_mnist_run_reports_accuracy() {
    let dir = TempDir::new("mnist");
    let out = dir.path().join("mnist");
    let text = succeed(&["train", "mnist", "--epochs", "1", "--limit", "512", "--out", out.to_str().unwrap()]);
    assert!(text.contains("512 training / 1000 test images"), "{text}");
    assert!(text.contains("epoch 1: train loss"), "{text}");
    let acc = final_accuracy(&text);
    assert!(acc > 20.0, "better than chance after 8 steps: {acc}");
    assert_eq!(check_outputs(&out), (8, 1));
}

#[test]
fn a_saved_run_resumes_where_it_stopped() {
    let dir = TempDir::new("resume");
    let (out, ckpt) = (dir.path().join("out"), dir.path().join("run.safetensors"));
    let (out, ckpt) = (out.to_str().unwrap(), ckpt.to_str().unwrap());
    let first = succeed(&["train", "spirals", "--epochs", "2", "--save", ckpt, "--out", out]);
    assert!(first.contains("epoch 2:"), "{first}");
    let resumed = succeed(&["train", "spirals", "--epochs", "3", "--resume", ckpt, "--save", ckpt, "--out", out]);
    assert!(resumed.contains("resumed from") && resumed.contains("after epoch 2"), "{resumed}");
    assert!(resumed.contains("epoch 3:") && !resumed.contains("epoch 1:"), "{resumed}");
    let done = succeed(&["train", "spirals", "--epochs", "3", "--resume", ckpt, "--out", out]);
    assert!(done.contains("nothing to train"), "{done}");
    // A checkpoint of another model is refused with a message.
    let err = fail(&["train", "mnist", "--epochs", "1", "--resume", ckpt, "--out", out], &[]);
    assert!(err.contains("run.safetensors"), "{err}");
}

#[test]
fn a_corrupt_or_missing_checkpoint_is_a_clear_error() {
    let dir = TempDir::new("badckpt");
    let bad = dir.path().join("bad.safetensors");
    std::fs::write(&bad, b"not a checkpoint").unwrap();
    let out = dir.path().join("out");
    let err = fail(&["train", "spirals", "--resume", bad.to_str().unwrap(), "--out", out.to_str().unwrap()], &[]);
    assert!(err.starts_with("error: ") && err.contains("bad.safetensors"), "{err}");
    let missing = dir.path().join("missing.safetensors");
    let err = fail(&["train", "spirals", "--resume", missing.to_str().unwrap(), "--out", out.to_str().unwrap()], &[]);
    assert!(err.contains("missing.safetensors"), "{err}");
}

#[test]
fn a_missing_or_corrupt_data_folder_is_a_clear_error() {
    let dir = TempDir::new("data");
    let out = dir.path().join("out");
    let out = out.to_str().unwrap();
    let nowhere = dir.path().join("no-such-folder");
    let err = fail(&["train", "mnist", "--out", out], &[("FORGIA_DATA_DIR", &nowhere)]);
    assert!(err.contains("mnist_5k.csv.gz"), "{err}");
    let err = fail(&["train", "words", "--out", out], &[("FORGIA_DATA_DIR", &nowhere)]);
    assert!(err.contains("english-words.txt.gz"), "{err}");
    let corrupt = dir.path().join("corrupt");
    std::fs::create_dir_all(&corrupt).unwrap();
    std::fs::write(corrupt.join("mnist_5k.csv.gz"), b"\x1f\x8b\x08\x00garbage").unwrap();
    let err = fail(&["train", "mnist", "--out", out], &[("FORGIA_DATA_DIR", &corrupt)]);
    assert!(err.contains("mnist_5k.csv.gz"), "{err}");
}

#[test]
fn bad_flag_values_are_rejected_with_a_message() {
    let dir = TempDir::new("flags");
    let out = dir.path().join("out");
    let out = out.to_str().unwrap();
    for (flag, value) in [("--lr", "-1"), ("--lr", "0"), ("--lr", "nan"), ("--batch-size", "0"), ("--epochs", "0")] {
        let err = fail(&["train", "spirals", flag, value, "--out", out], &[]);
        assert!(err.contains(flag), "{flag} {value}: {err}");
    }
    let err = fail(&["train", "spirals", "--augment", "--out", out], &[]);
    assert!(err.contains("--augment"), "{err}");
    fail(&["train", "nosuchtask"], &[]);
}

#[test]
fn an_unwritable_output_folder_fails_before_training_and_leaves_no_checkpoint() {
    let dir = TempDir::new("unwritable");
    let file = dir.path().join("a-file");
    std::fs::write(&file, b"x").unwrap();
    let out = file.join("out");
    let ckpt = dir.path().join("run.safetensors");
    let err = fail(&["train", "spirals", "--out", out.to_str().unwrap(), "--save", ckpt.to_str().unwrap()], &[]);
    assert!(err.contains("cannot write") && err.contains("a-file"), "{err}");
    assert!(!ckpt.exists(), "no checkpoint after a failed start");
    let good = dir.path().join("out");
    let bad_save = file.join("run.safetensors");
    let err = fail(&["train", "spirals", "--out", good.to_str().unwrap(), "--save", bad_save.to_str().unwrap()], &[]);
    assert!(err.contains("cannot write"), "{err}");
    let leftovers: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert!(leftovers.iter().all(|n| n == "a-file" || n == "out"), "{leftovers:?}");
}

#[test]
fn gradcheck_passes_for_every_op() {
    let text = succeed(&["gradcheck"]);
    assert!(text.contains("conv2d") && text.contains("scaled_dot_product_attention"), "{text}");
    assert!(!text.contains("FAIL"), "{text}");
    let filtered = succeed(&["gradcheck", "softmax"]);
    assert!(filtered.contains("log_softmax") && !filtered.contains("conv2d"), "{filtered}");
    fail(&["gradcheck", "no-such-op"], &[]);
}

#[test]
fn activation_checkpointing_does_not_change_the_loss_curve() {
    let dir = TempDir::new("checkpointing");
    let (plain, saved) = (dir.path().join("plain"), dir.path().join("saved"));
    let args = ["train", "mnist", "--epochs", "1", "--limit", "128", "--out"];
    succeed(&[&args[..], &[plain.to_str().unwrap()]].concat());
    let text = succeed(&[&args[..], &[saved.to_str().unwrap(), "--checkpoint"]].concat());
    assert!(text.contains("activation checkpointing"), "{text}");
    let read = |d: &Path| std::fs::read_to_string(d.join("loss.csv")).unwrap();
    assert_eq!(read(&plain), read(&saved), "bitwise identical losses and accuracy");
}

#[test]
fn a_short_words_run_reports_validation_loss_and_samples_words() {
    let dir = TempDir::new("words");
    let out = dir.path().join("words");
    let text = succeed(&["train", "words", "--epochs", "1", "--limit", "256", "--out", out.to_str().unwrap()]);
    assert!(text.contains("256 training / 6375 validation words"), "{text}");
    let line = text.lines().find(|l| l.starts_with("final validation loss: ")).expect("a loss line");
    let loss: f64 = line["final validation loss: ".len()..].parse().unwrap();
    assert!(loss.is_finite() && loss < 27f64.ln() + 0.5, "{loss}");
    let samples: Vec<&str> = text.lines().skip_while(|l| !l.starts_with("sampled words")).skip(1).collect();
    assert_eq!(samples.len(), 10, "{text}");
    let csv = std::fs::read_to_string(out.join("loss.csv")).unwrap();
    assert!(csv.starts_with("kind,step,epoch,loss,validation_loss\n"), "{csv}");
    assert_eq!(csv.lines().filter(|l| l.starts_with("step,")).count(), 4, "256 words in batches of 64");
}
