//! One table over the public ops and constructors: wrong shapes, bad axes, bad indices,
//! non-finite arguments where they matter, and empty tensors. Every row must come back as an
//! `Err` with its named kind — never a panic, never a silently wrong value.

use forgia::loss::{self, CrossEntropyOptions, Reduction};
use forgia::{AttentionOptions, Conv1dOptions, Conv2dOptions, ConvTranspose2dOptions, ErrorKind, Tensor};

mod common;
use common::bad_input::*;

#[test]
fn every_public_op_turns_bad_input_into_its_named_error() {
    let (a23, a34, a4) = (t(&[2, 3]), t(&[3, 4]), t(&[4]));
    let img = t(&[1, 2, 5, 5]);
    let q = t(&[1, 2, 4, 8]);
    let ce = CrossEntropyOptions::default();
    let rows: Vec<(&str, forgia::Result<Tensor>, Check)> = vec![
        // Constructors.
        ("from_vec length", Tensor::from_vec(vec![1.0; 5], &[2, 3]), |k| matches!(k, ErrorKind::LengthMismatch { .. })),
        ("arange zero step", Tensor::arange(0.0, 1.0, 0.0), arg),
        ("arange NaN step", Tensor::arange(0.0, 1.0, f32::NAN), arg),
        ("one_hot index", Tensor::one_hot(&[3], 3), index),
        // Broadcasting binary ops.
        ("add", a23.add(&a4), shape),
        ("sub", a23.sub(&a4), shape),
        ("mul", a23.mul(&a4), shape),
        ("div", a23.div(&a4), shape),
        ("pow", a23.pow(&a4), shape),
        ("maximum", a23.maximum(&a4), shape),
        ("minimum", a23.minimum(&a4), shape),
        ("where_ shapes", Tensor::where_(&Tensor::ones(&[4]).unwrap(), &a23, &a23), shape),
        ("where_ mask shape", Tensor::where_(&Tensor::full(&[4], 0.5).unwrap(), &a23, &a23), shape),
        ("masked_fill", a23.masked_fill(&Tensor::ones(&[4]).unwrap(), 0.0), shape),
        ("clamp min > max", a23.clamp(1.0, 0.0), arg),
        ("clamp NaN bound", a23.clamp(f32::NAN, 1.0), arg),
        // Reductions.
        ("sum axis", a23.sum(2, false), axis),
        ("sum duplicate axis", a23.sum([1, -1], false), |k| matches!(k, ErrorKind::DuplicateAxis { .. })),
        ("sum unknown name", a23.sum("rows", false), |k| matches!(k, ErrorKind::UnknownAxisName { .. })),
        ("mean empty", t(&[0, 3]).mean(0, false), empty),
        ("mean_all empty", t(&[0]).mean_all(), empty),
        ("max axis", a23.max(-3, false), axis),
        ("max empty axis", t(&[0, 3]).max(0, false), empty),
        ("min axis", a23.min(5, false), axis),
        ("max_all empty", t(&[0]).max_all(), empty),
        ("var correction", a23.var(1, 3, false), arg),
        ("logsumexp axis", a23.logsumexp(3, false), axis),
        ("prod axis", a23.prod(2, false), axis),
        ("cumsum axis", a23.cumsum(2), axis),
        // Contractions.
        ("matmul inner", a23.matmul(&a4), shape),
        ("matmul rank 0", a23.matmul(&Tensor::scalar(1.0)), shape),
        ("matmul batch", t(&[2, 2, 3]).matmul(&t(&[3, 3, 4])), shape),
        ("linear in", a23.linear(&t(&[4, 4]), None), shape),
        ("linear weight rank", a23.linear(&t(&[3]), None), shape),
        ("linear bias", a23.linear(&a34.transpose(0, 1).unwrap(), Some(&a23)), shape),
        ("linear rank 0", Tensor::scalar(1.0).linear(&a23, None), shape),
        ("dot sizes", a23.dot(&a34, 0), shape),
        ("einsum inputs", Tensor::einsum("ij,jk", &a23, &a23), |k| shape(k) || arg(k)),
        ("einsum equation", Tensor::einsum("ij->", &a23, &a34), arg),
        // Shapes.
        ("reshape", a23.reshape(&[4]), reshape),
        ("reshape_infer", a23.reshape_infer(&[-1, -1]), |k| reshape(k) || arg(k)),
        ("permute", a23.permute(&[0]), shape),
        ("transpose", a23.transpose(0, 2), axis),
        ("narrow", a23.narrow(1, 2, 2), index),
        ("slice step", a23.slice(0, 0, 2, 0), arg),
        ("broadcast_to", a23.broadcast_to(&[3, 3]), shape),
        ("squeeze", a23.squeeze(0), arg),
        ("unsqueeze", a23.unsqueeze(3), axis),
        ("flatten order", t(&[2, 3, 4]).flatten(2, 0), arg),
        ("concat shapes", Tensor::concat(&[&a23, &a34], 0), shape),
        ("concat none", Tensor::concat(&[], 0), |k| arg(k) || empty(k)),
        ("stack shapes", Tensor::stack(&[&a23, &a34], 0), shape),
        ("pad count", a23.pad(&[(1, 1)], 0.0), shape),
        ("repeat count", a23.repeat(&[2]), shape),
        ("flip axis", a23.flip(2), axis),
        // Indexing.
        ("index_select range", a23.index_select(1, &idx(&[3], &[1])), index),
        ("index_select negative", a23.index_select(1, &idx(&[-1], &[1])), index),
        ("gather range", a23.gather(1, &idx(&[0, 1, 9, 0, 1, 2], &[2, 3])), index),
        ("gather rank", a23.gather(1, &idx(&[0, 1], &[2])), shape),
        ("scatter_add range", a23.scatter_add(1, &idx(&[0, 1, 5, 0, 1, 2], &[2, 3]), &a23), index),
        ("index_add range", a23.index_add(0, &idx(&[2], &[1]), &t(&[1, 3])), index),
        ("index_add src", a23.index_add(0, &idx(&[1], &[1]), &t(&[1, 4])), shape),
        // Softmax and losses.
        ("softmax axis", a23.softmax(2), axis),
        ("log_softmax axis", a23.log_softmax(-3), axis),
        ("cross_entropy label", loss::cross_entropy(&a23, &idx(&[0, 3], &[2]), ce), index),
        ("cross_entropy count", loss::cross_entropy(&a23, &idx(&[0], &[1]), ce), shape),
        (
            "cross_entropy smoothing NaN",
            loss::cross_entropy(&a23, &idx(&[0, 1], &[2]), CrossEntropyOptions { label_smoothing: f32::NAN, ..ce }),
            arg,
        ),
        ("mse_loss", loss::mse_loss(&a23, &a34, Reduction::Mean), shape),
        ("huber_loss delta", loss::huber_loss(&a23, &a23, -1.0, Reduction::Mean), arg),
        ("bce_with_logits", loss::binary_cross_entropy_with_logits(&a23, &a4, Reduction::Sum), shape),
        ("kl_div", loss::kl_div(&a23, &a34, Reduction::BatchMean), shape),
        // Convolution, pooling, normalization, attention.
        (
            "conv2d kernel larger than padded input",
            img.conv2d(&t(&[1, 2, 7, 7]), None, Conv2dOptions::default()),
            |k| arg(k) || shape(k),
        ),
        ("conv2d groups", img.conv2d(&t(&[3, 1, 3, 3]), None, Conv2dOptions { groups: 3, ..Default::default() }), arg),
        ("conv2d channels", img.conv2d(&t(&[1, 3, 3, 3]), None, Conv2dOptions::default()), shape),
        ("conv2d bias", img.conv2d(&t(&[4, 2, 3, 3]), Some(&t(&[3])), Conv2dOptions::default()), shape),
        (
            "conv2d zero stride",
            img.conv2d(&t(&[1, 2, 3, 3]), None, Conv2dOptions { stride: (0, 1), ..Default::default() }),
            arg,
        ),
        ("conv1d rank", img.conv1d(&t(&[1, 2, 3]), None, Conv1dOptions::default()), shape),
        (
            "conv_transpose2d output_padding",
            img.conv_transpose2d(
                &t(&[2, 1, 3, 3]),
                None,
                ConvTranspose2dOptions { output_padding: (2, 2), ..Default::default() },
            ),
            arg,
        ),
        ("max_pool2d kernel", img.max_pool2d((7, 7), (1, 1), (0, 0)), |k| arg(k) || shape(k)),
        ("avg_pool2d rank", a23.avg_pool2d((2, 2), (2, 2), (0, 0)), shape),
        ("upsample scale 0", img.upsample_nearest2d(0), arg),
        ("layer_norm shape", a23.layer_norm(&[4], None, None, 1e-5), shape),
        ("layer_norm weight", a23.layer_norm(&[3], Some(&a4), None, 1e-5), shape),
        ("rms_norm weight", a23.rms_norm(Some(&a4), 1e-5), shape),
        ("group_norm groups", img.group_norm(3, None, None, 1e-5), arg),
        ("dropout p", a23.dropout(1.5, 0, true), arg),
        ("dropout NaN p", a23.dropout(f32::NAN, 0, true), arg),
        (
            "attention mask",
            q.scaled_dot_product_attention(
                &q,
                &q,
                AttentionOptions { causal: false, mask: Some(&t(&[3, 3])), scale: None, ..Default::default() },
            ),
            shape,
        ),
        ("attention rank", a23.scaled_dot_product_attention(&a23, &a23, AttentionOptions::default()), shape),
        ("rope odd dim", t(&[1, 1, 2, 3]).rope(10000.0), arg),
        ("ternary_ste_matmul", a23.ternary_ste_matmul(&a34), shape),
    ];
    check_rows(rows);
}

