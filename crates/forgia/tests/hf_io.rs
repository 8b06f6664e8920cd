//! The Hugging Face checkpoint format: entries of every dtype, renaming (prefixes, a name
//! map, ignored names), the errors naming a missing / extra / mis-shaped tensor, writing back
//! with `transformers`' names, `config.json`, and setting a gradient by hand.

use std::path::PathBuf;

use forgia::io::{self, Entry, HfConfig, HfNames};
use forgia::nn::{LayerNorm, Linear, Module};
use forgia::{ErrorKind, Rng, Tensor};
use safetensors::tensor::{Dtype, TensorView};

mod common;
use common::temp::{temp_dir, TempDir};

fn dir(name: &str) -> TempDir {
    temp_dir("hf-io", name)
}

/// Writes raw entries `(name, dtype, shape, bytes)` as a safetensors file.
fn write(path: &PathBuf, entries: &[(&str, Dtype, Vec<usize>, Vec<u8>)]) {
    let views: Vec<(&str, TensorView<'_>)> =
        entries.iter().map(|(n, d, s, b)| (*n, TensorView::new(*d, s.clone(), b).unwrap())).collect();
    std::fs::write(path, safetensors::serialize(views, None).unwrap()).unwrap();
}

fn f32s(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn err_text(r: forgia::Result<impl std::fmt::Debug>) -> String {
    let e = r.unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::Checkpoint { .. }), "{e}");
    e.to_string()
}

#[test]
fn every_float_precision_converts_to_f32_and_integers_become_indices() {
    let d = dir("dtypes");
    let p = d.join("a.safetensors");
    let half: Vec<u8> = [0x3c00u16, 0xc000, 0x3555].iter().flat_map(|h| h.to_le_bytes()).collect();
    let bf: Vec<u8> = [0x3f80u16, 0xc040].iter().flat_map(|h| h.to_le_bytes()).collect();
    let f64s: Vec<u8> = [0.1f64, -3.0].iter().flat_map(|x| x.to_le_bytes()).collect();
    let i64s: Vec<u8> = [0i64, 1, 2, 3].iter().flat_map(|x| x.to_le_bytes()).collect();
    let i32s: Vec<u8> = [-5i32].iter().flat_map(|x| x.to_le_bytes()).collect();
    write(
        &p,
        &[
            ("h", Dtype::F16, vec![3], half),
            ("b", Dtype::BF16, vec![2], bf),
            ("d", Dtype::F64, vec![2], f64s),
            ("pos", Dtype::I64, vec![1, 4], i64s),
            ("n", Dtype::I32, vec![], i32s),
            ("m", Dtype::BOOL, vec![2], vec![1, 0]),
        ],
    );
    let entries = io::load_entries(&p).unwrap();
    let get = |name: &str| entries.iter().find(|(n, _)| n == name).unwrap().1.clone();
    let float = |name: &str| match get(name) {
        Entry::Float(t) => t.to_vec(),
        Entry::Int(_) => panic!("{name} should be float"),
    };
    let int = |name: &str| match get(name) {
        Entry::Int(i) => (i.data().to_vec(), i.shape().to_vec()),
        Entry::Float(_) => panic!("{name} should be integer"),
    };
    assert_eq!(float("h"), [1.0, -2.0, 0.333_251_95]);
    assert_eq!(float("b"), [1.0, -3.0]);
    assert_eq!(float("d"), [0.1f64 as f32, -3.0]);
    assert_eq!(int("pos"), (vec![0, 1, 2, 3], vec![1, 4]));
    assert_eq!(int("n"), (vec![-5], vec![]));
    assert_eq!(int("m"), (vec![1, 0], vec![2]));
    // F8 is not read; the error names the entry.
    write(&p, &[("q", Dtype::F8_E4M3, vec![1], vec![0])]);
    assert!(err_text(io::load_entries(&p)).contains("\"q\""));
}

/// A `Linear(2, 2)` saved the way a task head of `transformers` names it.
fn head_file(path: &PathBuf, extra: &[(&str, Dtype, Vec<usize>, Vec<u8>)]) {
    let mut entries = vec![
        (
            "bert.classifier.weight",
            Dtype::F16,
            vec![2, 2],
            [0x3c00u16, 0, 0, 0x4000].iter().flat_map(|h| h.to_le_bytes()).collect(),
        ),
        ("bert.classifier.bias", Dtype::F32, vec![2], f32s(&[0.5, -0.5])),
    ];
    entries.extend(extra.iter().cloned());
    write(path, &entries);
}

