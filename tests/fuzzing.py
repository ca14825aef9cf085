"""Mutation fuzzing for aotc: small valid models, ways to break them, and a worker
process that compiles and runs each case so a crash or a hang is caught, not suffered.

Every case must end in a compiled model that runs (and matches onnxruntime where
onnxruntime accepts the model) or in an aotc.AotcError. Anything else is a finding.

    python tests/fuzzing.py --seconds 600 --seed 7 [--save DIR]   # a longer run
"""
import argparse
import json
import os
import pickle
import random
import re
import selectors
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter

import numpy as np
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

# Outcomes that are allowed; everything else fails the fuzz test.
PASSING = {"ok", "ok-not-run", "InvalidModel", "Unsupported", "UnsupportedOperator",
           "InvalidInput", "ExactModeUnavailable", "AotcError", "ort-crash", "ort-hang"}
CASES_PER_WORKER = 100              # a fresh worker now and then: loaded modules pile up
# Compiled, but a value exceeds what a caller can hold: a known gap (see test_hostile).
OVERSIZED = "oversized"
# Bugs already reported, by the signature of their outcome: counted as "known:<name>"
# instead of failing, unless AOTC_FUZZ_STRICT=1. Delete an entry once its fix lands.
KNOWN_BUGS = []
RUN_LIMIT_BYTES = 64 << 20          # larger models compile but are not run by the worker
TENSOR_LIMIT_BYTES = 2 << 30


# ---- seed models -------------------------------------------------------------------

def _info(name, dtype, shape):
    return helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(np.dtype(dtype)), shape)


