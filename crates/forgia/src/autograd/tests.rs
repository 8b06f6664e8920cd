//! Engine tests that need test-only records (counting, failing, wrong) or internal state.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use super::node::{attach, empty_slots, Backward, Grads, Node, VjpCtx, ACCUMULATED, IDLE};
use crate::error::{fail, ErrorKind, Result};
use crate::{gradcheck, BackwardOptions, GradcheckOptions, Tensor};

/// `y = a * b` whose record counts firings and the gradients it computes.
struct Counting {
    a: Tensor,
    b: Tensor,
    fired: Arc<AtomicUsize>,
    computed: Arc<AtomicUsize>,
}

impl Backward for Counting {
    fn name(&self) -> &'static str {
        "counting_mul"
    }
    fn backward(&self, cx: &VjpCtx<'_>, gy: &Tensor, out: &mut Grads) -> Result<()> {
        self.fired.fetch_add(1, Ordering::Relaxed);
        empty_slots(out, 2);
        for (i, other) in [(0, &self.b), (1, &self.a)] {
            if cx.needs_grad(i) {
                self.computed.fetch_add(1, Ordering::Relaxed);
                out[i] = Some(gy.mul(other)?);
            }
        }
        Ok(())
    }
}

fn counting_mul(a: &Tensor, b: &Tensor, fired: &Arc<AtomicUsize>, computed: &Arc<AtomicUsize>) -> Tensor {
    let value = Tensor::from_parts(a.to_vec().iter().zip(b.to_vec()).map(|(x, y)| x * y).collect(), a.shape());
    attach(value, &[a, b], || Counting {
        a: a.detach(),
        b: b.detach(),
        fired: fired.clone(),
        computed: computed.clone(),
    })
}

/// Identity whose record fails while `failures` is positive.
struct Flaky {
    failures: Arc<AtomicUsize>,
}

impl Backward for Flaky {
    fn name(&self) -> &'static str {
        "flaky"
    }
    fn backward(&self, _cx: &VjpCtx<'_>, gy: &Tensor, out: &mut Grads) -> Result<()> {
        if self.failures.load(Ordering::Relaxed) > 0 {
            self.failures.fetch_sub(1, Ordering::Relaxed);
            return fail(ErrorKind::InvalidArgument { op: "flaky", arg: "gy", reason: "injected failure".into() });
        }
        out.push(Some(gy.clone()));
        Ok(())
    }
}

fn flaky(x: &Tensor, failures: &Arc<AtomicUsize>) -> Tensor {
    attach(x.detach().contiguous_data("test").unwrap(), &[x], || Flaky { failures: failures.clone() })
}

fn node_is_idle(t: &Tensor) -> bool {
    let n: &Node = t.node.as_ref().unwrap();
    n.state.load(Ordering::Relaxed) == IDLE
        && n.pending.load(Ordering::Relaxed) == 0
        && n.grad.lock().acc.is_none()
        && n.flags.load(Ordering::Relaxed) & ACCUMULATED == 0
}

#[test]
fn constants_cost_no_backward_work() {
    let (fired, computed) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let x = Tensor::variable(vec![1.0, 2.0], &[2]).unwrap();
    let frozen = Tensor::from_vec(vec![3.0, 4.0], &[2]).unwrap();
    counting_mul(&x, &frozen, &fired, &computed).sum_all().backward().unwrap();
    assert_eq!((fired.load(Ordering::Relaxed), computed.load(Ordering::Relaxed)), (1, 1));
    // Two constants: no node at all, so nothing to fire.
    let y = counting_mul(&frozen, &frozen, &fired, &computed);
    assert!(!y.requires_grad());
}

#[test]
fn a_shared_node_fires_exactly_once_per_pass() {
    let (fired, computed) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let x = Tensor::variable(vec![2.0], &[1]).unwrap();
    let s = counting_mul(&x, &x, &fired, &computed); // s = x², consumed three times below
    s.add(&s).unwrap().add(&s).unwrap().sum_all().backward().unwrap();
    assert_eq!(fired.load(Ordering::Relaxed), 1);
    assert_eq!(x.grad().unwrap().to_vec(), vec![12.0]); // d/dx 3x² = 6x
}

