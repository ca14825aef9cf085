"""The `aotc` command: compile, run and inspect.

    aotc compile MODEL.onnx [--shape 1x3x224x224 | --shape NAME=1x128 ...] [-o OUT_DIR]
                [--mode fast|exact] [--opt-level none|basic|all]
                [--target native|avx512|avx2|generic] [--name NAME] [--report]
                [--weights incbin|c]
    aotc run OUT_DIR [--input NAME=file.npy ...]
    aotc inspect OUT_DIR
    aotc cache [--clear | --trim]

Every aotc error ends the command with one line on stderr and exit code 2.
"""
import argparse
import json
import os
import sys
import traceback
from pathlib import Path

import numpy as np

EXIT_ERROR = 2
RANDOM_SEED = 0


class CliError(Exception):
    """A mistake in the command line or its files, reported like an aotc error."""
    kind = "UsageError"


# ---------------------------------------------------------------- argument parsing

def parse_dims(text):
    """'1x3x224x224' -> (1, 3, 224, 224); '' is a scalar."""
    if text.strip() == "":
        return ()
    try:
        dims = tuple(int(d) for d in text.lower().split("x"))
    except ValueError:
        raise CliError(f"shape {text!r} is not of the form 1x3x224x224") from None
    if any(d < 0 for d in dims):
        raise CliError(f"shape {text!r} has a negative dimension")
    return dims


def parse_shapes(specs):
    """--shape values -> (unnamed dims or None, {name: dims})."""
    unnamed, named = None, {}
    for spec in specs or []:
        name, sep, dims = spec.rpartition("=")
        if not sep:
            if unnamed is not None:
                raise CliError("only one --shape may leave out the input name; "
                               "write the others as NAME=1x128")
            unnamed = parse_dims(spec)
        else:
            if not name:
                raise CliError(f"--shape {spec!r} has an empty input name")
            named[name] = parse_dims(dims)
    return unnamed, named


def first_input_name(model_path):
    """The name of the model's first real input (initializers are not inputs)."""
    import onnx
    try:
        proto = onnx.load(model_path, load_external_data=False)
    except Exception as e:
        raise CliError(f"cannot read {model_path}: {e}") from None
    initializers = {t.name for t in proto.graph.initializer}
    for value in proto.graph.input:
        if value.name not in initializers:
            return value.name
    raise CliError(f"{model_path} has no inputs to give a shape to")


def shapes_argument(model_path, specs):
    """What aotc.compile takes: None, a tuple (first input) or {name: tuple}."""
    unnamed, named = parse_shapes(specs)
    if unnamed is None:
        return named or None
    if not named:
        return unnamed
    first = first_input_name(model_path)
    if first in named:
        raise CliError(f"input {first!r} has two shapes: one unnamed --shape and one named")
    return {first: unnamed, **named}


def parse_input_files(specs):
    """--input NAME=file.npy values -> {name: array}."""
    feeds = {}
    for spec in specs or []:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path:
            raise CliError(f"--input {spec!r} is not of the form NAME=file.npy")
        try:
            feeds[name] = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as e:
            raise CliError(f"cannot read {path!r} for input {name!r}: {e}") from None
    return feeds


# ---------------------------------------------------------------- printing

def format_counts(counts):
    if not counts:
        return "(none)"
    return ", ".join(f"{op} {n}" for op, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def format_bytes(n):
    n = int(n)
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n} bytes ({n / size:.1f} {unit})"
    return f"{n} bytes"


def report_lines(report):
    """The compile report as aligned lines (what `inspect` and `compile --report` print)."""
    passes = report.get("passes") or {}
    fired = ", ".join(f"{p} x{n}" for p, n in sorted(passes.items())) if passes else "(none fired)"
    before, after = report.get("nodes_before", {}), report.get("nodes_after", {})
    workspace, intermediates = report.get("workspace_bytes", 0), report.get("intermediate_bytes", 0)
    saved = f" ({workspace / intermediates:.1%} of the intermediates)" if intermediates else ""
    lines = [
        f"mode:          {report.get('mode')}",
        f"target:        {report.get('target')}",
        f"opt level:     {report.get('opt_level')}",
        f"passes fired:  {fired}",
        f"nodes before:  {sum(before.values())}: {format_counts(before)}",
        f"nodes after:   {sum(after.values())}: {format_counts(after)}",
        f"workspace:     {format_bytes(workspace)}{saved}",
        f"intermediates: {format_bytes(intermediates)}",
        f"weights:       {format_bytes(report.get('weights_bytes', 0))}",
    ]
    known = {"passes", "nodes_before", "nodes_after", "workspace_bytes", "intermediate_bytes",
             "weights_bytes", "mode", "target", "opt_level"}
    for key in sorted(set(report) - known):   # facts added later (kernels chosen, ...)
        lines.append(f"{key + ':':<15}{json.dumps(report[key], sort_keys=True)}")
    return lines


