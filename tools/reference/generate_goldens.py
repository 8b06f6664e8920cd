#!/usr/bin/env python3
"""Offline golden-fixture generator for forgia.

Computes reference outputs and vector-Jacobian products with JAX (CPU, float64)
and writes small JSON fixtures into crates/forgia/tests/golden/<family>.json.
The Rust tests only read the committed JSON; JAX is never needed to run them.

Conventions (see tools/reference/README.md for the full description):
  * Every op follows PyTorch semantics (positional axes, negatives allowed,
    keepdim flags, `correction` for var, torch.gather / scatter_add / index_add,
    Tensor.repeat, F.pad values, ...).
  * Inputs and cotangents are sampled as float32 values (6 significant decimal
    digits, then rounded to float32) and written with their shortest float32
    representation, so parsing them as f32 gives exactly the value the golden was
    computed from.  All computation is float64; outputs/grads are written rounded
    to 8 significant digits.
  * grads[i] = VJP of the op w.r.t. float input i with the given cotangent,
    i.e. d/d input_i of sum(output * cotangent).
  * Integer inputs (indices, labels, masks) live in "attrs" as
    {"shape": [...], "data": [ints]} and have no grads entry.

Usage:  .venv/bin/python tools/reference/generate_goldens.py [--out DIR] [families...]
"""
import argparse
import json
import math
import os
import sys

os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax import lax  # noqa: E402

SEED = 20240601
REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DEFAULT_OUT = os.path.join(REPO, "crates", "forgia", "tests", "golden")
GENERATOR = f"jax {jax.__version__}"

rng = np.random.default_rng(SEED)  # re-seeded per family in main()


# ----------------------------------------------------------------------------
# sampling / encoding helpers
# ----------------------------------------------------------------------------

def f32(a):
    """Round to 6 significant digits, then to float32, return float64 array."""
    a = np.asarray(a, dtype=np.float64)
    r = np.vectorize(lambda v: float(f"{v:.6g}"), otypes=[np.float64])(a) if a.size else a
    return np.asarray(r, dtype=np.float32).astype(np.float64).reshape(a.shape)


def U(shape, lo=-1.0, hi=1.0):
    return f32(rng.uniform(lo, hi, size=shape))


def N(shape, scale=1.0):
    return f32(rng.standard_normal(size=shape) * scale)


def away(shape, lo=0.2, hi=1.5):
    """Values with |v| in [lo, hi] and random sign (away from 0)."""
    mag = rng.uniform(lo, hi, size=shape)
    sign = np.where(rng.uniform(size=shape) < 0.5, -1.0, 1.0)
    return f32(mag * sign)


def distinct(shape, lo=-2.0, hi=2.0):
    """Values with no ties anywhere: a shuffled jittered grid, pairwise gap
    >= 0.4 * (hi - lo) / n."""
    n = int(np.prod(shape)) if shape else 1
    v = (rng.permutation(n) + rng.uniform(0.2, 0.8, size=n)) * (hi - lo) / n + lo
    return f32(v.reshape(shape))


def enc_in(a):
    """Tensor sampled as float32: emit shortest float32 round-trip repr."""
    a = np.asarray(a, dtype=np.float64)
    a32 = a.astype(np.float32)
    assert np.array_equal(a32.astype(np.float64), a), "input not float32-representable"
    assert np.all(np.isfinite(a))
    data = [float(str(v)) for v in a32.reshape(-1)]
    return {"shape": list(a.shape), "data": data}


def r8(v):
    return float(f"{float(v):.8g}")


def enc_out(a):
    a = np.asarray(a, dtype=np.float64)
    assert np.all(np.isfinite(a)), "non-finite golden"
    return {"shape": list(a.shape), "data": [r8(v) for v in a.reshape(-1)]}


def enc_int(a):
    a = np.asarray(a)
    return {"shape": list(a.shape), "data": [int(v) for v in a.reshape(-1)]}


def vjp_case(name, op, fn, inputs, attrs=None, cot=None, extra=None,
             grad_mask=None):
    """Generic single-output case. fn(*jnp_inputs) -> jnp array."""
    xs = [jnp.asarray(x) for x in inputs]
    out, pull = jax.vjp(fn, *xs)
    out = np.asarray(out)
    if cot is None:
        cot = N(out.shape)
    grads = pull(jnp.asarray(cot))
    gl = []
    for i, g in enumerate(grads):
        if grad_mask is not None and not grad_mask[i]:
            gl.append(None)
        else:
            gl.append(enc_out(np.asarray(g)))
    case = {"name": name, "op": op, "attrs": attrs or {},
            "inputs": [enc_in(x) for x in inputs],
            "cotangent": enc_in(cot),
            "output": enc_out(out),
            "grads": gl}
    if extra:
        case.update(extra)
    return case


def vjp_multi_case(name, op, fn, inputs, attrs=None, extra=None):
    """Multi-output case (split): fn returns a list of arrays."""
    xs = [jnp.asarray(x) for x in inputs]
    outs, pull = jax.vjp(fn, *xs)
    cots = [N(np.asarray(o).shape) for o in outs]
    grads = pull([jnp.asarray(c) for c in cots])
    case = {"name": name, "op": op, "attrs": attrs or {},
            "inputs": [enc_in(x) for x in inputs],
            "cotangents": [enc_in(c) for c in cots],
            "outputs": [enc_out(np.asarray(o)) for o in outs],
            "grads": [enc_out(np.asarray(g)) for g in grads]}
    if extra:
        case.update(extra)
    return case


def ax(a, nd):
    return a % nd


# ----------------------------------------------------------------------------
# pointwise
# ----------------------------------------------------------------------------

