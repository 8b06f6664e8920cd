//! Rule 5: saved tensors are released as nodes fire, unless the graph is retained. One test
//! per binary keeps the process-wide byte counters free of other tests' tensors.

use forgia::{live_bytes, BackwardOptions, Tensor};

fn chain(x: &Tensor, depth: usize) -> Tensor {
    let mut h = x.clone();
    for _ in 0..depth {
        h = h.tanh(); // each tanh saves its 4 MB output
    }
    h.sum_all()
}

#[test]
fn saved_tensors_are_released_as_backward_runs_unless_the_graph_is_retained() {
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
