#!/usr/bin/env python3
"""Golden fixture for issue 15's layers, losses and shape ops, from PyTorch.

Writes crates/forgia/tests/golden/layers_loss.json, read by crates/forgia/tests/layers.rs,
losses.rs and shape_ext.rs (through tests/common/golden.rs). The Rust tests only read the
committed JSON; PyTorch is never needed to run them. Same file format as the JAX goldens
(tools/reference/README.md): float inputs sampled with numpy's default_rng(SEED) and stored as
float32 round-trip decimals, everything computed in float64 with torch, outputs and grads to 8
significant digits; integer inputs and non-differentiated settings (labels, class weights,
±1 targets) live in `attrs`. `grads[i]` is the VJP of input i for the case's cotangent.

Usage:  /work/.venv-torch/bin/python tools/reference/generate_layers_loss.py [--out FILE]
"""
import json
import os

import numpy as np
import torch
import torch.nn.functional as F

from golden_common import GOLDEN, as_f32, enc8, enc_f32, enc_ints, out_arg, write

SEED = 20261201
DEFAULT_OUT = os.path.join(GOLDEN, "layers_loss.json")
RNG = np.random.default_rng(SEED)


def f32(a):
    return torch.tensor(as_f32(a), dtype=torch.float64)


def normal(*shape, scale=1.0):
    return f32(np.round(RNG.standard_normal(shape) * scale, 4))


def uniform(lo, hi, *shape):
    return f32(np.round(RNG.uniform(lo, hi, shape), 4))


CASES = []


def case(name, op, f, inputs, attrs=None, extra=None):
    """Runs f on float64 leaves made from `inputs`; records output and VJPs."""
    leaves = [x.clone().requires_grad_(True) for x in inputs]
    out = f(*leaves)
    cot = normal(*out.shape)
    grads = torch.autograd.grad(out, leaves, cot, allow_unused=True)
    c = {"name": name, "op": op, "attrs": attrs or {}, "inputs": [enc_f32(x) for x in inputs],
         "cotangent": enc_f32(cot), "output": enc8(out),
         "grads": [None if g is None else enc8(g) for g in grads]}
    c.update(extra or {})
    CASES.append(c)


def away(lo, hi, *shape, kinks=(0.0,), gap=0.05):
    """Uniform values at least `gap` away from every kink."""
    x = uniform(lo, hi, *shape)
    for k in kinks:
        near = (x - k).abs() < gap
        x = torch.where(near, x + 2 * gap, x)
    return x


