#!/usr/bin/env python3
"""Golden fixture for the function transforms (forgia::func), from torch.func.

Writes crates/forgia/tests/golden/func.json, read by crates/forgia/tests/func.rs. The Rust
tests only read the committed JSON; PyTorch is never needed to run them.

Three functions (all computation in float64; inputs drawn with numpy's default_rng(SEED) and
rounded to float32, so reading them as f32 gives exactly the point the goldens were computed
at):

    quad(x)      = x^T A x                      x: [3], A: [3, 3] (not symmetric)  -> []
    tanh_wx(x)   = tanh(W x)                    x: [3], W: [2, 3]                  -> [2]
    mlp(x, w1)   = w2 tanh(w1 x + b1) + b2      x: [3], w1: [4, 3], b1: [4],
                                                w2: [2, 4], b2: [2]                -> [2]

`inputs` are the differentiated arguments (torch.func argnums = every input); `constants`
are captured. For each function the file holds, for every input i (and j):

    output                 f(inputs)
    jacrev[i], jacfwd[i]   torch.func.jacrev / jacfwd, shape f.shape ++ inputs[i].shape
    vjp[i]                 torch.func.vjp(f, *inputs)[1](cotangent)
    jvp                    torch.func.jvp(f, inputs, tangents)[1]
    hessian[i][j]          torch.func.hessian(s) of the scalar s = f (quad) or sum(f)
    hvp[i]                 torch.func.jvp(torch.func.grad(s, argnums), inputs, hvp_vectors)[1]

The script checks its own fixture: jacrev equals jacfwd, the Hessian is symmetric, the vjp,
jvp and hvp agree with the Jacobian and Hessian contracted by hand, and quad's Hessian is
A + A^T. Outputs are written to 9 significant digits.

Usage:  /work/.venv-torch/bin/python tools/reference/generate_func.py [--out FILE]
"""
import os

import numpy as np
import torch
from torch.func import grad, hessian, jacfwd, jacrev, jvp, vjp

from golden_common import GOLDEN, dump_lines, enc9, enc_f32, out_arg, sample_f32, write

SEED = 20240620
DEFAULT_OUT = os.path.join(GOLDEN, "func.json")


def functions(rng):
    """(name, f(*inputs), inputs, constants) for the three functions."""
    a = sample_f32(rng, (3, 3))
    quad_x = sample_f32(rng, (3,))
    w = sample_f32(rng, (2, 3), 0.7)
    tanh_x = sample_f32(rng, (3,))
    w1, b1 = sample_f32(rng, (4, 3), 0.6), sample_f32(rng, (4,), 0.3)
    w2, b2 = sample_f32(rng, (2, 4), 0.6), sample_f32(rng, (2,), 0.3)
    mlp_x = sample_f32(rng, (3,))
    return [
        ("quad", lambda x: x @ (a @ x), [quad_x], {"a": a}),
        ("tanh_wx", lambda x: torch.tanh(w @ x), [tanh_x], {"w": w}),
        ("mlp", lambda x, w1_: w2 @ torch.tanh(w1_ @ x + b1) + b2, [mlp_x, w1], {"b1": b1, "w2": w2, "b2": b2}),
    ]


def case(rng, name, f, inputs, constants):
    n = len(inputs)
    argnums = tuple(range(n))
    y = f(*inputs)
    scalar = (lambda *xs: f(*xs)) if y.dim() == 0 else (lambda *xs: f(*xs).sum())
    cot = sample_f32(rng, tuple(y.shape))
    tangents = [sample_f32(rng, tuple(x.shape)) for x in inputs]
    vectors = [sample_f32(rng, tuple(x.shape)) for x in inputs]

    jr = jacrev(f, argnums=argnums)(*inputs)
    jf = jacfwd(f, argnums=argnums)(*inputs)
    _, pullback = vjp(f, *inputs)
    vj = pullback(cot)
    _, jt = jvp(f, tuple(inputs), tuple(tangents))
    h = hessian(scalar, argnums=argnums)(*inputs)
    _, hv = jvp(grad(scalar, argnums=argnums), tuple(inputs), tuple(vectors))

    # Self-checks: the transforms agree with each other and with contractions by hand.
    m = y.numel()
    for i, x in enumerate(inputs):
        assert torch.allclose(jr[i], jf[i], rtol=1e-12, atol=1e-12)
        ji = jr[i].reshape(m, x.numel())
        assert torch.allclose(vj[i].reshape(-1), ji.T @ cot.reshape(-1), rtol=1e-12, atol=1e-12)
        for j, xj in enumerate(inputs):
            hij = h[i][j].reshape(x.numel(), xj.numel())
            assert torch.allclose(hij, h[j][i].reshape(xj.numel(), x.numel()).T, rtol=1e-12, atol=1e-12)
        by_hand = sum(h[i][j].reshape(x.numel(), xj.numel()) @ vectors[j].reshape(-1) for j, xj in enumerate(inputs))
        assert torch.allclose(hv[i].reshape(-1), by_hand, rtol=1e-12, atol=1e-12)
    jt_hand = sum(jr[i].reshape(m, x.numel()) @ tangents[i].reshape(-1) for i, x in enumerate(inputs))
    assert torch.allclose(jt.reshape(-1), jt_hand, rtol=1e-12, atol=1e-12)
    if name == "quad":
        a = constants["a"]
        assert torch.allclose(h[0][0], a + a.T, rtol=1e-12, atol=1e-12)

    return {
        "name": name,
        "inputs": [enc_f32(x) for x in inputs],
        "constants": {k: enc_f32(v) for k, v in constants.items()},
        "cotangent": enc_f32(cot),
        "tangents": [enc_f32(t) for t in tangents],
        "hvp_vectors": [enc_f32(v) for v in vectors],
        "output": enc9(y),
        "jacrev": [enc9(t) for t in jr],
        "jacfwd": [enc9(t) for t in jf],
        "vjp": [enc9(t) for t in vj],
        "jvp": enc9(jt),
        "hessian_of": "f" if y.dim() == 0 else "sum(f)",
        "hessian": [[enc9(t) for t in row] for row in h],
        "hvp": [enc9(t) for t in hv],
    }


def main():
    out = out_arg(DEFAULT_OUT)
    torch.manual_seed(SEED)  # nothing is drawn from torch; set for good measure
    rng = np.random.default_rng(SEED)
    cases = [case(rng, *fn) for fn in functions(rng)]
    doc = {"generator": f"torch {torch.__version__}", "script": "tools/reference/generate_func.py", "seed": SEED,
           "cases": cases}
    write(out, dump_lines(doc), 50_000, f"{len(cases)} cases")


if __name__ == "__main__":
    main()
