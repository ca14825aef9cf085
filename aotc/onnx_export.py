"""ir.Graph -> ONNX ModelProto: the rewritten graph as a file Netron and onnx.checker open
(aotc's fused operators in the ai.aotc domain)."""
import numpy as np
import onnx
from onnx import helper, numpy_helper

from . import dtypes


def _attribute_value(value):
    if isinstance(value, np.ndarray):
        return numpy_helper.from_array(value)
    return value


def _value_info(vi):
    dims = None if vi.dims is None else [d if d is not None else "?" for d in vi.dims]
    return helper.make_tensor_value_info(vi.name, dtypes.to_onnx(vi.dtype), dims)


def export_graph(graph, producer="aotc"):
    nodes = [helper.make_node(n.op_type, n.inputs, n.outputs, name=n.name, domain=n.domain or None,
                              **{k: _attribute_value(v) for k, v in n.attrs.items()})
             for n in graph.nodes]
    initializers = [numpy_helper.from_array(np.asarray(v), k) for k, v in graph.initializers.items()]
    g = helper.make_graph(nodes, graph.name, [_value_info(vi) for vi in graph.inputs],
                          [_value_info(vi) for vi in graph.outputs], initializers)
    opsets = [helper.make_opsetid(d, v) for d, v in sorted(graph.opsets.items())]
    model = helper.make_model(g, opset_imports=opsets, producer_name=producer)
    model.ir_version = min(model.ir_version, onnx.IR_VERSION)
    return model
