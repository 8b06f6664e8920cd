//! Loaders for the data sets shipped in the repository's `data/` folder.
//!
//! * [`mnist`]: `mnist_5k.csv.gz`, 5,000 MNIST digits with the fixed stratified
//!   4,000 / 1,000 train/test split.
//! * [`words`]: `english-words.txt.gz`, an English word list filtered to lowercase words, with
//!   a character vocabulary and a train/validation split.
//! * [`typos`]: the same word list split into training and held-out words, with seeded typos.
//!
//! Every failure is a [`DataError`] naming the file, and the line where there is one.

pub(crate) mod mnist;
pub(crate) mod typos;
pub(crate) mod words;

use std::fs::File;
use std::io::{self, BufRead, BufReader};
use std::path::{Path, PathBuf};

use flate2::read::GzDecoder;

/// Environment variable naming a folder that holds the data files directly.
pub(crate) const DATA_DIR_ENV: &str = "FORGIA_DATA_DIR";

/// What went wrong while loading a data file.
#[derive(Debug, thiserror::Error)]
pub(crate) enum DataError {
    /// The file could not be opened, read or decompressed (missing file, corrupt gzip).
    #[error("cannot read {}: {source}", .path.display())]
    Io {
        /// The file being read.
        path: PathBuf,
        /// The underlying I/O or decompression error.
        source: io::Error,
    },
    /// The data file is not where the command looked for it.
    #[error("{what} data not found at {} (set {DATA_DIR_ENV} or pass --data-dir)", .path.display())]
    Missing {
        /// The data set, e.g. `MNIST`.
        what: &'static str,
        /// Where it was looked for.
        path: PathBuf,
    },
    /// A line of the file does not have the expected format.
    #[error("{}:{line}: {message}", .path.display())]
    Parse {
        /// The file being parsed.
        path: PathBuf,
        /// The 1-based line number.
        line: usize,
        /// What is wrong with the line.
        message: String,
    },
    /// The file parsed, but its contents do not have the expected overall shape.
    #[error("{}: {message}", .path.display())]
    Shape {
        /// The file being checked.
        path: PathBuf,
        /// What is wrong with the contents.
        message: String,
    },
}

/// Finds the data file `name`:
///
/// * when `dir` is given (`--data-dir`), `<dir>/<name>` and nothing else;
/// * when `$FORGIA_DATA_DIR` is set (and not empty), `$FORGIA_DATA_DIR/<name>` and nothing
///   else — a folder given explicitly is never silently replaced by another copy;
/// * otherwise the first that exists of `./data/<name>` (relative to the working directory)
///   and `data/<name>` at the repository root, located from this crate's source folder at
///   compile time; if neither exists, `data/<name>`, so that the loader's [`DataError::Io`]
///   names the conventional location.
pub(crate) fn locate(dir: Option<&Path>, name: &str) -> PathBuf {
    if let Some(dir) = dir {
        return dir.join(name);
    }
    if let Some(dir) = std::env::var_os(DATA_DIR_ENV).filter(|dir| !dir.is_empty()) {
        return PathBuf::from(dir).join(name);
    }
    let relative = Path::new("data").join(name);
    let from_crate = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../data")).join(name);
    [relative.clone(), from_crate].into_iter().find(|candidate| candidate.is_file()).unwrap_or(relative)
}

/// The path of data file `name` (see [`locate`]), or [`DataError::Missing`] naming the data
/// set `what` when no file is there.
fn existing(dir: Option<&Path>, name: &str, what: &'static str) -> Result<PathBuf, DataError> {
    let path = locate(dir, name);
    if path.is_file() {
        Ok(path)
    } else {
        Err(DataError::Missing { what, path })
    }
}

/// Reads the gzip-compressed text file at `path` line by line and calls
/// `on_line(line_number, line)` for each line, 1-based, without the line ending (`\n` or
/// `\r\n`). Lines are raw bytes: the callers decide what valid text is.
///
/// Stops at the first error, from the file, the decompressor or `on_line`.
fn for_each_gz_line<F>(path: &Path, mut on_line: F) -> Result<(), DataError>
where
    F: FnMut(usize, &[u8]) -> Result<(), DataError>,
{
    let io_error = |source| DataError::Io { path: path.to_path_buf(), source };
    let file = File::open(path).map_err(io_error)?;
    let mut reader = BufReader::new(GzDecoder::new(BufReader::new(file)));
    let mut line = Vec::new();
    let mut line_number = 0;
    loop {
        line.clear();
        if reader.read_until(b'\n', &mut line).map_err(io_error)? == 0 {
            return Ok(());
        }
        line_number += 1;
        let content = line.strip_suffix(b"\n").unwrap_or(&line);
        let content = content.strip_suffix(b"\r").unwrap_or(content);
        on_line(line_number, content)?;
    }
}

