//! `forgia gradcheck`: every differentiable op of the library checked against central finite
//! differences ([`forgia::gradcheck`]) on random shapes, from one table of cases. Prints one
//! row per op (op, input shapes, elements checked, max error, pass/fail); fails when any op
//! fails.

mod inputs;
mod layers_loss;
mod masks_sort;
mod models;
mod second_order;
mod transformer;

use std::time::Instant;

use clap::Args;
use forgia::loss::{self, CrossEntropyOptions, NllLossOptions, Reduction};
use forgia::{
    AttentionOptions, Conv1dOptions, Conv2dOptions, ConvTranspose2dOptions, CustomOp, GradcheckOptions, Result, Rng,
    RunningStats, Tensor,
};
use inputs::{as_indices, away_from_zero, clamp_input, dim, distinct, index_tensor, mask, normal, positive};

/// Arguments of `forgia gradcheck`.
#[derive(Args, Debug)]
pub(crate) struct GradcheckArgs {
    /// Check only the ops whose name contains this text.
    filter: Option<String>,
    /// Seed of the random shapes and values.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Check second order instead: the gradient of `sum(grad(f)·v)` from a `create_graph`
    /// pass against finite differences of first-order gradients (gradgradcheck).
    #[arg(long)]
    second_order: bool,
}

/// An error of the gradcheck command.
#[derive(Debug, thiserror::Error)]
pub(crate) enum GradcheckError {
    /// Some ops disagreed with finite differences (or failed to run).
    #[error("{failed} of {total} ops failed the gradient check: {names}")]
    Failed {
        /// How many failed.
        failed: usize,
        /// How many ran.
        total: usize,
        /// Their names.
        names: String,
    },
    /// The filter matched nothing.
    #[error("no op matches {0:?}")]
    NoMatch(String),
}

/// Builds a case's inputs (variables are checked, constants pass through).
type Inputs = fn(&mut Rng) -> Vec<Tensor>;
/// The function whose gradient is checked.
type Func = fn(&[Tensor]) -> Result<Tensor>;

/// One row of the table: an op, how to draw its inputs, and how to apply it.
struct Case {
    op: &'static str,
    inputs: Inputs,
    f: Func,
}

const fn case(op: &'static str, inputs: Inputs, f: Func) -> Case {
    Case { op, inputs, f }
}

/// A random `[a, b]` shape with small sides.
fn ab(rng: &mut Rng) -> [usize; 2] {
    [dim(rng, 2, 4), dim(rng, 2, 5)]
}

/// A random `[a, b, c]` shape with small sides.
fn abc(rng: &mut Rng) -> [usize; 3] {
    [dim(rng, 2, 3), dim(rng, 2, 4), dim(rng, 2, 4)]
}

/// Every differentiable op of the library.
fn cases() -> Vec<Case> {
    let mut all = pointwise_cases();
    all.extend(reduce_and_shape_cases());
    all.extend(index_and_contract_cases());
    all.extend(loss_cases());
    all.extend(nn_cases());
    all.extend(extension_cases());
    all.extend(layers_loss::layers_loss_cases());
    all.extend(attention_next_cases());
    all.extend(models::models_cases());
    all.extend(masks_sort::masks_sort_cases());
    all.extend(conv_path_cases());
    all.extend(transformer::transformer_cases());
    all
}

