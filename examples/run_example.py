#!/usr/bin/env python3
"""Compile examples/tiny_cnn.onnx with aotc, run it, and check it against onnxruntime.

Exits non-zero when max |aotc - onnxruntime| / max |onnxruntime| exceeds 1e-4.
"""
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
try:
    import aotc
except ImportError:       # not installed: use the checkout this example lives in
    sys.path.insert(0, os.path.dirname(HERE))
    import aotc
from example_input import example_input  # noqa: E402

MODEL = os.path.join(HERE, "tiny_cnn.onnx")
TOLERANCE = 1e-4


def main():
    try:
        sess = aotc.compile(MODEL)
    except aotc.AotcError as e:
        print(f"aotc: error: {e.kind}: {e}", file=sys.stderr)
        return 2
    print(f"compiled {os.path.relpath(MODEL)}: {sess.inputs[0].name} {list(sess.inputs[0].shape)} -> "
          f"{sess.outputs[0].name} {list(sess.outputs[0].shape)}, workspace "
          f"{sess.report['workspace_bytes']} bytes, artifact in {sess.out_dir}")
    x = example_input(sess.inputs[0].shape)
    got = sess.run(x)

    import onnxruntime as ort
    ref_sess = ort.InferenceSession(MODEL, providers=["CPUExecutionProvider"])
    want = ref_sess.run(None, {ref_sess.get_inputs()[0].name: x})[0]

    np.set_printoptions(precision=6, suppress=True, linewidth=100)
    print("aotc:       ", got.reshape(-1))
    print("onnxruntime:", want.reshape(-1))
    scale = max(float(np.max(np.abs(want))), 1e-30)
    difference = float(np.max(np.abs(got.astype(np.float64) - want))) / scale
    print(f"max relative difference: {difference:.3g} (tolerance {TOLERANCE:g}); "
          f"class {int(np.argmax(got))} (onnxruntime: {int(np.argmax(want))})")
    if not np.isfinite(difference) or difference > TOLERANCE:
        print("FAIL: aotc and onnxruntime disagree", file=sys.stderr)
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
