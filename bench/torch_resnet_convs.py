#!/usr/bin/env python3
"""PyTorch twin of `forgia bench W12conv`: W12's convolutions one by one (every distinct
convolution of ResNet-18's training step, batch 8, 224x224 images, no bias), each product
timed apart with oneDNN's kernels: the forward (`F.conv2d` without autograd), the input
gradient and the weight gradient (`aten.convolution_backward` with one output each; the stem's
input gradient is not computed, as in the step). Random operands in [-1, 1] (the weight in
[-0.05, 0.05]); one warm-up call, then --reps timed calls, the median. Prints one line in the
format of `forgia bench`: median_ms is each layer's three medians times its count in
ResNet-18, and extra has `<layer>_f`, `<layer>_d`, `<layer>_w` in ms.

Usage: .venv/bin/python bench/torch_resnet_convs.py [--threads N] [--reps R] [--sizes B,S]
Compare: bench/alternate.sh 3 median_ms,s4_f,s4_d,... \
    'target/release/forgia bench W12conv --threads 2' \
    '.venv/bin/python bench/torch_resnet_convs.py --threads 2'
"""
import torch
import torch.nn.functional as F

from bench_timing import fixed_median_ms, resnet_args

# (key, input side at 224x224 images, input channels, output channels, kernel, stride, count
# in one step, input gradient computed): as LAYERS in crates/forgia-cli/src/bench/convs.rs.
LAYERS = [
    ("stem", 224, 3, 64, 7, 2, 1, False),
    ("s1", 56, 64, 64, 3, 1, 4, True),
    ("s2a", 56, 64, 128, 3, 2, 1, True),
    ("s2", 28, 128, 128, 3, 1, 3, True),
    ("s3a", 28, 128, 256, 3, 2, 1, True),
    ("s3", 14, 256, 256, 3, 1, 3, True),
    ("s4a", 14, 256, 512, 3, 2, 1, True),
    ("s4", 7, 512, 512, 3, 1, 3, True),
    ("d2", 56, 64, 128, 1, 2, 1, True),
    ("d3", 28, 128, 256, 1, 2, 1, True),
    ("d4", 14, 256, 512, 1, 2, 1, True),
]


def main():
    args, b, image = resnet_args()
    total, extra = 0.0, []
    for key, side, cin, cout, k, s, count, input_gradient in LAYERS:
        side = max(side * image // 224, 1)
        x = torch.rand(b, cin, side, side) * 2 - 1
        w = (torch.rand(cout, cin, k, k) * 2 - 1) * 0.05
        pad = k // 2
        with torch.no_grad():
            gy = torch.rand_like(F.conv2d(x, w, None, s, pad)) * 2 - 1

        def forward():
            with torch.no_grad():
                F.conv2d(x, w, None, s, pad)

        def gradient(mask):
            return lambda: torch.ops.aten.convolution_backward(
                gy, x, w, None, [s, s], [pad, pad], [1, 1], False, [0, 0], 1, mask)

        f = fixed_median_ms(args.reps, forward)
        d = fixed_median_ms(args.reps, gradient([True, False, False])) if input_gradient else 0.0
        wg = fixed_median_ms(args.reps, gradient([False, True, False]))
        total += count * (f + d + wg)
        extra.append(f"{key}_f={f:.3f}")
        if input_gradient:
            extra.append(f"{key}_d={d:.3f}")
        extra.append(f"{key}_w={wg:.3f}")
    print(f"name=W12conv impl=torch median_ms={total:.3f} extra={','.join(extra)},threads={args.threads}")


if __name__ == "__main__":
    main()
