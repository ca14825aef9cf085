"""Resize (opsets 10 to 19) and Upsample (7 to 9; deprecated, Resize-10 semantics).

Resizing is separable: every resized axis is one pass of `aotc_resize_axis`
(runtime_c/aotc_resize.h), each output position along the axis a weighted sum of a
fixed number of input positions. The positions and weights of every axis are worked
out here, at compile time, following the ONNX reference (coordinate transformation,
nearest rounding, linear and cubic coefficients, antialiasing, exclude_outside), and
emitted as constant tables; positions outside the crop of tf_crop_and_resize take
extrapolation_value. Passes run in float32 between two scratch buffers; other element
types are converted on the way in and out (integers rounded half to even and clamped,
as the reference does).
"""
import math

import numpy as np

from .. import dtypes
from .base import OpDef, TensorType, c_float

ELEMENT_TYPES = (np.float32, np.float16, dtypes.BFLOAT16, np.int8, np.uint8)
COORDINATE_MODES = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
                    "asymmetric", "tf_half_pixel_for_nn", "tf_crop_and_resize")
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


def _text(ctx, key, default):
    value = ctx.attr(key, default)
    return value.decode() if isinstance(value, bytes) else value


# ---- attributes and inputs --------------------------------------------------------------

class Spec:
    """Everything a resize means for these shapes: per axis the output size and scale."""

    def __init__(self, ctx):
        x = ctx.inputs[0]
        self.rank = x.rank
        self.in_shape = tuple(int(d) for d in x.shape)
        legacy = ctx.node.op_type == "Upsample" or ctx.opset < 11
        self.mode = _text(ctx, "mode", "nearest")
        if self.mode == "bilinear" and legacy:
            self.mode = "linear"
        if self.mode not in ("nearest", "linear", "cubic") or (legacy and self.mode == "cubic"):
            raise ctx.fail(f"mode {self.mode!r} is not nearest, linear or cubic")
        self.legacy = legacy
        self.coordinate = "asymmetric" if legacy else _text(
            ctx, "coordinate_transformation_mode", "half_pixel")
        if self.coordinate not in COORDINATE_MODES:
            raise ctx.fail(f"coordinate_transformation_mode {self.coordinate!r} is not one of "
                           f"{', '.join(COORDINATE_MODES)}")
        self.nearest_mode = _text(ctx, "nearest_mode", "round_prefer_floor")
        if self.nearest_mode not in NEAREST_MODES:
            raise ctx.fail(f"nearest_mode {self.nearest_mode!r} is not one of {', '.join(NEAREST_MODES)}")
        self.cubic_a = float(ctx.attr("cubic_coeff_a", -0.75))
        self.exclude_outside = bool(ctx.attr("exclude_outside", 0))
        self.extrapolation = float(ctx.attr("extrapolation_value", 0.0))
        self.antialias = bool(ctx.attr("antialias", 0))
        if self.antialias and self.mode == "nearest":
            raise ctx.fail("antialias applies to linear and cubic modes only")
        policy = _text(ctx, "keep_aspect_ratio_policy", "stretch")
        if policy not in ("stretch", "not_larger", "not_smaller"):
            raise ctx.fail(f"keep_aspect_ratio_policy {policy!r} is not stretch, not_larger or not_smaller")
        axes = ctx.attr("axes")
        axes = list(range(self.rank)) if axes is None else [ctx.axis(a, self.rank, "axes entry")
                                                             for a in axes]
        if len(set(axes)) != len(axes):
            raise ctx.fail(f"axes {axes} name an axis twice")
        scales, sizes, roi = self._inputs(ctx)
        count = len(axes)
        self.roi = None
        if self.coordinate == "tf_crop_and_resize":
            if roi is None or roi.size != 2 * count:
                raise ctx.fail(f"tf_crop_and_resize needs roi of {2 * count} values")
            full = [0.0] * self.rank + [1.0] * self.rank
            for i, a in enumerate(axes):
                full[a], full[self.rank + a] = float(roi[i]), float(roi[count + i])
            self.roi = full
        self.scales = [1.0] * self.rank
        self.out_shape = list(self.in_shape)
        if scales is not None:
            if scales.size != count:
                raise ctx.fail(f"{scales.size} scales for {count} axes")
            if np.any(scales <= 0):
                raise ctx.fail(f"scales {scales.tolist()} must be positive")
            for i, a in enumerate(axes):
                self.scales[a] = float(scales[i])
                self.out_shape[a] = int(math.floor(float(scales[i]) * self.in_shape[a]))
        else:
            if sizes.size != count:
                raise ctx.fail(f"{sizes.size} sizes for {count} axes")
            if np.any(sizes < 0):
                raise ctx.fail(f"sizes {sizes.tolist()} must not be negative")
            if any(self.in_shape[a] == 0 for a in axes):
                raise ctx.unsupported("resizing an axis of size 0 to a given size")
            ratios = {a: int(sizes[i]) / self.in_shape[a] for i, a in enumerate(axes)}
            if policy != "stretch":
                scale = (min if policy == "not_larger" else max)(ratios.values())
                ratios = {a: scale for a in axes}
                sizes = [int(scale * self.in_shape[a] + 0.5) for a in axes]
            for i, a in enumerate(axes):
                self.scales[a] = ratios[a]
                self.out_shape[a] = int(sizes[i])
        self.axes = axes

    def _inputs(self, ctx):
        """(scales, sizes, roi) as numpy arrays (None where absent)."""
        def present(i):
            return ctx.has_input(i) and ctx.inputs[i].numel > 0
        if ctx.node.op_type == "Upsample" and ctx.opset < 9:
            scales = ctx.attr("scales")
            if scales is None:
                raise ctx.fail("Upsample needs the scales attribute")
            return np.asarray(scales, np.float32), None, None
        if self.legacy:
            ctx.require_inputs(2)
            return ctx.const_input(1, "scales").astype(np.float32).reshape(-1), None, None
        ctx.require_inputs(1, 4)
        roi = ctx.const_input(1, "roi").astype(np.float64).reshape(-1) if present(1) else None
        scales = ctx.const_input(2, "scales").astype(np.float32).reshape(-1) if present(2) else None
        sizes = ctx.const_input(3, "sizes").astype(np.int64).reshape(-1) if present(3) else None
        if (scales is None) == (sizes is None):
            raise ctx.fail("exactly one of scales and sizes must be given")
        return scales, sizes, roi


