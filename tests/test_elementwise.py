"""Binary, variadic and unary math element-wise operators against onnxruntime (or
onnx.reference where onnxruntime lacks the operator or type), over the element types
the ONNX node suite uses; and their generated C under -Werror, ASan and UBSan."""
import functools

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator

import aotc
from aotc.errors import InvalidModel
from oracle import assert_matches_ort, make_model, random, run_ort
from sanitize import CC, run_sanitized

BF16 = np.dtype(ml_dtypes.bfloat16)
F16 = np.dtype(np.float16)
INTS = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]
FLOATS = [np.float32, np.float64, F16, BF16]
TOLERANCE = {np.dtype(np.float32): (1e-5, 1e-6), np.dtype(np.float64): (1e-10, 1e-12),
             F16: (2e-3, 1e-3), BF16: (1.6e-2, 1e-2)}
BROADCASTS = [((2, 3, 4), (2, 3, 4)), ((2, 3, 4), (4,)), ((2, 1, 4), (3, 1)), ((1,), (5, 7)),
              ((3, 1, 5, 1), (1, 4, 1, 6)), ((), (2, 2))]


def reference(model, feeds):
    """onnxruntime's outputs, or onnx.reference's where onnxruntime cannot run the model."""
    try:
        return run_ort(model, feeds), "onnxruntime"
    except Exception:   # NOT_IMPLEMENTED / type not registered
        names = [o.name for o in model.graph.output]
        return dict(zip(names, ReferenceEvaluator(model).run(None, feeds))), "onnx.reference"


def assert_matches(model, feeds, tolerance=None, **options):
    """Compile with aotc and compare every output with the reference (dtype and shape
    exactly; floats within the element type's tolerance, NaN where NaN)."""
    got = aotc.compile(model, **options).run(feeds)
    want, oracle = reference(model, feeds)
    for name, w in want.items():
        g = got[name]
        w = np.asarray(w)
        assert g.dtype == w.dtype, f"{name}: dtype {g.dtype} != {w.dtype} ({oracle})"
        assert g.shape == w.shape, f"{name}: shape {g.shape} != {w.shape} ({oracle})"
        if w.dtype in TOLERANCE:
            rtol, atol = tolerance or TOLERANCE[w.dtype]
            np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=rtol, atol=atol,
                                       err_msg=f"{name} ({oracle})")
        else:
            np.testing.assert_array_equal(g, w, err_msg=f"{name} ({oracle})")
    return got


def values(shape, dtype, seed=0, low=-4.0, high=4.0, nonzero=False):
    dtype = np.dtype(dtype)
    rng = np.random.default_rng(seed)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        lo, hi = max(int(low * 30), int(info.min)), min(int(high * 30), int(info.max))
        x = rng.integers(lo, hi + 1, size=shape).astype(dtype)
    elif dtype == np.bool_:
        return rng.random(size=shape) < 0.5
    else:
        x = rng.uniform(low, high, size=shape).astype(np.float32).astype(dtype)
    if nonzero:
        x = np.where(x == 0, dtype.type(1), x).astype(dtype)
    return x


def multi_output_model(ops, inputs, out_dtypes, opset=17, attrs=None):
    """One node per op over the same inputs, each its own output `y_<op>`."""
    attrs = attrs or {}
    nodes = [helper.make_node(op, [n for n, _, _ in inputs], [f"y_{op}"], **attrs.get(op, {})) for op in ops]
    return make_model(nodes, inputs, [(f"y_{op}", out_dtypes[op], None) for op in ops], opset=opset)


# ---- binary arithmetic and comparisons ----------------------------------------------

ARITHMETIC = ["Add", "Sub", "Mul", "Div"]
COMPARISONS = ["Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"]


@pytest.mark.parametrize("op", ARITHMETIC)
@pytest.mark.parametrize("shapes", BROADCASTS)
def test_arithmetic_broadcasts_like_onnxruntime(op, shapes):
    a, b = shapes
    m = make_model([helper.make_node(op, ["a", "b"], ["y"])],
                   [("a", np.float32, a), ("b", np.float32, b)], [("y", np.float32, None)])
    assert_matches_ort(m, {"a": random(a, seed=1), "b": random(b, seed=2, low=0.5, high=2)})


