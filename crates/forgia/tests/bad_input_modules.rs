//! The bad-input table for modules, optimizers and schedules (the ops have theirs in
//! `bad_input.rs` and `hostile_ops.rs`): zero sizes, NaN and out-of-range settings, inputs of
//! the wrong shape, empty batches. Each row must be an `Err` whose message names the module or
//! op (never a panic), or, for an empty batch, an empty result of the right shape.

use std::panic::{catch_unwind, AssertUnwindSafe};

use forgia::nn::{
    BatchNorm2d, Conv2d, Dropout, Embedding, FeedForward, LayerNorm, Linear, Module, MultiHeadAttention, RmsNorm,
    Sequential, TransformerBlock,
};
use forgia::optim::schedule::{CosineAnnealing, LinearWarmup, StepLr};
use forgia::optim::{Adam, AdamConfig, AdamW, Optimizer, Sgd, SgdConfig};
use forgia::{Conv2dOptions, Indices, Result, Rng, Tensor};

fn rng() -> Rng {
    Rng::new(5)
}

fn t(shape: &[usize]) -> Tensor {
    Tensor::rand(shape, -1.0, 1.0, &mut rng()).unwrap()
}

/// A row: what is tried, the text its error must contain, and the call.
type Row = (&'static str, &'static str, Box<dyn Fn() -> Result<()>>);

fn row(what: &'static str, names: &'static str, f: impl Fn() -> Result<()> + 'static) -> Row {
    (what, names, Box::new(f))
}

