//! Checkpoints: safetensors round trips, resuming training bit for bit, and corrupted,
//! truncated or mismatched files that fail cleanly and leave the model untouched.

use forgia::nn::{Linear, Module, Sequential, Tanh};
use forgia::optim::{Adam, AdamConfig, Optimizer, Sgd, SgdConfig};
use forgia::{io, ErrorKind, Rng, Tensor};

mod common;
use common::temp::{temp_dir, TempDir};

fn dir(test: &str) -> TempDir {
    temp_dir("io", test)
}

fn mlp(seed: u64) -> Sequential {
    let mut rng = Rng::new(seed);
    Sequential::new()
        .push(Linear::new(3, 8, true, &mut rng).unwrap())
        .push(Tanh)
        .push(Linear::new(8, 2, true, &mut rng).unwrap())
}

fn values(m: &dyn Module) -> Vec<(String, Vec<f32>)> {
    m.named_parameters().into_iter().map(|(n, t)| (n, t.to_vec())).collect()
}

fn state_values(o: &dyn Optimizer) -> Vec<(String, Vec<usize>, Vec<f32>)> {
    o.state().into_iter().map(|(n, t)| (n, t.shape().to_vec(), t.to_vec())).collect()
}

/// One MSE step on fixed data.
fn train_step(m: &mut Sequential, opt: &mut dyn Optimizer) {
    let x = Tensor::from_vec((0..12).map(|i| (i as f32 * 0.37).sin()).collect(), &[4, 3]).unwrap();
    let y = Tensor::from_vec(vec![1.0, 0.0, 0.0, 1.0, 1.0, 1.0, 0.0, 0.0], &[4, 2]).unwrap();
    opt.zero_grad(m);
    let d = m.forward(&x).unwrap().sub(&y).unwrap();
    d.mul(&d).unwrap().mean_all().unwrap().backward().unwrap();
    opt.step(m).unwrap();
}

#[test]
fn named_tensors_round_trip_exactly() {
    let d = dir("roundtrip");
    let path = d.join("t.safetensors");
    let a = Tensor::from_vec(vec![1.0, -2.5, f32::MIN_POSITIVE, 3e38, 0.1, -0.0], &[2, 3]).unwrap();
    let at = a.transpose(0, 1).unwrap(); // strided: saved packed
    let s = Tensor::scalar(7.0);
    io::save(&path, &[("b.a", &a), ("a.t", &at), ("s", &s)]).unwrap();
    let back = io::load(&path).unwrap();
    let names: Vec<&str> = back.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["a.t", "b.a", "s"]);
    assert_eq!((back[0].1.shape(), back[0].1.to_vec()), (&[3usize, 2][..], at.to_vec()));
    assert_eq!(
        back[1].1.to_vec().iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
        a.to_vec().iter().map(|v| v.to_bits()).collect::<Vec<_>>()
    );
    assert_eq!((back[2].1.shape(), back[2].1.item().unwrap()), (&[][..], 7.0));
    let e = io::save(&path, &[("x", &s), ("x", &s)]).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::Checkpoint { .. }));
}

#[test]
fn a_model_loads_into_another_with_the_same_names_and_shapes() {
    let d = dir("model");
    let path = d.join("m.safetensors");
    let a = mlp(1);
    io::save_model(&path, &a).unwrap();
    let mut b = mlp(2);
    assert_ne!(values(&a), values(&b));
    let w_before = b.named_parameters()[0].1.clone();
    io::load_into(&mut b, &path).unwrap();
    assert_eq!(values(&a), values(&b));
    assert_eq!(b.named_parameters()[0].1.grad_fn(), Some("variable"));
    assert_eq!(w_before.to_vec(), values(&b)[0].1, "a handle taken before the load sees the loaded values");
}

fn resume_matches_uninterrupted(make_opt: &dyn Fn() -> Box<dyn Optimizer>, test: &str) {
    let d = dir(test);
    let path = d.join("ckpt.safetensors");
    let (mut m1, mut o1) = (mlp(7), make_opt());
    for _ in 0..10 {
        train_step(&mut m1, o1.as_mut());
    }
    let (mut m2, mut o2) = (mlp(7), make_opt());
    for _ in 0..5 {
        train_step(&mut m2, o2.as_mut());
    }
    io::save_checkpoint(&path, &m2, o2.as_ref()).unwrap();
    drop((m2, o2));
    let (mut m3, mut o3) = (mlp(99), make_opt());
    io::load_checkpoint(&mut m3, o3.as_mut(), &path).unwrap();
    assert_eq!(o3.steps_taken(), 5);
    for _ in 0..5 {
        train_step(&mut m3, o3.as_mut());
    }
    assert_eq!(values(&m1), values(&m3), "parameters bit for bit");
    assert_eq!(state_values(o1.as_ref()), state_values(o3.as_ref()), "optimizer state bit for bit");
}

