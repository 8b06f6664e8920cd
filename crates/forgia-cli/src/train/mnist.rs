//! The main job: a CNN on the MNIST subset (4,000 training and 1,000 test digits).
//!
//! conv 1→32 5x5 pad 2, relu, maxpool 2 → conv 32→64 5x5 pad 2, relu, maxpool 2 → dropout
//! 0.25 → linear 3136→128, relu, dropout 0.25 → linear 128→10; PyTorch default init, mean
//! cross-entropy, Adam (lr 1e-3), batch 64, 10 epochs, test accuracy after each epoch.
//!
//! Each conv block pools before its relu: `relu(maxpool(x)) = maxpool(relu(x))` exactly (relu
//! is monotone, so both pick the same window element, and both give it the gradient only where
//! it is positive), so the network is the one above, value for value and gradient for
//! gradient, with its relu on a quarter of the elements.

use forgia::loss::{cross_entropy, CrossEntropyOptions};
use forgia::nn::{visit_child, visit_child_mut, Conv2d, Dropout, Linear, Module};
use forgia::{Conv2dOptions, Indices, Rng, Tensor};

use super::saved::SavedRun;
use super::{Job, Metric, Settings, StepOut, TrainError};
use crate::data::mnist::{self, MnistSplit, CLASSES, IMAGE_SIDE, PIXELS};
use forgia::optim::{Adam, AdamConfig};

/// Epochs, batch size and learning rate when no flag says otherwise.
pub(super) const DEFAULTS: (u64, usize, f32) = (10, 64, 1e-3);
/// Test images per evaluation batch.
const EVAL_BATCH: usize = 500;
/// The largest augmentation shift, in pixels.
const MAX_SHIFT: i64 = 2;

/// The CNN. Parameters `conv1.*`, `conv2.*`, `fc1.*`, `fc2.*`.
pub(crate) struct Cnn {
    conv1: Conv2d,
    conv2: Conv2d,
    fc1: Linear,
    fc2: Linear,
    drop1: Dropout,
    drop2: Dropout,
    checkpoint: bool,
}

impl Cnn {
    /// The model with PyTorch's default init drawn from `Rng::new(seed)` (conv1, conv2, fc1,
    /// fc2 in order); `checkpoint` recomputes each conv block in backward.
    pub(super) fn new(seed: u64, checkpoint: bool) -> Result<Cnn, TrainError> {
        let mut rng = Rng::new(seed);
        let pad2 = Conv2dOptions { padding: (2, 2), ..Conv2dOptions::default() };
        let side = IMAGE_SIDE / 4;
        Ok(Cnn {
            conv1: Conv2d::new(1, 32, (5, 5), pad2, true, &mut rng)?,
            conv2: Conv2d::new(32, 64, (5, 5), pad2, true, &mut rng)?,
            fc1: Linear::new(64 * side * side, 128, true, &mut rng)?,
            fc2: Linear::new(128, CLASSES, true, &mut rng)?,
            drop1: Dropout::new(0.25, seed ^ 0xD0)?,
            drop2: Dropout::new(0.25, seed ^ 0xD1)?,
            checkpoint,
        })
    }

    /// Logits `[B, 10]` of images `[B, 1, 28, 28]`. Training step `step` seeds the two dropout
    /// masks (`seed_of_call(step)` of each layer), so the masks are pure functions of the step.
    pub(super) fn forward(&self, x: &Tensor, step: u64) -> forgia::Result<Tensor> {
        let h = self.block(&self.conv1, x)?;
        let h = self.block(&self.conv2, &h)?;
        let h = self.drop1.forward_with_seed(&h, self.drop1.seed_of_call(step))?.flatten(1, -1)?;
        let h = self.fc1.forward(&h)?.relu();
        let h = self.drop2.forward_with_seed(&h, self.drop2.seed_of_call(step))?;
        self.fc2.forward(&h)
    }

    /// conv → relu → 2x2 max-pool (computed as pool, then relu), under activation
    /// checkpointing when asked.
    fn block(&self, conv: &Conv2d, x: &Tensor) -> forgia::Result<Tensor> {
        match (&conv.bias, self.checkpoint) {
            (Some(b), true) => {
                let opts = conv.options;
                forgia::checkpoint(move |xs| conv_block(&xs[0], &xs[1], &xs[2], opts), &[x, &conv.weight, b])
            }
            (Some(b), false) => conv_block(x, &conv.weight, b, conv.options),
            (None, _) => Ok(conv.forward(x)?.max_pool2d((2, 2), (2, 2), (0, 0))?.relu()),
        }
    }
}

/// conv → 2x2 max-pool → relu: the module doc's conv → relu → pool, exactly.
fn conv_block(x: &Tensor, w: &Tensor, b: &Tensor, opts: Conv2dOptions) -> forgia::Result<Tensor> {
    Ok(x.conv2d(w, Some(b), opts)?.max_pool2d((2, 2), (2, 2), (0, 0))?.relu())
}

