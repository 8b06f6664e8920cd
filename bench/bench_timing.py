"""The timing rule of `forgia bench`, shared by the PyTorch twins run with bench/alternate.sh:
one warm-up call, then at least `reps` timed calls, or more until about 3 s have passed (at
most 1,000); the median in milliseconds."""
import statistics
import time


def median_ms(reps, f):
    f()
    times, start = [], time.perf_counter()
    while len(times) < reps or (time.perf_counter() - start < 3.0 and len(times) < 1000):
        t = time.perf_counter()
        f()
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)
