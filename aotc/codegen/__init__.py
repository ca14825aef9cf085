"""Emit: a Plan becomes <name>.c, <name>.h and the weights blob, through jinja2 templates.

Codegen owns pointer expressions (where each value lives) and the weights blob; each
operator writes the C of its own node through an EmitContext.
"""
import os
import shutil

import jinja2

from .. import dtypes, resources
from ..errors import AotcError, InvalidModel, Unsupported
from ..ops.base import EmitContext
from . import cnames, runtime_headers
from .weights import WeightsBlob

WEIGHTS_FORMS = ("incbin", "c")


def _environment():
    return jinja2.Environment(loader=jinja2.FileSystemLoader(str(resources.templates_dir())),
                              undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                              trim_blocks=True, lstrip_blocks=True)


class _Emitter:
    def __init__(self, plan, name, target):
        self.plan, self.name, self.target = plan, name, target
        self.blob = WeightsBlob()
        self.functions = []   # file-scope task functions the steps asked for

    def pointer(self, v, const):
        """C expression of a pointer to value v's first element."""
        ctype = dtypes.c_type(v.type.dtype)
        qual = "const " if const else ""
        root = v.root
        if root.storage == "input":
            return f"(({qual}{ctype} *)inputs[{root.index}])"
        if root.storage == "output":
            return f"(({qual}{ctype} *)outputs[{root.index}])"
        if root.storage == "const":
            offset = self.blob.add(root.type.value)
            return f"((const {ctype} *)({self.name}_weights + {offset}))"
        return f"(({qual}{ctype} *)(ws + {root.offset}))"

    def add_const(self, array):
        offset = self.blob.add(array)
        return f"((const {dtypes.c_type(array.dtype)} *)({self.name}_weights + {offset}))"

    def task_function(self, body):
        name = f"{self.name}_task{len(self.functions)}"
        self.functions.append(f"static void {name}(void *arg, int64_t t) {{\n"
                              + "".join(f"  {line}\n" for line in body) + "}")
        return name

    def step_code(self, step, exact):
        # Pointers are made on request: a constant the operator replaces (e.g. a weight
        # it packs through ctx.const) must not also land in the blob as it was.
        def x(i):
            return self.pointer(step.inputs[i], True) if step.inputs[i] is not None else "NULL"

        def y(i):
            return self.pointer(step.outputs[i], False) if step.outputs[i] is not None else "NULL"
        scratch = f"(ws + {step.scratch_offset})" if step.scratch_bytes else "NULL"
        ctx = EmitContext(step.ctx, x, y, self.add_const, scratch, f"&{self.name}_pool", exact, self.target)
        ctx.dims = lambda k: _dims_pointer(step, k)
        ctx.task_function = self.task_function
        try:
            return step.op.emit(ctx)
        except AotcError:
            raise
        except Exception as e:  # an attribute the operator could not read: report where
            raise InvalidModel(f"{type(e).__name__}: {e}", step.node.name) from e


def _dims_pointer(step, k):
    """For an output whose shape depends on the data: a C `int64_t *` to its dims
    record, where the node's code stores the actual shape. None for other outputs."""
    v = step.outputs[k] if k < len(step.outputs) else None
    if v is None or v.dims_offset < 0:
        return None
    return f"((int64_t *)(ws + {v.dims_offset}))"


MAX_SOURCE_BYTES = 256 << 20   # beyond this a C compiler takes too long or fails


def _check_size(size, what, advice):
    if size > MAX_SOURCE_BYTES:
        raise Unsupported(f"{what} would be {size / 2**20:.0f} MiB; the limit is "
                          f"{MAX_SOURCE_BYTES >> 20} MiB{advice}")


def tensor_info(values, namer, prefix):
    return [{"name": v.name, "literal": cnames.string_literal(v.name), "param": namer.fresh(prefix + v.name),
             "ctype": dtypes.c_type(v.type.dtype), "onnx_type": dtypes.to_onnx(v.type.dtype),
             "dtype": dtypes.name(v.type.dtype), "shape": list(v.type.shape)} for v in values]


def generate(plan, name, out_dir, target, weights_form="incbin"):
    """Write <name>.c, <name>.h and the weights into out_dir; return what the manifest
    records of the C surface."""
    if weights_form not in WEIGHTS_FORMS:
        raise ValueError(f"weights_form is one of {WEIGHTS_FORMS}")
    emitter = _Emitter(plan, name, target)
    exact = plan.mode == "exact"
    steps = []
    for step in plan.steps:
        code = emitter.step_code(step, exact)
        steps.append({"comment": cnames.comment(f"{step.node.name} ({step.node.op_type})"),
                      "lines": [ln for ln in code.splitlines() if ln.strip()]})
    copies = [{"index": i, "src": emitter.pointer(v, True), "bytes": v.type.nbytes}
              for i, v in plan.output_copies]
    namer = cnames.Namer("t")
    inputs = tensor_info(plan.inputs, namer, "in_")
    outputs = tensor_info(plan.outputs, namer, "out_")
    for info, v in zip(outputs, plan.outputs):   # where the actual shape is, if it varies
        info["dims_offset"] = v.dims_offset if v.dims_offset >= 0 else None
    context = {
        "name": name, "NAME": name.upper(), "plan": plan, "steps": steps, "copies": copies,
        "inputs": inputs,
        "outputs": outputs,
        "workspace_bytes": plan.workspace_bytes, "weights_bytes": emitter.blob.padded_size(),
        "weights_form": weights_form, "target": target, "exact": exact,
        "functions": emitter.functions,
        "runtime_headers": runtime_headers.headers_for(
            "\n".join([line for step in steps for line in step["lines"]] + emitter.functions)),
    }
    env = _environment()
    os.makedirs(out_dir, exist_ok=True)
    source = env.get_template("model.c.j2").render(context)
    _check_size(len(source), "the generated C", "")
    if weights_form == "c":   # about four characters of initializer per byte
        _check_size(4 * emitter.blob.padded_size(), "the C initializer of the weights",
                    "; build with weights='incbin'")
    with open(os.path.join(out_dir, f"{name}.c"), "w") as f:
        f.write(source)
    with open(os.path.join(out_dir, f"{name}.h"), "w") as f:
        f.write(env.get_template("model.h.j2").render(context))
    if weights_form == "incbin":
        with open(os.path.join(out_dir, f"{name}.weights"), "wb") as f:
            emitter.blob.write(f)
    else:
        with open(os.path.join(out_dir, f"{name}_weights.h"), "w") as f:
            emitter.blob.write_c_initializer(f, f"{name}_weights_builtin")
    shutil.copytree(resources.runtime_dir(), os.path.join(out_dir, "aotc_runtime"),
                    dirs_exist_ok=True, ignore=shutil.ignore_patterns("*.md", "tests"))
    return {"inputs": context["inputs"], "outputs": context["outputs"],
            "weights_bytes": emitter.blob.padded_size(), "weights_form": weights_form}
