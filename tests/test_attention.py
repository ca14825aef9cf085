"""The fused attention (ai.aotc Attention, made by the attention pass) against
onnxruntime on the unfused MatMul -> scale -> [mask] -> Softmax -> MatMul graph, and
ai.aotc LayerNormalization (made by the layernorm pass for any opset)."""
import os

import numpy as np
import onnx
import pytest
from onnx import helper

import aotc
import aotc.passes
from aotc.errors import InvalidModel, Unsupported
from aotc.passes import attention as attention_pass
from oracle import make_model, random, relative_error, run_ort
from sanitize import CC, run_sanitized

RTOL = 1e-5


@pytest.fixture(autouse=True)
def attention_pass_in_table(monkeypatch):
    """Until the pass table lists the attention pass, run it where the table has it
    planned: after layernorm."""
    if not any(module is attention_pass for module, *_ in aotc.passes.PASSES):
        table = list(aotc.passes.PASSES)
        at = next(i for i, (module, *_) in enumerate(table) if module.NAME == "layernorm") + 1
        table.insert(at, (attention_pass, "all", False))
        monkeypatch.setattr(aotc.passes, "PASSES", table)


def _attention_model(b=2, h=3, sq=10, sk=10, d=16, dv=None, split_heads=True, scale_op="Mul",
                     scale=0.25, mask=None, mask_const=False, rank=4, opset=17):
    """The unfused pattern. split_heads: Q/K/V come in as [b, s, h, d] behind the
    head-split Transposes and the output leaves through the head-merge Transpose, as
    exporters write it; otherwise Q [.., sq, d], Kt [.., d, sk], V [.., sk, dv] directly.
    mask: None or its shape. Returns (model, feeds)."""
    dv = d if dv is None else dv
    nodes, inputs, inits, feeds = [], [], {}, {}
    batch = (b, h) if rank == 4 else (b,)

    def add_input(name, shape, value):
        inputs.append((name, np.float32, shape))
        feeds[name] = value

    if split_heads:
        assert rank == 4
        add_input("q", (b, sq, h, d), random((b, sq, h, d), seed=1))
        add_input("k", (b, sk, h, d), random((b, sk, h, d), seed=2))
        add_input("v", (b, sk, h, dv), random((b, sk, h, dv), seed=3))
        nodes += [helper.make_node("Transpose", ["q"], ["qh"], perm=[0, 2, 1, 3]),
                  helper.make_node("Transpose", ["k"], ["kh"], perm=[0, 2, 3, 1]),
                  helper.make_node("Transpose", ["v"], ["vh"], perm=[0, 2, 1, 3])]
        q, kt, v = "qh", "kh", "vh"
    else:
        add_input("q", batch + (sq, d), random(batch + (sq, d), seed=1))
        add_input("kt", batch + (d, sk), random(batch + (d, sk), seed=2))
        add_input("v", batch + (sk, dv), random(batch + (sk, dv), seed=3))
        q, kt, v = "q", "kt", "v"
    nodes.append(helper.make_node("MatMul", [q, kt], ["scores"]))
    last = "scores"
    if scale_op is not None:
        inits["c"] = np.array(scale if scale_op == "Mul" else 1.0 / scale, np.float32)
        nodes.append(helper.make_node(scale_op, ["scores", "c"], ["scaled"]))
        last = "scaled"
    if mask is not None:
        rng = np.random.default_rng(4)
        value = np.where(rng.random(mask) < 0.3, -10000.0, rng.uniform(-1, 1, mask)).astype(np.float32)
        if mask_const:
            inits["mask"] = value
        else:
            add_input("mask", mask, value)
        nodes.append(helper.make_node("Add", [last, "mask"], ["masked"]))
        last = "masked"
    nodes.append(helper.make_node("Softmax", [last], ["probs"], axis=-1))
    if split_heads:
        nodes += [helper.make_node("MatMul", ["probs", v], ["heads"]),
                  helper.make_node("Transpose", ["heads"], ["y"], perm=[0, 2, 1, 3])]
        out = (b, sq, h, dv)
    else:
        nodes.append(helper.make_node("MatMul", ["probs", v], ["y"]))
        out = batch + (sq, dv)
    model = make_model(nodes, inputs, [("y", np.float32, out)], inits, opset=opset)
    return model, feeds


