//! Fused scaled-dot-product attention over `[B, H, S, D]` blocks: scores by a product, an
//! in-place row softmax that keeps only each row's log-sum-exp, and a backward that recomputes
//! the probabilities from it instead of storing the `S × S` matrix.
//!
//! Operands are addressed per `(b, h)` block with row strides ([`Heads`]), so the head-split
//! views `x.reshape(B, S, H, dh).transpose(1, 2)` are read in place; results are written
//! through [`Out`], either packed per block or heads-interleaved (`[B, S, H, W]` storage).
//! Causal blocks skip the masked upper triangle. The products go through the register tiles
//! of [`tile`] on CPUs with FMA and moderate heads, else through the `gemm` crate.
//!
//! Results go into buffers the caller allocated, and so does the per-thread scratch for the
//! score tiles ([`AttnScratch`], sized by [`AttnGeom::parts`] and [`AttnGeom::scratch_len`]).

pub(crate) mod ext;
mod tile;
mod wide;

use self::tile::{matmul, Dest, Products, Tri};
use super::fastmath;
use super::gemm::MatRef;
use super::lanes::{row_dot, row_max};
use super::simd;
use super::split_len;
use crate::parallel;

/// Sizes of one attention call.
#[derive(Clone, Copy, Debug)]
pub(crate) struct AttnGeom {
    /// Batch × heads.
    pub(crate) bh: usize,
    /// Heads (divides `bh`).
    pub(crate) heads: usize,
    /// Query and key lengths, query/key width, value width.
    pub(crate) sq: usize,
    pub(crate) sk: usize,
    pub(crate) d: usize,
    pub(crate) dv: usize,
    pub(crate) scale: f32,
    pub(crate) causal: bool,
    /// Query heads per key/value head (grouped-query attention; 1 for plain multi-head).
    pub(crate) rep: usize,
    /// Dropout on the probabilities, when training with it.
    pub(crate) dropout: Option<AttnDropout>,
}

/// Dropout on the attention probabilities: element `(i, r, j)` of the `[BH, Sq, Sk]`
/// probabilities (flat index `(i·Sq + r)·Sk + j`) is kept iff
/// [`super::dropout::keep`]`(seed, index, p)`, and scaled by `scale = 1/(1-p)` (0 when
/// `p == 1`). Nothing is stored: the backward regenerates the same mask.
#[derive(Clone, Copy, Debug)]
pub(crate) struct AttnDropout {
    pub(crate) seed: u64,
    pub(crate) p: f32,
    pub(crate) scale: f32,
}

impl AttnDropout {
    /// The mask factor (`scale` or 0) of probability `(i, r, j)`.
    #[inline(always)]
    fn factor(&self, g: &AttnGeom, i: usize, r: usize, j: usize) -> f32 {
        let index = ((i * g.sq + r) * g.sk + j) as u64;
        if super::dropout::keep(self.seed, index, self.p) {
            self.scale
        } else {
            0.0
        }
    }
}

impl AttnGeom {
    /// Scratch floats of one chunk: two `Sq × Sk` tiles and one transposed `Sk × max(D, Dv)`
    /// operand (saturating, so an impossible size fails the caller's allocation).
    fn chunk_scratch(&self) -> usize {
        let tile = self.sq.saturating_mul(self.sk);
        tile.saturating_mul(2).saturating_add(self.sk.saturating_mul(self.d.max(self.dv)))
    }
    /// The workers a call runs its chunks (of `group` blocks each) on in parallel, each with
    /// its own scratch: one per worker thread when there are several chunks, else 1.
    pub(crate) fn parts(&self, group: usize) -> usize {
        let chunks = self.bh / group.max(1);
        if chunks > 1 {
            parallel::kernel_threads().min(chunks).max(1)
        } else {
            1
        }
    }
    /// Floats of scratch for `parts` workers.
    pub(crate) fn scratch_len(&self, parts: usize) -> usize {
        parts.saturating_mul(self.chunk_scratch())
    }
}

/// The scratch of one attention call: `parts` workers for its chunks and a buffer of
/// [`AttnGeom::scratch_len`] floats (any values) for them, allocated by the op.
pub(crate) struct AttnScratch<'a> {
    pub(crate) parts: usize,
    pub(crate) buf: &'a mut [f32],
}

