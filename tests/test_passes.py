"""Every pass: fires on its pattern, refuses where the pattern is broken, and the fused
graph computes what the unfused one does."""
import math
import os

import numpy as np
import pytest
from onnx import helper

import aotc
from oracle import make_model, random


def _compare(model, feeds, rtol=1e-6, atol=1e-6, exact_bits=False):
    """Compile at opt levels none and all; returns the 'all' session's report."""
    plain = aotc.compile(model, opt_level="none").run(feeds)
    fused_sess = aotc.compile(model, opt_level="all")
    fused = fused_sess.run(feeds)
    for name in plain:
        if exact_bits:
            np.testing.assert_array_equal(fused[name], plain[name])
        else:
            np.testing.assert_allclose(fused[name], plain[name], rtol=rtol, atol=atol)
    return fused_sess.report


def _const(name, value):
    return helper.make_node("Constant", [], [name], value=helper.make_tensor(
        name, 1, [], [float(value)]))


# ---- constant-fold ----------------------------------------------------------------

def test_constant_fold_evaluates_constant_nodes_once():
    nodes = [_const("two", 2.0), helper.make_node("Mul", ["w", "two"], ["w2"]),
             helper.make_node("Add", ["x", "w2"], ["y"])]
    model = make_model(nodes, [("x", np.float32, (4,))], [("y", np.float32, (4,))],
                       {"w": np.arange(4, dtype=np.float32)})
    report = _compare(model, {"x": random((4,))}, exact_bits=True)
    assert report["passes"]["constant-fold"] == 2          # Constant and Mul
    assert report["nodes_after"] == {"Add": 1}


def test_constant_fold_keeps_nodes_that_make_graph_outputs():
    nodes = [helper.make_node("Neg", ["w"], ["y"])]
    model = make_model(nodes, [], [("y", np.float32, (3,))], {"w": np.ones(3, np.float32)})
    sess = aotc.compile(model)
    assert sess.report["passes"]["constant-fold"] == 0
    np.testing.assert_array_equal(sess.run({})["y"], -np.ones(3, np.float32))


# ---- gelu -------------------------------------------------------------------------

def _gelu_erf(x="x", out="y", half_first=False, reader=False):
    nodes = [_const("sqrt2", math.sqrt(2)), _const("one", 1.0), _const("half", 0.5),
             helper.make_node("Div", [x, "sqrt2"], ["d"]), helper.make_node("Erf", ["d"], ["e"]),
             helper.make_node("Add", ["e", "one"], ["a"])]
    if half_first:
        nodes += [helper.make_node("Mul", [x, "half"], ["h"]), helper.make_node("Mul", ["h", "a"], [out])]
    else:
        nodes += [helper.make_node("Mul", [x, "a"], ["m"]), helper.make_node("Mul", ["m", "half"], [out])]
    outputs = [(out, np.float32, (6, 33))]
    if reader:   # a second reader of an inner value breaks the pattern
        nodes.append(helper.make_node("Neg", ["e"], ["extra"]))
        outputs.append(("extra", np.float32, (6, 33)))
    return make_model(nodes, [(x, np.float32, (6, 33))], outputs)


@pytest.mark.parametrize("half_first", [False, True])
def test_gelu_fuses_the_erf_chain(half_first):
    report = _compare(_gelu_erf(half_first=half_first), {"x": random((6, 33), low=-5, high=5)})
    assert report["passes"]["gelu"] == 1
    assert report["nodes_after"] == {"Gelu": 1}


def test_gelu_refuses_when_an_inner_value_has_another_reader():
    report = _compare(_gelu_erf(reader=True), {"x": random((6, 33))})
    assert report["passes"]["gelu"] == 0
    assert "Erf" in report["nodes_after"]


def test_gelu_refuses_a_wrong_constant():
    model = _gelu_erf()
    for node in model.graph.node:
        if node.output[0] == "half":
            node.attribute[0].t.float_data[:] = [0.25]
    assert aotc.compile(model).report["passes"]["gelu"] == 0


def test_gelu_fuses_the_tanh_chain():
    c = math.sqrt(2 / math.pi)
    nodes = [_const("three", 3.0), _const("k", 0.044715), _const("c", c), _const("one", 1.0),
             _const("half", 0.5),
             helper.make_node("Pow", ["x", "three"], ["p"]), helper.make_node("Mul", ["k", "p"], ["kp"]),
             helper.make_node("Add", ["x", "kp"], ["s"]), helper.make_node("Mul", ["s", "c"], ["cs"]),
             helper.make_node("Tanh", ["cs"], ["t"]), helper.make_node("Add", ["one", "t"], ["a"]),
             helper.make_node("Mul", ["x", "half"], ["h"]), helper.make_node("Mul", ["h", "a"], ["y"])]
    model = make_model(nodes, [("x", np.float32, (5, 17))], [("y", np.float32, (5, 17))])
    report = _compare(model, {"x": random((5, 17), low=-4, high=4)})
    assert report["passes"]["gelu"] == 1
    assert report["nodes_after"] == {"Gelu": 1}


