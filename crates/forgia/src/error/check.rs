//! Checks of scalar settings (learning rates, probabilities, tolerances, ranges): one helper
//! per kind of setting, used by every entry point that takes one, so a NaN or an out-of-domain
//! value is an `InvalidArgument` everywhere instead of a silently wrong run.

use super::{fail, ErrorKind, Result};

fn invalid(op: &'static str, arg: &'static str, reason: String) -> Result<()> {
    fail(ErrorKind::InvalidArgument { op, arg, reason })
}

/// A finite value (a mean, a bound, a fill value).
pub(crate) fn finite(op: &'static str, arg: &'static str, v: impl Into<f64>) -> Result<()> {
    let v = v.into();
    if v.is_finite() {
        Ok(())
    } else {
        invalid(op, arg, format!("{v} must be finite"))
    }
}

/// A finite value `>= 0` (a standard deviation, a weight decay, a momentum, a norm bound).
pub(crate) fn non_negative(op: &'static str, arg: &'static str, v: impl Into<f64>) -> Result<()> {
    let v = v.into();
    if v.is_finite() && v >= 0.0 {
        Ok(())
    } else {
        invalid(op, arg, format!("{v} must be finite and >= 0"))
    }
}

/// A finite value `> 0` (a finite-difference step).
pub(crate) fn positive(op: &'static str, arg: &'static str, v: impl Into<f64>) -> Result<()> {
    let v = v.into();
    if v.is_finite() && v > 0.0 {
        Ok(())
    } else {
        invalid(op, arg, format!("{v} must be finite and > 0"))
    }
}

/// A learning rate: finite and `>= 0` (the one check behind every optimizer constructor,
/// `set_lr`, `load_state` and every schedule).
pub(crate) fn learning_rate(op: &'static str, lr: f32) -> Result<()> {
    non_negative(op, "lr", lr)
}

/// A probability or a fraction in `[0, 1]` (dropout `p`, a warmup start factor).
pub(crate) fn unit_interval(op: &'static str, arg: &'static str, v: f32) -> Result<()> {
    if (0.0..=1.0).contains(&v) {
        Ok(())
    } else {
        invalid(op, arg, format!("{v} is not in [0, 1]"))
    }
}

/// A decay rate in `[0, 1)` (Adam's betas).
pub(crate) fn decay_rate(op: &'static str, arg: &'static str, v: f32) -> Result<()> {
    if (0.0..1.0).contains(&v) {
        Ok(())
    } else {
        invalid(op, arg, format!("{v} is not in [0, 1)"))
    }
}

/// A range `low..high` of finite bounds with `low <= high` (uniform sampling), reported under
/// the argument `low`.
pub(crate) fn ordered_range(op: &'static str, low: f32, high: f32) -> Result<()> {
    finite(op, "low", low)?;
    finite(op, "high", high)?;
    if low <= high {
        Ok(())
    } else {
        invalid(op, "low", format!("{low} is greater than high {high}"))
    }
}

/// A count that must be at least 1 (a schedule's step size or length).
pub(crate) fn positive_count(op: &'static str, arg: &'static str, n: u64) -> Result<()> {
    if n == 0 {
        invalid(op, arg, "must be positive".into())
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_setting_check_rejects_nan_and_its_out_of_domain_values() {
        assert!(finite("t", "x", f32::NAN).is_err() && finite("t", "x", -1.0f32).is_ok());
        assert!(non_negative("t", "x", -0.5f32).is_err() && non_negative("t", "x", 0.0f32).is_ok());
        assert!(positive("t", "x", 0.0).is_err() && positive("t", "x", f64::NAN).is_err());
        assert!(learning_rate("t", f32::INFINITY).is_err() && learning_rate("t", 0.1).is_ok());
        assert!(unit_interval("t", "p", f32::NAN).is_err() && unit_interval("t", "p", 1.0).is_ok());
        assert!(decay_rate("t", "b", 1.0).is_err() && decay_rate("t", "b", 0.0).is_ok());
        assert!(ordered_range("t", 1.0, 0.0).is_err() && ordered_range("t", 0.0, 0.0).is_ok());
        assert!(ordered_range("t", f32::NAN, 0.0).is_err());
        assert!(positive_count("t", "n", 0).is_err() && positive_count("t", "n", 1).is_ok());
    }
}
