//! A first end-to-end check of the engine on the chapter's examples.
use forgia::Tensor;

#[test]
fn fan_out_accumulates_at_tensor_rank() {
    let x = Tensor::variable(vec![3.0, 5.0], &[2]).unwrap();
    let loss = x.mul(&x).unwrap().add(&x.scale(4.0)).unwrap().sum_all();
    loss.backward().unwrap();
    assert_eq!(x.grad().unwrap().to_vec(), vec![10.0, 14.0]);
}

#[test]
fn matmul_gradients_match_hand_values() {
    let a = Tensor::variable(vec![1.0, 2.0, 3.0, 4.0], &[2, 2]).unwrap();
    let b = Tensor::variable(vec![5.0, 6.0, 7.0, 8.0], &[2, 2]).unwrap();
    a.matmul(&b).unwrap().sum_all().backward().unwrap();
    // ga = ones · bᵀ, gb = aᵀ · ones
    assert_eq!(a.grad().unwrap().to_vec(), vec![11.0, 15.0, 11.0, 15.0]);
    assert_eq!(b.grad().unwrap().to_vec(), vec![4.0, 4.0, 6.0, 6.0]);
}