#[test]
fn prefixes_are_stripped_and_added_and_integer_buffers_are_skipped() {
    let d = dir("prefix");
    let p = d.join("m.safetensors");
    let pos: Vec<u8> = [0i64, 1].iter().flat_map(|x| x.to_le_bytes()).collect();
    head_file(&p, &[("bert.embeddings.position_ids", Dtype::I64, vec![1, 2], pos)]);
    let mut lin = Linear::new(2, 2, true, &mut Rng::new(0)).unwrap();
    // The file's names carry `bert.classifier.`; the module's are `weight`, `bias`.
    let names = HfNames::new().file_prefix("bert.classifier.");
    let report = io::load_hf(&mut lin, &p, &names).unwrap();
    assert_eq!(lin.weight.to_vec(), [1.0, 0.0, 0.0, 2.0]);
    assert_eq!(lin.bias.as_ref().unwrap().to_vec(), [0.5, -0.5]);
    assert_eq!(report.skipped, ["bert.embeddings.position_ids"]);
    assert!(lin.weight.is_variable(), "a load keeps the variable");
    // The same file through a module prefix: strip `bert.`, add `head.` → `head.classifier.*`.
    struct Wrapped(Linear);
    impl Module for Wrapped {
        fn visit_params(&self, f: &mut dyn FnMut(&str, &Tensor)) {
            forgia::nn::visit_child("head.classifier", &self.0, f);
        }
        fn visit_params_mut(&mut self, f: &mut dyn FnMut(&str, &mut Tensor)) {
            forgia::nn::visit_child_mut("head.classifier", &mut self.0, f);
        }
    }
    let mut w = Wrapped(Linear::new(2, 2, true, &mut Rng::new(1)).unwrap());
    let names = HfNames::new().file_prefix("bert.").model_prefix("head.");
    io::load_hf(&mut w, &p, &names).unwrap();
    assert_eq!(w.0.weight.to_vec(), [1.0, 0.0, 0.0, 2.0]);
    // Writing back restores the file's names (as F32, with `format: pt`).
    let out = d.join("out.safetensors");
    io::save_hf(&out, &w, &names).unwrap();
    let bytes = std::fs::read(&out).unwrap();
    let (_, meta) = safetensors::SafeTensors::read_metadata(&bytes).unwrap();
    assert_eq!(meta.metadata().as_ref().unwrap().get("format").map(String::as_str), Some("pt"));
    let saved: Vec<String> = io::load(&out).unwrap().into_iter().map(|(n, _)| n).collect();
    assert_eq!(saved, ["bert.classifier.bias", "bert.classifier.weight"]);
}

#[test]
fn a_name_map_renames_single_entries_both_ways() {
    let d = dir("map");
    let p = d.join("m.safetensors");
    write(&p, &[("gamma", Dtype::F32, vec![2], f32s(&[2.0, 3.0])), ("beta", Dtype::F32, vec![2], f32s(&[0.0, 1.0]))]);
    let mut ln = LayerNorm::new(&[2], 1e-5).unwrap();
    let names = HfNames::new().rename("gamma", "weight").rename("beta", "bias");
    io::load_hf(&mut ln, &p, &names).unwrap();
    assert_eq!((ln.weight.to_vec(), ln.bias.to_vec()), (vec![2.0, 3.0], vec![0.0, 1.0]));
    let out = d.join("out.safetensors");
    io::save_hf(&out, &ln, &names).unwrap();
    let saved: Vec<String> = io::load(&out).unwrap().into_iter().map(|(n, _)| n).collect();
    assert_eq!(saved, ["beta", "gamma"]);
}

