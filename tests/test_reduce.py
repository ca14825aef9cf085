import ml_dtypes
import numpy as np
import pytest
from onnx import helper

import aotc
from oracle import assert_matches_ort, assert_outputs_match, check, make_model, random, run_reference
from sanitize import assert_clean_c

FLOAT_OPS = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd",
             "ReduceSumSquare", "ReduceL1", "ReduceL2", "ReduceLogSumExp"]
AXES_INPUT_OPSET = {"ReduceSum": 13}

# (shape, axes): single, multiple, negative, non-adjacent, all, inner and outer runs
CASES = [((3, 5, 7), [1]), ((3, 5, 7), [-1]), ((3, 5, 7), [0]), ((2, 3, 4, 5), [0, 2]),
         ((2, 3, 4, 5), [1, -1]), ((4, 1, 6), [1]), ((37,), [0]), ((2, 3, 33), [0, 1, 2]),
         ((2, 70, 9), [-2]), ((5, 1, 3, 2), [-4, 1, 3])]


def _node(op, axes, opset, keepdims, noop, inits, x="x", suffix=""):
    attrs = {"keepdims": keepdims}
    if noop is not None:
        attrs["noop_with_empty_axes"] = noop
    inputs = [x]
    if opset >= AXES_INPUT_OPSET.get(op, 18):
        if axes is not None:
            inits[f"axes{suffix}"] = np.array(axes, np.int64)
            inputs.append(f"axes{suffix}")
    elif axes is not None:
        attrs["axes"] = axes
    return helper.make_node(op, inputs, [f"y_{op}{suffix}"], **attrs)


def _model(ops, shape, axes, opset, keepdims=1, dtype=np.float32, noop=None):
    """One model with one output per reduction in `ops`, all over the same input."""
    inits = {}
    nodes = [_node(op, axes, opset, keepdims, noop, inits) for op in ops]
    return make_model(nodes, [("x", dtype, shape)], [(f"y_{op}", dtype, None) for op in ops],
                      inits, opset=opset)


def _input(shape, dtype=np.float32):
    """Values near 1 keep ReduceProd in range; the signs exercise Max/Min/L1."""
    x = random(shape, dtype, seed=3, low=0.8, high=1.2)
    return x * np.where(random(shape, np.bool_, seed=5), 1, -1).astype(dtype)


def _check(ops, shape, axes, opset, keepdims=1, noop=None):
    m = _model(ops, shape, axes, opset, keepdims, noop=noop)
    assert_matches_ort(m, {"x": _input(shape)}, rtol=2e-5, atol=1e-5)


def _check_cases(ops_by_opset, keepdims=1, cases=CASES, dtype=np.float32, make_input=_input):
    """Every (shape, axes) of `cases` through every op, one model per opset: input x<i>
    holds case i."""
    for opset, ops in ops_by_opset.items():
        nodes, inputs, outputs, inits, feeds = [], [], [], {}, {}
        for i, (shape, axes) in enumerate(cases):
            inputs.append((f"x{i}", dtype, shape))
            feeds[f"x{i}"] = make_input(shape, dtype)
            for op in ops:
                nodes.append(_node(op, axes, opset, keepdims, None, inits, f"x{i}", f"_{i}"))
                outputs.append((f"y_{op}_{i}", dtype, None))
        m = make_model(nodes, inputs, outputs, inits, opset=opset)
        assert_matches_ort(m, feeds, rtol=2e-5, atol=1e-5)


@pytest.mark.parametrize("keepdims", [0, 1])
def test_axes_as_attribute(keepdims):
    _check_cases({11: ["ReduceSum"], 13: FLOAT_OPS[1:]}, keepdims)


def test_axes_as_input():
    _check_cases({13: ["ReduceSum"], 18: FLOAT_OPS})


@pytest.mark.parametrize("opset", [11, 13, 18])
@pytest.mark.parametrize("keepdims", [0, 1])
def test_missing_axes_reduce_everything(opset, keepdims):
    _check(FLOAT_OPS, (3, 4, 5), None, opset, keepdims)


@pytest.mark.parametrize("noop", [0, 1])
def test_empty_axes_with_noop_flag(noop):
    _check(FLOAT_OPS, (3, 4, 5), [], 18, noop=noop)


def test_reduce_sum_axes_input_with_noop():
    _check(["ReduceSum"], (2, 3), [], 13, noop=1)


INT_OPS = {np.int64: ["ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1"],
           np.int32: ["ReduceMax", "ReduceMin", "ReduceProd", "ReduceMean", "ReduceSumSquare"]}


@pytest.mark.parametrize("dtype", [np.int64, np.int32])
def test_integer_reductions(dtype):
    cases = [((4, 5, 6), [1]), ((4, 5, 6), [0, 2]), ((40, 3), [0]), ((3, 35), [-1])]
    _check_cases({11: ["ReduceSum"], 13: INT_OPS[dtype]}, cases=cases, dtype=dtype,
                 make_input=lambda shape, dt: random(shape, dt, seed=4, low=-2, high=2))


