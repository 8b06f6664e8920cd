//! Gradcheck cases of the pretrained-architecture pieces (`forgia::models`): the LoRA linear
//! layer in both weight layouts, sentence pooling, and the causal language-model loss.

use forgia::models::sentence::Pooling;
use forgia::models::{causal_lm_loss, Dense, Lora, WeightLayout};
use forgia::Indices;

use super::inputs::normal;
use super::{case, Case};

fn lora_dense(x: &[forgia::Tensor], layout: WeightLayout) -> forgia::Result<forgia::Tensor> {
    let lora = Some(Lora { a: x[3].clone(), b: x[4].clone(), scaling: 2.0 });
    Dense { weight: x[1].clone(), bias: Some(x[2].clone()), layout, lora }.forward(&x[0])
}

pub(super) fn models_cases() -> Vec<Case> {
    vec![
        case(
            "models.lora_linear",
            |r| {
                vec![normal(&[2, 3, 4], r), normal(&[5, 4], r), normal(&[5], r), normal(&[2, 4], r), normal(&[5, 2], r)]
            },
            |x| lora_dense(x, WeightLayout::OutIn),
        ),
        case(
            "models.lora_conv1d",
            |r| {
                vec![normal(&[2, 3, 4], r), normal(&[4, 5], r), normal(&[5], r), normal(&[2, 4], r), normal(&[5, 2], r)]
            },
            |x| lora_dense(x, WeightLayout::InOut),
        ),
        case(
            "models.mean_pooling",
            |r| vec![normal(&[2, 4, 3], r)],
            |x| Pooling::Mean.apply(&x[0], &Indices::new(vec![1, 1, 1, 0, 1, 1, 0, 0], &[2, 4])?),
        ),
        case(
            "models.causal_lm_loss",
            |r| vec![normal(&[2, 4, 5], r)],
            |x| causal_lm_loss(&x[0], &Indices::new(vec![0, 1, 2, 3, 4, 0, -100, 2], &[2, 4])?),
        ),
    ]
}
