"""constant-fold: evaluate every node whose inputs are all constants, once, through the
operator's own `evaluate`, and keep the result as an initializer.

Skips nodes whose outputs are graph outputs (they must still be produced by the run),
operators without an `evaluate` or with data-dependent outputs, and results larger than
both their inputs and 64 KiB (seed 001, 3.2). Preserves bits: the same arithmetic runs,
only earlier.
"""
import numpy as np

from .. import ops
from ..ops.base import OpContext, TensorType
from ..plan.shapes import FOLD_LIMIT_BYTES

NAME = "constant-fold"


def run(graph, ctx):
    outputs = {vi.name for vi in graph.outputs}
    folded = 0
    kept = []
    for node in graph.nodes:
        values = _fold(graph, node, outputs, ctx.mode)
        if values is None:
            kept.append(node)
            continue
        for name, value in zip(node.outputs, values):
            if name:
                graph.initializers[name] = value
        folded += 1
    graph.nodes = kept
    return folded


def _fold(graph, node, graph_outputs, mode):
    op = ops.find(node.domain, node.op_type, graph.opset(node.domain))
    if op is None or op.outputs_data_dependent:
        return None
    if any(o in graph_outputs for o in node.outputs) or any(
            v and v not in graph.initializers for v in node.inputs):
        return None
    inputs = [TensorType.of(graph.initializers[v]) if v else None for v in node.inputs]
    ctx = OpContext(node, inputs, graph.opset(node.domain), mode)
    try:
        ctx.outputs = op.infer(ctx)
    except Exception:   # the plan reports the model's errors with full context
        return None
    limit = max([FOLD_LIMIT_BYTES] + [t.nbytes for t in inputs if t is not None])
    if any(t.nbytes > limit for t in ctx.outputs):
        return None
    if all(t.value is not None for t in ctx.outputs):
        return [t.value for t in ctx.outputs]
    if op.evaluate is None:
        return None
    values = op.evaluate(ctx, [t.value if t is not None else None for t in inputs])
    return [np.asarray(np.asarray(v).astype(t.dtype, copy=False), order="C")
            for v, t in zip(values, ctx.outputs)]
