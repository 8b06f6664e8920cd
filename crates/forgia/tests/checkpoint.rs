//! Activation checkpointing: bitwise gradient parity with the plain path (an 8-block chain, a
//! block with a seeded dropout mask, nested checkpoints), the retained storage between
//! forward and backward, and the named errors.

mod common;

use common::lcg;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use forgia::{
    checkpoint, checkpoint_with, gradcheck, live_bytes, BackwardOptions, ErrorKind, GradcheckOptions, Result, Tensor,
};

/// `live_bytes` is process-wide: every test of this file takes the lock so the memory test
/// measures only its own tensors.
static LOCK: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// SplitMix64's finalizer, as the library's dropout uses it: masks are pure in (seed, index).
fn mix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Inverted dropout with a mask derived from `mix64(seed ^ mix64(index))`: replays exactly.
fn dropout(x: &Tensor, seed: u64, p: f32) -> Result<Tensor> {
    let keep = (0..x.numel() as u64)
        .map(|i| if (mix64(seed ^ mix64(i)) >> 40) as f32 / (1u64 << 24) as f32 >= p { 1.0 / (1.0 - p) } else { 0.0 })
        .collect();
    x.mul(&Tensor::from_vec(keep, x.shape())?)
}

/// The block of the chain: x -> tanh(x·W + b).
fn layer(xs: &[Tensor]) -> Result<Tensor> {
    Ok(xs[0].matmul(&xs[1])?.add(&xs[2])?.tanh())
}

/// A block that keeps more intermediates alive on the plain path: z = x·W + b; z·tanh(z).
fn gated(xs: &[Tensor]) -> Result<Tensor> {
    let z = xs[0].matmul(&xs[1])?.add(&xs[2])?;
    z.tanh().mul(&z)
}

/// Fresh variables: input x [batch, d] and per block W_i [d, d], b_i [d].
fn model(blocks: usize, batch: usize, d: usize) -> (Tensor, Vec<Tensor>) {
    let x = Tensor::variable(lcg(batch * d, 1, 1.0), &[batch, d]).unwrap();
    let mut params = Vec::new();
    for i in 0..blocks as u64 {
        params.push(Tensor::variable(lcg(d * d, 10 + i, 1.5 / (d as f32).sqrt()), &[d, d]).unwrap());
        params.push(Tensor::variable(lcg(d, 100 + i, 0.1), &[d]).unwrap());
    }
    (x, params)
}

/// The same values as fresh, independent variables.
fn twin(x: &Tensor, params: &[Tensor]) -> (Tensor, Vec<Tensor>) {
    (x.detach().into_variable(), params.iter().map(|p| p.detach().into_variable()).collect())
}

type Block = fn(&[Tensor]) -> Result<Tensor>;

fn chain(x: &Tensor, params: &[Tensor], block: Block, ckpt: bool) -> Tensor {
    let mut h = x.clone();
    for p in params.chunks(2) {
        h = if ckpt { checkpoint(block, &[&h, &p[0], &p[1]]) } else { block(&[h, p[0].clone(), p[1].clone()]) }
            .unwrap();
    }
    h
}

/// A scalar loss with a non-uniform cotangent.
fn loss(h: &Tensor) -> Tensor {
    let c = Tensor::from_vec(lcg(h.numel(), 77, 1.0), h.shape()).unwrap();
    h.mul(&c).unwrap().sum_all()
}

fn assert_bitwise(a: &[Tensor], b: &[Tensor]) {
    for (i, (a, b)) in a.iter().zip(b).enumerate() {
        let (ga, gb) = (a.grad().expect("plain grad"), b.grad().expect("checkpointed grad"));
        assert!(ga.to_vec() == gb.to_vec(), "tensor {i}: gradients differ");
    }
}

fn all(x: &Tensor, params: &[Tensor]) -> Vec<Tensor> {
    std::iter::once(x.clone()).chain(params.iter().cloned()).collect()
}

