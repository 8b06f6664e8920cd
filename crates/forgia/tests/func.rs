//! Function transforms (`forgia::func`): analytic values on a quadratic form, `tanh(Wx)` and a
//! two-layer tanh MLP; central differences; `torch.func` goldens (`tests/golden/func.json`,
//! from `tools/reference/generate_func.py`); composition through `create_graph`; the caller's
//! tensors left alone; and the errors.

mod common;

use common::golden::{assert_close, tensor};
use forgia::func::{self, FuncOptions, JacobianMode};
use forgia::{no_grad, ErrorKind, Result, Tensor};
use serde_json::Value;

type F = Box<dyn Fn(&[Tensor]) -> Result<Tensor>>;

const GRAPH: FuncOptions = FuncOptions { create_graph: true };

/// A one-input slice.
fn one(x: &Tensor) -> &[Tensor] {
    std::slice::from_ref(x)
}

fn t(data: &[f32], shape: &[usize]) -> Tensor {
    Tensor::from_slice(data, shape).unwrap()
}

/// `xᵀAx`: gradient `(A + Aᵀ)x`, Hessian `A + Aᵀ`.
fn quad(a: &Tensor) -> F {
    let a = a.clone();
    Box::new(move |xs| Ok(xs[0].mul(&a.matmul(&xs[0])?)?.sum_all()))
}

/// `tanh(Wx)`: Jacobian `diag(1 - y²)·W`.
fn tanh_wx(w: &Tensor) -> F {
    let w = w.clone();
    Box::new(move |xs| Ok(w.matmul(&xs[0])?.tanh()))
}

/// `w2·tanh(w1·x + b1) + b2` over the inputs `[x, w1]`.
fn mlp(b1: &Tensor, w2: &Tensor, b2: &Tensor) -> F {
    let (b1, w2, b2) = (b1.clone(), w2.clone(), b2.clone());
    Box::new(move |xs| w2.matmul(&xs[1].matmul(&xs[0])?.add(&b1)?.tanh())?.add(&b2))
}

/// `sum(f)`, the scalar whose Hessian the goldens hold for a vector-valued `f`.
fn summed(f: F) -> F {
    Box::new(move |xs| Ok(f(xs)?.sum_all()))
}

fn a3() -> Tensor {
    t(&[2.0, 1.0, -1.0, 0.5, 3.0, 0.0, 1.5, -2.0, 1.0], &[3, 3])
}

/// `A + Aᵀ` as row-major values.
fn a_sym(a: &Tensor) -> Vec<f32> {
    a.add(&a.transpose(0, 1).unwrap()).unwrap().contiguous().unwrap().to_vec()
}

fn mlp_point() -> (F, Vec<Tensor>) {
    let b1 = t(&common::lcg(4, 3, 0.3), &[4]);
    let w2 = t(&common::lcg(8, 4, 0.8), &[2, 4]);
    let b2 = t(&common::lcg(2, 5, 0.3), &[2]);
    (mlp(&b1, &w2, &b2), vec![t(&common::lcg(3, 1, 1.0), &[3]), t(&common::lcg(12, 2, 0.8), &[4, 3])])
}

fn close(actual: &[f32], expected: &[f32], tol: f32, what: &str) {
    assert_eq!(actual.len(), expected.len(), "{what}: length");
    for (i, (a, e)) in actual.iter().zip(expected).enumerate() {
        assert!((a - e).abs() <= tol * (1.0 + e.abs()), "{what}: element {i}: got {a}, expected {e}");
    }
}

#[test]
fn vjp_of_a_quadratic_form_is_the_cotangent_times_a_plus_a_transpose_x() {
    let a = a3();
    let x = t(&[0.5, -1.0, 2.0], &[3]);
    let (y, g) = func::vjp(quad(&a), one(&x), &Tensor::scalar(3.0)).unwrap();
    let ax: Vec<f32> = a.matmul(&x).unwrap().to_vec();
    let xax: f32 = x.to_vec().iter().zip(&ax).map(|(x, ax)| x * ax).sum();
    close(&y.to_vec(), &[xax], 1e-6, "value");
    let grad = Tensor::from_vec(a_sym(&a), &[3, 3]).unwrap().matmul(&x).unwrap().scale(3.0);
    close(&g[0].to_vec(), &grad.to_vec(), 1e-6, "vjp");
}

