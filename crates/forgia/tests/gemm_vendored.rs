//! The `gemm` crate runs every product through its shared layer, vendored with a patch of ours
//! (vendor/README.md): a k block of 2048 instead of 512 where the L2 still holds one lhs
//! micropanel of that depth, a prefetch of each destination tile before its k loop ends,
//! threads that take the jobs of a slower thread's share when their own is done, and operands
//! packed several micropanels per pass over their rows. The block sizes keep the crate's own
//! bounds on every cache shape, the shares cover every job once, and products deeper than one
//! block (the prefetched loop run twice or more, full tiles and edge tiles, either layout of
//! each operand), threaded products whose threads start at different times, and weight
//! gradients packed in groups with a partial group and a partial micropanel match an f64
//! product.

mod common;

use common::{assert_product_close as assert_close, lcg, product_f64};
use forgia::Tensor;
use gemm_common::cache::{kernel_params_for, CacheInfo, DEEP_KC};
use gemm_common::gemm::{job_chunk, job_share};

fn level(kib: usize, associativity: usize) -> CacheInfo {
    CacheInfo { associativity, cache_bytes: kib * 1024, cache_line_bytes: 64 }
}

#[test]
fn the_deep_k_block_is_taken_where_the_l2_holds_one_lhs_panel_and_the_crates_bounds_hold_everywhere() {
    // (mr, nr, bytes per element): the f32 AVX-512 and AVX2 kernels, the f64 AVX-512 one.
    let kernels = [(64, 6, 4), (16, 6, 4), (32, 6, 8)];
    // (name, caches, whether a deep block fits each kernel): the AMD EPYC with AVX-512 (1 MiB
    // L2), the Intel Xeon of earlier runs (2 MiB), the AVX2-only AMD EPYC (512 KiB), and a
    // 256 KiB L2. By the crate's own count (the lhs gets the ways the rhs micropanel leaves,
    // less one) a block of 2048 leaves room for one 64-row f32 micropanel on 1 MiB (96 rows)
    // but none on 512 KiB (48), and for one 16-row AVX2 micropanel even on 256 KiB (16 rows);
    // 512 KiB and 256 KiB hold no 32-row f64 one (20 and 4 rows). Where none fits, `mc` would
    // round down to 0.
    let machines = [
        ("1 MiB L2", [level(32, 8), level(1024, 8), level(32 * 1024, 16)], [true, true, true]),
        ("2 MiB L2", [level(48, 12), level(2048, 16), level(105 * 1024, 15)], [true, true, true]),
        ("512 KiB L2", [level(32, 8), level(512, 8), level(32 * 1024, 16)], [false, true, false]),
        ("256 KiB L2", [level(32, 8), level(256, 4), level(8 * 1024, 16)], [false, true, false]),
    ];
    for (name, info, deep_fits) in machines {
        for ((mr, nr, sizeof), deep_fits) in kernels.into_iter().zip(deep_fits) {
            for (m, n, k) in [(2048, 2048, 2048), (4096, 256, 4096), (300, 70, 1500), (1000, 1000, 700), (100, 100, 50)]
            {
                let p = kernel_params_for(info, m, n, k, mr, nr, sizeof);
                let what = format!("{name}, kernel {mr}x{nr}x{sizeof}B, product {m}x{n}x{k}: {p:?}");
                assert!(p.mc >= mr && p.mc.is_multiple_of(mr), "{what}: mc is a positive multiple of mr");
                // The crate packs an mc × kc block into a slab the size of the L2.
                assert!(p.mc * p.kc * sizeof <= info[1].cache_bytes, "{what}: the lhs block fits the L2 slab");
                assert!(p.kc >= 1 && p.kc <= k && p.kc <= DEEP_KC, "{what}: kc within 1..=min(k, DEEP_KC)");
                // Blocks of equal depth: the last is at most one shorter than the others.
                let blocks = k.div_ceil(p.kc);
                assert!(p.kc * blocks >= k && p.kc * (blocks - 1) < k, "{what}: balanced k blocks");
                let (deep, upstream) = (k.div_ceil(k.div_ceil(DEEP_KC)), k.div_ceil(k.div_ceil(512)));
                match (k <= 512, deep_fits) {
                    (true, _) => assert_eq!(p.kc, k, "{what}: a product no deeper than 512 is one block"),
                    (false, true) => assert_eq!(p.kc, deep, "{what}: deep blocks"),
                    // A block shallower than DEEP_KC (a product of depth 1500) may still leave
                    // room for a micropanel where one of full depth does not.
                    (false, false) if k < DEEP_KC => {
                        assert!(p.kc == k || p.kc == upstream, "{what}: one block or 512s")
                    }
                    (false, false) => assert_eq!(p.kc, upstream, "{what}: upstream's 512"),
                }
            }
        }
    }
}