/// A `[B, H, S, W]` operand: block `(b, h)` starts at `offset + b·batch + h·head`, its rows are
/// `row` apart and each row's `W` elements are contiguous.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Heads<'a> {
    pub(crate) data: &'a [f32],
    pub(crate) offset: usize,
    pub(crate) batch: usize,
    pub(crate) head: usize,
    pub(crate) row: usize,
}

impl Heads<'_> {
    /// Storage offset of block `i = b·heads + h`.
    fn block(&self, i: usize, heads: usize) -> usize {
        self.offset + (i / heads) * self.batch + (i % heads) * self.head
    }

    /// Storage offset of the key/value block that query block `i = b·heads + h` reads: head
    /// `h / rep` of batch `b` (the key/value operand has `heads / rep` heads).
    fn kv_block(&self, i: usize, heads: usize, rep: usize) -> usize {
        self.offset + (i / heads) * self.batch + (i % heads) / rep.max(1) * self.head
    }
}

/// Where a result's blocks go inside one parallel chunk of `group` blocks: block `g` of the
/// chunk starts at `g·head`, its rows are `row` apart. Packed `[B, H, S, W]` is
/// `{ head: S·W, row: W }`; heads-interleaved `[B, S, H, W]` (with `group = H`) is
/// `{ head: W, row: H·W }`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Out {
    pub(crate) head: usize,
    pub(crate) row: usize,
}

/// An additive mask: per `(b, h)` block, the storage offset, and its row and column strides.
#[derive(Clone, Copy)]
pub(crate) struct MaskRef<'a> {
    pub(crate) data: &'a [f32],
    /// Storage offset of block `i` is `offsets[i]`.
    pub(crate) offsets: &'a [usize],
    pub(crate) row_stride: isize,
    pub(crate) col_stride: isize,
}

/// The products' kernel for these sizes: the register tiles unless the CPU lacks FMA or a
/// head is so large that the `gemm` crate's blocking wins (measured: tiles are ahead at
/// `S = 128, D = 64`).
fn products(g: &AttnGeom) -> Products {
    let big = g.sq.max(g.sk) > 512 || g.d.max(g.dv) > 256;
    if simd::has_fma() && !big {
        Products::Tiles
    } else {
        Products::Gemm
    }
}

/// Keys query row `i` may see: all of them, or `j <= i` when causal.
#[inline(always)]
fn visible(g: &AttnGeom, i: usize) -> usize {
    if g.causal {
        (i + 1).min(g.sk)
    } else {
        g.sk
    }
}

/// `e^x`, exactly 0 at `-inf` (a blocked position).
#[inline(always)]
fn exp0(x: f32) -> f32 {
    if x == f32::NEG_INFINITY {
        0.0
    } else {
        fastmath::exp(x)
    }
}

/// `t[c·S + j] = x[j, c]`: a block's `S × W` rows transposed into packed `W × S`, by 8 × 8
/// squares (whole rows in, whole rows out) with a scalar rim.
#[inline(always)]
fn transpose_into(x: &Heads<'_>, base: usize, (s, w): (usize, usize), t: &mut [f32]) {
    const B: usize = 8;
    if w == 0 {
        return; // nothing to move (and an empty operand may have no storage to slice)
    }
    let (s8, w8) = (s / B * B, w / B * B);
    for j0 in (0..s8).step_by(B) {
        for c0 in (0..w8).step_by(B) {
            let sq: [&[f32; B]; B] =
                std::array::from_fn(|jj| x.data[base + (j0 + jj) * x.row + c0..][..B].try_into().expect("B"));
            for cc in 0..B {
                let out: &mut [f32; B] = (&mut t[(c0 + cc) * s + j0..][..B]).try_into().expect("B");
                for jj in 0..B {
                    out[jj] = sq[jj][cc];
                }
            }
        }
    }
    for j in 0..s {
        let row = &x.data[base + j * x.row..][..w];
        let first = if j < s8 { w8 } else { 0 };
        for c in first..w {
            t[c * s + j] = row[c];
        }
    }
}

