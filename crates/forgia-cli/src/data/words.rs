//! The English word list `english-words.txt.gz`, prepared for a character-level language
//! model.
//!
//! Format: gzip-compressed text, one word a line. Only words of [`MIN_LEN`]..=[`MAX_LEN`]
//! lowercase ASCII letters `a-z` are kept; words with capitals, apostrophes, accents or any
//! other character are dropped. The kept words, in file order, are split deterministically:
//! every 10th word (the 10th, 20th, ...) goes to validation, the rest train.

use std::path::Path;

use super::{existing, for_each_gz_line, DataError};

/// The file name inside the data folder.
pub(crate) const FILE_NAME: &str = "english-words.txt.gz";
/// The shortest word kept.
pub(crate) const MIN_LEN: usize = 2;
/// The longest word kept.
pub(crate) const MAX_LEN: usize = 16;
/// Every `VALIDATION_EVERY`-th kept word goes to the validation split.
pub(crate) const VALIDATION_EVERY: usize = 10;
/// The boundary token marking both the start and the end of a word.
pub(crate) const BOUNDARY: char = '.';
/// The index of [`BOUNDARY`] in every [`Vocab`].
pub(crate) const BOUNDARY_INDEX: usize = 0;

/// A character vocabulary: index 0 is the boundary token `.`, then the distinct characters
/// of the words it was built from, in sorted order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Vocab {
    /// `chars[index]` is the character of `index`; `chars[1..]` is sorted and distinct.
    chars: Vec<char>,
}

impl Vocab {
    /// Builds the vocabulary of `words`: the boundary, then every distinct character of the
    /// words (other than the boundary character itself) in sorted order.
    pub(crate) fn from_words<S: AsRef<str>>(words: &[S]) -> Self {
        let mut letters: Vec<char> =
            words.iter().flat_map(|word| word.as_ref().chars()).filter(|&c| c != BOUNDARY).collect();
        letters.sort_unstable();
        letters.dedup();
        let mut chars = Vec::with_capacity(letters.len() + 1);
        chars.push(BOUNDARY);
        chars.extend(letters);
        Self { chars }
    }

    /// The vocabulary of `chars` as [`Vocab::chars`] lists them: the boundary first, then
    /// sorted distinct characters. `None` if `chars` is not of that form.
    pub(crate) fn from_chars(chars: Vec<char>) -> Option<Self> {
        let ordered = chars.first() == Some(&BOUNDARY) && chars[1..].windows(2).all(|w| w[0] < w[1]);
        (ordered && !chars[1..].contains(&BOUNDARY)).then_some(Self { chars })
    }

    /// Every token's character, by index: the boundary, then the sorted letters.
    pub(crate) fn chars(&self) -> &[char] {
        &self.chars
    }

    /// The number of tokens, the boundary included.
    pub(crate) fn len(&self) -> usize {
        self.chars.len()
    }

    /// The index of `c`, if it is in the vocabulary.
    pub(crate) fn index_of(&self, c: char) -> Option<usize> {
        if c == BOUNDARY {
            return Some(BOUNDARY_INDEX);
        }
        self.chars[1..].binary_search(&c).ok().map(|i| i + 1)
    }

    /// The character of `index`, if it is in range.
    pub(crate) fn char_of(&self, index: usize) -> Option<char> {
        self.chars.get(index).copied()
    }

    /// Encodes `word` as token indices framed by the boundary: `.cat.` becomes
    /// `[0, c, a, t, 0]`. `None` if a character is not in the vocabulary.
    pub(crate) fn encode(&self, word: &str) -> Option<Vec<usize>> {
        let mut indices = Vec::with_capacity(word.len() + 2);
        indices.push(BOUNDARY_INDEX);
        for c in word.chars() {
            indices.push(self.index_of(c)?);
        }
        indices.push(BOUNDARY_INDEX);
        Some(indices)
    }

