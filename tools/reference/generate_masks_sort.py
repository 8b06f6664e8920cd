#!/usr/bin/env python3
"""Golden fixture for masks, sorting and index writes (issue 15, items 1, 4 and the index half
of 6), computed with PyTorch on CPU in float64.

Writes crates/forgia/tests/golden/masks_sort.json, read by crates/forgia/tests/masks_sort.rs.
The Rust tests only read the committed JSON; PyTorch is never needed to run them.

Format: as tools/reference/README.md describes (name, op, attrs, inputs, cotangent, output,
grads). Index-valued outputs (sort/topk/... indices, argmax, nonzero) are stored as
`output_indices` ({"shape", "data": [ints]}); integer inputs (indices, 0/1 masks) live in
`attrs`. Ops without a gradient (comparisons, any/all) have no cotangent and no grads.

Cases avoid ties wherever an index is compared (PyTorch leaves the index of tied values
unspecified, except in a stable sort, which `sort_stable_ties` uses), and duplicate targets in
overwriting writes (PyTorch leaves the winner unspecified; forgia's last-write-wins rule is
tested in Rust). Masks are built with the comparison ops themselves (`gt`, `lt`, `ge`,
`logical_*`) and fed into `where` / `masked_fill` / `masked_select` / `masked_scatter`.

Usage:  /work/.venv-torch/bin/python tools/reference/generate_masks_sort.py [--out FILE]
"""
import functools
import os

import numpy as np
import torch

from golden_common import GOLDEN, cases_text, enc8, enc_f32, enc_ints, out_arg, sample_6g, write

SEED = 20261201
DEFAULT_OUT = os.path.join(GOLDEN, "masks_sort.json")
rng = np.random.default_rng(SEED)
f32 = functools.partial(sample_6g, rng)


def distinct(shape):
    """A random permutation of distinct, well-separated values (no ties)."""
    n = int(np.prod(shape))
    v = (rng.permutation(n) - n / 2) * 0.25 + 0.125
    return torch.tensor(v.reshape(shape).astype(np.float64))


cases = []


def add(name, op, attrs, inputs, fn, grad=True, grad_mask=None):
    """Runs `fn(*inputs)` -> output or (output, indices); records grads for a random
    cotangent when `grad` (inputs listed in `grad_mask` as False get `null`)."""
    xs = [x.clone().requires_grad_(grad) for x in inputs]
    res = fn(*xs)
    out, idx = (res if isinstance(res, tuple) else (res, None))
    case = {"name": name, "op": op, "attrs": attrs, "inputs": [enc_f32(x) for x in inputs]}
    if idx is not None:
        case["output_indices"] = enc_ints(idx)
    case["output"] = enc8(out.double())
    if grad:
        ct = f32(tuple(out.shape))
        gs = torch.autograd.grad(out, xs, ct, allow_unused=True)
        mask = grad_mask or [True] * len(xs)
        case["cotangent"] = enc_f32(ct)
        case["grads"] = [enc8(g if g is not None else torch.zeros_like(x)) if m else None
                         for g, x, m in zip(gs, xs, mask)]
    else:
        case["cotangent"] = None
        case["grads"] = []
    cases.append(case)


def mask(b):
    return b.double()


# ---- comparisons and logic (no gradient) ----
x, y = f32((3, 4)), f32((3, 4))
y[0, 1] = x[0, 1]  # one equal pair
y[2, 3] = x[2, 3]
for op, fn in [("eq", torch.eq), ("ne", torch.ne), ("lt", torch.lt), ("le", torch.le), ("gt", torch.gt),
               ("ge", torch.ge)]:
    add(f"{op}_same_shape", op, {}, [x, y], lambda a, b, fn=fn: mask(fn(a, b)), grad=False)
add("lt_broadcast", "lt", {}, [f32((3, 1)), f32((1, 4))], lambda a, b: mask(a < b), grad=False)
for op, fn in [("gt_scalar", torch.gt), ("le_scalar", torch.le), ("eq_scalar", torch.eq)]:
    v = torch.tensor([0.5, -1.0, 0.25, 0.0, 2.0, 0.25])
    add(op, op, {"scalar": 0.25}, [v], lambda a, fn=fn: mask(fn(a, 0.25)), grad=False)
m1, m2 = (f32((2, 5)) > 0).double(), (f32((2, 5)) > 0).double() * 2.5  # nonzero = true
for op, fn in [("logical_and", torch.logical_and), ("logical_or", torch.logical_or),
               ("logical_xor", torch.logical_xor)]:
    add(op, op, {}, [m1, m2], lambda a, b, fn=fn: mask(fn(a, b)), grad=False)