#[test]
fn jacobian_of_tanh_wx_is_diag_one_minus_y_squared_times_w() {
    let w = t(&[0.5, -0.3, 0.8, 0.1, 0.7, -0.6], &[2, 3]);
    let x = t(&[0.4, -1.1, 0.9], &[3]);
    let y = w.matmul(&x).unwrap().tanh().to_vec();
    let expected: Vec<f32> = (0..6).map(|k| (1.0 - y[k / 3] * y[k / 3]) * w.to_vec()[k]).collect();
    for (mode, j) in [
        ("reverse", func::jacobian(tanh_wx(&w), one(&x)).unwrap()),
        ("forward", func::jacfwd(tanh_wx(&w), one(&x)).unwrap()),
    ] {
        assert_eq!(j[0].shape(), &[2, 3], "{mode}");
        close(&j[0].to_vec(), &expected, 1e-6, mode);
    }
}

#[test]
fn reverse_and_forward_jacobians_of_a_small_mlp_agree() {
    let (f, xs) = mlp_point();
    let rev = func::jacobian(&f, &xs).unwrap();
    let fwd = func::jacfwd(&f, &xs).unwrap();
    assert_eq!(rev[0].shape(), &[2, 3]);
    assert_eq!(rev[1].shape(), &[2, 4, 3]);
    for (i, (r, w)) in rev.iter().zip(&fwd).enumerate() {
        assert_eq!(r.shape(), w.shape());
        close(&r.to_vec(), &w.to_vec(), 1e-6, &format!("block {i}"));
    }
}

#[test]
fn hessian_of_a_quadratic_form_is_a_plus_a_transpose() {
    let a = a3();
    let h = func::hessian(quad(&a), &[t(&[0.5, -1.0, 2.0], &[3])]).unwrap();
    assert_eq!(h.len(), 1);
    assert_eq!(h[0][0].shape(), &[3, 3]);
    close(&h[0][0].to_vec(), &a_sym(&a), 1e-6, "hessian");
}

#[test]
fn hvp_of_a_quadratic_form_is_a_plus_a_transpose_times_v() {
    let a = a3();
    let v = t(&[1.0, 0.5, -2.0], &[3]);
    let (y, hv) = func::hvp(quad(&a), &[t(&[0.5, -1.0, 2.0], &[3])], one(&v)).unwrap();
    assert_eq!(y.shape(), &[] as &[usize]);
    let expected = Tensor::from_vec(a_sym(&a), &[3, 3]).unwrap().matmul(&v).unwrap();
    close(&hv[0].to_vec(), &expected.to_vec(), 1e-6, "hvp");
}

#[test]
fn jvp_of_tanh_wx_is_the_jacobian_times_the_tangent() {
    let w = t(&[0.5, -0.3, 0.8, 0.1, 0.7, -0.6], &[2, 3]);
    let x = t(&[0.4, -1.1, 0.9], &[3]);
    let tangent = t(&[1.0, -0.5, 0.25], &[3]);
    let (y, jt) = func::jvp(tanh_wx(&w), one(&x), one(&tangent)).unwrap();
    let yv = w.matmul(&x).unwrap().tanh().to_vec();
    close(&y.to_vec(), &yv, 1e-6, "value");
    let wt = w.matmul(&tangent).unwrap().to_vec();
    let expected: Vec<f32> = (0..2).map(|r| (1.0 - yv[r] * yv[r]) * wt[r]).collect();
    close(&jt.to_vec(), &expected, 1e-6, "jvp");
}

