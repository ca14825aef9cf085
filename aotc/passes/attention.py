"""attention: MatMul(Q, Kt) -> [Mul or Div by a constant] -> [Add mask] -> Softmax(last
axis) -> MatMul(P, V) becomes one ai.aotc Attention node, whose kernel never holds more
than a tile of the score matrix.

The head-split Transposes before Q, Kt and V and the head-merge Transpose after are
absorbed as permutations (the kernel reads and writes those strided layouts):
    logical Q  = transpose(q_input, q_perm)     [b, h, sq, d]
    logical Kt = transpose(k_input, k_perm)     [b, h, d, sk]
    logical V  = transpose(v_input, v_perm)     [b, h, sk, dv]
    output     = transpose(softmax(Q Kt * scale + mask) V, out_perm)
An empty perm means identity. Does not preserve bits (the softmax streams over tiles).
Fires on float32 attention only: the kernel computes in float32.
"""
import numpy as np

from ..ir import AOTC_DOMAIN, Node
from .graph_tools import Rewrite
from .patterns import Matcher, other_input

NAME = "attention"


def run(graph, ctx):
    m = Matcher(graph)
    rewrite = Rewrite()
    for softmax in graph.nodes:
        if softmax.op_type != "Softmax" or softmax.domain:
            continue
        match = _match(m, softmax, ctx)
        if match is None or rewrite.any_claimed(match["members"]):
            continue
        last = match["last"]
        inputs = [match["q"], match["k"], match["v"]] + ([match["mask"]] if match["mask"] else [])
        rewrite.replace(match["members"], last, Node("Attention", last.name, inputs, [last.outputs[0]], {
            "scale": match["scale"], "q_perm": match["q_perm"], "k_perm": match["k_perm"],
            "v_perm": match["v_perm"], "out_perm": match["out_perm"]}, AOTC_DOMAIN))
    return rewrite.apply(graph)


def _match(m, softmax, ctx):
    axis = softmax.attr("axis", -1 if m.graph.opset("") >= 13 else 1)
    pv = m.only_user(softmax.outputs[0], "MatMul")
    if pv is None or pv.inputs[0] != softmax.outputs[0]:
        if m.users.get(softmax.outputs[0]):
            ctx.note(NAME, softmax, "the softmax output has another reader than P V")
        return None
    members = [softmax, pv]
    scores, mask = softmax.inputs[0], None
    add = m.made_by(scores, "Add")
    if add is not None:
        for candidate in add.inputs:
            if _scores_chain(m, candidate) is not None:
                scores, mask = candidate, other_input(add, candidate)
                members.append(add)
                break
    chain = _scores_chain(m, scores)
    if chain is None:
        return None
    qk, scale, scale_nodes = chain
    if scale is None:
        ctx.note(NAME, softmax, "the scores are scaled by a value that is not a constant scalar")
        return None
    if axis != -1:
        ctx.note(NAME, softmax, f"softmax axis is {axis}, not the last")
        return None
    element_type = m.element_type(qk.inputs[0])
    if element_type != np.float32:
        ctx.note(NAME, softmax, "the attention kernel is float32 only; Q's element type is "
                 + ("not known before shapes are" if element_type is None else str(element_type)))
        return None
    members += scale_nodes + [qk]
    inner = [o for n in members if n is not pv for o in n.outputs]
    if not all(m.private(v, members) for v in inner):
        ctx.note(NAME, softmax, "an intermediate of the attention has another reader")
        return None
    q, q_perm, q_nodes = _through_transposes(m, qk.inputs[0])
    k, k_perm, k_nodes = _through_transposes(m, qk.inputs[1])
    v, v_perm, v_nodes = _through_transposes(m, pv.inputs[1])
    members += q_nodes + k_nodes + v_nodes
    last, out_perm = pv, []
    merge = m.only_user(pv.outputs[0], "Transpose")
    if merge is not None and merge.attr("perm") is not None:
        last, out_perm = merge, list(merge.attr("perm"))
        members.append(merge)
    return {"members": [n for n in members if n is not last], "last": last, "q": q, "k": k, "v": v,
            "mask": mask, "scale": scale, "q_perm": q_perm, "k_perm": k_perm, "v_perm": v_perm,
            "out_perm": out_perm}


def _scores_chain(m, value):
    """value = MatMul(Q, Kt) [* c or / c] -> (the MatMul, scale or None, scale nodes)."""
    node = m.producer.get(value)
    if node is None or node.domain:
        return None
    if node.op_type == "MatMul":
        return node, 1.0, []
    if node.op_type in ("Mul", "Div"):
        for operand in node.inputs[:1] if node.op_type == "Div" else node.inputs:
            qk = m.made_by(operand, "MatMul")
            if qk is None:
                continue
            c = m.scalar(other_input(node, operand))
            if c is None or (node.op_type == "Div" and c == 0):
                return qk, None, [node]
            return qk, (c if node.op_type == "Mul" else 1.0 / c), [node]
    return None


def _through_transposes(m, value):
    """Walk back through Transposes that only this pattern reads, composing their perms:
    (source value, perm such that value = transpose(source, perm), the Transposes)."""
    perm, nodes = None, []
    while True:
        node = m.made_by(value, "Transpose")
        if node is None or node.attr("perm") is None or m.only_user(value) is None:
            break
        p = list(node.attr("perm"))
        perm = p if perm is None else [p[i] for i in perm]
        nodes.append(node)
        value = node.inputs[0]
    return value, perm or [], nodes