#[test]
fn products_deeper_than_one_k_block_match_f64_with_full_and_edge_tiles() {
    // Three deep blocks, two, and one (more of 512 where the L2 takes no deep block), with
    // outputs too large for the split-K path (`kernels/gemm/split_k.rs`) so the crate's
    // blocked loop runs them; 130 and 1030 leave partial 64 × 6 tiles on both edges.
    for &(m, n, k) in &[(130, 1030, 4103), (330, 400, 2049), (256, 768, 1024)] {
        let a = lcg(m * k, 11, 1.0);
        let b = lcg(k * n, 12, 1.0);
        let want = product_f64(m, n, k, &a, &b);
        let at = Tensor::from_vec(a.clone(), &[m, k]).unwrap();
        let bt = Tensor::from_vec(b.clone(), &[k, n]).unwrap();
        assert_close(&at.matmul(&bt).unwrap().to_vec(), &want, k, &format!("{m}x{k}·{k}x{n}"));
        // The same product from transposed storage of each operand: the crate then sees other
        // strides, and computes the other layout of the destination tile.
        let a_t = Tensor::from_vec(transposed(&a, m, k), &[k, m]).unwrap().transpose(0, 1).unwrap();
        let b_t = Tensor::from_vec(transposed(&b, k, n), &[n, k]).unwrap().transpose(0, 1).unwrap();
        assert_close(&a_t.matmul(&b_t).unwrap().to_vec(), &want, k, &format!("{m}x{k}·{k}x{n}, transposed storage"));
        // Cᵀ = Bᵀ·Aᵀ: the destination's other layout relative to the operands.
        let ct = b_t.transpose(0, 1).unwrap().matmul(&a_t.transpose(0, 1).unwrap()).unwrap();
        let want_t = transposed_f64(&want, m, n);
        assert_close(&ct.to_vec(), &want_t, k, &format!("({m}x{k}·{k}x{n})ᵀ"));
    }
}

#[test]
fn the_threads_shares_cover_every_job_once_in_order_and_differ_by_at_most_one() {
    for n_jobs in [0, 1, 2, 7, 100, 2052, 43_776] {
        for n_threads in 1..=9 {
            let what = format!("{n_jobs} jobs, {n_threads} threads");
            let shares: Vec<_> = (0..n_threads).map(|t| job_share(n_jobs, n_threads, t)).collect();
            assert_eq!(shares[0].0, 0, "{what}: the first share starts at job 0");
            assert_eq!(shares[n_threads - 1].1, n_jobs, "{what}: the last share ends at the last job");
            for pair in shares.windows(2) {
                assert_eq!(pair[0].1, pair[1].0, "{what}: {shares:?} are contiguous");
            }
            let sizes: Vec<_> = shares.iter().map(|(a, b)| b - a).collect();
            let (lo, hi) = (sizes.iter().min().unwrap(), sizes.iter().max().unwrap());
            assert!(hi - lo <= 1, "{what}: {sizes:?} differ by at most one");
            let chunk = job_chunk(n_jobs, n_threads);
            assert!(chunk >= 1 && (n_jobs == 0 || chunk <= *hi), "{what}: a chunk of {chunk} is within a share");
        }
    }
}

#[test]
fn threaded_products_match_f64_when_the_threads_outnumber_the_cores_and_take_each_others_jobs() {
    // More threads than the pool has workers: the first tasks finish their shares before the
    // last start, and take chunks of them, so every job is run by some thread other than its
    // owner for some of these counts. Sizes past the crate's threading threshold, one with
    // edge tiles on both sides and one deeper than a k block.
    for &(m, n, k) in &[(130, 1030, 600), (512, 300, 1500)] {
        let a = lcg(m * k, 21, 1.0);
        let b = lcg(k * n, 22, 1.0);
        // C += A·B, so a job run twice or not at all shows in the sum.
        let c0 = lcg(m * n, 23, 1.0);
        let mut want = product_f64(m, n, k, &a, &b);
        for (w, c) in want.iter_mut().zip(&c0) {
            *w += f64::from(*c);
        }
        for threads in [2, 3, 5, 8] {
            // Column-major for the crate: the row-major product C = A·B is Cᵀ = Bᵀ·Aᵀ.
            let mut c = c0.clone();
            crate_product((n, m, k), (&mut c, n as isize, 1), true, (&b, n as isize, 1), (&a, k as isize, 1), threads);
            assert_close(&c, &want, k, &format!("{m}x{k}·{k}x{n} on {threads} threads"));
        }
    }
}

