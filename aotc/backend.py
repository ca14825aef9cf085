"""The `onnx.backend` interface over aotc, so ONNX's backend test suites run unchanged.

    rep = aotc.backend.prepare(model)        # checks the model; compiles it when its
    outputs = rep.run([x, y])                # input shapes are all fixed
    outputs = aotc.backend.run_model(model, [x, y])

aotc compiles for fixed input shapes, so a rep keeps one Session per set of input
shapes it has seen: the first run with new shapes compiles (aotc's compile cache makes
a repeated compile cheap), later runs with the same shapes reuse the Session.
A graph input that an operator needs at compile time (axes, a target shape, pads ...),
directly or through other nodes, is frozen to the value given at run time: the rep
compiles once per such value.
Sessions run on one thread: the conformance suite runs several workers side by side.
"""
import numpy as np
import onnx
import onnx.numpy_helper
from onnx import helper, shape_inference
from onnx.backend.base import Backend, BackendRep, namedtupledict

from . import dtypes
from .compiler import compile as aotc_compile
from .errors import InvalidInput, InvalidModel, NotConstant, Unsupported
from .onnx_import import MAX_OPSET, import_model, load_model

# prepare() keyword arguments that are passed on to aotc.compile
COMPILE_OPTIONS = ("mode", "opt_level", "target")
DEFAULT_THREADS = 1


class AotcRep(BackendRep):
    """A prepared model: graph inputs/outputs and a Session per input-shape tuple."""

    def __init__(self, proto, threads=DEFAULT_THREADS, **compile_options):
        self.proto = proto
        initializers = {t.name for t in proto.graph.initializer}
        self.input_names = [vi.name for vi in proto.graph.input if vi.name not in initializers]
        self.output_names = [vi.name for vi in proto.graph.output]
        self.threads = threads
        self.compile_options = compile_options
        self.frozen = []             # inputs compiled in as constants, in discovery order
        self.sessions = {}           # (input shapes, frozen values) -> Session

    def run(self, inputs, **kwargs):
        """inputs: a list (graph-input order) or a dict (name -> array) of arrays.
        Returns the outputs in graph-output order, as a namedtupledict."""
        if kwargs:
            raise Unsupported(f"rep.run() takes no options, got {', '.join(sorted(kwargs))}")
        arrays = dict(zip(self.input_names, self._input_arrays(inputs)))
        session = self.session_for({name: a.shape for name, a in arrays.items()}, arrays)
        results = session.run({name: a for name, a in arrays.items() if name not in self.frozen})
        outputs = [results[name] for name in self.output_names]
        return namedtupledict("Outputs", self.output_names)(*outputs)

    def session_for(self, shapes, arrays=None):
        """The Session compiled for these input shapes and the values of the frozen
        inputs (compiled on first use). Without `arrays` (at prepare time) an input
        that must be frozen raises NotConstant."""
        while True:
            frozen = {name: arrays[name] for name in self.frozen}
            key = (tuple(shapes[n] for n in self.input_names),
                   tuple((a.dtype.str, a.tobytes()) for a in frozen.values()))
            session = self.sessions.get(key)
            if session is not None:
                return session
            try:
                session = aotc_compile(_freeze(self.proto, frozen),
                                       shapes={n: shapes[n] for n in self.input_names if n not in frozen},
                                       threads=self.threads, **self.compile_options)
            except NotConstant as e:
                wanted = [n for n in _inputs_behind(self.proto.graph, e.value, self.input_names)
                          if n not in self.frozen]
                if arrays is None or not wanted:
                    raise
                self.frozen += wanted
                continue
            self.sessions[key] = session
            return session

    def _input_arrays(self, inputs):
        if isinstance(inputs, dict):
            unknown = sorted(set(inputs) - set(self.input_names))
            if unknown:
                raise InvalidInput(f"unknown input {unknown[0]!r}; the model's inputs are "
                                   f"{', '.join(repr(n) for n in self.input_names)}")
            missing = [n for n in self.input_names if n not in inputs]
            if missing:
                raise InvalidInput(f"input {missing[0]!r} is missing")
            values = [inputs[n] for n in self.input_names]
        else:
            values = list(inputs)
            if len(values) != len(self.input_names):
                raise InvalidInput(f"the model has {len(self.input_names)} inputs, "
                                   f"{len(values)} were given")
        return [_tensor_array(name, v) for name, v in zip(self.input_names, values)]


_INTEGER_TYPES = {onnx.TensorProto.INT64, onnx.TensorProto.INT32}


def _inputs_behind(graph, value, input_names):
    """`value` itself when it is a graph input (the operator asked for exactly it: axes,
    pads, Resize's scales ...), and the integer graph inputs it is computed from: shapes,
    pads and counts are integers, so data never folds away into constants. Shape and
    Size end the walk: their values follow from shapes, which the compile fixes."""
    integer_inputs = {vi.name for vi in graph.input if vi.type.tensor_type.elem_type in _INTEGER_TYPES}
    producers = {out: node for node in graph.node for out in node.output}
    found, stack, seen = [], [value], set()
    while stack:
        name = stack.pop()
        if name in seen:
            continue
        seen.add(name)
        if name in input_names and (name == value or name in integer_inputs):
            found.append(name)
        node = producers.get(name)
        if node is not None and node.op_type not in ("Shape", "Size"):
            stack.extend(i for i in node.input if i)
    return sorted(found, key=input_names.index)


