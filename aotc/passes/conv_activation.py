"""conv-activation: Conv -> activation (see activation.py) becomes one ai.aotc FusedConv,
whose bias and activation run in the convolution's tile epilogue. Preserves bits: the
activation is the operator's own arithmetic on the same values."""
import numpy as np

from ..ir import AOTC_DOMAIN, Node
from .activation import activation_attrs
from .graph_tools import Rewrite
from .patterns import Matcher

NAME = "conv-activation"


# the activations the double-precision conv kernel applies in its epilogue
DOUBLE_EPILOGUE = ("Relu", "LeakyRelu")


def run(graph, ctx):
    m = Matcher(graph)
    rewrite = Rewrite()
    for conv in graph.nodes:
        if conv.op_type != "Conv" or conv.domain:
            continue
        act = m.only_user(conv.outputs[0])
        attrs = activation_attrs(m, act) if act is not None else None
        if attrs is not None and attrs["activation"] not in DOUBLE_EPILOGUE \
                and m.element_type(conv.inputs[1]) == np.float64:
            ctx.note(NAME, conv, f"a double conv's epilogue has no {attrs['activation']}")
            continue
        if attrs is not None:
            rewrite.replace([conv], act, Node("FusedConv", conv.name, list(conv.inputs),
                                              [act.outputs[0]], {**conv.attrs, **attrs}, AOTC_DOMAIN))
    return rewrite.apply(graph)