# ---- per-axis tables, after the ONNX reference ------------------------------------------

def _source_coords(spec, axis, out_len):
    """Source coordinate of every output position, and which ones lie outside the crop."""
    scale, size = spec.scales[axis], spec.in_shape[axis]
    y = np.arange(out_len, dtype=np.float64)
    width = scale * size
    mode = spec.coordinate
    if mode == "align_corners":
        x = np.zeros(out_len) if width == 1 else y * (size - 1) / (width - 1)
    elif mode == "asymmetric":
        x = y / scale
    elif mode == "tf_half_pixel_for_nn":
        x = (y + 0.5) / scale
    elif mode == "tf_crop_and_resize":
        lo, hi = spec.roi[axis], spec.roi[axis + spec.rank]
        x = (np.full(out_len, (hi - lo) * (size - 1) / 2) if width == 1
             else y * (hi - lo) * (size - 1) / (width - 1))
        x = x + lo * (size - 1)
        return x, (x < 0) | (x > size - 1)
    elif mode == "pytorch_half_pixel":
        x = np.full(out_len, -0.5) if width == 1 else (y + 0.5) / scale - 0.5
    elif mode == "half_pixel":
        x = (y + 0.5) / scale - 0.5
    else:   # half_pixel_symmetric
        offset = size / 2 * (1 - out_len / width)
        x = offset + (y + 0.5) / scale - 0.5
    return x, None


