//! Sizes near `usize::MAX` and allocations no machine can satisfy: each is an `Err` of its
//! named kind (`SizeOverflow`, `OutOfMemory`, `WorkLimitExceeded`), never a panic, an abort,
//! a crash or a hang. Cases whose regression would kill the test binary (a SIGSEGV, an abort
//! on a failed allocation) run in a child process (`common::isolated`).
//!
//! Every size asked for here is at least 2^40 elements (4 TiB), refused by any machine's
//! allocator, so nothing in this file touches such memory.

mod common;

use common::isolated::isolated;
use forgia::data::BatchIterator;
use forgia::nn::{Embedding, LayerNorm, Linear};
use forgia::{Conv2dOptions, ErrorKind, Indices, Result, Rng, Tensor};

const HUGE: usize = 1 << 40;

fn overflow<T>(r: Result<T>) -> bool {
    matches!(r.map(drop).unwrap_err().kind(), ErrorKind::SizeOverflow { .. })
}

fn oom<T>(r: Result<T>) -> bool {
    matches!(r.map(drop).unwrap_err().kind(), ErrorKind::OutOfMemory { .. })
}

fn too_much_work<T>(r: Result<T>) -> bool {
    matches!(r.map(drop).unwrap_err().kind(), ErrorKind::WorkLimitExceeded { .. })
}

fn small() -> Tensor {
    Tensor::from_vec(vec![1.0, 2.0, 3.0, 4.0], &[1, 1, 2, 2]).unwrap()
}

#[test]
fn a_reshape_whose_element_count_wraps_to_zero_is_refused_before_any_gemm_runs() {
    isolated("a_reshape_whose_element_count_wraps_to_zero_is_refused_before_any_gemm_runs", || {
        // The issue's reproducer: in release it used to read out of bounds in the GEMM.
        let b = Tensor::ones(&[1, 1]).unwrap().broadcast_to(&[1 << 62, 1]).unwrap();
        let r = Tensor::zeros(&[0]).unwrap().reshape(&[4, 1 << 62]).and_then(|a| a.matmul(&b));
        let e = r.unwrap_err();
        assert!(matches!(e.kind(), ErrorKind::SizeOverflow { op: "reshape", shape } if shape == &[4, 1 << 62]));
    });
}

#[test]
fn an_empty_tensor_with_a_huge_axis_is_legal_but_its_reshape_to_an_overflowing_shape_is_not() {
    let t = Tensor::zeros(&[0, 1 << 62]).unwrap();
    assert_eq!((t.numel(), t.shape()), (0, &[0, 1 << 62][..]));
    assert_eq!(t.sum_all().item().unwrap(), 0.0);
    assert_eq!(t.reshape(&[1 << 62, 0]).unwrap().numel(), 0);
    assert!(overflow(t.reshape(&[4, 1 << 62])));
    assert!(overflow(Tensor::zeros(&[0, 1 << 32, 1 << 32])));
}

#[test]
fn from_vec_with_a_wrapping_shape_is_a_size_overflow() {
    assert!(overflow(Tensor::from_vec(vec![], &[0, 1 << 32, 1 << 32])));
    assert!(overflow(Tensor::from_vec(vec![], &[1 << 32, 1 << 32])));
}

#[test]
fn full_with_a_wrapping_shape_is_a_size_overflow() {
    assert!(overflow(Tensor::full(&[1 << 32, 1 << 32], 1.0)));
}

#[test]
fn randn_with_a_wrapping_shape_is_a_size_overflow() {
    assert!(overflow(Tensor::randn(&[1 << 32, 1 << 32], 0.0, 1.0, &mut Rng::new(0))));
}

#[test]
fn indices_with_a_wrapping_shape_is_a_size_overflow() {
    assert!(overflow(Indices::new(vec![], &[0, 1 << 32, 1 << 32])));
}

#[test]
fn reshape_infer_with_wrapping_known_sizes_is_a_size_overflow() {
    assert!(overflow(Tensor::zeros(&[0]).unwrap().reshape_infer(&[-1, 1 << 32, 1 << 32])));
}

#[test]
fn repeat_whose_counts_wrap_is_a_size_overflow() {
    assert!(overflow(Tensor::zeros(&[0, 4]).unwrap().repeat(&[1, usize::MAX])));
    assert!(overflow(Tensor::zeros(&[3]).unwrap().repeat(&[1 << 62])));
}

#[test]
fn pad_whose_sizes_wrap_is_a_size_overflow() {
    assert!(overflow(Tensor::zeros(&[2]).unwrap().pad(&[(usize::MAX, 1)], 0.0)));
}

#[test]
fn split_whose_sizes_wrap_is_an_error_not_a_panic() {
    let r = Tensor::zeros(&[4]).unwrap().split(0, &[usize::MAX, 5]);
    assert!(matches!(r.unwrap_err().kind(), ErrorKind::InvalidArgument { .. }));
}

#[test]
fn eye_whose_square_wraps_is_a_size_overflow() {
    assert!(overflow(Tensor::eye(1 << 32)));
}

#[test]
fn upsample_by_a_wrapping_scale_is_a_size_overflow() {
    assert!(overflow(small().upsample_nearest2d(usize::MAX)));
}

