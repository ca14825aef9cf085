"""conv-pad-fold: Pad (constant mode, value 0, constant non-negative pads on the spatial
dims only) -> Conv becomes one Conv whose leading and trailing pads grow by the Pad's.
The padded copy of the input disappears (exported MobileNets pad before every conv).

The same values: the conv reads the same zeros, it only no longer stores them first.
Listed as not bit-preserving (see the table in __init__.py).
"""
import numpy as np

from ..ir import Node
from .graph_tools import Rewrite
from .patterns import Matcher

NAME = "conv-pad-fold"


def run(graph, ctx):
    m = Matcher(graph)
    rewrite = Rewrite()
    for conv in graph.nodes:
        if conv.op_type != "Conv" or conv.domain or not conv.inputs:
            continue
        pad = m.made_by(conv.inputs[0], "Pad")
        if pad is None or rewrite.claimed(pad):
            continue
        spatial = _spatial_pads(m, pad, conv)
        if isinstance(spatial, str):
            ctx.note(NAME, conv, spatial)
            continue
        rank = len(spatial) // 2
        old = [int(p) for p in conv.attr("pads", [0] * (2 * rank))]
        attrs = {**conv.attrs, "pads": [a + b for a, b in zip(old, spatial)]}
        rewrite.replace([pad], conv, Node("Conv", conv.name, [pad.inputs[0]] + list(conv.inputs[1:]),
                                          list(conv.outputs), attrs, conv.domain))
    return rewrite.apply(graph)


def _spatial_pads(m, pad, conv):
    """The Pad's pads as Conv pads (spatial begins, then spatial ends), or why not."""
    mode = pad.attr("mode", "constant")
    if isinstance(mode, bytes):
        mode = mode.decode()
    if mode != "constant":
        return f"the Pad's mode is {mode}"
    if not m.private(pad.outputs[0], [conv]):
        return "the padded tensor has another reader"
    auto_pad = conv.attr("auto_pad", "NOTSET")
    if (auto_pad.decode() if isinstance(auto_pad, bytes) else auto_pad) != "NOTSET":
        return "the Conv uses auto_pad"
    if m.graph.opset("") < 11:
        pads = pad.attr("pads")
        value = float(pad.attr("value", 0.0))
        axes = None
    else:
        pads = m.constant(pad.inputs[1]) if len(pad.inputs) > 1 else None
        value_name = pad.inputs[2] if len(pad.inputs) > 2 else ""
        value = m.scalar(value_name) if value_name else 0.0
        axes_name = pad.inputs[3] if len(pad.inputs) > 3 else ""
        axes = m.constant(axes_name) if axes_name else None
        if axes_name and axes is None:
            return "the Pad's axes are not constant"
    if pads is None:
        return "the Pad's pads are not constant"
    if value is None or value != 0.0:
        return "the Pad's value is not a constant 0"
    pads = [int(p) for p in np.asarray(pads).reshape(-1)]
    if any(p < 0 for p in pads) or len(pads) % 2:
        return "the Pad crops or its pads are malformed"
    n = len(pads) // 2
    w = m.constant(conv.inputs[1]) if len(conv.inputs) > 1 else None
    if axes is not None:      # pads of the listed axes only: the rank comes from W
        if w is None:
            return "the Pad lists axes and the Conv weights are not constant"
        rank = w.ndim
        axes = [int(a) for a in np.asarray(axes).reshape(-1)]
        if len(axes) != n or any(not -rank <= a < rank for a in axes) or len(set(a % rank for a in axes)) != n:
            return "the Pad's axes are malformed"
        full = [0] * (2 * rank)
        for a, begin, end in zip(axes, pads[:n], pads[n:]):
            full[a % rank], full[rank + a % rank] = begin, end
        pads, n = full, rank
    if n < 3:
        return "the Pad has fewer than three dims"
    if any(pads[i] or pads[n + i] for i in (0, 1)):
        return "the Pad pads the batch or channel dim"
    if w is not None and w.ndim != n:
        return "the Pad's rank differs from the Conv's"
    return pads[2:n] + pads[n + 2:]
