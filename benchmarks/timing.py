"""Side-by-side timing of two runtimes in one process, shared by the benchmarks."""
import resource
import statistics
import time

SETTLE_S = 0.05  # before a block: the other runtime's threads stop spinning and sleep,
QUIET_S = 0.005  # then until a window this long passes with the process nearly idle
QUIET_MAX_S = 1.0   # (given up after this long: another program may be busy)
LEAD_S = 0.005   # then untimed calls, at least this long: this runtime's threads and
                 # the cores wake up


def _process_cpu_s():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def settle():
    """Sleep until the process's threads are idle: onnxruntime's spin for about 40 ms
    after a call, a fixed pause of 50 ms was not always enough, and a spinning thread
    left over shares a core with the next block (a 2-thread MLP ran at its 1-thread
    speed in some blocks)."""
    time.sleep(SETTLE_S)
    give_up = time.perf_counter() + QUIET_MAX_S
    while time.perf_counter() < give_up:
        cpu, wall = _process_cpu_s(), time.perf_counter()
        time.sleep(QUIET_S)
        if _process_cpu_s() - cpu < 0.2 * (time.perf_counter() - wall):
            return


def interleaved(run_a, run_b, warmup, runs, block=5, clock=time.perf_counter, label=None, pairs=None):
    """Medians (s) of run_a and run_b over about `runs` timed calls each, and the median
    ratio of paired block medians. With `label` (a function) and `pairs` (a list), each
    pair of blocks appends (label() called before it, its a/b ratio) to `pairs`.

    The two alternate in blocks of `block` timed calls (which goes first alternates
    too). A pool's threads spin for a while after a call (onnxruntime's for
    milliseconds): a call timed right after the other runtime's would share the cores
    with its spinning threads. So each block starts once the process is idle
    (settle), with untimed calls that wake its own threads."""
    def timed_block(fn):
        settle()
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
    ta, tb, ratios = [], [], []
    for i in range(-(-runs // block)):
        if label is not None:   # (measured with this process's threads idle)
            settle()
            tag = label()
        if i % 2 == 0:
            a, b = timed_block(run_a), timed_block(run_b)
        else:
            b, a = timed_block(run_b), timed_block(run_a)
        ta += a
        tb += b
        ratios.append(statistics.median(a) / statistics.median(b))
        if label is not None:
            pairs.append((tag, ratios[-1]))
    return statistics.median(ta), statistics.median(tb), statistics.median(ratios)
