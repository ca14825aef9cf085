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
#include "aotc_cast.h"
void f16_to_f32(const aotc_f16 *x, float *y, long n) { long i; for (i = 0; i < n; i++) y[i] = aotc_f16_to_f32(x[i]); }
void f32_to_f16(const float *x, aotc_f16 *y, long n) { long i; for (i = 0; i < n; i++) y[i] = aotc_f32_to_f16(x[i]); }
void bf16_to_f32(const aotc_bf16 *x, float *y, long n) { long i; for (i = 0; i < n; i++) y[i] = aotc_bf16_to_f32(x[i]); }
void f32_to_bf16(const float *x, aotc_bf16 *y, long n) { long i; for (i = 0; i < n; i++) y[i] = aotc_f32_to_bf16(x[i]); }
void f64_to_f16(const double *x, aotc_f16 *y, long n) { long i; for (i = 0; i < n; i++) y[i] = aotc_f64_to_f16(x[i]); }
#define NARROW(name, format) \
  void encode_##name(const float *x, uint8_t *y, long n, int saturate) { \
    long i; for (i = 0; i < n; i++) y[i] = aotc_fp_encode(x[i], format, saturate); } \
  void decode_##name(const uint8_t *x, float *y, long n) { \
    long i; for (i = 0; i < n; i++) y[i] = aotc_fp_decode(x[i], format); }
NARROW(float8_e4m3fn, AOTC_FP_E4M3FN)
NARROW(float8_e4m3fnuz, AOTC_FP_E4M3FNUZ)
NARROW(float8_e5m2, AOTC_FP_E5M2)
NARROW(float8_e5m2fnuz, AOTC_FP_E5M2FNUZ)
NARROW(float4_e2m1fn, AOTC_FP_E2M1)
void encode_e8m0(const float *x, uint8_t *y, long n, int saturate, int mode) {
  long i; for (i = 0; i < n; i++) y[i] = aotc_f32_to_e8m0(x[i], saturate, mode); }
void decode_e8m0(const uint8_t *x, float *y, long n) { long i; for (i = 0; i < n; i++) y[i] = aotc_e8m0_to_f32(x[i]); }
void low_bits(const float *x, uint8_t *y, long n, int mask) {
  long i; for (i = 0; i < n; i++) y[i] = aotc_float_to_low_bits(x[i], (unsigned)mask); }
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

    def call(fn, x, out_dtype, *flags):
        x = np.ascontiguousarray(x)
        y = np.empty(x.shape, out_dtype)
        getattr(lib, fn)(ctypes.c_void_p(x.ctypes.data), ctypes.c_void_p(y.ctypes.data), ctypes.c_long(x.size),
                         *(ctypes.c_int(f) for f in flags))
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


# ---- the 8-, 4- and 2-bit types ------------------------------------------------------

NARROW_FLOATS = [np.dtype(t) for t in (ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e4m3fnuz,
                                       ml_dtypes.float8_e5m2, ml_dtypes.float8_e5m2fnuz,
                                       ml_dtypes.float4_e2m1fn)]


def _narrow_patterns():
    """Random float32 bit patterns, and for every exponent a narrow float reaches, a grid
    of mantissas (which holds each rounding tie) with the values one ulp either side."""
    rng = np.random.default_rng(1)
    grid = ((np.arange(100, 146, dtype=np.uint32)[:, None] << 23)
            | np.arange(0, 2**23, 2**12, dtype=np.uint32)[None, :]).ravel()
    bits = [rng.integers(0, 2**32, 200_000, dtype=np.uint64).astype(np.uint32), grid, grid | 1, grid - 1]
    bits += [b | np.uint32(0x80000000) for b in bits[1:]]
    special = np.array([0, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00000, 0xffc00000, 0x7f800001,
                        0xff800001, 0x7fffffff, 1, 0x80000001, 0x7f7fffff, 0xff7fffff], np.uint32)
    return np.concatenate(bits + [special]).view(np.float32)


