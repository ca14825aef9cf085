"""linear-pack-fuse: MatMul or Gemm with a constant 2-D float32 B becomes one ai.aotc Linear
node, Y = activation(A @ B + bias), whose B the kernel packs at compile time. A following
Add of a constant bias vector and a following activation (see activation.py) fuse into
the product's tile epilogue.

Gemm fuses when alpha = 1 and transA = 0; transB is applied to the constant (a copy);
beta * C is formed once here with the multiply the kernel would do per call. Preserves
bits: packing is a copy, the bias one rounded add, the activation the operator's own.
"""
import numpy as np

from ..ir import AOTC_DOMAIN, Node
from .activation import activation_attrs
from .graph_tools import Rewrite, fresh_name
from .patterns import Matcher, other_input

NAME = "linear-pack-fuse"


def run(graph, ctx):
    m = Matcher(graph)
    rewrite = Rewrite()
    for node in graph.nodes:
        if node.domain or node.op_type not in ("MatMul", "Gemm") or rewrite.claimed(node):
            continue
        product = _product(graph, m, node, ctx)
        if product is None:
            continue
        a, b, bias, out = product
        members, last, attrs = [node], node, {}
        if bias is None:
            add = m.only_user(out, "Add")
            vector = m.constant(other_input(add, out)) if add is not None else None
            if vector is not None and vector.dtype == np.float32 and vector.shape == (b_columns(graph, b),):
                bias, last = other_input(add, out), add
                members.append(add)
        act = m.only_user(last.outputs[0])
        act_attrs = activation_attrs(m, act) if act is not None else None
        if act_attrs is not None and not rewrite.claimed(act):
            attrs, last = act_attrs, act
            members.append(act)
        rewrite.replace(members, last, Node("Linear", node.name, [a, b] + ([bias] if bias else []),
                                            [last.outputs[0]], attrs, AOTC_DOMAIN))
    return rewrite.apply(graph)


def b_columns(graph, b):
    return graph.initializers[b].shape[1]


def _product(graph, m, node, ctx):
    """(A, B [K, N] constant name, bias name or None, product output) or None."""
    b = m.constant(node.inputs[1])
    if b is None or b.ndim != 2 or b.dtype != np.float32:
        return None
    if node.op_type == "MatMul":
        return node.inputs[0], node.inputs[1], None, node.outputs[0]
    if node.attr("alpha", 1.0) != 1.0 or node.attr("transA", 0):
        ctx.note(NAME, node, "Gemm with alpha != 1 or transA")
        return None
    b_name = node.inputs[1]
    if node.attr("transB", 0):
        b_name = fresh_name(graph, node.inputs[1] + "_t")
        graph.initializers[b_name] = np.ascontiguousarray(b.T)
    n = graph.initializers[b_name].shape[1]
    bias = None
    if len(node.inputs) > 2 and node.inputs[2]:
        c = m.constant(node.inputs[2])
        if c is None or c.dtype != np.float32 or c.size not in (1, n) or c.ndim > 2 or (
                c.ndim == 2 and c.shape[0] != 1):
            ctx.note(NAME, node, "Gemm's C is not a constant vector over the columns")
            return None
        bias = fresh_name(graph, node.inputs[2] + "_bias")
        scaled = np.float32(node.attr("beta", 1.0)) * c.astype(np.float32)
        graph.initializers[bias] = np.ascontiguousarray(np.broadcast_to(scaled.reshape(-1), (n,)),
                                                         dtype=np.float32)
    return node.inputs[0], b_name, bias, node.outputs[0]
