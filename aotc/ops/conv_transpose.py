"""ConvTranspose: float32 (float16 / bfloat16 widened into float32 scratch and rounded
once on the store, as Conv does), NCHW, 1 to 3 spatial dims, group, strides, dilations, pads,
output_padding, output_shape and auto_pad (runtime_c/aotc_convtranspose.h).

Output size and leading pads follow the ONNX reference: without output_shape the size
is stride * (in - 1) + output_padding + (kernel - 1) * dilation + 1 - pads; an
output_shape is taken as given, with the leading pads from `pads` (extra positions
fall at the end) unless auto_pad is SAME_UPPER / SAME_LOWER, which split the total
padding (the odd unit at the end for SAME_UPPER, at the start for SAME_LOWER).
"""
import math
from dataclasses import dataclass

import numpy as np

from .. import dtypes
from .base import OpDef, TensorType
from .conv import stage_bytes, staged_call

MAX_SPATIAL = 3
COLUMNS_BUDGET_BYTES = 2 << 20     # one block of columns: about L2-sized
AUTO_PADS = ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")


@dataclass(frozen=True)
class Geometry:
    batch: int
    group: int
    cin_g: int
    cout_g: int
    spatial: int
    in_dims: tuple
    out_dims: tuple
    kernel: tuple
    strides: tuple
    dilations: tuple
    pads: tuple

    def lead(self, values, fill):
        return [fill] * (MAX_SPATIAL - self.spatial) + [int(v) for v in values]

    def c_literal(self):
        def arr(values, fill):
            return "{" + ", ".join(str(v) for v in self.lead(values, fill)) + "}"
        return (f"&(const aotc_convt_geom){{.batch = {self.batch}, .group = {self.group}, "
                f".cin_g = {self.cin_g}, .cout_g = {self.cout_g}, .in = {arr(self.in_dims, 1)}, "
                f".out = {arr(self.out_dims, 1)}, .kernel = {arr(self.kernel, 1)}, "
                f".stride = {arr(self.strides, 1)}, .dilation = {arr(self.dilations, 1)}, "
                f".pad = {arr(self.pads, 0)}}}")

    @property
    def gemm_rows(self):
        return self.cout_g * math.prod(self.kernel)

    @property
    def in_pixels(self):
        return math.prod(self.in_dims)


def _ints(ctx, name, default, length):
    values = ctx.attr(name)
    values = list(default) if values is None else [int(v) for v in values]
    if len(values) != length:
        raise ctx.fail(f"attribute {name} has {len(values)} values, expected {length}")
    return values


