//! A ResNet of basic blocks (`transformers`' `ResNetForImageClassification` with
//! `layer_type = "basic"`, parameter names included).
//!
//! Embedder: 7×7 convolution (stride 2, padding 3) → BatchNorm → ReLU → 3×3 max pool (stride
//! 2, padding 1). Each stage holds `depths[i]` residual blocks of two 3×3 conv + BatchNorm
//! layers, `relu(layer.1(relu(layer.0(x))) + shortcut(x))`, the first block of a stage
//! striding by 2 (stage 0 only with `downsample_in_first_stage`) with a 1×1 conv + BatchNorm
//! shortcut when the shape changes. Then adaptive average pooling to 1×1 and the classifier.
//! BatchNorm uses batch statistics in training mode and running ones after
//! `set_training(false)`; the checkpoint's `num_batches_tracked` counters are integer entries
//! the loader skips (momentum is fixed at 0.1).
//!
//! ```
//! use forgia::models::resnet::{ResNetConfig, ResNetForImageClassification};
//! use forgia::nn::Module;
//! use forgia::{Rng, Tensor};
//! let config = ResNetConfig { embedding_size: 4, hidden_sizes: vec![4, 8], depths: vec![1, 1], ..ResNetConfig::default() };
//! let mut model = ResNetForImageClassification::new(config, 3, &mut Rng::new(0))?;
//! model.set_training(false);
//! let logits = model.forward(&Tensor::zeros(&[2, 3, 16, 16])?)?;
//! assert_eq!(logits.shape(), &[2, 3]);
//! # Ok::<(), forgia::Error>(())
//! ```

use super::common::normal;
use crate::autograd::Tensor;
use crate::error::{fail, ErrorKind, Result};
use crate::io::HfConfig;
use crate::nn::{visit_child, visit_child_mut, BatchNorm2d, Linear, Module};
use crate::ops::conv::Conv2dOptions;
use crate::tensor::Rng;

/// A ResNet configuration: the keys of `config.json` it reads.
#[derive(Clone, Debug, PartialEq)]
pub struct ResNetConfig {
    /// `num_channels` of the input images.
    pub num_channels: usize,
    /// `embedding_size`: the embedder's output channels.
    pub embedding_size: usize,
    /// `hidden_sizes`: each stage's channels.
    pub hidden_sizes: Vec<usize>,
    /// `depths`: each stage's block count.
    pub depths: Vec<usize>,
    /// `downsample_in_first_stage`.
    pub downsample_in_first_stage: bool,
}

impl Default for ResNetConfig {
    /// ResNet-18's layout (basic blocks).
    fn default() -> ResNetConfig {
        ResNetConfig {
            num_channels: 3,
            embedding_size: 64,
            hidden_sizes: vec![64, 128, 256, 512],
            depths: vec![2, 2, 2, 2],
            downsample_in_first_stage: false,
        }
    }
}

impl ResNetConfig {
    /// Reads a `config.json`.
    ///
    /// # Errors
    /// `Checkpoint` naming a key of the wrong type; `InvalidArgument` for a `layer_type` other
    /// than `basic` or an activation other than `relu` (not built here).
    pub fn from_hf(c: &HfConfig) -> Result<ResNetConfig> {
        let d = ResNetConfig::default();
        for (key, want) in [("layer_type", "basic"), ("hidden_act", "relu")] {
            let got = c.str_or(key, want)?;
            if got != want {
                return fail(ErrorKind::InvalidArgument {
                    op: "ResNetConfig::from_hf",
                    arg: "config",
                    reason: format!("{key} {got:?} is not supported (only {want:?})"),
                });
            }
        }
        Ok(ResNetConfig {
            num_channels: c.usize_or("num_channels", d.num_channels)?,
            embedding_size: c.usize_or("embedding_size", d.embedding_size)?,
            hidden_sizes: if c.has("hidden_sizes") { c.usize_list("hidden_sizes")? } else { d.hidden_sizes },
            depths: if c.has("depths") { c.usize_list("depths")? } else { d.depths },
            downsample_in_first_stage: c.bool_or("downsample_in_first_stage", d.downsample_in_first_stage)?,
        })
    }
}

