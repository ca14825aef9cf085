"""Hostile models and careless callers: every broken model ends in an aotc error that
names the node or value, before any C compiler runs; model text reaches the C only as
sanitized identifiers or escaped literals; sizes past the limits are refused; a Session
takes bad feeds and concurrent use without harm."""
import os
import re
import shutil
import subprocess
import threading
import time

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import aotc
from aotc import build, codegen
from oracle import assert_matches_ort, make_model, random

HOSTILE = ['a*/b', 'q"uote', "back\\slash", "new\nline", "#include <stdio.h>", "tri??/graph",
           "nul\0byte", "non-ascii \u00e9\u4e2d", "*/ int evil(void) { return 1; } /*"]
CC = shutil.which(os.environ.get("CC", "cc"))


@pytest.fixture
def no_c_compiler(monkeypatch):
    """Fails the test if compilation gets as far as the C compiler."""
    def refuse(*args, **kwargs):
        raise AssertionError("the C compiler ran for a model that should have been refused")
    monkeypatch.setattr(build, "compile_object", refuse)


def _one(op, inputs, attrs=None, shape=(2, 3), inits=None, opset=17, dtype=np.float32, name="victim",
         graph_inputs=None):
    """One node; its inputs not in `inits` are graph inputs unless `graph_inputs` says otherwise."""
    if graph_inputs is None:
        graph_inputs = [n for n in inputs if n and n not in (inits or {})]
    ins = [(n, dtype, shape) for n in graph_inputs]
    return make_model([helper.make_node(op, inputs, ["y"], name=name, **(attrs or {}))], ins,
                      [("y", dtype, None)], inits, opset=opset)


def _refused(model, error, names, **options):
    with pytest.raises(error) as e:
        aotc.compile(model, **options)
    for name in names:
        assert name in str(e.value), f"{name!r} not named in: {e.value}"
    return e.value


# ---- malformed models ----------------------------------------------------------------

