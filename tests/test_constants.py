"""Constant, ConstantOfShape, Shape, Size, Cast, CastLike and BitCast."""
import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference.ops.op_cast import cast_to

import aotc
from aotc import dtypes
from aotc.ops.constants import cast_array
from oracle import assert_matches_ort, make_model, random

INTS = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]
TYPES = [np.float32, np.float64] + INTS + [np.bool_]


def _onnx_type(dtype):
    return helper.np_dtype_to_tensor_dtype(np.dtype(dtype))


# ---- Constant -----------------------------------------------------------------------

@pytest.mark.parametrize("attr,value,dtype", [
    ("value", numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5), np.float32),
    ("value", numpy_helper.from_array(np.array(-7, np.int64)), np.int64),
    ("value_float", 0.25, np.float32),
    ("value_floats", [1.0, -2.0, 3.5], np.float32),
    ("value_int", -3, np.int64),
    ("value_ints", [4, 5, -6], np.int64),
])
def test_constant_forms(attr, value, dtype):
    nodes = [helper.make_node("Constant", [], ["c"], **{attr: value}),
             helper.make_node("Add", ["x", "c"], ["y"])]
    m = make_model(nodes, [("x", dtype, (2, 3))], [("y", dtype, None)], opset=13)
    assert_matches_ort(m, {"x": random((2, 3), dtype, low=-5, high=5)})


def test_constant_straight_to_an_output():
    node = helper.make_node("Constant", [], ["y"], value=numpy_helper.from_array(np.array([[1, 2]], np.int32)))
    m = make_model([node], [], [("y", np.int32, None)])
    got = aotc.compile(m).run({})
    np.testing.assert_array_equal(got["y"], [[1, 2]])


def test_sparse_constant_is_unsupported():
    sparse = helper.make_sparse_tensor(numpy_helper.from_array(np.array([5.0], np.float32), "v"),
                                       numpy_helper.from_array(np.array([1], np.int64), "i"), [3])
    nodes = [helper.make_node("Constant", [], ["c"], sparse_value=sparse),
             helper.make_node("Add", ["x", "c"], ["y"])]
    m = make_model(nodes, [("x", np.float32, (3,))], [("y", np.float32, None)])
    with pytest.raises(aotc.Unsupported, match="sparse"):
        aotc.compile(m)


# ---- ConstantOfShape ----------------------------------------------------------------

@pytest.mark.parametrize("value", [None, np.array([2.5], np.float32), np.array([-9], np.int64),
                                   np.array([1], np.bool_), np.array([3], np.int32)])
@pytest.mark.parametrize("shape", [[2, 3], [0], [], [200, 300]])
def test_constant_of_shape(value, shape):
    attrs = {} if value is None else {"value": numpy_helper.from_array(value)}
    dtype = np.float32 if value is None else value.dtype
    nodes = [helper.make_node("ConstantOfShape", ["s"], ["c"], **attrs),
             helper.make_node("Identity", ["c"], ["y"])]
    m = make_model(nodes, [], [("y", dtype, None)], {"s": np.array(shape, np.int64)}, opset=13)
    sess = aotc.compile(m)
    got = sess.run({})["y"]
    want = np.full(shape, 0 if value is None else value[0], dtype)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    big = want.nbytes > 64 * 1024
    assert ("ConstantOfShape" in sess.report["nodes_after"]) == big   # too big to fold: filled


def test_constant_of_shape_from_a_shape_feeds_an_add():
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("ConstantOfShape", ["s"], ["c"], value=numpy_helper.from_array(np.array([0.5], np.float32))),
             helper.make_node("Add", ["x", "c"], ["y"])]
    m = make_model(nodes, [("x", np.float32, (40, 50, 30))], [("y", np.float32, None)], opset=13)
    assert_matches_ort(m, {"x": random((40, 50, 30))})


# ---- Shape, Size --------------------------------------------------------------------

@pytest.mark.parametrize("start,end", [(None, None), (1, None), (-2, None), (0, -1), (-100, 100),
                                       (2, 1), (3, 3)])
