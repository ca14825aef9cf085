"""conv-activation: Conv -> activation (see activation.py) becomes one ai.aotc FusedConv,
whose bias and activation run in the convolution's tile epilogue. Preserves bits: the
activation is the operator's own arithmetic on the same values."""
from ..ir import Node
from .activation import activation_attrs
from .patterns import Matcher

NAME = "conv-activation"


def run(graph, ctx):
    m = Matcher(graph)
    replaced = {}
    for conv in graph.nodes:
        if conv.op_type != "Conv" or conv.domain:
            continue
        act = m.only_user(conv.outputs[0])
        attrs = activation_attrs(m, act) if act is not None else None
        if attrs is None:
            continue
        replaced[id(conv)] = None
        replaced[id(act)] = Node("FusedConv", conv.name, list(conv.inputs), [act.outputs[0]],
                                 {**conv.attrs, **attrs}, "ai.aotc")
    if replaced:
        graph.nodes = [n for n in (replaced.get(id(n), n) for n in graph.nodes) if n is not None]
    return sum(1 for v in replaced.values() if v is not None)
