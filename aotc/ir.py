"""The graph aotc works on: plain nodes and named values, no ONNX protobufs.

A Graph is what import produces and what passes rewrite; it knows names, element
types and constants, never the concrete shapes of a run (those belong to the plan).
"""
from dataclasses import dataclass, field
from typing import Any

import numpy as np

AOTC_DOMAIN = "ai.aotc"   # aotc's own operators: what the passes fuse into


@dataclass
class Node:
    op_type: str
    name: str
    inputs: list          # value names; '' marks an omitted optional input
    outputs: list         # value names; '' marks an unused optional output
    attrs: dict = field(default_factory=dict)
    domain: str = ""

    def attr(self, key, default=None):
        return self.attrs.get(key, default)

    def describe(self):
        return f"{self.name or '<unnamed>'} ({self.op_type})"


@dataclass
class ValueInfo:
    """A graph input or output: its element type and declared dims (ints, names or None)."""
    name: str
    dtype: np.dtype
    dims: Any = None      # tuple of int | str | None, or None when the rank is unknown


@dataclass
class Graph:
    name: str
    nodes: list
    inputs: list          # ValueInfo of the inputs a caller provides
    outputs: list         # ValueInfo of the graph outputs
    initializers: dict    # name -> numpy array
    opsets: dict          # domain ('' for ai.onnx) -> version

    def opset(self, domain=""):
        return self.opsets.get(domain, 0)

    def producers(self):
        """value name -> node that makes it"""
        return {out: n for n in self.nodes for out in n.outputs if out}