def test_shape_start_end(start, end):
    attrs = {k: v for k, v in (("start", start), ("end", end)) if v is not None}
    nodes = [helper.make_node("Shape", ["x"], ["s"], **attrs), helper.make_node("Identity", ["s"], ["y"])]
    m = make_model(nodes, [("x", np.float32, (2, 3, 5))], [("y", np.int64, None)], opset=15)
    sess = aotc.compile(m)
    assert not sess.report["nodes_after"]
    assert_matches_ort(m, {"x": random((2, 3, 5))})


@pytest.mark.parametrize("opset", [7, 13])
def test_shape_and_size_are_constants(opset):
    nodes = [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Size", ["x"], ["n"]),
             helper.make_node("Mul", ["s", "n"], ["y"])]
    m = make_model(nodes, [("x", np.float32, (4, 1, 6))], [("y", np.int64, None)], opset=opset)
    sess = aotc.compile(m)
    assert not sess.report["nodes_after"]
    assert_matches_ort(m, {"x": random((4, 1, 6))})


def test_constants_and_shapes_at_opset_25():
    """Constant and ConstantOfShape of the new element types; Shape and Size of them."""
    from onnx.reference import ReferenceEvaluator
    f8 = np.array([[0.5, -448.0, 3.0]], np.float32).astype(ml_dtypes.float8_e4m3fn)
    nodes = [helper.make_node("Constant", [], ["c"], value=numpy_helper.from_array(f8)),
             helper.make_node("ConstantOfShape", ["dims"], ["fill"],
                              value=numpy_helper.from_array(np.array([-3], np.int8).astype(ml_dtypes.int4))),
             helper.make_node("Shape", ["x"], ["shape"], start=-2),
             helper.make_node("Size", ["x"], ["size"]),
             helper.make_node("Concat", ["c", "c"], ["cc"], axis=0),
             helper.make_node("Identity", ["fill"], ["fill_out"])]
    outs = [("cc", f8.dtype, None), ("fill_out", ml_dtypes.int4, None), ("shape", np.int64, None),
            ("size", np.int64, None)]
    x = np.arange(6, dtype=np.int8).reshape(1, 2, 3).astype(ml_dtypes.uint2)
    m = make_model(nodes, [("x", x.dtype, x.shape)], outs, {"dims": np.array([2, 5], np.int64)}, opset=25)
    got = aotc.compile(m).run({"x": x})
    for (name, dtype, _), want in zip(outs, ReferenceEvaluator(m).run(None, {"x": x})):
        assert got[name].dtype == np.dtype(dtype) and got[name].shape == want.shape
        np.testing.assert_array_equal(np.ravel(got[name]).view(np.uint8), np.ravel(want).view(np.uint8),
                                      err_msg=name)


# ---- Cast ---------------------------------------------------------------------------

def _in_range_values(src, dst, shape=(3, 7)):
    """Values of type src that every implementation converts to dst the same way."""
    lo, hi = -100, 100
    for t in (src, dst):
        if np.dtype(t).kind == "u" or np.dtype(t) == np.bool_:
            lo = 0
        if np.dtype(t) == np.int8:
            hi = 100
    if np.dtype(src) == np.bool_:
        return random(shape, np.bool_)
    x = random(shape, src, low=lo, high=hi)
    if np.dtype(src).kind == "f":
        x = x.astype(src)
        x.flat[0] = 0
    return x


def test_cast_between_types():
    """Every pair of the types onnxruntime shares, in one model."""
    nodes, inputs, outputs, feeds = [], [], [], {}
    for src in TYPES:
        for dst in TYPES:
            name = f"{np.dtype(src).name}_to_{np.dtype(dst).name}"
            nodes.append(helper.make_node("Cast", [f"x_{name}"], [name], to=_onnx_type(dst)))
            inputs.append((f"x_{name}", src, (3, 7)))
            outputs.append((name, dst, None))
            feeds[f"x_{name}"] = _in_range_values(src, dst)
    assert_matches_ort(make_model(nodes, inputs, outputs, opset=13), feeds)


SPECIAL = np.array([np.nan, np.inf, -np.inf, 1e30, -1e30, 3.99, -3.99, -0.5, 127.9, 128.0,
                    -128.7, 255.5, 65535.9, 2.0**31, -2.0**31 - 1000, 2.0**63, -2.0**63, 2.0**64,
                    1.5e19, 0.0], np.float64)


