"""The operator contract: what one operator (or family) tells the compiler.

An operator module defines `OPS`, a list of OpDef, and is named once in
`aotc/ops/__init__.py`. The plan calls `infer` (and `evaluate` for constant inputs);
codegen calls `emit` with an EmitContext. Operators never see codegen internals:
everything they need to write C comes through the context.
"""
import math
from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np

from .. import dtypes
from ..errors import InvalidModel, NotConstant, Unsupported


@dataclass
class TensorType:
    """Element type and concrete shape of a value; `value` is set when it is a
    compile-time constant."""
    dtype: np.dtype
    shape: tuple
    value: Optional[np.ndarray] = None

    @property
    def numel(self):
        return math.prod(int(d) for d in self.shape)   # Python ints: no silent wrap-around

    @property
    def nbytes(self):
        return self.numel * np.dtype(self.dtype).itemsize

    @property
    def rank(self):
        return len(self.shape)

    @staticmethod
    def of(array):
        array = np.asarray(array)
        return TensorType(array.dtype, tuple(int(d) for d in array.shape), array)


@dataclass(frozen=True)
class OpDef:
    """One operator type.

    infer(ctx) -> list of TensorType for the outputs (with `value` set for outputs that
        are constant for these shapes, e.g. Shape).
    evaluate(ctx, arrays) -> list of numpy arrays: the operator on constant inputs, used
        for constant evaluation at compile time. None: never folded.
    emit(ctx) -> C statements for one node (see EmitContext). None for views.
    scratch(ctx) -> bytes of workspace scratch the emitted code needs during the node.
    """
    op_type: str
    infer: Callable
    emit: Optional[Callable] = None
    evaluate: Optional[Callable] = None
    scratch: Optional[Callable] = None
    domain: str = ""
    since: int = 1                       # lowest opset version implemented
    checked_through: int = 22            # newest opset whose definition this follows
    supports_exact: object = False       # bool, or a function of the OpContext
    in_place_inputs: object = ()         # inputs whose storage output 0 may take over: a
                                         # tuple, or a function of the OpContext giving one
    view_of_input: bool = False          # output 0 is input 0 reinterpreted; never emitted
    # output 0 stores much for little arithmetic (a depthwise conv): not placed where
    # the last steps freed (aotc/plan/memory.py, COOL_STEPS). A bool, or a function of
    # the OpContext giving one.
    stores_fast: object = False
    # outputs whose shape depends on the data (NonZero, Unique ...): True (all), False, or
    # a function of the OpContext giving a bool or the list of such output indices. They
    # are planned at an upper bound; the kernel stores the actual shape through ctx.dims(k).
    outputs_data_dependent: object = False


def in_place_inputs(op, ctx):
    """The inputs whose storage output 0 may take over for this node."""
    return op.in_place_inputs(ctx) if callable(op.in_place_inputs) else op.in_place_inputs


def stores_fast(op, ctx):
    """Whether op's kernel for this node stores output 0 faster than the cores can take
    over lines that other cores hold (OpDef.stores_fast)."""
    return op.stores_fast(ctx) if callable(op.stores_fast) else bool(op.stores_fast)


def exact_available(op, ctx):
    """Whether op has an exact kernel for this node (its types and attributes)."""
    return op.supports_exact(ctx) if callable(op.supports_exact) else bool(op.supports_exact)


class OpContext:
    """What an operator sees of one node: its attributes, input types and opset."""

    def __init__(self, node, inputs, opset, mode="fast"):
        self.node = node
        self.inputs = inputs            # TensorType, or None for an omitted optional input
        self.opset = opset
        self.mode = mode
        self.outputs = None             # set once infer has run

    def attr(self, key, default=None):
        return self.node.attrs.get(key, default)

    def fail(self, message):
        """An InvalidModel naming this node; `raise ctx.fail(...)`."""
        return InvalidModel(message, self.node.name)

    def unsupported(self, message):
        return Unsupported(message, self.node.name)

    def has_input(self, i):
        return i < len(self.inputs) and self.inputs[i] is not None

    def const_input(self, i, what="this input"):
        """The value of input i, which must be known at compile time."""
        t = self.inputs[i] if self.has_input(i) else None
        if t is None or t.value is None:
            value = self.node.inputs[i] if i < len(self.node.inputs) else ""
            raise NotConstant(f"input {i} ({what}) must be a compile-time constant",
                              self.node.name, value)
        return t.value

    def require_inputs(self, low, high=None):
        """The first `low` inputs must be present; at most `high` (default `low`) exist."""
        high = low if high is None else high
        if not low <= len(self.inputs) <= high:
            raise self.fail(f"expects {low} to {high} inputs, has {len(self.inputs)}")
        for i in range(low):
            if self.inputs[i] is None:
                raise self.fail(f"input {i} is required")

    def require_dtype(self, i, allowed):
        dt = np.dtype(self.inputs[i].dtype)
        if dt not in [np.dtype(a) for a in allowed]:
            raise self.unsupported(f"input {i} has element type {dtypes.name(dt)}, "
                                   f"supported: {', '.join(dtypes.name(a) for a in allowed)}")
        return dt

    def axis(self, axis, rank, what="axis"):
        """A possibly negative axis, normalized and checked against the rank."""
        axis = int(axis)
        if not -rank <= axis < max(rank, 1):
            raise self.fail(f"{what} {axis} is out of range for rank {rank}")
        return axis + rank if axis < 0 else axis


