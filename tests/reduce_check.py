"""Test helpers of the reduction family: compare aotc with onnxruntime or with
onnx.reference (named explicitly: onnxruntime lacks many of these element types), and
check that a model's C builds without a warning and runs clean under the sanitizers."""
import subprocess

import numpy as np
from onnx.reference import ReferenceEvaluator

import aotc
from oracle import run_ort
from sanitize import CC, run_sanitized


def run_reference(model, feeds):
    names = [o.name for o in model.graph.output]
    return dict(zip(names, ReferenceEvaluator(model).run(None, feeds)))


def assert_close(got, want, rtol=1e-5, atol=1e-6, oracle=""):
    """Every output: dtype and shape exactly, floats within tolerance (NaN where NaN),
    everything else equal."""
    for name, w in want.items():
        g, w = got[name], np.asarray(w)
        assert g.dtype == w.dtype, f"{name}: dtype {g.dtype} != {w.dtype} ({oracle})"
        assert g.shape == w.shape, f"{name}: shape {g.shape} != {w.shape} ({oracle})"
        if w.dtype.kind == "f" or w.dtype.name == "bfloat16":
            np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=rtol,
                                       atol=atol, err_msg=f"{name} ({oracle})")
        else:
            np.testing.assert_array_equal(g, w, err_msg=f"{name} ({oracle})")


def check(model, feeds, oracle="onnxruntime", rtol=1e-5, atol=1e-6, **options):
    """Compile with aotc, run, compare with `oracle` ('onnxruntime' or 'reference')."""
    got = aotc.compile(model, **options).run(feeds)
    want = run_ort(model, feeds) if oracle == "onnxruntime" else run_reference(model, feeds)
    assert list(got) == list(want)
    assert_close(got, want, rtol, atol, oracle)
    return got


def assert_clean_c(tmp_path, model, name):
    """The C compiles under -Wall -Wextra -Werror and runs clean under ASan and UBSan."""
    sess = aotc.compile(model, out_dir=tmp_path, name=name)
    run_sanitized(tmp_path, sess.name)
    build = subprocess.run([CC, "-std=c99", "-O2", "-Wall", "-Wextra", "-Werror", "-I.", "-Wa,-I.",
                            "-c", f"{name}.c", "-o", "warnings.o"], cwd=tmp_path,
                           capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
