"""aotc: an ahead-of-time compiler from ONNX models to C.

    sess = aotc.compile("model.onnx", shapes={"input": (1, 3, 224, 224)})
    y = sess.run(x)
"""
__version__ = "0.1.0"

from .errors import (AotcError, BuildError, ExactModeUnavailable, InvalidInput,  # noqa: E402
                     InvalidModel, Unsupported, UnsupportedOperator)
from .compiler import compile  # noqa: E402
from .session import Session, TensorSpec  # noqa: E402


def load(out_dir, threads=None):
    """A Session over a compiled output folder."""
    return Session(out_dir, threads)


__all__ = ["compile", "load", "Session", "TensorSpec", "AotcError", "BuildError",
           "ExactModeUnavailable", "InvalidInput", "InvalidModel", "Unsupported",
           "UnsupportedOperator", "__version__"]
