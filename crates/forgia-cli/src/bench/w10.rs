//! `forgia bench W10` (feature `distributed`): W6's transformer step as data-parallel
//! training. Run it as `mpirun -np 2 forgia bench W10 --threads 1`: every rank takes its share
//! of W6's global batch of 32 sequences (DDP, default buckets), in blocks of steps that
//! alternate with blocks in which rank 0 alone runs the same global batch single-process on
//! its one thread (`--reps` steps of each in all); rank 0 prints the throughput ratio (single-process step time over data-parallel step time; the goal for 2
//! ranks is 1.85). `bench/torch_ddp_w10.py` measures the same with PyTorch DDP on gloo.

use std::sync::Arc;
use std::time::{Duration, Instant};

use forgia::nn::Module;
use forgia::optim::{AdamConfig, AdamW, Optimizer};
use forgia::{Indices, Rng, Tensor};
use forgia_distributed::{DdpOptions, DistributedDataParallel, DistributedSampler};

use crate::train::charlm::{CharTransformer, Config};

use super::{line, median, BenchError};

mod cpu;

/// The CPU-time accounting of a run with [`CPU_ENV`] set.
#[derive(Default)]
struct Account {
    /// Every thread over the data-parallel blocks.
    dp: cpu::Threads,
    /// Every thread over the single-process blocks (rank 0's full and shard steps; the other
    /// ranks wait meanwhile).
    single: cpu::Threads,
    dp_phases: cpu::Phases,
    single_phases: cpu::Phases,
    shard_phases: cpu::Phases,
}

impl Account {
    fn report(&self, rank: usize) {
        self.dp.report(rank, "dp");
        self.single.report(rank, "single+shard");
        self.dp_phases.report(rank, "dp");
        self.single_phases.report(rank, "single");
        self.shard_phases.report(rank, "shard");
    }
}

/// W6's sizes: vocabulary, context, global batch.
const VOCAB: usize = 65;
const CONTEXT: usize = 64;
const GLOBAL_BATCH: usize = 32;
/// Steps per measured block (data-parallel and single-process blocks alternate).
const BLOCK: usize = 5;
/// Set (to anything) to print, on every rank's stderr, the CPU time of each thread of the
/// process per data-parallel and per single-process step, and the main thread's CPU time per
/// phase of the step (Linux `/proc` scheduler statistics; see docs/DISTRIBUTED.md).
const CPU_ENV: &str = "FORGIA_W10_CPU";

