#!/usr/bin/env python3
"""JAX (CPU) twin of the forgia benchmark workload suite (W1..W7).

Prints exactly one line per workload:

    name=<W> impl=jax median_ms=<x> extra=<k=v,...>

Usage (from the repo root, using the reference venv):

    .venv/bin/python bench/jax_twin.py [--threads N] [--reps R] [--warmup K] W2 W3 W5

Workload names: W1 (eager grad, op-by-op dispatch), W1jit (same graph, jitted;
compile of a 30k-op graph is slow), W2, W3, W4, W5, W6, W7, W7ckpt.  With no
names, runs W1 W2 W3 W4 W5 W6 W7 W7ckpt.

Threading: --threads N (default 1, or $FORGIA_BENCH_THREADS) restricts the process
to the first N allowed CPUs with sched_setaffinity *before* jax is imported (XLA
sizes its thread pools from the affinity mask).  For N == 1 it additionally sets
    XLA_FLAGS="--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
so Eigen matmuls/convs run single-threaded.  Any XLA_FLAGS already in the
environment are kept (appended after ours).

Every workload: `warmup` untimed calls (the first one compiles), then the
median of `reps` (>= 10) timed calls, each ended with block_until_ready().
All data is float32.
"""
import argparse
import os
import statistics
import sys
import time

ALL = ["W1", "W2", "W3", "W4", "W5", "W6", "W7", "W7ckpt"]