def test_cast_of_nan_and_out_of_range_is_defined_and_folds_the_same():
    nodes, outputs, feeds = [], [], {}
    for src in (np.float32, np.float64):
        feeds[f"x_{np.dtype(src).name}"] = SPECIAL.astype(src)
        for dst in INTS + [np.bool_]:
            name = f"{np.dtype(src).name}_to_{np.dtype(dst).name}"
            nodes.append(helper.make_node("Cast", [f"x_{np.dtype(src).name}"], [name], to=_onnx_type(dst)))
            outputs.append((name, dst, None))
    run_time = make_model(nodes, [(k, v.dtype, v.shape) for k, v in feeds.items()], outputs, opset=13)
    folded = make_model(nodes, [], outputs, feeds, opset=13)
    got = aotc.compile(run_time).run(feeds)
    sess = aotc.compile(folded)
    assert not sess.report["nodes_after"]
    fold = sess.run({})
    for src in (np.float32, np.float64):
        for dst in INTS + [np.bool_]:
            name = f"{np.dtype(src).name}_to_{np.dtype(dst).name}"
            np.testing.assert_array_equal(got[name], fold[name], err_msg=name)
            np.testing.assert_array_equal(got[name], cast_array(SPECIAL.astype(src), dst), err_msg=name)


def test_cast_saturates_and_maps_nan_to_zero():
    x = np.array([np.nan, 300.0, -300.0, 12.9, -12.9, np.inf], np.float32)
    np.testing.assert_array_equal(cast_array(x, np.int8), [0, 127, -128, 12, -12, 127])
    np.testing.assert_array_equal(cast_array(x, np.uint8), [0, 255, 0, 12, 0, 255])
    big = np.array([2.0**70, -2.0**70], np.float64)
    np.testing.assert_array_equal(cast_array(big, np.int64), [2**63 - 1, -2**63])
    np.testing.assert_array_equal(cast_array(big, np.uint64), [2**64 - 1, 0])
    np.testing.assert_array_equal(cast_array(x, np.bool_), [True, True, True, True, True, True])


def test_cast_to_bool_is_not_zero():
    x = np.array([[0.0, -0.0, 0.1, -3.0, np.nan]], np.float32)
    node = helper.make_node("Cast", ["x"], ["y"], to=TensorProto.BOOL)
    m = make_model([node], [("x", np.float32, x.shape)], [("y", np.bool_, None)], opset=13)
    assert_matches_ort(m, {"x": x})


def test_cast_like():
    node = helper.make_node("CastLike", ["x", "like"], ["y"])
    m = make_model([node], [("x", np.float32, (4, 5))], [("y", np.int32, None)],
                   {"like": np.array([0], np.int32)}, opset=15)
    assert_matches_ort(m, {"x": random((4, 5), low=-50, high=50)})


def test_cast_chain_in_place():
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("Cast", ["r"], ["i"], to=TensorProto.INT32),
             helper.make_node("Cast", ["i"], ["f"], to=TensorProto.FLOAT),
             helper.make_node("Cast", ["f"], ["y"], to=TensorProto.FLOAT)]
    m = make_model(nodes, [("x", np.float32, (5, 6))], [("y", np.float32, None)], opset=13)
    assert_matches_ort(m, {"x": random((5, 6), low=-40, high=40)})


