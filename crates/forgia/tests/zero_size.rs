//! Zero-size axes are ordinary sizes: an op over them gives an empty or all-zero result (as in
//! PyTorch) or a named error, never a panic — in the forward pass and in backward.

use forgia::{Conv2dOptions, ErrorKind, Tensor};

fn z(shape: &[usize]) -> Tensor {
    Tensor::zeros(shape).unwrap()
}

#[test]
fn a_product_over_an_empty_inner_axis_is_zeros_of_the_right_shape() {
    let y = z(&[2, 3, 0]).matmul(&z(&[0, 4])).unwrap();
    assert_eq!((y.shape(), y.to_vec()), (&[2, 3, 4][..], vec![0.0; 24]));
    let e = Tensor::einsum("ij,jk->ik", &z(&[2, 0]), &z(&[0, 3])).unwrap();
    assert_eq!((e.shape(), e.to_vec()), (&[2, 3][..], vec![0.0; 6]));
}

#[test]
fn linear_with_no_input_features_gives_zeros_for_every_row() {
    let y = z(&[3, 0]).linear(&z(&[4, 0]), None).unwrap();
    assert_eq!((y.shape(), y.to_vec()), (&[3, 4][..], vec![0.0; 12]));
    let b = Tensor::from_vec(vec![1.0, 2.0, 3.0, 4.0], &[4]).unwrap();
    assert_eq!(z(&[3, 0]).linear(&z(&[4, 0]), Some(&b)).unwrap().to_vec()[..4], [1.0, 2.0, 3.0, 4.0]);
}

#[test]
fn a_convolution_with_no_output_channels_runs_forward_and_backward() {
    let w = z(&[0, 1, 3, 3]).into_variable();
    let x = z(&[1, 1, 4, 4]).into_variable();
    let y = x.conv2d(&w, None, Conv2dOptions::default()).unwrap();
    assert_eq!(y.shape(), &[1, 0, 2, 2]);
    y.sum_all().backward().unwrap();
    assert_eq!(x.grad().unwrap().to_vec(), vec![0.0; 16]);
}

#[test]
fn a_convolution_with_no_input_channels_gives_zeros() {
    let y = z(&[1, 0, 4, 4]).conv2d(&z(&[2, 0, 3, 3]), None, Conv2dOptions::default()).unwrap();
    assert_eq!((y.shape(), y.to_vec()), (&[1, 2, 2, 2][..], vec![0.0; 8]));
}

#[test]
fn a_kernel_axis_of_zero_is_a_named_error() {
    let e = z(&[1, 1, 4, 4]).conv2d(&z(&[1, 1, 0, 3]), None, Conv2dOptions::default()).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::InvalidArgument { op: "conv2d", .. }), "{e}");
}

#[test]
fn a_transposed_convolution_of_an_empty_batch_is_empty() {
    let y = z(&[0, 1, 4, 4]).conv_transpose2d(&z(&[1, 2, 3, 3]), None, Default::default()).unwrap();
    assert_eq!(y.shape(), &[0, 2, 6, 6]);
}

#[test]
fn rope_over_an_empty_head_is_empty_forward_and_backward() {
    let x = z(&[2, 3, 0]).into_variable();
    let y = x.rope(10000.0).unwrap();
    assert_eq!(y.shape(), &[2, 3, 0]);
    y.sum_all().backward().unwrap();
    assert_eq!(x.grad().unwrap().shape(), &[2, 3, 0]);
}