#[test]
fn training_resumed_from_a_checkpoint_matches_an_uninterrupted_run_with_adam() {
    resume_matches_uninterrupted(
        &|| Box::new(Adam::new(AdamConfig { lr: 0.01, weight_decay: 0.001, ..AdamConfig::adam() }).unwrap()),
        "resume-adam",
    );
}

#[test]
fn training_resumed_from_a_checkpoint_matches_an_uninterrupted_run_with_sgd_momentum() {
    resume_matches_uninterrupted(
        &|| Box::new(Sgd::new(SgdConfig { lr: 0.05, momentum: 0.9, nesterov: true, ..SgdConfig::default() }).unwrap()),
        "resume-sgd",
    );
}

/// A checkpoint of a trained model plus a different model and optimizer to load it into.
fn checkpoint_bytes(d: &std::path::Path) -> Vec<u8> {
    let (mut m, mut o) = (mlp(3), Adam::new(AdamConfig::adam()).unwrap());
    train_step(&mut m, &mut o);
    let path = d.join("good.safetensors");
    io::save_checkpoint(&path, &m, &o).unwrap();
    std::fs::read(path).unwrap()
}

#[test]
fn truncated_checkpoints_are_errors_and_change_nothing() {
    let d = dir("truncated");
    let bytes = checkpoint_bytes(&d);
    let (mut m, mut o) = (mlp(4), Adam::new(AdamConfig::adam()).unwrap());
    train_step(&mut m, &mut o);
    let (before, state_before) = (values(&m), state_values(&o));
    let path = d.join("bad.safetensors");
    for len in 0..bytes.len() {
        std::fs::write(&path, &bytes[..len]).unwrap();
        let e = io::load_checkpoint(&mut m, &mut o, &path).unwrap_err();
        assert!(matches!(e.kind(), ErrorKind::Checkpoint { .. }), "length {len}: {e}");
        assert!(io::load_into(&mut m, &path).is_err());
    }
    assert_eq!(values(&m), before);
    assert_eq!(state_values(&o), state_before);
}

#[test]
fn every_single_byte_corruption_is_caught_or_harmless() {
    let d = dir("corrupt");
    let bytes = checkpoint_bytes(&d);
    let (mut reference, mut ro) = (mlp(4), Adam::new(AdamConfig::adam()).unwrap());
    io::load_checkpoint(&mut reference, &mut ro, d.join("good.safetensors")).unwrap();
    let path = d.join("bad.safetensors");
    let mut caught = 0;
    for i in 0..bytes.len() {
        let mut bad = bytes.clone();
        bad[i] ^= 0x5a;
        std::fs::write(&path, &bad).unwrap();
        let (mut m, mut o) = (mlp(4), Adam::new(AdamConfig::adam()).unwrap());
        let before = values(&m);
        match io::load_checkpoint(&mut m, &mut o, &path) {
            Err(_) => {
                caught += 1;
                assert_eq!(values(&m), before, "byte {i}: a failed load changed the model");
                assert_eq!(o.steps_taken(), 0);
            }
            // Only bytes that carry no information (header padding) may go unnoticed.
            Ok(()) => {
                assert_eq!(values(&m), values(&reference), "byte {i}");
                assert_eq!(state_values(&o), state_values(&ro), "byte {i}");
            }
        }
    }
    // Every data byte is covered by the checksum.
    assert!(caught > bytes.len() * 9 / 10, "{caught} of {}", bytes.len());
}

