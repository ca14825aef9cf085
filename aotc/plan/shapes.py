"""Concrete types and shapes for every value, and constant evaluation.

Nodes are visited in graph order. Each operator's `infer` states its outputs; a node
whose inputs are all constants is run once here through the operator's `evaluate`,
unless its result would be larger than both its inputs and 64 KiB (seed 001, 3.2).
"""
import numpy as np

from .. import ops
from ..errors import AotcError, InvalidInput, InvalidModel, UnsupportedOperator
from ..ops.base import OpContext, TensorType

FOLD_LIMIT_BYTES = 64 * 1024


def resolve_input_shapes(graph, shapes):
    """Concrete input shapes from the caller's `shapes` and the declared dims.

    `shapes` maps input names to tuples; a symbolic dimension fixed by one input (e.g.
    'sequence' = 128) fixes it everywhere it appears."""
    shapes = dict(shapes or {})
    by_name = {vi.name: vi for vi in graph.inputs}
    for name in shapes:
        if name not in by_name:
            raise InvalidInput(f"shape given for {name!r}, which is not a model input "
                               f"(inputs: {', '.join(by_name)})")
    symbols = {}
    for vi in graph.inputs:
        if vi.name in shapes and vi.dims is not None:
            given = tuple(shapes[vi.name])
            if len(given) != len(vi.dims):
                raise InvalidInput(f"input {vi.name!r}: shape {list(given)} has rank {len(given)}, "
                                   f"the model declares {len(vi.dims)}")
            for d, g in zip(vi.dims, given):
                if isinstance(d, str):
                    if symbols.setdefault(d, g) != g:
                        raise InvalidInput(f"dimension {d!r} is {symbols[d]} in one input and {g} in {vi.name!r}")
    result = {}
    for vi in graph.inputs:
        if vi.name in shapes:
            shape = tuple(int(d) for d in shapes[vi.name])
            for d, g in zip(vi.dims or (), shape):
                if isinstance(d, int) and d > 0 and d != g:
                    raise InvalidInput(f"input {vi.name!r}: shape {list(shape)} does not match the "
                                       f"declared {list(vi.dims)}")
        elif vi.dims is None:
            raise InvalidInput(f"input {vi.name!r} has no declared shape; pass one with --shape")
        else:
            shape = []
            for d in vi.dims:
                if isinstance(d, int) and d > 0:
                    shape.append(d)
                elif isinstance(d, str) and d in symbols:
                    shape.append(symbols[d])
                else:
                    raise InvalidInput(f"input {vi.name!r} has dimension {d!r} of unknown size "
                                       f"{list(vi.dims)}; pass its shape with --shape {vi.name}=...")
            shape = tuple(shape)
        if any(d < 0 for d in shape):
            raise InvalidInput(f"input {vi.name!r}: negative dimension in {list(shape)}")
        result[vi.name] = shape
    return result


def check_operators(graph):
    """Every operator must be implemented: UnsupportedOperator lists all missing ones."""
    missing = []
    for node in graph.nodes:
        opset = graph.opset(node.domain)
        if ops.find(node.domain, node.op_type, opset) is None:
            domain = f"{node.domain}." if node.domain else ""
            missing.append(f"{domain}{node.op_type} (opset {opset})")
    if missing:
        raise UnsupportedOperator(missing)


class Typed:
    """The result of inference: each node's context and each value's TensorType."""

    def __init__(self):
        self.types = {}       # value name -> TensorType
        self.contexts = {}    # id(node) -> OpContext
        self.folded = set()   # id(node) of nodes whose outputs are all constants


def infer(graph, input_shapes, mode="fast"):
    typed = Typed()
    for name, array in graph.initializers.items():
        typed.types[name] = TensorType.of(array)
    for vi in graph.inputs:
        typed.types[vi.name] = TensorType(vi.dtype, input_shapes[vi.name])
    for node in graph.nodes:
        op = ops.find(node.domain, node.op_type, graph.opset(node.domain))
        inputs = [typed.types[v] if v else None for v in node.inputs]
        ctx = OpContext(node, inputs, graph.opset(node.domain), mode)
        outputs = _infer_node(op, ctx)
        if len(outputs) < len([o for o in node.outputs if o]):
            raise InvalidModel(f"has {len(node.outputs)} outputs, the operator makes {len(outputs)}",
                               node.name)
        ctx.outputs = outputs
        typed.contexts[id(node)] = ctx
        if all(t.value is not None for t in outputs):
            typed.folded.add(id(node))
        for name, t in zip(node.outputs, outputs):
            if name:
                typed.types[name] = t
    return typed


def data_dependent_outputs(op, ctx):
    """Indices of a node's outputs whose shapes depend on input values. OpDef's
    outputs_data_dependent is True (every output), False, or a function of the node's
    OpContext returning a bool or the output indices (e.g. Compress: only when its
    condition is not a constant; Unique: not inverse_indices). infer gives such outputs
    their upper-bound shape."""
    flag = op.outputs_data_dependent
    if callable(flag):
        flag = flag(ctx)
    if flag is True:
        return set(range(len(ctx.node.outputs)))
    return set(flag or ())


def _infer_node(op, ctx):
    try:
        outputs = list(op.infer(ctx))
        present = [t for t in ctx.inputs if t is not None]
        dynamic = data_dependent_outputs(op, ctx)
        if (op.evaluate is not None and present and dynamic
                and all(t.value is not None for t in present)):
            # on constants a data-dependent result is just a constant, of its true shape
            values = op.evaluate(ctx, [t.value if t is not None else None for t in ctx.inputs])
            return [TensorType.of(np.asarray(v).astype(t.dtype, copy=False)) for t, v in zip(outputs, values)]
        foldable = (op.evaluate is not None and present and not dynamic
                    and all(t.value is not None for t in present))
        if foldable and not all(t.value is not None for t in outputs):
            limit = max([FOLD_LIMIT_BYTES] + [t.nbytes for t in present])
            if all(t.nbytes <= limit for t in outputs):
                values = op.evaluate(ctx, [t.value if t is not None else None for t in ctx.inputs])
                outputs = [_constant(t, v, ctx) for t, v in zip(outputs, values)]
        return outputs
    except AotcError:
        raise
    except Exception as e:  # an operator's own code failed on this node: report where
        raise InvalidModel(f"{type(e).__name__}: {e}", ctx.node.name) from e


def _constant(t, value, ctx):
    value = np.asarray(np.asarray(value).astype(t.dtype, copy=False), order="C")
    if tuple(value.shape) != tuple(t.shape):
        raise AssertionError(f"{ctx.node.op_type}: evaluate gave shape {value.shape}, infer {t.shape}")
    return TensorType(t.dtype, t.shape, value)
