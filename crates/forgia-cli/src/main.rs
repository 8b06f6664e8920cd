//! The `forgia` command: train models on the shipped data, sample from and evaluate the saved
//! models, run the benchmark workloads, and gradcheck every differentiable op.

#[cfg(feature = "mimalloc")]
mod alloc;
mod bench;
mod data;
mod embed;
mod eval;
mod gradcheck;
mod plot;
mod sample;
mod train;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// mimalloc: graph nodes and small tensors are many short-lived allocations, which glibc's
/// allocator serves slowly (see docs/BENCHMARKS.md for the W1/W8 figures with each).
#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: alloc::Mimalloc = alloc::Mimalloc;

/// forgia: a CPU-first tensor and autograd library, and the models it trains.
#[derive(Parser)]
#[command(name = "forgia", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Train a model: mnist (a CNN, the default), words (a character transformer), spirals
    /// (a small MLP) or typos (LoRA fine-tuning of MiniLM on misspelled words).
    Train(Box<train::TrainArgs>),
    /// Make up words with a words model saved by `forgia train words --save FILE`.
    Sample(sample::SampleArgs),
    /// Test accuracy and confusion matrix of an mnist model saved by
    /// `forgia train mnist --save FILE`.
    Eval(eval::EvalArgs),
    /// Run the benchmark workloads of BENCHMARKS.md (all of them when none is named).
    Bench(bench::BenchArgs),
    /// Check every differentiable op's gradient against finite differences.
    Gradcheck(gradcheck::GradcheckArgs),
    /// Print sentence embeddings of a sentence-transformers model folder (all-MiniLM-L6-v2).
    Embed(embed::EmbedArgs),
}

/// Exits quietly, like a process killed by SIGPIPE, when stdout is closed early
/// (`forgia train | head`), instead of reporting the failed print as a panic.
fn quiet_broken_pipe() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let message =
            payload.downcast_ref::<String>().map(String::as_str).or_else(|| payload.downcast_ref::<&str>().copied());
        if message.is_some_and(|m| m.starts_with("failed printing to stdout")) {
            std::process::exit(141);
        }
        default(info);
    }));
}

fn main() -> ExitCode {
    #[cfg(feature = "mimalloc")]
    alloc::configure();
    quiet_broken_pipe();
    let cli = Cli::parse();
    // The library ignores a cap that names no instruction set; the program says so instead.
    if let Err(value) = forgia::runtime::isa_cap_from_env() {
        eprintln!(
            "error: {}={value:?} names no instruction set (avx512, avx2 or baseline)",
            forgia::runtime::MAX_ISA_VAR
        );
        return ExitCode::FAILURE;
    }
    let result = match cli.command {
        Command::Train(args) => train::run(&args).map_err(|e| e.to_string()),
        Command::Sample(args) => sample::run(&args).map_err(|e| e.to_string()),
        Command::Eval(args) => eval::run(&args).map_err(|e| e.to_string()),
        Command::Bench(args) => bench::run(&args).map_err(|e| e.to_string()),
        Command::Gradcheck(args) => gradcheck::run(&args).map_err(|e| e.to_string()),
        Command::Embed(args) => embed::run(&args).map_err(|e| e.to_string()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