/// The convolution kernels' fast paths (issue 18): the single-channel direct kernel, "same"
/// convolutions (one contiguous run per tap), and 2x2 max pooling.
fn conv_path_cases() -> Vec<Case> {
    const PAD2: Conv2dOptions = Conv2dOptions { stride: (1, 1), padding: (2, 2), dilation: (1, 1), groups: 1 };
    vec![
        case(
            "conv2d (one input channel, same 5x5)",
            |r| vec![normal(&[1, 1, 5, dim(r, 5, 7)], r), normal(&[2, 1, 5, 5], r), normal(&[2], r)],
            |x| x[0].conv2d(&x[1], Some(&x[2]), PAD2),
        ),
        case(
            "conv2d (same 5x5)",
            |r| vec![normal(&[2, 3, 5, dim(r, 4, 6)], r), normal(&[2, 3, 5, 5], r), normal(&[2], r)],
            |x| x[0].conv2d(&x[1], Some(&x[2]), PAD2),
        ),
        case(
            "max_pool2d (2x2)",
            |r| vec![distinct(&[2, 2, 4, dim(r, 4, 5)], r)],
            |x| x[0].max_pool2d((2, 2), (2, 2), (0, 0)),
        ),
    ]
}

fn pointwise_cases() -> Vec<Case> {
    vec![
        case("neg", |r| vec![normal(&ab(r), r)], |x| Ok(x[0].neg())),
        case("exp", |r| vec![normal(&ab(r), r)], |x| Ok(x[0].exp())),
        case("log", |r| vec![positive(&ab(r), r)], |x| Ok(x[0].log())),
        case("sqrt", |r| vec![positive(&ab(r), r)], |x| Ok(x[0].sqrt())),
        case("rsqrt", |r| vec![positive(&ab(r), r)], |x| Ok(x[0].rsqrt())),
        case("square", |r| vec![normal(&ab(r), r)], |x| Ok(x[0].square())),
        case("reciprocal", |r| vec![positive(&ab(r), r)], |x| Ok(x[0].reciprocal())),
        case("abs", |r| vec![away_from_zero(&ab(r), r)], |x| Ok(x[0].abs())),
        case("sin", |r| vec![normal(&ab(r), r)], |x| Ok(x[0].sin())),
        case("cos", |r| vec![normal(&ab(r), r)], |x| Ok(x[0].cos())),
        case("tanh", |r| vec![normal(&ab(r), r)], |x| Ok(x[0].tanh())),
        case("erf", |r| vec![normal(&ab(r), r)], |x| Ok(x[0].erf())),
        case("pow_scalar", |r| vec![positive(&ab(r), r)], |x| Ok(x[0].pow_scalar(2.5))),
        case("sigmoid", |r| vec![normal(&ab(r), r)], |x| Ok(x[0].sigmoid())),
        case("relu", |r| vec![away_from_zero(&ab(r), r)], |x| Ok(x[0].relu())),
        case("leaky_relu", |r| vec![away_from_zero(&ab(r), r)], |x| Ok(x[0].leaky_relu(0.1))),
        case("gelu", |r| vec![normal(&ab(r), r)], |x| Ok(x[0].gelu())),
        case("gelu_tanh", |r| vec![normal(&ab(r), r)], |x| Ok(x[0].gelu_tanh())),
        case("silu", |r| vec![normal(&ab(r), r)], |x| Ok(x[0].silu())),
        case("softplus", |r| vec![normal(&ab(r), r)], |x| Ok(x[0].softplus())),
        case("clamp", |r| vec![clamp_input(&ab(r), r)], |x| x[0].clamp(-0.5, 0.5)),
        case("scale", |r| vec![normal(&ab(r), r)], |x| Ok(x[0].scale(1.7))),
        case("add_scalar", |r| vec![normal(&ab(r), r)], |x| x[0].add_scalar(0.3).mul(&x[0])),
        case("sub_scalar", |r| vec![normal(&ab(r), r)], |x| x[0].sub_scalar(0.3).mul(&x[0])),
        case("div_scalar", |r| vec![normal(&ab(r), r)], |x| Ok(x[0].div_scalar(4.0))),
        case("add (broadcast)", |r| broadcast_pair(r, false), |x| x[0].add(&x[1])),
        case("sub (broadcast)", |r| broadcast_pair(r, false), |x| x[0].sub(&x[1])),
        case("mul (broadcast)", |r| broadcast_pair(r, false), |x| x[0].mul(&x[1])),
        case("div (broadcast)", |r| broadcast_pair(r, true), |x| x[0].div(&x[1])),
        case("pow", |r| broadcast_pair(r, true), |x| x[1].pow(&x[0])),
        case("maximum", separated_pair, |x| x[0].maximum(&x[1])),
        case("minimum", separated_pair, |x| x[0].minimum(&x[1])),
        case(
            "where",
            |r| {
                let s = ab(r);
                vec![mask(&s, r), normal(&s, r), normal(&[s[1]], r)]
            },
            |x| Tensor::where_(&x[0], &x[1], &x[2]),
        ),
        case(
            "masked_fill",
            |r| {
                let s = ab(r);
                vec![normal(&s, r), mask(&[s[1]], r)]
            },
            |x| x[0].masked_fill(&x[1], -2.0),
        ),
    ]
}

