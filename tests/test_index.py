"""GatherElements, GatherND, ScatterElements, ScatterND, Scatter and TensorScatter against
onnxruntime (onnx.reference where onnxruntime lacks an opset or type): negative and
int32 indices, reductions with repeated indices, every element-type family, aliasing
of the output with the data, out-of-range indices at run time and compile time."""
import ml_dtypes
import numpy as np
import pytest
from onnx import helper

import aotc
from oracle import check, make_model

F16, BF16 = np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)


def _node(op, ins, outs, **attrs):
    return helper.make_node(op, ins, outs, **attrs)


# ---- GatherElements ------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.int8, np.bool_, F16, np.uint64])
def test_gather_elements_axes_and_index_types(dtype):
    x = (np.arange(60) % 7).astype(dtype).reshape(3, 4, 5)
    i0 = np.array([[[2, -1, 0, -3, 1]]], np.int64)                    # axis 0, smaller in dim 1
    i1 = np.random.default_rng(0).integers(-4, 4, (3, 6, 2)).astype(np.int32)   # axis 1, longer
    i2 = np.random.default_rng(1).integers(-5, 5, (2, 4, 5)).astype(np.int64)   # axis -1
    nodes = [_node("GatherElements", ["x", "i0"], ["y0"], axis=0),
             _node("GatherElements", ["x", "i1"], ["y1"], axis=1),
             _node("GatherElements", ["x", "i2"], ["y2"], axis=-1)]
    m = make_model(nodes, [("x", dtype, x.shape), ("i0", np.int64, i0.shape), ("i1", np.int32, i1.shape),
                           ("i2", np.int64, i2.shape)],
                   [("y0", dtype, None), ("y1", dtype, None), ("y2", dtype, None)], opset=13)
    check(m, {"x": x, "i0": i0, "i1": i1, "i2": i2}, threads=2)


# ---- ScatterElements / Scatter -------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.int32, F16, np.uint8, np.float64])
def test_scatter_elements_reductions_with_repeated_indices(dtype):
    rng = np.random.default_rng(2)
    data = rng.integers(1, 5, (4, 5)).astype(dtype)
    idx = np.array([[0, -1, 1], [0, 0, -4], [3, 3, 3]], np.int64)     # repeats within a column
    upd = rng.integers(1, 4, (3, 3)).astype(dtype)
    nodes = [_node("ScatterElements", ["d", "i", "u"], [f"y_{r}"], axis=0, reduction=r)
             for r in ("none", "add", "mul", "max", "min")]
    nodes.append(_node("ScatterElements", ["d", "i", "u"], ["y_axis1"], axis=-1, reduction="add"))
    m = make_model(nodes, [("d", dtype, data.shape), ("i", np.int64, idx.shape), ("u", dtype, upd.shape)],
                   [(n.output[0], dtype, None) for n in nodes], opset=18)
    check(m, {"d": data, "i": idx, "u": upd}, oracle="onnx.reference")


def test_scatter_elements_bool_and_int32_indices_and_deprecated_scatter():
    data = np.zeros((3, 3), np.bool_)
    idx = np.array([[1, -1], [0, 2]], np.int32)
    upd = np.array([[True, True], [True, False]])
    m = make_model([_node("ScatterElements", ["d", "i", "u"], ["y"], axis=1)],
                   [("d", np.bool_, (3, 3)), ("i", np.int32, (2, 2)), ("u", np.bool_, (2, 2))],
                   [("y", np.bool_, None)], opset=13)
    check(m, {"d": data, "i": idx, "u": upd})
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    m = make_model([_node("Scatter", ["d", "i", "u"], ["y"], axis=0)],
                   [("d", np.float32, (3, 4)), ("i", np.int64, (1, 4)), ("u", np.float32, (1, 4))],
                   [("y", np.float32, None)], opset=10)
    check(m, {"d": x, "i": np.array([[2, 0, 1, 2]], np.int64), "u": -np.ones((1, 4), np.float32)})


def test_scatter_into_an_intermediate_that_dies_there():
    # data is an intermediate used only by the scatter: the plan may give the output its block
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    nodes = [_node("Relu", ["x"], ["r"]),
             _node("ScatterND", ["r", "i", "u"], ["s"], reduction="mul"),
             _node("Neg", ["s"], ["y"])]
    m = make_model(nodes, [("x", np.float32, x.shape), ("i", np.int64, (3, 1)), ("u", np.float32, (3, 6))],
                   [("y", np.float32, None)], opset=16)
    check(m, {"x": x, "i": np.array([[1], [-1], [1]], np.int64), "u": np.full((3, 6), 2, np.float32)})