#[test]
fn empty_tensors_flow_through_ops_that_allow_them() {
    let e = t(&[0, 3]);
    assert_eq!(e.tanh().shape(), &[0, 3]);
    assert_eq!(e.add(&t(&[3])).unwrap().shape(), &[0, 3]);
    assert_eq!(e.sum(0, false).unwrap().to_vec(), vec![0.0; 3]);
    assert_eq!(e.matmul(&t(&[3, 2])).unwrap().shape(), &[0, 2]);
    assert_eq!(e.softmax(1).unwrap().shape(), &[0, 3]);
    assert_eq!(Tensor::concat(&[&e, &t(&[1, 3])], 0).unwrap().shape(), &[1, 3]);
}

#[test]
fn nan_bounds_and_reversed_ranges_are_errors_in_creation_init_and_layers() {
    use forgia::nn::{init, Dropout, LayerNorm};
    use forgia::Rng;
    let arg = |r: Result<(), forgia::Error>| matches!(r.unwrap_err().kind(), ErrorKind::InvalidArgument { .. });
    let mut rng = Rng::new(0);
    assert!(arg(Tensor::arange(f32::NAN, 5.0, 1.0).map(drop)), "arange NaN start was an empty tensor");
    assert!(arg(Tensor::arange(0.0, f32::NAN, 1.0).map(drop)));
    assert!(arg(Tensor::linspace(0.0, f32::INFINITY, 3).map(drop)));
    assert!(arg(Tensor::rand(&[2], 1.0, 0.0, &mut rng).map(drop)));
    assert!(arg(Tensor::randn(&[2], 0.0, f32::NAN, &mut rng).map(drop)));
    let mut w = Tensor::zeros(&[4, 3]).unwrap().into_variable();
    assert!(arg(init::normal(&mut w, 0.0, f32::NAN, &mut rng)));
    assert!(arg(init::normal(&mut w, 0.0, -1.0, &mut rng)));
    assert!(arg(init::uniform(&mut w, 1.0, -1.0, &mut rng)));
    assert!(arg(init::kaiming_uniform(&mut w, f32::NAN, init::FanMode::FanIn, &mut rng)));
    assert!(arg(init::xavier_normal(&mut w, -1.0, &mut rng)));
    assert_eq!(w.to_vec(), vec![0.0; 12], "a refused fill changes nothing");
    assert!(arg(Dropout::new(f32::NAN, 0).map(drop)));
    assert!(arg(LayerNorm::new(&[3], f32::NAN).map(drop)));
    let mut stats = forgia::RunningStats::new(2).unwrap();
    stats.momentum = f32::NAN;
    assert!(arg(t(&[2, 2, 2, 2]).batch_norm(&mut stats, None, None, true, 1e-5).map(drop)));
}

