"""NonZero, Unique and Compress: outputs whose shape depends on the data. Compared with
onnxruntime (onnx.reference for what it lacks); the trimmed shapes through the Session
and through the generated C's <name>_output_shape under ASan/UBSan; readers of such a
value refused at compile time; constant inputs folded."""
import subprocess

import numpy as np
import pytest
from onnx import helper

import aotc
from oracle import check, make_model
from sanitize import CC, SANITIZE


def _node(op, ins, outs, **attrs):
    return helper.make_node(op, ins, outs, **attrs)


@pytest.mark.parametrize("dtype", [np.float32, np.int8, np.bool_, np.uint64, np.float16])
def test_nonzero_types_signed_zero_nan_and_none(dtype):
    x = (np.arange(2 * 3 * 4) % 3).astype(dtype).reshape(2, 3, 4)
    if np.dtype(dtype).kind == "f":
        x[0, 0, 1], x[1, 2, 3] = -0.0, np.nan
    nodes = [_node("NonZero", ["x"], ["y"]), _node("NonZero", ["z"], ["none"])]
    m = make_model(nodes, [("x", dtype, x.shape), ("z", dtype, (5,))],
                   [("y", np.int64, None), ("none", np.int64, None)], opset=13)
    got = check(m, {"x": x, "z": np.zeros(5, dtype)}, oracle="onnx.reference", threads=2)
    assert got["none"].shape == (1, 0)


def test_unique_every_form():
    flat = np.array([[3, -1, 3], [7, -1, 0]], np.int64)
    rows = np.array([[1.0, 2.0], [0.5, 9.0], [1.0, 2.0], [1.0, -2.0], [0.5, 9.0]], np.float32)
    outs4 = lambda p: [f"{p}_y", f"{p}_first", f"{p}_inverse", f"{p}_counts"]   # noqa: E731
    nodes = [_node("Unique", ["f"], outs4("sorted")),
             _node("Unique", ["f"], outs4("unsorted"), sorted=0),
             _node("Unique", ["r"], outs4("rows"), axis=0),
             _node("Unique", ["r"], outs4("cols"), axis=-1, sorted=0),
             _node("Unique", ["r"], ["only_y"], axis=0, sorted=0)]
    outputs = [(o, np.float32 if o.endswith("_y") and not o.startswith(("sorted", "unsorted"))
                else np.int64, None) for n in nodes for o in n.output]
    m = make_model(nodes, [("f", np.int64, flat.shape), ("r", np.float32, rows.shape)], outputs, opset=11)
    got = check(m, {"f": flat, "r": rows})
    assert got["unsorted_y"].tolist() == [3, -1, 7, 0]
    assert got["rows_y"].shape == (3, 2)


def test_compress_with_a_run_time_condition():
    x = np.arange(3 * 5 * 2, dtype=np.float32).reshape(3, 5, 2)
    nodes = [_node("Compress", ["x", "c5"], ["y_axis1"], axis=1),
             _node("Compress", ["x", "c3"], ["y_short"], axis=-1),
             _node("Compress", ["x", "c5"], ["y_flat"])]
    m = make_model(nodes, [("x", np.float32, x.shape), ("c5", np.bool_, (5,)), ("c3", np.bool_, (1,))],
                   [(n.output[0], np.float32, None) for n in nodes], opset=11)
    sess = aotc.compile(m)
    for c5, c3 in [([0, 1, 1, 0, 1], [1]), ([0, 0, 0, 0, 0], [0]), ([1, 1, 1, 1, 1], [1])]:
        feeds = {"x": x, "c5": np.array(c5, bool), "c3": np.array(c3, bool)}
        got = sess.run(feeds)
        assert got["y_axis1"].shape == (3, sum(c5), 2)
        np.testing.assert_array_equal(got["y_axis1"], np.compress(c5, x, axis=1))
        np.testing.assert_array_equal(got["y_short"], np.compress(c3, x, axis=2))
        np.testing.assert_array_equal(got["y_flat"], np.compress(c5, x))
    # a true condition past the axis is an error code, not a read out of bounds
    m = make_model([_node("Compress", ["x", "c"], ["y"], axis=0)],
                   [("x", np.float32, (2, 3)), ("c", np.bool_, (3,))], [("y", np.float32, None)], opset=11)
    with pytest.raises(aotc.AotcError, match="code 3"):
        aotc.compile(m).run({"x": np.ones((2, 3), np.float32), "c": np.array([0, 1, 1], bool)})


