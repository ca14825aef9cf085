"""The recurrent operators RNN, GRU and LSTM, float32, every attribute of their ONNX
definitions: directions, layout, sequence_lens, initial states, peepholes, clip,
linear_before_reset, input_forget and the activations list with alphas and betas.

One kernel (runtime_c/aotc_rnn.h) runs all three cells from a description built here.
"""
from collections import namedtuple

import numpy as np

from .base import OpDef, TensorType

F32 = np.dtype(np.float32)
# (C enum, takes alpha, takes beta, default alpha, default beta)
Activation = namedtuple("Activation", "code alpha beta default_alpha default_beta")
ACTIVATIONS = {
    "relu": Activation("AOTC_RNN_ACT_RELU", False, False, 0.0, 0.0),
    "tanh": Activation("AOTC_RNN_ACT_TANH", False, False, 0.0, 0.0),
    "sigmoid": Activation("AOTC_RNN_ACT_SIGMOID", False, False, 0.0, 0.0),
    "affine": Activation("AOTC_RNN_ACT_AFFINE", True, True, 1.0, 0.0),
    "leakyrelu": Activation("AOTC_RNN_ACT_LEAKY_RELU", True, False, 0.01, 0.0),
    "thresholdedrelu": Activation("AOTC_RNN_ACT_THRESHOLDED_RELU", True, False, 1.0, 0.0),
    "scaledtanh": Activation("AOTC_RNN_ACT_SCALED_TANH", True, True, 1.0, 1.0),
    "hardsigmoid": Activation("AOTC_RNN_ACT_HARD_SIGMOID", True, True, 0.2, 0.5),
    "elu": Activation("AOTC_RNN_ACT_ELU", True, False, 1.0, 0.0),
    "softsign": Activation("AOTC_RNN_ACT_SOFTSIGN", False, False, 0.0, 0.0),
    "softplus": Activation("AOTC_RNN_ACT_SOFTPLUS", False, False, 0.0, 0.0),
}
# cell: (C enum, gates, default activations)
Cell = namedtuple("Cell", "code gates activations")
CELLS = {
    "RNN": Cell("AOTC_CELL_RNN", 1, ("Tanh",)),
    "GRU": Cell("AOTC_CELL_GRU", 3, ("Sigmoid", "Tanh")),
    "LSTM": Cell("AOTC_CELL_LSTM", 4, ("Sigmoid", "Tanh", "Tanh")),
}
INPUT_NAMES = ("X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P")


def _text(value):
    return value.decode() if isinstance(value, bytes) else str(value)


def _params(ctx):
    """Shapes and attributes of the node as a dict, every input checked."""
    cell = CELLS[ctx.node.op_type]
    x, w, r = ctx.inputs[:3]
    layout = int(ctx.attr("layout", 0))
    direction = _text(ctx.attr("direction", "forward"))
    if direction not in ("forward", "reverse", "bidirectional"):
        raise ctx.fail(f"direction {direction!r} is not forward, reverse or bidirectional")
    if layout not in (0, 1):
        raise ctx.fail(f"layout {layout} is not 0 or 1")
    dirs = 2 if direction == "bidirectional" else 1
    if x.rank != 3:
        raise ctx.fail(f"X must have rank 3, has shape {list(x.shape)}")
    seq, batch = (x.shape[0], x.shape[1]) if layout == 0 else (x.shape[1], x.shape[0])
    size = x.shape[2]
    hidden = ctx.attr("hidden_size")
    if hidden is None:
        hidden = w.shape[1] // cell.gates if w.rank == 3 else 0
    hidden = int(hidden)
    gh = cell.gates * hidden
    state = (dirs, batch, hidden) if layout == 0 else (batch, dirs, hidden)
    expected = {1: (dirs, gh, size), 2: (dirs, gh, hidden), 3: (dirs, 2 * gh), 4: (batch,),
                5: state, 6: state, 7: (dirs, 3 * hidden)}
    for i, shape in expected.items():
        if ctx.has_input(i) and (i < 6 or ctx.node.op_type == "LSTM"):
            t = ctx.inputs[i]
            if tuple(t.shape) != shape:
                raise ctx.fail(f"{INPUT_NAMES[i]} has shape {list(t.shape)}, expected {list(shape)}")
            want = np.dtype(np.int32) if i == 4 else F32
            if np.dtype(t.dtype) != want:
                raise ctx.fail(f"{INPUT_NAMES[i]} is {t.dtype}, expected {want}")
    if hidden < 1:
        raise ctx.fail(f"hidden_size {hidden} must be at least 1")
    clip = ctx.attr("clip")
    if clip is not None and float(clip) <= 0:
        raise ctx.fail(f"clip {clip} must be positive")
    return {"cell": cell, "layout": layout, "dirs": dirs, "reverse": direction == "reverse",
            "seq": seq, "batch": batch, "input": size, "hidden": hidden, "state": state,
            "clip": float(clip or 0.0), "activations": _activations(ctx, cell, dirs)}


