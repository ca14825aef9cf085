"""GFLOP/s of aotc's MatMul against numpy, single thread by default.

    python benchmarks/gemm_quick.py [--threads N]
"""
import argparse
import time

import numpy as np
from onnx import helper, numpy_helper, TensorProto

import aotc

SHAPES = [(1024, 1024, 1024), (128, 768, 768), (128, 3072, 768), (1, 4096, 1024), (1, 1000, 2048)]


def _model(M, N, K, const_b):
    inputs = [helper.make_tensor_value_info("a", TensorProto.FLOAT, [M, K])]
    inits = []
    if const_b is None:
        inputs.append(helper.make_tensor_value_info("b", TensorProto.FLOAT, [K, N]))
    else:
        inits.append(numpy_helper.from_array(const_b, "b"))
    graph = helper.make_graph([helper.make_node("MatMul", ["a", "b"], ["y"])], "gemm", inputs,
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [M, N])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _best(fn, flops, seconds=0.5):
    fn()
    best, end = float("inf"), time.perf_counter() + seconds
    while time.perf_counter() < end:
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return flops / best / 1e9


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    print(f"threads={args.threads}   GFLOP/s: aotc (B input) | aotc (B constant, packed) | numpy")
    for M, N, K in SHAPES:
        a = rng.standard_normal((M, K), np.float32)
        b = rng.standard_normal((K, N), np.float32)
        flops = 2.0 * M * N * K
        plain = aotc.compile(_model(M, N, K, None), threads=args.threads)
        packed = aotc.compile(_model(M, N, K, b), threads=args.threads)
        feeds = {"a": a, "b": b}
        r1 = _best(lambda: plain.run(feeds), flops)
        r2 = _best(lambda: packed.run({"a": a}), flops)
        r3 = _best(lambda: a @ b, flops)
        print(f"{M:5d} x {N:5d} x {K:5d}: {r1:7.1f} | {r2:7.1f} | {r3:7.1f}")


if __name__ == "__main__":
    main()
