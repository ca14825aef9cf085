"""Fusions that hinge on shapes, so they run in the plan once types are known (a graph
pass never sees shapes).

conv-residual: Conv -> Add [-> activation] becomes one ai.aotc FusedConv(X, W, B, R)
whose epilogue adds R, the Add's other operand, after the bias and before the
activation, when R has exactly the conv output's shape and type (an Add that broadcasts
stays an Add). The residual blocks of ResNet and MobileNetV2 are this pattern: the sum
is formed while the conv's tile is still in registers or cache, instead of in another
pass over memory. Preserves bits: the same adds, in the same order, each rounded once.
"""
import numpy as np

from ..ir import AOTC_DOMAIN, Node
from ..passes.activation import activation_attrs
from ..passes.graph_tools import Rewrite
from ..passes.patterns import Matcher

CONV_RESIDUAL = "conv-residual"


def fuse_residual_adds(graph, types):
    """Rewrite graph in place; returns how many Adds went into a conv."""
    m = Matcher(graph)
    rewrite = Rewrite()
    for add in graph.nodes:
        if add.op_type != "Add" or add.domain or len(add.inputs) != 2 or rewrite.claimed(add):
            continue
        for made, residual in (add.inputs, add.inputs[::-1]):
            conv = m.producer.get(made)
            if (conv is None or rewrite.claimed(conv) or made == residual
                    or m.only_user(made) is not add or not _fusable(conv, made, residual, types)):
                continue
            act = m.only_user(add.outputs[0])
            attrs = activation_attrs(m, act) if act is not None else None
            last = act if attrs is not None else add
            members = [conv, add] + ([act] if attrs is not None else [])
            inputs = (list(conv.inputs) + ["", ""])[:3] + [residual]
            rewrite.replace(members, last, Node("FusedConv", conv.name, inputs, [last.outputs[0]],
                                                {**conv.attrs, **(attrs or {})}, AOTC_DOMAIN))
            break
    if rewrite.count:
        graph.opsets.setdefault(AOTC_DOMAIN, 1)
    return rewrite.apply(graph)


def _fusable(conv, made, residual, types):
    """A float32 conv with no residual nor activation of its own, not folded to a
    constant, whose output has the residual's shape and type."""
    if not ((conv.op_type == "Conv" and not conv.domain)
            or (conv.op_type == "FusedConv" and conv.domain == AOTC_DOMAIN
                and len(conv.inputs) < 4 and conv.attr("activation") is None)):
        return False
    y, r, x = types[made], types[residual], types[conv.inputs[0]]
    return (np.dtype(x.dtype) == np.float32 and np.dtype(y.dtype) == np.float32
            and np.dtype(r.dtype) == np.float32 and tuple(r.shape) == tuple(y.shape)
            and y.value is None)
