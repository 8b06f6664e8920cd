#!/usr/bin/env python3
"""JAX (CPU) twin of forgia's main training job: a small CNN on mnist_5k.

Twin of bench/torch_mnist.py (same data, split, model, init, loss, optimizer, batching). The
command line, the data split and the output lines are bench/mnist_twin.py, shared by both twins
(keep it beside this file).

Data:   data/mnist_5k.csv.gz (gzip CSV, no header; 784 grey levels 0..255 then the label).
        Fixed stratified split: within each digit, in file order, the first 400 rows train
        and the last 100 test (4000 / 1000). Pixels scaled to [0, 1], nothing else.
Model:  conv 1->32 5x5 pad 2, maxpool 2, relu -> conv 32->64 5x5 pad 2, maxpool 2, relu
        -> dropout 0.25 -> flatten (C,H,W order, as torch) -> linear 3136->128, relu,
        dropout 0.25 -> linear 128->10.  NCHW activations, OIHW / (out,in) weights.
Init:   PyTorch defaults: kaiming_uniform(a=sqrt(5)) weights, i.e. U(+-1/sqrt(fan_in)),
        and biases U(+-1/sqrt(fan_in)), fan_in = in_channels*kh*kw or in_features.
Train:  mean cross-entropy, Adam (torch.optim.Adam update: lr 1e-3, betas 0.9/0.999,
        eps 1e-8, no weight decay, hand-written below), batch 64, training set reshuffled
        every epoch (numpy default_rng(seed)), last partial batch (32 rows) kept.
        Dropout is inverted dropout (kept units scaled by 1/(1-p)), as in torch.

Output: one line per epoch
            epoch=<e> train_loss=<mean over samples> test_acc=<pct> epoch_s=<s> elapsed_s=<s>
        then one summary line
            twin=jax seed=<s> epochs=<n> test_acc=<pct> seconds=<t>
        `seconds` / `elapsed_s` count training + per-epoch evaluation only.  The jitted
        train step (both batch shapes, 64 and 32) and the eval function are compiled
        ahead of time before the clock starts; that compile time is printed separately
        (compile_s=...) so it does not pollute epoch 1.

Usage (from the repo root, with the reference venv):
    .venv/bin/python bench/jax_mnist.py [--epochs 10] [--seed 0] [--threads 2] [--data PATH]

Threading: --threads N (default 2, or $FORGIA_BENCH_THREADS) restricts the process to the
first N allowed CPUs with sched_setaffinity *before* jax is imported (XLA sizes its thread
pools from the affinity mask); N == 1 also adds --xla_cpu_multi_thread_eigen=false.
XLA_FLAGS always gets --xla_force_host_platform_device_count=1; flags already in the
environment are kept.
"""
import os
import time

from mnist_twin import load_mnist, parse_args, report_epoch, report_total

BATCH = 64
LR, BETA1, BETA2, EPS = 1e-3, 0.9, 0.999, 1e-8
P_DROP = 0.25


def setup_threads(n):
    cpus = sorted(os.sched_getaffinity(0))
    os.sched_setaffinity(0, cpus[:max(1, n)])
    flags = ["--xla_force_host_platform_device_count=1"]
    if n == 1:
        flags.append("--xla_cpu_multi_thread_eigen=false")
    old = os.environ.get("XLA_FLAGS", "")
    os.environ["XLA_FLAGS"] = " ".join(flags + ([old] if old else []))
    os.environ.setdefault("JAX_PLATFORMS", "cpu")