def layers():
    case("elu", "elu", lambda x: F.elu(x, 1.0), [away(-3, 3, 3, 4)], {"alpha": 1.0})
    case("elu_alpha", "elu", lambda x: F.elu(x, 0.5), [away(-3, 3, 3, 4)], {"alpha": 0.5})
    case("selu", "selu", F.selu, [away(-3, 3, 3, 4)])
    case("mish", "mish", F.mish, [uniform(-5, 5, 3, 4)])
    case("hardswish", "hardswish", F.hardswish, [away(-5, 5, 3, 5, kinks=(-3.0, 3.0))])
    case("hardsigmoid", "hardsigmoid", F.hardsigmoid, [away(-5, 5, 3, 5, kinks=(-3.0, 3.0))])
    big = f32([[-40.0, -20.0, -3.0, 0.5, 25.0, 60.0]])
    case("log_sigmoid", "log_sigmoid", F.logsigmoid, [torch.cat([uniform(-4, 4, 2, 6), big])])
    case("log1p", "log1p", torch.log1p, [uniform(-0.9, 3, 3, 4)])
    case("log1p_tiny", "log1p", torch.log1p, [f32([1e-7, -3e-6, 2e-5, 1e-3])])
    case("expm1", "expm1", torch.expm1, [f32(np.concatenate([np.round(RNG.uniform(-3, 3, 8), 4), [1e-7, -2e-6]]))])
    case("prelu_channels", "prelu", F.prelu, [away(-2, 2, 2, 3, 4), uniform(0.05, 0.5, 3)])
    case("prelu_shared", "prelu", F.prelu, [away(-2, 2, 3, 4), f32([0.25])])
    case("glu_last", "glu", lambda x: F.glu(x, -1), [normal(3, 4)], {"dim": -1})
    case("glu_dim0", "glu", lambda x: F.glu(x, 0), [normal(4, 3)], {"dim": 0})

    def halves(x, dim):
        return x.chunk(2, dim)

    case("swiglu_fused", "swiglu", lambda x: halves(x, -1)[0] * F.silu(halves(x, -1)[1]), [normal(2, 3, 6)], {"dim": -1})
    case("geglu_fused", "geglu", lambda x: halves(x, 1)[0] * F.gelu(halves(x, 1)[1]), [normal(3, 4, 2)], {"dim": 1})
    case("glu_with", "glu_with", lambda a, b: a * torch.sigmoid(b), [normal(3, 4), normal(3, 4)])
    case("swiglu_with", "swiglu_with", lambda a, b: a * F.silu(b), [normal(3, 4), normal(3, 4)])
    case("geglu_with", "geglu_with", lambda a, b: a * F.gelu(b), [normal(3, 4), normal(3, 4)])
    for name, axes, corr, keep in [("std_axis", [1], 1, False), ("std_pop_keep", [0, 2], 0, True)]:
        case(name, "std", lambda x: torch.std(x, dim=axes, correction=corr, keepdim=keep), [normal(3, 4, 2)],
             {"axes": axes, "correction": corr, "keepdim": keep})
    for name, p, axes, keep in [("norm_l1", 1.0, [1], False), ("norm_l2", 2.0, [1], True),
                                ("norm_l3", 3.0, [0], False), ("norm_inf", "inf", [1], False),
                                ("norm_l2_axes", 2.0, [0, 2], False)]:
        pv = float("inf") if p == "inf" else p
        x = away(-2, 2, 3, 4, 2) if len(axes) == 2 else away(-2, 2, 3, 4)
        case(name, "norm", lambda x: torch.linalg.vector_norm(x, ord=pv, dim=axes, keepdim=keep), [x],
             {"p": p, "axes": axes, "keepdim": keep})
    zero_row = torch.cat([normal(2, 3), torch.zeros(1, 3)])
    case("norm_l2_zero_row", "norm", lambda x: torch.linalg.vector_norm(x, 2, dim=[1]), [zero_row],
         {"p": 2.0, "axes": [1], "keepdim": False}, {"note": "PyTorch's gradient is 0 on the zero row"})
    case("norm_l1_zero", "norm", lambda x: torch.linalg.vector_norm(x, 1, dim=[1]), [f32([[0.0, 1.5, -2.0], [0.0, 0.0, 0.5]])],
         {"p": 1.0, "axes": [1], "keepdim": False})
    ties = f32([[1.0, -3.0, 3.0, 0.5], [2.0, 0.5, -2.0, 2.0]])
    case("norm_inf_ties", "norm", lambda x: torch.linalg.vector_norm(x, float("inf"), dim=[1]), [ties],
         {"p": "inf", "axes": [1], "keepdim": False}, {"note": "ties share the gradient evenly"})
    case("norm_all_l2", "norm_all", lambda x: torch.linalg.vector_norm(x, 2), [normal(3, 4)], {"p": 2.0})
    case("norm_all_inf", "norm_all", lambda x: torch.linalg.vector_norm(x, float("inf")), [normal(3, 4)], {"p": "inf"})
    case("cosine_similarity", "cosine_similarity", lambda a, b: F.cosine_similarity(a, b, 1, 1e-8),
         [normal(3, 4), normal(3, 4)], {"dim": 1, "eps": 1e-8})
    case("cosine_similarity_broadcast", "cosine_similarity", lambda a, b: F.cosine_similarity(a, b, -1, 1e-8),
         [normal(2, 3, 4), normal(3, 4)], {"dim": -1, "eps": 1e-8})
    tiny = torch.cat([normal(2, 4), f32([[1e-3, -2e-3, 5e-4, 1e-3]])])
    case("cosine_similarity_eps", "cosine_similarity", lambda a, b: F.cosine_similarity(a, b, 1, 0.1),
         [tiny, normal(3, 4)], {"dim": 1, "eps": 0.1}, {"note": "row 2 of x1 has a norm below eps"})
    case("normalize_l2", "normalize", lambda x: F.normalize(x, 2.0, 1, 1e-12), [normal(3, 4)], {"p": 2.0, "dim": 1, "eps": 1e-12})
    case("normalize_l1_dim0", "normalize", lambda x: F.normalize(x, 1.0, 0, 1e-12), [away(-2, 2, 3, 4)], {"p": 1.0, "dim": 0, "eps": 1e-12})
    case("normalize_eps", "normalize", lambda x: F.normalize(x, 2.0, 1, 0.5), [torch.cat([normal(2, 3), f32([[0.1, -0.2, 0.1]])])],
         {"p": 2.0, "dim": 1, "eps": 0.5}, {"note": "row 2 has a norm below eps"})


