"""Signal processing: DFT, STFT, the window functions and MelWeightMatrix.

DFT and STFT run a direct transform in double (runtime_c/aotc_signal.h) with a
twiddle table made here; lengths and the axis are compile-time values. The windows
depend only on compile-time inputs, so they are computed here in float64 (as ONNX's
reference does) and become constants; so does the mel matrix when its band edges are
constants (otherwise a kernel computes it from them at run time).
"""
import numpy as np
from onnx import TensorProto

from .. import dtypes
from .base import OpDef, TensorType
from .unary import to_dtype

FLOATS = dtypes.FLOATS


def _scalar_int(ctx, i, what):
    value = np.asarray(ctx.const_input(i, what))
    if value.dtype.kind not in "iu" or value.size != 1:
        raise ctx.fail(f"{what} must be one integer, is {value.dtype} of shape {list(value.shape)}")
    return int(value.reshape(-1)[0])


def twiddles(n):
    """(cos, sin) of 2 pi t / n for t < n, interleaved, in float64."""
    t = np.arange(n, dtype=np.float64)
    angle = 2.0 * np.pi * t / n
    return np.stack([np.cos(angle), np.sin(angle)], axis=1).reshape(-1)


# ---- DFT --------------------------------------------------------------------------------

def _dft_params(ctx):
    """(axis, n, inverse, onesided, hermitian input, output length)."""
    x = ctx.inputs[0]
    if x.rank < 2 or x.shape[-1] not in (1, 2):
        raise ctx.fail(f"input shape {list(x.shape)} must end in 1 (real) or 2 (complex)")
    if ctx.opset >= 20:
        axis = _scalar_int(ctx, 2, "axis") if ctx.has_input(2) else -2
    else:
        axis = int(ctx.attr("axis", 1))
    if not (-x.rank <= axis <= -2 or 0 <= axis <= x.rank - 2):
        raise ctx.fail(f"axis {axis} must name a signal dimension of rank-{x.rank} input, not the last")
    axis %= x.rank
    inverse = bool(ctx.attr("inverse", 0))
    onesided = bool(ctx.attr("onesided", 0))
    hermitian = inverse and onesided
    if ctx.has_input(1):
        n = _scalar_int(ctx, 1, "dft_length")
    else:
        n = 2 * (x.shape[axis] - 1) if hermitian else x.shape[axis]
    if n < 1:
        raise ctx.fail(f"dft_length {n} must be at least 1")
    if hermitian and x.shape[-1] != 2:
        raise ctx.fail("an inverse one-sided DFT needs a complex input (last dim 2)")
    length = n // 2 + 1 if onesided and not inverse else n
    return axis, n, inverse, onesided, hermitian, length


def _dft_infer(ctx):
    ctx.require_inputs(1, 3)
    ctx.require_dtype(0, FLOATS)
    x = ctx.inputs[0]
    axis, _, _, _, hermitian, length = _dft_params(ctx)
    shape = list(x.shape)
    shape[axis] = length
    shape[-1] = 1 if hermitian else 2
    return [TensorType(x.dtype, tuple(shape))]


def _dft_scratch(ctx):
    axis, _, _, _, _, length = _dft_params(ctx)
    return 16 * (ctx.inputs[0].shape[axis] + length)


def _dft_emit(ctx):
    x, y = ctx.inputs[0], ctx.outputs[0]
    if y.numel == 0:
        return ""
    axis, n, inverse, _, hermitian, length = _dft_params(ctx)
    outer = int(np.prod(x.shape[:axis], dtype=np.int64))
    inner = int(np.prod(x.shape[axis + 1:-1], dtype=np.int64))
    args = [dtypes.c_kernel_type(x.dtype), ctx.y(0), ctx.x(0), outer, x.shape[axis], inner,
            x.shape[-1], length, y.shape[-1], n, int(inverse), int(hermitian),
            ctx.const(twiddles(n)), ctx.scratch]
    return f"AOTC_DFT({', '.join(str(a) for a in args)});"


# ---- STFT -------------------------------------------------------------------------------