def gen_pointwise():
    cases = []
    binops = {
        "add": (lambda a, b: a + b, None),
        "sub": (lambda a, b: a - b, None),
        "mul": (lambda a, b: a * b, None),
        "div": (lambda a, b: a / b, "div"),
        "pow": (lambda a, b: a ** b, "pow"),
        "maximum": (jnp.maximum, "minmax"),
        "minimum": (jnp.minimum, "minmax"),
    }
    shapes = [("", [2, 3], [2, 3]), ("_broadcast", [2, 3], [3]),
              ("_broadcast_outer", [2, 1], [1, 3])]
    for op, (fn, kind) in binops.items():
        for suf, sa, sb in shapes:
            if kind == "div":
                a, b = U(sa, -2, 2), away(sb, 0.5, 2.0)
            elif kind == "pow":
                a, b = U(sa, 0.5, 2.0), U(sb, -2.0, 2.0)
            elif kind == "minmax":
                while True:
                    a, b = U(sa, -2, 2), U(sb, -2, 2)
                    if np.min(np.abs(np.broadcast_to(a, np.broadcast_shapes(a.shape, b.shape))
                                     - b)) > 0.05:
                        break
            else:
                a, b = U(sa, -2, 2), U(sb, -2, 2)
            cases.append(vjp_case(op + suf, op, fn, [a, b]))

    x = U([2, 3], -2, 2)
    cases.append(vjp_case("add_scalar", "add_scalar", lambda t: t + 0.75, [x],
                          {"scalar": 0.75}))
    cases.append(vjp_case("scale", "scale", lambda t: t * -1.5, [U([2, 3], -2, 2)],
                          {"scalar": -1.5}))
    for e, name, lo, hi in [(2.0, "pow_scalar_2", -2, 2), (0.5, "pow_scalar_half", 0.3, 2),
                            (-1.5, "pow_scalar_neg", 0.3, 2), (3.0, "pow_scalar_3", -2, 2)]:
        cases.append(vjp_case(name, "pow_scalar", lambda t, e=e: t ** e,
                              [U([2, 3], lo, hi)], {"exponent": e}))

    unary = [
        ("neg", lambda t: -t, lambda: U([2, 3], -2, 2)),
        ("exp", jnp.exp, lambda: U([2, 3], -2, 2)),
        ("log", jnp.log, lambda: U([2, 3], 0.2, 3)),
        ("sqrt", jnp.sqrt, lambda: U([2, 3], 0.2, 3)),
        ("rsqrt", lambda t: 1.0 / jnp.sqrt(t), lambda: U([2, 3], 0.2, 3)),
        ("square", jnp.square, lambda: U([2, 3], -2, 2)),
        ("reciprocal", lambda t: 1.0 / t, lambda: away([2, 3], 0.3, 2)),
        ("abs", jnp.abs, lambda: away([2, 3], 0.1, 2)),
        ("sin", jnp.sin, lambda: U([2, 3], -3, 3)),
        ("cos", jnp.cos, lambda: U([2, 3], -3, 3)),
        ("tanh", jnp.tanh, lambda: U([2, 3], -2, 2)),
        ("sigmoid", jax.nn.sigmoid, lambda: U([2, 3], -3, 3)),
        ("relu", lambda t: jnp.maximum(t, 0.0), lambda: away([3, 4], 0.05, 2)),
        ("silu", lambda t: t * jax.nn.sigmoid(t), lambda: U([2, 3], -3, 3)),
        # torch softplus default beta=1, threshold=20 (inputs are far below threshold)
        ("softplus", lambda t: jnp.logaddexp(t, 0.0), lambda: U([2, 3], -3, 3)),
    ]
    for op, fn, gen in unary:
        cases.append(vjp_case(op, op, fn, [gen()]))
    for s in (0.01, 0.2):
        cases.append(vjp_case(f"leaky_relu_{s}", "leaky_relu",
                              lambda t, s=s: jnp.where(t > 0, t, s * t),
                              [away([3, 4], 0.05, 2)], {"negative_slope": s}))
    for approx in ("none", "tanh"):
        cases.append(vjp_case(f"gelu_{approx}", "gelu",
                              lambda t, a=approx: jax.nn.gelu(t, approximate=(a == "tanh")),
                              [U([3, 4], -3, 3)], {"approximate": approx}))
    # clamp: values kept >= 0.05 away from bounds
    lo, hi = -0.5, 0.7
    while True:
        x = U([3, 4], -1.5, 1.5)
        if np.min(np.abs(x - lo)) > 0.05 and np.min(np.abs(x - hi)) > 0.05 \
                and np.any(x < lo) and np.any(x > hi):
            break
    cases.append(vjp_case("clamp", "clamp", lambda t: jnp.clip(t, lo, hi), [x],
                          {"min": lo, "max": hi}))

    mask = (rng.uniform(size=[2, 3]) < 0.5).astype(np.int64)
    mask[0, 0], mask[1, 2] = 1, 0
    a, b = U([2, 3], -2, 2), U([2, 3], -2, 2)
    cases.append(vjp_case("where", "where", lambda p, q: jnp.where(mask.astype(bool), p, q),
                          [a, b], {"mask": enc_int(mask)}))
    mask2 = (rng.uniform(size=[3, 4]) < 0.4).astype(np.int64)
    mask2[0, 0], mask2[2, 3] = 1, 0
    cases.append(vjp_case("masked_fill", "masked_fill",
                          lambda t: jnp.where(mask2.astype(bool), -2.5, t),
                          [U([3, 4], -2, 2)], {"mask": enc_int(mask2), "value": -2.5}))
    return cases


# ----------------------------------------------------------------------------
# reductions
# ----------------------------------------------------------------------------

def gen_reduce():
    cases = []
    for name, shape, axes, keep in [("sum_axis1", [2, 3], [1], False),
                                    ("sum_axes02_keepdim", [2, 3, 4], [0, 2], True),
                                    ("sum_neg_axis", [3, 4], [-1], False),
                                    ("sum_axis0_keepdim", [3, 4], [0], True)]:
        cases.append(vjp_case(name, "sum", lambda t, a=axes, k=keep: jnp.sum(t, axis=tuple(a), keepdims=k),
                              [U(shape, -2, 2)], {"axes": axes, "keepdim": keep}))
    for name, shape, axes, keep in [("mean_axis1", [2, 3], [1], False),
                                    ("mean_axes01_keepdim", [2, 3, 4], [0, 1], True),
                                    ("mean_neg_axis", [2, 3, 4], [-1], False)]:
        cases.append(vjp_case(name, "mean", lambda t, a=axes, k=keep: jnp.mean(t, axis=tuple(a), keepdims=k),
                              [U(shape, -2, 2)], {"axes": axes, "keepdim": keep}))
    for op, jf, af in [("max", jnp.max, jnp.argmax), ("min", jnp.min, jnp.argmin)]:
        for name, shape, axis, keep in [(f"{op}_axis1", [2, 3], 1, False),
                                        (f"{op}_axis0_keepdim", [3, 4], 0, True),
                                        (f"{op}_neg_axis", [2, 3, 4], -1, False)]:
            x = distinct(shape)
            idx = np.asarray(af(x, axis=axis))
            if keep:
                idx = np.expand_dims(idx, axis)
            cases.append(vjp_case(name, op, lambda t, a=axis, k=keep, jf=jf: jf(t, axis=a, keepdims=k),
                                  [x], {"axis": axis, "keepdim": keep},
                                  extra={"output_indices": enc_int(idx)}))
    for name, shape, axes, corr, keep in [("var_axis1_unbiased", [2, 3], [1], 1, False),
                                          ("var_axes12_biased_keepdim", [2, 3, 4], [1, 2], 0, True),
                                          ("var_axis0_unbiased", [4, 3], [0], 1, False)]:
        cases.append(vjp_case(name, "var",
                              lambda t, a=axes, c=corr, k=keep: jnp.var(t, axis=tuple(a), ddof=c, keepdims=k),
                              [U(shape, -2, 2)], {"axes": axes, "correction": corr, "keepdim": keep}))
    for name, shape, axes, keep in [("logsumexp_axis1", [2, 3], [1], False),
                                    ("logsumexp_axes02_keepdim", [2, 3, 4], [0, 2], True),
                                    ("logsumexp_neg_axis", [3, 4], [-1], False)]:
        cases.append(vjp_case(name, "logsumexp",
                              lambda t, a=axes, k=keep: jax.scipy.special.logsumexp(t, axis=tuple(a), keepdims=k),
                              [U(shape, -3, 3)], {"axes": axes, "keepdim": keep}))
    for name, shape, axis, keep in [("prod_axis1", [2, 3], 1, False),
                                    ("prod_axis0_keepdim", [3, 4], 0, True),
                                    ("prod_neg_axis", [2, 3, 4], -1, False)]:
        cases.append(vjp_case(name, "prod", lambda t, a=axis, k=keep: jnp.prod(t, axis=a, keepdims=k),
                              [away(shape, 0.3, 1.8)], {"axis": axis, "keepdim": keep}))
    for name, shape, axis in [("cumsum_axis1", [2, 3], 1), ("cumsum_axis0", [3, 4], 0),
                              ("cumsum_neg_axis", [2, 3, 4], -1)]:
        cases.append(vjp_case(name, "cumsum", lambda t, a=axis: jnp.cumsum(t, axis=a),
                              [U(shape, -2, 2)], {"axis": axis}))
    cases.append(vjp_case("sum_all", "sum_all", jnp.sum, [U([2, 3], -2, 2)]))
    cases.append(vjp_case("sum_all_3d", "sum_all", jnp.sum, [U([2, 3, 4], -2, 2)]))
    cases.append(vjp_case("mean_all", "mean_all", jnp.mean, [U([2, 3], -2, 2)]))
    cases.append(vjp_case("mean_all_3d", "mean_all", jnp.mean, [U([2, 3, 4], -2, 2)]))
    cases.append(vjp_case("sum_large_64x50", "sum", lambda t: jnp.sum(t, axis=(0, 1)),
                          [U([64, 50], -1, 1)], {"axes": [0, 1], "keepdim": False}))
    return cases


