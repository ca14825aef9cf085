"""aotc's fused operators (domain ai.aotc), made by the graph passes (and the plan's
conv-residual fusion, aotc/plan/fusion.py):

    Linear(A, B, [bias]):  Y = act(A @ B + bias), A [..., K] (leading dims are rows),
                           B a constant float32 [K, N] packed here, bias [N];
    FusedConv(X, W, [B], [R]):  Y = act(Conv(X, W, B) + R), Conv's attributes and
                           kernels; R (a residual of Y's shape) is added after the
                           bias, before the activation.

The activation comes from the attributes of aotc/passes/activation.py and runs in the
product's tile epilogue (aotc_activation in runtime_c/aotc_activation.h): bias first, one
rounded add, then the activation's own arithmetic, so the fused graph gives the bits of
the separate operators. Constant evaluation reuses the standalone operators' numpy.
"""
import numpy as np

from .. import dtypes
from ..ir import AOTC_DOMAIN
from . import activations, conv, gelu
from .base import OpDef, TensorType, c_float
from .matmul import pack_b, sgemm_packed_scratch_bytes

class _ActivationNode:
    """The activation as its standalone operator sees it: ONNX attribute names, a float32
    input, Clip's bounds as attributes (the opset 6 form)."""
    opset = 6

    def __init__(self, ctx, op_type):
        self.op_type = op_type
        self._attrs = {"alpha": ctx.attr("activation_alpha"), "beta": ctx.attr("activation_beta"),
                       "min": ctx.attr("clip_min"),
                       "max": ctx.attr("clip_max"), "approximate": ctx.attr("gelu_approximate", "none")}
        if isinstance(self._attrs["approximate"], bytes):
            self._attrs["approximate"] = self._attrs["approximate"].decode()
        self.inputs = [TensorType(np.dtype(np.float32), ())]

    def attr(self, key, default=None):
        value = self._attrs.get(key)
        return default if value is None else value

    def fail(self, message):
        return ValueError(message)


def _activation(ctx):
    """The activation's node view, or None without one; unknown values fail here."""
    name = ctx.attr("activation")
    if isinstance(name, bytes):
        name = name.decode()
    if name is None or name == "":
        return None
    if name not in activations.EPILOGUE_KINDS:
        raise ctx.unsupported(f"activation {name!r} (supported: {', '.join(activations.EPILOGUE_KINDS)})")
    node = _ActivationNode(ctx, name)
    if name == "Gelu" and node.attr("approximate") not in ("none", "tanh"):
        raise ctx.fail(f"gelu_approximate={node.attr('approximate')!r}; expected 'none' or 'tanh'")
    return node


def activation_struct(ctx):
    """A `const aotc_activation *` C expression for the node's activation, or NULL."""
    node = _activation(ctx)
    if node is None:
        return "NULL"
    kind, a, b = activations.epilogue_params(node.op_type, node.attr)
    return f"(&(const aotc_activation){{AOTC_ACT_{kind}, {c_float(a)}, {c_float(b)}}})"


def activation_expression(ctx, x="X"):
    """The activation as one C float expression over `x` (AOTC_ACTIVATION of aotc_activation.h)."""
    node = _activation(ctx)
    if node is None:
        return x
    return activations.epilogue_expression(*activations.epilogue_params(node.op_type, node.attr), x=x)


def apply_activation(ctx, y):
    """The activation on a float32 array, with the standalone operator's numpy."""
    node = _activation(ctx)
    if node is None:
        return y
    with np.errstate(all="ignore"):
        if node.op_type == "Gelu":
            return gelu.evaluate(node, [y])[0]
        if node.op_type == "Clip":
            return activations.clip_evaluate(node, [y])[0]
        return activations.ACTIVATIONS[node.op_type].numpy(node, y).astype(np.float32)


# ---- Linear --------------------------------------------------------------------------