def _stft_params(ctx):
    """(frame step, frame length, frames, bins)."""
    x = ctx.inputs[0]
    if x.rank != 3 or x.shape[-1] not in (1, 2):
        raise ctx.fail(f"signal shape {list(x.shape)} must be [batch, length, 1 or 2]")
    step = _scalar_int(ctx, 1, "frame_step")
    if ctx.has_input(2):
        w = ctx.inputs[2]
        if w.rank != 1:
            raise ctx.fail(f"window must be 1-D, has shape {list(w.shape)}")
        if np.dtype(w.dtype) != np.dtype(x.dtype):
            raise ctx.fail(f"window is {dtypes.name(w.dtype)}, signal {dtypes.name(x.dtype)}")
        frame = int(w.shape[0])
        if ctx.has_input(3) and _scalar_int(ctx, 3, "frame_length") != frame:
            raise ctx.fail(f"frame_length {_scalar_int(ctx, 3, 'frame_length')} differs from the "
                           f"window length {frame}")
    elif ctx.has_input(3):
        frame = _scalar_int(ctx, 3, "frame_length")
    else:
        raise ctx.fail("STFT needs a window or a frame_length")
    if step < 1 or frame < 1 or frame > x.shape[1]:
        raise ctx.fail(f"frame_step {step} and frame length {frame} do not fit a signal of "
                       f"length {x.shape[1]}")
    onesided = bool(ctx.attr("onesided", 1))
    if onesided and x.shape[-1] == 2:
        raise ctx.fail("onesided STFT of a complex signal")
    frames = 1 + (x.shape[1] - frame) // step
    return step, frame, frames, frame // 2 + 1 if onesided else frame


def _stft_infer(ctx):
    ctx.require_inputs(2, 4)
    ctx.require_dtype(0, FLOATS)
    x = ctx.inputs[0]
    _, _, frames, bins = _stft_params(ctx)
    return [TensorType(x.dtype, (x.shape[0], frames, bins, 2))]


def _stft_scratch(ctx):
    _, frame, _, bins = _stft_params(ctx)
    return 16 * (frame + bins)


def _stft_emit(ctx):
    x, y = ctx.inputs[0], ctx.outputs[0]
    if y.numel == 0:
        return ""
    step, frame, frames, bins = _stft_params(ctx)
    window = ctx.x(2) if ctx.has_input(2) else "NULL"
    args = [dtypes.c_kernel_type(x.dtype), ctx.y(0), ctx.x(0), window, x.shape[0], x.shape[1],
            x.shape[2], frames, step, frame, bins, ctx.const(twiddles(frame)), ctx.scratch]
    return f"AOTC_STFT({', '.join(str(a) for a in args)});"


# ---- windows and the mel matrix: compile-time constants -----------------------------------

def _output_datatype(ctx):
    return dtypes.from_onnx(int(ctx.attr("output_datatype", TensorProto.FLOAT)), "output_datatype")


def _window(formula):
    def infer(ctx):
        ctx.require_inputs(1)
        size = _scalar_int(ctx, 0, "size")
        if size < 0:
            raise ctx.fail(f"window size {size} is negative")
        periodic = int(ctx.attr("periodic", 1))
        denominator = size if periodic else size - 1
        n = np.arange(size, dtype=np.float64)
        with np.errstate(all="ignore"):
            value = formula(n, float(denominator)) if size else n
        return [TensorType.of(to_dtype(value, _output_datatype(ctx)))]
    return infer


def _hann(n, d):
    return np.sin(n * np.pi / d) ** 2


def _hamming(n, d):
    alpha = 25.0 / 46.0
    return alpha - np.cos(n * np.pi * 2 / d) * (1 - alpha)


def _blackman(n, d):
    return 0.42 - 0.5 * np.cos(n * np.pi * 2 / d) + 0.08 * np.cos(n * np.pi * 4 / d)


