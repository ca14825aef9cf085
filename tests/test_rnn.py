"""RNN, GRU and LSTM against onnxruntime (onnx.reference for layout 1, which
onnxruntime lacks): directions, sequence_lens, initial states, biases, peepholes, clip,
linear_before_reset, input_forget, activation lists with alphas; all outputs; two
threads; the C under -Werror and sanitizers."""
import numpy as np
import pytest
from onnx import helper

import aotc
from oracle import check, make_model, random
from sanitize import CC, assert_clean_c

GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
SEQ, BATCH, INPUT, HIDDEN = 5, 3, 4, 6


def _cell(op, tag, direction="forward", layout=0, seq_lens=None, states=True, peepholes=False,
          outputs=("Y", "Y_h", "Y_c"), **attrs):
    """One recurrent node reading graph input X (layout 0) or XT (layout 1); its weights
    as initializers, its outputs named <tag>_<output>. Returns (node, inits, outputs)."""
    dirs = 2 if direction == "bidirectional" else 1
    g = GATES[op]
    inits = {f"{tag}_W": random((dirs, g * HIDDEN, INPUT), seed=1, low=-0.6, high=0.6),
             f"{tag}_R": random((dirs, g * HIDDEN, HIDDEN), seed=2, low=-0.6, high=0.6),
             f"{tag}_B": random((dirs, 2 * g * HIDDEN), seed=3, low=-0.5, high=0.5)}
    names = ["XT" if layout else "X", f"{tag}_W", f"{tag}_R", f"{tag}_B", "", "", ""]
    if seq_lens is not None:
        inits[f"{tag}_L"] = np.array(seq_lens, np.int32)
        names[4] = f"{tag}_L"
    state = (dirs, BATCH, HIDDEN) if layout == 0 else (BATCH, dirs, HIDDEN)
    if states:
        inits[f"{tag}_h0"] = random(state, seed=4, low=-1, high=1)
        names[5] = f"{tag}_h0"
        if op == "LSTM":
            inits[f"{tag}_c0"] = random(state, seed=5, low=-1, high=1)
            names[6] = f"{tag}_c0"
    if peepholes:
        inits[f"{tag}_P"] = random((dirs, 3 * HIDDEN), seed=6, low=-0.5, high=0.5)
        names.append(f"{tag}_P")
    while names[-1] == "":
        names.pop()
    outputs = [f"{tag}_{o}" if o else "" for o in outputs if op == "LSTM" or o != "Y_c"]
    node = helper.make_node(op, names, outputs, hidden_size=HIDDEN, direction=direction,
                            **({"layout": layout} if layout else {}), **attrs)
    return node, inits, [o for o in outputs if o]


def _model(cells):
    """A model of several recurrent nodes over one input sequence, and its feeds."""
    nodes, inits, outputs = [], {}, []
    for node, i, o in cells:
        nodes.append(node)
        inits.update(i)
        outputs += o
    x = random((SEQ, BATCH, INPUT), seed=7)
    inputs = [("X", np.float32, x.shape)]
    feeds = {"X": x}
    if any("XT" in n.input for n in nodes):
        inputs.append(("XT", np.float32, (BATCH, SEQ, INPUT)))
        feeds["XT"] = np.ascontiguousarray(x.transpose(1, 0, 2))
    model = make_model(nodes, inputs, [(o, np.float32, None) for o in outputs], inits, opset=14)
    return model, feeds


def test_cells_directions_and_sequence_lengths():
    cells = [_cell(op, f"{op}{k}", direction, seq_lens=lens, peepholes=op == "LSTM")
             for op in GATES
             for k, (direction, lens) in enumerate([("forward", None), ("reverse", [5, 2, 0]),
                                                    ("bidirectional", [3, 5, 1])])]
    model, feeds = _model(cells)
    check(model, feeds, rtol=1e-5, atol=1e-5, threads=2)


def test_layout_1():
    model, feeds = _model([_cell(op, op, "bidirectional", layout=1) for op in GATES])
    check(model, feeds, rtol=1e-5, atol=1e-5, oracle="onnx.reference")


def test_attributes():
    cells = [_cell("GRU", "gru", "bidirectional", linear_before_reset=1, clip=0.7, states=False),
             _cell("LSTM", "lstm", "bidirectional", outputs=("", "Y_h", "Y_c"),
                   activations=["HardSigmoid", "LeakyRelu", "Softsign", "Sigmoid", "ScaledTanh", "Tanh"],
                   activation_alpha=[0.3, 0.05, 0.9], activation_beta=[0.4, 1.2]),
             _cell("RNN", "rnn", activations=["Relu"], outputs=("Y",)),
             _cell("LSTM", "coupled", input_forget=1, peepholes=True)]
    model, feeds = _model(cells)
    check(model, feeds, rtol=1e-5, atol=1e-5)


@pytest.mark.skipif(CC is None, reason="no C compiler")
def test_runs_clean_under_sanitizers_and_warnings(tmp_path):
    model, _ = _model([_cell("LSTM", "a", "bidirectional", seq_lens=[4, 0, 5], peepholes=True, clip=2.0),
                       _cell("GRU", "b", "reverse")])
    assert_clean_c(tmp_path, model, "lstmsan")


def test_sequence_length_out_of_range_is_an_error_code():
    model = make_model([helper.make_node("RNN", ["X", "W", "R", "", "L"], ["Y"], hidden_size=2)],
                       [("X", np.float32, (3, 2, 1)), ("L", np.int32, (2,))], [("Y", np.float32, None)],
                       {"W": np.ones((1, 2, 1), np.float32), "R": np.ones((1, 2, 2), np.float32)}, opset=14)
    sess = aotc.compile(model)
    sess.run({"X": np.ones((3, 2, 1), np.float32), "L": np.array([3, 1], np.int32)})
    with pytest.raises(Exception, match="3|index|range"):
        sess.run({"X": np.ones((3, 2, 1), np.float32), "L": np.array([4, 1], np.int32)})


@pytest.mark.parametrize("attrs, words", [
    ({"direction": "sideways"}, "direction"),
    ({"activations": ["Tanh", "Tanh"]}, "activations"),
    ({"activations": ["Gelu"]}, "Gelu"),
])
def test_invalid_attributes_are_named(attrs, words):
    model, _ = _model([_cell("RNN", "r", outputs=("Y",), **attrs)])
    with pytest.raises(aotc.errors.AotcError, match=words):
        aotc.compile(model)
