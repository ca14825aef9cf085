"""Graph passes: one module per pass, run in the order of one table (seed 000).

Each module has NAME and run(graph, mode) -> times fired. The table gives each pass its
minimum optimisation level and whether it preserves bits; in exact mode only the passes
that preserve bits run. No pass sees input shapes (shape work belongs to the plan).
After each pass, nodes nothing reads are removed.
"""
from . import constant_fold
from .graph_tools import remove_unused

LEVELS = {"none": 0, "basic": 1, "all": 2}

# (module, minimum level, preserves bits). The int8 passes (qdq, matmul-integer-fusion)
# take the head of this table when they come.
PASSES = [
    (constant_fold, "basic", True),
]


def run_passes(graph, opt_level, mode):
    """Run the passes the level and mode select, in order; returns {pass name: times fired}."""
    fired = {}
    for module, level, preserves_bits in PASSES:
        if LEVELS[opt_level] < LEVELS[level] or (mode == "exact" and not preserves_bits):
            continue
        fired[module.NAME] = fired.get(module.NAME, 0) + module.run(graph, mode)
        remove_unused(graph)
    return fired
