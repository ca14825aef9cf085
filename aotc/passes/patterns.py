"""Pattern matching over an ir.Graph without shapes: who makes a value, who reads it,
and which inputs are constants of a given value."""
import numpy as np
from onnx import helper

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


    def element_type(self, value):
        """The element type of `value`, traced back through its producers; None when
        the walk meets an operator whose output type it cannot tell. Element types are
        fixed by the model, not by the input shapes a compile is given."""
        seen = set()
        while value and value not in seen:
            seen.add(value)
            if value in self.graph.initializers:
                return self.graph.initializers[value].dtype
            for vi in self.graph.inputs:
                if vi.name == value:
                    return np.dtype(vi.dtype)
            node = self.producer.get(value)
            if node is None or node.domain or node.outputs[0] != value:
                return None
            if node.op_type in _FIXED_OUTPUT_TYPES:
                return np.dtype(_FIXED_OUTPUT_TYPES[node.op_type])
            if node.op_type == "Cast":
                return _onnx_dtype(node.attr("to"))
            if node.op_type not in _OUTPUT_TYPE_OF_INPUT or not node.inputs:
                return None
            value = node.inputs[_OUTPUT_TYPE_OF_INPUT[node.op_type]]
        return None


# Operators whose output 0 has the type of one of their inputs (the index given), and
# operators whose output 0 has one fixed type. Any other operator ends a type walk.
_OUTPUT_TYPE_OF_INPUT = {op: 0 for op in (
    "Add", "Sub", "Mul", "Div", "Pow", "Neg", "Abs", "Sqrt", "Exp", "Log", "Tanh", "Sigmoid",
    "Erf", "Relu", "LeakyRelu", "Clip", "Gelu", "MatMul", "Gemm", "Softmax", "LogSoftmax",
    "LayerNormalization", "BatchNormalization", "Reshape", "Transpose", "Squeeze", "Unsqueeze",
    "Flatten", "Identity", "Gather", "Slice", "Concat", "Split", "Expand", "Tile", "Pad",
    "ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "Conv", "Dropout", "Max", "Min")}
_OUTPUT_TYPE_OF_INPUT.update({"Where": 1, "CastLike": 1})
_FIXED_OUTPUT_TYPES = {"Shape": np.int64, "Size": np.int64, "ArgMax": np.int64, "ArgMin": np.int64,
                       "Equal": np.bool_, "Less": np.bool_, "Greater": np.bool_, "Not": np.bool_,
                       "And": np.bool_, "Or": np.bool_, "LessOrEqual": np.bool_,
                       "GreaterOrEqual": np.bool_}


def _onnx_dtype(elem_type):
    try:
        return np.dtype(helper.tensor_dtype_to_np_dtype(int(elem_type)))
    except (KeyError, TypeError, ValueError):
        return None


def other_input(node, value):
    """For a binary node reading `value` once, its other input."""
    a, b = node.inputs[:2]
    return b if a == value else a if b == value else None


def float_array(values):
    return np.asarray(values, dtype=np.float64)
