"""conv-batchnorm-fold: Conv -> BatchNormalization with constant statistics becomes one
Conv with W' = W * s per output channel and b' = (b - mean) * s + beta, where
s = scale / sqrt(var + epsilon), computed in double precision and rounded once.

Does not preserve bits: the scale moves before the sum.
"""
import numpy as np

from ..ir import Node
from .graph_tools import Rewrite, fresh_name
from .patterns import Matcher

NAME = "conv-batchnorm-fold"


def run(graph, ctx):
    m = Matcher(graph)
    rewrite = Rewrite()
    for bn in graph.nodes:
        if bn.op_type != "BatchNormalization" or bn.domain:
            continue
        conv = m.made_by(bn.inputs[0], "Conv")
        reason = _refusal(m, conv, bn)
        if reason:
            if conv is not None:
                ctx.note(NAME, bn, reason)
            continue
        rewrite.replace([conv], bn, _folded(graph, m, conv, bn))
    return rewrite.apply(graph)


def _refusal(m, conv, bn):
    if conv is None:
        return "input is not made by a Conv"
    if len([o for o in bn.outputs if o]) != 1 or bn.attr("training_mode", 0):
        return "training-mode BatchNormalization"
    if m.only_user(conv.outputs[0]) is not bn:
        return "the Conv output has another reader"
    if m.constant(conv.inputs[1]) is None or (len(conv.inputs) > 2 and conv.inputs[2]
                                              and m.constant(conv.inputs[2]) is None):
        return "the Conv weights are not constant"
    if any(m.constant(v) is None for v in bn.inputs[1:5]):
        return "the statistics are not constant"
    w = m.constant(conv.inputs[1])
    if w.dtype != np.float32 or any(m.constant(v).shape != (w.shape[0],) for v in bn.inputs[1:5]):
        return "the statistics do not match the Conv's output channels"
    return None


def _folded(graph, m, conv, bn):
    w = m.constant(conv.inputs[1]).astype(np.float64)
    scale, beta, mean, var = (m.constant(v).astype(np.float64) for v in bn.inputs[1:5])
    bias = (m.constant(conv.inputs[2]).astype(np.float64)
            if len(conv.inputs) > 2 and conv.inputs[2] else np.zeros(w.shape[0]))
    s = scale / np.sqrt(var + float(bn.attr("epsilon", 1e-5)))
    w_name = fresh_name(graph, conv.inputs[1] + "_bnfolded")
    graph.initializers[w_name] = (w * s.reshape((-1,) + (1,) * (w.ndim - 1))).astype(np.float32)
    b_name = fresh_name(graph, (conv.inputs[2] if len(conv.inputs) > 2 and conv.inputs[2]
                                else conv.name) + "_bnfolded_bias")
    graph.initializers[b_name] = ((bias - mean) * s + beta).astype(np.float32)
    return Node("Conv", conv.name, [conv.inputs[0], w_name, b_name], [bn.outputs[0]],
                dict(conv.attrs), conv.domain)
