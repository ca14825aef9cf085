"""Resize and Upsample against onnxruntime (the ONNX reference for the element types
onnxruntime lacks): every mode, coordinate transformation, nearest_mode, cubic
coefficient, exclude_outside, antialias, axes, keep_aspect_ratio_policy, crops with
extrapolation, scales and sizes; legacy opsets; errors; threads; sanitizers."""
import ml_dtypes
import numpy as np
import pytest
from onnx import helper

import aotc
from oracle import assert_matches_ort, check_reference, make_model, random, reference
from sanitize import CC, run_sanitized

SHAPE = (2, 3, 5, 8)


def _resize_model(variants, shape=SHAPE, dtype=np.float32, opset=19):
    """One Resize per variant (attrs, scales, sizes, roi) on the same input."""
    nodes, outputs, inits = [], [], {}
    for i, (attrs, scales, sizes, roi) in enumerate(variants):
        names = ["x", "", "", ""]
        for k, (key, value, vtype) in enumerate([("roi", roi, np.float32), ("scales", scales, np.float32),
                                                 ("sizes", sizes, np.int64)]):
            if value is not None:
                names[k + 1] = f"{key}{i}"
                inits[f"{key}{i}"] = np.array(value, vtype)
        while names[-1] == "":
            names.pop()
        nodes.append(helper.make_node("Resize", names, [f"y{i}"], **attrs))
        outputs.append((f"y{i}", dtype, None))
    return make_model(nodes, [("x", dtype, shape)], outputs, inits, opset=opset)


COORDS = ["half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "half_pixel_symmetric"]
UP, DOWN = [1, 1, 1.6, 2.5], [1, 1, 0.6, 0.75]   # integral output lengths


def test_nearest_modes_and_coordinates():
    """Against the ONNX reference (the conformance suite's oracle): onnxruntime computes
    source coordinates in float32, the reference and aotc in double, and they pick other
    neighbours where a coordinate falls within float32 rounding of a rounding edge."""
    variants = []
    for coord in COORDS:
        for nearest in ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]:
            attrs = dict(mode="nearest", coordinate_transformation_mode=coord, nearest_mode=nearest)
            variants += [(attrs, UP, None, None), (attrs, DOWN, None, None)]
    check_reference(_resize_model(variants), {"x": random(SHAPE)})


@pytest.mark.parametrize("mode", ["linear", "cubic"])
def test_linear_and_cubic(mode):
    variants = []
    for coord in COORDS:
        attrs = dict(mode=mode, coordinate_transformation_mode=coord)
        variants += [(attrs, UP, None, None), (attrs, DOWN, None, None)]
        if not (mode == "cubic" and coord == "pytorch_half_pixel"):    # see below
            variants.append((attrs, None, [2, 3, 1, 9], None))          # width 1: its own rules
    if mode == "cubic":
        attrs = dict(mode="cubic", cubic_coeff_a=-0.5, exclude_outside=1)
        variants += [(attrs, UP, None, None), (attrs, DOWN, None, None)]
    assert_matches_ort(_resize_model(variants), {"x": random(SHAPE)}, rtol=1e-4, atol=1e-5)


def test_where_onnxruntime_departs_from_the_reference():
    """Output length 1 with pytorch_half_pixel (cubic), and align_corners when scale x
    length is not whole: the reference (and the suite) divide by scale x length - 1."""
    variants = [(dict(mode="cubic", coordinate_transformation_mode="pytorch_half_pixel"), None, [2, 3, 1, 9], None),
                (dict(mode="linear", coordinate_transformation_mode="align_corners"), [1, 1, 1.5, 0.45], None, None)]
    check_reference(_resize_model(variants), {"x": random(SHAPE)}, rtol=1e-4, atol=1e-4)


def test_antialias_axes_policies_and_crops():
    variants = [
        (dict(mode="linear", antialias=1), DOWN, None, None),
        (dict(mode="cubic", antialias=1), None, [2, 3, 2, 3], None),
        (dict(mode="linear", antialias=1), UP, None, None),
        (dict(mode="nearest", axes=[3, 2]), [2.0, 0.5], None, None),
        (dict(mode="linear", axes=[-1]), None, [11], None),
        (dict(mode="nearest", axes=[2, 3], keep_aspect_ratio_policy="not_larger"), None, [7, 7], None),
        (dict(mode="linear", axes=[2, 3], keep_aspect_ratio_policy="not_smaller"), None, [3, 10], None),
        (dict(mode="linear", coordinate_transformation_mode="tf_crop_and_resize",
              extrapolation_value=-3.0), None, [2, 3, 6, 4], [0, 0, -0.2, 0.3, 1, 1, 0.9, 1.4]),
        (dict(mode="nearest", coordinate_transformation_mode="tf_crop_and_resize", axes=[3]),
         None, [9], [0.1, 0.8]),
        (dict(mode="linear"), [1, 1, 1, 1], None, None),     # identity: a copy
        (dict(mode="nearest"), [2, 1, 1, 1], None, None),    # the batch axis
    ]
    assert_matches_ort(_resize_model(variants), {"x": random(SHAPE)}, rtol=1e-4, atol=1e-5)


