"""Einsum and Det.

Einsum: the equation is resolved at compile time into labels (one per letter, one per
ellipsis dim), the output labels first in output order, then the summed ones, and per
operand one element stride per label (runtime_c/aotc_linalg.h). Repeated letters in an
operand take diagonals (their strides add up); ellipsis dims broadcast numpy-style (a
size-1 dim gets stride 0); ellipsis dims absent from an explicit output are summed.
Det: LU with partial pivoting in double, one matrix at a time.
"""
import math

import numpy as np

from .. import dtypes
from .base import OpDef, TensorType, c_ints, strides

MAX_OPERANDS = 16       # AOTC_EINSUM_MAX_OPERANDS
MAX_LABELS = 64         # AOTC_EINSUM_MAX_LABELS
ELLIPSIS = "..."


def _split_term(ctx, term, what):
    """The letters of one term, with None standing for the ellipsis."""
    if term.count(ELLIPSIS) > 1:
        raise ctx.fail(f"{what} {term!r} has more than one ellipsis")
    before, _, after = term.partition(ELLIPSIS)
    out = list(before) + ([None] if ELLIPSIS in term else []) + list(after)
    for c in out:
        if c is not None and not (c.isascii() and c.isalpha()):
            raise ctx.fail(f"{what} {term!r} holds {c!r}; only letters and '...' are allowed")
    return out


def _parse(ctx):
    """(labels of the output in order, summed labels, extents per label, per operand the
    label of each of its dims). Ellipsis dims are the labels 0, 1, ... (right-aligned)."""
    equation = ctx.attr("equation")
    if equation is None:
        raise ctx.fail("Einsum needs the equation attribute")
    equation = (equation.decode() if isinstance(equation, bytes) else str(equation)).replace(" ", "")
    lhs, arrow, rhs = equation.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ctx.inputs):
        raise ctx.fail(f"equation {equation!r} has {len(terms)} operand terms for "
                       f"{len(ctx.inputs)} inputs")
    ellipsis_rank = 0
    operand_labels = []
    for i, term in enumerate(terms):
        letters = _split_term(ctx, term, f"operand term {i}")
        rank = ctx.inputs[i].rank
        named = len([c for c in letters if c is not None])
        if None in letters:
            if named > rank:
                raise ctx.fail(f"operand {i} has rank {rank}, fewer than the {named} letters of {term!r}")
            ellipsis_rank = max(ellipsis_rank, rank - named)
        elif named != rank:
            raise ctx.fail(f"operand {i} has rank {rank}, but its term {term!r} names {named} dims")
        operand_labels.append(letters)
    # expand each ellipsis into right-aligned integer labels
    dims_of = []
    for i, letters in enumerate(operand_labels):
        rank = ctx.inputs[i].rank
        k = rank - len([c for c in letters if c is not None])
        expanded = []
        for c in letters:
            expanded += list(range(ellipsis_rank - k, ellipsis_rank)) if c is None else [c]
        dims_of.append(expanded)

    extents = {}
    for i, labels in enumerate(dims_of):
        for label, n in zip(labels, ctx.inputs[i].shape):
            old = extents.get(label)
            if old is None or old == 1 and isinstance(label, int):
                extents[label] = int(n)
            elif old != n and not (isinstance(label, int) and n == 1):
                raise ctx.fail(f"{'an ellipsis dim' if isinstance(label, int) else repr(label)} "
                               f"is {old} in one place and {n} in operand {i}")

    letters_seen = [c for labels in dims_of for c in labels if isinstance(c, str)]
    if arrow:
        out_letters = _split_term(ctx, rhs, "the output term")
        if None in out_letters and ellipsis_rank == 0 and ELLIPSIS not in lhs:
            raise ctx.fail("the output term has an ellipsis the operands do not")
        out = []
        for c in out_letters:
            if c is None:
                out += list(range(ellipsis_rank))
            elif c not in extents:
                raise ctx.fail(f"output letter {c!r} appears in no operand")
            elif c in out:
                raise ctx.fail(f"output letter {c!r} appears twice")
            else:
                out.append(c)
    else:
        once = sorted(c for c in set(letters_seen) if letters_seen.count(c) == 1)
        out = list(range(ellipsis_rank)) + once
    summed = [label for label in extents if label not in out]
    return out, summed, extents, dims_of