def _same_values(got, want):
    """Equal bits, except that NaNs only need to be NaN."""
    got, want = got.astype(np.float32), want.astype(np.float32)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    keep = ~np.isnan(want)
    np.testing.assert_array_equal(got.view(np.uint32)[keep], want.view(np.uint32)[keep])


@pytest.mark.parametrize("dtype", NARROW_FLOATS, ids=str)
def test_narrow_floats_round_like_ml_dtypes(half_c, dtype):
    codes = np.arange(2 ** dtypes.bits(dtype), dtype=np.uint8)
    _same_values(half_c(f"decode_{dtype.name}", codes, np.float32), codes.view(dtype))
    x = _narrow_patterns()
    top = np.float32(ml_dtypes.finfo(dtype).max)
    with np.errstate(all="ignore"):
        plain, clipped = x.astype(dtype), np.clip(x, -top, top).astype(dtype)
    # every bit, NaN patterns included; float4e2m1 has no NaN and always saturates
    np.testing.assert_array_equal(half_c(f"encode_{dtype.name}", x, np.uint8, 0), plain.view(np.uint8))
    np.testing.assert_array_equal(half_c(f"encode_{dtype.name}", x, np.uint8, 1), clipped.view(np.uint8))


def test_float8e8m0_follows_the_onnx_reference(half_c):
    from onnx.numpy_helper import to_float8e8m0
    codes = np.arange(256, dtype=np.uint8)
    _same_values(half_c("decode_e8m0", codes, np.float32), codes.view(ml_dtypes.float8_e8m0fnu))
    x = _narrow_patterns()
    for saturate in (0, 1):
        for mode, name in enumerate(("up", "down", "nearest")):   # AOTC_E8M0_UP, _DOWN, _NEAREST
            want = to_float8e8m0(x, bool(saturate), name).view(np.uint8)
            np.testing.assert_array_equal(half_c("encode_e8m0", x, np.uint8, saturate, mode), want)


def test_double_to_float16_rounds_once_like_numpy(half_c):
    with np.errstate(all="ignore"):
        x = _float_patterns().astype(np.float64)
    rng = np.random.default_rng(2)
    x = np.concatenate([x, x * (1 + 2.0**-30), x * (1 - 2.0**-30), rng.standard_normal(100_000) * 3e4,
                        np.frombuffer(rng.bytes(8 * 100_000), np.float64), [2.0**-25, 2.0**-25 * (1 + 2**-40)]])
    got = half_c("f64_to_f16", x, np.uint16).view(np.float16)
    with np.errstate(all="ignore"):
        _same_bits_or_both_nan(got, x.astype(np.float16), np.uint16)


@pytest.mark.parametrize("dtype", [ml_dtypes.int4, ml_dtypes.uint4, ml_dtypes.int2, ml_dtypes.uint2], ids=str)
def test_floats_to_small_integers_truncate_and_wrap(half_c, dtype):
    x = np.concatenate([np.arange(-300, 300, 0.25), [2.0**31 - 128, -2.0**31, 65535.9, 1e9],
                        [2.0**31, -2.0**31 - 256, 1e30, np.inf, -np.inf, np.nan]]).astype(np.float32)
    mask = 2 ** dtypes.bits(dtype) - 1
    got = half_c("low_bits", x, np.uint8, mask)
    inside = np.abs(x) <= 2.0**31 - 128
    np.testing.assert_array_equal(got[inside], x[inside].astype(dtype).view(np.uint8))
    assert not got[~inside].any()       # NaN, infinities and beyond int32: 0, defined


