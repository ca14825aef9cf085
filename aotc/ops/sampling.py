"""GridSample (opsets 16 to 22: 1 to 3 spatial dims) and AffineGrid (float32;
runtime_c/aotc_sampling.h).

GridSample samples every (image, channel) at the grid's positions with nearest,
(bi/tri)linear or cubic taps and zeros, border or reflection padding, as the ONNX
reference does. AffineGrid's base grid (the homogeneous coordinates of every output
point) depends only on the size input, so it is made here and emitted as a constant.
"""
import math

import numpy as np

from .base import OpDef, TensorType, c_ints

MODES = {"nearest": 0, "linear": 1, "bilinear": 1, "cubic": 2, "bicubic": 2}
PADDINGS = {"zeros": 0, "border": 1, "reflection": 2}


def _text(ctx, key, default):
    value = ctx.attr(key, default)
    return value.decode() if isinstance(value, bytes) else value


# ---- GridSample -------------------------------------------------------------------

def _grid_sample_params(ctx):
    ctx.require_inputs(2)
    ctx.require_dtype(0, (np.float32,))
    ctx.require_dtype(1, (np.float32,))
    x, grid = ctx.inputs
    nd = x.rank - 2
    if not 1 <= nd <= 3:
        raise ctx.unsupported(f"GridSample over {nd} spatial dims (1 to 3 supported)")
    if grid.rank != x.rank or grid.shape[0] != x.shape[0] or grid.shape[-1] != nd:
        raise ctx.fail(f"grid {list(grid.shape)} must be [N, spatial..., {nd}] for X {list(x.shape)}")
    mode = _text(ctx, "mode", "bilinear" if ctx.opset < 20 else "linear")
    names = ("bilinear", "nearest", "bicubic") if ctx.opset < 20 else ("linear", "nearest", "cubic")
    if mode not in names:
        raise ctx.fail(f"mode {mode!r} is not one of {', '.join(names)}")
    if MODES[mode] == 2 and nd == 3:
        raise ctx.unsupported("cubic GridSample over 3 spatial dims")
    padding = _text(ctx, "padding_mode", "zeros")
    if padding not in PADDINGS:
        raise ctx.fail(f"padding_mode {padding!r} is not zeros, border or reflection")
    return MODES[mode], PADDINGS[padding], int(bool(ctx.attr("align_corners", 0)))


def _grid_sample_infer(ctx):
    _grid_sample_params(ctx)
    x, grid = ctx.inputs
    return [TensorType(x.dtype, tuple(x.shape[:2]) + tuple(grid.shape[1:-1]))]


def _grid_sample_emit(ctx):
    x, y = ctx.inputs[0], ctx.outputs[0]
    if y.numel == 0:
        return ""
    mode, padding, align = _grid_sample_params(ctx)
    if x.numel == 0:
        raise ctx.unsupported("GridSample of an empty input")
    nd = x.rank - 2
    points = math.prod(y.shape[2:])
    return (f"aotc_grid_sample({ctx.pool}, {ctx.x(0)}, {ctx.x(1)}, {ctx.y(0)}, {x.shape[0]}, "
            f"{x.shape[1]}, {nd}, {c_ints(x.shape[2:])}, {points}, {mode}, {padding}, {align});")


# ---- AffineGrid -------------------------------------------------------------------

def _affine_size(ctx):
    ctx.require_inputs(2)
    ctx.require_dtype(0, (np.float32,))
    size = [int(v) for v in ctx.const_input(1, "size").reshape(-1)]
    theta = ctx.inputs[0]
    if len(size) not in (4, 5):
        raise ctx.fail(f"size {size} must be [N, C, H, W] or [N, C, D, H, W]")
    nd = len(size) - 2
    if tuple(theta.shape) != (size[0], nd, nd + 1):
        raise ctx.fail(f"theta {list(theta.shape)} must be [{size[0]}, {nd}, {nd + 1}] for size {size}")
    if min(size) < 0:
        raise ctx.fail(f"size {size} has a negative entry")
    return size


def base_grid(spatial, align_corners):
    """[points, nd + 1]: per output point its coordinates (innermost dim first) and 1."""
    axes = []
    for n in spatial:
        if align_corners:
            axes.append(np.linspace(-1.0, 1.0, n) if n > 1 else np.full(n, -1.0))
        else:
            axes.append((np.arange(n, dtype=np.float64) * 2 + 1) / n - 1)
    mesh = np.meshgrid(*axes, indexing="ij")
    coords = [m.reshape(-1) for m in reversed(mesh)]
    return np.stack(coords + [np.ones_like(coords[0])], axis=1)


def _affine_infer(ctx):
    size = _affine_size(ctx)
    nd = len(size) - 2
    return [TensorType(ctx.inputs[0].dtype, (size[0],) + tuple(size[2:]) + (nd,))]


def _affine_evaluate(ctx, arrays):
    size = _affine_size(ctx)
    base = base_grid(size[2:], bool(ctx.attr("align_corners", 0)))
    grid = np.einsum("nij,pj->npi", arrays[0].astype(np.float64), base)
    return [grid.reshape(ctx.outputs[0].shape).astype(np.float32)]


def _affine_emit(ctx):
    y = ctx.outputs[0]
    if y.numel == 0:
        return ""
    size = _affine_size(ctx)
    nd = len(size) - 2
    base = base_grid(size[2:], bool(ctx.attr("align_corners", 0)))
    return (f"aotc_affine_grid({ctx.x(0)}, {ctx.const(base)}, {ctx.y(0)}, {size[0]}, "
            f"{base.shape[0]}, {nd});")


OPS = [
    OpDef("GridSample", _grid_sample_infer, _grid_sample_emit, since=16, checked_through=28),
    OpDef("AffineGrid", _affine_infer, _affine_emit, _affine_evaluate, since=20, checked_through=28),
]