def _einsum_infer(ctx):
    if not ctx.inputs or any(t is None for t in ctx.inputs):
        raise ctx.fail("Einsum needs at least one input and no omitted ones")
    ctx.require_dtype(0, dtypes.NUMERIC)
    for i, t in enumerate(ctx.inputs):
        if t.dtype != ctx.inputs[0].dtype:
            raise ctx.fail(f"input {i} is {dtypes.name(t.dtype)}, input 0 is "
                           f"{dtypes.name(ctx.inputs[0].dtype)}")
    if len(ctx.inputs) > MAX_OPERANDS:
        raise ctx.unsupported(f"Einsum of {len(ctx.inputs)} operands (at most {MAX_OPERANDS})")
    out, summed, extents, _ = _parse(ctx)
    if len(out) + len(summed) > MAX_LABELS:
        raise ctx.unsupported(f"Einsum over {len(out) + len(summed)} labels (at most {MAX_LABELS})")
    return [TensorType(ctx.inputs[0].dtype, tuple(extents[label] for label in out))]


def _einsum_evaluate(ctx, arrays):
    out, summed, _, dims_of = _parse(ctx)
    names = {}
    for label in out + summed:
        names[label] = len(names)
    compute = dtypes.compute_dtype(arrays[0].dtype)
    operands = []
    for a, labels in zip(arrays, dims_of):
        operands += [a.astype(compute, copy=False), [names[label] for label in labels]]
    with np.errstate(all="ignore"):
        y = np.einsum(*operands, [names[label] for label in out])
    return [np.asarray(y).astype(arrays[0].dtype)]


def _einsum_emit(ctx):
    y = ctx.outputs[0]
    if y.numel == 0:
        return ""
    out, summed, extents, dims_of = _parse(ctx)
    labels = out + summed
    operand_strides = []
    for t, dims in zip(ctx.inputs, dims_of):
        per_label = dict.fromkeys(labels, 0)
        for label, n, s in zip(dims, t.shape, strides(t.shape)):
            if n != 1:            # a size-1 dim contributes nothing (and may be broadcast)
                per_label[label] += s
        operand_strides += [per_label[label] for label in labels]
    ct = dtypes.c_kernel_type(y.dtype)
    pointers = ", ".join(ctx.x(i) for i in range(len(ctx.inputs)))
    return (f"AOTC_EINSUM({ct}, {ctx.y(0)}, ((const {ct} *const[]){{{pointers}}}), "
            f"{len(ctx.inputs)}, {len(out)}, {len(labels)}, "
            f"{c_ints([extents[label] for label in labels])}, {c_ints(operand_strides)});")


# ---- Det ----------------------------------------------------------------------------

def _det_infer(ctx):
    ctx.require_inputs(1)
    ctx.require_dtype(0, dtypes.FLOATS)
    x = ctx.inputs[0]
    if x.rank < 2 or x.shape[-1] != x.shape[-2]:
        raise ctx.fail(f"Det needs square matrices [..., M, M], not {list(x.shape)}")
    return [TensorType(x.dtype, x.shape[:-2])]


def _det_evaluate(ctx, arrays):
    x = arrays[0]
    return [np.asarray(np.linalg.det(x.astype(np.float64))).astype(x.dtype)]


def _det_emit(ctx):
    x = ctx.inputs[0]
    batch, n = math.prod(x.shape[:-2]), x.shape[-1]
    if batch == 0:
        return ""
    return (f"AOTC_DET({dtypes.c_kernel_type(x.dtype)}, {ctx.y(0)}, {ctx.x(0)}, "
            f"INT64_C({batch}), INT64_C({n}), {ctx.scratch if n else 'NULL'});")


OPS = [
    OpDef("Einsum", _einsum_infer, _einsum_emit, _einsum_evaluate, since=12, checked_through=28,
          supports_exact=True),
    OpDef("Det", _det_infer, _det_emit, _det_evaluate, since=11, checked_through=28,
          scratch=lambda ctx: 8 * ctx.inputs[0].shape[-1] ** 2, supports_exact=True),
]