/// `[a, b]` and `[b]` variables; the second positive when `positive_rhs`.
fn broadcast_pair(r: &mut Rng, positive_rhs: bool) -> Vec<Tensor> {
    let s = ab(r);
    let rhs = if positive_rhs { positive(&[s[1]], r) } else { normal(&[s[1]], r) };
    vec![if positive_rhs { positive(&s, r) } else { normal(&s, r) }, rhs]
}

/// Two same-shape variables that differ by at least 0.2 everywhere (no ties).
fn separated_pair(r: &mut Rng) -> Vec<Tensor> {
    let s = ab(r);
    let a = normal(&s, r);
    let gap = away_from_zero(&s, r);
    let b = a.detach().add(&gap.detach()).map(Tensor::into_variable).unwrap_or_else(|_| a.clone());
    vec![a, b]
}

fn reduce_and_shape_cases() -> Vec<Case> {
    vec![
        case("sum", |r| vec![normal(&abc(r), r)], |x| x[0].sum([1usize], true)),
        case("mean", |r| vec![normal(&abc(r), r)], |x| x[0].mean([0usize, 2], false)),
        case("sum_all", |r| vec![normal(&abc(r), r)], |x| Ok(x[0].sum_all())),
        case("mean_all", |r| vec![normal(&abc(r), r)], |x| x[0].mean_all()),
        case("max", |r| vec![distinct(&abc(r), r)], |x| x[0].max(1, false)),
        case("min", |r| vec![distinct(&abc(r), r)], |x| x[0].min(-1, true)),
        case("max_all", |r| vec![distinct(&ab(r), r)], |x| x[0].max_all()),
        case("min_all", |r| vec![distinct(&ab(r), r)], |x| x[0].min_all()),
        case("var", |r| vec![normal(&abc(r), r)], |x| x[0].var([1usize], 1, false)),
        case("logsumexp", |r| vec![normal(&abc(r), r)], |x| x[0].logsumexp([2usize], false)),
        case("prod", |r| vec![positive(&ab(r), r)], |x| x[0].prod(1, false)),
        case("cumsum", |r| vec![normal(&ab(r), r)], |x| x[0].cumsum(1)),
        case("reshape", |r| vec![normal(&[2, 3, 4], r)], |x| x[0].reshape(&[4, 6])),
        case("reshape_infer", |r| vec![normal(&[2, 3, 4], r)], |x| x[0].reshape_infer(&[3, -1])),
        case("flatten", |r| vec![normal(&abc(r), r)], |x| x[0].flatten(1, 2)),
        case(
            "permute",
            |r| vec![normal(&abc(r), r)],
            |x| x[0].permute(&[2, 0, 1])?.contiguous()?.tanh().sum([0usize], false),
        ),
        case("transpose", |r| vec![normal(&ab(r), r)], |x| x[0].transpose(0, 1)),
        case("contiguous", |r| vec![normal(&ab(r), r)], |x| x[0].transpose(0, 1)?.contiguous()),
        case("narrow", |r| vec![normal(&[3, 5], r)], |x| x[0].narrow(1, 1, 3)),
        case("slice", |r| vec![normal(&[3, 7], r)], |x| x[0].slice(1, 1, -1, 2)),
        case("broadcast_to", |r| vec![normal(&[3, 1], r)], |x| x[0].broadcast_to(&[2, 3, 4])),
        case("squeeze", |r| vec![normal(&[3, 1, 2], r)], |x| x[0].squeeze(1)),
        case("unsqueeze", |r| vec![normal(&ab(r), r)], |x| x[0].unsqueeze(-1)),
        case("concat", |r| vec![normal(&[2, 3], r), normal(&[2, 2], r)], |x| Tensor::concat(&[&x[0], &x[1]], 1)),
        case("stack", |r| vec![normal(&[2, 3], r), normal(&[2, 3], r)], |x| Tensor::stack(&[&x[0], &x[1]], 0)),
        case(
            "split",
            |r| vec![normal(&[5, 2], r)],
            |x| {
                let parts = x[0].split(0, &[2, 3])?;
                Tensor::concat(&[&parts[1], &parts[0].scale(2.0)], 0)
            },
        ),
        case(
            "chunk",
            |r| vec![normal(&[2, 6], r)],
            |x| {
                let parts = x[0].chunk(3, 1)?;
                Tensor::concat(&[&parts[2], &parts[0].tanh(), &parts[1]], 1)
            },
        ),
        case("pad", |r| vec![normal(&ab(r), r)], |x| x[0].pad(&[(1, 0), (2, 1)], 0.5)),
        case("flip", |r| vec![normal(&abc(r), r)], |x| x[0].flip([0usize, 2])),
        case("repeat", |r| vec![normal(&[2, 3], r)], |x| x[0].repeat(&[2, 1, 2])),
    ]
}

