//! `forgia gradcheck` rows for the transformer kernels at sizes where attention runs on its
//! widest register tiles (33 keys and 32 features per head: 32-column blocks with a one-column
//! tail; 9 or 33 queries: 8-row blocks with a tail), causal and with BERT's additive
//! key-padding mask `[B, 1, 1, Sk]`. Few queries and narrow values keep the number of outputs
//! one perturbed key moves small, and with it the finite differences' rounding noise.

use forgia::{AttentionOptions, Tensor};

use super::inputs::normal;
use super::{case, Case};

/// The additive key-padding mask of two sequences of 33 keys, the second with its last 7
/// padded (`f32::MIN`, as `transformers` writes it).
fn padding() -> forgia::Result<Tensor> {
    let add: Vec<f32> = (0..2 * 33).map(|i| if i >= 33 + 26 { f32::MIN } else { 0.0 }).collect();
    Tensor::from_vec(add, &[2, 1, 1, 33])
}

/// The rows.
pub(super) fn transformer_cases() -> Vec<Case> {
    vec![
        case(
            "sdpa wide tiles (causal)",
            |r| vec![normal(&[1, 1, 33, 32], r), normal(&[1, 1, 33, 32], r), normal(&[1, 1, 33, 9], r)],
            |x| {
                x[0].scaled_dot_product_attention(&x[1], &x[2], AttentionOptions { causal: true, ..Default::default() })
            },
        ),
        case(
            "sdpa wide tiles (key-padding mask)",
            |r| vec![normal(&[2, 2, 9, 32], r), normal(&[2, 2, 33, 32], r), normal(&[2, 2, 33, 17], r)],
            |x| {
                let mask = padding()?;
                x[0].scaled_dot_product_attention(
                    &x[1],
                    &x[2],
                    AttentionOptions { mask: Some(&mask), ..Default::default() },
                )
            },
        ),
    ]
}
