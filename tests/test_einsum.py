"""Einsum and Det."""
import ml_dtypes
import numpy as np
import pytest
from onnx import helper

import aotc
from oracle import check, make_model, random
from sanitize import assert_clean_c

# equation, operand shapes: matmul, batched, diagonals, traces, ellipsis broadcasting,
# implicit output, outer products, upper-case letters, reductions to a scalar
EQUATIONS = [
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("bij,bkj->bik", [(2, 3, 4), (2, 5, 4)]),
    ("bhqd,bhkd->bhqk", [(2, 2, 5, 8), (2, 2, 6, 8)]),
    ("ii->i", [(4, 4)]),
    ("ii", [(4, 4)]),
    ("iij->ji", [(3, 3, 2)]),
    ("i...i", [(3, 2, 3)]),
    ("...ij,...jk", [(2, 1, 3, 4), (1, 5, 4, 2)]),
    ("ab...,b->...a", [(2, 3, 4, 5), (3,)]),
    ("...i,i->...", [(4, 1, 3), (3,)]),
    ("i,j,k->ijk", [(2,), (3,), (4,)]),
    ("ij,ij->", [(3, 4), (3, 4)]),
    ("Ab,bA", [(2, 3), (3, 2)]),
    ("...->...", [(2, 3)]),
    ("ij -> ji", [(3, 4)]),
]


def _model(equation, shapes, dtype, opset=12):
    names = [f"x{i}" for i in range(len(shapes))]
    node = helper.make_node("Einsum", names, ["y"], equation=equation)
    return make_model([node], [(n, dtype, s) for n, s in zip(names, shapes)], [("y", dtype, None)],
                      opset=opset), names


def _feeds(names, shapes, dtype):
    return {n: random(s, dtype, seed=i, low=-3, high=3) for i, (n, s) in enumerate(zip(names, shapes))}


@pytest.mark.parametrize("equation, shapes", EQUATIONS)
def test_einsum_matches_onnxruntime(equation, shapes):
    m, names = _model(equation, shapes, np.float32)
    check(m, _feeds(names, shapes, np.float32), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [np.int8, np.uint16, np.int64, np.float64, np.float16,
                                   ml_dtypes.bfloat16])
def test_einsum_types_match_the_reference(dtype):
    for equation, shapes in EQUATIONS[:10:3]:
        m, names = _model(equation, shapes, dtype, opset=28)
        half = np.dtype(dtype).itemsize == 2 and np.dtype(dtype).kind != "u"
        check(m, _feeds(names, shapes, dtype), oracle="onnx.reference", rtol=2e-2 if half else 1e-7,
              atol=1e-1 if half else 0)


def test_einsum_with_empty_dims():
    for equation, shapes in [("ij->", [(0, 3)]), ("ij,jk->ik", [(3, 0), (0, 2)])]:
        m, names = _model(equation, shapes, np.float32)
        check(m, _feeds(names, shapes, np.float32), oracle="onnx.reference",
              shapes=dict(zip(names, shapes)))


@pytest.mark.parametrize("equation, shapes, message", [
    ("ij,jk->ik", [(3, 4), (5, 6)], "is 4 in one place and 5"),
    ("ij->k", [(3, 4)], "appears in no operand"),
    ("ij->ii", [(3, 3)], "appears twice"),
    ("ijk->i", [(3, 4)], "names 3 dims"),
    ("ij,jk", [(3, 4)], "2 operand terms for 1 inputs"),
    ("i1->i", [(3, 4)], "only letters"),
])
def test_einsum_invalid_equations(equation, shapes, message):
    names = [f"x{i}" for i in range(len(shapes))]
    node = helper.make_node("Einsum", names, ["y"], equation=equation)
    m = make_model([node], [(n, np.float32, s) for n, s in zip(names, shapes)],
                   [("y", np.float32, None)], opset=12)
    with pytest.raises(aotc.AotcError, match=message):
        aotc.compile(m)


# ---- Det ----------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(3, 3), (2, 4, 5, 5), (1, 1), (7, 7)])
def test_det_matches_onnxruntime(shape):
    node = helper.make_node("Det", ["x"], ["y"])
    m = make_model([node], [("x", np.float32, shape)], [("y", np.float32, None)], opset=11)
    check(m, {"x": random(shape, seed=1)}, rtol=1e-4, atol=1e-5)


def test_det_singular_and_pivoting():
    x = np.array([[[1, 2], [2, 4]], [[0, 1], [1, 0]], [[1e-8, 1], [1, 1]]], np.float64)
    node = helper.make_node("Det", ["x"], ["y"])
    m = make_model([node], [("x", np.float64, x.shape)], [("y", np.float64, None)], opset=22)
    got = aotc.compile(m).run({"x": x})["y"]
    np.testing.assert_allclose(got, np.linalg.det(x), rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
def test_det_half_types(dtype):
    """The determinant in double, rounded once (onnx.reference has no 16-bit Det)."""
    node = helper.make_node("Det", ["x"], ["y"])
    m = make_model([node], [("x", dtype, (3, 3, 3))], [("y", dtype, None)], opset=22)
    x = random((3, 3, 3), dtype, seed=2)
    got = aotc.compile(m).run({"x": x})["y"]
    assert got.dtype == np.dtype(dtype)
    want = np.linalg.det(x.astype(np.float64)).astype(dtype)
    np.testing.assert_array_equal(got.astype(np.float64), want.astype(np.float64))


def test_det_of_non_square_is_invalid():
    m = make_model([helper.make_node("Det", ["x"], ["y"])], [("x", np.float32, (3, 4))],
                   [("y", np.float32, None)], opset=11)
    with pytest.raises(aotc.AotcError, match="square"):
        aotc.compile(m)


def test_generated_c_is_clean(tmp_path):
    nodes = [helper.make_node("Einsum", ["a", "b"], ["e"], equation="...ij,jk->...ik"),
             helper.make_node("Einsum", ["c"], ["d"], equation="ii->"),
             helper.make_node("Det", ["a"], ["det"])]
    m = make_model(nodes, [("a", np.float32, (2, 3, 3)), ("b", np.float32, (3, 4)), ("c", np.int8, (5, 5))],
                   [("e", np.float32, None), ("d", np.int8, None), ("det", np.float32, None)], opset=12)
    assert_clean_c(tmp_path, m, "einsum")
