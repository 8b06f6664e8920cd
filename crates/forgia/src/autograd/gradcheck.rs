//! Finite-difference gradient checking: the oracle every backward record is verified against.

use crate::autograd::Tensor;
use crate::error::{check, Error, ErrorKind, Result};
use crate::tensor::Rng;

/// Tolerances and step of [`gradcheck`].
#[derive(Clone, Copy, Debug)]
pub struct GradcheckOptions {
    /// Central-difference step.
    pub eps: f64,
    /// Absolute tolerance floor.
    pub abs_tol: f64,
    /// Relative tolerance factor.
    pub rel_tol: f64,
    /// Seed of the random cotangent used when the function's output has several elements.
    pub seed: u64,
}

impl Default for GradcheckOptions {
    fn default() -> Self {
        GradcheckOptions { eps: 1e-3, abs_tol: 1e-3, rel_tol: 1e-2, seed: 0x5eed }
    }
}

/// The first element whose numeric and analytic derivatives disagree.
#[derive(Clone, Debug, PartialEq)]
pub struct Mismatch {
    /// Which input (position in the `inputs` slice).
    pub input: usize,
    /// Row-major element index within that input.
    pub index: usize,
    /// The finite-difference estimate.
    pub numeric: f64,
    /// The backward pass's value.
    pub analytic: f64,
}

/// What [`gradcheck`] found.
#[derive(Clone, Debug, Default)]
pub struct GradcheckReport {
    /// Elements checked.
    pub checked: usize,
    /// The largest `|numeric - analytic|` (infinite when either value was not finite).
    pub max_abs_error: f64,
    /// The first failing element, if any.
    pub first_mismatch: Option<Mismatch>,
}

impl GradcheckReport {
    /// True when every element met `|num - ana| <= abs_tol + rel_tol * |ana|` with both values
    /// finite.
    pub fn passed(&self) -> bool {
        self.first_mismatch.is_none()
    }
}

/// Checks the backward pass of `f` against central finite differences at `inputs`.
///
/// Every input that is a variable is checked, element by element; constants pass through. A
/// function with a non-scalar output is reduced with a fixed random cotangent `v`, checking
/// `vᵀ·J`. Differences are taken in f64 over the exact f32 perturbation; an element is
/// restored after each evaluation, even when `f` fails. A non-finite numeric or analytic value
/// (a NaN-valued function, a step too small to move the input) is a mismatch, never a pass.
///
/// ```
/// use forgia::{gradcheck, GradcheckOptions, Tensor};
/// let x = Tensor::variable(vec![0.3, -1.2, 2.0], &[3])?;
/// let report = gradcheck(|xs| Ok(xs[0].tanh().mul(&xs[0])?.sum_all()), &[x], GradcheckOptions::default())?;
/// assert!(report.passed());
/// # Ok::<(), forgia::Error>(())
/// ```
///
/// # Errors
/// `InvalidArgument` when `eps` is not finite and `> 0` or a tolerance is not finite and
/// `>= 0` (checked before `f` runs); any error of `f`, wrapped with the context `gradcheck`.
pub fn gradcheck(
    f: impl Fn(&[Tensor]) -> Result<Tensor>,
    inputs: &[Tensor],
    options: GradcheckOptions,
) -> Result<GradcheckReport> {
    check::positive("gradcheck", "eps", options.eps)?;
    check::non_negative("gradcheck", "abs_tol", options.abs_tol)?;
    check::non_negative("gradcheck", "rel_tol", options.rel_tol)?;
    let nest = |e: Error| Error::from(ErrorKind::Nested { context: "gradcheck", source: Box::new(e) });
    // Analytic: fresh leaves so earlier gradients do not leak in.
    let leaves: Vec<Tensor> = inputs
        .iter()
        .map(|t| Ok(if t.is_variable() { t.detach().contiguous_data("gradcheck")?.into_variable() } else { t.clone() }))
        .collect::<Result<_>>()?;
    let y = f(&leaves).map_err(nest)?;
    let mut rng = Rng::new(options.seed);
    let cot = if y.numel() == 1 { Tensor::ones(y.shape())? } else { Tensor::randn(y.shape(), 0.0, 1.0, &mut rng)? };
    let cot_data = cot.to_vec();
    if y.requires_grad() {
        y.backward_with_grad(&cot).map_err(nest)?;
    }
    let scalar = |xs: &[Tensor]| -> Result<f64> {
        let _guard = super::mode::no_grad();
        let y = f(xs)?;
        Ok(y.to_vec().iter().zip(&cot_data).map(|(&a, &b)| a as f64 * b as f64).sum())
    };

    let mut report = GradcheckReport::default();
    let mut current: Vec<Tensor> = inputs.iter().map(Tensor::detach).collect();
    for (which, leaf) in leaves.iter().enumerate() {
        if !leaf.is_variable() {
            continue;
        }
        let analytic = leaf.grad().map(|g| g.to_vec()).unwrap_or_else(|| vec![0.0; leaf.numel()]);
        let mut data = leaf.to_vec();
        for index in 0..data.len() {
            let original = data[index];
            let eval = |value: f32, data: &mut Vec<f32>, current: &mut Vec<Tensor>| -> Result<f64> {
                data[index] = value;
                current[which] = Tensor::from_parts(data.clone(), leaf.shape());
                let r = scalar(current);
                data[index] = original; // restored whether or not `f` failed
                r
            };
            let (up, down) = ((original as f64 + options.eps) as f32, (original as f64 - options.eps) as f32);
            let plus = eval(up, &mut data, &mut current).map_err(nest)?;
            let minus = eval(down, &mut data, &mut current).map_err(nest)?;
            current[which] = Tensor::from_parts(data.clone(), leaf.shape());
            let numeric = (plus - minus) / (up as f64 - down as f64);
            let ana = analytic[index] as f64;
            // NaN compares false, so the pass condition is written positively: a NaN fails it.
            let err = if numeric.is_finite() && ana.is_finite() { (numeric - ana).abs() } else { f64::INFINITY };
            report.checked += 1;
            report.max_abs_error = report.max_abs_error.max(err);
            let within = err <= options.abs_tol + options.rel_tol * ana.abs();
            if !within && report.first_mismatch.is_none() {
                report.first_mismatch = Some(Mismatch { input: which, index, numeric, analytic: ana });
            }
        }
    }
    Ok(report)
}