/// Central differences of `f` at `xs` along the direction `dir` (one tensor per input), in f64.
fn directional(f: &F, xs: &[Tensor], dir: &[Tensor], eps: f64) -> Vec<f64> {
    let at = |s: f64| -> Vec<f64> {
        let moved: Vec<Tensor> = xs
            .iter()
            .zip(dir)
            .map(|(x, d)| {
                let data = x.to_vec().iter().zip(d.to_vec()).map(|(&x, d)| (x as f64 + s * d as f64) as f32).collect();
                Tensor::from_vec(data, x.shape()).unwrap()
            })
            .collect();
        f(&moved).unwrap().to_vec().iter().map(|&v| v as f64).collect()
    };
    at(eps).iter().zip(at(-eps)).map(|(p, m)| (p - m) / (2.0 * eps)).collect()
}

#[test]
fn transforms_of_a_small_mlp_match_central_differences() {
    let (f, xs) = mlp_point();
    let zeros = |x: &Tensor| Tensor::zeros(x.shape()).unwrap();
    let eps = 1e-2;
    let check = |got: &[f32], want: &[f64], what: &str| {
        for (i, (g, w)) in got.iter().zip(want).enumerate() {
            assert!((*g as f64 - w).abs() <= 2e-3 + 2e-3 * w.abs(), "{what} element {i}: {g} vs numeric {w}");
        }
    };
    // Jacobian columns: directional derivatives along each basis vector of each input.
    let jac = func::jacobian(&f, &xs).unwrap();
    for (i, x) in xs.iter().enumerate() {
        let n = x.numel();
        let block = jac[i].to_vec();
        for k in 0..n {
            let mut dir: Vec<Tensor> = xs.iter().map(zeros).collect();
            let mut e = vec![0.0; n];
            e[k] = 1.0;
            dir[i] = t(&e, x.shape());
            let column: Vec<f32> = (0..2).map(|r| block[r * n + k]).collect();
            check(&column, &directional(&f, &xs, &dir, eps), &format!("jacobian block {i} column {k}"));
        }
    }
    // jvp along a random tangent.
    let tangents: Vec<Tensor> =
        xs.iter().enumerate().map(|(i, x)| t(&common::lcg(x.numel(), 40 + i as u64, 1.0), x.shape())).collect();
    let (_, jt) = func::jvp(&f, &xs, &tangents).unwrap();
    check(&jt.to_vec(), &directional(&f, &xs, &tangents, eps), "jvp");
    // hvp: central differences of the gradient (from vjp) along v.
    let s = summed(Box::new(move |xs| f(xs)));
    let grad_flat: F = {
        let (f2, _) = mlp_point();
        Box::new(move |xs: &[Tensor]| {
            let (_, g) = func::vjp(&f2, xs, &Tensor::ones(&[2])?)?;
            Tensor::concat(&[&g[0].reshape(&[3])?, &g[1].reshape(&[12])?], 0)
        })
    };
    let (_, hv) = func::hvp(&s, &xs, &tangents).unwrap();
    let hv_flat: Vec<f32> = hv.iter().flat_map(|h| h.to_vec()).collect();
    check(&hv_flat, &directional(&grad_flat, &xs, &tangents, eps), "hvp");
    // Hessian blocks contracted with the tangents give the same products.
    let h = func::hessian(&s, &xs).unwrap();
    for (i, row) in h.iter().enumerate() {
        let mut by_hand = vec![0.0f32; xs[i].numel()];
        for (j, block) in row.iter().enumerate() {
            let (b, tj, n) = (block.to_vec(), tangents[j].to_vec(), xs[j].numel());
            for (r, out) in by_hand.iter_mut().enumerate() {
                *out += (0..n).map(|c| b[r * n + c] * tj[c]).sum::<f32>();
            }
        }
        close(&by_hand, &hv[i].to_vec(), 1e-5, &format!("hessian row {i} times v"));
    }
}

