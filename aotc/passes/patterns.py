"""Pattern matching over an ir.Graph without shapes: who makes a value, who reads it,
and which inputs are constants of a given value."""
import numpy as np

from .graph_tools import consumers


class Matcher:
    """Indexes a graph once for a pass. Rebuild it after editing the graph."""

    def __init__(self, graph):
        self.graph = graph
        self.producer = graph.producers()
        self.users = consumers(graph)
        self.outputs = {vi.name for vi in graph.outputs}

    def constant(self, name):
        return self.graph.initializers.get(name) if name else None

    def scalar(self, name):
        """The value of a one-element float constant, else None."""
        c = self.constant(name)
        if c is None or c.size != 1 or c.dtype.kind != "f":
            return None
        return float(c.reshape(-1)[0])

    def is_scalar(self, name, value, rel=1e-4):
        v = self.scalar(name)
        return v is not None and abs(v - value) <= rel * abs(value)

    def only_user(self, value, op_type=None):
        """The single node reading `value` (of op_type, if given), when value is no graph
        output; else None."""
        users = self.users.get(value, [])
        if len(users) != 1 or value in self.outputs:
            return None
        node = users[0]
        return node if op_type is None or node.op_type == op_type else None

    def private(self, value, allowed_users):
        """True when only nodes in allowed_users read value and it is no graph output."""
        ids = {id(n) for n in allowed_users}
        return value not in self.outputs and all(id(n) in ids for n in self.users.get(value, []))

    def made_by(self, value, op_type):
        node = self.producer.get(value)
        return node if node is not None and node.op_type == op_type and not node.domain else None


def other_input(node, value):
    """For a binary node reading `value` once, its other input."""
    a, b = node.inputs[:2]
    return b if a == value else a if b == value else None


def float_array(values):
    return np.asarray(values, dtype=np.float64)