/// Scores of block `i` into `s` (`Sq × Sk`): `scale · q kᵀ + mask` on each row's visible keys
/// (later columns are left as they are). `kt` is scratch for the transposed keys.
#[inline(always)]
fn scores(
    g: &AttnGeom,
    how: Products,
    i: usize,
    (q, k): (&Heads<'_>, &Heads<'_>),
    mask: Option<MaskRef<'_>>,
    kt: &mut [f32],
    s: &mut [f32],
) {
    transpose_into(k, k.kv_block(i, g.heads, g.rep), (g.sk, g.d), kt);
    let a = MatRef { data: q.data, offset: q.block(i, g.heads), row_stride: q.row as isize, col_stride: 1 };
    let tri = if g.causal { Tri::Cols } else { Tri::Full };
    let dest = Dest { data: s, off: 0, ld: g.sk, add: false };
    matmul(how, (g.sq, g.sk, g.d), a, (kt, 0, g.sk), dest, g.scale, tri);
    if let Some(m) = mask {
        add_mask(g, &m, i, s);
    }
}

/// `s[r, j] += mask[r, j]` on each row's visible keys. Rows of a mask with unit column stride
/// (a key-padding mask `[B, 1, 1, Sk]`, a full `[.., Sq, Sk]` bias) are added as slices, so the
/// loop vectorizes; other strides go element by element.
#[inline(always)]
fn add_mask(g: &AttnGeom, m: &MaskRef<'_>, i: usize, s: &mut [f32]) {
    let base = m.offsets[i] as isize;
    for r in 0..g.sq {
        let n = visible(g, r);
        if n == 0 {
            continue;
        }
        let row = &mut s[r * g.sk..][..n];
        let start = base + r as isize * m.row_stride;
        if m.col_stride == 1 || n <= 1 {
            let src = &m.data[start as usize..][..n];
            for (e, &b) in row.iter_mut().zip(src) {
                *e += b;
            }
        } else {
            for (j, e) in row.iter_mut().enumerate() {
                *e += m.data[(start + j as isize * m.col_stride) as usize];
            }
        }
    }
}

/// Softmax of one score row over its first `n` entries, in place, zeros after them; returns
/// its log-sum-exp (`+inf`, and an all-zero row, when every entry is `-inf`; NaN, and a NaN
/// row, when the row holds NaN: a NaN score is never taken for a masked one).
#[inline(always)]
fn softmax_row(row: &mut [f32], n: usize) -> f32 {
    let (live, dead) = row.split_at_mut(n);
    dead.fill(0.0);
    let m = row_max(live);
    if m == f32::NEG_INFINITY {
        // `row_max` skips NaN, so an all-NaN row reaches here too: it stays NaN.
        let nan = live.iter().any(|v| v.is_nan());
        live.fill(if nan { f32::NAN } else { 0.0 });
        return if nan { f32::NAN } else { f32::INFINITY };
    }
    for e in live.iter_mut() {
        *e = exp0(*e - m);
    }
    let sum = row_dot(live, None);
    let inv = 1.0 / sum;
    for e in live.iter_mut() {
        *e *= inv;
    }
    m + sum.ln()
}

/// `buf` cut into `n` equal chunks (empty ones when `buf` is empty).
fn split(buf: &mut [f32], n: usize) -> Vec<&mut [f32]> {
    split_len(buf, n, buf.len() / n.max(1))
}

/// Runs `f(chunk, item, scratch)` for every chunk of `group` blocks: `scratch.parts` workers
/// at once, each with its own `2·Sq·Sk + Sk·max(D, Dv)` floats, taking the chunks one at a time
/// ([`super::for_each_with_scratch`]).
fn chunks<T: Send>(
    g: &AttnGeom,
    items: &mut [T],
    scratch: AttnScratch<'_>,
    f: impl Fn(usize, &mut T, &mut [f32]) + Sync,
) {
    let mut bufs = split_len(scratch.buf, scratch.parts.max(1), g.chunk_scratch());
    super::for_each_with_scratch(items, &mut bufs, f);
}