def _mel_sizes(ctx):
    """(num_mel_bins, dft_length, sample_rate): compile-time integers."""
    bins = _scalar_int(ctx, 0, "num_mel_bins")
    dft_length = _scalar_int(ctx, 1, "dft_length")
    rate = _scalar_int(ctx, 2, "sample_rate")
    if bins < 1 or dft_length < 1 or rate < 1:
        raise ctx.fail(f"num_mel_bins {bins}, dft_length {dft_length} and sample_rate {rate} "
                       "must be positive")
    return bins, dft_length, rate


def _mel_matrix(ctx, bins, dft_length, rate, low, high):
    """The matrix of ONNX's reference, in float64, for band edges known here."""
    spectrogram_bins = dft_length // 2 + 1
    low_mel = 2595 * np.log1p(low / 700) / np.log(10)
    high_mel = 2595 * np.log1p(high / 700) / np.log(10)
    points = np.arange(bins + 2) * ((high_mel - low_mel) / (bins + 2)) + low_mel
    hertz = 700 * np.expm1(points / 2595 * np.log(10))
    index = np.floor((dft_length + 1) * hertz / rate)
    if index.min() < 0 or index[:-1].max() >= spectrogram_bins or index[-1] > spectrogram_bins:
        raise ctx.fail(f"band edges {low}..{high} Hz map outside the {spectrogram_bins} "
                       f"spectrogram bins of sample rate {rate}")
    index = index.astype(int)
    out = np.zeros((spectrogram_bins, bins))
    for i in range(bins):
        left, center, right = index[i:i + 3]
        if center == left:
            out[center, i] = 1
        else:
            out[left:center + 1, i] = (np.arange(left, center + 1) - left) / (center - left)
        if right > center:
            out[center:right, i] = (right - np.arange(center, right)) / (right - center)
    return out


def _mel_infer(ctx):
    ctx.require_inputs(5)
    bins, dft_length, rate = _mel_sizes(ctx)
    for i in (3, 4):
        ctx.require_dtype(i, FLOATS)
        if ctx.inputs[i].numel != 1:
            raise ctx.fail(f"input {i} (a band edge) must be one value, has shape {list(ctx.inputs[i].shape)}")
    dt = _output_datatype(ctx)
    edges = [ctx.inputs[i].value for i in (3, 4)]
    if all(e is not None for e in edges):   # a constant, as ONNX's reference makes it
        low, high = (float(np.asarray(e, np.float64).reshape(-1)[0]) for e in edges)
        return [TensorType.of(to_dtype(_mel_matrix(ctx, bins, dft_length, rate, low, high), dt))]
    if not dtypes.is_float(dt):
        raise ctx.unsupported(f"MelWeightMatrix of type {dtypes.name(dt)} with run-time band edges")
    return [TensorType(dt, (dft_length // 2 + 1, bins))]


def _mel_emit(ctx):
    bins, dft_length, rate = _mel_sizes(ctx)
    edge = ctx.inputs[3].dtype
    if np.dtype(ctx.inputs[4].dtype) != np.dtype(edge):
        raise ctx.fail(f"band edges differ in type: {edge} and {ctx.inputs[4].dtype}")
    args = [dtypes.c_kernel_type(ctx.outputs[0].dtype), dtypes.c_kernel_type(edge), ctx.y(0), ctx.x(3),
            ctx.x(4), bins, dft_length, rate, f"(int64_t *)(void *){ctx.scratch}"]
    return f"AOTC_MEL_WEIGHT_MATRIX({', '.join(str(a) for a in args)});"


OPS = [
    OpDef("DFT", _dft_infer, _dft_emit, scratch=_dft_scratch, since=17, checked_through=28),
    OpDef("STFT", _stft_infer, _stft_emit, scratch=_stft_scratch, since=17, checked_through=28),
    OpDef("HannWindow", _window(_hann), since=17, checked_through=28, supports_exact=True),
    OpDef("HammingWindow", _window(_hamming), since=17, checked_through=28, supports_exact=True),
    OpDef("BlackmanWindow", _window(_blackman), since=17, checked_through=28, supports_exact=True),
    OpDef("MelWeightMatrix", _mel_infer, _mel_emit, scratch=lambda ctx: 8 * (_mel_sizes(ctx)[0] + 2),
          since=17, checked_through=28),
]
