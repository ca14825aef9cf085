"""float16 and bfloat16: the C conversions (exhaustively against numpy / ml_dtypes) and
the pipeline around them (import, weights, plan, Session input checks, reload)."""
import ctypes
import subprocess

import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto, helper

import aotc
from aotc import dtypes, resources
from aotc.errors import InvalidInput
from oracle import make_model
from sanitize import CC

BF16 = np.dtype(ml_dtypes.bfloat16)

_SHIM = r"""
#include "aotc_half.h"
void f16_to_f32(const aotc_f16 *x, float *y, long n) { long i; for (i = 0; i < n; i++) y[i] = aotc_f16_to_f32(x[i]); }
void f32_to_f16(const float *x, aotc_f16 *y, long n) { long i; for (i = 0; i < n; i++) y[i] = aotc_f32_to_f16(x[i]); }
void bf16_to_f32(const aotc_bf16 *x, float *y, long n) { long i; for (i = 0; i < n; i++) y[i] = aotc_bf16_to_f32(x[i]); }
void f32_to_bf16(const float *x, aotc_bf16 *y, long n) { long i; for (i = 0; i < n; i++) y[i] = aotc_f32_to_bf16(x[i]); }
"""


@pytest.fixture(scope="module")
def half_c(tmp_path_factory):
    """The runtime's conversion functions, built into a small library (-Werror, UBSan)."""
    if CC is None:
        pytest.skip("no C compiler")
    d = tmp_path_factory.mktemp("half")
    (d / "shim.c").write_text(_SHIM)
    cmd = [CC, "-std=c99", "-O2", "-Wall", "-Wextra", "-Werror", "-fPIC", "-shared",
           "-fsanitize=undefined", "-fno-sanitize-recover=all",
           f"-I{resources.runtime_dir()}", "shim.c", "-o", "shim.so"]
    build = subprocess.run(cmd, cwd=d, capture_output=True, text=True)
    if build.returncode != 0 and "sanitize" in build.stderr:
        build = subprocess.run([c for c in cmd if "sanitize" not in c], cwd=d, capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    lib = ctypes.CDLL(str(d / "shim.so"))

    def call(fn, x, out_dtype):
        x = np.ascontiguousarray(x)
        y = np.empty(x.shape, out_dtype)
        getattr(lib, fn)(ctypes.c_void_p(x.ctypes.data), ctypes.c_void_p(y.ctypes.data), ctypes.c_long(x.size))
        return y
    return call


def _float_patterns():
    """Random float32 bit patterns, every exponent, and the rounding ties of both types."""
    rng = np.random.default_rng(0)
    bits = [rng.integers(0, 2**32, 400_000, dtype=np.uint64).astype(np.uint32)]
    # near every binary16 value: the value, the ties between neighbours, one ulp around
    h = np.arange(0, 0x7c01, dtype=np.uint32).astype(np.uint16).view(np.float16).astype(np.float32)
    hi = np.nextafter(h, np.float32(np.inf))
    mid = ((h.astype(np.float64) + np.append(h[1:], np.float32(65536)).astype(np.float64)) / 2).astype(np.float32)
    for v in (h, mid, np.nextafter(mid, np.float32(0)), np.nextafter(mid, np.float32(np.inf)), hi):
        bits += [v.view(np.uint32), (-v).view(np.uint32)]
    # bfloat16 ties: low half exactly 0x8000 with odd and even kept halves
    top = rng.integers(0, 2**16, 50_000, dtype=np.uint64).astype(np.uint32) << 16
    bits += [top | 0x8000, top | 0x7fff, top | 0x8001]
    special = np.array([0, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00000, 0xffc00001, 0x7f800001,
                        0x7f7fffff, 0x477fe000, 0x477ff000, 0x477fefff, 0x33000000, 0x33000001,
                        0x387fc000, 0x38800000, 0x00000001], np.uint32)
    return np.concatenate(bits + [special]).view(np.float32)


def _same_bits_or_both_nan(got, want, width):
    got_bits, want_bits = got.view(width), want.view(width)
    nan_got, nan_want = np.isnan(got.astype(np.float32)), np.isnan(want.astype(np.float32))
    np.testing.assert_array_equal(nan_got, nan_want)
    np.testing.assert_array_equal(got_bits[~nan_want], want_bits[~nan_want])
    np.testing.assert_array_equal(np.signbit(got.astype(np.float32)), np.signbit(want.astype(np.float32)))


def test_every_float16_widens_exactly(half_c):
    h = np.arange(2**16, dtype=np.uint32).astype(np.uint16)
    got = half_c("f16_to_f32", h, np.float32)
    _same_bits_or_both_nan(got, h.view(np.float16).astype(np.float32), np.uint32)


def test_every_bfloat16_widens_exactly(half_c):
    h = np.arange(2**16, dtype=np.uint32).astype(np.uint16)
    got = half_c("bf16_to_f32", h, np.float32)
    _same_bits_or_both_nan(got, h.view(BF16).astype(np.float32), np.uint32)


def test_float_to_float16_rounds_to_nearest_even_like_numpy(half_c):
    x = _float_patterns()
    got = half_c("f32_to_f16", x, np.uint16).view(np.float16)
    with np.errstate(all="ignore"):
        _same_bits_or_both_nan(got, x.astype(np.float16), np.uint16)


def test_float_to_bfloat16_rounds_to_nearest_even_like_ml_dtypes(half_c):
    x = _float_patterns()
    got = half_c("f32_to_bf16", x, np.uint16).view(BF16)
    with np.errstate(all="ignore"):
        _same_bits_or_both_nan(got, x.astype(BF16), np.uint16)


def test_element_type_table():
    assert dtypes.from_onnx(TensorProto.FLOAT16) == np.float16
    assert dtypes.from_onnx(TensorProto.BFLOAT16) == BF16
    assert dtypes.to_onnx(BF16) == TensorProto.BFLOAT16
    assert dtypes.c_type(np.float16) == dtypes.c_type(BF16) == "uint16_t"
    assert (dtypes.c_kernel_type(np.float16), dtypes.c_kernel_type(BF16)) == ("aotc_f16", "aotc_bf16")
    assert dtypes.c_kernel_type(np.uint16) == "uint16_t"
    assert dtypes.compute_dtype(BF16) == np.float32 and dtypes.compute_dtype(np.float64) == np.float64
    assert dtypes.is_float(BF16) and not dtypes.is_float(np.int32)
    assert dtypes.name(BF16) == "bfloat16"


@pytest.mark.parametrize("dtype", [np.float16, BF16, np.float64], ids=str)
def test_half_weights_inputs_and_reload(tmp_path, dtype):
    w = (np.arange(12).reshape(3, 4) / 8 - 0.7).astype(dtype)
    model = make_model([helper.make_node("Mul", ["x", "w"], ["m"]), helper.make_node("Transpose", ["m"], ["y"])],
                       [("x", dtype, (3, 4))], [("y", dtype, None)], {"w": w})
    sess = aotc.compile(model, out_dir=tmp_path / "m")
    assert sess.inputs[0].dtype == dtype and sess.outputs[0].dtype == dtype
    x = (np.arange(12).reshape(3, 4) / 3 - 2).astype(dtype)
    ct = dtypes.compute_dtype(dtype)
    want = np.ascontiguousarray((x.astype(ct) * w.astype(ct)).astype(dtype).T)
    np.testing.assert_array_equal(sess.run(x).view(np.uint8), want.view(np.uint8))
    np.testing.assert_array_equal(aotc.load(tmp_path / "m").run(x).view(np.uint8), want.view(np.uint8))
    with pytest.raises(InvalidInput, match="element type"):
        sess.run(x.astype(np.float32))
    with pytest.raises(InvalidInput, match="element type"):
        sess.run(x.view(np.uint16) if dtype != np.float64 else x.astype(np.float16))


def test_constant_half_expressions_fold_like_the_kernels():
    """A node on constants is evaluated in numpy at compile time; the same node on an
    input runs in C: both round once from float."""
    c = np.array([0.1, 1.7, -3.3, 1000.0, 70000.0], np.float32)
    nodes = [helper.make_node("Exp", ["cf16"], ["e_fold"]), helper.make_node("Exp", ["x"], ["e_run"]),
             helper.make_node("Add", ["e_fold", "e_run"], ["y"])]
    for dtype in (np.float16, BF16):
        model = make_model(nodes, [("x", dtype, (5,))], [("y", dtype, None)], {"cf16": (c / 100).astype(dtype)})
        sess = aotc.compile(model)
        y = sess.run((c / 100).astype(dtype))
        with np.errstate(all="ignore"):
            e = np.exp((c / 100).astype(dtype).astype(np.float32)).astype(dtype).astype(np.float32)
        np.testing.assert_array_equal(y.astype(np.float32), (e + e).astype(dtype).astype(np.float32))