fn golden_function(case: &Value) -> F {
    let c = |name: &str| tensor(&case["constants"][name]);
    match case["name"].as_str().unwrap() {
        "quad" => quad(&c("a")),
        "tanh_wx" => tanh_wx(&c("w")),
        "mlp" => mlp(&c("b1"), &c("w2"), &c("b2")),
        other => panic!("unknown golden function {other}"),
    }
}

#[test]
fn transforms_match_torch_func_goldens() {
    let path = format!("{}/tests/golden/func.json", env!("CARGO_MANIFEST_DIR"));
    let file: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let tensors = |v: &Value| -> Vec<Tensor> { v.as_array().unwrap().iter().map(tensor).collect() };
    let rel = 1e-4;
    for case in file["cases"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let f = golden_function(case);
        let xs = tensors(&case["inputs"]);
        let (y, vj) = func::vjp(&f, &xs, &tensor(&case["cotangent"])).unwrap();
        assert_close(&y, &tensor(&case["output"]), rel, &format!("{name} output"));
        for (i, (got, want)) in vj.iter().zip(tensors(&case["vjp"])).enumerate() {
            assert_close(got, &want, rel, &format!("{name} vjp {i}"));
        }
        let (_, jt) = func::jvp(&f, &xs, &tensors(&case["tangents"])).unwrap();
        assert_close(&jt, &tensor(&case["jvp"]), rel, &format!("{name} jvp"));
        for (mode, key) in [(JacobianMode::Reverse, "jacrev"), (JacobianMode::Forward, "jacfwd")] {
            let j = func::jacobian_with(&f, &xs, mode, FuncOptions::default()).unwrap();
            for (i, (got, want)) in j.iter().zip(tensors(&case[key])).enumerate() {
                assert_close(got, &want, rel, &format!("{name} {key} {i}"));
            }
        }
        let s = if case["hessian_of"] == "f" { f } else { summed(f) };
        let h = func::hessian(&s, &xs).unwrap();
        for (i, row) in case["hessian"].as_array().unwrap().iter().enumerate() {
            for (j, want) in tensors(row).iter().enumerate() {
                assert_close(&h[i][j], want, rel, &format!("{name} hessian {i} {j}"));
            }
        }
        let (_, hv) = func::hvp(&s, &xs, &tensors(&case["hvp_vectors"])).unwrap();
        for (i, (got, want)) in hv.iter().zip(tensors(&case["hvp"])).enumerate() {
            assert_close(got, &want, rel, &format!("{name} hvp {i}"));
        }
    }
}

#[test]
fn transforms_leave_the_callers_variables_and_their_gradients_untouched() {
    let (f, consts) = mlp_point();
    let xs: Vec<Tensor> = consts.iter().map(|c| c.clone().into_variable()).collect();
    f(&xs).unwrap().sum_all().backward().unwrap();
    let before: Vec<Vec<f32>> = xs.iter().map(|x| x.grad().unwrap().to_vec()).collect();
    let values: Vec<Vec<f32>> = xs.iter().map(|x| x.to_vec()).collect();
    let s = summed(Box::new(move |xs| f(xs)));
    let (y, g) = func::vjp(&s, &xs, &Tensor::scalar(1.0)).unwrap();
    let (y2, jt) = func::jvp(&s, &xs, &consts).unwrap();
    let (y3, hv) = func::hvp(&s, &xs, &consts).unwrap();
    let mut results = vec![y, y2, y3, jt];
    results.extend(g.into_iter().chain(hv));
    results.extend(func::jacobian(&s, &xs).unwrap());
    results.extend(func::jacfwd(&s, &xs).unwrap());
    results.extend(func::hessian(&s, &xs).unwrap().into_iter().flatten());
    // Differentiable results leave the gradients alone too, until the caller backpropagates.
    let (_, dg) = func::vjp_with(&s, &xs, &Tensor::scalar(1.0), GRAPH).unwrap();
    let dh = func::hessian_with(&s, &xs, GRAPH).unwrap();
    assert!(dg.iter().chain(dh.iter().flatten()).all(Tensor::requires_grad));
    for (i, x) in xs.iter().enumerate() {
        assert!(x.is_variable());
        assert_eq!(x.grad().unwrap().to_vec(), before[i], "input {i}: gradient changed");
        assert_eq!(x.to_vec(), values[i], "input {i}: values changed");
    }
    assert!(results.iter().all(|r| !r.requires_grad()), "results are constants by default");
}