def test_legacy_opsets():
    up = helper.make_node("Upsample", ["x", "s"], ["y0"], mode="nearest")
    lin = helper.make_node("Upsample", ["x", "s"], ["y1"], mode="linear")
    m9 = make_model([up, lin], [("x", np.float32, SHAPE)], [("y0", np.float32, None), ("y1", np.float32, None)],
                    {"s": np.array([1, 1, 2, 1.5], np.float32)}, opset=9)
    assert_matches_ort(m9, {"x": random(SHAPE)})
    nodes = [helper.make_node("Resize", ["x", "s0"], ["y0"], mode="nearest"),
             helper.make_node("Resize", ["x", "s1"], ["y1"], mode="nearest"),
             helper.make_node("Resize", ["x", "s1"], ["y2"], mode="linear")]
    m10 = make_model(nodes, [("x", np.float32, SHAPE)], [(f"y{i}", np.float32, None) for i in range(3)],
                     {"s0": np.array([1, 1, 2, 3], np.float32), "s1": np.array([1, 1, 0.6, 0.5], np.float32)},
                     opset=10)
    assert_matches_ort(m10, {"x": random(SHAPE)})
    m11 = _resize_model([(dict(mode="nearest", coordinate_transformation_mode="tf_half_pixel_for_nn"),
                          UP, None, [])], opset=11)
    assert_matches_ort(m11, {"x": random(SHAPE)})


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16, np.uint8, np.int8])
def test_other_element_types_match_the_reference(dtype):
    variants = [(dict(mode="nearest"), UP, None, None), (dict(mode="linear"), DOWN, None, None),
                (dict(mode="cubic"), UP, None, None)]
    model = _resize_model(variants, dtype=dtype)
    low, high = (0, 255) if dtype == np.uint8 else (-100, 100)
    x = random(SHAPE, np.float32, low=low, high=high)
    x = x.astype(dtype) if np.dtype(dtype).kind != "i" else np.round(x).astype(dtype)
    if np.dtype(dtype).kind == "f" or dtype is ml_dtypes.bfloat16:
        check_reference(model, {"x": x}, rtol=0, atol=1)
        return
    # integers: the interpolated value may round the other way at .5 (one unit)
    got = aotc.compile(model).run({"x": x})
    want, _ = reference(model, {"x": x}, "onnx.reference")
    for name, w in want.items():
        assert got[name].dtype == w.dtype and got[name].shape == w.shape, name
        assert np.abs(got[name].astype(np.int64) - w.astype(np.int64)).max() <= 1, name


def test_bit_identical_across_thread_counts():
    shape = (2, 8, 64, 96)
    model = _resize_model([(dict(mode="cubic"), [1, 1, 1.7, 0.8], None, None),
                           (dict(mode="linear", antialias=1), [1, 1, 0.3, 0.45], None, None)], shape=shape)
    x = random(shape)
    one = aotc.compile(model, threads=1).run({"x": x})
    two = aotc.compile(model, threads=2).run({"x": x})
    for name in one:
        assert one[name].tobytes() == two[name].tobytes()


@pytest.mark.parametrize("attrs, scales, sizes, words", [
    (dict(mode="nearest"), [1, 1, 2, 2], [2, 3, 10, 14], "exactly one"),
    (dict(mode="nearest"), [1, 2, 2], None, "3 scales"),
    (dict(mode="nearest", antialias=1), [1, 1, 0.5, 0.5], None, "antialias"),
    (dict(mode="area"), [1, 1, 2, 2], None, "mode"),
    (dict(mode="linear", coordinate_transformation_mode="tf_crop_and_resize"), [1, 1, 2, 2], None, "roi"),
    (dict(mode="nearest", axes=[2, 2]), [2, 2], None, "twice"),
    (dict(mode="nearest"), [1, 1, -2, 2], None, "positive"),
])
def test_invalid_models(attrs, scales, sizes, words):
    with pytest.raises(aotc.InvalidModel, match=words):
        aotc.compile(_resize_model([(attrs, scales, sizes, None)]))


def test_run_time_scales_are_unsupported():
    node = helper.make_node("Resize", ["x", "", "s"], ["y"], mode="nearest")
    model = make_model([node], [("x", np.float32, SHAPE), ("s", np.float32, (4,))], [("y", np.float32, None)],
                       opset=19)
    with pytest.raises(aotc.Unsupported, match="scales"):
        aotc.compile(model)


@pytest.mark.skipif(CC is None, reason="no C compiler")
def test_runs_clean_under_sanitizers(tmp_path):
    model = _resize_model([(dict(mode="cubic", exclude_outside=1), [1, 1, 1.3, 0.7], None, None),
                           (dict(mode="linear", coordinate_transformation_mode="tf_crop_and_resize"),
                            None, [2, 3, 6, 4], [0, 0, -0.2, 0.3, 1, 1, 0.9, 1.4])], dtype=np.uint8)
    sess = aotc.compile(model, out_dir=tmp_path, name="resize")
    assert run_sanitized(tmp_path, sess.name).split()[0] == "y0"