def _freeze(proto, values):
    """A copy of proto whose inputs named in `values` are initializers holding them."""
    if not values:
        return proto
    frozen = onnx.ModelProto()
    frozen.CopyFrom(proto)
    kept = [vi for vi in frozen.graph.input if vi.name not in values]
    del frozen.graph.input[:]
    frozen.graph.input.extend(kept)
    frozen.graph.initializer.extend(onnx.numpy_helper.from_array(a, name) for name, a in values.items())
    return frozen


def _tensor_array(name, value):
    """A numpy array of an element type aotc handles, or an aotc error naming the input."""
    if value is None or isinstance(value, (list, tuple, dict)):
        kind = {type(None): "an empty optional", dict: "a map"}.get(type(value), "a sequence")
        raise Unsupported(f"input {name!r} is {kind}; aotc takes only tensor inputs")
    array = np.asarray(value)
    if not dtypes.is_supported(array.dtype):
        raise Unsupported(f"input {name!r} has element type {array.dtype}, which aotc does not "
                          f"support (supported: {', '.join(_supported_names())})")
    return array


def _supported_names():
    names = []
    for elem_type in sorted(onnx.TensorProto.DataType.values()):
        try:
            names.append(dtypes.name(dtypes.from_onnx(elem_type)))
        except Unsupported:
            pass
    return names


def _all_static(proto):
    """Input shapes {name: tuple} when every graph input has a fully fixed shape, else None."""
    initializers = {t.name for t in proto.graph.initializer}
    shapes = []
    for vi in proto.graph.input:
        if vi.name in initializers:
            continue
        tt = vi.type.tensor_type
        if not tt.HasField("shape") or not all(d.HasField("dim_value") for d in tt.shape.dim):
            return None
        shapes.append(tuple(d.dim_value for d in tt.shape.dim))
    return tuple(shapes)


class AotcBackend(Backend):
    @classmethod
    def supports_device(cls, device):
        return str(device).upper().split(":")[0] == "CPU"

    @classmethod
    def prepare(cls, model, device="CPU", **kwargs):
        """Check the model and return a rep. When every input shape is fixed in the
        model, compile now, so compile errors surface here rather than in run()."""
        if not cls.supports_device(device):
            raise Unsupported(f"device {device!r} is not supported; aotc compiles for the CPU")
        threads = kwargs.pop("threads", DEFAULT_THREADS)
        unknown = sorted(k for k in kwargs if k not in COMPILE_OPTIONS)
        if unknown:
            raise Unsupported(f"unknown prepare() options {', '.join(unknown)}; "
                              f"known: threads, {', '.join(COMPILE_OPTIONS)}")
        proto = load_model(model)
        import_model(proto)          # structure, opsets and element types, before any shapes
        rep = AotcRep(proto, threads, **kwargs)
        static = _all_static(proto)
        if static is not None:
            try:
                rep.session_for(dict(zip(rep.input_names, static)))
            except NotConstant as e:
                if not _inputs_behind(proto.graph, e.value, rep.input_names):
                    raise          # computed from constants alone: no value given at run time helps
        return rep

    @classmethod
    def run_model(cls, model, inputs, device="CPU", **kwargs):
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def run_node(cls, node, inputs, device="CPU", outputs_info=None, **kwargs):
        """Run one node on `inputs` (one array per non-empty node input). Output types
        come from `outputs_info` [(dtype, shape), ...] or from ONNX shape inference."""
        super().run_node(node, inputs, device, outputs_info, **kwargs)
        opset = kwargs.pop("opset_version", min(onnx.defs.onnx_opset_version(), MAX_OPSET))
        model = _node_model(node, inputs, opset, outputs_info)
        return cls.run_model(model, inputs, device, **kwargs)


def _node_model(node, inputs, opset, outputs_info):
    """A one-node model whose graph inputs are the node's present inputs."""
    names = [n for n in node.input if n]
    if len(names) != len(inputs):
        raise InvalidInput(f"node {node.op_type} has {len(names)} inputs, {len(inputs)} were given")
    arrays = [_tensor_array(n, v) for n, v in zip(names, inputs)]
    graph_inputs = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
                    for n, a in zip(names, arrays)]
    if outputs_info is not None:
        graph_outputs = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(np.dtype(dt)), shape)
                         for n, (dt, shape) in zip(node.output, outputs_info)]
    else:
        graph_outputs = [onnx.ValueInfoProto(name=n) for n in node.output if n]
    graph = helper.make_graph([node], f"{node.op_type}_node", graph_inputs, graph_outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    if outputs_info is None:
        _infer_output_types(model)
    return model


def _infer_output_types(model):
    inferred = shape_inference.infer_shapes(model)
    known = {vi.name: vi for vi in inferred.graph.value_info}
    known.update({vi.name: vi for vi in inferred.graph.output if vi.type.HasField("tensor_type")})
    for out in model.graph.output:
        vi = known.get(out.name)
        if vi is None or not vi.type.tensor_type.elem_type:
            raise InvalidModel(f"cannot infer the type of output {out.name!r}; pass outputs_info")
        out.type.CopyFrom(vi.type)


prepare = AotcBackend.prepare
run_model = AotcBackend.run_model
run_node = AotcBackend.run_node
supports_device = AotcBackend.supports_device
is_compatible = AotcBackend.is_compatible
