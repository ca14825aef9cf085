"""gelu: the exporters' Gelu chains become one Gelu node (ai.aotc domain).

erf form (PyTorch's opset-17 export):   Mul(Mul(x, Add(Erf(Div(x, sqrt 2)), 1)), 0.5)
tanh form (approximate='tanh'):         Mul(Mul(x, 0.5), Add(Tanh(Mul(sqrt(2/pi),
                                            Add(x, Mul(0.044715, Pow(x, 3))))), 1))
Both also match with the 0.5 applied to x first, Mul(x, 1/sqrt 2) for the Div, x*x*x for
the Pow, and operands of Add/Mul in either order. Every intermediate must have no other
reader. Does not preserve bits: the fused expression is not the five operators' arithmetic.
"""
import math

from ..ir import AOTC_DOMAIN, Node
from .graph_tools import Rewrite
from .patterns import Matcher, other_input

NAME = "gelu"


def run(graph, ctx):
    m = Matcher(graph)
    rewrite = Rewrite()
    for node in graph.nodes:
        if node.domain or node.op_type not in ("Erf", "Tanh") or rewrite.claimed(node):
            continue
        match = _erf_chain(m, node) if node.op_type == "Erf" else _tanh_chain(m, node)
        if match is None or rewrite.any_claimed(match[1]):
            continue
        x, members, last = match
        rewrite.replace(members, last, Node("Gelu", last.name, [x], [last.outputs[0]],
                                            {"approximate": "none" if node.op_type == "Erf" else "tanh"},
                                            AOTC_DOMAIN))
    return rewrite.apply(graph)


def _erf_chain(m, erf):
    scaled = m.producer.get(erf.inputs[0])
    if scaled is None or scaled.domain:
        return None
    if scaled.op_type == "Div" and m.is_scalar(scaled.inputs[1], math.sqrt(2)):
        x = scaled.inputs[0]
    elif scaled.op_type == "Mul":
        x = next((v for v in scaled.inputs if m.is_scalar(other_input(scaled, v), math.sqrt(0.5))), None)
    else:
        return None
    if x is None:
        return None
    return _half_x_times_one_plus(m, erf, x, [scaled, erf])


def _tanh_chain(m, tanh):
    scaled = m.producer.get(tanh.inputs[0])
    if scaled is None or scaled.op_type != "Mul" or scaled.domain:
        return None
    inner = next((v for v in scaled.inputs
                  if m.is_scalar(other_input(scaled, v), math.sqrt(2 / math.pi))), None)
    add = m.made_by(inner, "Add") if inner else None
    if add is None:
        return None
    for x in add.inputs:
        cubic_term = m.made_by(other_input(add, x), "Mul")
        if cubic_term is None:
            continue
        cube = next((v for v in cubic_term.inputs if m.is_scalar(other_input(cubic_term, v), 0.044715)), None)
        cube_nodes = _cube_of(m, cube, x) if cube else None
        if cube_nodes is not None:
            return _half_x_times_one_plus(m, tanh, x, [*cube_nodes, cubic_term, add, scaled, tanh])
    return None


def _cube_of(m, value, x):
    """Nodes computing value = x^3 as Pow(x, 3) or x*x*x, else None."""
    node = m.producer.get(value)
    if node is None or node.domain:
        return None
    if node.op_type == "Pow" and node.inputs[0] == x and m.is_scalar(node.inputs[1], 3.0):
        return [node]
    if node.op_type == "Mul":
        for v in node.inputs:
            square = m.made_by(v, "Mul")
            if other_input(node, v) == x and square is not None and square.inputs == [x, x]:
                return [square, node]
    return None


def _half_x_times_one_plus(m, fn_node, x, members):
    """The tail: Add(fn, 1) then 0.5 * x * that, in either order of the multiplies."""
    add = m.only_user(fn_node.outputs[0], "Add")
    if add is None or not m.is_scalar(other_input(add, fn_node.outputs[0]), 1.0):
        return None
    mul = m.only_user(add.outputs[0], "Mul")
    if mul is None:
        return None
    other = other_input(mul, add.outputs[0])
    if other == x:                          # Mul(Mul(x, 1 + fn), 0.5)
        last = m.only_user(mul.outputs[0], "Mul")
        if last is None or not m.is_scalar(other_input(last, mul.outputs[0]), 0.5):
            return None
        tail = [add, mul, last]
    else:                                   # Mul(Mul(x, 0.5), 1 + fn)
        half = m.made_by(other, "Mul")
        if half is None or x not in half.inputs or not m.is_scalar(other_input(half, x), 0.5) \
                or m.only_user(half.outputs[0]) is not mul:
            return None
        tail, last = [half, add, mul], mul
    chain = members + tail
    inner = [o for n in chain if n is not last for o in n.outputs]
    if not all(m.private(v, chain) for v in inner):
        return None
    return x, chain, last