class EmitContext(OpContext):
    """OpContext plus what an operator needs to write C for its node.

    x(i), y(i): C pointer expressions of input i (const T *) and output i (T *); a
        constant input reaches the weights only if its pointer is asked for.
    const(array): a C pointer expression to an extra constant placed in the weights.
    scratch: a `unsigned char *` expression for the node's scratch, if it asked for any.
    pool: the thread-pool expression to pass to parallel kernels.
    target: the GEMM path the C is generated for ("avx512", "avx2" or "generic"): the
        layout of what is packed here for it (matmul.PANEL_ROWS).
    dims(k): for an output whose shape depends on the data, a C `int64_t *` where the
        node stores its actual shape; None for other outputs.
    task_function(body): defines `static void NAME(void *arg, int64_t t) { body }` at
        file scope (for aotc_parallel_for) and returns NAME.
    """

    def __init__(self, op_ctx, x_pointer, y_pointer, add_const, scratch, pool, exact, target):
        super().__init__(op_ctx.node, op_ctx.inputs, op_ctx.opset, op_ctx.mode)
        self.outputs = op_ctx.outputs
        self._x, self._y, self._add_const = x_pointer, y_pointer, add_const
        self.scratch = scratch
        self.pool = pool
        self.exact = exact
        self.target = target
        self.dims = lambda k: None
        self.task_function = None

    def x(self, i):
        return self._x(i)

    def y(self, i=0):
        return self._y(i)

    def const(self, array):
        return self._add_const(np.ascontiguousarray(array))


# ---- helpers shared by operator modules -------------------------------------------

def broadcast_shapes(ctx, *shapes):
    try:
        return tuple(int(d) for d in np.broadcast_shapes(*shapes))
    except ValueError:
        raise ctx.fail(f"shapes {', '.join(str(list(s)) for s in shapes)} do not broadcast") from None


def c_ints(values):
    """A C99 compound literal of int64 values (parenthesized: safe as a macro argument)."""
    values = [int(v) for v in values]
    if not values:
        return "(const int64_t *)0"
    return "((const int64_t[]){" + ", ".join(str(v) for v in values) + "})"


def c_float(value):
    """A float literal that round-trips exactly, with the runtime's macros for inf/nan."""
    v = float(np.float32(value))
    if np.isnan(v):
        return "AOTC_NAN"
    if np.isinf(v):
        return "AOTC_INF" if v > 0 else "(-AOTC_INF)"
    return f"{v!r}f" if "e" in repr(v) or "." in repr(v) else f"{v!r}.0f"


def c_double(value):
    v = float(value)
    if np.isnan(v):
        return "((double)AOTC_NAN)"
    if np.isinf(v):
        return "((double)AOTC_INF)" if v > 0 else "(-(double)AOTC_INF)"
    r = repr(v)
    return r if ("e" in r or "." in r) else r + ".0"


def strides(shape):
    """Row-major element strides of a shape."""
    out, acc = [], 1
    for d in reversed(shape):
        out.append(acc)
        acc *= int(d)
    return tuple(reversed(out))


def same_as_input(i=0):
    """An infer for operators whose single output has input i's type and shape."""
    def infer(ctx):
        t = ctx.inputs[i]
        return [TensorType(t.dtype, t.shape)]
    return infer


def single(fn):
    """Wrap a numpy function of the input arrays into an `evaluate`."""
    return lambda ctx, arrays: [np.asarray(fn(ctx, *arrays))]

