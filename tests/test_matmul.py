"""MatMul and Gemm against onnxruntime; the packed layout; bits across thread counts.

Ragged sizes (not multiples of any tile), K past one 256-row block, and the single row
and single column paths are all exercised. Comparisons run with one thread; the last
tests check that two threads give the same bits on shapes that split into many tiles.
"""
import numpy as np
import pytest
from onnx import helper

import aotc
from aotc.ops.matmul import pack_b, sgemm_packed_scratch_bytes, sgemm_scratch_bytes
import ml_dtypes

from oracle import assert_matches_ort, check_reference, make_model, random

TOL = dict(rtol=1e-4, atol=1e-4)


def _matmul_model(a_shape, b_shape, dtype=np.float32, b_const=None, opset=17):
    inputs = [("a", dtype, a_shape)] + ([] if b_const is not None else [("b", dtype, b_shape)])
    inits = {"b": b_const} if b_const is not None else None
    return make_model([helper.make_node("MatMul", ["a", "b"], ["y"])], inputs,
                      [("y", dtype, None)], inits, opset=opset)


MATMUL_SHAPES = [
    ((5, 7), (7, 3)),
    ((37, 300), (300, 45)),          # K past one block, ragged M and N
    ((9, 1), (1, 70)),               # K = 1
    ((1, 513), (513, 130)),          # M = 1
    ((70, 300), (300, 1)),           # N = 1
    ((1, 1), (1, 1)),
    ((300,), (300, 70)),             # 1-D A
    ((33, 300), (300,)),             # 1-D B
    ((17,), (17,)),                  # both 1-D: a scalar
    ((2, 1, 4, 5), (3, 5, 6)),       # batch broadcast both ways
    ((4, 5), (7, 5, 6)),
    ((1, 12, 128, 64), (1, 12, 64, 128)),
    ((2, 3, 40, 33), (33, 65)),      # shared B: batches fold into rows
    ((3, 1, 50), (2, 1, 50, 7)),
    ((8,), (2, 8, 3)),               # 1-D A against a batch of B
    ((2, 4, 8), (8,)),               # a batch of A against 1-D B
]


@pytest.mark.parametrize("a_shape,b_shape", MATMUL_SHAPES)
def test_matmul_matches_onnxruntime(a_shape, b_shape):
    m = _matmul_model(a_shape, b_shape)
    assert_matches_ort(m, {"a": random(a_shape, seed=1), "b": random(b_shape, seed=2)},
                       threads=1, **TOL)


@pytest.mark.parametrize("a_shape,b_shape", [((37, 300), (300, 45)), ((1, 600), (600, 200)),
                                             ((2, 5, 270), (270, 33)), ((20, 257), (257, 1)),
                                             ((257,), (257, 40))])
def test_matmul_with_constant_b_is_packed_at_compile_time(a_shape, b_shape):
    m = _matmul_model(a_shape, b_shape, b_const=random(b_shape, seed=3))
    assert_matches_ort(m, {"a": random(a_shape, seed=4)}, threads=1, **TOL)


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_integer_matmul(dtype):
    m = _matmul_model((2, 3, 5), (5, 4), dtype=dtype)
    assert_matches_ort(m, {"a": random((2, 3, 5), dtype, 1, -9, 9),
                           "b": random((5, 4), dtype, 2, -9, 9)}, threads=1)


@pytest.mark.parametrize("opset", [7, 9, 13, 22])
def test_matmul_opsets(opset):
    m = _matmul_model((3, 4), (4, 2), opset=opset)
    assert_matches_ort(m, {"a": random((3, 4), seed=5), "b": random((4, 2), seed=6)}, threads=1)


def test_matmul_folds_constants():
    """A product of two constants folds at compile time (evaluate)."""
    a, b = random((3, 4), seed=7), random((4, 5), seed=8)
    nodes = [helper.make_node("MatMul", ["ca", "cb"], ["p"]), helper.make_node("Add", ["x", "p"], ["y"])]
    m = make_model(nodes, [("x", np.float32, (3, 5))], [("y", np.float32, None)], {"ca": a, "cb": b})
    assert_matches_ort(m, {"x": random((3, 5), seed=9)}, threads=1, **TOL)