def test_constant_condition_and_constant_input_give_static_shapes_that_can_be_read():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    nodes = [_node("Compress", ["x", "c"], ["kept"], axis=1), _node("Relu", ["kept"], ["y"]),
             _node("NonZero", ["k"], ["nz"]), _node("Transpose", ["nz"], ["coords"])]
    m = make_model(nodes, [("x", np.float32, x.shape)], [("y", np.float32, None), ("coords", np.int64, None)],
                   {"c": np.array([1, 0, 0, 1], bool), "k": np.array([[0, 2], [3, 0]], np.int32)}, opset=13)
    check(m, {"x": x})


def test_a_node_reading_a_data_dependent_value_is_refused():
    m = make_model([_node("NonZero", ["x"], ["nz"], name="find"), _node("Transpose", ["nz"], ["y"], name="flip")],
                   [("x", np.float32, (4,))], [("y", np.int64, None)], opset=13)
    with pytest.raises(aotc.Unsupported, match=r"node 'flip'.*'nz'.*depends on the data.*'find'"):
        aotc.compile(m)


HARNESS = r"""
#include <stdio.h>
#include <stdlib.h>
#include "dd.h"
int main(void) {
  float x[6] = {0.f, 2.f, 2.f, -1.f, 0.f, 2.f};
  float y[6];
  int64_t first[6], inverse[6], counts[6], nz[2 * 6], shape[2];
  void *ws = aligned_alloc(64, (DD_WORKSPACE_BYTES + 63) / 64 * 64 + 64);
  int i;
  if (dd_run(ws, x, y, first, inverse, counts, nz) != 0) return 1;
  for (i = 0; i < DD_NUM_OUTPUTS; i++) {
    if (dd_output_shape(ws, i, shape) != 0) return 2;
    printf("%lld", (long long)shape[0]);
    if (dd_outputs[i].rank == 2) printf("x%lld", (long long)shape[1]);
    printf(" ");
  }
  printf("| %g %g %g | %lld %lld %lld %lld\n", y[0], y[1], y[2], (long long)nz[0], (long long)nz[1],
         (long long)nz[2], (long long)nz[3]);
  if (dd_output_shape(ws, DD_NUM_OUTPUTS, shape) != 3) return 3;
  free(ws);
  return 0;
}
"""


def test_generated_c_reports_the_actual_shapes(tmp_path):
    m = make_model([_node("Unique", ["x"], ["y", "first", "inverse", "counts"]), _node("NonZero", ["x"], ["nz"])],
                   [("x", np.float32, (6,))],
                   [("y", np.float32, None), ("first", np.int64, None), ("inverse", np.int64, None),
                    ("counts", np.int64, None), ("nz", np.int64, None)], opset=11)
    out = tmp_path / "dd"
    aotc.compile(m, out_dir=str(out), name="dd", weights="c")
    (out / "main.c").write_text(HARNESS)
    build = subprocess.run([CC, "-std=c11", "-Wall", "-Wextra", "-Werror", "-O1", *SANITIZE, "-I.", "main.c",
                            "dd.c", "-o", "main", "-lpthread", "-lm"], cwd=out, capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    run = subprocess.run(["./main"], cwd=out, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.strip() == "3 3 6 3 1x4 | -1 0 2 | 1 2 3 5"