fn index_and_contract_cases() -> Vec<Case> {
    vec![
        case(
            "index_select",
            |r| vec![normal(&[4, 3], r), index_tensor(&[6], 4, r)],
            |x| x[0].index_select(0, &as_indices(&x[1])?),
        ),
        case(
            "gather",
            |r| vec![normal(&[3, 4], r), index_tensor(&[3, 5], 4, r)],
            |x| x[0].gather(1, &as_indices(&x[1])?),
        ),
        case(
            "take_along_axis",
            |r| vec![normal(&[3, 4], r), index_tensor(&[2, 4], 3, r)],
            |x| x[0].take_along_axis(0, &as_indices(&x[1])?),
        ),
        case(
            "scatter_add",
            |r| vec![normal(&[3, 4], r), index_tensor(&[3, 2], 4, r), normal(&[3, 2], r)],
            |x| x[0].scatter_add(1, &as_indices(&x[1])?, &x[2]),
        ),
        case(
            "index_add",
            |r| vec![normal(&[4, 3], r), index_tensor(&[5], 4, r), normal(&[5, 3], r)],
            |x| x[0].index_add(0, &as_indices(&x[1])?, &x[2]),
        ),
        case(
            "matmul",
            |r| {
                let s = ab(r);
                vec![normal(&s, r), normal(&[s[1], 3], r)]
            },
            |x| x[0].matmul(&x[1]),
        ),
        case(
            "linear",
            |r| vec![normal(&[2, 3, 4], r), normal(&[5, 4], r), normal(&[5], r)],
            |x| x[0].linear(&x[1], Some(&x[2])),
        ),
        case("matmul (batched)", |r| vec![normal(&[2, 3, 4], r), normal(&[1, 4, 2], r)], |x| x[0].matmul(&x[1])),
        case(
            "matmul (transposed)",
            |r| vec![normal(&[3, 4], r), normal(&[5, 4], r)],
            |x| x[0].matmul(&x[1].transpose(0, 1)?),
        ),
        case(
            "dot",
            |r| vec![normal(&[2, 3], r), normal(&[3, 4], r)],
            |x| {
                let a = x[0].with_names(&[Some("batch"), Some("in")])?;
                let b = x[1].with_names(&[Some("in"), Some("out")])?;
                a.dot(&b, "in")
            },
        ),
        case(
            "einsum",
            |r| vec![normal(&[2, 3, 4], r), normal(&[2, 4, 2], r)],
            |x| Tensor::einsum("bij,bjk->bik", &x[0], &x[1]),
        ),
        case("softmax", |r| vec![normal(&abc(r), r)], |x| x[0].softmax(-1)),
        case("log_softmax", |r| vec![normal(&abc(r), r)], |x| x[0].log_softmax(1)),
    ]
}