def test_matmul_rejects_mismatched_inner_dimension():
    with pytest.raises(aotc.AotcError, match="inner dimensions"):
        aotc.compile(_matmul_model((3, 4), (5, 2)), threads=1)


# ---- Gemm -----------------------------------------------------------------------------

def _gemm_model(M, N, K, ta, tb, c_shape, alpha=1.0, beta=1.0, opset=13, const_b=None, const_c=None):
    a_shape = (K, M) if ta else (M, K)
    b_shape = (N, K) if tb else (K, N)
    inputs, inits, names = [("a", np.float32, a_shape)], {}, ["a", "b"]
    if const_b is None:
        inputs.append(("b", np.float32, b_shape))
    else:
        inits["b"] = const_b
    if c_shape is not None:
        names.append("c")
        if const_c is None:
            inputs.append(("c", np.float32, c_shape))
        else:
            inits["c"] = const_c
    node = helper.make_node("Gemm", names, ["y"], alpha=alpha, beta=beta, transA=ta, transB=tb)
    return make_model([node], inputs, [("y", np.float32, None)], inits, opset=opset), a_shape, b_shape


def _gemm_feeds(model, a_shape, b_shape, c_shape):
    names = {i.name for i in model.graph.input}
    feeds = {"a": random(a_shape, seed=11)}
    if "b" in names:
        feeds["b"] = random(b_shape, seed=12)
    if "c" in names:
        feeds["c"] = random(c_shape, seed=13)
    return feeds


@pytest.mark.parametrize("ta", [0, 1])
@pytest.mark.parametrize("tb", [0, 1])
@pytest.mark.parametrize("M,N,K", [(19, 45, 300), (1, 70, 33), (33, 1, 270), (9, 40, 1)])
def test_gemm_transposes(ta, tb, M, N, K):
    model, a, b = _gemm_model(M, N, K, ta, tb, (N,))
    assert_matches_ort(model, _gemm_feeds(model, a, b, (N,)), threads=1, **TOL)


C_SHAPES = [None, (), (1,), (23,), (1, 23), (17, 1), (17, 23), (1, 1)]


@pytest.mark.parametrize("c_shape", C_SHAPES)
@pytest.mark.parametrize("alpha,beta", [(1.0, 1.0), (0.5, -2.0), (1.0, 0.0)])
def test_gemm_c_shapes_and_scales(c_shape, alpha, beta):
    model, a, b = _gemm_model(17, 23, 29, 0, 1, c_shape, alpha, beta)
    assert_matches_ort(model, _gemm_feeds(model, a, b, c_shape), threads=1, **TOL)


@pytest.mark.parametrize("c_shape", [(), (23,), (17, 1), (17, 23)])
@pytest.mark.parametrize("tb", [0, 1])
@pytest.mark.parametrize("beta", [1.0, 0.5])
def test_gemm_constant_weights_and_bias(c_shape, tb, beta):
    b_shape = (23, 300) if tb else (300, 23)
    model, a, b = _gemm_model(17, 23, 300, 0, tb, c_shape, 1.0, beta,
                              const_b=random(b_shape, seed=14), const_c=random(c_shape, seed=15))
    assert_matches_ort(model, {"a": random(a, seed=16)}, threads=1, **TOL)


def test_gemm_single_row_with_constant_weights():
    """The MLP at batch 1: one row of A against packed weights, bias on the columns."""
    model, a, b = _gemm_model(1, 1000, 700, 0, 1, (1000,), const_b=random((1000, 700), seed=17),
                              const_c=random((1000,), seed=18))
    assert_matches_ort(model, {"a": random(a, seed=19)}, threads=1, **TOL)


@pytest.mark.parametrize("opset", [7, 9, 11, 13, 22])
def test_gemm_opsets(opset):
    model, a, b = _gemm_model(4, 6, 5, 1, 0, (6,), 0.75, 1.5, opset=opset)
    assert_matches_ort(model, _gemm_feeds(model, a, b, (6,)), threads=1, **TOL)