#[test]
fn an_eight_block_chain_gets_bitwise_identical_gradients() {
    let _g = serial();
    for block in [layer as Block, gated as Block] {
        let (x, params) = model(8, 4, 16);
        let (cx, cparams) = twin(&x, &params);
        loss(&chain(&x, &params, block, false)).backward().unwrap();
        let out = chain(&cx, &cparams, block, true);
        assert_eq!(out.grad_fn(), Some("checkpoint"));
        loss(&out).backward().unwrap();
        assert_bitwise(&all(&x, &params), &all(&cx, &cparams));
    }
}

#[test]
fn a_block_with_seeded_dropout_replays_bitwise() {
    let _g = serial();
    let block = |seed: &u64, xs: &[Tensor]| dropout(&layer(xs)?, *seed, 0.3);
    let (x, params) = model(4, 3, 8);
    let (cx, cparams) = twin(&x, &params);
    let (mut h, mut ch) = (x.clone(), cx.clone());
    for (i, (p, cp)) in params.chunks(2).zip(cparams.chunks(2)).enumerate() {
        let seed = 0xd00d + i as u64;
        h = block(&seed, &[h, p[0].clone(), p[1].clone()]).unwrap();
        ch = checkpoint_with(block, seed, &[&ch, &cp[0], &cp[1]]).unwrap();
    }
    assert!(h.to_vec().contains(&0.0), "the mask drops something");
    assert!(h.to_vec() == ch.to_vec());
    loss(&h).backward().unwrap();
    loss(&ch).backward().unwrap();
    assert_bitwise(&all(&x, &params), &all(&cx, &cparams));
}

/// Two blocks per outer checkpoint, each itself checkpointed, and one level deeper still.
fn nested(xs: &[Tensor]) -> Result<Tensor> {
    let h = checkpoint(layer, &[&xs[0], &xs[1], &xs[2]])?;
    let inner = |ys: &[Tensor]| checkpoint(gated, &[&ys[0], &ys[1], &ys[2]]);
    checkpoint(inner, &[&h, &xs[3], &xs[4]])
}

#[test]
fn nested_checkpoints_get_bitwise_identical_gradients() {
    let _g = serial();
    let plain = |xs: &[Tensor]| gated(&[layer(&xs[..3])?, xs[3].clone(), xs[4].clone()]);
    let (x, params) = model(8, 4, 16);
    let (cx, cparams) = twin(&x, &params);
    let (mut h, mut ch) = (x.clone(), cx.clone());
    for (p, cp) in params.chunks(4).zip(cparams.chunks(4)) {
        h = plain(&[h, p[0].clone(), p[1].clone(), p[2].clone(), p[3].clone()]).unwrap();
        ch = checkpoint(nested, &[&ch, &cp[0], &cp[1], &cp[2], &cp[3]]).unwrap();
    }
    loss(&h).backward().unwrap();
    loss(&ch).backward().unwrap();
    assert_bitwise(&all(&x, &params), &all(&cx, &cparams));
}

/// Retained storage between forward and backward, net of the inputs and parameters: the plain
/// gated chain keeps z, tanh(z) and the output of each block (the last output, saved by
/// nothing, is freed); the checkpointed chain keeps only each block's output, which the next
/// block holds as its input.
#[test]
fn only_inputs_and_outputs_stay_alive_between_forward_and_backward() {
    let _g = serial();
    let (blocks, batch, d) = (8, 128, 256);
    let act = batch * d * 4;
    let (x, params) = model(blocks, batch, d);
    let (cx, cparams) = twin(&x, &params);
    let retained = |x: &Tensor, params: &[Tensor], ckpt: bool| {
        let before = live_bytes();
        let h = chain(x, params, gated, ckpt);
        let l = h.sum_all();
        drop(h);
        let kept = live_bytes() - before;
        l.backward().unwrap();
        kept
    };
    let plain = retained(&x, &params, false);
    let ckpt = retained(&cx, &cparams, true);
    eprintln!("retained after forward: plain {plain} B, checkpointed {ckpt} B ({act} B per activation)");
    assert_eq!(ckpt, (blocks - 1) * act + 4, "7 block outputs and the scalar loss");
    assert_eq!(plain, (3 * blocks - 1) * act + 4, "z and tanh(z) per block, plus the outputs");
    assert_bitwise(&all(&x, &params), &all(&cx, &cparams));
}

