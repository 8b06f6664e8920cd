//! Misspelled English words for `forgia train typos`: the shipped word list split into
//! training and held-out words, and seeded typos (one edit: insert, delete, swap adjacent,
//! replace).
//!
//! * Words: every kept word of [`super::words`] (both of its splits) with at least
//!   [`MIN_LEN`] letters; a one-letter edit of a shorter word is too often another word or
//!   ambiguous.
//! * Split: a shuffle with the fixed seed [`SPLIT_SEED`] (independent of `--seed`, so every run
//!   is evaluated on the same words): its first [`HELDOUT`] words are held out (sorted by
//!   length), the rest train. A held-out word is never a training word.
//! * Typos: [`typo`] applies one random edit and redraws (up to [`MAX_DRAWS`] times) until the
//!   result differs from the word and is not itself a word of the list.
//! * Close words: [`close_words`] finds, for each training word, the other training words
//!   within two edits of it (the job's hard negatives), and [`partners`] pairs each word of a
//!   batch with one of them (`--hard-negatives paired`); [`distinct_typos`] draws the typos of
//!   a step so that no two are the same text.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use forgia::Rng;

use super::{existing, words, DataError};

/// The shortest word used.
pub(crate) const MIN_LEN: usize = 4;
/// Held-out words: the candidate set of the retrieval evaluation.
pub(crate) const HELDOUT: usize = 2000;
/// The seed of the train / held-out shuffle.
pub(crate) const SPLIT_SEED: u64 = 0x007e_570f_5e11;
/// Edits tried before [`typo`] accepts a result that is another word of the list.
pub(crate) const MAX_DRAWS: usize = 32;

/// One typing mistake.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Edit {
    /// A letter typed too many (`word` → `worxd`).
    Insert,
    /// A letter left out (`word` → `wrd`).
    Delete,
    /// Two neighbouring letters swapped (`word` → `wrod`).
    Swap,
    /// A letter replaced by another (`word` → `wore`).
    Replace,
}

impl Edit {
    /// Every edit, drawn with equal probability.
    pub(crate) const ALL: [Edit; 4] = [Edit::Insert, Edit::Delete, Edit::Swap, Edit::Replace];
}

/// The words of the typos job.
#[derive(Debug, Clone)]
pub(crate) struct TypoWords {
    /// Training words, in list order.
    pub(crate) train: Vec<String>,
    /// Held-out words, by length, then alphabetically.
    pub(crate) heldout: Vec<String>,
    /// Every word of the list (of any length), so that typos that are real words are avoided.
    pub(crate) dictionary: HashSet<String>,
}

/// Loads the word list from the data folder (`dir` is `--data-dir`) and splits it.
///
/// # Errors
/// As [`words::load`]; [`DataError::Shape`] when fewer than [`HELDOUT`] + 1 words of
/// [`MIN_LEN`] letters or more are left.
pub(crate) fn load(dir: Option<&Path>) -> Result<TypoWords, DataError> {
    let path = existing(dir, words::FILE_NAME, "word list")?;
    let all = words::load_from(&path)?;
    let list: Vec<String> = all.train.into_iter().chain(all.validation).collect();
    split(list, HELDOUT).ok_or_else(|| DataError::Shape {
        path,
        message: format!("fewer than {} words of at least {MIN_LEN} letters for the typos job", HELDOUT + 1),
    })
}

/// Splits `list` (the words of the list in its order): `heldout` of the words of at least
/// [`MIN_LEN`] letters, drawn with [`SPLIT_SEED`], are held out and the others train. `None`
/// when that leaves no training word.
pub(crate) fn split(list: Vec<String>, heldout: usize) -> Option<TypoWords> {
    let dictionary: HashSet<String> = list.iter().cloned().collect();
    let mut seen = HashSet::new();
    let usable: Vec<String> = list.into_iter().filter(|w| w.len() >= MIN_LEN && seen.insert(w.clone())).collect();
    if usable.len() <= heldout {
        return None;
    }
    let mut order: Vec<usize> = (0..usable.len()).collect();
    Rng::new(SPLIT_SEED).shuffle(&mut order);
    let held: HashSet<usize> = order[..heldout].iter().copied().collect();
    let mut heldout_words: Vec<String> = order[..heldout].iter().map(|&i| usable[i].clone()).collect();
    // By length, so that a batch of the evaluation pads little.
    heldout_words.sort_by(|a, b| (a.len(), a).cmp(&(b.len(), b)));
    let train = usable.into_iter().enumerate().filter(|(i, _)| !held.contains(i)).map(|(_, w)| w).collect();
    Some(TypoWords { train, heldout: heldout_words, dictionary })
}