#[test]
fn a_usize_axis_past_the_rank_is_out_of_range_never_read_as_negative() {
    let x = t(&[2, 3]);
    for (name, r) in [
        ("sum", x.sum(usize::MAX, false)),
        ("softmax", x.softmax(usize::MAX - 1)),
        ("max", x.max(usize::MAX, false)),
        ("narrow", x.narrow(usize::MAX, 0, 1)),
        ("unsqueeze", x.unsqueeze(usize::MAX)),
        ("stack", Tensor::stack(&[&x, &x], usize::MAX)),
        ("sum u64", x.sum(u64::MAX, false)),
    ] {
        let e = r.unwrap_err();
        assert!(matches!(e.kind(), ErrorKind::AxisOutOfRange { .. }), "{name}: {e}");
    }
    assert_eq!(x.sum(1usize, false).unwrap().to_vec(), x.sum(-1, false).unwrap().to_vec());
}

#[test]
fn unsqueeze_and_stack_take_any_axis_argument_and_name_the_valid_range() {
    let x = t(&[2, 3]);
    assert_eq!(x.unsqueeze(2usize).unwrap().shape(), &[2, 3, 1]);
    assert_eq!(x.unsqueeze(-1).unwrap().shape(), &[2, 3, 1], "negative counts from the output's end");
    assert_eq!(x.unsqueeze(-3).unwrap().shape(), &[1, 2, 3]);
    assert_eq!(Tensor::stack(&[&x, &x], -1).unwrap().shape(), &[2, 3, 2]);
    assert_eq!(Tensor::stack(&[&x, &x], 1usize).unwrap().shape(), &[2, 2, 3]);
    let e = x.unsqueeze(3).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::AxisOutOfRange { axis: 3, rank: 2, low: -3, high: 2, .. }), "{e}");
    assert!(e.to_string().contains("-3..=2"), "{e}");
    let e = x.sum(2, false).unwrap_err();
    assert!(e.to_string().contains("-2..=1"), "{e}");
    assert!(matches!(x.unsqueeze("new").unwrap_err().kind(), ErrorKind::UnknownAxisName { .. }));
}

