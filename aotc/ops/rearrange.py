"""Rearranging operators: Split, Tile, DepthToSpace, SpaceToDepth, CenterCropPad,
ReverseSequence and Col2Im.

Split, Tile, DepthToSpace, SpaceToDepth and CenterCropPad are strided copies
(`aotc_copy_nd`, through layout.copy_call): the shape and strides are worked out here.
ReverseSequence (lengths read at run time) and Col2Im (a sum over overlapping blocks)
have kernels in runtime_c/aotc_rearrange.h.
"""
import math

import numpy as np

from .. import dtypes
from .base import OpDef, TensorType, c_ints, strides
from .index import checked, numel, width
from .layout import copy_call


def _const_ints(ctx, i, what):
    value = ctx.const_input(i, what)
    if np.dtype(value.dtype) not in (np.dtype(np.int32), np.dtype(np.int64)):
        raise ctx.fail(f"{what} must be int32 or int64, is {dtypes.name(value.dtype)}")
    return [int(v) for v in value.reshape(-1)]


def _string_attr(ctx, key, default, allowed):
    value = ctx.attr(key, default)
    value = value.decode() if isinstance(value, bytes) else value
    if value not in allowed:
        raise ctx.fail(f"{key} {value!r}; expected one of {', '.join(allowed)}")
    return value


# ---- Split ----------------------------------------------------------------------------

