use std::time::Instant;
fn med(mut v: Vec<f64>) -> f64 { v.sort_by(|a, b| a.partial_cmp(b).unwrap()); v[v.len() / 2] }
// dst (m × n) = lhs (m × k) · rhs (k × n); each given as (len, rs, cs)
#[allow(clippy::too_many_arguments)]
fn run(m: usize, n: usize, k: usize, d: (usize, isize, isize), l: (usize, isize, isize), r: (usize, isize, isize), reps: usize) -> f64 {
    let a: Vec<f32> = (0..l.0).map(|i| ((i * 7919) % 1000) as f32 * 1e-3).collect();
    let b: Vec<f32> = (0..r.0).map(|i| ((i * 104729) % 1000) as f32 * 1e-3).collect();
    let mut c = vec![0f32; d.0];
    let mut ts = vec![];
    for _ in 0..reps {
        let t = Instant::now();
        unsafe {
            gemm::gemm(m, n, k, c.as_mut_ptr(), d.2, d.1, false,
                a.as_ptr(), l.2, l.1, b.as_ptr(), r.2, r.1, 1.0, 1.0,
                false, false, false, gemm::Parallelism::None);
        }
        ts.push(t.elapsed().as_secs_f64());
    }
    med(ts)
}
fn both(tag: &str, m: usize, n: usize, k: usize, d: (usize, isize, isize), l: (usize, isize, isize), r: (usize, isize, isize), useful: f64) {
    let hs: Vec<_> = (0..2).map(|_| std::thread::Builder::new().stack_size(64 << 20).spawn(move || run(m, n, k, d, l, r, 15)).unwrap()).collect();
    let t: Vec<f64> = hs.into_iter().map(|h| h.join().unwrap()).collect();
    let tm = t[0].max(t[1]);
    println!("{tag:28} {:.3} ms/product, useful {:.1} GFLOP/s on 2 cores", tm * 1e3, 2.0 * useful / tm / 1e9);
}
fn main() {
    // (channels O, pixels P, K)
    let shapes = [(64usize, 3136usize, 576usize), (128, 784, 1152), (256, 196, 2304), (512, 196, 4608), (512, 49, 4608)];
    for &(o, p, k) in &shapes {
        let useful = 2.0 * (o * p * k) as f64;
        for ld in [p.next_multiple_of(8), p.next_multiple_of(16)] {
            // A: y[o × ld] = W[o × k] · cols[k × ld]
            both(&format!("A o{o} p{p} k{k} ld{ld}"), o, ld, k, (o * ld, ld as isize, 1), (o * k, k as isize, 1), (k * ld, ld as isize, 1), useful);
        }
        // B: y stored [p × o]; W^T stored [k × o]; cols stored [p × k]
        both(&format!("B o{o} p{p} k{k}"), o, p, k, (p * o, 1, o as isize), (k * o, 1, o as isize), (p * k, 1, k as isize), useful);
    }
}
