//! The 5,000-digit MNIST subset `mnist_5k.csv.gz`, with its fixed stratified split.
//!
//! Format: gzip-compressed CSV, no header, one image a line: 784 integer grey levels 0..=255
//! (a 28x28 image, row-major) followed by the label 0-9. The file holds 500 images per digit.
//! Within each digit, in file order, the first 400 images train and the last 100 test.

use std::path::Path;

use super::{existing, for_each_gz_line, DataError};

/// The file name inside the data folder.
pub(crate) const FILE_NAME: &str = "mnist_5k.csv.gz";
/// Height and width of an image.
pub(crate) const IMAGE_SIDE: usize = 28;
/// Pixels per image.
pub(crate) const PIXELS: usize = IMAGE_SIDE * IMAGE_SIDE;
/// Number of classes (digits 0-9).
pub(crate) const CLASSES: usize = 10;
/// Images per digit in the file.
const ROWS_PER_DIGIT: usize = 500;
/// Images per digit in the training split; the remaining ones are the test split.
pub(crate) const TRAIN_PER_DIGIT: usize = 400;
/// Images per digit in the test split.
pub(crate) const TEST_PER_DIGIT: usize = ROWS_PER_DIGIT - TRAIN_PER_DIGIT;

/// The MNIST subset split into training and test sets.
///
/// Images are stored back to back, `PIXELS` values each, grey levels scaled to `[0, 1]`.
/// Both splits are ordered by digit, then by file order within the digit (the file is sorted
/// by label, so this is file order): shuffle before training.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct MnistSplit {
    /// `train_labels.len() * PIXELS` pixel values in `[0, 1]`.
    pub(crate) train_images: Vec<f32>,
    /// One label 0-9 per training image.
    pub(crate) train_labels: Vec<usize>,
    /// `test_labels.len() * PIXELS` pixel values in `[0, 1]`.
    pub(crate) test_images: Vec<f32>,
    /// One label 0-9 per test image.
    pub(crate) test_labels: Vec<usize>,
}

/// Loads `mnist_5k.csv.gz` from the data folder (see [`super::locate`]): `dir` is
/// `--data-dir`. A missing file is [`DataError::Missing`].
pub(crate) fn load(dir: Option<&Path>) -> Result<MnistSplit, DataError> {
    load_from(&existing(dir, FILE_NAME, "MNIST")?)
}

/// Loads and splits the MNIST CSV at `path`.
///
/// Errors: [`DataError::Io`] if the file is missing or not valid gzip; [`DataError::Parse`]
/// (with the line number) for a row without exactly 785 fields, a pixel that is not an
/// integer in 0..=255, or a label that is not an integer in 0..=9; [`DataError::Shape`] if
/// any digit does not have exactly 500 rows.
pub(crate) fn load_from(path: &Path) -> Result<MnistSplit, DataError> {
    // Raw grey levels of every row in file order, and each digit's row indices into them.
    let mut pixels: Vec<u8> = Vec::with_capacity(CLASSES * ROWS_PER_DIGIT * PIXELS);
    let mut rows_of_digit: Vec<Vec<usize>> = vec![Vec::new(); CLASSES];
    for_each_gz_line(path, |line_number, line| {
        let (grey, label) = parse_row(line).map_err(|message| DataError::Parse {
            path: path.to_path_buf(),
            line: line_number,
            message,
        })?;
        rows_of_digit[label].push(pixels.len() / PIXELS);
        pixels.extend_from_slice(&grey);
        Ok(())
    })?;

    for (digit, rows) in rows_of_digit.iter().enumerate() {
        if rows.len() != ROWS_PER_DIGIT {
            return Err(DataError::Shape {
                path: path.to_path_buf(),
                message: format!("digit {digit} has {} rows, expected {ROWS_PER_DIGIT} per digit", rows.len()),
            });
        }
    }

    let mut split = MnistSplit {
        train_images: Vec::with_capacity(CLASSES * TRAIN_PER_DIGIT * PIXELS),
        train_labels: Vec::with_capacity(CLASSES * TRAIN_PER_DIGIT),
        test_images: Vec::with_capacity(CLASSES * TEST_PER_DIGIT * PIXELS),
        test_labels: Vec::with_capacity(CLASSES * TEST_PER_DIGIT),
    };
    for (digit, rows) in rows_of_digit.iter().enumerate() {
        for (rank, &row) in rows.iter().enumerate() {
            let (images, labels) = if rank < TRAIN_PER_DIGIT {
                (&mut split.train_images, &mut split.train_labels)
            } else {
                (&mut split.test_images, &mut split.test_labels)
            };
            let grey = &pixels[row * PIXELS..(row + 1) * PIXELS];
            images.extend(grey.iter().map(|&level| f32::from(level) / 255.0));
            labels.push(digit);
        }
    }
    Ok(split)
}