# ----------------------------------------------------------------------------
# contractions
# ----------------------------------------------------------------------------

def gen_contract():
    cases = []
    for name, sa, sb in [("matmul_2d", [3, 4], [4, 5]),
                         ("matmul_batched", [2, 3, 4], [2, 4, 5]),
                         ("matmul_broadcast_rhs2d", [2, 3, 4], [4, 5]),
                         ("matmul_broadcast_batch1", [1, 3, 4], [2, 4, 5])]:
        cases.append(vjp_case(name, "matmul", jnp.matmul, [U(sa), U(sb)]))
    for name, eq, shapes in [("einsum_matmul", "ij,jk->ik", [[3, 4], [4, 5]]),
                             ("einsum_bmm", "bij,bjk->bik", [[2, 3, 4], [2, 4, 5]]),
                             ("einsum_rowdot", "ij,ij->i", [[3, 4], [3, 4]]),
                             ("einsum_outer", "i,j->ij", [[3], [4]])]:
        cases.append(vjp_case(name, "einsum", lambda a, b, eq=eq: jnp.einsum(eq, a, b),
                              [U(s) for s in shapes], {"equation": eq}))
    return cases


# ----------------------------------------------------------------------------
# shape ops
# ----------------------------------------------------------------------------

def torch_slice(t, axis, start, end, step):
    sl = [slice(None)] * t.ndim
    sl[axis] = slice(start, end, step)
    return t[tuple(sl)]


def gen_shape():
    cases = []
    for name, s, ns in [("reshape_3d_to_2d", [2, 3, 4], [6, 4]),
                        ("reshape_2d_to_3d", [3, 4], [2, 2, 3]),
                        ("reshape_infer", [2, 3, 4], [4, -1])]:
        cases.append(vjp_case(name, "reshape", lambda t, ns=ns: jnp.reshape(t, ns), [U(s)],
                              {"shape": ns}))
    for name, s, d in [("permute_201", [2, 3, 4], [2, 0, 1]), ("permute_neg", [2, 3, 4], [-1, 0, -2])]:
        cases.append(vjp_case(name, "permute", lambda t, d=d: jnp.transpose(t, [x % 3 for x in d]),
                              [U(s)], {"dims": d}))
    for name, s, d0, d1 in [("transpose_2d", [3, 4], 0, 1), ("transpose_02", [2, 3, 4], 0, 2),
                            ("transpose_neg", [2, 3, 4], -1, -2)]:
        cases.append(vjp_case(name, "transpose", lambda t, a=d0, b=d1: jnp.swapaxes(t, a, b),
                              [U(s)], {"dim0": d0, "dim1": d1}))
    for name, s, axis, st, ln in [("narrow_axis1", [3, 4], 1, 1, 2), ("narrow_axis0", [2, 3, 4], 0, 1, 1),
                                  ("narrow_neg_axis", [2, 3, 4], -1, 0, 3)]:
        cases.append(vjp_case(name, "narrow", lambda t, a=axis, st=st, ln=ln: lax.slice_in_dim(t, st, st + ln, axis=a % t.ndim),
                              [U(s)], {"axis": axis, "start": st, "len": ln}))
    for name, s, axis, st, en, sp in [("slice_step2", [3, 6], 1, 1, 5, 2),
                                      ("slice_axis0", [4, 3], 0, 1, 3, 1),
                                      ("slice_3d_step3", [2, 7, 3], 1, 0, 7, 3)]:
        cases.append(vjp_case(name, "slice", lambda t, a=axis, st=st, en=en, sp=sp: torch_slice(t, a, st, en, sp),
                              [U(s)], {"axis": axis, "start": st, "end": en, "step": sp}))
    for name, shapes, axis in [("concat_axis1", [[2, 3], [2, 2]], 1),
                               ("concat_axis0_three", [[1, 3], [2, 3], [1, 3]], 0),
                               ("concat_neg_axis", [[2, 3, 1], [2, 3, 2]], -1)]:
        cases.append(vjp_case(name, "concat", lambda *ts, a=axis: jnp.concatenate(ts, axis=a),
                              [U(s) for s in shapes], {"axis": axis}))
    for name, shapes, axis in [("stack_axis0", [[2, 3], [2, 3]], 0),
                               ("stack_axis1_three", [[2, 3], [2, 3], [2, 3]], 1),
                               ("stack_neg_axis", [[2, 3], [2, 3]], -1)]:
        cases.append(vjp_case(name, "stack", lambda *ts, a=axis: jnp.stack(ts, axis=a),
                              [U(s) for s in shapes], {"axis": axis}))
    for name, s, axis, sizes in [("split_axis0", [5, 3], 0, [2, 3]),
                                 ("split_axis1_three", [2, 6], 1, [1, 2, 3]),
                                 ("split_neg_axis", [2, 3, 4], -1, [3, 1])]:
        def fsplit(t, a=axis, sizes=sizes):
            cut = list(np.cumsum(sizes)[:-1])
            return jnp.split(t, cut, axis=a)
        cases.append(vjp_multi_case(name, "split", fsplit, [U(s)], {"axis": axis, "sizes": sizes}))
    for name, s, ns in [("broadcast_to_row", [3], [2, 3]), ("broadcast_to_3d", [2, 1], [4, 2, 3]),
                        ("broadcast_to_keepdim", [1, 3], [4, 3])]:
        cases.append(vjp_case(name, "broadcast_to", lambda t, ns=ns: jnp.broadcast_to(t, ns),
                              [U(s)], {"shape": ns}))
    for name, s, a in [("squeeze_axis1", [2, 1, 3], 1), ("squeeze_neg_axis", [2, 3, 1], -1)]:
        cases.append(vjp_case(name, "squeeze", lambda t, a=a: jnp.squeeze(t, axis=a), [U(s)], {"axis": a}))
    for name, s, a in [("unsqueeze_axis0", [2, 3], 0), ("unsqueeze_axis1", [2, 3], 1),
                       ("unsqueeze_neg_axis", [2, 3], -1)]:
        cases.append(vjp_case(name, "unsqueeze", lambda t, a=a: jnp.expand_dims(t, a), [U(s)], {"axis": a}))
    for name, s, st, en in [("flatten_1_2", [2, 3, 4], 1, 2), ("flatten_all", [2, 3, 4], 0, -1),
                            ("flatten_0_1", [2, 3, 4], 0, 1)]:
        def ffl(t, st=st, en=en):
            nd = t.ndim
            a, b = st % nd, en % nd
            ns = list(t.shape[:a]) + [int(np.prod(t.shape[a:b + 1]))] + list(t.shape[b + 1:])
            return jnp.reshape(t, ns)
        cases.append(vjp_case(name, "flatten", ffl, [U(s)], {"start": st, "end": en}))
    for name, s, pads, val in [("pad_zero", [2, 3], [[1, 0], [2, 1]], 0.0),
                               ("pad_value", [2, 3], [[0, 2], [1, 1]], 1.5),
                               ("pad_3d_last", [2, 2, 3], [[0, 0], [0, 0], [2, 1]], -0.5)]:
        cases.append(vjp_case(name, "pad", lambda t, p=pads, v=val: jnp.pad(t, p, constant_values=v),
                              [U(s)], {"pads": pads, "value": val}))
    for name, s, axes in [("flip_02", [2, 3, 4], [0, 2]), ("flip_neg", [3, 4], [-1])]:
        cases.append(vjp_case(name, "flip", lambda t, a=axes: jnp.flip(t, axis=tuple(a)), [U(s)],
                              {"axes": axes}))
    for name, s, reps in [("repeat_2x2", [2, 3], [2, 2]), ("repeat_prepend", [3], [2, 2]),
                          ("repeat_3d", [2, 1, 3], [1, 3, 2])]:
        # torch Tensor.repeat == numpy tile (leading dims prepended when len(repeats) > ndim)
        cases.append(vjp_case(name, "repeat", lambda t, r=reps: jnp.tile(t, r), [U(s)],
                              {"repeats": reps}))
    return cases


