//! Fuzz target bodies: each takes arbitrary bytes and must never panic. Shared by the
//! cargo-fuzz binaries (`fuzz/fuzz_targets/*.rs`) and the stable replay test
//! (`crates/forgia/tests/fuzz_replay.rs`), which includes this file by path.
#![allow(unreachable_pub, dead_code)]

use std::path::PathBuf;
use std::sync::OnceLock;

use forgia::nn::{Linear, Sequential, Tanh};
use forgia::{BackwardOptions, Rng, Tensor};

/// A per-process, per-thread scratch file path.
fn scratch(tag: &str) -> PathBuf {
    let thread = format!("{:?}", std::thread::current().id()).replace(|c: char| !c.is_ascii_alphanumeric(), "");
    std::env::temp_dir().join(format!("forgia-fuzz-{tag}-{}-{thread}.safetensors", std::process::id()))
}

fn model() -> Sequential {
    let mut rng = Rng::new(7);
    Sequential::new()
        .push(Linear::new(3, 4, true, &mut rng).expect("valid sizes"))
        .push(Tanh)
        .push(Linear::new(4, 2, false, &mut rng).expect("valid sizes"))
}

/// The bytes of a valid checkpoint of [`model`], as a starting point for mutations.
fn valid_checkpoint() -> &'static [u8] {
    static BYTES: OnceLock<Vec<u8>> = OnceLock::new();
    BYTES.get_or_init(|| {
        let path = scratch("seed");
        forgia::io::save_model(&path, &model()).expect("saving a valid model");
        let bytes = std::fs::read(&path).expect("reading it back");
        let _ = std::fs::remove_file(&path);
        bytes
    })
}

/// The file the input describes: raw bytes when the first byte is even; otherwise a valid
/// checkpoint with byte edits `(position u16, value)` and an optional truncation.
fn file_bytes(data: &[u8]) -> Vec<u8> {
    match data.split_first() {
        Some((&mode, rest)) if mode & 1 == 1 => {
            let mut bytes = valid_checkpoint().to_vec();
            for edit in rest.chunks_exact(3) {
                let pos = u16::from_le_bytes([edit[0], edit[1]]) as usize % bytes.len();
                bytes[pos] = edit[2];
            }
            if mode & 2 == 2 {
                let keep = rest.len() * 37 % (bytes.len() + 1);
                bytes.truncate(keep);
            }
            bytes
        }
        _ => data.to_vec(),
    }
}

/// Target `load_checkpoint`: the bytes as a safetensors file, through `io::load` and
/// `io::load_into` of a small model. Errors are expected; panics are findings.
pub fn load_checkpoint(data: &[u8]) {
    let path = scratch("load");
    if std::fs::write(&path, file_bytes(data)).is_err() {
        return;
    }
    if let Ok(tensors) = forgia::io::load(&path) {
        for (_, t) in &tensors {
            let _ = t.sum_all().to_vec();
        }
    }
    let mut m = model();
    let before: Vec<Vec<f32>> = m_params(&m);
    if forgia::io::load_into(&mut m, &path).is_err() {
        assert_eq!(before, m_params(&m), "a failed load_into left the model changed");
    }
    let _ = std::fs::remove_file(&path);
}

fn m_params(m: &Sequential) -> Vec<Vec<f32>> {
    use forgia::nn::Module;
    m.named_parameters().iter().map(|(_, t)| t.to_vec()).collect()
}

/// Reads bytes one at a time; zeros after the end.
struct Bytes<'a>(&'a [u8]);

impl Bytes<'_> {
    fn u8(&mut self) -> u8 {
        match self.0.split_first() {
            Some((&b, rest)) => {
                self.0 = rest;
                b
            }
            None => 0,
        }
    }
    fn i8(&mut self) -> i8 {
        self.u8() as i8
    }
    fn pick(&mut self, n: usize) -> usize {
        self.u8() as usize % n.max(1)
    }
    /// A shape of rank 0..=4 with sizes 0..=4 (empty tensors included), or now and then a
    /// [`HUGE`] size: products that overflow, empty-but-huge shapes, views far beyond memory.
    fn shape(&mut self) -> Vec<usize> {
        let rank = self.u8() % 5;
        (0..rank)
            .map(|_| match self.u8() {
                b @ 250.. => HUGE[b as usize - 250],
                b => b as usize % 5,
            })
            .collect()
    }
    fn axes(&mut self) -> Vec<isize> {
        let n = self.u8() % 4;
        (0..n).map(|_| self.i8() as isize % 6).collect()
    }
}

/// Sizes of at least 2^40 (never between 2^32 and 2^40: a product of those with small sizes
/// could be a buffer the machine can allocate, and the target would then touch it).
const HUGE: [usize; 6] = [1 << 40, 1 << 41, 1 << 62, (1 << 62) + 1, usize::MAX / 2, usize::MAX];

/// Elements above which a result is not kept (keeps the target fast, not a correctness bound).
const MAX_NUMEL: usize = 1 << 14;