    /// Decodes token indices back to text, dropping boundary tokens. `None` if an index is
    /// out of range.
    pub(crate) fn decode(&self, indices: &[usize]) -> Option<String> {
        indices.iter().filter(|&&index| index != BOUNDARY_INDEX).map(|&index| self.char_of(index)).collect()
    }
}

/// The filtered word list, split, with the vocabulary of all kept words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Words {
    /// The training words, in file order.
    pub(crate) train: Vec<String>,
    /// Every 10th kept word, in file order.
    pub(crate) validation: Vec<String>,
    /// Built from both splits, so every kept word encodes.
    pub(crate) vocab: Vocab,
}

/// Loads `english-words.txt.gz` from the data folder (see [`super::locate`]): `dir` is
/// `--data-dir`. A missing file is [`DataError::Missing`].
pub(crate) fn load(dir: Option<&Path>) -> Result<Words, DataError> {
    load_from(&existing(dir, FILE_NAME, "word list")?)
}

/// Loads, filters and splits the gzip word list at `path`.
///
/// Errors: [`DataError::Io`] if the file is missing or not valid gzip; [`DataError::Shape`]
/// if fewer than [`VALIDATION_EVERY`] words survive the filter, leaving a split empty.
pub(crate) fn load_from(path: &Path) -> Result<Words, DataError> {
    let mut train = Vec::new();
    let mut validation = Vec::new();
    let mut kept = 0;
    for_each_gz_line(path, |_, line| {
        // Lines are raw bytes; a line that is not valid UTF-8 has non-ASCII bytes and is
        // dropped by the filter like any other word with characters outside a-z.
        if let Some(word) = keep(line) {
            kept += 1;
            if kept % VALIDATION_EVERY == 0 {
                validation.push(word);
            } else {
                train.push(word);
            }
        }
        Ok(())
    })?;
    if validation.is_empty() {
        return Err(DataError::Shape {
            path: path.to_path_buf(),
            message: format!(
                "only {kept} words of {MIN_LEN}..={MAX_LEN} lowercase letters a-z; \
                 at least {VALIDATION_EVERY} are needed for a validation split"
            ),
        });
    }
    let vocab = Vocab::from_words(&[train.as_slice(), validation.as_slice()].concat());
    Ok(Words { train, validation, vocab })
}

/// The word on `line` if it is kept: after trimming surrounding ASCII whitespace,
/// [`MIN_LEN`]..=[`MAX_LEN`] bytes, all in `a-z`.
fn keep(line: &[u8]) -> Option<String> {
    let word = line.trim_ascii();
    let kept = (MIN_LEN..=MAX_LEN).contains(&word.len()) && word.iter().all(u8::is_ascii_lowercase);
    // All bytes are ASCII letters here, so the conversion cannot fail.
    kept.then(|| String::from_utf8_lossy(word).into_owned())
}

#[cfg(test)]
mod tests {
    use super::super::test_files::{gzip, TempFile};
    use super::*;

    #[test]
    fn the_shipped_list_keeps_63753_lowercase_words() {
        let words = load(None).unwrap_or_else(|err| panic!("{err}"));
        assert_eq!(words.train.len() + words.validation.len(), 63_753);
        assert_eq!(words.validation.len(), 6_375);
        assert_eq!(words.train.len(), 57_378);
        assert_eq!(&words.train[..3], ["aardvark", "aardvarks", "abaci"]);
        assert_eq!(&words.validation[..2], ["abandon", "abashed"]);
        assert_eq!(words.train.last().map(String::as_str), Some("zygotes"));
        for word in words.train.iter().chain(&words.validation) {
            assert!((MIN_LEN..=MAX_LEN).contains(&word.len()), "{word}");
            assert!(word.bytes().all(|b| b.is_ascii_lowercase()), "{word}");
        }
        assert!(words.train.iter().any(|w| w.len() == MAX_LEN));

        let vocab = &words.vocab;
        assert_eq!(vocab.len(), 27);
        assert_eq!(vocab.char_of(BOUNDARY_INDEX), Some('.'));
        assert_eq!(vocab.index_of('a'), Some(1));
        assert_eq!(vocab.index_of('z'), Some(26));
        assert_eq!(vocab.encode("cat"), Some(vec![0, 3, 1, 20, 0]));
        for word in words.validation.iter().take(100) {
            let encoded = vocab.encode(word).expect("every kept word encodes");
            assert_eq!(encoded.len(), word.len() + 2);
            assert_eq!(vocab.decode(&encoded).as_deref(), Some(word.as_str()));
        }
    }