fn loss_cases() -> Vec<Case> {
    vec![
        case(
            "cross_entropy",
            |r| vec![normal(&[4, 5], r), index_tensor(&[4], 5, r)],
            |x| {
                let options = CrossEntropyOptions { label_smoothing: 0.1, ..CrossEntropyOptions::default() };
                loss::cross_entropy(&x[0], &as_indices(&x[1])?, options)
            },
        ),
        case(
            "nll_loss",
            |r| vec![normal(&[4, 3], r), index_tensor(&[4], 3, r)],
            |x| loss::nll_loss(&x[0].log_softmax(1)?, &as_indices(&x[1])?, NllLossOptions::default()),
        ),
        case(
            "mse_loss",
            |r| vec![normal(&[3, 4], r), normal(&[3, 4], r)],
            |x| loss::mse_loss(&x[0], &x[1], Reduction::Mean),
        ),
        case(
            "huber_loss",
            |r| vec![away_from_zero(&[3, 4], r), Tensor::zeros(&[3, 4]).expect("a small fixed shape")],
            |x| loss::huber_loss(&x[0], &x[1], 0.1, Reduction::Sum),
        ),
        case(
            "binary_cross_entropy_with_logits",
            |r| {
                vec![
                    normal(&[3, 4], r),
                    Tensor::rand(&[3, 4], 0.0, 1.0, r).expect("a small fixed shape").into_variable(),
                ]
            },
            |x| loss::binary_cross_entropy_with_logits(&x[0], &x[1], Reduction::Mean),
        ),
        case(
            "kl_div",
            |r| vec![normal(&[3, 4], r), positive(&[3, 4], r)],
            |x| loss::kl_div(&x[0].log_softmax(1)?, &x[1].softmax(1)?, Reduction::BatchMean),
        ),
    ]
}