/// `word` with `edit` applied at a random place (letters `a-z`); may equal `word` (a swap of
/// two equal letters) or be empty (deleting the only letter).
pub(crate) fn apply(word: &str, edit: Edit, rng: &mut Rng) -> String {
    let mut b = word.as_bytes().to_vec();
    let letter = |rng: &mut Rng| b'a' + rng.below(26) as u8;
    match edit {
        Edit::Insert => {
            let at = rng.below(b.len() + 1);
            b.insert(at, letter(rng));
        }
        Edit::Delete if !b.is_empty() => {
            b.remove(rng.below(b.len()));
        }
        Edit::Swap if b.len() >= 2 => {
            let at = rng.below(b.len() - 1);
            b.swap(at, at + 1);
        }
        Edit::Replace if !b.is_empty() => {
            let at = rng.below(b.len());
            // One of the 25 other letters (any letter in place of a character outside a-z).
            let offset = b[at].wrapping_sub(b'a') as usize % 26;
            b[at] = b'a' + ((offset + 1 + rng.below(25)) % 26) as u8;
        }
        _ => {}
    }
    String::from_utf8_lossy(&b).into_owned()
}

/// A misspelling of `word` (lowercase `a-z`, at least two letters): a random edit, redrawn
/// until it differs from `word` and is not in `dictionary`; after [`MAX_DRAWS`] draws the
/// first result that differs from `word` is taken even if it is a word. Never `word` itself.
pub(crate) fn typo(word: &str, dictionary: &HashSet<String>, rng: &mut Rng) -> String {
    let mut fallback = None;
    for _ in 0..MAX_DRAWS {
        let edit = Edit::ALL[rng.below(Edit::ALL.len())];
        let t = apply(word, edit, rng);
        if t == word || t.is_empty() {
            continue;
        }
        if !dictionary.contains(&t) {
            return t;
        }
        if fallback.is_none() {
            fallback = Some(t);
        }
    }
    // An insertion always differs from the word.
    fallback.unwrap_or_else(|| apply(word, Edit::Insert, rng))
}

/// The seed of the training typo of the `slot`-th word of step `step` in a run seeded `seed`:
/// every step draws fresh typos, and a run is reproducible from its seed.
pub(crate) fn pair_seed(seed: u64, step: u64, slot: usize) -> u64 {
    let mut r = Rng::new(seed ^ 0x7970_6f73);
    let a = r.next_u64();
    a ^ step.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (slot as u64).wrapping_mul(0xC2B2_AE3D_27D4_EB4F)
}

/// The fixed evaluation queries: one typo of each held-out word (seeded by [`SPLIT_SEED`] and
/// the word's position), the same in every run.
pub(crate) fn eval_queries(words: &TypoWords) -> Vec<String> {
    words
        .heldout
        .iter()
        .enumerate()
        .map(|(i, w)| typo(w, &words.dictionary, &mut Rng::new(pair_seed(SPLIT_SEED, u64::MAX, i))))
        .collect()
}