impl Module for Cnn {
    fn visit_params(&self, f: &mut dyn FnMut(&str, &Tensor)) {
        visit_child("conv1", &self.conv1, f);
        visit_child("conv2", &self.conv2, f);
        visit_child("fc1", &self.fc1, f);
        visit_child("fc2", &self.fc2, f);
    }

    fn visit_params_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor)) {
        visit_child_mut("conv1", &mut self.conv1, f);
        visit_child_mut("conv2", &mut self.conv2, f);
        visit_child_mut("fc1", &mut self.fc1, f);
        visit_child_mut("fc2", &mut self.fc2, f);
    }

    fn set_training(&mut self, training: bool) {
        self.drop1.set_training(training);
        self.drop2.set_training(training);
    }
}

/// The MNIST job: data, model and settings.
pub(super) struct MnistJob {
    data: MnistSplit,
    /// Training images in use (all, or the first `--limit` of a fixed shuffled order).
    train: Vec<usize>,
    model: Cnn,
    settings: Settings,
}

impl MnistJob {
    pub(super) fn new(settings: &Settings) -> Result<MnistJob, TrainError> {
        let data = mnist::load(settings.data_dir.as_deref())?;
        let train = super::job::subset(data.train_labels.len(), settings.limit);
        let model = Cnn::new(settings.seed, settings.checkpoint)?;
        Ok(MnistJob { data, train, model, settings: settings.clone() })
    }

    /// The images of `batch` as `[B, 1, 28, 28]`, shifted when augmenting.
    fn images(&self, batch: &[usize], step: u64) -> forgia::Result<Tensor> {
        let mut pixels = Vec::with_capacity(batch.len() * PIXELS);
        let mut rng = Rng::new(self.settings.seed ^ step.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xA0);
        for &i in batch {
            let image = &self.data.train_images[i * PIXELS..(i + 1) * PIXELS];
            if self.settings.augment {
                let span = (2 * MAX_SHIFT + 1) as usize;
                let (dy, dx) = (rng.below(span) as i64 - MAX_SHIFT, rng.below(span) as i64 - MAX_SHIFT);
                pixels.extend(shifted(image, dy, dx));
            } else {
                pixels.extend_from_slice(image);
            }
        }
        Tensor::from_vec(normalized(pixels), &[batch.len(), 1, IMAGE_SIDE, IMAGE_SIDE])
    }
}

/// The usual MNIST standardization: the training set's mean and standard deviation of the
/// grey level (0.1307, 0.3081 on the full set), applied after any shift.
fn normalized(mut pixels: Vec<f32>) -> Vec<f32> {
    const MEAN: f32 = 0.1307;
    const STD: f32 = 0.3081;
    pixels.iter_mut().for_each(|v| *v = (*v - MEAN) / STD);
    pixels
}

/// `image` moved by `dy` rows and `dx` columns, zeros shifted in.
fn shifted(image: &[f32], dy: i64, dx: i64) -> Vec<f32> {
    let side = IMAGE_SIDE as i64;
    let mut out = vec![0.0; PIXELS];
    for r in 0..side {
        for c in 0..side {
            let (sr, sc) = (r - dy, c - dx);
            if (0..side).contains(&sr) && (0..side).contains(&sc) {
                out[(r * side + c) as usize] = image[(sr * side + sc) as usize];
            }
        }
    }
    out
}

/// The model's digit for each image of `images` (back to back, [`PIXELS`] grey levels in
/// `[0, 1]` each), in evaluation batches. Run it in evaluation mode, under `no_grad`.
pub(crate) fn predict(model: &Cnn, images: &[f32]) -> forgia::Result<Vec<usize>> {
    let n = images.len() / PIXELS;
    let mut predicted = Vec::with_capacity(n);
    for start in (0..n).step_by(EVAL_BATCH) {
        let end = (start + EVAL_BATCH).min(n);
        let pixels = images[start * PIXELS..end * PIXELS].to_vec();
        let x = Tensor::from_vec(normalized(pixels), &[end - start, 1, IMAGE_SIDE, IMAGE_SIDE])?;
        predicted.extend(model.forward(&x, 0)?.argmax(1, false)?.positions());
    }
    Ok(predicted)
}

/// Rebuilds the CNN of an mnist run saved at `saved`, in evaluation mode; `user` names what
/// needs it, for the message when the file is another job's.
///
/// # Errors
/// [`TrainError::Invalid`] for another job's file; the library's checkpoint error when the
/// weights do not fit.
pub(crate) fn model_from_saved(saved: &SavedRun, user: &str) -> Result<Cnn, TrainError> {
    saved.expect(super::Task::Mnist, user)?;
    let mut model = Cnn::new(0, false)?;
    // The optimizer only receives the saved state; the mnist job trains with Adam.
    let mut optimizer = Adam::new(AdamConfig::adam())?;
    saved.load_into(&mut model, &mut optimizer)?;
    model.set_training(false);
    Ok(model)
}

