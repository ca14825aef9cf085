"""Linear quantization: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, and the
integer operators MatMulInteger, ConvInteger, QLinearMatMul and QLinearConv.

Reference kernels (runtime_c/aotc_quant.h): integer products are summed exactly,
values are put on the quantized grid with rint (half to even) and saturated. Integer
matmul and conv first widen their operands to int32 minus the zero point in the node's
scratch, so one int32 kernel serves every pair of 8-bit types.
"""
import ml_dtypes
import numpy as np
from onnx import TensorProto

from .. import dtypes
from .base import OpDef, TensorType, c_ints

INT_QUANT_TYPES = tuple(np.dtype(t) for t in (np.uint8, np.int8, np.uint16, np.int16)) + \
    getattr(dtypes, "SMALL_INTS", ())
FLOAT4 = getattr(dtypes, "FLOAT4E2M1", None)
FLOAT_QUANT_TYPES = getattr(dtypes, "FLOAT8", ()) + ((FLOAT4,) if FLOAT4 is not None else ())
QUANT_TYPES = INT_QUANT_TYPES + FLOAT_QUANT_TYPES
EIGHT_BIT = tuple(np.dtype(t) for t in (np.uint8, np.int8))
SCALE_TYPES = (np.dtype(np.float32),) + dtypes.HALVES
QUANTIZE_INPUTS = SCALE_TYPES + (np.dtype(np.int32),)
DEQUANTIZE_INPUTS = QUANT_TYPES + (np.dtype(np.int32),)
INT32 = np.dtype(np.int32)
# the C format of each float8 type, for conversions without saturation
FLOAT8_FORMATS = {"aotc_f8e4m3fn": "AOTC_FP_E4M3FN", "aotc_f8e4m3fnuz": "AOTC_FP_E4M3FNUZ",
                  "aotc_f8e5m2": "AOTC_FP_E5M2", "aotc_f8e5m2fnuz": "AOTC_FP_E5M2FNUZ"}


def _kt(dt):
    return dtypes.c_kernel_type(dt)


def _range(dt):
    info = ml_dtypes.iinfo(dt) if dt in getattr(dtypes, "SMALL_INTS", ()) else np.iinfo(dt)
    return float(info.min), float(info.max)


def _align(n):
    return (int(n) + 63) // 64 * 64


# ---- scale / zero-point layout -------------------------------------------------------