#[test]
fn missing_extra_and_misshaped_tensors_are_errors_and_change_nothing() {
    let d = dir("mismatch");
    let path = d.join("m.safetensors");
    let src = mlp(1);
    let params = src.named_parameters();
    let mut m = mlp(2);
    let before = values(&m);
    let wrong = Tensor::zeros(&[8]).unwrap();
    let cases: Vec<Vec<(&str, &Tensor)>> = vec![
        params.iter().skip(1).map(|(n, t)| (n.as_str(), t)).collect(),
        params.iter().map(|(n, t)| (n.as_str(), t)).chain([("extra", &wrong)]).collect(),
        params.iter().map(|(n, t)| (n.as_str(), if n == "2.bias" { &wrong } else { t })).collect(),
    ];
    for (k, case) in cases.iter().enumerate() {
        io::save(&path, case).unwrap();
        let e = io::load_into(&mut m, &path).unwrap_err();
        assert!(matches!(e.kind(), ErrorKind::Checkpoint { .. }), "case {k}: {e}");
        assert_eq!(values(&m), before, "case {k}");
    }
    // A training checkpoint has optimizer entries: not a plain model file.
    io::save_checkpoint(&path, &src, &Sgd::new(SgdConfig::default()).unwrap()).unwrap();
    assert!(io::load_into(&mut m, &path).is_err());
    // Optimizer state that does not fit the model fails the whole load.
    let mut other = Sequential::new().push(Linear::new(3, 8, true, &mut Rng::new(0)).unwrap());
    let mut o = Adam::new(AdamConfig::adam()).unwrap();
    let e = io::load_checkpoint(&mut other, &mut o, &path).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::Checkpoint { .. }));
}

#[test]
fn file_errors_are_io_errors_and_writes_leave_no_temporary_files() {
    let d = dir("files");
    let e = io::load(d.join("absent.safetensors")).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::Io { .. }));
    let m = mlp(1);
    let e = io::save_model(d.join("no/such/dir/m.safetensors"), &m).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::Io { .. }));
    let path = d.join("m.safetensors");
    std::fs::write(&path, b"old contents that are not a checkpoint").unwrap();
    io::save_model(&path, &m).unwrap();
    io::save_model(&path, &m).unwrap();
    let files: Vec<String> =
        std::fs::read_dir(&*d).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert_eq!(files, ["m.safetensors"]);
    assert_eq!(io::load(&path).unwrap().len(), 4);
}

#[test]
#[cfg(target_os = "linux")]
fn a_later_save_removes_temporary_files_of_dead_writers_but_never_of_live_ones() {
    let d = dir("stale");
    // A PID that is certainly gone: a child we started and reaped.
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let dead = child.id();
    child.wait().unwrap();
    assert!(!std::path::Path::new(&format!("/proc/{dead}")).exists());
    let me = std::process::id();
    let stale = format!(".m.safetensors.tmp-{dead}-0");
    let live_init = ".m.safetensors.tmp-1-3"; // PID 1 is always alive
    let live_mine = format!(".m.safetensors.tmp-{me}-999999");
    let other_target = format!(".other.safetensors.tmp-{dead}-0");
    let not_ours = format!(".m.safetensors.tmp-{dead}-x");
    for name in [stale.as_str(), live_init, &live_mine, &other_target, &not_ours] {
        std::fs::write(d.join(name), b"a killed writer's partial bytes").unwrap();
    }
    io::save_model(d.join("m.safetensors"), &mlp(1)).unwrap();
    let mut files: Vec<String> =
        std::fs::read_dir(&*d).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    files.sort();
    let mut expected = vec![live_init.to_string(), live_mine, other_target, not_ours, "m.safetensors".to_string()];
    expected.sort();
    assert_eq!(files, expected, "only the dead writer's temporary of this target is removed");
}

#[test]
fn foreign_files_without_a_checksum_load_floats_of_any_precision_and_reject_integers() {
    use safetensors::tensor::{Dtype, TensorView};
    let d = dir("foreign");
    let path = d.join("f.safetensors");
    let f32s: Vec<u8> = [1.5f32, -2.0].iter().flat_map(|v| v.to_le_bytes()).collect();
    let view = TensorView::new(Dtype::F32, vec![2], &f32s).unwrap();
    std::fs::write(&path, safetensors::serialize([("w", view)], None).unwrap()).unwrap();
    assert_eq!(io::load(&path).unwrap()[0].1.to_vec(), [1.5, -2.0]);
    let f64s: Vec<u8> = 1.5f64.to_le_bytes().to_vec();
    let view = TensorView::new(Dtype::F64, vec![1], &f64s).unwrap();
    std::fs::write(&path, safetensors::serialize([("w", view)], None).unwrap()).unwrap();
    assert_eq!(io::load(&path).unwrap()[0].1.to_vec(), [1.5]);
    let i64s: Vec<u8> = 7i64.to_le_bytes().to_vec();
    let view = TensorView::new(Dtype::I64, vec![1], &i64s).unwrap();
    std::fs::write(&path, safetensors::serialize([("labels", view)], None).unwrap()).unwrap();
    let err = io::load(&path).unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::Checkpoint { .. }) && err.to_string().contains("labels"), "{err}");
}
