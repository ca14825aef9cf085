"""aotc against onnxruntime on whole networks, side by side in one process.

    python benchmarks/models.py [--models resnet50,mobilenetv2] [--threads 1,2]
                                [--mode fast|exact] [--runs 60] [--quick]

For each model (ONNX file plus its .json of input shapes, as written by
../shared/models/make_models.py, in --models-dir or $AOTC_MODELS_DIR): compile with
aotc (fresh cache: the compile time is real), open onnxruntime (ORT_ENABLE_ALL,
intra-op threads = N, sequential execution), then at each thread count N time both
interleaved in blocks of calls (benchmarks/timing.py), after a warm-up, and print the medians,
the aotc/ORT ratio of the medians, the median ratio of paired blocks (steadier on a
busy machine), the compile / session-creation times, the peak resident memory of a
fresh process that loads and runs the model once with each (ru_maxrss), and the
largest relative error of aotc against ORT (max |aotc - ort| / max |ort|).
With --mode exact, the model is also compiled in fast mode and the two aotc builds are
timed against each other the same way: the last column is exact mode's cost, the
paired exact/fast ratio.

At two threads and more, each pair of blocks is labelled with where the host had put
CPUs 0 and 1 (benchmarks/placement.py): the `split` column is the share of pairs run
with the two on different L3s, and after the table each such row's paired ratio is
given for either placement.
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

import numpy as np

import placement
from timing import interleaved

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))   # this checkout's aotc

ALL_MODELS = ["resnet50", "mobilenetv2", "bert_base", "mlp", "mlp_b64"]
QUICK_MODELS = ["mlp", "mlp_b64", "tinycnn"]
BERT_VOCAB = 30522


def model_inputs(models_dir, name):
    """[(input name, dtype, shape)] from the model's .json."""
    with open(os.path.join(models_dir, f"{name}.json")) as f:
        meta = json.load(f)
    return [(i["name"], np.dtype(i["dtype"]), tuple(i["shape"])) for i in meta["inputs"]]


def seeded_feeds(inputs):
    rng = np.random.default_rng(0)
    feeds = {}
    for name, dtype, shape in inputs:
        if name == "input_ids":
            feeds[name] = rng.integers(0, BERT_VOCAB, size=shape).astype(dtype)
        elif name == "attention_mask":
            feeds[name] = np.ones(shape, dtype)
        elif np.issubdtype(dtype, np.integer):
            feeds[name] = np.zeros(shape, dtype)
        else:
            feeds[name] = rng.standard_normal(shape).astype(dtype)
    return feeds


def ort_session(path, threads):
    import onnxruntime as ort
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    return ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])


def relative_error(got, want):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    if not want.size:
        return 0.0
    return float(np.max(np.abs(got - want))) / max(float(np.max(np.abs(want))), 1e-30)


# ---- peak memory, each in a fresh process --------------------------------------------

def child_main(args):
    """Load and run once; print the peak resident set in KiB. Imports only what the
    runtime in question needs (the aotc side is the compiled folder's own module)."""
    feeds = seeded_feeds(model_inputs(args.models_dir, args.child_model))
    if args.child == "aotc":
        with open(os.path.join(args.child_path, "manifest.json")) as f:
            name = json.load(f)["name"]
        sys.path.insert(0, args.child_path)
        module = __import__(name)
        module.load(threads=args.child_threads).run(feeds)
    else:
        ort_session(args.child_path, args.child_threads).run(None, feeds)
    print(peak_resident_kib())


