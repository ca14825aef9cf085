"""DFT, STFT, the window functions and MelWeightMatrix against onnx.reference (numpy's
FFT): real and complex input, onesided, inverse, the inverse real transform, padded and
cut lengths, every axis, both opsets; the C under -Werror and sanitizers."""
import numpy as np
import pytest
from onnx import TensorProto, helper

import aotc
from oracle import check, make_model, random
from sanitize import CC, assert_clean_c


def _const(name, value):
    return helper.make_node("Constant", [], [name], value=helper.make_tensor(
        name, TensorProto.INT64, [], [int(value)]))


def test_dft_opset20_variants():
    x_real = random((2, 6, 5, 1), seed=1)
    x_cplx = random((2, 6, 5, 2), seed=2)
    nodes = [_const("ax1", 1), _const("ax2", -2), _const("n8", 8), _const("n4", 4), _const("n10", 10),
             helper.make_node("DFT", ["xr", "", "ax1"], ["fwd"]),
             helper.make_node("DFT", ["xr", "n8", "ax2"], ["pad_onesided"], onesided=1),
             helper.make_node("DFT", ["xc", "n4", "ax1"], ["cut"]),
             helper.make_node("DFT", ["xc", "", "ax2"], ["inv"], inverse=1),
             helper.make_node("DFT", ["xc", "n10", "ax1"], ["irfft"], inverse=1, onesided=1)]
    outs = ["fwd", "pad_onesided", "cut", "inv", "irfft"]
    model = make_model(nodes, [("xr", np.float32, x_real.shape), ("xc", np.float32, x_cplx.shape)],
                       [(o, np.float32, None) for o in outs], opset=20)
    check(model, {"xr": x_real, "xc": x_cplx}, rtol=1e-4, atol=1e-4, oracle="onnx.reference")


@pytest.mark.parametrize("dtype", [np.float64, np.float16])
def test_dft_opset17_attributes_and_types(dtype):
    x = random((3, 7, 1), dtype, seed=3)
    nodes = [helper.make_node("DFT", ["x"], ["y"], axis=1),
             helper.make_node("DFT", ["x"], ["y1"], axis=1, onesided=1)]
    model = make_model(nodes, [("x", dtype, x.shape)], [("y", dtype, None), ("y1", dtype, None)], opset=17)
    tol = 1e-10 if dtype == np.float64 else 1e-2
    check(model, {"x": x}, rtol=tol, atol=tol * 10, oracle="onnx.reference")


def test_stft_with_and_without_window():
    signal = random((2, 50, 1), seed=4)
    window = np.hanning(12).astype(np.float32)
    nodes = [_const("step", 5), _const("len", 12),
             helper.make_node("STFT", ["x", "step", "w"], ["y"]),
             helper.make_node("STFT", ["x", "step", "", "len"], ["y1"], onesided=0)]
    model = make_model(nodes, [("x", np.float32, signal.shape)],
                       [("y", np.float32, None), ("y1", np.float32, None)],
                       {"w": window}, opset=17)
    check(model, {"x": signal}, rtol=1e-4, atol=1e-4, oracle="onnx.reference")


def test_windows_and_mel_matrix():
    nodes = [_const("n", 10), _const("n1", 1),
             helper.make_node("HannWindow", ["n"], ["hann"]),
             helper.make_node("HammingWindow", ["n"], ["hamming"], periodic=0),
             helper.make_node("BlackmanWindow", ["n"], ["blackman"], output_datatype=TensorProto.DOUBLE),
             helper.make_node("HannWindow", ["n1"], ["single"], periodic=1),
             helper.make_node("MelWeightMatrix", ["bins", "dft", "rate", "lo", "hi"], ["mel"]),
             helper.make_node("MelWeightMatrix", ["bins", "dft", "rate", "lo_run", "hi_run"], ["mel_run"],
                              output_datatype=TensorProto.DOUBLE)]
    inits = {"bins": np.array(6, np.int64), "dft": np.array(32, np.int64), "rate": np.array(16000, np.int64),
             "lo": np.array(100.0, np.float32), "hi": np.array(7000.0, np.float32)}
    outs = [("hann", np.float32), ("hamming", np.float32), ("blackman", np.float64), ("single", np.float32),
            ("mel", np.float32), ("mel_run", np.float64)]
    edges = [("lo_run", np.float32, ()), ("hi_run", np.float32, ())]
    model = make_model(nodes, edges, [(o, t, None) for o, t in outs], inits, opset=17)
    feeds = {"lo_run": np.array(300.0, np.float32), "hi_run": np.array(5000.0, np.float32)}
    check(model, feeds, rtol=1e-6, atol=1e-7, oracle="onnx.reference")


@pytest.mark.skipif(CC is None, reason="no C compiler")
def test_runs_clean_under_sanitizers_and_warnings(tmp_path):
    nodes = [_const("step", 3), _const("ax", 1),
             helper.make_node("STFT", ["x", "step", "w"], ["s"]),
             helper.make_node("DFT", ["s", "", "ax"], ["d"], inverse=1, onesided=1),
             # run-time band edges (the harness's input values would be invalid edges)
             helper.make_node("Mul", ["e", "zero"], ["e0"]),
             helper.make_node("Add", ["e0", "lo_hz"], ["lo"]),
             helper.make_node("Add", ["e0", "hi_hz"], ["hi"]),
             helper.make_node("MelWeightMatrix", ["bins", "dft", "rate", "lo", "hi"], ["mel"])]
    inits = {"w": np.ones(6, np.float32), "bins": np.array(4, np.int64), "dft": np.array(16, np.int64),
             "rate": np.array(8000, np.int64), "zero": np.array(0, np.float32),
             "lo_hz": np.array(100, np.float32), "hi_hz": np.array(3000, np.float32)}
    model = make_model(nodes, [("x", np.float32, (1, 20, 1)), ("e", np.float32, ())],
                       [("d", np.float32, None), ("mel", np.float32, None)], inits, opset=20)
    assert_clean_c(tmp_path, model, "signalsan")


@pytest.mark.parametrize("node, x_shape, words", [
    (helper.make_node("DFT", ["x"], ["y"], axis=2), (2, 5, 1), "axis 2"),
    (helper.make_node("DFT", ["x"], ["y"]), (2, 5, 3), "must end in 1"),
    (helper.make_node("DFT", ["x"], ["y"], inverse=1, onesided=1), (2, 5, 1), "complex input"),
])
def test_invalid_dft_is_named(node, x_shape, words):
    model = make_model([node], [("x", np.float32, x_shape)], [("y", np.float32, None)], opset=17)
    with pytest.raises(aotc.errors.InvalidModel, match=words):
        aotc.compile(model)


def test_run_time_lengths_are_refused_clearly():
    model = make_model([helper.make_node("DFT", ["x", "n"], ["y"], axis=1)],
                       [("x", np.float32, (2, 5, 1)), ("n", np.int64, ())], [("y", np.float32, None)],
                       opset=17)
    with pytest.raises(aotc.errors.Unsupported, match="dft_length"):
        aotc.compile(model)
