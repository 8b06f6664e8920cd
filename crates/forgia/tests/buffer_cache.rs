//! The cache of freed tensor buffers (`tensor/storage.rs`). One test in its own process, since
//! the cache is global.

use forgia::Tensor;

#[test]
fn freed_buffers_are_reused_bounded_and_released_on_request() {
    forgia::clear_buffer_cache();
    assert_eq!(forgia::cached_bytes(), 0);
    let n = 1 << 18; // 1 MiB of f32, above the 64 KiB floor
    let x = Tensor::ones(&[n]).unwrap();
    // An op result of n floats, dropped: its buffer goes to the cache, not to live bytes.
    let live_before = forgia::live_bytes();
    drop(x.scale(2.0));
    assert_eq!(forgia::live_bytes(), live_before);
    assert_eq!(forgia::cached_bytes(), 4 * n);
    // The next result of that size takes it back, and overwrites every value.
    let y = x.scale(3.0);
    assert_eq!(forgia::cached_bytes(), 0);
    assert!(y.to_vec().iter().all(|&v| v == 3.0));
    drop(y);
    // Small buffers are not kept.
    drop(Tensor::ones(&[16]).unwrap().scale(2.0));
    assert_eq!(forgia::cached_bytes(), 4 * n);
    // The limit bounds the cache; 0 turns it off and frees what it holds.
    forgia::set_buffer_cache_limit(4 * n - 1);
    assert_eq!(forgia::cached_bytes(), 0);
    drop(x.scale(2.0));
    assert_eq!(forgia::cached_bytes(), 0, "a buffer above the limit is freed");
    forgia::set_buffer_cache_limit(1 << 30);
    assert_eq!(forgia::buffer_cache_limit(), 1 << 30);
    drop(x.scale(2.0));
    assert_eq!(forgia::cached_bytes(), 4 * n);
    forgia::clear_buffer_cache();
    assert_eq!(forgia::cached_bytes(), 0);
}