#[test]
fn checkpoint_with_keeps_its_context_constant() {
    let _g = serial();
    let frozen = Tensor::from_vec(lcg(12, 5, 1.0), &[4, 3]).unwrap();
    let x = Tensor::variable(lcg(8, 6, 1.0), &[2, 4]).unwrap();
    let y = checkpoint_with(|w: &Tensor, xs| Ok(xs[0].matmul(w)?.tanh()), frozen.clone(), &[&x]).unwrap();
    loss(&y).backward().unwrap();
    let x2 = x.detach().into_variable();
    loss(&x2.matmul(&frozen).unwrap().tanh()).backward().unwrap();
    assert!(x.grad().unwrap().to_vec() == x2.grad().unwrap().to_vec());
    assert!(frozen.grad().is_none());
}

#[test]
fn constant_inputs_stay_constants_and_the_block_runs_twice() {
    let _g = serial();
    let (calls, saw_grad_on_constant) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicBool::new(false)));
    let (c2, s2) = (calls.clone(), saw_grad_on_constant.clone());
    let block = move |xs: &[Tensor]| {
        c2.fetch_add(1, Ordering::SeqCst);
        s2.fetch_or(xs[1].requires_grad(), Ordering::SeqCst);
        xs[0].mul(&xs[1])
    };
    let x = Tensor::variable(vec![1.0, 2.0], &[2]).unwrap();
    let c = Tensor::from_vec(vec![3.0, 4.0], &[2]).unwrap();
    checkpoint(block, &[&x, &c]).unwrap().sum_all().backward().unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert!(!saw_grad_on_constant.load(Ordering::SeqCst));
    assert_eq!(x.grad().unwrap().to_vec(), vec![3.0, 4.0]); // d(x·c)/dx = c
    assert!(c.grad().is_none());
}

#[test]
fn checkpoint_builds_no_node_under_no_grad() {
    let _g = serial();
    let x = Tensor::variable(vec![1.0, 2.0], &[2]).unwrap();
    let y = {
        let _ng = forgia::no_grad();
        checkpoint(|xs| Ok(xs[0].tanh()), &[&x]).unwrap()
    };
    assert!(!y.requires_grad());
    assert_eq!(y.to_vec(), x.tanh().to_vec());
}

#[test]
fn a_retained_checkpoint_recomputes_on_every_pass() {
    let _g = serial();
    let (x, params) = model(2, 2, 4);
    let (cx, cparams) = twin(&x, &params);
    let retain = BackwardOptions { retain_graph: true, ..Default::default() };
    let (l, cl) = (loss(&chain(&x, &params, layer, false)), loss(&chain(&cx, &cparams, layer, true)));
    for _ in 0..2 {
        l.backward_with(None, retain).unwrap();
        cl.backward_with(None, retain).unwrap();
    }
    assert_bitwise(&all(&x, &params), &all(&cx, &cparams));
}

#[test]
fn a_checkpointed_block_passes_gradcheck_on_a_transposed_input() {
    let _g = serial();
    let x = Tensor::variable(lcg(12, 8, 1.0), &[4, 3]).unwrap();
    let w = Tensor::variable(lcg(12, 9, 1.0), &[4, 3]).unwrap();
    let f = |xs: &[Tensor]| Ok(loss(&checkpoint(gated_no_bias, &[&xs[0].transpose(0, 1)?, &xs[1]])?));
    let r = gradcheck(f, &[x, w], GradcheckOptions::default()).unwrap();
    assert!(r.passed(), "{:?}", r.first_mismatch);
}

