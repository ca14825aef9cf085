"""compile(): import -> passes -> plan -> emit -> build, behind a content-hash cache.

A cache entry is a complete output folder, made in a temporary folder and renamed
into place, so an interrupted compile never leaves an entry that loads broken and two
processes compiling the same model both succeed.
"""
import hashlib
import json
import os
import re
import shutil
import tempfile
from pathlib import Path

from . import __version__, build, cache, codegen, passes, resources
from .errors import InvalidModel, Unsupported
from .onnx_export import export_graph
from .onnx_import import import_model, load_model
from .plan import make_plan
from .session import Session

OPT_LEVELS = ("none", "basic", "all")


_SOURCE_DIGEST = None


def _source_digest():
    """Hash of aotc's own code, templates and runtime: a changed compiler never reuses
    an old entry."""
    global _SOURCE_DIGEST
    if _SOURCE_DIGEST is None:
        h = hashlib.sha256(__version__.encode())
        pkg = Path(__file__).resolve().parent
        for base in (pkg, resources.templates_dir(), resources.runtime_dir()):
            for path in sorted(base.rglob("*")):
                if path.suffix in (".py", ".h", ".c", ".j2") and "__pycache__" not in path.parts:
                    h.update(str(path.relative_to(base)).encode())
                    h.update(path.read_bytes())
        _SOURCE_DIGEST = h.hexdigest()
    return _SOURCE_DIGEST


def model_name(model, proto, name):
    if name is None:
        if isinstance(model, (str, os.PathLike)):
            name = Path(model).stem
        else:
            name = proto.graph.name or "model"
    name = re.sub(r"[^A-Za-z0-9_]", "_", name).lower()
    if not name or not name[0].isalpha():
        name = "m_" + name
    return name[:48]


def normalize_shapes(graph, shapes):
    """shapes: None, a tuple (the first input's shape) or {name: tuple}."""
    if shapes is None:
        return {}
    if isinstance(shapes, dict):
        return {k: tuple(int(d) for d in v) for k, v in shapes.items()}
    if not graph.inputs:
        raise InvalidModel("the model has no inputs to give a shape to")
    return {graph.inputs[0].name: tuple(int(d) for d in shapes)}


def compile(model, shapes=None, mode="fast", opt_level="all", target="native", threads=None,
            out_dir=None, name=None, weights="incbin", sanitize=False, dump_optimized=None):
    """Compile an ONNX model (path, bytes or ModelProto) for fixed input shapes and
    return a Session. See the README for the options."""
    if opt_level not in OPT_LEVELS:
        raise Unsupported(f"opt_level {opt_level!r} is not one of {', '.join(OPT_LEVELS)}")
    if mode not in build.MODES:
        raise Unsupported(f"mode {mode!r} is not one of {', '.join(build.MODES)}")
    proto = load_model(model)
    name = model_name(model, proto, name)
    graph = import_model(proto)
    fixed = normalize_shapes(graph, shapes)
    resolved_target = build.resolve_target(target)
    cache.max_size()   # a bad AOTC_CACHE_MAX_SIZE stops the compile before any work
    options = {"shapes": sorted((k, list(v)) for k, v in fixed.items()), "mode": mode,
               "opt_level": opt_level, "target": resolved_target, "name": name,
               "weights": weights, "sanitize": bool(sanitize), "cc": build.compiler(),
               "c_flags": build.c_flags(resolved_target, mode, sanitize)}
    key = hashlib.sha256()
    key.update(proto.SerializeToString())
    key.update(json.dumps(options, sort_keys=True).encode())
    key.update(_source_digest().encode())
    digest = key.hexdigest()[:20]

    if dump_optimized is not None:
        dump_optimized_graph(proto, opt_level, mode, dump_optimized)
    entry = os.path.join(cache.cache_root(), f"{name}-{digest}")
    if os.path.isfile(os.path.join(entry, cache.MANIFEST)):
        cache.touch(entry)
    else:
        _build_entry(entry, graph, fixed, name, digest, options)
        cache.trim_if_due(keep=[entry])
    if out_dir is not None:
        _copy_entry(entry, out_dir)
        return Session(out_dir, threads)
    return Session(entry, threads)


def _build_entry(entry, graph, shapes, name, digest, options):
    parent = os.path.dirname(entry)
    tmp = tempfile.mkdtemp(prefix=f".{name}-", dir=parent)
    try:
        nodes_before = _count(graph)
        fired, notes = passes.run_passes(graph, options["opt_level"], options["mode"])
        plan = make_plan(graph, shapes, options["mode"], nodes_before,
                         fuse=passes.LEVELS[options["opt_level"]] >= passes.LEVELS["all"])
        fired = {**fired, **plan.fusions}
        surface = codegen.generate(plan, name, tmp, options["target"], options["weights"])
        library = build.build_library(tmp, name, options["target"], options["mode"], options["sanitize"],
                                      os.path.join(cache.cache_root(), cache.OBJECTS_DIR))
        report = {
            "passes": fired, "pass_notes": notes, "nodes_before": plan.nodes_before, "nodes_after": plan.nodes_after,
            "workspace_bytes": plan.workspace_bytes, "intermediate_bytes": plan.intermediate_bytes,
            "weights_bytes": surface["weights_bytes"], "mode": options["mode"],
            "target": options["target"], "opt_level": options["opt_level"],
        }
        manifest = {"name": name, "library": library,
                    "aotc_version": __version__, "workspace_bytes": plan.workspace_bytes,
                    "inputs": surface["inputs"], "outputs": surface["outputs"],
                    "options": options, "report": report}
        with open(os.path.join(tmp, cache.MANIFEST), "w") as f:
            json.dump(manifest, f, indent=1)
        _write_module(tmp, name)
        try:
            os.rename(tmp, entry)
        except OSError:
            if not os.path.isfile(os.path.join(entry, cache.MANIFEST)):
                raise
            shutil.rmtree(tmp, ignore_errors=True)   # another process finished first
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def dump_optimized_graph(proto, opt_level, mode, path):
    """Write the graph as the passes leave it, as an ONNX file."""
    import onnx
    graph = import_model(proto)
    passes.run_passes(graph, opt_level, mode)
    onnx.save(export_graph(graph), os.fspath(path))


def _write_module(out_dir, name):
    import jinja2
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(resources.templates_dir())),
                             keep_trailing_newline=True, undefined=jinja2.StrictUndefined)
    source = (Path(__file__).resolve().parent / "session.py").read_text()
    with open(os.path.join(out_dir, f"{name}.py"), "w") as f:
        f.write(env.get_template("module.py.j2").render(name=name, session_source=source))


def _count(graph):
    counts = {}
    for n in graph.nodes:
        counts[n.op_type] = counts.get(n.op_type, 0) + 1
    return counts


def _copy_entry(entry, out_dir):
    """Copy a cache entry into out_dir, each file written atomically."""
    os.makedirs(out_dir, exist_ok=True)
    for root, _, files in os.walk(entry):
        rel = os.path.relpath(root, entry)
        dest_dir = os.path.normpath(os.path.join(out_dir, rel))
        os.makedirs(dest_dir, exist_ok=True)
        for fname in files:
            fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=dest_dir)
            os.close(fd)
            shutil.copyfile(os.path.join(root, fname), tmp)
            os.replace(tmp, os.path.join(dest_dir, fname))