/// A bias-free convolution followed by BatchNorm (`ResNetConvLayer` / `ResNetShortCut`).
pub struct ConvNorm {
    /// `convolution.weight`, `[out, in, k, k]`.
    pub weight: Tensor,
    /// `normalization`.
    pub norm: BatchNorm2d,
    /// Stride and padding (`k / 2`).
    pub options: Conv2dOptions,
}

impl ConvNorm {
    fn new(cin: usize, cout: usize, k: usize, stride: usize, rng: &mut Rng) -> Result<ConvNorm> {
        // Kaiming-normal, fan-out, ReLU gain (transformers' init of ResNet convolutions).
        let std = (2.0 / (cout * k * k) as f32).sqrt();
        Ok(ConvNorm {
            weight: normal(&[cout, cin, k, k], std, rng)?,
            norm: BatchNorm2d::new(cout, 1e-5)?,
            options: Conv2dOptions { stride: (stride, stride), padding: (k / 2, k / 2), ..Conv2dOptions::default() },
        })
    }

    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        self.norm.forward(&x.conv2d(&self.weight, None, self.options)?)
    }
}

impl Module for ConvNorm {
    fn visit_params(&self, f: &mut dyn FnMut(&str, &Tensor)) {
        f("convolution.weight", &self.weight);
        visit_child("normalization", &self.norm, f);
    }

    fn visit_params_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor)) {
        f("convolution.weight", &mut self.weight);
        visit_child_mut("normalization", &mut self.norm, f);
    }

    fn set_training(&mut self, training: bool) {
        self.norm.set_training(training);
    }
}

/// A basic residual block (`ResNetBasicLayer`).
pub struct BasicBlock {
    /// `shortcut`, when the block changes the shape.
    pub shortcut: Option<ConvNorm>,
    /// `layer.0` (followed by ReLU).
    pub conv1: ConvNorm,
    /// `layer.1`.
    pub conv2: ConvNorm,
}

impl BasicBlock {
    fn new(cin: usize, cout: usize, stride: usize, rng: &mut Rng) -> Result<BasicBlock> {
        let shortcut = if cin != cout || stride != 1 { Some(ConvNorm::new(cin, cout, 1, stride, rng)?) } else { None };
        Ok(BasicBlock {
            shortcut,
            conv1: ConvNorm::new(cin, cout, 3, stride, rng)?,
            conv2: ConvNorm::new(cout, cout, 3, 1, rng)?,
        })
    }

    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let residual = match &self.shortcut {
            Some(s) => s.forward(x)?,
            None => x.clone(),
        };
        let h = self.conv2.forward(&self.conv1.forward(x)?.relu())?;
        Ok(h.add(&residual)?.relu())
    }
}

impl Module for BasicBlock {
    fn visit_params(&self, f: &mut dyn FnMut(&str, &Tensor)) {
        if let Some(s) = &self.shortcut {
            visit_child("shortcut", s, f);
        }
        visit_child("layer.0", &self.conv1, f);
        visit_child("layer.1", &self.conv2, f);
    }

    fn visit_params_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor)) {
        if let Some(s) = &mut self.shortcut {
            visit_child_mut("shortcut", s, f);
        }
        visit_child_mut("layer.0", &mut self.conv1, f);
        visit_child_mut("layer.1", &mut self.conv2, f);
    }

    fn set_training(&mut self, training: bool) {
        if let Some(s) = &mut self.shortcut {
            s.set_training(training);
        }
        self.conv1.set_training(training);
        self.conv2.set_training(training);
    }
}

