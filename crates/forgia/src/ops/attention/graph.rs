//! The attention backward of a `create_graph` pass: the probabilities recomputed and the
//! gradients formed with differentiable ops (batched products, [`Tensor::softmax_blocked`],
//! elementwise ops), so a gradient through attention can itself be differentiated
//! (Hessian-vector products, gradient penalties). The fused kernel keeps every ordinary pass.

use super::{AttnBackward, OP};
use crate::autograd::Tensor;
use crate::autograd::{empty_slots, Grads, VjpCtx};
use crate::error::Result;
use crate::kernels::dropout;

/// `-inf` above the diagonal (`j > i`), 0 elsewhere: the causal mask as a constant `[Sq, Sk]`.
fn causal_bias(sq: usize, sk: usize) -> Result<Tensor> {
    let mut data = crate::tensor::buffer(OP, sq * sk)?;
    for (e, v) in data.iter_mut().enumerate() {
        *v = if e % sk.max(1) > e / sk.max(1) { f32::NEG_INFINITY } else { 0.0 };
    }
    Ok(Tensor::from_parts(data, &[sq, sk]))
}

/// The dropout factors `M` (`1/(1-p)` or 0) of every probability, as a constant
/// `[B, Hq, Sq, Sk]`: the same function of (seed, index) as the fused kernel's.
fn dropout_factors(r: &AttnBackward, full: &[usize; 4]) -> Result<Option<Tensor>> {
    let Some(d) = r.geom.dropout else { return Ok(None) };
    let mut m = crate::tensor::zeroed(OP, full.iter().product())?;
    dropout::apply(None, d.seed, d.p, d.scale, &mut m);
    Ok(Some(Tensor::from_parts(m, full)))
}

/// The VJP with differentiable ops. With `G = Hq / Hkv` query heads per key/value head, the
/// products run on the grouped views `[B, Hkv, G·Sq, ·]` of the query-side tensors, so `dK`
/// and `dV` come out summed over each group:
/// `S = scale·q kᵀ + mask (+ causal)`, `P = softmax([S, sink])[.., :Sk]`, `Pd = P ⊙ M`,
/// `dV = Pdᵀ dO`, `dP = (dO Vᵀ) ⊙ M`, `δ = rowsum(P ⊙ dP)`, `dS = P ⊙ (dP - δ)`,
/// `dQ = scale·dS K`, `dK = scale·dSᵀ Q`, `dmask = dS`, `dsink = -Σ P_sink ⊙ δ`; into `out`,
/// one slot per operand.
pub(super) fn vjp(r: &AttnBackward, cx: &VjpCtx<'_>, gy: &Tensor, out: &mut Grads) -> Result<()> {
    let g = &r.geom;
    let (q, k, v) = (cx.input(0, &r.q), cx.input(1, &r.k), cx.input(2, &r.v));
    let (b, hq, hkv) = (q.shape()[0], q.shape()[1], k.shape()[1]);
    let (sq, sk, d, dv) = (g.sq, g.sk, g.d, g.dv);
    let full = [b, hq, sq, sk];
    let grouped = |t: &Tensor, w: usize| t.reshape(&[b, hkv, g.rep * sq, w]);
    let ungrouped = |t: &Tensor, w: usize| t.reshape(&[b, hq, sq, w]);
    let qg = grouped(&q, d)?;
    let mut s = ungrouped(&qg.matmul(&k.transpose(2, 3)?)?.scale(g.scale), sk)?;
    if let (Some(i), Some(m)) = (r.mask_idx, &r.mask) {
        s = s.add(&cx.input(i, m))?;
    }
    if g.causal {
        s = s.add(&causal_bias(sq, sk)?)?;
    }
    let (p, p_sink) = match (r.sink_idx, &r.sinks) {
        (Some(i), Some((saved, _))) => {
            let col = cx.input(i, saved).reshape(&[1, hq, 1, 1])?.broadcast_to(&[b, hq, sq, 1])?;
            let pe = Tensor::concat(&[&s, &col], 3)?.softmax_blocked(3)?;
            (pe.narrow(3, 0, sk)?, Some(pe.narrow(3, sk, 1)?))
        }
        _ => (s.softmax_blocked(3)?, None),
    };
    let m = dropout_factors(r, &full)?;
    let pd = match &m {
        Some(m) => p.mul(m)?,
        None => p.clone(),
    };
    let dog = grouped(gy, dv)?;
    let dpd = ungrouped(&dog.matmul(&v.transpose(2, 3)?)?, sk)?;
    let dp = match &m {
        Some(m) => dpd.mul(m)?,
        None => dpd,
    };
    let delta = p.mul(&dp)?.sum(3, true)?;
    let ds = p.mul(&dp.sub(&delta)?)?;
    let dsg = grouped(&ds, sk)?;
    empty_slots(out, 3 + r.mask.is_some() as usize + r.sinks.is_some() as usize);
    if cx.needs_grad(0) {
        out[0] = Some(ungrouped(&dsg.matmul(&k)?.scale(g.scale), d)?);
    }
    if cx.needs_grad(1) {
        out[1] = Some(dsg.transpose(2, 3)?.matmul(&qg)?.scale(g.scale));
    }
    if cx.needs_grad(2) {
        out[2] = Some(grouped(&pd, sk)?.transpose(2, 3)?.matmul(&dog)?);
    }
    if let Some(i) = r.mask_idx.filter(|&i| cx.needs_grad(i)) {
        out[i] = Some(ds);
    }
    if let (Some(i), Some(ps)) = (r.sink_idx, p_sink) {
        if cx.needs_grad(i) {
            out[i] = Some(ps.mul(&delta)?.sum([0, 2, 3], false)?.neg());
        }
    }
    Ok(())
}