#[test]
fn a_failing_record_mid_pass_leaves_every_node_idle_and_the_retained_graph_reruns() {
    let failures = Arc::new(AtomicUsize::new(1));
    let x = Tensor::variable(vec![1.0, 2.0], &[2]).unwrap();
    let a = x.scale(2.0);
    let b = flaky(&a, &failures);
    let c = b.tanh();
    let loss = c.add(&a).unwrap().sum_all();
    let opts = BackwardOptions { retain_graph: true, ..Default::default() };
    let err = loss.backward_with(None, opts).unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::InvalidArgument { op: "flaky", .. }));
    for t in [&a, &b, &c, &loss] {
        assert!(node_is_idle(t), "{t}");
    }
    x.zero_grad(); // contributions delivered before the failure stay: reset before a retry
    loss.backward_with(None, opts).unwrap();
    let expected: Vec<f32> = [1.0f32, 2.0].iter().map(|&v| 2.0 * (1.0 - (2.0 * v).tanh().powi(2)) + 2.0).collect();
    let got = x.grad().unwrap().to_vec();
    assert!(got.iter().zip(&expected).all(|(g, e)| (g - e).abs() < 1e-6), "{got:?} vs {expected:?}");
}

#[test]
fn a_failed_pass_without_retain_graph_fails_clearly_on_retry() {
    let failures = Arc::new(AtomicUsize::new(1));
    let x = Tensor::variable(vec![1.0], &[1]).unwrap();
    let loss = flaky(&x.scale(2.0).tanh(), &failures).sum_all();
    assert!(loss.backward().is_err());
    // The sum node fired and released its record before the failure.
    assert!(matches!(loss.backward().unwrap_err().kind(), ErrorKind::GraphReleased { .. }));
}

#[test]
fn a_node_whose_gradient_arrives_in_parts_fires_with_their_sum_in_every_pass() {
    // h = tanh(x) feeds three consumers: its first contributions are accumulated, the last is
    // added to them (were it handed over alone, the gradient would miss the others), and the
    // sum is taken out with its flag, so the next pass over the retained graph starts clean.
    let x = Tensor::variable(vec![0.3, -0.7], &[2]).unwrap();
    let h = x.tanh();
    let y = h.mul(&h).unwrap().add(&h.scale(3.0)).unwrap().sum_all();
    let want: Vec<f32> = [0.3f32, -0.7].iter().map(|v| (2.0 * v.tanh() + 3.0) * (1.0 - v.tanh().powi(2))).collect();
    for serial in [true, false, true] {
        x.zero_grad();
        y.backward_with(None, BackwardOptions { retain_graph: true, serial, ..Default::default() }).unwrap();
        let got = x.grad().unwrap().to_vec();
        assert!(got.iter().zip(&want).all(|(g, w)| (g - w).abs() < 1e-6), "serial {serial}: {got:?} against {want:?}");
        assert!(node_is_idle(&h), "h keeps a partial sum or its flag after the pass");
    }
}

#[test]
fn an_output_that_already_holds_a_gradient_is_used_as_is() {
    let x = Tensor::variable(vec![1.0, 2.0], &[2]).unwrap();
    let y = x.scale(3.0);
    super::engine::accumulate(y.node.as_ref().unwrap(), Tensor::from_vec(vec![1.0, 2.0], &[2]).unwrap(), false)
        .unwrap();
    y.backward_with(None, BackwardOptions::default()).unwrap();
    assert_eq!(x.grad().unwrap().to_vec(), vec![3.0, 6.0]); // no +1 on top
}

/// tanh with a wrong derivative (1 - y instead of 1 - y²).
struct WrongTanh {
    y: Tensor,
}

impl Backward for WrongTanh {
    fn name(&self) -> &'static str {
        "wrong_tanh"
    }
    fn backward(&self, _cx: &VjpCtx<'_>, gy: &Tensor, out: &mut Grads) -> Result<()> {
        out.push(Some(gy.mul(&self.y.scale(-1.0).add_scalar(1.0))?));
        Ok(())
    }
}

