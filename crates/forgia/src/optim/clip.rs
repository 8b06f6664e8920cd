//! Gradient clipping by global L2 norm (`torch.nn.utils.clip_grad_norm_`).

use crate::autograd::no_grad;
use crate::error::{check, Result};
use crate::nn::{Module, Seen};

/// Scales all gradients of `model` so their global L2 norm is at most `max_norm`, and
/// returns the norm before clipping.
///
/// The norm is `√(Σ_params Σ g²)` over every distinct parameter that has a gradient; two
/// handles to one variable count once and are scaled once. When the norm exceeds `max_norm`,
/// each gradient is replaced by a scaled copy with factor `max_norm / (norm + 1e-6)` (as
/// PyTorch). Buffers are never written in place, so a gradient someone already holds, or one
/// buffer shared by two parameters' gradients, keeps its values.
///
/// ```
/// use forgia::nn::{Linear, Module};
/// use forgia::{optim::clip_grad_norm, Rng, Tensor};
/// let model = Linear::new(4, 2, true, &mut Rng::new(0))?;
/// model.forward(&Tensor::ones(&[3, 4])?)?.sum_all().scale(100.0).backward()?;
/// let before = clip_grad_norm(&model, 1.0)?;
/// assert!(before > 1.0);
/// assert!((clip_grad_norm(&model, 1.0)? - 1.0).abs() < 1e-4);
/// # Ok::<(), forgia::Error>(())
/// ```
///
/// # Errors
/// `InvalidArgument` when `max_norm` is negative or not finite.
pub fn clip_grad_norm(model: &dyn Module, max_norm: f32) -> Result<f32> {
    check::non_negative("clip_grad_norm", "max_norm", max_norm)?;
    let mut seen = Seen::default();
    let mut sum_sq = 0.0f64;
    model.visit_params(&mut |_, p| {
        if let Some(g) = p.grad().filter(|_| seen.first(p)) {
            sum_sq += g.with_data(|d| d.iter().map(|&x| (x as f64) * (x as f64)).sum::<f64>());
        }
    });
    let norm = sum_sq.sqrt() as f32;
    let coef = max_norm / (norm + 1e-6);
    if coef < 1.0 {
        let _guard = no_grad();
        let mut scaled = Seen::default();
        model.visit_params(&mut |_, p| {
            if let Some(g) = p.grad().filter(|_| scaled.first(p)) {
                p.set_grad(g.scale(coef));
            }
        });
    }
    Ok(norm)
}
