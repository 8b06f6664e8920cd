#!/usr/bin/env python3
"""PyTorch twin of `cargo bench -p forgia --bench softmax` (same shapes, same ops): prints the
median of five timed loops, in microseconds per call, 2 threads.

Usage: .venv/bin/python bench/torch_softmax.py
"""
import torch, time, statistics
torch.set_num_threads(2)
torch.manual_seed(1)
x = torch.randn(256, 1024)
cube = torch.randn(16, 256, 256)
short = torch.randn(262144, 4)
seed = torch.randn(262144, 4)
logits = torch.randn(256, 1000)
labels = torch.tensor([(i * 37) % 1000 for i in range(256)])
def t(f, n=2000):
    for _ in range(50): f()
    ts = []
    for _ in range(5):
        s = time.perf_counter()
        for _ in range(n): f()
        ts.append((time.perf_counter() - s) / n * 1e6)
    return statistics.median(ts)
def short_fwd_bwd():
    v = short.clone().requires_grad_()
    v.softmax(-1).backward(seed)
    return v.grad
def ce():
    v = logits.clone().requires_grad_()
    torch.nn.functional.cross_entropy(v, labels).backward()
    return v.grad
print(f"torch softmax_256x1024_last_axis {t(lambda: x.softmax(-1)):.2f} us")
print(f"torch softmax_256x1024_first_axis {t(lambda: x.softmax(0)):.2f} us")
print(f"torch softmax_16x256x256_middle_axis {t(lambda: cube.softmax(1), 200):.2f} us")
print(f"torch softmax_262144x4_last_axis {t(lambda: short.softmax(-1), 200):.2f} us")
print(f"torch softmax_262144x4_last_axis_fwd_bwd {t(short_fwd_bwd, 100):.2f} us")
print(f"torch cross_entropy_256x1000_fwd_bwd {t(ce, 500):.2f} us")