fn rows() -> Vec<Row> {
    let conv = Conv2dOptions::default();
    vec![
        // Constructors: zero sizes, NaN and out-of-range settings.
        row("Linear with no outputs", "Linear::new", || Linear::new(3, 0, true, &mut rng()).map(drop)),
        row("Embedding with no rows", "Embedding::new", || Embedding::new(0, 4, &mut rng()).map(drop)),
        row("Conv2d with a zero kernel", "Conv2d::new", move || {
            Conv2d::new(1, 2, (0, 3), conv, true, &mut rng()).map(drop)
        }),
        row("Conv2d with channels not divisible by groups", "Conv2d::new", || {
            let opts = Conv2dOptions { groups: 2, ..Conv2dOptions::default() };
            Conv2d::new(3, 4, (3, 3), opts, true, &mut rng()).map(drop)
        }),
        row("LayerNorm with a NaN eps", "LayerNorm", || LayerNorm::new(&[4], f32::NAN).map(drop)),
        row("LayerNorm over no axes", "LayerNorm", || LayerNorm::new(&[], 1e-5).map(drop)),
        row("RmsNorm with a negative eps", "RmsNorm", || RmsNorm::new(4, -1.0).map(drop)),
        row("BatchNorm2d with no channels", "BatchNorm2d", || BatchNorm2d::new(0, 1e-5).map(drop)),
        row("Dropout with p = 1.5", "Dropout::new", || Dropout::new(1.5, 0).map(drop)),
        row("Dropout with p = NaN", "Dropout::new", || Dropout::new(f32::NAN, 0).map(drop)),
        row("MultiHeadAttention with heads not dividing d", "MultiHeadAttention", || {
            MultiHeadAttention::new(6, 4, false, &mut rng()).map(drop)
        }),
        row("MultiHeadAttention with no heads", "MultiHeadAttention", || {
            MultiHeadAttention::new(8, 0, false, &mut rng()).map(drop)
        }),
        row("TransformerBlock with heads not dividing d", "TransformerBlock", || {
            TransformerBlock::new(6, 4, true, &mut rng()).map(drop)
        }),
        row("FeedForward with no hidden units", "FeedForward", || FeedForward::new(4, 0, &mut rng()).map(drop)),
        // Forward passes on inputs of the wrong shape.
        row("Linear on the wrong feature count", "linear", || {
            Linear::new(3, 4, true, &mut rng())?.forward(&t(&[2, 5])).map(drop)
        }),
        row("Conv2d on a rank-3 input", "conv2d", move || {
            Conv2d::new(1, 2, (3, 3), conv, true, &mut rng())?.forward(&t(&[1, 5, 5])).map(drop)
        }),
        row("Conv2d on the wrong channel count", "conv2d", move || {
            Conv2d::new(1, 2, (3, 3), conv, true, &mut rng())?.forward(&t(&[1, 3, 5, 5])).map(drop)
        }),
        row("LayerNorm on the wrong trailing size", "layer_norm", || {
            LayerNorm::new(&[4], 1e-5)?.forward(&t(&[2, 3])).map(drop)
        }),
        row("RmsNorm on the wrong trailing size", "rms_norm", || RmsNorm::new(4, 1e-5)?.forward(&t(&[2, 3])).map(drop)),
        row("BatchNorm2d on the wrong channel count", "batch_norm", || {
            BatchNorm2d::new(3, 1e-5)?.forward(&t(&[2, 4, 2, 2])).map(drop)
        }),
        row("Embedding with an index past its rows", "embedding", || {
            Embedding::new(4, 2, &mut rng())?.forward(&Indices::new(vec![4], &[1])?).map(drop)
        }),
        row("Embedding with a negative index", "embedding", || {
            Embedding::new(4, 2, &mut rng())?.forward(&Indices::new(vec![-1], &[1])?).map(drop)
        }),
        row("MultiHeadAttention on the wrong width", "MultiHeadAttention", || {
            MultiHeadAttention::new(8, 2, false, &mut rng())?.forward(&t(&[1, 3, 6])).map(drop)
        }),
        row("TransformerBlock on a rank-2 input", "TransformerBlock", || {
            TransformerBlock::new(8, 2, true, &mut rng())?.forward(&t(&[3, 8])).map(drop)
        }),
        row("Sequential passing a wrong shape between layers", "linear", || {
            let s =
                Sequential::new().push(Linear::new(3, 4, true, &mut rng())?).push(Linear::new(5, 2, true, &mut rng())?);
            s.forward(&t(&[2, 3])).map(drop)
        }),
        // Optimizers and schedules.
        row("Sgd with a NaN learning rate", "Sgd::new", || {
            Sgd::new(SgdConfig { lr: f32::NAN, ..SgdConfig::default() }).map(drop)
        }),
        row("Sgd with a negative learning rate", "Sgd::new", || {
            Sgd::new(SgdConfig { lr: -0.1, ..SgdConfig::default() }).map(drop)
        }),
        row("Sgd with negative momentum", "Sgd::new", || {
            Sgd::new(SgdConfig { momentum: -0.5, ..SgdConfig::default() }).map(drop)
        }),
        row("Sgd with nesterov and no momentum", "Sgd::new", || {
            Sgd::new(SgdConfig { nesterov: true, momentum: 0.0, ..SgdConfig::default() }).map(drop)
        }),
        row("Adam with beta1 = 1", "Adam", || {
            Adam::new(AdamConfig { betas: (1.0, 0.999), ..AdamConfig::adam() }).map(drop)
        }),
        row("Adam with a NaN beta2", "Adam", || {
            Adam::new(AdamConfig { betas: (0.9, f32::NAN), ..AdamConfig::adam() }).map(drop)
        }),
        row("Adam with eps = -1", "Adam", || Adam::new(AdamConfig { eps: -1.0, ..AdamConfig::adam() }).map(drop)),
        row("AdamW with an infinite weight decay", "Adam", || {
            AdamW::new(AdamConfig { weight_decay: f32::INFINITY, ..AdamConfig::adamw() }).map(drop)
        }),
        row("set_lr(NaN)", "set_lr", || Sgd::new(SgdConfig::default())?.set_lr(f32::NAN)),
        row("set_lr(-1)", "set_lr", || Adam::new(AdamConfig::adam())?.set_lr(-1.0)),
        row("StepLr with a NaN gamma", "StepLr", || StepLr::new(0.1, 10, f32::NAN).map(drop)),
        row("StepLr with a step size of 0", "StepLr", || StepLr::new(0.1, 0, 0.5).map(drop)),
        row("CosineAnnealing with a negative base", "CosineAnnealing", || {
            CosineAnnealing::new(-1.0, 0.0, 10).map(drop)
        }),
        row("CosineAnnealing over no steps", "CosineAnnealing", || CosineAnnealing::new(0.1, 0.0, 0).map(drop)),
        row("LinearWarmup from a factor of 2", "LinearWarmup", || {
            LinearWarmup::new(10, 2.0, StepLr::new(0.1, 10, 0.5)?).map(drop)
        }),
        row("clip_grad_norm with a NaN bound", "clip_grad_norm", || {
            forgia::optim::clip_grad_norm(&Linear::new(2, 2, true, &mut rng())?, f32::NAN).map(drop)
        }),
    ]
}