# ---- GatherND / ScatterND --------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.int64, BF16])
def test_gather_nd_batch_dims_and_negative_indices(dtype):
    x = np.arange(2 * 3 * 4 * 5).astype(dtype).reshape(2, 3, 4, 5)
    i_full = np.array([[[0, -1, 2], [1, 0, -4]]], np.int64)           # (1, 2, 3) -> elements
    i_b1 = np.array([[[-1, 2], [0, 0]], [[2, 3], [1, -4]]], np.int64)  # batch_dims 1 -> rows of 5
    i_b2 = np.array([[[1], [2]], [[-1], [-3]]], np.int64)                # (2, 2, 1) -> planes
    nodes = [_node("GatherND", ["x", "a"], ["y0"]),
             _node("GatherND", ["x", "b"], ["y1"], batch_dims=1),
             _node("GatherND", ["x", "c"], ["y2"], batch_dims=1)]
    m = make_model(nodes, [("x", dtype, x.shape), ("a", np.int64, i_full.shape), ("b", np.int64, i_b1.shape),
                           ("c", np.int64, i_b2.shape)],
                   [("y0", dtype, None), ("y1", dtype, None), ("y2", dtype, None)], opset=13)
    check(m, {"x": x, "a": i_full, "b": i_b1, "c": i_b2}, oracle="onnx.reference")


@pytest.mark.parametrize("dtype", [np.float32, np.int16, F16])
def test_scatter_nd_reductions_with_repeated_tuples(dtype):
    data = (np.arange(2 * 3 * 4) % 5 + 1).astype(dtype).reshape(2, 3, 4)
    idx = np.array([[0, 1], [-1, -1], [0, 1], [1, 0]], np.int64)
    upd = (np.arange(16) % 3 + 1).astype(dtype).reshape(4, 4)
    nodes = [_node("ScatterND", ["d", "i", "u"], [f"y_{r}"], reduction=r) for r in ("add", "mul", "max", "min")]
    m = make_model(nodes, [("d", dtype, data.shape), ("i", np.int64, idx.shape), ("u", dtype, upd.shape)],
                   [(n.output[0], dtype, None) for n in nodes], opset=18)
    check(m, {"d": data, "i": idx, "u": upd}, oracle="onnx.reference")


# ---- TensorScatter ----------------------------------------------------------------------

@pytest.mark.parametrize("mode,write", [("linear", [0, 3]), ("circular", [6, 3])])
def test_tensor_scatter_modes(mode, write):
    past = np.arange(2 * 3 * 5 * 2, dtype=np.float32).reshape(2, 3, 5, 2)
    update = -np.arange(2 * 3 * 2 * 2, dtype=np.float32).reshape(2, 3, 2, 2) - 1
    m = make_model([_node("TensorScatter", ["p", "u", "w"], ["y"], mode=mode, axis=-2)],
                   [("p", np.float32, past.shape), ("u", np.float32, update.shape), ("w", np.int64, (2,))],
                   [("y", np.float32, None)], opset=24)
    check(m, {"p": past, "u": update, "w": np.array(write, np.int64)}, oracle="onnx.reference", mode="exact")


# ---- errors -------------------------------------------------------------------------------

def _run_expecting_index_error(m, feeds):
    sess = aotc.compile(m)
    with pytest.raises(aotc.AotcError, match="code 3"):
        sess.run(feeds)


def test_out_of_range_indices_at_run_time_are_an_error_code():
    x = np.zeros((3, 4), np.float32)
    gather = make_model([_node("GatherElements", ["x", "i"], ["y"], axis=1)],
                        [("x", np.float32, (3, 4)), ("i", np.int64, (3, 2))], [("y", np.float32, None)], opset=13)
    _run_expecting_index_error(gather, {"x": x, "i": np.array([[0, 1], [4, 0], [0, 0]], np.int64)})
    _run_expecting_index_error(gather, {"x": x, "i": np.array([[0, 1], [-5, 0], [0, 0]], np.int64)})
    scatter = make_model([_node("ScatterND", ["x", "i", "u"], ["y"])],
                         [("x", np.float32, (3, 4)), ("i", np.int64, (2, 2)), ("u", np.float32, (2,))],
                         [("y", np.float32, None)], opset=13)
    _run_expecting_index_error(scatter, {"x": x, "i": np.array([[0, 0], [2, 4]], np.int64),
                                         "u": np.ones(2, np.float32)})
    gather_nd = make_model([_node("GatherND", ["x", "i"], ["y"])],
                           [("x", np.float32, (3, 4)), ("i", np.int64, (1, 1))], [("y", np.float32, None)], opset=13)
    _run_expecting_index_error(gather_nd, {"x": x, "i": np.array([[3]], np.int64)})
    tensor_scatter = make_model([_node("TensorScatter", ["p", "u", "w"], ["y"])],
                                [("p", np.float32, (2, 5, 1)), ("u", np.float32, (2, 2, 1)), ("w", np.int64, (2,))],
                                [("y", np.float32, None)], opset=24)
    _run_expecting_index_error(tensor_scatter, {"p": np.zeros((2, 5, 1), np.float32),
                                                "u": np.ones((2, 2, 1), np.float32),
                                                "w": np.array([0, 4], np.int64)})


def test_constant_out_of_range_indices_fail_at_compile_time():
    m = make_model([_node("ScatterElements", ["x", "i", "u"], ["y"], axis=0)],
                   [("x", np.float32, (3, 4)), ("u", np.float32, (1, 2))], [("y", np.float32, None)],
                   {"i": np.array([[1, 3]], np.int64)}, opset=13)
    with pytest.raises(aotc.InvalidModel, match="out of range"):
        aotc.compile(m)