def _check(model, feeds, rtol=RTOL, **options):
    """Compile at opt_level all, check the pass fired, compare with onnxruntime."""
    sess = aotc.compile(model, opt_level="all", **options)
    assert sess.report["passes"]["attention"] == 1, sess.report["pass_notes"]
    assert sess.report["nodes_after"].get("Attention") == 1
    assert "Softmax" not in sess.report["nodes_after"]
    got, want = sess.run(feeds)["y"], run_ort(model, feeds)["y"]
    assert got.shape == want.shape and got.dtype == want.dtype
    assert relative_error(got, want) < rtol, relative_error(got, want)
    return sess, got


# ---- forms of the pattern ------------------------------------------------------------

@pytest.mark.parametrize("b, h, sq, sk, d", [
    (1, 12, 128, 128, 64),      # BERT-base
    (2, 3, 10, 10, 16),
    (1, 2, 7, 33, 32),          # sq != sk, a ragged key tile
    (2, 1, 70, 9, 64),          # query rows in two blocks
    (1, 2, 1, 65, 16),          # one query (decoding)
])
@pytest.mark.parametrize("mask", ["none", "b11k", "b1qk", "qk"])
def test_split_heads_pattern(b, h, sq, sk, d, mask):
    shape = {"none": None, "b11k": (b, 1, 1, sk), "b1qk": (b, 1, sq, sk), "qk": (sq, sk)}[mask]
    _check(*_attention_model(b, h, sq, sk, d, mask=shape))


@pytest.mark.parametrize("scale_op", ["Mul", "Div", None])
def test_scale_forms(scale_op):
    _check(*_attention_model(scale_op=scale_op, scale=0.3, mask=(2, 1, 1, 10)))


@pytest.mark.parametrize("rank", [3, 4])
@pytest.mark.parametrize("mask", [None, (10, 12)])
def test_without_transposes(rank, mask):
    _check(*_attention_model(sq=10, sk=12, d=32, split_heads=False, rank=rank, mask=mask))


def test_constant_mask():
    _check(*_attention_model(mask=(1, 1, 10, 10), mask_const=True))


@pytest.mark.parametrize("d, dv", [(13, 13), (64, 13), (13, 64), (16, 24), (1, 1)])
def test_odd_head_sizes(d, dv):
    _check(*_attention_model(b=1, h=2, sq=21, sk=75, d=d, dv=dv, mask=(1, 1, 1, 75)))


@pytest.mark.parametrize("s", [384, 200])
def test_long_sequences_stream_several_key_tiles(s):
    _check(*_attention_model(b=1, h=2, sq=s, sk=s, d=64, mask=(1, 1, 1, s)))


def test_opset_11_softmax_on_the_last_axis():
    _check(*_attention_model(mask=(2, 1, 1, 10), opset=11))


def test_batch_dims_broadcast_as_matmul_does():
    nodes = [helper.make_node("MatMul", ["q", "kt"], ["s"]),
             helper.make_node("Softmax", ["s"], ["p"], axis=-1),
             helper.make_node("MatMul", ["p", "v"], ["y"])]
    shapes = {"q": (2, 3, 5, 8), "kt": (1, 3, 8, 7), "v": (2, 1, 7, 16)}
    model = make_model(nodes, [(n, np.float32, s) for n, s in shapes.items()],
                       [("y", np.float32, (2, 3, 5, 16))])
    _check(model, {n: random(s, seed=i) for i, (n, s) in enumerate(shapes.items())})


def test_keys_masked_with_minus_infinity_in_a_whole_tile():
    """A row whose first key tile is all -inf must not turn into NaN."""
    model, feeds = _attention_model(b=1, h=2, sq=3, sk=100, d=16, mask=(1, 1, 3, 100))
    feeds["mask"][..., :70] = -np.inf
    feeds["mask"][..., 0, :] = np.float32(np.finfo(np.float32).min)
    _, got = _check(model, feeds)
    assert np.all(np.isfinite(got))


