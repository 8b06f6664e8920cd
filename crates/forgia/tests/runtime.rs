//! The runtime configuration (`forgia::runtime`): settings take effect when the pool is built,
//! and a later change to a pool setting is refused with the setting named; the buffer cache
//! and the spin window change at any time. No harness: the
//! process's main thread builds the pool, so the whole sequence runs in order in one process.

use forgia::runtime::{self, RuntimeConfig};
use forgia::{ErrorKind, Tensor};

fn main() {
    // The defaults, before anything is built.
    let defaults = RuntimeConfig::default();
    assert_eq!(runtime::config(), defaults);
    assert!(runtime::configure(RuntimeConfig { threads: Some(0), ..defaults }).is_err());

    // Settings given before the first operation are what the pool is built with.
    let wanted = RuntimeConfig { threads: Some(2), adopt_main_thread: false, flush_denormals: false, ..defaults };
    runtime::configure(wanted).unwrap();
    let x = Tensor::from_vec(vec![1.0; 4], &[2, 2]).unwrap();
    let _ = x.matmul(&x).unwrap();
    assert_eq!(forgia::num_threads(), 2);
    assert_eq!(runtime::config(), wanted);

    // With flushing off, a pool thread keeps subnormal results.
    let sub = Tensor::from_vec(vec![1e-30; 1 << 19], &[1 << 19]).unwrap().scale(1e-10);
    assert!(sub.to_vec().iter().all(|&v| v > 0.0), "flush_denormals: false keeps subnormals");

    // Pool settings cannot change once it is built; the refusal names the setting.
    for (config, arg) in [
        (RuntimeConfig { threads: Some(3), ..wanted }, "threads"),
        (RuntimeConfig { adopt_main_thread: true, ..wanted }, "adopt_main_thread"),
        (RuntimeConfig { flush_denormals: true, ..wanted }, "flush_denormals"),
    ] {
        let e = runtime::configure(config).unwrap_err();
        assert!(matches!(e.kind(), ErrorKind::InvalidArgument { arg: a, .. } if *a == arg), "{e}");
        assert!(e.to_string().contains("first tensor operation"), "{e}");
    }
    assert!(forgia::set_num_threads(3).is_err());
    forgia::set_num_threads(2).unwrap(); // the count it runs is fine

    // The buffer cache changes at any time, through either entry point.
    runtime::configure(RuntimeConfig { buffer_cache_bytes: 1 << 20, ..wanted }).unwrap();
    assert_eq!(forgia::buffer_cache_limit(), 1 << 20);
    forgia::set_buffer_cache_limit(1 << 21);
    assert_eq!(runtime::config().buffer_cache_bytes, 1 << 21);

    // So does the idle threads' spin window; products give the same values with or without it.
    let big = Tensor::from_vec((0..256 * 256).map(|i| (i % 7) as f32).collect(), &[256, 256]).unwrap();
    let spun = big.matmul(&big).unwrap().to_vec();
    let now = runtime::config();
    runtime::configure(RuntimeConfig { spin_us: 0, ..now }).unwrap();
    assert_eq!(runtime::config().spin_us, 0);
    assert_eq!(big.matmul(&big).unwrap().to_vec(), spun, "spinning changes no result");
    runtime::configure(RuntimeConfig { spin_us: 50, ..now }).unwrap();
    assert_eq!(runtime::config(), RuntimeConfig { spin_us: 50, ..now });
    println!("runtime: 1 passed, 0 failed");
}