def test_casts_of_nan_and_huge_values_run_clean_under_sanitizers(tmp_path):
    from sanitize import CC, run_sanitized
    if CC is None:
        pytest.skip("no C compiler")
    targets = [TensorProto.INT8, TensorProto.INT32, TensorProto.INT64, TensorProto.UINT8,
               TensorProto.UINT64, TensorProto.BOOL]
    nodes = [helper.make_node("Mul", ["x", "big"], ["huge"]),
             helper.make_node("Sqrt", ["x"], ["nan"]),
             helper.make_node("Cast", ["huge"], ["wide"], to=TensorProto.DOUBLE)]
    outputs = []
    for src in ("huge", "nan", "wide"):
        for to in targets:
            name = f"{src}_{to}"
            nodes.append(helper.make_node("Cast", [src], [name], to=to))
            outputs.append((name, helper.tensor_dtype_to_np_dtype(to), None))
    nodes.append(helper.make_node("ConstantOfShape", ["shape"], ["fill"],
                                  value=numpy_helper.from_array(np.array([7], np.int16))))
    outputs.append(("fill", np.int16, None))
    m = make_model(nodes, [("x", np.float32, (4, 9))], outputs,
                   {"big": np.array(1e30, np.float32), "shape": np.array([300, 200], np.int64)})
    sess = aotc.compile(m, out_dir=tmp_path, name="casts")
    # gcc's -fsanitize=undefined leaves out float -> int overflow: ask for it
    lines = run_sanitized(tmp_path, sess.name, ["-fsanitize=float-cast-overflow"]).splitlines()
    assert [ln.split()[0] for ln in lines] == [name for name, _, _ in outputs]


# ---- Cast with the 16-, 8-, 4- and 2-bit types ---------------------------------------

BF16 = np.dtype(ml_dtypes.bfloat16)
NEW_TYPES = [np.dtype(np.float16), BF16] + list(dtypes.SMALL)
# the other types' conversions share code per kind: one of each kind is enough here
EVERY_TYPE = [np.dtype(t) for t in (np.float32, np.float64, np.int8, np.uint8, np.int64, np.uint64,
                                    np.bool_)] + NEW_TYPES
# specials, rounding ties and range edges of the narrow types, values that wrap
PROBE = np.array([0.0, -0.0, 0.3, -0.3, 1, -1, 1.5, 2.5, -2.5, 3, 5, 7, 8, -9, 15, 16, 100.7, -128.5,
                  255, 300, 448, 464, 465, 500, 57344, 61440, 65504, 65520, 1e6, -1e6, 2.0**31, 1e30,
                  1e-7, -1e-7, 2.0**-10, 2.0**-17, 2.0**-130, np.nan, np.inf, -np.inf], np.float64)
E8M0_MODES = ("up", "down", "nearest")


def _cast_probe(src):
    with np.errstate(all="ignore"):
        return cast_array(PROBE, src)


def _every_cast():
    """(output name, source type, target type, Cast attributes) for every pair with a
    16-, 8-, 4- or 2-bit type on one side; from a few sources also saturate=0 to the
    float8 types and each round_mode to float8e8m0."""
    for src in EVERY_TYPE:
        for dst in EVERY_TYPE:
            if src not in NEW_TYPES and dst not in NEW_TYPES:
                continue
            yield f"{src.name}_to_{dst.name}", src, dst, {}
            if src.name not in ("float32", "float64", "float16", "int64", "float8_e5m2"):
                continue
            if dst in dtypes.FLOAT8:
                yield f"{src.name}_to_{dst.name}_nosat", src, dst, {"saturate": 0}
            if dst == dtypes.FLOAT8E8M0:
                for mode in E8M0_MODES[1:]:
                    yield f"{src.name}_to_{dst.name}_{mode}", src, dst, {"round_mode": mode, "saturate": 0}


def _assert_same(got, want, name):
    assert got.dtype == want.dtype, name
    if dtypes.is_float(want.dtype):       # equal bits; a NaN only needs to be a NaN
        g, w = got.astype(np.float32), want.astype(np.float32)
        np.testing.assert_array_equal(np.isnan(g), np.isnan(w), err_msg=name)
        keep = ~np.isnan(w)
        np.testing.assert_array_equal(g[keep].view(np.uint32), w[keep].view(np.uint32), err_msg=name)
    else:
        np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8), err_msg=name)