def _activations(ctx, cell, dirs):
    """Per direction and slot (3 slots): (C enum, alpha, beta)."""
    names = ctx.attr("activations")
    names = [_text(n) for n in names] if names is not None else list(cell.activations) * dirs
    count = len(cell.activations)
    if len(names) != count * dirs:
        raise ctx.fail(f"{len(names)} activations given; {ctx.node.op_type} with {dirs} "
                       f"direction(s) needs {count * dirs}")
    alphas = [float(a) for a in ctx.attr("activation_alpha", None) or []]
    betas = [float(b) for b in ctx.attr("activation_beta", None) or []]
    out = []
    for name in names:
        act = ACTIVATIONS.get(name.lower())
        if act is None:
            raise ctx.unsupported(f"activation {name!r} (supported: {', '.join(sorted(ACTIVATIONS))})")
        alpha = alphas.pop(0) if act.alpha and alphas else act.default_alpha
        beta = betas.pop(0) if act.beta and betas else act.default_beta
        out.append((act.code, alpha, beta))
    slots = []
    for d in range(dirs):
        mine = out[d * count:(d + 1) * count]
        slots.extend(mine + [mine[-1]] * (3 - count))
    return slots


def _infer(ctx):
    ctx.require_inputs(3, 8 if ctx.node.op_type == "LSTM" else 6)
    ctx.require_dtype(0, (F32,))
    p = _params(ctx)
    layout, dirs, seq, batch, hidden = p["layout"], p["dirs"], p["seq"], p["batch"], p["hidden"]
    if ctx.node.op_type == "GRU" and int(ctx.attr("linear_before_reset", 0)) not in (0, 1):
        raise ctx.fail("linear_before_reset must be 0 or 1")
    y = (seq, dirs, batch, hidden) if layout == 0 else (batch, seq, dirs, hidden)
    outputs = [TensorType(F32, y), TensorType(F32, p["state"])]
    if ctx.node.op_type == "LSTM":
        outputs.append(TensorType(F32, p["state"]))
    return outputs


def _scratch(ctx):
    p = _params(ctx)
    return 4 * (2 * p["cell"].gates + 3) * p["hidden"]


def _float(v):
    return f"{float(np.float32(v))!r}f"


def _emit(ctx):
    p = _params(ctx)
    acts = p["activations"] + [p["activations"][-1]] * (6 - len(p["activations"]))
    desc = (f"&(const aotc_rnn_desc){{.cell = {p['cell'].code}, .seq = {p['seq']}, "
            f".batch = {p['batch']}, .input = {p['input']}, .hidden = {p['hidden']}, "
            f".dirs = {p['dirs']}, .reverse = {int(p['reverse'])}, .layout = {p['layout']}, "
            f".linear_before_reset = {int(ctx.attr('linear_before_reset', 0))}, "
            f".input_forget = {int(ctx.attr('input_forget', 0))}, .clip = {_float(p['clip'])}, "
            f".act = {{{', '.join(a[0] for a in acts)}}}, "
            f".alpha = {{{', '.join(_float(a[1]) for a in acts)}}}, "
            f".beta = {{{', '.join(_float(a[2]) for a in acts)}}}}}")

    def x(i):
        return ctx.x(i) if ctx.has_input(i) else "NULL"

    def y(i):
        return ctx.y(i) if i < len(ctx.node.outputs) and ctx.node.outputs[i] else "NULL"
    lstm = ctx.node.op_type == "LSTM"
    args = [desc, x(0), x(1), x(2), x(3), x(4), x(5), x(6) if lstm else "NULL",
            x(7) if lstm else "NULL", y(0), y(1), y(2) if lstm else "NULL",
            f"(float *)(void *){ctx.scratch}"]
    return f"if (aotc_rnn({', '.join(args)}) != AOTC_OK) return AOTC_ERR_INDEX;"


OPS = [OpDef(name, _infer, _emit, scratch=_scratch, since=7, checked_through=28) for name in CELLS]
