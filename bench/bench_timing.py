"""The timing rules of `forgia bench`, shared by the PyTorch twins run with bench/alternate.sh,
and the command line of the ResNet-18 twins."""
import argparse
import statistics
import time

import torch


def _times_ms(reps, f, seconds):
    """One warm-up call of f, then timed calls in milliseconds: at least `reps`, or more until
    `seconds` have passed (at most 1,000)."""
    f()
    times, start = [], time.perf_counter()
    while len(times) < reps or (time.perf_counter() - start < seconds and len(times) < 1000):
        t = time.perf_counter()
        f()
        times.append((time.perf_counter() - t) * 1e3)
    return times


def median_ms(reps, f):
    """`forgia bench`'s rule: at least `reps` timed calls, or more until about 3 s have passed;
    their median."""
    return statistics.median(_times_ms(reps, f, 3.0))


def fixed_median_ms(reps, f):
    """Exactly `reps` timed calls (at least one): the median in milliseconds, the upper of the
    two middle times for an even count, as W12conv's `median_of` takes it
    (`crates/forgia-cli/src/bench/convs.rs`). W12conv's rule, whose 32 products at 3 s each
    would last minutes."""
    times = sorted(_times_ms(max(reps, 1), f, 0.0))
    return times[len(times) // 2]


def resnet_args():
    """The ResNet-18 twins' options (--threads, default 2; --reps, default 10; --sizes B,S,
    default 8,224), with PyTorch set to those threads and one inter-op thread, seeded with
    12: returns (args, batch, image side)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--sizes", default="8,224", help="batch and image side as B,S")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.set_num_interop_threads(1)
    b, side = (int(v) for v in args.sizes.split(","))
    torch.manual_seed(12)
    return args, b, side