def tensor_line(spec):
    return f"{spec['name']}: {spec['dtype']} {list(spec['shape'])}"


def summary(array):
    """One line about an output array: its statistics and its first values."""
    flat = array.reshape(-1)
    if flat.size == 0:
        return "empty"
    head = ", ".join(f"{v:.6g}" if array.dtype.kind in "fc" else str(v) for v in flat[:6].tolist())
    more = f", ... ({flat.size} values)" if flat.size > 6 else ""
    if array.dtype.kind in "fiub":
        values = flat.astype(np.float64)
        stats = f"min {values.min():.6g}  max {values.max():.6g}  mean {values.mean():.6g}  "
    else:
        stats = ""
    return f"{stats}first [{head}{more}]"


def random_input(spec, rng):
    """Seeded data for an input the user did not give: small values every operator accepts
    (non-negative integers below 4, so index inputs stay in range)."""
    dtype, shape = np.dtype(spec.dtype), tuple(spec.shape)
    if dtype.kind == "f":
        return rng.uniform(-1.0, 1.0, size=shape).astype(dtype)
    if dtype == np.bool_:
        return rng.random(size=shape) < 0.5
    return rng.integers(0, 4, size=shape).astype(dtype)


# ---------------------------------------------------------------- commands

def cmd_compile(args):
    import aotc
    model = Path(args.model)
    out_dir = args.output or f"{model.stem}_aotc"
    shapes = shapes_argument(args.model, args.shape)
    sess = aotc.compile(args.model, shapes=shapes, mode=args.mode, opt_level=args.opt_level,
                        target=args.target, out_dir=out_dir, name=args.name, weights=args.weights,
                        dump_optimized=args.dump_optimized, sanitize=args.sanitize)
    print(f"compiled {args.model} -> {out_dir}/ ({sess.name}.c, {sess.name}.h, module {sess.name})")
    for t in sess.inputs:
        print(f"  input  {t.name}: {t.dtype} {list(t.shape)}")
    for t in sess.outputs:
        print(f"  output {t.name}: {t.dtype} {list(t.shape)}")
    if args.report:
        for line in report_lines(sess.report):
            print(f"  {line}")
    return 0


def cmd_run(args):
    import aotc
    sess = aotc.load(args.out_dir, threads=args.threads)
    feeds = parse_input_files(args.input)
    rng = np.random.default_rng(args.seed)
    for spec in sess.inputs:
        if spec.name not in feeds:
            feeds[spec.name] = random_input(spec, rng)
            print(f"input  {spec.name}: {spec.dtype} {list(spec.shape)} (seeded random data, seed {args.seed})")
        else:
            print(f"input  {spec.name}: {feeds[spec.name].dtype} {list(feeds[spec.name].shape)} (from file)")
    outputs = sess.run(feeds)
    for name, array in outputs.items():
        print(f"output {name}: {array.dtype} {list(array.shape)}")
        print(f"  {summary(array)}")
        if args.save:
            os.makedirs(args.save, exist_ok=True)
            np.save(os.path.join(args.save, f"{_file_safe(name)}.npy"), array)
    if args.save:
        print(f"outputs saved as .npy files in {args.save}/")
    return 0


def _file_safe(name):
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name) or "output"


def cmd_inspect(args):
    manifest_path = os.path.join(args.out_dir, "manifest.json")
    try:
        with open(manifest_path) as f:
            manifest = json.load(f)
    except OSError as e:
        raise CliError(f"{args.out_dir} is not an aotc output folder: cannot read "
                       f"manifest.json ({e.strerror})") from None
    except ValueError as e:
        raise CliError(f"{manifest_path} is damaged: {e}") from None
    name = manifest.get("name", "?")
    print(f"model:         {name} (aotc {manifest.get('aotc_version', '?')}) in {args.out_dir}")
    for t in manifest.get("inputs", []):
        print(f"input:         {tensor_line(t)}")
    for t in manifest.get("outputs", []):
        print(f"output:        {tensor_line(t)}")
    weights = manifest.get("options", {}).get("weights")
    if weights:
        print(f"weights form:  {weights}")
    for line in report_lines(manifest.get("report", {})):
        print(line)
    return 0


