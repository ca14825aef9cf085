"""GridSample and AffineGrid against onnxruntime: every mode, padding mode and
align_corners setting in 4-D and 5-D, grids reaching outside the input, opset 16
names; hostile grid values; threads; sanitizers."""
import numpy as np
import pytest
from onnx import helper

import aotc
from oracle import assert_matches_ort, check_reference, make_model, random
from sanitize import CC, run_sanitized

PADDINGS = ["zeros", "border", "reflection"]


def _grid_model(x_shape, grid_shape, modes, opset=20, paddings=PADDINGS, cubic_border=False):
    nodes, outputs = [], []
    for mode in modes:
        for padding in paddings:
            if mode in ("cubic", "bicubic") and padding == "border" and not cubic_border:
                continue    # onnxruntime departs from the reference there: tested on its own
            for align in (0, 1):
                name = f"y_{mode}_{padding}_{align}"
                nodes.append(helper.make_node("GridSample", ["x", "g"], [name], mode=mode,
                                              padding_mode=padding, align_corners=align))
                outputs.append((name, np.float32, None))
    return make_model(nodes, [("x", np.float32, x_shape), ("g", np.float32, grid_shape)], outputs, opset=opset)


def test_grid_sample_2d():
    x_shape, grid_shape = (2, 3, 5, 7), (2, 4, 6, 2)
    model = _grid_model(x_shape, grid_shape, ["nearest", "linear", "cubic"])
    grid = random(grid_shape, low=-1.4, high=1.4, seed=3)
    grid[0, 0, :3] = [[-1, -1], [1, 1], [0.25, -0.5]]     # corners and exact taps
    assert_matches_ort(model, {"x": random(x_shape), "g": grid}, rtol=1e-4, atol=1e-5)


def test_grid_sample_cubic_border_matches_the_reference():
    """Here onnxruntime departs from the ONNX reference, the suite's oracle."""
    x_shape, grid_shape = (2, 3, 5, 7), (2, 4, 6, 2)
    model = _grid_model(x_shape, grid_shape, ["cubic"], paddings=["border"], cubic_border=True)
    feeds = {"x": random(x_shape), "g": random(grid_shape, low=-1.4, high=1.4, seed=3)}
    check_reference(model, feeds, rtol=1e-4, atol=1e-5)


def test_grid_sample_3d_and_opset_16_names():
    x_shape, grid_shape = (1, 2, 3, 4, 5), (1, 2, 3, 4, 3)
    model = _grid_model(x_shape, grid_shape, ["nearest", "linear"])
    assert_matches_ort(model, {"x": random(x_shape), "g": random(grid_shape, low=-1.3, high=1.3, seed=4)},
                       rtol=1e-4, atol=1e-5)
    model16 = _grid_model((1, 2, 4, 4), (1, 3, 3, 2), ["bilinear", "bicubic"], opset=16)
    assert_matches_ort(model16, {"x": random((1, 2, 4, 4)), "g": random((1, 3, 3, 2), low=-1.2, high=1.2)},
                       rtol=1e-4, atol=1e-5)


def test_grid_sample_hostile_grid_values_stay_in_bounds():
    model = _grid_model((1, 1, 3, 3), (1, 1, 6, 2), ["nearest", "linear", "cubic"], cubic_border=True)
    grid = np.array([[[[np.inf, 0], [-np.inf, 0], [np.nan, 0], [1e30, -1e30], [3e9, 0], [0, -7.5]]]],
                    np.float32)
    got = aotc.compile(model).run({"x": random((1, 1, 3, 3)), "g": grid})
    for name, value in got.items():
        assert value.shape == (1, 1, 1, 6), name
        if "zeros" in name:
            assert np.all(value[..., 3] == 0), name


def test_grid_sample_bit_identical_across_thread_counts():
    x_shape, grid_shape = (2, 8, 32, 32), (2, 40, 48, 2)
    model = _grid_model(x_shape, grid_shape, ["cubic"])
    feeds = {"x": random(x_shape), "g": random(grid_shape, low=-1.1, high=1.1)}
    one = aotc.compile(model, threads=1).run(feeds)
    two = aotc.compile(model, threads=2).run(feeds)
    assert all(one[k].tobytes() == two[k].tobytes() for k in one)


@pytest.mark.parametrize("x_shape, grid_shape, attrs, words", [
    ((1, 2, 4, 4), (1, 3, 3, 3), {}, "grid"),
    ((1, 2, 4, 4), (2, 3, 3, 2), {}, "grid"),
    ((1, 2, 4, 4), (1, 3, 3, 2), {"mode": "area"}, "mode"),
    ((1, 2, 4, 4), (1, 3, 3, 2), {"padding_mode": "wrap"}, "padding_mode"),
])
def test_grid_sample_invalid_models(x_shape, grid_shape, attrs, words):
    node = helper.make_node("GridSample", ["x", "g"], ["y"], **attrs)
    model = make_model([node], [("x", np.float32, x_shape), ("g", np.float32, grid_shape)],
                       [("y", np.float32, None)], opset=20)
    with pytest.raises(aotc.InvalidModel, match=words):
        aotc.compile(model)


@pytest.mark.parametrize("size", [(2, 3, 4, 5), (2, 3, 1, 6), (1, 2, 3, 4, 2)])
def test_affine_grid(size):
    nd = len(size) - 2
    nodes = [helper.make_node("AffineGrid", ["t", "s"], [f"y{a}"], align_corners=a) for a in (0, 1)]
    model = make_model(nodes, [("t", np.float32, (size[0], nd, nd + 1))],
                       [("y0", np.float32, None), ("y1", np.float32, None)],
                       {"s": np.array(size, np.int64)}, opset=20)
    feeds = {"t": random((size[0], nd, nd + 1))}
    if 1 in size[2:]:   # align_corners over one position: the reference takes -1, onnxruntime 0
        check_reference(model, feeds)
    else:
        assert_matches_ort(model, feeds)


def test_affine_grid_invalid_theta():
    node = helper.make_node("AffineGrid", ["t", "s"], ["y"])
    model = make_model([node], [("t", np.float32, (2, 3, 4))], [("y", np.float32, None)],
                       {"s": np.array([2, 3, 4, 5], np.int64)}, opset=20)
    with pytest.raises(aotc.InvalidModel, match="theta"):
        aotc.compile(model)


@pytest.mark.skipif(CC is None, reason="no C compiler")
def test_runs_clean_under_sanitizers(tmp_path):
    model = _grid_model((1, 2, 5, 4), (1, 3, 6, 2), ["nearest", "linear", "cubic"], cubic_border=True)
    sess = aotc.compile(model, out_dir=tmp_path, name="gridsample")
    assert run_sanitized(tmp_path, sess.name).split()[0].startswith("y_")
