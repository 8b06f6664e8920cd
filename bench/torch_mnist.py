#!/usr/bin/env python3
"""PyTorch (CPU) twin of forgia's main training job: a small CNN on mnist_5k.

Run by hand where torch is installed (PyTorch cannot be installed in forgia's
reference environment, so this script has never been run there; its twin,
bench/jax_mnist.py, has).  Needs only torch and numpy, and bench/mnist_twin.py beside it (the
command line, the data split and the output lines, shared with the JAX twin):

    pip install torch numpy          # CPU wheel is enough
    python bench/torch_mnist.py [--epochs 10] [--seed 0] [--threads 2] [--data PATH]

Data:   data/mnist_5k.csv.gz (gzip CSV, no header; 784 grey levels 0..255 then the label).
        Fixed stratified split: within each digit, in file order, the first 400 rows train
        and the last 100 test (4000 / 1000). Pixels scaled to [0, 1], nothing else.
Model:  Conv2d(1,32,5,padding=2), MaxPool2d(2), ReLU -> Conv2d(32,64,5,padding=2), MaxPool2d(2),
        ReLU -> Dropout(0.25) -> Flatten -> Linear(3136,128), ReLU, Dropout(0.25)
        -> Linear(128,10).  PyTorch default initialisation (kaiming_uniform a=sqrt(5)
        weights, U(+-1/sqrt(fan_in)) biases), drawn after torch.manual_seed(seed).
Train:  nn.CrossEntropyLoss (mean), torch.optim.Adam(lr=1e-3, betas=(0.9, 0.999),
        eps=1e-8), batch 64, training set reshuffled every epoch with
        torch.randperm(generator=torch.Generator().manual_seed(seed)), last partial
        batch (32 rows) kept.  float32 throughout.

Threads: --threads N (default 2, or $FORGIA_BENCH_THREADS) calls torch.set_num_threads(N)
(intra-op pool) and torch.set_num_interop_threads(1).  For a fair comparison also pin the
process, e.g. `taskset -c 0,1 python bench/torch_mnist.py --threads 2`.

Output: one line per epoch
            epoch=<e> train_loss=<mean over samples> test_acc=<pct> epoch_s=<s> elapsed_s=<s>
        then one summary line
            twin=torch seed=<s> epochs=<n> test_acc=<pct> seconds=<t>
        `seconds` / `elapsed_s` count training + per-epoch evaluation, not data loading.
        Same format as bench/jax_mnist.py.  Note: the random streams (init, shuffle,
        dropout) differ between the twins, so compare accuracies across seeds, not
        seed by seed.
"""
import time

import torch
from torch import nn

from mnist_twin import load_mnist, parse_args, report_epoch, report_total

BATCH = 64


def make_model():
    return nn.Sequential(
        # Pool, then relu: exactly relu-then-pool's values and gradients, with the relu on a
        # quarter of the elements; forgia's job computes each block in this order too.
        nn.Conv2d(1, 32, kernel_size=5, padding=2), nn.MaxPool2d(2), nn.ReLU(),
        nn.Conv2d(32, 64, kernel_size=5, padding=2), nn.MaxPool2d(2), nn.ReLU(),
        nn.Dropout(0.25),
        nn.Flatten(),
        nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Dropout(0.25),
        nn.Linear(128, 10),
    )


def main():
    args = parse_args(__doc__)

    torch.set_num_threads(args.threads)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:  # only allowed before any inter-op work has started
        pass

    xtr, ytr, xte, yte = (torch.from_numpy(a) for a in load_mnist(args.data))
    n_train = len(ytr)

    torch.manual_seed(args.seed)
    model = make_model()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-8)
    loss_fn = nn.CrossEntropyLoss()
    shuffle_gen = torch.Generator().manual_seed(args.seed)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"# twin=torch torch={torch.__version__} threads={torch.get_num_threads()} "
          f"interop={torch.get_num_interop_threads()} params={n_params} "
          f"train={n_train} test={len(yte)} batch={BATCH}", flush=True)

    def test_acc():
        model.eval()
        correct = 0
        with torch.no_grad():
            for i in range(0, len(yte), 500):
                logits = model(xte[i:i + 500])
                correct += int((logits.argmax(dim=1) == yte[i:i + 500]).sum())
        model.train()
        return 100.0 * correct / len(yte)

    acc = float("nan")
    start = time.perf_counter()
    for epoch in range(1, args.epochs + 1):
        te0 = time.perf_counter()
        model.train()
        perm = torch.randperm(n_train, generator=shuffle_gen)
        loss_sum = 0.0
        for i in range(0, n_train, BATCH):
            idx = perm[i:i + BATCH]
            x, y = xtr[idx], ytr[idx]
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
            loss_sum += loss.item() * len(idx)
        acc = test_acc()
        now = time.perf_counter()
        report_epoch(epoch, loss_sum / n_train, acc, now - te0, now - start)
    report_total("torch", args.seed, args.epochs, acc, time.perf_counter() - start)


if __name__ == "__main__":
    main()