@pytest.mark.parametrize("dtype", FLOATS + INTS, ids=lambda d: np.dtype(d).name)
def test_arithmetic_and_comparisons_on_every_type(dtype):
    dtype = np.dtype(dtype)
    ops = ARITHMETIC + COMPARISONS
    out = {op: (np.bool_ if op in COMPARISONS else dtype) for op in ops}
    m = multi_output_model(ops, [("a", dtype, (3, 5)), ("b", dtype, (5,))], out, opset=14)
    a = values((3, 5), dtype, seed=1)
    b = values((5,), dtype, seed=2, nonzero=True)
    a[0, :] = b    # equal operands for the comparisons
    assert_matches(m, {"a": a, "b": b})


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64], ids=lambda d: np.dtype(d).name)
def test_signed_integer_arithmetic_wraps_and_division_truncates(dtype):
    info = np.iinfo(dtype)
    a = np.array([info.max, info.min, -7, 7, -7, 9], dtype)
    b = np.array([1, -1, 2, -2, -3, 4], dtype)
    m = multi_output_model(ARITHMETIC, [("a", dtype, (6,)), ("b", dtype, (6,))], {op: dtype for op in ARITHMETIC})
    got = aotc.compile(m).run({"a": a, "b": b})
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(got["y_Add"], a + b)
        np.testing.assert_array_equal(got["y_Sub"], a - b)
        np.testing.assert_array_equal(got["y_Mul"], a * b)
    np.testing.assert_array_equal(got["y_Div"][2:], [-3, -3, 2, 2])
    np.testing.assert_array_equal(got["y_Div"][:2], [info.max, info.min])   # min / -1 wraps


@pytest.mark.parametrize("op", ["And", "Or", "Xor"])
def test_logical(op):
    m = make_model([helper.make_node(op, ["a", "b"], ["t"]), helper.make_node("Not", ["t"], ["y"])],
                   [("a", np.bool_, (3, 4)), ("b", np.bool_, (1, 4))], [("y", np.bool_, None)])
    assert_matches_ort(m, {"a": random((3, 4), np.bool_, 5), "b": random((1, 4), np.bool_, 6)})


def test_equal_on_bool():
    m = make_model([helper.make_node("Equal", ["a", "b"], ["y"])],
                   [("a", np.bool_, (2, 3)), ("b", np.bool_, (3,))], [("y", np.bool_, None)])
    assert_matches(m, {"a": random((2, 3), np.bool_, 1), "b": random((3,), np.bool_, 2)})


@pytest.mark.parametrize("dtype", [np.float32, F16, BF16, np.int64, np.bool_], ids=lambda d: np.dtype(d).name)
def test_where_broadcasts_three_operands(dtype):
    m = make_model([helper.make_node("Where", ["c", "a", "b"], ["y"])],
                   [("c", np.bool_, (2, 1, 4)), ("a", dtype, (3, 1)), ("b", dtype, (4,))], [("y", dtype, None)])
    assert_matches(m, {"c": random((2, 1, 4), np.bool_), "a": values((3, 1), dtype, 1), "b": values((4,), dtype, 2)})


@pytest.mark.parametrize("types", [(np.float32, np.float32), (np.float32, np.int32), (np.float32, np.uint64),
                                   (np.int32, np.float32), (np.int64, np.int64), (np.int32, np.int32),
                                   (np.float64, np.float64), (F16, F16), (F16, np.int64)],
                         ids=lambda t: f"{np.dtype(t[0]).name}^{np.dtype(t[1]).name}")
@pytest.mark.parametrize("exponent", [(4,), (2, 4)])
def test_pow(types, exponent):
    base_t, exp_t = (np.dtype(t) for t in types)
    m = make_model([helper.make_node("Pow", ["a", "b"], ["y"])],
                   [("a", base_t, (2, 4)), ("b", exp_t, exponent)], [("y", base_t, None)], opset=15)
    a = values((2, 4), base_t, 1, low=0.1 if base_t.kind == "f" else -0.1, high=3, nonzero=True)
    b = values(exponent, exp_t, 2, low=0 if exp_t.kind == "u" else -0.1, high=0.1 if exp_t.kind in "iu" else 2)
    assert_matches(m, {"a": a, "b": b})


