//! [`Sequential`]: a chain of boxed single-input layers, named `"0."`, `"1."`, … like PyTorch;
//! and the parameter-free activation layers [`Relu`], [`Tanh`] and [`Gelu`].

use super::{visit_child, visit_child_mut, Forward, Layer, Module};
use crate::autograd::Tensor;
use crate::error::Result;

/// Layers applied one after another. Parameters of layer `i` are named `"{i}.{name}"`.
#[derive(Default)]
pub struct Sequential {
    layers: Vec<Box<dyn Layer>>,
}

impl Sequential {
    /// An empty chain (the identity).
    pub fn new() -> Sequential {
        Sequential { layers: Vec::new() }
    }

    /// Appends a layer (builder style).
    pub fn push(mut self, layer: impl Layer + 'static) -> Sequential {
        self.layers.push(Box::new(layer));
        self
    }

    /// Appends an already boxed layer.
    pub fn push_boxed(&mut self, layer: Box<dyn Layer>) {
        self.layers.push(layer);
    }

    /// Number of layers.
    pub fn len(&self) -> usize {
        self.layers.len()
    }

    /// True when there are no layers.
    pub fn is_empty(&self) -> bool {
        self.layers.is_empty()
    }

    /// Layer `i`, if any.
    pub fn get(&self, i: usize) -> Option<&dyn Layer> {
        self.layers.get(i).map(|l| l.as_ref())
    }

    /// Layer `i` mutably, if any.
    pub fn get_mut(&mut self, i: usize) -> Option<&mut (dyn Layer + 'static)> {
        self.layers.get_mut(i).map(|l| l.as_mut())
    }

    /// Applies every layer in order.
    ///
    /// # Errors
    /// The first error a layer returns.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let mut h = x.clone();
        for layer in &self.layers {
            h = layer.forward(&h)?;
        }
        Ok(h)
    }
}

impl Module for Sequential {
    fn visit_params(&self, f: &mut dyn FnMut(&str, &Tensor)) {
        for (i, layer) in self.layers.iter().enumerate() {
            visit_child(&i.to_string(), layer.as_ref(), f);
        }
    }

    fn visit_params_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor)) {
        for (i, layer) in self.layers.iter_mut().enumerate() {
            visit_child_mut(&i.to_string(), layer.as_mut(), f);
        }
    }

    fn set_training(&mut self, training: bool) {
        for layer in &mut self.layers {
            layer.set_training(training);
        }
    }
}

impl Forward for Sequential {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        Sequential::forward(self, x)
    }
}

/// The layer form of [`Tensor::relu`]. No parameters.
#[derive(Clone, Copy, Debug, Default)]
pub struct Relu;

impl Module for Relu {
    fn visit_params(&self, _f: &mut dyn FnMut(&str, &Tensor)) {}
    fn visit_params_mut(&mut self, _f: &mut dyn FnMut(&str, &mut Tensor)) {}
}

impl Forward for Relu {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        Ok(x.relu())
    }
}

/// The layer form of [`Tensor::tanh`]. No parameters.
#[derive(Clone, Copy, Debug, Default)]
pub struct Tanh;

impl Module for Tanh {
    fn visit_params(&self, _f: &mut dyn FnMut(&str, &Tensor)) {}
    fn visit_params_mut(&mut self, _f: &mut dyn FnMut(&str, &mut Tensor)) {}
}

impl Forward for Tanh {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        Ok(x.tanh())
    }
}

/// The layer form of [`Tensor::gelu`] (exact, erf-based). No parameters.
#[derive(Clone, Copy, Debug, Default)]
pub struct Gelu;

impl Module for Gelu {
    fn visit_params(&self, _f: &mut dyn FnMut(&str, &Tensor)) {}
    fn visit_params_mut(&mut self, _f: &mut dyn FnMut(&str, &mut Tensor)) {}
}

impl Forward for Gelu {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        Ok(x.gelu())
    }
}
