//! The `forgia` binary end to end: short training runs (spirals, a cut-down MNIST), their
//! logs and plots, saving and resuming, bad input (one message, non-zero exit, no panic, no
//! partial checkpoint), `forgia sample` and `forgia eval` on tiny saved models, `--quiet`, the
//! missing-file messages, and `forgia gradcheck`.

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
fn an_instruction_set_cap_that_names_no_set_is_rejected_with_a_message() {
    let err = fail(&["bench", "W1", "--chain-ops", "10"], &[("FORGIA_MAX_ISA", Path::new("sse9"))]);
    assert!(err.contains("FORGIA_MAX_ISA") && err.contains("sse9"), "{err}");
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
fn gradcheck_second_order_sweep_passes_for_every_op() {
    // Every row of the table, attention included: no op refuses a graph.
    let text = succeed(&["gradcheck", "--second-order"]);
    for op in ["conv2d", "layer_norm", "checkpoint", "max_pool2d", "scaled_dot_product_attention"] {
        assert!(text.contains(op), "{op}: {text}");
    }
    assert!(!text.contains("FAIL") && !text.contains("ERROR"), "{text}");
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

/// Trains a tiny model of `task` and saves it as `<dir>/<task>.safetensors`.
fn tiny_model(dir: &Path, task: &str) -> PathBuf {
    let path = dir.join(format!("{task}.safetensors"));
    let out = dir.join(format!("out-{task}"));
    let args = ["train", task, "--epochs", "1", "--limit", "128", "--quiet", "--save"];
    succeed(&[&args[..], &[path.to_str().unwrap(), "--out", out.to_str().unwrap()]].concat());
    path
}

#[test]
fn a_saved_words_model_samples_words_without_the_word_list() {
    let dir = TempDir::new("sample");
    let model = tiny_model(dir.path(), "words");
    let model = model.to_str().unwrap();
    // No data is needed: point the data folder nowhere.
    let nowhere = dir.path().join("no-data");
    let o = forgia(&["sample", "--model", model, "-n", "5", "--seed", "3"], &[("FORGIA_DATA_DIR", &nowhere)]);
    assert!(o.status.success(), "{}", stderr(&o));
    let words = stdout(&o);
    assert_eq!(words.lines().count(), 5, "{words}");
    assert!(words.lines().all(|w| w.len() <= 16 && w.bytes().all(|b| b.is_ascii_lowercase())), "{words}");
    assert_eq!(succeed(&["sample", "--model", model, "-n", "5", "--seed", "3"]), words, "a seed repeats");
    // Top-1 is greedy: every draw is the same word.
    let greedy = succeed(&["sample", "--model", model, "-n", "3", "--top-k", "1", "--seed", "9"]);
    let first = greedy.lines().next().unwrap();
    assert!(greedy.lines().all(|w| w == first), "{greedy}");
    let hot = succeed(&["sample", "--model", model, "-n", "2", "--temperature", "2.5", "--top-k", "5"]);
    assert_eq!(hot.lines().count(), 2);
    let err = fail(&["sample", "--model", model, "--temperature", "0"], &[]);
    assert!(err.contains("--temperature"), "{err}");
}

#[test]
fn a_saved_mnist_model_is_evaluated_with_a_confusion_matrix() {
    let dir = TempDir::new("eval");
    let model = tiny_model(dir.path(), "mnist");
    let trained = std::fs::read_to_string(dir.path().join("out-mnist").join("loss.csv")).unwrap();
    let out = dir.path().join("eval");
    let text = succeed(&["eval", "--model", model.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    let line = text.lines().find(|l| l.starts_with("test accuracy: ")).expect("an accuracy line");
    assert!(line.ends_with("/ 1000 test images)"), "{line}");
    let accuracy: f64 = line["test accuracy: ".len()..].split('%').next().unwrap().parse().unwrap();
    let last_epoch = trained.lines().rfind(|l| l.starts_with("epoch,")).unwrap();
    let logged: f64 = last_epoch.rsplit(',').next().unwrap().parse().unwrap();
    assert!((accuracy - logged).abs() < 0.01, "eval {accuracy} vs training's {logged}");
    let header = text.lines().position(|l| l.starts_with("true\\pred")).expect("a table");
    let rows: Vec<&str> = text.lines().skip(header + 1).take(10).collect();
    for (digit, row) in rows.iter().enumerate() {
        let cells: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(cells.len(), 12, "{row}");
        assert_eq!(cells[0], digit.to_string());
        let total: usize = cells[1..11].iter().map(|c| c.parse::<usize>().unwrap()).sum();
        assert_eq!(total, 100, "100 test images of each digit: {row}");
    }
    let png = std::fs::read(out.join("confusion.png")).expect("confusion.png");
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    // --quiet: the accuracy line and nothing else.
    let quiet = succeed(&["eval", "--model", model.to_str().unwrap(), "--out", out.to_str().unwrap(), "--quiet"]);
    assert_eq!(quiet.trim_end(), line);
}

#[test]
fn quiet_training_prints_only_the_final_metric() {
    let dir = TempDir::new("quiet");
    let out = dir.path().join("out");
    let o = forgia(&["train", "spirals", "--epochs", "2", "--quiet", "--out", out.to_str().unwrap()], &[]);
    assert!(o.status.success() && stderr(&o).is_empty(), "{}", stderr(&o));
    let text = stdout(&o);
    assert_eq!(text.lines().count(), 1, "{text}");
    assert!(text.starts_with("final test accuracy: "), "{text}");
    assert_eq!(check_outputs(&out).1, 2, "the log and plot are still written");
}

#[test]
fn a_missing_model_or_data_file_is_one_line_naming_the_path_and_the_way_to_set_it() {
    let dir = TempDir::new("missing");
    let missing = dir.path().join("no-model.safetensors");
    for command in ["sample", "eval"] {
        let err = fail(&[command, "--model", missing.to_str().unwrap()], &[]);
        let expected = format!("error: model file not found at {} (pass --model FILE", missing.display());
        assert!(err.starts_with(&expected) && err.lines().count() == 1, "{err}");
    }
    let mnist = tiny_model(dir.path(), "mnist");
    let nowhere = dir.path().join("nowhere");
    let err = fail(&["eval", "--model", mnist.to_str().unwrap()], &[("FORGIA_DATA_DIR", &nowhere)]);
    let expected = format!(
        "error: MNIST data not found at {} (set FORGIA_DATA_DIR or pass --data-dir)\n",
        nowhere.join("mnist_5k.csv.gz").display()
    );
    assert_eq!(err, expected);
    let out = dir.path().join("out");
    let args = ["train", "words", "--out", out.to_str().unwrap(), "--data-dir", nowhere.to_str().unwrap()];
    let err = fail(&args, &[]);
    assert!(err.starts_with("error: word list data not found at ") && err.contains("english-words.txt.gz"), "{err}");
    // A model of the other job says which job it is from and which one is needed.
    let err = fail(&["sample", "--model", mnist.to_str().unwrap()], &[]);
    assert!(err.contains("of the mnist job") && err.contains("needs one of the words job"), "{err}");
}
