import numpy as np
import pytest
from onnx import helper

from oracle import assert_matches_ort, make_model, random

BROADCASTS = [((2, 3, 4), (2, 3, 4)), ((2, 3, 4), (4,)), ((2, 1, 4), (3, 1)), ((1,), (5, 7)),
              ((3, 1, 5, 1), (1, 4, 1, 6)), ((), (2, 2))]


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div"])
@pytest.mark.parametrize("shapes", BROADCASTS)
def test_arithmetic_broadcasts_like_onnxruntime(op, shapes):
    a, b = shapes
    m = make_model([helper.make_node(op, ["a", "b"], ["y"])],
                   [("a", np.float32, a), ("b", np.float32, b)], [("y", np.float32, None)])
    assert_matches_ort(m, {"a": random(a, seed=1), "b": random(b, seed=2, low=0.5, high=2)})


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div"])
def test_int64_arithmetic_is_exact(op):
    m = make_model([helper.make_node(op, ["a", "b"], ["y"])],
                   [("a", np.int64, (3, 4)), ("b", np.int64, (4,))], [("y", np.int64, None)])
    b = np.array([1, -3, 7, 2], np.int64)
    assert_matches_ort(m, {"a": random((3, 4), np.int64, low=-50, high=50), "b": b})


@pytest.mark.parametrize("op", ["Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"])
def test_comparisons_give_bool(op):
    m = make_model([helper.make_node(op, ["a", "b"], ["y"])],
                   [("a", np.float32, (2, 5)), ("b", np.float32, (5,))], [("y", np.bool_, None)])
    a = np.round(random((2, 5), seed=3))
    assert_matches_ort(m, {"a": a, "b": np.round(random((5,), seed=4))})


@pytest.mark.parametrize("op", ["And", "Or"])
def test_logical(op):
    m = make_model([helper.make_node(op, ["a", "b"], ["t"]), helper.make_node("Not", ["t"], ["y"])],
                   [("a", np.bool_, (3, 4)), ("b", np.bool_, (1, 4))], [("y", np.bool_, None)])
    assert_matches_ort(m, {"a": random((3, 4), np.bool_, 5), "b": random((1, 4), np.bool_, 6)})


def test_where_broadcasts_three_operands():
    m = make_model([helper.make_node("Where", ["c", "a", "b"], ["y"])],
                   [("c", np.bool_, (2, 1, 4)), ("a", np.float32, (3, 1)), ("b", np.float32, (4,))],
                   [("y", np.float32, None)])
    assert_matches_ort(m, {"c": random((2, 1, 4), np.bool_), "a": random((3, 1)), "b": random((4,))})


@pytest.mark.parametrize("exponent", [(4,), (2, 4)])
def test_pow(exponent):
    m = make_model([helper.make_node("Pow", ["a", "b"], ["y"])],
                   [("a", np.float32, (2, 4)), ("b", np.float32, exponent)], [("y", np.float32, None)])
    assert_matches_ort(m, {"a": random((2, 4), low=0.1), "b": random(exponent, seed=9)})


UNARY = ["Relu", "Sigmoid", "Tanh", "Exp", "Sqrt", "Erf", "Neg", "Abs", "HardSwish"]


@pytest.mark.parametrize("op", UNARY)
def test_unary_matches_onnxruntime(op):
    m = make_model([helper.make_node(op, ["x"], ["y"])], [("x", np.float32, (3, 17))],
                   [("y", np.float32, None)])
    x = random((3, 17), low=0.01 if op == "Sqrt" else -4, high=4)
    assert_matches_ort(m, {"x": x}, rtol=1e-5, atol=1e-6)


def test_activations_with_attributes():
    nodes = [helper.make_node("LeakyRelu", ["x"], ["a"], alpha=0.2),
             helper.make_node("HardSigmoid", ["a"], ["y"], alpha=0.3, beta=0.4)]
    m = make_model(nodes, [("x", np.float32, (4, 9))], [("y", np.float32, None)])
    assert_matches_ort(m, {"x": random((4, 9), low=-5, high=5)})


@pytest.mark.parametrize("opset", [7, 13])
def test_clip_bounds_as_attributes_and_inputs(opset):
    if opset < 11:
        nodes = [helper.make_node("Clip", ["x"], ["y"], min=-0.5, max=1.5)]
        inits = {}
    else:
        nodes = [helper.make_node("Clip", ["x", "lo", "hi"], ["y"])]
        inits = {"lo": np.array(-0.5, np.float32), "hi": np.array(1.5, np.float32)}
    m = make_model(nodes, [("x", np.float32, (5, 6))], [("y", np.float32, None)], inits, opset=opset)
    assert_matches_ort(m, {"x": random((5, 6))})


def test_clip_with_only_a_runtime_max():
    m = make_model([helper.make_node("Clip", ["x", "", "hi"], ["y"])],
                   [("x", np.float32, (5, 6)), ("hi", np.float32, ())], [("y", np.float32, None)])
    assert_matches_ort(m, {"x": random((5, 6)), "hi": np.array(0.25, np.float32)})