def peak_resident_kib():
    """This process's peak resident set: VmHWM, which starts afresh at exec (ru_maxrss
    keeps the parent's peak across fork and exec on Linux)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def peak_kib(args, runtime, path, model, threads):
    cmd = [sys.executable, os.path.abspath(__file__), "--child", runtime, "--child-path", path,
           "--child-model", model, "--child-threads", str(threads), "--models-dir", args.models_dir]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        return float("nan")
    return int(out.stdout.split()[-1])


# ---- one model ------------------------------------------------------------------------

def bench_model(args, name, build_root):
    import aotc
    path = os.path.join(args.models_dir, f"{name}.onnx")
    inputs = model_inputs(args.models_dir, name)
    feeds = seeded_feeds(inputs)
    shapes = {n: s for n, _, s in inputs}
    out_dir = os.path.join(build_root, name)
    t = time.perf_counter()
    aotc.compile(path, shapes=shapes, mode=args.mode, out_dir=out_dir, threads=1)
    compile_s = time.perf_counter() - t
    fast_dir = os.path.join(build_root, name + "-fast") if args.mode == "exact" else None
    if fast_dir:   # the same model in fast mode, to time exact mode's cost
        aotc.compile(path, shapes=shapes, mode="fast", out_dir=fast_dir, threads=1)
    rows = []
    for threads in args.threads:
        sess = aotc.load(out_dir, threads=threads)
        t = time.perf_counter()
        ort = ort_session(path, threads)
        ort_open_s = time.perf_counter() - t
        got, want = sess.run(feeds), ort.run(None, feeds)
        err = max(relative_error(got[o.name], w) for o, w in zip(ort.get_outputs(), want))
        pairs = []
        ms_a, ms_o, paired = interleaved(lambda: sess.run(feeds), lambda: ort.run(None, feeds),
                                         args.warmup, args.runs, label=placement.labeller(threads),
                                         pairs=pairs)
        mem_a = peak_kib(args, "aotc", out_dir, name, threads)
        mem_o = peak_kib(args, "ort", path, name, threads)
        cost = float("nan")
        if args.mode == "exact":
            fast = aotc.load(fast_dir, threads=threads)
            cost = interleaved(lambda: sess.run(feeds), lambda: fast.run(feeds), args.warmup, args.runs)[2]
        rows.append((name, threads, ms_a * 1e3, ms_o * 1e3, ms_a / ms_o, paired, compile_s,
                     ort_open_s, mem_a / 1024, mem_o / 1024, err, pairs, cost))
        print(format_row(rows[-1]), flush=True)
        ort = None   # free its memory before the next thread count
    return rows


HEADER = (f"{'model':<12} {'thr':>3} {'aotc ms':>9} {'ORT ms':>9} {'ratio':>6} {'paired':>6} "
          f"{'compile s':>9} {'ORT open s':>10} {'aotc MiB':>9} {'ORT MiB':>8} {'max rel err':>11} "
          f"{'split':>5}")
EXACT_HEADER = f" {'exact/fast':>10}"


def format_row(r):
    name, threads, ms_a, ms_o, ratio, paired, comp, open_s, mem_a, mem_o, err, pairs, cost = r
    known = [tag for tag, _ in pairs if tag is not None]
    split = f"{sum(known) / len(known):.2f}" if known else "-"
    row = (f"{name:<12} {threads:>3} {ms_a:>9.3f} {ms_o:>9.3f} {ratio:>6.3f} {paired:>6.3f} "
           f"{comp:>9.1f} {open_s:>10.2f} {mem_a:>9.1f} {mem_o:>8.1f} {err:>11.2e} {split:>5}")
    return row if cost != cost else row + f" {cost:>10.3f}"


def by_placement(r):
    """The row's paired ratio on one L3 and on two, where its pairs were labelled."""
    name, threads, *_, pairs, _cost = r
    parts = [f"{ratio:.3f} on {where} ({count} pairs)" for where, ratio, count in placement.medians(pairs)]
    return f"{name} at {threads} threads, paired: " + ", ".join(parts) if parts else None


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", help=f"comma-separated (default: {','.join(ALL_MODELS)})")
    p.add_argument("--threads", default="1,2", help="comma-separated thread counts (default 1,2)")
    p.add_argument("--mode", choices=("fast", "exact"), default="fast")
    # 12 blocks of 5 a side: on a shared 2-vCPU machine slow phases last seconds, and
    # with 4 blocks a side (20 runs) one phase moved a model's ratio by 0.2 between runs
    p.add_argument("--runs", type=int, default=60, help="timed runs of each (default 60)")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--quick", action="store_true",
                   help=f"smoke run: {','.join(QUICK_MODELS)}, 1 thread, 5 runs")
    p.add_argument("--models-dir", default=os.environ.get("AOTC_MODELS_DIR", "/tmp/aotc-models"))
    p.add_argument("--reuse-cache", action="store_true",
                   help="use aotc's normal compile cache (compile times then show cache hits)")
    p.add_argument("--child", choices=("aotc", "ort"), help=argparse.SUPPRESS)
    p.add_argument("--child-path", help=argparse.SUPPRESS)
    p.add_argument("--child-model", help=argparse.SUPPRESS)
    p.add_argument("--child-threads", type=int, default=1, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        child_main(args)
        return
    if args.quick:
        args.runs, args.warmup = min(args.runs, 5), 1
        if args.threads == "1,2":
            args.threads = "1"
    models = args.models.split(",") if args.models else (QUICK_MODELS if args.quick else ALL_MODELS)
    args.threads = [int(t) for t in args.threads.split(",")]
    present = [m for m in models if os.path.isfile(os.path.join(args.models_dir, f"{m}.onnx"))]
    for m in models:
        if m not in present:
            print(f"skipping {m}: no {m}.onnx in {args.models_dir}")
    print(f"mode={args.mode} runs={args.runs} warmup={args.warmup} cpus={os.cpu_count()}")
    print(HEADER + (EXACT_HEADER if args.mode == "exact" else ""), flush=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="aotc-bench-") as root:
        if not args.reuse_cache:
            os.environ["AOTC_CACHE_DIR"] = os.path.join(root, "cache")
        for m in present:
            rows += bench_model(args, m, root)
    worst = max((r[4] for r in rows), default=float("nan"))
    print(f"worst aotc/ORT ratio: {worst:.3f}")
    for line in filter(None, map(by_placement, rows)):
        print(line)


if __name__ == "__main__":
    main()
