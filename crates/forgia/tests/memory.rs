//! Rule 5: saved tensors are released as nodes fire, unless the graph is retained; and a
//! `create_graph` loop does not leak. The byte counters are process-wide, so the tests of this
//! binary take one lock and never run at the same time.

use std::sync::Mutex;

use forgia::{live_bytes, BackwardOptions, Rng, Tensor};

static SERIAL: Mutex<()> = Mutex::new(());

fn chain(x: &Tensor, depth: usize) -> Tensor {
    let mut h = x.clone();
    for _ in 0..depth {
        h = h.tanh(); // each tanh saves its 4 MB output
    }
    h.sum_all()
}

#[test]
fn saved_tensors_are_released_as_backward_runs_unless_the_graph_is_retained() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mb = 1 << 20;
    let x = Tensor::zeros(&[1024, 1024]).unwrap().into_variable();
    let base = live_bytes();

    let loss = chain(&x, 8);
    let held = live_bytes() - base;
    assert!(held >= 8 * 4 * mb, "the graph holds its 8 saved outputs: {held}");
    loss.backward().unwrap();
    let after = live_bytes() - base;
    assert!(after <= 4 * mb + mb / 2, "only x's gradient stays: {after}");
    drop(loss);

    x.zero_grad();
    let loss = chain(&x, 8);
    loss.backward_with(None, BackwardOptions { retain_graph: true, ..Default::default() }).unwrap();
    assert!(live_bytes() - base >= 8 * 4 * mb, "a retained graph keeps its saved tensors");
    drop(loss);
    x.zero_grad();
    assert!(live_bytes() - base < mb, "dropping the graph frees everything");
}

#[test]
fn a_create_graph_loop_whose_gradients_are_only_read_keeps_live_bytes_flat_for_1000_steps() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut rng = Rng::new(0);
    let w = Tensor::randn(&[128, 128], 0.0, 0.1, &mut rng).unwrap().into_variable();
    let input = Tensor::randn(&[4, 128], 0.0, 1.0, &mut rng).unwrap();
    let create = BackwardOptions { create_graph: true, ..BackwardOptions::default() };
    let step = |read: &mut f32| {
        // A fresh leaf per step (a PINN input, a gradient-penalty sample) and a weight whose
        // gradient is reset each step: both gradients carry graphs that reach their leaf.
        let x = input.detach().into_variable();
        let y = x.matmul(&w).unwrap().tanh().matmul(&w).unwrap().tanh().sum_all();
        y.backward_with(None, create).unwrap();
        *read += x.grad().unwrap().sum_all().item().unwrap() + w.grad().unwrap().sum_all().item().unwrap();
        w.zero_grad();
    };
    let mut read = 0.0;
    for _ in 0..10 {
        step(&mut read);
    }
    let base = live_bytes();
    for _ in 0..1000 {
        step(&mut read);
    }
    let grown = live_bytes().saturating_sub(base);
    assert!(grown < 64 * 1024, "live bytes grew by {grown} over 1000 create_graph steps");
    assert!(read.is_finite());
}