#[test]
fn every_module_optimizer_and_schedule_turns_bad_input_into_an_error_naming_it() {
    let mut failures = Vec::new();
    for (what, name, f) in rows() {
        match catch_unwind(AssertUnwindSafe(&f)) {
            Err(_) => failures.push(format!("{what}: panicked")),
            Ok(Ok(())) => failures.push(format!("{what}: accepted")),
            Ok(Err(e)) if !e.to_string().contains(name) => failures.push(format!("{what}: `{e}` does not name {name}")),
            Ok(Err(_)) => {}
        }
    }
    assert!(failures.is_empty(), "{} rows failed:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn modules_take_an_empty_batch_and_give_an_empty_batch() -> Result<()> {
    let mut r = rng();
    assert_eq!(Linear::new(3, 4, true, &mut r)?.forward(&t(&[0, 3]))?.shape(), &[0, 4]);
    let ln = LayerNorm::new(&[3], 1e-5)?;
    let y = ln.forward(&t(&[0, 3]))?;
    assert_eq!(y.shape(), &[0, 3]);
    // Nothing flowed back: the parameters' gradients are zeros, not garbage.
    y.sum_all().backward()?;
    for (name, p) in ln.named_parameters() {
        assert!(p.grad().is_none_or(|g| g.to_vec().iter().all(|&v| v == 0.0)), "{name}");
    }
    assert_eq!(RmsNorm::new(3, 1e-5)?.forward(&t(&[0, 3]))?.shape(), &[0, 3]);
    let conv = Conv2d::new(1, 2, (3, 3), Conv2dOptions::default(), true, &mut r)?;
    assert_eq!(conv.forward(&t(&[0, 1, 5, 5]))?.shape(), &[0, 2, 3, 3]);
    assert_eq!(Embedding::new(4, 2, &mut r)?.forward(&Indices::new(vec![], &[0])?)?.shape(), &[0, 2]);
    assert_eq!(TransformerBlock::new(8, 2, true, &mut r)?.forward(&t(&[0, 3, 8]))?.shape(), &[0, 3, 8]);
    Ok(())
}

#[test]
fn an_optimizer_step_with_non_finite_gradients_does_not_panic() -> Result<()> {
    let mut model = Linear::new(2, 2, true, &mut rng())?;
    for mut opt in [
        Box::new(Sgd::new(SgdConfig { momentum: 0.9, ..SgdConfig::default() })?) as Box<dyn Optimizer>,
        Box::new(Adam::new(AdamConfig::adam())?),
    ] {
        for (_, p) in model.named_parameters() {
            let bad = Tensor::full(p.shape(), f32::NAN)?;
            p.assign_grad(Some(&bad))?;
        }
        opt.step(&mut model)?;
        // As in PyTorch, NaN gradients make NaN parameters: visible, not hidden.
        assert!(model.named_parameters().iter().any(|(_, p)| p.to_vec().iter().any(|v| v.is_nan())));
    }
    Ok(())
}
