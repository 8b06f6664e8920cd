//! A small CNN on the MNIST digits shipped in `data/mnist_5k.csv.gz` (500 per digit: the first
//! 400 of each train, the last 100 test): reading the file, a model as a struct that
//! implements `Module`, mini-batches, Adam, and test accuracy under `no_grad`.
//!
//! Run it with `cargo run --release -p forgia --example mnist_cnn` (set `FORGIA_DATA_DIR` to
//! read the file from another folder). `forgia train` trains the bigger CNN of the CLI.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;

use forgia::loss::{cross_entropy, CrossEntropyOptions};
use forgia::nn::{visit_child, visit_child_mut, Conv2d, Linear, Module};
use forgia::optim::{Adam, AdamConfig, Optimizer};
use forgia::{Conv2dOptions, Indices, Rng, Tensor};

/// Images as `[n, 1, 28, 28]` grey levels in `[0, 1]`, and their digits.
struct Split {
    images: Vec<f32>,
    labels: Vec<usize>,
}

/// Reads the gzip CSV (784 grey levels then the label per line) into (train, test) splits.
fn load() -> Result<(Split, Split), Box<dyn std::error::Error>> {
    let dir = std::env::var_os("FORGIA_DATA_DIR")
        .map_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../data")), PathBuf::from);
    let path = dir.join("mnist_5k.csv.gz");
    let file = std::fs::File::open(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let (mut train, mut test) = (Split { images: vec![], labels: vec![] }, Split { images: vec![], labels: vec![] });
    let mut seen = [0usize; 10];
    for line in BufReader::new(flate2::read::GzDecoder::new(file)).lines() {
        let fields: Vec<u32> = line?.split(',').map(str::parse).collect::<Result<_, _>>()?;
        let (&label, pixels) = fields.split_last().ok_or("empty line")?;
        let split = if seen[label as usize] < 400 { &mut train } else { &mut test };
        seen[label as usize] += 1;
        split.images.extend(pixels.iter().map(|&p| p as f32 / 255.0));
        split.labels.push(label as usize);
    }
    Ok((train, test))
}

/// conv 1→8 3x3, relu, pool → conv 8→16 3x3, relu, pool → linear 784→10.
struct Cnn {
    conv1: Conv2d,
    conv2: Conv2d,
    head: Linear,
}

impl Cnn {
    fn new(rng: &mut Rng) -> forgia::Result<Cnn> {
        let same = Conv2dOptions { padding: (1, 1), ..Conv2dOptions::default() };
        Ok(Cnn {
            conv1: Conv2d::new(1, 8, (3, 3), same, true, rng)?,
            conv2: Conv2d::new(8, 16, (3, 3), same, true, rng)?,
            head: Linear::new(16 * 7 * 7, 10, true, rng)?,
        })
    }

    fn forward(&self, x: &Tensor) -> forgia::Result<Tensor> {
        let h = self.conv1.forward(x)?.relu().max_pool2d((2, 2), (2, 2), (0, 0))?;
        let h = self.conv2.forward(&h)?.relu().max_pool2d((2, 2), (2, 2), (0, 0))?;
        self.head.forward(&h.flatten(1, -1)?)
    }
}

/// Parameters are named `conv1.weight`, `head.bias`, ... like PyTorch's `state_dict`.
impl Module for Cnn {
    fn visit_params(&self, f: &mut dyn FnMut(&str, &Tensor)) {
        visit_child("conv1", &self.conv1, f);
        visit_child("conv2", &self.conv2, f);
        visit_child("head", &self.head, f);
    }

    fn visit_params_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor)) {
        visit_child_mut("conv1", &mut self.conv1, f);
        visit_child_mut("conv2", &mut self.conv2, f);
        visit_child_mut("head", &mut self.head, f);
    }
}

/// The images `rows` of `split` as a standardized batch `[B, 1, 28, 28]`, and their labels.
fn batch(split: &Split, rows: &[usize]) -> forgia::Result<(Tensor, Vec<usize>)> {
    let image = |i: usize| split.images[i * 784..(i + 1) * 784].iter().map(|p| (p - 0.1307) / 0.3081);
    let pixels = rows.iter().flat_map(|&i| image(i)).collect();
    Ok((Tensor::from_vec(pixels, &[rows.len(), 1, 28, 28])?, rows.iter().map(|&i| split.labels[i]).collect()))
}

/// Trains on the first `n_train` training images (shuffled) for `epochs`; returns the test
/// accuracy on the first `n_test` test images.
fn run(n_train: usize, epochs: usize, n_test: usize) -> Result<f32, Box<dyn std::error::Error>> {
    let (train, test) = load()?;
    let mut rng = Rng::new(0);
    let mut model = Cnn::new(&mut rng)?;
    let mut opt = Adam::new(AdamConfig { lr: 3e-3, ..AdamConfig::adam() })?;
    let mut order: Vec<usize> = (0..train.labels.len()).collect();
    for epoch in 1..=epochs {
        rng.shuffle(&mut order);
        for rows in order[..n_train.min(order.len())].chunks(32) {
            let (x, labels) = batch(&train, rows)?;
            opt.zero_grad(&model);
            let loss = cross_entropy(&model.forward(&x)?, &Indices::from(labels), CrossEntropyOptions::default())?;
            loss.backward()?;
            opt.step(&mut model)?;
        }
        println!("epoch {epoch} done");
    }
    let _no_graph = forgia::no_grad(); // evaluation records nothing
    let rows: Vec<usize> = (0..n_test.min(test.labels.len())).collect();
    let mut correct = 0;
    for chunk in rows.chunks(250) {
        let (x, labels) = batch(&test, chunk)?;
        correct += model.forward(&x)?.argmax(1, false)?.positions().iter().zip(&labels).filter(|(p, l)| p == l).count();
    }
    Ok(correct as f32 / rows.len() as f32)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("test accuracy {:.1}%", 100.0 * run(4000, 3, 1000)?);
    Ok(())
}

#[test]
fn a_few_hundred_images_beat_chance_by_far() {
    // The test split is sorted by digit: take every digit by testing all 1,000 images.
    let accuracy = run(960, 1, 1000).unwrap();
    println!("test accuracy {accuracy}");
    assert!(accuracy > 0.5, "{accuracy}");
}
