#!/usr/bin/env python3
"""Write examples/tiny_cnn.onnx: a small image classifier with seeded weights.

    input [1, 3, 32, 32]
    -> Conv 3x3 (8) -> BatchNormalization -> Relu -> MaxPool 2x2
    -> Conv 3x3 (16, bias) -> Relu -> MaxPool 2x2
    -> Conv 3x3 (32, bias) -> Relu -> GlobalAveragePool -> Flatten
    -> Gemm (10) -> Softmax -> probabilities [1, 10]

The weights are random but fixed (seed 0), so the file is the same on every run.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
HERE = os.path.dirname(os.path.abspath(__file__))


def conv_weights(rng, out_channels, in_channels, k=3):
    fan_in = in_channels * k * k
    return (rng.standard_normal((out_channels, in_channels, k, k)) * np.sqrt(2.0 / fan_in)).astype(np.float32)


def build():
    rng = np.random.default_rng(0)
    weights = {
        "conv1.w": conv_weights(rng, 8, 3),
        "bn1.scale": rng.uniform(0.5, 1.5, 8).astype(np.float32),
        "bn1.bias": rng.uniform(-0.2, 0.2, 8).astype(np.float32),
        "bn1.mean": rng.uniform(-0.1, 0.1, 8).astype(np.float32),
        "bn1.var": rng.uniform(0.75, 1.25, 8).astype(np.float32),
        "conv2.w": conv_weights(rng, 16, 8),
        "conv2.b": rng.uniform(-0.1, 0.1, 16).astype(np.float32),
        "conv3.w": conv_weights(rng, 32, 16),
        "conv3.b": rng.uniform(-0.1, 0.1, 32).astype(np.float32),
        "fc.w": (rng.standard_normal((10, 32)) * np.sqrt(1.0 / 32)).astype(np.float32),
        "fc.b": rng.uniform(-0.1, 0.1, 10).astype(np.float32),
    }
    same = {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}
    pool = {"kernel_shape": [2, 2], "strides": [2, 2]}
    nodes = [
        helper.make_node("Conv", ["input", "conv1.w"], ["c1"], name="conv1", **same),
        helper.make_node("BatchNormalization", ["c1", "bn1.scale", "bn1.bias", "bn1.mean", "bn1.var"],
                         ["b1"], name="bn1", epsilon=1e-5),
        helper.make_node("Relu", ["b1"], ["r1"], name="relu1"),
        helper.make_node("MaxPool", ["r1"], ["p1"], name="pool1", **pool),
        helper.make_node("Conv", ["p1", "conv2.w", "conv2.b"], ["c2"], name="conv2", **same),
        helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
        helper.make_node("MaxPool", ["r2"], ["p2"], name="pool2", **pool),
        helper.make_node("Conv", ["p2", "conv3.w", "conv3.b"], ["c3"], name="conv3", **same),
        helper.make_node("Relu", ["c3"], ["r3"], name="relu3"),
        helper.make_node("GlobalAveragePool", ["r3"], ["g"], name="gap"),
        helper.make_node("Flatten", ["g"], ["f"], name="flatten", axis=1),
        helper.make_node("Gemm", ["f", "fc.w", "fc.b"], ["logits"], name="fc", transB=1),
        helper.make_node("Softmax", ["logits"], ["probabilities"], name="softmax", axis=-1),
    ]
    graph = helper.make_graph(
        nodes, "tiny_cnn",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 32, 32])],
        [helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, [1, 10])],
        [numpy_helper.from_array(v, k) for k, v in weights.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="aotc-examples")
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    return model


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "tiny_cnn.onnx")
    model = build()
    onnx.save(model, path)
    print(f"wrote {path} ({os.path.getsize(path)} bytes, {len(model.graph.node)} nodes)")


if __name__ == "__main__":
    main()
