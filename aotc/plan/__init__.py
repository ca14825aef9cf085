"""The plan: for fixed input shapes, what runs, in what order, and where each value lives.

make_plan(graph, shapes) -> Plan. Python decides everything here; the emitted C only
follows the plan.
"""
from collections import Counter
from dataclasses import dataclass, field
from typing import Optional

from .. import ops
from ..errors import ExactModeUnavailable, Unsupported
from ..ops.base import TensorType, exact_available
from . import channels_last, fusion, memory, shapes as shape_inference


@dataclass(eq=False)
class PlanValue:
    """Where a value lives: 'input' / 'output' (caller pointers, by index), 'const'
    (weights), 'workspace' (offset), or 'view' (shares `base`'s storage)."""
    name: str
    type: TensorType
    storage: str
    index: int = -1
    offset: int = -1
    base: Optional["PlanValue"] = None
    dims_offset: int = -1        # data-dependent shape: workspace offset of its int64 dims

    @property
    def root(self):
        v = self
        while v.storage == "view":
            v = v.base
        return v


@dataclass(eq=False)
class Step:
    node: object
    op: object
    ctx: object
    inputs: list
    outputs: list
    scratch_bytes: int = 0
    scratch_offset: int = -1


@dataclass
class Plan:
    name: str
    inputs: list                 # PlanValue per graph input, in order
    outputs: list                # PlanValue per graph output (the value it reads from)
    steps: list
    output_copies: list          # (output index, PlanValue) filled by a copy at the end
    workspace_bytes: int
    intermediate_bytes: int
    nodes_before: dict = field(default_factory=dict)
    nodes_after: dict = field(default_factory=dict)
    mode: str = "fast"
    fusions: dict = field(default_factory=dict)   # {fusion name: times fired} (fusion.py)


def make_plan(graph, input_shapes=None, mode="fast", nodes_before=None, fuse=True):
    """`fuse`: run the shape-dependent fusions (fusion.py), which rewrite `graph`."""
    shape_inference.check_operators(graph)
    fixed = shape_inference.resolve_input_shapes(graph, input_shapes)
    typed = shape_inference.infer(graph, fixed, mode)
    fusions = {}
    if fuse:
        fusions[fusion.CONV_RESIDUAL] = fusion.fuse_residual_adds(graph, typed.types)
        if fusions[fusion.CONV_RESIDUAL]:
            typed = shape_inference.infer(graph, fixed, mode)
        fusions[channels_last.CHANNELS_LAST] = channels_last.rewrite(graph, typed, mode)
        if fusions[channels_last.CHANNELS_LAST]:
            typed = shape_inference.infer(graph, fixed, mode)

    values = {}
    for i, vi in enumerate(graph.inputs):
        values[vi.name] = PlanValue(vi.name, typed.types[vi.name], "input", index=i)

    def value(name):
        if name not in values:      # a constant: an initializer or a folded result
            values[name] = PlanValue(name, typed.types[name], "const")
        return values[name]

    output_names = [vi.name for vi in graph.outputs]
    needed = _live_nodes(graph, typed, output_names)
    steps = []
    dynamic = {}    # value name -> node that makes it, for shapes that depend on the data
    for node in graph.nodes:
        if id(node) not in needed:
            continue
        ctx = typed.contexts[id(node)]
        op = ops.find(node.domain, node.op_type, graph.opset(node.domain))
        ins = [value(v) if v else None for v in node.inputs]
        for v in ins:
            if v is not None and v.name in dynamic:
                raise Unsupported(f"reads {v.name!r}, whose shape depends on the data (made by node "
                                  f"{dynamic[v.name].name!r}, {dynamic[v.name].op_type}); such values "
                                  "can only be graph outputs", node.name)
        outs = []
        for k, name in enumerate(node.outputs):
            if not name:
                outs.append(None)
                continue
            t = typed.types[name]
            if op.view_of_input and k == 0:
                values[name] = PlanValue(name, t, "view", base=ins[0])
            else:
                values[name] = PlanValue(name, t, "workspace")
            outs.append(values[name])
        for k in shape_inference.data_dependent_outputs(op, ctx):
            if k < len(outs) and outs[k] is not None:
                dynamic[outs[k].name] = node
        step = Step(node, op, ctx, ins, outs)
        if op.scratch is not None:
            step.scratch_bytes = int(op.scratch(ctx))
        steps.append(step)

    if mode == "exact":
        lacking = [f"{s.node.op_type}" for s in steps if not s.op.view_of_input and not exact_available(s.op, s.ctx)]
        if lacking:
            raise ExactModeUnavailable(lacking)

    outputs, copies, direct = [], [], set()
    for i, name in enumerate(output_names):
        v = value(name)
        outputs.append(v)
        if v.storage == "workspace" and name not in direct:
            v.storage, v.index = "output", i
            direct.add(name)
        else:
            copies.append((i, v))
    keep = [v.name for _, v in copies if v.root.storage == "workspace"]

    for v in values.values():
        if v.type.nbytes > memory.MAX_WORKSPACE:
            raise Unsupported(f"value {v.name!r} would take {v.type.nbytes / 2**30:.1f} GiB; the limit "
                              "for one tensor is 2 GiB")
    intermediate = sum(v.type.nbytes for v in values.values() if v.storage == "workspace")
    workspace = memory.assign([s for s in steps if not s.op.view_of_input], values, keep)
    workspace = _place_dims_records([values[name] for name in dynamic], workspace)
    if workspace > memory.MAX_WORKSPACE:
        raise Unsupported(f"the plan needs a {workspace / 2**30:.1f} GiB workspace; the limit is 2 GiB")
    return Plan(graph.name, [values[vi.name] for vi in graph.inputs], outputs,
                [s for s in steps if not s.op.view_of_input], copies, workspace, intermediate,
                dict(nodes_before or Counter(n.op_type for n in graph.nodes)),
                dict(Counter(s.node.op_type for s in steps if not s.op.view_of_input)), mode, fusions)


def _place_dims_records(dynamic_values, workspace):
    """An int64 per dim for each data-dependent value, after everything else in the
    workspace: its kernel writes the actual shape there and it outlives the run, so the
    caller reads it afterwards (<name>_output_shape, Session)."""
    if not dynamic_values:
        return workspace
    at = memory.align(workspace)
    for v in dynamic_values:
        v.dims_offset = at
        at += 8 * max(v.type.rank, 1)
    return memory.align(at)


def _live_nodes(graph, typed, output_names):
    """Nodes with a path to a graph output whose outputs are not all constants."""
    producers = graph.producers()
    wanted, live = list(output_names), set()
    seen = set()
    while wanted:
        name = wanted.pop()
        if name in seen:
            continue
        seen.add(name)
        node = producers.get(name)
        if node is None or id(node) in typed.folded or typed.types[name].value is not None:
            continue
        live.add(id(node))
        wanted.extend(v for v in node.inputs if v)
    return live
