//! Branch-free f32 `exp`, `tanh`, `sigmoid` and `erf` that the compiler vectorizes inside the
//! elementwise loops (libm's scalar calls do not vectorize and dominate activation-heavy steps).
//! These are the library's one `exp` and one `erf`: every op and kernel that needs them calls
//! these (`exp_nonpositive` is `exp`'s own steps for arguments at most 0, the same bits).
//! Accuracy: `exp` within 3e-7 relative below 88 and 2e-6 up to `ln f32::MAX` (Cephes `expf`
//! polynomial), `inf` above, 0 where the result would be subnormal (as the pool's
//! flush-to-zero makes it anyway); `tanh` within 3e-7 absolute and 2e-6 relative; `erf` within
//! 5e-7 absolute; the normal distribution's `Φ` within 2e-7 and `φ` within 1e-7 absolute
//! (`normal_cdf_pdf`). NaN gives NaN. The tests below check all of it against f64.
//!
//! Every polynomial step is a `mul_add`, one fused instruction inside `simd::vectorized`'s
//! tiers (both have FMA) where `p * x + c` would be two, each rounded (`benches/pointwise.rs`,
//! `gelu_4m`; figures in docs/BENCHMARKS.md, session twenty). Being exactly rounded, it gives
//! the same bits outside them, where it may be a libm call (a test below checks it). `exp`'s
//! last step stays unfused: fused, it rounds up to `inf` at `ln f32::MAX`.

#![allow(clippy::excessive_precision)] // coefficients are quoted as published (Cephes, Eigen)
const LOG2E: f32 = std::f32::consts::LOG2_E;
const LN2_HI: f32 = 0.693_359_4;
const LN2_LO: f32 = -2.121_944_4e-4;
/// 1.5 · 2²³: adding and subtracting it rounds an f32 of magnitude < 2²² to the nearest integer.
const ROUNDER: f32 = 12_582_912.0;

/// `ln f32::MAX`: above it `e^x` is `inf`.
const EXP_MAX: f32 = 88.722_839;
/// `ln f32::MIN_POSITIVE`: below it `e^x` is subnormal, returned as 0.
const EXP_MIN: f32 = -87.336_544;

/// `e^x` (see the module doc for its accuracy and range).
#[inline(always)]
pub(crate) fn exp(x: f32) -> f32 {
    let c = x.clamp(EXP_MIN, EXP_MAX);
    // n ≤ 127 keeps 2^n a normal float; near EXP_MAX the remainder r is then up to ln 2.
    let n = ((c * LOG2E + ROUNDER) - ROUNDER).min(127.0);
    let y = exp_reduced(c, n);
    if x > EXP_MAX {
        f32::INFINITY
    } else if x < EXP_MIN {
        0.0
    } else {
        y // NaN stays NaN: the clamp and the polynomial carry it through
    }
}

/// [`exp`] of an argument known to be at most 0, with the same bits (NaN gives NaN): the same
/// steps without the overflow handling (the cap on `n` and the `inf` select), which GELU's
/// derivative loop feels (`gelu_4m` forward + backward 3.73 → 3.63 ms, docs/BENCHMARKS.md).
#[inline(always)]
fn exp_nonpositive(x: f32) -> f32 {
    let c = x.clamp(EXP_MIN, 0.0);
    let y = exp_reduced(c, (c * LOG2E + ROUNDER) - ROUNDER);
    if x < EXP_MIN {
        0.0
    } else {
        y
    }
}

/// `e^c` for `c` in `[EXP_MIN, EXP_MAX]` and `n`, the integer nearest `c / ln 2` (at most
/// 127): `e^r · 2^n` with `r = c - n ln 2` in two parts (Cody–Waite) and `e^r` from Cephes'
/// polynomial, in Estrin's form: three multiply-adds deep where Horner's is six, so more of an
/// elementwise loop's iterations overlap.
#[inline(always)]
fn exp_reduced(c: f32, n: f32) -> f32 {
    let r = (-n).mul_add(LN2_LO, (-n).mul_add(LN2_HI, c));
    let r2 = r * r;
    let hi = 1.987_569_1e-4f32.mul_add(r, 1.398_199_9e-3);
    let mid = 8.333_452e-3f32.mul_add(r, 4.166_579_6e-2);
    let lo = 1.666_666_5e-1f32.mul_add(r, 5.000_000_1e-1);
    let p = hi.mul_add(r2 * r2, mid.mul_add(r2, lo));
    (p * r2 + r + 1.0) * pow2(n)
}

