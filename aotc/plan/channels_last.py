"""channels-last: chains of depthwise and pointwise convs on small planes run NHWC.

On planes of at most MAX_PIXELS pixels, NCHW leaves vector lanes idle or costs a
transposed store: with a plane's pixels across the lanes, 196 pixels fill 13 vectors of
16 and 49 fill 4; with the pixels as the GEMM's rows (the rows kernel), each tile is
stored transposed. Channels-last has neither: a depthwise conv puts channels across the
lanes, a pointwise conv is one GEMM with pixels as rows, stored as computed
(ops/nhwc_conv.py). MobileNetV2's convs from 28x28 on, one thread on Zen 4 (a C driver):
the pointwise ones 0.82-0.98x the time of their NCHW kernels (96 -> 576 at 14x14 201 us
against 220, 160 -> 960 at 7x7 139 against 163), the depthwise ones 0.39-0.85x (384
channels at 14x14 27 us against 51). On larger planes NCHW stays ahead (16 -> 96 at
112x112 596 us against 517). On a Xeon, with its 56x56 chains NHWC too, MobileNetV2
took 0.964-0.969x the time at two threads and 0.989-1.004x at one (benchmarks/builds.py
--model, paired); with its 112x112 ones as well, 0.937-0.949x at two but 1.043-1.047x
at one.

Candidates are the float32 2-D Conv and FusedConv nodes NhwcConv runs with at most
MAX_PIXELS pixels in and out. Candidates joined through a value one makes and another
reads (as X or as the residual) form chains; a chain holding a depthwise and a
pointwise conv goes NHWC: each of its convs becomes an NhwcConv, a Transpose brings in
each NCHW value it reads, and one takes each value it makes back to NCHW where anything
else reads it or it is a graph output; a global pool of a value made in the chain
reads it NHWC (its output is the same either way). A chain of pointwise convs alone
(ResNet's) stays NCHW: its 3x3 neighbours would cost a Transpose each way; so does a
depthwise conv alone, whose gain the two Transposes would take. Fast mode only: the sums
are the same, but exact mode keeps one kernel per conv kind on every path.
"""
import numpy as np

from ..ir import AOTC_DOMAIN, Node
from ..ops import conv
from ..ops.nhwc_conv import NCHW_AXES, NHWC_AXES, kind_of
from ..passes.graph_tools import consumers, fresh_name

CHANNELS_LAST = "channels-last"
MAX_PIXELS = 56 * 56
GLOBAL_POOLS = ("GlobalAveragePool", "GlobalMaxPool")   # NHWC kernels in ops/pool.py


def rewrite(graph, typed, mode):
    """Rewrite graph in place; returns how many convs went channels-last."""
    if mode != "fast":
        return 0
    chosen = _choose(graph, typed, {id(n): k for n in graph.nodes if (k := _kind(n, typed)) is not None})
    if not chosen:
        return 0
    taken = set()

    def fresh(base):
        name = fresh_name(graph, base)
        while name in taken:
            name = fresh_name(graph, name + "_")
        taken.add(name)
        return name

    made = {n.outputs[0]: fresh(n.outputs[0] + "_nhwc") for n in graph.nodes if id(n) in chosen}
    pools = {id(n) for n in graph.nodes
             if n.op_type in GLOBAL_POOLS and not n.domain and n.inputs[0] in made}
    users = consumers(graph)
    outputs = {vi.name for vi in graph.outputs}
    brought, nodes = {}, []
    for n in graph.nodes:
        if id(n) in pools:
            nodes.append(Node("Nhwc" + n.op_type, n.name, [made[n.inputs[0]]], list(n.outputs), {},
                              AOTC_DOMAIN))
            continue
        if id(n) not in chosen:
            nodes.append(n)
            continue
        inputs = list(n.inputs)
        for i in (0, 3):
            if i >= len(inputs) or not inputs[i]:
                continue
            v = inputs[i]
            if v not in made and v not in brought:
                brought[v] = fresh(v + "_nhwc")
                nodes.append(Node("Transpose", f"{n.name}/to_nhwc_{i}", [v], [brought[v]],
                                  {"perm": list(NHWC_AXES)}))
            inputs[i] = made.get(v) or brought[v]
        y = n.outputs[0]
        nodes.append(Node("NhwcConv", n.name, inputs, [made[y]], dict(n.attrs), AOTC_DOMAIN))
        if y in outputs or any(not _reads_nhwc(u, y, chosen, pools) for u in users.get(y, ())):
            nodes.append(Node("Transpose", f"{n.name}/to_nchw", [made[y]], [y], {"perm": list(NCHW_AXES)}))
    graph.nodes = nodes
    graph.opsets.setdefault(AOTC_DOMAIN, 1)
    return len(chosen)


def _reads_nhwc(node, value, chosen, pools):
    """Whether `node` reads `value` only as a rewritten conv's X or residual, or is a
    rewritten global pool."""
    if id(node) in pools:
        return True
    return id(node) in chosen and all(v != value for i, v in enumerate(node.inputs) if i not in (0, 3))


def _choose(graph, typed, kinds):
    """The ids of the convs to rewrite: those of the chains (over `kinds`, id -> kind)
    that hold both kinds, less each pointwise conv that enters its chain reading more
    than it makes, until none is left: such a conv runs NCHW, so the Transpose in moves
    its output (MobileNetV2's 144 -> 32 conv at 28x28: 25 thousand floats for 113, a
    Transpose of 45 us at one thread and two)."""
    producers = graph.producers()
    while True:
        chains = _chains(graph, kinds)
        with_both = ({chains[i] for i, k in kinds.items() if k == "depthwise"}
                     & {chains[i] for i, k in kinds.items() if k == "pointwise"})
        chosen = {i: kinds[i] for i in kinds if chains[i] in with_both}
        entering = {id(n) for n in graph.nodes if chosen.get(id(n)) == "pointwise"
                    and id(producers.get(n.inputs[0])) not in chosen
                    and typed.types[n.inputs[0]].numel > typed.types[n.outputs[0]].numel}
        if not entering:
            return set(chosen)
        kinds = {i: k for i, k in chosen.items() if i not in entering}


def _kind(node, typed):
    """'pointwise' or 'depthwise' for a conv NhwcConv runs on small enough planes, else None."""
    if not ((node.op_type == "Conv" and not node.domain)
            or (node.op_type == "FusedConv" and node.domain == AOTC_DOMAIN)):
        return None
    if len(node.outputs) != 1 or id(node) in typed.folded or typed.types[node.outputs[0]].value is not None:
        return None
    ctx = typed.contexts.get(id(node))
    x = ctx.inputs[0] if ctx is not None else None
    if x is None or x.rank != 4 or np.dtype(x.dtype) != np.float32:
        return None
    g = conv.geometry(ctx)
    small = g.in_dims[1] * g.in_dims[2] <= MAX_PIXELS and g.out_dims[1] * g.out_dims[2] <= MAX_PIXELS
    return kind_of(g) if small else None


def _chains(graph, kinds):
    """node id -> the id of its chain's first node, over the candidates in `kinds`."""
    producers = graph.producers()
    root = {i: i for i in kinds}

    def find(i):
        while root[i] != i:
            root[i] = root[root[i]]
            i = root[i]
        return i

    for n in graph.nodes:
        if id(n) not in kinds:
            continue
        for i in (0, 3):
            p = producers.get(n.inputs[i]) if i < len(n.inputs) and n.inputs[i] else None
            if p is not None and id(p) in kinds:
                root[find(id(n))] = find(id(p))
    return {i: find(i) for i in kinds}
