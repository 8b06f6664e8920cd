//! Products with a broadcast operand: an operand whose stride along an axis is 0 repeats one
//! vector, so the product is an outer product or a matrix–vector product repeated, computed
//! in `O(mk + kn + mn)` instead of `O(mnk)`.
//!
//! Such operands are common in backward passes: the gradient of `y.sum()` reaches `y`'s op as
//! a constant `[m, n]` view of one element (both strides 0), so `gV = hᵀ · gy` and
//! `gh = gy · Vᵀ` of a product before the sum are both of this kind. XLA rewrites dots of
//! broadcasts the same way.
//!
//! For `c = alpha · a · b` with `a` `m × k` and `b` `k × n`:
//! - `a` constant along `k` (column stride 0): `c[i, j] = alpha · a[i, 0] · Σ_p b[p, j]`;
//! - `b` constant along `k` (row stride 0): `c[i, j] = alpha · (Σ_p a[i, p]) · b[0, j]`;
//! - `a` constant along `m` (row stride 0): every row of `c` is `alpha · a[0, :] · b`;
//! - `b` constant along `n` (column stride 0): every column of `c` is `alpha · a · b[:, 0]`.
//!
//! The sums and the one matrix–vector product are the `gemm` crate's, computed into the first
//! row or column of `c` itself (which then needs no scratch), and spread from there in the
//! CPU's widest vectors ([`vectorized`]: the crate is built for baseline x86-64). A sum is
//! the product with a vector of ones read at unit stride ([`ONES`]): the crate's
//! matrix–vector path takes it whichever way the summed operand is stored, where a ones
//! operand of stride 0 sent it to the packed kernel, which gathered a transposed operand one
//! element at a time (ten times slower: `benches/gemm.rs`, group `broadcast_sum`).
//!
//! The results are the full product's up to rounding: the sum over `k` is taken before the
//! multiplication by the repeated factor rather than after, so the one difference beyond
//! rounding is a sum that overflows f32 where the scaled terms would not (`1e-30 · Σ b` with
//! `Σ b` past `3.4e38`).

use super::{crate_gemm, MatRef};
use crate::kernels::simd::vectorized;

/// The ones a sum over `k` multiplies by, read at unit stride (see the module doc); a longer
/// sum goes in chunks of this many terms ([`column_sums`]).
static ONES: [f32; 2048] = [1.0; 2048];

/// Which of the module doc's forms a product takes, if any.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Form {
    /// `a` constant along `k`: an outer product of `a`'s column and `b`'s column sums.
    LhsAlongK,
    /// `b` constant along `k`: an outer product of `a`'s row sums and `b`'s row.
    RhsAlongK,
    /// `a`'s rows all equal: one row of output, repeated.
    LhsRows,
    /// `b`'s columns all equal: one column of output, repeated.
    RhsCols,
}

fn form(m: usize, n: usize, k: usize, a: &MatRef<'_>, b: &MatRef<'_>) -> Option<Form> {
    if m == 0 || n == 0 || k == 0 {
        return None;
    }
    if k >= 2 && a.col_stride == 0 {
        Some(Form::LhsAlongK)
    } else if k >= 2 && b.row_stride == 0 {
        Some(Form::RhsAlongK)
    } else if m >= 2 && a.row_stride == 0 {
        Some(Form::LhsRows)
    } else if n >= 2 && b.col_stride == 0 {
        Some(Form::RhsCols)
    } else {
        None
    }
}

/// True when [`product`] computes this product (an operand is a broadcast along an axis of
/// more than one element); the op then reads a transposed `b` in place rather than packing it.
pub(crate) fn has_broadcast_operand(m: usize, n: usize, k: usize, a: &MatRef<'_>, b: &MatRef<'_>) -> bool {
    form(m, n, k, a, b).is_some()
}