def main():
    args = parse_args(__doc__)
    setup_threads(args.threads)

    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax import lax

    xtr, ytr, xte, yte = load_mnist(args.data)
    ytr, yte = ytr.astype(np.int32), yte.astype(np.int32)
    n_train = len(ytr)

    # ------------------------------------------------------------------ model
    def uniform(k, shape, fan_in):
        bound = 1.0 / np.sqrt(fan_in)  # kaiming_uniform(a=sqrt(5)) bound == bias bound
        return jax.random.uniform(k, shape, jnp.float32, -bound, bound)

    def init(key):
        k = jax.random.split(key, 8)
        return {
            "c1w": uniform(k[0], (32, 1, 5, 5), 1 * 25), "c1b": uniform(k[1], (32,), 1 * 25),
            "c2w": uniform(k[2], (64, 32, 5, 5), 32 * 25), "c2b": uniform(k[3], (64,), 32 * 25),
            "f1w": uniform(k[4], (128, 3136), 3136), "f1b": uniform(k[5], (128,), 3136),
            "f2w": uniform(k[6], (10, 128), 128), "f2b": uniform(k[7], (10,), 128),
        }

    def conv(x, w, b):
        y = lax.conv_general_dilated(x, w, (1, 1), ((2, 2), (2, 2)),
                                     dimension_numbers=("NCHW", "OIHW", "NCHW"))
        return y + b[None, :, None, None]

    def pool(x):
        return lax.reduce_window(x, -jnp.inf, lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")

    def dropout(x, key):
        keep = jax.random.bernoulli(key, 1.0 - P_DROP, x.shape)
        return jnp.where(keep, x / (1.0 - P_DROP), 0.0)

    def forward(p, x, key=None):
        h = jax.nn.relu(pool(conv(x, p["c1w"], p["c1b"])))
        h = jax.nn.relu(pool(conv(h, p["c2w"], p["c2b"])))
        if key is not None:
            k1, k2 = jax.random.split(key)
            h = dropout(h, k1)
        h = h.reshape(h.shape[0], -1)  # (N, 64*7*7), C-H-W order as torch.flatten
        h = jax.nn.relu(h @ p["f1w"].T + p["f1b"])
        if key is not None:
            h = dropout(h, k2)
        return h @ p["f2w"].T + p["f2b"]

    def loss_fn(p, x, y, key):
        lp = jax.nn.log_softmax(forward(p, x, key), axis=-1)
        return -jnp.mean(jnp.take_along_axis(lp, y[:, None], axis=-1))

    def train_step(state, x, y, key):
        p, m, v, t = state
        loss, g = jax.value_and_grad(loss_fn)(p, x, y, key)
        t = t + 1
        m = jax.tree_util.tree_map(lambda m, g: BETA1 * m + (1 - BETA1) * g, m, g)
        v = jax.tree_util.tree_map(lambda v, g: BETA2 * v + (1 - BETA2) * g * g, v, g)
        bc1, bc2 = 1 - BETA1 ** t, 1 - BETA2 ** t
        # torch.optim.Adam (non-fused, non-amsgrad): p -= lr/bc1 * m / (sqrt(v)/sqrt(bc2) + eps)
        p = jax.tree_util.tree_map(
            lambda p, m, v: p - (LR / bc1) * m / (jnp.sqrt(v) / jnp.sqrt(bc2) + EPS), p, m, v)
        return (p, m, v, t), loss

    def n_correct(p, x, y):
        return jnp.sum(jnp.argmax(forward(p, x), axis=-1) == y)

    # ------------------------------------------------------------------ setup
    root = jax.random.PRNGKey(args.seed)
    k_init, k_drop = jax.random.split(root)
    params = init(k_init)
    def zeros():  # distinct buffers for m and v (the state is donated to the step)
        return jax.tree_util.tree_map(jnp.zeros_like, params)

    state = (params, zeros(), zeros(), jnp.zeros((), jnp.float32))

    t0 = time.perf_counter()
    step_jit = jax.jit(train_step, donate_argnums=0)
    eval_jit = jax.jit(n_correct)
    kspec = jax.random.PRNGKey(0)
    compiled = {}
    last = n_train % BATCH
    for bs in sorted({BATCH} | ({last} if last else set())):
        compiled[bs] = step_jit.lower(state, jnp.zeros((bs, 1, 28, 28), jnp.float32),
                                      jnp.zeros((bs,), jnp.int32), kspec).compile()
    EVAL_BS = 500
    assert len(yte) % EVAL_BS == 0
    eval_c = eval_jit.lower(params, jnp.zeros((EVAL_BS, 1, 28, 28), jnp.float32),
                            jnp.zeros((EVAL_BS,), jnp.int32)).compile()
    compile_s = time.perf_counter() - t0
    print(f"# twin=jax jax={jax.__version__} threads={args.threads} cpus={sorted(os.sched_getaffinity(0))} "
          f"train={n_train} test={len(yte)} batch={BATCH} compile_s={compile_s:.2f} "
          f"XLA_FLAGS={os.environ['XLA_FLAGS']!r}", flush=True)

    xte_d = [jnp.asarray(xte[i:i + EVAL_BS]) for i in range(0, len(yte), EVAL_BS)]
    yte_d = [jnp.asarray(yte[i:i + EVAL_BS]) for i in range(0, len(yte), EVAL_BS)]

    def test_acc(p):
        c = sum(int(eval_c(p, x, y)) for x, y in zip(xte_d, yte_d))
        return 100.0 * c / len(yte)

    # ------------------------------------------------------------------ train
    rng = np.random.default_rng(args.seed)
    step = 0
    acc = float("nan")
    start = time.perf_counter()
    for epoch in range(1, args.epochs + 1):
        te0 = time.perf_counter()
        perm = rng.permutation(n_train)
        losses = []
        for i in range(0, n_train, BATCH):
            idx = perm[i:i + BATCH]
            state, loss = compiled[len(idx)](state, xtr[idx], ytr[idx], jax.random.fold_in(k_drop, step))
            losses.append((loss, len(idx)))
            step += 1
        train_loss = sum(float(l) * n for l, n in losses) / n_train
        acc = test_acc(state[0])
        now = time.perf_counter()
        report_epoch(epoch, train_loss, acc, now - te0, now - start)
    report_total("jax", args.seed, args.epochs, acc, time.perf_counter() - start)


if __name__ == "__main__":
    main()
