"""Activation functions and Clip against onnxruntime (onnx.reference where onnxruntime
lacks the operator or type), on every float type, with every attribute form."""
import numpy as np
import pytest
from onnx import helper

import aotc
from oracle import assert_matches_ort, make_model, random
from sanitize import CC, run_sanitized
from test_elementwise import BF16, F16, FLOATS, assert_matches, values

# op: (attribute sets to test, opset)
ACTIVATIONS = {
    "Relu": ([{}], 14),
    "LeakyRelu": ([{}, {"alpha": 0.3}], 16),
    "Elu": ([{}, {"alpha": 0.5}], 6),
    "Selu": ([{}, {"alpha": 2.0, "gamma": 3.0}], 6),
    "Celu": ([{}, {"alpha": 2.5}], 12),
    "ThresholdedRelu": ([{}, {"alpha": 0.4}], 10),
    "Shrink": ([{}, {"lambd": 1.5, "bias": 0.25}], 9),
    "Softplus": ([{}], 1),
    "Softsign": ([{}], 1),
    "Mish": ([{}], 18),
    "HardSigmoid": ([{}, {"alpha": 0.3, "beta": 0.4}], 6),
    "HardSwish": ([{}], 14),
    "Sigmoid": ([{}], 13),
    "Tanh": ([{}], 13),
}


def _cases():
    for op, (attr_sets, opset) in ACTIVATIONS.items():
        for i, attrs in enumerate(attr_sets):
            yield pytest.param(op, attrs, opset, id=f"{op}-{i}")


@pytest.mark.parametrize("op, attrs, opset", _cases())
@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
def test_activation(op, attrs, opset, dtype):
    if op == "Celu" and np.dtype(dtype) != np.float32:    # Celu-28 added the other types
        opset = 28
    opset = max(opset, 13) if np.dtype(dtype) == BF16 else opset
    m = make_model([helper.make_node(op, ["x"], ["y"], **attrs)], [("x", dtype, (3, 11))],
                   [("y", dtype, None)], opset=max(opset, 7))
    x = values((3, 11), dtype, seed=len(op), low=-6, high=6)
    x.reshape(-1)[:4] = np.array([0.0, -0.0, 20.0, -20.0], np.float32).astype(dtype)
    assert_matches(m, {"x": x})


@pytest.mark.parametrize("alpha", [None, 0.7])
@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
def test_swish_opset_24(alpha, dtype):
    attrs = {} if alpha is None else {"alpha": alpha}
    m = make_model([helper.make_node("Swish", ["x"], ["y"], **attrs)], [("x", dtype, (2, 9))],
                   [("y", dtype, None)], opset=24)
    assert_matches(m, {"x": values((2, 9), dtype, 5, low=-6, high=6)})


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.int64], ids=lambda d: np.dtype(d).name)
def test_relu_on_signed_integers(dtype):
    m = make_model([helper.make_node("Relu", ["x"], ["y"])], [("x", dtype, (4, 6))], [("y", dtype, None)], opset=14)
    assert_matches(m, {"x": values((4, 6), dtype, 2)})


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int32, np.int64, np.uint64], ids=lambda d: np.dtype(d).name)
def test_shrink_on_integers(dtype):
    m = make_model([helper.make_node("Shrink", ["x"], ["y"], lambd=2.0, bias=1.5)], [("x", dtype, (3, 5))],
                   [("y", dtype, None)], opset=9)
    x = values((3, 5), dtype, 4, low=-0.2, high=0.2)
    got = aotc.compile(m).run(x)
    wide = x.astype(np.float64)
    want = np.trunc(np.where(wide < -2, wide + 1.5, np.where(wide > 2, wide - 1.5, 0)))
    np.testing.assert_array_equal(got, want.astype(dtype))


def test_every_activation_folds_on_a_constant_input_to_what_its_kernel_computes():
    """The numpy evaluation of each activation (used for constant folding) against its C
    kernel: the same op on the same values, once folded and once run."""
    c = values((3, 11), np.float32, seed=9, low=-6, high=6)
    nodes, outputs = [], []
    for i, (op, (attr_sets, _)) in enumerate(ACTIVATIONS.items()):
        attrs = attr_sets[-1]
        nodes += [helper.make_node(op, ["c"], [f"folded{i}"], **attrs),
                  helper.make_node(op, ["x"], [f"r{i}"], **attrs),
                  helper.make_node("Add", [f"folded{i}", "zero"], [f"f{i}"])]
        outputs += [(f"f{i}", np.float32, None), (f"r{i}", np.float32, None)]
    m = make_model(nodes, [("x", np.float32, (3, 11)), ("zero", np.float32, (1,))], outputs,
                   {"c": c}, opset=18)
    sess = aotc.compile(m)
    assert sess.report["passes"]["constant-fold"] >= len(ACTIVATIONS)
    got = sess.run({"x": c, "zero": np.zeros(1, np.float32)})
    for i in range(len(ACTIVATIONS)):
        np.testing.assert_allclose(got[f"f{i}"], got[f"r{i}"], rtol=1e-6, atol=1e-7, err_msg=list(ACTIVATIONS)[i])