#[test]
fn weight_gradients_packed_several_micropanels_per_pass_match_f64_on_one_and_more_threads() {
    // `gW = gyᵀ · x` with `gy [k, m]` and `x [k, n]` row-major, as a layer's backward runs it.
    // The crate computes the row-major product as its transpose, so it packs rows of `gy` as
    // its rhs (six-column micropanels: two groups of eight, a group of three and a partial
    // micropanel of four across m = 118) and rows of `x` as its lhs (16-row micropanels on the
    // AVX2 kernel, ending in a partial one), over a k of three deep blocks. With n = 87 the crate
    // packs the whole lhs up front; with n = 327 (more than two row blocks) each thread packs
    // the micropanels its jobs need, a run of them per call.
    let (m, k) = (6 * 8 * 2 + 6 * 3 + 4, 4100);
    for n in [16 * 5 + 7, 16 * 20 + 7] {
        let gy = lcg(k * m, 31, 1.0);
        let x = lcg(k * n, 32, 1.0);
        let gy_t = transposed(&gy, k, m);
        let want = product_f64(m, n, k, &gy_t, &x);
        for threads in [1, 2, 3] {
            let mut c = vec![f32::NAN; m * n];
            // `gyᵀ` is m × k with row stride 1 and column stride m inside `gy`, `x` is k × n
            // row-major, and `c` is m × n row-major.
            crate_product(
                (m, n, k),
                (&mut c, 1, n as isize),
                false,
                (&gy, m as isize, 1),
                (&x, 1, n as isize),
                threads,
            );
            assert_close(&c, &want, k, &format!("gyᵀ·x, {m}x{k}·{k}x{n} on {threads} threads"));
        }
    }
}

/// `c = c·[read_dst] + a · b` by the crate on `threads` threads (one: no parallelism), for an
/// `m × k` `a`, a `k × n` `b` and an `m × n` `c`, each given as (elements, column stride, row
/// stride). Panics when an operand's strides address past its elements.
fn crate_product(
    (m, n, k): (usize, usize, usize),
    (c, c_cs, c_rs): (&mut [f32], isize, isize),
    read_dst: bool,
    (a, a_cs, a_rs): (&[f32], isize, isize),
    (b, b_cs, b_rs): (&[f32], isize, isize),
    threads: usize,
) {
    let last = |rows: usize, cols: usize, rs: isize, cs: isize| {
        assert!(rs >= 0 && cs >= 0, "negative strides");
        (rows - 1) as isize * rs + (cols - 1) as isize * cs
    };
    assert!(last(m, n, c_rs, c_cs) < c.len() as isize, "c's strides pass its end");
    assert!(last(m, k, a_rs, a_cs) < a.len() as isize && last(k, n, b_rs, b_cs) < b.len() as isize, "operand strides");
    let par = if threads == 1 { gemm::Parallelism::None } else { gemm::Parallelism::Rayon(threads) };
    // SAFETY: every operand holds the elements its sizes and non-negative strides address
    // (asserted above), and `c` is an exclusive borrow distinct from `a` and `b`.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            c.as_mut_ptr(),
            c_cs,
            c_rs,
            read_dst,
            a.as_ptr(),
            a_cs,
            a_rs,
            b.as_ptr(),
            b_cs,
            b_rs,
            1.0,
            1.0,
            false,
            false,
            false,
            par,
        )
    }
}

/// The row-major `cols × rows` transpose of a row-major `rows × cols` matrix.
fn transposed(x: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    (0..rows * cols).map(|i| x[(i % rows) * cols + i / rows]).collect()
}

fn transposed_f64(x: &[f64], rows: usize, cols: usize) -> Vec<f64> {
    (0..rows * cols).map(|i| x[(i % rows) * cols + i / rows]).collect()
}
