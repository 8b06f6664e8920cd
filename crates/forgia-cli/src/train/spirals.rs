//! The quick job: an MLP 2→64→64→2 (tanh) on two interleaved spirals, generated from the seed;
//! Adam; reports test accuracy. Runs in seconds.

use forgia::loss::{cross_entropy, CrossEntropyOptions};
use forgia::nn::{Linear, Module, Sequential, Tanh};
use forgia::{Indices, Rng, Tensor};

use super::job::{shuffled_batches, subset};
use super::mnist::count_correct;
use super::{Job, Metric, Settings, StepOut, TrainError};

/// Epochs, batch size and learning rate when no flag says otherwise.
pub(super) const DEFAULTS: (u64, usize, f32) = (40, 32, 1e-2);
/// Points per spiral.
const PER_CLASS: usize = 1000;
/// Every `TEST_EVERY`-th point (of the shuffled set) is held out for testing.
const TEST_EVERY: usize = 5;

/// Points `[n, 2]` and labels of two spirals, arms `π` apart, with Gaussian noise.
fn spirals(seed: u64) -> (Vec<f32>, Vec<usize>) {
    let mut rng = Rng::new(seed ^ 0x05B1_2A15);
    let (mut points, mut labels) = (Vec::new(), Vec::new());
    for class in 0..2 {
        for i in 0..PER_CLASS {
            let t = 0.1 + 0.9 * i as f32 / PER_CLASS as f32;
            let angle = t * 3.5 * std::f32::consts::PI + class as f32 * std::f32::consts::PI;
            points.push(t * angle.cos() + 0.02 * rng.normal());
            points.push(t * angle.sin() + 0.02 * rng.normal());
            labels.push(class);
        }
    }
    (points, labels)
}

/// The spirals job.
pub(super) struct SpiralsJob {
    points: Vec<f32>,
    labels: Vec<usize>,
    train: Vec<usize>,
    test: Vec<usize>,
    model: Sequential,
    settings: Settings,
}

impl SpiralsJob {
    pub(super) fn new(settings: &Settings) -> Result<SpiralsJob, TrainError> {
        let (points, labels) = spirals(settings.seed);
        let mut order: Vec<usize> = (0..labels.len()).collect();
        Rng::new(settings.seed ^ 0x7E57).shuffle(&mut order);
        let test: Vec<usize> = order.iter().copied().step_by(TEST_EVERY).collect();
        let rest: Vec<usize> = order.iter().enumerate().filter(|(k, _)| k % TEST_EVERY != 0).map(|(_, &i)| i).collect();
        let train = subset(rest.len(), settings.limit).into_iter().map(|k| rest[k]).collect();
        let mut rng = Rng::new(settings.seed);
        let model = Sequential::new()
            .push(Linear::new(2, 64, true, &mut rng)?)
            .push(Tanh)
            .push(Linear::new(64, 64, true, &mut rng)?)
            .push(Tanh)
            .push(Linear::new(64, 2, true, &mut rng)?);
        Ok(SpiralsJob { points, labels, train, test, model, settings: settings.clone() })
    }

    fn batch(&self, indices: &[usize]) -> forgia::Result<(Tensor, Vec<usize>)> {
        let xs = indices.iter().flat_map(|&i| [self.points[2 * i], self.points[2 * i + 1]]).collect();
        let x = Tensor::from_vec(xs, &[indices.len(), 2])?;
        Ok((x, indices.iter().map(|&i| self.labels[i]).collect()))
    }
}

impl Job for SpiralsJob {
    fn model(&self) -> &dyn Module {
        &self.model
    }

    fn model_mut(&mut self) -> &mut dyn Module {
        &mut self.model
    }

    fn headline(&self) -> &'static str {
        "MLP 2-64-64-2, Adam"
    }

    fn describe(&self, s: &Settings) -> String {
        format!(
            "spirals: MLP 2-64-64-2 (tanh) with {} parameters; {} training / {} test points; Adam lr {}, batch {}, {} epochs",
            self.model.num_parameters(),
            self.train.len(),
            self.test.len(),
            s.lr,
            s.batch_size,
            s.epochs
        )
    }

    fn metric(&self) -> Metric {
        Metric::TestAccuracy
    }

    fn plan(&self, epoch: u64) -> Vec<Vec<usize>> {
        shuffled_batches(&self.train, self.settings.batch_size, self.settings.seed, epoch)
    }

    fn train_step(&self, batch: &[usize], _step: u64) -> Result<StepOut, TrainError> {
        let (x, labels) = self.batch(batch)?;
        let logits = self.model.forward(&x)?;
        let loss = cross_entropy(&logits, &Indices::from(labels.clone()), CrossEntropyOptions::default())?;
        Ok(StepOut { loss, correct: Some(count_correct(&logits.detach(), &labels)?) })
    }

    fn evaluate(&self) -> Result<f64, TrainError> {
        let (x, labels) = self.batch(&self.test)?;
        let correct = count_correct(&self.model.forward(&x)?, &labels)?;
        Ok(100.0 * correct as f64 / labels.len() as f64)
    }
}