#[test]
fn missing_extra_misshaped_and_integer_parameters_are_errors_naming_the_tensor() {
    let d = dir("errors");
    let p = d.join("m.safetensors");
    let names = HfNames::new().file_prefix("bert.classifier.");
    let fresh = || Linear::new(2, 2, true, &mut Rng::new(3)).unwrap();
    let before = fresh().weight.to_vec();
    // extra
    head_file(&p, &[("bert.pooler.dense.bias", Dtype::F32, vec![2], f32s(&[1.0, 1.0]))]);
    let mut lin = fresh();
    assert!(err_text(io::load_hf(&mut lin, &p, &names)).contains("bert.pooler.dense.bias"));
    assert_eq!(lin.weight.to_vec(), before, "a failed load changes nothing");
    // ... unless ignored
    io::load_hf(&mut lin, &p, &names.clone().ignore("bert.pooler.")).unwrap();
    // missing
    write(&p, &[("bert.classifier.weight", Dtype::F32, vec![2, 2], f32s(&[1.0; 4]))]);
    let text = err_text(io::load_hf(&mut fresh(), &p, &names));
    assert!(text.contains("missing") && text.contains("\"bias\"") && text.contains("bert.classifier.bias"), "{text}");
    // mis-shaped
    head_file(&p, &[]);
    write(
        &p,
        &[
            ("bert.classifier.weight", Dtype::F32, vec![4], f32s(&[1.0; 4])),
            ("bert.classifier.bias", Dtype::F32, vec![2], f32s(&[1.0; 2])),
        ],
    );
    let text = err_text(io::load_hf(&mut fresh(), &p, &names));
    assert!(text.contains("bert.classifier.weight") && text.contains("[4]") && text.contains("[2, 2]"), "{text}");
    // an integer entry under a parameter's name
    let ints: Vec<u8> = [1i64, 2].iter().flat_map(|x| x.to_le_bytes()).collect();
    write(
        &p,
        &[
            ("bert.classifier.weight", Dtype::F32, vec![2, 2], f32s(&[1.0; 4])),
            ("bert.classifier.bias", Dtype::I64, vec![2], ints),
        ],
    );
    assert!(err_text(io::load_hf(&mut fresh(), &p, &names)).contains("holds integers"));
}

#[test]
fn config_json_reads_typed_keys_and_names_a_bad_one() {
    let c = HfConfig::parse(r#"{"hidden_size": 384, "layer_norm_eps": 1e-12, "hidden_act": "gelu", "rope_parameters": {"rope_theta": 500000.0}}"#, "config.json").unwrap();
    assert_eq!(c.usize("hidden_size").unwrap(), 384);
    assert_eq!(c.f32("layer_norm_eps").unwrap(), 1e-12);
    assert_eq!(c.str("hidden_act").unwrap(), "gelu");
    assert_eq!(c.usize_or("absent", 7).unwrap(), 7);
    assert_eq!(c.section("rope_parameters").unwrap().unwrap().f32("rope_theta").unwrap(), 500000.0);
    let e = c.usize("hidden_act").unwrap_err().to_string();
    assert!(e.contains("hidden_act"), "{e}");
    assert!(c.usize("num_layers").unwrap_err().to_string().contains("num_layers"));
    assert!(HfConfig::parse("[1, 2]", "x.json").is_err());
    assert!(HfConfig::parse("{", "x.json").is_err());
}

#[test]
fn a_gradient_can_be_set_by_hand_and_is_checked() {
    let w = Tensor::variable(vec![1.0, 2.0, 3.0], &[3]).unwrap();
    let g = Tensor::from_vec(vec![0.1, 0.2, 0.3], &[3]).unwrap();
    w.assign_grad(Some(&g)).unwrap();
    assert_eq!(w.grad().unwrap().to_vec(), [0.1, 0.2, 0.3]);
    let held = w.grad().unwrap();
    w.sum_all().backward().unwrap();
    assert_eq!(w.grad().unwrap().to_vec(), [1.1, 1.2, 1.3]);
    assert_eq!(held.to_vec(), [0.1, 0.2, 0.3], "a held gradient never changes");
    w.assign_grad(None).unwrap();
    assert!(w.grad().is_none());
    let bad = w.assign_grad(Some(&Tensor::zeros(&[2]).unwrap())).unwrap_err();
    assert!(matches!(bad.kind(), ErrorKind::ShapeMismatch { .. }));
    let constant = Tensor::zeros(&[3]).unwrap();
    assert!(matches!(constant.assign_grad(Some(&g)).unwrap_err().kind(), ErrorKind::InvalidArgument { .. }));
    let result = w.scale(2.0);
    assert!(result.assign_grad(Some(&g)).is_err(), "an op result is not a variable");
}