fn gated_no_bias(xs: &[Tensor]) -> Result<Tensor> {
    let z = xs[0].matmul(&xs[1])?;
    z.tanh().mul(&z)
}

#[test]
fn a_block_that_fails_during_recompute_is_a_nested_error() {
    let _g = serial();
    let calls = AtomicUsize::new(0);
    let block = move |xs: &[Tensor]| {
        if calls.fetch_add(1, Ordering::SeqCst) == 0 {
            Ok(xs[0].tanh())
        } else {
            xs[0].reshape(&[5])
        }
    };
    let x = Tensor::variable(vec![1.0, 2.0], &[2]).unwrap();
    let e = checkpoint(block, &[&x]).unwrap().sum_all().backward().unwrap_err();
    match e.kind() {
        ErrorKind::Nested { context: "checkpoint recompute", source } => {
            assert!(matches!(source.kind(), ErrorKind::InvalidReshape { .. }), "{source:?}")
        }
        other => panic!("{other:?}"),
    }
    assert!(x.grad().is_none());
}

#[test]
fn a_block_whose_output_ignores_its_inputs_is_not_differentiable() {
    let _g = serial();
    let x = Tensor::variable(vec![1.0, 2.0], &[2]).unwrap();
    let y = checkpoint(|_| Ok(Tensor::ones(&[2]).unwrap()), &[&x]).unwrap();
    let e = y.sum_all().backward().unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::CheckpointOutputNotDifferentiable), "{e:?}");
}

#[test]
fn create_graph_through_a_checkpoint_gives_the_second_derivative() {
    let _g = serial();
    // y = Σ x³ through a checkpoint: the gradient 3x² carries a graph, and its own gradient
    // is 6x (the recompute runs again, with a graph, when the gradient is differentiated).
    let x = Tensor::variable(vec![1.0, -2.0], &[2]).unwrap();
    let y = checkpoint(|xs| xs[0].mul(&xs[0])?.mul(&xs[0]), &[&x]).unwrap();
    y.sum_all().backward_with(None, BackwardOptions { create_graph: true, ..Default::default() }).unwrap();
    let g = x.grad().unwrap();
    assert_eq!(g.to_vec(), vec![3.0, 12.0]);
    assert!(g.requires_grad());
    x.zero_grad();
    g.sum_all().backward().unwrap();
    assert_eq!(x.grad().unwrap().to_vec(), vec![6.0, -12.0]);
}

#[test]
fn an_identity_block_passes_the_gradient_through() {
    let _g = serial();
    let x = Tensor::variable(vec![1.0, 2.0], &[2]).unwrap();
    let y = checkpoint(|xs| Ok(xs[0].clone()), &[&x]).unwrap();
    y.backward_with_grad(&Tensor::from_vec(vec![3.0, -1.0], &[2]).unwrap()).unwrap();
    assert_eq!(x.grad().unwrap().to_vec(), vec![3.0, -1.0]);
}

/// Two heavy matmuls readied by one firing: the engine runs one branch on a pool thread, and
/// the checkpoint below it recomputes (with recording on) and runs its nested pass there.
#[test]
fn a_checkpoint_reached_on_a_pool_thread_recomputes_correctly() {
    let _g = serial();
    let d = 256;
    let (x, params) = model(2, d, d);
    let (cx, cparams) = twin(&x, &params);
    let threads = Arc::new(Mutex::new(Vec::new()));
    let run = |x: &Tensor, p: &[Tensor], ckpt: bool| {
        let y = |w: &Tensor, b: &Tensor| {
            if !ckpt {
                return layer(&[x.clone(), w.clone(), b.clone()]).unwrap();
            }
            let seen = threads.clone();
            let block = move |xs: &[Tensor]| {
                seen.lock().unwrap().push(std::thread::current().name().map(str::to_owned));
                layer(xs)
            };
            checkpoint(block, &[x, w, b]).unwrap()
        };
        let h1 = y(&p[0], &p[1]).matmul(&p[2]).unwrap();
        let h2 = y(&p[2], &p[3]).matmul(&p[0]).unwrap();
        loss(&h1.add(&h2).unwrap()).backward().unwrap();
    };
    run(&x, &params, false);
    run(&cx, &cparams, true);
    assert_bitwise(&all(&x, &params), &all(&cx, &cparams));
    let seen = threads.lock().unwrap();
    assert_eq!(seen.len(), 4, "two forwards and two recomputes");
    if forgia::num_threads() > 1 {
        assert!(seen.iter().flatten().any(|n| n.starts_with("forgia-")), "{seen:?}");
    }
}