def test_every_cast_runs_as_it_folds():
    """Every pair of types in one model: the C kernels give the numpy evaluation's bits
    (the rules are checked against the ONNX reference below)."""
    nodes, outputs = [], []
    for name, src, dst, attrs in _every_cast():
        nodes.append(helper.make_node("Cast", [f"x_{src.name}"], [name], to=dtypes.to_onnx(dst), **attrs))
        outputs.append((name, dst, None))
    inputs = [(f"x_{t.name}", t, PROBE.shape) for t in EVERY_TYPE]
    sess = aotc.compile(make_model(nodes, inputs, outputs, opset=25))
    got = sess.run({f"x_{t.name}": _cast_probe(t) for t in EVERY_TYPE})
    for name, src, dst, attrs in _every_cast():
        saturate, mode = bool(attrs.get("saturate", 1)), attrs.get("round_mode", "up")
        with np.errstate(all="ignore"):
            want = cast_array(_cast_probe(src), dst, saturate, mode)
        _assert_same(got[name], want, name)


def _defined(x, dst):
    """Where ONNX defines src value x cast to dst: a float going to an integer type
    must be finite and in range (the small integers wrap from anything in int32)."""
    if dst == np.bool_ or dtypes.is_float(dst) or not dtypes.is_float(x.dtype):
        return np.ones(x.shape, bool)
    v = x.astype(np.float32).astype(np.float64)
    if dst in dtypes.SMALL_INTS:
        return np.abs(v) < 2.0**31
    info = np.iinfo(dst)
    return np.isfinite(v) & (v > float(info.min) - 1) & (v < float(info.max) + 1)


def test_cast_rules_follow_the_onnx_reference():
    compared = 0
    for name, src, dst, attrs in _every_cast():
        saturate, mode = bool(attrs.get("saturate", 1)), attrs.get("round_mode", "up")
        x = _cast_probe(src)
        keep = _defined(x, dst)
        with np.errstate(all="ignore"):
            try:
                want = cast_to(x[keep], dtypes.to_onnx(dst), saturate, mode)
            except TypeError:          # ml_dtypes has no direct cast between some pairs
                continue
            _assert_same(cast_array(x[keep], dst, saturate, mode), np.asarray(want).astype(dst), name)
        compared += 1
    assert compared > 300


def test_cast_like_takes_saturate_and_the_target_type():
    x = np.array([1e6, -1e6, 500.0, np.inf, 0.3, -np.nan], np.float32)
    nodes, outputs = [], []
    for dst in dtypes.FLOAT8:
        for saturate in (0, 1):
            name = f"{dst.name}_{saturate}"
            nodes.append(helper.make_node("CastLike", ["x", f"like_{dst.name}"], [name], saturate=saturate))
            outputs.append((name, dst, None))
    likes = {f"like_{dst.name}": np.zeros(1, dst) for dst in dtypes.FLOAT8}
    sess = aotc.compile(make_model(nodes, [("x", np.float32, x.shape)], outputs, likes, opset=25))
    got = sess.run({"x": x})
    for dst in dtypes.FLOAT8:
        for saturate in (0, 1):
            want = cast_to(x, dtypes.to_onnx(dst), bool(saturate))
            _assert_same(got[f"{dst.name}_{saturate}"], want, f"{dst.name} saturate={saturate}")


def test_casts_with_halves_match_onnxruntime():
    x = np.array([[0.0, -0.0, 1.5, 2.25, 100.0, 0.333, 7.0, 65.5]], np.float32)
    nodes, outputs = [], []
    for half in (np.float16, BF16):
        n = np.dtype(half).name
        for t in (np.float32, np.float64, np.int32, np.uint8, np.bool_, np.float16):   # ort returns no bfloat16
            tn = np.dtype(t).name
            nodes += [helper.make_node("Cast", ["x"], [f"f32_{n}_{tn}"], to=dtypes.to_onnx(half)),
                      helper.make_node("Cast", [f"f32_{n}_{tn}"], [f"{n}_to_{tn}"], to=dtypes.to_onnx(t))]
            outputs.append((f"{n}_to_{tn}", t, None))
    m = make_model(nodes, [("x", np.float32, x.shape)], outputs, opset=21)
    assert_matches_ort(m, {"x": x})


def _assert_refused(error, match, op, x_dtype, y_dtype, opset, **attrs):
    """A model of one `op` node from x (3 elements) to y fails to compile with `error`."""
    node = helper.make_node(op, ["x"], ["y"], **attrs)
    m = make_model([node], [("x", x_dtype, (3,))], [("y", y_dtype, None)], opset=opset)
    with pytest.raises(error, match=match):
        aotc.compile(m)


