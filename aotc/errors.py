"""The errors aotc raises: one base class, one subclass per kind.

Every error carries a `kind` (the class name) and, where one applies, the ONNX node
name, so a caller can tell what went wrong and where without parsing the message.
"""


class AotcError(Exception):
    kind = "AotcError"

    def __init__(self, message, node=None):
        self.node = node
        if node:
            message = f"node {node!r}: {message}"
        super().__init__(message)


class InvalidModel(AotcError):
    """The model is not valid ONNX, or its values do not fit together."""
    kind = "InvalidModel"


class UnsupportedOperator(AotcError):
    """Operators aotc does not implement; `operators` lists every 'Type (opset N)'."""
    kind = "UnsupportedOperator"

    def __init__(self, operators):
        self.operators = sorted(set(operators))
        super().__init__("unsupported operators: " + ", ".join(self.operators))


class ExactModeUnavailable(AotcError):
    """Operators without an exact kernel in a model compiled with mode='exact'."""
    kind = "ExactModeUnavailable"

    def __init__(self, operators):
        self.operators = sorted(set(operators))
        super().__init__("no exact-mode kernel for: " + ", ".join(self.operators))


class Unsupported(AotcError):
    """A valid model or option that aotc cannot compile (too large, a case not handled)."""
    kind = "Unsupported"


class NotConstant(Unsupported):
    """An operator needs the value of `value` (axes, a shape, pads ...) at compile time
    and the model computes or receives it at run time. A caller that knows the value
    (aotc.backend does) may freeze the input and compile again."""

    def __init__(self, message, node, value):
        self.value = value
        super().__init__(message, node)


class InvalidInput(AotcError):
    """A Session.run argument that does not match the model's inputs."""
    kind = "InvalidInput"


class BuildError(AotcError):
    """The C compiler rejected the generated code (a bug in aotc, never in the model)."""
    kind = "BuildError"