def _model(nodes, inputs, outputs, inits=None, opset=17):
    graph = helper.make_graph(nodes, "fuzz", [_info(*i) for i in inputs], [_info(*o) for o in outputs],
                              [numpy_helper.from_array(np.asarray(v), k) for k, v in (inits or {}).items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def _w(shape, seed=0):
    return np.random.default_rng(seed).uniform(-1, 1, shape).astype(np.float32)


def seed_models():
    """Small valid models covering the operator families aotc implements."""
    n = helper.make_node
    f32 = np.float32
    return [
        _model([n("Add", ["x", "b"], ["a"], name="add"), n("Relu", ["a"], ["r"], name="relu"),
                n("Mul", ["r", "x"], ["m"], name="mul"), n("Sigmoid", ["m"], ["y"], name="sig")],
               [("x", f32, (2, 3))], [("y", f32, (2, 3))], {"b": _w((3,))}),
        _model([n("Conv", ["x", "w", "c"], ["c1"], name="conv", pads=[1, 1, 1, 1], strides=[1, 1]),
                n("MaxPool", ["c1"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
                n("GlobalAveragePool", ["p"], ["y"], name="gap")],
               [("x", f32, (1, 2, 6, 6))], [("y", f32, (1, 3, 1, 1))], {"w": _w((3, 2, 3, 3)), "c": _w((3,), 1)}),
        _model([n("MatMul", ["x", "w"], ["h"], name="mm"), n("Gemm", ["h", "v", "c"], ["g"], name="gemm", transB=1),
                n("Softmax", ["g"], ["y"], name="softmax", axis=-1)],
               [("x", f32, (3, 4))], [("y", f32, (3, 2))], {"w": _w((4, 5)), "v": _w((2, 5), 2), "c": _w((2,), 3)}),
        _model([n("Shape", ["x"], ["s"], name="shape"), n("Gather", ["s", "i"], ["d"], name="gather", axis=0),
                n("Concat", ["d", "k"], ["t"], name="concat", axis=0), n("Reshape", ["x", "t"], ["r"], name="reshape"),
                n("Transpose", ["r"], ["tr"], name="transpose", perm=[1, 0]),
                n("Slice", ["tr", "st", "en", "ax"], ["y"], name="slice")],
               [("x", f32, (2, 3, 4))], [("y", f32, (11, 2))],
               {"i": np.array([0], np.int64), "k": np.array([-1], np.int64), "st": np.array([1], np.int64),
                "en": np.array([100], np.int64), "ax": np.array([0], np.int64)}),
        _model([n("ReduceMean", ["x"], ["m"], name="mean", axes=[-1], keepdims=1),
                n("Sub", ["x", "m"], ["d"], name="sub"),
                n("LayerNormalization", ["d", "g", "b"], ["l"], name="ln", axis=-1, epsilon=1e-5),
                n("LeakyRelu", ["l"], ["y"], name="leaky", alpha=0.1)],
               [("x", f32, (2, 5))], [("y", f32, (2, 5))], {"g": _w((5,)), "b": _w((5,), 1)}, opset=17),
        _model([n("Cast", ["x"], ["c"], name="cast", to=TensorProto.INT64),
                n("Greater", ["c", "z"], ["g"], name="greater"),
                n("Where", ["g", "x", "f"], ["w"], name="where"),
                n("Pad", ["w", "p"], ["y"], name="pad", mode="constant"),
                n("Clip", ["y", "lo", "hi"], ["o"], name="clip")],
               [("x", f32, (2, 3))], [("o", f32, (3, 5))],
               {"z": np.array(0, np.int64), "f": np.float32(0.5), "p": np.array([0, 1, 1, 1], np.int64),
                "lo": np.float32(-1), "hi": np.float32(1)}),
        _model([n("ConstantOfShape", ["s"], ["c"], name="cos", value=numpy_helper.from_array(np.array([2.0], f32))),
                n("Expand", ["x", "s2"], ["e"], name="expand"), n("Add", ["c", "e"], ["a"], name="add2"),
                n("Unsqueeze", ["a", "ax"], ["u"], name="unsq"), n("Flatten", ["u"], ["y"], name="flat", axis=2)],
               [("x", f32, (1, 3))], [("y", f32, (2, 3))],
               {"s": np.array([2, 3], np.int64), "s2": np.array([2, 1], np.int64), "ax": np.array([0], np.int64)}),
    ]


# ---- mutations ---------------------------------------------------------------------

OP_TYPES = ["Add", "Relu", "Conv", "MatMul", "Gemm", "Softmax", "Reshape", "Transpose", "Concat",
            "Slice", "Gather", "Expand", "Pad", "Cast", "Where", "MaxPool", "ReduceSum", "Shape",
            "ConstantOfShape", "LayerNormalization", "Squeeze", "Frobnicate", "Identity", "Clip"]
ODD_INTS = [-(1 << 62), -(1 << 31), -7, -2, -1, 0, 1, 2, 3, 5, 64, 1 << 20, 1 << 31, 1 << 40]
DTYPES = [0, 1, 2, 3, 5, 6, 7, 8, 9, 10, 11, 12, 13, 16, 99]


def _values(model):
    g = model.graph
    names = [vi.name for vi in g.input] + [t.name for t in g.initializer]
    names += [o for node in g.node for o in node.output]
    return [v for v in names if v] or ["x"]


def _pick_node(rng, model):
    return rng.choice(model.graph.node) if model.graph.node else None


def flip_bytes(rng, data):
    data = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        i = rng.randrange(len(data))
        data[i] ^= 1 << rng.randrange(8)
    return bytes(data)


def truncate(rng, data):
    return data[:rng.randrange(len(data))]


def splice_garbage(rng, data):
    i = rng.randrange(len(data))
    return data[:i] + bytes(rng.randrange(256) for _ in range(rng.randint(1, 16))) + data[i:]


def drop_input(rng, model):
    node = _pick_node(rng, model)
    if node is not None and node.input:
        if rng.random() < 0.5:
            del node.input[rng.randrange(len(node.input))]
        else:
            node.input[rng.randrange(len(node.input))] = ""


def rename_value(rng, model):
    """Point a node input at another value, a missing value, or a node's own output."""
    node = _pick_node(rng, model)
    if node is None or not node.input:
        return
    choice = rng.random()
    if choice < 0.4:
        target = rng.choice(_values(model))
    elif choice < 0.7:
        target = rng.choice(["ghost", "", "x*/", "x\0y"])
    else:
        target = node.output[0] if node.output else "self"
    node.input[rng.randrange(len(node.input))] = target


def rename_output(rng, model):
    """Make a node output collide with another value, or make a graph output dangle."""
    g = model.graph
    if rng.random() < 0.5 and g.node:
        node = _pick_node(rng, model)
        node.output[0] = rng.choice(_values(model) + [""])
    elif g.output:
        g.output[rng.randrange(len(g.output))].name = rng.choice(_values(model) + ["nobody"])


def duplicate_or_drop(rng, model):
    g = model.graph
    choice = rng.random()
    if choice < 0.3 and g.node:
        del g.node[rng.randrange(len(g.node))]
    elif choice < 0.5 and g.node:
        g.node.append(_pick_node(rng, model))
    elif choice < 0.7 and g.input:
        g.input.append(g.input[0])
    elif choice < 0.85 and g.output:
        g.output.append(g.output[0])
    elif g.initializer:
        g.initializer.append(g.initializer[0])


def shuffle_nodes(rng, model):
    nodes = list(model.graph.node)
    rng.shuffle(nodes)
    del model.graph.node[:]
    model.graph.node.extend(nodes)


def change_attribute(rng, model):
    """Give an attribute another type, an odd value, or add/remove one."""
    node = _pick_node(rng, model)
    if node is None:
        return
    if node.attribute and rng.random() < 0.8:
        i = rng.randrange(len(node.attribute))
        name = node.attribute[i].name
        del node.attribute[i]
        value = rng.choice([rng.choice(ODD_INTS), float(rng.choice(ODD_INTS)) / 3, "SAME_UPPER",
                            "*/\"\\\n??/", [rng.choice(ODD_INTS) for _ in range(rng.randint(1, 5))],
                            [0.5, -1.0], numpy_helper.from_array(np.array([1.0], np.float32)), b"\0\xff"])
        node.attribute.append(helper.make_attribute(name, value))
    elif node.attribute:
        del node.attribute[rng.randrange(len(node.attribute))]
    else:
        node.attribute.append(helper.make_attribute(
            rng.choice(["axis", "perm", "alpha", "to", "mode", "auto_pad", "keepdims"]), rng.choice(ODD_INTS)))


def change_dims(rng, model):
    """Odd dims on a graph input or output, or initializer dims that disagree with its data."""
    g = model.graph
    if g.initializer and rng.random() < 0.4:
        t = rng.choice(g.initializer)
        if t.dims:
            t.dims[rng.randrange(len(t.dims))] = rng.choice(ODD_INTS)
        else:
            t.dims.append(rng.choice(ODD_INTS))
        return
    vis = list(g.input) + list(g.output)
    if not vis:
        return
    dims = rng.choice(vis).type.tensor_type.shape.dim
    if not dims:
        return
    d = dims[rng.randrange(len(dims))]
    if rng.random() < 0.2:
        d.dim_param = rng.choice(["n", "*/", ""])
    else:
        d.dim_value = rng.choice(ODD_INTS[3:-1])


def change_dtype(rng, model):
    g = model.graph
    choice = rng.random()
    if choice < 0.4 and g.input:
        rng.choice(g.input).type.tensor_type.elem_type = rng.choice(DTYPES)
    elif choice < 0.6 and g.output:
        rng.choice(g.output).type.tensor_type.elem_type = rng.choice(DTYPES)
    elif g.initializer:
        t = rng.choice(g.initializer)
        array = numpy_helper.to_array(t)
        dtype = rng.choice([np.float64, np.int64, np.int32, np.float16, np.bool_, np.uint8, np.int8])
        t.CopyFrom(numpy_helper.from_array(array.astype(dtype), t.name))


def change_opset(rng, model):
    if rng.random() < 0.2:
        model.opset_import.append(helper.make_opsetid(rng.choice(["com.evil", "ai.onnx.ml", ""]), rng.randint(1, 30)))
    else:
        model.opset_import[0].version = rng.choice([1, 5, 6, 7, 9, 11, 12, 13, 14, 18, 21, 22, 23, 999])


def swap_op_type(rng, model):
    node = _pick_node(rng, model)
    if node is not None:
        node.op_type = rng.choice(OP_TYPES)
        if rng.random() < 0.1:
            node.domain = rng.choice(["com.microsoft", "ai.onnx", "x*/y"])


def hostile_text(rng, model):
    """Names and doc strings a C emitter must never paste raw."""
    text = rng.choice(["*/", "\"", "\\", "\n#include <stdio.h>\n", "??/", "a\0b", "\u00e9\u4e2d", "x y"])
    g = model.graph
    choice = rng.random()
    if choice < 0.3:
        g.name = text
    elif choice < 0.6 and g.node:
        node = _pick_node(rng, model)
        node.name, node.doc_string = text, text
    else:
        old = rng.choice(_values(model))
        new = old + text
        for node in g.node:
            node.input[:] = [new if v == old else v for v in node.input]
            node.output[:] = [new if v == old else v for v in node.output]
        for vi in list(g.input) + list(g.output):
            if vi.name == old:
                vi.name = new
        for t in g.initializer:
            if t.name == old:
                t.name = new


PROTO_MUTATIONS = [drop_input, rename_value, rename_output, duplicate_or_drop, shuffle_nodes,
                   change_attribute, change_dims, change_dtype, change_opset, swap_op_type, hostile_text]
BYTE_MUTATIONS = [flip_bytes, truncate, splice_garbage]


def make_case(seed):
    """Case `seed`: (mutated model bytes, names of the mutations applied)."""
    rng = random.Random(seed)
    model = rng.choice(seed_models())
    applied = []
    for _ in range(rng.randint(1, 3)):
        mutation = rng.choice(PROTO_MUTATIONS)
        mutation(rng, model)
        applied.append(mutation.__name__)
    data = model.SerializeToString()
    if rng.random() < 0.25:
        mutation = rng.choice(BYTE_MUTATIONS)
        data = mutation(rng, data)
        applied.append(mutation.__name__)
    return data, applied


# ---- the worker: one process that compiles and runs cases until it dies ------------

def _feed(specs, seed):
    rng = np.random.default_rng(seed)
    feed = {}
    for t in specs:
        if t.dtype.kind == "f":
            feed[t.name] = rng.uniform(-2, 2, t.shape).astype(t.dtype)
        elif t.dtype == np.bool_:
            feed[t.name] = rng.random(t.shape) < 0.5
        else:
            feed[t.name] = rng.integers(0, 3, t.shape).astype(t.dtype)
    return feed


def _nbytes(specs):
    return sum(int(np.prod(t.shape, dtype=object)) * t.dtype.itemsize for t in specs)


def _compare(got, want):
    """None when aotc and onnxruntime agree, else what differs."""
    if list(got) != list(want):
        return f"output names {list(got)} != {list(want)}"
    for name, w in want.items():
        g = got[name]
        if g.dtype != w.dtype or g.shape != w.shape:
            return f"{name}: {g.dtype}{list(g.shape)} != {w.dtype}{list(w.shape)}"
        if w.dtype.kind in "fc":
            if not np.allclose(g, w, rtol=1e-4, atol=1e-5, equal_nan=True):
                return f"{name}: values differ by {np.nanmax(np.abs(g - w))}"
        elif not np.array_equal(g, w):
            return f"{name}: values differ"
    return None


def run_case(data, seed, send):
    """Compile and run one case in this process; `send(dict)` reports progress."""
    import aotc
    try:
        sess = aotc.compile(data, threads=1)
    except aotc.BuildError as e:          # the generated C is wrong: an aotc bug
        return {"outcome": "BuildError", "detail": str(e)[:2000]}
    except aotc.AotcError as e:
        return {"outcome": e.kind, "detail": str(e)[:300]}
    except Exception as e:
        return {"outcome": "exception", "detail": f"{type(e).__name__}: {e}\n{traceback.format_exc()[-3000:]}"}
    sizes = _nbytes(sess.inputs) + _nbytes(sess.outputs)
    if sizes > TENSOR_LIMIT_BYTES:
        return {"outcome": OVERSIZED, "detail": f"inputs and outputs need {sizes} bytes"}
    if sizes + sess.report["workspace_bytes"] > RUN_LIMIT_BYTES:
        return {"outcome": "ok-not-run", "detail": "too large to run here"}
    feed = _feed(sess.inputs, seed)
    try:
        got = sess.run(feed)
    except aotc.AotcError as e:
        return {"outcome": e.kind, "detail": f"run: {e}"[:300]}
    except Exception as e:
        return {"outcome": "exception", "detail": f"run: {type(e).__name__}: {e}\n{traceback.format_exc()[-3000:]}"}
    send({"progress": "ort"})             # a crash from here on is onnxruntime's
    try:
        import onnxruntime as ort
        options = ort.SessionOptions()
        options.intra_op_num_threads = options.inter_op_num_threads = 1
        ort_sess = ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])
        want = dict(zip([o.name for o in ort_sess.get_outputs()], ort_sess.run(None, feed)))
    except Exception:
        return {"outcome": "ok", "detail": "onnxruntime refuses the model"}
    mismatch = _compare(got, want)
    return {"outcome": "mismatch", "detail": mismatch} if mismatch else {"outcome": "ok", "detail": ""}


def worker_main():
    """Reads length-prefixed pickled cases on stdin; answers JSON lines on the original
    stdout (anything else printing to fd 1 goes to stderr instead)."""
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    send = lambda msg: proto.write(json.dumps(msg) + "\n")  # noqa: E731
    stdin = sys.stdin.buffer
    while True:
        header = stdin.read(4)
        if len(header) < 4:
            return
        case = pickle.loads(stdin.read(struct.unpack("<I", header)[0]))
        if case.get("selftest") == "crash":      # proves the parent sees a crash
            os.kill(os.getpid(), signal.SIGSEGV)
        if case.get("selftest") == "hang":
            time.sleep(3600)
        send(run_case(case["data"], case["seed"], send))


class Worker:
    """A worker process; run() survives its crash or hang and starts a new one."""

    def __init__(self, cache_dir):
        self.cache_dir = cache_dir
        self.proc = None
        self.cases = 0

    def _start(self):
        self.stderr = tempfile.TemporaryFile()
        env = dict(os.environ, AOTC_CACHE_DIR=self.cache_dir, AOTC_NUM_THREADS="1",
                   PYTHONPATH=os.pathsep.join([os.path.dirname(HERE), os.environ.get("PYTHONPATH", "")]))
        self.proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr,
                                     env=env, start_new_session=True, bufsize=0)

    def _stderr_tail(self):
        self.stderr.seek(0)
        return self.stderr.read().decode("utf-8", "replace")[-2000:]

    def run(self, data, seed, timeout, selftest=None):
        if self.proc is not None and self.cases >= CASES_PER_WORKER:
            self.stop()
        if self.proc is None or self.proc.poll() is not None:
            self._start()
            self.cases = 0
        self.cases += 1
        payload = pickle.dumps({"data": data, "seed": seed, "selftest": selftest})
        message = memoryview(struct.pack("<I", len(payload)) + payload)
        while message:     # unbuffered pipes: so select() never misses a line held in a buffer
            message = message[self.proc.stdin.write(message):]
        phase = "aotc"
        deadline = time.monotonic() + timeout
        with selectors.DefaultSelector() as sel:
            sel.register(self.proc.stdout, selectors.EVENT_READ)
            while True:
                left = deadline - time.monotonic()
                if left <= 0 or not sel.select(left):
                    self.stop()
                    outcome = "ort-hang" if phase == "ort" else "hang"
                    return {"outcome": outcome, "detail": f"no answer within {timeout} s"}
                line = self.proc.stdout.readline()
                if not line:
                    code = self.proc.wait()
                    self.proc = None
                    outcome = "ort-crash" if phase == "ort" else "crash"
                    return {"outcome": outcome, "detail": f"exit code {code}\n{self._stderr_tail()}"}
                msg = json.loads(line)
                if "progress" in msg:
                    phase = msg["progress"]
                    continue
                return msg

    def stop(self):
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()
            self.proc = None


def known_bug(result):
    """The name of the reported bug this failing result shows, or None."""
    if os.environ.get("AOTC_FUZZ_STRICT") == "1":
        return None
    text = f"{result['outcome']}: {result['detail']}"
    return next((name for name, pattern in KNOWN_BUGS if re.search(pattern, text, re.S)), None)


def fuzz(seconds, base_seed=0, save_dir=None, case_timeout=120, log=print):
    """Runs cases for about `seconds`; returns (Counter of outcomes, list of failures)."""
    outcomes, failures = Counter(), []
    cache = tempfile.mkdtemp(prefix="aotc-fuzz-cache-")
    worker = Worker(cache)
    end = time.monotonic() + seconds
    index = 0
    try:
        while time.monotonic() < end:
            seed = base_seed * 1_000_003 + index
            data, applied = make_case(seed)
            result = worker.run(data, seed, case_timeout)
            known = None if result["outcome"] in PASSING else known_bug(result)
            outcomes[f"known:{known}" if known else result["outcome"]] += 1
            if result["outcome"] not in PASSING and result["outcome"] != OVERSIZED and not known:
                failure = {"seed": seed, "mutations": applied, **result}
                if save_dir:
                    path = os.path.join(save_dir, f"case-{seed}.onnx")
                    with open(path, "wb") as f:
                        f.write(data)
                    failure["saved"] = path
                failures.append(failure)
                log(f"case {seed} {applied}: {result['outcome']}: {result['detail'][-700:]}")
            index += 1
    finally:
        worker.stop()
        shutil.rmtree(cache, ignore_errors=True)
    return outcomes, failures


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--save", help="folder for the models of failing cases")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return worker_main()
    outcomes, failures = fuzz(args.seconds, args.seed, args.save)
    print(f"{sum(outcomes.values())} cases: {dict(outcomes.most_common())}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
