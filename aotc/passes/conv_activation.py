"""conv-activation: Conv -> activation (see activation.py) becomes one ai.aotc FusedConv,
whose bias and activation run in the convolution's tile epilogue. Preserves bits: the
activation is the operator's own arithmetic on the same values."""
from ..ir import Node
from .activation import activation_attrs
from .graph_tools import Rewrite
from .patterns import Matcher

NAME = "conv-activation"


def run(graph, ctx):
    m = Matcher(graph)
    rewrite = Rewrite()
    for conv in graph.nodes:
        if conv.op_type != "Conv" or conv.domain:
            continue
        act = m.only_user(conv.outputs[0])
        attrs = activation_attrs(m, act) if act is not None else None
        if attrs is not None:
            rewrite.replace([conv], act, Node("FusedConv", conv.name, list(conv.inputs),
                                              [act.outputs[0]], {**conv.attrs, **attrs}, "ai.aotc"))
    return rewrite.apply(graph)
