use forgia::Conv2dOptions;
use forgia::{Rng, Tensor};
use std::time::Instant;
fn med(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}
fn main() -> Result<(), forgia::Error> {
    forgia::set_num_threads(2)?;
    if let Ok(t) = std::env::var("RHS_THR") {
        gemm::set_rhs_packing_threshold(t.parse().unwrap());
    }
    let n = 8;
    // (in side, cin, cout, k, stride, pad)
    let shapes = [
        (56, 64, 64, 3, 1, 1),
        (56, 64, 128, 3, 2, 1),
        (28, 128, 128, 3, 1, 1),
        (28, 128, 256, 3, 2, 1),
        (14, 256, 256, 3, 1, 1),
        (14, 256, 512, 3, 2, 1),
        (7, 512, 512, 3, 1, 1),
        (56, 64, 128, 1, 2, 0),
        (28, 128, 256, 1, 2, 0),
        (14, 256, 512, 1, 2, 0),
        (224, 3, 64, 7, 2, 3),
    ];
    let filt: Option<String> = std::env::args().nth(1);
    let mut rng = Rng::new(1);
    for &(s, ci, co, k, st, p) in &shapes {
        let tag = format!("{s}x{ci}->{co}k{k}s{st}");
        if let Some(f) = &filt {
            if !tag.contains(f.as_str()) {
                continue;
            }
        }
        let opts = Conv2dOptions { stride: (st, st), padding: (p, p), ..Default::default() };
        let xv = Tensor::rand(&[n, ci, s, s], -1.0, 1.0, &mut rng)?;
        let wv = Tensor::rand(&[co, ci, k, k], -0.1, 0.1, &mut rng)?;
        let y0 = xv.conv2d(&wv, None, opts)?;
        let gy = Tensor::rand(&y0.value().shape().to_vec(), -1.0, 1.0, &mut rng)?;
        let (mut f, mut bd, mut bw) = (vec![], vec![], vec![]);
        let mode = std::env::var("MODE").unwrap_or_default();
        for _ in 0..12 {
            if mode.is_empty() || mode == "f" {
                let t = Instant::now();
                let _y = xv.conv2d(&wv, None, opts)?;
                f.push(t.elapsed().as_secs_f64() * 1e3);
            } else {
                f.push(0.0);
            }
            if mode.is_empty() || mode == "d" {
                let x = xv.detach().into_variable();
                let w = wv.detach();
                let y = x.conv2d(&w, None, opts)?;
                let t = Instant::now();
                y.backward_with_grad(&gy)?;
                bd.push(t.elapsed().as_secs_f64() * 1e3);
            } else {
                bd.push(0.0);
            }
            if mode.is_empty() || mode == "w" {
                let x = xv.detach();
                let w = wv.detach().into_variable();
                let y = x.conv2d(&w, None, opts)?;
                let t = Instant::now();
                y.backward_with_grad(&gy)?;
                bw.push(t.elapsed().as_secs_f64() * 1e3);
            } else {
                bw.push(0.0);
            }
        }
        println!("{tag:24} fwd {:7.2} dgrad {:7.2} wgrad {:7.2}", med(f), med(bd), med(bw));
    }
    Ok(())
}
