"""ONNX ModelProto -> ir.Graph, with every structural check that needs no shapes."""
import os

import numpy as np
import onnx
from onnx import defs, external_data_helper, helper, numpy_helper

from . import dtypes
from .errors import InvalidModel, Unsupported
from .ir import Graph, Node, ValueInfo

# Operators check the opset of their own definition (aotc/ops/__init__.py find()).
# Every operator checks the opsets it implements (OpDef.since); a model at an opset
# below an operator's is refused naming that operator.
MIN_OPSET, MAX_OPSET = 1, 28


def load_model(model):
    """A path, bytes or ModelProto -> ModelProto with external data loaded (kept inside
    the model's folder)."""
    base_dir = None
    if isinstance(model, onnx.ModelProto):
        proto = model
    elif isinstance(model, (bytes, bytearray, memoryview)):
        proto = _parse(bytes(model), "<bytes>")
    elif isinstance(model, (str, os.PathLike)):
        path = os.fspath(model)
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as e:
            raise InvalidModel(f"cannot read model file {path!r}: {e.strerror}") from None
        proto = _parse(data, path)
        base_dir = os.path.dirname(os.path.abspath(path))
    else:
        raise InvalidModel(f"a model is a path, bytes or onnx.ModelProto, not {type(model).__name__}")
    _load_external_data(proto, base_dir)
    return proto


def _parse(data, what):
    proto = onnx.ModelProto()
    try:
        proto.ParseFromString(data)
    except Exception as e:  # protobuf raises DecodeError or RuntimeError
        raise InvalidModel(f"{what} is not an ONNX model: {e}") from None
    if not proto.HasField("graph"):
        raise InvalidModel(f"{what} has no graph")
    return proto


def _load_external_data(proto, base_dir):
    tensors = [t for t in external_data_helper._get_all_tensors(proto)
               if external_data_helper.uses_external_data(t)]
    if not tensors:
        return
    if base_dir is None:
        raise InvalidModel("the model keeps weights in external files; pass it as a path, not bytes")
    root = os.path.realpath(base_dir)
    for t in tensors:
        try:
            info = external_data_helper.ExternalDataInfo(t)
            target = os.path.realpath(os.path.join(root, info.location))
        except ValueError as e:   # a NUL in the location, a negative or non-numeric offset
            raise InvalidModel(f"initializer {t.name!r}: bad external data entry: {e}") from None
        if os.path.isabs(info.location) or os.path.commonpath([root, target]) != root:
            raise InvalidModel(f"initializer {t.name!r}: external data {info.location!r} "
                               "lies outside the model's folder")
        if not os.path.isfile(target):
            raise InvalidModel(f"initializer {t.name!r}: external data file {info.location!r} is missing")
        try:
            external_data_helper.load_external_data_for_tensor(t, root)
        except Exception as e:
            raise InvalidModel(f"initializer {t.name!r}: cannot read external data: {e}") from None
        del t.external_data[:]
        t.data_location = onnx.TensorProto.DEFAULT


def import_model(model):
    """Any accepted model form -> ir.Graph."""
    proto = load_model(model)
    opsets = {}
    for o in proto.opset_import:
        domain = "" if o.domain in ("", "ai.onnx") else o.domain
        opsets[domain] = o.version
    opsets.setdefault("", MIN_OPSET)      # a model importing no default opset: the first
    if not MIN_OPSET <= opsets[""] <= MAX_OPSET:
        raise Unsupported(f"opset {opsets['']} is outside the supported range {MIN_OPSET}..{MAX_OPSET}")
    return import_graph(proto.graph, opsets)


def _tensor(t, what):
    try:
        arr = numpy_helper.to_array(t)
    except Exception as e:
        raise InvalidModel(f"{what} {t.name!r} cannot be read: {e}") from None
    dtypes.from_onnx(t.data_type, f"{what} {t.name!r}")
    expected = int(np.prod([int(d) for d in t.dims])) if t.dims else 1
    if arr.size != expected or any(d < 0 for d in t.dims):
        raise InvalidModel(f"{what} {t.name!r}: data length disagrees with dims {list(t.dims)}")
    return np.asarray(arr, order="C")   # ascontiguousarray would make a 0-d array 1-d


def _value_info(vi, what):
    if not vi.type.HasField("tensor_type"):
        raise Unsupported(f"{what} {vi.name!r} is not a tensor")
    tt = vi.type.tensor_type
    dtype = dtypes.from_onnx(tt.elem_type, f"{what} {vi.name!r}")
    dims = None
    if tt.HasField("shape"):
        dims = tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
                     for d in tt.shape.dim)
        if any(isinstance(d, int) and d < 0 for d in dims):
            raise InvalidModel(f"{what} {vi.name!r} has a negative dimension {dims}")
    return ValueInfo(vi.name, dtype, dims)


