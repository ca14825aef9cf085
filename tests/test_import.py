"""Import: every accepted model form, and a clear aotc error for every broken one."""
import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

import aotc
from oracle import make_model, random


def _relu(shape=(2, 3), dims=None):
    return make_model([helper.make_node("Relu", ["x"], ["y"], name="relu1")],
                      [("x", np.float32, dims or shape)], [("y", np.float32, dims or shape)])


def test_path_bytes_and_proto_give_the_same_results(tmp_path):
    model = _relu()
    path = tmp_path / "relu.onnx"
    onnx.save(model, path)
    x = random((2, 3))
    for form in (str(path), path, model.SerializeToString(), model):
        np.testing.assert_array_equal(aotc.compile(form).run(x), np.maximum(x, 0))


def test_symbolic_dimensions_are_fixed_by_shapes():
    model = _relu(dims=["batch", 5])
    sess = aotc.compile(model, shapes={"x": (3, 5)})
    assert sess.inputs[0].shape == (3, 5)
    assert aotc.compile(model, shapes=(4, 5)).inputs[0].shape == (4, 5)


def test_a_symbolic_dimension_fixes_every_input_that_names_it():
    model = make_model([helper.make_node("Add", ["a", "b"], ["y"])],
                       [("a", np.float32, ["n", 4]), ("b", np.float32, ["n", 4])], [("y", np.float32, None)])
    sess = aotc.compile(model, shapes={"a": (7, 4)})
    assert [t.shape for t in sess.inputs] == [(7, 4), (7, 4)]


@pytest.mark.parametrize("shapes, message", [
    (None, "dimension 'batch' of unknown size"),
    ({"x": (3, 6)}, "does not match the declared"),
    ({"x": (3,)}, "rank 1"),
    ({"nope": (3, 5)}, "not a model input"),
])
def test_bad_shapes_are_named(shapes, message):
    with pytest.raises(aotc.InvalidInput, match=message):
        aotc.compile(_relu(dims=["batch", 5]), shapes=shapes)


def test_truncated_bytes_are_an_invalid_model():
    data = _relu().SerializeToString()
    with pytest.raises(aotc.InvalidModel):
        aotc.compile(data[: len(data) // 2])


def test_a_missing_file_is_an_invalid_model(tmp_path):
    with pytest.raises(aotc.InvalidModel, match="cannot read"):
        aotc.compile(tmp_path / "absent.onnx")


def _graph(nodes, outputs=("y",)):
    return make_model(nodes, [("x", np.float32, (2,))], [(o, np.float32, (2,)) for o in outputs])


def test_an_input_nobody_produces_names_the_node():
    with pytest.raises(aotc.InvalidModel, match=r"node 'n1'.*'ghost'"):
        aotc.compile(_graph([helper.make_node("Add", ["x", "ghost"], ["y"], name="n1")]))


def test_a_value_produced_twice_is_refused():
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="a"), helper.make_node("Neg", ["x"], ["y"], name="b")]
    with pytest.raises(aotc.InvalidModel, match="more than once"):
        aotc.compile(_graph(nodes))


def test_a_cycle_is_refused():
    nodes = [helper.make_node("Add", ["x", "b"], ["a"], name="first"),
             helper.make_node("Relu", ["a"], ["b"], name="second"),
             helper.make_node("Neg", ["a"], ["y"], name="third")]
    with pytest.raises(aotc.InvalidModel, match="cycle"):
        aotc.compile(_graph(nodes))


def test_a_graph_output_nobody_produces_is_refused():
    with pytest.raises(aotc.InvalidModel, match="'z'"):
        aotc.compile(_graph([helper.make_node("Relu", ["x"], ["y"])], outputs=("y", "z")))


def test_every_unsupported_operator_is_listed_at_once():
    nodes = [helper.make_node("Frobnicate", ["x"], ["a"]), helper.make_node("Warp", ["a"], ["b"]),
             helper.make_node("Frobnicate", ["b"], ["y"])]
    with pytest.raises(aotc.UnsupportedOperator) as e:
        aotc.compile(_graph(nodes))
    assert e.value.operators == ["Frobnicate (opset 17)", "Warp (opset 17)"]


def test_mismatched_operand_shapes_name_the_node():
    model = make_model([helper.make_node("Add", ["a", "b"], ["y"], name="adder")],
                       [("a", np.float32, (2, 3)), ("b", np.float32, (4,))], [("y", np.float32, None)])
    with pytest.raises(aotc.InvalidModel, match=r"node 'adder'.*do not broadcast"):
        aotc.compile(model)


def test_initializer_data_that_disagrees_with_its_dims_is_refused():
    model = _graph([helper.make_node("Add", ["x", "w"], ["y"])])
    t = numpy_helper.from_array(np.ones(2, np.float32), "w")
    t.dims[:] = [3]
    model.graph.initializer.append(t)
    with pytest.raises(aotc.InvalidModel, match="'w'"):
        aotc.compile(model)


def test_external_weights_load_from_the_model_folder(tmp_path):
    w = random((64, 64))
    model = make_model([helper.make_node("Add", ["x", "w"], ["y"])], [("x", np.float32, (64, 64))],
                       [("y", np.float32, (64, 64))], {"w": w})
    onnx.save(model, tmp_path / "m.onnx", save_as_external_data=True, location="m.data",
              size_threshold=0)
    x = random((64, 64), seed=5)
    np.testing.assert_array_equal(aotc.compile(tmp_path / "m.onnx").run(x), x + w)


@pytest.mark.parametrize("location", ["../outside.data", "/etc/passwd"])
def test_external_data_outside_the_model_folder_is_refused(tmp_path, location):
    model = make_model([helper.make_node("Add", ["x", "w"], ["y"])], [("x", np.float32, (4,))],
                       [("y", np.float32, (4,))], {"w": np.ones(4, np.float32)})
    t = model.graph.initializer[0]
    t.ClearField("raw_data")
    t.ClearField("float_data")
    t.data_location = onnx.TensorProto.EXTERNAL
    t.external_data.add(key="location", value=location)
    (tmp_path / "inner").mkdir()
    path = tmp_path / "inner" / "m.onnx"
    onnx.save(model, path)
    with pytest.raises(aotc.InvalidModel, match="outside the model's folder"):
        aotc.compile(path)


def test_an_unsupported_opset_is_refused():
    with pytest.raises(aotc.Unsupported, match="opset 29"):
        aotc.compile(make_model([helper.make_node("Relu", ["x"], ["y"])], [("x", np.float32, (2,))],
                                [("y", np.float32, (2,))], opset=29))


def test_an_operator_below_the_opsets_it_implements_is_named():
    # Relu-1 had a consumed_inputs attribute; aotc implements Relu from opset 6
    with pytest.raises(aotc.UnsupportedOperator, match=r"Relu \(opset 5\)"):
        aotc.compile(make_model([helper.make_node("Relu", ["x"], ["y"])], [("x", np.float32, (2,))],
                                [("y", np.float32, (2,))], opset=5))
