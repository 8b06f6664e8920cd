//! `forgia gradcheck` rows for issue 15's layers, losses and shape ops.

use forgia::loss::{self, CrossEntropyOptions, LinearCrossEntropyOptions, Reduction};
use forgia::{PadMode, Rng, Tensor, UnfoldOptions};

use super::inputs::{as_indices, away_from_zero, distinct, index_tensor, normal, positive};
use super::{ab, abc, case, Case};

/// A constant `[n]` of class weights.
fn class_weights(n: usize) -> Tensor {
    Tensor::from_vec((0..n).map(|i| 0.5 + 0.25 * i as f32).collect(), &[n]).expect("a small fixed shape")
}

/// A constant of ±1 targets.
fn signs(shape: &[usize], rng: &mut Rng) -> Tensor {
    let n = shape.iter().product();
    let v = (0..n).map(|_| if rng.uniform() < 0.5 { 1.0 } else { -1.0 }).collect();
    Tensor::from_vec(v, shape).expect("a small fixed shape")
}

/// A variable whose values stay clear of the kinks at ±3 (hardswish, hardsigmoid).
fn clear_of_three(shape: &[usize], rng: &mut Rng) -> Tensor {
    normal(shape, rng)
        .detach()
        .scale(1.5)
        .clamp(-2.5, 2.5)
        .map(Tensor::into_variable)
        .unwrap_or_else(|_| normal(shape, rng))
}

/// Distinct values shifted to be positive: no ties of `|x|` either (a tie between `0.3` and
/// `-0.3` would make the second-order finite differences jump).
fn distinct_positive(shape: &[usize], rng: &mut Rng) -> Tensor {
    let x = distinct(shape, rng);
    let shift = x.detach().abs().max_all().map_or(0.0, |m| m.item().unwrap_or(0.0)) + 1.0;
    x.detach().add_scalar(shift).into_variable()
}

/// Layers, losses and shape ops of issue 15.
pub(super) fn layers_loss_cases() -> Vec<Case> {
    let mut all = vec![
        case("elu", |r| vec![away_from_zero(&ab(r), r)], |x| x[0].elu(0.8)),
        case("selu", |r| vec![away_from_zero(&ab(r), r)], |x| Ok(x[0].selu())),
        case("mish", |r| vec![normal(&ab(r), r)], |x| Ok(x[0].mish())),
        case("hardswish", |r| vec![clear_of_three(&ab(r), r)], |x| Ok(x[0].hardswish())),
        case("hardsigmoid", |r| vec![clear_of_three(&ab(r), r)], |x| x[0].hardsigmoid().mul(&x[0])),
        case("log_sigmoid", |r| vec![normal(&ab(r), r)], |x| Ok(x[0].log_sigmoid())),
        case("log1p", |r| vec![positive(&ab(r), r)], |x| Ok(x[0].log1p())),
        case("expm1", |r| vec![normal(&ab(r), r)], |x| Ok(x[0].expm1())),
        case("prelu", |r| vec![away_from_zero(&[2, 3, 4], r), positive(&[3], r)], |x| x[0].prelu(&x[1])),
        case("glu", |r| vec![normal(&[3, 4], r)], |x| x[0].glu(-1)),
        case("swiglu", |r| vec![normal(&[4, 3], r)], |x| x[0].swiglu(0)),
        case("geglu", |r| vec![normal(&[2, 6], r)], |x| x[0].geglu(1)),
        case("glu_with", |r| vec![normal(&[2, 3], r), normal(&[2, 3], r)], |x| x[0].glu_with(&x[1])),
        case("swiglu_with", |r| vec![normal(&[2, 3], r), normal(&[2, 3], r)], |x| x[0].swiglu_with(&x[1])),
        case("geglu_with", |r| vec![normal(&[2, 3], r), normal(&[2, 3], r)], |x| x[0].geglu_with(&x[1])),
        case("std", |r| vec![normal(&abc(r), r)], |x| x[0].std(1, 1, false)),
        case("norm (p=1)", |r| vec![away_from_zero(&ab(r), r)], |x| x[0].norm(1.0, 1, false)),
        case("norm (p=2)", |r| vec![normal(&abc(r), r)], |x| x[0].norm(2.0, [0usize, 2], true)),
        case("norm (p=3)", |r| vec![away_from_zero(&ab(r), r)], |x| x[0].norm(3.0, 0, false)),
        case("norm (p=inf)", |r| vec![distinct_positive(&ab(r), r)], |x| x[0].norm(f32::INFINITY, 1, false)),
        case("norm_all", |r| vec![normal(&abc(r), r)], |x| x[0].norm_all(2.0)),
        case(
            "cosine_similarity",
            |r| vec![normal(&[3, 4], r), normal(&[4], r)],
            |x| x[0].cosine_similarity(&x[1], -1, 1e-8),
        ),
        case("normalize", |r| vec![normal(&[3, 4], r)], |x| x[0].normalize(2.0, 1, 1e-12)),
    ];
    all.extend(loss_rows());
    all.extend(shape_rows());
    all
}