#[cfg(test)]
pub(crate) mod test_files {
    //! Temporary gzip files for the loaders' error-case tests.

    use std::io::Write;
    use std::path::{Path, PathBuf};

    use flate2::write::GzEncoder;
    use flate2::Compression;

    /// A file in the system temporary folder, removed on drop.
    pub(crate) struct TempFile {
        path: PathBuf,
    }

    impl TempFile {
        /// Writes `bytes` as-is to a fresh temporary file; `name` must be unique per test.
        pub(crate) fn raw(name: &str, bytes: &[u8]) -> Self {
            let path = std::env::temp_dir().join(format!("forgia-data-test-{}-{name}", std::process::id()));
            std::fs::write(&path, bytes).expect("write temporary file");
            Self { path }
        }

        /// Writes `text` gzip-compressed to a fresh temporary file.
        pub(crate) fn gz(name: &str, text: &str) -> Self {
            Self::raw(name, &gzip(text.as_bytes()))
        }

        /// The file's path.
        pub(crate) fn path(&self) -> &Path {
            &self.path
        }
    }

    impl Drop for TempFile {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.path);
        }
    }

    /// Gzip-compresses `bytes`.
    pub(crate) fn gzip(bytes: &[u8]) -> Vec<u8> {
        let mut encoder = GzEncoder::new(Vec::new(), Compression::fast());
        encoder.write_all(bytes).expect("compress in memory");
        encoder.finish().expect("compress in memory")
    }
}

#[cfg(test)]
mod tests {
    use super::test_files::{gzip, TempFile};
    use super::*;

    #[test]
    fn locate_finds_the_shipped_files() {
        for name in [mnist::FILE_NAME, words::FILE_NAME] {
            let path = locate(None, name);
            assert!(path.is_file(), "{} not found", path.display());
            assert!(path.ends_with(name));
        }
    }

    #[test]
    fn locate_falls_back_to_the_conventional_path() {
        let path = locate(None, "no-such-data-file.bin");
        assert_eq!(path, Path::new("data").join("no-such-data-file.bin"));
    }

    #[test]
    fn a_given_folder_is_used_as_is_and_a_missing_file_names_the_ways_to_set_it() {
        let dir = Path::new("/no/such/folder");
        assert_eq!(locate(Some(dir), "x.gz"), dir.join("x.gz"));
        let err = existing(Some(dir), "x.gz", "Test").unwrap_err();
        assert_eq!(
            err.to_string(),
            "Test data not found at /no/such/folder/x.gz (set FORGIA_DATA_DIR or pass --data-dir)"
        );
    }

    #[test]
    fn lines_are_numbered_from_one_without_line_endings() {
        let file = TempFile::gz("lines.gz", "first\r\nsecond\n\nfourth");
        let mut seen = Vec::new();
        for_each_gz_line(file.path(), |number, line| {
            seen.push((number, String::from_utf8(line.to_vec()).unwrap()));
            Ok(())
        })
        .unwrap();
        let expected = [(1, "first"), (2, "second"), (3, ""), (4, "fourth")];
        let expected: Vec<(usize, String)> = expected.iter().map(|&(n, s)| (n, s.to_owned())).collect();
        assert_eq!(seen, expected);
    }

    #[test]
    fn a_missing_file_is_an_io_error_naming_it() {
        let path = std::env::temp_dir().join("forgia-data-test-surely-missing.gz");
        let err = for_each_gz_line(&path, |_, _| Ok(())).unwrap_err();
        assert!(matches!(&err, DataError::Io { path: p, .. } if *p == path));
        assert!(err.to_string().contains("surely-missing"), "{err}");
    }

    #[test]
    fn a_file_that_is_not_gzip_is_an_io_error() {
        let file = TempFile::raw("plain.gz", b"0,1,2\n");
        let err = for_each_gz_line(file.path(), |_, _| Ok(())).unwrap_err();
        assert!(matches!(err, DataError::Io { .. }), "{err}");
    }

    #[test]
    fn a_truncated_gzip_stream_is_an_io_error() {
        let compressed = gzip("some text that will be cut short\n".repeat(50).as_bytes());
        let file = TempFile::raw("truncated.gz", &compressed[..compressed.len() / 2]);
        let err = for_each_gz_line(file.path(), |_, _| Ok(())).unwrap_err();
        assert!(matches!(err, DataError::Io { .. }), "{err}");
    }
}