fn nn_cases() -> Vec<Case> {
    vec![
        case(
            "conv1d",
            |r| vec![normal(&[2, 2, 7], r), normal(&[4, 1, 3], r), normal(&[4], r)],
            |x| {
                x[0].conv1d(
                    &x[1],
                    Some(&x[2]),
                    Conv1dOptions { stride: 2, padding: 1, groups: 2, ..Conv1dOptions::default() },
                )
            },
        ),
        case(
            "conv2d",
            |r| vec![normal(&[2, 2, 5, dim(r, 4, 6)], r), normal(&[3, 2, 3, 3], r), normal(&[3], r)],
            |x| {
                x[0].conv2d(
                    &x[1],
                    Some(&x[2]),
                    Conv2dOptions { stride: (2, 1), padding: (1, 1), ..Conv2dOptions::default() },
                )
            },
        ),
        case(
            "conv2d (groups, dilation)",
            |r| vec![normal(&[1, 4, 6, 6], r), normal(&[2, 2, 2, 2], r)],
            |x| x[0].conv2d(&x[1], None, Conv2dOptions { dilation: (2, 2), groups: 2, ..Conv2dOptions::default() }),
        ),
        case(
            "conv_transpose2d",
            |r| vec![normal(&[1, 2, 3, 3], r), normal(&[2, 3, 3, 3], r), normal(&[3], r)],
            |x| {
                let opts =
                    ConvTranspose2dOptions { stride: (2, 2), padding: (1, 1), ..ConvTranspose2dOptions::default() };
                x[0].conv_transpose2d(&x[1], Some(&x[2]), opts)
            },
        ),
        case("max_pool2d", |r| vec![distinct(&[1, 2, 5, 5], r)], |x| x[0].max_pool2d((3, 3), (2, 2), (1, 1))),
        case("avg_pool2d", |r| vec![normal(&[1, 2, 5, 4], r)], |x| x[0].avg_pool2d((2, 2), (2, 1), (1, 0))),
        case("adaptive_avg_pool2d_1x1", |r| vec![normal(&[2, 3, 3, 2], r)], |x| x[0].adaptive_avg_pool2d_1x1()),
        case("upsample_nearest2d", |r| vec![normal(&[1, 2, 2, 3], r)], |x| x[0].upsample_nearest2d(2)),
        case(
            "layer_norm",
            |r| vec![normal(&[3, 2, 4], r), normal(&[2, 4], r), normal(&[2, 4], r)],
            |x| x[0].layer_norm(&[2, 4], Some(&x[1]), Some(&x[2]), 1e-5),
        ),
        case("rms_norm", |r| vec![normal(&[3, 5], r), normal(&[5], r)], |x| x[0].rms_norm(Some(&x[1]), 1e-5)),
        case(
            "group_norm",
            |r| vec![normal(&[2, 4, 3], r), normal(&[4], r), normal(&[4], r)],
            |x| x[0].group_norm(2, Some(&x[1]), Some(&x[2]), 1e-5),
        ),
        case(
            "batch_norm (train)",
            |r| vec![normal(&[3, 2, 2, 2], r), normal(&[2], r), normal(&[2], r)],
            |x| x[0].batch_norm(&mut RunningStats::new(2)?, Some(&x[1]), Some(&x[2]), true, 1e-5),
        ),
        case(
            "batch_norm (eval)",
            |r| vec![normal(&[3, 2, 2], r), normal(&[2], r), normal(&[2], r)],
            |x| x[0].batch_norm(&mut RunningStats::new(2)?, Some(&x[1]), Some(&x[2]), false, 1e-5),
        ),
        case("dropout", |r| vec![normal(&abc(r), r)], |x| x[0].dropout(0.3, 17, true)),
        case(
            "scaled_dot_product_attention",
            |r| vec![normal(&[1, 2, 3, 4], r), normal(&[1, 2, 3, 4], r), normal(&[1, 2, 3, 2], r)],
            |x| {
                x[0].scaled_dot_product_attention(
                    &x[1],
                    &x[2],
                    AttentionOptions { causal: true, ..AttentionOptions::default() },
                )
            },
        ),
        case("rope", |r| vec![normal(&[1, 2, 3, 4], r)], |x| x[0].rope(10_000.0)),
    ]
}