/// `ResNetForImageClassification` (`resnet.embedder.embedder.convolution.weight`,
/// `resnet.encoder.stages.0.layers.0.layer.0.convolution.weight`, …, `classifier.1.weight`),
/// in training mode when built.
pub struct ResNetForImageClassification {
    /// The configuration it was built with.
    pub config: ResNetConfig,
    /// `resnet.embedder.embedder`.
    pub embedder: ConvNorm,
    /// `resnet.encoder.stages.{i}.layers.{j}`.
    pub stages: Vec<Vec<BasicBlock>>,
    /// `classifier.1`.
    pub classifier: Linear,
}

impl ResNetForImageClassification {
    /// A randomly initialized model with `num_labels` classes.
    ///
    /// # Errors
    /// `InvalidArgument` for zero sizes, no stages, or `depths` and `hidden_sizes` of
    /// different lengths.
    pub fn new(config: ResNetConfig, num_labels: usize, rng: &mut Rng) -> Result<ResNetForImageClassification> {
        let c = &config;
        if c.hidden_sizes.is_empty()
            || c.hidden_sizes.len() != c.depths.len()
            || c.depths.contains(&0)
            || num_labels == 0
        {
            return fail(ErrorKind::InvalidArgument {
                op: "ResNetForImageClassification::new",
                arg: "config",
                reason: format!("depths {:?} and hidden_sizes {:?} must be non-empty, positive and of one length, num_labels {num_labels} positive", c.depths, c.hidden_sizes),
            });
        }
        let embedder = ConvNorm::new(c.num_channels, c.embedding_size, 7, 2, rng)?;
        let mut stages = Vec::new();
        let mut cin = c.embedding_size;
        for (i, (&cout, &depth)) in c.hidden_sizes.iter().zip(&c.depths).enumerate() {
            let stride = if i > 0 || c.downsample_in_first_stage { 2 } else { 1 };
            let mut blocks = vec![BasicBlock::new(cin, cout, stride, rng)?];
            for _ in 1..depth {
                blocks.push(BasicBlock::new(cout, cout, 1, rng)?);
            }
            stages.push(blocks);
            cin = cout;
        }
        let classifier = Linear::new(cin, num_labels, true, rng)?;
        Ok(ResNetForImageClassification { config, embedder, stages, classifier })
    }

    /// Class logits `[N, num_labels]` of images `[N, C, H, W]`.
    ///
    /// # Errors
    /// `RankMismatch` / `ShapeMismatch` for an input that is not `[N, num_channels, H, W]`;
    /// `InvalidArgument` for an image too small for the 7×7 embedder and its pooling.
    pub fn forward(&self, pixels: &Tensor) -> Result<Tensor> {
        let mut x = self.embedder.forward(pixels)?.relu().max_pool2d((3, 3), (2, 2), (1, 1))?;
        for stage in &self.stages {
            for block in stage {
                x = block.forward(&x)?;
            }
        }
        let pooled = x.adaptive_avg_pool2d_1x1()?;
        let n = pooled.shape()[0];
        self.classifier.forward(&pooled.reshape(&[n, pooled.numel() / n.max(1)])?)
    }
}

impl Module for ResNetForImageClassification {
    fn visit_params(&self, f: &mut dyn FnMut(&str, &Tensor)) {
        visit_child("resnet.embedder.embedder", &self.embedder, f);
        for (i, stage) in self.stages.iter().enumerate() {
            for (j, b) in stage.iter().enumerate() {
                visit_child(&format!("resnet.encoder.stages.{i}.layers.{j}"), b, f);
            }
        }
        visit_child("classifier.1", &self.classifier, f);
    }

    fn visit_params_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor)) {
        visit_child_mut("resnet.embedder.embedder", &mut self.embedder, f);
        for (i, stage) in self.stages.iter_mut().enumerate() {
            for (j, b) in stage.iter_mut().enumerate() {
                visit_child_mut(&format!("resnet.encoder.stages.{i}.layers.{j}"), b, f);
            }
        }
        visit_child_mut("classifier.1", &mut self.classifier, f);
    }

    fn set_training(&mut self, training: bool) {
        self.embedder.set_training(training);
        for b in self.stages.iter_mut().flatten() {
            b.set_training(training);
        }
    }
}