def test_every_truncation_is_refused_or_compiles(no_c_compiler):
    data = _one("Relu", ["x"]).SerializeToString()
    _refused(data[:0], aotc.InvalidModel, ["no graph"])
    for cut in range(1, len(data), max(1, len(data) // 12)):
        with pytest.raises(aotc.AotcError):
            aotc.compile(data[:cut])


def _duplicate_value():
    nodes = [helper.make_node("Relu", ["x"], ["x"], name="shadow")]
    return make_model(nodes, [("x", np.float32, (2,))], [("x", np.float32, (2,))])


def _long_cycle():
    nodes = [helper.make_node("Add", ["x", "c"], ["a"], name="n1"), helper.make_node("Relu", ["a"], ["b"], name="n2"),
             helper.make_node("Neg", ["b"], ["c"], name="n3"), helper.make_node("Abs", ["a"], ["y"], name="n4")]
    return make_model(nodes, [("x", np.float32, (2,))], [("y", np.float32, (2,))])


def _empty_input_name():
    model = _one("Add", ["x", "b"], inits={"b": np.ones(3, np.float32)})
    model.graph.node[0].input[1] = ""
    return model


def _duplicate_initializer():
    model = _one("Add", ["x", "b"], inits={"b": np.ones(3, np.float32)})
    model.graph.initializer.append(model.graph.initializer[0])
    return model


@pytest.mark.parametrize("build_model, error, names", [
    (_duplicate_value, aotc.InvalidModel, ["shadow", "'x'"]),
    (_long_cycle, aotc.InvalidModel, ["cycle"]),
    (_empty_input_name, aotc.InvalidModel, ["victim", "input 1"]),
    (_duplicate_initializer, aotc.InvalidModel, ["'b'", "twice"]),
    (lambda: _one("Add", ["x", "nowhere"], graph_inputs=["x"]), aotc.InvalidModel, ["victim", "nowhere"]),
], ids=["value-named-twice", "three-node-cycle", "empty-input-name", "initializer-twice", "dangling"])
def test_broken_graph_structure_is_named(no_c_compiler, build_model, error, names):
    _refused(build_model(), error, names)


@pytest.mark.parametrize("op, attrs, opset", [
    ("Softmax", {"axis": "one"}, 17), ("Softmax", {"axis": [1, 2]}, 17),
    ("Transpose", {"perm": 3}, 17), ("Transpose", {"perm": "ab"}, 17),
    ("Flatten", {"axis": [0]}, 17), ("Concat", {"axis": "x"}, 17),
    ("Softmax", {"axis": helper.make_graph([], "g", [], [])}, 17),
])
def test_wrong_attribute_types_name_the_node(no_c_compiler, op, attrs, opset):
    _refused(_one(op, ["x"], attrs, opset=opset), aotc.InvalidModel, ["victim"])


@pytest.mark.parametrize("op, ins, attrs, inits", [
    ("Gemm", ["x", "w"], {"transB": "yes"}, {"w": np.ones((2, 3), np.float32)}),
], ids=["gemm-transB-string"])
def test_wrong_attribute_types_found_only_by_emit_name_the_node(no_c_compiler, op, ins, attrs, inits):
    _refused(_one(op, ins, attrs, inits=inits), aotc.InvalidModel, ["victim"])


@pytest.mark.parametrize("mean_inputs, axes", [([], [-1]), (["x"], 5)], ids=["no-input", "int-axes"])
def test_a_malformed_node_inside_a_pass_pattern_is_an_invalid_model(mean_inputs, axes):
    nodes = [helper.make_node("ReduceMean", mean_inputs, ["m"], name="mean", axes=axes),
             helper.make_node("Sub", ["x", "m"], ["y"], name="sub")]
    model = make_model(nodes, [("x", np.float32, (2, 4))], [("y", np.float32, None)])
    _refused(model, aotc.InvalidModel, ["mean"])


@pytest.mark.parametrize("op, attrs, inits, opset", [
    ("Softmax", {"axis": 2}, None, 17), ("Softmax", {"axis": -3}, None, 17),
    ("Concat", {"axis": 1 << 62}, None, 17), ("Flatten", {"axis": 3}, None, 17),
    ("Gather", {"axis": -3}, {"i": np.array([0], np.int64)}, 17),
    ("ReduceSum", {"axes": [2]}, None, 11), ("Unsqueeze", {"axes": [-4]}, None, 11),
    ("LayerNormalization", {"axis": 2}, None, 17), ("Transpose", {"perm": [1, 2]}, None, 17),
])
def test_out_of_range_axes_name_the_node(no_c_compiler, op, attrs, inits, opset):
    inputs = ["x"] + list(inits or {})
    _refused(_one(op, inputs, attrs, inits=inits, opset=opset), aotc.InvalidModel, ["victim"])


@pytest.mark.parametrize("op, shapes, inits", [
    ("MatMul", [(2, 3), (2, 3)], None),
    ("Concat", [(2, 3), (3, 2)], None),
    ("Where", [(2, 3), (4, 3), (2, 3)], None),
    ("Conv", [(1, 3, 5, 5)], {"w": np.ones((2, 4, 3, 3), np.float32)}),
    ("Gemm", [(2, 3)], {"w": np.ones((4, 2), np.float32)}),
], ids=["matmul", "concat", "where", "conv-channels", "gemm"])
def test_operand_shape_mismatches_name_the_node(no_c_compiler, op, shapes, inits):
    names = [f"x{i}" for i in range(len(shapes))]
    dtypes = [np.bool_ if op == "Where" and i == 0 else np.float32 for i in range(len(shapes))]
    model = make_model([helper.make_node(op, names + list(inits or {}), ["y"], name="victim", axis=0)
                        if op == "Concat" else
                        helper.make_node(op, names + list(inits or {}), ["y"], name="victim")],
                       list(zip(names, dtypes, shapes)), [("y", np.float32, None)], inits)
    _refused(model, aotc.InvalidModel, ["victim"])


def _initializer(dims, raw):
    model = _one("Add", ["x", "w"], shape=(2,))
    model.graph.initializer.append(TensorProto(name="w", data_type=TensorProto.FLOAT, dims=dims, raw_data=raw))
    return model


@pytest.mark.parametrize("dims, raw", [
    ([2], b"\0" * 12), ([2], b"\0" * 3), ([-1], b"\0" * 4), ([1 << 40], b"\0" * 4), ([0], b"\0" * 4),
], ids=["long", "ragged", "negative", "huge", "zero"])
def test_initializer_data_disagreeing_with_dims_names_it(no_c_compiler, dims, raw):
    _refused(_initializer(dims, raw), aotc.InvalidModel, ["'w'"])


def test_negative_declared_dims_are_refused(no_c_compiler):
    model = _one("Relu", ["x"])
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_value = -4
    _refused(model, aotc.InvalidModel, ["'x'", "negative"])
    _refused(_one("Relu", ["x"], shape=("n", 3)), aotc.InvalidInput, ["'x'"], shapes={"x": (-1, 3)})


@pytest.mark.parametrize("domain", ["com.evil", "ai.onnx.ml", "x*/y"])
def test_unknown_opset_domains_name_the_operator(no_c_compiler, domain):
    model = _one("Relu", ["x"])
    model.graph.node[0].domain = domain
    model.opset_import.append(helper.make_opsetid(domain, 3))
    error = _refused(model, aotc.UnsupportedOperator, ["Relu"])
    assert error.operators == [f"{domain}.Relu (opset 3)"]


# ---- external data -------------------------------------------------------------------

def _external(folder, location, **keys):
    model = _one("Add", ["x", "w"], shape=(4,), inits={"w": np.ones(4, np.float32)})
    t = model.graph.initializer[0]
    t.ClearField("raw_data")
    t.data_location = TensorProto.EXTERNAL
    t.external_data.add(key="location", value=location)
    for k, v in keys.items():
        t.external_data.add(key=k, value=v)
    path = folder / "m.onnx"
    onnx.save(model, path)
    return path


@pytest.fixture
def model_folder(tmp_path):
    (tmp_path / "outside.bin").write_bytes(np.ones(4, np.float32).tobytes())
    inner = tmp_path / "a" / "b"
    inner.mkdir(parents=True)
    (inner / "link.bin").symlink_to(tmp_path / "outside.bin")
    (inner / "up").symlink_to(tmp_path)
    return inner


@pytest.mark.parametrize("location", ["../../etc/passwd", "../../outside.bin", "/etc/passwd", "//etc/passwd",
                                      "link.bin", "up/outside.bin"])
def test_external_data_never_leaves_the_model_folder(no_c_compiler, model_folder, location):
    _refused(_external(model_folder, location), aotc.InvalidModel, ["'w'", "outside"])


@pytest.mark.parametrize("location, keys", [("", {}), ("absent.bin", {}), ("w.bin", {"offset": "64"}),
                                            ("w.bin", {"length": "999"})])
def test_unreadable_external_data_is_an_invalid_model(no_c_compiler, model_folder, location, keys):
    (model_folder / "w.bin").write_bytes(b"\0" * 16)
    _refused(_external(model_folder, location, **keys), aotc.InvalidModel, ["'w'"])


@pytest.mark.parametrize("location, keys", [("a\0b", {}), ("w.bin", {"offset": "-4"}), ("w.bin", {"offset": "x"})],
                         ids=["nul", "negative-offset", "text-offset"])
def test_malformed_external_data_keys_are_an_invalid_model(no_c_compiler, model_folder, location, keys):
    (model_folder / "w.bin").write_bytes(b"\0" * 16)
    _refused(_external(model_folder, location, **keys), aotc.InvalidModel, ["'w'"])


# ---- models that look odd but are valid: compile and match onnxruntime ---------------

def _out_of_order():
    nodes = [helper.make_node("Neg", ["a"], ["y"], name="second"), helper.make_node("Relu", ["x"], ["a"], name="first")]
    return make_model(nodes, [("x", np.float32, (3, 5))], [("y", np.float32, (3, 5))])


def _input_is_output():
    nodes = [helper.make_node("Relu", ["x"], ["y"])]
    return make_model(nodes, [("x", np.float32, (3, 5))], [("y", np.float32, None), ("x", np.float32, None)])


def _empty_tensor():
    return _one("Relu", ["x"], shape=("n", 5))


def _unused_node_output():
    nodes = [helper.make_node("Relu", ["x"], ["unused"]), helper.make_node("Neg", ["x"], ["y"])]
    return make_model(nodes, [("x", np.float32, (3, 5))], [("y", np.float32, None)])


@pytest.mark.parametrize("build_model", [_out_of_order, _input_is_output, _empty_tensor, _unused_node_output])
def test_odd_but_valid_models_match_onnxruntime(build_model):
    model = build_model()
    shape = tuple(d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim)
    assert_matches_ort(model, {"x": random(shape)}, shapes={"x": shape})


def test_a_repeated_graph_output_compiles():
    model = _one("Relu", ["x"])
    model.graph.output.append(model.graph.output[0])
    x = random((2, 3))
    np.testing.assert_array_equal(aotc.compile(model).run(x), np.maximum(x, 0))


# ---- injection: model text in the C only as identifiers and escaped literals ---------

@pytest.mark.parametrize("op, attr, inits, opset", [
    ("Conv", "auto_pad", {"w": np.ones((2, 3, 3, 3), np.float32)}, 17),
    ("MaxPool", "auto_pad", None, 17), ("AveragePool", "auto_pad", None, 17),
    ("Pad", "mode", {"p": np.zeros(8, np.int64)}, 17), ("Gelu", "approximate", None, 20),
])
@pytest.mark.parametrize("text", HOSTILE[:5] + HOSTILE[6:8])
def test_hostile_string_attributes_are_refused_by_name(no_c_compiler, op, attr, inits, opset, text):
    attrs = {attr: text, **({"kernel_shape": [2, 2]} if "Pool" in op else {})}
    model = _one(op, ["x"] + list(inits or {}), attrs, shape=(1, 3, 5, 5), inits=inits, opset=opset)
    error = _refused(model, (aotc.InvalidModel, aotc.Unsupported), ["victim"])
    assert attr in str(error)


def _every_family(hostile):
    """One model touching every operator family, every name and doc string hostile."""
    n = helper.make_node
    ops = [n("Conv", ["x", "cw"], ["c"], pads=[1, 1, 1, 1]), n("MaxPool", ["c"], ["p"], kernel_shape=[2, 2]),
           n("AveragePool", ["p"], ["ap"], kernel_shape=[2, 2], auto_pad="SAME_UPPER"),
           n("Relu", ["ap"], ["r"]), n("Flatten", ["r"], ["f"]), n("MatMul", ["f", "mw"], ["m"]),
           n("Gemm", ["m", "gw", "gb"], ["g"], transB=1), n("LayerNormalization", ["g", "ls", "lb"], ["l"]),
           n("Softmax", ["l"], ["s"], axis=-1), n("ReduceSum", ["s", "ra"], ["rs"], keepdims=1),
           n("Transpose", ["s"], ["t"], perm=[1, 0]), n("Concat", ["t", "t"], ["cc"], axis=0),
           n("Slice", ["cc", "st", "en"], ["sl"]), n("Gather", ["sl", "gi"], ["ga"], axis=1),
           n("Pad", ["ga", "pp"], ["pd"], mode="reflect"), n("Cast", ["pd"], ["ca"], to=TensorProto.DOUBLE),
           n("Cast", ["ca"], ["cb"], to=TensorProto.FLOAT), n("Greater", ["cb", "rs"], ["gt"]),
           n("Where", ["gt", "cb", "rs"], ["w"]), n("Clip", ["w", "lo", "hi"], ["cl"]),
           n("Gelu", ["cl"], ["ge"], approximate="tanh"), n("Shape", ["ge"], ["sh"]),
           n("Reshape", ["ge", "sh"], ["out"]), n("Sigmoid", ["out"], ["sg"])]
    inits = {"cw": random((4, 3, 3, 3), seed=1), "mw": random((36, 6), seed=2), "gw": random((5, 6), seed=3),
             "gb": random((5,), seed=4), "ls": random((5,), seed=5), "lb": random((5,), seed=6),
             "ra": np.array([1], np.int64), "st": np.array([1], np.int64), "en": np.array([9], np.int64),
             "gi": np.array([0, 0, 0], np.int64), "pp": np.array([1, 1, 1, 1], np.int64),
             "lo": np.float32(0.1), "hi": np.float32(0.9)}
    rename = {}
    for i, node in enumerate(ops):
        node.name, node.doc_string = f"{node.op_type}{hostile[i % len(hostile)]}", hostile[(i + 1) % len(hostile)]
        for v in list(node.input) + list(node.output):
            rename.setdefault(v, v + hostile[len(rename) % len(hostile)])
        node.input[:] = [rename[v] for v in node.input]
        node.output[:] = [rename[v] for v in node.output]
    model = make_model(ops, [(rename["x"], np.float32, (1, 3, 4, 4))], [(rename["sg"], np.float32, None)],
                       {rename[k]: v for k, v in inits.items()}, opset=20)
    model.graph.name, model.graph.doc_string, model.doc_string = hostile[3], hostile[4], hostile[0]
    model.producer_name = hostile[5]
    model.graph.input[0].doc_string = hostile[8]
    model.metadata_props.add(key=hostile[1], value=hostile[2])
    return model, rename["x"]


def test_hostile_text_in_every_operator_family_is_only_escaped(tmp_path):
    model, x_name = _every_family(HOSTILE)
    got = assert_matches_ort(model, {x_name: random((1, 3, 4, 4))}, rtol=1e-4, atol=1e-5, out_dir=tmp_path)
    assert len(got) == 1
    text = "".join(p.read_text(errors="replace") for p in tmp_path.iterdir() if p.suffix in (".c", ".h", ".py"))
    for hostile in HOSTILE:
        assert hostile not in text
    assert "??" not in text and "{ return 1; }" not in text and "#include <stdio.h>" not in text
    if CC:
        name = next(p.stem for p in tmp_path.glob("*.c"))
        strict = [CC, "-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic-errors", "-I.", "-Wa,-I.",
                  "-c", f"{name}.c", "-o", "strict.o"]
        result = subprocess.run(strict, cwd=tmp_path, capture_output=True, text=True)
        assert result.returncode == 0, result.stderr


def test_names_that_sanitize_alike_stay_apart(tmp_path):
    names = ["a-b", "a_b", "a b", "a.b"]
    nodes = [helper.make_node("Add", [names[0], names[1]], [names[2]]),
             helper.make_node("Mul", [names[0], names[1]], [names[3]])]
    model = make_model(nodes, [(names[0], np.float32, (3,)), (names[1], np.float32, (3,))],
                       [(names[2], np.float32, None), (names[3], np.float32, None)])
    a, b = random((3,)), random((3,), seed=1)
    got = assert_matches_ort(model, {names[0]: a, names[1]: b}, out_dir=tmp_path)
    assert list(got) == names[2:]
    header = next(tmp_path.glob("*.h")).read_text()
    run_decl = re.search(r"int \w+_run\(([^)]*)\)", header).group(1)
    params = [p.split()[-1].lstrip("*") for p in run_decl.split(",")[1:]]
    assert len(params) == len(set(params)) == 4


# ---- resource limits ------------------------------------------------------------------

@pytest.fixture
def nothing_emitted(monkeypatch, no_c_compiler):
    def refuse(*args, **kwargs):
        raise AssertionError("code was emitted for a plan over the limit")
    monkeypatch.setattr(codegen, "generate", refuse)


@pytest.mark.parametrize("make", [
    lambda: make_model([helper.make_node("ConstantOfShape", ["s"], ["c"], name="big"),
                        helper.make_node("Relu", ["c"], ["y"], name="use")], [], [("y", np.float32, None)],
                       {"s": np.array([1 << 16, 1 << 14], np.int64)}),
    lambda: make_model([helper.make_node("Expand", ["x", "s"], ["c"], name="big"),
                        helper.make_node("ReduceSum", ["c"], ["y"], name="use", keepdims=0)],
                       [("x", np.float32, (1, 3))], [("y", np.float32, None)],
                       {"s": np.array([1 << 15, 1 << 14, 1], np.int64)}, opset=11),
], ids=["constantofshape", "expand"])
def test_a_workspace_over_2_gib_is_refused_before_emitting(nothing_emitted, make):
    _refused(make(), aotc.Unsupported, ["2 GiB"])


@pytest.mark.parametrize("make", [
    lambda: make_model([helper.make_node("ConstantOfShape", ["s"], ["y"], name="big")], [],
                       [("y", np.float32, None)], {"s": np.array([1 << 20, 1 << 20], np.int64)}),
    lambda: _one("Relu", ["x"], shape=(1 << 40, 3)),
], ids=["output", "input"])
def test_a_graph_input_or_output_over_2_gib_is_refused(nothing_emitted, make):
    _refused(make(), aotc.Unsupported, ["GiB"])


# ---- careless callers -----------------------------------------------------------------

@pytest.fixture(scope="module")
def wide():
    """Big enough that kernels split work over the pool's threads."""
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("Softmax", ["r"], ["y"], axis=-1), helper.make_node("Add", ["x", "x"], ["d"])]
    model = make_model(nodes, [("x", np.float32, (64, 96))], [("y", np.float32, None), ("d", np.float32, None)],
                       {"w": random((96, 80), seed=9)})
    return aotc.compile(model, threads=4)


@pytest.mark.parametrize("feed, message", [
    ([[1.0] * 96] * 64, "element type float64"),
    (3.0, "element type float64"),
    (None, "element type object"),
    ("text", "element type <U4"),
    (np.zeros((64, 96), ">f4"), "element type >f4"),
    (np.zeros((64, 96), np.float16), "element type float16"),
    (np.zeros((96, 64), np.float32), r"shape \[96, 64\]"),
    (np.zeros((1, 64, 96), np.float32), r"shape \[1, 64, 96\]"),
    (np.zeros((), np.float32), r"shape \[\]"),
])
def test_careless_feeds_are_invalid_inputs(wide, feed, message):
    with pytest.raises(aotc.InvalidInput, match=message):
        wide.run(feed)


def test_unaligned_strided_and_read_only_inputs_give_the_same_results(wide):
    x = random((64, 96), seed=3)
    want = wide.run({"x": x})
    raw = np.zeros(x.nbytes + 1, np.uint8)
    unaligned = np.frombuffer(raw.data, np.float32, x.size, offset=1).reshape(x.shape)
    unaligned[...] = x
    strided = np.zeros((64, 192), np.float32)[:, ::2]
    strided[...] = x
    read_only = x.copy()
    read_only.setflags(write=False)
    for feed in (unaligned, strided, read_only, np.asfortranarray(x)):
        before = feed.copy()
        got = wide.run({"x": feed})
        np.testing.assert_array_equal(feed, before)
        for name in want:
            np.testing.assert_array_equal(got[name], want[name])


def test_outputs_never_alias_inputs_or_each_other():
    model = _one("Relu", ["x"])
    model.graph.output.add().CopyFrom(model.graph.input[0])
    sess = aotc.compile(model)
    x = random((2, 3))
    first, second = sess.run({"x": x}), sess.run({"x": x})
    first["x"][...] = 99
    first["y"][...] = 99
    np.testing.assert_array_equal(second["x"], x)
    np.testing.assert_array_equal(second["y"], np.maximum(x, 0))
    assert not np.shares_memory(first["x"], x)


def _hammer(sess, feeds, expected, seconds, on_round=None):
    """8 threads run for `seconds`; returns (mismatches, errors, runs). Bounded: a
    deadlock fails the test instead of hanging it."""
    stop = time.monotonic() + seconds
    mismatches, errors, runs = [], [], [0]

    def worker(k):
        try:
            while time.monotonic() < stop:
                got = sess.run(feeds[k])
                runs[0] += 1
                if not all(np.array_equal(got[n], expected[k][n]) for n in got):
                    mismatches.append(k)
        except Exception as e:  # noqa: BLE001 - any failure is what the test reports
            errors.append(repr(e))

    threads = [threading.Thread(target=worker, args=(k,), daemon=True) for k in range(8)]
    for t in threads:
        t.start()
    while on_round and time.monotonic() < stop:
        on_round()
    for t in threads:
        t.join(timeout=seconds + 60)
        assert not t.is_alive(), "a run did not finish: deadlock"
    return mismatches, errors, runs[0]


def _feeds(n=8):
    return [{"x": random((64, 96), seed=i)} for i in range(n)]


def test_eight_threads_for_seconds_match_sequential_runs(wide):
    feeds = _feeds()
    expected = [wide.run(f) for f in feeds]
    mismatches, errors, runs = _hammer(wide, feeds, expected, seconds=3)
    assert errors == [] and mismatches == []
    assert runs >= 8


def test_closing_and_reopening_while_threads_run_is_safe(wide):
    feeds = _feeds()
    expected = [wide.run(f) for f in feeds]
    counts = iter([1, 3, 2, 4] * 1000)

    def churn():
        wide.close()
        aotc.load(wide.out_dir, threads=next(counts))   # changes the shared pool's size
        time.sleep(0.01)

    mismatches, errors, runs = _hammer(wide, feeds, expected, seconds=3, on_round=churn)
    assert errors == [] and mismatches == []
    np.testing.assert_array_equal(wide.run(feeds[0])["y"], expected[0]["y"])


@pytest.mark.parametrize("old, new", [(b"xq", b"x\xff"), (b"yq", b"y\xfd")])
def test_names_that_are_not_utf8_are_an_invalid_model(no_c_compiler, old, new):
    model = make_model([helper.make_node("Relu", ["xq"], ["yq"], name="nq")], [("xq", np.float32, (2,))],
                       [("yq", np.float32, (2,))])
    with pytest.raises(aotc.InvalidModel, match="UTF-8"):
        aotc.compile(model.SerializeToString().replace(old, new))


@pytest.mark.parametrize("weights", ["incbin", "c"])
def test_a_gigantic_c_file_is_refused_before_the_compiler_runs(monkeypatch, weights):
    from aotc import codegen
    monkeypatch.setattr(codegen, "MAX_SOURCE_BYTES", 2048 if weights == "incbin" else 64 << 10)
    nodes = [helper.make_node("Neg", ["x" if i == 0 else f"v{i}"], [f"v{i + 1}"]) for i in range(40)]
    model = make_model(nodes, [("x", np.float32, (4,))], [("v40", np.float32, (4,))],
                       {"big": random_array((1 << 16,))} if weights == "c" else None)
    if weights == "c":   # a weight the graph reads at run time, so it is emitted
        model.graph.node.append(helper.make_node("Gather", ["big", "idx"], ["picked"]))
        model.graph.input.append(helper.make_tensor_value_info("idx", TensorProto.INT64, [2]))
        model.graph.output.append(helper.make_tensor_value_info("picked", TensorProto.FLOAT, None))
    with pytest.raises(aotc.Unsupported, match="the limit is"):
        aotc.compile(model, weights=weights)


def random_array(shape):
    return np.random.default_rng(0).standard_normal(shape).astype(np.float32)