RED = {"mean": "mean", "sum": "sum", "none": "none"}


def losses():
    n, c = 5, 4
    w = np.round(RNG.uniform(0.2, 2.0, c), 3).astype(np.float32)
    wt = f32(w)
    for name, labels, ign, eps, red in [
        ("ce_weighted_mean", [1, 0, 3, 2, 1], -100, 0.0, "mean"),
        ("ce_weighted_ignore", [1, -100, 3, 2, -100], -100, 0.0, "mean"),
        ("ce_weighted_smooth", [1, 0, 3, 2, 2], 2, 0.2, "mean"),
        ("ce_weighted_sum", [3, 0, 3, 2, 1], -100, 0.1, "sum"),
        ("ce_weighted_none", [0, 1, 2, 3, 0], 1, 0.0, "none"),
    ]:
        lab = torch.tensor(labels)
        case(name, "cross_entropy_weighted",
             lambda x: F.cross_entropy(x, lab, weight=wt, ignore_index=ign, label_smoothing=eps, reduction=red),
             [normal(n, c)], {"labels": enc_ints(labels), "weight": enc_f32(w), "ignore_index": ign,
                              "label_smoothing": eps, "reduction": red})
    lab = torch.tensor(RNG.integers(0, 3, (2, 4)))
    case("ce_weighted_spatial", "cross_entropy_weighted",
         lambda x: F.cross_entropy(x, lab, weight=wt[:3], reduction="mean"), [normal(2, 3, 4)],
         {"labels": enc_ints(lab.numpy()), "weight": enc_f32(w[:3]), "ignore_index": -100, "label_smoothing": 0.0,
          "reduction": "mean"})
    for name, eps, red, weighted in [("ce_probs_mean", 0.0, "mean", False), ("ce_probs_smooth_sum", 0.1, "sum", False),
                                     ("ce_probs_weighted", 0.0, "mean", True), ("ce_probs_none", 0.2, "none", True)]:
        probs = torch.softmax(normal(n, c), 1)
        case(name, "cross_entropy_probs",
             lambda x, t: F.cross_entropy(x, t, weight=wt if weighted else None, label_smoothing=eps, reduction=red),
             [normal(n, c), f32(probs.numpy())],
             {"weight": enc_f32(w) if weighted else None, "label_smoothing": eps, "reduction": red})
    for red in ["mean", "sum", "none"]:
        case(f"l1_{red}", "l1_loss", lambda a, b: F.l1_loss(a, b, reduction=red), [normal(3, 4), normal(3, 4)], {"reduction": red})
    for name, beta, red in [("smooth_l1_mean", 1.0, "mean"), ("smooth_l1_beta", 0.5, "sum"), ("smooth_l1_zero_beta", 0.0, "none")]:
        a, b = normal(3, 4), normal(3, 4)
        d = a - b
        for k in (beta, -beta):
            d = torch.where((d - k).abs() < 0.05, d + 0.1, d)
        case(name, "smooth_l1_loss", lambda a, b: F.smooth_l1_loss(a, b, reduction=red, beta=beta), [b + d, b],
             {"beta": beta, "reduction": red})
    for name, red, weighted in [("bce_mean", "mean", False), ("bce_weighted_sum", "sum", True), ("bce_none", "none", False)]:
        p = uniform(0.05, 0.95, 3, 4)
        t = uniform(0.0, 1.0, 3, 4)
        bw = uniform(0.5, 2.0, 4) if weighted else None
        case(name, "binary_cross_entropy",
             lambda p, t: F.binary_cross_entropy(p, t, weight=bw, reduction=red), [p, t],
             {"reduction": red, "weight": enc_f32(bw.numpy()) if weighted else None})
    edge_p, edge_t = f32([0.0, 1.0, 0.0, 1.0, 0.3]), f32([0.0, 1.0, 0.5, 0.25, 1.0])
    case("bce_clamped_log", "binary_cross_entropy", lambda p, t: F.binary_cross_entropy(p, t, reduction="none"),
         [edge_p, edge_t], {"reduction": "none", "weight": None},
         {"note": "log clamped to -100; input gradient (p - t) / max(p (1 - p), 1e-12). The target gradient "
                  "is left out (null): PyTorch's is log(1 - p) - log(p) unclamped, infinite at p = 0 or 1; forgia "
                  "differentiates the clamped forward instead (finite)"})
    CASES[-1]["grads"][1] = None
    y = [1, -1, 1, -1]
    x1, x2 = normal(4, 5), normal(4, 5)
    for name, margin, red in [("cosine_embedding_mean", 0.0, "mean"), ("cosine_embedding_margin", 0.2, "sum"), ("cosine_embedding_none", -0.3, "none")]:
        case(name, "cosine_embedding_loss",
             lambda a, b: F.cosine_embedding_loss(a, b, torch.tensor(y, dtype=torch.float64), margin=margin, reduction=red),
             [x1, x2], {"target": enc_ints(y), "margin": margin, "reduction": red})
    a, b = normal(6), normal(6)
    yr = [1, -1, 1, 1, -1, -1]
    for name, margin, red in [("margin_ranking_mean", 0.0, "mean"), ("margin_ranking_margin", 0.5, "none")]:
        z = -torch.tensor(yr, dtype=torch.float64) * (a - b) + margin
        a2 = torch.where(z.abs() < 0.05, a + 0.2 * torch.tensor(yr, dtype=torch.float64), a)
        case(name, "margin_ranking_loss",
             lambda a, b: F.margin_ranking_loss(a, b, torch.tensor(yr, dtype=torch.float64), margin=margin, reduction=red),
             [a2, b], {"target": enc_ints(yr), "margin": margin, "reduction": red})


