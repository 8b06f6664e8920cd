#!/usr/bin/env python3
"""Golden fixture for the convolution kernels' fast paths (issue 18), computed with PyTorch on
CPU in float64.

Writes crates/forgia/tests/golden/conv.json, read by crates/forgia/tests/conv.rs. The Rust
tests only read the committed JSON; PyTorch is never needed to run them.

The cases cover each path the kernels choose between: a single input channel (the main
job's first layer), the implicit GEMM (16 channels), "same" convolutions whose output rows are as long as the input rows (one
contiguous run per kernel tap, with and without dilation), unpadded and over-padded stride-1
convolutions (row by row), strided and grouped ones, a 1x1, batch 1 and odd sizes.

Format: as tools/reference/README.md describes (name, op, attrs, inputs, cotangent, output,
grads). Run: /work/.venv-torch/bin/python tools/reference/generate_conv.py
"""
import functools
import os

import numpy as np
import torch
import torch.nn.functional as F

from golden_common import GOLDEN, cases_text, enc8, enc_f32, out_arg, sample_6g, write

SEED = 20261218
DEFAULT_OUT = os.path.join(GOLDEN, "conv.json")
rng = np.random.default_rng(SEED)
f32 = functools.partial(sample_6g, rng)


cases = []


def conv(name, x_shape, w_shape, stride=1, padding=0, dilation=1, groups=1, bias=True):
    x, w = f32(x_shape), f32(w_shape, 0.3)
    inputs = [x, w] + ([f32((w_shape[0],))] if bias else [])
    xs = [t.clone().requires_grad_(True) for t in inputs]
    out = F.conv2d(xs[0], xs[1], xs[2] if bias else None, stride, padding, dilation, groups)
    ct = f32(tuple(out.shape))
    grads = torch.autograd.grad(out, xs, ct)
    attrs = {"stride": stride, "padding": padding, "dilation": dilation, "groups": groups}
    cases.append({"name": name, "op": "conv2d", "attrs": attrs, "inputs": [enc_f32(t) for t in inputs],
                  "cotangent": enc_f32(ct), "output": enc8(out), "grads": [enc8(g) for g in grads]})


conv("c1_same_5x5", (2, 1, 9, 7), (3, 1, 5, 5), padding=2)
conv("c1_valid_3x3_batch1", (1, 1, 8, 9), (4, 1, 3, 3))
conv("c1_over_padded", (2, 1, 4, 5), (2, 1, 3, 3), padding=3)
conv("same_5x5", (2, 3, 6, 6), (4, 3, 5, 5), padding=2)
conv("same_3x3_dilation_2", (1, 2, 7, 5), (3, 2, 3, 3), padding=2, dilation=2)
conv("valid_3x3_odd", (3, 2, 7, 6), (5, 2, 3, 3))
conv("stride_2_pad_1", (2, 3, 7, 7), (2, 3, 3, 3), stride=2, padding=1)
conv("groups_2_same", (2, 4, 5, 5), (4, 2, 3, 3), padding=1, groups=2)
conv("pointwise_1x1", (2, 3, 3, 4), (5, 3, 1, 1), bias=False)
conv("c1_stride_2_same", (2, 1, 8, 8), (3, 1, 5, 5), stride=2, padding=2)
# The implicit GEMM (kernels/conv/implicit.rs, AVX-512): 16 input and output channels, a kernel
# row of 4 taps (64 floats a microkernel call), so the forward and the stride-1 input gradient
# both run there; rows of 5 pixels (no full tile of 6), vertical padding rows skipped.
conv("implicit_16ch_2x4", (2, 16, 3, 6), (16, 16, 2, 4), padding=1)


def main():
    out = out_arg(DEFAULT_OUT)
    write(out, cases_text(SEED, cases), 200_000, f"{len(cases)} cases")


if __name__ == "__main__":
    main()
