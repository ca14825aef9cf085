"""Two aotc checkouts side by side on one model: the figure behind a kernel change.

    python benchmarks/builds.py --a CHECKOUT_A --b CHECKOUT_B
                                (--model NAME | --conv SPEC | --matmul M,N,K)
                                [--threads 1] [--runs 60] [--repeats 3]

--model is one of ../shared/models/make_models.py's networks in --models-dir (or
$AOTC_MODELS_DIR); --conv builds one Conv -> [Add ->] Relu as "cin,cout,size,kernel,stride"
with ",add" for a residual, ",dw" for a depthwise conv (group = cin = cout); square input,
pads kernel // 2; --matmul builds one MatMul of an M x K input by a constant K x N matrix
(benchmarks/gemm.py's model). Each checkout compiles the model in a process of its own,
started from a neutral directory so that it imports its own aotc; both libraries are then
loaded here and called alternately in blocks (timing.interleaved), `--repeats` times.
Prints whether the two give the same bits, each repeat's B/A time (median of paired
blocks) and the median of those; at two threads and more, also the B/A of the pairs run
with CPUs 0 and 1 on one L3 and on two (benchmarks/placement.py).
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

import numpy as np
from onnx import TensorProto, helper, numpy_helper, save

from gemm import matmul_model
from models import model_inputs, seeded_feeds
import placement
from timing import interleaved


def conv_model(spec, path):
    """A Conv (+ Add of a second input) + Relu as `spec` says; returns its feeds."""
    fields = spec.split(",")
    cin, cout, size, kernel, stride = (int(v) for v in fields[:5])
    flags = set(fields[5:])
    if not flags <= {"add", "dw"} or ("dw" in flags and cin != cout):
        raise SystemExit(f"--conv {spec}: cin,cout,size,kernel,stride then add and/or dw (cin = cout)")
    add, group = "add" in flags, cin if "dw" in flags else 1
    out = (size + 2 * (kernel // 2) - kernel) // stride + 1
    rng = np.random.default_rng(0)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], strides=[stride] * 2,
                              pads=[kernel // 2] * 4, kernel_shape=[kernel] * 2, group=group)]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, cin, size, size])]
    feeds = {"x": rng.standard_normal((1, cin, size, size)).astype(np.float32)}
    if add:
        inputs.append(helper.make_tensor_value_info("r", TensorProto.FLOAT, [1, cout, out, out]))
        feeds["r"] = rng.standard_normal((1, cout, out, out)).astype(np.float32)
        nodes.append(helper.make_node("Add", ["c", "r"], ["s"]))
    nodes.append(helper.make_node("Relu", [nodes[-1].output[0]], ["y"]))
    weights = [numpy_helper.from_array(rng.standard_normal((cout, cin // group, kernel, kernel)).astype(np.float32) * 0.1, "w"),
               numpy_helper.from_array(rng.standard_normal(cout).astype(np.float32), "b")]
    graph = helper.make_graph(nodes, "conv", inputs,
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, cout, out, out])], weights)
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return feeds


def matmul_model_file(spec, path):
    """The MatMul of gemm.py's table for "M,N,K"; returns its feeds."""
    try:
        M, N, K = (int(v) for v in spec.split(","))
    except ValueError:
        raise SystemExit(f"--matmul {spec}: M,N,K")
    rng = np.random.default_rng(0)
    save(matmul_model(M, N, K, rng.standard_normal((K, N), np.float32)), path)
    return {"a": rng.standard_normal((M, K), np.float32)}


def compile_with(checkout, model_path, out_dir, threads):
    code = f"import aotc; aotc.compile({model_path!r}, out_dir={out_dir!r}, threads={threads})"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=tempfile.gettempdir(),
                   env=dict(os.environ, PYTHONPATH=os.path.abspath(checkout)))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--a", required=True, help="checkout A (the baseline)")
    p.add_argument("--b", required=True, help="checkout B")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--model", help="a network of make_models.py")
    what.add_argument("--conv", help="cin,cout,size,kernel,stride[,add][,dw]")
    what.add_argument("--matmul", help="M,N,K")
    p.add_argument("--models-dir", default=os.environ.get("AOTC_MODELS_DIR", "/tmp/aotc-models"))
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--runs", type=int, default=60, help="timed calls of each per repeat")
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()

    work = tempfile.mkdtemp(prefix="aotc-builds-")
    try:
        if args.model:
            model_path = os.path.join(args.models_dir, f"{args.model}.onnx")
            feeds = seeded_feeds(model_inputs(args.models_dir, args.model))
        elif args.conv:
            model_path = os.path.join(work, "conv.onnx")
            feeds = conv_model(args.conv, model_path)
        else:
            model_path = os.path.join(work, "matmul.onnx")
            feeds = matmul_model_file(args.matmul, model_path)
        for tag, checkout in (("a", args.a), ("b", args.b)):
            compile_with(checkout, model_path, os.path.join(work, tag), args.threads)
        import aotc   # this checkout's (models.py put it first on the path)
        a, b = (aotc.load(os.path.join(work, tag), threads=args.threads) for tag in "ab")
        got_a, got_b = a.run(feeds), b.run(feeds)
        same = all(got_a[k].tobytes() == got_b[k].tobytes() for k in got_a)
        print("same bits" if same else "the bits differ")
        ratios, pairs = [], []
        label = placement.labeller(args.threads)
        for _ in range(args.repeats):
            ms_a, ms_b, paired = interleaved(lambda: a.run(feeds), lambda: b.run(feeds), 3, args.runs,
                                             label=label, pairs=pairs)
            ratios.append(1 / paired)
            print(f"A {ms_a * 1e3:.3f} ms  B {ms_b * 1e3:.3f} ms  B/A {ratios[-1]:.3f}", flush=True)
        print(f"median B/A {statistics.median(ratios):.3f}")
        for where, ratio, count in placement.medians(pairs):
            print(f"B/A on {where}: {1 / ratio:.3f} ({count} pairs)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