# ----------------------------------------------------------------------------
# indexing
# ----------------------------------------------------------------------------

def _grids(shape, axis, idx):
    g = list(jnp.meshgrid(*[jnp.arange(s) for s in shape], indexing="ij"))
    g[axis] = jnp.asarray(idx)
    return tuple(g)


def torch_gather(x, axis, idx):
    axis %= x.ndim
    return x[_grids(idx.shape, axis, idx)]


def torch_scatter_add(x, axis, idx, src):
    axis %= x.ndim
    return x.at[_grids(idx.shape, axis, idx)].add(src)


def torch_index_add(x, axis, idx, src):
    axis %= x.ndim
    sl = (slice(None),) * axis + (jnp.asarray(idx),)
    return x.at[sl].add(src)


def gen_index():
    cases = []
    for name, s, axis, idx in [("index_select_axis0", [4, 3], 0, [2, 0, 2]),
                               ("index_select_axis1", [2, 5], 1, [4, 1, 1, 0]),
                               ("index_select_neg_axis", [2, 3, 4], -1, [3, 0])]:
        idx = np.array(idx)
        cases.append(vjp_case(name, "index_select", lambda t, a=axis, i=idx: jnp.take(t, i, axis=a),
                              [U(s)], {"axis": axis, "index": enc_int(idx)}))
    gather_specs = [("axis1", [3, 4], 1, [3, 2]), ("axis0", [3, 4], 0, [2, 4]),
                    ("neg_axis", [2, 3, 4], -1, [2, 3, 5]), ("smaller_index", [3, 4], 1, [2, 3])]
    for op in ("gather", "take_along_axis"):
        for suf, s, axis, ishape in gather_specs:
            if op == "take_along_axis" and suf == "smaller_index":
                continue  # numpy take_along_axis needs matching non-axis dims
            idx = rng.integers(0, s[axis], size=ishape)
            cases.append(vjp_case(f"{op}_{suf}", op, lambda t, a=axis, i=idx: torch_gather(t, a, i),
                                  [U(s)], {"axis": axis, "index": enc_int(idx)}))
    for name, s, ss, axis in [("scatter_add_axis0", [3, 4], [4, 4], 0),
                              ("scatter_add_axis1", [2, 5], [2, 3], 1),
                              ("scatter_add_neg_axis", [2, 3, 4], [2, 3, 6], -1)]:
        idx = rng.integers(0, s[axis], size=ss)
        cases.append(vjp_case(name, "scatter_add",
                              lambda t, src, a=axis, i=idx: torch_scatter_add(t, a, i, src),
                              [U(s), U(ss)], {"axis": axis, "index": enc_int(idx)}))
    for name, s, axis, idx in [("index_add_axis0", [4, 3], 0, [1, 3, 1]),
                               ("index_add_axis1", [2, 5], 1, [0, 4, 0, 2]),
                               ("index_add_neg_axis", [2, 3, 4], -1, [2, 2])]:
        idx = np.array(idx)
        ss = list(s)
        ss[axis] = len(idx)
        cases.append(vjp_case(name, "index_add",
                              lambda t, src, a=axis, i=idx: torch_index_add(t, a, i, src),
                              [U(s), U(ss)], {"axis": axis, "index": enc_int(idx)}))
    return cases


# ----------------------------------------------------------------------------
# softmax
# ----------------------------------------------------------------------------

def gen_softmax():
    cases = []
    for op, fn in [("softmax", jax.nn.softmax), ("log_softmax", jax.nn.log_softmax)]:
        for suf, s, a in [("axis1", [2, 3], 1), ("axis1_3d", [2, 3, 4], 1),
                          ("neg_axis", [2, 3, 4], -1), ("axis0", [3, 4], 0)]:
            cases.append(vjp_case(f"{op}_{suf}", op, lambda t, a=a, fn=fn: fn(t, axis=a),
                                  [U(s, -3, 3)], {"axis": a}))
    return cases


# ----------------------------------------------------------------------------
# losses
# ----------------------------------------------------------------------------

def _reduce(l, reduction):
    if reduction == "mean":
        return jnp.mean(l)
    if reduction == "sum":
        return jnp.sum(l)
    return l


def torch_cross_entropy(logits, labels, ignore_index=-100, label_smoothing=0.0, reduction="mean"):
    lp = jax.nn.log_softmax(logits, axis=-1)
    C = logits.shape[-1]
    valid = labels != ignore_index
    safe = np.where(valid, labels, 0)
    nll = -jnp.take_along_axis(lp, jnp.asarray(safe)[:, None], axis=1)[:, 0]
    nll = jnp.where(valid, nll, 0.0)
    smooth = jnp.where(valid, -jnp.sum(lp, axis=-1), 0.0)
    n_valid = float(np.sum(valid))
    if reduction == "mean":
        nll_r, sm_r = jnp.sum(nll) / n_valid, jnp.sum(smooth) / n_valid
    elif reduction == "sum":
        nll_r, sm_r = jnp.sum(nll), jnp.sum(smooth)
    else:
        nll_r, sm_r = nll, smooth
    return (1.0 - label_smoothing) * nll_r + (label_smoothing / C) * sm_r