/// How many rows of `logits [B, C]` have their maximum at the label.
pub(super) fn count_correct(logits: &Tensor, labels: &[usize]) -> forgia::Result<usize> {
    let predicted = logits.argmax(1, false)?.positions();
    Ok(predicted.iter().zip(labels).filter(|(p, l)| p == l).count())
}

impl Job for MnistJob {
    fn model(&self) -> &dyn Module {
        &self.model
    }

    fn model_mut(&mut self) -> &mut dyn Module {
        &mut self.model
    }

    fn headline(&self) -> &'static str {
        "CNN, Adam"
    }

    fn describe(&self, s: &Settings) -> String {
        format!(
            "mnist: CNN with {} parameters; {} training / {} test images; Adam lr {}, batch {}, {} epochs{}{}",
            self.model.num_parameters(),
            self.train.len(),
            self.data.test_labels.len(),
            s.lr,
            s.batch_size,
            s.epochs,
            if s.augment { ", ±2-pixel shifts" } else { "" },
            if s.checkpoint { ", activation checkpointing" } else { "" },
        )
    }

    fn metric(&self) -> Metric {
        Metric::TestAccuracy
    }

    fn plan(&self, epoch: u64) -> Vec<Vec<usize>> {
        super::job::shuffled_batches(&self.train, self.settings.batch_size, self.settings.seed, epoch)
    }

    fn train_step(&self, batch: &[usize], step: u64) -> Result<StepOut, TrainError> {
        let x = self.images(batch, step)?;
        let labels: Vec<usize> = batch.iter().map(|&i| self.data.train_labels[i]).collect();
        let logits = self.model.forward(&x, step)?;
        let loss = cross_entropy(&logits, &Indices::from(labels.clone()), CrossEntropyOptions::default())?;
        Ok(StepOut { loss, correct: Some(count_correct(&logits.detach(), &labels)?) })
    }

    fn evaluate(&self) -> Result<f64, TrainError> {
        let labels = &self.data.test_labels;
        let predicted = predict(&self.model, &self.data.test_images)?;
        let correct = predicted.iter().zip(labels).filter(|(p, l)| p == l).count();
        Ok(100.0 * correct as f64 / labels.len() as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shift_moves_pixels_and_fills_zeros() {
        let mut image = vec![0.0; PIXELS];
        image[0] = 1.0;
        let moved = shifted(&image, 2, 1);
        assert_eq!(moved[2 * IMAGE_SIDE + 1], 1.0);
        assert_eq!(moved.iter().sum::<f32>(), 1.0);
        assert_eq!(shifted(&image, -1, 0).iter().sum::<f32>(), 0.0);
    }

    #[test]
    fn pooling_before_the_relu_gives_the_values_and_gradients_of_pooling_after_it() {
        let pad2 = Conv2dOptions { padding: (2, 2), ..Conv2dOptions::default() };
        let mut rng = Rng::new(11);
        let x = Tensor::randn(&[3, 2, 8, 8], 0.0, 1.0, &mut rng).unwrap();
        let w = Tensor::randn(&[4, 2, 5, 5], 0.0, 0.3, &mut rng).unwrap().into_variable();
        let b = Tensor::randn(&[4], 0.0, 1.0, &mut rng).unwrap().into_variable();
        let r = Tensor::randn(&[3, 4, 4, 4], 0.0, 1.0, &mut rng).unwrap();
        let ours = conv_block(&x, &w, &b, pad2).unwrap();
        ours.mul(&r).unwrap().sum_all().backward().unwrap();
        let (gw, gb) = (w.grad().unwrap().to_vec(), b.grad().unwrap().to_vec());
        w.zero_grad();
        b.zero_grad();
        let twin = x.conv2d(&w, Some(&b), pad2).unwrap().relu().max_pool2d((2, 2), (2, 2), (0, 0)).unwrap();
        twin.mul(&r).unwrap().sum_all().backward().unwrap();
        let values = ours.to_vec();
        assert!(values.contains(&0.0) && values.iter().any(|v| *v > 0.0), "both relu branches are taken");
        assert_eq!(ours.to_vec(), twin.to_vec());
        assert_eq!(gw, w.grad().unwrap().to_vec());
        assert_eq!(gb, b.grad().unwrap().to_vec());
    }

    #[test]
    fn the_cnn_has_the_documented_shapes() {
        let model = Cnn::new(0, false).unwrap();
        assert_eq!(model.num_parameters(), 32 * 25 + 32 + 64 * 32 * 25 + 64 + 3136 * 128 + 128 + 1280 + 10);
        let y = model.forward(&Tensor::zeros(&[2, 1, 28, 28]).unwrap(), 0).unwrap();
        assert_eq!(y.shape(), [2, 10]);
    }
}