def _split_spec(ctx):
    """(axis, sizes of the outputs along it)."""
    x = ctx.inputs[0]
    if x is None:
        raise ctx.fail("input 0 is required")
    axis = ctx.axis(ctx.attr("axis", 0), x.rank)
    dim = x.shape[axis]
    n = len(ctx.node.outputs)
    if ctx.opset >= 13 and ctx.has_input(1):
        sizes = _const_ints(ctx, 1, "split")
    elif ctx.opset < 13 and ctx.attr("split") is not None:
        sizes = [int(s) for s in ctx.attr("split")]
    elif ctx.opset < 2 and ctx.has_input(1):
        sizes = _const_ints(ctx, 1, "split")
    else:
        sizes = None
    num_outputs = ctx.attr("num_outputs") if ctx.opset >= 18 else None
    if sizes is not None and num_outputs is not None:
        raise ctx.fail("both split and num_outputs are given")
    if num_outputs is not None:
        if int(num_outputs) != n or n < 1:
            raise ctx.fail(f"num_outputs {num_outputs} but the node has {n} outputs")
        chunk = -(-dim // n)
        sizes = [chunk] * (n - 1) + [dim - chunk * (n - 1)]
        if sizes[-1] < 0:
            raise ctx.fail(f"axis {axis} of size {dim} cannot be cut into {n} chunks of {chunk}")
    elif sizes is None:
        if dim % n:
            raise ctx.fail(f"axis {axis} of size {dim} does not split evenly into {n} outputs")
        sizes = [dim // n] * n
    if len(sizes) != n or sum(sizes) != dim or min(sizes) < 0:
        raise ctx.fail(f"split sizes {sizes} do not cut axis {axis} of size {dim} into {n} outputs")
    return axis, sizes


def _split_shapes(ctx):
    x = ctx.inputs[0]
    axis, sizes = _split_spec(ctx)
    return axis, [x.shape[:axis] + (s,) + x.shape[axis + 1:] for s in sizes]


def _split_infer(ctx):
    _, shapes = _split_shapes(ctx)
    return [TensorType(ctx.inputs[0].dtype, tuple(s)) for s in shapes]


def _split_evaluate(ctx, arrays):
    axis, sizes = _split_spec(ctx)
    return np.split(arrays[0], np.cumsum(sizes)[:-1], axis=axis)


def _split_emit(ctx):
    x = ctx.inputs[0]
    axis, shapes = _split_shapes(ctx)
    in_strides = strides(x.shape)
    lines, at = [], 0
    for k, shape in enumerate(shapes):
        if ctx.node.outputs[k]:
            lines.append(copy_call(ctx, ctx.y(k), strides(shape), f"{ctx.x(0)} + {at * in_strides[axis]}",
                                   in_strides, shape, x.dtype))
        at += shape[axis]
    return "\n".join(line for line in lines if line)


# ---- Tile ----------------------------------------------------------------------------

def _tile_repeats(ctx):
    ctx.require_inputs(2)
    x = ctx.inputs[0]
    repeats = _const_ints(ctx, 1, "repeats")
    if len(repeats) != x.rank or min(repeats, default=0) < 0:
        raise ctx.fail(f"repeats {repeats} must be {x.rank} values of 0 or more")
    return repeats


def _tile_infer(ctx):
    x = ctx.inputs[0]
    return [TensorType(x.dtype, tuple(d * r for d, r in zip(x.shape, _tile_repeats(ctx))))]


def _tile_emit(ctx):
    # the output as (r0, d0, r1, d1, ...): every repeat reads the input again (stride 0)
    x = ctx.inputs[0]
    repeats = _tile_repeats(ctx)
    shape, src = [], []
    for d, r, s in zip(x.shape, repeats, strides(x.shape)):
        shape += [r, d]
        src += [0, s]
    return copy_call(ctx, ctx.y(0), strides(shape), ctx.x(0), src, shape, x.dtype)


# ---- DepthToSpace / SpaceToDepth -------------------------------------------------------

def _block_spec(ctx):
    """(blocksize, reshaped input shape, permutation, output shape)."""
    ctx.require_inputs(1)
    x = ctx.inputs[0]
    if x.rank != 4:
        raise ctx.fail(f"needs a 4-d input, has shape {list(x.shape)}")
    bs = int(ctx.attr("blocksize", 0))
    if bs < 1:
        raise ctx.fail(f"blocksize {bs} must be 1 or more")
    modes = ("DCR", "CRD") if ctx.node.op_type == "DepthToSpace" and ctx.opset >= 11 or \
        ctx.node.op_type == "SpaceToDepth" and ctx.opset >= 28 else ("DCR",)
    mode = _string_attr(ctx, "mode", "DCR", modes)
    b, c, h, w = x.shape
    if ctx.node.op_type == "DepthToSpace":
        if c % (bs * bs):
            raise ctx.fail(f"{c} channels are not a multiple of blocksize^2 = {bs * bs}")
        if mode == "DCR":
            reshaped, perm = (b, bs, bs, c // (bs * bs), h, w), (0, 3, 4, 1, 5, 2)
        else:
            reshaped, perm = (b, c // (bs * bs), bs, bs, h, w), (0, 1, 4, 2, 5, 3)
        out = (b, c // (bs * bs), h * bs, w * bs)
    else:
        if h % bs or w % bs:
            raise ctx.fail(f"height {h} and width {w} must be multiples of blocksize {bs}")
        reshaped = (b, c, h // bs, bs, w // bs, bs)
        perm = (0, 3, 5, 1, 2, 4) if mode == "DCR" else (0, 1, 3, 5, 2, 4)
        out = (b, c * bs * bs, h // bs, w // bs)
    return reshaped, perm, out


def _block_infer(ctx):
    _, _, out = _block_spec(ctx)
    return [TensorType(ctx.inputs[0].dtype, out)]


def _block_evaluate(ctx, arrays):
    reshaped, perm, out = _block_spec(ctx)
    return [np.transpose(arrays[0].reshape(reshaped), perm).reshape(out)]


def _block_emit(ctx):
    reshaped, perm, _ = _block_spec(ctx)
    src = strides(reshaped)
    shape = [reshaped[p] for p in perm]
    return copy_call(ctx, ctx.y(0), strides(shape), ctx.x(0), [src[p] for p in perm], shape,
                     ctx.inputs[0].dtype)


# ---- CenterCropPad -----------------------------------------------------------------------

def _crop_pad_spec(ctx):
    """Per dim (output size, first input position, first output position, length)."""
    ctx.require_inputs(2)
    x = ctx.inputs[0]
    target = _const_ints(ctx, 1, "shape")
    axes = ctx.attr("axes")
    axes = list(range(x.rank)) if axes is None else [ctx.axis(a, x.rank) for a in axes]
    if len(set(axes)) != len(axes) or len(target) != len(axes):
        raise ctx.fail(f"shape {target} does not give one size per axis of {axes}")
    spec = [(d, 0, 0, d) for d in x.shape]
    for a, size in zip(axes, target):
        dim = x.shape[a]
        if size < 0:
            raise ctx.fail(f"negative size {size}")
        if size <= dim:
            spec[a] = (size, (dim - size) // 2, 0, size)
        else:
            spec[a] = (size, 0, (size - dim) // 2, dim)
    return spec


def _crop_pad_infer(ctx):
    return [TensorType(ctx.inputs[0].dtype, tuple(s[0] for s in _crop_pad_spec(ctx)))]


def _crop_pad_evaluate(ctx, arrays):
    spec = _crop_pad_spec(ctx)
    out = np.zeros(tuple(s[0] for s in spec), arrays[0].dtype)
    out[tuple(slice(o, o + n) for _, _, o, n in spec)] = \
        arrays[0][tuple(slice(i, i + n) for _, i, _, n in spec)]
    return [out]


def _crop_pad_emit(ctx):
    x, y = ctx.inputs[0], ctx.outputs[0]
    spec = _crop_pad_spec(ctx)
    if y.numel == 0:
        return ""
    out_strides, in_strides = strides(y.shape), strides(x.shape)
    dst = sum(o * s for (_, _, o, _), s in zip(spec, out_strides))
    src = sum(i * s for (_, i, _, _), s in zip(spec, in_strides))
    lines = []
    if any(s[0] > s[3] for s in spec):       # padded somewhere: zeros (all-bits-zero) first
        lines.append(f"memset({ctx.y(0)}, 0, {y.nbytes});")
    lines.append(copy_call(ctx, f"{ctx.y(0)} + {dst}", out_strides, f"{ctx.x(0)} + {src}", in_strides,
                           [s[3] for s in spec], x.dtype))
    return "\n".join(line for line in lines if line)


# ---- ReverseSequence -------------------------------------------------------------------

def _reverse_axes(ctx):
    ctx.require_inputs(2)
    x, lens = ctx.inputs
    time_axis, batch_axis = int(ctx.attr("time_axis", 0)), int(ctx.attr("batch_axis", 1))
    if {time_axis, batch_axis} != {0, 1}:
        raise ctx.fail(f"time_axis {time_axis} and batch_axis {batch_axis} must be 0 and 1")
    if x.rank < 2:
        raise ctx.fail(f"needs rank 2 or more, has shape {list(x.shape)}")
    ctx.require_dtype(1, (np.int64,))
    if tuple(lens.shape) != (x.shape[batch_axis],):
        raise ctx.fail(f"sequence_lens shape {list(lens.shape)}, expected [{x.shape[batch_axis]}]")
    if lens.value is not None and lens.value.size and (lens.value.min() < 0 or
                                                       lens.value.max() > x.shape[time_axis]):
        raise ctx.fail(f"sequence lengths {lens.value.tolist()} outside [0, {x.shape[time_axis]}]")
    return time_axis, batch_axis


def _reverse_infer(ctx):
    _reverse_axes(ctx)
    return [TensorType(ctx.inputs[0].dtype, ctx.inputs[0].shape)]


def _reverse_evaluate(ctx, arrays):
    x, lens = arrays
    time_axis, batch_axis = _reverse_axes(ctx)
    out = x.copy()
    for b, n in enumerate(lens.reshape(-1)):
        index = [slice(None)] * x.ndim
        index[batch_axis] = b
        index[time_axis] = slice(0, int(n))
        out[tuple(index)] = np.flip(x[tuple(index)], axis=0)
    return [out]


def _reverse_emit(ctx):
    x = ctx.inputs[0]
    time_axis, batch_axis = _reverse_axes(ctx)
    if x.numel == 0:
        return ""
    s = strides(x.shape)
    return checked(f"aotc_reverse_sequence({ctx.y(0)}, {ctx.x(0)}, {ctx.x(1)}, {x.shape[time_axis]}, "
                   f"{x.shape[batch_axis]}, {s[time_axis]}, {s[batch_axis]}, {numel(x.shape[2:])}, "
                   f"{width(x.dtype)})")


# ---- Col2Im ---------------------------------------------------------------------------

COL2IM_TYPES = (np.float32, np.float64)


def _col2im_spec(ctx):
    """(image dims, kernel dims, block counts, strides, begin pads, dilations)."""
    ctx.require_inputs(3)
    x = ctx.inputs[0]
    ctx.require_dtype(0, COL2IM_TYPES)
    image = _const_ints(ctx, 1, "image_shape")
    kernel = _const_ints(ctx, 2, "block_shape")
    r = len(image)
    if len(kernel) != r or r < 1:
        raise ctx.fail(f"image_shape {image} and block_shape {kernel} differ in length")
    dil = [int(v) for v in ctx.attr("dilations", [1] * r)]
    pads = [int(v) for v in ctx.attr("pads", [0] * (2 * r))]
    step = [int(v) for v in ctx.attr("strides", [1] * r)]
    if len(dil) != r or len(step) != r or len(pads) != 2 * r or min(dil + step) < 1 or min(kernel) < 1:
        raise ctx.fail(f"dilations {dil}, strides {step}, pads {pads} do not fit {r} spatial dims")
    blocks = [(image[d] + pads[d] + pads[d + r] - dil[d] * (kernel[d] - 1) - 1) // step[d] + 1
              for d in range(r)]
    if x.rank != 3 or x.shape[1] % math.prod(kernel) or x.shape[2] != math.prod(blocks) or min(blocks) < 1:
        raise ctx.fail(f"input shape {list(x.shape)} does not fit (N, C * {math.prod(kernel)}, "
                       f"{math.prod(blocks)}) for blocks {blocks}")
    return image, kernel, blocks, step, pads[:r], dil


def _col2im_infer(ctx):
    x = ctx.inputs[0]
    image, kernel, _, _, _, _ = _col2im_spec(ctx)
    return [TensorType(x.dtype, (x.shape[0], x.shape[1] // math.prod(kernel)) + tuple(image))]


def _col2im_evaluate(ctx, arrays):
    x = arrays[0]
    image, kernel, blocks, step, pads, dil = _col2im_spec(ctx)
    planes = x.shape[0] * (x.shape[1] // math.prod(kernel))
    cols = x.reshape((planes,) + tuple(kernel) + tuple(blocks))
    out = np.zeros((planes,) + tuple(image), x.dtype)
    for k in np.ndindex(*kernel):
        for b in np.ndindex(*blocks):
            pos = [b[d] * step[d] - pads[d] + k[d] * dil[d] for d in range(len(image))]
            if all(0 <= p < n for p, n in zip(pos, image)):
                out[(slice(None),) + tuple(pos)] += cols[(slice(None),) + k + b]
    return [out.reshape(_col2im_infer(ctx)[0].shape)]


def _col2im_emit(ctx):
    x, y = ctx.inputs[0], ctx.outputs[0]
    image, kernel, blocks, step, pads, dil = _col2im_spec(ctx)
    if y.numel == 0:
        return ""
    planes = x.shape[0] * (x.shape[1] // math.prod(kernel))
    return (f"aotc_col2im_{dtypes.c_type(x.dtype)}({ctx.y(0)}, {ctx.x(0)}, {planes}, {len(image)}, "
            f"{c_ints(image)}, {c_ints(kernel)}, {c_ints(blocks)}, {c_ints(step)}, {c_ints(pads)}, "
            f"{c_ints(dil)});")


OPS = [
    OpDef("Split", _split_infer, _split_emit, _split_evaluate, since=1, supports_exact=True,
          checked_through=28),
    OpDef("Tile", _tile_infer, _tile_emit, lambda ctx, a: [np.tile(a[0], _tile_repeats(ctx))],
          since=6, supports_exact=True, checked_through=28),
    OpDef("DepthToSpace", _block_infer, _block_emit, _block_evaluate, since=1, supports_exact=True,
          checked_through=28),
    OpDef("SpaceToDepth", _block_infer, _block_emit, _block_evaluate, since=1, supports_exact=True,
          checked_through=28),
    OpDef("CenterCropPad", _crop_pad_infer, _crop_pad_emit, _crop_pad_evaluate, since=18,
          supports_exact=True, checked_through=28),
    OpDef("ReverseSequence", _reverse_infer, _reverse_emit, _reverse_evaluate, since=10,
          supports_exact=True, checked_through=28),
    OpDef("Col2Im", _col2im_infer, _col2im_emit, _col2im_evaluate, since=18, supports_exact=True,
          checked_through=28),
]