/// Parses one CSV row into its `PIXELS` grey levels and its label. The error message says
/// which column is wrong.
fn parse_row(line: &[u8]) -> Result<(Vec<u8>, usize), String> {
    let fields: Vec<&[u8]> = line.split(|&byte| byte == b',').collect();
    let (label_field, pixel_fields) = match fields.split_last() {
        Some((label, pixels)) if pixels.len() == PIXELS => (label, pixels),
        _ => {
            return Err(format!(
                "expected {} comma-separated fields ({PIXELS} pixels and a label), found {}",
                PIXELS + 1,
                fields.len()
            ))
        }
    };
    let label = parse_integer(label_field).filter(|&value| value < CLASSES as u64).ok_or_else(|| {
        format!("label (column {}) is `{}`, expected a digit 0-9", PIXELS + 1, String::from_utf8_lossy(label_field))
    })?;
    let grey = pixel_fields
        .iter()
        .enumerate()
        .map(|(pixel, field)| {
            parse_integer(field).and_then(|value| u8::try_from(value).ok()).ok_or_else(|| {
                format!(
                    "pixel {pixel} (column {}) is `{}`, expected an integer in 0..=255",
                    pixel + 1,
                    String::from_utf8_lossy(field)
                )
            })
        })
        .collect::<Result<Vec<u8>, String>>()?;
    Ok((grey, label as usize))
}

