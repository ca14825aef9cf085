"""Exact mode: the same bits whatever the thread count, SIMD path, optimisation level,
C compiler, optimisation flags and CPU architecture; and still onnxruntime's answer.

The reference is the exact build for the generic path on one thread with no passes;
every other build must reproduce its outputs byte for byte.
"""
import math
import os
import shutil
import subprocess
from dataclasses import dataclass

import numpy as np
import onnx
import pytest
from onnx import helper

import aotc
from aotc import build
from oracle import make_model, random, relative_error, run_ort
from sanitize import build_harness, run_on_files

AARCH64_CC = shutil.which("aarch64-linux-gnu-gcc")
QEMU = shutil.which("qemu-aarch64")
CLANG = shutil.which("clang")
GCC = shutil.which("gcc")


# ---- the models ---------------------------------------------------------------------

def _mlp():
    """784-style MLP in small: K over one packing block (Kc 256), ragged N."""
    inits = {"w1": random((300, 130), seed=1, low=-0.1, high=0.1), "b1": random((130,), seed=2),
             "w2": random((130, 10), seed=3, low=-0.2, high=0.2), "b2": random((10,), seed=4)}
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Add", ["h", "b1"], ["hb"]),
             helper.make_node("Relu", ["hb"], ["r"]),
             helper.make_node("Gemm", ["r", "w2", "b2"], ["logits"]),
             helper.make_node("Softmax", ["logits"], ["y"], axis=-1)]
    return make_model(nodes, [("x", np.float32, (5, 300))], [("y", np.float32, None)], inits, name="mlp")