/// `2^n` for an integral `n` in `[-126, 127]`, built from bits. `n + 127 + 2²³` holds the
/// biased exponent in its low mantissa bits; unlike `n as i32` (a saturating cast that LLVM
/// scalarizes, element by element), this stays in vector registers.
#[inline(always)]
fn pow2(n: f32) -> f32 {
    const TWO_23: f32 = 8_388_608.0;
    let biased = (n + 127.0 + TWO_23).to_bits().wrapping_sub(TWO_23.to_bits());
    f32::from_bits(biased << 23)
}

/// `tanh x` as one rational function on `[-9, 9]` (beyond which f32 `tanh` is ±1):
/// `x·P(x²)/Q(x²)` with the 13/6-degree coefficients Eigen and XLA use for f32. One division
/// and nine multiply-adds, no exponential and no branch; within 3e-7 absolute and 2e-6
/// relative (the tests below check it against f64).
#[inline(always)]
pub(crate) fn tanh(x: f32) -> f32 {
    let c = x.clamp(-9.0, 9.0);
    let z = c * c;
    let mut p = -2.760_768_477_423_55e-16f32;
    p = p.mul_add(z, 2.000_187_904_824_77e-13);
    p = p.mul_add(z, -8.604_671_522_137_35e-11);
    p = p.mul_add(z, 5.122_297_090_371_14e-8);
    p = p.mul_add(z, 1.485_722_357_179_79e-5);
    p = p.mul_add(z, 6.372_619_288_754_36e-4);
    p = p.mul_add(z, 4.893_524_558_917_86e-3);
    let mut q = 1.198_258_394_667_02e-6f32;
    q = q.mul_add(z, 1.185_347_056_866_54e-4);
    q = q.mul_add(z, 2.268_434_632_439e-3);
    q = q.mul_add(z, 4.893_525_185_543_85e-3);
    // At the clamp the fit is within an ulp of 1; f32 `tanh` is ±1 exactly there.
    if c.abs() >= 9.0 {
        1.0f32.copysign(x)
    } else {
        (c * p / q).clamp(-1.0, 1.0)
    }
}

/// `1 / (1 + e^{-x})`.
#[inline(always)]
pub(crate) fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + exp(-x))
}

/// The error function as one rational function of `x²` on `[-4, 4]` (beyond which f32 `erf`
/// is ±1): `x·P(x²)/Q(x²)` with the minimax coefficients Eigen and XLA use for f32. One
/// division and twelve multiply-adds, with no branch and no exponential; absolute error below
/// 4e-7 and relative error below 3e-7 (the tests below check it against f64).
#[inline(always)]
pub(crate) fn erf(x: f32) -> f32 {
    let x = x.clamp(-4.0, 4.0);
    let x2 = x * x;
    let mut p = -2.726_142_3e-10f32;
    p = p.mul_add(x2, 2.770_681_4e-8);
    p = p.mul_add(x2, -2.101_024e-6);
    p = p.mul_add(x2, -5.692_506_4e-5);
    p = p.mul_add(x2, -7.349_906_3e-4);
    p = p.mul_add(x2, -2.954_600_1e-3);
    p = p.mul_add(x2, -1.609_603_3e-2);
    let mut q = -1.456_607_2e-5f32;
    q = q.mul_add(x2, -2.133_740_6e-4);
    q = q.mul_add(x2, -1.682_827e-3);
    q = q.mul_add(x2, -7.373_329e-3);
    q = q.mul_add(x2, -1.426_473_9e-2);
    // From 3.9 on, erf rounds to ±1 in f32 (the fit's last ulp does not).
    if x.abs() >= 3.9 {
        1.0f32.copysign(x)
    } else {
        x * p / q
    }
}

/// `1/√(2π)`, the standard normal density at 0.
pub(crate) const INV_SQRT_2PI: f32 = 0.398_942_3;