def test_cast_refuses_an_unknown_round_mode_and_float6():
    _assert_refused(aotc.InvalidModel, "round_mode 'sideways'", "Cast", np.float32, dtypes.FLOAT8E8M0, 25,
                    to=TensorProto.FLOAT8E8M0, round_mode="sideways")
    _assert_refused(aotc.Unsupported, "FLOAT6E2M3", "Cast", np.float32, np.float32, 28,
                    to=TensorProto.FLOAT6E2M3)


def test_narrow_casts_run_clean_under_sanitizers(tmp_path):
    from sanitize import CC, run_sanitized
    if CC is None:
        pytest.skip("no C compiler")
    nodes = [helper.make_node("Mul", ["x", "big"], ["huge"]), helper.make_node("Sqrt", ["x"], ["nan"]),
             helper.make_node("Cast", ["huge"], ["wide"], to=TensorProto.DOUBLE)]
    outputs = []
    for src in ("huge", "nan", "wide"):
        for to in (TensorProto.FLOAT8E4M3FN, TensorProto.FLOAT8E5M2, TensorProto.FLOAT8E8M0,
                   TensorProto.FLOAT4E2M1, TensorProto.INT4, TensorProto.UINT2, TensorProto.FLOAT16):
            name = f"{src}_{to}"
            nodes += [helper.make_node("Cast", [src], [name + "_n"], to=to, saturate=0),
                      helper.make_node("Cast", [name + "_n"], [name], to=TensorProto.INT64)]
            outputs.append((name, np.int64, None))
    m = make_model(nodes, [("x", np.float32, (4, 9))], outputs, {"big": np.array(1e30, np.float32)},
                   opset=25)
    sess = aotc.compile(m, out_dir=tmp_path, name="narrow")
    lines = run_sanitized(tmp_path, sess.name, ["-fsanitize=float-cast-overflow"]).splitlines()
    assert [ln.split()[0] for ln in lines] == [name for name, _, _ in outputs]


# ---- BitCast ------------------------------------------------------------------------

def test_bitcast_reinterprets_bits():
    x32 = np.array([[1.0, -2.5, np.inf], [0.0, -0.0, 3e-40]], np.float32)
    x8 = np.array([0, 1, 127, 128, 255, 2], np.uint8)
    pairs = [("x32", np.int32), ("x32", np.uint32), ("x8", np.int8), ("x8", ml_dtypes.float8_e5m2),
             ("x8", np.bool_), ("i4", ml_dtypes.uint4), ("i4", ml_dtypes.float4_e2m1fn)]
    nodes = [helper.make_node("BitCast", [src], [f"y{k}"], to=dtypes.to_onnx(t)) for k, (src, t) in enumerate(pairs)]
    i4 = np.arange(-8, 8).astype(ml_dtypes.int4)
    feeds = {"x32": x32, "x8": x8, "i4": i4}
    m = make_model(nodes, [(k, v.dtype, v.shape) for k, v in feeds.items()],
                   [(f"y{k}", t, None) for k, (_, t) in enumerate(pairs)], opset=26)
    folded = make_model(nodes, [], [(f"y{k}", t, None) for k, (_, t) in enumerate(pairs)], feeds, opset=26)
    got, fold = aotc.compile(m).run(feeds), aotc.compile(folded).run({})
    for k, (src, t) in enumerate(pairs):
        want = feeds[src].view(t) if t != np.bool_ else feeds[src] != 0   # bool: any nonzero byte is true
        for result in (got, fold):
            assert result[f"y{k}"].dtype == np.dtype(t)
            np.testing.assert_array_equal(result[f"y{k}"].view(np.uint8), want.view(np.uint8))


def test_bitcast_needs_equal_widths():
    _assert_refused(aotc.InvalidModel, "widths differ", "BitCast", np.float32, np.int64, 26, to=TensorProto.INT64)
    _assert_refused(aotc.InvalidModel, "int4 \\(4 bits\\)", "BitCast", ml_dtypes.int4, np.uint8, 26,
                    to=TensorProto.UINT8)
