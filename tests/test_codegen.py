"""The generated C: warning-free C99, model text only as escaped data, linkable twice."""
import os
import shutil
import subprocess

import cffi
import numpy as np
import pytest
from onnx import helper

import aotc
from aotc import resources
from aotc.codegen import cnames, runtime_headers
from oracle import make_model, random

HOSTILE = ['a*/b', 'q"uote', "back\\slash", "new\nline", "#include <stdio.h>", "tri??/graph",
           "nul\0byte", "non-ascii \u00e9\u4e2d", "*/ int evil(void) { return 1; } /*", "", " "]
CC = shutil.which(os.environ.get("CC", "cc"))
STRICT = ["-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic-errors", "-I.", "-Wa,-I."]


def _hostile_model():
    names = [f"v{i}{s}" for i, s in enumerate(HOSTILE)]
    nodes, prev = [], "in" + HOSTILE[0]
    for i, name in enumerate(names):
        nodes.append(helper.make_node("Relu" if i % 2 else "Neg", [prev], [name], name=HOSTILE[i]))
        prev = name
    model = make_model(nodes, [("in" + HOSTILE[0], np.float32, (3,))], [(prev, np.float32, (3,))])
    model.graph.name = HOSTILE[3]
    model.graph.doc_string = HOSTILE[4]
    return model


def test_hostile_names_reach_the_c_only_escaped(tmp_path):
    sess = aotc.compile(_hostile_model(), out_dir=tmp_path)
    x = random((3,))
    expected = x
    for i in range(len(HOSTILE)):
        expected = np.maximum(expected, 0) if i % 2 else -expected
    np.testing.assert_array_equal(sess.run(x), expected)
    source = (tmp_path / f"{sess.name}.c").read_text() + (tmp_path / f"{sess.name}.h").read_text()
    for text in HOSTILE:
        if len(text.strip()) > 3:
            assert text not in source
    assert "??" not in source and "{ return 1; }" not in source


def test_names_that_sanitize_alike_get_distinct_identifiers():
    namer = cnames.Namer("t")
    assert len({namer("a-b"), namer("a_b"), namer("a b"), namer("a.b")}) == 4
    assert namer("a-b") == namer("a-b")


def test_string_literals_hold_the_exact_bytes():
    lit = cnames.string_literal("é?\"\\\n*/")
    assert "?" not in lit and "*/" not in lit and "\n" not in lit
    raw = bytes(int(o, 8) for o in lit.strip('"').split("\\")[1:])
    assert raw == "é?\"\\\n*/".encode()


@pytest.mark.skipif(CC is None, reason="no C compiler")
@pytest.mark.parametrize("extra", [[], ["-DAOTC_NO_THREADS"]])
def test_generated_c_compiles_strictly(tmp_path, extra):
    sess = aotc.compile(_hostile_model(), out_dir=tmp_path)
    cmd = [CC, *STRICT, *extra, "-c", f"{sess.name}.c", "-o", "strict.o"]
    result = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


@pytest.mark.skipif(CC is None, reason="no C compiler")
def test_generated_c_compiles_strictly_at_o3_with_its_own_flags(tmp_path):
    """With the model's target and mode flags at -O3, where GCC inlines the most: a
    reduction over whole vectors once met -Waggressive-loop-optimizations in a tail
    loop that cannot run."""
    from aotc import build
    model = make_model([helper.make_node("ReduceMean", ["x"], ["y"], axes=[1], keepdims=0)],
                       [("x", np.float32, (32, 256))], [("y", np.float32, (32,))], opset=17)
    sess = aotc.compile(model, out_dir=tmp_path, name="reduce")
    flags = build.c_flags(sess.report["target"], sess.report["mode"])
    cmd = [CC, *STRICT, *flags, "-O3", "-c", f"{sess.name}.c", "-o", "strict.o"]
    result = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


