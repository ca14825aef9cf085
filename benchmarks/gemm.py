"""aotc's MatMul against onnxruntime's, one-node models with a constant B, plus the FMA
peak of one core.

    python benchmarks/gemm.py [--threads 1 2] [--calls 200] [--clock wall|cpu] [--target native]

Both runtimes get the same thread count and are called alternately, in blocks of calls
(timing.interleaved), so a busy machine slows both alike; each GFLOP/s figure is the
median over the calls, `ratio` their ratio, and `paired` one over the median, over
pairs of blocks, of aotc's time over onnxruntime's (models.py's paired ratio turned into
a ratio of speeds; steadier where the machine is busy in waves). `--clock cpu` times
the calling thread's CPU time instead of the wall clock (meaningful at one thread only,
where the caller does all the work; it ignores time lost to other processes).
The peak is a loop of independent FMAs on one core (24 zmm chains, or 12 ymm without
AVX-512), compiled through cffi with -march=native.
"""
import argparse
import os
import statistics
import sys
import time

import numpy as np
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import aotc  # noqa: E402
import native  # noqa: E402
from timing import interleaved  # noqa: E402

SHAPES = [(1024, 1024, 1024), (128, 768, 768), (128, 3072, 768), (64, 1024, 1024),
          (3136, 64, 576), (1, 1024, 784)]

PEAK_C = r"""
#include <immintrin.h>
#include <stdint.h>
#if defined(__AVX512F__)
#define CHAINS 24
#define V __m512
#define SET1 _mm512_set1_ps
#define FMA _mm512_fmadd_ps
#define LANES 16
#else
#define CHAINS 12
#define V __m256
#define SET1 _mm256_set1_ps
#define FMA _mm256_fmadd_ps
#define LANES 8
#endif
/* Floating-point operations done: iters * CHAINS * LANES * 2. */
double peak_fma(int64_t iters, float *sink) {
  V acc[CHAINS], m = SET1(0.999999f), c = SET1(1e-6f);
  int64_t n;
  int i;
  for (i = 0; i < CHAINS; i++) acc[i] = SET1((float)i);
  for (n = 0; n < iters; n++) {
#pragma GCC unroll 24
    for (i = 0; i < CHAINS; i++) acc[i] = FMA(acc[i], m, c);
  }
  for (i = 1; i < CHAINS; i++) acc[0] = FMA(acc[i], m, acc[0]);
  *sink = ((float *)&acc[0])[0];
  return (double)iters * CHAINS * LANES * 2;
}
"""


def peak_gflops(seconds=0.3, repeats=7):
    """The FMA peak of the core this thread runs on, median of `repeats` timings."""
    module = native.load("_aotc_bench_peak", "double peak_fma(int64_t iters, float *sink);", PEAK_C,
                         extra_compile_args=["-O2", "-march=native"])
    sink = module.ffi.new("float *")
    iters = 1 << 16
    while True:   # calibrate to about `seconds` per timing
        t = time.thread_time()
        module.lib.peak_fma(iters, sink)
        if time.thread_time() - t > seconds / 4:
            break
        iters *= 2
    rates = []
    for _ in range(repeats):
        t = time.thread_time()
        flops = module.lib.peak_fma(iters * 4, sink)
        rates.append(flops / (time.thread_time() - t) / 1e9)
    return statistics.median(rates)


def matmul_model(M, N, K, b):
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["a", "b"], ["y"])], "gemm",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, [M, K])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [M, N])],
        [numpy_helper.from_array(b, "b")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def ort_session(model, threads):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])


def compare(M, N, K, threads, calls, clock, target):
    """(aotc GFLOP/s, onnxruntime GFLOP/s, paired ratio): medians over about `calls`
    calls each, the two alternating in blocks (timing.interleaved)."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((M, K), np.float32)
    b = rng.standard_normal((K, N), np.float32)
    model = matmul_model(M, N, K, b)
    ours = aotc.compile(model, threads=threads, target=target)
    theirs = ort_session(model, threads)
    run_ours = lambda: ours.run(a)   # noqa: E731
    run_theirs = lambda: theirs.run(None, {"a": a})   # noqa: E731
    np.testing.assert_allclose(run_ours(), run_theirs()[0], rtol=1e-3, atol=1e-3)
    mine, other, time_ratio = interleaved(run_ours, run_theirs, warmup=3, runs=calls,
                                          block=max(5, calls // 20), clock=clock)
    flops = 2.0 * M * N * K
    return flops / mine / 1e9, flops / other / 1e9, 1.0 / time_ratio


def calls_for(M, N, K, budget):
    """Calls per shape: about `budget` GFLOP of work each side, between 20 and 2000."""
    return int(min(2000, max(20, budget * 1e9 / (2.0 * M * N * K))))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--budget", type=float, default=40.0, help="GFLOP per shape and side")
    parser.add_argument("--clock", choices=["wall", "cpu"], default="wall")
    parser.add_argument("--target", default="native")
    parser.add_argument("--no-peak", action="store_true")
    args = parser.parse_args()
    if not args.no_peak:
        print(f"peak FMA, one core: {peak_gflops():.1f} GFLOP/s")
    print(f"clock={args.clock}, target={args.target}; GFLOP/s, median of calls in alternating blocks")
    print(f"{'threads':>7} {'M':>5} {'N':>5} {'K':>5} {'aotc':>8} {'ort':>8} {'ratio':>6} {'paired':>6}")
    for threads in args.threads:
        clock = time.thread_time if args.clock == "cpu" and threads == 1 else time.perf_counter
        for M, N, K in SHAPES:
            ours, theirs, paired = compare(M, N, K, threads, calls_for(M, N, K, args.budget), clock,
                                           args.target)
            print(f"{threads:>7} {M:>5} {N:>5} {K:>5} {ours:>8.1f} {theirs:>8.1f} {ours / theirs:>6.3f} "
                  f"{paired:>6.3f}", flush=True)


if __name__ == "__main__":
    main()