def test_integer_pow_wraps_and_negative_exponents_truncate():
    a = np.array([3, 2, -2, 1, -1, -1, 5, 0], np.int64)
    b = np.array([41, 64, 63, -3, -3, -4, -1, 0], np.int64)
    m = make_model([helper.make_node("Pow", ["a", "b"], ["y"])],
                   [("a", np.int64, (8,)), ("b", np.int64, (8,))], [("y", np.int64, None)], opset=15)
    got = aotc.compile(m).run({"a": a, "b": b})["y"]
    want = [pow(3, 41, 2**64), 0, (-2) ** 63, 1, -1, 1, 0, 1]
    np.testing.assert_array_equal(got, np.array([w if w < 2**63 else w - 2**64 for w in want], np.int64))


# ---- Mod, BitShift, bitwise ------------------------------------------------------------

@pytest.mark.parametrize("fmod", [0, 1])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, F16, np.int8, np.int32, np.int64, np.uint8, np.uint32],
                         ids=lambda d: np.dtype(d).name)
def test_mod_on_mixed_signs(fmod, dtype):
    dtype = np.dtype(dtype)
    opset = 28 if dtype.kind == "f" and fmod == 0 else 13   # floored float Mod is Mod-28
    m = make_model([helper.make_node("Mod", ["a", "b"], ["y"], fmod=fmod)],
                   [("a", dtype, (3, 6)), ("b", dtype, (6,))], [("y", dtype, None)], opset=opset)
    assert_matches(m, {"a": values((3, 6), dtype, 1, low=-3, high=3),
                       "b": values((6,), dtype, 2, low=-1 if dtype.kind != "u" else 0, high=1, nonzero=True)})


@pytest.mark.parametrize("dtype", [np.float32, np.float64, F16], ids=lambda d: np.dtype(d).name)
def test_mod_float_floored(dtype):
    """Mod-28: fmod=0 on floats takes the divisor's sign, with ONNX's special cases."""
    inf, nan = np.inf, np.nan
    a = np.array([5.5, -5.5, 5.5, -5.5, 0.0, -0.0, inf, 3.0, 3.0, -3.0, nan, 4.0, 1.0], dtype)
    b = np.array([2.0, 2.0, -2.0, -2.0, -3.0, 3.0, 2.0, 0.0, inf, inf, 1.0, -2.0, nan], dtype)
    m = make_model([helper.make_node("Mod", ["a", "b"], ["y"])], [("a", dtype, (13,)), ("b", dtype, (13,))],
                   [("y", dtype, None)], opset=28)
    got = aotc.compile(m).run({"a": a, "b": b})["y"]
    want = ReferenceEvaluator(m).run(None, {"a": a, "b": b})[0]
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


@pytest.mark.parametrize("direction", ["LEFT", "RIGHT"])
@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.uint32, np.uint64], ids=lambda d: np.dtype(d).name)
def test_bitshift_unsigned_like_onnxruntime(direction, dtype):
    m = make_model([helper.make_node("BitShift", ["a", "b"], ["y"], direction=direction)],
                   [("a", dtype, (3, 4)), ("b", dtype, (4,))], [("y", dtype, None)], opset=11)
    a = values((3, 4), dtype, 1, low=0, high=8)
    b = np.array([0, 1, 3, np.dtype(dtype).itemsize * 8 - 1], dtype)
    assert_matches_ort(m, {"a": a, "b": b})