#[test]
fn gradcheck_catches_a_deliberately_wrong_record() {
    let x = Tensor::variable(vec![0.3, -0.8, 1.1], &[3]).unwrap();
    let wrong = |xs: &[Tensor]| {
        let y = xs[0].detach().tanh();
        Ok(attach(y.clone(), &[&xs[0]], || WrongTanh { y }).sum_all())
    };
    let report = gradcheck(wrong, std::slice::from_ref(&x), GradcheckOptions::default()).unwrap();
    let m = report.first_mismatch.expect("the wrong record is caught");
    assert_eq!((m.input, m.index), (0, 0));
    assert!((m.numeric - (1.0 - 0.3f64.tanh().powi(2))).abs() < 1e-3);
    let right = gradcheck(|xs| Ok(xs[0].tanh().sum_all()), &[x], GradcheckOptions::default()).unwrap();
    assert!(right.passed() && right.checked == 3);
}

#[test]
fn gradcheck_restores_the_perturbed_element_when_the_function_fails() {
    let x = Tensor::variable(vec![1.0, 2.0], &[2]).unwrap();
    let calls = AtomicUsize::new(0);
    let f = |xs: &[Tensor]| {
        if calls.fetch_add(1, Ordering::Relaxed) == 1 {
            return fail(ErrorKind::EmptyTensor { op: "test", shape: vec![] });
        }
        Ok(xs[0].sum_all())
    };
    assert!(gradcheck(f, std::slice::from_ref(&x), GradcheckOptions::default()).is_err());
    assert_eq!(x.to_vec(), vec![1.0, 2.0]);
}

#[test]
fn gradcheck_rejects_a_zero_or_nan_step_and_bad_tolerances_instead_of_passing_a_wrong_record() {
    let x = Tensor::variable(vec![0.3, -0.8], &[2]).unwrap();
    let wrong = |xs: &[Tensor]| {
        let y = xs[0].detach().tanh();
        Ok(attach(y.clone(), &[&xs[0]], || WrongTanh { y }).sum_all())
    };
    let d = GradcheckOptions::default();
    for options in [
        GradcheckOptions { eps: 0.0, ..d },
        GradcheckOptions { eps: f64::NAN, ..d },
        GradcheckOptions { eps: -1e-3, ..d },
        GradcheckOptions { abs_tol: f64::NAN, ..d },
        GradcheckOptions { rel_tol: -1.0, ..d },
        GradcheckOptions { abs_tol: f64::INFINITY, ..d },
    ] {
        let e = gradcheck(wrong, std::slice::from_ref(&x), options).unwrap_err();
        assert!(matches!(e.kind(), ErrorKind::InvalidArgument { op: "gradcheck", .. }), "{options:?}: {e}");
    }
}

#[test]
fn gradcheck_reports_a_nan_valued_function_as_a_mismatch() {
    let x = Tensor::variable(vec![0.3, -0.8], &[2]).unwrap();
    // sqrt of a negative number: NaN values and NaN derivatives.
    let f = |xs: &[Tensor]| Ok(xs[0].scale(-1.0).add_scalar(-1.0).sqrt().sum_all());
    let report = gradcheck(f, std::slice::from_ref(&x), GradcheckOptions::default()).unwrap();
    assert!(!report.passed());
    assert_eq!(report.max_abs_error, f64::INFINITY);
}

/// The identity, whose backward panics while `armed` is set.
struct Panicky {
    armed: Arc<std::sync::atomic::AtomicBool>,
}

impl crate::CustomOp for Panicky {
    fn name(&self) -> &'static str {
        "panicky"
    }
    fn forward(&self, xs: &[Tensor]) -> Result<Tensor> {
        Ok(xs[0].clone())
    }
    fn backward(&self, _xs: &[Tensor], _y: &Tensor, gy: &Tensor, _needs: &[bool]) -> Result<Vec<Option<Tensor>>> {
        if self.armed.load(Ordering::Relaxed) {
            panic!("injected panic number {}", 7);
        }
        Ok(vec![Some(gy.clone())])
    }
}

