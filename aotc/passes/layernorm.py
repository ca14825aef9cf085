"""layernorm: LayerNormalization written out by pre-opset-17 exporters becomes one node.

    mean = ReduceMean(x, axes=[-1]);  d = Sub(x, mean)
    var  = ReduceMean(Pow(d, 2), axes=[-1]);  y = Div(d, Sqrt(Add(var, eps)))
    y = Mul(y, gamma)  [ y = Add(y, beta) ]

becomes LayerNormalization(x, gamma, beta, axis=-1, epsilon=eps) in the ai.aotc domain
(any opset). Only the last axis is fused: without shapes a positive axis is ambiguous.
"""
from ..ir import AOTC_DOMAIN, Node
from .graph_tools import Rewrite
from .patterns import Matcher, other_input

NAME = "layernorm"


def run(graph, ctx):
    m = Matcher(graph)
    rewrite = Rewrite()
    for mean in graph.nodes:
        if mean.op_type != "ReduceMean" or mean.domain or rewrite.claimed(mean):
            continue
        match = _match(m, mean, ctx)
        if match is None or rewrite.any_claimed(match[0]):
            continue
        members, last, x, gamma, beta, eps = match
        rewrite.replace(members, last, Node("LayerNormalization", last.name,
                                            [x, gamma] + ([beta] if beta else []), [last.outputs[0]],
                                            {"axis": -1, "epsilon": eps}, AOTC_DOMAIN))
    return rewrite.apply(graph)


def _last_axis_only(node, m, opset):
    if opset >= 18 and len(node.inputs) > 1 and node.inputs[1]:
        axes = m.constant(node.inputs[1])
        axes = None if axes is None else axes.reshape(-1).tolist()
    else:
        axes = node.attr("axes")
    return axes is not None and list(axes) == [-1] and node.attr("keepdims", 1) == 1


def _match(m, mean, ctx):
    opset = m.graph.opset("")
    x = mean.inputs[0]
    sub = m.only_user(mean.outputs[0], "Sub")
    if sub is None or sub.inputs != [x, mean.outputs[0]]:
        return None
    if not _last_axis_only(mean, m, opset):
        ctx.note(NAME, mean, "the mean is not over the last axis alone")
        return None
    d = sub.outputs[0]
    users = m.users.get(d, [])
    pow_ = next((n for n in users if n.op_type == "Pow" and n.inputs[0] == d and m.is_scalar(n.inputs[1], 2.0)), None)
    div = next((n for n in users if n.op_type == "Div" and n.inputs[0] == d), None)
    if pow_ is None or div is None or len(users) != 2:
        return None
    var = m.only_user(pow_.outputs[0], "ReduceMean")
    add = m.only_user(var.outputs[0], "Add") if var is not None and _last_axis_only(var, m, opset) else None
    eps = m.scalar(other_input(add, var.outputs[0])) if add is not None else None
    sqrt = m.only_user(add.outputs[0], "Sqrt") if eps is not None else None
    if sqrt is None or m.only_user(sqrt.outputs[0]) is not div:
        return None
    # The scale must be a vector over the last axis (a scalar could broadcast where a
    # LayerNormalization scale cannot).
    mul = m.only_user(div.outputs[0], "Mul")
    gamma = other_input(mul, div.outputs[0]) if mul is not None else None
    if gamma is None or not _vector(m.constant(gamma)):
        ctx.note(NAME, mean, "no constant scale vector follows the normalization")
        return None
    members, last, beta = [mean, sub, pow_, var, add, sqrt, div, mul], mul, None
    add_beta = m.only_user(mul.outputs[0], "Add")
    if add_beta is not None:
        b = m.constant(other_input(add_beta, mul.outputs[0]))
        if b is not None and b.shape == m.constant(gamma).shape:
            beta, last = other_input(add_beta, mul.outputs[0]), add_beta
            members.append(add_beta)
    inner = [o for n in members if n is not last for o in n.outputs]
    if not all(m.private(v, members) for v in inner):
        return None
    return members, last, x, gamma, beta, float(eps)


def _vector(c):
    return c is not None and c.ndim == 1 and c.size > 1 and c.dtype.kind == "f"