/// `forgia::gradcheck`'s criterion (abs 1e-3, rel 1e-2; central differences in f64 over exact f32
/// steps), written out because `gradcheck` evaluates `f` under `no_grad`, where a transform
/// refuses to run.
fn first_order_matches_central_differences(g: &F, xs: &[Tensor], what: &str) {
    let vars: Vec<Tensor> = xs.iter().map(|x| x.clone().into_variable()).collect();
    g(&vars).unwrap().backward().unwrap();
    for (i, v) in vars.iter().enumerate() {
        let analytic = v.grad().map(|g| g.to_vec()).unwrap_or_else(|| vec![0.0; v.numel()]);
        for (k, &a) in analytic.iter().enumerate() {
            let at = |step: f32| -> (f64, f32) {
                let mut moved = xs.to_vec();
                let mut data = xs[i].to_vec();
                data[k] += step;
                let x = data[k];
                moved[i] = Tensor::from_vec(data, xs[i].shape()).unwrap();
                (g(&moved).unwrap().item().unwrap() as f64, x)
            };
            let ((up, xu), (down, xd)) = (at(1e-3), at(-1e-3));
            let numeric = (up - down) / (xu as f64 - xd as f64);
            assert!(
                (numeric - a as f64).abs() <= 1e-3 + 1e-2 * (a as f64).abs(),
                "{what}: input {i} element {k}: numeric {numeric}, analytic {a}"
            );
        }
    }
}

#[test]
fn create_graph_results_are_differentiable_and_transforms_compose() {
    let a = a3();
    let x = t(&[0.5, -1.0, 2.0], &[3]);
    // The Jacobian of a differentiable gradient is the Hessian, both ways round.
    let grad_of_quad = {
        let a = a.clone();
        move |xs: &[Tensor]| Ok(func::vjp_with(quad(&a), xs, &Tensor::scalar(1.0), GRAPH)?.1.remove(0))
    };
    close(&func::jacobian(grad_of_quad.clone(), one(&x)).unwrap()[0].to_vec(), &a_sym(&a), 1e-6, "jacrev of vjp");
    close(&func::jacfwd(grad_of_quad.clone(), one(&x)).unwrap()[0].to_vec(), &a_sym(&a), 1e-6, "jacfwd of vjp");
    // hvp as torch.func.jvp(grad(f)): a jvp of the differentiable gradient.
    let v = t(&[1.0, 0.5, -2.0], &[3]);
    let (_, hv) = func::hvp(quad(&a), one(&x), one(&v)).unwrap();
    let (_, jvp_of_grad) = func::jvp(grad_of_quad, one(&x), &[v]).unwrap();
    close(&jvp_of_grad.to_vec(), &hv[0].to_vec(), 1e-6, "jvp of grad");
    // Third order: d/dx of the Hessian of Σx⁴ (diag 12x²) summed is 24x.
    let xv = Tensor::variable(vec![0.5, -1.0, 2.0], &[3]).unwrap();
    let quartic = |xs: &[Tensor]| Ok(xs[0].mul(&xs[0])?.mul(&xs[0])?.mul(&xs[0])?.sum_all());
    let h = func::hessian_with(quartic, one(&xv), GRAPH).unwrap();
    assert!(h[0][0].requires_grad());
    h[0][0].sum_all().backward().unwrap();
    close(&xv.grad().unwrap().to_vec(), &[12.0, -24.0, 48.0], 1e-5, "third order");
    // Differentiable results pass gradcheck, first and second order, for every transform.
    let (f, xs) = mlp_point();
    let f = std::rc::Rc::new(f);
    let cot = t(&[0.7, -1.3], &[2]);
    let tangents: Vec<Tensor> = xs.iter().map(|x| Tensor::ones(x.shape()).unwrap()).collect();
    let cases: Vec<(&str, F)> = vec![
        ("vjp", {
            let (f, cot) = (f.clone(), cot.clone());
            Box::new(move |xs| Ok(func::vjp_with(&*f, xs, &cot, GRAPH)?.1[1].sum_all()))
        }),
        ("jvp", {
            let (f, tg) = (f.clone(), tangents.clone());
            Box::new(move |xs| Ok(func::jvp_with(&*f, xs, &tg, GRAPH)?.1.tanh().sum_all()))
        }),
        ("hvp", {
            let (f, tg) = (f.clone(), tangents.clone());
            Box::new(move |xs| {
                let f = f.clone();
                Ok(func::hvp_with(summed(Box::new(move |x| f(x))), xs, &tg, GRAPH)?.1[0].sum_all())
            })
        }),
        ("jacrev", {
            let f = f.clone();
            Box::new(move |xs| Ok(func::jacobian_with(&*f, xs, JacobianMode::Reverse, GRAPH)?[0].square().sum_all()))
        }),
        ("jacfwd", {
            let f = f.clone();
            Box::new(move |xs| Ok(func::jacobian_with(&*f, xs, JacobianMode::Forward, GRAPH)?[1].square().sum_all()))
        }),
    ];
    for (what, g) in &cases {
        first_order_matches_central_differences(g, &xs, what);
        common::second_order::check(
            g,
            &xs,
            &Tensor::scalar(1.0),
            &[t(&[1.0, -0.5, 0.3], &[3]), Tensor::ones(&[4, 3]).unwrap()],
        );
    }
}