@pytest.mark.parametrize("direction", ["LEFT", "RIGHT"])
@pytest.mark.parametrize("dtype", INTS, ids=lambda d: np.dtype(d).name)
def test_bitshift_past_the_width_and_signed(direction, dtype):
    """BitShift-28: signed types, arithmetic right shifts, shifts < 0 or >= the width."""
    dtype = np.dtype(dtype)
    width = dtype.itemsize * 8
    info = np.iinfo(dtype)
    a = np.array([1, 5, info.max, info.min, info.max // 3, 7, 3, 1], dtype)
    shifts = [0, 1, width - 1, width - 1, 2, width, width + 3, 2]
    if dtype.kind == "i":
        a[[1, 4, 7]] = [-5, -(info.max // 3), -1]
        shifts[-1] = -1
    b = np.array(shifts, dtype)
    m = make_model([helper.make_node("BitShift", ["a", "b"], ["y"], direction=direction)],
                   [("a", dtype, (8,)), ("b", dtype, (8,))], [("y", dtype, None)], opset=28)
    got = aotc.compile(m).run({"a": a, "b": b})["y"]
    np.testing.assert_array_equal(got, ReferenceEvaluator(m).run(None, {"a": a, "b": b})[0])


@pytest.mark.parametrize("dtype", INTS, ids=lambda d: np.dtype(d).name)
def test_bitwise_operators(dtype):
    ops = ["BitwiseAnd", "BitwiseOr", "BitwiseXor"]
    nodes = [helper.make_node(op, ["a", "b"], [f"y_{op}"]) for op in ops] + [
        helper.make_node("BitwiseNot", ["a"], ["y_BitwiseNot"])]
    m = make_model(nodes, [("a", dtype, (2, 3, 4)), ("b", dtype, (3, 1))],
                   [(f"y_{op}", dtype, None) for op in ops + ["BitwiseNot"]], opset=18)
    assert_matches(m, {"a": values((2, 3, 4), dtype, 1), "b": values((3, 1), dtype, 2)})


# ---- PRelu, and the variadic family -----------------------------------------------------

@pytest.mark.parametrize("slope", [(5,), (3, 1, 1), (), (1, 5)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, F16, np.int32], ids=lambda d: np.dtype(d).name)
def test_prelu_broadcasts_the_slope_to_the_input(slope, dtype):
    m = make_model([helper.make_node("PRelu", ["x", "s"], ["y"])],
                   [("x", dtype, (2, 3, 4, 5)), ("s", dtype, slope)], [("y", dtype, None)], opset=16)
    assert_matches(m, {"x": values((2, 3, 4, 5), dtype, 1), "s": values(slope, dtype, 2, low=-1, high=1)})


def test_prelu_refuses_a_slope_that_grows_the_input():
    m = make_model([helper.make_node("PRelu", ["x", "s"], ["y"])],
                   [("x", np.float32, (4,)), ("s", np.float32, (3, 4))], [("y", np.float32, None)])
    with pytest.raises(InvalidModel, match="slope"):
        aotc.compile(m)


VARIADIC_SHAPES = [[(3, 4)], [(3, 4), (4,)], [(2, 1, 4), (3, 1), (4,)], [(5,), (2, 5), (1, 1), (2, 1)]]


@pytest.mark.parametrize("shapes", VARIADIC_SHAPES, ids=lambda s: f"{len(s)}inputs")
@pytest.mark.parametrize("dtype", [np.float32, np.float64, F16, BF16], ids=lambda d: np.dtype(d).name)
def test_max_min_sum_mean(shapes, dtype):
    """onnxruntime runs float32 only and onnx.reference mishandles 3+ broadcast inputs,
    so the oracle is numpy in float64, and onnxruntime as well for float32."""
    dtype = np.dtype(dtype)
    ops = ["Max", "Min", "Sum", "Mean"]
    inputs = [(f"x{i}", dtype, s) for i, s in enumerate(shapes)]
    m = multi_output_model(ops, inputs, {op: dtype for op in ops}, opset=13)
    feeds = {n: values(s, dtype, i) for i, (n, _, s) in enumerate(inputs)}
    got = aotc.compile(m).run(feeds)
    wide = [feeds[n].astype(np.float64) for n, _, _ in inputs]
    want = {"Max": functools.reduce(np.maximum, wide), "Min": functools.reduce(np.minimum, wide),
            "Sum": functools.reduce(np.add, wide), "Mean": functools.reduce(np.add, wide) / len(wide)}
    rtol, atol = TOLERANCE[dtype]
    for op in ops:
        assert got[f"y_{op}"].dtype == dtype
        np.testing.assert_allclose(got[f"y_{op}"].astype(np.float64), np.broadcast_to(want[op], got[f"y_{op}"].shape),
                                   rtol=max(rtol, 1e-6), atol=max(atol, 1e-6), err_msg=op)
    if dtype == np.float32:
        assert_matches_ort(m, feeds)


@pytest.mark.parametrize("dtype", INTS, ids=lambda d: np.dtype(d).name)
def test_max_min_on_integers(dtype):
    inputs = [("a", dtype, (2, 3)), ("b", dtype, (3,)), ("c", dtype, (2, 1))]
    m = multi_output_model(["Max", "Min"], inputs, {"Max": dtype, "Min": dtype}, opset=13)
    assert_matches(m, {n: values(s, dtype, i) for i, (n, _, s) in enumerate(inputs)})


def test_max_min_propagate_nan():
    a = np.array([np.nan, 1.0, 2.0, np.nan], np.float32)
    b = np.array([1.0, np.nan, 3.0, np.nan], np.float32)
    m = multi_output_model(["Max", "Min"], [("a", np.float32, (4,)), ("b", np.float32, (4,))],
                           {"Max": np.float32, "Min": np.float32}, opset=13)
    got = aotc.compile(m).run({"a": a, "b": b})
    np.testing.assert_array_equal(got["y_Max"], [np.nan, np.nan, 3.0, np.nan])
    np.testing.assert_array_equal(got["y_Min"], [np.nan, np.nan, 2.0, np.nan])


def test_variadic_folds_on_constants():
    nodes = [helper.make_node("Sum", ["c0", "c1", "c2"], ["s"]), helper.make_node("Mean", ["s", "x"], ["y"])]
    m = make_model(nodes, [("x", np.float32, (2, 3))], [("y", np.float32, None)],
                   {"c0": np.ones((2, 3), np.float32), "c1": np.arange(3, dtype=np.float32),
                    "c2": np.float32(0.5)}, opset=13)
    sess = aotc.compile(m)
    assert "Sum" not in sess.report["nodes_after"]
    x = random((2, 3), seed=4)
    np.testing.assert_allclose(sess.run(x), (1 + np.arange(3) + 0.5 + x) / 2, rtol=1e-6)


# ---- unary math ------------------------------------------------------------------------

# op: (low, high) of its test inputs
FLOAT_MATH = {"Abs": (-4, 4), "Neg": (-4, 4), "Sign": (-4, 4), "Reciprocal": (0.3, 4), "Floor": (-4, 4),
              "Ceil": (-4, 4), "Round": (-4, 4), "Sqrt": (0.01, 9), "Exp": (-4, 4), "Log": (0.01, 9),
              "Erf": (-3, 3), "Sin": (-4, 4), "Cos": (-4, 4), "Tan": (-1.2, 1.2), "Asin": (-0.95, 0.95),
              "Acos": (-0.95, 0.95), "Atan": (-4, 4), "Sinh": (-3, 3), "Cosh": (-3, 3), "Asinh": (-4, 4),
              "Acosh": (1.05, 6), "Atanh": (-0.9, 0.9)}


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
def test_float_math_on_every_float_type(dtype):
    nodes, inputs, feeds = [], [], {}
    for i, (op, (low, high)) in enumerate(FLOAT_MATH.items()):
        inputs.append((f"x_{op}", dtype, (3, 7)))
        feeds[f"x_{op}"] = values((3, 7), dtype, i, low, high)
        nodes.append(helper.make_node(op, [f"x_{op}"], [f"y_{op}"]))
    feeds["x_Round"].reshape(-1)[:8] = np.array([0.5, 1.5, 2.5, -0.5, -2.5, 3.5, -1.5, 0.0], dtype)
    m = make_model(nodes, inputs, [(f"y_{op}", dtype, None) for op in FLOAT_MATH], opset=13)
    # onnx.reference (the oracle where onnxruntime lacks double kernels) computes some
    # double functions in float32
    assert_matches(m, feeds, tolerance=(1e-7, 1e-9) if dtype == np.float64 else None)


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.int64], ids=lambda d: np.dtype(d).name)
def test_signed_integer_abs_neg_sign(dtype):
    info = np.iinfo(dtype)
    x = np.array([info.min + 1, -3, 0, 5, info.max, -1], dtype)
    m = multi_output_model(["Abs", "Neg", "Sign"], [("x", dtype, (6,))], {o: dtype for o in ["Abs", "Neg", "Sign"]})
    assert_matches(m, {"x": x})


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.uint32, np.uint64], ids=lambda d: np.dtype(d).name)
def test_unsigned_abs_sign(dtype):
    x = np.array([0, 1, 7, np.iinfo(dtype).max], dtype)
    m = multi_output_model(["Abs", "Sign"], [("x", dtype, (4,))], {"Abs": dtype, "Sign": dtype})
    assert_matches(m, {"x": x})