/// Forward into `y` (`group` blocks per chunk laid out by `out`, `B·H·Sq·Dv` floats) and
/// `lse`, each row's log-sum-exp `[BH, Sq]` (`+inf` for a row that is masked out entirely;
/// its output is zero). Every element of both is written.
pub(crate) fn forward(
    g: &AttnGeom,
    qkv: (Heads<'_>, Heads<'_>, Heads<'_>),
    mask: Option<MaskRef<'_>>,
    out: (usize, Out),
    (y, lse): (&mut [f32], &mut [f32]),
    scratch: AttnScratch<'_>,
) {
    forward_by(products(g), g, qkv, mask, out, (y, lse), scratch)
}

/// [`forward`] with the products' kernel chosen by the caller.
fn forward_by(
    how: Products,
    g: &AttnGeom,
    (q, k, v): (Heads<'_>, Heads<'_>, Heads<'_>),
    mask: Option<MaskRef<'_>>,
    (group, out): (usize, Out),
    (y, lse): (&mut [f32], &mut [f32]),
    scratch: AttnScratch<'_>,
) {
    if g.bh == 0 || g.sq == 0 {
        return;
    }
    let n = g.bh / group;
    let mut items: Vec<(&mut [f32], &mut [f32])> = split(y, n).into_iter().zip(split(lse, n)).collect();
    chunks(g, &mut items, scratch, |c, (y, l), scratch| {
        simd::vectorized(
            #[inline(always)]
            || {
                let (s, rest) = scratch.split_at_mut(g.sq * g.sk);
                let kt = &mut rest[g.sq * g.sk..];
                for h in 0..group {
                    let i = c * group + h;
                    scores(g, how, i, (&q, &k), mask, kt, s);
                    for (r, l) in l[h * g.sq..][..g.sq].iter_mut().enumerate() {
                        let row = &mut s[r * g.sk..][..g.sk];
                        *l = softmax_row(row, visible(g, r));
                        if let Some(drop) = &g.dropout {
                            for (j, e) in row[..visible(g, r)].iter_mut().enumerate() {
                                *e *= drop.factor(g, i, r, j);
                            }
                        }
                    }
                    let p = MatRef { data: s, offset: 0, row_stride: g.sk as isize, col_stride: 1 };
                    let tri = if g.causal { Tri::Lower } else { Tri::Full };
                    let dest = Dest { data: y, off: h * out.head, ld: out.row, add: false };
                    let vb = v.kv_block(i, g.heads, g.rep);
                    matmul(how, (g.sq, g.dv, g.sk), p, (v.data, vb, v.row), dest, 1.0, tri);
                }
            },
        )
    });
}

/// Gradients of one attention call, each laid out like the forward output (`group` blocks
/// per chunk, placed by `layouts[0..3]` for `dq`, `dk`, `dv`). With grouped heads (`rep > 1`)
/// `group` is a multiple of `rep`, and `dk`, `dv` hold the `group / rep` key/value heads of
/// each chunk, each the sum over its query heads. `ds` (the gradient of the
/// pre-softmax scores, for a mask that needs one) is filled when given, as packed
/// `[BH, Sq, Sk]`.
pub(crate) struct AttnGrads<'a> {
    pub(crate) dq: &'a mut [f32],
    pub(crate) dk: &'a mut [f32],
    pub(crate) dv: &'a mut [f32],
    pub(crate) ds: Option<&'a mut [f32]>,
    pub(crate) group: usize,
    pub(crate) layouts: [Out; 3],
}

/// Backward from the saved log-sum-exp: `P = exp(s - lse)`, `dV = Pᵀ dO`, `dP = dO Vᵀ`,
/// `dS = P ⊙ (dP - rowsum(dO ⊙ O))`, `dQ = scale · dS K`, `dK = scale · dSᵀ Q`. Every
/// element of the gradients is written.
pub(crate) fn backward(
    g: &AttnGeom,
    qkv: (Heads<'_>, Heads<'_>, Heads<'_>),
    saved: (Heads<'_>, &[f32], Heads<'_>),
    mask: Option<MaskRef<'_>>,
    grads: AttnGrads<'_>,
    scratch: AttnScratch<'_>,
) {
    backward_by(products(g), g, qkv, saved, mask, grads, scratch)
}

/// [`backward`] with the products' kernel chosen by the caller.
fn backward_by(
    how: Products,
    g: &AttnGeom,
    (q, k, v): (Heads<'_>, Heads<'_>, Heads<'_>),
    (o, lse, go): (Heads<'_>, &[f32], Heads<'_>),
    mask: Option<MaskRef<'_>>,
    grads: AttnGrads<'_>,
    scratch: AttnScratch<'_>,
) {
    let (sq, sk, group) = (g.sq, g.sk, grads.group);
    if g.bh == 0 {
        return;
    }
    if sq == 0 {
        // No query sees a key: dk and dv are sums over nothing.
        grads.dk.fill(0.0);
        grads.dv.fill(0.0);
        return;
    }
    let n = g.bh / group;
    let ds_chunks: Vec<Option<&mut [f32]>> = match grads.ds {
        Some(ds) => split(ds, n).into_iter().map(Some).collect(),
        None => (0..n).map(|_| None).collect(),
    };
    let mut items: Vec<_> =
        split(grads.dq, n).into_iter().zip(split(grads.dk, n)).zip(split(grads.dv, n)).zip(ds_chunks).collect();
    let [lq, lk, lv] = grads.layouts;
    chunks(g, &mut items, scratch, |c, (((dq, dk), dv), ds_out), scratch| {
        simd::vectorized(
            #[inline(always)]
            || {
                let (p, rest) = scratch.split_at_mut(sq * sk);
                let (dp, t) = rest.split_at_mut(sq * sk);
                for h in 0..group {
                    let i = c * group + h;
                    // The chunk's key/value head this query head reads; with grouped heads
                    // the first of its group writes the key/value gradients, the rest add.
                    let (kvh, add) = (h / g.rep.max(1), h % g.rep.max(1) != 0);
                    scores(g, how, i, (&q, &k), mask, t, p);
                    for r in 0..sq {
                        let l = lse[i * sq + r];
                        let (live, dead) = p[r * sk..][..sk].split_at_mut(visible(g, r));
                        for e in live.iter_mut() {
                            *e = exp0(*e - l);
                        }
                        dead.fill(0.0);
                    }
                    let (ob, gob) = (o.block(i, g.heads), go.block(i, g.heads));
                    let upper = if g.causal { Tri::Upper } else { Tri::Full };
                    transpose_into(&v, v.kv_block(i, g.heads, g.rep), (sk, g.dv), t);
                    let gor = MatRef { data: go.data, offset: gob, row_stride: go.row as isize, col_stride: 1 };
                    let cols = if g.causal { Tri::Cols } else { Tri::Full };
                    let dest = Dest { data: dp, off: 0, ld: sk, add: false };
                    matmul(how, (sq, sk, g.dv), gor, (t, 0, sk), dest, 1.0, cols);
                    for r in 0..sq {
                        let delta = if g.dv == 0 {
                            0.0
                        } else {
                            let gr = &go.data[gob + r * go.row..][..g.dv];
                            row_dot(gr, Some(&o.data[ob + r * o.row..][..g.dv]))
                        };
                        let n = visible(g, r);
                        let (pr, dr) = (&mut p[r * sk..][..n], &mut dp[r * sk..][..sk]);
                        match &g.dropout {
                            // dP = (dO Vᵀ) ⊙ M, and P becomes P ⊙ M for dV below.
                            Some(drop) => {
                                for (j, (d, pe)) in dr[..n].iter_mut().zip(pr.iter_mut()).enumerate() {
                                    let m = drop.factor(g, i, r, j);
                                    *d = *pe * (*d * m - delta);
                                    *pe *= m;
                                }
                            }
                            None => {
                                for (d, &pe) in dr[..n].iter_mut().zip(pr.iter()) {
                                    *d = pe * (*d - delta);
                                }
                            }
                        }
                        dr[n..].fill(0.0);
                    }
                    let pt = MatRef { data: p, offset: 0, row_stride: 1, col_stride: sk as isize };
                    let dest = Dest { data: dv, off: kvh * lv.head, ld: lv.row, add };
                    matmul(how, (sk, g.dv, sq), pt, (go.data, gob, go.row), dest, 1.0, upper);
                    if let Some(ds) = ds_out.as_deref_mut() {
                        ds[h * sq * sk..][..sq * sk].copy_from_slice(dp);
                    }
                    let lower = if g.causal { Tri::Lower } else { Tri::Full };
                    let dsr = MatRef { data: dp, offset: 0, row_stride: sk as isize, col_stride: 1 };
                    let dest = Dest { data: dq, off: h * lq.head, ld: lq.row, add: false };
                    matmul(
                        how,
                        (sq, g.d, sk),
                        dsr,
                        (k.data, k.kv_block(i, g.heads, g.rep), k.row),
                        dest,
                        g.scale,
                        lower,
                    );
                    let dst = MatRef { data: dp, offset: 0, row_stride: 1, col_stride: sk as isize };
                    let dest = Dest { data: dk, off: kvh * lk.head, ld: lk.row, add };
                    matmul(how, (sk, g.d, sq), dst, (q.data, q.block(i, g.heads), q.row), dest, g.scale, upper);
                }
            },
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(n: usize, seed: usize) -> Vec<f32> {
        (0..n).map(|i| ((i * 7 + seed * 13) % 23) as f32 * 0.1 - 1.1).collect()
    }

    /// `[B, S, H, W]` storage seen as `[B, H, S, W]`.
    fn interleaved(data: &[f32], (s, h, w): (usize, usize, usize)) -> Heads<'_> {
        Heads { data, offset: 0, batch: s * h * w, head: w, row: h * w }
    }

    fn close(a: &[f32], b: &[f32], what: &str) {
        for (i, (x, y)) in a.iter().zip(b).enumerate() {
            assert!((x - y).abs() <= 1e-5 * (1.0 + y.abs()), "{what}[{i}]: {x} vs {y}");
        }
    }

    #[test]
    fn tiles_and_gemm_agree_on_interleaved_and_packed_layouts() {
        if !simd::has_fma() {
            return; // the tiles need FMA to be worth running (and `products` never picks them)
        }
        // The second size reaches the intrinsic tiles' two- and one-vector blocks and their
        // row tails.
        for (b, h, sq, sk, d, dv) in [(2, 3, 9, 11, 6, 5), (1, 3, 45, 53, 37, 19)] {
            tiles_and_gemm_agree_at(b, h, (sq, sk), (d, dv));
        }
    }

    fn tiles_and_gemm_agree_at(b: usize, h: usize, (sq, sk): (usize, usize), (d, dv): (usize, usize)) {
        // rep 3: grouped-query attention with one key/value head (its gradients accumulate);
        // interleaved key/value gradients for rep 1, packed ones for rep 3.
        for (causal, rep) in [(false, 1), (true, 1), (false, 3), (true, 3)] {
            let hk = h / rep;
            let g = AttnGeom { bh: b * h, heads: h, sq, sk, d, dv, scale: 0.4, causal, rep, dropout: None };
            let (qd, kd, vd) = (data(b * sq * h * d, 1), data(b * sk * hk * d, 2), data(b * sk * hk * dv, 3));
            let qkv = (interleaved(&qd, (sq, h, d)), interleaved(&kd, (sk, hk, d)), interleaved(&vd, (sk, hk, dv)));
            let out = (h, Out { head: dv, row: h * dv });
            let parts = g.parts(h);
            let mut scratch = vec![0.0; g.scratch_len(parts)];
            let fwd = |how, scratch: &mut [f32]| {
                let (mut y, mut l) = (vec![0.0; b * h * sq * dv], vec![0.0; b * h * sq]);
                forward_by(how, &g, qkv, None, out, (&mut y, &mut l), AttnScratch { parts, buf: scratch });
                (y, l)
            };
            let (y1, l1) = fwd(Products::Tiles, &mut scratch);
            let (y2, l2) = fwd(Products::Gemm, &mut scratch);
            close(&y1, &y2, "output");
            close(&l1, &l2, "lse");
            // The intrinsic tiles (AVX-512 or AVX2, where the CPU has them) and the 8-lane ones agree
            // bitwise.
            assert_eq!((&y1, &l1), (&fwd(Products::Tiles8, &mut scratch).0, &fwd(Products::Tiles8, &mut scratch).1));
            let god = data(y1.len(), 4);
            let saved = (interleaved(&y1, (sq, h, dv)), l1.as_slice(), interleaved(&god, (sq, h, dv)));
            let mut run = |how| {
                let (mut dq, mut dk, mut dvv) = (vec![0.0; qd.len()], vec![0.0; kd.len()], vec![0.0; vd.len()]);
                let layouts = if rep == 1 {
                    [Out { head: d, row: h * d }, Out { head: sk * d, row: d }, Out { head: dv, row: h * dv }]
                } else {
                    [Out { head: d, row: h * d }, Out { head: sk * d, row: d }, Out { head: sk * dv, row: dv }]
                };
                let grads = AttnGrads { dq: &mut dq, dk: &mut dk, dv: &mut dvv, ds: None, group: h, layouts };
                backward_by(how, &g, qkv, saved, None, grads, AttnScratch { parts, buf: &mut scratch });
                [dq, dk, dvv]
            };
            let tiles = run(Products::Tiles);
            for (a, b) in tiles.iter().zip(&run(Products::Gemm)) {
                close(a, b, &format!("gradient, causal {causal}, rep {rep}"));
            }
            assert_eq!(tiles, run(Products::Tiles8), "wide and 8-lane tiles, causal {causal}, rep {rep}");
        }
    }
}