def gen_loss():
    cases = []
    ce = [("cross_entropy_mean", [4, 5], [1, 0, 4, 2], -100, 0.0, "mean"),
          ("cross_entropy_sum", [3, 4], [3, 1, 0], -100, 0.0, "sum"),
          ("cross_entropy_none", [3, 4], [2, 2, 0], -100, 0.0, "none"),
          ("cross_entropy_ignored_label", [4, 3], [0, -100, 2, 1], -100, 0.0, "mean"),
          ("cross_entropy_custom_ignore_index", [4, 3], [0, 1, 2, 1], 1, 0.0, "mean"),
          ("cross_entropy_label_smoothing", [4, 5], [1, 3, 0, 4], -100, 0.1, "mean"),
          ("cross_entropy_label_smoothing_ignored", [4, 5], [1, -100, 0, 4], -100, 0.1, "mean"),
          ("cross_entropy_label_smoothing_sum", [3, 4], [0, 3, 1], -100, 0.1, "sum"),
          ("cross_entropy_ignored_none", [3, 4], [0, -100, 3], -100, 0.0, "none")]
    for name, s, lab, ii, ls, red in ce:
        lab = np.array(lab)
        cases.append(vjp_case(name, "cross_entropy",
                              lambda x, lab=lab, ii=ii, ls=ls, red=red: torch_cross_entropy(x, lab, ii, ls, red),
                              [U(s, -3, 3)],
                              {"labels": enc_int(lab), "ignore_index": ii, "label_smoothing": ls,
                               "reduction": red}))
    for name, s, lab, red in [("nll_loss_mean", [4, 5], [1, 0, 4, 2], "mean"),
                              ("nll_loss_sum", [3, 4], [3, 1, 1], "sum"),
                              ("nll_loss_none", [3, 4], [0, 2, 3], "none")]:
        lab = np.array(lab)
        lp = f32(jax.nn.log_softmax(jnp.asarray(U(s, -3, 3)), axis=-1))

        def nll(x, lab=lab, red=red):
            l = -jnp.take_along_axis(x, jnp.asarray(lab)[:, None], axis=1)[:, 0]
            return _reduce(l, red)
        cases.append(vjp_case(name, "nll_loss", nll, [lp],
                              {"labels": enc_int(lab), "ignore_index": -100, "reduction": red}))
    for red in ("mean", "sum", "none"):
        cases.append(vjp_case(f"mse_loss_{red}", "mse_loss",
                              lambda p, t, red=red: _reduce((p - t) ** 2, red),
                              [U([3, 4], -2, 2), U([3, 4], -2, 2)], {"reduction": red}))
    for name, delta, red in [("huber_loss_mean", 1.0, "mean"), ("huber_loss_sum_delta0.5", 0.5, "sum"),
                             ("huber_loss_none", 1.0, "none")]:
        while True:
            p, t = U([3, 4], -2, 2), U([3, 4], -2, 2)
            d = np.abs(p - t)
            if np.min(np.abs(d - delta)) > 0.05 and np.any(d > delta) and np.any(d < delta):
                break

        def hub(p, t, delta=delta, red=red):
            d = p - t
            ad = jnp.abs(d)
            l = jnp.where(ad < delta, 0.5 * d * d, delta * (ad - 0.5 * delta))
            return _reduce(l, red)
        cases.append(vjp_case(name, "huber_loss", hub, [p, t], {"delta": delta, "reduction": red}))
    for red in ("mean", "sum", "none"):
        def bce(x, t, red=red):
            # max(x,0) - x*t + log(1+exp(-|x|)) == softplus(x) - x*t
            return _reduce(jnp.logaddexp(x, 0.0) - x * t, red)
        cases.append(vjp_case(f"binary_cross_entropy_with_logits_{red}", "binary_cross_entropy_with_logits",
                              bce, [U([3, 4], -3, 3), U([3, 4], 0, 1)], {"reduction": red}))
    for red in ("batchmean", "sum", "mean", "none"):
        inp = f32(jax.nn.log_softmax(jnp.asarray(U([3, 4], -2, 2)), axis=-1))
        tgt = f32(jax.nn.softmax(jnp.asarray(U([3, 4], -2, 2)), axis=-1))

        def kl(x, t, red=red):
            l = t * (jnp.log(t) - x)
            if red == "batchmean":
                return jnp.sum(l) / x.shape[0]
            return _reduce(l, red)
        cases.append(vjp_case(f"kl_div_{red}", "kl_div", kl, [inp, tgt],
                              {"reduction": red, "log_target": False}))
    return cases


# ----------------------------------------------------------------------------
# nn ops
# ----------------------------------------------------------------------------

def conv_nd(x, w, b, stride, padding, dilation, groups):
    nd = x.ndim - 2
    dn = ("NCH", "OIH", "NCH") if nd == 1 else ("NCHW", "OIHW", "NCHW")
    y = lax.conv_general_dilated(x, w, window_strides=(stride,) * nd,
                                 padding=[(padding, padding)] * nd,
                                 rhs_dilation=(dilation,) * nd,
                                 dimension_numbers=dn, feature_group_count=groups,
                                 precision=lax.Precision.HIGHEST)
    if b is not None:
        y = y + b.reshape((1, -1) + (1,) * nd)
    return y


def conv_transpose2d(x, w, b, stride, padding, output_padding):
    # w: [Cin, Cout, kh, kw] (torch layout). Equivalent direct conv on the
    # stride-dilated input with the spatially flipped, in/out-swapped kernel.
    kh, kw = w.shape[2], w.shape[3]
    wt = jnp.flip(w, axis=(2, 3)).transpose(1, 0, 2, 3)
    y = lax.conv_general_dilated(
        x, wt, window_strides=(1, 1),
        padding=[(kh - 1 - padding, kh - 1 - padding + output_padding),
                 (kw - 1 - padding, kw - 1 - padding + output_padding)],
        lhs_dilation=(stride, stride), dimension_numbers=("NCHW", "OIHW", "NCHW"),
        precision=lax.Precision.HIGHEST)
    if b is not None:
        y = y + b.reshape(1, -1, 1, 1)
    return y


def conv_transpose2d_ref(x, w, b, stride, padding, output_padding):
    """Direct scatter definition (numpy) used to cross-check conv_transpose2d."""
    N_, Ci, H, W = x.shape
    _, Co, kh, kw = w.shape
    Ho = (H - 1) * stride - 2 * padding + kh + output_padding
    Wo = (W - 1) * stride - 2 * padding + kw + output_padding
    full = np.zeros((N_, Co, Ho + 2 * padding + kh, Wo + 2 * padding + kw))
    for i in range(H):
        for j in range(W):
            full[:, :, i * stride:i * stride + kh, j * stride:j * stride + kw] += \
                np.einsum("nc,cokl->nokl", x[:, :, i, j], w)
    y = full[:, :, padding:padding + Ho, padding:padding + Wo]
    if b is not None:
        y = y + b.reshape(1, -1, 1, 1)
    return y


def max_pool2d(x, k, s, p):
    return lax.reduce_window(x, -jnp.inf, lax.max, (1, 1, k, k), (1, 1, s, s),
                             [(0, 0), (0, 0), (p, p), (p, p)])


def avg_pool2d(x, k, s, p):
    # count_include_pad=True, ceil_mode=False: divisor is always k*k
    return lax.reduce_window(x, 0.0, lax.add, (1, 1, k, k), (1, 1, s, s),
                             [(0, 0), (0, 0), (p, p), (p, p)]) / (k * k)


def layer_norm(x, w, b, nshape, eps):
    axes = tuple(range(x.ndim - len(nshape), x.ndim))
    mu = jnp.mean(x, axis=axes, keepdims=True)
    var = jnp.mean((x - mu) ** 2, axis=axes, keepdims=True)
    return (x - mu) / jnp.sqrt(var + eps) * w + b


def sdpa(q, k, v, mask, causal, scale):
    s = jnp.einsum("bhqd,bhkd->bhqk", q, k) * scale
    if mask is not None:
        s = s + mask
    if causal:
        S, L = q.shape[-2], k.shape[-2]
        tri = np.tril(np.ones((S, L), dtype=bool))
        s = jnp.where(tri, s, -jnp.inf)
    p = jax.nn.softmax(s, axis=-1)
    return jnp.einsum("bhqk,bhkd->bhqd", p, v)