def _attributes(node):
    attrs = {}
    for a in node.attribute:
        try:
            v = helper.get_attribute_value(a)
        except Exception as e:
            raise InvalidModel(f"attribute {a.name!r}: {e}", node.name) from None
        if isinstance(v, bytes):
            v = v.decode("utf-8", "replace")
        elif isinstance(v, list) and v and isinstance(v[0], bytes):
            v = [s.decode("utf-8", "replace") for s in v]
        elif isinstance(v, onnx.TensorProto):
            v = _tensor(v, "attribute tensor")
        attrs[a.name] = v
    return attrs


def _check_schema(n, name, domain, opset):
    """Input and output counts and attribute types as the ONNX schema states them, so
    passes and operators only ever see well-formed standard nodes."""
    if domain != "":
        return
    try:
        schema = defs.get_schema(n.op_type, opset, "")
    except defs.SchemaError:
        return                 # not an ONNX operator: UnsupportedOperator names it later
    if not schema.min_input <= len(n.input) <= schema.max_input:
        raise InvalidModel(f"{n.op_type} takes {schema.min_input} to {schema.max_input} inputs, "
                           f"has {len(n.input)}", name)
    if not schema.min_output <= len(n.output) <= schema.max_output:
        raise InvalidModel(f"{n.op_type} makes {schema.min_output} to {schema.max_output} outputs, "
                           f"has {len(n.output)}", name)
    for a in n.attribute:
        expected = schema.attributes.get(a.name)
        if expected is not None and a.type != expected.type:
            raise InvalidModel(f"attribute {a.name!r} is {onnx.AttributeProto.AttributeType.Name(a.type)}, "
                               f"{n.op_type} takes {onnx.AttributeProto.AttributeType.Name(expected.type)}", name)


def _require_utf8(g):
    """protobuf hands back string fields that are not UTF-8 as bytes; ONNX requires UTF-8."""
    for n in g.node:
        for text in [n.name, n.op_type, n.domain, *n.input, *n.output]:
            if isinstance(text, bytes):
                raise InvalidModel(f"node text {text!r} is not valid UTF-8")
    for vi in [*g.input, *g.output, *g.initializer]:
        if isinstance(vi.name, bytes):
            raise InvalidModel(f"value name {vi.name!r} is not valid UTF-8")


def import_graph(g, opsets):
    _require_utf8(g)
    initializers = {}
    for t in g.initializer:
        if t.name in initializers:
            raise InvalidModel(f"initializer {t.name!r} is defined twice")
        initializers[t.name] = _tensor(t, "initializer")
    inputs = [_value_info(vi, "input") for vi in g.input if vi.name not in initializers]
    outputs = [_value_info(vi, "output") for vi in g.output]

    known = set(initializers) | {vi.name for vi in inputs}
    if len(known) != len(initializers) + len(inputs):
        raise InvalidModel("two graph inputs share a name")
    nodes = []
    for i, n in enumerate(g.node):
        domain = "" if n.domain in ("", "ai.onnx") else n.domain
        name = n.name or f"{n.op_type}_{i}"
        _check_schema(n, name, domain, opsets.get(domain, 0))
        nodes.append(Node(n.op_type, name, list(n.input), list(n.output), _attributes(n), domain))
    nodes = _topological(nodes, known)
    made = known | {o for n in nodes for o in n.outputs if o}
    for vi in outputs:
        if vi.name not in made:
            raise InvalidModel(f"graph output {vi.name!r} is produced by no node, input or initializer")
    return Graph(g.name or "model", nodes, inputs, outputs, initializers, opsets)


def _topological(nodes, known):
    """Nodes in an order where every input is made first; InvalidModel on dangling
    inputs, values made twice and cycles."""
    producer = {}
    for n in nodes:
        for o in n.outputs:
            if not o:
                continue
            if o in producer or o in known:
                raise InvalidModel(f"value {o!r} is produced more than once", n.name)
            producer[o] = n
    for n in nodes:
        for v in n.inputs:
            if v and v not in producer and v not in known:
                raise InvalidModel(f"input {v!r} is produced by no node, input or initializer", n.name)
    order, state = [], {}
    for start in nodes:
        stack = [(start, iter(start.inputs))]
        if state.get(id(start)) == 2:
            continue
        state[id(start)] = 1
        while stack:
            node, it = stack[-1]
            for v in it:
                dep = producer.get(v)
                if dep is None or state.get(id(dep)) == 2:
                    continue
                if state.get(id(dep)) == 1:
                    raise InvalidModel(f"the graph has a cycle through value {v!r}", node.name)
                state[id(dep)] = 1
                stack.append((dep, iter(dep.inputs)))
                break
            else:
                stack.pop()
                state[id(node)] = 2
                order.append(node)
    return order