/// For each of `words`, the indices of the other words that share a deletion key with it
/// (the word itself or the word with one character deleted, as SymSpell): words one insert,
/// delete, replacement or adjacent swap apart, and some two edits apart (`abc`, `bca`), never
/// further. Each list is sorted and holds at most [`MAX_CLOSE`] words (those that come first
/// in `words` when there are more); a duplicate of a word is not close to it.
pub(crate) fn close_words(words: &[String]) -> Vec<Vec<u32>> {
    let keys = |w: &str| -> Vec<String> {
        let chars: Vec<char> = w.chars().collect();
        let mut k: Vec<String> = (0..chars.len())
            .map(|skip| chars.iter().enumerate().filter(|&(i, _)| i != skip).map(|(_, c)| c).collect())
            .collect();
        k.push(w.to_string());
        k.sort();
        k.dedup();
        k
    };
    let mut by_key: HashMap<String, Vec<u32>> = HashMap::new();
    for (i, w) in words.iter().enumerate() {
        for k in keys(w) {
            by_key.entry(k).or_default().push(i as u32);
        }
    }
    words
        .iter()
        .map(|w| {
            let mut close: Vec<u32> =
                keys(w).iter().flat_map(|k| by_key[k].iter().copied()).filter(|&j| words[j as usize] != *w).collect();
            close.sort_unstable();
            close.dedup();
            close.truncate(MAX_CLOSE);
            close
        })
        .collect()
}

/// The most close words [`close_words`] keeps per word.
pub(crate) const MAX_CLOSE: usize = 64;

/// A partner for each of `anchors` (indices of distinct words): one of its `close` words (as
/// [`close_words`] gives them) drawn with `rng`, or, when none of them is free, a word drawn
/// from `fallback` (the training words in use); never an anchor or another anchor's partner,
/// so the anchors and their partners are `2 · anchors.len()` distinct words. A word is
/// skipped (no partner) only when every one of `0..words` is taken.
pub(crate) fn partners(
    anchors: &[usize],
    close: &[Vec<u32>],
    fallback: &[usize],
    words: usize,
    rng: &mut Rng,
) -> Vec<Option<usize>> {
    let mut taken: HashSet<usize> = anchors.iter().copied().collect();
    anchors
        .iter()
        .map(|&i| {
            let free: Vec<usize> =
                close.get(i).into_iter().flatten().map(|&j| j as usize).filter(|j| !taken.contains(j)).collect();
            let pick = if free.is_empty() {
                // A few random draws, then the first free word of all of them.
                let draws = if fallback.is_empty() { 0 } else { 16 };
                (0..draws)
                    .map(|_| fallback[rng.below(fallback.len())])
                    .find(|j| !taken.contains(j))
                    .or_else(|| (0..words).find(|j| !taken.contains(j)))
            } else {
                Some(free[rng.below(free.len())])
            };
            if let Some(j) = pick {
                taken.insert(j);
            }
            pick
        })
        .collect()
}