#[test]
fn mismatched_seeds_and_tangents_are_errors_naming_the_transform() {
    let x = t(&[0.5, -1.0, 2.0], &[3]);
    let f = |xs: &[Tensor]| Ok(xs[0].tanh());
    let kind = |e: forgia::Error| e.into_kind();
    let e = kind(func::vjp(f, one(&x), &Tensor::zeros(&[2]).unwrap()).unwrap_err());
    assert!(matches!(&e, ErrorKind::ShapeMismatch { op: "vjp", lhs, rhs } if lhs == &[3] && rhs == &[2]), "{e:?}");
    let e = kind(func::jvp(f, one(&x), &[Tensor::zeros(&[3, 1]).unwrap()]).unwrap_err());
    assert!(matches!(&e, ErrorKind::ShapeMismatch { op: "jvp", lhs, rhs } if lhs == &[3] && rhs == &[3, 1]), "{e:?}");
    let e = kind(func::jvp(f, one(&x), &[]).unwrap_err());
    assert!(matches!(e, ErrorKind::InvalidArgument { op: "jvp", arg: "tangents", .. }), "{e:?}");
    let s = |xs: &[Tensor]| Ok(xs[0].tanh().sum_all());
    let e = kind(func::hvp(s, one(&x), &[Tensor::zeros(&[4]).unwrap()]).unwrap_err());
    assert!(matches!(&e, ErrorKind::ShapeMismatch { op: "hvp", lhs, rhs } if lhs == &[3] && rhs == &[4]), "{e:?}");
    let e = kind(func::hvp(s, one(&x), &[x.clone(), x.clone()]).unwrap_err());
    assert!(matches!(e, ErrorKind::InvalidArgument { op: "hvp", arg: "v", .. }), "{e:?}");
}

#[test]
fn hessian_and_hvp_of_a_non_scalar_function_are_errors() {
    let x = t(&[0.5, -1.0, 2.0], &[3]);
    let f = |xs: &[Tensor]| Ok(xs[0].tanh());
    let e = func::hessian(f, one(&x)).unwrap_err().into_kind();
    assert!(matches!(&e, ErrorKind::NotScalar { op: "hessian", shape } if shape == &[3]), "{e:?}");
    let e = func::hvp(f, one(&x), one(&x)).unwrap_err().into_kind();
    assert!(matches!(e, ErrorKind::NotScalar { op: "hvp", .. }), "{e:?}");
}