def test_the_optimized_graph_dumps_as_valid_onnx(tmp_path):
    import onnx
    path = tmp_path / "optimized.onnx"
    aotc.compile(_gelu_erf(), dump_optimized=path)
    model = onnx.load(path)
    onnx.checker.check_model(model, full_check=True)
    assert [(n.op_type, n.domain) for n in model.graph.node] == [("Gelu", "ai.aotc")]


# ---- conv-batchnorm-fold ----------------------------------------------------------

def _conv_bn(second_reader=False, runtime_mean=False):
    rng = np.random.default_rng(3)
    inits = {"w": rng.standard_normal((6, 3, 3, 3)).astype(np.float32),
             "b": rng.standard_normal(6).astype(np.float32),
             "scale": rng.uniform(0.5, 1.5, 6).astype(np.float32),
             "beta": rng.standard_normal(6).astype(np.float32),
             "mean": rng.standard_normal(6).astype(np.float32) * 0.1,
             "var": rng.uniform(0.5, 1.5, 6).astype(np.float32)}
    inputs = [("x", np.float32, (1, 3, 9, 9))]
    if runtime_mean:
        del inits["mean"]
        inputs.append(("mean", np.float32, (6,)))
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1], name="conv"),
             helper.make_node("BatchNormalization", ["c", "scale", "beta", "mean", "var"], ["y"],
                              epsilon=1e-3, name="bn")]
    outputs = [("y", np.float32, None)]
    if second_reader:
        nodes.append(helper.make_node("Relu", ["c"], ["r"]))
        outputs.append(("r", np.float32, None))
    return make_model(nodes, inputs, outputs, inits)


def test_conv_batchnorm_fold_folds_constant_statistics():
    report = _compare(_conv_bn(), {"x": random((1, 3, 9, 9))}, rtol=1e-5, atol=1e-5)
    assert report["passes"]["conv-batchnorm-fold"] == 1
    assert "BatchNormalization" not in report["nodes_after"]


@pytest.mark.parametrize("broken", ["second_reader", "runtime_mean"])
def test_conv_batchnorm_fold_refuses_broken_patterns(broken):
    model = _conv_bn(**{broken: True})
    feeds = {"x": random((1, 3, 9, 9))}
    if broken == "runtime_mean":
        feeds["mean"] = random((6,), seed=4)
    report = _compare(model, feeds, rtol=1e-5, atol=1e-5)
    assert report["passes"]["conv-batchnorm-fold"] == 0
    assert report["nodes_after"]["BatchNormalization"] == 1
    assert any("bn" in note for note in report["pass_notes"])


# ---- layernorm ----------------------------------------------------------------------

def _decomposed_layernorm(axes=(-1,), with_beta=True, opset=13):
    d = 24
    nodes = [helper.make_node("ReduceMean", ["x"], ["mean"], axes=list(axes)),
             helper.make_node("Sub", ["x", "mean"], ["d"]),
             _const("two", 2.0), helper.make_node("Pow", ["d", "two"], ["sq"]),
             helper.make_node("ReduceMean", ["sq"], ["var"], axes=list(axes)),
             _const("eps", 1e-5), helper.make_node("Add", ["var", "eps"], ["ve"]),
             helper.make_node("Sqrt", ["ve"], ["std"]), helper.make_node("Div", ["d", "std"], ["n"]),
             helper.make_node("Mul", ["n", "gamma"], ["g" if with_beta else "y"])]
    inits = {"gamma": random((d,), seed=7, low=0.5, high=1.5)}
    if with_beta:
        nodes.append(helper.make_node("Add", ["g", "beta"], ["y"]))
        inits["beta"] = random((d,), seed=8)
    return make_model(nodes, [("x", np.float32, (2, 5, d))], [("y", np.float32, None)], inits, opset=opset)


@pytest.mark.parametrize("with_beta", [True, False])
def test_layernorm_fuses_the_written_out_chain(with_beta):
    report = _compare(_decomposed_layernorm(with_beta=with_beta), {"x": random((2, 5, 24))},
                      rtol=1e-5, atol=1e-5)
    assert report["passes"]["layernorm"] == 1
    assert report["nodes_after"] == {"LayerNormalization": 1}


def test_layernorm_refuses_a_mean_over_another_axis():
    report = _compare(_decomposed_layernorm(axes=(1,)), {"x": random((2, 5, 24))}, rtol=1e-5, atol=1e-5)
    assert report["passes"]["layernorm"] == 0
    assert any("last axis" in note for note in report["pass_notes"])


# ---- attention ----------------------------------------------------------------------