def qparam_layout(ctx, shape, param, what="scale"):
    """(outer, D, inner, block, blocked) of a scale of shape `param` for data of `shape`:
    per tensor, per axis (rank 1, size of the axis) or blocked (block_size > 0)."""
    block = int(ctx.attr("block_size", 0) or 0)
    numel = int(np.prod(shape, dtype=np.int64))
    if block < 0:
        raise ctx.fail(f"block_size {block} must not be negative")
    if not block and int(np.prod(param, dtype=np.int64)) == 1 and len(param) <= 1:
        return 1, 1, numel, 1, 0
    axis = ctx.axis(ctx.attr("axis", 1), len(shape))
    outer = int(np.prod(shape[:axis], dtype=np.int64))
    inner = int(np.prod(shape[axis + 1:], dtype=np.int64))
    d = int(shape[axis])
    if not block:
        if len(param) != 1 or param[0] != d:
            raise ctx.fail(f"{what} shape {list(param)} is neither one value nor [{d}] for axis "
                           f"{axis} of shape {list(shape)}")
        if ctx.opset < 13:
            raise ctx.fail(f"per-axis {what} needs opset 13")
        return outer, d, inner, 1, 0
    want = list(shape)
    want[axis] = -(-d // block)
    if list(param) != want:
        raise ctx.fail(f"{what} shape {list(param)} does not block shape {list(shape)} by "
                       f"{block} along axis {axis} (expected {want})")
    return outer, d, inner, block, 1


def _param_index(layout, shape):
    """numpy index array: for each element of `shape`, its scale's flat index."""
    outer, d, inner, block, blocked = layout
    o, a, i = np.meshgrid(np.arange(outer), np.arange(d), np.arange(inner), indexing="ij")
    if blocked:
        return ((o * (-(-d // block)) + a // block) * inner + i).reshape(shape)
    return a.reshape(shape)


def _check_zero_point(ctx, i, scale_shape, dtype=None):
    zp = ctx.inputs[i]
    one_value = zp.numel == 1 and zp.rank <= 1 and len(scale_shape) <= 1 and \
        int(np.prod(scale_shape, dtype=np.int64)) == 1
    if tuple(zp.shape) != tuple(scale_shape) and not one_value:
        raise ctx.fail(f"zero point shape {list(zp.shape)} differs from the scale's {list(scale_shape)}")
    if dtype is not None and np.dtype(zp.dtype) != np.dtype(dtype):
        raise ctx.fail(f"zero point is {dtypes.name(zp.dtype)}, expected {dtypes.name(dtype)}")


# ---- QuantizeLinear ----------------------------------------------------------------------

def _check_output_dtype(ctx, dt, source):
    """output_dtype, where set, must name `dt`, the type `source` already fixes."""
    out = int(ctx.attr("output_dtype", 0) or 0)
    if out and dtypes.from_onnx(out, "output_dtype") != dt:
        raise ctx.fail(f"output_dtype {dtypes.name(dtypes.from_onnx(out))} differs from the "
                       f"{source}'s {dtypes.name(dt)}")


def _quantize_output_type(ctx):
    out = int(ctx.attr("output_dtype", 0) or 0)
    if ctx.has_input(2):
        dt = np.dtype(ctx.inputs[2].dtype)
        _check_output_dtype(ctx, dt, "zero point")
    else:
        dt = dtypes.from_onnx(out, "output_dtype") if out else np.dtype(np.uint8)
    if dt not in QUANT_TYPES:
        raise ctx.unsupported(f"quantizing to {dtypes.name(dt)} (supported: "
                              f"{', '.join(dtypes.name(t) for t in QUANT_TYPES)})")
    return dt


def _quantize_precision(ctx):
    precision = int(ctx.attr("precision", 0) or 0)
    if precision not in (0, TensorProto.FLOAT):
        raise ctx.unsupported(f"precision {TensorProto.DataType.Name(precision)}: only float is supported")


def _quantize_infer(ctx):
    ctx.require_inputs(2, 3)
    x, s = ctx.inputs[:2]
    ctx.require_dtype(0, QUANTIZE_INPUTS)
    ctx.require_dtype(1, SCALE_TYPES)
    if np.dtype(x.dtype) != INT32 and np.dtype(s.dtype) != np.dtype(x.dtype):
        raise ctx.fail(f"scale is {dtypes.name(s.dtype)}, input is {dtypes.name(x.dtype)}")
    _quantize_precision(ctx)
    qparam_layout(ctx, x.shape, s.shape)
    dt = _quantize_output_type(ctx)
    if ctx.has_input(2):
        _check_zero_point(ctx, 2, s.shape)
    return [TensorType(dt, x.shape)]


def _saturate(ctx):
    saturate = int(ctx.attr("saturate", 1))
    if saturate not in (0, 1):
        raise ctx.fail(f"saturate {saturate} is not 0 or 1")
    return saturate


def _quantize_evaluate(ctx, arrays):
    x, s = arrays[0], arrays[1]
    dt = ctx.outputs[0].dtype
    index = _param_index(qparam_layout(ctx, x.shape, s.shape), x.shape)
    v = x.astype(np.float32) / s.astype(np.float32).reshape(-1)[index]
    zp = arrays[2].reshape(-1)[index].astype(np.float64) if ctx.has_input(2) else 0.0
    if dt in FLOAT_QUANT_TYPES:
        if dt != FLOAT4:
            zp = 0.0
        if _saturate(ctx):
            big = float(ml_dtypes.finfo(dt).max)
            v = np.clip(v + zp, -big, big)
            zp = 0.0
        return [(v + zp).astype(np.float32).astype(dt)]
    lo, hi = _range(dt)
    with np.errstate(invalid="ignore"):
        r = np.clip(np.rint(v.astype(np.float64)) + zp, lo, hi)
    return [np.where(np.isnan(v), zp, r).astype(dt)]


def _quantize_expr(ctx, dt):
    """The C expression of one output element over V (x / scale) and Z (zero point)."""
    kt = _kt(dt)
    if dt in FLOAT_QUANT_TYPES:
        if dt == FLOAT4:      # its zero point is added
            return f"AOTC_ST_{kt}(V + Z)"
        if _saturate(ctx):
            return f"AOTC_ST_{kt}(V)"
        return f"aotc_fp_encode(V, {FLOAT8_FORMATS[kt]}, 0)"
    lo, hi = _range(dt)
    return f"AOTC_ST_{kt}((int64_t)aotc_quantize_value((double)V, (double)Z, {lo!r}, {hi!r}))"


def _linear_args(ctx, zp_dtype):
    """The kernel arguments QuantizeLinear and DequantizeLinear share after the types:
    output, input, scale, zero point (a null pointer without one), then the layout."""
    x, s = ctx.inputs[:2]
    zp = ctx.x(2) if ctx.has_input(2) else f"(const {_kt(zp_dtype)} *)0"
    return [ctx.y(0), ctx.x(0), ctx.x(1), zp, *[str(v) for v in qparam_layout(ctx, x.shape, s.shape)]]


def _quantize_emit(ctx):
    x, s = ctx.inputs[:2]
    y = ctx.outputs[0]
    if y.numel == 0:
        return ""
    args = [_kt(y.dtype), _kt(x.dtype), _kt(s.dtype), _kt(y.dtype), *_linear_args(ctx, y.dtype),
            _quantize_expr(ctx, np.dtype(y.dtype))]
    return f"AOTC_QUANTIZE_LINEAR({', '.join(args)});"


# ---- DequantizeLinear ----------------------------------------------------------------

def _dequantize_infer(ctx):
    ctx.require_inputs(2, 3)
    x, s = ctx.inputs[:2]
    ctx.require_dtype(0, DEQUANTIZE_INPUTS)
    ctx.require_dtype(1, SCALE_TYPES)
    qparam_layout(ctx, x.shape, s.shape)
    if ctx.has_input(2):
        _check_zero_point(ctx, 2, s.shape, x.dtype)
    dt = np.dtype(s.dtype)
    _check_output_dtype(ctx, dt, "scale")
    return [TensorType(dt, x.shape)]


def _dequantize_evaluate(ctx, arrays):
    x, s = arrays[0], arrays[1]
    index = _param_index(qparam_layout(ctx, x.shape, s.shape), x.shape)
    d = x.astype(np.float32)
    if ctx.has_input(2):
        d = d - arrays[2].reshape(-1)[index].astype(np.float32)
    return [(d * s.astype(np.float32).reshape(-1)[index]).astype(s.dtype)]


def _dequantize_emit(ctx):
    x, s = ctx.inputs[:2]
    y = ctx.outputs[0]
    if y.numel == 0:
        return ""
    args = [_kt(y.dtype), _kt(x.dtype), _kt(s.dtype), *_linear_args(ctx, x.dtype)]
    return f"AOTC_DEQUANTIZE_LINEAR({', '.join(args)});"


# ---- DynamicQuantizeLinear -------------------------------------------------------------

def _dynamic_infer(ctx):
    ctx.require_inputs(1)
    ctx.require_dtype(0, (np.float32,))
    x = ctx.inputs[0]
    return [TensorType(np.dtype(np.uint8), x.shape), TensorType(np.dtype(np.float32), ()),
            TensorType(np.dtype(np.uint8), ())]


def _dynamic_emit(ctx):
    return (f"aotc_dynamic_quantize_u8({ctx.x(0)}, {ctx.inputs[0].numel}, {ctx.y(0)}, "
            f"{ctx.y(1)}, {ctx.y(2)});")


# ---- integer matmul --------------------------------------------------------------------

def _matmul_shapes(ctx, a, b):
    """(output shape, batch offsets of A and B, M, K, N) of numpy matmul semantics."""
    if a.rank == 0 or b.rank == 0:
        raise ctx.fail("matmul operands must have rank 1 or more")
    a_shape = (1,) + tuple(a.shape) if a.rank == 1 else tuple(a.shape)
    b_shape = tuple(b.shape) + (1,) if b.rank == 1 else tuple(b.shape)
    m, k = a_shape[-2:]
    k2, n = b_shape[-2:]
    if k != k2:
        raise ctx.fail(f"inner dimensions differ: A {list(a.shape)}, B {list(b.shape)}")
    try:
        batch = tuple(int(d) for d in np.broadcast_shapes(a_shape[:-2], b_shape[:-2]))
    except ValueError:
        raise ctx.fail(f"batch dims of A {list(a.shape)} and B {list(b.shape)} do not broadcast") from None
    count = int(np.prod(batch, dtype=np.int64))
    a_idx = np.broadcast_to(np.arange(int(np.prod(a_shape[:-2], dtype=np.int64))).reshape(a_shape[:-2]), batch)
    b_idx = np.broadcast_to(np.arange(int(np.prod(b_shape[:-2], dtype=np.int64))).reshape(b_shape[:-2]), batch)
    out = batch + ((m,) if a.rank > 1 else ()) + ((n,) if b.rank > 1 else ())
    return (out, (a_idx.reshape(-1) * m * k).tolist() or [0] * count,
            (b_idx.reshape(-1) * k * n).tolist() or [0] * count, m, k, n)


def _zero_point_span(ctx, i, operand_shape, along, what):
    """(D, inner) of a zero point for operand_shape: one value, or one per row (along=-2)
    or per column (along=-1) of the matrix."""
    zp = ctx.inputs[i]
    if zp.numel == 1:
        return 1, 1
    if len(operand_shape) < 2 or zp.rank != 1 or zp.shape[0] != operand_shape[along]:
        raise ctx.unsupported(f"{what} of shape {list(zp.shape)}: one value or one per "
                              f"{'row' if along == -2 else 'column'} supported")
    return int(operand_shape[along]), 1 if along == -1 else int(operand_shape[-1])


def _widen(ctx, i, zp_input, dst, along, what):
    t = ctx.inputs[i]
    zp, d, inner = "NULL", 1, 1
    if zp_input is not None and ctx.has_input(zp_input):
        if np.dtype(ctx.inputs[zp_input].dtype) != np.dtype(t.dtype):
            raise ctx.fail(f"{what} is {dtypes.name(ctx.inputs[zp_input].dtype)}, its operand "
                           f"{dtypes.name(t.dtype)}")
        d, inner = _zero_point_span(ctx, zp_input, t.shape, along, what)
        zp = ctx.x(zp_input)
    return f"AOTC_WIDEN_SUB({dtypes.c_type(t.dtype)}, {dst}, {ctx.x(i)}, {zp}, {t.numel}, {d}, {inner});"


def _matmul_scratch_parts(ctx, a_i, b_i):
    a, b = ctx.inputs[a_i], ctx.inputs[b_i]
    return _align(4 * a.numel), _align(4 * b.numel)


def _integer_matmul_code(ctx, a_i, b_i, azp_i, bzp_i, acc):
    a, b = ctx.inputs[a_i], ctx.inputs[b_i]
    _, a_off, b_off, m, k, n = _matmul_shapes(ctx, a, b)
    a_bytes, _ = _matmul_scratch_parts(ctx, a_i, b_i)
    wa = f"((int32_t *)({ctx.scratch}))"
    wb = f"((int32_t *)({ctx.scratch} + {a_bytes}))"
    return "\n".join([
        _widen(ctx, a_i, azp_i, wa, -2, "a_zero_point"),
        _widen(ctx, b_i, bzp_i, wb, -1, "b_zero_point"),
        f"aotc_matmul_i32({wa}, {wb}, {acc}, {len(a_off)}, {c_ints(a_off)}, {c_ints(b_off)}, "
        f"{m}, {k}, {n});"])


def _matmul_integer_infer(ctx):
    ctx.require_inputs(2, 4)
    ctx.require_dtype(0, EIGHT_BIT)
    ctx.require_dtype(1, EIGHT_BIT)
    a, b = ctx.inputs[:2]
    shape = _matmul_shapes(ctx, a, b)[0]
    for i, what, along, operand in ((2, "a_zero_point", -2, a), (3, "b_zero_point", -1, b)):
        if ctx.has_input(i):
            _zero_point_span(ctx, i, operand.shape, along, what)
    return [TensorType(INT32, shape)]


def _matmul_integer_emit(ctx):
    if ctx.outputs[0].numel == 0:
        return ""
    return _integer_matmul_code(ctx, 0, 1, 2, 3, ctx.y(0))


def _matmul_integer_scratch(ctx):
    return sum(_matmul_scratch_parts(ctx, 0, 1))


def _qlinear_check(ctx, operand_zero_points):
    """Types of QLinearMatMul / QLinearConv: scales at 1, 4, 6 of one float type; the
    input and output scales and zero points (1, 2, 6, 7) one value each; each
    (zero point, operand) pair of one type."""
    for i in (0, 3, 7):
        ctx.require_dtype(i, EIGHT_BIT)
    ts = ctx.require_dtype(1, SCALE_TYPES)
    for i in (4, 6):
        if np.dtype(ctx.inputs[i].dtype) != ts:
            raise ctx.fail(f"scales differ in type: {dtypes.name(ts)} and "
                           f"{dtypes.name(ctx.inputs[i].dtype)}")
    for i in (1, 2, 6, 7):
        if ctx.inputs[i].numel != 1:
            raise ctx.unsupported(f"input {i} of shape {list(ctx.inputs[i].shape)}: one value "
                                  "supported")
    for zp, operand in operand_zero_points:
        if np.dtype(ctx.inputs[zp].dtype) != np.dtype(ctx.inputs[operand].dtype):
            raise ctx.fail(f"input {zp} (a zero point) is {dtypes.name(ctx.inputs[zp].dtype)}, "
                           f"its operand {dtypes.name(ctx.inputs[operand].dtype)}")
    return ts


def _per_channel(ctx, i, channels, what):
    """True when input i holds one value per output channel, False for one value."""
    t = ctx.inputs[i]
    if t.numel == 1:
        return False
    if t.rank != 1 or t.shape[0] != channels:
        raise ctx.unsupported(f"{what} of shape {list(t.shape)}: one value or [{channels}] supported")
    return True


def _requantize_code(ctx, acc, mult, ts, a_scale, b_scale, y_scale, channels, per_channel, inner):
    y = ctx.outputs[0]
    lo, hi = _range(y.dtype)
    zp = f"({ctx.x(7)})[0]"
    d = channels if per_channel else 1
    return "\n".join([
        f"AOTC_QLINEAR_MULTIPLIER({_kt(ts)}, {mult}, {ctx.x(a_scale)}, {ctx.x(b_scale)}, "
        f"{ctx.x(y_scale)}, {d}, {1 if per_channel else 0});",
        f"AOTC_REQUANTIZE({dtypes.c_type(y.dtype)}, {ctx.y(0)}, {acc}, {mult}, {zp}, {y.numel}, "
        f"{d}, {inner}, {lo!r}, {hi!r});"])


def _qlinear_matmul_infer(ctx):
    ctx.require_inputs(8)
    _qlinear_check(ctx, ((2, 0), (5, 3)))
    a, b = ctx.inputs[0], ctx.inputs[3]
    shape = _matmul_shapes(ctx, a, b)[0]
    _zero_point_span(ctx, 5, b.shape, -1, "b_zero_point")
    _per_channel(ctx, 4, b.shape[-1], "b_scale")
    return [TensorType(np.dtype(ctx.inputs[7].dtype), shape)]


def _qlinear_parts(ctx, operand_parts, channels):
    """The scratch of QLinearMatMul and QLinearConv: the two widened operands (their
    bytes), the output's int32 accumulators, one double multiplier per channel."""
    return (*operand_parts, _align(4 * ctx.outputs[0].numel), _align(8 * max(1, channels)))


def _qlinear_pointers(ctx, parts):
    """C pointers to the accumulators and the multipliers in the scratch of `parts`."""
    first, second, acc_bytes, _ = parts
    return (f"((int32_t *)({ctx.scratch} + {first + second}))",
            f"((double *)({ctx.scratch} + {first + second + acc_bytes}))")


def _qlinear_matmul_parts(ctx):
    return _qlinear_parts(ctx, _matmul_scratch_parts(ctx, 0, 3), ctx.inputs[3].shape[-1])


def _qlinear_matmul_emit(ctx):
    y, b = ctx.outputs[0], ctx.inputs[3]
    if y.numel == 0:
        return ""
    acc, mult = _qlinear_pointers(ctx, _qlinear_matmul_parts(ctx))
    n = int(b.shape[-1]) if b.rank > 1 else 1
    per_channel = _per_channel(ctx, 4, b.shape[-1], "b_scale")
    return "\n".join([
        _integer_matmul_code(ctx, 0, 3, 2, 5, acc),
        _requantize_code(ctx, acc, mult, np.dtype(ctx.inputs[1].dtype), 1, 4, 6, n, per_channel, 1)])


# ---- integer conv ----------------------------------------------------------------------

def _conv_geometry(ctx, x, w):
    """The aotc_qconv_geom fields of a conv of x [N, C, spatial...] by w [M, C/group, k...]."""
    if x.rank < 3 or x.rank > 5 or w.rank != x.rank:
        raise ctx.unsupported(f"conv of input shape {list(x.shape)} by weights {list(w.shape)}: "
                              "1 to 3 spatial dims of matching rank supported")
    spatial = x.rank - 2
    group = int(ctx.attr("group", 1))
    n, c = x.shape[:2]
    m, cg = w.shape[:2]
    if group < 1 or cg * group != c or m % group:
        raise ctx.fail(f"input of {c} channels, weights {list(w.shape)} and group {group} do not fit")
    kernel = [int(d) for d in w.shape[2:]]
    if ctx.attr("kernel_shape") is not None and [int(k) for k in ctx.attr("kernel_shape")] != kernel:
        raise ctx.fail(f"kernel_shape {list(ctx.attr('kernel_shape'))} differs from weights {kernel}")

    def ints(name, default):
        values = [int(v) for v in (ctx.attr(name) or default)]
        if len(values) != len(default):
            raise ctx.fail(f"{name} has {len(values)} values, expected {len(default)}")
        return values
    stride = ints("strides", [1] * spatial)
    dilation = ints("dilations", [1] * spatial)
    if min(stride + dilation + [1]) < 1:
        raise ctx.fail(f"strides {stride} and dilations {dilation} must be at least 1")
    in_dims = [int(d) for d in x.shape[2:]]
    spans = [(k - 1) * d + 1 for k, d in zip(kernel, dilation)]
    auto_pad = ctx.attr("auto_pad", "NOTSET")
    auto_pad = auto_pad.decode() if isinstance(auto_pad, bytes) else auto_pad
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        out = [-(-i // s) for i, s in zip(in_dims, stride)]
        total = [max(0, (o - 1) * s + e - i) for o, s, e, i in zip(out, stride, spans, in_dims)]
        pads = [t // 2 if auto_pad == "SAME_UPPER" else t - t // 2 for t in total]
    elif auto_pad in ("NOTSET", "VALID"):
        all_pads = [0] * (2 * spatial) if auto_pad == "VALID" else ints("pads", [0] * (2 * spatial))
        if min(all_pads + [0]) < 0:
            raise ctx.fail(f"pads {all_pads} must not be negative")
        pads = all_pads[:spatial]
        out = []
        for i in range(spatial):
            padded = in_dims[i] + all_pads[i] + all_pads[i + spatial]
            if padded < spans[i]:
                raise ctx.fail(f"kernel span {spans[i]} exceeds padded input {padded} in dim {i}")
            out.append((padded - spans[i]) // stride[i] + 1)
    else:
        raise ctx.fail(f"auto_pad {auto_pad!r} is not NOTSET, SAME_UPPER, SAME_LOWER or VALID")

    def lead(values, fill):
        return [fill] * (3 - spatial) + list(values)
    fields = {"batch": n, "group": group, "cin_g": cg, "cout_g": m // group,
              "in": lead(in_dims, 1), "out": lead(out, 1), "kernel": lead(kernel, 1),
              "stride": lead(stride, 1), "dilation": lead(dilation, 1), "pad": lead(pads, 0)}
    return fields, (n, m) + tuple(out)


def _geom_literal(fields):
    def value(v):
        return "{" + ", ".join(str(int(x)) for x in v) + "}" if isinstance(v, list) else str(int(v))
    return "&(const aotc_qconv_geom){" + ", ".join(f".{k} = {value(v)}" for k, v in fields.items()) + "}"


def _conv_integer_infer(ctx):
    ctx.require_inputs(2, 4)
    ctx.require_dtype(0, EIGHT_BIT)
    ctx.require_dtype(1, EIGHT_BIT)
    x, w = ctx.inputs[:2]
    _, shape = _conv_geometry(ctx, x, w)
    if ctx.has_input(2) and ctx.inputs[2].numel != 1:
        raise ctx.fail(f"x_zero_point must be one value, has shape {list(ctx.inputs[2].shape)}")
    if ctx.has_input(3):
        _per_channel(ctx, 3, w.shape[0], "w_zero_point")
    return [TensorType(INT32, shape)]


def _conv_scratch_parts(ctx, x_i, w_i):
    return _align(4 * ctx.inputs[x_i].numel), _align(4 * ctx.inputs[w_i].numel)


def _conv_widen_code(ctx, x_i, w_i, xzp_i, wzp_i, bias, acc):
    x, w = ctx.inputs[x_i], ctx.inputs[w_i]
    fields, _ = _conv_geometry(ctx, x, w)
    x_bytes, _ = _conv_scratch_parts(ctx, x_i, w_i)
    wx = f"((int32_t *)({ctx.scratch}))"
    ww = f"((int32_t *)({ctx.scratch} + {x_bytes}))"
    w_d = w.shape[0] if ctx.has_input(wzp_i) and ctx.inputs[wzp_i].numel > 1 else 1
    xzp = ctx.x(xzp_i) if ctx.has_input(xzp_i) else "NULL"
    wzp = ctx.x(wzp_i) if ctx.has_input(wzp_i) else "NULL"
    for i, operand in ((xzp_i, x_i), (wzp_i, w_i)):
        if ctx.has_input(i) and np.dtype(ctx.inputs[i].dtype) != np.dtype(ctx.inputs[operand].dtype):
            raise ctx.fail(f"input {i} (a zero point) is {dtypes.name(ctx.inputs[i].dtype)}, "
                           f"its operand {dtypes.name(ctx.inputs[operand].dtype)}")
    return "\n".join([
        f"AOTC_WIDEN_SUB({dtypes.c_type(x.dtype)}, {wx}, {ctx.x(x_i)}, {xzp}, {x.numel}, 1, 1);",
        f"AOTC_WIDEN_SUB({dtypes.c_type(w.dtype)}, {ww}, {ctx.x(w_i)}, {wzp}, {w.numel}, {w_d}, "
        f"{w.numel // max(1, w.shape[0])});",
        f"aotc_conv_i32({_geom_literal(fields)}, {wx}, {ww}, {bias}, {acc});"])


def _conv_integer_emit(ctx):
    if ctx.outputs[0].numel == 0:
        return ""
    return _conv_widen_code(ctx, 0, 1, 2, 3, "NULL", ctx.y(0))


def _conv_integer_scratch(ctx):
    return sum(_conv_scratch_parts(ctx, 0, 1))


def _qlinear_conv_infer(ctx):
    ctx.require_inputs(8, 9)
    _qlinear_check(ctx, ((2, 0), (5, 3)))
    x, w = ctx.inputs[0], ctx.inputs[3]
    _, shape = _conv_geometry(ctx, x, w)
    _per_channel(ctx, 4, w.shape[0], "w_scale")
    _per_channel(ctx, 5, w.shape[0], "w_zero_point")
    if ctx.has_input(8):
        ctx.require_dtype(8, (np.int32,))
        if tuple(ctx.inputs[8].shape) != (w.shape[0],):
            raise ctx.fail(f"B has shape {list(ctx.inputs[8].shape)}, expected [{w.shape[0]}]")
    return [TensorType(np.dtype(ctx.inputs[7].dtype), shape)]


def _qlinear_conv_parts(ctx):
    return _qlinear_parts(ctx, _conv_scratch_parts(ctx, 0, 3), ctx.inputs[3].shape[0])


def _qlinear_conv_emit(ctx):
    y, w = ctx.outputs[0], ctx.inputs[3]
    if y.numel == 0:
        return ""
    acc, mult = _qlinear_pointers(ctx, _qlinear_conv_parts(ctx))
    bias = ctx.x(8) if ctx.has_input(8) else "NULL"
    per_channel = _per_channel(ctx, 4, w.shape[0], "w_scale")
    inner = y.numel // (y.shape[0] * y.shape[1]) if y.numel else 1
    return "\n".join([
        _conv_widen_code(ctx, 0, 3, 2, 5, bias, acc),
        _requantize_code(ctx, acc, mult, np.dtype(ctx.inputs[1].dtype), 1, 4, 6, int(w.shape[0]),
                         per_channel, inner)])


OPS = [
    OpDef("QuantizeLinear", _quantize_infer, _quantize_emit, _quantize_evaluate, since=10,
          checked_through=28, supports_exact=True),
    OpDef("DequantizeLinear", _dequantize_infer, _dequantize_emit, _dequantize_evaluate, since=10,
          checked_through=28, supports_exact=True),
    OpDef("DynamicQuantizeLinear", _dynamic_infer, _dynamic_emit, since=11, checked_through=28,
          supports_exact=True),
    OpDef("MatMulInteger", _matmul_integer_infer, _matmul_integer_emit,
          scratch=_matmul_integer_scratch, since=10, checked_through=28, supports_exact=True),
    OpDef("ConvInteger", _conv_integer_infer, _conv_integer_emit, scratch=_conv_integer_scratch,
          since=10, checked_through=28, supports_exact=True),
    OpDef("QLinearMatMul", _qlinear_matmul_infer, _qlinear_matmul_emit,
          scratch=lambda ctx: sum(_qlinear_matmul_parts(ctx)), since=10, checked_through=28, supports_exact=True),
    OpDef("QLinearConv", _qlinear_conv_infer, _qlinear_conv_emit,
          scratch=lambda ctx: sum(_qlinear_conv_parts(ctx)), since=10, checked_through=28,
          supports_exact=True),
]