    #[test]
    fn a_tiny_list_is_filtered_and_split_every_tenth_word() {
        let mut text = String::from("Apple\nit's\na\ncafé\nabcdefghijklmnopq\n  \n");
        text += "ba\r\n"; // CRLF line endings are fine
        for word in ["be", "cab", "dab", "ebb", "fa", "gab", "ha", "id", "jab", "ka"] {
            text += word;
            text += "\n";
        }
        text += "abcdefghijklmnop"; // 16 letters, no final newline
        let mut bytes = text.into_bytes();
        bytes.extend_from_slice(b"\nab\xff\n"); // not UTF-8: dropped
        let file = TempFile::raw("words-tiny.gz", &gzip(&bytes));

        let words = load_from(file.path()).unwrap();
        assert_eq!(words.validation, ["jab"]); // the 10th kept word
        assert_eq!(words.train, ["ba", "be", "cab", "dab", "ebb", "fa", "gab", "ha", "id", "ka", "abcdefghijklmnop"]);
        assert_eq!(words.vocab.len(), 17); // '.' and a-p
        assert_eq!(words.vocab.index_of('q'), None);
        assert_eq!(words.vocab.encode("bad"), Some(vec![0, 2, 1, 4, 0]));
        assert_eq!(words.vocab.encode("ax"), None);
        assert_eq!(words.vocab.decode(&[0, 8, 9, 0]).as_deref(), Some("hi"));
        assert_eq!(words.vocab.decode(&[0, 17]), None);
    }

    #[test]
    fn the_vocab_reserves_index_zero_for_the_boundary() {
        let vocab = Vocab::from_words(&["b.a", "ab"]);
        assert_eq!(vocab.len(), 3);
        assert_eq!(vocab.char_of(0), Some(BOUNDARY));
        assert_eq!(vocab.index_of(BOUNDARY), Some(BOUNDARY_INDEX));
        assert_eq!(vocab.char_of(1), Some('a'));
        assert_eq!(vocab.char_of(3), None);
        assert_eq!(vocab.encode(""), Some(vec![0, 0]));
        assert_eq!(Vocab::from_chars(vocab.chars().to_vec()), Some(vocab));
        assert_eq!(Vocab::from_chars(vec!['.', 'b', 'a']), None, "letters must be sorted");
        assert_eq!(Vocab::from_chars(vec!['a']), None, "the boundary comes first");
    }

    #[test]
    fn a_list_without_enough_usable_words_is_a_shape_error() {
        let file = TempFile::gz("words-unusable.gz", "A\nB's\nx\nok\n");
        let err = load_from(file.path()).unwrap_err();
        assert!(matches!(err, DataError::Shape { .. }), "{err}");
        assert!(err.to_string().contains("only 1 words"), "{err}");
    }

    #[test]
    fn a_missing_or_corrupt_file_is_an_io_error() {
        let missing = std::env::temp_dir().join("forgia-data-test-no-words.gz");
        assert!(matches!(load_from(&missing), Err(DataError::Io { .. })));
        let file = TempFile::raw("words-corrupt.gz", b"\x1f\x8b\x08\x00garbage");
        assert!(matches!(load_from(file.path()), Err(DataError::Io { .. })));
    }
}