/// Attention's newer options (grouped heads, boolean and key masks, window, ALiBi, sinks,
/// dropout), RoPE at offsets and position ids, and the masked softmax.
fn attention_next_cases() -> Vec<Case> {
    fn gqa(x: &[Tensor], o: AttentionOptions<'_>) -> Result<Tensor> {
        x[0].scaled_dot_product_attention(&x[1], &x[2], AttentionOptions { enable_gqa: true, ..o })
    }
    vec![
        case(
            "sdpa grouped-query",
            |r| vec![normal(&[1, 4, 3, 4], r), normal(&[1, 2, 4, 4], r), normal(&[1, 2, 4, 3], r)],
            |x| gqa(x, AttentionOptions { causal: true, ..AttentionOptions::default() }),
        ),
        case(
            "sdpa bool mask",
            |r| {
                vec![
                    normal(&[1, 4, 3, 4], r),
                    normal(&[1, 2, 4, 4], r),
                    normal(&[1, 2, 4, 3], r),
                    mask(&[1, 1, 3, 4], r),
                ]
            },
            |x| gqa(x, AttentionOptions { bool_mask: Some(&x[3]), ..AttentionOptions::default() }),
        ),
        case(
            "sdpa key mask",
            |r| vec![normal(&[2, 4, 3, 4], r), normal(&[2, 2, 4, 4], r), normal(&[2, 2, 4, 3], r), mask(&[2, 4], r)],
            |x| gqa(x, AttentionOptions { key_mask: Some(&x[3]), ..AttentionOptions::default() }),
        ),
        case(
            "sdpa sliding window",
            |r| vec![normal(&[1, 4, 5, 4], r), normal(&[1, 2, 5, 4], r), normal(&[1, 2, 5, 3], r)],
            |x| gqa(x, AttentionOptions { window: Some(2), causal: true, ..AttentionOptions::default() }),
        ),
        case(
            "sdpa alibi",
            |r| vec![normal(&[1, 4, 4, 4], r), normal(&[1, 2, 4, 4], r), normal(&[1, 2, 4, 3], r)],
            |x| {
                let slopes = forgia::alibi_slopes(4);
                gqa(x, AttentionOptions { alibi_slopes: Some(&slopes), causal: true, ..AttentionOptions::default() })
            },
        ),
        case(
            "sdpa sinks",
            |r| vec![normal(&[1, 4, 3, 4], r), normal(&[1, 2, 4, 4], r), normal(&[1, 2, 4, 3], r), normal(&[4], r)],
            |x| gqa(x, AttentionOptions { sinks: Some(&x[3]), ..AttentionOptions::default() }),
        ),
        case(
            "sdpa dropout",
            |r| vec![normal(&[1, 4, 3, 4], r), normal(&[1, 2, 4, 4], r), normal(&[1, 2, 4, 3], r)],
            |x| {
                let dropout = Some(forgia::AttentionDropout { p: 0.3, seed: 17 });
                gqa(x, AttentionOptions { dropout, ..AttentionOptions::default() })
            },
        ),
        case(
            "rope (offset, interleaved)",
            |r| vec![normal(&[1, 2, 3, 4], r)],
            |x| x[0].rope_with(10_000.0, forgia::RopeOptions { offset: 5, interleaved: true, ..Default::default() }),
        ),
        case(
            "rope (position ids)",
            |r| vec![normal(&[2, 2, 3, 4], r), index_tensor(&[2, 3], 50, r)],
            |x| x[0].rope_with(10_000.0, forgia::RopeOptions { positions: Some(&x[1]), ..Default::default() }),
        ),
        case(
            "masked_softmax",
            |r| vec![normal(&[3, 4], r), normal(&[4], r)],
            |x| {
                // The last line is masked out entirely (zeros); the others keep two or more.
                let keep = Tensor::from_vec(vec![1., 0., 1., 1., 0., 1., 1., 0., 0., 0., 0., 0.], &[3, 4])?;
                let opts = forgia::MaskedSoftmaxOptions { scale: Some(0.5), mask: Some(&x[1]), bool_mask: Some(&keep) };
                x[0].masked_softmax(1, opts)
            },
        ),
    ]
}

/// A custom op for the table: `y = x³`, `dy/dx = 3x²`.
struct Cube;

impl CustomOp for Cube {
    fn name(&self) -> &'static str {
        "cube"
    }

    fn forward(&self, xs: &[Tensor]) -> Result<Tensor> {
        xs[0].mul(&xs[0])?.mul(&xs[0])
    }

    fn backward(&self, xs: &[Tensor], _y: &Tensor, gy: &Tensor, _needs: &[bool]) -> Result<Vec<Option<Tensor>>> {
        Ok(vec![Some(gy.mul(&xs[0].mul(&xs[0])?.scale(3.0))?)])
    }
}

