"""The activations a product's tile epilogue can apply, read off an ONNX node as the
attributes of aotc's fused operators (Linear, FusedConv):

    activation: Relu | Clip | HardSwish | HardSigmoid | Sigmoid | Gelu | Tanh | LeakyRelu
    activation_alpha, activation_beta: HardSigmoid's alpha/beta, LeakyRelu's alpha
    clip_min, clip_max: Clip's bounds (absent: unbounded)
    gelu_approximate: Gelu's approximate ('none' | 'tanh')
"""
from ..ir import AOTC_DOMAIN

SIMPLE = ("Relu", "HardSwish", "Sigmoid", "Tanh")


def activation_attrs(m, node):
    """The fused attributes for activation node `node`, or None when it cannot fuse."""
    if node.op_type in SIMPLE and not node.domain:
        return {"activation": node.op_type}
    if node.op_type == "Gelu" and node.domain in ("", AOTC_DOMAIN):
        return {"activation": "Gelu", "gelu_approximate": node.attr("approximate", "none")}
    if node.domain:
        return None
    if node.op_type == "LeakyRelu":
        return {"activation": "LeakyRelu", "activation_alpha": float(node.attr("alpha", 0.01))}
    if node.op_type == "HardSigmoid":
        return {"activation": "HardSigmoid", "activation_alpha": float(node.attr("alpha", 0.2)),
                "activation_beta": float(node.attr("beta", 0.5))}
    if node.op_type == "Clip":
        attrs = {"activation": "Clip"}
        if m.graph.opset("") < 11:
            bounds = (node.attr("min"), node.attr("max"))
        else:
            bounds = []
            for i in (1, 2):
                name = node.inputs[i] if i < len(node.inputs) else ""
                if name and m.scalar(name) is None:
                    return None           # a run-time bound
                bounds.append(m.scalar(name) if name else None)
        for key, value in zip(("clip_min", "clip_max"), bounds):
            if value is not None:
                attrs[key] = float(value)
        return attrs
    return None
