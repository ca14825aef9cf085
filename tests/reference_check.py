"""Test helpers for operators onnxruntime may lack: compare aotc with onnxruntime, or
with onnx.reference where onnxruntime cannot run the model; and build a compiled
model's C under -Werror and the sanitizers."""
import subprocess

import numpy as np
from onnx.reference import ReferenceEvaluator

import aotc
from oracle import run_ort
from sanitize import CC, run_sanitized


def reference(model, feeds, prefer="onnxruntime"):
    """(outputs by name, oracle name): onnxruntime's, or onnx.reference's when
    onnxruntime cannot run the model or `prefer` asks for it."""
    if prefer == "onnxruntime":
        try:
            return run_ort(model, feeds), "onnxruntime"
        except Exception:   # NOT_IMPLEMENTED / type not registered
            pass
    names = [o.name for o in model.graph.output]
    return dict(zip(names, ReferenceEvaluator(model).run(None, feeds))), "onnx.reference"


def check(model, feeds, rtol=1e-5, atol=1e-6, prefer="onnxruntime", **options):
    """Compile with aotc and compare every output with the reference: dtype and shape
    exactly, floats within tolerance, everything else equal."""
    got = aotc.compile(model, **options).run(feeds)
    want, oracle = reference(model, feeds, prefer)
    for name, w in want.items():
        g, w = got[name], np.asarray(w)
        assert g.dtype == w.dtype, f"{name}: dtype {g.dtype} != {w.dtype} ({oracle})"
        assert g.shape == w.shape, f"{name}: shape {g.shape} != {w.shape} ({oracle})"
        if w.dtype.kind == "f":
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=f"{name} ({oracle})")
        else:
            np.testing.assert_array_equal(g, w, err_msg=f"{name} ({oracle})")
    return got


def assert_clean_c(tmp_path, model, name):
    """The model's generated C compiles under -Wall -Wextra -Werror and runs clean under
    AddressSanitizer and UBSan (tests/c/harness.c feeds it inputs)."""
    sess = aotc.compile(model, out_dir=tmp_path, name=name)
    run_sanitized(tmp_path, sess.name)
    build = subprocess.run([CC, "-std=c99", "-O2", "-Wall", "-Wextra", "-Werror", "-I.", "-Wa,-I.",
                            "-c", f"{name}.c", "-o", "warnings.o"], cwd=tmp_path, capture_output=True,
                           text=True)
    assert build.returncode == 0, build.stderr