def test_small_element_types_in_the_table():
    for elem in (TensorProto.FLOAT8E4M3FN, TensorProto.FLOAT8E5M2FNUZ, TensorProto.FLOAT8E8M0,
                 TensorProto.FLOAT4E2M1, TensorProto.INT4, TensorProto.UINT2):
        dt = dtypes.from_onnx(elem)
        assert dtypes.to_onnx(dt) == elem and dtypes.c_type(dt) == "uint8_t"
        assert np.dtype(dtypes.name(dt)) == dt        # the manifest's spelling reloads
    assert dtypes.c_kernel_type(ml_dtypes.int4) == "aotc_i4"
    assert dtypes.compute_dtype(ml_dtypes.int2) == np.int8 and dtypes.compute_dtype(ml_dtypes.uint4) == np.uint8
    assert dtypes.compute_dtype(ml_dtypes.float8_e5m2) == np.float32
    assert [dtypes.bits(t) for t in (ml_dtypes.int4, ml_dtypes.int2, ml_dtypes.float4_e2m1fn, np.float16)] == [4, 2, 4, 16]
    assert dtypes.is_float(ml_dtypes.float8_e4m3fn) and not dtypes.is_float(ml_dtypes.int4)
    with pytest.raises(aotc.Unsupported, match="FLOAT6E2M3"):
        dtypes.from_onnx(TensorProto.FLOAT6E2M3, "x")


def _small_values(dtype, shape, seed):
    """Every bit pattern of the type, in a random order (canonical bytes, as numpy keeps them)."""
    codes = np.random.default_rng(seed).integers(0, 2 ** dtypes.bits(dtype), size=shape).astype(np.uint8)
    return codes.view(dtype)


def test_small_types_move_through_layout_operators(tmp_path):
    """Inputs, initializers and outputs of every such type (one model), through the
    operators that move data."""
    nodes, inputs, outs, feeds, want = [], [], [], {}, {}
    inits = {"starts": np.array([1, 1]), "ends": np.array([5, 3]), "idx": np.array([3, 0, 3]),
             "pads": np.array([1, 0, 0, 2]), "shape": np.array([2, -1])}
    for k, dtype in enumerate(np.dtype(t) for t in dtypes.SMALL):
        x, w = _small_values(dtype, (3, 4), 2 * k), _small_values(dtype, (3, 4), 2 * k + 1)
        n = dtype.name
        nodes += [helper.make_node("Transpose", [f"x_{n}"], [f"t_{n}"], perm=[1, 0]),
                  helper.make_node("Concat", [f"x_{n}", f"w_{n}"], [f"c_{n}"], axis=0),
                  helper.make_node("Slice", [f"c_{n}", "starts", "ends"], [f"s_{n}"]),
                  helper.make_node("Gather", [f"w_{n}", "idx"], [f"g_{n}"], axis=1),
                  helper.make_node("Pad", [f"x_{n}", "pads"], [f"p_{n}"], mode="edge"),
                  helper.make_node("Reshape", [f"t_{n}", "shape"], [f"r_{n}"]),
                  helper.make_node("Identity", [f"w_{n}"], [f"i_{n}"])]
        inputs.append((f"x_{n}", dtype, (3, 4)))
        feeds[f"x_{n}"], inits[f"w_{n}"] = x, w
        c = np.concatenate([x, w])
        want.update({f"t_{n}": x.T, f"c_{n}": c, f"s_{n}": c[1:5, 1:3], f"g_{n}": w[:, [3, 0, 3]],
                     f"p_{n}": np.pad(x, [(1, 0), (0, 2)], mode="edge"), f"r_{n}": x.T.reshape(2, -1),
                     f"i_{n}": w})
    outs = [(name, v.dtype, None) for name, v in want.items()]
    sess = aotc.compile(make_model(nodes, inputs, outs, inits, opset=25), out_dir=tmp_path / "m")
    assert [t.dtype for t in sess.inputs] == [np.dtype(t) for t in dtypes.SMALL]
    for s in (sess, aotc.load(tmp_path / "m")):
        got = s.run(feeds)
        for name, v in want.items():
            assert got[name].dtype == v.dtype
            np.testing.assert_array_equal(got[name].view(np.uint8), v.view(np.uint8), err_msg=name)
    with pytest.raises(InvalidInput, match="element type"):
        sess.run({**feeds, "x_int4": feeds["x_int4"].view(np.uint8)})