/// W7's residual MLP block with the residual outside: the checkpointed block ends in a linear
/// layer, whose kernel its recompute leaves out (only its record is needed).
fn mlp(xs: &[Tensor]) -> Result<Tensor> {
    xs[0].linear(&xs[1], Some(&xs[2]))?.tanh().linear(&xs[3], Some(&xs[4]))
}

/// The same block ending in a view of the final product (still left out) and in an op after
/// it (computed: tanh's record reads its output).
fn mlp_viewed(xs: &[Tensor]) -> Result<Tensor> {
    let y = mlp(xs)?;
    let n = y.numel();
    y.reshape(&[n])
}
fn mlp_then_tanh(xs: &[Tensor]) -> Result<Tensor> {
    Ok(mlp(xs)?.tanh())
}
/// W7's block as it is benchmarked: the residual inside the checkpoint (the product is
/// still left out: `add` reads no values); its chain has no residual of its own.
fn mlp_residual(xs: &[Tensor]) -> Result<Tensor> {
    xs[0].add(&mlp(xs)?)
}

/// Blocks of four parameters, each added to its input (`residual`) or not.
fn residual_chain(x: &Tensor, params: &[Tensor], block: Block, ckpt: bool) -> Tensor {
    let residual = !std::ptr::fn_addr_eq(block, mlp_residual as Block);
    let mut h = x.clone();
    for p in params.chunks(4) {
        let inputs = [&h, &p[0], &p[1], &p[2], &p[3]];
        let f = if ckpt { checkpoint(block, &inputs) } else { block(&inputs.map(Tensor::clone)) };
        let f = f.unwrap().reshape(h.shape()).unwrap();
        h = if residual { h.add(&f).unwrap() } else { f };
    }
    h
}

#[test]
fn blocks_ending_in_a_linear_layer_get_bitwise_identical_gradients() {
    let _g = serial();
    for block in [mlp as Block, mlp_viewed as Block, mlp_then_tanh as Block, mlp_residual as Block] {
        let (x, params) = model(8, 4, 16);
        let (cx, cparams) = twin(&x, &params);
        loss(&residual_chain(&x, &params, block, false)).backward().unwrap();
        loss(&residual_chain(&cx, &cparams, block, true)).backward().unwrap();
        assert_bitwise(&all(&x, &params), &all(&cx, &cparams));
    }
}

#[test]
fn the_recompute_leaves_out_the_final_linear_product_only() {
    let _g = serial();
    // The block hands every run's final product out: the first run's is the true value; the
    // recompute's buffer is never written when the block returns it, and is written when an
    // op after it (tanh) reads it.
    // A residual add after it reads no values either (W7's block); tanh does.
    for (after, computed) in [("nothing", false), ("residual", false), ("tanh", true)] {
        let seen: Arc<Mutex<Vec<Vec<f32>>>> = Arc::default();
        let stash = seen.clone();
        let block = move |xs: &[Tensor]| {
            let y = xs[0].linear(&xs[1], Some(&xs[2]))?;
            stash.lock().unwrap().push(y.to_vec());
            match after {
                "residual" => xs[0].add(&y),
                "tanh" => Ok(y.tanh()),
                _ => Ok(y),
            }
        };
        let (x, params) = model(1, 4, 16);
        let out = checkpoint(block, &[&x, &params[0], &params[1]]).unwrap();
        loss(&out).backward().unwrap();
        let runs = seen.lock().unwrap();
        assert_eq!(runs.len(), 2, "one run and one recompute");
        let truth = x.detach().linear(&params[0].detach(), Some(&params[1].detach())).unwrap().to_vec();
        assert_eq!(runs[0], truth);
        assert_eq!(runs[1] == truth, computed, "{after} after the product");
    }
}