/// `c = alpha · a · b` into the packed `m × n` block `c` when an operand is a broadcast (see
/// the module doc); false, with `c` untouched, when none is. The caller has checked the
/// operands' bounds.
pub(super) fn product(m: usize, n: usize, k: usize, a: MatRef<'_>, b: MatRef<'_>, c: &mut [f32], alpha: f32) -> bool {
    let Some(form) = form(m, n, k, &a, &b) else {
        return false;
    };
    let c = &mut c[..m * n];
    match form {
        Form::LhsAlongK => {
            // Row 0 of `c` takes the column sums of `b`, then scales into every row.
            column_sums((k, n), b, &mut c[..n], alpha);
            let (sums, rest) = c.split_at_mut(n);
            vectorized(
                #[inline(always)]
                || {
                    for (i, row) in rest.chunks_exact_mut(n).enumerate() {
                        let ai = a.at(i + 1, 0);
                        row.iter_mut().zip(&*sums).for_each(|(y, s)| *y = ai * s);
                    }
                    let a0 = a.at(0, 0);
                    sums.iter_mut().for_each(|s| *s *= a0);
                },
            );
        }
        Form::RhsAlongK => {
            // The first `m` floats take `a`'s row sums (an `m × 1` output), then each row is
            // written from the last: row `i` starts at `i · n ≥ i`, past every sum still needed.
            let at = MatRef { row_stride: a.col_stride, col_stride: a.row_stride, ..a };
            column_sums((k, m), at, &mut c[..m], alpha);
            vectorized(
                #[inline(always)]
                || {
                    for i in (0..m).rev() {
                        let (ri, row) = (c[i], i * n..(i + 1) * n);
                        match b.col_stride {
                            0 => c[row].fill(ri * b.at(0, 0)),
                            1 => c[row].iter_mut().zip(&b.data[b.offset..b.offset + n]).for_each(|(y, x)| *y = ri * x),
                            _ => c[row].iter_mut().enumerate().for_each(|(j, y)| *y = ri * b.at(0, j)),
                        }
                    }
                },
            );
        }
        Form::LhsRows => {
            crate_gemm((1, n, k), (a, b), (&mut c[..n], n), false, alpha, 1);
            let (first, rest) = c.split_at_mut(n);
            rest.chunks_exact_mut(n).for_each(|row| row.copy_from_slice(first));
        }
        Form::RhsCols => {
            crate_gemm((m, 1, k), (a, b), (&mut c[..m], 1), false, alpha, 1);
            vectorized(
                #[inline(always)]
                || {
                    for i in (0..m).rev() {
                        let ui = c[i];
                        c[i * n..(i + 1) * n].fill(ui);
                    }
                },
            );
        }
    }
    true
}