#[test]
fn an_op_without_a_differentiable_backward_is_named_by_second_order_transforms() {
    let x = t(&[0.5, -1.0, 2.0, 0.1, 0.3, -0.7], &[2, 3]);
    // An elemental op without a second-derivative closure keeps refusing second order.
    let f = |xs: &[Tensor]| forgia::elemental_unary(&xs[0], f32::sin, |x, _y, g| g * x.cos()).tanh().sum(1, false);
    let s = |xs: &[Tensor]| Ok(f(xs)?.sum_all());
    // First order works.
    func::vjp(f, one(&x), &Tensor::ones(&[2]).unwrap()).unwrap();
    func::jacobian(f, one(&x)).unwrap();
    let unsupported = |r: Result<()>| {
        let e = r.unwrap_err().into_kind();
        assert!(matches!(e, ErrorKind::DoubleBackwardUnsupported { op: "elemental_unary" }), "{e:?}");
    };
    unsupported(func::hessian(s, one(&x)).map(drop));
    unsupported(func::hvp(s, one(&x), one(&x)).map(drop));
    unsupported(func::jvp(f, one(&x), one(&x)).map(drop));
    unsupported(func::jacfwd(f, one(&x)).map(drop));
    unsupported(func::vjp_with(f, one(&x), &Tensor::ones(&[2]).unwrap(), GRAPH).map(drop));
}

#[test]
fn transforms_work_under_an_outer_no_grad_as_torch_func_does() {
    let x = t(&[0.5], &[1]);
    let _guard = no_grad();
    let j = func::jacobian(|xs| Ok(xs[0].tanh()), &[x]).unwrap();
    let y = 0.5f32.tanh();
    assert!((j[0].to_vec()[0] - (1.0 - y * y)).abs() < 1e-6);
    assert!(!forgia::is_grad_enabled(), "the caller's no_grad is back in force");
}

#[test]
fn an_input_the_function_ignores_gets_zero_blocks() {
    let (x, unused) = (t(&[0.5, -1.0], &[2]), t(&[3.0, 4.0, 5.0], &[3]));
    let f = |xs: &[Tensor]| Ok(xs[0].tanh());
    let j = func::jacfwd(f, &[x.clone(), unused.clone()]).unwrap();
    assert_eq!(j[1].shape(), &[2, 3]);
    assert!(j[1].to_vec().iter().all(|&v| v == 0.0));
    let (_, g) = func::vjp(f, &[x.clone(), unused.clone()], &Tensor::ones(&[2]).unwrap()).unwrap();
    assert_eq!(g[1].to_vec(), vec![0.0; 3]);
    let h = func::hessian(|xs: &[Tensor]| Ok(xs[0].sum_all()), &[x, unused]).unwrap();
    assert!(h.iter().flatten().all(|b| b.to_vec().iter().all(|&v| v == 0.0)), "a linear function has no curvature");
    assert_eq!(h[0][1].shape(), &[2, 3]);
}

/// The MLP of [`mlp_point`] with its weights `b1, w2, b2` captured as variables (not inputs).
fn mlp_capturing_variables() -> (F, Vec<Tensor>, Vec<Tensor>) {
    let b1 = t(&common::lcg(4, 3, 0.3), &[4]).into_variable();
    let w2 = t(&common::lcg(8, 4, 0.8), &[2, 4]).into_variable();
    let b2 = t(&common::lcg(2, 5, 0.3), &[2]).into_variable();
    let inputs = vec![t(&common::lcg(3, 1, 1.0), &[3]), t(&common::lcg(12, 2, 0.8), &[4, 3])];
    (mlp(&b1, &w2, &b2), vec![b1, w2, b2], inputs)
}