#[test]
fn a_scalar_reduces_over_axis_0_or_minus_1_as_in_pytorch() {
    let s = Tensor::scalar(2.5);
    for a in [0, -1] {
        assert_eq!(s.sum(a, false).unwrap().shape(), &[] as &[usize]);
        assert_eq!(s.sum(a, true).unwrap().to_vec(), [2.5]);
        assert_eq!(s.mean(a, false).unwrap().to_vec(), [2.5]);
        assert_eq!(s.max(a, false).unwrap().to_vec(), [2.5]);
        assert_eq!(s.min(a, true).unwrap().shape(), &[] as &[usize]);
        assert_eq!(s.argmax(a, false).unwrap().data(), [0]);
        assert_eq!(s.prod(a, false).unwrap().to_vec(), [2.5]);
        assert_eq!(s.cumsum(a).unwrap().shape(), &[] as &[usize]);
        assert_eq!(s.softmax(a).unwrap().to_vec(), [1.0]);
        assert_eq!(s.logsumexp(a, false).unwrap().to_vec(), [2.5]);
    }
    let e = s.sum(1, false).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::AxisOutOfRange { rank: 0, low: -1, high: 0, .. }), "{e}");
    assert!(matches!(s.sum([0, -1], false).unwrap_err().kind(), ErrorKind::DuplicateAxis { .. }));
    // and the gradient flows through
    let v = Tensor::variable(vec![3.0], &[]).unwrap();
    v.sum(0, false).unwrap().scale(2.0).backward().unwrap();
    assert_eq!(v.grad().unwrap().to_vec(), [2.0]);
}

#[test]
fn error_messages_speak_of_the_callers_arguments() {
    let msg = |r: forgia::Result<Tensor>| r.unwrap_err().to_string();
    let m = msg(t(&[2, 3]).matmul(&t(&[4])));
    assert!(m.contains("[2, 3]") && m.contains("[4]") && !m.contains("[4, 1]"), "{m}");
    let m = msg(t(&[4]).matmul(&t(&[3, 2])));
    assert!(m.contains("[4]") && m.contains("[3, 2]") && !m.contains("[1, 4]"), "{m}");
    let x1 = t(&[1, 2, 5]);
    let w1 = t(&[3, 2, 7]);
    let m = msg(x1.conv1d(&w1, None, Conv1dOptions::default()));
    assert!(m.starts_with("conv1d") && !m.contains("conv2d"), "{m}");
    let m = msg(x1.conv1d(&t(&[3, 2, 3]), None, Conv1dOptions { stride: 0, ..Conv1dOptions::default() }));
    assert!(m.starts_with("conv1d: invalid stride") && !m.contains("(1, 0)"), "{m}");
    let m = msg(x1.conv1d(&t(&[3, 4, 3]), None, Conv1dOptions::default()));
    assert!(m.contains("[1, 2, 5]") && m.contains("[3, 4, 3]"), "{m}");
    let m = msg(t(&[2, 3]).squeeze(1));
    assert!(m.contains("axis 1 has size 3"), "{m}");
    let m = msg(t(&[2, 3]).unsqueeze(3));
    assert!(m.contains("-3..=2"), "{m}");
    let m = msg(Tensor::one_hot(&[usize::MAX], 3));
    assert!(!m.contains("-1"), "{m}");
    let empty = t(&[0]);
    let m = msg(loss::mse_loss(&empty, &empty, Reduction::Mean));
    assert!(m.starts_with("mse_loss") && !m.contains("mean_all"), "{m}");
}
