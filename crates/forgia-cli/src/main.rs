//! The `forgia` command: train models on the shipped data, run the benchmark workloads, and
//! gradcheck every differentiable op.

mod bench;
#[allow(dead_code)] // the loaders serve `forgia train`, which lands with the training stack
mod data;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// mimalloc: graph nodes and small tensors are many short-lived allocations, which glibc's
/// allocator serves slowly (see docs/BENCHMARKS.md for the W1/W8 figures with each).
#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// forgia: a CPU-first tensor and autograd library, and the models it trains.
#[derive(Parser)]
#[command(name = "forgia", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the benchmark workloads of BENCHMARKS.md (all of them when none is named).
    Bench(bench::BenchArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Bench(args) => bench::run(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
