//! Data-parallel training with ranks as threads of this process (`Comm::in_process`), the
//! same collectives and ordering as under MPI: equality with single-process training,
//! averaging of missing gradients, buckets launched during backward, `no_sync`, watchdog.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{assert_close, train, Mlp};
use forgia::nn::Module;
use forgia::Tensor;
use forgia_distributed::{Comm, DdpOptions, DistError, DistributedDataParallel};

/// Short: a rank that fails makes the others' collectives time out instead of waiting.
const TIMEOUT: Duration = Duration::from_secs(20);

/// Runs `f` on each rank of an in-process group, one thread each, and collects the results.
fn on_ranks<R: Send>(size: usize, f: impl Fn(Arc<Comm>) -> R + Sync) -> Vec<R> {
    let comms = Comm::in_process(size, TIMEOUT).unwrap();
    std::thread::scope(|s| {
        let handles: Vec<_> = comms.into_iter().map(|c| s.spawn(|| f(Arc::new(c)))).collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

#[test]
fn two_ranks_train_like_one_process_with_the_same_global_batch() {
    let (single_losses, single_params) = train(None, 1, 20, 16, 1 << 20);
    // Small buckets (several per step) and rank-specific initial weights (the broadcast fixes them).
    for (losses, params) in on_ranks(2, |c| train(Some(c), 1, 20, 16, 256)) {
        assert_close("loss", &losses, &single_losses, 1e-5);
        assert_close("params", &params, &single_params, 1e-5);
    }
}

#[test]
fn three_ranks_with_unequal_shards_train_like_one_process() {
    // A global batch of 16 over 3 ranks: shards of 6, 5, 5, weighted back to the global mean.
    let (single_losses, single_params) = train(None, 1, 20, 16, 1 << 20);
    for (losses, params) in on_ranks(3, |c| train(Some(c), 1, 20, 16, 1 << 20)) {
        assert_close("loss", &losses, &single_losses, 1e-5);
        assert_close("params", &params, &single_params, 1e-5);
    }
}

#[test]
fn a_parameter_without_gradient_on_one_rank_is_averaged_with_zeros() {
    let results = on_ranks(2, |c| {
        let rank = c.rank();
        let mut model = Mlp::new(3);
        let ddp = DistributedDataParallel::new(c, &mut model, DdpOptions::with_bucket_cap(64)).unwrap();
        let x = Tensor::ones(&[2, common::FEATURES]).unwrap();
        // Rank 0 uses the whole model; rank 1 only the first layer (l2 gets no gradient there).
        let loss = if rank == 0 { model.forward(&x).sum_all() } else { model.l1.forward(&x).unwrap().tanh().sum_all() };
        loss.backward().unwrap();
        let local: Vec<Vec<f32>> = model
            .named_parameters()
            .iter()
            .map(|(_, p)| p.grad().map_or_else(|| vec![0.0; p.numel()], |g| g.to_vec()))
            .collect();
        ddp.finish().unwrap();
        let averaged: Vec<Vec<f32>> =
            model.named_parameters().iter().map(|(_, p)| p.grad().unwrap().to_vec()).collect();
        (local, averaged)
    });
    let (local0, avg0) = &results[0];
    let (local1, avg1) = &results[1];
    assert_eq!(avg0, avg1);
    // l1.weight, l1.bias: the mean of both ranks; l2.*: rank 0's gradient halved.
    for p in 0..2 {
        let mean: Vec<f32> = local0[p].iter().zip(&local1[p]).map(|(a, b)| (a + b) / 2.0).collect();
        assert_close("l1", &avg0[p], &mean, 1e-6);
    }
    for p in 2..4 {
        let half: Vec<f32> = local0[p].iter().map(|a| a / 2.0).collect();
        assert_close("l2", &avg0[p], &half, 1e-6);
    }
}

#[test]
fn a_parameter_no_rank_has_a_gradient_for_keeps_none() {
    on_ranks(2, |c| {
        let mut model = Mlp::new(3);
        let ddp = DistributedDataParallel::new(c, &mut model, DdpOptions::default()).unwrap();
        model.l1.forward(&Tensor::ones(&[1, common::FEATURES]).unwrap()).unwrap().sum_all().backward().unwrap();
        ddp.finish().unwrap();
        assert!(model.l2.weight.grad().is_none());
        assert!(model.l1.weight.grad().is_some());
    });
}

#[test]
fn buckets_start_their_allreduce_before_the_pass_ends() {
    on_ranks(2, |c| {
        let mut model = Mlp::new(3);
        // One bucket per parameter: the last layer's buckets are final early in the pass.
        let ddp = DistributedDataParallel::new(c.clone(), &mut model, DdpOptions::with_bucket_cap(4)).unwrap();
        assert_eq!(ddp.buckets().len(), 4);
        let x = Tensor::ones(&[8, common::FEATURES]).unwrap();
        // A slow first layer's backward (its input gradient is not needed, but the weight's
        // is), so the pass visibly goes on after l2's gradients are final.
        let h = forgia::custom_op(common::Slow(Duration::from_millis(200)), &[&model.l1.forward(&x).unwrap()]).unwrap();
        let loss = model.l2.forward(&h.tanh()).unwrap().sum_all();
        loss.backward().unwrap();
        let pass_end = Instant::now();
        ddp.finish().unwrap();
        let launches = ddp.last_launches();
        let first = launches.iter().find(|l| l.from_hook).expect("a bucket launched from a hook");
        assert_eq!(first.bucket, 0);
        assert!(first.at < pass_end);
        let started = c.started().into_iter().find(|s| s.id == first.collective).unwrap();
        assert!(started.at < pass_end, "the first allreduce started after the pass ended");
        assert!(launches.iter().all(|l| l.from_hook), "every bucket was final during the pass");
    });
}

#[test]
fn no_sync_accumulates_locally_and_the_next_step_averages_the_sum() {
    let results = on_ranks(2, |c| {
        let rank = c.rank() as f32;
        let mut model = Mlp::new(3);
        let ddp = DistributedDataParallel::new(c.clone(), &mut model, DdpOptions::default()).unwrap();
        let x = |k: f32| Tensor::full(&[2, common::FEATURES], 0.1 * (k + 1.0) + rank).unwrap();
        {
            let _skip = ddp.no_sync();
            model.forward(&x(0.0)).sum_all().backward().unwrap();
            ddp.finish().unwrap(); // nothing to do inside no_sync
        }
        model.forward(&x(1.0)).sum_all().backward().unwrap();
        let local = model.l1.weight.grad().unwrap().to_vec();
        ddp.finish().unwrap();
        assert_eq!(c.started().len(), 3 + 1 + 1, "shape check (3), parameters (1), one bucket; none inside no_sync");
        (local, model.l1.weight.grad().unwrap().to_vec())
    });
    let mean: Vec<f32> = results[0].0.iter().zip(&results[1].0).map(|(a, b)| (a + b) / 2.0).collect();
    assert_close("accumulated", &results[0].1, &mean, 1e-6);
}

#[test]
fn a_rank_with_an_empty_shard_still_takes_part() {
    on_ranks(2, |c| {
        let rank = c.rank();
        let mut model = Mlp::new(3);
        let ddp = DistributedDataParallel::new(c, &mut model, DdpOptions::with_bucket_cap(64)).unwrap();
        if rank == 0 {
            model.forward(&Tensor::ones(&[1, common::FEATURES]).unwrap()).sum_all().backward().unwrap();
        }
        ddp.finish().unwrap();
        assert!(model.l2.bias.as_ref().unwrap().grad().is_some());
    });
}

#[test]
fn the_broadcast_gives_every_rank_rank_zero_parameters() {
    let params = on_ranks(3, |c| {
        let rank = c.rank() as u64;
        let mut model = Mlp::new(10 + rank);
        let _ddp = DistributedDataParallel::new(c, &mut model, DdpOptions::default()).unwrap();
        common::flat_params(&model)
    });
    assert_eq!(params[0], common::flat_params(&Mlp::new(10)));
    assert_eq!(params[1], params[0]);
    assert_eq!(params[2], params[0]);
}

#[test]
fn ranks_with_different_models_are_refused() {
    let errors = on_ranks(2, |c| {
        let mut model = Mlp::new(0);
        if c.rank() == 1 {
            model.l2 = forgia::nn::Linear::new(16, 5, true, &mut forgia::Rng::new(0)).unwrap();
        }
        DistributedDataParallel::new(c, &mut model, DdpOptions::default()).err()
    });
    for e in errors {
        assert!(matches!(e, Some(DistError::Mismatch(_))), "{e:?}");
    }
}

#[test]
fn a_collective_no_other_rank_joins_times_out_instead_of_hanging() {
    let comms = Comm::in_process(2, Duration::from_millis(200)).unwrap();
    let started = Instant::now();
    let e = comms[0].all_reduce_sum(&mut [1.0]).unwrap_err();
    assert!(matches!(e, DistError::Timeout { .. }), "{e}");
    assert!(started.elapsed() < Duration::from_secs(5));
    // Let rank 1 join, so both communication threads can finish and be joined.
    comms[1].all_reduce_sum(&mut [1.0]).unwrap();
}

#[test]
fn a_second_synchronizing_pass_without_finish_is_an_error() {
    let mut model = Mlp::new(0);
    let _ddp = DistributedDataParallel::new(Arc::new(Comm::local()), &mut model, DdpOptions::default()).unwrap();
    let x = Tensor::ones(&[1, common::FEATURES]).unwrap();
    model.forward(&x).sum_all().backward().unwrap();
    let e = model.forward(&x).sum_all().backward().unwrap_err();
    assert!(e.to_string().contains("finish()"), "{e}");
}

#[test]
fn the_first_bucket_has_a_smaller_cap_of_its_own() {
    // Parameters in reverse order: l2.bias (3), l2.weight (2), l1.bias (1), l1.weight (0).
    let mut model = Mlp::new(0);
    let options = DdpOptions { bucket_cap_bytes: 1 << 20, first_bucket_cap_bytes: 4 * common::CLASSES };
    let ddp = DistributedDataParallel::new(Arc::new(Comm::local()), &mut model, options).unwrap();
    assert_eq!(ddp.buckets(), &[vec![3], vec![2, 1, 0]]);
    // PyTorch's defaults: 1 MiB first, 25 MB after; this small model fits the first bucket.
    let ddp = DistributedDataParallel::new(Arc::new(Comm::local()), &mut model, DdpOptions::default()).unwrap();
    assert_eq!(ddp.buckets(), &[vec![3, 2, 1, 0]]);
    // A first cap above the others is no cap of its own.
    let options = DdpOptions { bucket_cap_bytes: 4 * common::CLASSES, first_bucket_cap_bytes: 1 << 20 };
    let ddp = DistributedDataParallel::new(Arc::new(Comm::local()), &mut model, options).unwrap();
    assert_eq!(ddp.buckets()[0], vec![3]);
    for bad in [DdpOptions { first_bucket_cap_bytes: 0, ..DdpOptions::default() }, DdpOptions::with_bucket_cap(0)] {
        let e = DistributedDataParallel::new(Arc::new(Comm::local()), &mut model, bad).err().expect("a zero cap");
        assert!(e.to_string().contains("first_bucket_cap_bytes"), "{e}");
    }
}