def _coefficients(spec, ratio, scale):
    if spec.mode == "nearest":
        if ratio == 1:          # an integer source coordinate
            return np.array([0.0, 1.0])
        take_ceil = {"round_prefer_floor": ratio > 0.5, "round_prefer_ceil": ratio >= 0.5,
                     "floor": False, "ceil": True}[spec.nearest_mode]
        return np.array([0.0, 1.0]) if take_ceil else np.array([1.0, 0.0])
    if spec.mode == "linear":
        if not spec.antialias:
            return np.array([1 - ratio, ratio])
        scale = min(scale, 1.0)
        start = int(np.floor(-1 / scale) + 1)
        args = (np.arange(start, 2 - start) - ratio) * scale
        coeffs = np.clip(1 - np.abs(args), 0, 1)
        return coeffs / coeffs.sum()
    a = spec.cubic_a
    if not spec.antialias:
        r = ratio
        return np.array([((a * (r + 1) - 5 * a) * (r + 1) + 8 * a) * (r + 1) - 4 * a,
                         ((a + 2) * r - (a + 3)) * r * r + 1,
                         ((a + 2) * (1 - r) - (a + 3)) * (1 - r) * (1 - r) + 1,
                         ((a * (2 - r) - 5 * a) * (2 - r) + 8 * a) * (2 - r) - 4 * a])
    scale = min(scale, 1.0)
    start = int(np.floor(-2 / scale) + 1)
    t = np.abs(scale * (np.arange(start, 2 - start) - ratio))
    coeffs = np.where(t <= 1, (a + 2) * t ** 3 - (a + 3) * t ** 2 + 1,
                      np.where(t < 2, a * t ** 3 - 5 * a * t ** 2 + 8 * a * t - 4 * a, 0.0))
    return coeffs / coeffs.sum()


def _legacy_nearest(spec, axis, out_len):
    """Resize-10 and Upsample nearest: asymmetric, source index truncated when
    upsampling and rounded up when downsampling (what onnxruntime does)."""
    scale, size = spec.scales[axis], spec.in_shape[axis]
    x = np.arange(out_len, dtype=np.float64) / scale
    index = np.ceil(x) if scale < 1 else np.floor(x)
    return np.clip(index, 0, size - 1).astype(np.int64)[:, None], np.ones((out_len, 1)), None