def test_large_scores_do_not_overflow():
    model, feeds = _attention_model(b=1, h=1, sq=9, sk=130, d=16, scale=8.0)
    _check(model, {k: v * 4 for k, v in feeds.items()})


@pytest.mark.skipif(CC is None, reason="no C compiler")
@pytest.mark.parametrize("d, mask", [(13, (1, 1, 21, 75)), (32, (75,))])
def test_runs_clean_under_sanitizers(tmp_path, d, mask):
    model, _ = _attention_model(b=2, h=2, sq=21, sk=75, d=d, mask=mask)
    sess = aotc.compile(model, opt_level="all", out_dir=tmp_path, name="attention")
    assert sess.report["passes"]["attention"] == 1
    assert run_sanitized(tmp_path, sess.name).split()[0] == "y"


def test_thread_count_does_not_change_the_bits():
    model, feeds = _attention_model(b=2, h=3, sq=150, sk=150, d=64, mask=(2, 1, 1, 150))
    one = aotc.compile(model, opt_level="all", threads=1).run(feeds)["y"]
    two = aotc.compile(model, opt_level="all", threads=2).run(feeds)["y"]
    np.testing.assert_array_equal(one, two)


# ---- the operator on its own ----------------------------------------------------------

def _fused_node_model(inputs, attrs, out_shape=None, initializers=None):
    node = helper.make_node("Attention", [n for n, _ in inputs], ["y"], domain="ai.aotc", **attrs)
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, s) for n, s in inputs
         if n not in (initializers or {})],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, out_shape)],
        [onnx.numpy_helper.from_array(v, n) for n, v in (initializers or {}).items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("ai.aotc", 1)])
    model.ir_version = min(model.ir_version, 10)
    return model


def test_infer_names_shapes_that_do_not_fit():
    perms = {"q_perm": [0, 2, 1, 3], "k_perm": [0, 2, 3, 1], "v_perm": [0, 2, 1, 3]}
    model = _fused_node_model([("q", (1, 8, 2, 16)), ("k", (1, 8, 2, 12)), ("v", (1, 8, 2, 16))],
                              dict(perms, scale=1.0))
    with pytest.raises(InvalidModel, match="head size 16 against 12"):
        aotc.compile(model)
    model = _fused_node_model([("q", (1, 8, 2, 16)), ("k", (1, 8, 2, 16)), ("v", (1, 8, 2, 16))],
                              dict(perms, scale=1.0, out_perm=[0, 1, 2]))
    with pytest.raises(InvalidModel, match="out_perm"):
        aotc.compile(model)
    model = _fused_node_model([("q", (8,)), ("k", (8, 4)), ("v", (4, 8))], {"scale": 1.0})
    with pytest.raises(Unsupported, match="rank 1"):
        aotc.compile(model)


def test_constant_inputs_fold_with_the_numpy_reference():
    q, kt, v = random((2, 5, 8), seed=1), random((2, 8, 6), seed=2), random((2, 6, 8), seed=3)
    model = _fused_node_model([("q", q.shape), ("k", kt.shape), ("v", v.shape)], {"scale": 0.5},
                              (2, 5, 8), {"q": q, "k": kt, "v": v})
    sess = aotc.compile(model)
    assert "Attention" not in sess.report["nodes_after"]
    p = np.exp(q @ kt * 0.5 - (q @ kt * 0.5).max(-1, keepdims=True))
    want = (p / p.sum(-1, keepdims=True)) @ v
    np.testing.assert_allclose(sess.run({})["y"], want, rtol=1e-5, atol=1e-6)


# ---- BERT-base ------------------------------------------------------------------------

def _bert_path():
    folder = os.environ.get("AOTC_MODELS_DIR") or "/tmp/aotc-models"
    return os.path.join(folder, "bert_base.onnx")