def setup_threads(n):
    cpus = sorted(os.sched_getaffinity(0))
    os.sched_setaffinity(0, cpus[:max(1, n)])
    flags = os.environ.get("XLA_FLAGS", "")
    if n == 1:
        flags = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1 " + flags
    os.environ["XLA_FLAGS"] = flags.strip()
    os.environ.setdefault("JAX_PLATFORMS", "cpu")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("workloads", nargs="*", default=ALL)
    ap.add_argument("--threads", type=int, default=int(os.environ.get("FORGIA_BENCH_THREADS", "1")))
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    args = ap.parse_args()
    setup_threads(args.threads)

    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax import lax

    reps = max(10, args.reps)
    key = jax.random.PRNGKey(0)

    def keys(n):
        nonlocal key
        key, *ks = jax.random.split(key, n + 1)
        return ks

    def bench(fn, state=None):
        """fn(state) -> new state (or result); returns median ms."""
        s = state
        for _ in range(args.warmup):
            s = fn(s) if state is not None else fn(None)
            jax.block_until_ready(s)
        ts = []
        for _ in range(reps):
            t0 = time.perf_counter()
            s = fn(s) if state is not None else fn(None)
            jax.block_until_ready(s)
            ts.append((time.perf_counter() - t0) * 1e3)
        return statistics.median(ts)

    def emit(name, ms, **extra):
        ex = ",".join(f"{k}={v}" for k, v in extra.items())
        print(f"name={name} impl=jax median_ms={ms:.3f} extra={ex}", flush=True)

    def linear_init(k, fan_in, fan_out):
        kw, kb = jax.random.split(k)
        bound = 1.0 / np.sqrt(fan_in)
        return (jax.random.uniform(kw, (fan_out, fan_in), jnp.float32, -bound, bound),
                jax.random.uniform(kb, (fan_out,), jnp.float32, -bound, bound))

    def linear(p, x):
        w, b = p
        return x @ w.T + b

    def ce(logits, labels):
        lp = jax.nn.log_softmax(logits, axis=-1)
        return -jnp.mean(jnp.take_along_axis(lp, labels[..., None], axis=-1))

    def sgd(params, grads, lr):
        return jax.tree_util.tree_map(lambda p, g: p - lr * g, params, grads)

    common = {"threads": args.threads}

    # ---------------------------------------------------------------- W1
    W1_OPS = 10_000

    def w1_f(x):
        for i in range(W1_OPS):
            r = i % 3
            if r == 0:
                x = x * 1.0001
            elif r == 1:
                x = x + 0.001
            else:
                x = jnp.tanh(x)
        return jnp.sum(x)

    def run_w1(jit):
        x = jax.random.normal(keys(1)[0], (16,), jnp.float32)
        g = jax.grad(w1_f)
        if jit:
            g = jax.jit(g)
        ms = bench(lambda _: g(x), state=None)
        emit("W1jit" if jit else "W1", ms, us_per_op=f"{ms * 1e3 / W1_OPS:.3f}", ops=W1_OPS,
             mode="jit" if jit else "eager", **common)

    # ---------------------------------------------------------------- W2
    def run_w2():
        k = keys(5)
        params = [linear_init(k[0], 784, 1024), linear_init(k[1], 1024, 1024), linear_init(k[2], 1024, 10)]
        x = jax.random.normal(k[3], (256, 784), jnp.float32)
        y = jax.random.randint(k[4], (256,), 0, 10)

        def loss(ps):
            h = jax.nn.relu(linear(ps[0], x))
            h = jax.nn.relu(linear(ps[1], h))
            return ce(linear(ps[2], h), y)

        @jax.jit
        def step(ps):
            return sgd(ps, jax.grad(loss)(ps), 0.01)

        ms = bench(step, params)
        flops = 3 * 2 * 256 * (784 * 1024 + 1024 * 1024 + 1024 * 10)
        emit("W2", ms, ms_per_step=f"{ms:.3f}", gflops=f"{flops / ms / 1e6:.2f}", **common)

    # ---------------------------------------------------------------- W3
    def run_w3():
        k = keys(9)
        x = jax.random.normal(k[0], (512, 1024), jnp.float32)
        s = 1.0 / np.sqrt(1024)
        Ws = [jax.random.normal(k[1 + i], (1024, 1024), jnp.float32) * s for i in range(4)]
        Vs = [jax.random.normal(k[5 + i], (1024, 1024), jnp.float32) * s for i in range(4)]

        def loss(ps):
            Ws, Vs = ps
            return sum(jnp.sum(jnp.tanh(x @ W) @ V) for W, V in zip(Ws, Vs))

        g = jax.jit(jax.grad(loss))
        ms = bench(lambda _: g((Ws, Vs)), state=None)
        # 2 fwd matmuls + 3 bwd matmuls (dV, dH, dW; x is constant) per branch
        flops = 4 * 5 * 2 * 512 * 1024 * 1024
        emit("W3", ms, gflops=f"{flops / ms / 1e6:.2f}", flop_model="4x5_matmuls", **common)

    # ---------------------------------------------------------------- W4
    def run_w4():
        k = keys(6)

        def conv_init(k, cin, cout, ksz):
            kw, kb = jax.random.split(k)
            bound = 1.0 / np.sqrt(cin * ksz * ksz)
            return (jax.random.uniform(kw, (cout, cin, ksz, ksz), jnp.float32, -bound, bound),
                    jax.random.uniform(kb, (cout,), jnp.float32, -bound, bound))

        params = [conv_init(k[0], 1, 32, 3), conv_init(k[1], 32, 64, 3), linear_init(k[2], 1600, 10)]
        x = jax.random.normal(k[3], (64, 1, 28, 28), jnp.float32)
        y = jax.random.randint(k[4], (64,), 0, 10)

        def conv(p, x):
            w, b = p
            return lax.conv_general_dilated(x, w, (1, 1), "VALID",
                                            dimension_numbers=("NCHW", "OIHW", "NCHW")) + b[None, :, None, None]

        def pool(x):
            return lax.reduce_window(x, -jnp.inf, lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")

        def loss(ps):
            h = pool(jax.nn.relu(conv(ps[0], x)))
            h = pool(jax.nn.relu(conv(ps[1], h)))
            return ce(linear(ps[2], h.reshape(64, -1)), y)

        @jax.jit
        def step(ps):
            return sgd(ps, jax.grad(loss)(ps), 0.01)

        ms = bench(step, params)
        emit("W4", ms, ms_per_step=f"{ms:.3f}", **common)

    # ---------------------------------------------------------------- W5
    def run_w5():
        k = keys(2)
        A = jax.random.normal(k[0], (2048, 2048), jnp.float32)
        B = jax.random.normal(k[1], (2048, 2048), jnp.float32)
        mm = jax.jit(jnp.matmul)
        ms = bench(lambda _: mm(A, B), state=None)
        emit("W5", ms, gflops=f"{2 * 2048 ** 3 / ms / 1e6:.2f}", **common)

    # ---------------------------------------------------------------- W6
    def run_w6():
        V, T, D, L, H, Bsz = 65, 64, 128, 4, 4, 32
        k = keys(4 + 6 * L)
        ki = iter(k)

        def ln_init():
            return (jnp.ones((D,), jnp.float32), jnp.zeros((D,), jnp.float32))

        params = {
            "tok": jax.random.normal(next(ki), (V, D), jnp.float32) * 0.02,
            "pos": jax.random.normal(next(ki), (T, D), jnp.float32) * 0.02,
            "lnf": ln_init(),
            "head": linear_init(next(ki), D, V),
            "layers": [{"ln1": ln_init(), "ln2": ln_init(),
                        "qkv": linear_init(next(ki), D, 3 * D), "o": linear_init(next(ki), D, D),
                        "fc1": linear_init(next(ki), D, 4 * D), "fc2": linear_init(next(ki), 4 * D, D)}
                       for _ in range(L)],
        }
        idx = jax.random.randint(next(ki), (Bsz, T), 0, V)
        tgt = jax.random.randint(next(ki), (Bsz, T), 0, V)
        causal = jnp.tril(jnp.ones((T, T), bool))

        def ln(p, x):
            mu = jnp.mean(x, -1, keepdims=True)
            var = jnp.mean((x - mu) ** 2, -1, keepdims=True)
            return (x - mu) * lax.rsqrt(var + 1e-5) * p[0] + p[1]

        def attn(p, x):
            qkv = linear(p["qkv"], x).reshape(Bsz, T, 3, H, D // H).transpose(2, 0, 3, 1, 4)
            q, kk, v = qkv[0], qkv[1], qkv[2]
            s = jnp.einsum("bhqd,bhkd->bhqk", q, kk) / np.sqrt(D // H)
            s = jnp.where(causal, s, -jnp.inf)
            a = jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(s, -1), v)
            return linear(p["o"], a.transpose(0, 2, 1, 3).reshape(Bsz, T, D))

        def loss(ps):
            x = ps["tok"][idx] + ps["pos"][None]
            for lp in ps["layers"]:
                x = x + attn(lp, ln(lp["ln1"], x))
                x = x + linear(lp["fc2"], jax.nn.gelu(linear(lp["fc1"], ln(lp["ln2"], x)), approximate=False))
            return ce(linear(ps["head"], ln(ps["lnf"], x)), tgt)

        lr, b1, b2, eps, wd = 3e-4, 0.9, 0.999, 1e-8, 0.01
        zeros = jax.tree_util.tree_map(jnp.zeros_like, params)
        state = (params, zeros, zeros, jnp.zeros((), jnp.float32))

        @jax.jit
        def step(st):  # torch.optim.AdamW update
            ps, m, v, t = st
            t = t + 1
            g = jax.grad(loss)(ps)
            m = jax.tree_util.tree_map(lambda m, g: b1 * m + (1 - b1) * g, m, g)
            v = jax.tree_util.tree_map(lambda v, g: b2 * v + (1 - b2) * g * g, v, g)
            bc1, bc2 = 1 - b1 ** t, 1 - b2 ** t
            ps = jax.tree_util.tree_map(
                lambda p, m, v: p * (1 - lr * wd) - (lr / bc1) * m / (jnp.sqrt(v) / jnp.sqrt(bc2) + eps),
                ps, m, v)
            return ps, m, v, t

        ms = bench(step, state)
        emit("W6", ms, ms_per_step=f"{ms:.3f}", tokens_per_s=f"{Bsz * T / ms * 1e3:.0f}", **common)

    # ---------------------------------------------------------------- W7
    def run_w7(ckpt):
        nb, Bsz, D, F = 16, 4096, 256, 1024
        k = keys(nb * 2 + 1)
        params = [(linear_init(k[2 * i], D, F), linear_init(k[2 * i + 1], F, D)) for i in range(nb)]
        x = jax.random.normal(k[-1], (Bsz, D), jnp.float32)

        def block(p, x):
            return x + linear(p[1], jax.nn.gelu(linear(p[0], x), approximate=False))

        blk = jax.checkpoint(block) if ckpt else block

        def loss(ps):
            h = x
            for p in ps:
                h = blk(p, h)
            return jnp.mean(h ** 2)

        g = jax.jit(jax.grad(loss))
        ms = bench(lambda _: g(params), state=None)
        flops = nb * 3 * 2 * 2 * Bsz * D * F  # fwd + 2x bwd, dx needed through the chain
        emit("W7ckpt" if ckpt else "W7", ms, gflops=f"{flops / ms / 1e6:.2f}", **common)

    table = {"W1": lambda: run_w1(False), "W1jit": lambda: run_w1(True), "W2": run_w2, "W3": run_w3,
             "W4": run_w4, "W5": run_w5, "W6": run_w6, "W7": lambda: run_w7(False),
             "W7ckpt": lambda: run_w7(True)}
    for w in args.workloads:
        if w not in table:
            sys.exit(f"unknown workload {w}; choose from {sorted(table)}")
        table[w]()


if __name__ == "__main__":
    main()