#[test]
fn a_panicking_custom_backward_leaves_every_node_idle_and_a_retained_graph_rerunnable() {
    let x = Tensor::variable(vec![0.5, -1.0], &[2]).unwrap();
    let armed = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let h = x.tanh(); // interior node shared by both losses
    let p = crate::custom_op(Panicky { armed: armed.clone() }, &[&h]).unwrap();
    let loss = p.sum_all();
    let other = h.scale(2.0).sum_all();
    let retain = BackwardOptions { retain_graph: true, ..BackwardOptions::default() };
    let e = loss.backward_with(None, retain).unwrap_err();
    match e.kind() {
        ErrorKind::BackwardPanicked { op, message } => {
            assert_eq!(*op, "panicky");
            assert!(message.contains("injected panic number 7"), "{message}");
        }
        k => panic!("expected BackwardPanicked, got {k:?}"),
    }
    for t in [&loss, &p, &h] {
        let node = t.node.as_ref().unwrap();
        assert_eq!(node.state.load(Ordering::Relaxed), IDLE);
        assert_eq!(node.pending.load(Ordering::Relaxed), 0);
        assert_eq!(node.pass.load(Ordering::Relaxed), 0);
        assert!(node.grad.lock().acc.is_none());
    }
    let dtanh: Vec<f32> = [0.5f32, -1.0].iter().map(|v| 1.0 - v.tanh().powi(2)).collect();
    other.backward_with(None, retain).unwrap(); // not ConcurrentBackward: h is idle
    assert_eq!(x.grad().unwrap().to_vec(), dtanh.iter().map(|d| 2.0 * d).collect::<Vec<_>>());
    x.zero_grad();
    armed.store(false, Ordering::Relaxed); // the op is fixed: the retained graph runs again
    loss.backward().unwrap();
    assert_eq!(x.grad().unwrap().to_vec(), dtanh);
}

/// An identity that claims heavy work, notes how many threads its kernels may use, and takes a
/// little while (so the pass's other tasks are still queued or running).
struct Heavy {
    seen: Arc<parking_lot::Mutex<Vec<usize>>>,
}

impl Backward for Heavy {
    fn name(&self) -> &'static str {
        "heavy"
    }
    fn backward(&self, _cx: &VjpCtx<'_>, gy: &Tensor, out: &mut Grads) -> Result<()> {
        self.seen.lock().push(crate::parallel::kernel_threads());
        std::thread::sleep(std::time::Duration::from_millis(5));
        out.push(Some(gy.clone()));
        Ok(())
    }
    fn estimated_work(&self) -> usize {
        super::engine::ASYNC_WORK_THRESHOLD
    }
}

fn heavy(x: &Tensor, seen: &Arc<parking_lot::Mutex<Vec<usize>>>) -> Tensor {
    attach(x.detach().contiguous_data("test").unwrap(), &[x], || Heavy { seen: seen.clone() })
}

#[test]
fn records_on_the_pool_may_split_their_kernels_over_it_while_other_branches_run() {
    let threads = crate::parallel::num_threads();
    let x = Tensor::variable(vec![1.0, 2.0], &[2]).unwrap();
    // Eight heavy branches joined by a chain of adds: a task for every pool thread, and every
    // record still free to split its kernels (a thread whose branch ends early takes work from
    // the others' kernels). The caller keeps its own kernels on its thread, which a record
    // must not inherit where the pass drains on the calling thread (a pool that adopted it).
    let seen = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let mut loss = heavy(&x, &seen).sum_all();
    for _ in 1..8 {
        loss = loss.add(&heavy(&x, &seen).sum_all()).unwrap();
    }
    crate::parallel::with_kernels_on_this_thread(true, || loss.backward()).unwrap();
    assert_eq!(x.grad().unwrap().to_vec(), vec![8.0, 8.0]);
    assert_eq!(*seen.lock(), vec![threads; 8]);
    // A chain of heavy records is one task: its kernels may use the whole pool.
    let seen = Arc::new(parking_lot::Mutex::new(Vec::new()));
    heavy(&heavy(&x, &seen), &seen).sum_all().backward().unwrap();
    assert_eq!(*seen.lock(), vec![threads; 2]);
    // The serial option keeps every kernel on one thread.
    let seen = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let loss = heavy(&x, &seen).sum_all().add(&heavy(&x, &seen).sum_all()).unwrap();
    loss.backward_with(None, BackwardOptions { serial: true, ..BackwardOptions::default() }).unwrap();
    assert_eq!(*seen.lock(), vec![1; 2]);
}