def _cut(model, inputs, output):
    """The nodes of model between the named values and output, as a model of its own."""
    producer = {o: n for n in model.graph.node for o in n.output}
    nodes, wanted, seen = [], [output], set(inputs)
    while wanted:
        name = wanted.pop()
        if name in seen or name not in producer:
            continue
        seen.add(name)
        nodes.append(producer[name])
        wanted += list(producer[name].input)
    order = {id(n): i for i, n in enumerate(model.graph.node)}
    nodes.sort(key=lambda n: order[id(n)])
    return make_model(nodes, [(n, np.float32, s) for n, s in inputs.items()],
                      [(output, np.float32, None)], opset=model.opset_import[0].version)


def test_bert_base_first_attention():
    """Layer 0's attention cut out of BERT-base (from Q/K/V after their Reshapes and the
    mask after its Where) with a padding mask of float32 min, as the export makes it."""
    path = _bert_path()
    if not os.path.isfile(path):
        pytest.skip(f"{path} is absent (set AOTC_MODELS_DIR)")
    model = onnx.load(path, load_external_data=False)
    producer = {o: n for n in model.graph.node for o in n.output}
    softmax = next(n for n in model.graph.node if n.op_type == "Softmax")
    add = producer[softmax.input[0]]
    qk = producer[producer[add.input[0]].input[0]]
    pv = next(n for n in model.graph.node if softmax.output[0] in n.input)
    merge = next(n for n in model.graph.node if pv.output[0] in n.input)
    q, k, v = (producer[t].input[0] for t in (qk.input[0], qk.input[1], pv.input[1]))
    mask = np.zeros((1, 1, 1, 128), np.float32)
    mask[..., 100:] = np.finfo(np.float32).min
    shapes = {q: (1, 128, 12, 64), k: (1, 128, 12, 64), v: (1, 128, 12, 64), add.input[1]: mask.shape}
    sub = _cut(model, shapes, merge.output[0])
    feeds = {name: random(shape, seed=i) for i, (name, shape) in enumerate(shapes.items())}
    feeds[add.input[1]] = mask
    sess = aotc.compile(sub, opt_level="all", threads=1)
    assert sess.report["passes"]["attention"] == 1
    assert sess.report["nodes_after"] == {"Attention": 1}
    got, want = sess.run(feeds)[merge.output[0]], run_ort(sub, feeds)[merge.output[0]]
    assert relative_error(got, want) < RTOL


# ---- ai.aotc LayerNormalization -------------------------------------------------------

@pytest.mark.parametrize("opset", [13, 17])
def test_layernorm_pass_output_compiles_for_any_opset(opset):
    nodes = [helper.make_node("ReduceMean", ["x"], ["mean"], axes=[-1]),
             helper.make_node("Sub", ["x", "mean"], ["d"]),
             helper.make_node("Pow", ["d", "two"], ["d2"]),
             helper.make_node("ReduceMean", ["d2"], ["var"], axes=[-1]),
             helper.make_node("Add", ["var", "eps"], ["ve"]),
             helper.make_node("Sqrt", ["ve"], ["sd"]),
             helper.make_node("Div", ["d", "sd"], ["n"]),
             helper.make_node("Mul", ["n", "gamma"], ["g"]),
             helper.make_node("Add", ["g", "beta"], ["y"])]
    inits = {"two": np.array(2.0, np.float32), "eps": np.array(1e-5, np.float32),
             "gamma": random((24,), seed=1), "beta": random((24,), seed=2)}
    model = make_model(nodes, [("x", np.float32, (3, 5, 24))], [("y", np.float32, (3, 5, 24))],
                       inits, opset=opset)
    feeds = {"x": random((3, 5, 24))}
    sess = aotc.compile(model, opt_level="all")
    assert sess.report["passes"]["layernorm"] == 1
    assert sess.report["nodes_after"] == {"LayerNormalization": 1}
    want = run_ort(model, feeds)["y"]
    np.testing.assert_allclose(sess.run(feeds)["y"], want, rtol=1e-5, atol=1e-5)