/// `sums[j] = alpha · Σ_p b[p, j]` for a `k × n` `b`: a row of [`ONES`] times `b`, in chunks
/// of at most `ONES.len()` terms (the first sets the sums, the others add to them). A row sum
/// of `a` is a column sum of `aᵀ`: the crate transposes either call to the same
/// matrix–vector product.
fn column_sums((k, n): (usize, usize), b: MatRef<'_>, sums: &mut [f32], alpha: f32) {
    let ones = MatRef { data: &ONES, offset: 0, row_stride: 0, col_stride: 1 };
    let mut p = 0;
    while p < k {
        let kc = (k - p).min(ONES.len());
        crate_gemm((1, n, kc), (ones, b.skip_rows(p)), (sums, n), p > 0, alpha, 1);
        p += kc;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `alpha · a · b` in f64, reading both operands through their strides.
    fn naive(m: usize, n: usize, k: usize, a: &MatRef<'_>, b: &MatRef<'_>, alpha: f32) -> Vec<f64> {
        let mut c = vec![0.0; m * n];
        for i in 0..m {
            for j in 0..n {
                c[i * n + j] =
                    f64::from(alpha) * (0..k).map(|p| f64::from(a.at(i, p)) * f64::from(b.at(p, j))).sum::<f64>();
            }
        }
        c
    }

    fn values(len: usize, salt: usize) -> Vec<f32> {
        (0..len).map(|i| ((i * 7 + salt) % 23) as f32 / 11.0 - 1.0).collect()
    }

    /// Every form, on odd sizes, with offsets, each dense operand stored both ways and `alpha`,
    /// against f64 and against the crate reading the same views.
    #[test]
    fn each_broadcast_form_matches_the_full_product() {
        let data_a = values(70_000, 1);
        let data_b = values(70_000, 2);
        // 4,500 terms: a sum over `k` in three chunks of `ONES`.
        for &(m, n, k) in &[(2, 2, 2), (17, 33, 9), (64, 256, 256), (5, 1, 40), (1, 7, 300), (3, 5, 4500)] {
            // aᵀ stored with b row-major, then a row-major with bᵀ stored: each sum over `k`
            // is read both along and across its operand's storage.
            for transposed in [false, true] {
                let ((ars, acs), (brs, bcs)) = if transposed { ((k, 1), (1, k)) } else { ((1, m), (n, 1)) };
                let dense_a = MatRef { data: &data_a, offset: 3, row_stride: ars as isize, col_stride: acs as isize };
                let dense_b = MatRef { data: &data_b, offset: 5, row_stride: brs as isize, col_stride: bcs as isize };
                let cases = [
                    ("a constant along k", MatRef { col_stride: 0, row_stride: 1, ..dense_a }, dense_b),
                    ("a one element", MatRef { col_stride: 0, row_stride: 0, ..dense_a }, dense_b),
                    ("b constant along k", dense_a, MatRef { row_stride: 0, ..dense_b }),
                    ("b one element", dense_a, MatRef { row_stride: 0, col_stride: 0, ..dense_b }),
                    ("a's rows equal", MatRef { row_stride: 0, col_stride: 1, ..dense_a }, dense_b),
                    ("b's columns equal", dense_a, MatRef { col_stride: 0, row_stride: 1, ..dense_b }),
                ];
                for (what, a, b) in cases {
                    let want = naive(m, n, k, &a, &b, 0.5);
                    let mut c = vec![f32::NAN; m * n];
                    let took = product(m, n, k, a, b, &mut c, 0.5);
                    assert_eq!(took, form(m, n, k, &a, &b).is_some(), "{what} {m}x{n}x{k}");
                    if !took {
                        continue; // a broadcast along an axis of one element: the crate's product
                    }
                    let mut full = vec![0.0; m * n];
                    crate_gemm((m, n, k), (a, b), (&mut full, n), false, 0.5, 1);
                    for i in 0..m * n {
                        let tol = 1e-5 * (1.0 + want[i].abs()) * (k as f64).sqrt();
                        assert!(
                            (f64::from(c[i]) - want[i]).abs() <= tol,
                            "{what} {m}x{n}x{k} [{i}]: {} vs {}",
                            c[i],
                            want[i]
                        );
                        assert!(f64::from((c[i] - full[i]).abs()) <= tol, "{what} {m}x{n}x{k} [{i}] against the crate");
                    }
                }
            }
        }
    }

    #[test]
    fn dense_operands_and_broadcasts_over_one_element_take_the_crate() {
        let d = values(64, 3);
        let dense = MatRef { data: &d, offset: 0, row_stride: 8, col_stride: 1 };
        assert!(!has_broadcast_operand(8, 8, 8, &dense, &dense));
        // A stride of 0 along an axis of size 1 repeats nothing.
        let col = MatRef { data: &d, offset: 0, row_stride: 1, col_stride: 0 };
        assert!(!has_broadcast_operand(8, 8, 1, &col, &MatRef { row_stride: 0, ..dense }));
        assert!(!has_broadcast_operand(1, 8, 8, &MatRef { row_stride: 0, ..dense }, &dense));
        assert!(!has_broadcast_operand(0, 8, 8, &col, &dense), "an empty product");
        let mut c = [7.0f32; 64];
        assert!(!product(8, 8, 8, dense, dense, &mut c, 1.0));
        assert_eq!(c, [7.0; 64], "an untaken product leaves c alone");
    }
}
