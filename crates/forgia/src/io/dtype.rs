//! Safetensors entries of any dtype as forgia values: float entries (F16, BF16, F32, F64)
//! become f32 tensors, integer and boolean entries become [`Indices`].

use safetensors::tensor::{Dtype, TensorView};

use crate::autograd::Tensor;
use crate::error::Result;
use crate::ops::index::Indices;
use crate::tensor::Size;

/// One entry of a safetensors file, by kind.
#[derive(Clone, Debug)]
pub enum Entry {
    /// A float entry (F16, BF16, F32 or F64), converted to f32.
    Float(Tensor),
    /// An integer or boolean entry (I8 … I64, U8 … U64, BOOL as 0/1): index data such as
    /// BERT's `embeddings.position_ids` or BatchNorm's `num_batches_tracked`.
    Int(Indices),
}

impl Entry {
    /// The entry's shape.
    pub fn shape(&self) -> &[usize] {
        match self {
            Entry::Float(t) => t.shape(),
            Entry::Int(i) => i.shape(),
        }
    }
}

/// IEEE half precision to f32, exactly (every f16 is an f32).
pub(crate) fn f16_to_f32(h: u16) -> f32 {
    let sign = ((h >> 15) as u32) << 31;
    let exp = ((h >> 10) & 0x1f) as u32;
    let frac = (h & 0x3ff) as u32;
    let bits = match (exp, frac) {
        (0, 0) => sign,
        // Subnormal: value = frac · 2^-24, exact in f32.
        (0, _) => {
            let magnitude = frac as f32 * 2f32.powi(-24);
            return if sign != 0 { -magnitude } else { magnitude };
        }
        (0x1f, 0) => sign | 0x7f80_0000,
        (0x1f, _) => sign | 0x7fc0_0000 | (frac << 13),
        _ => sign | ((exp + 127 - 15) << 23) | (frac << 13),
    };
    f32::from_bits(bits)
}

/// bfloat16 to f32 (the upper half of an f32).
pub(crate) fn bf16_to_f32(h: u16) -> f32 {
    f32::from_bits((h as u32) << 16)
}

fn words<const N: usize>(data: &[u8]) -> impl Iterator<Item = [u8; N]> + '_ {
    data.chunks_exact(N).map(|c| c.try_into().expect("chunks_exact(N) yields N bytes"))
}

/// Why a view cannot be read: its dtype, named for the caller's message.
pub(crate) struct Unsupported(pub(crate) Dtype);

/// Converts one view (its shape already checked by `Size::of`).
pub(crate) fn entry(view: &TensorView<'_>) -> std::result::Result<Result<Entry>, Unsupported> {
    let d = view.data();
    let float = |v: Vec<f32>| Ok(Entry::Float(Tensor::from_vec(v, view.shape())?));
    let int = |v: Vec<i64>| Ok(Entry::Int(Indices::new(v, view.shape())?));
    let r = match view.dtype() {
        Dtype::F32 => float(words::<4>(d).map(f32::from_le_bytes).collect()),
        Dtype::F64 => float(words::<8>(d).map(|w| f64::from_le_bytes(w) as f32).collect()),
        Dtype::F16 => float(words::<2>(d).map(|w| f16_to_f32(u16::from_le_bytes(w))).collect()),
        Dtype::BF16 => float(words::<2>(d).map(|w| bf16_to_f32(u16::from_le_bytes(w))).collect()),
        Dtype::I64 => int(words::<8>(d).map(i64::from_le_bytes).collect()),
        Dtype::I32 => int(words::<4>(d).map(|w| i32::from_le_bytes(w) as i64).collect()),
        Dtype::I16 => int(words::<2>(d).map(|w| i16::from_le_bytes(w) as i64).collect()),
        Dtype::I8 => int(d.iter().map(|&b| b as i8 as i64).collect()),
        Dtype::U8 | Dtype::BOOL => int(d.iter().map(|&b| b as i64).collect()),
        Dtype::U16 => int(words::<2>(d).map(|w| u16::from_le_bytes(w) as i64).collect()),
        Dtype::U32 => int(words::<4>(d).map(|w| u32::from_le_bytes(w) as i64).collect()),
        // A u64 above i64::MAX is saturated: such values are never valid indices, and a
        // later index check reports them.
        Dtype::U64 => int(words::<8>(d).map(|w| i64::try_from(u64::from_le_bytes(w)).unwrap_or(i64::MAX)).collect()),
        other => return Err(Unsupported(other)),
    };
    Ok(r)
}

/// Checks a header shape before anything is allocated for it.
pub(crate) fn check_shape(shape: &[usize]) -> Result<()> {
    Size::of("load", shape).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_precision_converts_exactly() {
        assert_eq!(f16_to_f32(0x3c00), 1.0);
        assert_eq!(f16_to_f32(0xc000), -2.0);
        assert_eq!(f16_to_f32(0x7bff), 65504.0);
        assert_eq!(f16_to_f32(0x0001), 2f32.powi(-24));
        assert_eq!(f16_to_f32(0x8001), -(2f32.powi(-24)));
        assert_eq!(f16_to_f32(0x3555), 0.333_251_95);
        assert_eq!(f16_to_f32(0x7c00), f32::INFINITY);
        assert!(f16_to_f32(0x7e00).is_nan());
        assert_eq!(f16_to_f32(0x8000).to_bits(), (-0.0f32).to_bits());
        assert_eq!(bf16_to_f32(0x3f80), 1.0);
        assert_eq!(bf16_to_f32(0xc040), -3.0);
    }
}
