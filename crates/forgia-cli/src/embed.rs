//! `forgia embed --model DIR "sentence" ...`: sentence embeddings of a sentence-transformers
//! model folder (such as all-MiniLM-L6-v2, fetched by `tools/fetch_minilm.sh`), tokenized
//! with its `tokenizer.json` through the `tokenizers` crate and pooled as its pooling config
//! says. Prints one JSON array of floats a line, in the order of the sentences.

use std::path::{Path, PathBuf};

use clap::Args;
use forgia::models::sentence::SentenceEncoder;
use forgia::{no_grad, Indices};
use tokenizers::{PaddingParams, Tokenizer, TruncationParams};

/// Arguments of `forgia embed`.
#[derive(Args, Debug)]
pub(crate) struct EmbedArgs {
    /// A sentence-transformers folder: config.json, model.safetensors, tokenizer.json and
    /// 1_Pooling/config.json (see tools/fetch_minilm.sh).
    #[arg(long, value_name = "DIR")]
    pub(crate) model: PathBuf,
    /// Longest token sequence; longer sentences are cut, as sentence-transformers does
    /// [default: the folder's sentence_bert_config.json, else 256].
    #[arg(long, value_name = "N")]
    pub(crate) max_len: Option<usize>,
    /// The sentences.
    #[arg(required = true)]
    pub(crate) sentences: Vec<String>,
}

/// Why `forgia embed` failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum EmbedError {
    /// The library failed (a missing or bad model file, a bad shape).
    #[error(transparent)]
    Forgia(#[from] forgia::Error),
    /// The tokenizer could not be read or failed.
    #[error("tokenizer {path}: {reason}")]
    Tokenizer { path: String, reason: String },
}

/// A loaded model and its tokenizer.
pub(crate) struct Embedder {
    /// The model (public to the crate so that the typos job can add LoRA adapters to it).
    pub(crate) encoder: SentenceEncoder,
    tokenizer: Tokenizer,
    path: String,
}

/// The folder's `max_seq_length` (sentence_bert_config.json), else 256.
fn default_max_len(dir: &Path) -> usize {
    let text = std::fs::read_to_string(dir.join("sentence_bert_config.json")).unwrap_or_default();
    forgia::io::HfConfig::parse(&text, "sentence_bert_config.json")
        .and_then(|c| c.usize("max_seq_length"))
        .unwrap_or(256)
}

impl Embedder {
    /// Loads `dir`, cutting token sequences at `max_len` (the folder's setting when `None`).
    pub(crate) fn open(dir: &Path, max_len: Option<usize>) -> Result<Embedder, EmbedError> {
        let encoder = SentenceEncoder::from_dir(dir)?;
        let tok_path = dir.join("tokenizer.json");
        let path = tok_path.display().to_string();
        let bad = |reason: String| EmbedError::Tokenizer { path: path.clone(), reason };
        let mut tokenizer = Tokenizer::from_file(&tok_path).map_err(|e| bad(e.to_string()))?;
        let max_length =
            max_len.unwrap_or_else(|| default_max_len(dir)).min(encoder.bert.config.max_position_embeddings);
        tokenizer
            .with_truncation(Some(TruncationParams { max_length, ..Default::default() }))
            .map_err(|e| bad(e.to_string()))?;
        tokenizer.with_padding(Some(PaddingParams::default()));
        Ok(Embedder { encoder, tokenizer, path })
    }

    /// Token ids and attention mask `[B, S]` of a batch of sentences (padded to the longest).
    pub(crate) fn tokenize(&self, sentences: &[String]) -> Result<(Indices, Indices), EmbedError> {
        let enc = self
            .tokenizer
            .encode_batch(sentences.to_vec(), true)
            .map_err(|e| EmbedError::Tokenizer { path: self.path.clone(), reason: e.to_string() })?;
        let len = enc.first().map_or(0, |e| e.get_ids().len());
        let ids: Vec<i64> = enc.iter().flat_map(|e| e.get_ids().iter().map(|&i| i as i64)).collect();
        let mask: Vec<i64> = enc.iter().flat_map(|e| e.get_attention_mask().iter().map(|&m| m as i64)).collect();
        let shape = [sentences.len(), len];
        Ok((Indices::new(ids, &shape)?, Indices::new(mask, &shape)?))
    }

    /// One embedding per sentence.
    pub(crate) fn embed(&self, sentences: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let (ids, mask) = self.tokenize(sentences)?;
        let _guard = no_grad();
        let e = self.encoder.embed(&ids, &mask)?;
        let width = e.shape()[1];
        Ok(e.to_vec().chunks(width).map(<[f32]>::to_vec).collect())
    }
}

/// Runs `forgia embed`.
///
/// # Errors
/// A missing or bad model folder or tokenizer.
pub(crate) fn run(args: &EmbedArgs) -> Result<(), EmbedError> {
    let embedder = Embedder::open(&args.model, args.max_len)?;
    for v in embedder.embed(&args.sentences)? {
        let items: Vec<String> = v.iter().map(|x| x.to_string()).collect();
        println!("[{}]", items.join(","));
    }
    Ok(())
}