/// The data-parallel W6 step against the single-process one; the line on rank 0, `None` on
/// the others.
pub(super) fn w10(reps: usize) -> Result<Option<String>, BenchError> {
    // Rank 0's single-process half runs between two collectives: allow for it.
    let comm = Arc::new(forgia_distributed::init(Duration::from_secs(600)).map_err(dist)?);
    let (rank, ranks) = (comm.rank(), comm.size());
    let config = Config { vocab: VOCAB, context: CONTEXT, d_model: 128, heads: 4, layers: 4 };
    let mut rng = Rng::new(6);
    let ids: Vec<i64> = (0..GLOBAL_BATCH * CONTEXT).map(|_| rng.below(VOCAB) as i64).collect();
    let targets: Vec<usize> = (0..GLOBAL_BATCH * CONTEXT).map(|_| rng.below(VOCAB)).collect();
    let rows: Vec<usize> = (0..GLOBAL_BATCH).collect();
    let shard = DistributedSampler::new(rank, ranks).shard(&rows).to_vec();

    let mut model = CharTransformer::new(config, 6, false)?;
    let ddp = DistributedDataParallel::new(comm.clone(), &mut model, DdpOptions::default()).map_err(dist)?;
    let mut opt = AdamW::new(AdamConfig { lr: 3e-4, ..AdamConfig::adamw() })?;
    let (shard_ids, shard_targets) = batch(&ids, &targets, &shard)?;
    let weight = DistributedSampler::new(rank, ranks).loss_weight(shard.len(), GLOBAL_BATCH);
    // Rank 0's single-process twin of the same step on the whole global batch.
    let mut alone = if rank == 0 {
        let model = CharTransformer::new(config, 6, false)?;
        let opt = AdamW::new(AdamConfig { lr: 3e-4, ..AdamConfig::adamw() })?;
        Some((model, opt, batch(&ids, &targets, &rows)?))
    } else {
        None
    };
    // Blocks of data-parallel steps alternate with blocks of single-process steps (the other
    // ranks wait at a collective meanwhile), so both figures come from the same stretch of
    // the machine's drifting load, as `rounds.sh` alternates forgia and its twin. One
    // warm-up step of each first; every rank makes the same collectives.
    let reps = reps.max(1);
    let blocks = reps.div_ceil(BLOCK);
    let (mut parallel, mut single) = (Vec::with_capacity(reps), Vec::with_capacity(reps));
    let mut account = std::env::var_os(CPU_ENV).map(|_| Account::default());
    for block in 0..=blocks {
        let n = if block == 0 { 1 } else { BLOCK };
        let measured = block > 0;
        let before = account.as_ref().map(|_| cpu::snapshot());
        let started = Instant::now();
        for _ in 0..n {
            let start = Instant::now();
            let phases = account.as_mut().filter(|_| measured).map(|a| &mut a.dp_phases);
            step(&mut model, &mut opt, (&shard_ids, &shard_targets, shard.len()), weight, Some(&ddp), phases)?;
            if measured {
                parallel.push(start.elapsed().as_secs_f64() * 1e3);
            }
        }
        if let (Some(a), Some(before), true) = (account.as_mut(), before.as_ref(), measured) {
            a.dp.add(before, n, started.elapsed().as_secs_f64());
        }
        let before = account.as_ref().map(|_| cpu::snapshot());
        let started = Instant::now();
        if let Some((model, opt, (all_ids, all_targets))) = alone.as_mut() {
            for _ in 0..n {
                let start = Instant::now();
                let phases = account.as_mut().filter(|_| measured).map(|a| &mut a.single_phases);
                step(model, opt, (all_ids, all_targets, GLOBAL_BATCH), 1.0, None, phases)?;
                if measured {
                    single.push(start.elapsed().as_secs_f64() * 1e3);
                }
            }
            // Accounting only: the same single-process step on this rank's shard, the floor
            // of a data-parallel step without any communication.
            if let Some(a) = account.as_mut().filter(|_| measured) {
                for _ in 0..n {
                    step(
                        model,
                        opt,
                        (&shard_ids, &shard_targets, shard.len()),
                        weight,
                        None,
                        Some(&mut a.shard_phases),
                    )?;
                }
            }
        }
        // The other ranks wait here for rank 0's single-process block.
        comm.all_reduce_sum_f64(&mut [0.0]).map_err(dist)?;
        if let (Some(a), Some(before), true) = (account.as_mut(), before.as_ref(), measured) {
            a.single.add(before, n, started.elapsed().as_secs_f64());
        }
    }
    if let Some(a) = &account {
        a.report(rank);
    }
    drop(ddp);
    let parallel_ms = median(parallel);
    if rank != 0 {
        return Ok(None);
    }
    let single_ms = [median(single)];
    let ratio = single_ms[0] / parallel_ms;
    Ok(Some(line(
        "W10",
        parallel_ms,
        &[
            ("ranks", ranks.to_string()),
            ("threads_per_rank", forgia::num_threads().to_string()),
            ("global_batch", GLOBAL_BATCH.to_string()),
            ("single_ms", format!("{:.1}", single_ms[0])),
            ("throughput_ratio", format!("{ratio:.2}")),
        ],
    )))
}

fn dist(e: forgia_distributed::DistError) -> BenchError {
    BenchError::Distributed(e.to_string())
}

/// The rows `which` of the batch: ids `[n, CONTEXT]` and targets `[n·CONTEXT]`.
fn batch(ids: &[i64], targets: &[usize], which: &[usize]) -> forgia::Result<(Indices, Indices)> {
    let pick_ids: Vec<i64> = which.iter().flat_map(|&r| ids[r * CONTEXT..(r + 1) * CONTEXT].to_vec()).collect();
    let pick_targets: Vec<usize> =
        which.iter().flat_map(|&r| targets[r * CONTEXT..(r + 1) * CONTEXT].to_vec()).collect();
    Ok((Indices::new(pick_ids, &[which.len(), CONTEXT])?, Indices::from(pick_targets)))
}

/// One AdamW step of W6 on `rows` sequences, its loss scaled by `weight`, synchronized by
/// `ddp` when given; `phases` accounts the main thread's CPU time per phase.
fn step(
    model: &mut CharTransformer,
    opt: &mut AdamW,
    (ids, targets, rows): (&Indices, &Indices, usize),
    weight: f32,
    ddp: Option<&DistributedDataParallel>,
    mut phases: Option<&mut cpu::Phases>,
) -> Result<(), BenchError> {
    let mut mark = |i: usize| {
        if let Some(p) = phases.as_deref_mut() {
            p.start(i);
        }
    };
    mark(0);
    let logits = model.forward(ids)?.reshape(&[rows * CONTEXT, VOCAB])?;
    let loss = forgia::loss::cross_entropy(&logits, targets, Default::default())?;
    let loss: Tensor = if weight == 1.0 { loss } else { loss.scale(weight) };
    mark(1);
    loss.backward()?;
    mark(2);
    if let Some(ddp) = ddp {
        ddp.finish().map_err(dist)?;
    }
    mark(3);
    opt.step(model)?;
    model.zero_grad();
    if let Some(p) = phases {
        p.close();
    }
    Ok(())
}