#[test]
fn a_block_that_changes_its_final_op_between_runs_is_recomputed_in_full() {
    let _g = serial();
    // The first run returns the product; the recompute applies tanh after it (breaking the
    // purity contract): the skipped product would feed tanh, so the block runs once more in
    // full and the gradient is the recomputed graph's, as without the skip.
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = calls.clone();
    let block = move |xs: &[Tensor]| {
        let y = xs[0].linear(&xs[1], Some(&xs[2]))?;
        Ok(if counter.fetch_add(1, Ordering::SeqCst) == 0 { y } else { y.tanh() })
    };
    let (x, params) = model(1, 4, 16);
    let (cx, cparams) = twin(&x, &params);
    loss(&checkpoint(block, &[&cx, &cparams[0], &cparams[1]]).unwrap()).backward().unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 3, "a first run, a skipping recompute, a full one");
    // The reference: the recompute's graph (tanh after the product) under the same cotangent.
    let c = Tensor::from_vec(lcg(4 * 16, 77, 1.0), &[4, 16]).unwrap();
    let y = x.linear(&params[0], Some(&params[1])).unwrap().tanh();
    y.backward_with_grad(&c).unwrap();
    assert_bitwise(&all(&x, &params), &all(&cx, &cparams));
}

#[test]
fn nested_checkpoints_ending_in_linear_layers_get_bitwise_identical_gradients() {
    let _g = serial();
    // The outer block's final op is an inner checkpoint (nothing of the outer is left out);
    // a second outer block ends in its own linear layer after an inner checkpoint.
    let inner_last = |xs: &[Tensor]| checkpoint(mlp, &[&xs[0], &xs[1], &xs[2], &xs[3], &xs[4]]);
    let inner_first = |xs: &[Tensor]| {
        let h = checkpoint(mlp, &[&xs[0], &xs[1], &xs[2], &xs[3], &xs[4]])?;
        h.tanh().linear(&xs[3], Some(&xs[4]))
    };
    for (outer, plain) in [(inner_last as Block, mlp as Block), (inner_first as Block, nested_plain as Block)] {
        let (x, params) = model(8, 4, 16);
        let (cx, cparams) = twin(&x, &params);
        loss(&residual_chain(&x, &params, plain, false)).backward().unwrap();
        loss(&residual_chain(&cx, &cparams, outer, true)).backward().unwrap();
        assert_bitwise(&all(&x, &params), &all(&cx, &cparams));
    }
}

/// `inner_first` without checkpoints.
fn nested_plain(xs: &[Tensor]) -> Result<Tensor> {
    mlp(xs)?.tanh().linear(&xs[3], Some(&xs[4]))
}

#[test]
fn create_graph_through_a_block_ending_in_a_linear_layer_gives_the_second_derivative() {
    let _g = serial();
    // The gradient block computes every product (its values feed the gradient's graph): the
    // second derivative matches the plain graph's bitwise.
    let second = |ckpt: bool| {
        let (x, params) = model(1, 3, 4);
        let inputs = [&x, &params[0], &params[1], &params[0], &params[1]];
        let y = if ckpt { checkpoint(mlp, &inputs) } else { mlp(&inputs.map(Tensor::clone)) }.unwrap();
        let opts = BackwardOptions { create_graph: true, ..Default::default() };
        loss(&y).backward_with(None, opts).unwrap();
        let g = x.grad().unwrap();
        x.zero_grad();
        params[0].zero_grad();
        g.mul(&g).unwrap().sum_all().backward().unwrap();
        (x.grad().unwrap().to_vec(), params[0].grad().unwrap().to_vec())
    };
    assert_eq!(second(true), second(false));
}