def shapes():
    for name, op, shape, k in [("tril", "tril", (3, 4), 0), ("tril_neg", "tril", (2, 3, 4), -1),
                               ("triu", "triu", (3, 4), 1), ("triu_batched", "triu", (2, 4, 3), 0)]:
        fn = torch.tril if op == "tril" else torch.triu
        case(name, op, lambda x: fn(x, k), [normal(*shape)], {"diagonal": k})
    for name, shape, off, d1, d2 in [("diagonal", (3, 4), 1, 0, 1), ("diagonal_batched", (2, 3, 4), -1, 0, 2),
                                     ("diagonal_swapped", (3, 4), 0, 1, 0)]:
        case(name, "diagonal", lambda x: torch.diagonal(x, off, d1, d2), [normal(*shape)],
             {"offset": off, "dim1": d1, "dim2": d2})
    case("diag_vector", "diag", lambda x: torch.diag(x, 1), [normal(3)], {"diagonal": 1})
    case("diag_matrix", "diag", lambda x: torch.diag(x, -1), [normal(3, 4)], {"diagonal": -1})
    case("diag_embed", "diag_embed", lambda x: torch.diag_embed(x), [normal(2, 3)], {"offset": 0, "dim1": -2, "dim2": -1})
    case("diag_embed_dims", "diag_embed", lambda x: torch.diag_embed(x, 1, 0, 2), [normal(2, 3)], {"offset": 1, "dim1": 0, "dim2": 2})
    case("trace", "trace", torch.trace, [normal(3, 4)])
    case("roll", "roll", lambda x: torch.roll(x, [1, -2], [0, 1]), [normal(3, 4)], {"shifts": [1, -2], "dims": [0, 1]})
    case("roll_flat", "roll", lambda x: torch.roll(x, 5), [normal(3, 4)], {"shifts": [5], "dims": []})
    case("cumprod", "cumprod", lambda x: torch.cumprod(x, 1), [normal(3, 4)], {"axis": 1})
    zeros = f32([[1.5, 0.0, 2.0, -1.0], [0.0, 0.0, 3.0, 0.5], [2.0, -0.5, 1.5, 0.0]])
    case("cumprod_zeros", "cumprod", lambda x: torch.cumprod(x, 1), [zeros], {"axis": 1},
         {"note": "zeros in the input: one, two in a row, and a trailing one"})
    case("cumprod_axis0", "cumprod", lambda x: torch.cumprod(x, 0), [normal(4, 2)], {"axis": 0})
    tie = f32([[1.0, 3.0, 3.0, 2.0, 4.0], [0.5, 0.5, -1.0, 0.5, 0.2]])
    for name, x, axis in [("cummax", normal(3, 5), 1), ("cummax_ties", tie, 1), ("cummax_axis0", normal(4, 3), 0)]:
        v, i = torch.cummax(x.clone().requires_grad_(True), axis)
        case(name, "cummax", lambda x: torch.cummax(x, axis).values, [x], {"axis": axis},
             {"output_indices": enc_ints(i.numpy())})
    for name, shape, k, dil, pad, st in [("unfold", (1, 2, 5, 5), (3, 3), (1, 1), (0, 0), (1, 1)),
                                         ("unfold_strided", (2, 1, 6, 5), (2, 3), (2, 1), (1, 1), (2, 1))]:
        case(name, "unfold", lambda x: F.unfold(x, k, dil, pad, st), [normal(*shape)],
             {"kernel": list(k), "dilation": list(dil), "padding": list(pad), "stride": list(st)})
    for name, out, c, k, dil, pad, st in [("fold", (4, 5), 2, (2, 2), (1, 1), (0, 0), (1, 1)),
                                          ("fold_strided", (6, 5), 1, (2, 3), (2, 1), (1, 1), (2, 1))]:
        lh = (out[0] + 2 * pad[0] - dil[0] * (k[0] - 1) - 1) // st[0] + 1
        lw = (out[1] + 2 * pad[1] - dil[1] * (k[1] - 1) - 1) // st[1] + 1
        case(name, "fold", lambda x: F.fold(x, out, k, dil, pad, st), [normal(2, c * k[0] * k[1], lh * lw)],
             {"output_size": list(out), "kernel": list(k), "dilation": list(dil), "padding": list(pad), "stride": list(st)})
    for mode, pads in [("reflect", [[0, 0], [0, 0], [1, 2], [2, 1]]), ("replicate", [[0, 0], [0, 0], [2, 0], [1, 3]]),
                       ("circular", [[0, 0], [0, 0], [1, 2], [3, 1]]), ("reflect_1d", [[0, 0], [0, 0], [2, 3]])]:
        m = mode.split("_")[0]
        shape = (1, 2, 6) if mode.endswith("1d") else (1, 2, 4, 5)
        flat = [v for pair in reversed(pads[2:]) for v in pair]
        case(f"pad_{mode}", "pad_mode", lambda x: F.pad(x, flat, mode=m), [normal(*shape)], {"pads": pads, "mode": m})


def main():
    out = out_arg(DEFAULT_OUT, __doc__.splitlines()[0])
    torch.set_default_dtype(torch.float64)
    layers()
    losses()
    shapes()
    text = json.dumps({"generator": f"torch {torch.__version__}", "seed": SEED, "cases": CASES}, separators=(",", ":"))
    write(out, text.replace(',{"name"', ',\n{"name"'), 200_000, f"{len(CASES)} cases")


if __name__ == "__main__":
    main()