def _attention(dtype=np.float32, scale="const", axis=-1, reader=False):
    """Q Kt * scale + mask -> Softmax -> P V over [b, h, s, d] inputs."""
    b, h, s, d = 1, 2, 7, 8
    nodes = [helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
             helper.make_node("MatMul", ["q", "kt"], ["qk"]),
             helper.make_node("Mul", ["qk", "scale"], ["scaled"]),
             helper.make_node("Add", ["scaled", "mask"], ["masked"]),
             helper.make_node("Softmax", ["masked"], ["p"], axis=axis),
             helper.make_node("MatMul", ["p", "v"], ["y"])]
    inputs = [(n, dtype, (b, h, s, d)) for n in "qkv"] + [("mask", dtype, (1, 1, 1, s))]
    inits = {}
    if scale == "const":
        inits["scale"] = np.array(d ** -0.5, dtype)
    else:
        inputs.append(("scale", dtype, ()))
    outputs = [("y", dtype, None)]
    if reader:
        nodes.append(helper.make_node("Neg", ["p"], ["extra"]))
        outputs.append(("extra", dtype, None))
    return make_model(nodes, inputs, outputs, inits)


def _attention_feeds(dtype=np.float32, scale=False):
    feeds = {n: random((1, 2, 7, 8), seed=i).astype(dtype) for i, n in enumerate("qkv")}
    feeds["mask"] = np.where(np.arange(7) < 5, 0, -1e4).reshape(1, 1, 1, 7).astype(dtype)
    if scale:
        feeds["scale"] = np.array(0.25, dtype)
    return feeds


def test_attention_fuses_scaled_masked_softmax():
    report = _compare(_attention(), _attention_feeds(), rtol=1e-5, atol=1e-6)
    assert report["passes"]["attention"] == 1
    assert report["nodes_after"] == {"Attention": 1}


@pytest.mark.parametrize("broken, note", [
    ({"reader": True}, "another reader"),
    ({"scale": "input"}, "not a constant"),
    ({"axis": 2}, "not the last"),
])
def test_attention_refuses_broken_patterns(broken, note):
    feeds = _attention_feeds(broken.get("dtype", np.float32), scale=broken.get("scale") == "input")
    report = _compare(_attention(**broken), feeds, rtol=1e-3, atol=1e-3)
    assert report["passes"]["attention"] == 0
    assert report["nodes_after"]["Softmax"] == 1
    assert any(note in n for n in report["pass_notes"]), report["pass_notes"]


def test_attention_refuses_other_element_types():
    from aotc.onnx_import import import_model
    from aotc.passes import run_passes
    graph = import_model(_attention(np.float16))
    fired, notes = run_passes(graph, "all", "fast")
    assert fired["attention"] == 0
    assert any("float32 only" in n and "float16" in n for n in notes), notes


# ---- the pass table on real exports ------------------------------------------------

MODELS_DIR = os.environ.get("AOTC_MODELS_DIR", "")


@pytest.mark.parametrize("name, expected", [
    ("bert_base", {"attention": 12, "gelu": 12}),
    ("resnet50_bn", {"conv-batchnorm-fold": 53, "conv-activation": 33}),
    ("mobilenetv2", {"conv-pad-fold": 52}),
])
def test_passes_fire_on_real_exports(name, expected):
    from aotc.onnx_import import import_model
    from aotc.passes import run_passes
    path = os.path.join(MODELS_DIR, f"{name}.onnx")
    if not os.path.isfile(path):
        pytest.skip(f"{path} is absent (set AOTC_MODELS_DIR)")
    fired, _ = run_passes(import_model(path), "all", "fast")
    for pass_name, count in expected.items():
        assert fired[pass_name] == count
    if name == "bert_base":
        assert fired["linear-pack-fuse"] >= 72


def test_the_dumped_bert_graph_is_valid_onnx_of_fused_nodes(tmp_path):
    import collections

    import onnx
    from aotc.compiler import dump_optimized_graph
    path = os.path.join(MODELS_DIR, "bert_base.onnx")
    if not os.path.isfile(path):
        pytest.skip(f"{path} is absent (set AOTC_MODELS_DIR)")
    out = tmp_path / "bert_optimized.onnx"
    dump_optimized_graph(onnx.load(path), "all", "fast", out)
    model = onnx.load(out)
    onnx.checker.check_model(model)
    counts = collections.Counter((n.domain, n.op_type) for n in model.graph.node)
    assert counts[("ai.aotc", "Attention")] == 12
    assert counts[("ai.aotc", "Linear")] >= 72
    assert ("", "MatMul") not in counts and ("", "Softmax") not in counts


def test_conv_activation_leaves_a_double_conv_to_activations_its_kernel_lacks():
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"]), helper.make_node("Sigmoid", ["c"], ["s"]),
             helper.make_node("Conv", ["x", "w"], ["d"]), helper.make_node("Relu", ["d"], ["r"])]
    model = make_model(nodes, [("x", np.float64, (1, 2, 5, 5))], [("s", np.float64, None), ("r", np.float64, None)],
                       {"w": random((3, 2, 3, 3)).astype(np.float64)})
    report = _compare(model, {"x": random((1, 2, 5, 5)).astype(np.float64)}, exact_bits=True)
    assert report["passes"]["conv-activation"] == 1          # the Relu one
    assert any("no Sigmoid" in note for note in report["pass_notes"])