def geometry(ctx):
    ctx.require_inputs(2, 3)
    ctx.require_dtype(0, (np.float32,) + dtypes.HALVES)
    x, w = ctx.inputs[0], ctx.inputs[1]
    if w.dtype != x.dtype:
        raise ctx.fail(f"W has element type {w.dtype}, X has {x.dtype}")
    if x.rank < 3 or w.rank != x.rank:
        raise ctx.fail(f"X {list(x.shape)} and W {list(w.shape)} must both be [N, C, spatial...]")
    spatial = x.rank - 2
    if spatial > MAX_SPATIAL:
        raise ctx.unsupported(f"ConvTranspose with {spatial} spatial dims (at most {MAX_SPATIAL})")
    group = int(ctx.attr("group", 1))
    batch, cin = (int(d) for d in x.shape[:2])
    if group < 1 or cin % group or w.shape[0] != cin:
        raise ctx.fail(f"X has {cin} channels, W {list(w.shape)} expects {w.shape[0]}; group {group} "
                       f"must divide them")
    cout_g = int(w.shape[1])
    kernel = [int(d) for d in w.shape[2:]]
    if ctx.attr("kernel_shape") is not None and [int(k) for k in ctx.attr("kernel_shape")] != kernel:
        raise ctx.fail(f"kernel_shape {list(ctx.attr('kernel_shape'))} does not match W's {kernel}")
    if ctx.has_input(2) and (tuple(ctx.inputs[2].shape) != (cout_g * group,) or ctx.inputs[2].dtype != x.dtype):
        raise ctx.fail(f"B must be {dtypes.name(x.dtype)} [{cout_g * group}], is "
                       f"{dtypes.name(ctx.inputs[2].dtype)} {list(ctx.inputs[2].shape)}")
    strides = _ints(ctx, "strides", [1] * spatial, spatial)
    dilations = _ints(ctx, "dilations", [1] * spatial, spatial)
    out_pad = _ints(ctx, "output_padding", [0] * spatial, spatial)
    if min(strides + dilations + kernel) < 1 or min(out_pad) < 0:
        raise ctx.fail(f"strides {strides}, dilations {dilations}, kernel {kernel} must be positive "
                       f"and output_padding {out_pad} non-negative")
    auto_pad = ctx.attr("auto_pad", "NOTSET")
    auto_pad = auto_pad.decode() if isinstance(auto_pad, bytes) else auto_pad
    if auto_pad not in AUTO_PADS:
        raise ctx.fail(f"auto_pad {auto_pad!r} is not one of {', '.join(AUTO_PADS)}")
    in_dims = [int(d) for d in x.shape[2:]]
    spans = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
    full = [s * (i - 1) + op + e for s, i, op, e in zip(strides, in_dims, out_pad, spans)]
    out_shape = ctx.attr("output_shape")
    if out_shape is not None:
        out_shape = [int(v) for v in out_shape][-spatial:]
        if len(out_shape) != spatial:
            raise ctx.fail(f"output_shape {list(ctx.attr('output_shape'))} needs {spatial} spatial sizes")
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        out = out_shape or [i * s for i, s in zip(in_dims, strides)]
        total = [f - o for f, o in zip(full, out)]
        pads = [t // 2 if auto_pad == "SAME_UPPER" else t - t // 2 for t in total]
    else:
        pads = [0] * (2 * spatial) if auto_pad == "VALID" else _ints(ctx, "pads", [0] * (2 * spatial),
                                                                       2 * spatial)
        if min(pads) < 0:
            raise ctx.fail(f"pads {pads} must not be negative")
        out = out_shape or [f - pads[i] - pads[i + spatial] for i, f in enumerate(full)]
        pads = pads[:spatial]
    if min(out) < 1:
        raise ctx.fail(f"the output size {out} is not positive")
    return Geometry(batch, group, cin // group, cout_g, spatial, tuple(in_dims), tuple(out),
                    tuple(kernel), tuple(strides), tuple(dilations), tuple(pads))


def _infer(ctx):
    g = geometry(ctx)
    return [TensorType(ctx.inputs[0].dtype, (g.batch, g.cout_g * g.group) + g.out_dims)]


def block_pixels(rows, pixels, budget=COLUMNS_BUDGET_BYTES):
    """Pixels per block of columns: all of them when they fit the budget, else equal
    blocks of at least 64."""
    fit = max(64, budget // (4 * max(rows, 1)))
    blocks = -(-pixels // fit)
    return -(-pixels // blocks) if pixels else 0


def _cols_bytes(g):
    return (g.gemm_rows * block_pixels(g.gemm_rows, g.in_pixels) * 4 + 63) // 64 * 64


def _scratch(ctx):
    from .matmul import sgemm_scratch_bytes
    g = geometry(ctx)
    staging = stage_bytes(ctx) if np.dtype(ctx.inputs[0].dtype) in dtypes.HALVES else 0
    return staging + _cols_bytes(g) + sgemm_scratch_bytes(g.gemm_rows, block_pixels(g.gemm_rows, g.in_pixels), g.cin_g)


def _emit(ctx):
    if ctx.outputs[0].numel == 0:
        return ""
    g = geometry(ctx)
    if np.dtype(ctx.inputs[0].dtype) == np.float32:
        bias = ctx.x(2) if ctx.has_input(2) else "NULL"
        return _f32_call(ctx, g, ctx.x(0), ctx.x(1), bias, ctx.y(0), ctx.scratch)

    def call(inputs, y, scratch):
        x, w, bias = ((ctx.const(v) if isinstance(v, np.ndarray) else v) for v in (inputs + [None])[:3])
        return _f32_call(ctx, g, x, w, bias or "NULL", y, scratch)
    return staged_call(ctx, call)


def _f32_call(ctx, g, x, w, bias, y, scratch):
    if g.cin_g == 0 or g.in_pixels == 0:
        return f"aotc_conv_transpose_fill({g.c_literal()}, {bias}, {y});"
    return (f"aotc_conv_transpose({ctx.pool}, {g.c_literal()}, {x}, {w}, {bias}, "
            f"{y}, {block_pixels(g.gemm_rows, g.in_pixels)}, {scratch}, {_cols_bytes(g)});")


OPS = [OpDef("ConvTranspose", _infer, _emit, scratch=_scratch, since=1, checked_through=28)]