/// Target `op_sequence`: ops over a pool of small tensors, with arbitrary (often invalid)
/// axes, shapes and ranges; then backward from a few results, with varied options.
pub fn op_sequence(data: &[u8]) {
    let mut b = Bytes(data);
    let mut rng = Rng::new(1);
    let mut pool: Vec<Tensor> = vec![
        Tensor::rand(&[2, 3], -1.0, 1.0, &mut rng).expect("small").into_variable(),
        Tensor::rand(&[3], -1.0, 1.0, &mut rng).expect("small").into_variable(),
        Tensor::rand(&[3, 2], -1.0, 1.0, &mut rng).expect("small"),
        Tensor::scalar(0.5).into_variable(),
        Tensor::zeros(&[0, 3]).expect("empty").into_variable(),
    ];
    let steps = b.u8() as usize % 48;
    for _ in 0..steps {
        if b.0.is_empty() {
            break;
        }
        let code = b.u8() % 26;
        let x = pool[b.pick(pool.len())].clone();
        let y = pool[b.pick(pool.len())].clone();
        if let Some(out) = step(code, &x, &y, &mut b) {
            if out.numel() <= MAX_NUMEL && pool.len() < 64 {
                pool.push(out);
            }
        }
    }
    finish(&pool, &mut b);
}

/// One op; `None` when it failed (an `Err`, which is fine) or made nothing new.
fn step(code: u8, x: &Tensor, y: &Tensor, b: &mut Bytes<'_>) -> Option<Tensor> {
    let r = match code {
        0 => x.add(y),
        1 => x.sub(y),
        2 => x.mul(y),
        3 => x.div(y),
        4 => x.matmul(y),
        5 => Ok(x.scale(b.i8() as f32 / 16.0)),
        6 => Ok(x.add_scalar(b.i8() as f32 / 16.0)),
        7 => Ok(x.tanh()),
        8 => Ok(x.relu()),
        9 => x.sum(b.axes(), b.u8() & 1 == 1),
        10 => x.mean(b.axes(), b.u8() & 1 == 1),
        11 => Ok(x.sum_all()),
        12 => x.mean_all(),
        13 => x.reshape(&b.shape()),
        14 => x.permute(&b.shape()),
        15 => x.transpose(b.i8() as isize, b.i8() as isize),
        16 => x.narrow(b.i8() as isize, b.u8() as usize % 6, b.u8() as usize % 6),
        17 => x.slice(b.i8() as isize, b.i8() as isize, b.i8() as isize, b.u8() as usize % 4),
        18 => {
            let shape = b.shape();
            let small = shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d)).is_some_and(|n| n <= MAX_NUMEL);
            if !small {
                // A view far beyond memory: every op on it is an error or costs its storage.
                if let Ok(v) = x.broadcast_to(&shape) {
                    huge_view_ops(&v);
                }
                return None;
            }
            x.broadcast_to(&shape)
        }
        19 => x.squeeze(b.i8() as isize),
        20 => x.unsqueeze(b.i8() as isize),
        21 => x.flatten(b.i8() as isize, b.i8() as isize),
        22 => x.contiguous(),
        23 => Ok(x.detach()),
        24 => {
            backward_once(x, b);
            return None;
        }
        _ => {
            let _guard = forgia::no_grad();
            x.add(y).map(|t| t.tanh())
        }
    };
    r.ok()
}

/// Ops on a broadcast view whose logical size is far beyond memory: each must be an `Err`
/// (size, memory or work limit) or cost only the stored elements.
fn huge_view_ops(v: &Tensor) {
    let _ = v.tanh().scale(2.0).sum_all().item();
    let _ = v.sum(0, false);
    let _ = v.add(v);
    let _ = v.softmax(-1);
    let _ = v.try_to_vec();
    let _ = v.contiguous();
    if v.rank() >= 2 {
        let _ = v.matmul(&v.transpose(-1, -2).expect("rank >= 2"));
    }
}

/// A backward pass from `t` with options and a seed drawn from the bytes (all may be wrong).
fn backward_once(t: &Tensor, b: &mut Bytes<'_>) {
    let flags = b.u8();
    let options = BackwardOptions {
        retain_graph: flags & 1 != 0,
        create_graph: flags & 2 != 0,
        serial: flags & 4 != 0,
        detect_anomaly: flags & 8 != 0,
    };
    let seed = match flags >> 4 {
        0..=7 => None,
        8..=11 => Tensor::ones(t.shape()).ok(),
        _ => Tensor::ones(&b.shape()).ok(),
    };
    let _ = t.backward_with(seed.as_ref(), options);
    if options.create_graph {
        // Differentiate a gradient once more (a gradient penalty), if there is one.
        if let Some(g) = t.grad().filter(Tensor::requires_grad) {
            let _ = g.mul(&g).map(|s| s.sum_all().backward());
        }
    }
}

/// Backward from the last few results, then read every gradient and reset them.
fn finish(pool: &[Tensor], b: &mut Bytes<'_>) {
    for t in pool.iter().rev().take(3) {
        if b.u8() & 1 == 0 {
            let _ = t.sum_all().backward();
        } else {
            backward_once(t, b);
        }
    }
    for t in pool {
        if let Some(g) = t.grad() {
            assert_eq!(g.shape(), t.shape(), "a gradient's shape differs from its tensor's");
        }
        t.zero_grad();
    }
}
