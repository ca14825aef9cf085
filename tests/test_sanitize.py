"""The generated C of every operator family runs clean under ASan and UBSan."""
import numpy as np
import pytest
from onnx import helper

import aotc
from oracle import make_model
from sanitize import CC, run_sanitized

pytestmark = pytest.mark.skipif(CC is None, reason="no C compiler")


def _models():
    f = np.float32
    yield "broadcast", make_model(
        [helper.make_node("Add", ["a", "b"], ["s"]), helper.make_node("Div", ["s", "b"], ["d"]),
         helper.make_node("Greater", ["d", "a"], ["c"]), helper.make_node("Where", ["c", "d", "a"], ["y"])],
        [("a", f, (3, 1, 5)), ("b", f, (4, 1))], [("y", f, None)])
    yield "int_division", make_model(
        [helper.make_node("Div", ["a", "b"], ["y"])],
        [("a", np.int64, (4,)), ("b", np.int64, (4,))], [("y", np.int64, None)])
    yield "unary", make_model(
        [helper.make_node(op, [src], [dst]) for op, src, dst in
         [("Sigmoid", "x", "a"), ("Tanh", "a", "b"), ("Erf", "b", "c"), ("HardSwish", "c", "y")]],
        [("x", f, (2, 9))], [("y", f, None)])


@pytest.mark.parametrize("name, model", list(_models()), ids=lambda v: v if isinstance(v, str) else "")
def test_operator_models_run_clean_under_sanitizers(tmp_path, name, model):
    sess = aotc.compile(model, out_dir=tmp_path, name=name)
    lines = run_sanitized(tmp_path, sess.name).splitlines()
    assert [ln.split()[0] for ln in lines] == [t.name for t in sess.outputs]
