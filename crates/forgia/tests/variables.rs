//! A variable has identity: every handle of it sees every update, a graph built before an
//! update keeps the values its forward pass saw, and a parameter held twice (tied weights) is
//! listed, stepped and saved once.

use forgia::nn::Module;
use forgia::optim::{Optimizer, Sgd, SgdConfig};
use forgia::{no_grad, Tensor};

fn scale_in_place(t: &mut Tensor, by: f32) {
    let _guard = no_grad();
    t.with_data_mut(|d| d.iter_mut().for_each(|v| *v *= by)).unwrap();
}

#[test]
fn every_handle_of_a_variable_sees_an_update() {
    let mut w = Tensor::variable(vec![1.0, 2.0, 3.0], &[3]).unwrap();
    let held = w.clone();
    scale_in_place(&mut w, 2.0);
    assert_eq!(held.to_vec(), vec![2.0, 4.0, 6.0]);
    assert!(held.same_variable(&w));
    // ... and an update through the held handle is seen by the first.
    let mut held = held;
    scale_in_place(&mut held, 0.5);
    assert_eq!(w.to_vec(), vec![1.0, 2.0, 3.0]);
}

#[test]
fn a_graph_built_before_an_update_backpropagates_through_the_values_it_saw() {
    let mut w = Tensor::variable(vec![1.0, 2.0], &[2]).unwrap();
    let x = Tensor::variable(vec![3.0, 4.0], &[2]).unwrap();
    let loss = x.mul(&w).unwrap().sum_all(); // d loss / dx = w as seen now: [1, 2]
    scale_in_place(&mut w, 10.0);
    assert_eq!(w.to_vec(), vec![10.0, 20.0]);
    loss.backward().unwrap();
    assert_eq!(x.grad().unwrap().to_vec(), vec![1.0, 2.0]);
    assert_eq!(w.grad().unwrap().to_vec(), vec![3.0, 4.0]);
}

#[test]
fn a_clone_of_a_constant_keeps_its_values_after_the_original_is_written() {
    let mut c = Tensor::from_vec(vec![1.0, 2.0], &[2]).unwrap();
    let copy = c.clone();
    scale_in_place(&mut c, 3.0);
    assert_eq!(c.to_vec(), vec![3.0, 6.0]);
    assert_eq!(copy.to_vec(), vec![1.0, 2.0]);
}

#[test]
fn a_detached_snapshot_of_a_variable_keeps_its_values_after_an_update() {
    let mut w = Tensor::variable(vec![1.0, 2.0], &[2]).unwrap();
    let snapshot = w.detach();
    scale_in_place(&mut w, 2.0);
    assert_eq!(snapshot.to_vec(), vec![1.0, 2.0]);
    assert_eq!(w.to_vec(), vec![2.0, 4.0]);
}

#[test]
fn two_variables_made_from_one_constant_are_distinct() {
    let c = Tensor::from_vec(vec![1.0], &[1]).unwrap();
    let (mut a, b) = (c.clone().into_variable(), c.into_variable());
    assert!(!a.same_variable(&b));
    scale_in_place(&mut a, 5.0);
    assert_eq!((a.to_vec(), b.to_vec()), (vec![5.0], vec![1.0]));
}

#[test]
#[should_panic(expected = "read from inside its own update closure")]
fn reading_a_variable_inside_its_own_update_is_a_panic_not_a_hang() {
    let w = Tensor::variable(vec![1.0], &[1]).unwrap();
    let mut handle = w.clone();
    let _guard = no_grad();
    let _ = handle.with_data_mut(|d| d[0] = w.to_vec()[0]);
}

/// Two "layers" that hold one variable: y = (x · w) · w, with `w` under two names.
struct Tied {
    first: Tensor,
    second: Tensor,
}

impl Module for Tied {
    fn visit_params(&self, f: &mut dyn FnMut(&str, &Tensor)) {
        f("first.weight", &self.first);
        f("second.weight", &self.second);
    }
    fn visit_params_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor)) {
        f("first.weight", &mut self.first);
        f("second.weight", &mut self.second);
    }
}

fn tied() -> Tied {
    let w = Tensor::variable(vec![0.5, -1.0, 2.0], &[3]).unwrap();
    Tied { first: w.clone(), second: w }
}

#[test]
fn a_tied_parameter_is_listed_once_and_stepped_once() {
    let mut model = tied();
    let names: Vec<String> = model.named_parameters().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["first.weight"]);
    assert_eq!(model.num_parameters(), 3);
    let x = Tensor::from_vec(vec![1.0, 2.0, 3.0], &[3]).unwrap();
    // loss = sum(x · w · w): d/dw = 2 x w, the sum of both uses.
    let loss = x.mul(&model.first).unwrap().mul(&model.second).unwrap().sum_all();
    loss.backward().unwrap();
    let w0 = model.first.to_vec();
    let g: Vec<f32> = w0.iter().zip([1.0, 2.0, 3.0]).map(|(w, x)| 2.0 * x * w).collect();
    assert_eq!(model.first.grad().unwrap().to_vec(), g);
    let mut opt = Sgd::new(SgdConfig { lr: 0.1, ..SgdConfig::default() }).unwrap();
    opt.step(&mut model).unwrap();
    let expected: Vec<f32> = w0.iter().zip(&g).map(|(w, g)| w - 0.1 * g).collect();
    assert_eq!(model.first.to_vec(), expected);
    assert_eq!(model.second.to_vec(), expected, "both handles see the one step");
}

#[test]
fn a_tied_parameter_is_saved_once_and_its_tie_survives_a_load() {
    let dir = std::env::temp_dir().join(format!("forgia-tied-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("tied.safetensors");
    let model = tied();
    forgia::io::save_model(&path, &model).unwrap();
    let names: Vec<String> = forgia::io::load(&path).unwrap().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["first.weight"]);
    let mut fresh = Tied { first: Tensor::variable(vec![0.0; 3], &[3]).unwrap(), second: Tensor::zeros(&[3]).unwrap() };
    fresh.second = fresh.first.clone();
    forgia::io::load_into(&mut fresh, &path).unwrap();
    assert_eq!(fresh.second.to_vec(), model.first.to_vec());
    scale_in_place(&mut fresh.first, 2.0);
    assert_eq!(fresh.second.to_vec(), fresh.first.to_vec());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Named parameters of any list, for the partly-tied case.
struct Params(Vec<(&'static str, Tensor)>);

impl Module for Params {
    fn visit_params(&self, f: &mut dyn FnMut(&str, &Tensor)) {
        self.0.iter().for_each(|(n, t)| f(n, t));
    }
    fn visit_params_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor)) {
        self.0.iter_mut().for_each(|(n, t)| f(n, t));
    }
}

#[test]
fn a_model_whose_parameters_are_only_partly_tied_keeps_the_rest_separate() {
    let w = Tensor::variable(vec![1.0], &[1]).unwrap();
    let model = Params(vec![("a", w.clone()), ("b", w), ("c", Tensor::variable(vec![2.0], &[1]).unwrap())]);
    let names: Vec<String> = model.named_parameters().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["a", "c"]);
    assert_eq!(model.num_parameters(), 2);
}
