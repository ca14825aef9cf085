"""Graph passes: one module per pass, run in the order of one table (seed 000).

Each module has NAME and run(graph, ctx) -> times fired; ctx.note(...) records why a
pass refused a candidate (the report's `pass_notes`). The table gives each pass its
minimum optimisation level and whether it preserves bits; in exact mode only the passes
that preserve bits run. No pass sees input shapes (shape work belongs to the plan).
After each pass, nodes nothing reads are removed.
"""
from . import (attention, constant_fold, conv_activation, conv_batchnorm_fold, conv_pad_fold, gelu, layernorm,
               linear_pack_fuse)
from ..errors import AotcError, InvalidModel
from ..ir import AOTC_DOMAIN
from .graph_tools import remove_unused

LEVELS = {"none": 0, "basic": 1, "all": 2}

# (module, minimum level, preserves bits). The int8 passes (qdq, matmul-integer-fusion)
# take the head of this table when they come.
PASSES = [
    (constant_fold, "basic", True),
    # not bit-preserving: a conv kernel may skip padded taps where the copy multiplied
    # zeros (the same values, but -0 sums and 0 * inf weights could differ)
    (conv_pad_fold, "all", False),
    (conv_batchnorm_fold, "all", False),
    (constant_fold, "basic", True),
    (layernorm, "all", False),
    (gelu, "all", False),
    (attention, "all", False),
    (linear_pack_fuse, "all", True),
    (conv_activation, "all", True),
]


class PassContext:
    def __init__(self, mode):
        self.mode = mode
        self.notes = []

    def note(self, pass_name, node, reason):
        self.notes.append(f"{pass_name}: not fused at node {node.name!r}: {reason}")


def run_passes(graph, opt_level, mode):
    """Run the passes the level and mode select, in order.

    Returns ({pass name: times fired}, [refusal notes])."""
    fired = {}
    ctx = PassContext(mode)
    graph.opsets.setdefault(AOTC_DOMAIN, 1)
    for module, level, preserves_bits in PASSES:
        if LEVELS[opt_level] < LEVELS[level] or (mode == "exact" and not preserves_bits):
            continue
        try:
            fired[module.NAME] = fired.get(module.NAME, 0) + module.run(graph, ctx)
        except AotcError:
            raise
        except Exception as e:  # a malformed node the schema check let through
            raise InvalidModel(f"pass {module.NAME} failed on a malformed node: {type(e).__name__}: {e}") from e
        remove_unused(graph)
    return fired, ctx.notes
