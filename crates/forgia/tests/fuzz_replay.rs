//! The fuzz target bodies (`fuzz/src/bodies.rs`) on the stable toolchain: a fixed corpus of
//! edge cases always, and seeded random inputs in an ignored long run
//! (`cargo test -p forgia --test fuzz_replay -- --ignored`). Coverage-guided fuzzing with
//! cargo-fuzz needs nightly; see docs/VERIFICATION.md.

#[path = "../../../fuzz/src/bodies.rs"]
mod bodies;

use forgia::Rng;

fn random_input(rng: &mut Rng) -> Vec<u8> {
    let len = rng.below(256);
    (0..len).map(|_| rng.next_u64() as u8).collect()
}

/// Inputs that reached interesting paths, kept as regressions.
fn corpus() -> Vec<Vec<u8>> {
    vec![
        vec![],
        vec![0],
        vec![1],
        vec![3, 0, 0, 0],
        b"\x08\x00\x00\x00\x00\x00\x00\x00{}".to_vec(),
        b"\xff\xff\xff\xff\xff\xff\xff\xff".to_vec(),
        vec![40, 4, 4, 0, 4, 0, 1, 2, 17, 0, 0, 0, 0, 0, 24, 4, 0, 255],
        vec![47, 18, 4, 4, 4, 4, 4, 4, 13, 0, 0, 0, 24, 0, 0, 2, 0],
        // Huge sizes (bytes 250.. pick from `HUGE` in bodies.rs): a scalar broadcast to
        // [2^40, 1] and [2^62, 2^62 + 1] (ops on views far beyond memory), reshapes of the
        // empty [0, 3] to [0, usize::MAX] and [2^62, 4] (wrapping counts), a [0, 2^40] seed.
        vec![10, 18, 3, 0, 2, 250, 1],
        vec![10, 18, 3, 0, 2, 252, 253],
        vec![10, 13, 4, 0, 2, 0, 255],
        vec![10, 13, 4, 0, 2, 252, 4],
        vec![4, 24, 4, 0, 0xf0, 2, 0, 250],
        // cargo-fuzz op_sequence crash-099e03b3 (gemm bounds on an empty view).
        vec![
            64, 226, 33, 0, 238, 238, 35, 238, 238, 17, 49, 1, 33, 209, 238, 241, 238, 238, 239, 238, 254, 226, 122,
            209, 19, 209, 19,
        ],
    ]
}

// Found by the random replay: a packed empty tensor whose shape has a 0 before other axes
// (`[0, 2, 0, 3]`) was reported non-contiguous, and reducing it panicked in `packed()`.
#[test]
fn reducing_a_gradient_of_an_empty_broadcast_result_returns_a_zero_gradient() {
    let s = forgia::Tensor::scalar(0.5).into_variable();
    let empty = forgia::Tensor::zeros(&[0, 3]).unwrap().broadcast_to(&[0, 2, 0, 3]).unwrap();
    let y = s.sub(&empty).unwrap();
    y.backward_with_grad(&forgia::Tensor::ones(&[0, 2, 0, 3]).unwrap()).unwrap();
    assert_eq!(s.grad().unwrap().to_vec(), vec![0.0]);
    let packed = forgia::Tensor::zeros(&[0, 2, 0, 3]).unwrap();
    assert!(packed.is_contiguous());
    assert_eq!(packed.sum(1, false).unwrap().shape(), &[0, 0, 3]);
}

// cargo-fuzz (op_sequence) found matmul's bounds assertion firing on an empty operand whose
// view offset lies past its storage's end (nothing is read); the reproducer is in the corpus
// below (crash-099e03b3). This test pins the neighbouring empty-matmul cases.
#[test]
fn a_matmul_of_an_empty_view_sliced_past_the_end_is_empty() {
    let x = forgia::Tensor::variable(vec![1.0; 6], &[2, 3]).unwrap();
    let empty = x.slice(0, 2, 2, 1).unwrap().slice(1, 3, 3, 1).unwrap(); // [0, 0] at offset 9
    let y = empty.matmul(&forgia::Tensor::zeros(&[0, 2]).unwrap()).unwrap();
    assert_eq!(y.shape(), &[0, 2]);
    let k0 = x.narrow(1, 3, 0).unwrap().matmul(&forgia::Tensor::zeros(&[0, 2]).unwrap()).unwrap(); // k = 0
    assert_eq!(k0.to_vec(), vec![0.0; 4]);
    k0.sum_all().backward().unwrap();
    assert_eq!(x.grad().unwrap().to_vec(), vec![0.0; 6]);
}

// Found by the long seeded replay: reducing non-adjacent axes one of which is empty computed
// the kept block count as numel / red = 0, so the output buffer was empty for a non-empty
// shape (a debug assertion; wrong data in release).
#[test]
fn summing_non_adjacent_axes_including_an_empty_one_gives_zeros_of_the_kept_shape() {
    let x = forgia::Tensor::zeros(&[0, 2, 3]).unwrap().into_variable();
    let s = x.sum([0, 2], false).unwrap();
    assert_eq!((s.shape(), s.to_vec()), (&[2][..], vec![0.0, 0.0]));
    let e = x.mean([0, 2], true).unwrap_err(); // a mean over no elements is refused, not NaN
    assert!(matches!(e.kind(), forgia::ErrorKind::EmptyTensor { .. }));
    s.backward_with_grad(&forgia::Tensor::ones(&[2]).unwrap()).unwrap();
    assert_eq!(x.grad().unwrap().shape(), &[0, 2, 3]);
}

#[test]
fn the_fuzz_bodies_survive_their_regression_corpus() {
    for input in corpus() {
        bodies::load_checkpoint(&input);
        bodies::op_sequence(&input);
    }
}

#[test]
fn the_fuzz_bodies_survive_a_few_hundred_seeded_random_inputs() {
    let mut rng = Rng::new(0xf022);
    for _ in 0..300 {
        let input = random_input(&mut rng);
        bodies::load_checkpoint(&input);
        bodies::op_sequence(&input);
    }
}

#[test]
#[ignore = "long configuration: 200,000 seeded random inputs per target"]
fn the_fuzz_bodies_survive_many_seeded_random_inputs() {
    let mut rng = Rng::new(std::env::var("FUZZ_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(1));
    for _ in 0..200_000 {
        let input = random_input(&mut rng);
        bodies::load_checkpoint(&input);
        bodies::op_sequence(&input);
    }
}
