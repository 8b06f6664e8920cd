//! `forgia sample`: words made up by a words model that `forgia train words --save FILE`
//! wrote, with a temperature, top-k and a seed. Prints one word a line and needs no data.

use std::path::PathBuf;

use clap::Args;
use forgia::Rng;

use crate::data::words::BOUNDARY_INDEX;
use crate::train::charlm::Sampling;
use crate::train::saved::SavedRun;
use crate::train::{at_least_one, positive_f32, words, TrainError};

/// Arguments of `forgia sample`.
#[derive(Args, Debug)]
pub(crate) struct SampleArgs {
    /// A words model written by `forgia train words --save FILE`.
    #[arg(long, value_name = "FILE")]
    pub(crate) model: PathBuf,
    /// How many words to make up.
    #[arg(short = 'n', long, value_name = "N", default_value_t = 10, value_parser = at_least_one)]
    pub(crate) count: u64,
    /// Softmax temperature: below 1 keeps to likely spellings, above 1 ventures further.
    #[arg(long, default_value_t = 0.8, value_parser = positive_f32)]
    pub(crate) temperature: f32,
    /// Draw each character only among the K most likely ones [default: all].
    #[arg(long, value_name = "K", value_parser = at_least_one)]
    pub(crate) top_k: Option<u64>,
    /// Seed of the draws (the same seed gives the same words).
    #[arg(long, default_value_t = 0)]
    pub(crate) seed: u64,
}

/// Runs `forgia sample`.
///
/// # Errors
/// A missing, corrupt or non-words model file.
pub(crate) fn run(args: &SampleArgs) -> Result<(), TrainError> {
    let saved = SavedRun::open(&args.model, "--model")?;
    let (model, vocab) = words::model_from_saved(&saved, "`forgia sample`")?;
    let sampling = Sampling { temperature: args.temperature, top_k: args.top_k.map(|k| k as usize) };
    let _guard = forgia::no_grad();
    let mut rng = Rng::new(args.seed);
    for _ in 0..args.count {
        let tokens = model.sample(BOUNDARY_INDEX, sampling, &mut rng)?;
        println!("{}", vocab.decode(&tokens).unwrap_or_default());
    }
    Ok(())
}