@pytest.mark.parametrize("dtype", [np.float32, np.float64, F16, BF16], ids=lambda d: np.dtype(d).name)
def test_isnan_isinf(dtype):
    x = np.array([1.0, np.nan, np.inf, -np.inf, 0.0, -2.5, np.nan, np.inf], dtype)
    nodes = [helper.make_node("IsNaN", ["x"], ["nan"]), helper.make_node("IsInf", ["x"], ["inf"])] + [
        helper.make_node("IsInf", ["x"], [f"inf_{p}{n}"], detect_positive=p, detect_negative=n)
        for p, n in [(1, 0), (0, 1), (0, 0)]]
    outs = ["nan", "inf", "inf_10", "inf_01", "inf_00"]
    m = make_model(nodes, [("x", dtype, (8,))], [(o, np.bool_, None) for o in outs], opset=20)
    got = assert_matches(m, {"x": x})
    np.testing.assert_array_equal(got["inf_10"], [0, 0, 1, 0, 0, 0, 0, 1])


def test_not_and_bitwise_not_chain():
    m = make_model([helper.make_node("Not", ["b"], ["nb"]), helper.make_node("BitwiseNot", ["i"], ["ni"])],
                   [("b", np.bool_, (2, 5)), ("i", np.int16, (2, 5))], [("nb", np.bool_, None), ("ni", np.int16, None)],
                   opset=18)
    assert_matches(m, {"b": random((2, 5), np.bool_, 1), "i": values((2, 5), np.int16, 2)})


