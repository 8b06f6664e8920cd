"""What the two twins of forgia's main training job (bench/torch_mnist.py, bench/jax_mnist.py)
share: the command line, the mnist_5k split and the report lines, so the twins cannot drift
apart on data or output format.

Each twin imports it from its own folder (Python puts a script's folder first on `sys.path`),
so `python bench/torch_mnist.py` and `python bench/jax_mnist.py` run from any directory; copy
this file along with a twin to run it elsewhere. numpy is imported inside `load_mnist`, not at
the top: jax_mnist.py must restrict the process's CPUs before numpy (or jax) starts any
thread pool.
"""
import argparse
import gzip
import os

TRAIN_PER_DIGIT, ROWS_PER_DIGIT = 400, 500


def parse_args(doc):
    """`--epochs` (10), `--seed` (0), `--threads` (2, or $FORGIA_BENCH_THREADS) and `--data`
    (data/mnist_5k.csv.gz of this repository), with `doc` as the help text."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=int(os.environ.get("FORGIA_BENCH_THREADS", "2")))
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--data", default=os.path.join(here, "..", "data", "mnist_5k.csv.gz"))
    return ap.parse_args()


def load_mnist(path):
    """(x_train, y_train, x_test, y_test) as numpy arrays: pixels float32 [N, 1, 28, 28] scaled
    to [0, 1], labels int64. The fixed stratified split: within each digit, in file order, the
    first 400 rows train and the last 100 test (4000 / 1000)."""
    import numpy as np

    with gzip.open(path, "rt") as f:
        raw = np.loadtxt(f, delimiter=",", dtype=np.int64)
    assert raw.shape == (5000, 785), raw.shape
    pixels, labels = raw[:, :784], raw[:, 784]
    tr, te = [], []
    for d in range(10):
        rows = np.flatnonzero(labels == d)  # file order
        assert len(rows) == ROWS_PER_DIGIT, (d, len(rows))
        tr.append(rows[:TRAIN_PER_DIGIT])
        te.append(rows[TRAIN_PER_DIGIT:])
    tr, te = np.concatenate(tr), np.concatenate(te)

    def take(idx):
        x = (pixels[idx].astype(np.float32) / 255.0).reshape(-1, 1, 28, 28)
        return np.ascontiguousarray(x), labels[idx].astype(np.int64)

    return take(tr) + take(te)


def report_epoch(epoch, train_loss, test_acc, epoch_s, elapsed_s):
    """The per-epoch line both twins print."""
    print(f"epoch={epoch} train_loss={train_loss:.4f} test_acc={test_acc:.2f} "
          f"epoch_s={epoch_s:.2f} elapsed_s={elapsed_s:.2f}", flush=True)


def report_total(twin, seed, epochs, test_acc, seconds):
    """The summary line both twins end with."""
    print(f"twin={twin} seed={seed} epochs={epochs} test_acc={test_acc:.2f} seconds={seconds:.2f}", flush=True)