fn extension_cases() -> Vec<Case> {
    vec![
        case(
            "checkpoint",
            |r| vec![normal(&[2, 3], r), normal(&[3, 3], r)],
            |x| forgia::checkpoint(|xs| xs[0].matmul(&xs[1])?.tanh().matmul(&xs[1]), &[&x[0], &x[1]]),
        ),
        case("custom_op", |r| vec![normal(&ab(r), r)], |x| forgia::custom_op(Cube, &[&x[0]])),
        case(
            "elemental_unary",
            |r| vec![normal(&ab(r), r)],
            |x| {
                // y = x·sin x; gx = g·(x cos x + sin x); its derivatives: g·(2 cos x - x sin x), (x cos x + sin x)
                Ok(forgia::elemental_unary_with_second(
                    &x[0],
                    |v| v.sin() * v,
                    |v, _y, g| g * (v.cos() * v + v.sin()),
                    |v, _y, g, u| (u * g * (2.0 * v.cos() - v * v.sin()), u * (v.cos() * v + v.sin())),
                ))
            },
        ),
        case(
            "elemental_binary",
            |r| broadcast_pair(r, false),
            |x| {
                // y = a·eᵇ; (ga, gb) = (g·eᵇ, g·a·eᵇ), differentiated in a, b and g
                forgia::elemental_binary_with_second(
                    &x[0],
                    &x[1],
                    |a, b| a * b.exp(),
                    |a, b, _y, g| (g * b.exp(), g * a * b.exp()),
                    |a, b, _y, g, ga, gb| (gb * g * b.exp(), (ga + gb * a) * g * b.exp(), (ga + gb * a) * b.exp()),
                )
            },
        ),
    ]
}

/// The outcome of one case.
struct Row {
    op: &'static str,
    shapes: String,
    checked: usize,
    max_error: f64,
    verdict: Result<bool>,
}

fn check(case: &Case, seed: u64) -> Row {
    let mut rng = Rng::new(seed ^ forgia_hash(case.op));
    let inputs = (case.inputs)(&mut rng);
    let shapes = inputs.iter().map(|t| format!("{:?}", t.shape())).collect::<Vec<_>>().join(" ");
    match forgia::gradcheck(case.f, &inputs, GradcheckOptions::default()) {
        Ok(report) => Row {
            op: case.op,
            shapes,
            checked: report.checked,
            max_error: report.max_abs_error,
            verdict: Ok(report.passed()),
        },
        Err(e) => Row { op: case.op, shapes, checked: 0, max_error: f64::NAN, verdict: Err(e) },
    }
}

/// A stable per-op seed offset (FNV-1a of the name), so adding a case leaves the others alone.
fn forgia_hash(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3))
}

/// Runs the table and prints it.
pub(crate) fn run(args: &GradcheckArgs) -> std::result::Result<(), GradcheckError> {
    let start = Instant::now();
    let selected: Vec<Case> =
        cases().into_iter().filter(|c| args.filter.as_ref().is_none_or(|f| c.op.contains(f.as_str()))).collect();
    if selected.is_empty() {
        return Err(GradcheckError::NoMatch(args.filter.clone().unwrap_or_default()));
    }
    println!("{:<34} {:<34} {:>8} {:>10}  result", "op", "input shapes", "checked", "max error");
    let mut failed = Vec::new();
    for case in &selected {
        let row = if args.second_order { second_order::check(case, args.seed) } else { check(case, args.seed) };
        let verdict = match &row.verdict {
            Ok(true) => "pass".to_string(),
            Ok(false) => "FAIL".to_string(),
            Err(e) => format!("ERROR: {e}"),
        };
        println!("{:<34} {:<34} {:>8} {:>10.2e}  {verdict}", row.op, row.shapes, row.checked, row.max_error);
        if !matches!(row.verdict, Ok(true)) {
            failed.push(row.op);
        }
    }
    let total = selected.len();
    println!("{} of {total} ops passed in {:.1} s", total - failed.len(), start.elapsed().as_secs_f64());
    if failed.is_empty() {
        Ok(())
    } else {
        Err(GradcheckError::Failed { failed: failed.len(), total, names: failed.join(", ") })
    }
}
