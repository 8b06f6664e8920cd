//! The multi-rank checks of data-parallel training, one scenario per run, started under
//! `mpirun` by `tests/mpirun.rs`: `equal` (20 steps of N-rank training against rank 0's own
//! single-process run), `unused` (a parameter without gradient on one rank), `overlap` (a
//! bucket's allreduce starts before the pass ends), `killed` (rank 1 is killed mid-training)
//! and `error` (rank 1 fails mid-training).

#[path = "../../tests/common/mod.rs"]
mod common;

use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use forgia::nn::Module;
use forgia::Tensor;
use forgia_distributed::{Comm, DdpOptions, DistributedDataParallel};

fn main() -> ExitCode {
    let scenario = std::env::args().nth(1).unwrap_or_default();
    // One worker thread per rank: the ranks share this machine.
    if let Err(e) = forgia::set_num_threads(1) {
        eprintln!("error: {e}");
        return ExitCode::FAILURE;
    }
    let comm = match Comm::mpi(Duration::from_secs(30)) {
        Ok(c) => Arc::new(c),
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = match scenario.as_str() {
        "equal" => equal(comm.clone()),
        "unused" => unused(comm.clone()),
        "overlap" => overlap(comm.clone()),
        "killed" => killed(comm.clone()),
        "error" => error(comm.clone()),
        other => Err(format!("unknown scenario {other:?}")),
    };
    match result {
        Ok(()) => {
            println!("rank {}: {scenario} ok", comm.rank());
            ExitCode::SUCCESS
        }
        Err(e) => comm.abort(1, &format!("{scenario}: {e}")),
    }
}

fn close(what: &str, a: &[f64], b: &[f64]) -> Result<(), String> {
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        if (x - y).abs() > 1e-5 * x.abs().max(y.abs()) + 1e-7 {
            return Err(format!("{what}[{i}]: {x} vs {y}"));
        }
    }
    if a.len() != b.len() {
        return Err(format!("{what}: {} vs {} values", a.len(), b.len()));
    }
    Ok(())
}

/// 20 steps over all ranks (global batch 12, small buckets) equal rank 0's single-process run.
fn equal(comm: Arc<Comm>) -> Result<(), String> {
    let rank = comm.rank();
    let (losses, params) = common::train(Some(comm), 1, 20, 12, 256);
    if rank == 0 {
        let (single_losses, single_params) = common::train(None, 1, 20, 12, 1 << 20);
        close("loss", &losses, &single_losses)?;
        let f = |v: &[f32]| v.iter().map(|&x| x as f64).collect::<Vec<f64>>();
        close("params", &f(&params), &f(&single_params))?;
    }
    Ok(())
}

/// Rank 1 never uses the second layer: its average is rank 0's gradient over the ranks.
fn unused(comm: Arc<Comm>) -> Result<(), String> {
    let (rank, size) = (comm.rank(), comm.size() as f32);
    let mut model = common::Mlp::new(3);
    let ddp = DistributedDataParallel::new(comm.clone(), &mut model, DdpOptions::with_bucket_cap(64))
        .map_err(|e| e.to_string())?;
    let x = Tensor::ones(&[2, common::FEATURES]).map_err(|e| e.to_string())?;
    let loss = if rank == 0 {
        model.forward(&x).sum_all()
    } else {
        model.l1.forward(&x).map_err(|e| e.to_string())?.tanh().sum_all()
    };
    loss.backward().map_err(|e| e.to_string())?;
    let mut local =
        if rank == 0 { model.l2.weight.grad().unwrap().to_vec() } else { vec![0.0; model.l2.weight.numel()] };
    // No other collective between backward and finish: the hooks' allreduces come first.
    ddp.finish().map_err(|e| e.to_string())?;
    comm.broadcast(&mut local, 0).map_err(|e| e.to_string())?;
    let got = model.l2.weight.grad().ok_or("l2.weight has no gradient")?.to_vec();
    let expect: Vec<f64> = local.iter().map(|&v| (v / size) as f64).collect();
    close("l2.weight", &got.iter().map(|&v| v as f64).collect::<Vec<_>>(), &expect)?;
    if model.named_parameters().iter().any(|(_, p)| p.grad().is_none()) {
        return Err("a parameter lost its gradient".into());
    }
    Ok(())
}

/// The last layer's buckets start their allreduce while the first layer's backward runs.
fn overlap(comm: Arc<Comm>) -> Result<(), String> {
    let mut model = common::Mlp::new(3);
    let ddp = DistributedDataParallel::new(comm.clone(), &mut model, DdpOptions::with_bucket_cap(4))
        .map_err(|e| e.to_string())?;
    let x = Tensor::ones(&[8, common::FEATURES]).map_err(|e| e.to_string())?;
    let h = forgia::custom_op(
        common::Slow(Duration::from_millis(300)),
        &[&model.l1.forward(&x).map_err(|e| e.to_string())?],
    )
    .map_err(|e| e.to_string())?;
    let loss = model.l2.forward(&h.tanh()).map_err(|e| e.to_string())?.sum_all();
    loss.backward().map_err(|e| e.to_string())?;
    let pass_end = Instant::now();
    ddp.finish().map_err(|e| e.to_string())?;
    let first = ddp.last_launches().into_iter().find(|l| l.from_hook).ok_or("no bucket launched from a hook")?;
    let started = comm.started().into_iter().find(|s| s.id == first.collective).ok_or("the bucket never started")?;
    if started.at >= pass_end {
        return Err("the first bucket's allreduce started after the pass ended".into());
    }
    println!("rank {}: bucket 0 started {:?} before the pass ended", comm.rank(), pass_end - started.at);
    Ok(())
}

/// Steps of training on every rank; rank 1 dies by SIGKILL at step 3, the others go on.
fn killed(comm: Arc<Comm>) -> Result<(), String> {
    steps_until(comm, |rank, step| {
        if rank == 1 && step == 3 {
            let pid = std::process::id().to_string();
            let _ = std::process::Command::new("kill").args(["-KILL", &pid]).status();
            std::thread::sleep(Duration::from_secs(5));
        }
        Ok(())
    })
}

/// Steps of training on every rank; rank 1 fails at step 3 (and aborts the job).
fn error(comm: Arc<Comm>) -> Result<(), String> {
    steps_until(
        comm,
        |rank, step| if rank == 1 && step == 3 { Err("injected failure at step 3".into()) } else { Ok(()) },
    )
}

fn steps_until(comm: Arc<Comm>, at_step: impl Fn(usize, usize) -> Result<(), String>) -> Result<(), String> {
    let rank = comm.rank();
    let mut model = common::Mlp::new(3);
    let ddp = DistributedDataParallel::new(comm, &mut model, DdpOptions::default()).map_err(|e| e.to_string())?;
    let data = common::data();
    for step in 0..1000 {
        at_step(rank, step)?;
        common::loss(&model, &data, &[step % common::SAMPLES]).backward().map_err(|e| e.to_string())?;
        ddp.finish().map_err(|e| e.to_string())?;
        model.zero_grad();
    }
    Err("the job went on after a rank was gone".into())
}