#[test]
fn conv_and_pool_paddings_near_usize_max_are_errors_not_panics() {
    let w = Tensor::ones(&[1, 1, 1, 1]).unwrap();
    let opts = Conv2dOptions { padding: (usize::MAX / 2 + 1, 0), ..Default::default() };
    assert!(small().conv2d(&w, None, opts).is_err());
    let opts = Conv2dOptions { dilation: (usize::MAX, 1), ..Default::default() };
    assert!(small().conv2d(&Tensor::ones(&[1, 1, 2, 1]).unwrap(), None, opts).is_err());
    assert!(small().max_pool2d((usize::MAX, 1), (1, 1), (usize::MAX / 2, 0)).is_err());
    assert!(small().avg_pool2d((2, 2), (1, 1), (usize::MAX, 0)).is_err());
}

#[test]
fn matmul_of_broadcast_views_whose_batch_wraps_is_a_size_overflow() {
    let a = Tensor::ones(&[1, 1, 1]).unwrap().broadcast_to(&[1 << 32, 1, 1]).unwrap();
    let b = Tensor::ones(&[1, 1, 1, 1]).unwrap().broadcast_to(&[1 << 32, 1, 1, 1]).unwrap();
    assert!(overflow(a.matmul(&b)));
    let a = Tensor::ones(&[1, 1]).unwrap().broadcast_to(&[1 << 40, 1]).unwrap();
    let b = Tensor::ones(&[1, 1]).unwrap().broadcast_to(&[1, 1 << 40]).unwrap();
    assert!(overflow(a.matmul(&b)));
}

#[test]
fn a_matmul_of_two_broadcast_views_with_a_huge_inner_size_is_refused_not_run_for_hours() {
    let a = Tensor::ones(&[1, 1]).unwrap().broadcast_to(&[1, 1 << 62]).unwrap();
    let b = Tensor::ones(&[1, 1]).unwrap().broadcast_to(&[1 << 62, 1]).unwrap();
    let e = a.matmul(&b).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::WorkLimitExceeded { op: "matmul", .. }), "{e:?}");
    assert!(too_much_work(a.sum(1, false)));
}

#[test]
fn a_batch_iterator_over_a_wrapping_sample_shape_is_a_size_overflow() {
    assert!(overflow(BatchIterator::new(vec![], &[1 << 32, 1 << 32], vec![0], 1, 0)));
    assert!(overflow(BatchIterator::new(vec![], &[1 << 62], vec![0; 4], 1, 0)));
}

#[test]
fn a_safetensors_header_with_a_wrapping_shape_is_refused_before_allocating() {
    let header = br#"{"t":{"dtype":"F32","shape":[0,4294967296,4294967296],"data_offsets":[0,0]}}"#;
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(header);
    let path = std::env::temp_dir().join(format!("forgia-huge-header-{}.safetensors", std::process::id()));
    std::fs::write(&path, &bytes).unwrap();
    let r = forgia::io::load(&path);
    let _ = std::fs::remove_file(&path);
    let e = r.unwrap_err();
    assert!(
        matches!(e.kind(), ErrorKind::SizeOverflow { .. } | ErrorKind::Checkpoint { .. }),
        "a wrapping header shape must be refused: {e:?}"
    );
}

#[test]
fn constructors_that_cannot_be_allocated_are_out_of_memory_errors() {
    isolated("constructors_that_cannot_be_allocated_are_out_of_memory_errors", || {
        let mut rng = Rng::new(0);
        assert!(oom(Tensor::zeros(&[HUGE])));
        assert!(oom(Tensor::ones(&[HUGE])));
        assert!(oom(Tensor::full(&[HUGE], 2.0)));
        assert!(oom(Tensor::eye(1 << 20)));
        assert!(oom(Tensor::linspace(0.0, 1.0, HUGE)));
        assert!(oom(Tensor::rand(&[HUGE], 0.0, 1.0, &mut rng)));
        assert!(oom(Tensor::randn(&[HUGE], 0.0, 1.0, &mut rng)));
        assert!(oom(Tensor::arange(0.0, HUGE as f32, 1.0)));
        assert!(oom(Tensor::one_hot(&[0], HUGE)));
    });
}

#[test]
fn modules_too_large_to_allocate_are_out_of_memory_errors() {
    isolated("modules_too_large_to_allocate_are_out_of_memory_errors", || {
        let mut rng = Rng::new(0);
        assert!(oom(Linear::new(1 << 20, 1 << 20, true, &mut rng)));
        assert!(oom(Embedding::new(1 << 20, 1 << 20, &mut rng)));
        assert!(oom(LayerNorm::new(&[1 << 20, 1 << 20], 1e-5)));
    });
}

#[test]
fn ops_on_a_broadcast_view_far_beyond_memory_are_errors_or_cost_only_its_storage() {
    isolated("ops_on_a_broadcast_view_far_beyond_memory_are_errors_or_cost_only_its_storage", || {
        let v = Tensor::scalar(1.0).broadcast_to(&[HUGE]).unwrap();
        // Fallible ops: the logical size is refused.
        assert!(oom(v.add(&v)));
        assert!(oom(v.sum(0, false)));
        assert!(oom(v.softmax(0)));
        assert!(oom(v.contiguous()));
        assert!(oom(v.try_to_vec()));
        assert!(oom(Tensor::zeros_like(&v)));
        assert!(oom(v.reshape(&[1 << 20, 1 << 20])));
        let wide = Tensor::scalar(1.0).broadcast_to(&[2 * HUGE]).unwrap();
        assert!(too_much_work(wide.sum(0, false)));
        // Infallible pointwise ops and sum_all work on the one stored element.
        let y = v.tanh().scale(2.0).relu();
        assert_eq!(y.shape(), &[HUGE]);
        assert_eq!(y.strides(), &[0]);
        assert_eq!(v.sum_all().item().unwrap(), HUGE as f32);
        assert_eq!(v.mean_all().unwrap().item().unwrap(), 1.0);
    });
}
