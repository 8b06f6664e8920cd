//! The instruction set the kernels run with: the widest this CPU has, or a narrower one named
//! by the environment variable `FORGIA_MAX_ISA` (`avx512`, `avx2` or `baseline`), read once.
//!
//! Every kernel that dispatches on the CPU asks [`isa`] (never `is_x86_feature_detected!`
//! itself), and the first call also sets the `gemm` crate's switches (a patch of ours in
//! `vendor/gemm-common`), so one variable moves the whole library to its AVX2 or its baseline
//! code: that code can then be tested and measured on a machine with AVX-512, as oneDNN's
//! `ONEDNN_MAX_CPU_ISA` and MKL's `MKL_ENABLE_INSTRUCTIONS` do for PyTorch's.

use std::sync::OnceLock;

/// An instruction set tier, narrowest first. Off x86-64 every kernel runs its portable code,
/// which is [`Isa::Baseline`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Isa {
    /// The baseline of the target (SSE2 on x86-64): the portable loops, as the compiler
    /// vectorizes them.
    Baseline,
    /// AVX2 with FMA (x86-64-v3): 8 lanes of `f32`.
    Avx2,
    /// AVX-512 F and VL (with AVX2 and FMA): 16 lanes of `f32`.
    Avx512,
}

impl Isa {
    /// The name `FORGIA_MAX_ISA` takes for this tier: `baseline`, `avx2` or `avx512`.
    pub fn name(self) -> &'static str {
        match self {
            Isa::Baseline => "baseline",
            Isa::Avx2 => "avx2",
            Isa::Avx512 => "avx512",
        }
    }

    /// The tier named `name` (as [`Isa::name`] gives it, any case), or `None`.
    pub fn from_name(name: &str) -> Option<Isa> {
        [Isa::Baseline, Isa::Avx2, Isa::Avx512].into_iter().find(|t| t.name().eq_ignore_ascii_case(name.trim()))
    }
}

impl std::fmt::Display for Isa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The environment variable that caps the tier.
pub const MAX_ISA_VAR: &str = "FORGIA_MAX_ISA";

/// The widest tier this CPU supports.
pub fn detected_isa() -> Isa {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::is_x86_feature_detected as has;
        if has!("avx512f") && has!("avx512vl") && has!("avx2") && has!("fma") {
            return Isa::Avx512;
        }
        if has!("avx2") && has!("fma") {
            return Isa::Avx2;
        }
    }
    Isa::Baseline
}

/// The cap `FORGIA_MAX_ISA` names: `Ok(None)` when it is not set (or empty), `Err` with the
/// value when it names no tier (the library then ignores it; a program can report it).
pub fn isa_cap_from_env() -> Result<Option<Isa>, String> {
    match std::env::var(MAX_ISA_VAR) {
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(std::env::VarError::NotUnicode(v)) => Err(v.to_string_lossy().into_owned()),
        Ok(v) if v.trim().is_empty() => Ok(None),
        Ok(v) => Isa::from_name(&v).map(Some).ok_or(v),
    }
}

/// The tier the kernels run with: [`detected_isa`], capped by `FORGIA_MAX_ISA` when it names a
/// tier. Fixed at the first call, which also sets the `gemm` crate's switches to match.
pub fn isa() -> Isa {
    static ISA: OnceLock<Isa> = OnceLock::new();
    *ISA.get_or_init(|| {
        let isa = match isa_cap_from_env() {
            Ok(Some(cap)) => detected_isa().min(cap),
            _ => detected_isa(),
        };
        gemm_common::set_x86_avx512(isa >= Isa::Avx512);
        gemm_common::set_x86_fma(isa >= Isa::Avx2);
        isa
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tiers_are_ordered_and_named_both_ways() {
        assert!(Isa::Baseline < Isa::Avx2 && Isa::Avx2 < Isa::Avx512);
        for t in [Isa::Baseline, Isa::Avx2, Isa::Avx512] {
            assert_eq!(Isa::from_name(t.name()), Some(t));
            assert_eq!(Isa::from_name(&format!(" {} ", t.name().to_uppercase())), Some(t));
        }
        assert_eq!(Isa::from_name("sse4"), None);
        assert_eq!(Isa::from_name(""), None);
    }

    #[test]
    fn the_tier_in_force_is_at_most_the_cpus_and_the_caps() {
        let isa = isa();
        assert!(isa <= detected_isa());
        if let Ok(Some(cap)) = isa_cap_from_env() {
            assert!(isa <= cap);
        }
        assert_eq!(gemm_common::get_x86_avx512(), isa >= Isa::Avx512);
        assert_eq!(gemm_common::get_x86_fma(), isa >= Isa::Avx2);
    }
}