def test_big_reduction_splits_work_and_matches():
    ops = ["ReduceMean", "ReduceMax"]
    m = _model(ops, (64, 128, 96), [-1], 13)
    x = random((64, 128, 96), seed=8)
    got = assert_matches_ort(m, {"x": x}, rtol=1e-5, atol=1e-6, threads=2)
    one = aotc.compile(m, threads=1).run({"x": x})
    for op in ops:
        np.testing.assert_array_equal(got[f"y_{op}"], one[f"y_{op}"])


def test_log_sum_exp_is_stable_for_large_values():
    m = _model(["ReduceLogSumExp"], (3, 8), [1], 13)
    assert_matches_ort(m, {"x": random((3, 8), low=80, high=120)})


def test_axes_must_be_constant():
    node = helper.make_node("ReduceMean", ["x", "axes"], ["y"])
    m = make_model([node], [("x", np.float32, (2, 3)), ("axes", np.int64, (1,))],
                   [("y", np.float32, None)], opset=18)
    with pytest.raises(aotc.AotcError, match="compile-time constant"):
        aotc.compile(m)


def test_out_of_range_axis_is_an_invalid_model():
    m = _model(["ReduceMax"], (2, 3), [2], 13)
    with pytest.raises(aotc.AotcError, match="out of range"):
        aotc.compile(m)


def test_shape_chain_folds_to_a_constant():
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("ReduceProd", ["s"], ["n"], keepdims=1),
             helper.make_node("Reshape", ["x", "n"], ["y"])]
    m = make_model(nodes, [("x", np.float32, (2, 3, 4))], [("y", np.float32, None)], opset=13)
    try:
        sess = aotc.compile(m)
    except aotc.AotcError as e:   # Shape/Reshape live in other modules
        pytest.skip(f"needs Shape and Reshape: {e}")
    assert sess.report["nodes_after"].get("ReduceProd", 0) == 0
    x = random((2, 3, 4))
    np.testing.assert_array_equal(sess.run({"x": x})["y"], x.reshape(-1))


# ---- element types, empty sets, NaN and infinities -----------------------------------

ALL_FLOAT_OPS = FLOAT_OPS + ["ReduceLogSum"]
INT_ARITHMETIC_OPS = ["ReduceSum", "ReduceMean", "ReduceProd", "ReduceMax", "ReduceMin",
                      "ReduceSumSquare", "ReduceL1", "ReduceL2"]


def _positive_input(shape, dtype):
    """Signs mixed but every reduced sum positive enough for ReduceLogSum."""
    return (np.abs(_input(shape)) + 0.25).astype(dtype)


def _check_reference_values(model, feeds, **options):
    """Like check against onnx.reference, but the reference widens some 32-bit integer
    results to 64 bits: its values are compared in the input's type."""
    got = aotc.compile(model, **options).run(feeds)
    dtype = next(iter(feeds.values())).dtype
    want = {k: v.astype(dtype) for k, v in run_reference(model, feeds).items()}
    assert_outputs_match(got, want, oracle="onnx.reference")


@pytest.mark.parametrize("axes", [[0, 2], [1], None])
def test_double_matches_the_reference(axes):
    shape = (3, 5, 37)
    m = _model(ALL_FLOAT_OPS, shape, axes, 18, dtype=np.float64)
    check(m, {"x": _positive_input(shape, np.float64)}, oracle="onnx.reference", rtol=1e-12, atol=0)


@pytest.mark.parametrize("dtype, ulp", [(np.float16, 2.0 ** -10), (ml_dtypes.bfloat16, 2.0 ** -7)])
def test_half_floats_accumulate_in_float_and_round_once(dtype, ulp):
    """The float32 reference's results rounded to the 16-bit type, within one unit in the
    last place of it (summation order may move a result across a rounding boundary)."""
    shape, axes = (3, 5, 37), [0, 2]
    x = _positive_input(shape, dtype)
    got = aotc.compile(_model(ALL_FLOAT_OPS, shape, axes, 18, dtype=dtype)).run({"x": x})
    want = run_reference(_model(ALL_FLOAT_OPS, shape, axes, 18), {"x": x.astype(np.float32)})
    with np.errstate(over="ignore"):      # products beyond the 16-bit range are inf in both
        want = {k: v.astype(dtype) for k, v in want.items()}
    assert_outputs_match(got, want, rtol=ulp, atol=0, oracle="float32 reference")