def _linear_dims(ctx):
    """(rows M, N, K) of the product; checks the operands."""
    ctx.require_inputs(2, 3)
    ctx.require_dtype(0, (np.float32,))
    a = ctx.inputs[0]
    if a.rank < 1:
        raise ctx.fail("A must have rank >= 1")
    b = ctx.const_input(1, "B")
    if b.ndim != 2 or b.dtype != np.float32:
        raise ctx.unsupported(f"B must be a 2-D float32 constant, has shape {list(b.shape)} "
                              f"and element type {dtypes.name(b.dtype)}")
    K, N = (int(d) for d in b.shape)
    if a.shape[-1] != K:
        raise ctx.fail(f"A's last dim {a.shape[-1]} differs from B's rows {K}")
    if ctx.has_input(2):
        bias = ctx.inputs[2]
        if tuple(bias.shape) != (N,) or np.dtype(bias.dtype) != np.float32:
            raise ctx.fail(f"bias must be float32 [{N}], has {dtypes.name(bias.dtype)} {list(bias.shape)}")
    return int(np.prod(a.shape[:-1], dtype=np.int64)), N, K


def _linear_infer(ctx):
    _, N, _ = _linear_dims(ctx)
    _activation(ctx)
    return [TensorType(np.dtype(np.float32), tuple(ctx.inputs[0].shape[:-1]) + (N,))]


def _linear_evaluate(ctx, arrays):
    y = np.matmul(arrays[0], arrays[1]).astype(np.float32)
    if len(arrays) > 2 and arrays[2] is not None:
        y = y + arrays[2]
    return [apply_activation(ctx, y).astype(np.float32)]


def _linear_scratch(ctx):
    M, N, K = _linear_dims(ctx)
    return sgemm_packed_scratch_bytes(M, N, K)


def _linear_emit(ctx):
    M, N, K = _linear_dims(ctx)
    if M * N == 0:
        return ""
    packed = ctx.const(pack_b(ctx.const_input(1, "B")))
    bias = ctx.x(2) if ctx.has_input(2) else "NULL"
    return (f"aotc_sgemm_packed_act({ctx.pool}, {M}, {N}, {K}, {ctx.x(0)}, {K}, 0, {packed}, "
            f"{ctx.y(0)}, {N}, NULL, {bias}, {activation_struct(ctx)}, {ctx.scratch});")


# ---- FusedConv -----------------------------------------------------------------------

# the activations whose expression is plain arithmetic exact in double too
DOUBLE_ACTIVATIONS = ("Relu", "LeakyRelu")


def _conv_infer(ctx):
    node = _activation(ctx)
    if (node is not None and np.dtype(ctx.inputs[0].dtype) == np.float64
            and node.op_type not in DOUBLE_ACTIVATIONS):
        raise ctx.unsupported(f"a fused {node.op_type} on a double conv (double supports "
                              f"{', '.join(DOUBLE_ACTIVATIONS)})")
    return conv.infer(ctx)


def _conv_emit(ctx):
    if np.dtype(ctx.inputs[0].dtype) != np.float64 or _activation(ctx) is None:
        return conv.emit_conv(ctx, activation_struct(ctx))
    y, n = ctx.y(0), ctx.outputs[0].numel
    return (conv.emit_conv(ctx) + f"\n{{ int64_t i; for (i = 0; i < {n}; i++) "
            f"{y}[i] = AOTC_CANON_F64({activation_expression(ctx, f'{y}[i]')}); }}")


OPS = [
    OpDef("Linear", _linear_infer, _linear_emit, _linear_evaluate, scratch=_linear_scratch,
          domain=AOTC_DOMAIN, since=1, supports_exact=True),
    OpDef("FusedConv", _conv_infer, _conv_emit, scratch=conv.scratch, domain=AOTC_DOMAIN, since=1,
          supports_exact=True, in_place_inputs=conv.residual_in_place, stores_fast=conv.stores_fast),
]