@pytest.mark.skipif(CC is None, reason="no C compiler")
def test_two_models_link_into_one_program(tmp_path):
    for name, op in (("first", "Neg"), ("second", "Relu")):
        model = make_model([helper.make_node(op, ["x"], ["y"])], [("x", np.float32, (2,))],
                           [("y", np.float32, (2,))])
        aotc.compile(model, out_dir=tmp_path / name, name=name,
                     weights="c" if name == "second" else "incbin")
    (tmp_path / "main.c").write_text(r'''
#include <stdio.h>
#include "first.h"
#include "second.h"
static unsigned char ws[256] __attribute__((aligned(64)));
int main(void) {
  float x[2] = {1.5f, -2.0f}, a[2], b[2];
  if (first_run(ws, x, a) || second_run(ws, a, b)) return 1;
  printf("%g %g %g %g\n", a[0], a[1], b[0], b[1]);
  return 0;
}
''')
    cmd = [CC, "-std=c99", "-O1", "-Wall", "-Wextra", "-Werror", "-Ifirst", "-Isecond", "-Wa,-Ifirst",
           "main.c", "first/first.c", "second/second.c", "-o", "both", "-lpthread", "-lm"]
    build = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    run = subprocess.run([str(tmp_path / "both")], capture_output=True, text=True)
    assert run.stdout.split() == ["-1.5", "2", "0", "2"]


def _runtime_includes(source):
    return [line.split("/")[-1].rstrip('"') for line in source.splitlines()
            if line.startswith('#include "aotc_runtime/')]


def test_runs_read_the_weights_where_use_weights_points(tmp_path):
    """<name>_use_weights: a model's weights may move (to faster memory, or loaded from
    storage); here to a copy with every weight doubled, which doubles a MatMul's output."""
    w = random((40, 24), seed=1)
    model = make_model([helper.make_node("MatMul", ["x", "w"], ["y"])], [("x", np.float32, (3, 40))],
                       [("y", np.float32, (3, 24))], {"w": w})
    sess = aotc.compile(model, out_dir=tmp_path, name="moved")
    x = random((3, 40))
    y = sess.run(x)
    ffi = cffi.FFI()
    ffi.cdef("const void *moved_weights_data(void); int moved_use_weights(const void *weights);")
    lib = ffi.dlopen(str(tmp_path / "libmoved.so"))
    nbytes = sess.report["weights_bytes"]
    builtin = np.frombuffer(ffi.buffer(lib.moved_weights_data(), nbytes), np.float32)
    doubled = np.empty(nbytes // 4 + 16, np.float32)
    doubled = doubled[(-doubled.ctypes.data % 64) // 4:][:nbytes // 4]
    doubled[:] = builtin * 2
    assert lib.moved_use_weights(ffi.cast("void *", doubled.ctypes.data + 4)) == 1   # misaligned
    np.testing.assert_array_equal(sess.run(x), y)
    assert lib.moved_use_weights(ffi.cast("void *", doubled.ctypes.data)) == 0
    np.testing.assert_array_equal(sess.run(x), 2 * y)
    assert lib.moved_use_weights(ffi.NULL) == 0
    np.testing.assert_array_equal(sess.run(x), y)


def test_a_model_includes_only_the_runtime_headers_it_uses(tmp_path):
    model = make_model([helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["y"])],
                       [("x", np.float32, (2, 3))], [("y", np.float32, (2, 4))],
                       initializers={"w": random((3, 4))})
    sess = aotc.compile(model, out_dir=tmp_path)
    included = _runtime_includes((tmp_path / f"{sess.name}.c").read_text())
    assert "aotc_gemm.h" in included and "aotc_threads.h" in included
    assert not {"aotc_runtime.h", "aotc_rnn.h", "aotc_conv.h", "aotc_signal.h"} & set(included)


def test_an_unknown_runtime_name_includes_the_whole_runtime():
    assert runtime_headers.headers_for("aotc_gemm_no_such_kernel(x);") == ["aotc_runtime.h"]
    assert runtime_headers.headers_for("#ifdef AOTC_EXACT\n#endif") == sorted(runtime_headers.ALWAYS)


@pytest.mark.skipif(CC is None, reason="no C compiler")
@pytest.mark.parametrize("flags", [["-march=x86-64-v4", "-DAOTC_TARGET_AVX512"],
                                   ["-march=x86-64-v3", "-DAOTC_TARGET_AVX2", "-DAOTC_NO_THREADS"],
                                   ["-DAOTC_TARGET_GENERIC", "-DAOTC_EXACT"]])
def test_every_runtime_header_compiles_on_its_own(tmp_path, flags):
    # A model includes only the headers it names, so none may lean on an earlier include.
    headers = sorted(p.name for p in resources.runtime_dir().glob("*.h"))
    for header in headers:
        (tmp_path / f"only_{header}.c").write_text(f'#include "{header}"\n')
    cmd = [CC, *STRICT, f"-I{resources.runtime_dir()}", *flags, "-fsyntax-only",
           *[f"only_{h}.c" for h in headers]]
    result = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
