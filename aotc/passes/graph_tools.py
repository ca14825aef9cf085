"""Small shape-free queries and edits on an ir.Graph, shared by the passes."""
from collections import defaultdict


def consumers(graph):
    """value name -> nodes that read it (a node reading a value twice appears once)."""
    users = defaultdict(list)
    for node in graph.nodes:
        for name in dict.fromkeys(v for v in node.inputs if v):
            users[name].append(node)
    return users


def remove_unused(graph):
    """Drop nodes whose outputs nothing reads and no graph output names; returns how
    many went. ONNX operators have no side effects, so nothing else keeps them."""
    outputs = {vi.name for vi in graph.outputs}
    removed = 0
    while True:
        read = {v for n in graph.nodes for v in n.inputs if v} | outputs
        keep = [n for n in graph.nodes if any(o in read for o in n.outputs if o)]
        if len(keep) == len(graph.nodes):
            break
        removed += len(graph.nodes) - len(keep)
        graph.nodes = keep
    read = {v for n in graph.nodes for v in n.inputs if v} | outputs
    for name in [k for k in graph.initializers if k not in read]:
        del graph.initializers[name]
    return removed


def fresh_name(graph, base):
    """A value name not used anywhere in the graph."""
    taken = set(graph.initializers) | {vi.name for vi in graph.inputs} | {
        o for n in graph.nodes for o in n.outputs}
    name, k = base, 0
    while name in taken:
        k += 1
        name = f"{base}_{k}"
    return name


class Rewrite:
    """Node replacements collected during a pass and applied in one sweep: a fused node
    takes the place of the last node it replaces (which keeps the order valid, since
    every input of the chain is made before its last node), the others disappear."""

    def __init__(self):
        self._new = {}

    def claimed(self, node):
        return id(node) in self._new

    def any_claimed(self, nodes):
        return any(id(n) in self._new for n in nodes)

    def replace(self, members, last, fused):
        for n in members:
            self._new[id(n)] = None
        self._new[id(last)] = fused

    @property
    def count(self):
        return sum(1 for v in self._new.values() if v is not None)

    def apply(self, graph):
        if self._new:
            graph.nodes = [n for n in (self._new.get(id(n), n) for n in graph.nodes) if n is not None]
        return self.count