def test_reduction_not_in_the_opset_is_refused():
    m = make_model([_node("ScatterElements", ["x", "i", "u"], ["y"], reduction="max")],
                   [("x", np.float32, (3,)), ("i", np.int64, (1,)), ("u", np.float32, (1,))],
                   [("y", np.float32, None)], opset=16)
    with pytest.raises(aotc.InvalidModel, match="reduction 'max'"):
        aotc.compile(m)


def test_kernels_are_clean_under_asan_and_ubsan(tmp_path):
    """Every kernel of aotc_index.h, aotc_rearrange.h and aotc_unique.h once, built with
    -Wall -Wextra -Werror and run under the sanitizers."""
    from sanitize import run_sanitized
    f32, i64 = np.float32, np.int64
    inits = {"gi": np.array([[1, -1, 0], [2, 0, -3]], i64), "ndi": np.array([[1, -2], [0, 3]], i64),
             "su": np.ones((2, 3), np.float16), "lens": np.array([2, 0, 3], i64),
             "k": np.array(1, i64), "depth": np.array(3, i64), "onoff": np.array([0, 5], np.int8),
             "img": np.array([3, 4], i64), "blk": np.array([2, 2], i64), "wi": np.array([3, 1], i64),
             "upd": np.ones((2, 3, 2), f32)}
    nodes = [_node("GatherElements", ["x", "gi"], ["ge"], axis=1),
             _node("ScatterElements", ["h", "gi", "su"], ["se"], axis=1, reduction="max"),
             _node("GatherND", ["x", "ndi"], ["gnd"]),
             _node("ScatterND", ["x", "ndi", "u2"], ["snd"], reduction="add"),
             _node("TensorScatter", ["t", "upd"], ["ts0"]),
             _node("TensorScatter", ["t", "upd", "wi"], ["ts1"], mode="circular", axis=1),
             _node("ReverseSequence", ["x", "lens"], ["rs"], time_axis=1, batch_axis=0),
             _node("Trilu", ["x", "k"], ["tri"], upper=0),
             _node("EyeLike", ["x"], ["eye"], k=-1),
             _node("OneHot", ["gi", "depth", "onoff"], ["oh"], axis=1),
             _node("Col2Im", ["cols", "img", "blk"], ["im"], pads=[1, 0, 0, 1]),
             _node("NonZero", ["x"], ["nz"]),
             _node("Unique", ["x"], ["uy", "ufirst", "uinv", "ucounts"], axis=1, sorted=0),
             _node("Compress", ["x", "c"], ["cx"], axis=0)]
    outs = ["ge", "se", "gnd", "snd", "ts0", "ts1", "rs", "tri", "eye", "oh", "im", "nz", "uy", "ufirst",
            "uinv", "ucounts", "cx"]
    m = make_model(nodes, [("x", f32, (3, 4)), ("h", np.float16, (2, 5)), ("u2", f32, (2,)),
                           ("t", f32, (2, 5, 2)), ("cols", f32, (1, 8, 12)), ("c", np.bool_, (3,))],
                   [(o, np.dtype(t), None) for o, t in zip(outs, [
                       f32, np.float16, f32, f32, f32, f32, f32, f32, f32, np.int8, f32, i64, f32, i64, i64,
                       i64, f32])], inits, opset=24)
    sess = aotc.compile(m, out_dir=str(tmp_path), name="kernels")
    lines = run_sanitized(tmp_path, sess.name, ["-Wall", "-Wextra", "-Werror"]).splitlines()
    assert len(lines) == len(outs)


def test_constant_inputs_fold_through_evaluate():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    inits = {"x": x, "gi": np.array([[1, -1], [0, 2]], np.int64), "ndi": np.array([[1, -2], [0, 3]], np.int64),
             "u2": np.ones(2, np.float32), "k0": np.zeros((2, 0), np.int64), "gu": np.ones((2, 2), np.float32),
             "p": np.zeros((2, 3, 1), np.float32), "pu": np.ones((2, 1, 1), np.float32), "w": np.array([2, 0])}
    nodes = [_node("GatherElements", ["x", "gi"], ["a"], axis=1),
             _node("ScatterElements", ["x", "gi", "gu"], ["b"], axis=1, reduction="add"),
             _node("GatherND", ["x", "ndi"], ["c"]),
             _node("ScatterND", ["x", "ndi", "u2"], ["d"], reduction="mul"),
             _node("GatherND", ["x", "k0"], ["e"]),
             _node("TensorScatter", ["p", "pu", "w"], ["f"], axis=1)]
    nodes += [_node("Neg", [n.output[0]], [n.output[0] + "_out"]) for n in list(nodes)]
    m = make_model(nodes, [], [(n.output[0], np.float32, None) for n in nodes[6:]], inits, opset=24)
    check(m, {})
    assert not set(aotc.compile(m).report["nodes_after"]) & {n.op_type for n in nodes[:6]}
