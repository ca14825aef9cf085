"""Side-by-side timing of two runtimes in one process, shared by the benchmarks."""
import statistics
import time

SETTLE_S = 0.05  # before a block: the other runtime's threads stop spinning and sleep
LEAD_S = 0.005   # then untimed calls, at least this long: this runtime's threads and
                 # the cores wake up


def interleaved(run_a, run_b, warmup, runs, block=5, clock=time.perf_counter):
    """Medians (s) of run_a and run_b over about `runs` timed calls each, and the median
    ratio of paired block medians.

    The two alternate in blocks of `block` timed calls (which goes first alternates
    too). A pool's threads spin for a while after a call (onnxruntime's for
    milliseconds): a call timed right after the other runtime's would share the cores
    with its spinning threads. So each block starts after a pause, with untimed calls
    that wake its own threads."""
    def timed_block(fn):
        time.sleep(SETTLE_S)
        lead_until = time.perf_counter() + LEAD_S
        fn()
        while time.perf_counter() < lead_until:
            fn()
        times = []
        for _ in range(block):
            t = clock()
            fn()
            times.append(clock() - t)
        return times

    for _ in range(warmup):
        run_a()
        run_b()
    ta, tb, pairs = [], [], []
    for i in range(-(-runs // block)):
        if i % 2 == 0:
            a, b = timed_block(run_a), timed_block(run_b)
        else:
            b, a = timed_block(run_b), timed_block(run_a)
        ta += a
        tb += b
        pairs.append(statistics.median(a) / statistics.median(b))
    return statistics.median(ta), statistics.median(tb), statistics.median(pairs)