fn loss_rows() -> Vec<Case> {
    vec![
        case(
            "cross_entropy_weighted",
            |r| vec![normal(&[4, 3], r), index_tensor(&[4], 3, r)],
            |x| {
                let opts = CrossEntropyOptions { label_smoothing: 0.1, ..CrossEntropyOptions::default() };
                loss::cross_entropy_weighted(&x[0], &as_indices(&x[1])?, &class_weights(3), opts)
            },
        ),
        case(
            "cross_entropy_probs",
            |r| vec![normal(&[4, 3], r), normal(&[4, 3], r)],
            |x| {
                let opts = CrossEntropyOptions { label_smoothing: 0.1, ..CrossEntropyOptions::default() };
                loss::cross_entropy_probs(&x[0], &x[1].softmax(1)?, Some(&class_weights(3)), opts)
            },
        ),
        case(
            "l1_loss",
            |r| vec![away_from_zero(&[3, 4], r), Tensor::zeros(&[3, 4]).expect("a small fixed shape")],
            |x| loss::l1_loss(&x[0], &x[1], Reduction::Mean),
        ),
        case(
            "smooth_l1_loss",
            |r| vec![away_from_zero(&[3, 4], r), Tensor::zeros(&[3, 4]).expect("a small fixed shape")],
            |x| loss::smooth_l1_loss(&x[0], &x[1], 0.1, Reduction::Sum),
        ),
        case(
            "binary_cross_entropy",
            |r| vec![normal(&[3, 4], r), normal(&[3, 4], r)],
            |x| loss::binary_cross_entropy(&x[0].sigmoid(), &x[1].sigmoid(), None, Reduction::Mean),
        ),
        case(
            "cosine_embedding_loss",
            |r| vec![normal(&[3, 4], r), normal(&[3, 4], r), signs(&[3], r)],
            |x| loss::cosine_embedding_loss(&x[0], &x[1], &x[2], -2.0, Reduction::Mean),
        ),
        case(
            "margin_ranking_loss",
            |r| vec![normal(&[5], r), normal(&[5], r), signs(&[5], r)],
            |x| loss::margin_ranking_loss(&x[0], &x[1], &x[2], 10.0, Reduction::Sum),
        ),
        case(
            "linear_cross_entropy",
            |r| vec![normal(&[5, 3], r), normal(&[6, 3], r), normal(&[6], r), index_tensor(&[5], 6, r)],
            |x| {
                let opts = LinearCrossEntropyOptions { chunk: 2, ..LinearCrossEntropyOptions::default() };
                loss::linear_cross_entropy(&x[0], &x[1], Some(&x[2]), &as_indices(&x[3])?, opts)
            },
        ),
    ]
}

fn shape_rows() -> Vec<Case> {
    vec![
        case("tril", |r| vec![normal(&abc(r), r)], |x| x[0].tril(-1)),
        case("triu", |r| vec![normal(&ab(r), r)], |x| x[0].triu(1)),
        case("diagonal", |r| vec![normal(&abc(r), r)], |x| x[0].diagonal(0, 0, 2)),
        case("diag", |r| vec![normal(&[3], r)], |x| x[0].diag(1)),
        case("diag_embed", |r| vec![normal(&ab(r), r)], |x| x[0].diag_embed(-1, -2, -1)),
        case("trace", |r| vec![normal(&ab(r), r)], |x| x[0].trace()),
        case("roll", |r| vec![normal(&ab(r), r)], |x| x[0].roll(&[1, -1], &[0, 1])),
        case("cumprod", |r| vec![normal(&ab(r), r)], |x| x[0].cumprod(1)),
        case("cummax", |r| vec![distinct(&ab(r), r)], |x| x[0].cummax(1).map(|(v, _)| v)),
        case("cummin", |r| vec![distinct(&ab(r), r)], |x| x[0].cummin(0).map(|(v, _)| v)),
        case(
            "unfold",
            |r| vec![normal(&[1, 2, 4, 4], r)],
            |x| x[0].unfold(UnfoldOptions { padding: [1, 1], stride: [2, 1], ..UnfoldOptions::new([3, 2]) }),
        ),
        case("fold", |r| vec![normal(&[1, 8, 4], r)], |x| x[0].fold([3, 3], UnfoldOptions::new([2, 2]))),
        case("pad (reflect)", |r| vec![normal(&[3, 4], r)], |x| x[0].pad_with(&[(1, 2), (2, 1)], PadMode::Reflect)),
        case("pad (replicate)", |r| vec![normal(&[3, 4], r)], |x| x[0].pad_with(&[(2, 0), (1, 2)], PadMode::Replicate)),
        case("pad (circular)", |r| vec![normal(&[3, 4], r)], |x| x[0].pad_with(&[(3, 1), (0, 4)], PadMode::Circular)),
    ]
}