@pytest.mark.parametrize("dtype", [np.uint32, np.uint64, np.int32, np.int64])
def test_integer_types_match_the_reference(dtype):
    shape = (4, 5, 6)
    x = random(shape, dtype, seed=6, low=0 if np.dtype(dtype).kind == "u" else -3, high=3)
    for axes in ([1], [0, 2]):
        _check_reference_values(_model(INT_ARITHMETIC_OPS, shape, axes, 18, dtype=dtype), {"x": x})


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.bool_])
def test_max_and_min_of_small_types(dtype):
    shape = (6, 35)
    x = random(shape, dtype, seed=2, low=-100 if dtype == np.int8 else 0, high=1 if dtype == np.bool_ else 200)
    for axes in ([1], [0], None):
        check(_model(["ReduceMax", "ReduceMin"], shape, axes, 20, dtype=dtype), {"x": x},
              oracle="onnx.reference")


@pytest.mark.filterwarnings("ignore:Mean of empty slice")
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.bool_])
def test_reduction_over_no_elements_gives_the_identity(dtype):
    # (the integer mean of nothing is left out: the reference casts a NaN to int)
    ops = ["ReduceMax", "ReduceMin"] if dtype == np.bool_ else \
        ALL_FLOAT_OPS if dtype == np.float32 else [op for op in INT_ARITHMETIC_OPS if op != "ReduceMean"]
    shape = (2, 0, 4)
    m = _model(ops, shape, [1], 20, dtype=dtype)
    with np.errstate(all="ignore"):   # the reference's mean of nothing warns
        _check_reference_values(m, {"x": np.zeros(shape, dtype)}, shapes={"x": shape})


def test_max_and_min_propagate_nan():
    """NaN anywhere in a reduced set wins, in the row lanes and in the column walk."""
    x = random((4, 40), seed=1)
    x[1, 3] = x[2, 39] = x[3, 0] = np.nan
    for axes in ([1], [0]):
        check(_model(["ReduceMax", "ReduceMin"], x.shape, axes, 18), {"x": x}, oracle="onnx.reference")


def test_log_sum_exp_with_infinities():
    x = np.array([[np.inf, 1, 2], [-np.inf, -np.inf, -np.inf], [-np.inf, 0, 0], [1e30, -1e30, 0]],
                 np.float32)
    got = aotc.compile(_model(["ReduceLogSumExp"], x.shape, [1], 18)).run({"x": x})
    want = [np.inf, -np.inf, np.log(2), 1e30]
    np.testing.assert_allclose(got["y_ReduceLogSumExp"].reshape(-1), want, rtol=1e-6)


def test_log_reductions_of_integers_are_unsupported():
    m = _model(["ReduceLogSum"], (2, 3), [1], 18, dtype=np.int32)
    with pytest.raises(aotc.AotcError, match="only floating types"):
        aotc.compile(m)


def test_generated_c_is_clean(tmp_path):
    """Every kernel family once: warnings-free C and a clean ASan/UBSan run."""
    nodes, inputs, outputs, inits = [], [], [], {"axes": np.array([1], np.int64)}
    for dtype, ops in [(np.float32, ["ReduceLogSumExp", "ReduceL2"]), (np.float16, ALL_FLOAT_OPS),
                       (np.int32, INT_ARITHMETIC_OPS), (np.bool_, ["ReduceMin"])]:
        name = f"x_{np.dtype(dtype).name}"
        inputs.append((name, dtype, (3, 19, 5)))
        for op in ops:
            out = f"y_{op}_{np.dtype(dtype).name}"
            nodes.append(helper.make_node(op, [name, "axes"], [out], keepdims=0))
            outputs.append((out, dtype, None))
    assert_clean_c(tmp_path, make_model(nodes, inputs, outputs, inits, opset=20), "reductions")


def test_exact_mode_matches_onnxruntime_with_the_same_bits_on_any_thread_count():
    shape = (6, 40, 33)
    m = _model(ALL_FLOAT_OPS, shape, [1], 18)
    x = _positive_input(shape, np.float32)
    one = assert_matches_ort(m, {"x": x}, rtol=2e-5, atol=1e-5, mode="exact", threads=1)
    two = aotc.compile(m, mode="exact", threads=2).run({"x": x})
    for name in one:
        np.testing.assert_array_equal(one[name], two[name], err_msg=name)


def test_exact_mode_has_no_double_logarithm():
    m = _model(["ReduceLogSumExp"], (2, 3), [1], 18, dtype=np.float64)
    with pytest.raises(aotc.AotcError, match="no exact-mode kernel for: ReduceLogSumExp"):
        aotc.compile(m, mode="exact")


def test_exact_mode_writes_the_canonical_nan():
    x = np.array([[1, 2], [3, 4]], np.float32)
    x.view(np.uint32)[0, 1] = 0xFFC00001      # a negative NaN with a payload
    ops = ["ReduceMax", "ReduceSum", "ReduceLogSumExp"]
    got = aotc.compile(_model(ops, x.shape, [1], 18), mode="exact").run({"x": x})
    for op in ops:
        assert got[f"y_{op}"].view(np.uint32)[0, 0] == 0x7FC00000, op