def test_unary_on_constants_folds():
    nodes = [helper.make_node("Sqrt", ["c"], ["s"]), helper.make_node("Add", ["s", "x"], ["y"])]
    m = make_model(nodes, [("x", np.float16, (3,))], [("y", np.float16, None)], {"c": np.array([4, 9, 2], np.float16)})
    sess = aotc.compile(m)
    assert "Sqrt" not in sess.report["nodes_after"]
    x = np.array([1, 2, 3], np.float16)
    np.testing.assert_array_equal(sess.run(x), (np.sqrt(np.array([4, 9, 2], np.float32)) + x).astype(np.float16))


def test_unsupported_type_is_named():
    m = make_model([helper.make_node("Sqrt", ["x"], ["y"])], [("x", np.int32, (3,))], [("y", np.int32, None)])
    with pytest.raises(aotc.AotcError, match="int32"):
        aotc.compile(m)


# ---- the generated C: warnings, sanitizers ------------------------------------------------

def _edge_case_model():
    """Integer edge cases computed at run time (the harness feeds zeros; adding a
    constant makes the operands run-time values): division and modulo by 0 and of the
    lowest value by -1, shifts past the width, negative exponents, |lowest|."""
    i32, lo = np.int32, np.iinfo(np.int32).min
    a = np.array([lo, 7, -7, lo, 5, 3, -2, 0], i32)
    b = np.array([-1, 0, 2, 33, -1, 40, -3, -5], i32)
    nodes = [helper.make_node("Add", ["z", "ca"], ["a"]), helper.make_node("Add", ["z", "cb"], ["b"])]
    outs = []
    for op, attrs in [("Div", {}), ("Mod", {}), ("Mod", {"fmod": 1}), ("Pow", {}), ("Mul", {}), ("Sub", {})]:
        name = f"{op}{len(outs)}"
        nodes.append(helper.make_node(op, ["a", "b"], [name], **attrs))
        outs.append(name)
    for op in ["Abs", "Neg", "Sign"]:
        nodes.append(helper.make_node(op, ["a"], [op]))
        outs.append(op)
    nodes += [helper.make_node("Cast", ["a"], ["u"], to=onnx.TensorProto.UINT32),
              helper.make_node("Cast", ["b"], ["v"], to=onnx.TensorProto.UINT32),
              helper.make_node("BitShift", ["u", "v"], ["shl"], direction="LEFT"),
              helper.make_node("BitShift", ["u", "v"], ["shr"], direction="RIGHT")]
    outs += ["shl", "shr"]
    return make_model(nodes, [("z", i32, (8,))], [(o, i32 if o not in ("shl", "shr") else np.uint32, None)
                                                   for o in outs], {"ca": a, "cb": b}, opset=13)


