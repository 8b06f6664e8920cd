//! Runtime dispatch to AVX-512 or AVX2 + FMA code for the elementwise loops.
//!
//! The crate is built for baseline x86-64 (SSE2), so without help the loops of the pointwise,
//! norm and softmax kernels vectorize 4 lanes wide, and the branch-free math of `fastmath`
//! (a GELU backward is ~40 operations per element) runs at a quarter of what the core can do.
//! [`vectorized`] runs a closure inside a function compiled with `avx512f,avx512vl` (16 lanes)
//! or with `avx2,fma` (8 lanes), as [`isa`] says the CPU runs; the closure and the per-element
//! rules it calls are `#[inline(always)]`, so LLVM inlines them there and vectorizes the loops
//! that wide. The code is the same, only wider: Rust never contracts `a * b + c` into an FMA
//! or reassociates a sum by itself, so results are bit-identical on every path. Where a rule
//! wants a fused multiply-add (the polynomials of `fastmath`) it says so with `f32::mul_add`,
//! which is the exactly rounded fused operation on every path: one instruction in both tiers
//! here, a call into libm's `fmaf` on a CPU without FMA (the same bits, more slowly). On the
//! AMD EPYC of `docs/BENCHMARKS.md` the AVX-512 tier took W6's AdamW update from 4.3 to 0.8 ms.

use crate::runtime::{isa, Isa};

/// Runs `f`, compiled for AVX-512 (or else AVX2 + FMA) when [`isa`] runs that tier. Mark `f`
/// `#[inline(always)]` (and everything it calls per element) or it is compiled for the baseline
/// anyway.
#[inline(always)]
pub(crate) fn vectorized<R>(f: impl FnOnce() -> R) -> R {
    #[cfg(target_arch = "x86_64")]
    match isa() {
        // SAFETY: `isa` names a tier only where the CPU supports it: AVX-512F and VL with
        // AVX2 and FMA.
        Isa::Avx512 => return unsafe { avx512(f) },
        // SAFETY: as above, AVX2 and FMA.
        Isa::Avx2 => return unsafe { avx2_fma(f) },
        Isa::Baseline => {}
    }
    f()
}

/// True when [`vectorized`] runs its closure with AVX2 + FMA: only there is `f32::mul_add`
/// one instruction (elsewhere it is a call into libm's exact, slow `fmaf`).
pub(crate) fn has_fma() -> bool {
    isa() >= Isa::Avx2
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn avx2_fma<R>(f: impl FnOnce() -> R) -> R {
    f()
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vl,avx2,fma")]
unsafe fn avx512<R>(f: impl FnOnce() -> R) -> R {
    f()
}