/// The standard normal distribution's `Φ(x)` and density `φ(x)` from one exponential
/// `e^{-x²/2}`: `φ = e^{-x²/2}/√(2π)`, and `Φ` from `erfc(|x|/√2) = t·P(t)·e^{-x²/2}` with
/// `t = 1/(1 + p|x|/√2)` (Abramowitz and Stegun 7.1.26, absolute error below 1.5e-7 in exact
/// arithmetic). One division, one `exp` and five multiply-adds, where `erf` and `exp` apart
/// take two divisions' worth of work (GELU's derivative `Φ(x) + x·φ(x)` needs both). Within
/// 2e-7 absolute of f64 for `Φ` and 1e-7 for `φ` (the tests below); NaN gives NaN.
#[inline(always)]
pub(crate) fn normal_cdf_pdf(x: f32) -> (f32, f32) {
    /// `p/√2` with A&S's `p = 0.327_591_1`: the argument of `erfc` is `|x|/√2`.
    const P: f32 = 0.231_641_9;
    let e = exp_nonpositive(-0.5 * x * x);
    let t = 1.0 / P.mul_add(x.abs(), 1.0);
    // A&S's a₁…a₅, halved: `half_erfc = erfc(|x|/√2) / 2 = 1 - Φ(|x|)`.
    let mut p = 0.530_702_7f32;
    p = p.mul_add(t, -0.726_576_0);
    p = p.mul_add(t, 0.710_706_9);
    p = p.mul_add(t, -0.142_248_4);
    p = p.mul_add(t, 0.127_414_8);
    let half_erfc = t * p * e;
    let cdf = if x >= 0.0 { 1.0 - half_erfc } else { half_erfc };
    (cdf, e * INV_SQRT_2PI)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fused_steps_give_the_same_bits_inside_and_outside_the_vectorized_tiers() {
        let xs: Vec<f32> = grid().chain((0..=1000).map(|i| 80.0 + i as f32 * 0.01)).collect();
        let bits = |x: f32| {
            let (cdf, pdf) = normal_cdf_pdf(x);
            [exp(x), exp(-x), tanh(x), erf(x), cdf, pdf].map(f32::to_bits)
        };
        let outside: Vec<[u32; 6]> = xs.iter().map(|&x| bits(x)).collect();
        let mut inside = vec![[0u32; 6]; xs.len()];
        crate::kernels::simd::vectorized(
            #[inline(always)]
            || {
                for (b, &x) in inside.iter_mut().zip(&xs) {
                    *b = bits(x);
                }
            },
        );
        for ((x, o), i) in xs.iter().zip(&outside).zip(&inside) {
            assert_eq!(o, i, "x = {x}: exp, exp(-x), tanh, erf, Φ, φ bits differ between the paths");
        }
    }

    fn grid() -> impl Iterator<Item = f32> {
        (-20000..=20000).map(|i| i as f32 * 1e-3)
    }

    /// The reference error function in f64 (absolute error below 1e-7): a Maclaurin series
    /// for `|x| < 0.5`, otherwise `1 - erfc(x)` with the Chebyshev fit of Numerical Recipes.
    fn erf64(x: f64) -> f64 {
        let z = x.abs();
        if z < 0.5 {
            let x2 = x * x;
            let (mut term, mut sum) = (x, x);
            for n in 1..14 {
                term *= -x2 / n as f64;
                sum += term / (2 * n + 1) as f64;
            }
            return std::f64::consts::FRAC_2_SQRT_PI * sum;
        }
        let t = 1.0 / (1.0 + 0.5 * z);
        let poly = -z * z - 1.265_512_23
            + t * (1.000_023_68
                + t * (0.374_091_96
                    + t * (0.096_784_18
                        + t * (-0.186_288_06
                            + t * (0.278_868_07
                                + t * (-1.135_203_98
                                    + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
        let erfc = t * poly.exp();
        if x >= 0.0 {
            1.0 - erfc
        } else {
            erfc - 1.0
        }
    }

    #[test]
    fn erf_and_its_reference_match_correctly_rounded_values() {
        // Python's math.erf (correctly rounded double).
        let cases = [
            (1e-6, 1.1283791670951364e-06),
            (0.1, 0.1124629160182849),
            (0.4999, 0.5204119951613866),
            (0.5, 0.5204998778130465),
            (1.0, 0.8427007929497149),
            (2.0, 0.9953222650189527),
            (3.5, 0.9999992569016276),
            (-0.7, -0.6778011938374184),
            (-2.5, -0.999593047982555),
        ];
        for (x, want) in cases {
            assert!((erf64(x) - want).abs() < 1e-7 * (1.0 + want.abs()), "erf64({x})");
            assert!((erf(x as f32) as f64 - want).abs() < 5e-7, "erf({x})");
        }
    }

    #[test]
    fn exp_is_within_a_few_ulp() {
        for x in (-8700..=8800).map(|i| i as f32 * 1e-2) {
            let (got, want) = (exp(x) as f64, (x as f64).exp());
            assert!(((got - want) / want).abs() < 3e-7, "exp({x}) = {got}, want {want}");
        }
        for x in (0..=100).map(|i| 88.0 + i as f32 * (EXP_MAX - 88.0) / 100.0) {
            let (got, want) = (exp(x) as f64, (x as f64).exp());
            assert!(got.is_finite() && ((got - want) / want).abs() < 2e-6, "exp({x}) = {got}, want {want}");
        }
    }

    #[test]
    fn exp_of_a_non_positive_argument_has_the_bits_of_exp() {
        let xs = (-9000..=0).map(|i| i as f32 * 1e-2).chain([-87.336_54, -87.336_55, -1e-30, -0.0, f32::NEG_INFINITY]);
        for x in xs {
            assert_eq!(exp_nonpositive(x).to_bits(), exp(x).to_bits(), "exp_nonpositive({x})");
        }
        assert!(exp_nonpositive(f32::NAN).is_nan());
    }

    #[test]
    fn exp_overflows_to_infinity_flushes_to_zero_and_keeps_nan() {
        assert_eq!(exp(89.0), f32::INFINITY);
        assert_eq!(exp(f32::INFINITY), f32::INFINITY);
        assert_eq!(exp(-88.0), 0.0);
        assert_eq!(exp(f32::NEG_INFINITY), 0.0);
        assert!(exp(f32::NAN).is_nan());
        assert!(erf(f32::NAN).is_nan() && tanh(f32::NAN).is_nan());
        assert_eq!((erf(9.0), erf(-9.0)), (1.0, -1.0));
    }

    #[test]
    fn pow2_matches_the_integer_exponent() {
        for n in -126..=127 {
            assert_eq!(pow2(n as f32), f32::from_bits(((n + 127) as u32) << 23), "2^{n}");
        }
    }

    #[test]
    fn tanh_sigmoid_and_erf_match_f64() {
        for x in grid() {
            let t = (x as f64).tanh();
            let got = tanh(x) as f64;
            assert!((got - t).abs() < 3e-7 && (got - t).abs() <= 2e-6 * t.abs() + 1e-30, "tanh({x})");
            let s = 1.0 / (1.0 + (-(x as f64)).exp());
            assert!((sigmoid(x) as f64 - s).abs() < 3e-7, "sigmoid({x})");
            assert!((erf(x) as f64 - erf64(x as f64)).abs() < 5e-7, "erf({x})");
        }
        assert_eq!(tanh(0.0), 0.0);
        for x in grid() {
            let (cdf, pdf) = normal_cdf_pdf(x);
            let x64 = f64::from(x);
            let want_cdf = 0.5 * (1.0 + erf64(x64 * std::f64::consts::FRAC_1_SQRT_2));
            let want_pdf = (-0.5 * x64 * x64).exp() / (2.0 * std::f64::consts::PI).sqrt();
            assert!((f64::from(cdf) - want_cdf).abs() < 2e-7, "Φ({x}): {cdf} vs {want_cdf}");
            assert!((f64::from(pdf) - want_pdf).abs() < 1e-7, "φ({x}): {pdf} vs {want_pdf}");
        }
        assert!(normal_cdf_pdf(f32::NAN).0.is_nan() && normal_cdf_pdf(f32::NAN).1.is_nan());
        assert_eq!(normal_cdf_pdf(f32::INFINITY), (1.0, 0.0));
        assert_eq!(normal_cdf_pdf(f32::NEG_INFINITY), (0.0, 0.0));
        assert_eq!(tanh(100.0), 1.0);
        assert_eq!(tanh(-100.0), -1.0);
    }
}
