//! Scratch directories for the tests that write files.

use std::path::{Path, PathBuf};

/// A directory removed when the test ends, passed or failed.
pub struct TempDir(PathBuf);

impl std::ops::Deref for TempDir {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A fresh, empty `forgia-<suite>-<pid>-<test>` directory in the system's temp folder (one
/// per test and process, so tests running at once never share one).
pub fn temp_dir(suite: &str, test: &str) -> TempDir {
    let d = std::env::temp_dir().join(format!("forgia-{suite}-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    TempDir(d)
}
