//! Bad input to issue 15's layers, losses and shape ops: every row comes back as an `Err` of
//! its named kind, naming the op — never a panic, never a silently wrong value.

use forgia::loss::{self, CrossEntropyOptions, Reduction};
use forgia::{Indices, PadMode, Tensor, UnfoldOptions};

mod common;
use common::bad_input::*;

#[test]
fn layers_losses_and_shape_ops_turn_bad_input_into_named_errors() {
    let (a23, a34, a4) = (t(&[2, 3]), t(&[3, 4]), t(&[4]));
    let labels = Indices::new(vec![0, 1, 2], &[3]).unwrap();
    let ce = CrossEntropyOptions::default();
    let o = UnfoldOptions::new([2, 2]);
    let rows: Vec<(&str, &str, forgia::Result<Tensor>, Check)> = vec![
        ("elu NaN alpha", "elu", a23.elu(f32::NAN), arg),
        ("prelu weight size", "prelu", a23.prelu(&t(&[2])), shape),
        ("prelu weight rank", "prelu", a23.prelu(&t(&[3, 1])), shape),
        ("glu odd axis", "glu", a23.glu(-1), arg),
        ("glu bad axis", "glu", a23.glu(2), axis),
        ("swiglu odd axis", "swiglu", a23.swiglu(0).and_then(|_| t(&[3, 3]).swiglu(0)), arg),
        ("geglu_with shapes", "geglu", a23.geglu_with(&a34), shape),
        ("glu_with shapes", "glu", a23.glu_with(&a4), shape),
        ("std correction", "var", a23.std(1, 3, false), arg),
        ("std axis", "var", a23.std(5, 1, false), axis),
        ("norm p 0", "norm", a23.norm(0.0, 1, false), arg),
        ("norm p NaN", "norm", a23.norm(f32::NAN, 1, false), arg),
        ("norm axis", "norm", a23.norm(2.0, 2, false), axis),
        ("norm inf empty", "norm", t(&[2, 0]).norm(f32::INFINITY, 1, false), empty),
        ("cosine_similarity shapes", "cosine_similarity", a23.cosine_similarity(&a34, 1, 1e-8), shape),
        ("cosine_similarity eps", "cosine_similarity", a23.cosine_similarity(&a23, 1, -1.0), arg),
        ("normalize eps", "normalize", a23.normalize(2.0, 1, f32::NAN), arg),
        // Losses.
        ("ce weight shape", "cross_entropy", loss::cross_entropy_weighted(&a34, &labels, &t(&[3]), ce), shape),
        (
            "ce weight label",
            "cross_entropy",
            loss::cross_entropy_weighted(&a34, &Indices::new(vec![0, 9, 1], &[3]).unwrap(), &a4, ce),
            index,
        ),
        ("ce probs shape", "cross_entropy", loss::cross_entropy_probs(&a34, &a23, None, ce), shape),
        ("ce probs rank", "cross_entropy", loss::cross_entropy_probs(&a4, &a4, None, ce), shape),
        ("ce probs weight", "cross_entropy", loss::cross_entropy_probs(&a34, &a34, Some(&t(&[3])), ce), shape),
        (
            "ce probs smoothing",
            "cross_entropy",
            loss::cross_entropy_probs(&a34, &a34, None, CrossEntropyOptions { label_smoothing: 1.5, ..ce }),
            arg,
        ),
        (
            "ce probs batchmean",
            "cross_entropy",
            loss::cross_entropy_probs(&a34, &a34, None, CrossEntropyOptions { reduction: Reduction::BatchMean, ..ce }),
            arg,
        ),
        ("l1 shapes", "l1_loss", loss::l1_loss(&a23, &a34, Reduction::Mean), shape),
        ("l1 empty mean", "l1_loss", loss::l1_loss(&t(&[0]), &t(&[0]), Reduction::Mean), empty),
        ("smooth_l1 beta", "smooth_l1_loss", loss::smooth_l1_loss(&a23, &a23, -1.0, Reduction::Mean), arg),
        ("smooth_l1 shapes", "smooth_l1_loss", loss::smooth_l1_loss(&a23, &a4, 1.0, Reduction::Mean), shape),
        (
            "bce range",
            "binary_cross_entropy",
            loss::binary_cross_entropy(&a23.scale(10.0), &a23, None, Reduction::Mean),
            arg,
        ),
        (
            "bce NaN",
            "binary_cross_entropy",
            loss::binary_cross_entropy(&a23.scale(f32::NAN), &a23, None, Reduction::Mean),
            arg,
        ),
        (
            "bce weight",
            "binary_cross_entropy",
            loss::binary_cross_entropy(&a23, &a23, Some(&a4), Reduction::Mean),
            shape,
        ),
        (
            "cosine_embedding target value",
            "cosine_embedding_loss",
            loss::cosine_embedding_loss(&a34, &a34, &Tensor::zeros(&[3]).unwrap(), 0.0, Reduction::Mean),
            arg,
        ),
        (
            "cosine_embedding target shape",
            "cosine_embedding_loss",
            loss::cosine_embedding_loss(&a34, &a34, &Tensor::ones(&[4]).unwrap(), 0.0, Reduction::Mean),
            shape,
        ),
        (
            "cosine_embedding rank",
            "cosine_embedding_loss",
            loss::cosine_embedding_loss(
                &t(&[2, 3, 4]),
                &t(&[2, 3, 4]),
                &Tensor::ones(&[2, 3]).unwrap(),
                0.0,
                Reduction::Mean,
            ),
            shape,
        ),
        (
            "margin_ranking shapes",
            "margin_ranking_loss",
            loss::margin_ranking_loss(&a23, &a34, &Tensor::ones(&[3]).unwrap(), 0.0, Reduction::Mean),
            shape,
        ),
        (
            "margin_ranking margin",
            "margin_ranking_loss",
            loss::margin_ranking_loss(&a4, &a4, &a4, f32::INFINITY, Reduction::Mean),
            arg,
        ),
        // Shape ops.
        ("tril rank", "tril", a4.tril(0), shape),
        ("triu rank", "triu", a4.triu(0), shape),
        ("diagonal same dims", "diagonal", a23.diagonal(0, 1, 1), arg),
        ("diagonal dim", "diagonal", a23.diagonal(0, 0, 2), axis),
        ("diag rank", "diag", t(&[2, 2, 2]).diag(0), shape),
        ("diag_embed rank", "diag_embed", Tensor::scalar(1.0).diag_embed(0, -2, -1), shape),
        ("diag_embed dims", "diag_embed", a23.diag_embed(0, 0, 3), axis),
        ("trace rank", "trace", a4.trace(), shape),
        ("roll lengths", "roll", a23.roll(&[1, 2], &[0]), arg),
        ("roll flat shifts", "roll", a23.roll(&[1, 2], &[]), arg),
        ("roll dim", "roll", a23.roll(&[1], &[2]), axis),
        ("cumprod axis", "cumprod", a23.cumprod(2), axis),
        ("cummax axis", "cummax", a23.cummax(-3).map(|(v, _)| v), axis),
        ("unfold rank", "unfold", a23.unfold(o), shape),
        ("unfold window", "unfold", t(&[1, 1, 1, 3]).unfold(o), arg),
        ("unfold zero stride", "unfold", t(&[1, 1, 3, 3]).unfold(UnfoldOptions { stride: [0, 1], ..o }), arg),
        ("fold rank", "fold", a4.fold([2, 2], o), shape),
        ("fold rows", "fold", t(&[1, 6, 4]).fold([3, 3], o), shape),
        ("fold positions", "fold", t(&[1, 4, 5]).fold([3, 3], o), shape),
        ("pad reflect too wide", "pad", a23.pad_with(&[(0, 0), (3, 0)], PadMode::Reflect), arg),
        ("pad circular too wide", "pad", a23.pad_with(&[(3, 0), (0, 0)], PadMode::Circular), arg),
        ("pad replicate empty", "pad", t(&[0, 2]).pad_with(&[(1, 0), (0, 0)], PadMode::Replicate), arg),
        ("pad pairs", "pad", a23.pad_with(&[(1, 1)], PadMode::Reflect), shape),
        // Sizes near the edge of usize are errors, not overflows.
        ("diag huge offset", "diag", a4.diag(isize::MAX), overflow),
        ("diag_embed huge offset", "diag_embed", a23.diag_embed(isize::MIN, -2, -1), overflow),
        (
            "unfold huge padding",
            "unfold",
            t(&[1, 1, 2, 2]).unfold(UnfoldOptions { padding: [1 << 40, 1 << 40], ..o }),
            overflow,
        ),
    ];
    for (what, op, result, check) in rows {
        match result {
            Ok(v) => panic!("{what}: expected an error, got a tensor of shape {:?}", v.shape()),
            Err(e) => {
                assert!(check(e.kind()), "{what}: wrong kind {:?}", e.kind());
                assert_eq!(op_of(e.kind()), op, "{what}: error names the op");
            }
        }
    }
}