/// Parses a non-negative decimal integer, allowing surrounding ASCII whitespace. `None` for
/// anything else, including an empty field or a value beyond `u64`.
fn parse_integer(field: &[u8]) -> Option<u64> {
    let digits = field.trim_ascii();
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(digits).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::super::test_files::TempFile;
    use super::*;

    /// A CSV row: pixel 0 and 1 set, the rest zero, then the label.
    fn row(first: u32, second: u32, label: &str) -> String {
        let mut fields = vec![first.to_string(), second.to_string()];
        fields.extend(std::iter::repeat_n("0".to_owned(), PIXELS - 2));
        fields.push(label.to_owned());
        fields.join(",") + "\n"
    }

    /// Image `index` of a flat image buffer.
    fn image(images: &[f32], index: usize) -> &[f32] {
        &images[index * PIXELS..(index + 1) * PIXELS]
    }

    /// Loads `text` from a temporary gz file, expecting a parse error; returns its line and
    /// message after checking it names the file.
    fn parse_error(name: &str, text: &str) -> (usize, String) {
        let file = TempFile::gz(name, text);
        match load_from(file.path()) {
            Err(DataError::Parse { path, line, message }) => {
                assert_eq!(path, file.path());
                (line, message)
            }
            other => panic!("expected a parse error, got {other:?}"),
        }
    }

    #[test]
    fn the_shipped_file_splits_4000_train_and_1000_test_balanced() {
        let split = load(None).unwrap_or_else(|err| panic!("{err}"));
        assert_eq!(split.train_labels.len(), CLASSES * TRAIN_PER_DIGIT);
        assert_eq!(split.test_labels.len(), CLASSES * TEST_PER_DIGIT);
        assert_eq!(split.train_images.len(), 4000 * PIXELS);
        assert_eq!(split.test_images.len(), 1000 * PIXELS);
        for digit in 0..CLASSES {
            let train = split.train_labels.iter().filter(|&&l| l == digit).count();
            let test = split.test_labels.iter().filter(|&&l| l == digit).count();
            assert_eq!((train, test), (400, 100), "digit {digit}");
        }
        let all = split.train_images.iter().chain(&split.test_images);
        assert!(all.clone().all(|&p| (0.0..=1.0).contains(&p)));
        assert!(all.clone().any(|&p| p == 1.0), "255 scales to 1");
        // Spot checks against the CSV: line 1 (digit 0, first train image) has 51 at pixel
        // 127, line 401 (digit 0, first test image) has 79 at pixel 126, and line 5000 (digit 9,
        // last test image) has 230 at pixel 714.
        assert_eq!(image(&split.train_images, 0)[127], 51.0 / 255.0);
        assert_eq!(image(&split.train_images, 0)[126], 0.0);
        assert_eq!(image(&split.test_images, 0)[126], 79.0 / 255.0);
        assert_eq!(image(&split.test_images, 999)[714], 230.0 / 255.0);
        assert_eq!(split.test_labels[999], 9);
        // The first image's grey levels sum to 31095.
        let sum: f32 = image(&split.train_images, 0).iter().sum();
        assert!((sum * 255.0 - 31095.0).abs() < 0.5, "{sum}");
    }

    #[test]
    fn rows_are_grouped_by_label_in_file_order() {
        // Digits interleaved (0, 1, ..., 9, 0, 1, ...); pixels 0 and 1 encode the rank of the
        // row within its digit, so the split can be checked row by row.
        let mut text = String::new();
        for rank in 0..ROWS_PER_DIGIT as u32 {
            for digit in 0..CLASSES {
                text += &row(rank % 256, rank / 256, &digit.to_string());
            }
        }
        let file = TempFile::gz("interleaved.csv.gz", &text);
        let split = load_from(file.path()).unwrap();
        let rank_of = |image: &[f32]| (image[0] * 255.0 + image[1] * 255.0 * 256.0).round();
        for digit in 0..CLASSES {
            for rank in 0..TRAIN_PER_DIGIT {
                let index = digit * TRAIN_PER_DIGIT + rank;
                assert_eq!(split.train_labels[index], digit);
                assert_eq!(rank_of(image(&split.train_images, index)), rank as f32);
            }
            for rank in 0..TEST_PER_DIGIT {
                let index = digit * TEST_PER_DIGIT + rank;
                assert_eq!(split.test_labels[index], digit);
                assert_eq!(rank_of(image(&split.test_images, index)), (TRAIN_PER_DIGIT + rank) as f32);
            }
        }
    }

    #[test]
    fn a_missing_file_is_an_io_error() {
        let path = std::env::temp_dir().join("forgia-data-test-no-mnist.csv.gz");
        let err = load_from(&path).unwrap_err();
        assert!(matches!(&err, DataError::Io { path: p, .. } if *p == path), "{err}");
    }

    #[test]
    fn a_corrupt_gzip_is_an_io_error() {
        let file = TempFile::raw("mnist-corrupt.csv.gz", &[0x1f, 0x8b, 0x08, 0, 1, 2, 3]);
        let err = load_from(file.path()).unwrap_err();
        assert!(matches!(err, DataError::Io { .. }), "{err}");
    }

    #[test]
    fn a_wrong_column_count_names_the_line() {
        let short = row(0, 0, "3").replacen("0,", "", 1);
        let (line, message) = parse_error("mnist-columns.csv.gz", &(row(0, 0, "3") + &short));
        assert_eq!(line, 2);
        assert!(message.contains("found 784"), "{message}");
    }

    #[test]
    fn a_pixel_out_of_range_names_the_line_and_column() {
        let (line, message) = parse_error("mnist-pixel.csv.gz", &row(0, 256, "1"));
        assert_eq!(line, 1);
        assert!(message.contains("pixel 1 (column 2) is `256`"), "{message}");
    }

    #[test]
    fn a_pixel_that_is_not_an_integer_is_rejected() {
        let text = row(0, 0, "1") + &row(0, 0, "1") + &row(0, 0, "1").replacen("0", "-1", 1);
        let (line, message) = parse_error("mnist-negative.csv.gz", &text);
        assert_eq!(line, 3);
        assert!(message.contains("`-1`"), "{message}");
    }

    #[test]
    fn a_bad_label_is_rejected() {
        for (index, label) in ["10", "x", "", "2.5"].into_iter().enumerate() {
            let name = format!("mnist-label-{index}.csv.gz");
            let (line, message) = parse_error(&name, &(row(0, 0, "4") + &row(0, 0, label)));
            assert_eq!(line, 2);
            assert!(message.contains("expected a digit 0-9"), "{message}");
        }
    }

    #[test]
    fn an_unbalanced_file_is_a_shape_error() {
        let text: String = (0..CLASSES).map(|d| row(1, 2, &d.to_string())).collect();
        let file = TempFile::gz("mnist-unbalanced.csv.gz", &text);
        let err = load_from(file.path()).unwrap_err();
        assert!(matches!(err, DataError::Shape { .. }), "{err}");
        assert!(err.to_string().contains("digit 0 has 1 rows"), "{err}");
    }
}
