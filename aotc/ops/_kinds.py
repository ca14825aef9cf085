"""Helpers for operators whose kernels take any floating type through a run-time kind
(runtime_c/aotc_kinds.h) and their arguments as one C struct."""
import numpy as np

from .. import dtypes

_KINDS = {np.dtype(np.float32): "AOTC_KIND_F32", np.dtype(np.float64): "AOTC_KIND_F64",
          dtypes.FLOAT16: "AOTC_KIND_F16", dtypes.BFLOAT16: "AOTC_KIND_BF16",
          np.dtype(np.bool_): "AOTC_KIND_BOOL"}


def c_kind(dtype):
    """The runtime's element-kind constant of a floating (or bool) dtype."""
    return _KINDS[np.dtype(dtype)]


def output_wanted(ctx, i):
    """True when the node names its output i."""
    outs = ctx.node.outputs
    return len(outs) > i and bool(outs[i])


def input_or_null(ctx, i):
    return ctx.x(i) if ctx.has_input(i) else "NULL"


def output_or_null(ctx, i):
    return ctx.y(i) if output_wanted(ctx, i) else "NULL"


def struct_call(struct, function, fields, extra_args=(), may_fail=False):
    """C that fills a `struct` with designated initializers ({name: C expression, or a
    list of ints for an array member}) and calls `function(*extra_args, &args)`; with
    may_fail, the function returns an error code that ends the run."""
    inits = ",\n    ".join(
        f".{name} = {{{', '.join(str(int(x)) for x in value)}}}" if isinstance(value, (list, tuple))
        else f".{name} = {value}" for name, value in fields.items())
    args = ", ".join(list(extra_args) + ["&args"])
    call = f"{function}({args})"
    call = f"{{ const int err = {call}; if (err) return err; }}" if may_fail else call + ";"
    return f"{{\n  const {struct} args = {{\n    {inits}}};\n  {call}\n}}"