add("logical_not", "logical_not", {}, [m2], lambda a: mask(torch.logical_not(a)), grad=False)
a3 = (f32((2, 3, 4)) > 0.3).double()
for op in ["any", "all"]:
    for axis, keepdim in [(1, False), (-1, True), (0, False)]:
        fn = getattr(torch, op)
        add(f"{op}_axis{axis}_keep{int(keepdim)}", op, {"axis": axis, "keepdim": keepdim}, [a3],
            lambda t, fn=fn, axis=axis, keepdim=keepdim: mask(fn(t, dim=axis, keepdim=keepdim)), grad=False)
a_ones = torch.ones(2, 3)
a_ones[1, 2] = 0
add("all_rows", "all", {"axis": 1, "keepdim": False}, [a_ones], lambda t: mask(torch.all(t, 1)), grad=False)
nz = torch.tensor([[0.0, 1.5, 0.0], [-2.0, 0.0, 3.0]])
add("nonzero", "nonzero", {}, [nz], lambda t: (t.sum() * 0, torch.nonzero(t)), grad=False)

# ---- masks from comparisons fed to where / masked_fill / masked_select / masked_scatter ----
c, a, b = f32((3, 4)), f32((3, 4)), f32((3, 4))
add("where_gt_scalar", "where_gt_scalar", {"scalar": 0.1}, [c, a, b],
    lambda c, a, b: torch.where(c > 0.1, a, b), grad_mask=[False, True, True])
c1, c2, a, b = f32((3, 1)), f32((1, 4)), f32((3, 4)), f32((4,))
add("where_lt_broadcast", "where_lt", {}, [c1, c2, a, b],
    lambda c1, c2, a, b: torch.where(c1 < c2, a, b), grad_mask=[False, False, True, True])
x, y = f32((2, 5)), f32((5,))
add("masked_fill_ge", "masked_fill_ge", {"value": -7.5}, [x, y],
    lambda x, y: x.masked_fill(x >= y, -7.5), grad_mask=[True, False])
x = f32((3, 4))
add("masked_fill_outside_band", "masked_fill_band", {"low": -0.5, "high": 0.5, "value": 100.0}, [x],
    lambda x: x.masked_fill(torch.logical_or(x < -0.5, x > 0.5), 100.0))
x, m = f32((3, 4)), f32((1, 4))
add("masked_select_gt", "masked_select_gt", {"scalar": 0.0}, [x, m],
    lambda x, m: x.masked_select(m > 0.0), grad_mask=[True, False])
x, m, s = f32((3, 4)), f32((3, 4)), f32((2, 7))
add("masked_scatter_lt", "masked_scatter_lt", {"scalar": 0.3}, [x, m, s],
    lambda x, m, s: x.masked_scatter(m < 0.3, s), grad_mask=[True, False, True])

# ---- sorting and selection ----
for name, shape, axis, desc in [("sort_last", (3, 5), -1, False), ("sort_axis0_desc", (4, 3), 0, True),
                                ("sort_3d_mid", (2, 4, 3), 1, False)]:
    add(name, "sort", {"axis": axis, "descending": desc}, [distinct(shape)],
        lambda t, axis=axis, desc=desc: tuple(torch.sort(t, dim=axis, descending=desc)))
ties = torch.tensor([[2.0, 1.0, 2.0, 0.5, 1.0, 2.0], [0.0, 0.0, -1.0, 3.0, -1.0, 0.0]])
for desc in [False, True]:
    add(f"sort_stable_ties_desc{int(desc)}", "sort", {"axis": 1, "descending": desc}, [ties],
        lambda t, desc=desc: tuple(torch.sort(t, dim=1, descending=desc, stable=True)))
add("argsort_desc", "argsort", {"axis": 1, "descending": True}, [distinct((3, 5))],
    lambda t: (t.sum() * 0, torch.argsort(t, dim=1, descending=True)), grad=False)
for name, shape, k, axis, largest in [("topk_largest", (3, 6), 3, -1, True), ("topk_smallest", (3, 6), 2, 1, False),
                                      ("topk_axis0", (5, 3), 2, 0, True), ("topk_all", (2, 4), 4, 1, True)]:
    add(name, "topk", {"k": k, "axis": axis, "largest": largest}, [distinct(shape)],
        lambda t, k=k, axis=axis, largest=largest: tuple(torch.topk(t, k, dim=axis, largest=largest)))