def cmd_cache(args):
    from . import cache
    root = cache.cache_root()
    if args.clear:
        cache.clear(root)
    elif args.trim:
        cache.trim(root=root)
    found = cache.items(root)
    limit = cache.max_size()
    bound = f"{_mib(limit)} (AOTC_CACHE_MAX_SIZE)" if limit else "none (AOTC_CACHE_MAX_SIZE=0)"
    entries = sum(1 for i in found if i.kind == "entry")
    print(f"cache:   {root}")
    print(f"holds:   {entries} compiled models and {len(found) - entries} engine objects, "
          f"{_mib(sum(i.size for i in found))}")
    print(f"bound:   {bound}; past it, the least recently used go after a new compile "
          "(at most once a minute)")
    return 0


def _mib(size):
    return f"{size / (1 << 20):.1f} MiB"


# ---------------------------------------------------------------- entry point

def build_parser():
    parser = argparse.ArgumentParser(
        prog="aotc", description="Compile ONNX models ahead of time into C.")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="on an error, print the full message and traceback")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.required = True

    c = commands.add_parser("compile", help="compile an ONNX model into C and a Python module")
    c.add_argument("model", metavar="MODEL.onnx")
    c.add_argument("--shape", action="append", metavar="[NAME=]1x3x224x224",
                   help="fixed input shape; without NAME it applies to the first input (repeatable)")
    c.add_argument("-o", "--output", metavar="OUT_DIR", help="output folder (default ./<model>_aotc)")
    c.add_argument("--mode", choices=["fast", "exact"], default="fast")
    c.add_argument("--opt-level", choices=["none", "basic", "all"], default="all")
    c.add_argument("--target", choices=["native", "avx512", "avx2", "generic"], default="native")
    c.add_argument("--name", help="C prefix and module name (default: the model file's stem)")
    c.add_argument("--report", action="store_true", help="print what the compiler did")
    c.add_argument("--weights", choices=["incbin", "c"], default="incbin",
                   help="weights as an .incbin blob (fast builds) or C initializers")
    c.add_argument("--sanitize", action="store_true",
                   help="build with AddressSanitizer and UBSan (load with the sanitizer runtimes preloaded)")
    c.add_argument("--dump-optimized", metavar="FILE.onnx",
                   help="also write the graph after the passes as ONNX (fused operators in ai.aotc)")
    c.set_defaults(handler=cmd_compile)

    r = commands.add_parser("run", help="run a compiled model and summarise its outputs")
    r.add_argument("out_dir", metavar="OUT_DIR")
    r.add_argument("--input", action="append", metavar="NAME=file.npy",
                   help="input from a .npy file (repeatable); missing inputs get seeded random data")
    r.add_argument("--seed", type=int, default=RANDOM_SEED, help="seed for generated inputs")
    r.add_argument("--threads", type=int, help="threads (default: AOTC_NUM_THREADS, else one per core)")
    r.add_argument("--save", metavar="DIR", help="also write each output to DIR/<name>.npy")
    r.set_defaults(handler=cmd_run)

    i = commands.add_parser("inspect", help="print what the compiler did for an output folder")
    i.add_argument("out_dir", metavar="OUT_DIR")
    i.set_defaults(handler=cmd_inspect)

    k = commands.add_parser("cache", help="show the compile cache's size, trim or clear it")
    action = k.add_mutually_exclusive_group()
    action.add_argument("--clear", action="store_true", help="remove every compiled model and engine object")
    action.add_argument("--trim", action="store_true",
                        help="remove the least recently used down to AOTC_CACHE_MAX_SIZE now")
    k.set_defaults(handler=cmd_cache)
    return parser


def error_line(kind, message, verbose):
    lines = str(message).strip().splitlines() or [""]
    text = lines[0] if not verbose else "\n".join(lines)
    if len(lines) > 1 and not verbose:
        text += " (run `aotc -v ...` for the full message)"
    return f"aotc: error: {kind}: {text}"


def main(argv=None):
    from .errors import AotcError
    args = build_parser().parse_args(argv)
    try:
        return args.handler(args)
    except (AotcError, CliError) as e:
        if args.verbose:
            traceback.print_exc()
        print(error_line(e.kind, e, args.verbose), file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("aotc: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