def rope(x, base):
    S, D = x.shape[-2], x.shape[-1]
    inv_freq = base ** (-(np.arange(0, D, 2, dtype=np.float64)) / D)
    freqs = np.arange(S, dtype=np.float64)[:, None] * inv_freq[None, :]
    emb = np.concatenate([freqs, freqs], axis=-1)
    cos, sin = np.cos(emb), np.sin(emb)
    x1, x2 = x[..., :D // 2], x[..., D // 2:]
    rot = jnp.concatenate([-x2, x1], axis=-1)
    return x * cos + rot * sin


def gen_nn():
    cases = []
    # conv1d
    for name, xs, ws, bias, st, pd, dl, g in [
            ("conv1d_basic", [2, 2, 7], [3, 2, 3], False, 1, 0, 1, 1),
            ("conv1d_stride2_pad1_bias", [2, 3, 8], [2, 3, 3], True, 2, 1, 1, 1),
            ("conv1d_groups2", [2, 4, 6], [4, 2, 3], True, 1, 1, 1, 2),
            ("conv1d_dilation2", [1, 2, 9], [3, 2, 3], True, 1, 2, 2, 1)]:
        ins = [U(xs), U(ws)] + ([U([ws[0]])] if bias else [])
        cases.append(vjp_case(name, "conv1d",
                              lambda x, w, b=None, st=st, pd=pd, dl=dl, g=g: conv_nd(x, w, b, st, pd, dl, g),
                              ins, {"stride": st, "padding": pd, "dilation": dl, "groups": g}))
    for name, xs, ws, bias, st, pd, dl, g in [
            ("conv2d_basic_bias", [1, 2, 5, 5], [3, 2, 3, 3], True, 1, 0, 1, 1),
            ("conv2d_stride2_pad1", [2, 2, 5, 5], [2, 2, 3, 3], False, 2, 1, 1, 1),
            ("conv2d_groups2", [1, 4, 4, 4], [4, 2, 3, 3], True, 1, 1, 1, 2),
            ("conv2d_dilation2", [1, 2, 6, 6], [2, 2, 3, 3], True, 1, 1, 2, 1),
            ("conv2d_rect_kernel", [1, 2, 4, 5], [2, 2, 2, 3], True, 1, 0, 1, 1)]:
        ins = [U(xs), U(ws)] + ([U([ws[0]])] if bias else [])
        cases.append(vjp_case(name, "conv2d",
                              lambda x, w, b=None, st=st, pd=pd, dl=dl, g=g: conv_nd(x, w, b, st, pd, dl, g),
                              ins, {"stride": st, "padding": pd, "dilation": dl, "groups": g}))
    for name, xs, ws, bias, st, pd, op in [
            ("conv_transpose2d_stride2", [1, 2, 3, 3], [2, 3, 3, 3], True, 2, 1, 0),
            ("conv_transpose2d_output_padding", [2, 2, 3, 3], [2, 2, 3, 3], True, 2, 1, 1),
            ("conv_transpose2d_stride1_nobias", [1, 3, 3, 3], [3, 2, 2, 2], False, 1, 0, 0)]:
        ins = [U(xs), U(ws)] + ([U([ws[1]])] if bias else [])
        y1 = np.asarray(conv_transpose2d(*[jnp.asarray(a) for a in ins] + ([None] if not bias else []),
                                         st, pd, op))
        y2 = conv_transpose2d_ref(*ins + ([None] if not bias else []), st, pd, op)
        assert np.allclose(y1, y2, atol=1e-12), name
        cases.append(vjp_case(name, "conv_transpose2d",
                              lambda x, w, b=None, st=st, pd=pd, op=op: conv_transpose2d(x, w, b, st, pd, op),
                              ins, {"stride": st, "padding": pd, "output_padding": op}))
    for name, xs, k, s, p in [("max_pool2d_k2s2", [1, 2, 4, 4], 2, 2, 0),
                              ("max_pool2d_k3s2p1", [1, 2, 5, 5], 3, 2, 1),
                              ("max_pool2d_k2s1", [2, 1, 3, 3], 2, 1, 0)]:
        cases.append(vjp_case(name, "max_pool2d", lambda x, k=k, s=s, p=p: max_pool2d(x, k, s, p),
                              [distinct(xs)], {"kernel": k, "stride": s, "padding": p}))
    for name, xs, k, s, p in [("avg_pool2d_k2s2", [1, 2, 4, 4], 2, 2, 0),
                              ("avg_pool2d_k3s2p1", [1, 2, 5, 5], 3, 2, 1),
                              ("avg_pool2d_k2s1", [2, 1, 3, 3], 2, 1, 0)]:
        cases.append(vjp_case(name, "avg_pool2d", lambda x, k=k, s=s, p=p: avg_pool2d(x, k, s, p),
                              [U(xs)], {"kernel": k, "stride": s, "padding": p, "count_include_pad": True}))
    cases.append(vjp_case("adaptive_avg_pool2d_1x1", "adaptive_avg_pool2d_1x1",
                          lambda x: jnp.mean(x, axis=(2, 3), keepdims=True), [U([2, 3, 3, 4])]))
    for name, xs, sc in [("upsample_nearest2d_x2", [1, 2, 2, 3], 2), ("upsample_nearest2d_x3", [2, 1, 2, 2], 3)]:
        cases.append(vjp_case(name, "upsample_nearest2d",
                              lambda x, sc=sc: jnp.repeat(jnp.repeat(x, sc, axis=2), sc, axis=3),
                              [U(xs)], {"scale": sc}))
    for name, xs, ns in [("layer_norm_last", [2, 3, 4], [4]), ("layer_norm_last2", [2, 3, 4], [3, 4])]:
        cases.append(vjp_case(name, "layer_norm",
                              lambda x, w, b, ns=ns: layer_norm(x, w, b, ns, 1e-5),
                              [U(xs, -2, 2), U(ns, 0.5, 1.5), U(ns, -0.5, 0.5)],
                              {"normalized_shape": ns, "eps": 1e-5}))
    for name, xs, eps in [("rms_norm", [2, 3, 4], 1e-6), ("rms_norm_eps", [3, 5], 1e-2)]:
        cases.append(vjp_case(name, "rms_norm",
                              lambda x, w, eps=eps: x / jnp.sqrt(jnp.mean(x * x, axis=-1, keepdims=True) + eps) * w,
                              [U(xs, -2, 2), U([xs[-1]], 0.5, 1.5)], {"eps": eps}))

    def bn(x, w, b, eps=1e-5):
        mu = jnp.mean(x, axis=(0, 2, 3), keepdims=True)
        var = jnp.mean((x - mu) ** 2, axis=(0, 2, 3), keepdims=True)
        return (x - mu) / jnp.sqrt(var + eps) * w.reshape(1, -1, 1, 1) + b.reshape(1, -1, 1, 1)
    cases.append(vjp_case("batch_norm_train", "batch_norm_train", bn,
                          [U([2, 3, 2, 2], -2, 2), U([3], 0.5, 1.5), U([3], -0.5, 0.5)], {"eps": 1e-5}))

    def gn(x, w, b, G, eps=1e-5):
        Nn, C = x.shape[:2]
        xr = x.reshape(Nn, G, -1)
        mu = jnp.mean(xr, axis=-1, keepdims=True)
        var = jnp.mean((xr - mu) ** 2, axis=-1, keepdims=True)
        y = ((xr - mu) / jnp.sqrt(var + eps)).reshape(x.shape)
        bshape = (1, C) + (1,) * (x.ndim - 2)
        return y * w.reshape(bshape) + b.reshape(bshape)
    for name, xs, G in [("group_norm_g2", [2, 4, 2, 3], 2), ("group_norm_g4", [1, 4, 3, 2], 4),
                        ("group_norm_g1", [2, 6, 2, 2], 1)]:
        cases.append(vjp_case(name, "group_norm", lambda x, w, b, G=G: gn(x, w, b, G),
                              [U(xs, -2, 2), U([xs[1]], 0.5, 1.5), U([xs[1]], -0.5, 0.5)],
                              {"groups": G, "eps": 1e-5}))
    note = "4th input is an additive float mask [S,S]; its grad entry is null (not checked)"
    for name, shp, causal, scale, with_mask in [
            ("sdpa_basic", [1, 2, 3, 4], False, None, False),
            ("sdpa_causal", [2, 2, 4, 2], True, None, False),
            ("sdpa_custom_scale", [1, 1, 3, 4], False, 0.3, False),
            ("sdpa_mask", [1, 2, 3, 4], False, None, True),
            ("sdpa_causal_custom_scale", [1, 2, 3, 2], True, 1.25, False)]:
        # default scale 1/sqrt(D), recorded (and used) rounded to 8 digits
        sc = scale if scale is not None else r8(1.0 / math.sqrt(shp[-1]))
        ins = [U(shp), U(shp), U(shp)]
        extra = None
        gm = None
        if with_mask:
            S = shp[2]
            m = U([S, S], -1, 1)
            m[0, 2] = -10.0
            ins.append(m)
            extra = {"note": note}
            gm = [True, True, True, False]
            fn = lambda q, k, v, m, sc=sc: sdpa(q, k, v, m, False, sc)
        else:
            fn = lambda q, k, v, c=causal, sc=sc: sdpa(q, k, v, None, c, sc)
        cases.append(vjp_case(name, "scaled_dot_product_attention", fn, ins,
                              {"causal": causal, "scale": sc},
                              extra=extra, grad_mask=gm))
    for name, xs, base in [("rope_base10000", [1, 2, 4, 4], 10000.0), ("rope_base100", [2, 1, 3, 6], 100.0)]:
        cases.append(vjp_case(name, "rope", lambda x, base=base: rope(x, base), [U(xs)], {"base": base}))
    return cases


# ----------------------------------------------------------------------------
# optimizers (PyTorch update rules, by hand in numpy float64)
# ----------------------------------------------------------------------------

def sgd_run(params, grad_fn, lr, momentum, dampening, nesterov, weight_decay, steps):
    """torch.optim.SGD (maximize=False):
        g = grad + weight_decay * p
        if momentum != 0:
            buf = g                                  (first step)
            buf = momentum * buf + (1 - dampening) * g   (later steps)
            g = g + momentum * buf if nesterov else buf
        p = p - lr * g
    """
    params = [p.copy() for p in params]
    bufs = [None] * len(params)
    hist = []
    for _ in range(steps):
        grads = grad_fn(params)
        for i, (p, g) in enumerate(zip(params, grads)):
            g = g + weight_decay * p
            if momentum != 0:
                if bufs[i] is None:
                    bufs[i] = g.copy()
                else:
                    bufs[i] = momentum * bufs[i] + (1 - dampening) * g
                g = g + momentum * bufs[i] if nesterov else bufs[i]
            params[i] = p - lr * g
        hist.append([p.copy() for p in params])
    return hist


def adam_run(params, grad_fn, lr, betas, eps, weight_decay, decoupled, steps):
    """torch.optim.Adam / AdamW (amsgrad=False, maximize=False):
        AdamW: p = p * (1 - lr * weight_decay)          (decoupled decay first)
        Adam : g = g + weight_decay * p                 (L2 into the gradient)
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g^2
        bc1 = 1 - b1^t ; bc2 = 1 - b2^t
        p = p - (lr / bc1) * m / (sqrt(v) / sqrt(bc2) + eps)
    """
    b1, b2 = betas
    params = [p.copy() for p in params]
    m = [np.zeros_like(p) for p in params]
    v = [np.zeros_like(p) for p in params]
    hist = []
    for t in range(1, steps + 1):
        grads = grad_fn(params)
        for i, (p, g) in enumerate(zip(params, grads)):
            if decoupled:
                p = p * (1 - lr * weight_decay)
            elif weight_decay != 0:
                g = g + weight_decay * p
            m[i] = b1 * m[i] + (1 - b1) * g
            v[i] = b2 * v[i] + (1 - b2) * g * g
            bc1 = 1 - b1 ** t
            bc2 = 1 - b2 ** t
            denom = np.sqrt(v[i]) / math.sqrt(bc2) + eps
            params[i] = p - (lr / bc1) * m[i] / denom
        hist.append([p.copy() for p in params])
    return hist


def gen_optim():
    cases = []
    w1, w2 = U([3], -1, 1), U([2, 2], -1, 1)
    c1, c2 = U([3], 0.5, 2.0), U([2, 2], 0.5, 2.0)

    def grad_fn(ps):  # loss = sum(c1*w1^2) + sum(c2*w2^2)
        return [2 * c1 * ps[0], 2 * c2 * ps[1]]

    def loss(ps):
        return float(np.sum(c1 * ps[0] ** 2) + np.sum(c2 * ps[1] ** 2))

    configs = [
        ("sgd_momentum", "sgd", {"lr": 0.1, "momentum": 0.9, "dampening": 0.0, "nesterov": False,
                                 "weight_decay": 0.0}),
        ("sgd_nesterov_wd", "sgd", {"lr": 0.1, "momentum": 0.9, "dampening": 0.0, "nesterov": True,
                                    "weight_decay": 0.01}),
        ("sgd_plain", "sgd", {"lr": 0.1, "momentum": 0.0, "dampening": 0.0, "nesterov": False,
                              "weight_decay": 0.0}),
        ("adam", "adam", {"lr": 0.1, "betas": [0.9, 0.999], "eps": 1e-8, "weight_decay": 0.0}),
        ("adam_l2", "adam", {"lr": 0.1, "betas": [0.9, 0.999], "eps": 1e-8, "weight_decay": 0.01}),
        ("adamw", "adamw", {"lr": 0.1, "betas": [0.9, 0.999], "eps": 1e-8, "weight_decay": 0.01}),
    ]
    for name, opt, hp in configs:
        if opt == "sgd":
            hist = sgd_run([w1, w2], grad_fn, hp["lr"], hp["momentum"], hp["dampening"],
                           hp["nesterov"], hp["weight_decay"], 3)
        else:
            hist = adam_run([w1, w2], grad_fn, hp["lr"], hp["betas"], hp["eps"], hp["weight_decay"],
                            opt == "adamw", 3)
        cases.append({"name": name, "optimizer": opt, "hparams": hp,
                      "c1": enc_in(c1), "c2": enc_in(c2),
                      "init": [enc_in(w1), enc_in(w2)],
                      "steps": [[enc_out(p) for p in ps] for ps in hist],
                      "losses": [r8(loss(ps)) for ps in hist]})
    return cases


# ----------------------------------------------------------------------------
# whole-step goldens
# ----------------------------------------------------------------------------

def linear(x, w, b):
    return x @ w.T + b


def init_linear(out, inp):
    bound = 1.0 / math.sqrt(inp)
    return U([out, inp], -bound, bound), U([out], -bound, bound)


def ce_mean(logits, labels):
    lp = jax.nn.log_softmax(logits, axis=-1)
    return -jnp.mean(jnp.take_along_axis(lp, jnp.asarray(labels)[:, None], axis=1))


def step_case(name, model, config, inputs_enc, params, loss_fn, extra=None, margin_fn=None):
    names = [n for n, _ in params]
    vals = [jnp.asarray(v) for _, v in params]
    (loss, out), grads = jax.value_and_grad(lambda ps: loss_fn(ps), has_aux=True)(vals)
    if margin_fn is not None:
        m = margin_fn(vals)
        assert m > 1e-4, f"{name}: too close to a non-differentiable point ({m})"
    case = {"name": name, "model": model, "config": config}
    case.update(inputs_enc)
    case["params"] = [dict(name=n, **enc_in(v)) for n, v in params]
    case["output"] = enc_out(np.asarray(out))
    case["loss"] = r8(loss)
    case["grads"] = [dict(name=n, **enc_out(np.asarray(g))) for n, g in zip(names, grads)]
    if extra:
        case.update(extra)
    return case


def gen_steps():
    cases = []
    # (a) MLP 8 -> 16 -> 16 -> 4, ReLU, CE mean
    x = U([5, 8], -1, 1)
    labels = rng.integers(0, 4, size=[5])
    params = []
    for nm, (o, i) in [("fc1", (16, 8)), ("fc2", (16, 16)), ("fc3", (4, 16))]:
        w, b = init_linear(o, i)
        params += [(f"{nm}.weight", w), (f"{nm}.bias", b)]

    def mlp_pre(ps):
        h1p = linear(x, ps[0], ps[1])
        h1 = jnp.maximum(h1p, 0)
        h2p = linear(h1, ps[2], ps[3])
        h2 = jnp.maximum(h2p, 0)
        return h1p, h2p, linear(h2, ps[4], ps[5])

    def mlp_loss(ps):
        logits = mlp_pre(ps)[2]
        return ce_mean(logits, labels), logits

    cases.append(step_case("mlp", "mlp_8_16_16_4_relu",
                           {"layers": [8, 16, 16, 4], "activation": "relu",
                            "loss": "cross_entropy_mean"},
                           {"input": enc_in(x), "labels": enc_int(labels)}, params, mlp_loss,
                           margin_fn=lambda ps: float(min(np.min(np.abs(a)) for a in mlp_pre(ps)[:2]))))

    # (b) CNN
    xc = U([2, 1, 8, 8], -1, 1)
    labc = rng.integers(0, 3, size=[2])
    b1 = 1 / math.sqrt(9)
    b2 = 1 / math.sqrt(36)
    b3 = 1 / math.sqrt(54)
    cparams = [("conv1.weight", U([4, 1, 3, 3], -b1, b1)), ("conv1.bias", U([4], -b1, b1)),
               ("conv2.weight", U([6, 4, 3, 3], -b2, b2)), ("conv2.bias", U([6], -b2, b2)),
               ("fc.weight", U([3, 54], -b3, b3)), ("fc.bias", U([3], -b3, b3))]

    def cnn_parts(ps):
        a1 = conv_nd(xc, ps[0], ps[1], 1, 0, 1, 1)
        r1 = jnp.maximum(a1, 0)
        p1 = max_pool2d(r1, 2, 2, 0)
        a2 = conv_nd(p1, ps[2], ps[3], 1, 1, 1, 1)
        r2 = jnp.maximum(a2, 0)
        logits = linear(r2.reshape(2, -1), ps[4], ps[5])
        return a1, r1, a2, logits

    def cnn_loss(ps):
        logits = cnn_parts(ps)[3]
        return ce_mean(logits, labc), logits

    def cnn_margin(ps):
        a1, r1, a2, _ = cnn_parts(ps)
        r1 = np.asarray(r1).reshape(2, 4, 3, 2, 3, 2).transpose(0, 1, 2, 4, 3, 5).reshape(2, 4, 3, 3, 4)
        srt = np.sort(r1, axis=-1)
        # ties inside a pool window only matter when the max is positive
        tie = np.where(srt[..., -1] > 0, srt[..., -1] - srt[..., -2], 1.0)
        return float(min(np.min(np.abs(np.asarray(a1))), np.min(np.abs(np.asarray(a2))), np.min(tie)))

    cases.append(step_case("cnn", "cnn_small",
                           {"layers": "conv2d(1->4,3x3,pad0)+relu+max_pool2d(2)+conv2d(4->6,3x3,pad1)+relu+flatten+linear(54->3)",
                            "loss": "cross_entropy_mean"},
                           {"input": enc_in(xc), "labels": enc_int(labc)}, cparams, cnn_loss,
                           margin_fn=cnn_margin))

    # (c) pre-LN transformer block
    B, S, D, H, F = 2, 5, 8, 2, 32
    dh = D // H
    xt = U([B, S, D], -1, 1)
    tparams = [("ln1.weight", U([D], 0.8, 1.2)), ("ln1.bias", U([D], -0.1, 0.1))]
    for p in ("q", "k", "v", "o"):
        w, b = init_linear(D, D)
        tparams += [(f"attn.{p}.weight", w), (f"attn.{p}.bias", b)]
    tparams += [("ln2.weight", U([D], 0.8, 1.2)), ("ln2.bias", U([D], -0.1, 0.1))]
    w, b = init_linear(F, D)
    tparams += [("mlp.fc1.weight", w), ("mlp.fc1.bias", b)]
    w, b = init_linear(D, F)
    tparams += [("mlp.fc2.weight", w), ("mlp.fc2.bias", b)]
    idx = {n: i for i, (n, _) in enumerate(tparams)}

    def block(ps):
        P = lambda n: ps[idx[n]]
        h = layer_norm(xt, P("ln1.weight"), P("ln1.bias"), [D], 1e-5)
        def heads(t):
            return t.reshape(B, S, H, dh).transpose(0, 2, 1, 3)
        q = heads(linear(h, P("attn.q.weight"), P("attn.q.bias")))
        k = heads(linear(h, P("attn.k.weight"), P("attn.k.bias")))
        v = heads(linear(h, P("attn.v.weight"), P("attn.v.bias")))
        a = sdpa(q, k, v, None, True, 1.0 / math.sqrt(dh))
        a = a.transpose(0, 2, 1, 3).reshape(B, S, D)
        h1 = xt + linear(a, P("attn.o.weight"), P("attn.o.bias"))
        m = layer_norm(h1, P("ln2.weight"), P("ln2.bias"), [D], 1e-5)
        m = linear(jax.nn.gelu(linear(m, P("mlp.fc1.weight"), P("mlp.fc1.bias")), approximate=False),
                   P("mlp.fc2.weight"), P("mlp.fc2.bias"))
        out = h1 + m
        return jnp.mean(out ** 2), out

    cases.append(step_case("transformer_block", "pre_ln_transformer_block",
                           {"batch": B, "seq": S, "d_model": D, "heads": H, "d_ff": F, "causal": True,
                            "ln_eps": 1e-5, "gelu": "erf", "loss": "mean(out^2)",
                            "linear": "y = x @ W^T + b, W stored [out,in]"},
                           {"input": enc_in(xt)}, tparams, block))
    return cases


FAMILIES = {
    "pointwise": gen_pointwise,
    "reduce": gen_reduce,
    "contract": gen_contract,
    "shape": gen_shape,
    "index": gen_index,
    "softmax": gen_softmax,
    "loss": gen_loss,
    "nn": gen_nn,
    "optim": gen_optim,
    "steps": gen_steps,
}


def write_family(path, cases):
    names = [c["name"] for c in cases]
    assert len(names) == len(set(names)), "duplicate case names"
    body = ",\n".join(json.dumps(c, separators=(",", ":"), allow_nan=False) for c in cases)
    text = '{"generator":' + json.dumps(GENERATOR) + ',"seed":' + str(SEED) + ',"cases":[\n' + body + "\n]}\n"
    json.loads(text)  # sanity
    with open(path, "w") as f:
        f.write(text)
    return len(text)


def main():
    global rng
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=DEFAULT_OUT)
    ap.add_argument("families", nargs="*", default=list(FAMILIES))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for i, fam in enumerate(FAMILIES):
        if fam not in args.families:
            continue
        # per-family seed so regenerating one family never perturbs another
        rng = np.random.default_rng([SEED, i])
        cases = FAMILIES[fam]()
        n = write_family(os.path.join(args.out, f"{fam}.json"), cases)
        assert n < 200_000, f"{fam}.json too large ({n} bytes)"
        print(f"{fam}.json: {len(cases)} cases, {n} bytes")


if __name__ == "__main__":
    sys.exit(main())