for name, shape, k, axis, keepdim in [("kthvalue_2", (3, 5), 2, 1, False), ("kthvalue_keep", (4, 3), 4, 0, True)]:
    add(name, "kthvalue", {"k": k, "axis": axis, "keepdim": keepdim}, [distinct(shape)],
        lambda t, k=k, axis=axis, keepdim=keepdim: tuple(torch.kthvalue(t, k, dim=axis, keepdim=keepdim)))
for name, shape, axis, keepdim in [("median_odd", (3, 5), 1, False), ("median_even_lower", (4, 3), 0, True),
                                   ("median_3d", (2, 4, 3), -2, False)]:
    add(name, "median", {"axis": axis, "keepdim": keepdim}, [distinct(shape)],
        lambda t, axis=axis, keepdim=keepdim: tuple(torch.median(t, dim=axis, keepdim=keepdim)))
add("median_all_even", "median_all", {}, [distinct((2, 4))], lambda t: torch.median(t))
add("median_all_ties", "median_all", {}, [torch.tensor([1.0, 2.0, 2.0, 3.0, 2.0, 5.0])], lambda t: torch.median(t))
for op in ["argmax", "argmin"]:
    for axis, keepdim in [(1, False), (0, True)]:
        fn = getattr(torch, op)
        add(f"{op}_axis{axis}_keep{int(keepdim)}", op, {"axis": axis, "keepdim": keepdim}, [distinct((3, 4))],
            lambda t, fn=fn, axis=axis, keepdim=keepdim: (t.sum() * 0, fn(t, dim=axis, keepdim=keepdim)),
            grad=False)

# ---- index writes (no duplicate targets in overwrites: PyTorch leaves their winner unspecified) ----
x, src = f32((3, 5)), f32((3, 3))  # torch's backward needs src.shape == index.shape
idx = torch.tensor([[4, 0, 2], [1, 3, 0], [2, 4, 1]])
add("scatter_src_axis1", "scatter", {"axis": 1, "index": enc_ints(idx)}, [x, src],
    lambda x, s: x.scatter(1, idx, s))
x, src = f32((4, 3)), f32((2, 3))
idx0 = torch.tensor([[3, 0, 1], [1, 2, 0]])
add("scatter_src_axis0", "scatter", {"axis": 0, "index": enc_ints(idx0)}, [x, src],
    lambda x, s: x.scatter(0, idx0, s))
x = f32((3, 5))
add("scatter_value", "scatter_value", {"axis": 1, "index": enc_ints(idx), "value": -2.5}, [x],
    lambda x: x.scatter(1, idx, -2.5))
x, src = f32((5, 3)), f32((3, 3))
ic = torch.tensor([4, 0, 2])
add("index_copy_axis0", "index_copy", {"axis": 0, "index": enc_ints(ic)}, [x, src],
    lambda x, s: x.index_copy(0, ic, s))
x, src = f32((2, 4, 3)), f32((2, 2, 3))
ic1 = torch.tensor([3, 1])
add("index_copy_axis1", "index_copy", {"axis": 1, "index": enc_ints(ic1)}, [x, src],
    lambda x, s: x.index_copy(1, ic1, s))
x, v = f32((3, 4)), f32((3,))
r, cc = torch.tensor([0, 2, 1]), torch.tensor([3, 0, -1])
add("index_put_2d", "index_put", {"indices": [enc_ints(r), enc_ints(cc)], "accumulate": False}, [x, v],
    lambda x, v: x.index_put((r, cc), v))
x, v = f32((4, 3)), f32((3,))
rr = torch.tensor([[0], [2]])
add("index_put_rows_broadcast", "index_put", {"indices": [enc_ints(rr)], "accumulate": False}, [x, v],
    lambda x, v: x.index_put((rr,), v))
x, v = f32((3, 4)), f32((5,))
ra, ca = torch.tensor([0, 2, 0, 1, 0]), torch.tensor([1, 3, 1, 0, 1])
add("index_put_accumulate_duplicates", "index_put", {"indices": [enc_ints(ra), enc_ints(ca)], "accumulate": True},
    [x, v], lambda x, v: x.index_put((ra, ca), v, accumulate=True))


def main():
    out = out_arg(DEFAULT_OUT)
    write(out, cases_text(SEED, cases), 200_000, f"{len(cases)} cases")


if __name__ == "__main__":
    main()
