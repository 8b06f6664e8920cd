//! LoRA on an embedding table (PEFT's `lora_embedding_A` / `lora_embedding_B`): a fresh
//! adapter changes nothing, its gradients pass gradcheck, it is frozen-base aware, saved and
//! loaded apart from the base under PEFT's names, and merged into the table.

mod common;

use common::{lcg, small_bert};
use forgia::models::lora;
use forgia::nn::{Embedding, EmbeddingLora, Module};
use forgia::{gradcheck, GradcheckOptions, Indices, Rng, Tensor};

#[test]
fn a_fresh_embedding_adapter_changes_no_row() {
    let mut e = Embedding::new(10, 4, &mut Rng::new(0)).unwrap();
    let ids = Indices::new(vec![3, 1, 3, 9], &[2, 2]).unwrap();
    let before = e.forward(&ids).unwrap().to_vec();
    e.add_lora(2, 4.0, &mut Rng::new(1)).unwrap();
    let l = e.lora.as_ref().unwrap();
    assert_eq!((l.a.shape(), l.b.shape(), l.scaling), (&[2, 10][..], &[4, 2][..], 2.0));
    assert_eq!(e.forward(&ids).unwrap().to_vec(), before);
    assert!(e.add_lora(0, 4.0, &mut Rng::new(1)).is_err());
}

#[test]
fn the_adapted_lookup_is_w_plus_scaled_b_a_transposed_and_passes_gradcheck() {
    let ids = Indices::new(vec![0, 2, 2, 4], &[4]).unwrap();
    let (num, dim, r, scaling) = (5, 3, 2, 1.5);
    let w = Tensor::variable(lcg(num * dim, 1, 1.0), &[num, dim]).unwrap();
    let a = Tensor::variable(lcg(r * num, 2, 1.0), &[r, num]).unwrap();
    let b = Tensor::variable(lcg(dim * r, 3, 1.0), &[dim, r]).unwrap();
    let table = |xs: &[Tensor]| Embedding {
        weight: xs[0].clone(),
        lora: Some(EmbeddingLora { a: xs[1].clone(), b: xs[2].clone(), scaling }),
    };
    // Value: row `id` is W[id] + scaling · Σ_k A[k, id] B[:, k].
    let got = table(&[w.clone(), a.clone(), b.clone()]).forward(&ids).unwrap().to_vec();
    let (wv, av, bv) = (w.to_vec(), a.to_vec(), b.to_vec());
    for (row, &id) in ids.data().iter().enumerate() {
        for j in 0..dim {
            let delta: f32 = (0..r).map(|k| av[k * num + id as usize] * bv[j * r + k]).sum();
            let want = wv[id as usize * dim + j] + scaling * delta;
            assert!((got[row * dim + j] - want).abs() < 1e-6, "row {row} col {j}: {} vs {want}", got[row * dim + j]);
        }
    }
    let f = |xs: &[Tensor]| -> forgia::Result<Tensor> {
        let y = table(xs).forward(&ids)?;
        Ok(y.mul(&y)?.sum_all().tanh())
    };
    let report = gradcheck(f, &[w, a, b], GradcheckOptions::default()).unwrap();
    assert!(report.passed(), "{:?}", report.first_mismatch);
}

#[test]
fn a_frozen_table_keeps_its_adapter_trainable_and_both_round_trip_and_merge() {
    let mut m = small_bert();
    m.word_embeddings.add_lora(2, 4.0, &mut Rng::new(5)).unwrap();
    // Nonzero A so the adapter changes the function.
    let l = m.word_embeddings.lora.as_mut().unwrap();
    l.a = Tensor::variable(lcg(l.a.numel(), 7, 0.3), l.a.shape()).unwrap();
    lora::freeze_base(&mut m);
    let trainable: Vec<String> =
        m.named_parameters().into_iter().filter(|(_, t)| t.is_variable()).map(|(n, _)| n).collect();
    assert_eq!(
        trainable,
        ["embeddings.word_embeddings.lora_embedding_A", "embeddings.word_embeddings.lora_embedding_B"]
    );
    let x = Indices::new(vec![1, 4, 7, 9], &[1, 4]).unwrap();
    let adapted = m.forward(&x, None, None).unwrap().last_hidden_state;
    adapted.sum_all().backward().unwrap();
    let l = m.word_embeddings.lora.as_ref().unwrap();
    let ga = l.a.grad().expect("A gets a gradient").to_vec();
    // Only the columns of the ids looked up (1, 4, 7, 9, of 20) get a gradient.
    for (i, g) in ga.iter().enumerate() {
        assert_eq!(*g != 0.0, [1, 4, 7, 9].contains(&(i % 20)), "A gradient at {i}: {g}");
    }
    let adapted = adapted.to_vec();
    let dir = std::env::temp_dir().join(format!("forgia-emb-lora-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("adapter_model.safetensors");
    lora::save_adapters(&path, &mut m).unwrap();
    let names: Vec<String> = forgia::io::load(&path).unwrap().into_iter().map(|(n, _)| n).collect();
    assert_eq!(
        names,
        [
            "base_model.model.embeddings.word_embeddings.lora_embedding_A",
            "base_model.model.embeddings.word_embeddings.lora_embedding_B"
        ]
    );
    let mut other = small_bert();
    other.word_embeddings.add_lora(2, 4.0, &mut Rng::new(9)).unwrap();
    lora::load_adapters(&mut other, &path).unwrap();
    assert_eq!(other.forward(&x, None, None).unwrap().last_hidden_state.to_vec(), adapted);
    m.word_embeddings.merge_lora().unwrap();
    assert!(m.word_embeddings.lora.is_none());
    let merged = m.forward(&x, None, None).unwrap().last_hidden_state.to_vec();
    for (a, b) in merged.iter().zip(&adapted) {
        assert!((a - b).abs() <= 1e-5, "{a} vs {b}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