def test_gemm_without_c_needs_opset_11():
    model, _, _ = _gemm_model(4, 6, 5, 0, 0, None, opset=9)
    with pytest.raises(aotc.AotcError, match="input"):
        aotc.compile(model, threads=1)


def test_gemm_rejects_c_that_does_not_broadcast():
    model, _, _ = _gemm_model(4, 6, 5, 0, 0, (4,))
    with pytest.raises(aotc.AotcError, match="does not broadcast"):
        aotc.compile(model, threads=1)


# ---- layout and bits ------------------------------------------------------------------

def test_pack_b_layout():
    """Block pc starts at pc * strips * 32, strip s at s * kc * 32; ragged strips are 0."""
    K, N = 300, 70
    b = random((K, N), seed=20)
    p = pack_b(b)
    strips = 3
    assert p.shape == (K * strips * 32,)
    kc = K - 256
    second_block = p[256 * strips * 32:]
    strip2 = second_block[2 * kc * 32:3 * kc * 32].reshape(kc, 32)
    np.testing.assert_array_equal(strip2[:, :N - 64], b[256:, 64:])
    assert not strip2[:, N - 64:].any()
    assert sgemm_scratch_bytes(5, 70, 300) == sgemm_packed_scratch_bytes(5, 70, 300) + K * 96 * 4
    assert sgemm_packed_scratch_bytes(1, 70, 300) == 0


@pytest.mark.parametrize("mode", ["fast", "exact"])
@pytest.mark.parametrize("a_shape,b_shape,const", [((300, 600), (600, 530), False),
                                                   ((1, 700), (700, 900), False),
                                                   ((2, 150, 300), (300, 530), True)])
def test_two_threads_give_identical_bits(mode, a_shape, b_shape, const):
    b = random(b_shape, seed=22)
    model = _matmul_model(a_shape, b_shape, b_const=b if const else None)
    feeds = {"a": random(a_shape, seed=21)} | ({} if const else {"b": b})
    one = aotc.compile(model, threads=1, mode=mode).run(feeds)["y"]
    two = aotc.compile(model, threads=2, mode=mode).run(feeds)["y"]
    np.testing.assert_array_equal(one.view(np.uint32), two.view(np.uint32))
    np.testing.assert_allclose(one, feeds["a"] @ b, **TOL)


def test_packed_and_unpacked_weights_give_identical_bits():
    a, b = random((45, 300), seed=23), random((300, 77), seed=24)
    packed = aotc.compile(_matmul_model(a.shape, b.shape, b_const=b), threads=1).run({"a": a})["y"]
    plain = aotc.compile(_matmul_model(a.shape, b.shape), threads=1).run({"a": a, "b": b})["y"]
    np.testing.assert_array_equal(packed.view(np.uint32), plain.view(np.uint32))


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16, np.float64, np.uint32, np.uint64],
                         ids=lambda d: np.dtype(d).name)
def test_matmul_other_element_types_sum_in_a_wide_type(dtype):
    """16-bit floats and double sum in double and round once; unsigned ints wrap."""
    nodes = [helper.make_node("MatMul", ["a", "b"], ["y"]), helper.make_node("MatMul", ["v", "b"], ["w"])]
    model = make_model(nodes, [("a", dtype, (2, 3, 37)), ("b", dtype, (37, 5)), ("v", dtype, (37,))],
                       [("y", dtype, None), ("w", dtype, None)], opset=13)
    low = 0 if np.dtype(dtype).kind == "u" else -2
    feeds = {n: random(s, np.float64 if np.dtype(dtype).kind != "u" else np.int64, seed=i, low=low, high=3)
             .astype(dtype) for i, (n, s) in enumerate([("a", (2, 3, 37)), ("b", (37, 5)), ("v", (37,))])}
    tol = 1e-2 if np.dtype(dtype).itemsize == 2 else 1e-9
    check_reference(model, feeds, rtol=tol, atol=tol)