def axis_table(spec, axis):
    """(index [out, taps], weight [out, taps], outside [out] or None) of one axis."""
    out_len, size = spec.out_shape[axis], spec.in_shape[axis]
    if spec.legacy and spec.mode == "nearest":
        return _legacy_nearest(spec, axis, out_len)
    x, outside = _source_coords(spec, axis, out_len)
    floor = np.floor(x)
    ratios = np.where(x == floor, 1.0, x - floor)
    coeffs = np.stack([_coefficients(spec, float(r), spec.scales[axis]) for r in ratios])
    taps = coeffs.shape[1]
    pad = (taps + 1) // 2
    shifted = x + pad
    base = np.floor(shifted).astype(np.int64)
    frac = shifted - base
    if taps % 2 == 0:
        offset = np.where(frac == 0, -(taps // 2), -(taps // 2) + 1)
    else:
        offset = np.where(frac <= 0.5, -((taps - 1) // 2), -((taps - 1) // 2) + 1)
    index = (base + offset)[:, None] + np.arange(taps)[None, :] - pad
    if spec.exclude_outside:
        coeffs = np.where((index < 0) | (index >= size), 0.0, coeffs)
        total = coeffs.sum(axis=1, keepdims=True)
        coeffs = coeffs / np.where(total == 0, 1.0, total)
    index = np.clip(index, 0, size - 1)
    if spec.mode == "nearest":     # one tap: the neighbour of weight 1
        pick = np.argmax(coeffs, axis=1)
        index = np.take_along_axis(index, pick[:, None], axis=1)
        coeffs = np.ones_like(index, dtype=np.float64)
    if outside is not None and not outside.any():
        outside = None
    return index, coeffs, outside


def passes(spec):
    """The axes that change, each with its table."""
    out = []
    for axis in spec.axes:
        identity = (math.isclose(spec.scales[axis], 1.0) and spec.out_shape[axis] == spec.in_shape[axis]
                    and (spec.roi is None or (math.isclose(spec.roi[axis], 0.0)
                                              and math.isclose(spec.roi[axis + spec.rank], 1.0))))
        if not identity:
            out.append((axis, axis_table(spec, axis)))
    return out


# ---- the operator --------------------------------------------------------------------

def _infer(ctx):
    if not ctx.inputs or ctx.inputs[0] is None:
        raise ctx.fail("input 0 is required")
    ctx.require_dtype(0, ELEMENT_TYPES)
    spec = Spec(ctx)
    if max(spec.in_shape + tuple(spec.out_shape), default=0) >= 2**31:
        raise ctx.unsupported("a resized dimension of 2^31 or more (tables hold int32 indices)")
    return [TensorType(ctx.inputs[0].dtype, tuple(spec.out_shape))]


def _stage_shapes(spec):
    """The shape after each pass (the first entry: the input)."""
    shape, shapes = list(spec.in_shape), [tuple(spec.in_shape)]
    for axis, _ in passes(spec):
        shape[axis] = spec.out_shape[axis]
        shapes.append(tuple(shape))
    return shapes


def _buffer_floats(ctx):
    spec = Spec(ctx)
    is_float = np.dtype(ctx.inputs[0].dtype) == np.float32
    shapes = _stage_shapes(spec)
    inner = shapes if not is_float else shapes[1:-1]
    return max([math.prod(s) for s in inner] + [0])


HALF_FLOATS = ("f16", "bf16")   # converted by aotc_half.h's array loops


def _load(short):
    """The C function that widens the input (of dtypes.short name `short`) into float."""
    return f"aotc_widen_{short}" if short in HALF_FLOATS else f"aotc_resize_load_{short}"


def _store(short):
    return f"aotc_narrow_{short}" if short in HALF_FLOATS else f"aotc_resize_store_{short}"


def _scratch(ctx):
    return 2 * (_buffer_floats(ctx) * 4 + 63) // 64 * 64


def _emit(ctx):
    x, y = ctx.inputs[0], ctx.outputs[0]
    if y.numel == 0:
        return ""
    spec = Spec(ctx)
    short = dtypes.short(x.dtype)
    is_float = np.dtype(x.dtype) == np.float32
    half = (_buffer_floats(ctx) * 4 + 63) // 64 * 64
    buffers = [f"((float *){ctx.scratch})", f"((float *)({ctx.scratch} + {half}))"]
    lines, current, free = [], ctx.x(0), 0
    if not is_float:
        lines.append(f"{_load(short)}({ctx.x(0)}, {buffers[0]}, {x.numel});")
        current, free = buffers[0], 1
    plan = passes(spec)
    shape = list(spec.in_shape)
    for k, (axis, (index, weight, outside)) in enumerate(plan):
        last = k == len(plan) - 1
        target = ctx.y(0) if last and is_float else buffers[free]
        outer = math.prod(shape[:axis])
        inner = math.prod(shape[axis + 1:])
        out_len = spec.out_shape[axis]
        outside_ptr = "NULL" if outside is None else ctx.const(outside.astype(np.uint8))
        lines.append(
            f"aotc_resize_axis({ctx.pool}, {current}, {target}, {outer}, {shape[axis]}, {out_len}, "
            f"{inner}, {index.shape[1]}, {ctx.const(index.astype(np.int32).reshape(-1))}, "
            f"{ctx.const(weight.astype(np.float32).reshape(-1))}, {outside_ptr}, "
            f"{c_float(spec.extrapolation)});")
        shape[axis] = out_len
        if target != ctx.y(0):
            current, free = target, 1 - free
    if is_float and not plan:
        lines.append(f"memcpy({ctx.y(0)}, {ctx.x(0)}, {x.numel * 4});")
    if not is_float:
        lines.append(f"{_store(short)}({current}, {ctx.y(0)}, {y.numel});")
    return "\n".join(lines)


OPS = [
    OpDef("Resize", _infer, _emit, scratch=_scratch, since=10, checked_through=28),
    OpDef("Upsample", _infer, _emit, scratch=_scratch, since=7, checked_through=28),
]