def _half_model():
    ops = ["Exp", "Tanh", "Round", "Sign"]
    nodes = [helper.make_node("Add", ["h", "c"], ["x"])] + [helper.make_node(op, ["x"], [f"y_{op}"]) for op in ops]
    nodes += [helper.make_node("Max", ["x", "c", "h"], ["y_max"]), helper.make_node("Less", ["x", "c"], ["y_less"])]
    outs = [(f"y_{op}", F16, None) for op in ops] + [("y_max", F16, None), ("y_less", np.bool_, None)]
    return make_model(nodes, [("h", F16, (2, 6))], outs,
                      {"c": np.array([-70000, 65504, 6e-8, np.nan, -0.0, 2.5], np.float32).astype(F16)}, opset=13)


@pytest.mark.parametrize("dtype", [np.float32, F16, np.int32])
def test_large_loops_run_on_the_pool_with_the_bits_of_one_thread(tmp_path, dtype):
    """Element-wise loops of two or more pool tasks over operands of the output's shape
    (not broadcasts) run in tasks of aotc_ew_parallel: the same values as the
    reference and the same bits at 1 and 2 threads, ragged last task included."""
    shape = (3, 40, 33, 17)   # 67,320 elements: four full tasks and a ragged one
    n = helper.make_node
    model = make_model([n("Add", ["a", "b"], ["s"]), n("Abs", ["s"], ["y"]),
                        n("Mul", ["a", "c"], ["z"])],    # broadcast: one inline loop
                       [("a", dtype, shape), ("b", dtype, shape), ("c", dtype, (1, 40, 1, 1))],
                       [("y", dtype, None), ("z", dtype, None)])
    feeds = {k: random(s, seed=i, low=-9, high=9).astype(dtype)
             for i, (k, s) in enumerate([("a", shape), ("b", shape), ("c", (1, 40, 1, 1))])}
    one = aotc.compile(model, threads=1, out_dir=tmp_path, name="ew").run(feeds)
    assert (tmp_path / "ew.c").read_text().count("aotc_ew_parallel(") == 2
    two = aotc.compile(model, threads=2).run(feeds)
    want, _ = reference(model, feeds)
    for name in ("y", "z"):
        assert one[name].tobytes() == two[name].tobytes(), name
        np.testing.assert_allclose(one[name].astype(np.float64), want[name].astype(np.float64),
                                   *TOLERANCE.get(np.dtype(dtype), (0, 0)))


@pytest.mark.skipif(CC is None, reason="no C compiler")
@pytest.mark.parametrize("build", [_edge_case_model, _half_model], ids=["int_edges", "half"])
def test_generated_c_is_warning_free_and_clean_under_sanitizers(tmp_path, build):
    sess = aotc.compile(build(), out_dir=tmp_path, name="ew")
    lines = run_sanitized(tmp_path, sess.name, ["-Wall", "-Wextra", "-Werror"]).splitlines()
    assert [ln.split()[0] for ln in lines] == [t.name for t in sess.outputs]


def test_integer_edge_cases_have_defined_results():
    m = _edge_case_model()
    got = aotc.compile(m).run({"z": np.zeros(8, np.int32)})
    lo = np.iinfo(np.int32).min
    np.testing.assert_array_equal(got["Div0"], [lo, 0, -3, -65075262, -5, 0, 0, 0])
    np.testing.assert_array_equal(got["Mod1"], [0, 0, 1, 31, 0, 3, -2, 0])
    np.testing.assert_array_equal(got["Mod2"], [0, 0, -1, -2, 0, 3, -2, 0])
    np.testing.assert_array_equal(got["Abs"][:1], [lo])
    np.testing.assert_array_equal(got["shl"][[3, 5]], [0, 0])
