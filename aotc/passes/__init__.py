"""Graph passes: one module per pass, run in the order of one table.

Each entry: (name, minimum opt level, preserves bits, run(graph) -> times fired).
In exact mode only the passes that preserve bits run. No pass sees input shapes.
"""
LEVELS = {"none": 0, "basic": 1, "all": 2}

# (name, minimum level, preserves bits, function)
PASSES = []


def run_passes(graph, opt_level, mode):
    """Run the passes the level and mode select; returns {pass name: times fired}."""
    fired = {}
    for name, level, preserves_bits, fn in PASSES:
        if LEVELS[opt_level] < LEVELS[level] or (mode == "exact" and not preserves_bits):
            continue
        fired[name] = fired.get(name, 0) + fn(graph)
    return fired