def test_activations_chain_with_attributes():
    nodes = [helper.make_node("LeakyRelu", ["x"], ["a"], alpha=0.2),
             helper.make_node("HardSigmoid", ["a"], ["y"], alpha=0.3, beta=0.4)]
    m = make_model(nodes, [("x", np.float32, (4, 9))], [("y", np.float32, None)])
    assert_matches_ort(m, {"x": random((4, 9), low=-5, high=5)})


# ---- Clip ---------------------------------------------------------------------------

@pytest.mark.parametrize("opset", [7, 13])
def test_clip_bounds_as_attributes_and_inputs(opset):
    if opset < 11:
        nodes = [helper.make_node("Clip", ["x"], ["y"], min=-0.5, max=1.5)]
        inits = {}
    else:
        nodes = [helper.make_node("Clip", ["x", "lo", "hi"], ["y"])]
        inits = {"lo": np.array(-0.5, np.float32), "hi": np.array(1.5, np.float32)}
    m = make_model(nodes, [("x", np.float32, (5, 6))], [("y", np.float32, None)], inits, opset=opset)
    assert_matches_ort(m, {"x": random((5, 6))})


@pytest.mark.parametrize("bounds", ["both", "min", "max", "none"])
@pytest.mark.parametrize("dtype", FLOATS + [np.int8, np.uint8, np.int32, np.int64, np.uint64],
                         ids=lambda d: np.dtype(d).name)
def test_clip_on_every_numeric_type(bounds, dtype):
    dtype = np.dtype(dtype)
    names = {"both": ["x", "lo", "hi"], "min": ["x", "lo"], "max": ["x", "", "hi"], "none": ["x"]}[bounds]
    lo, hi = (np.array(v, np.float32).astype(dtype) for v in ((-1.5, 2.5) if dtype.kind != "u" else (3, 40)))
    inits = {k: v for k, v in (("lo", lo), ("hi", hi)) if k in names}
    m = make_model([helper.make_node("Clip", names, ["y"])], [("x", dtype, (4, 7))], [("y", dtype, None)],
                   inits, opset=13)
    assert_matches(m, {"x": values((4, 7), dtype, 7)})


@pytest.mark.parametrize("dtype", [np.float32, F16, BF16, np.int16], ids=lambda d: np.dtype(d).name)
def test_clip_with_run_time_bounds(dtype):
    m = make_model([helper.make_node("Clip", ["x", "lo", "hi"], ["y"])],
                   [("x", dtype, (5, 6)), ("lo", dtype, ()), ("hi", dtype, ())], [("y", dtype, None)], opset=13)
    assert_matches(m, {"x": values((5, 6), dtype, 1), "lo": np.array(-1, np.float32).astype(dtype),
                       "hi": np.array(0.25 if np.dtype(dtype).kind == "f" else 20, np.float32).astype(dtype)})


def test_clip_with_only_a_runtime_max():
    m = make_model([helper.make_node("Clip", ["x", "", "hi"], ["y"])],
                   [("x", np.float32, (5, 6)), ("hi", np.float32, ())], [("y", np.float32, None)])
    assert_matches_ort(m, {"x": random((5, 6)), "hi": np.array(0.25, np.float32)})


def test_clip_min_above_max_gives_max():
    m = make_model([helper.make_node("Clip", ["x", "lo", "hi"], ["y"])], [("x", np.float32, (6,))],
                   [("y", np.float32, None)], {"lo": np.float32(2), "hi": np.float32(1)}, opset=13)
    assert_matches_ort(m, {"x": random((6,), seed=3)})


def test_clip_refuses_non_scalar_bounds():
    m = make_model([helper.make_node("Clip", ["x", "lo"], ["y"])], [("x", np.float32, (3,))],
                   [("y", np.float32, None)], {"lo": np.zeros(3, np.float32)}, opset=13)
    with pytest.raises(aotc.AotcError, match="scalar"):
        aotc.compile(m)


@pytest.mark.skipif(CC is None, reason="no C compiler")
def test_activation_c_is_warning_free_and_clean_under_sanitizers(tmp_path):
    ops = ["Elu", "Selu", "Celu", "Mish", "Softplus", "Softsign", "ThresholdedRelu", "Shrink", "HardSwish"]
    nodes = [helper.make_node(op, ["x"], [f"y_{op}"]) for op in ops] + [
        helper.make_node("Shrink", ["i"], ["y_shrink_int"], lambd=1.0, bias=3.0),
        helper.make_node("Clip", ["h", "lo", "hi"], ["y_clip"])]
    outs = [(f"y_{op}", BF16, None) for op in ops] + [("y_shrink_int", np.uint8, None), ("y_clip", F16, None)]
    m = make_model(nodes, [("x", BF16, (3, 4)), ("i", np.uint8, (5,)), ("h", F16, (7,)), ("hi", F16, ())], outs,
                   {"lo": np.float16(-0.5)}, opset=18)
    sess = aotc.compile(m, out_dir=tmp_path, name="act")
    lines = run_sanitized(tmp_path, sess.name, ["-Wall", "-Wextra", "-Werror"]).splitlines()
    assert [ln.split()[0] for ln in lines] == [t.name for t in sess.outputs]