def _cnn():
    """Conv + BatchNorm + Relu, pooling, a strided conv, global pooling, Gemm, Softmax."""
    inits = {"w1": random((8, 3, 3, 3), seed=1, low=-0.5, high=0.5), "c1": random((8,), seed=2),
             "scale": random((8,), seed=3, low=0.5, high=1.5), "bias": random((8,), seed=4),
             "mean": random((8,), seed=5, low=-0.2, high=0.2), "var": random((8,), seed=6, low=0.5, high=2.0),
             "w2": random((16, 8, 3, 3), seed=7, low=-0.3, high=0.3),
             "wf": random((16, 10), seed=8), "bf": random((10,), seed=9)}
    nodes = [helper.make_node("Conv", ["x", "w1", "c1"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c", "scale", "bias", "mean", "var"], ["bn"]),
             helper.make_node("Relu", ["bn"], ["r"]),
             helper.make_node("MaxPool", ["r"], ["mp"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Conv", ["mp", "w2"], ["c2"], strides=[2, 2], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c2"], ["r2"]),
             helper.make_node("AveragePool", ["r2"], ["ap"], kernel_shape=[2, 2], pads=[0, 0, 1, 1]),
             helper.make_node("GlobalAveragePool", ["ap"], ["g"]),
             helper.make_node("Flatten", ["g"], ["f"]),
             helper.make_node("Gemm", ["f", "wf", "bf"], ["logits"]),
             helper.make_node("Softmax", ["logits"], ["y"])]
    return make_model(nodes, [("x", np.float32, (2, 3, 17, 15))], [("y", np.float32, None)], inits, name="cnn")


def _transformer_block():
    """Pre-norm block: LayerNorm, multi-head attention written out as an exporter writes
    it, residual, LayerNorm, MLP with the erf Gelu, residual."""
    s, d, heads = 9, 32, 4
    hd = d // heads
    inits = {"g1": random((d,), seed=1, low=0.5, high=1.5), "be1": random((d,), seed=2),
             "wq": random((d, d), seed=3, low=-0.3, high=0.3), "wk": random((d, d), seed=4, low=-0.3, high=0.3),
             "wv": random((d, d), seed=5, low=-0.3, high=0.3), "wo": random((d, d), seed=6, low=-0.3, high=0.3),
             "g2": random((d,), seed=7, low=0.5, high=1.5), "be2": random((d,), seed=8),
             "w1": random((d, 4 * d), seed=9, low=-0.3, high=0.3), "b1": random((4 * d,), seed=10),
             "w2": random((4 * d, d), seed=11, low=-0.2, high=0.2), "b2": random((d,), seed=12),
             "heads_shape": np.array([1, s, heads, hd], np.int64), "merged": np.array([1, s, d], np.int64),
             "scale": np.array(1 / math.sqrt(hd), np.float32), "sqrt2": np.array(math.sqrt(2), np.float32),
             "one": np.array(1, np.float32), "half": np.array(0.5, np.float32)}
    n = helper.make_node
    nodes = [n("LayerNormalization", ["x", "g1", "be1"], ["ln1"], axis=-1)]
    for name in "qkv":
        nodes += [n("MatMul", ["ln1", f"w{name}"], [f"{name}0"]),
                  n("Reshape", [f"{name}0", "heads_shape"], [f"{name}1"]),
                  n("Transpose", [f"{name}1"], [name], perm=[0, 2, 3, 1] if name == "k" else [0, 2, 1, 3])]
    nodes += [n("MatMul", ["q", "k"], ["qk"]), n("Mul", ["qk", "scale"], ["scores"]),
              n("Softmax", ["scores"], ["p"], axis=-1), n("MatMul", ["p", "v"], ["ctx"]),
              n("Transpose", ["ctx"], ["ctx_t"], perm=[0, 2, 1, 3]), n("Reshape", ["ctx_t", "merged"], ["att"]),
              n("MatMul", ["att", "wo"], ["o"]), n("Add", ["x", "o"], ["res1"]),
              n("LayerNormalization", ["res1", "g2", "be2"], ["ln2"], axis=-1),
              n("MatMul", ["ln2", "w1"], ["h0"]), n("Add", ["h0", "b1"], ["h"]),
              n("Div", ["h", "sqrt2"], ["hd"]), n("Erf", ["hd"], ["e"]), n("Add", ["e", "one"], ["e1"]),
              n("Mul", ["h", "e1"], ["he"]), n("Mul", ["he", "half"], ["gelu"]),
              n("MatMul", ["gelu", "w2"], ["m0"]), n("Add", ["m0", "b2"], ["m"]), n("Add", ["res1", "m"], ["y"])]
    return make_model(nodes, [("x", np.float32, (1, s, d))], [("y", np.float32, None)], inits, name="block")


MODELS = {"mlp": (_mlp, (5, 300)), "cnn": (_cnn, (2, 3, 17, 15)), "block": (_transformer_block, (1, 9, 32))}
# AOTC_EXACT_NETWORKS=1 runs every test below on resnet50 and bert_base as well (the
# exports from AOTC_MODELS_DIR): some ten minutes, so CI runs only the last test's
# generic-against-native check on them.
NETWORKS = ["resnet50", "bert_base"] if os.environ.get("AOTC_EXACT_NETWORKS") == "1" else []


@dataclass
class Case:
    model: object     # a ModelProto, or the path of an export
    shapes: dict      # aotc.compile's shapes (None: the model's own)
    feeds: dict       # input name -> array, in the model's input order
    want: dict        # the reference build's outputs
    out_dir: str      # the reference build's folder (its C, for the harness builds)
    name: str

    def compile(self, **options):
        return aotc.compile(self.model, shapes=self.shapes, mode="exact", **options)

    def onnx_model(self):
        return onnx.load(self.model) if isinstance(self.model, str) else self.model


@pytest.fixture(scope="module", params=sorted(MODELS) + NETWORKS)
def case(request, tmp_path_factory):
    """The model, its feeds and the reference: generic path, one thread, no passes."""
    if request.param in MODELS:
        make, shape = MODELS[request.param]
        model, shapes, feeds = make(), None, {"x": random(shape, seed=42)}
    else:
        from test_networks import NETWORKS as SHAPES, model_path, seeded_inputs
        model, feeds = model_path(request.param), seeded_inputs(request.param)
        shapes = {k: shape for k, (_, shape) in SHAPES[request.param].items()}
    out_dir = str(tmp_path_factory.mktemp(f"exact-{request.param}"))
    sess = aotc.compile(model, shapes=shapes, mode="exact", target="generic", opt_level="none",
                        threads=1, out_dir=out_dir)
    feeds = {spec.name: feeds[spec.name] for spec in sess.inputs}
    return Case(model, shapes, feeds, sess.run(feeds), out_dir, sess.name)


def _assert_same_bits(got, want, what):
    for name in want:
        assert got[name].tobytes() == want[name].tobytes(), f"{name}: bits differ ({what})"


def test_exact_outputs_match_onnxruntime(case):
    ort = run_ort(case.onnx_model(), case.feeds)
    for name in case.want:
        assert relative_error(case.want[name], ort[name]) <= 1e-4


@pytest.mark.parametrize("target, opt_level", [("avx512", "all"), ("avx2", "basic"), ("generic", "all")])
def test_targets_opt_levels_and_threads_give_the_same_bits(case, target, opt_level):
    if target != "generic" and build.resolve_target("native") != "avx512" and target == "avx512":
        pytest.skip("this CPU runs no AVX-512")
    sess = case.compile(target=target, opt_level=opt_level, threads=2)
    _assert_same_bits(sess.run(case.feeds), case.want, f"{target}, opt level {opt_level}, 2 threads")


def _outputs_from_harness(case, exe, runner=()):
    got = run_on_files(exe, list(case.feeds.values()), [(a.dtype, a.shape) for a in case.want.values()],
                       threads=2, runner=runner)
    return dict(zip(case.want, got))


@pytest.mark.parametrize("cc, level", [("gcc", "-O1"), ("clang", "-O3"), ("clang", "-O1")])
def test_compilers_and_optimisation_flags_give_the_same_bits(case, cc, level):
    compiler = {"gcc": GCC, "clang": CLANG}[cc]
    if compiler is None:
        pytest.skip(f"{cc} is not installed")
    flags = [f for f in build.c_flags("avx512" if build.resolve_target("native") == "avx512" else "generic",
                                      "exact") if not f.startswith("-O")]
    exe = build_harness(case.out_dir, case.name, compiler, [level, *flags], exe=f"harness-{cc}{level}")
    _assert_same_bits(_outputs_from_harness(case, exe), case.want, f"{cc} {level}")


@pytest.mark.skipif(AARCH64_CC is None or QEMU is None,
                    reason="needs aarch64-linux-gnu-gcc and qemu-aarch64 (Debian gcc-aarch64-linux-gnu, qemu-user)")
def test_an_aarch64_build_under_qemu_gives_the_same_bits(case):
    flags = [f for f in build.c_flags("generic", "exact") if f != "-fPIC"] + ["-static"]
    exe = build_harness(case.out_dir, case.name, AARCH64_CC, flags, exe="harness-aarch64")
    arch = subprocess.run(["file", str(exe)], capture_output=True, text=True).stdout \
        if shutil.which("file") else "aarch64"
    assert "aarch64" in arch or "ARM" in arch
    _assert_same_bits(_outputs_from_harness(case, exe, runner=[QEMU]), case.want, "aarch64 under qemu")


@pytest.mark.parametrize("name", ["resnet50", "bert_base"])
def test_real_networks_give_the_same_bits_on_every_path(name):
    from test_networks import NETWORKS, model_path, seeded_inputs
    path = model_path(name)      # skips when the export is not built
    feeds = seeded_inputs(name)
    shapes = {k: shape for k, (_, shape) in NETWORKS[name].items()}
    reference = aotc.compile(path, shapes=shapes, mode="exact", target="generic", threads=1).run(feeds)
    native = aotc.compile(path, shapes=shapes, mode="exact", target=build.resolve_target("native"),
                          threads=2).run(feeds)
    _assert_same_bits(native, reference, "native path, 2 threads")
    ort = run_ort(onnx.load(path), feeds)
    for out in reference:
        assert relative_error(reference[out], ort[out]) <= 1e-4