#[test]
fn transforms_write_no_gradient_on_variables_the_function_captures() {
    let (f, captured, xs) = mlp_capturing_variables();
    let s = summed(Box::new(move |xs| f(xs)));
    let ts = xs.clone();
    let mut results = Vec::new();
    results.extend(func::vjp(&s, &xs, &Tensor::scalar(1.0)).unwrap().1);
    results.push(func::jvp(&s, &xs, &ts).unwrap().1);
    results.extend(func::jacobian(&s, &xs).unwrap());
    results.extend(func::jacfwd(&s, &xs).unwrap());
    // Second order: the gradient is taken with create_graph, then differentiated again.
    results.extend(func::hessian(&s, &xs).unwrap().into_iter().flatten());
    results.extend(func::hvp(&s, &xs, &ts).unwrap().1);
    // Differentiable results: their own passes, and the caller's pass through them.
    let (_, dg) = func::vjp_with(&s, &xs, &Tensor::scalar(1.0), GRAPH).unwrap();
    let dh = func::hessian_with(&s, &xs, GRAPH).unwrap();
    let (_, dhv) = func::hvp_with(&s, &xs, &ts, GRAPH).unwrap();
    for (i, c) in captured.iter().enumerate() {
        assert!(c.grad().is_none(), "captured variable {i} got a gradient from a transform");
    }
    assert_eq!(results.len(), 2 + 1 + 2 + 2 + 4 + 2);
    let xv: Vec<Tensor> = xs.iter().map(|x| x.clone().into_variable()).collect();
    let (_, g) = func::vjp_with(&s, &xv, &Tensor::scalar(1.0), GRAPH).unwrap();
    g[0].sum_all().add(&dg[1].sum_all()).unwrap().add(&dh[0][1].sum_all()).unwrap().backward().unwrap();
    let (_, hv) = func::hvp_with(&s, &xv, &ts, GRAPH).unwrap();
    hv[1].sum_all().add(&dhv[0].sum_all()).unwrap().backward().unwrap();
    assert!(xv.iter().all(|x| x.grad().is_some()), "the inputs get their gradients");
    for (i, c) in captured.iter().enumerate() {
        assert!(c.grad().is_none(), "captured variable {i} got a gradient through a differentiable result");
    }
}

#[test]
fn a_captured_variable_is_held_fixed_and_its_value_still_counts() {
    // f(x) = w·x² with w captured: ∂f/∂x = 2wx, ∂²f/∂x² = 2w; w itself gets nothing.
    let w = Tensor::variable(vec![3.0], &[1]).unwrap();
    let f = |xs: &[Tensor]| Ok(xs[0].mul(&xs[0])?.mul(&w)?.sum_all());
    let x = Tensor::from_vec(vec![2.0], &[1]).unwrap();
    let (_, g) = func::vjp(f, one(&x), &Tensor::scalar(1.0)).unwrap();
    assert_eq!(g[0].to_vec(), vec![12.0]);
    assert_eq!(func::hessian(f, one(&x)).unwrap()[0][0].to_vec(), vec![6.0]);
    let (_, hv) = func::hvp(f, one(&x), &[Tensor::from_vec(vec![0.5], &[1]).unwrap()]).unwrap();
    assert_eq!(hv[0].to_vec(), vec![3.0]);
    let (_, jt) = func::jvp(f, one(&x), &[Tensor::from_vec(vec![1.0], &[1]).unwrap()]).unwrap();
    assert_eq!(jt.to_vec(), vec![12.0]);
    assert!(w.grad().is_none());
    // A gradient the caller already accumulated on the captured variable stays as it was.
    w.mul(&w).unwrap().sum_all().backward().unwrap();
    let xv = x.clone().into_variable();
    func::hessian_with(f, one(&xv), GRAPH).unwrap()[0][0].sum_all().backward().unwrap();
    assert_eq!(xv.grad().unwrap().to_vec(), vec![0.0]); // ∂(2w)/∂x
    assert_eq!(w.grad().unwrap().to_vec(), vec![6.0]);
}