/// `k` typos of each of `words` (`k · words.len()` texts, typo `t` of word `w` at
/// `t · words.len() + w`), typo `t` of word `w` drawn by [`typo`] with the generator
/// `rng_for(t · words.len() + w)`, redrawn (up to [`MAX_DRAWS`] times) while it equals an
/// earlier typo of the set, so that a query text of the step has one word only.
pub(crate) fn distinct_typos(
    words: &[&str],
    k: usize,
    dictionary: &HashSet<String>,
    mut rng_for: impl FnMut(usize) -> Rng,
) -> Vec<String> {
    let mut seen: HashSet<String> = HashSet::new();
    let mut out = Vec::with_capacity(k * words.len());
    for slot in 0..k * words.len() {
        let word = words[slot % words.len()];
        let mut rng = rng_for(slot);
        let mut t = typo(word, dictionary, &mut rng);
        for _ in 0..MAX_DRAWS {
            if !seen.contains(&t) {
                break;
            }
            t = typo(word, dictionary, &mut rng);
        }
        seen.insert(t.clone());
        out.push(t);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// True when `t` is one insert, delete, adjacent swap or replacement away from `w`.
    fn one_edit(w: &str, t: &str) -> bool {
        let (a, b) = (w.as_bytes(), t.as_bytes());
        let prefix = a.iter().zip(b).take_while(|(x, y)| x == y).count();
        let suffix = |skip_a: usize, skip_b: usize| a[prefix + skip_a..] == b[prefix + skip_b..];
        match (a.len() as isize) - (b.len() as isize) {
            1 => suffix(1, 0),
            -1 => suffix(0, 1),
            0 if prefix == a.len() => false,
            0 => {
                suffix(1, 1)
                    || (prefix + 1 < a.len()
                        && a[prefix] == b[prefix + 1]
                        && a[prefix + 1] == b[prefix]
                        && suffix(2, 2))
            }
            _ => false,
        }
    }

    fn sample_list() -> Vec<String> {
        let mut list = Vec::new();
        for a in b'a'..=b'z' {
            for b in [b'e', b'o', b'r'] {
                list.push(String::from_utf8(vec![a, b, b'n', b'a', b't']).unwrap());
            }
            list.push(String::from_utf8(vec![a, b'x']).unwrap());
        }
        list
    }

    #[test]
    fn every_edit_is_one_typing_mistake() {
        let mut rng = Rng::new(3);
        for _ in 0..2000 {
            let edit = Edit::ALL[rng.below(4)];
            let t = apply("spelling", edit, &mut rng);
            match edit {
                Edit::Insert => assert_eq!(t.len(), 9),
                Edit::Delete => assert_eq!(t.len(), 7),
                Edit::Swap | Edit::Replace => assert_eq!(t.len(), 8),
            }
            if t != "spelling" {
                assert!(one_edit("spelling", &t), "{edit:?}: {t}");
            }
            if edit == Edit::Replace {
                assert_ne!(t, "spelling", "a replacement picks another letter");
            }
            assert!(t.bytes().all(|c| c.is_ascii_lowercase()), "{t}");
        }
        assert!(one_edit("word", "wrod") && one_edit("word", "wrd") && one_edit("word", "words"));
        assert!(!one_edit("word", "word") && !one_edit("word", "drow") && !one_edit("word", "wo"));
    }

    #[test]
    fn typos_differ_from_the_word_and_avoid_other_words() {
        let dictionary: HashSet<String> = ["cat", "cut", "at", "act", "cats", "scat"].map(String::from).into();
        let mut rng = Rng::new(11);
        for _ in 0..500 {
            let t = typo("cat", &dictionary, &mut rng);
            assert_ne!(t, "cat");
            assert!(!dictionary.contains(&t), "{t} is a word");
            assert!(one_edit("cat", &t), "{t}");
        }
        // When every edit of "ab" is a word, the first edit that differs is taken.
        let mut every_edit = HashSet::new();
        for edit in Edit::ALL {
            let mut rng = Rng::new(0);
            for _ in 0..5000 {
                every_edit.insert(apply("ab", edit, &mut rng));
            }
        }
        every_edit.remove("ab");
        // Deletions, the swap, replacements, insertions (`aab` and `abb` two ways each).
        assert_eq!(every_edit.len(), 2 + 1 + 2 * 25 + (3 * 26 - 2), "every edit was drawn");
        let mut rng = Rng::new(5);
        for _ in 0..100 {
            let t = typo("ab", &every_edit, &mut rng);
            assert!(t != "ab" && one_edit("ab", &t), "{t}");
        }
    }

    #[test]
    fn typos_are_deterministic_for_a_seed() {
        let words = split(sample_list(), 10).unwrap();
        let draw = |seed: u64| -> Vec<String> {
            (0..20)
                .map(|slot| typo(&words.train[slot], &words.dictionary, &mut Rng::new(pair_seed(seed, 7, slot))))
                .collect()
        };
        assert_eq!(draw(1), draw(1));
        assert_ne!(draw(1), draw(2));
        assert_ne!(pair_seed(0, 1, 0), pair_seed(0, 2, 0));
        assert_ne!(pair_seed(0, 1, 0), pair_seed(0, 1, 1));
        assert_eq!(eval_queries(&words), eval_queries(&words));
    }

    #[test]
    fn held_out_words_are_never_training_words() {
        let list = sample_list();
        let words = split(list.clone(), 10).unwrap();
        assert_eq!(words.heldout.len(), 10);
        assert_eq!(words.train.len() + 10, 78, "the 26 two-letter words are too short");
        let train: HashSet<&String> = words.train.iter().collect();
        assert!(words.heldout.iter().all(|w| !train.contains(w) && w.len() >= MIN_LEN));
        // Fixed: the same split every time, whatever the run's seed.
        assert_eq!(split(list.clone(), 10).unwrap().heldout, words.heldout);
        assert!(split(list, 78).is_none(), "no training word left");
        let queries = eval_queries(&words);
        for (q, w) in queries.iter().zip(&words.heldout) {
            assert!(q != w && one_edit(w, q), "{w} -> {q}");
        }
    }

    #[test]
    fn close_words_are_within_two_edits() {
        let words: Vec<String> =
            ["cart", "card", "cat", "carts", "acrt", "tarc", "dog", "cart"].iter().map(|w| w.to_string()).collect();
        let close = close_words(&words);
        // cart: a replacement (card), a deletion (cat), an insertion (carts), a swap (acrt); not
        // tarc (a rotation) nor its own duplicate.
        assert_eq!(close[0], vec![1, 2, 3, 4]);
        assert_eq!(close[7], vec![1, 2, 3, 4]);
        // cat and card are two edits apart but share no key; the rest see both carts.
        assert_eq!(close[2], vec![0, 7]);
        assert_eq!((&close[1], &close[3], &close[4]), (&vec![0, 7], &vec![0, 7], &vec![0, 7]));
        assert!(close[5].is_empty() && close[6].is_empty(), "tarc and dog have no close word");
        let many: Vec<String> = (0..100).map(|i| format!("ab{}", (b'a' + (i % 26) as u8) as char)).collect();
        assert!(close_words(&many).iter().all(|c| c.len() <= MAX_CLOSE));
    }

    #[test]
    fn each_anchor_gets_a_free_close_partner_or_a_fallback_word() {
        let words: Vec<String> = ["cart", "card", "cat", "carts", "dog", "dig", "zebra", "apple", "lemon"]
            .iter()
            .map(|w| w.to_string())
            .collect();
        let close = close_words(&words);
        for seed in 0..50 {
            let mut rng = Rng::new(seed);
            let anchors = [0, 4, 6, 2];
            let got = partners(&anchors, &close, &[7, 8, 1], words.len(), &mut rng);
            let got: Vec<usize> = got.into_iter().map(Option::unwrap).collect();
            // cart: one of its close words that is no anchor (card, carts; not cat).
            assert!([1, 3].contains(&got[0]), "{got:?}");
            assert_eq!(got[1], 5, "dog's only close word is dig");
            // zebra has no close word: a fallback word; cat's close words may be taken by then.
            assert!([7, 8, 1].contains(&got[2]), "{got:?}");
            assert!(close[2].contains(&(got[3] as u32)) || [7, 8, 1].contains(&got[3]), "{got:?}");
            let mut all: Vec<usize> = anchors.iter().copied().chain(got.iter().copied()).collect();
            all.sort_unstable();
            all.dedup();
            assert_eq!(all.len(), 8, "anchors and partners are distinct words: {got:?}");
        }
        // Every word taken: no partner for the last anchors.
        let got = partners(&[0, 1, 2], &close, &[], 4, &mut Rng::new(0));
        assert_eq!(got.iter().filter(|p| p.is_some()).count(), 1, "{got:?}");
    }

    #[test]
    fn distinct_typos_give_each_word_k_typos_that_are_all_different() {
        let dictionary: HashSet<String> = ["cart", "card"].map(String::from).into();
        let words = ["cart", "card"];
        for seed in 0..100 {
            let typos = distinct_typos(&words, 3, &dictionary, |slot| Rng::new(pair_seed(seed, 1, slot)));
            assert_eq!(typos.len(), 6);
            for (slot, t) in typos.iter().enumerate() {
                assert!(one_edit(words[slot % 2], t) && !dictionary.contains(t), "{slot}: {t}");
            }
            let unique: HashSet<&String> = typos.iter().collect();
            assert_eq!(unique.len(), 6, "{typos:?}");
        }
        // Deterministic, and with k = 1 the typo of slot s is that of typo() with seed s.
        let one = distinct_typos(&["spelling"], 1, &dictionary, |s| Rng::new(s as u64));
        assert_eq!(one, vec![typo("spelling", &dictionary, &mut Rng::new(0))]);
    }

    #[test]
    fn the_shipped_list_holds_out_2000_words() {
        let words = load(None).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(words.heldout.len(), HELDOUT);
        assert!(words.train.len() > 50_000, "{}", words.train.len());
        let train: HashSet<&String> = words.train.iter().collect();
        assert!(words.heldout.iter().all(|w| !train.contains(w)));
    }
}
