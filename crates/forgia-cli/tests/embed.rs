//! `forgia embed` without a model: a clear error naming the missing file, never a panic.

use std::process::Command;

#[test]
fn embed_without_a_model_folder_names_the_missing_file() {
    let dir = std::env::temp_dir().join(format!("forgia-embed-none-{}", std::process::id()));
    let out =
        Command::new(env!("CARGO_BIN_EXE_forgia")).args(["embed", "--model"]).arg(&dir).arg("hello").output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("config.json") && !err.contains("panicked"), "{err}");
}

#[test]
fn embed_needs_at_least_one_sentence() {
    let out = Command::new(env!("CARGO_BIN_EXE_forgia")).args(["embed", "--model", "."]).output().unwrap();
    assert!(!out.status.success());
}
