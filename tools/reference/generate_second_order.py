#!/usr/bin/env python3
"""Golden fixture for second order through the fused records: a WGAN-GP gradient penalty
through a small CNN critic (conv + norm + pool), in PyTorch.

Writes crates/forgia/tests/golden/second_order.json, read by
crates/forgia/tests/second_order.rs. The Rust tests only read the committed JSON; PyTorch is
never needed to run them.

Critic (all computation in float64):

    h = conv2d(x, w1, b1, stride 1, padding 1)          x: [N, 2, 6, 6], w1: [4, 2, 3, 3]
    h = group_norm(h, 2 groups, g1, c1, eps 1e-5)        g1, c1: [4]
    h = max_pool2d(tanh(h), kernel 2, stride 2)          -> [N, 4, 3, 3]
    h = conv2d(h, w2, b2, stride 1, padding 0)           w2: [3, 4, 2, 2] -> [N, 3, 2, 2]
    h = layer_norm(h, [3, 2, 2], no affine, eps 1e-5)
    d = avg_pool2d(softplus(h), kernel 2, stride 1).sum((1, 2, 3))      -> [N]

Penalty:  g = d(sum d)/dx (create_graph), penalty = mean_n (‖g_n‖₂ - 1)².
Stored: the inputs, the critic values d, the penalty and its gradient with respect to every
parameter (w1, b1, g1, c1, w2, b2).

Initial values come from numpy's `default_rng(SEED)` rounded to float32, so reading them as
f32 gives exactly the starting point. The script checks that the float32 run of the same
model stays within 1e-5 (mixed tolerance) of the float64 one, a tenth of the Rust test's
tolerance, so the comparison is well-conditioned.

Usage:  /work/.venv-torch/bin/python tools/reference/generate_second_order.py [--out FILE]
"""
import json
import os

import numpy as np
import torch
import torch.nn.functional as F

from golden_common import GOLDEN, enc9, out_arg

SEED = 20261201
N = 3
DEFAULT_OUT = os.path.join(GOLDEN, "second_order.json")
NAMES = ["x", "w1", "b1", "g1", "c1", "w2", "b2"]
SHAPES = [[N, 2, 6, 6], [4, 2, 3, 3], [4], [4], [4], [3, 4, 2, 2], [3]]


def draw():
    rng = np.random.default_rng(SEED)
    out = []
    for name, shape in zip(NAMES, SHAPES):
        scale = {"x": 1.0, "w1": 0.4, "w2": 0.4}.get(name, 0.3)
        v = rng.standard_normal(shape) * scale
        if name == "g1":
            v = 1.0 + v
        out.append(v.astype(np.float32))
    return out


def critic(x, w1, b1, g1, c1, w2, b2):
    h = F.conv2d(x, w1, b1, stride=1, padding=1)
    h = F.group_norm(h, 2, g1, c1, eps=1e-5)
    h = F.max_pool2d(torch.tanh(h), 2, 2)
    h = F.conv2d(h, w2, b2)
    h = F.layer_norm(h, [3, 2, 2], eps=1e-5)
    return F.avg_pool2d(F.softplus(h), 2, 1).sum((1, 2, 3))


def run(values, dtype):
    ts = [torch.tensor(v, dtype=dtype, requires_grad=True) for v in values]
    d = critic(*ts)
    (g,) = torch.autograd.grad(d.sum(), ts[0], create_graph=True)
    penalty = ((g.reshape(N, -1).norm(dim=1) - 1.0) ** 2).mean()
    grads = torch.autograd.grad(penalty, ts[1:])
    return d.detach(), penalty.detach(), [gr.detach() for gr in grads]


def main():
    out = out_arg(DEFAULT_OUT)
    values = draw()
    d64, p64, g64 = run(values, torch.float64)
    d32, p32, g32 = run(values, torch.float32)
    for a, b in [(d64, d32), (p64, p32)] + list(zip(g64, g32)):
        a, b = a.numpy(), b.double().numpy()
        assert np.all(np.abs(a - b) <= 1e-5 * (1 + np.abs(a))), (a, b)
    case = {
        "name": "wgan_gp_cnn_critic",
        "op": "gradient_penalty",
        "attrs": {"params": NAMES[1:]},
        "inputs": [enc9(v) for v in values],
        "critic": enc9(d64.numpy()),
        "penalty": float(f"{p64.item():.9g}"),
        "grads": [enc9(g.numpy()) for g in g64],
    }
    doc = {
        "generator": "tools/reference/generate_second_order.py",
        "torch": torch.__version__,
        "cases": [case],
    }
    with open(out, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    print(f"wrote {out}: penalty {p64.item():.6f}")


if __name__ == "__main__":
    main()
